"""One function per kernel: a spec built from friendlier arguments, then
``call``; and the argument checks the conveniences share."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, Final, TypeVar

from .. import dtype as D
from .. import spec as S
from ..answer import InvalidArgument, describe
from ..array import Array
from ..caller import call
from ..dtype import Dtype
from ..prog import Prog
from .arguments import axis_values, side_of


def map(prog: Prog, *operands: Array, loads: Sequence[S.Load] | None = None) -> tuple[Array, ...]:
    """``prog`` at every index of its operands' (loaded) shape; one array per output."""
    sp = S.Map(prog, tuple(loads) if loads is not None else (S.PLAIN,) * len(operands))
    return call(sp, *operands)


def reduce(prog: Prog, *operands: Array, axes: Sequence[int],
           reductions: Sequence[tuple[S.Reduction, int, Dtype]],
           loads: Sequence[S.Load] | None = None) -> tuple[Array, ...]:
    """The reductions of ``prog``'s outputs along ``axes``, results in order."""
    sp = S.Reduce(prog, tuple(loads) if loads is not None else (S.PLAIN,) * len(operands),
                  tuple(axes), tuple(reductions))
    return call(sp, *operands)


def scan(prog: Prog, *operands: Array, axis: int, reduction: S.Reduction, output: int = 0,
         dtype: D.DtypeLike | None = None, reverse: bool = False, carry: Array | None = None,
         loads: Sequence[S.Load] | None = None) -> tuple[Array, ...]:
    """The inclusive scan by ``reduction`` of output ``output`` along ``axis``,
    continuing from ``carry`` where given."""
    sp = S.Scan(prog, tuple(loads) if loads is not None else (S.PLAIN,) * len(operands), axis,
                reduction, output, prog.out_dtypes[output] if dtype is None else D.resolve(dtype, "nx.scan"),
                reverse, carry is not None)
    return call(sp, *([carry] if carry is not None else []), *operands)


def fold(x: Array, shape: Sequence[int], pad: S.Pad) -> Array:
    """The adjoint of a Padded load by ``pad`` of an operand of ``shape``."""
    return call(S.Fold(tuple(shape), pad), x)[0]


_Spec = TypeVar("_Spec")


def _made_once(cls: Callable[..., _Spec]) -> Callable[..., _Spec]:
    """``cls``'s constructor, its specs made once per attributes (``typed``: 1
    and True are not one axis), so that a warm call finds its plan by the
    spec's identity (``caller``'s identity key) and makes no spec; an
    unhashable attribute is made afresh, for the spec's own check to refuse."""
    made = functools.lru_cache(maxsize=64, typed=True)(cls)

    def spec(*args: Any) -> _Spec:
        try:
            return made(*args)
        except TypeError:
            return cls(*args)

    return spec


_gather_spec: Final = _made_once(S.Gather)
_range_gather_spec: Final = _made_once(S.RangeGather)
_scatter_spec: Final = _made_once(S.Scatter)


def gather(x: Array, index: Array, axis: int) -> Array:
    """x's elements at the positions ``index`` holds along ``axis`` (index has x's
    rank, x's extents but along axis); outside [0, d) reads zero bits."""
    axis_values("nx.gather", axis)
    if isinstance(index, Array) and not index.dtype.is_int:
        raise InvalidArgument(f"nx.gather: indices must be integers, not {describe([index])}")
    return call(_gather_spec(axis), index, x)[0]


def range_gather(x: Array, starts: Array, axis: int, run: int) -> Array:
    """Runs of ``run`` elements of x along ``axis`` from each of ``starts``."""
    return call(_range_gather_spec(axis, run), starts, x)[0]


def scatter(into: Array, index: Array, updates: Array, axis: int, combine: str = "set",
            unique: bool = False) -> Array:
    """``into`` with ``updates`` combined (set, add, max, min) at ``index`` along
    ``axis``, in C order of the updates; out-of-range updates dropped."""
    try:
        how = S.Combine[combine.upper()]
    except KeyError:
        raise InvalidArgument(f"nx.scatter: combine {combine!r} is not set, add, max or min") from None
    return call(_scatter_spec(axis, how, unique), into, index, updates)[0]


def numbering(keys: Array, x: Array, side: str = "left") -> Array:
    """Per batch row, the number of keys below (left) or not above (right) each
    element of x, in sort's total order."""
    return call(S.Numbering(side_of(side)), keys, x)[0]


def assemble(pieces: Sequence[Array], shape: Sequence[int], regions: Sequence[Sequence[Any]],
             fill: object = 0, dtype: D.DtypeLike | None = None) -> Array:
    """An array of ``shape``: each piece pasted into its region (a Range per
    axis), the last piece winning, ``fill`` elsewhere."""
    from ..prog import bits

    dt = D.resolve(dtype, "nx.assemble") if dtype is not None else (pieces[0].dtype if pieces else None)
    if dt is None:
        raise InvalidArgument("nx.assemble: give dtype= when there is no piece")
    fill_bits = fill if isinstance(fill, bytes) else bits(dt, fill)  # type: ignore[arg-type]
    sp = S.Assemble(tuple(shape), fill_bits, tuple(tuple(r) for r in regions))
    return call(sp, *pieces, dtypes=(dt,), device=pieces[0].device if pieces else None)[0]

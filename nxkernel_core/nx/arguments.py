"""The argument checks the nx conveniences share: operands as arrays,
broadcasting, axes and sides, each error naming the function."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .. import spec as S
from ..answer import InvalidArgument, describe
from ..array import Array, asarray
from ..caller import call
from ..layout import Broadcast, Reshape
from ..prog import Prog


def as_arrays(fn: str, xs: Sequence[object], like: Array | None = None) -> list[Array]:
    """Operands as Arrays: Arrays as they are, anything else converted on the
    first Array's device, Python scalars to its dtype."""
    anchor = like if like is not None else next((x for x in xs if isinstance(x, Array)), None)
    out = []
    for x in xs:
        if isinstance(x, Array):
            out.append(x)
        elif anchor is not None and isinstance(x, (int, float, bool, complex)):
            out.append(asarray(x, anchor.dtype, anchor.device))
        elif anchor is not None:
            out.append(asarray(x, device=anchor.device))
        else:
            out.append(asarray(x))
    return out


def broadcast_arrays(fn: str, xs: Sequence[Array]) -> list[Array]:
    """Operands broadcast to their common shape, as NumPy's rules give it."""
    first = xs[0].layout.shape if xs else ()
    for x in xs:
        if x.layout.shape != first:
            break
    else:
        return list(xs)  # one shape already: nothing to broadcast
    try:
        common = np.broadcast_shapes(*(x.shape for x in xs))
    except ValueError:
        raise InvalidArgument(f"{fn}: shapes do not broadcast ({describe(xs)})") from None
    return [x if x.shape == common else x.view(Broadcast(tuple(common))) for x in xs]


def axis_values(fn: str, axis: object) -> tuple[int, ...]:
    """``axis`` (an integer, or a tuple or list of them) as ints; an
    ``InvalidArgument`` naming ``fn`` for anything else, bools included (NumPy
    refuses them too, rather than read True as 1)."""
    items = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    for a in items:
        if isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, np.integer)):
            what = f"{type(a).__name__} {a!r}"
            raise InvalidArgument(f"{fn}: axis must be an integer or a tuple of integers, not {what}")
    return tuple(int(a) for a in items)


def reduced_axes(fn: str, x: Array, axis: int | Sequence[int] | None) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(x.rank))
    raw = axis_values(fn, axis)
    out = []
    for a in raw:
        if not -x.rank <= a < x.rank:
            raise InvalidArgument(f"{fn}: axis {a} is out of range for {describe([x])}")
        out.append(int(a) % x.rank)
    if len(set(out)) != len(out):
        raise InvalidArgument(f"{fn}: repeated axis in {raw}")
    return tuple(sorted(out))


def flattened(fn: str, a: Array) -> Array:
    """``a`` as one axis: a view where strides allow, else a copy."""
    if a.rank == 1:
        return a
    lay = a.layout.move(Reshape((a.numel,)))
    if lay is not None:
        return Array(a.dtype, lay, a.buffer)
    return call(S.Map(Prog.identity(a.dtype), (S.PLAIN,)), a, name=fn)[0].reshape([a.numel])


def side_of(side: str) -> S.Side:
    try:
        return S.Side[side.upper()]
    except KeyError:
        raise InvalidArgument(f"nx.searchsorted: side {side!r} is not 'left' or 'right'") from None

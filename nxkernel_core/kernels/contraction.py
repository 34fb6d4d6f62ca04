"""Contract (``S.contract``): ``init + Σ a·b`` over paired axes, defined once."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Final, final

from .. import dtype as D
from ..answer import Answer
from ..dtype import Dtype
from .attributes import _bool, _fail, _int, _int_field, _of, _set, _tuples
from .record import (
    Error,
    Kernel,
    Shape,
    Shapes,
    _answers,
    _axis,
    _fits,
    _Misfit,
    _operands,
    _results,
    no_refusal,
)

if TYPE_CHECKING:
    from ..array import Array

__all__ = ["CONTRACT", "Contract", "ContractingSegments", "Rows", "ScaleKind", "contract",
           "contract_misfit", "contract_refusal"]

class ScaleKind(enum.Enum):
    """A block scale's kind: EXPONENT, uint8 codes ``e`` scaling by
    ``2^(e − 127)`` (255 is NaN); VALUE, each scale in its own dtype."""

    EXPONENT = "exponent"
    VALUE = "value"


@final
@dataclass(frozen=True, slots=True)
class Rows:
    """Segments on rows: a's free axis ``a_axis`` is segmented, and b's free axis
    ``b_axis``, of extent g (the groups), leaves the result; row r multiplies
    b's index ``ids[r]`` along ``b_axis``."""

    a_axis: int
    b_axis: int

    def __post_init__(self) -> None:
        _int_field(self, "a_axis")
        _int_field(self, "b_axis")


@final
@dataclass(frozen=True, slots=True)
class ContractingSegments:
    """Segments on a contracting pair: pair ``pair`` is cut on both sides into
    ``groups`` groups; the result gains a leading axis of ``groups``."""

    pair: int
    groups: int

    def __post_init__(self) -> None:
        _int_field(self, "pair")
        _int_field(self, "groups")


def _pairs(owner: object, what: str, values: object) -> tuple[tuple[int, int], ...]:
    pairs = _tuples(owner, what, values)
    for p in pairs:
        if len(p) != 2:
            raise _fail(owner, f"{what} pair {p} is not (a's axis, b's axis)")
    return tuple((_int(owner, what, a), _int(owner, what, b)) for a, b in pairs)


@final
@dataclass(frozen=True, slots=True)
class Contract:
    """``S.contract``: ``init + Σ a·b`` computed in ``acc`` (a dtype that
    ``accumulates``) over the ``contracting`` pairs, keeping the ``batch``
    pairs; the result's axes are the batch pairs in order, then a's free axes,
    then b's (``segments`` changes them: see ``shape.contract``). Each pair is
    (a's axis, b's axis); no axis of an operand is in two pairs.

    Operands, in order: a, b, init where ``init``, a's scale where
    ``scales[0]``, b's scale where ``scales[1]``, ids (int64) where
    ``segments``. Destinations: dst."""

    kernel: ClassVar[str] = "contract"
    batch: tuple[tuple[int, int], ...]
    contracting: tuple[tuple[int, int], ...]
    acc: Dtype
    init: bool = False
    scales: tuple[ScaleKind | None, ScaleKind | None] = (None, None)
    segments: Rows | ContractingSegments | None = None

    def __post_init__(self) -> None:
        batch = _pairs(self, "batch", self.batch)
        contracting = _pairs(self, "contracting", self.contracting)
        _set(self, "batch", batch)
        _set(self, "contracting", contracting)
        for side, name in ((0, "a"), (1, "b")):
            axes = [p[side] for p in batch + contracting]
            if len(set(axes)) != len(axes):
                raise _fail(self, f"{name}'s axes {axes} repeat among the pairs")
        _of(self, "acc", self.acc, Dtype)
        if not D.accumulates(self.acc):
            raise _fail(self, f"acc {self.acc.name} does not accumulate (booleans and "
                              "floats narrower than float32 do not)")
        _bool(self, "init", self.init)
        scales = tuple(self.scales)
        if len(scales) != 2:
            raise _fail(self, f"scales {scales} are not (a's, b's)")
        for s in scales:
            if s is not None:
                _of(self, "a scale", s, ScaleKind)
        _set(self, "scales", scales)
        seg = self.segments
        if isinstance(seg, Rows):
            if seg.a_axis in (p[0] for p in batch + contracting):
                raise _fail(self, f"Rows' a_axis {seg.a_axis} is not a free axis of a")
            if seg.b_axis in (p[1] for p in batch + contracting):
                raise _fail(self, f"Rows' b_axis {seg.b_axis} is not a free axis of b")
        elif isinstance(seg, ContractingSegments):
            if seg.pair >= len(contracting):
                raise _fail(self, f"segments' pair {seg.pair} is past the "
                                  f"{len(contracting)} contracting pairs")
        elif seg is not None:
            raise _fail(self, f"segments must be Rows, ContractingSegments or None, got {seg!r}")

    def n_operands(self) -> int:
        return (2 + self.init + sum(s is not None for s in self.scales)
                + (self.segments is not None))

    def n_results(self) -> int:
        return 1


# --------------------------------------------------------------------------
# Rules
# --------------------------------------------------------------------------


def _scale(name: str, scale: Shape, operand: Shape) -> None:
    """A block scale: the operand's rank, each extent dividing the operand's,
    0 only along an empty axis."""
    if len(scale) != len(operand) or any(
        (s == 0 and d != 0) or (s != 0 and d % s != 0)
        for s, d in zip(scale, operand, strict=True)
    ):
        raise _Misfit(f"{name} {list(scale)} must have the operand's rank and extents "
                      f"dividing {list(operand)}")


@_answers
def contract(spec: Contract, shapes: Sequence[Sequence[int]]) -> Shapes:
    """Contract's destination: the batch pairs' extents in order, then a's free
    axes, then b's. With ``Rows(a_axis, b_axis)``, b's free axis ``b_axis``
    leaves the result; with ``ContractingSegments(pair, groups)``, a leading
    axis of ``groups`` comes first.

    Operands: a, b, [init], [a's scale], [b's scale], [ids]. Each pair names an
    axis of each operand, of one extent; init has the result's shape; a scale
    has its operand's rank, each extent dividing the operand's (0 only along an
    empty axis); ids is the batch extents then the segmented axis's (Rows: a's
    ``a_axis``; Contracting: the pair's)."""
    names = ["a", "b"] + ["init"] * spec.init
    names += [f"{n}'s scale" for n, s in zip("ab", spec.scales, strict=True) if s is not None]
    names += ["ids"] * (spec.segments is not None)
    ops = _operands(names, shapes)
    a, b = ops[0], ops[1]
    for kind, pairs in (("batch", spec.batch), ("contracting", spec.contracting)):
        for i, j in pairs:
            if not (i < len(a) and j < len(b) and a[i] == b[j]):
                raise _Misfit(f"{kind} pair ({i}, {j}) must name axes of a {list(a)} and "
                              f"b {list(b)} of one extent")
    paired_a = {i for i, _ in spec.batch + spec.contracting}
    paired_b = {j for _, j in spec.batch + spec.contracting}
    batch = tuple(a[i] for i, _ in spec.batch)
    a_free = tuple(d for i, d in enumerate(a) if i not in paired_a)
    b_free = [j for j in range(len(b)) if j not in paired_b]
    seg = spec.segments
    if isinstance(seg, Rows):
        _axis("Rows' a_axis", seg.a_axis, len(a))
        _axis("Rows' b_axis", seg.b_axis, len(b))
        out = (*batch, *a_free, *(b[j] for j in b_free if j != seg.b_axis))
        ids = (*batch, a[seg.a_axis])
    elif isinstance(seg, ContractingSegments):
        out = (seg.groups, *batch, *a_free, *(b[j] for j in b_free))
        ids = (*batch, a[spec.contracting[seg.pair][0]])
    else:
        out = (*batch, *a_free, *(b[j] for j in b_free))
    out = _fits("the result", out)
    rest = iter(ops[2:])
    if spec.init:
        init = next(rest)
        if init != out:
            raise _Misfit(f"init {list(init)} must be the result's {list(out)}")
    for side, operand, scale in (("a", a, spec.scales[0]), ("b", b, spec.scales[1])):
        if scale is not None:
            _scale(f"{side}'s scale", next(rest), operand)
    if seg is not None:
        got = next(rest)
        if got != ids:
            raise _Misfit(f"ids {list(got)} must be {list(ids)}")
    return _results(out)


def contract_refusal(spec: Contract, dsts: Sequence[Sequence[int]],
                     shapes: Sequence[Sequence[int]], dtypes: Sequence[Dtype]) -> Answer | None:
    """The refusal of a ``contract`` call whose destinations have shapes
    ``dsts`` and whose operands have ``shapes`` and ``dtypes``, in this order:

    - BAD_ARITY: not one destination, or not the spec's operand count;
    - SHAPE_MISMATCH: operand shapes ``contract`` answers an Error for, or a
      destination not of the result's shape;
    - WRONG_DTYPE: an Exponent scale that is not uint8, segment ids not int64.
    """
    if len(dsts) != 1 or len(shapes) != spec.n_operands():
        return Answer.BAD_ARITY
    result = contract(spec, shapes)
    if isinstance(result, Error) or result[0] != tuple(dsts[0]):
        return Answer.SHAPE_MISMATCH
    rest = list(dtypes[2 + spec.init:])
    for kind in spec.scales:
        if kind is None:
            continue
        if kind is ScaleKind.EXPONENT and rest[0] is not D.uint8:
            return Answer.WRONG_DTYPE
        rest.pop(0)
    if spec.segments is not None and rest[0] is not D.int64:
        return Answer.WRONG_DTYPE
    return None


# --------------------------------------------------------------------------
# The record
# --------------------------------------------------------------------------


def _contract_dtypes(spec: Contract, loads: Sequence[Dtype]) -> None:
    """dst's dtype is the caller's to state: any dtype the accumulator rounds into."""
    return None


def contract_misfit(spec: Contract, dsts: Sequence[Array], operands: Sequence[Array]
                    ) -> Answer | None:
    """The refusal of a contract call that does not fit: ``contract_refusal``
    (counts, shapes, then the scales' and ids' dtypes; the destination's dtype
    is the caller's choice)."""
    return contract_refusal(spec, [d.shape for d in dsts], [o.shape for o in operands],
                            [o.dtype for o in operands])


#: ``S.contract``.
CONTRACT: Final = Kernel("contract", Contract, contract, _contract_dtypes, no_refusal,
                         contract_misfit)

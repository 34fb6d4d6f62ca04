"""Gather, range gather, scatter, sort, numbering and assemble (``S.gather``
and its kin): kernels that move elements and copy their bits, defined once."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Final, final

from .. import dtype as D
from ..answer import Answer
from ..layout import Range
from .attributes import _bool, _fail, _fill, _int_field, _of, _set, _shape, _tuples, fill_fits
from .record import (
    Kernel,
    Shapes,
    _answers,
    _axis,
    _Misfit,
    _operands,
    _results,
    _same_but,
    _set_at,
    no_refusal,
    rule_fit,
)

if TYPE_CHECKING:
    from ..array import Array

__all__ = [
    "ASSEMBLE",
    "GATHER",
    "NUMBERING",
    "RANGE_GATHER",
    "SCATTER",
    "SORT",
    "Assemble",
    "Combine",
    "Gather",
    "Numbering",
    "RangeGather",
    "Scatter",
    "Side",
    "Sort",
    "assemble",
    "gather",
    "move_misfit",
    "numbering",
    "range_gather",
    "scatter",
    "sort",
]

@final
@dataclass(frozen=True, slots=True)
class Gather:
    """``S.gather``: dst's element is x's at the position index holds along
    ``axis``; outside [0, d) reads zero bits. Operands: index (int64), x.
    Destinations: dst."""

    kernel: ClassVar[str] = "gather"
    axis: int

    def __post_init__(self) -> None:
        _int_field(self, "axis")

    def n_operands(self) -> int:
        return 2

    def n_results(self) -> int:
        return 1


@final
@dataclass(frozen=True, slots=True)
class RangeGather:
    """``S.range_gather``: runs of ``run`` elements of x along ``axis`` from the
    positions starts (int64) holds; outside [0, d) reads zero bits. Operands:
    starts, x. Destinations: dst."""

    kernel: ClassVar[str] = "range_gather"
    axis: int
    run: int

    def __post_init__(self) -> None:
        _int_field(self, "axis")
        _int_field(self, "run")

    def n_operands(self) -> int:
        return 2

    def n_results(self) -> int:
        return 1


class Combine(enum.Enum):
    """How a scatter combines updates with ``into``'s element."""

    SET = "set"
    ADD = "add"
    MAX = "max"
    MIN = "min"


@final
@dataclass(frozen=True, slots=True)
class Scatter:
    """``S.scatter``: dst is into with each update combined, in C order, at the
    position index holds along ``axis``; an update outside [0, d) is dropped.
    ``unique`` promises no position repeats. Operands: into, index (int64),
    updates. Destinations: dst."""

    kernel: ClassVar[str] = "scatter"
    axis: int
    combine: Combine
    unique: bool = False

    def __post_init__(self) -> None:
        _int_field(self, "axis")
        _of(self, "combine", self.combine, Combine)
        _bool(self, "unique", self.unique)

    def n_operands(self) -> int:
        return 3

    def n_results(self) -> int:
        return 1


@final
@dataclass(frozen=True, slots=True)
class Sort:
    """``S.sort``: a stable sort along ``axis`` in the total order (NaNs last),
    reversed but stable where ``descending``, keeping the first ``k`` (all where
    None). Operands: x. Destinations: values, positions (int64)."""

    kernel: ClassVar[str] = "sort"
    axis: int
    descending: bool = False
    k: int | None = None

    def __post_init__(self) -> None:
        _int_field(self, "axis")
        _bool(self, "descending", self.descending)
        if self.k is not None:
            _int_field(self, "k")

    def n_operands(self) -> int:
        return 1

    def n_results(self) -> int:
        return 2


class Side(enum.Enum):
    """Whether a numbering counts the keys below (LEFT) or not above (RIGHT)."""

    LEFT = "left"
    RIGHT = "right"


@final
@dataclass(frozen=True, slots=True)
class Numbering:
    """``S.numbering``: for each element of x, the number of keys of its batch
    row below it (LEFT) or not above it (RIGHT), in sort's total order.
    Operands: keys ``[b…; m]``, x ``[b…; n]``. Destinations: dst (int64)."""

    kernel: ClassVar[str] = "numbering"
    side: Side = Side.LEFT

    def __post_init__(self) -> None:
        _of(self, "side", self.side, Side)

    def n_operands(self) -> int:
        return 2

    def n_results(self) -> int:
        return 1


@final
@dataclass(frozen=True, slots=True)
class Assemble:
    """``S.assemble``: dst of ``shape`` is ``fill`` (one element's bits) except
    where a region holds the index, where the last such piece's element is
    copied. Each region is one ``Range`` per axis of ``shape``, inside it.
    Operands: one piece per region, of the region's counts. Destinations: dst."""

    kernel: ClassVar[str] = "assemble"
    shape: tuple[int, ...]
    fill: bytes
    regions: tuple[tuple[Range, ...], ...]

    def __post_init__(self) -> None:
        shape = _shape(self, self.shape)
        _set(self, "shape", shape)
        _set(self, "fill", _fill(self, self.fill))
        regions = _tuples(self, "regions", self.regions)
        for n, region in enumerate(regions):
            if len(region) != len(shape):
                raise _fail(self, f"region {n} has {len(region)} ranges for rank {len(shape)}")
            for ax, (r, d) in enumerate(zip(region, shape, strict=True)):
                if not isinstance(r, Range):
                    raise _fail(self, f"region {n}'s {r!r} along axis {ax} is not a Range")
                if r.step == 0 or r.count < 0:
                    raise _fail(self, f"region {n}'s {r} along axis {ax} needs step != 0 "
                                      "and count >= 0")
                last = r.start + (r.count - 1) * r.step
                if r.count > 0 and not (0 <= r.start < d and 0 <= last < d):
                    raise _fail(self, f"region {n}'s {r} along axis {ax} leaves [0, {d})")
        _set(self, "regions", regions)

    def n_operands(self) -> int:
        return len(self.regions)

    def n_results(self) -> int:
        return 1


# --------------------------------------------------------------------------
# Shapes
# --------------------------------------------------------------------------


@_answers
def gather(spec: Gather, shapes: Sequence[Sequence[int]]) -> Shapes:
    """Gather's destination: index's shape. Operands: index, x; index has x's
    rank and extents but along ``axis``, an axis of both."""
    index, x = _operands(["index", "x"], shapes)
    _axis("axis", spec.axis, len(x))
    _same_but("axis", "index", index, "x", x, spec.axis)
    return _results(index)


@_answers
def range_gather(spec: RangeGather, shapes: Sequence[Sequence[int]]) -> Shapes:
    """Range gather's destination: starts' shape with an axis of ``run``
    inserted after ``axis``. Operands: starts, x; starts has x's rank and
    extents but along ``axis``, an axis of both."""
    starts, x = _operands(["starts", "x"], shapes)
    _axis("axis", spec.axis, len(x))
    _same_but("axis", "starts", starts, "x", x, spec.axis)
    return _results((*starts[:spec.axis + 1], spec.run, *starts[spec.axis + 1:]))


@_answers
def scatter(spec: Scatter, shapes: Sequence[Sequence[int]]) -> Shapes:
    """Scatter's destination: into's shape. Operands: into, index, updates;
    index and updates have one shape, of into's rank and extents but along
    ``axis``, an axis of into."""
    into, index, updates = _operands(["into", "index", "updates"], shapes)
    _axis("axis", spec.axis, len(into))
    if index != updates:
        raise _Misfit(f"index {list(index)} and updates {list(updates)} differ")
    _same_but("axis", "index", index, "into", into, spec.axis)
    return _results(into)


@_answers
def sort(spec: Sort, shapes: Sequence[Sequence[int]]) -> Shapes:
    """Sort's destinations, values and positions: x's shape with ``k`` along
    ``axis`` (x's extent where k is None; a k above it is an Error)."""
    (x,) = _operands(["x"], shapes)
    _axis("axis", spec.axis, len(x))
    k = x[spec.axis] if spec.k is None else spec.k
    if k > x[spec.axis]:
        raise _Misfit(f"k = {k} is above axis {spec.axis}'s extent {x[spec.axis]}")
    out = _set_at(x, spec.axis, k)
    return _results(out, out)


@_answers
def numbering(spec: Numbering, shapes: Sequence[Sequence[int]]) -> Shapes:
    """Numbering's destination: x's shape. Operands: keys ``[b…; m]``, x
    ``[b…; n]``, of one rank of at least 1 and the same batch extents."""
    keys, x = _operands(["keys", "x"], shapes)
    if not keys or not x or len(keys) != len(x) or keys[:-1] != x[:-1]:
        raise _Misfit(f"keys {list(keys)} and x {list(x)} must be [b…; m] and [b…; n]")
    return _results(x)


@_answers
def assemble(spec: Assemble, shapes: Sequence[Sequence[int]]) -> Shapes:
    """Assemble's destination: ``spec.shape``. Operands: one piece per region,
    of the region's counts."""
    pieces = _operands([f"piece {i}" for i in range(len(spec.regions))], shapes)
    for i, (p, region) in enumerate(zip(pieces, spec.regions, strict=True)):
        want = tuple(r.count for r in region)
        if p != want:
            raise _Misfit(f"piece {i} {list(p)} must be its region's {list(want)}")
    return _results(spec.shape)


# --------------------------------------------------------------------------
# Fit checks
# --------------------------------------------------------------------------


def _positions_data(spec: Gather | RangeGather, dsts: Sequence[Array],
                    operands: Sequence[Array]) -> bool:
    """int64 positions; dst of the data's dtype."""
    return operands[0].dtype is D.int64 and dsts[0].dtype is operands[1].dtype


def _scatter_dtypes(spec: Scatter, dsts: Sequence[Array], operands: Sequence[Array]) -> bool:
    """into, updates and dst of one dtype, int64 positions; Add takes the dtypes
    Prog's Add takes: every dtype but the booleans."""
    into, index, updates = operands
    dt = dsts[0].dtype
    if into.dtype is not dt or updates.dtype is not dt or index.dtype is not D.int64:
        return False
    return not (spec.combine is Combine.ADD and dt.kind is D.Kind.BOOLEAN)


def _sort_dtypes(spec: Sort, dsts: Sequence[Array], operands: Sequence[Array]) -> bool:
    """values of x's dtype, int64 positions."""
    return dsts[0].dtype is operands[0].dtype and dsts[1].dtype is D.int64


def _numbering_dtypes(spec: Numbering, dsts: Sequence[Array], operands: Sequence[Array]
                      ) -> bool:
    """keys and x of one dtype, an int64 dst."""
    return dsts[0].dtype is D.int64 and operands[0].dtype is operands[1].dtype


def _assemble_dtypes(spec: Assemble, dsts: Sequence[Array], operands: Sequence[Array]) -> bool:
    """the fill one element of dst's dtype, every piece of it."""
    return fill_fits(spec.fill, dsts[0].dtype) and all(p.dtype is dsts[0].dtype for p in operands)


# --------------------------------------------------------------------------
# The records
# --------------------------------------------------------------------------


#: ``S.gather``: dst of x's dtype.
GATHER: Final = Kernel("gather", Gather, gather, lambda spec, loads: (loads[1],), no_refusal,
                       rule_fit(gather, _positions_data))
#: ``S.range_gather``: dst of x's dtype.
RANGE_GATHER: Final = Kernel("range_gather", RangeGather, range_gather,
                             lambda spec, loads: (loads[1],), no_refusal,
                             rule_fit(range_gather, _positions_data))
#: ``S.scatter``: dst of into's dtype.
SCATTER: Final = Kernel("scatter", Scatter, scatter, lambda spec, loads: (loads[0],), no_refusal,
                        rule_fit(scatter, _scatter_dtypes))
#: ``S.sort``: values of x's dtype, int64 positions.
SORT: Final = Kernel("sort", Sort, sort, lambda spec, loads: (loads[0], D.int64), no_refusal,
                     rule_fit(sort, _sort_dtypes))
#: ``S.numbering``: an int64 dst.
NUMBERING: Final = Kernel("numbering", Numbering, numbering, lambda spec, loads: (D.int64,),
                          no_refusal, rule_fit(numbering, _numbering_dtypes))
#: ``S.assemble``: dst's dtype is the caller's to state.
ASSEMBLE: Final = Kernel("assemble", Assemble, assemble, lambda spec, loads: None, no_refusal,
                         rule_fit(assemble, _assemble_dtypes))

_MOVES: Final[dict[str, Kernel[Any]]] = {
    k.name: k for k in (GATHER, RANGE_GATHER, SCATTER, SORT, NUMBERING, ASSEMBLE)}


def move_misfit(spec: Gather | RangeGather | Scatter | Sort | Numbering | Assemble,
                dsts: Sequence[Array], operands: Sequence[Array]) -> Answer | None:
    """The refusal of a move call (gather, range_gather, scatter, sort,
    numbering, assemble) that does not fit: its record's fit check."""
    kernel = _MOVES.get(getattr(spec, "kernel", ""))
    if kernel is None:
        raise TypeError(f"move_misfit: {type(spec).__name__} is not a move")
    return kernel.fit(spec, dsts, operands)

"""Loads, reductions and the kernels' attributes, one frozen spec per kernel.

A spec is plain, hashable data: the attributes a kernel of ``S`` takes before
its destinations and operands (``design.md`` §4). Each spec checks its own
attributes when it is made and raises ``ValueError`` starting with the class,
``"spec.Reduce: axes (2, 1) must increase strictly"``; what depends on the
operands' shapes is ``shape``'s to answer, and what depends on their dtypes
is the refusal rules' (``shape.map_refusal`` and its kin). Every spec names
its kernel (``kernel``, the ``S`` method), and says how many operands and
destinations its kernel takes (``n_operands``, ``n_results``), in the order its
class documents.
"""

from __future__ import annotations

import enum
import itertools
import math
import operator
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Final, SupportsIndex, final

from . import dtype as D
from .dtype import Dtype
from .layout import MAX_RANK, Range, Window
from .prog import MAX_OPERANDS

if TYPE_CHECKING:
    from .prog import Prog

__all__ = [
    "KERNELS",
    "LOGSUMEXP",
    "MAX_FILL_BYTES",
    "MOMENTS",
    "PLAIN",
    "Arg",
    "Assemble",
    "C2c",
    "C2r",
    "Cholesky",
    "Combine",
    "Contract",
    "ContractingSegments",
    "Dense",
    "Direction",
    "Eig",
    "Eigh",
    "Extreme",
    "Factors",
    "Fft",
    "Fold",
    "Gather",
    "Load",
    "Logsumexp",
    "Lu",
    "Map",
    "Moments",
    "Monoid",
    "Numbering",
    "Pad",
    "Padded",
    "Paged",
    "Plain",
    "Qr",
    "R2c",
    "RangeGather",
    "Reduce",
    "Reduction",
    "Rows",
    "ScaleKind",
    "Scan",
    "Scatter",
    "Side",
    "SolveTriangular",
    "Sort",
    "Spec",
    "Svd",
    "accepts",
    "fill_fits",
    "result_dtypes",
    "result_fits",
    "results",
]

#: The most bytes a fill (one element's bits) takes: a complex128.
MAX_FILL_BYTES: Final = 16


def _fail(owner: object, msg: str) -> ValueError:
    return ValueError(f"spec.{type(owner).__name__}: {msg}")


def _set(owner: object, name: str, value: object) -> None:
    object.__setattr__(owner, name, value)


def _int(owner: object, what: str, value: object, least: int | None = 0) -> int:
    """``value`` as an int (bools refused), at least ``least`` unless None."""
    if type(value) is int:
        out = value  # the common case, without the slow Protocol check
    elif isinstance(value, bool) or not isinstance(value, SupportsIndex):
        raise _fail(owner, f"{what} must be an int, got {value!r}")
    else:
        out = operator.index(value)
    if least is not None and out < least:
        raise _fail(owner, f"{what} must be at least {least}, got {out}")
    return int(out)


def _int_field(owner: object, name: str, least: int = 0) -> int:
    """Field ``name`` of ``owner`` checked as by ``_int`` and stored as an int."""
    out = _int(owner, name, getattr(owner, name), least)
    _set(owner, name, out)
    return out


def _ints(owner: object, what: str, values: object, least: int | None = 0) -> tuple[int, ...]:
    if not isinstance(values, Iterable):
        raise _fail(owner, f"{what} must be a sequence of ints, got {values!r}")
    items = tuple(values)
    return tuple(_int(owner, f"{what} {items}", v, least) for v in items)


def _tuples(owner: object, what: str, values: object) -> tuple[tuple[object, ...], ...]:
    """``values``, a sequence of sequences, as a tuple of tuples."""
    if isinstance(values, Iterable):
        items = tuple(values)
        if all(isinstance(v, Iterable) for v in items):
            return tuple(tuple(v) for v in items)
    raise _fail(owner, f"{what} must be a sequence of sequences, got {values!r}")


def _bool(owner: object, what: str, value: object) -> None:
    if not isinstance(value, bool):
        raise _fail(owner, f"{what} must be a bool, got {value!r}")


def _of(owner: object, what: str, value: object, kind: type | tuple[type, ...]) -> None:
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        article = "an" if names[0] in "AEIOU" else "a"
        raise _fail(owner, f"{what} must be {article} {names}, got {value!r}")


def _axes(owner: object, what: str, values: object) -> tuple[int, ...]:
    """Strictly increasing, non-negative axes, at most ``MAX_RANK`` of them."""
    axes = _ints(owner, what, values)
    if any(b <= a for a, b in itertools.pairwise(axes)):
        raise _fail(owner, f"{what} {axes} must increase strictly")
    if len(axes) > MAX_RANK:
        raise _fail(owner, f"{what} {axes} are more than {MAX_RANK}")
    return axes


def _shape(owner: object, values: object) -> tuple[int, ...]:
    shape = _ints(owner, "shape", values)
    if len(shape) > MAX_RANK:
        raise _fail(owner, f"shape {list(shape)} has rank {len(shape)}, above {MAX_RANK}")
    return shape


def _fill(owner: object, fill: object) -> bytes:
    if not isinstance(fill, bytes | bytearray | memoryview):
        raise _fail(owner, f"fill must be bytes, got {fill!r}")
    out = bytes(fill)
    if not 1 <= len(out) <= MAX_FILL_BYTES:
        raise _fail(owner, f"fill has {len(out)} bytes, not 1 to {MAX_FILL_BYTES}")
    return out


def fill_fits(fill: bytes, dt: Dtype) -> bool:
    """Whether ``fill`` is one element's bits of ``dt``: ``dtype.bytes(dt, 1)``
    bytes (a sub-byte element in the low bits of one byte)."""
    return len(fill) == D.bytes(dt, 1)


# --------------------------------------------------------------------------
# Loads
# --------------------------------------------------------------------------


@final
@dataclass(frozen=True, slots=True)
class Pad:
    """A padding of an operand of rank ``len(lo)``: along axis ``i``, ``lo[i]``
    elements before the operand's, ``hi[i]`` after and ``interior[i]`` between
    neighbours (a negative ``lo`` or ``hi`` crops instead), then the windows of
    the padded operand that ``Windows(windows)`` takes. ``lo``, ``hi`` and
    ``interior`` have one length, ``interior >= 0``, window axes increase
    strictly below the rank with size, step and dilation at least 1."""

    lo: tuple[int, ...]
    hi: tuple[int, ...]
    interior: tuple[int, ...]
    windows: tuple[Window, ...] = ()

    def __post_init__(self) -> None:
        lo = _ints(self, "lo", self.lo, None)
        hi = _ints(self, "hi", self.hi, None)
        interior = _ints(self, "interior", self.interior)
        if not len(lo) == len(hi) == len(interior):
            raise _fail(self, f"lo {lo}, hi {hi} and interior {interior} differ in length")
        windows = tuple(self.windows)
        for w in windows:
            _of(self, "a window", w, Window)
        axes = _axes(self, "window axes", [w.axis for w in windows])
        if axes and axes[-1] >= len(lo):
            raise _fail(self, f"window axis {axes[-1]} is past the rank {len(lo)}")
        for w in windows:
            if w.size < 1 or w.step < 1 or w.dilation < 1:
                raise _fail(self, f"window {w} needs size, step and dilation >= 1")
        if len(lo) + len(windows) > MAX_RANK:
            raise _fail(self, f"rank {len(lo)} with {len(windows)} windows is above {MAX_RANK}")
        _set(self, "lo", lo)
        _set(self, "hi", hi)
        _set(self, "interior", interior)
        _set(self, "windows", windows)

    @property
    def rank(self) -> int:
        """The rank of the operand this pads."""
        return len(self.lo)

    @property
    def loaded_rank(self) -> int:
        """The rank of what the load reads: the operand's plus one per window."""
        return len(self.lo) + len(self.windows)


@final
@dataclass(frozen=True, slots=True)
class Plain:
    """A load that reads the operand at the loop's index; ``PLAIN`` is the one."""


#: The plain load.
PLAIN: Final = Plain()


@final
@dataclass(frozen=True, slots=True)
class Padded:
    """A load that reads the operand padded and windowed by ``pad``; an index
    outside the operand reads ``fill``, one element's bits (1 to 16 bytes; that
    it is one element of the operand's dtype is the refusal rules' to check)."""

    fill: bytes
    pad: Pad

    def __post_init__(self) -> None:
        _set(self, "fill", _fill(self, self.fill))
        _of(self, "pad", self.pad, Pad)


Load = Plain | Padded


def _loads(owner: object, loads: object, count: int, what: str) -> tuple[Load, ...]:
    """``loads`` as a tuple of ``count`` loads, ``what`` naming whose they are."""
    if not isinstance(loads, Iterable):
        raise _fail(owner, f"loads must be a sequence of loads, got {loads!r}")
    out = tuple(loads)
    for load in out:
        _of(owner, "a load", load, (Plain, Padded))
    if len(out) != count:
        raise _fail(owner, f"{len(out)} loads for {count} {what}")
    return out


# --------------------------------------------------------------------------
# Reductions
# --------------------------------------------------------------------------


class Monoid(enum.Enum):
    """Sum (from +0; integers wrap), Prod (from the first term; empty is 1),
    Max and Min (``Prog`` Maximum and Minimum: −0 below +0, any/all on
    booleans). A member is itself a reduction."""

    SUM = "sum"
    PROD = "prod"
    MAX = "max"
    MIN = "min"


@final
@dataclass(frozen=True, slots=True)
class Logsumexp:
    """``m + log Σ exp(x − m)``, m the terms' maximum; ``LOGSUMEXP`` is the one."""


@final
@dataclass(frozen=True, slots=True)
class Moments:
    """The terms' population mean, then their variance; ``MOMENTS`` is the one."""


LOGSUMEXP: Final = Logsumexp()
MOMENTS: Final = Moments()


class Extreme(enum.Enum):
    """Which extreme an ``Arg`` finds."""

    MAX = "max"
    MIN = "min"


@final
@dataclass(frozen=True, slots=True)
class Arg:
    """The extreme of the terms, as Monoid Max or Min finds it, then its int64
    position: the first term with its bits, or the first NaN term."""

    extreme: Extreme

    def __post_init__(self) -> None:
        _of(self, "extreme", self.extreme, Extreme)


Reduction = Monoid | Logsumexp | Moments | Arg

_REDUCTIONS: Final = (Monoid, Logsumexp, Moments, Arg)


def _reduction_name(r: Reduction) -> str:
    if isinstance(r, Monoid):
        return r.value
    if isinstance(r, Logsumexp):
        return "logsumexp"
    if isinstance(r, Moments):
        return "moments"
    return "arg"


def accepts(reduction: Reduction, dt: Dtype) -> bool:
    """Whether ``reduction`` reduces terms of ``dt``: Sum and Prod every dtype but
    booleans, Max, Min and Arg every dtype, Logsumexp and Moments floats."""
    return D.accepts_reduction_kind(_reduction_name(reduction), dt)


def results(reduction: Reduction) -> int:
    """How many results ``reduction`` gives: two for Moments (mean, variance)
    and Arg (extreme, position), else one."""
    return 2 if isinstance(reduction, Moments | Arg) else 1


def result_dtypes(reduction: Reduction, dt: Dtype) -> tuple[Dtype, ...]:
    """The dtypes of ``reduction``'s results stated in ``dt``: ``(dt, dt)`` for
    Moments, ``(dt, int64)`` for Arg (the extreme, then its position), else
    ``(dt,)``."""
    if isinstance(reduction, Moments):
        return (dt, dt)
    if isinstance(reduction, Arg):
        return (dt, D.int64)
    return (dt,)


def result_fits(reduction: Reduction, term: Dtype, result: Dtype) -> bool:
    """Whether ``reduction`` of terms of ``term`` may round into a result of
    ``result`` (the first result, for Moments and Arg): the terms' own dtype
    always; a float Sum, Prod, Logsumexp or Moments into any float dtype and a
    complex Sum or Prod into any complex dtype, each result rounding once into
    it. Max, Min and Arg pick a term, and integers wrap, so theirs is the
    terms' dtype alone. Assumes ``accepts(reduction, term)``."""
    if result is term:
        return True
    if isinstance(reduction, Arg) or reduction in (Monoid.MAX, Monoid.MIN):
        return False
    if term.is_float:
        return result.is_float
    return term.is_complex and result.is_complex and reduction in (Monoid.SUM, Monoid.PROD)


# --------------------------------------------------------------------------
# Loops: map, reduce, scan
# --------------------------------------------------------------------------


@final
@dataclass(frozen=True, slots=True)
class Map:
    """``S.map``: ``prog`` at every index of the loop, operand ``i`` read by
    ``loads[i]`` (one load per program input). Operands: one per load.
    Destinations: one per program output, output ``k`` into the ``k``-th."""

    kernel: ClassVar[str] = "map"
    prog: Prog
    loads: tuple[Load, ...]

    def __post_init__(self) -> None:
        _set(self, "loads", _loads(self, self.loads, self.prog.n_ins, "program inputs"))

    def n_operands(self) -> int:
        return len(self.loads)

    def n_results(self) -> int:
        return self.prog.n_outs


@final
@dataclass(frozen=True, slots=True)
class Reduce:
    """``S.reduce``: each ``(reduction, output, dtype)`` of ``reductions``
    reduces program output ``output`` over ``axes`` (strictly increasing) into
    results of ``result_dtypes(reduction, dtype)``. Operands: one per load.
    Destinations: every reduction's results, in the order listed (Moments: mean
    then variance; Arg: the extreme then its int64 positions). At least one
    reduction; loads plus results at most ``MAX_OPERANDS`` (16)."""

    kernel: ClassVar[str] = "reduce"
    prog: Prog
    loads: tuple[Load, ...]
    axes: tuple[int, ...]
    reductions: tuple[tuple[Reduction, int, Dtype], ...]

    def __post_init__(self) -> None:
        _set(self, "loads", _loads(self, self.loads, self.prog.n_ins, "program inputs"))
        _set(self, "axes", _axes(self, "axes", self.axes))
        rs = []
        for r in _tuples(self, "reductions", self.reductions):
            if len(r) != 3:
                raise _fail(self, f"reduction {r} is not (reduction, output, dtype)")
            _of(self, "a reduction", r[0], _REDUCTIONS)
            k = _int(self, "output", r[1])
            if k >= self.prog.n_outs:
                raise _fail(self, f"output {k} is past the program's {self.prog.n_outs}")
            _of(self, "a result dtype", r[2], Dtype)
            rs.append((r[0], k, r[2]))
        if not rs:
            raise _fail(self, "takes at least one reduction")
        _set(self, "reductions", tuple(rs))
        if len(self.loads) + self.n_results() > MAX_OPERANDS:
            raise _fail(
                self,
                f"{len(self.loads)} loads and {self.n_results()} results are more than "
                f"{MAX_OPERANDS}",
            )

    def n_operands(self) -> int:
        return len(self.loads)

    def n_results(self) -> int:
        return sum(results(r) for r, _, _ in self.reductions)

    def result_dtypes(self) -> tuple[Dtype, ...]:
        """The destinations' dtypes, in order."""
        return tuple(d for r, _, dt in self.reductions for d in result_dtypes(r, dt))


@final
@dataclass(frozen=True, slots=True)
class Scan:
    """``S.scan``: the inclusive scan by ``reduction`` of program output
    ``output`` along ``axis`` (from the end where ``reverse``), into results of
    ``result_dtypes(reduction, dtype)``.

    Operands: where ``carry``, first the carry, the state before the first term,
    of dtype ``carrier`` of the output's dtype and of the shape ``shape.carry``
    gives (the loop's shape without ``axis``): for a Monoid the carrier value
    of the result before; for Logsumexp the log-sum-exp of the earlier terms
    (−∞ for none); for Moments an extra last axis of 3, the earlier terms'
    count, mean and population variance. An Arg scan takes no carry. Then one
    operand per load. Destinations: the results (Moments: mean then variance;
    Arg: the extreme then its int64 positions)."""

    kernel: ClassVar[str] = "scan"
    prog: Prog
    loads: tuple[Load, ...]
    axis: int
    reduction: Reduction
    output: int
    dtype: Dtype
    reverse: bool = False
    carry: bool = False

    def __post_init__(self) -> None:
        _set(self, "loads", _loads(self, self.loads, self.prog.n_ins, "program inputs"))
        _int_field(self, "axis")
        _of(self, "reduction", self.reduction, _REDUCTIONS)
        if _int_field(self, "output") >= self.prog.n_outs:
            raise _fail(self, f"output {self.output} is past the program's {self.prog.n_outs}")
        _of(self, "dtype", self.dtype, Dtype)
        _bool(self, "reverse", self.reverse)
        _bool(self, "carry", self.carry)
        if self.carry and isinstance(self.reduction, Arg):
            raise _fail(self, "an Arg scan takes no carry")

    def n_operands(self) -> int:
        return len(self.loads) + self.carry

    def n_results(self) -> int:
        return results(self.reduction)

    def result_dtypes(self) -> tuple[Dtype, ...]:
        """The destinations' dtypes, in order."""
        return result_dtypes(self.reduction, self.dtype)


# --------------------------------------------------------------------------
# Moves and folds
# --------------------------------------------------------------------------


@final
@dataclass(frozen=True, slots=True)
class Fold:
    """``S.fold``: the adjoint of a Padded load by ``pad`` of an operand of
    ``shape``: each element of dst (of ``shape``) is +0 plus every element of x
    (of ``shape.padded(shape, pad)``) the load reads from it, in C order of the
    taps. Operands: x. Destinations: dst."""

    kernel: ClassVar[str] = "fold"
    shape: tuple[int, ...]
    pad: Pad

    def __post_init__(self) -> None:
        _set(self, "shape", _shape(self, self.shape))
        _of(self, "pad", self.pad, Pad)
        if self.pad.rank != len(self.shape):
            raise _fail(self, f"pad of rank {self.pad.rank} for shape {list(self.shape)}")

    def n_operands(self) -> int:
        return 1

    def n_results(self) -> int:
        return 1


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
# Contractions
# --------------------------------------------------------------------------


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
# Fourier transforms
# --------------------------------------------------------------------------


class Direction(enum.Enum):
    """FORWARD sums ``x[j]·e^(−2πi jk/n)``, INVERSE ``x[j]·e^(+2πi jk/n)``;
    neither divides by n."""

    FORWARD = "forward"
    INVERSE = "inverse"


@final
@dataclass(frozen=True, slots=True)
class C2c:
    """Complex to complex, of one dtype."""


@final
@dataclass(frozen=True, slots=True)
class R2c:
    """Real to complex: the last listed axis of n points keeps bins 0..n//2."""


@final
@dataclass(frozen=True, slots=True)
class C2r:
    """Complex to real of ``n`` points along the last listed axis, read from
    its n//2 + 1 bins extended by Hermitian symmetry."""

    n: int

    def __post_init__(self) -> None:
        _int_field(self, "n")


@final
@dataclass(frozen=True, slots=True)
class Fft:
    """``S.fft``: the unnormalised DFT along ``axes`` (strictly increasing, at
    least one) in ``direction``, of ``kind``. Operands: x. Destinations: dst."""

    kernel: ClassVar[str] = "fft"
    axes: tuple[int, ...]
    direction: Direction
    kind: C2c | R2c | C2r

    def __post_init__(self) -> None:
        axes = _axes(self, "axes", self.axes)
        if not axes:
            raise _fail(self, "takes at least one axis")
        _set(self, "axes", axes)
        _of(self, "direction", self.direction, Direction)
        _of(self, "kind", self.kind, (C2c, R2c, C2r))

    def n_operands(self) -> int:
        return 1

    def n_results(self) -> int:
        return 1


# --------------------------------------------------------------------------
# Matrix routines (each on the last two axes, of m rows and n columns)
# --------------------------------------------------------------------------


class Factors(enum.Enum):
    """How much of the unitary factors qr and svd give: REDUCED, k = min(m, n)
    columns of the left and rows of the right; COMPLETE, the square ones."""

    REDUCED = "reduced"
    COMPLETE = "complete"


@final
@dataclass(frozen=True, slots=True)
class Cholesky:
    """``S.cholesky``: the factor of a Hermitian positive-definite a, lower (or
    ``upper``). Operands: a. Destinations: the factor."""

    kernel: ClassVar[str] = "cholesky"
    upper: bool = False

    def __post_init__(self) -> None:
        _bool(self, "upper", self.upper)

    def n_operands(self) -> int:
        return 1

    def n_results(self) -> int:
        return 1


@final
@dataclass(frozen=True, slots=True)
class Lu:
    """``S.lu``: partial-pivoting LU. Operands: a. Destinations: lu (unit-lower
    L below the diagonal, U on and above), pivots (int64), perm (int64)."""

    kernel: ClassVar[str] = "lu"

    def n_operands(self) -> int:
        return 1

    def n_results(self) -> int:
        return 3


@final
@dataclass(frozen=True, slots=True)
class Qr:
    """``S.qr``: a = q r, reduced or ``complete``. Operands: a. Destinations:
    q, r."""

    kernel: ClassVar[str] = "qr"
    complete: bool = False

    def __post_init__(self) -> None:
        _bool(self, "complete", self.complete)

    def n_operands(self) -> int:
        return 1

    def n_results(self) -> int:
        return 2


@final
@dataclass(frozen=True, slots=True)
class Svd:
    """``S.svd``: singular values, with ``vectors`` of those factors or none.
    Operands: a. Destinations: u, s, vh, or s alone where ``vectors`` is None."""

    kernel: ClassVar[str] = "svd"
    vectors: Factors | None = Factors.REDUCED

    def __post_init__(self) -> None:
        if self.vectors is not None:
            _of(self, "vectors", self.vectors, Factors)

    def n_operands(self) -> int:
        return 1

    def n_results(self) -> int:
        return 1 if self.vectors is None else 3


@final
@dataclass(frozen=True, slots=True)
class Eigh:
    """``S.eigh``: eigenvalues (ascending, real) of a Hermitian a, with its
    ``vectors``. Operands: a. Destinations: w, then v where ``vectors``."""

    kernel: ClassVar[str] = "eigh"
    vectors: bool = True

    def __post_init__(self) -> None:
        _bool(self, "vectors", self.vectors)

    def n_operands(self) -> int:
        return 1

    def n_results(self) -> int:
        return 1 + self.vectors


@final
@dataclass(frozen=True, slots=True)
class Eig:
    """``S.eig``: eigenvalues (complex) of a square a, with its right
    ``vectors``. Operands: a. Destinations: w, then v where ``vectors``."""

    kernel: ClassVar[str] = "eig"
    vectors: bool = True

    def __post_init__(self) -> None:
        _bool(self, "vectors", self.vectors)

    def n_operands(self) -> int:
        return 1

    def n_results(self) -> int:
        return 1 + self.vectors


@final
@dataclass(frozen=True, slots=True)
class SolveTriangular:
    """``S.solve_triangular``: x with ``op(a) x = b``, a's ``lower`` (else upper)
    triangle read, ``op`` transposing where ``transpose``, a's diagonal taken as
    ones where ``unit_diagonal``. Operands: a, b. Destinations: x."""

    kernel: ClassVar[str] = "solve_triangular"
    lower: bool = True
    transpose: bool = False
    unit_diagonal: bool = False

    def __post_init__(self) -> None:
        _bool(self, "lower", self.lower)
        _bool(self, "transpose", self.transpose)
        _bool(self, "unit_diagonal", self.unit_diagonal)

    def n_operands(self) -> int:
        return 2

    def n_results(self) -> int:
        return 1


# --------------------------------------------------------------------------
# Attention
# --------------------------------------------------------------------------


@final
@dataclass(frozen=True, slots=True)
class Dense:
    """Keys k ``[lead…; hk; tk; dk]`` and values v ``[lead…; hk; tk; dv]``."""


@final
@dataclass(frozen=True, slots=True)
class Paged:
    """Pools k ``[pages; hk; page; dk]`` and v ``[pages; hk; page; dv]`` read
    through table ``[lead…; max_pages]``: key t of lead index b is the pools'
    entry ``table[b; t // page]`` at ``t % page``; tk = max_pages·page."""

    page: int

    def __post_init__(self) -> None:
        _int_field(self, "page", 1)


@final
@dataclass(frozen=True, slots=True)
class Attention:
    """``S.attention``: per query row, the log-sum-exp of program output 1 over
    its visible pairs and the values weighted by ``exp(x − lse)``.

    ``prog`` reads operand 0, the score (``scale`` × q·k in ``acc``, float32 or
    float64), and operand ``1 + i`` by ``loads[i]``; output 0 (bool, reading no
    score) says which pairs are visible, output 1 (in ``acc``) is the logit.
    Operands: q, k, v (Dense) or q, k_pool, v_pool, table (Paged), then lengths
    (int64) where ``lengths``, then one per load. Destinations: o, lse."""

    kernel: ClassVar[str] = "attention"
    prog: Prog
    loads: tuple[Load, ...]
    scale: float
    acc: Dtype
    kv: Dense | Paged
    lengths: bool = False

    def __post_init__(self) -> None:
        if self.prog.n_ins < 1:
            raise _fail(self, "the program takes no score (operand 0)")
        _set(self, "loads", _loads(self, self.loads, self.prog.n_ins - 1,
                                   "program inputs after the score"))
        if isinstance(self.scale, bool) or not isinstance(self.scale, int | float):
            raise _fail(self, f"scale must be a float, got {self.scale!r}")
        _set(self, "scale", float(self.scale))
        if math.isnan(self.scale):
            raise _fail(self, "scale is a NaN")
        if self.acc not in (D.float32, D.float64):
            raise _fail(self, f"acc must be float32 or float64, got {self.acc!r}")
        _of(self, "kv", self.kv, (Dense, Paged))
        _bool(self, "lengths", self.lengths)

    def n_operands(self) -> int:
        return (3 if isinstance(self.kv, Dense) else 4) + self.lengths + len(self.loads)

    def n_results(self) -> int:
        return 2


Spec = (Map | Reduce | Scan | Fold | Gather | RangeGather | Scatter | Sort | Numbering
        | Assemble | Contract | Fft | Cholesky | Lu | Qr | Svd | Eigh | Eig | SolveTriangular
        | Attention)

#: Every kernel's spec class, by its ``S`` method name.
KERNELS: Final[dict[str, type]] = {
    cls.kernel: cls
    for cls in (Map, Reduce, Scan, Fold, Gather, RangeGather, Scatter, Sort, Numbering,
                Assemble, Contract, Fft, Cholesky, Lu, Qr, Svd, Eigh, Eig, SolveTriangular,
                Attention)
}

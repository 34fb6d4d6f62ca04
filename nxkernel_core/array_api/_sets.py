"""Sorting, set functions and the data-dependent searches (``nonzero``,
boolean masks): the Sort, Scan, Scatter, Gather and Numbering kernels. The
one value read back to the host is a count, the extent of the result.

The standard's ``sort`` returns the values; ``nx.sort`` keeps returning
``(values, positions)`` under its own name."""

from __future__ import annotations

from typing import Any, Final, NamedTuple

from .. import dtype as D
from .. import nx
from .. import spec as S
from ..answer import describe
from ..array import Array
from ..layout import Broadcast, Range, Slice
from ..prog import Builder, Prog, Value
from . import _base as B

__all__ = [
    "argsort", "flat_positions", "nonzero", "searchsorted", "sort", "unique_all",
    "unique_counts", "unique_inverse", "unique_values",
]


def _sorted(fn: str, x: Array, axis: int, descending: bool) -> tuple[Array, Array]:
    a = B.the_array(fn, x)
    B.check_kind(fn, "real-valued", a)
    if a.rank == 0:
        return B.copy(fn, a), B.full(fn, (), 0, D.int64, a.device)
    ax = B.axis_of(fn, a, axis)
    if a.numel == 0:
        return B.copy(fn, a), Array.empty(D.int64, a.shape, a.device)
    values, positions = nx.call(S.Sort(ax, descending), a, name=fn)
    return values, positions


def sort(x: Array, /, *, axis: int = -1, descending: bool = False, stable: bool = True) -> Array:
    """The values sorted along ``axis`` (stable; NaN last ascending)."""
    return _sorted("xp.sort", x, axis, descending)[0]


def argsort(x: Array, /, *, axis: int = -1, descending: bool = False, stable: bool = True) -> Array:
    """The int64 positions that sort x along ``axis`` (stable: equal elements
    keep their order, also descending)."""
    return _sorted("xp.argsort", x, axis, descending)[1]


def searchsorted(x1: Array, x2: Any, /, *, side: str = "left", sorter: Array | None = None) -> Array:
    """Insertion positions of x2 into the ascending 1-D x1 (``sorter`` sorting it)."""
    fn = "xp.searchsorted"
    keys = B.the_array(fn, x1)
    if keys.rank != 1:
        raise ValueError(f"{fn}: x1 must be 1-D, not {describe([keys])}")
    if side not in ("left", "right"):
        raise ValueError(f"{fn}: side {side!r} is not 'left' or 'right'")
    if sorter is not None:
        keys = nx.take(keys, B.cast(fn, sorter, D.int64), axis=0)
    if isinstance(x2, Array):
        keys, v = B.operands(fn, keys, x2)[0], x2
        v = B.cast(fn, v, keys.dtype)
    else:
        v = B.operands(fn, keys, x2)[1].reshape([])
    if v.numel == 0 or keys.numel == 0:
        return B.full(fn, v.shape, 0, D.int64, keys.device)
    flat = B.flat(fn, v)
    return B.reshaped(fn, nx.numbering(keys, flat, side), v.shape)


#: The number of true elements of a flat bool array: one Sum reduction of its cast.
_COUNT: Final = S.Reduce(Prog.cast(D.bool_, D.int64), (S.PLAIN,), (0,),
                         ((S.Monoid.SUM, 0, D.int64),))


def flat_positions(fn: str, mask: Array) -> Array:
    """The int64 flat (C-order) positions where the bool ``mask`` holds, in
    increasing order: the count of true elements (a reduction, read back as
    the extent) and a stable descending Sort of the mask, whose positions
    list the true elements first."""
    m = B.flat(fn, mask)
    n = m.numel
    if n == 0:
        return Array.empty(D.int64, (0,), mask.device)
    total = int(nx.call(_COUNT, m, name=fn)[0])
    if total == 0:
        return Array.empty(D.int64, (0,), mask.device)
    positions = nx.call(S.Sort(0, True), m, name=fn)[1]
    return positions.view(Slice((Range(0, total, 1),)))


def _unravel(b: Builder, p: Value, stride: Value, extent: Value) -> Value:
    return b.mod(b.idiv(p, stride), extent)


def unravel(fn: str, flat: Array, shape: tuple[int, ...]) -> tuple[Array, ...]:
    """Per axis, the index of each flat C-order position in ``shape``."""
    out = []
    stride = 1
    strides = []
    for d in reversed(shape):
        strides.append(stride)
        stride *= d
    strides.reverse()
    for s, d in zip(strides, shape, strict=True):
        st = B.scalar_array(s, D.int64, flat.device).view(Broadcast(flat.shape))
        ex = B.scalar_array(max(d, 1), D.int64, flat.device).view(Broadcast(flat.shape))
        out.append(B.elementwise(fn, _unravel, flat, st, ex))
    return tuple(out)


def nonzero(x: Array, /) -> tuple[Array, ...]:
    """Per axis, the indices of the non-zero elements, in C order."""
    fn = "xp.nonzero"
    a = B.the_array(fn, x)
    if a.rank == 0:
        raise ValueError(f"{fn}: a 0-d array has no indices")
    from ._reductions import _truth

    return unravel(fn, flat_positions(fn, _truth(fn, a)), a.shape)


# ---- sets ------------------------------------------------------------------------


def _starts(b: Builder, x: Value, prev: Value) -> Value:
    """Whether an element of a sorted run differs from the one before it (the
    first compares with itself shifted in, so a NaN starts its own group)."""
    return b.or_(b.equal(b.coord(0), b.const(D.int64, 0)), b.not_equal(x, prev))


class _Groups(NamedTuple):
    values: Array  # the sorted values
    positions: Array  # their positions in the flattened input
    starts: Array  # flat positions (in sorted order) where a group starts
    n: int


def _groups(fn: str, x: Array) -> _Groups:
    a = B.flat(fn, B.the_array(fn, x))
    n = a.numel
    if n == 0:
        empty = Array.empty(D.int64, (0,), a.device)
        return _Groups(a, empty, empty, 0)
    values, positions = nx.call(S.Sort(0, False), a, name=fn)
    prev = values.view(Slice((Range(0, n - 1, 1),)))
    head = values.view(Slice((Range(0, 1, 1),)))
    from ._manipulation import concat

    shifted = concat([head, prev])
    starts = flat_positions(fn, B.elementwise(fn, _starts, values, shifted))
    return _Groups(values, positions, starts, n)


def unique_values(x: Array, /) -> Array:
    """The distinct values, sorted (each NaN distinct)."""
    g = _groups("xp.unique_values", x)
    if g.n == 0:
        return g.values
    return nx.take(g.values, g.starts, axis=0)


def _counts(fn: str, g: _Groups) -> Array:
    from ._manipulation import concat

    if g.n == 0:
        return Array.empty(D.int64, (0,), g.values.device)
    ends = concat([g.starts.view(Slice((Range(1, g.starts.shape[0] - 1, 1),))),
                   B.scalar_array(g.n, D.int64, g.values.device).reshape([1])])
    return B.elementwise(fn, _minus, ends, g.starts)


def _minus(b: Builder, x: Value, y: Value) -> Value:
    return x - y


def _inverse(fn: str, g: _Groups, shape: tuple[int, ...]) -> Array:
    if g.n == 0:
        return Array.empty(D.int64, shape, g.values.device)
    marks = Array.empty(D.int64, (g.n,), g.values.device)
    ones = B.scalar_array(1, D.int64, g.values.device).view(Broadcast(g.starts.shape))
    marks = nx.scatter(marks, g.starts, ones, 0, "set", unique=True)
    ids = nx.call(S.Scan(Prog.identity(D.int64), (S.PLAIN,), 0, S.Monoid.SUM, 0, D.int64),
                  marks, name=fn)[0]
    ids = B.elementwise(fn, _less_one, ids)
    into = Array.empty(D.int64, (g.n,), g.values.device)
    return nx.scatter(into, g.positions, ids, 0, "set", unique=True).reshape(list(shape))


def _less_one(b: Builder, x: Value) -> Value:
    return x - 1


class UniqueAll(NamedTuple):
    values: Array
    indices: Array
    inverse_indices: Array
    counts: Array


class UniqueCounts(NamedTuple):
    values: Array
    counts: Array


class UniqueInverse(NamedTuple):
    values: Array
    inverse_indices: Array


def unique_counts(x: Array, /) -> UniqueCounts:
    """The distinct values and how often each occurs."""
    g = _groups("xp.unique_counts", x)
    values = nx.take(g.values, g.starts, axis=0) if g.n else g.values
    return UniqueCounts(values, _counts("xp.unique_counts", g))


def unique_inverse(x: Array, /) -> UniqueInverse:
    """The distinct values and, per element of x, the index of its value."""
    a = B.the_array("xp.unique_inverse", x)
    g = _groups("xp.unique_inverse", a)
    values = nx.take(g.values, g.starts, axis=0) if g.n else g.values
    return UniqueInverse(values, _inverse("xp.unique_inverse", g, a.shape))


def unique_all(x: Array, /) -> UniqueAll:
    """The distinct values, each one's first flat index, the inverse and the counts."""
    fn = "xp.unique_all"
    a = B.the_array(fn, x)
    g = _groups(fn, a)
    if g.n == 0:
        e = Array.empty(D.int64, (0,), a.device)
        return UniqueAll(g.values, e, Array.empty(D.int64, a.shape, a.device), e)
    values = nx.take(g.values, g.starts, axis=0)
    indices = nx.take(g.positions, g.starts, axis=0)
    return UniqueAll(values, indices, _inverse(fn, g, a.shape), _counts(fn, g))

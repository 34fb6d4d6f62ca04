"""Layouts (shape, strides and offset, in elements) and the moves between them.

The position of index ``i`` is ``offset + Σ i_j·strides_j`` and is never
negative. In canonical form an axis of extent 1 has stride 0, and a layout
with no element has offset 0 and every stride 0; equal canonical layouts are
equal layouts. A move (Reshape, Broadcast, Permute, Slice, Window) is plain
data that ``Layout.move`` applies; only a Reshape that no strides express
gives ``None``. Errors raise ``ValueError`` naming the function and the
offending argument.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Final, final

__all__ = [
    "MAX_RANK",
    "Broadcast",
    "Layout",
    "Move",
    "Permute",
    "Range",
    "Reshape",
    "Slice",
    "Window",
    "Windows",
    "check_rank",
    "coalesce",
    "numel",
    "window_count",
]

MAX_RANK: Final = 32


def check_rank(fn: str, what: str, rank: int) -> None:
    """Raise ``ValueError`` where ``rank`` exceeds ``MAX_RANK``."""
    if rank > MAX_RANK:
        raise ValueError(f"{fn}: {what} has rank {rank}, above the maximum {MAX_RANK}")


def numel(shape: Sequence[int]) -> int:
    """The number of elements of ``shape``."""
    return math.prod(shape)


def _check_shape(fn: str, what: str, shape: Sequence[int]) -> tuple[int, ...]:
    out = tuple(map(int, shape))
    check_rank(fn, what, len(out))
    if out and min(out) < 0:
        raise ValueError(f"{fn}: {what} {list(out)} has a negative extent")
    return out


# --------------------------------------------------------------------------
# Moves
# --------------------------------------------------------------------------


@final
@dataclass(frozen=True, slots=True)
class Range:
    """``count`` indices from ``start`` by ``step`` (non-zero; negative reverses)."""

    start: int
    count: int
    step: int = 1


@final
@dataclass(frozen=True, slots=True)
class Window:
    """Windows along ``axis``: ``size`` taps, ``step`` apart, taps ``dilation``
    apart."""

    axis: int
    size: int
    step: int = 1
    dilation: int = 1


def window_count(fn: str, extent: int, w: Window) -> int:
    """The number of windows ``w`` takes along an axis of ``extent``:
    ``(d − 1 − dilation·(size − 1)) // step + 1``; needs
    ``dilation·(size − 1) ≤ d − 1`` and size, step, dilation ≥ 1."""
    if w.size < 1 or w.step < 1 or w.dilation < 1:
        raise ValueError(f"{fn}: window {w} needs size, step and dilation >= 1")
    reach = w.dilation * (w.size - 1)
    if reach > extent - 1:
        raise ValueError(
            f"{fn}: window {w} reaches {reach + 1} elements, past axis {w.axis}'s extent {extent}"
        )
    return (extent - 1 - reach) // w.step + 1


@final
@dataclass(frozen=True, slots=True)
class Reshape:
    """The same elements in C order, in ``shape``."""

    shape: tuple[int, ...]


@final
@dataclass(frozen=True, slots=True)
class Broadcast:
    """Extents aligned from the right; each source extent is 1 or the target's."""

    shape: tuple[int, ...]


@final
@dataclass(frozen=True, slots=True)
class Permute:
    """Result axis ``i`` is source axis ``perm[i]``."""

    perm: tuple[int, ...]


@final
@dataclass(frozen=True, slots=True)
class Slice:
    """One ``Range`` per axis."""

    ranges: tuple[Range, ...]


@final
@dataclass(frozen=True, slots=True)
class Windows:
    """Windows on strictly increasing axes: each axis becomes its window count,
    and one trailing axis of extent ``size`` is appended per window, in axis
    order; element ``(…, w, …, j)`` is source ``(…, w·step + j·dilation, …)``."""

    windows: tuple[Window, ...]


Move = Reshape | Broadcast | Permute | Slice | Windows


# --------------------------------------------------------------------------
# Layout
# --------------------------------------------------------------------------


@final
@dataclass(frozen=True, slots=True, eq=False)
class Layout:
    """A view of elements: ``shape``, ``strides`` and ``offset`` in elements.

    Its facts (``numel``, ``span``, ``is_contiguous``, ``is_distinct``) are
    computed once: ``numel`` and ``span`` at construction, the others on first
    use (a layout is immutable, so a fact never changes; two threads computing
    one at once store the same value)."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int = 0
    _numel: int = field(init=False, repr=False)
    _span: tuple[int, int] = field(init=False, repr=False)
    _contiguous: bool | None = field(init=False, repr=False)
    _distinct: bool | None = field(init=False, repr=False)
    _canon: tuple[tuple[int, ...], tuple[int, ...], int] | None = field(init=False, repr=False)
    _hash: int | None = field(init=False, repr=False)

    def __post_init__(self) -> None:
        fn = "Layout"
        shape = _check_shape(fn, "shape", self.shape)
        strides = tuple(map(int, self.strides))
        if len(strides) != len(shape):
            raise ValueError(
                f"{fn}: strides {list(strides)} and shape {list(shape)} differ in rank"
            )
        offset = int(self.offset)
        n = math.prod(shape)
        span = (0, 0) if n == 0 else _span(shape, strides, offset)
        if span[0] < 0:
            raise ValueError(f"{fn}: offset {offset} with strides {list(strides)} "
                             "reaches a negative position")
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "strides", strides)
        object.__setattr__(self, "offset", offset)
        object.__setattr__(self, "_numel", n)
        object.__setattr__(self, "_span", span)
        object.__setattr__(self, "_contiguous", None)
        object.__setattr__(self, "_distinct", None)
        object.__setattr__(self, "_canon", None)
        object.__setattr__(self, "_hash", None)

    # ---- constructors -------------------------------------------------------

    @staticmethod
    def c_contiguous(shape: Sequence[int], offset: int = 0) -> Layout:
        """The C-order layout of ``shape`` from ``offset`` (made once per shape
        and offset: layouts are immutable)."""
        return _c_contiguous(shape if type(shape) is tuple else tuple(shape), offset)

    # ---- facts --------------------------------------------------------------

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        return self._numel

    def canonical(self) -> Layout:
        """This layout in canonical form."""
        if self.numel == 0:
            return Layout(self.shape, (0,) * self.rank, 0)
        strides = tuple(0 if d == 1 else s for d, s in zip(self.shape, self.strides, strict=True))
        return Layout(self.shape, strides, self.offset)

    def _canonical_key(self) -> tuple[tuple[int, ...], tuple[int, ...], int]:
        """``canonical()``'s shape, strides and offset, computed once: equality
        and hashing read them on every plan look-up of the caller, and making
        a canonical Layout costs microseconds."""
        known = self._canon
        if known is None:
            if self._numel == 0:
                known = (self.shape, (0,) * len(self.shape), 0)
            else:
                known = (self.shape, tuple(0 if d == 1 else s for d, s in
                                           zip(self.shape, self.strides, strict=True)), self.offset)
            object.__setattr__(self, "_canon", known)
        return known

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Layout):
            return NotImplemented
        return self is other or self._canonical_key() == other._canonical_key()

    def __hash__(self) -> int:
        known = self._hash
        if known is None:
            known = hash(self._canonical_key())
            object.__setattr__(self, "_hash", known)
        return known

    def span(self) -> tuple[int, int]:
        """``(lo, hi)``: every element's position ``p`` has ``lo <= p < hi``;
        ``(0, 0)`` for a layout with no element."""
        return self._span

    def is_contiguous(self) -> bool:
        """Whether the elements lie in C order from the offset, one after another."""
        known = self._contiguous
        if known is None:
            known = _is_contiguous(self.shape, self.strides) if self._numel else True
            object.__setattr__(self, "_contiguous", known)
        return known

    def is_distinct(self) -> bool:
        """Upstream's rule (upstream-facts §8): sorting the axes of extent above 1
        by |stride| (ties by axis), each stride exceeds the reach
        ``Σ (d_j − 1)·|s_j|`` of the axes before it.

        True proves that no two indices reach one position. The rule is
        sufficient, not necessary: ``Layout((3, 2), (2, 3))`` reaches 0 3 2 5 4 7,
        all distinct, yet is not distinct by it. It is exact where the |strides|
        of the axes above extent 1 divide one another, and on every layout that
        Slices, Permutes, Reshapes and Broadcasts make of a C-contiguous one;
        Windows can make distinct layouts it does not prove distinct."""
        known = self._distinct
        if known is None:
            known = self._is_distinct()
            object.__setattr__(self, "_distinct", known)
        return known

    def _is_distinct(self) -> bool:
        if self.numel == 0:
            return True
        axes = sorted(
            (abs(s), i)
            for i, (d, s) in enumerate(zip(self.shape, self.strides, strict=True))
            if d > 1
        )
        reach = 0
        for stride, i in axes:
            if stride <= reach:
                return False
            reach += (self.shape[i] - 1) * stride
        return True

    def positions(self) -> Iterator[int]:
        """Every element's position, in C order of the indices (for tests and
        small reference computations)."""
        if self.numel == 0:
            return
        idx = [0] * self.rank
        pos = self.offset
        while True:
            yield pos
            ax = self.rank - 1
            while ax >= 0:
                idx[ax] += 1
                pos += self.strides[ax]
                if idx[ax] < self.shape[ax]:
                    break
                pos -= self.strides[ax] * self.shape[ax]
                idx[ax] = 0
                ax -= 1
            if ax < 0:
                return

    # ---- moves --------------------------------------------------------------

    def move(self, m: Move) -> Layout | None:
        """The layout ``m`` makes of this one; ``None`` for a Reshape no strides
        express. Raises ``ValueError`` for a move that does not fit. Made once
        per shape, strides, offset and move (``_moved``): a view of a warm
        call's operand is the same layout object every call."""
        try:
            return _moved(self.shape, self.strides, self.offset, m)
        except TypeError:  # a move holding something unhashable: made afresh
            return self._move(m)

    def _move(self, m: Move) -> Layout | None:
        match m:
            case Reshape(shape):
                return self._reshape(shape)
            case Broadcast(shape):
                return self._broadcast(shape)
            case Permute(perm):
                return self._permute(perm)
            case Slice(ranges):
                return self._slice(ranges)
            case Windows(windows):
                return self._windows(windows)
        raise ValueError(f"Layout.move: {m!r} is not a move")

    def _reshape(self, shape: Sequence[int]) -> Layout | None:
        fn = "Layout.move(Reshape)"
        new = _check_shape(fn, "shape", shape)
        if numel(new) != self.numel:
            raise ValueError(
                f"{fn}: shape {list(new)} has {numel(new)} elements, the layout's "
                f"{list(self.shape)} has {self.numel}"
            )
        if self.numel == 0:
            return Layout(new, (0,) * len(new), 0)
        old = [(d, s) for d, s in zip(self.shape, self.strides, strict=True) if d != 1]
        strides = [0] * len(new)
        oi = 0
        ni = 0
        while ni < len(new):
            if new[ni] == 1:
                ni += 1
                continue
            # Take old axes and new axes until their products meet.
            o_start, n_start = oi, ni
            o_prod, n_prod = old[oi][0], new[ni]
            oi += 1
            ni += 1
            while o_prod != n_prod:
                if o_prod < n_prod:
                    o_prod *= old[oi][0]
                    oi += 1
                else:
                    n_prod *= new[ni]
                    ni += 1
            # The old group must be one run of memory.
            for k in range(o_start, oi - 1):
                if old[k][1] != old[k + 1][1] * old[k + 1][0]:
                    return None
            stride = old[oi - 1][1]
            for k in range(ni - 1, n_start - 1, -1):
                if new[k] == 1:
                    continue
                strides[k] = stride
                stride *= new[k]
        return Layout(new, tuple(strides), self.offset)

    def _broadcast(self, shape: Sequence[int]) -> Layout:
        fn = "Layout.move(Broadcast)"
        new = _check_shape(fn, "shape", shape)
        if len(new) < self.rank:
            raise ValueError(f"{fn}: shape {list(new)} has fewer axes than {list(self.shape)}")
        lead = len(new) - self.rank
        strides = [0] * lead
        for d, s, t in zip(self.shape, self.strides, new[lead:], strict=True):
            if d == t:
                strides.append(s)
            elif d == 1:
                strides.append(0)
            else:
                raise ValueError(
                    f"{fn}: shape {list(self.shape)} does not broadcast to {list(new)}"
                )
        if numel(new) == 0:
            return Layout(new, (0,) * len(new), 0)
        return Layout(new, tuple(strides), self.offset)

    def _permute(self, perm: Sequence[int]) -> Layout:
        p = tuple(int(i) for i in perm)
        if sorted(p) != list(range(self.rank)):
            raise ValueError(
                f"Layout.move(Permute): perm {list(p)} is not a permutation of {self.rank} axes"
            )
        return Layout(tuple(self.shape[i] for i in p), tuple(self.strides[i] for i in p),
                      self.offset)

    def _slice(self, ranges: Sequence[Range]) -> Layout:
        fn = "Layout.move(Slice)"
        if len(ranges) != self.rank:
            raise ValueError(f"{fn}: {len(ranges)} ranges for a layout of rank {self.rank}")
        offset = self.offset
        shape, strides = [], []
        for ax, (r, d, s) in enumerate(zip(ranges, self.shape, self.strides, strict=True)):
            if r.step == 0:
                raise ValueError(f"{fn}: range {r} along axis {ax} has step 0")
            if r.count < 0:
                raise ValueError(f"{fn}: range {r} along axis {ax} has a negative count")
            if r.count > 0:
                last = r.start + (r.count - 1) * r.step
                if not (0 <= r.start < d and 0 <= last < d):
                    raise ValueError(f"{fn}: range {r} along axis {ax} leaves [0, {d})")
                offset += r.start * s
            shape.append(r.count)
            strides.append(s * r.step)
        if numel(shape) == 0:
            return Layout(tuple(shape), (0,) * len(shape), 0)
        return Layout(tuple(shape), tuple(strides), offset)

    def _windows(self, windows: Sequence[Window]) -> Layout:
        fn = "Layout.move(Windows)"
        shape, strides = list(self.shape), list(self.strides)
        tail_shape, tail_strides = [], []
        prev = -1
        for w in windows:
            if not prev < w.axis < self.rank:
                raise ValueError(
                    f"{fn}: window axes must increase strictly within rank {self.rank}; "
                    f"got {w.axis}"
                )
            prev = w.axis
            count = window_count(fn, self.shape[w.axis], w)
            shape[w.axis] = count
            strides[w.axis] = self.strides[w.axis] * w.step
            tail_shape.append(w.size)
            tail_strides.append(self.strides[w.axis] * w.dilation)
        full = tuple(shape + tail_shape)
        check_rank(fn, "the result", len(full))
        if numel(full) == 0:
            return Layout(full, (0,) * len(full), 0)
        return Layout(full, tuple(strides + tail_strides), self.offset)


def _span(shape: tuple[int, ...], strides: tuple[int, ...], offset: int) -> tuple[int, int]:
    """The span of a layout with elements (``Layout.span``)."""
    lo = hi = offset
    for d, s in zip(shape, strides, strict=True):
        if s > 0:
            hi += s * (d - 1)
        elif s < 0:
            lo += s * (d - 1)
    return (lo, hi + 1)


def _is_contiguous(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Whether a layout with elements lies in C order, one after another."""
    expected = 1
    for d, s in zip(reversed(shape), reversed(strides), strict=True):
        if d != 1 and s != expected:
            return False
        expected *= d
    return True


@functools.lru_cache(maxsize=4096)
def _moved(shape: tuple[int, ...], strides: tuple[int, ...], offset: int, m: Move
           ) -> Layout | None:
    """``Layout.move``'s result for the layout of ``shape``, ``strides`` and
    ``offset`` (made on a miss; a move that does not fit caches nothing, and
    moves that compare equal make one layout, as ``_c_contiguous``'s keys)."""
    return Layout(shape, strides, offset)._move(m)


@functools.lru_cache(maxsize=1024)
def _c_contiguous(shape: tuple[int, ...], offset: int) -> Layout:
    """The C-order layout of ``shape`` from ``offset``. A shape is checked on a
    miss; a hit was checked when it was made (a failed check caches nothing),
    and keys that compare equal (2 and 2.0, 1 and True) make one layout."""
    sh = _check_shape("Layout.c_contiguous", "shape", shape)
    strides = [0] * len(sh)
    acc = 1
    for i in range(len(sh) - 1, -1, -1):
        strides[i] = acc
        acc *= sh[i]
    return Layout(sh, tuple(strides), int(offset))


def coalesce(*layouts: Layout) -> tuple[Layout, ...]:
    """Layouts of one shape with extent-1 axes dropped and neighbouring axes
    merged wherever every layout runs across them, without reordering axes.
    Every index of the result reaches the positions the same index, in C order,
    reached before."""
    if not 1 <= len(layouts) <= 4:
        raise ValueError(f"coalesce: takes 1 to 4 layouts, got {len(layouts)}")
    shape = layouts[0].shape
    for lay in layouts[1:]:
        if lay.shape != shape:
            raise ValueError(f"coalesce: shapes {list(shape)} and {list(lay.shape)} differ")
    if numel(shape) == 0:
        return tuple(Layout((0,), (0,), 0) for _ in layouts)
    keep = [i for i, d in enumerate(shape) if d != 1]
    out_shape: list[int] = []
    out_strides: list[list[int]] = [[] for _ in layouts]
    for i in keep:
        if out_shape and all(
            out_strides[k][-1] == lay.strides[i] * shape[i] for k, lay in enumerate(layouts)
        ):
            out_shape[-1] *= shape[i]
            for k, lay in enumerate(layouts):
                out_strides[k][-1] = lay.strides[i]
        else:
            out_shape.append(shape[i])
            for k, lay in enumerate(layouts):
                out_strides[k].append(lay.strides[i])
    return tuple(
        Layout(tuple(out_shape), tuple(out_strides[k]), lay.offset) for k, lay in enumerate(layouts)
    )

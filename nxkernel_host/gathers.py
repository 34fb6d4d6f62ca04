"""The host library's gather, range gather, scatter and assemble hooks.

Each copies bits (``movebits``) into its destination, for a call that fits,
the door passed. Where order matters (a scatter's updates), the updates to
one position are applied in one loop, in C order; threads split only what
no position shares (a gather's elements, an Add's rows along the axis or
ranges of positions in a row), so results do not depend on threads.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, Final, cast

import numpy as np
import numpy.typing as npt
from numba.cpython.unsafe.numbers import trailing_zeros

from nxkernel_core import dtype as D
from nxkernel_core import spec as S
from nxkernel_core.array import Array
from nxkernel_core.dtype import Dtype, Kind
from nxkernel_core.layout import Range
from nxkernel_core.prog import element

from . import pool
from .movebits import (
    Loop,
    contiguous_loop,
    dtype_has_nan,
    element_parts,
    key_pair,
    nan_key_width,
    numba_loop,
    part_bits,
    split_destination,
    split_operand,
    written_bits,
)
from .views import read, target

__all__ = ["assemble", "gather", "gather_blocks", "gather_loop", "gather_rows", "is_whole", "range_gather",
           "range_gather_loop", "region_slices", "scatter", "scatter_add_rows", "scatter_extreme_loop",
           "scatter_set_loop", "take_winners_loop"]

NDArray = npt.NDArray[Any]

#: The row size (bytes) from which a scatter-add with fewer rows than threads
#: splits each row's positions over the threads. Each thread still reads
#: every update (memory traffic as one thread's), so the split pays only where
#: the row's random accesses miss the first-level cache (measured, CPU time of
#: the busier of two threads over one thread's, 1e6 updates: no less into 1e4
#: float32 positions, 0.75-0.9 into 1e5, 0.6 into 1e6 or more). Splitting
#: the updates instead, each thread bucketing half of them by range (order
#: kept) for the range's thread to apply, measured slower on the 2-core Zen 3:
#: one thread bucketing half of 1e6 updates (into 1e5 float32) took 1.1-1.5
#: ms and applying a quarter from the buckets 0.5-0.6, against 1.3-1.6 ms for
#: a thread's whole share here (load average 1, the same runs).
_SPLIT_BYTES: Final = 128 * 1024
#: The destination size (bytes) from which a gather of whole blocks splits
#: over threads: below it a second thread's start and its first touches of
#: fresh memory cost more than its half of the copy (measured on the 2-core
#: Zen 4, rows of 4 KiB: one thread 0.35 ms for 4 MiB, two 0.38; 0.93 and
#: 1.15 for 8 MiB; 3.0 and 2.3 for 16 MiB).
_SPLIT_COPY_BYTES: Final = 16 * 1024 * 1024
#: The count of a number's trailing zero bits, as compiled code calls it
#: (Numba's intrinsic, typed for the checker).
_trailing_zeros: Final = cast("Callable[[np.uint64], np.uint64]", trailing_zeros)
#: How many runs of 16 updates ``_cut_positions`` samples in a row.
_RUNS: Final = 16


@Loop
def gather_rows(x: NDArray, index: NDArray, out: NDArray) -> None:
    """The gather of ``[outer, n]`` positions from ``[outer, d]`` rows (inner extent 1)."""
    # A negative position is a large unsigned one: one comparison reads zero
    # bits for both sides (and Numba wraps no negative index).
    d = np.uint64(x.shape[1])
    for o in range(index.shape[0]):
        for i in range(index.shape[1]):
            p = np.uint64(index[o, i])
            if p < d:
                out[o, i] = x[o, p]
            else:
                out[o, i] = 0


@contiguous_loop
def gather_blocks(x: NDArray, index: NDArray, out: NDArray) -> None:
    """The gather of whole inner blocks, ``out[o, i, :] = x[o, index[o, i], :]``
    (zero bits where the position is outside [0, d)): a take's index, the
    same along the inner axis."""
    d = np.uint64(x.shape[1])
    inner = out.shape[2]
    for o in range(index.shape[0]):
        for i in range(index.shape[1]):
            p = np.uint64(index[o, i])
            if p < d:
                for k in range(inner):
                    out[o, i, k] = x[o, p, k]
            else:
                for k in range(inner):
                    out[o, i, k] = 0


@Loop
def gather_loop(x: NDArray, index: NDArray, out: NDArray) -> None:
    outer, n, inner = index.shape
    d = x.shape[1]
    for o in range(outer):
        for i in range(n):
            for k in range(inner):
                p = index[o, i, k]
                if 0 <= p < d:
                    out[o, i, k] = x[o, p, k]
                else:
                    out[o, i, k] = 0


@Loop
def range_gather_loop(x: NDArray, starts: NDArray, out: NDArray) -> None:
    outer, n, inner = starts.shape
    run = out.shape[2]
    d = x.shape[1]
    for o in range(outer):
        for i in range(n):
            for j in range(run):
                for k in range(inner):
                    s = starts[o, i, k]
                    # s + j lies in [0, d), compared without overflowing int64.
                    if -j <= s < d - j:
                        out[o, i, j, k] = x[o, s + j, k]
                    else:
                        out[o, i, j, k] = 0


@numba_loop
def _scatter_set_row(dst: NDArray, index: NDArray, updates: NDArray) -> None:
    d = dst.shape[0]
    for i in range(index.shape[0]):
        p = index[i]
        if 0 <= p < d:
            dst[p] = updates[i]


@Loop
def scatter_set_loop(dst: NDArray, index: NDArray, updates: NDArray) -> None:
    outer, n, inner = index.shape
    d = dst.shape[1]
    for o in range(outer):
        if inner == 1:
            _scatter_set_row(dst[o, :, 0], index[o, :, 0], updates[o, :, 0])
            continue
        for i in range(n):
            for k in range(inner):
                p = index[o, i, k]
                if 0 <= p < d:
                    dst[o, p, k] = updates[o, i, k]


# An Add chains s = (+0 + s) + u from s = into's element. The +0 makes the first
# term +0 + x, as the contract states; at later terms it changes nothing, as a
# chain from +0 is never -0 (a sum is -0 only where both terms are).


@contiguous_loop
def scatter_add_rows(dst: NDArray, index: NDArray, updates: NDArray, zero: Any, lo: np.int64,
                     hi: np.int64) -> None:
    """The Add of ``[outer, n]`` updates into ``[outer, d]`` rows (inner extent 1),
    of the updates whose position lies in [lo, hi) alone where that is not
    every position: 64 positions at a time compared (vector code) into a mask,
    whose set bits are then applied in order, so the updates of other
    positions cost no branch."""
    # A negative position is a large unsigned one: one comparison drops both sides.
    d = np.uint64(dst.shape[1])
    n = index.shape[1]
    if lo <= 0 and hi >= dst.shape[1]:
        for o in range(index.shape[0]):
            for i in range(n):
                p = np.uint64(index[o, i])
                if p < d:
                    dst[o, p] = (zero + dst[o, p]) + updates[o, i]
        return
    first, width = np.uint64(lo), np.uint64(hi - lo)
    whole = n - n % 64
    for o in range(index.shape[0]):
        for c in range(0, whole, 64):
            mask = np.uint64(0)
            for j in range(64):
                mask |= np.uint64(np.uint64(index[o, c + j]) - first < width) << np.uint64(j)
            while mask != 0:
                at = c + np.int64(_trailing_zeros(mask))
                mask &= mask - np.uint64(1)
                p = np.uint64(index[o, at])
                dst[o, p] = (zero + dst[o, p]) + updates[o, at]
        for i in range(whole, n):
            p = np.uint64(index[o, i])
            if p - first < width:
                dst[o, p] = (zero + dst[o, p]) + updates[o, i]


@Loop
def _scatter_add_loop(dst: NDArray, index: NDArray, updates: NDArray, zero: Any) -> None:
    outer, n, inner = index.shape
    d = dst.shape[1]
    for o in range(outer):
        for i in range(n):
            for k in range(inner):
                p = index[o, i, k]
                if 0 <= p < d:
                    dst[o, p, k] = (zero + dst[o, p, k]) + updates[o, i, k]


@Loop
def scatter_extreme_loop(cur1: NDArray, cur2: NDArray, index: NDArray, upd1: NDArray,
                         upd2: NDArray, winner: NDArray, maximum: bool, has_nan: bool,
                         nan_key: Any) -> None:
    outer, n, inner = index.shape
    d = cur1.shape[1]
    for o in range(outer):
        for i in range(n):
            for k in range(inner):
                p = index[o, i, k]
                if p < 0 or p >= d:
                    continue
                if winner[o, p, k] == -2:
                    winner[o, p, k] = -1
                a1 = cur1[o, p, k]
                a2 = cur2[o, p, k]
                b1 = upd1[o, i, k]
                b2 = upd2[o, i, k]
                if maximum:
                    # A NaN's key is the greatest: it wins over numbers and keeps
                    # its place against later NaNs.
                    take = b1 > a1 or (b1 == a1 and b2 > a2)
                elif has_nan and a1 == nan_key:
                    take = False
                elif has_nan and b1 == nan_key:
                    take = True
                else:
                    take = b1 < a1 or (b1 == a1 and b2 < a2)
                if take:
                    cur1[o, p, k] = b1
                    cur2[o, p, k] = b2
                    winner[o, p, k] = i


@Loop
def take_winners_loop(dst: NDArray, updates: NDArray, winner: NDArray) -> None:
    outer, d, inner = dst.shape
    for o in range(outer):
        for p in range(d):
            for k in range(inner):
                w = winner[o, p, k]
                if w >= 0:
                    dst[o, p, k] = updates[o, w, k]


# --------------------------------------------------------------------------
# Gathers
# --------------------------------------------------------------------------


def gather(spec: S.Gather, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
    """``dst[i] = x[i with index[i] along axis]``; a position outside [0, d) reads
    zero bits. Operands: index (int64), x."""
    (dst,), (index, x) = dsts, operands
    axis = spec.axis
    idx = split_operand(read(index), axis)
    with written_bits(dst) as outs:
        for out, src in zip(outs, part_bits(read(x)), strict=True):
            _gather_at(split_operand(src, axis), idx, split_destination(out, axis))


def _gather_at(x: NDArray, index: NDArray, out: NDArray) -> None:
    """The gather over ``[outer, ·, inner]`` arrays. An index the same along
    the inner axis (``nx.take``'s) copies whole blocks, split over threads
    only from ``_SPLIT_COPY_BYTES``; rows of an inner extent 1 go to a loop
    of their own; either split by rows, or by ranges of positions in one row:
    each element is its own, so no split changes a bit."""
    outer, n, inner = index.shape
    if inner > 1 and index.strides[2] == 0:
        parts = 1 if out.nbytes < _SPLIT_COPY_BYTES else pool.parts_for(outer * n, out.size)
        _split_positions(gather_blocks, x, index[:, :, 0], out, parts)
    elif inner != 1:
        gather_loop(x, index, out)
    else:
        _split_positions(gather_rows, x[:, :, 0], index[:, :, 0], out[:, :, 0],
                         pool.parts_for(outer * n, outer * n))


def _split_positions(loop: Callable[[NDArray, NDArray, NDArray], None], x: NDArray,
                     index: NDArray, out: NDArray, parts: int) -> None:
    """``loop(x, index, out)`` for ``index [outer, n]`` on up to ``parts``
    threads: by rows where there are as many, else by ranges of positions."""
    outer, n = index.shape
    if outer >= parts:
        jobs = [partial(loop, x[a:b], index[a:b], out[a:b]) for a, b in pool.spans(outer, parts)]
    else:
        jobs = [partial(loop, x, index[:, a:b], out[:, a:b]) for a, b in pool.spans(n, parts)]
    pool.parallel(jobs)


def range_gather(spec: S.RangeGather, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
    """``dst[…, i, j, …] = x[…, starts[…, i, …] + j, …]`` with j in [0, run) on the
    axis inserted after ``axis``; a position outside [0, d) reads zero bits.
    Operands: starts (int64), x."""
    (dst,), (starts, x) = dsts, operands
    axis = spec.axis
    st = split_operand(read(starts), axis)
    outer, n, inner = st.shape
    with written_bits(dst) as outs:
        for out, src in zip(outs, part_bits(read(x)), strict=True):
            dst4 = np.reshape(out, (outer, n, spec.run, inner), copy=False)
            range_gather_loop(split_operand(src, axis), st, dst4)


# --------------------------------------------------------------------------
# Scatter
# --------------------------------------------------------------------------


def scatter(spec: S.Scatter, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
    """``dst`` is ``into`` with each update combined, in C order of the updates, at
    the position ``index`` holds along ``axis``; an update outside [0, d) is
    dropped and an element no update reaches keeps into's bits.

    Set takes the last update's bits. Add computes ``+0 + into + u1 + u2 + …``
    left to right in the dtype (integers wrap; complex part by part; floats
    narrower than float32 in float32, rounded once into the dtype). Max and Min
    are Prog's Maximum and Minimum chained from into: −0 below +0, the first NaN
    kept with its bits (on booleans Or and And). ``unique`` is only a promise:
    duplicates still combine in C order. Operands: into, index (int64), updates;
    into may be identical to dst.
    """
    (dst,), (into, index, updates) = dsts, operands
    dt = dst.dtype
    idx = split_operand(read(index), spec.axis)
    if spec.combine is S.Combine.ADD and dt.kind is Kind.FLOAT and dt.bits < 32:
        _scatter_add_narrow(spec.axis, dst, into, idx, updates)
        return
    with written_bits(dst) as outs:
        # Fast path: an into identical to a byte-wide dst already holds its
        # bits, which saves a pass (a sub-byte dst's codes are fresh).
        if not (into.identical(dst) and not dt.is_sub_byte):
            for out, src in zip(outs, part_bits(read(into)), strict=True):
                out[...] = src
        if spec.combine is S.Combine.SET:
            for out, upd in zip(outs, part_bits(read(updates)), strict=True):
                scatter_set_loop(split_destination(out, spec.axis), idx, split_operand(upd, spec.axis))
        elif spec.combine is S.Combine.ADD:
            _scatter_add(spec.axis, dt, dst, outs, idx, updates)
        else:
            _scatter_extreme(spec, dt, outs, into, idx, updates)


def _scatter_add(axis: int, dt: Dtype, dst: Array, outs: list[NDArray], idx: NDArray,
                 updates: Array) -> None:
    """Add at a dtype of its own compute width: integers on their bits (the same
    wrapping sum signed or not), floats and complex parts in their dtype."""
    if dt.kind is Kind.FLOAT or dt.kind is Kind.COMPLEX:
        view = target(dst)
        assert view is not None
        # The parts' values over the bits being written (a scratch's, where dst
        # does not reshape without a copy).
        sums = [o.view(p.dtype) for o, p in zip(outs, element_parts(view), strict=True)]
        terms = element_parts(read(updates))
    else:
        sums, terms = outs, part_bits(read(updates))
    for out, upd in zip(sums, terms, strict=True):
        _add_at(split_destination(out, axis), idx, split_operand(upd, axis), out.dtype.type(0))
    if dt.is_sub_byte:
        # int4 and uint4 codes wrapped modulo 256 in a byte; keep them modulo 16.
        outs[0] &= np.uint8(0xF)


def _add_at(dst: NDArray, index: NDArray, updates: NDArray, zero: Any) -> None:
    """Chain each update onto ``dst`` (all ``[outer, ·, inner]``) at its position,
    in order of the updates. Rows of an inner extent 1 go to a loop of their
    own, split over threads by whole rows, or, with fewer rows than threads
    and rows of at least ``_SPLIT_BYTES``, by ranges of positions (each thread
    reads every update and applies those in its range): either way each
    position's updates stay in one thread, in order, so the bits do not
    depend on the threads."""
    outer, n, inner = index.shape
    if inner != 1:
        _scatter_add_loop(dst, index, updates, zero)
        return
    dst2, index2, updates2 = dst[:, :, 0], index[:, :, 0], updates[:, :, 0]
    d = dst2.shape[1]
    parts = pool.parts_for(pool.count(), outer * n)
    if outer < parts and d * dst2.itemsize >= _SPLIT_BYTES:
        pool.parallel([partial(scatter_add_rows, dst2, index2, updates2, zero, np.int64(a),
                               np.int64(b)) for a, b in _position_spans(index2, d, parts)])
        return
    whole = np.int64(0), np.int64(d)
    pool.parallel([partial(scatter_add_rows, dst2[a:b], index2[a:b], updates2[a:b], zero, *whole)
                   for a, b in pool.spans(outer, min(parts, outer))])


def _position_spans(index: NDArray, d: int, parts: int) -> list[tuple[int, int]]:
    """``[0, d)`` cut into at most ``parts`` contiguous, non-empty ranges of
    positions that a sample of ``index`` (``[outer, n]``) fills about equally,
    so that skewed positions (a few frequent ones) still share the work."""
    cuts = np.zeros(parts + 1, np.int64)
    cuts[-1] = d
    _cut_positions(index, cuts)
    return [(a, b) for a, b in itertools.pairwise(cuts.tolist()) if b > a]


@Loop
def _cut_positions(index: NDArray, cuts: NDArray) -> None:
    """Set ``cuts[1:-1]`` (``cuts[-1]`` holds d) to positions in [0, d), in
    order: evenly spaced where each range holds at most a quarter more than
    its share of a sample of ``index``'s positions in [0, d), else where they
    cut that sample into nearly equal parts. The sample is ``_RUNS`` runs of
    16 updates spread over each row (runs, not single updates far apart: each
    would read a cache line of its own)."""
    outer, n = index.shape
    parts, d = cuts.shape[0] - 1, cuts[-1]
    for k in range(1, parts):
        cuts[k] = d * k // parts
    run = min(n, 16)
    sample = np.empty(outer * _RUNS * run, np.int64)
    shares = np.zeros(parts, np.int64)
    m = 0
    for o in range(outer):
        for r in range(_RUNS):
            start = r * (n - run) // _RUNS
            for j in range(run):
                p = index[o, start + j]
                if 0 <= p < d:
                    sample[m] = p
                    m += 1
                    k = 0
                    while p >= cuts[k + 1]:
                        k += 1
                    shares[k] += 1
    if 4 * parts * shares.max() <= 5 * m:
        return
    # Shell's sort (Ciura's gaps): a few hundred positions, in loops Numba
    # compiles fast (its np.sort took seconds to compile).
    for gap in (57, 23, 10, 4, 1):
        for i in range(gap, m):
            p = sample[i]
            j = i
            while j >= gap and sample[j - gap] > p:
                sample[j] = sample[j - gap]
                j -= gap
            sample[j] = p
    for k in range(1, parts):
        cuts[k] = sample[m * k // parts]


def _scatter_add_narrow(axis: int, dst: Array, into: Array, idx: NDArray, updates: Array) -> None:
    """Add at a float narrower than float32: the sums in float32, each rounded
    once into the dtype by the store rule (which turns an e5m2 infinity into
    ±57344); into's bits where no update lands."""
    dt = dst.dtype
    start = read(into)
    acc = start.astype(np.float32, order="C")
    acc3 = split_destination(acc, axis)
    _add_at(acc3, idx, split_operand(read(updates).astype(np.float32), axis), np.float32(0))
    reached = np.zeros(acc3.shape, np.bool_)
    o, i, k = np.nonzero((idx >= 0) & (idx < acc3.shape[1]))
    reached[o, idx[o, i, k], k] = True
    with np.errstate(invalid="ignore"):
        # A NaN sum stores as a NaN of the dtype (its bits are not a move's).
        (summed,) = part_bits(D.of_float(dt, acc.astype(np.float64)))
    (kept,) = part_bits(start)
    result = np.where(reached.reshape(acc.shape), summed, kept)
    with written_bits(dst) as (out,):
        out[...] = result


def _scatter_extreme(spec: S.Scatter, dt: Dtype, outs: list[NDArray], into: Array, idx: NDArray,
                     updates: Array) -> None:
    """Max and Min: the winner at each position by order keys, then its bits."""
    axis = spec.axis
    # The running extremes' keys, written in place (so never a broadcast).
    cur1, cur2 = (np.array(key) for key in key_pair(dt, read(into), axis))
    upd_v = read(updates)
    upd1, upd2 = key_pair(dt, upd_v, axis)
    # -2: no update reached the position; -1: into's element stands; else the
    # winning update's index along the axis.
    winner = np.full(cur1.shape, -2, np.int64)
    nan_key = upd1.dtype.type((1 << nan_key_width(dt)) - 1)
    scatter_extreme_loop(cur1, cur2, idx, upd1, upd2, winner, spec.combine is S.Combine.MAX,
                         dtype_has_nan(dt), nan_key)
    if dt.kind is Kind.BOOLEAN:
        # Maximum and Minimum of booleans are Or and And: a reached position
        # holds the truth (0 or 1), which is its winner's key.
        out = split_destination(outs[0], axis)
        reached = winner >= -1
        out[reached] = cur1[reached].astype(np.uint8)
        return
    for out, upd in zip(outs, part_bits(upd_v), strict=True):
        take_winners_loop(split_destination(out, axis), split_operand(upd, axis), winner)


# --------------------------------------------------------------------------
# Assemble
# --------------------------------------------------------------------------


def region_slices(region: tuple[Range, ...]) -> tuple[slice, ...]:
    """NumPy slices selecting a region's ranges (each non-empty)."""
    out = []
    for r in region:
        stop = r.start + (r.count - 1) * r.step + (1 if r.step > 0 else -1)
        # A reversed range through index 0 stops before the start of the axis.
        out.append(slice(r.start, stop if stop >= 0 else None, r.step))
    return tuple(out)


def is_whole(region: tuple[Range, ...], shape: tuple[int, ...]) -> bool:
    """Whether ``region`` holds every index of ``shape``."""
    return all(r.count == d for r, d in zip(region, shape, strict=True))


def assemble(spec: S.Assemble, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
    """``dst`` of ``shape`` holds, at each index, the bits of the last piece whose
    region holds it, and the fill's bits where none does. Operands: one piece
    per region; the first may be identical to dst where its region is the
    whole result."""
    (dst,) = dsts
    whole = [i for i, region in enumerate(spec.regions) if is_whole(region, spec.shape)]
    # Pieces before the last whole one are overwritten everywhere, and so is the fill.
    first = whole[-1] if whole else 0
    with written_bits(dst) as outs:
        if not whole:
            fill = part_bits(np.asarray(element(dst.dtype, spec.fill)))
            for out, bits in zip(outs, fill, strict=True):
                out[...] = bits
        for piece, region in zip(operands[first:], spec.regions[first:], strict=True):
            if piece.numel == 0:
                continue
            # Fast path: a byte-wide piece identical to dst over the whole
            # result in order already holds its bits.
            if (piece.identical(dst) and not dst.dtype.is_sub_byte
                    and all(r.start == 0 and r.step == 1 for r in region)):
                continue
            sl = region_slices(region)
            for out, src in zip(outs, part_bits(read(piece)), strict=True):
                out[sl] = src

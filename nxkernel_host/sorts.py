"""The host library's sort and numbering hooks: stable sorts and binary
searches of order keys (``movebits.sort_keys``), for a call that fits, the door
passed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from nxkernel_core import dtype as D
from nxkernel_core import spec as S
from nxkernel_core.array import Array

from .gathers import gather_loop
from .movebits import (
    Loop,
    c_ordered,
    key_pair,
    part_bits,
    read_only,
    sort_keys,
    split_destination,
    written_bits,
)
from .views import read, target

__all__ = ["RADIX_MIN", "TOP_K_FRACTION", "numbering", "sort"]

NDArray = npt.NDArray[Any]


#: Rows at least this long with 32- or 64-bit keys sort by the radix kernel;
#: shorter rows (and 8- and 16-bit keys, which NumPy radix-sorts itself) by
#: NumPy's stable sort.
RADIX_MIN: Final = 256

#: A top-k with k at most this fraction of the row selects by partition before
#: sorting only the k chosen elements.
TOP_K_FRACTION: Final = 0.25


# The radix sorts are stable LSD sorts by bytes, one counting pass for every
# byte first; a pass whose byte all keys share is skipped. out[r] receives the
# first out.shape[1] positions of row r in sorted order.


@Loop
def _radix32_loop(keys: NDArray, out: NDArray) -> None:
    """Rows of 32-bit keys, each key packed above its position in one uint64 so a
    pass moves 8 bytes an element."""
    rows, n = keys.shape
    a = np.empty(n, np.uint64)
    b = np.empty(n, np.uint64)
    count = np.empty((4, 256), np.int64)
    mask = np.uint64(255)
    low = np.uint64(0xFFFFFFFF)
    for r in range(rows):
        count[:, :] = 0
        for i in range(n):
            v = (np.uint64(keys[r, i]) << np.uint64(32)) | np.uint64(i)
            a[i] = v
            for p in range(4):
                count[p, (v >> np.uint64(32 + 8 * p)) & mask] += 1
        for p in range(4):
            c = count[p]
            shift = np.uint64(32 + 8 * p)
            if c[(a[0] >> shift) & mask] == n:
                continue
            total = 0
            for digit in range(256):
                t = c[digit]
                c[digit] = total
                total += t
            for i in range(n):
                v = a[i]
                digit = (v >> shift) & mask
                j = c[digit]
                c[digit] = j + 1
                b[j] = v
            a, b = b, a
        for i in range(out.shape[1]):
            out[r, i] = np.int64(a[i] & low)


@Loop
def _radix64_loop(keys: NDArray, out: NDArray) -> None:
    """Rows of 64-bit keys, moved beside their positions."""
    rows, n = keys.shape
    ka = np.empty(n, np.uint64)
    kb = np.empty(n, np.uint64)
    pa = np.empty(n, np.int64)
    pb = np.empty(n, np.int64)
    count = np.empty((8, 256), np.int64)
    mask = np.uint64(255)
    for r in range(rows):
        count[:, :] = 0
        for i in range(n):
            v = np.uint64(keys[r, i])
            ka[i] = v
            pa[i] = i
            for p in range(8):
                count[p, (v >> np.uint64(8 * p)) & mask] += 1
        for p in range(8):
            c = count[p]
            shift = np.uint64(8 * p)
            if c[(ka[0] >> shift) & mask] == n:
                continue
            total = 0
            for digit in range(256):
                t = c[digit]
                c[digit] = total
                total += t
            for i in range(n):
                v = ka[i]
                digit = (v >> shift) & mask
                j = c[digit]
                c[digit] = j + 1
                kb[j] = v
                pb[j] = pa[i]
            ka, kb = kb, ka
            pa, pb = pb, pa
        for i in range(out.shape[1]):
            out[r, i] = pa[i]


@Loop
def _choose_loop(keys: NDArray, kth: NDArray, out: NDArray) -> None:
    """In increasing position, the positions of each row's keys below its kth
    key, then of as many of its equals as fill the row of out."""
    rows, n = keys.shape
    k = out.shape[1]
    for r in range(rows):
        t = kth[r]
        below = 0
        for i in range(n):
            if keys[r, i] < t:
                below += 1
        ties = k - below
        j = 0
        for i in range(n):
            v = keys[r, i]
            if v < t or (v == t and ties > 0):
                if v == t:
                    ties -= 1
                out[r, j] = i
                j += 1


@Loop
def _numbering_loop(keys1: NDArray, keys2: NDArray, x1: NDArray, x2: NDArray, right: bool,
                    out: NDArray) -> None:
    rows, m = keys1.shape
    n = x1.shape[1]
    for r in range(rows):
        for j in range(n):
            a1 = x1[r, j]
            a2 = x2[r, j]
            lo = 0
            hi = m
            while lo < hi:
                mid = (lo + hi) // 2
                b1 = keys1[r, mid]
                b2 = keys2[r, mid]
                # Left counts keys below x; right also counts its equals.
                if b1 < a1 or (b1 == a1 and (b2 < a2 or (right and b2 == a2))):
                    lo = mid + 1
                else:
                    hi = mid
            out[r, j] = lo


# --------------------------------------------------------------------------
# Sort
# --------------------------------------------------------------------------


def _argsort(key: NDArray, take: int) -> NDArray:
    """The first ``take`` positions of each row of ``key`` (unsigned) in a stable
    ascending sort."""
    rows, n = key.shape
    if key.dtype.itemsize >= 4 and RADIX_MIN <= n < 2**32:
        # Fast path: a radix sort of long rows, linear in n where NumPy's stable
        # sort of 32- and 64-bit integers is a merge sort (8- and 16-bit ones
        # NumPy radix-sorts itself).
        out = np.empty((rows, take), np.int64)
        if key.dtype.itemsize == 4:
            _radix32_loop(key, out)
        else:
            _radix64_loop(key, out)
        return out
    return np.argsort(key, axis=1, kind="stable")[:, :take]


def _take_rows(a: NDArray, order: NDArray) -> NDArray:
    """``a[r, order[r, j]]`` at each ``[r, j]``: positions in range, rows along axis 1."""
    out = np.empty(order.shape, a.dtype)
    gather_loop(read_only(a[..., None]), read_only(order[..., None]), out[..., None])
    return out


def _top_k(key: NDArray, k: int) -> NDArray:
    """The first ``k`` positions of each row of ``key`` in a stable sort, choosing
    them by partition: every key below the k-th smallest, then its equals in
    increasing position, then sorting the k chosen alone."""
    kth = np.partition(key, k - 1, axis=1)[:, k - 1]
    cand = np.empty((key.shape[0], k), np.int64)
    _choose_loop(key, kth, cand)
    step = _argsort(_take_rows(key, cand), k)
    return _take_rows(cand, step)


def _stable_order(keys: list[NDArray], k: int) -> NDArray:
    """The first ``k`` positions of each row in a stable sort by ``keys`` (most
    significant first), rows along axis 1."""
    n = keys[0].shape[1]
    if len(keys) == 1 and 0 < k <= TOP_K_FRACTION * n:
        # Fast path: a top-k sorts k chosen elements per row, not the row.
        return _top_k(keys[0], k)
    order: NDArray | None = None
    # Least significant key first: each later stable sort keeps the earlier order
    # among its equals.
    for key in reversed(keys):
        if order is None:
            order = _argsort(key, n)
        else:
            step = _argsort(_take_rows(key, order), n)
            order = _take_rows(order, step)
    assert order is not None
    return order[:, :k]


def sort(spec: S.Sort, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
    """A stable sort along ``axis`` in the total order −inf < … < −0 < +0 < … <
    +inf < NaN (all NaNs equal; complex by real, then imaginary part, a NaN part
    a NaN; integers by value; false < true). ``descending`` reverses the order,
    equal elements keeping increasing positions; ``k`` keeps the first k.
    Destinations: values (x's bits) and positions (int64). Operand: x."""
    (values, positions), (x,) = dsts, operands
    axis = spec.axis
    n = x.shape[axis]
    k = n if spec.k is None else spec.k
    lead = x.shape[:axis] + x.shape[axis + 1:]
    rows = math.prod(lead)
    v = read(x)
    keys = [np.moveaxis(key, axis, -1).reshape(rows, n) for key in sort_keys(x.dtype, v)]
    if x.dtype is D.complex64:
        # One 64-bit key sorts in one pass: real key high, imaginary low.
        re, im = keys
        keys = [(re.astype(np.uint64) << np.uint64(32)) | im.astype(np.uint64)]
    if spec.descending:
        # Complemented keys reverse the order, and a stable sort of them keeps
        # equal elements in increasing position.
        keys = [~key for key in keys]
    order = _stable_order(keys, k)

    def back(a: NDArray) -> NDArray:
        return np.moveaxis(a.reshape(*lead, k), -1, axis)

    pos = target(positions)
    assert pos is not None
    pos[...] = back(order)
    with written_bits(values) as outs:
        for out, src in zip(outs, part_bits(v), strict=True):
            rows_src = np.moveaxis(src, axis, -1).reshape(rows, n)
            out[...] = back(_take_rows(rows_src, order))


# --------------------------------------------------------------------------
# Numbering
# --------------------------------------------------------------------------


def numbering(spec: S.Numbering, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
    """For each element of x ``[b…; n]``, the number of keys ``[b…; m]`` of its
    batch row below it (LEFT) or not above it (RIGHT) in sort's total order (−0
    below +0, NaN above all, NaNs equal), by binary search: the keys are
    promised ascending in that order. Destination: int64."""
    (dst,), (keys, x) = dsts, operands
    last = x.rank - 1
    k1, k2 = key_pair(keys.dtype, read(keys), last)
    x1, x2 = key_pair(x.dtype, read(x), last)
    view = target(dst)
    assert view is not None
    with c_ordered(view) as out:
        _numbering_loop(k1[..., 0], k2[..., 0], x1[..., 0], x2[..., 0],
                        spec.side is S.Side.RIGHT, split_destination(out, last)[..., 0])

"""Numba kernels of lane order (design.md §6), the host's float Sum and Prod.

A reduction's terms are cut into blocks of ``BLOCK`` terms whose values lane
order fixes: 16 lanes per block, then the blocks combined in a binary tree
(``tree_add``, ``tree_mul``, ``tree_cmul``). Every kernel computes a function
of its input alone, whatever the split of the work: the pool (``pool``) only
decides which thread computes which block, so results are the same bits on
any number of threads.

Kernels take C-contiguous arrays; none uses fastmath (it would reassociate)
or calls a recursive helper (``cache=True`` breaks on recursion, numba #6061).
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np
import numpy.typing as npt
from numba import njit

__all__ = ["BLOCK", "cmul", "cprod_blocks", "prod_blocks", "sqdev_blocks", "sum_blocks", "tree_add",
           "tree_cmul", "tree_mul"]

Arr = npt.NDArray[Any]

#: Terms per lane-order block, and lanes per block (design.md §6).
BLOCK: Final = 1024


# ---------------------------------------------------------------------------
# Lane order (design.md §6): blocks of 1024 terms, 16 lanes each
# ---------------------------------------------------------------------------


@njit(nogil=True, cache=True)
def sum_blocks(x: Arr, out: Arr) -> None:  # pragma: no cover - compiled
    """``out[r, b]`` = the lane-order sum of block ``b`` of row ``r`` of ``x``,
    each lane chained from +0 in ``out``'s dtype (terms widen exactly)."""
    n = x.shape[1]
    lanes = np.zeros(16, out.dtype)
    zero = lanes[0]
    for r in range(x.shape[0]):
        for b in range(out.shape[1]):
            lo = b * 1024
            seg = x[r, lo:min(lo + 1024, n)]
            m = seg.size
            full = m - m % 16
            # Sixteen scalars, not an array: they stay in registers and the
            # loop vectorises (an array of lanes ran 1.5x slower).
            a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = zero
            a8 = a9 = a10 = a11 = a12 = a13 = a14 = a15 = zero
            for t in range(0, full, 16):
                c = seg[t:t + 16]
                a0 += c[0]
                a1 += c[1]
                a2 += c[2]
                a3 += c[3]
                a4 += c[4]
                a5 += c[5]
                a6 += c[6]
                a7 += c[7]
                a8 += c[8]
                a9 += c[9]
                a10 += c[10]
                a11 += c[11]
                a12 += c[12]
                a13 += c[13]
                a14 += c[14]
                a15 += c[15]
            lanes[0] = a0
            lanes[1] = a1
            lanes[2] = a2
            lanes[3] = a3
            lanes[4] = a4
            lanes[5] = a5
            lanes[6] = a6
            lanes[7] = a7
            lanes[8] = a8
            lanes[9] = a9
            lanes[10] = a10
            lanes[11] = a11
            lanes[12] = a12
            lanes[13] = a13
            lanes[14] = a14
            lanes[15] = a15
            for t in range(m - full):
                lanes[t] += seg[full + t]
            for i in range(8):
                lanes[i] += lanes[i + 8]
            for i in range(4):
                lanes[i] += lanes[i + 4]
            for i in range(2):
                lanes[i] += lanes[i + 2]
            out[r, b] = lanes[0] + lanes[1]


@njit(nogil=True, cache=True)
def sqdev_blocks(x: Arr, mean: Arr, out: Arr) -> None:  # pragma: no cover - compiled
    """``out[r, b]`` = the lane-order sum over block ``b`` of row ``r`` of
    ``(x − mean[r])²``, computed in float64 (``mean`` and ``out`` float64)."""
    n = x.shape[1]
    lanes = np.zeros(16, np.float64)
    for r in range(x.shape[0]):
        mu = mean[r]
        for b in range(out.shape[1]):
            lo = b * 1024
            seg = x[r, lo:min(lo + 1024, n)]
            m = seg.size
            full = m - m % 16
            # Sixteen scalars in registers, as in sum_blocks.
            a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = 0.0
            a8 = a9 = a10 = a11 = a12 = a13 = a14 = a15 = 0.0
            for t in range(0, full, 16):
                c = seg[t:t + 16]
                d0 = c[0] - mu
                d1 = c[1] - mu
                d2 = c[2] - mu
                d3 = c[3] - mu
                d4 = c[4] - mu
                d5 = c[5] - mu
                d6 = c[6] - mu
                d7 = c[7] - mu
                d8 = c[8] - mu
                d9 = c[9] - mu
                d10 = c[10] - mu
                d11 = c[11] - mu
                d12 = c[12] - mu
                d13 = c[13] - mu
                d14 = c[14] - mu
                d15 = c[15] - mu
                a0 += d0 * d0
                a1 += d1 * d1
                a2 += d2 * d2
                a3 += d3 * d3
                a4 += d4 * d4
                a5 += d5 * d5
                a6 += d6 * d6
                a7 += d7 * d7
                a8 += d8 * d8
                a9 += d9 * d9
                a10 += d10 * d10
                a11 += d11 * d11
                a12 += d12 * d12
                a13 += d13 * d13
                a14 += d14 * d14
                a15 += d15 * d15
            lanes[0] = a0
            lanes[1] = a1
            lanes[2] = a2
            lanes[3] = a3
            lanes[4] = a4
            lanes[5] = a5
            lanes[6] = a6
            lanes[7] = a7
            lanes[8] = a8
            lanes[9] = a9
            lanes[10] = a10
            lanes[11] = a11
            lanes[12] = a12
            lanes[13] = a13
            lanes[14] = a14
            lanes[15] = a15
            for t in range(m - full):
                d = seg[full + t] - mu
                lanes[t] += d * d
            for i in range(8):
                lanes[i] += lanes[i + 8]
            for i in range(4):
                lanes[i] += lanes[i + 4]
            for i in range(2):
                lanes[i] += lanes[i + 2]
            out[r, b] = lanes[0] + lanes[1]


@njit(nogil=True, cache=True)
def prod_blocks(x: Arr, out: Arr) -> None:  # pragma: no cover - compiled
    """``out[r, b]`` = the lane-order product of block ``b`` of row ``r`` of
    real ``x``, each lane chained from 1 (the same bits as from its first
    term: 1·x is x)."""
    n = x.shape[1]
    lanes = np.ones(16, out.dtype)
    for r in range(x.shape[0]):
        for b in range(out.shape[1]):
            lo = b * 1024
            seg = x[r, lo:min(lo + 1024, n)]
            m = seg.size
            full = m - m % 16
            lanes[:] = 1
            for t in range(0, full, 16):
                c = seg[t:t + 16]
                for i in range(16):
                    lanes[i] *= c[i]
            for t in range(m - full):
                lanes[t] *= seg[full + t]
            for i in range(8):
                lanes[i] *= lanes[i + 8]
            for i in range(4):
                lanes[i] *= lanes[i + 4]
            for i in range(2):
                lanes[i] *= lanes[i + 2]
            out[r, b] = lanes[0] * lanes[1]


@njit(inline="always")
def cmul(ar: Any, ai: Any, br: Any, bi: Any) -> tuple[Any, Any]:  # pragma: no cover
    """Prog's complex Mul: ``(ar·br − ai·bi) + i(ar·bi + ai·br)``, each product
    and sum rounded to the parts' dtype, unfused."""
    return ar * br - ai * bi, ar * bi + ai * br


@njit(nogil=True, cache=True)
def cprod_blocks(re: Arr, im: Arr, out_re: Arr, out_im: Arr) -> None:  # pragma: no cover
    """The lane-order complex product of each block of each row, the terms'
    parts in ``re`` and ``im``: each lane chained from its first term (never
    from 1), a lane without terms left out of the lane combination."""
    n = re.shape[1]
    lr = np.zeros(16, re.dtype)
    li = np.zeros(16, re.dtype)
    for r in range(re.shape[0]):
        for b in range(out_re.shape[1]):
            lo = b * 1024
            m = min(lo + 1024, n) - lo
            for t in range(m):
                lane = t % 16
                xr = re[r, lo + t]
                xi = im[r, lo + t]
                if t < 16:
                    lr[lane] = xr
                    li[lane] = xi
                else:
                    lr[lane], li[lane] = cmul(lr[lane], li[lane], xr, xi)
            present = min(m, 16)
            half = 8
            while half >= 1:
                for i in range(half):
                    if i + half < present:
                        lr[i], li[i] = cmul(lr[i], li[i], lr[i + half], li[i + half])
                present = min(present, half)
                half //= 2
            out_re[r, b] = lr[0]
            out_im[r, b] = li[0]


@njit(inline="always")
def _segments(nb: int, starts: Arr) -> int:  # pragma: no cover - compiled
    """Fill ``starts`` with the starts of the perfect subtrees a block tree of
    ``nb`` leaves splits into (the binary digits of ``nb``, largest first),
    and ``starts[k]`` with the end; returns k, their count."""
    k = 0
    s = 0
    p = 1
    while p * 2 <= nb:
        p *= 2
    while p >= 1:
        if nb & p:
            starts[k] = s
            s += p
            k += 1
        p //= 2
    starts[k] = s
    return k


@njit(nogil=True, cache=True)
def tree_add(blocks: Arr) -> None:  # pragma: no cover - compiled
    """Sum each row of ``blocks`` into its column 0 by the block tree: a
    binary tree whose left part is the largest power of two below the count.
    That tree is the binary digits' perfect subtrees, largest first,
    combined from the right."""
    starts = np.zeros(65, np.int64)
    for r in range(blocks.shape[0]):
        v = blocks[r]
        k = _segments(v.size, starts)
        for g in range(k):
            s = starts[g]
            size = starts[g + 1] - s
            step = 1
            while step < size:
                for i in range(s, s + size, 2 * step):
                    v[i] = v[i] + v[i + step]
                step *= 2
        for g in range(k - 2, -1, -1):
            v[starts[g]] = v[starts[g]] + v[starts[g + 1]]


@njit(nogil=True, cache=True)
def tree_mul(blocks: Arr) -> None:  # pragma: no cover - compiled
    """As ``tree_add`` with multiplication."""
    starts = np.zeros(65, np.int64)
    for r in range(blocks.shape[0]):
        v = blocks[r]
        k = _segments(v.size, starts)
        for g in range(k):
            s = starts[g]
            size = starts[g + 1] - s
            step = 1
            while step < size:
                for i in range(s, s + size, 2 * step):
                    v[i] = v[i] * v[i + step]
                step *= 2
        for g in range(k - 2, -1, -1):
            v[starts[g]] = v[starts[g]] * v[starts[g + 1]]


@njit(nogil=True, cache=True)
def tree_cmul(re: Arr, im: Arr) -> None:  # pragma: no cover - compiled
    """As ``tree_mul`` with Prog's complex Mul on parts ``re`` and ``im``."""
    starts = np.zeros(65, np.int64)
    for r in range(re.shape[0]):
        vr = re[r]
        vi = im[r]
        k = _segments(vr.size, starts)
        for g in range(k):
            s = starts[g]
            size = starts[g + 1] - s
            step = 1
            while step < size:
                for i in range(s, s + size, 2 * step):
                    vr[i], vi[i] = cmul(vr[i], vi[i], vr[i + step], vi[i + step])
                step *= 2
        for g in range(k - 2, -1, -1):
            a, c = starts[g], starts[g + 1]
            vr[a], vi[a] = cmul(vr[a], vi[a], vr[c], vi[c])

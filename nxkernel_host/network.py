"""Numba kernels of the odd/even network (contract "The odd/even network"), the
host's float scans.

A scan's states are cut into blocks (of 16 for real Sum and Prod, of
``SCAN_BLOCK`` for the other combinations) whose results the network fixes.
Every kernel computes a function of its input alone, whatever the split of
the work: the pool (``pool``) only decides which thread computes which
block, so results are the same bits on any number of threads.

Kernels take C-contiguous arrays; none uses fastmath (it would reassociate)
or calls a recursive helper (``cache=True`` breaks on recursion, numba #6061).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any, Final

import numpy as np
import numpy.typing as npt
from numba import njit

from . import pool
from .lanes import cmul

__all__ = ["CMUL", "LSE", "MOMENTS", "SCAN_BLOCK", "network_scan", "real_scan"]

Arr = npt.NDArray[Any]

#: States per block of a network scan: a power of two, so blocks are subtrees.
SCAN_BLOCK: Final = 4096

# Result i of the network is the chain, left to right, of the pairwise-tree
# values of the aligned power-of-two blocks that the binary digits of i + 1
# cut [0, i + 1) into, largest first. So a scan cut into blocks of
# SCAN_BLOCK states (a power of two) is: each full block's tree value
# (phase 1); the network over those values, whose result q is the scan's
# result at the end of block q (phase 2); and in each block the network
# chained after the result before the block, every in-block result but a
# full block's last (whose digits reach above the block: phase 2 gave it)
# having a chain that starts with that result's (phase 3). Each phase's
# values are fixed by the states alone, so the split gives the whole
# network's bits.
#
# States have one to three components (axis 0): a kind's combination reads
# and writes all of them.

#: Combinations: Prog's complex Mul on (re, im), log-sum-exp of two, and
#: Chan's merge of (count, mean, M2). Real Sum and Prod have their own
#: kernels (``real_scan``).
CMUL: Final = 0
LSE: Final = 1
MOMENTS: Final = 2


@njit(inline="always")
def _lse2(a: float, b: float) -> float:  # pragma: no cover - compiled
    """log(exp a + exp b): NaN where either is, ±inf where the larger is."""
    if a != a or b != b:
        return a + b
    hi = max(a, b)
    if hi == math.inf or hi == -math.inf:
        return hi
    return hi + math.log1p(math.exp(min(a, b) - hi))


@njit(inline="always")
def _combine(kind: int, x: Arr, i: int, y: Arr, j: int, z: Arr, k: int) -> None:  # pragma: no cover
    """``z[:, k] = x[:, i] ⊕ y[:, j]``, the earlier state ``x``'s; ``z`` may be
    ``x`` or ``y`` at the same index."""
    if kind == 0:
        z[0, k], z[1, k] = cmul(x[0, i], x[1, i], y[0, j], y[1, j])
    elif kind == 1:
        z[0, k] = _lse2(x[0, i], y[0, j])
    else:
        na, ma, qa = x[0, i], x[1, i], x[2, i]
        nb, mb, qb = y[0, j], y[1, j], y[2, j]
        if na == 0:
            z[0, k], z[1, k], z[2, k] = nb, mb, qb
        elif nb == 0:
            z[0, k], z[1, k], z[2, k] = na, ma, qa
        else:
            n = na + nb
            if not (math.isfinite(ma) and math.isfinite(mb)):
                # An infinite or NaN mean: the mean is the sum of the
                # infinities (NaN with both signs), the variance a NaN.
                z[0, k], z[1, k], z[2, k] = n, ma + mb, math.nan
            else:
                d = mb - ma
                # IEEE's nb / +0 where a carry's count cancels the terms' (a
                # Numba division by 0 raises): the device's bits.
                w = nb / n if n != 0.0 else math.copysign(math.inf, nb)
                z[0, k], z[1, k], z[2, k] = n, ma + d * w, qa + qb + d * d * (na * w)


@njit(inline="always")
def _copy(x: Arr, i: int, z: Arr, k: int) -> None:  # pragma: no cover - compiled
    for c in range(z.shape[0]):
        z[c, k] = x[c, i]


@njit(nogil=True, cache=True)
def _up(kind: int, lev: Arr, m: int, offs: Arr, sizes: Arr) -> int:  # pragma: no cover
    """Pair ``lev[:, 0:m]`` level by level (level k+1's j is level k's 2j ⊕
    2j+1), the levels one after another in ``lev``; returns the top level."""
    top = 0
    off = 0
    size = m
    offs[0] = 0
    sizes[0] = m
    while size > 1:
        half = size // 2
        nxt = off + size
        for j in range(half):
            _combine(kind, lev, off + 2 * j, lev, off + 2 * j + 1, lev, nxt + j)
        top += 1
        offs[top] = nxt
        sizes[top] = half
        off = nxt
        size = half
    return top


@njit(nogil=True, cache=True)
def _down(kind: int, lev: Arr, res: Arr, top: int, offs: Arr, sizes: Arr,
          p: Arr, has_p: bool) -> None:  # pragma: no cover - compiled
    """The network's results of every level, top down, into ``res`` (laid out
    as ``lev``), each chained after ``p[:, 0]`` where ``has_p``."""
    for k in range(top, -1, -1):
        o = offs[k]
        size = sizes[k]
        if has_p:
            _combine(kind, p, 0, lev, o, res, o)
        else:
            _copy(lev, o, res, o)
        if k < top:
            oc = offs[k + 1]
            for j in range(size // 2):
                _copy(res, oc + j, res, o + 2 * j + 1)
            for j in range(1, (size + 1) // 2):
                _combine(kind, res, oc + j - 1, lev, o + 2 * j, res, o + 2 * j)


@njit(nogil=True, cache=True)
def _roots(kind: int, s: Arr, t: Arr, j0: int, j1: int, block: int) -> None:  # pragma: no cover
    """Phase 1: ``t[:, r, q]`` = the tree value of full block ``q`` of row ``r``
    of states ``s``, for flat indices ``r·nq + q`` in [j0, j1)."""
    nc = s.shape[0]
    nq = t.shape[2]
    lev = np.empty((nc, 2 * block), s.dtype)
    offs = np.zeros(64, np.int64)
    sizes = np.zeros(64, np.int64)
    for j in range(j0, j1):
        r = j // nq
        q = j - r * nq
        lev[:, :block] = s[:, r, q * block:(q + 1) * block]
        top = _up(kind, lev, block, offs, sizes)
        for c in range(nc):
            t[c, r, q] = lev[c, offs[top]]


@njit(nogil=True, cache=True)
def _prefixes(kind: int, t: Arr, p: Arr) -> None:  # pragma: no cover - compiled
    """Phase 2: ``p[:, r, q + 1]`` = the network's result q over ``t[:, r, :]``:
    the scan's result at the end of full block q."""
    nc, rows, nq = t.shape
    lev = np.empty((nc, 2 * nq), t.dtype)
    res = np.empty((nc, 2 * nq), t.dtype)
    offs = np.zeros(64, np.int64)
    sizes = np.zeros(64, np.int64)
    none = np.empty((nc, 1), t.dtype)
    for r in range(rows):
        lev[:, :nq] = t[:, r, :]
        top = _up(kind, lev, nq, offs, sizes)
        _down(kind, lev, res, top, offs, sizes, none, False)
        p[:, r, 1:] = res[:, :nq]


@njit(nogil=True, cache=True)
def _blocks(kind: int, s: Arr, p: Arr, out: Arr, j0: int, j1: int,
            block: int) -> None:  # pragma: no cover - compiled
    """Phase 3: the results of block ``q`` of row ``r`` (flat ``r·nb + q`` in
    [j0, j1)), chained after ``p[:, r, q]`` for q > 0, into ``out``; a full
    block's last result is ``p[:, r, q + 1]``."""
    nc, _, m = s.shape
    nb = -(-m // block)
    lev = np.empty((nc, 2 * block), s.dtype)
    res = np.empty((nc, 2 * block), s.dtype)
    offs = np.zeros(64, np.int64)
    sizes = np.zeros(64, np.int64)
    pq = np.empty((nc, 1), s.dtype)
    for j in range(j0, j1):
        r = j // nb
        q = j - r * nb
        lo = q * block
        mm = min(block, m - lo)
        lev[:, :mm] = s[:, r, lo:lo + mm]
        top = _up(kind, lev, mm, offs, sizes)
        pq[:, 0] = p[:, r, q]
        _down(kind, lev, res, top, offs, sizes, pq, q > 0)
        if q > 0 and mm == block:
            res[:, mm - 1] = p[:, r, q + 1]
        out[:, r, lo:lo + mm] = res[:, :mm]


# Real Sum and Prod scans take another cut of the same network, in 16s: a
# level's states in blocks of 16; the next level's states are the full
# blocks' tree values; a block's last result is the next level's result at
# the block, and its other results are the in-block chains of its digits,
# chained after the next level's result before it. Straight-line code over
# 16 states (the generic phases above index two axes and branch on the kind
# at every combination: ten times slower). ``mul`` is loop-invariant, so the
# compiler hoists its test out of the loops.


@njit(inline="always")
def _op(mul: bool, a: Any, b: Any) -> Any:  # pragma: no cover - compiled
    return a * b if mul else a + b


@njit(nogil=True, cache=True)
def _roots16(mul: bool, a: Arr, t: Arr, j0: int, j1: int) -> None:  # pragma: no cover
    """``t[r, q]`` = the tree value of ``a[r, 16q:16q + 16]``, for flat
    ``r·nq + q`` in [j0, j1), nq = ``t.shape[1]``."""
    nq = t.shape[1]
    r = j0 // nq
    q = j0 - r * nq
    for _ in range(j0, j1):
        # Step (r, q) along the flat range: no division per block.
        if q == nq:
            r += 1
            q = 0
        lo = 16 * q
        # Indexing, not a slice per block: a slice's shape and strides cost
        # more than the block's arithmetic.
        q0 = _op(mul, _op(mul, a[r, lo], a[r, lo + 1]), _op(mul, a[r, lo + 2], a[r, lo + 3]))
        q1 = _op(mul, _op(mul, a[r, lo + 4], a[r, lo + 5]), _op(mul, a[r, lo + 6], a[r, lo + 7]))
        q2 = _op(mul, _op(mul, a[r, lo + 8], a[r, lo + 9]), _op(mul, a[r, lo + 10], a[r, lo + 11]))
        q3 = _op(mul, _op(mul, a[r, lo + 12], a[r, lo + 13]),
                 _op(mul, a[r, lo + 14], a[r, lo + 15]))
        t[r, q] = _op(mul, _op(mul, q0, q1), _op(mul, q2, q3))
        q += 1


@njit(inline="always")
def _small(mul: bool, s: Arr, out: Arr, p: Any, has_p: bool) -> None:  # pragma: no cover
    """The network's results over fewer than 16 states ``s``, chained after
    ``p`` where ``has_p``: result r chains the trees of the aligned blocks
    the binary digits of r + 1 cut [0, r + 1) into, largest first."""
    n = s.size
    for r in range(n):
        length = r + 1
        start = 0
        acc = p
        first = not has_p
        size = 8
        while size >= 1:
            if length & size:
                # The block's pairwise tree, level by level.
                buf = s[start:start + size].copy()
                width = size
                while width > 1:
                    for i in range(width // 2):
                        buf[i] = _op(mul, buf[2 * i], buf[2 * i + 1])
                    width //= 2
                v = buf[0]
                acc = v if first else _op(mul, acc, v)
                first = False
                start += size
            size //= 2
        out[r] = acc


@njit(nogil=True, cache=True)
def _results16(mul: bool, a: Arr, up: Arr, out: Arr, j0: int,
               j1: int) -> None:  # pragma: no cover - compiled
    """``out[r]`` = the network's results over ``a[r]``, given ``up[r]``, the
    results over its full 16-blocks' tree values, for blocks of flat index
    ``r·nb + q`` in [j0, j1)."""
    n = a.shape[1]
    nb = -(-n // 16)
    r = j0 // nb
    q = j0 - r * nb - 1
    for _ in range(j0, j1):
        # Step (r, q) along the flat range: no division per block.
        q += 1
        if q == nb:
            r += 1
            q = 0
        lo = 16 * q
        has_p = q > 0
        if lo + 16 > n:
            _small(mul, a[r, lo:n], out[r, lo:n], up[r, q - 1] if has_p else a[r, lo], has_p)
            continue
        # Indexing, not slices: as in _roots16.
        s0 = a[r, lo]
        p0 = _op(mul, s0, a[r, lo + 1])
        q0 = _op(mul, p0, _op(mul, a[r, lo + 2], a[r, lo + 3]))
        p2 = _op(mul, a[r, lo + 4], a[r, lo + 5])
        e0 = _op(mul, q0, _op(mul, p2, _op(mul, a[r, lo + 6], a[r, lo + 7])))
        p4 = _op(mul, a[r, lo + 8], a[r, lo + 9])
        q2 = _op(mul, p4, _op(mul, a[r, lo + 10], a[r, lo + 11]))
        p6 = _op(mul, a[r, lo + 12], a[r, lo + 13])
        if has_p:
            p = up[r, q - 1]
            c0 = _op(mul, p, s0)
            c1 = _op(mul, p, p0)
            c3 = _op(mul, p, q0)
            c7 = _op(mul, p, e0)
        else:
            c0 = s0
            c1 = p0
            c3 = q0
            c7 = e0
        out[r, lo] = c0
        out[r, lo + 1] = c1
        out[r, lo + 2] = _op(mul, c1, a[r, lo + 2])
        out[r, lo + 3] = c3
        out[r, lo + 4] = _op(mul, c3, a[r, lo + 4])
        c5 = _op(mul, c3, p2)
        out[r, lo + 5] = c5
        out[r, lo + 6] = _op(mul, c5, a[r, lo + 6])
        out[r, lo + 7] = c7
        out[r, lo + 8] = _op(mul, c7, a[r, lo + 8])
        c9 = _op(mul, c7, p4)
        out[r, lo + 9] = c9
        out[r, lo + 10] = _op(mul, c9, a[r, lo + 10])
        c11 = _op(mul, c7, q2)
        out[r, lo + 11] = c11
        out[r, lo + 12] = _op(mul, c11, a[r, lo + 12])
        c13 = _op(mul, c11, p6)
        out[r, lo + 13] = c13
        out[r, lo + 14] = _op(mul, c13, a[r, lo + 14])
        out[r, lo + 15] = up[r, q]


def real_scan(mul: bool, states: Arr, out: Arr) -> None:
    """The odd/even network's scan by a + b (``mul`` false) or a·b: ``states``
    and ``out`` are ``(rows, m)``, C-contiguous, of one real dtype."""
    rows, m = states.shape
    if rows == 0 or m == 0:
        return
    levels = [states]
    while levels[-1].shape[1] >= 16:
        below = levels[-1]
        t = np.empty((rows, below.shape[1] // 16), states.dtype)
        nq = t.shape[1]
        _run_flat(functools.partial(_roots16, mul, below, t), rows * nq, rows * nq * 16)
        levels.append(t)
    # The top level has fewer than 16 states: no level above it.
    up = np.empty((rows, 0), states.dtype)
    for k in range(len(levels) - 1, -1, -1):
        a = levels[k]
        res = out if k == 0 else np.empty_like(a)
        nb = -(-a.shape[1] // 16)
        _run_flat(functools.partial(_results16, mul, a, up, res), rows * nb, rows * a.shape[1])
        up = res


def network_scan(kind: int, states: Arr, out: Arr, block: int = SCAN_BLOCK) -> None:
    """``out`` = the odd/even network's inclusive scan of ``states`` along the
    last axis, combined by ``kind``: arrays ``(components, rows, m)``,
    C-contiguous, of one dtype. ``block`` (a power of two) only cuts the work.
    """
    nc, rows, m = states.shape
    if rows == 0 or m == 0:
        return
    nb = -(-m // block)
    full = m // block
    p = np.zeros((nc, rows, full + 1), states.dtype)
    if nb > 1:
        t = np.empty((nc, rows, full), states.dtype)
        _run_flat(functools.partial(_roots_at, kind, states, t, block), rows * full,
                  rows * full * block)
        _prefixes(kind, t, p)
    _run_flat(functools.partial(_blocks_at, kind, states, p, out, block), rows * nb, rows * m)


def _roots_at(kind: int, s: Arr, t: Arr, block: int, j0: int, j1: int) -> None:
    _roots(kind, s, t, j0, j1, block)


def _blocks_at(kind: int, s: Arr, p: Arr, out: Arr, block: int, j0: int, j1: int) -> None:
    _blocks(kind, s, p, out, j0, j1, block)


def _run_flat(body: Callable[[int, int], None], units: int, elements: int) -> None:
    """``body(a, b)`` over ranges covering ``[0, units)``, spread over threads."""
    if pool.parts_for(units, elements) == 1:
        if units > 0:
            body(0, units)  # one range, on this thread: no spans or jobs to make
        return
    pool.parallel([functools.partial(body, a, b)
                   for a, b in pool.spans(units, pool.parts_for(units, elements))])

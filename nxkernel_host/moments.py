"""The host's Moments scans: the odd/even network (contract "The odd/even
network") over states (count, mean, M2), combined by Chan's merge, in
cache-sized chunks as ``network``'s real scans are (see there for the cut):
each chunk's states made from its terms in cache, its results written once,
as the mean and the variance (M2 / count) in the destinations' dtype.

The merge is written as selects over values computed for every case, so the
compiler vectorises the loops; each value is the expression the network's
merge states, so the bits are the network's whatever the chunk or threads.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Final

import numpy as np
import numpy.typing as npt
from numba import njit

from . import pool

__all__ = ["MOMENT_CHUNK", "moments_scan"]

Arr = npt.NDArray[Any]

#: States per chunk: nine float64 buffers of it stay in a core's L2.
MOMENT_CHUNK: Final = 1 << 12


@njit(inline="always", error_model="numpy")
def _merge(na: float, ma: float, qa: float, nb: float, mb: float,
           qb: float) -> tuple[float, float, float]:  # pragma: no cover - compiled
    """Chan's merge of (count, mean, M2) a, the earlier, with b: b where a's
    count is 0, a where b's is; an infinite or NaN mean gives the sum of the
    means and a NaN M2. IEEE's nb / +0 where the counts cancel."""
    n = na + nb
    d = mb - ma
    w = nb / n
    m = ma + d * w
    q = qa + qb + d * d * (na * w)
    # x - x is 0 for a finite x, NaN otherwise: one test for both means.
    finite = (ma - ma) + (mb - mb) == 0.0
    m = m if finite else ma + mb
    q = q if finite else math.nan
    n, m, q = (n, m, q) if nb != 0.0 else (na, ma, qa)
    return (n, m, q) if na != 0.0 else (nb, mb, qb)


@njit(nogil=True, error_model="numpy")
def _load(x: Arr, k0: int, s0: Arr, s1: Arr, s2: Arr) -> None:  # pragma: no cover
    """States of terms ``x[k0:k0 + len(s0)]``: count 1, the term as the mean,
    M2 0, NaN for an infinite or NaN term (its variance is)."""
    for i in range(s0.size):
        v = np.float64(x[k0 + i])
        s0[i] = 1.0
        s1[i] = v
        s2[i] = 0.0 if v - v == 0.0 else math.nan


@njit(nogil=True, error_model="numpy")
def _halve(s0: Arr, s1: Arr, s2: Arr, d0: Arr, d1: Arr, d2: Arr) -> None:  # pragma: no cover
    """The level above: ``d[i] = s[2i] ⊕ s[2i + 1]``."""
    for i in range(d0.size):
        d0[i], d1[i], d2[i] = _merge(s0[2 * i], s1[2 * i], s2[2 * i],
                                     s0[2 * i + 1], s1[2 * i + 1], s2[2 * i + 1])


@njit(nogil=True, error_model="numpy")
def _descend(u0: Arr, u1: Arr, u2: Arr, v0: Arr, v1: Arr, v2: Arr, d0: Arr, d1: Arr,
             d2: Arr) -> None:  # pragma: no cover - compiled
    """Level results ``d`` (but ``d[0]``) of level states ``v`` from the level
    above's results ``u``: result 2i + 1 is ``u[i]``, 2i is ``u[i - 1] ⊕ v[2i]``."""
    h = u0.size
    for i in range(1, h):
        a0, a1, a2 = u0[i - 1], u1[i - 1], u2[i - 1]
        d0[2 * i - 1], d1[2 * i - 1], d2[2 * i - 1] = a0, a1, a2
        d0[2 * i], d1[2 * i], d2[2 * i] = _merge(a0, a1, a2, v0[2 * i], v1[2 * i], v2[2 * i])
    d0[2 * h - 1], d1[2 * h - 1], d2[2 * h - 1] = u0[h - 1], u1[h - 1], u2[h - 1]
    if d0.size > 2 * h:
        d0[2 * h], d1[2 * h], d2[2 * h] = _merge(u0[h - 1], u1[h - 1], u2[h - 1],
                                                 v0[2 * h], v1[2 * h], v2[2 * h])


@njit(nogil=True, error_model="numpy")
def _store(r0: Arr, r1: Arr, r2: Arr, mean: Arr, var: Arr) -> None:  # pragma: no cover
    """The mean and the variance M2 / count of results ``r``, each rounded once
    into its destination, NaNs the positive quiet NaN."""
    for i in range(mean.size):
        m = r1[i]
        v = r2[i] / r0[i]
        mean[i] = m if m == m else math.nan
        var[i] = v if v == v else math.nan


@njit(inline="always")
def _levels(s0: Arr, s1: Arr, s2: Arr, l0: Arr, l1: Arr, l2: Arr, sizes: Arr,
            offs: Arr) -> int:  # pragma: no cover - compiled
    """The chunk's levels above states ``s`` into ``l`` (level j + 1 of size
    ``sizes[j + 1]`` at ``offs[j + 1]``); returns the top level's index."""
    mm = s0.size
    sizes[0] = mm
    nl = 0
    off = 0
    while sizes[nl] >= 2:
        h = sizes[nl] // 2
        if nl == 0:
            _halve(s0, s1, s2, l0[:h], l1[:h], l2[:h])
        else:
            o = offs[nl]
            _halve(l0[o:o + 2 * h], l1[o:o + 2 * h], l2[o:o + 2 * h], l0[off:off + h],
                   l1[off:off + h], l2[off:off + h])
        nl += 1
        sizes[nl] = h
        offs[nl] = off
        off += h
    return nl


@njit(inline="always")
def _push(vals: Arr, counts: Arr, depth: int, n: float, m: float,
          q: float) -> int:  # pragma: no cover - compiled
    """Push a full chunk's tree value on the counter of groups of chunks
    (largest first), merging equal neighbours; returns the depth."""
    vals[0, depth], vals[1, depth], vals[2, depth] = n, m, q
    counts[depth] = 1
    depth += 1
    while depth >= 2 and counts[depth - 1] == counts[depth - 2]:
        a, b = depth - 2, depth - 1
        vals[0, a], vals[1, a], vals[2, a] = _merge(vals[0, a], vals[1, a], vals[2, a],
                                                    vals[0, b], vals[1, b], vals[2, b])
        counts[a] *= 2
        depth -= 1
    return depth


@njit(inline="always")
def _chain(vals: Arr, depth: int) -> tuple[float, float, float]:  # pragma: no cover
    """The counter's groups chained left to right: the result before the next chunk."""
    n, m, q = vals[0, 0], vals[1, 0], vals[2, 0]
    for k in range(1, depth):
        n, m, q = _merge(n, m, q, vals[0, k], vals[1, k], vals[2, k])
    return n, m, q


@njit(nogil=True, cache=True, error_model="numpy")
def _chunks(x: Arr, carry: Arr, mt: int, mean: Arr, var: Arr, t: Arr, j0: int, j1: int,
            chunk: int, trees_only: bool) -> None:  # pragma: no cover - compiled
    """Chunks ``c`` of rows ``r`` (flat ``r·nc + c`` in [j0, j1), nc =
    ``t.shape[2]``) of the states of each row of ``mt`` terms ``x`` (flat),
    after ``carry[r]`` as state 0 where ``carry`` has rows. With
    ``trees_only``, ``t[:, r, c]`` = each full chunk's tree value; else the
    chunks' results into ``mean`` and ``var`` (flat, as ``x``), ``t[:, r, :c]``
    holding the tree values of the row's chunks before the range's first."""
    hc = 1 if carry.shape[0] > 0 else 0
    m = mt + hc
    nc = t.shape[2]
    s0, s1, s2 = np.empty(chunk), np.empty(chunk), np.empty(chunk)
    l0, l1, l2 = np.empty(chunk), np.empty(chunk), np.empty(chunk)
    r0, r1, r2 = np.empty(2 * chunk), np.empty(2 * chunk), np.empty(2 * chunk)
    vals = np.empty((3, 64))
    counts = np.zeros(64, np.int64)
    sizes = np.zeros(64, np.int64)
    offs = np.zeros(64, np.int64)
    depth = 0
    r = j0 // nc
    c = j0 - r * nc
    if not trees_only:
        for k in range(c):
            depth = _push(vals, counts, depth, t[0, r, k], t[1, r, k], t[2, r, k])
    for _ in range(j0, j1):
        if c == nc:
            r += 1
            c = 0
            depth = 0
        lo = c * chunk
        mm = min(chunk, m - lo)
        if trees_only and mm < chunk:
            c += 1
            continue
        # State k of the row: the carry for k < hc, else term k - hc.
        k0 = max(lo, hc)
        if k0 > lo:
            s0[0], s1[0], s2[0] = carry[r, 0], carry[r, 1], carry[r, 2] * carry[r, 0]
        _load(x, r * mt + k0 - hc, s0[k0 - lo:mm], s1[k0 - lo:mm], s2[k0 - lo:mm])
        a0, a1, a2 = s0[:mm], s1[:mm], s2[:mm]
        nl = _levels(a0, a1, a2, l0, l1, l2, sizes, offs)
        o = offs[nl]
        tn, tm, tq = (l0[o], l1[o], l2[o]) if nl > 0 else (a0[0], a1[0], a2[0])
        if trees_only:
            t[0, r, c], t[1, r, c], t[2, r, c] = tn, tm, tq
            c += 1
            continue
        has_p = depth > 0
        pn, pm, pq = _chain(vals, depth) if has_p else (tn, tm, tq)
        # The top level's one result: P_{c+1} for a full chunk, else the
        # chain of P_c and the top's value.
        if mm == chunk:
            depth = _push(vals, counts, depth, tn, tm, tq)
            top = _chain(vals, depth)
        else:
            top = _merge(pn, pm, pq, tn, tm, tq) if has_p else (tn, tm, tq)
        if nl == 0:
            r0[0], r1[0], r2[0] = top
        else:
            r0[o], r1[o], r2[o] = top
            # Level j's results from level j + 1's: into r at level j's
            # offset (level 0's at 0, so its results are r[:mm]).
            for lv in range(nl - 1, -1, -1):
                uo, un = offs[lv + 1], sizes[lv + 1]
                n = sizes[lv]
                vo = offs[lv] if lv > 0 else 0
                if lv == 0:
                    v0, v1, v2 = a0, a1, a2
                else:
                    v0, v1, v2 = l0[vo:vo + n], l1[vo:vo + n], l2[vo:vo + n]
                # Level 0's results go after the levels' (which take fewer
                # than ``chunk``): the level above's must survive until read.
                base = chunk if lv == 0 else vo
                d0, d1, d2 = r0[base:base + n], r1[base:base + n], r2[base:base + n]
                d0[0], d1[0], d2[0] = (_merge(pn, pm, pq, v0[0], v1[0], v2[0]) if has_p
                                       else (v0[0], v1[0], v2[0]))
                _descend(r0[uo:uo + un], r1[uo:uo + un], r2[uo:uo + un], v0, v1, v2, d0, d1, d2)
        base = chunk if nl > 0 else 0
        k1 = k0 - lo
        _store(r0[base + k1:base + mm], r1[base + k1:base + mm], r2[base + k1:base + mm],
               mean[r * mt + k0 - hc:r * mt + lo + mm - hc],
               var[r * mt + k0 - hc:r * mt + lo + mm - hc])
        c += 1


def moments_scan(x: Arr, carry: Arr | None, mean: Arr, var: Arr, chunk: int = MOMENT_CHUNK) -> None:
    """``mean`` and ``var`` = the network's Moments scan of each row of terms
    ``x`` (``(rows, m)``, C-contiguous, float), after ``carry[r]`` (count, mean,
    variance) as state 0 where given: each state's mean and M2 / count,
    rounded once into ``mean``'s and ``var``'s float dtype, NaNs the positive
    quiet NaN. ``chunk`` (a power of two) only cuts the work."""
    rows, mt = x.shape
    if rows == 0 or mt == 0:
        return
    c = np.zeros((0, 3)) if carry is None else np.ascontiguousarray(carry, np.float64)
    m = mt + (carry is not None)
    nc = -(-m // chunk)
    t = np.empty((3, rows, nc))
    units = rows * nc
    cuts = pool.spans(units, pool.parts_for(units, rows * m))
    args = (x.reshape(-1), c, mt, mean.reshape(-1), var.reshape(-1), t)
    need = max(j0 for j0, _ in cuts)
    if nc > 1 and need > 0:
        pool.parallel([functools.partial(_chunks, *args, a, b, chunk, True)
                       for a, b in pool.spans(need, pool.parts_for(need, need * chunk))])
    pool.parallel([functools.partial(_chunks, *args, a, b, chunk, False) for a, b in cuts])

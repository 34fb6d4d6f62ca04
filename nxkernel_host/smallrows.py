"""Small prepared kernels of extremes and scans that read and write memories'
bytes straight, as ``bytekernels``' do: one compiled call per kernel call,
every argument an integer or a contiguous byte array. Each computes what the
path it replaces computes, bit for bit:

- ``extremes``: Max, Min and Arg of rows of 16-, 32- or 64-bit floats or
  signed integers, by the rule ``reduce._positions`` keeps: the position of
  the first term with the extreme's bits (−0 below +0), or of the first
  NaN; the extreme is that term, its bits copied.
- ``sum_scans``: float32 or float64 Sum and Prod scans of rows, forward or
  reverse, without a carry: the states ``scan._scan_rows`` makes (a Sum's
  first state +0 where its term is a zero: +0 + term 0), each row's results
  the odd/even network's by its definition, the results ``network``'s
  chunked kernels compute in their own steps; NaN results the positive
  quiet NaN.
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np
import numpy.typing as npt
from numba import njit

__all__ = ["extremes", "sum_scans"]

Arr = npt.NDArray[Any]


#: Terms per block of ``_extremes``' first pass: the second searches one.
_BLOCK: Final = 256


@njit(inline="always")
def _key(x: Any, top: int, fmask: int, flip: int) -> Any:  # pragma: no cover - compiled
    """Term ``x``'s key (see ``_extremes``)."""
    return x ^ ((x >> top) & fmask) ^ flip


@njit(nogil=True, cache=True)
def _extremes(s: Arr, rows: int, n: int, flip: int, top: int, fmask: int, inf: int, val: Arr,
              pos: Arr) -> None:  # pragma: no cover - compiled
    """Per row of ``n`` terms of ``s``, the first position of the greatest key,
    or of the first NaN: into ``pos`` where it has room, and the term there
    into ``val`` where it has. Terms are integers (``fmask`` 0), or a float's
    bits as signed integers of ``top + 1`` bits, ``fmask`` all but the sign,
    ``inf`` the infinity's (a NaN's magnitude is above it). A term's key is
    the term with the magnitude's bits flipped where a float's sign is set,
    so keys order the terms as Maximum does (−0 below +0) and are equal
    exactly where the bits are; every bit flipped where ``flip`` is −1, so
    the greatest key is Minimum's extreme. Two passes over a row: the
    greatest key of each block (a loop that vectorises) and the first block
    that holds it or a NaN, then the first position in that block."""
    for r in range(rows):
        row = s[r * n:(r + 1) * n]
        best = 0
        most = _key(row[0], top, fmask, flip)
        nan = False
        for b0 in range(0, n, _BLOCK):
            block = row[b0:min(b0 + _BLOCK, n)]
            top_key = most
            for i in range(block.size):
                x = block[i]
                top_key = max(top_key, _key(x, top, fmask, flip))
                nan |= (x & fmask) > inf
            if nan:
                best = b0
                break
            if top_key > most:
                most, best = top_key, b0
        at = best
        if nan:
            while (row[at] & fmask) <= inf:
                at += 1
        else:
            while _key(row[at], top, fmask, flip) != most:
                at += 1
        if pos.size:
            pos[r] = at
        if val.size:
            val[r] = row[at]


@njit(nogil=True, cache=True)
def extremes(width: int, fmask: int, inf: int, is_max: bool, x: Arr, first: int, rows: int,
             n: int, val: Arr, pos: Arr) -> None:  # pragma: no cover - compiled
    """``_extremes`` of ``rows`` rows of ``n`` terms (n ≥ 1) of ``width``
    bytes (2, 4 or 8) in ``x``'s bytes from ``first``, Maximum's
    (``is_max``) or Minimum's, ``fmask`` and ``inf`` a float's (both 0 for
    integers): each row's extreme into ``val``'s bytes and its int64
    position into ``pos``'s (each exactly ``rows`` elements, or empty where
    the call has no such destination)."""
    flip = 0 if is_max else -1
    if width == 8:
        _extremes(x[first:first + 8 * rows * n].view(np.int64), rows, n, flip, 63, fmask, inf,
                  val.view(np.int64), pos.view(np.int64))
    elif width == 4:
        _extremes(x[first:first + 4 * rows * n].view(np.int32), rows, n, flip, 31, fmask, inf,
                  val.view(np.int32), pos.view(np.int64))
    else:
        _extremes(x[first:first + 2 * rows * n].view(np.int16), rows, n, flip, 15, fmask, inf,
                  val.view(np.int16), pos.view(np.int64))


@njit(inline="always")
def _combine(mul: bool, a: Any, b: Any) -> Any:  # pragma: no cover - compiled
    """``a ⊕ b``: a·b where ``mul``, else a + b, one IEEE operation."""
    return a * b if mul else a + b


@njit(inline="always")
def _network(mul: bool, lev: Arr, res: Arr, n: int, offs: Arr, sizes: Arr) -> None:  # pragma: no cover
    """The odd/even network's results of the ``n`` states ``lev[:n]`` into
    ``res[:n]``, by the contract's definition (``orders.odd_even_scan``):
    level k + 1's value j is level k's 2j ⊕ 2j + 1 (the levels one after
    another in ``lev``, down to one value); a level's result 0 is its value
    0, its result 2j + 1 the level above's result j, its result 2j (j ≥ 1)
    the level above's result j − 1 ⊕ its value 2j. Each result is one
    expression of the states, so any computation of it has its bits. Loops
    run over slices, so the compiler vectorises them."""
    offs[0] = 0
    sizes[0] = n
    top = 0
    size = n
    while size > 1:
        half = size // 2
        o = offs[top]
        src = lev[o:o + size]
        dst = lev[o + size:o + size + half]
        for j in range(half):
            dst[j] = _combine(mul, src[2 * j], src[2 * j + 1])
        top += 1
        offs[top] = o + size
        sizes[top] = half
        size = half
    res[offs[top]] = lev[offs[top]]
    for k in range(top - 1, -1, -1):
        o, size = offs[k], sizes[k]
        v = lev[o:o + size]
        r = res[o:o + size]
        u = res[offs[k + 1]:offs[k + 1] + sizes[k + 1]]
        r[0] = v[0]
        for j in range(size // 2):
            r[2 * j + 1] = u[j]
        for j in range(1, (size + 1) // 2):
            r[2 * j] = _combine(mul, u[j - 1], v[2 * j])


@njit(inline="always")
def _scan_rows(mul: bool, x: Arr, rows: int, m: int, reverse: bool,
               out: Arr) -> None:  # pragma: no cover - compiled
    """``sum_scans`` of typed elements ``x`` into ``out``."""
    lev = np.empty(2 * m, x.dtype)
    res = np.empty(2 * m, x.dtype)
    offs = np.empty(64, np.int64)
    sizes = np.empty(64, np.int64)
    lev[0] = np.nan
    qnan = lev[0]  # the positive quiet NaN, in the states' type
    states = lev[:m]
    results = res[:m]
    for r in range(rows):
        row = x[r * m:(r + 1) * m]
        o = out[r * m:(r + 1) * m]
        if reverse:
            for i in range(m):
                states[i] = row[m - 1 - i]
        else:
            for i in range(m):
                states[i] = row[i]
        if not mul and states[0] == 0:
            # Monoid Sum adds from +0: +0 + −0 is +0.
            states[0] = states[0] + 0
        _network(mul, lev, res, m, offs, sizes)
        # NaN results the positive quiet NaN, as the network's kernels make them.
        if reverse:
            for i in range(m):
                v = results[m - 1 - i]
                o[i] = v if v == v else qnan
        else:
            for i in range(m):
                v = results[i]
                o[i] = v if v == v else qnan


@njit(nogil=True, cache=True, error_model="numpy")
def sum_scans(mul: bool, wide: bool, reverse: bool, x: Arr, first: int, rows: int, m: int,
              out: Arr) -> None:  # pragma: no cover - compiled
    """The odd/even network's scans by a·b (``mul``) or a + b of ``rows`` rows
    of ``m`` float64 (``wide``) or float32 terms in ``x``'s bytes from
    ``first``, a Sum's from +0, from each row's end where ``reverse``, into
    ``out``'s bytes (exactly ``rows·m`` elements)."""
    if wide:
        _scan_rows(mul, x[first:first + 8 * rows * m].view(np.float64), rows, m, reverse,
                   out.view(np.float64))
    else:
        _scan_rows(mul, x[first:first + 4 * rows * m].view(np.float32), rows, m, reverse,
                   out.view(np.float32))

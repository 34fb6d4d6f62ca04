"""Small prepared kernels of extremes and scans that read and write memories'
bytes straight, as ``bytekernels``' do: one compiled call per kernel call,
every argument an integer or a contiguous byte array. Each computes what the
path it replaces computes, bit for bit:

- ``extremes``: Max, Min and Arg of rows of float32, float64, int32 or int64
  terms, by the rule ``reduce._positions`` keeps: the position of the first
  term with the extreme's bits (−0 below +0), or of the first NaN; the
  extreme is that term, its bits copied.
- ``sum_scans``: float32 or float64 Sum and Prod scans of rows, forward or
  reverse, without a carry: the states ``scan._scan_rows`` makes (a Sum's
  first state +0 where its term is a zero: +0 + term 0), scanned by the
  network on this thread (``network.one_thread_scan``), NaN results the
  positive quiet NaN.
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np
import numpy.typing as npt
from numba import njit

from .network import ADD, SCAN_CHUNK_BYTES, one_thread_scan

__all__ = ["F32", "F64", "I32", "I64", "WIDE", "extremes", "sum_scans"]

Arr = npt.NDArray[Any]

#: The terms' dtype codes of ``extremes``; ``WIDE`` is set in the 64-bit ones.
F32: Final = 0
I32: Final = 2
WIDE: Final = 1
F64: Final = F32 | WIDE
I64: Final = I32 | WIDE


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
def extremes(code: int, is_max: bool, x: Arr, first: int, rows: int, n: int, val: Arr,
             pos: Arr) -> None:  # pragma: no cover - compiled
    """``_extremes`` of ``rows`` rows of ``n`` terms (n ≥ 1) of dtype ``code``
    in ``x``'s bytes from ``first``, Maximum's (``is_max``) or Minimum's:
    each row's extreme into ``val``'s bytes and its int64 position into
    ``pos``'s (each exactly ``rows`` elements, or empty where the call has no
    such destination)."""
    flip = 0 if is_max else -1
    flt = (code & I32) == 0
    if code & WIDE:
        _extremes(x[first:first + 8 * rows * n].view(np.int64), rows, n, flip, 63,
                  0x7FFFFFFFFFFFFFFF if flt else 0, 0x7FF0000000000000,
                  val.view(np.int64), pos.view(np.int64))
    else:
        _extremes(x[first:first + 4 * rows * n].view(np.int32), rows, n, flip, 31,
                  0x7FFFFFFF if flt else 0, 0x7F800000, val.view(np.int32), pos.view(np.int64))


@njit(inline="always")
def _scan_rows(op: int, x: Arr, rows: int, m: int, reverse: bool, out: Arr,
               chunk: int) -> None:  # pragma: no cover - compiled
    """``sum_scans`` of typed elements ``x`` into ``out``."""
    states = np.empty(rows * m, x.dtype)
    for r in range(rows):
        lo = r * m
        if reverse:
            for i in range(m):
                states[lo + i] = x[lo + m - 1 - i]
        else:
            states[lo:lo + m] = x[lo:lo + m]
        if op == ADD and states[lo] == 0:
            # Monoid Sum adds from +0: +0 + −0 is +0.
            states[lo] = states[lo] + 0
    if not reverse:
        one_thread_scan(op, states, out, m, chunk)
        return
    res = np.empty(rows * m, x.dtype)
    one_thread_scan(op, states, res, m, chunk)
    for r in range(rows):
        lo = r * m
        for i in range(m):
            out[lo + m - 1 - i] = res[lo + i]


@njit(nogil=True, cache=True)
def sum_scans(op: int, wide: bool, reverse: bool, x: Arr, first: int, rows: int, m: int,
              out: Arr) -> None:  # pragma: no cover - compiled
    """The network's scans by ``op`` (``network.ADD`` or ``MUL``) of ``rows``
    rows of ``m`` float64 (``wide``) or float32 terms in ``x``'s bytes from
    ``first``, from each row's end where ``reverse``, into ``out``'s bytes
    (exactly ``rows·m`` elements). A row of at most a chunk of the general
    path's (``SCAN_CHUNK_BYTES``) is one chunk whatever its size: a chunk
    of the least power of two (from 16) holding it takes the same steps
    with less scratch."""
    item = 8 if wide else 4
    chunk = 16
    while chunk < m and chunk * item < SCAN_CHUNK_BYTES:
        chunk *= 2
    if wide:
        _scan_rows(op, x[first:first + 8 * rows * m].view(np.float64), rows, m, reverse,
                   out.view(np.float64), chunk)
    else:
        _scan_rows(op, x[first:first + 4 * rows * m].view(np.float32), rows, m, reverse,
                   out.view(np.float32), chunk)

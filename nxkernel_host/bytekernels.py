"""Small prepared kernels that read and write memories' bytes straight.

A prepared kernel's small call spends most of its time making NumPy views of
its operands and destination (a view each, and NumPy's error state around a
ufunc). These kernels take each memory's ``uint8`` host bytes and the byte
offset where its elements begin, and view them inside one compiled call:
one call from Python, every argument an integer or a contiguous byte array
(one compiled form for all of them). Each computes what the NumPy path it
replaces computes, bit for bit:

- ``binary``: ``a + b``, ``a - b`` or ``a * b`` of float32 or float64, one
  IEEE operation per element (no fast-math, no contraction), as NumPy's
  ufunc; no floating-point error is raised or reported, as under
  ``program.quiet``.
- ``sum_rows``: ``lanes.sum_blocks`` of float32 or float64 rows of at most
  one block each, the step ``reduce.lane_sum`` takes for such rows.
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np
import numpy.typing as npt
from numba import njit

from .lanes import sum_blocks

__all__ = ["ADD", "MUL", "SUB", "WIDE", "binary", "sum_rows"]

Arr = npt.NDArray[Any]

#: ``binary``'s operations, each on float32; ``WIDE`` added, on float64.
ADD: Final = 0
SUB: Final = 1
MUL: Final = 2
WIDE: Final = 4


@njit(nogil=True, cache=True)
def _binary_loop(op: int, x: Arr, y: Arr, out: Arr) -> None:  # pragma: no cover - compiled
    """``out = x op y`` elementwise, one loop per operation (each vectorises)."""
    if op == 0:
        for i in range(out.size):
            out[i] = x[i] + y[i]
    elif op == 1:
        for i in range(out.size):
            out[i] = x[i] - y[i]
    else:
        for i in range(out.size):
            out[i] = x[i] * y[i]


@njit(nogil=True, cache=True)
def binary(op: int, a: Arr, first_a: int, b: Arr, first_b: int,
           out: Arr) -> None:  # pragma: no cover - compiled
    """Operation ``op`` of the elements of ``a``'s bytes from ``first_a`` and
    as many of ``b``'s from ``first_b``, into ``out``'s bytes (their count:
    ``out`` holds exactly the results)."""
    if op >= 4:
        n = out.size // 8
        _binary_loop(op - 4, a[first_a:first_a + 8 * n].view(np.float64),
                     b[first_b:first_b + 8 * n].view(np.float64), out.view(np.float64))
    else:
        n = out.size // 4
        _binary_loop(op, a[first_a:first_a + 4 * n].view(np.float32),
                     b[first_b:first_b + 4 * n].view(np.float32), out.view(np.float32))


@njit(nogil=True, cache=True)
def sum_rows(wide: bool, x: Arr, first: int, rows: int, n: int,
             out: Arr) -> None:  # pragma: no cover - compiled
    """``lanes.sum_blocks`` of ``rows`` rows of ``n`` (at most one block)
    elements of ``x``'s bytes from ``first``, into ``out``'s bytes (exactly
    ``rows`` elements): float64 where ``wide``, else float32; a NaN sum the
    positive quiet NaN, as ``reduce`` stores it (``rowterms.canonical_nans``)."""
    if wide:
        sums = out.view(np.float64)
        sum_blocks(x[first:first + 8 * rows * n].view(np.float64).reshape((rows, n)),
                   sums.reshape((rows, 1)))
        for r in range(rows):
            if sums[r] != sums[r]:
                sums[r] = np.nan
    else:
        sums32 = out.view(np.float32)
        sum_blocks(x[first:first + 4 * rows * n].view(np.float32).reshape((rows, n)),
                   sums32.reshape((rows, 1)))
        for r in range(rows):
            if sums32[r] != sums32[r]:
                sums32[r] = np.float32(np.nan)

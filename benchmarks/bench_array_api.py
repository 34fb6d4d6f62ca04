"""The Array API namespace (``nxkernel_core.array_api``) side by side with
NumPy: ``a + b``, ``sum``, ``matmul``, ``x[idx]`` (an integer-array gather) and
``x[mask]`` (a boolean mask) at 8 and 10^6 float32 elements.

Each row times the namespace's whole call as a user makes it (promotion,
broadcasting, a fresh result, the kernels through the caller) against the
same NumPy expression, alternately in one process; times are medians and
``ratio`` is NumPy's time over ours. The matmul rows past 8 elements time
each call once no other thread of the process runs (``timing.quiet``):
NumPy's OpenBLAS workers spin on the cores for about 0.1 s after its
product, and would share them with ours timed right after. Every pair is
checked first: bit for bit for the moves and ``a + b``, to float32's sum
bound for ``sum`` and ``matmul``. A warm call builds no program: each
elementwise function's program is made once per dtype.
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks import timing
from benchmarks.timing import check_bits, check_close
from benchmarks.timing import row as _row
from nxkernel_core import array_api as xp

LIBRARY = "host"


def _cases(n: int, rng: np.random.Generator) -> list[tuple[str, Callable[[], Any], Callable[[], Any],
                                                           float | None, bool]]:
    """(name, ours, NumPy's, relative bound or None for bits, whether to
    time each call settled) at n elements."""
    a_np = rng.standard_normal(n).astype(np.float32)
    b_np = rng.standard_normal(n).astype(np.float32)
    a, b = xp.asarray(a_np), xp.asarray(b_np)
    side = max(1, math.isqrt(n))
    m_np = rng.standard_normal((side, side)).astype(np.float32)
    m = xp.asarray(m_np)
    idx_np = rng.integers(0, n, n // 2 or 1)
    idx = xp.asarray(idx_np)
    mask_np = a_np > 0
    mask = xp.asarray(mask_np)
    sum_bound = n * float(np.finfo(np.float32).eps)
    return [
        ("xp a + b", lambda: a + b, lambda: a_np + b_np, None, False),
        ("xp.sum", lambda: xp.sum(a), lambda: np.sum(a_np), sum_bound, False),
        (f"xp.matmul {side}x{side}", lambda: m @ m, lambda: m_np @ m_np, 2 * side * sum_bound / n,
         n >= 10**4),
        ("x[idx]", lambda: a[idx], lambda: a_np[idx_np], None, False),
        ("x[mask]", lambda: a[mask], lambda: a_np[mask_np], None, False),
    ]


def _check(name: str, ours: Callable[[], Any], theirs: Callable[[], Any], bound: float | None) -> None:
    """Ours against NumPy's: the same bits, or within ``bound`` (normwise)."""
    got, want = np.asarray(ours().to_numpy()), np.asarray(theirs())
    what = f"bench_array_api: {name}: nxkernel and NumPy"
    if bound is None:
        check_bits(what, got, want)
    else:
        check_close(what, got, want, bound, by="norm")


def run(quick: bool) -> list[dict[str, Any]]:
    """The rows at 8 and 10^6 elements (10^4 with ``quick``)."""
    repeats = 5 if quick else 15
    rng = np.random.default_rng(0)
    rows = []
    for n in (8, 10**4 if quick else 10**6):
        for name, ours, theirs, bound, settle in _cases(n, rng):
            rows.append(_row(name, n, "float32", ours, theirs, repeats * (20 if n == 8 else 1),
                             check=functools.partial(_check, name, ours, theirs, bound),
                             settle=settle))
    return rows


if __name__ == "__main__":
    sys.exit(timing.main(run, __doc__, "10^4 elements, fewer repeats"))

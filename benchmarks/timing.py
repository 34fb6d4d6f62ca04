"""Side-by-side timing shared by the benchmark suites."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np


def medians(ours: Callable[[], object], other: Callable[[], object], repeats: int
            ) -> tuple[float, float]:
    """Median seconds of each, after one warm-up call each, run alternately so
    both see the same machine load."""
    ours()
    other()
    a, b = [], []
    for _ in range(repeats):
        t = time.perf_counter()
        ours()
        a.append(time.perf_counter() - t)
        t = time.perf_counter()
        other()
        b.append(time.perf_counter() - t)
    return float(np.median(a)), float(np.median(b))


def row(name: str, size: int, dtype: str, ours: Callable[[], object],
        other: Callable[[], object], repeats: int) -> dict[str, Any]:
    """One benchmark row: both medians and the ratio other/ours (above 1: we are faster)."""
    ours_s, other_s = medians(ours, other, repeats)
    return {"name": name, "size": size, "dtype": dtype, "ours_s": ours_s, "numpy_s": other_s,
            "ratio": other_s / ours_s}

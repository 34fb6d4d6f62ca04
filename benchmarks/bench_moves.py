"""The host library's moves side by side with NumPy: sort, top-k, gather,
scatter-add and numbering (searchsorted).

Each row times our kernel, called directly with preallocated destinations,
and the NumPy function a user would call for the same result, alternately in
one process; times are medians. ``ratio`` is NumPy's time over ours.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from benchmarks.timing import row as _row
from nxkernel_core import dtype as D
from nxkernel_core import spec as S
from nxkernel_core.array import Array
from nxkernel_host.moves import FAMILY

LIBRARY = "host"


def run(quick: bool) -> list[dict[str, Any]]:
    """The rows: full sizes (1e6 sorts, 1e7 gathers and scatters), or a
    hundredth of them with ``quick``."""
    scale = 100 if quick else 1
    repeats = 3 if quick else 7
    rng = np.random.default_rng(0)
    k = FAMILY.kernels
    rows = []

    n = 10**6 // scale
    xs = rng.standard_normal(n).astype(np.float32)
    x = Array.from_numpy(xs)
    values, positions = Array.empty(D.float32, (n,)), Array.empty(D.int64, (n,))
    rows.append(_row("sort (stable, with positions)", n, "float32",
                     lambda: k["sort"](S.Sort(0), [values, positions], [x]),
                     lambda: np.sort(xs, kind="stable"), repeats))
    top = 100
    tv, tp = Array.empty(D.float32, (top,)), Array.empty(D.int64, (top,))
    rows.append(_row(f"top-{top} vs full np.sort", n, "float32",
                     lambda: k["sort"](S.Sort(0, True, top), [tv, tp], [x]),
                     lambda: np.sort(xs, kind="stable"), repeats))

    keys_np = np.sort(rng.standard_normal(n // 10)).astype(np.float32)
    keys = Array.from_numpy(keys_np)
    found = Array.empty(D.int64, (n,))
    rows.append(_row("numbering vs np.searchsorted", n, "float32",
                     lambda: k["numbering"](S.Numbering(), [found], [keys, x]),
                     lambda: np.searchsorted(keys_np, xs), repeats))

    m = 10**7 // scale
    src_np = rng.standard_normal(m).astype(np.float32)
    idx_np = rng.integers(0, m, m)
    src, idx = Array.from_numpy(src_np), Array.from_numpy(idx_np)
    taken = Array.empty(D.float32, (m,))
    rows.append(_row("gather vs np.take", m, "float32",
                     lambda: k["gather"](S.Gather(0), [taken], [idx, src]),
                     lambda: np.take(src_np, idx_np), repeats))

    # Into as many elements as updates (random read-modify-writes in memory),
    # then into a cache-sized histogram of 1e5 bins.
    for bins in (m, 10**5 // scale):
        into_np = np.zeros(bins, np.float32)
        at_np = idx_np % bins
        into, at = Array.from_numpy(into_np), Array.from_numpy(at_np)
        summed = Array.empty(D.float32, (bins,))

        def ours(summed: Array = summed, into: Array = into, at: Array = at) -> object:
            return k["scatter"](S.Scatter(0, S.Combine.ADD), [summed], [into, at, src])

        def add_at(into_np: np.ndarray[Any, Any] = into_np, at_np: np.ndarray[Any, Any] = at_np
                   ) -> None:
            out = into_np.copy()
            np.add.at(out, at_np, src_np)

        rows.append(_row(f"scatter-add into {bins} vs np.add.at", m, "float32", ours, add_at,
                         repeats))
    return rows

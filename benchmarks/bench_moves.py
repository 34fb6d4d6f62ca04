"""The host library's moves side by side with NumPy: sort, top-k, gather,
scatter-add and numbering (searchsorted).

Each row times our kernel, called directly with preallocated destinations,
and the NumPy function a user would call for the same result, alternately in
one process; times are medians. ``ratio`` is NumPy's time over ours.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks import timing
from benchmarks.timing import Check, check_bits
from benchmarks.timing import row as _row
from nxkernel_core import dtype as D
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_core.plugins import discover

LIBRARY = "host"


def _bits(what: str, call: Callable[[], object], dsts: list[Array], want: Callable[[], Any]
          ) -> Check:
    """The row's check for a move: one call of each, then every destination
    has the bits of the peer's matching result (``want()`` returns one array
    per destination that is compared; fewer where the peer gives fewer)."""
    def check() -> None:
        assert call() is Answer.DONE, f"{what}: nxkernel did not compute"
        for dst, expected in zip(dsts, want(), strict=False):
            got = dst.to_numpy()
            check_bits(what, got, np.asarray(expected).astype(got.dtype))

    return check


def run(quick: bool) -> list[dict[str, Any]]:
    """The rows: full sizes (1e6 sorts, 1e7 gathers, 1e6 and 1e7 scatters), or a
    hundredth of them with ``quick``."""
    scale = 100 if quick else 1
    repeats = 3 if quick else 7
    rng = np.random.default_rng(0)
    lib = discover().library("host")
    rows = []

    n = 10**6 // scale
    xs = rng.standard_normal(n).astype(np.float32)
    x = Array.from_numpy(xs)
    values, positions = Array.empty(D.float32, (n,)), Array.empty(D.int64, (n,))
    sort = lambda: lib.sort(S.Sort(0), [values, positions], [x])  # noqa: E731
    order = lambda: (np.sort(xs, kind="stable"), np.argsort(xs, kind="stable"))  # noqa: E731
    rows.append(_row("sort (stable, with positions)", n, "float32", sort,
                     lambda: np.sort(xs, kind="stable"), repeats,
                     check=_bits("bench_moves: sort: nxkernel and NumPy", sort, [values, positions],
                                 order)))
    top = 100
    tv, tp = Array.empty(D.float32, (top,)), Array.empty(D.int64, (top,))
    top_call = lambda: lib.sort(S.Sort(0, True, top), [tv, tp], [x])  # noqa: E731
    # Descending and stable: the largest first, ties by increasing position.
    top_want = lambda: (xs[(p := np.argsort(-xs, kind="stable")[:top])], p)  # noqa: E731
    rows.append(_row(f"top-{top} vs full np.sort", n, "float32", top_call,
                     lambda: np.sort(xs, kind="stable"), repeats,
                     check=_bits("bench_moves: top-k: nxkernel and NumPy", top_call, [tv, tp],
                                 top_want)))

    keys_np = np.sort(rng.standard_normal(n // 10)).astype(np.float32)
    keys = Array.from_numpy(keys_np)
    found = Array.empty(D.int64, (n,))
    numbering = lambda: lib.numbering(S.Numbering(), [found], [keys, x])  # noqa: E731

    def searched() -> Any:
        return np.searchsorted(keys_np, xs)

    rows.append(_row("numbering vs np.searchsorted", n, "float32", numbering, searched, repeats,
                     check=_bits("bench_moves: numbering: nxkernel and NumPy", numbering, [found],
                                 lambda: (searched(),))))

    m = 10**7 // scale
    src_np = rng.standard_normal(m).astype(np.float32)
    idx_np = rng.integers(0, m, m)
    src, idx = Array.from_numpy(src_np), Array.from_numpy(idx_np)
    taken = Array.empty(D.float32, (m,))
    gather = lambda: lib.gather(S.Gather(0), [taken], [idx, src])  # noqa: E731

    def take() -> Any:
        return np.take(src_np, idx_np)

    rows.append(_row("gather vs np.take", m, "float32", gather, take, repeats,
                     check=_bits("bench_moves: gather: nxkernel and NumPy", gather, [taken],
                                 lambda: (take(),))))

    # Scatter-add: 1e6 updates into a histogram of 1e5 bins (float32 and
    # float64) and of 1e3 (in the first-level cache), then 1e7 updates into as
    # many elements (random read-modify-writes in memory), into 1e6 and into
    # 1e5 bins.
    for n_up, bins, dtype in ((10**6 // scale, 10**5 // scale, np.float32),
                              (10**6 // scale, 10**5 // scale, np.float64),
                              (10**6 // scale, 10**3 // scale, np.float32),
                              (m, m, np.float32), (m, 10**6 // scale, np.float32),
                              (m, 10**5 // scale, np.float32)):
        rows.append(_scatter_add_row(lib, n_up, bins, dtype, idx_np, src_np, repeats))
    return rows


def _scatter_add_row(lib: Any, n: int, bins: int, dtype: type[np.floating[Any]],
                     idx_np: np.ndarray[Any, Any], src_np: np.ndarray[Any, Any], repeats: int
                     ) -> dict[str, Any]:
    """The row of ``n`` updates (the first of ``src_np``, at the first of
    ``idx_np`` modulo ``bins``) added into ``bins`` zeros, against ``np.add.at``."""
    ups_np = src_np[:n].astype(dtype)
    at_np = idx_np[:n] % bins
    into_np = np.zeros(bins, dtype)
    ups, at, into = Array.from_numpy(ups_np), Array.from_numpy(at_np), Array.from_numpy(into_np)
    summed = Array.empty(D.by_name(np.dtype(dtype).name), (bins,))

    def ours() -> object:
        return lib.scatter(S.Scatter(0, S.Combine.ADD), [summed], [into, at, ups])

    def add_at() -> np.ndarray[Any, Any]:
        out = into_np.copy()
        np.add.at(out, at_np, ups_np)
        return out

    # Both chain each bin's updates in index order from its into element, +0
    # here (add.at applies them one by one, in order): the same bits.
    check = _bits("bench_moves: scatter-add: nxkernel and NumPy", ours, [summed],
                  lambda: (add_at(),))
    return _row(f"scatter-add {n} into {bins} vs np.add.at", n, np.dtype(dtype).name, ours,
                add_at, repeats, check=check)


if __name__ == "__main__":
    sys.exit(timing.main(run, __doc__, "a hundredth of the sizes"))

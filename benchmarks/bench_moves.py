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
from benchmarks.timing import Check, check_bits, check_within, gamma
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
    """The rows: full sizes (1e6 sorts, 1e7 gathers and scatters), or a
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

    # Into as many elements as updates (random read-modify-writes in memory),
    # then into a cache-sized histogram of 1e5 bins.
    for bins in (m, 10**5 // scale):
        into_np = np.zeros(bins, np.float32)
        at_np = idx_np % bins
        into, at = Array.from_numpy(into_np), Array.from_numpy(at_np)
        summed = Array.empty(D.float32, (bins,))

        def ours(summed: Array = summed, into: Array = into, at: Array = at) -> object:
            return lib.scatter(S.Scatter(0, S.Combine.ADD), [summed], [into, at, src])

        def add_at(into_np: np.ndarray[Any, Any] = into_np, at_np: np.ndarray[Any, Any] = at_np
                   ) -> np.ndarray[Any, Any]:
            out = into_np.copy()
            np.add.at(out, at_np, src_np)
            return out

        def check(ours: Callable[[], object] = ours, add_at: Callable[[], Any] = add_at,
                  summed: Array = summed, at_np: np.ndarray[Any, Any] = at_np, bins: int = bins
                  ) -> None:
            # Both chain each bin's updates from its into element: within
            # γ(c)·Σ|updates| of the exact sum each, c the bin's count.
            assert ours() is Answer.DONE, "bench_moves: scatter-add: nxkernel did not compute"
            count = np.bincount(at_np, minlength=bins)
            mass = np.bincount(at_np, weights=np.abs(src_np.astype(np.float64)), minlength=bins)
            bound = 2 * np.array([gamma(int(c), np.float32) for c in count]) * mass
            check_within("bench_moves: scatter-add: nxkernel and NumPy", summed.to_numpy(),
                         add_at(), bound)

        rows.append(_row(f"scatter-add into {bins} vs np.add.at", m, "float32", ours, add_at,
                         repeats, check=check))
    return rows


if __name__ == "__main__":
    sys.exit(timing.main(run, __doc__, "a hundredth of the sizes"))

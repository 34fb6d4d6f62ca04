"""The caller's per-call cost: ``nx.add``, ``nx.sum`` and ``nx.matmul`` of 8
and 1000 float32 elements against NumPy and PyTorch.

Each row times the public call a user writes (checks, a fresh destination, the
plan's look-up, the door's claims, the host library's kernel) against
``np.add``/``np.sum``/``np.matmul`` and ``torch.add``/``torch.sum``/
``torch.matmul`` on tensors sharing NumPy's memory, each allocating its
result, alternately in one process (medians). ``ratio`` is NumPy's time over
ours, ``ratio_torch`` PyTorch's (None where PyTorch is not installed). Each
pair is checked first: add bit for bit, sum and matmul within the float32
bound of their orders of summation.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks import timing
from benchmarks.timing import check_bits, check_close
from nxkernel_core import nx

LIBRARY = "host"

#: float32's unit roundoff times a margin for 1000-term sums in any order.
_SUM_REL = 1000 * 2.0**-24


def _torch() -> Any:
    return importlib.import_module("torch") if importlib.util.find_spec("torch") else None


def _cases(n: int, rng: np.random.Generator) -> list[tuple[str, Callable[[], Any],
                                                           Callable[[], Any], Any]]:
    """(name, ours, NumPy's, torch's callable or None) for ``n`` elements."""
    torch = _torch()
    x, y = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    m = 2 if n == 8 else 10
    k = n // m
    ma, mb = (rng.standard_normal(s).astype(np.float32) for s in ((m, k), (k, m)))
    a, b, pa, pb = (nx.asarray(v) for v in (x, y, ma, mb))
    t = [torch.from_numpy(v) for v in (x, y, ma, mb)] if torch is not None else None
    return [
        ("nx.add", functools.partial(nx.add, a, b), functools.partial(np.add, x, y),
         functools.partial(torch.add, t[0], t[1]) if t else None),
        ("nx.sum", functools.partial(nx.sum, a), functools.partial(np.sum, x),
         functools.partial(torch.sum, t[0]) if t else None),
        (f"nx.matmul [{m},{k}]@[{k},{m}]", functools.partial(nx.matmul, pa, pb),
         functools.partial(np.matmul, ma, mb),
         functools.partial(torch.matmul, t[2], t[3]) if t else None),
    ]


def run(quick: bool) -> list[dict[str, Any]]:
    repeats = 200 if quick else 2000
    rng = np.random.default_rng(3)
    rows = []
    for n in (8, 1000):
        for name, ours, theirs, torch_fn in _cases(n, rng):
            what = f"bench_calls: {name}: nxkernel and NumPy"

            def check(ours: Callable[[], Any] = ours, theirs: Callable[[], Any] = theirs,
                      name: str = name, what: str = what) -> None:
                got, want = np.asarray(ours().to_numpy()), np.asarray(theirs())
                if name == "nx.add":
                    check_bits(what, got, want)
                else:
                    check_close(what, got, want, _SUM_REL, by="norm")

            row = timing.row(f"{name} (call overhead)", n, "float32", ours, theirs, repeats,
                             check=check)
            if torch_fn is not None and not row["failed"]:
                ours_s, torch_s = timing.medians(ours, torch_fn, repeats)
                row["torch_s"] = torch_s
                row["ratio_torch"] = torch_s / ours_s if ours_s > 0 else None
            else:
                row["torch_s"] = row["ratio_torch"] = None
            rows.append(row)
    return rows


if __name__ == "__main__":
    sys.exit(timing.main(run, __doc__, "200 repeats a row instead of 2000"))

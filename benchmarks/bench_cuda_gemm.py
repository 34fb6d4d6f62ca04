"""nx.cuda's contract on cuda:0 against cuBLAS (through PyTorch or CuPy), side
by side in one process.

Cases: a bfloat16 GEMM n x n x n into float32 (nx.cuda's tensor-core path)
against PyTorch's bfloat16 matmul (cuBLAS, float32 accumulation, bfloat16
result, so ours stores bfloat16 too); a float32 GEMM (nx.cuda's SIMT fma
chain) against CuPy's matmul (cuBLAS SGEMM); and a grouped float32 GEMM (8
groups of n/8 rows, one nx.cuda launch with Rows segments) against one CuPy
matmul per group. n = 4096 (1024 where ``quick``). Each case first checks
ours against the competitor's result (a relative Frobenius error of 2^-6 for
bfloat16 results, 1e-4 for float32), then reports the medians of alternating
timings, each followed by a synchronisation, and ``ratio = theirs / ours``
(above 1: ours is faster), the competitor's time in ``numpy_s``.

Without a usable GPU (no CuPy, no driver, no device) ``run`` prints why and
returns no rows; without PyTorch the bfloat16 case is skipped with the reason
printed. ``python benchmarks/bench_cuda_gemm.py [--quick] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from nxkernel_core import dtype as D
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_cuda import device
from nxkernel_cuda.library import LIBRARY as LIB

#: The library these benchmarks measure (the runner's ``nxkernel bench cuda``).
LIBRARY = "cuda"

#: Groups of the grouped GEMM.
GROUPS = 8


def _median(f: Callable[[], Any], g: Callable[[], Any], repeats: int) -> tuple[float, float]:
    """Medians of ``repeats`` alternating timings of ``f`` and ``g`` (each
    including its synchronisation), after one warm-up each."""
    f()
    g()
    tf, tg = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        tf.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        g()
        tg.append(time.perf_counter() - t0)
    return statistics.median(tf), statistics.median(tg)


def _row(name: str, n: int, dtype: str, ours: float, theirs: float) -> dict[str, Any]:
    return {"name": name, "size": n, "dtype": dtype, "ours_s": ours, "numpy_s": theirs,
            "ratio": theirs / ours if ours > 0 else None}


def _check(name: str, ours: np.ndarray, theirs: np.ndarray, rel: float) -> None:
    """Raise where ours and the competitor's results differ by more than a
    relative Frobenius error ``rel``."""
    o, t = ours.astype(np.float64), theirs.astype(np.float64)
    err = float(np.linalg.norm(o - t)) / max(float(np.linalg.norm(t)), 1e-300)
    if not err <= rel:
        raise AssertionError(f"bench_cuda_gemm: {name}: nx.cuda and cuBLAS differ by {err:.3g} (relative)")


def _bf16_case(dev: device.CudaDevice, n: int, repeats: int) -> list[dict[str, Any]]:
    """bfloat16 n³ into bfloat16 through a float32 accumulator, against PyTorch."""
    if importlib.util.find_spec("torch") is None:
        print("bench_cuda_gemm: the bfloat16 GEMM is not measured: PyTorch is not installed",
              file=sys.stderr)
        return []
    import torch

    rng = np.random.default_rng(n)
    a = D.of_float(D.bfloat16, rng.standard_normal((n, n)))
    b = D.of_float(D.bfloat16, rng.standard_normal((n, n)))
    ga, gb = Array.from_numpy(a, dev, D.bfloat16), Array.from_numpy(b, dev, D.bfloat16)
    out = Array.empty(D.bfloat16, (n, n), dev)
    ta = torch.from_numpy(a.view(np.int16)).view(torch.bfloat16).cuda()
    tb = torch.from_numpy(b.view(np.int16)).view(torch.bfloat16).cuda()
    spec = S.Contract((), ((1, 0),), D.float32)

    def ours() -> None:
        assert LIB.contract(spec, [out], [ga, gb]) is Answer.DONE
        dev.synchronize()

    def theirs() -> Any:
        r = torch.matmul(ta, tb)
        torch.cuda.synchronize()
        return r

    ours()
    want = theirs().float().cpu().numpy()
    _check("bf16 gemm", out.to_numpy().astype(np.float32), want, 2.0**-6)
    return [_row("gemm bf16->f32->bf16 vs torch", n, "bfloat16", *_median(ours, theirs, repeats))]


def _f32_cases(dev: device.CudaDevice, n: int, repeats: int) -> list[dict[str, Any]]:
    """float32 n³ and the grouped GEMM, against CuPy."""
    import cupy as cp

    rng = np.random.default_rng(n + 1)
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    ga, gb = Array.from_numpy(a, dev), Array.from_numpy(b, dev)
    ca, cb = cp.asarray(a), cp.asarray(b)
    out = Array.empty(D.float32, (n, n), dev)
    spec = S.Contract((), ((1, 0),), D.float32)

    def ours() -> None:
        assert LIB.contract(spec, [out], [ga, gb]) is Answer.DONE
        dev.synchronize()

    def theirs() -> Any:
        r = cp.matmul(ca, cb)
        cp.cuda.get_current_stream().synchronize()
        return r

    ours()
    _check("f32 gemm", out.to_numpy(), cp.asnumpy(theirs()), 1e-4)
    rows = [_row("gemm f32 vs cupy", n, "float32", *_median(ours, theirs, repeats))]

    # Grouped: rows r of a [n, k] multiply b[ids[r]] of b [g, k, m]; rows sorted by group.
    k, m = n // 4, n // 4
    ga2 = Array.from_numpy(a[:, :k].copy(), dev)
    bg = rng.standard_normal((GROUPS, k, m)).astype(np.float32)
    ids = np.repeat(np.arange(GROUPS, dtype=np.int64), n // GROUPS)
    gbg, gids = Array.from_numpy(bg, dev), Array.from_numpy(ids, dev)
    cag, cbg = cp.asarray(a[:, :k]), cp.asarray(bg)
    grouped = Array.empty(D.float32, (n, m), dev)
    gspec = S.Contract((), ((1, 1),), D.float32, segments=S.Rows(0, 0))
    per = n // GROUPS

    def ours_grouped() -> None:
        assert LIB.contract(gspec, [grouped], [ga2, gbg, gids]) is Answer.DONE
        dev.synchronize()

    def theirs_grouped() -> Any:
        r = cp.concatenate([cp.matmul(cag[e * per:(e + 1) * per], cbg[e]) for e in range(GROUPS)])
        cp.cuda.get_current_stream().synchronize()
        return r

    ours_grouped()
    _check("grouped gemm", grouped.to_numpy(), cp.asnumpy(theirs_grouped()), 1e-4)
    rows.append(_row(f"grouped gemm f32 ({GROUPS} groups) vs cupy", n, "float32",
                     *_median(ours_grouped, theirs_grouped, repeats)))
    return rows


def run(quick: bool) -> list[dict[str, Any]]:
    """The rows of every case; none (with the reason printed) where no CUDA GPU is usable."""
    ok, why = device.availability()
    if not ok:
        print(f"bench_cuda_gemm: no CUDA GPU is usable here, so nothing is measured: {why}",
              file=sys.stderr)
        return []
    dev = device.CudaDevice(0)
    n = 1024 if quick else 4096
    repeats = 3 if quick else 10
    return _bf16_case(dev, n, repeats) + _f32_cases(dev, n, repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1024³ only, fewer repeats")
    parser.add_argument("--json", help="write the rows to this file")
    args = parser.parse_args()
    rows = run(args.quick)
    for r in rows:
        print(f"{r['name']:<44} {r['size']:>6} {r['ours_s'] * 1e3:10.3f} ms {r['numpy_s'] * 1e3:10.3f} ms"
              f" x{r['ratio']:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()

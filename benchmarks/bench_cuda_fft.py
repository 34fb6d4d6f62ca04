"""nx.cuda's fft on cuda:0 against ``cupy.fft.fft`` (cuFFT), side by side in one process.

Cases: a forward C2c transform of one line of complex64, 2^24 points (2^20
where ``quick``), and a batch of 1024 lines of 4096 points (256 where
``quick``; the one-pass path); then, in full runs, 2^20 + 7 points, a length
with a prime factor above 7 (Bluestein). Each case calls the library's kernel
directly (arrays and destination made beforehand), then CuPy's, alternating,
each followed by a synchronisation of its stream, and reports the medians and
``ratio = cupy_s / ours_s`` (above 1: ours is faster) in ``numpy_s``, the
runner's reference column. Every case first checks that both results agree
within 1e-5 of the result's 2-norm, so a run on a lent GPU also tests the
kernels there.

Without a usable GPU (no CuPy, no driver, no device) ``run`` prints why and
returns no rows. ``python benchmarks/bench_cuda_fft.py [--quick] [--json PATH]``.
"""

from __future__ import annotations

import argparse
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


def _case(dev: device.CudaDevice, lines: int, n: int, repeats: int) -> dict[str, Any]:
    """One forward C2c case of ``lines`` lines of n complex64 points."""
    import cupy as cp

    rng = np.random.default_rng(n)
    host = (rng.standard_normal((lines, n)) + 1j * rng.standard_normal((lines, n))).astype(np.complex64)
    x = Array.from_numpy(host, dev)
    out = Array.empty(D.complex64, (lines, n), dev)
    cx = cp.asarray(host)
    spec = S.Fft((1,), S.Direction.FORWARD, S.C2c())

    def ours() -> None:
        assert LIB.fft(spec, [out], [x]) is Answer.DONE
        dev.synchronize()

    def theirs() -> Any:
        r = cp.fft.fft(cx, axis=1)
        cp.cuda.get_current_stream().synchronize()
        return r

    ours()
    got, want = out.to_numpy().astype(np.complex128), cp.asnumpy(theirs()).astype(np.complex128)
    if not np.linalg.norm(got - want) <= 1e-5 * np.linalg.norm(want):
        raise AssertionError(f"bench_cuda_fft: {lines} x {n}: nx.cuda and cupy.fft.fft disagree")
    ours_s, cupy_s = _median(ours, theirs, repeats)
    name = f"fft c2c {lines}x{n} vs cupy" if lines > 1 else f"fft c2c {n} vs cupy"
    return {"name": name, "size": lines * n, "dtype": "complex64", "ours_s": ours_s, "numpy_s": cupy_s,
            "ratio": cupy_s / ours_s if ours_s > 0 else None}


def run(quick: bool) -> list[dict[str, Any]]:
    """The rows of every case; none (with the reason printed) where no CUDA
    GPU is usable."""
    ok, why = device.availability()
    if not ok:
        print(f"bench_cuda_fft: no CUDA GPU is usable here, so nothing is measured: {why}", file=sys.stderr)
        return []
    dev = device.CudaDevice(0)
    repeats = 5 if quick else 20
    cases = [(1, 1 << 20), (256, 4096)] if quick else [(1, 1 << 24), (1024, 4096), (1, (1 << 20) + 7)]
    return [_case(dev, lines, n, repeats) for lines, n in cases]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2^20 points, fewer repeats")
    parser.add_argument("--json", help="write the rows to this file")
    args = parser.parse_args()
    rows = run(args.quick)
    for r in rows:
        print(f"{r['name']:<36} {r['size']:>10} {r['ours_s'] * 1e3:9.3f} ms {r['numpy_s'] * 1e3:9.3f} ms"
              f" x{r['ratio']:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()

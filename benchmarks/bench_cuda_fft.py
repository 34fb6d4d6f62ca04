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
returns no rows. ``python -m benchmarks.bench_cuda_fft [--quick] [--json PATH]``.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from benchmarks import timing
from nxkernel_core import dtype as D
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array

#: The library these benchmarks measure (the runner's ``python -m benchmarks.run cuda``).
LIBRARY = "cuda"


def _case(dev: Any, lines: int, n: int, repeats: int) -> dict[str, Any]:
    """One forward C2c case of ``lines`` lines of n complex64 points."""
    lib = timing.cuda_library()
    import cupy as cp

    rng = np.random.default_rng(n)
    host = (rng.standard_normal((lines, n)) + 1j * rng.standard_normal((lines, n))).astype(np.complex64)
    x = Array.from_numpy(host, dev)
    out = Array.empty(D.complex64, (lines, n), dev)
    cx = cp.asarray(host)
    spec = S.Fft((1,), S.Direction.FORWARD, S.C2c())

    def ours() -> None:
        assert lib.fft(spec, [out], [x]) is Answer.DONE
        dev.synchronize()

    def theirs() -> Any:
        r = cp.fft.fft(cx, axis=1)
        cp.cuda.get_current_stream().synchronize()
        return r

    def check() -> None:
        ours()
        timing.check_close(f"bench_cuda_fft: {lines} x {n}: nx.cuda and cupy.fft.fft",
                           out.to_numpy(), cp.asnumpy(theirs()), 1e-5, by="norm")

    name = f"fft c2c {lines}x{n} vs cupy" if lines > 1 else f"fft c2c {n} vs cupy"
    return timing.row(name, lines * n, "complex64", ours, theirs, repeats, check=check)


def run(quick: bool) -> list[dict[str, Any]]:
    """The rows of every case; none (with the reason printed) where no CUDA
    GPU is usable."""
    dev = timing.cuda_device("bench_cuda_fft")
    if dev is None:
        return []
    repeats = 5 if quick else 20
    cases = [(1, 1 << 20), (256, 4096)] if quick else [(1, 1 << 24), (1024, 4096), (1, (1 << 20) + 7)]
    return [_case(dev, lines, n, repeats) for lines, n in cases]


if __name__ == "__main__":
    sys.exit(timing.main(run, __doc__, "2^20 points, fewer repeats"))

"""nx.cuda's batched matrix routines on cuda:0 against CuPy's and PyTorch's.

Case: cholesky of a batch of 32 x 32 float32 symmetric positive-definite
matrices, 10000 of them (1000 where ``quick``), nx.cuda's kernel (one block a
matrix, arrays made beforehand) against ``cupy.linalg.cholesky`` and, where
PyTorch with CUDA is importable, ``torch.linalg.cholesky`` on the same device,
alternating, each followed by a synchronisation of its stream. Rows report the
medians and ``ratio = theirs / ours`` (above 1: ours is faster), the
competitor's time in ``numpy_s``, the runner's reference column. Each case
first checks that both factors agree to a relative 1e-4 of the largest entry
(float32 factorisations in different orders differ in their last bits), so a
run on a lent GPU is also a smoke test of the kernel there.

Without a usable GPU (no CuPy, no driver, no device) ``run`` prints why and
returns no rows; a competitor that cannot run is skipped with the reason
printed. ``python -m benchmarks.bench_cuda_routines [--quick] [--json PATH]``.
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

#: The matrices' order.
N = 32


def _cholesky(dev: Any, batch: int, repeats: int) -> list[dict[str, Any]]:
    lib = timing.cuda_library()
    import cupy as cp

    rng = np.random.default_rng(batch)
    g = rng.uniform(-1, 1, (batch, N, N))
    a = (g @ g.transpose(0, 2, 1) + N * np.eye(N)).astype(np.float32)
    ga = Array.from_numpy(a, dev)
    out = Array.empty(D.float32, (batch, N, N), dev)
    spec = S.Cholesky(False)

    def ours() -> None:
        assert lib.cholesky(spec, [out], [ga]) is Answer.DONE
        dev.synchronize()

    def mine() -> Any:
        ours()
        return out.to_numpy()

    rows = []
    ca = cp.asarray(a)

    def cupy_chol() -> Any:
        r = cp.linalg.cholesky(ca)
        cp.cuda.get_current_stream().synchronize()
        return r

    def check_cupy() -> None:
        # The lower factors alone, within 1e-4 of the largest entry.
        timing.check_close("bench_cuda_routines: cholesky: nx.cuda and CuPy",
                           np.tril(mine()), np.tril(cp.asnumpy(cupy_chol())), 1e-4)

    rows.append(timing.row(f"cholesky {batch} x {N}x{N} vs cupy", batch, "float32", ours, cupy_chol,
                           repeats, check=check_cupy))
    try:
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("torch.cuda.is_available() is False")
    except (ImportError, RuntimeError) as e:
        print(f"bench_cuda_routines: torch.linalg.cholesky is not measured: {e}", file=sys.stderr)
        return rows
    ta = torch.as_tensor(a, device="cuda:0")

    def torch_chol() -> Any:
        r = torch.linalg.cholesky(ta)
        torch.cuda.synchronize()
        return r

    def check_torch() -> None:
        timing.check_close("bench_cuda_routines: cholesky: nx.cuda and torch",
                           np.tril(mine()), np.tril(torch_chol().cpu().numpy()), 1e-4)

    rows.append(timing.row(f"cholesky {batch} x {N}x{N} vs torch", batch, "float32", ours, torch_chol,
                           repeats, check=check_torch))
    return rows


def run(quick: bool) -> list[dict[str, Any]]:
    """The rows of every case; none (with the reason printed) where no CUDA GPU
    is usable."""
    dev = timing.cuda_device("bench_cuda_routines")
    if dev is None:
        return []
    return _cholesky(dev, 1000 if quick else 10000, repeats=5 if quick else 20)


if __name__ == "__main__":
    sys.exit(timing.main(run, __doc__, "1000 matrices, fewer repeats"))

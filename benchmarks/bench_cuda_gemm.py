"""nx.cuda's contract on cuda:0 against cuBLAS (through PyTorch or CuPy), side
by side in one process.

Cases: a bfloat16 GEMM n x n x n into float32 (nx.cuda's tensor-core path)
against PyTorch's bfloat16 matmul (cuBLAS, float32 accumulation, bfloat16
result, so ours stores bfloat16 too); a grouped bfloat16 GEMM, the mixture of
experts' (n rows of a [n, n/4] in 8 groups of n/8, in a shuffled order, each
times its group's slice of b [8, n/4, n/4]: nx.cuda's tensor-core path with
Rows segments, a device pre-pass and one launch for all groups, into
bfloat16) against PyTorch gathering each group's rows, one bfloat16 matmul a
group and scattering the results back; an MXFP8 GEMM (a and b float8_e4m3fn
with Exponent (e8m0) scales in blocks of 32 along K, into bfloat16 through a
float32 accumulator: nx.cuda's tensor-core path, operands widened to float16
at staging, each instruction's result scaled) against PyTorch's bfloat16
matmul of the dequantised operands (each element times its scale, exact in
bfloat16: the peer multiplies the same values, but does not read float8 or
scales itself); and a float32 GEMM (nx.cuda's SIMT fma chain) against CuPy's
matmul (cuBLAS SGEMM). n = 4096 (1024 where
``quick``). Each case first checks ours against the competitor's result (a
relative Frobenius error of 2^-6 for bfloat16 results, 1e-4 for float32),
then reports the medians of alternating timings, each followed by a
synchronisation, and ``ratio = theirs / ours`` (above 1: ours is faster), the
competitor's time in ``numpy_s``.

Without a usable GPU (no CuPy, no driver, no device) ``run`` prints why and
returns no rows; without PyTorch the bfloat16 cases are skipped with the
reason printed. ``python -m benchmarks.bench_cuda_gemm [--quick] [--json PATH]``.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks import timing
from nxkernel_core import dtype as D
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array

#: The library these benchmarks measure (the runner's ``python -m benchmarks.run cuda``).
LIBRARY = "cuda"

#: Groups of the grouped GEMM.
GROUPS = 8

#: The MX scale block along K.
MX_BLOCK = 32


def _against_torch_matmul(dev: Any, spec: S.Contract, out: Array, ops: list[Array], ta: Any,
                          tb: Any) -> tuple[Callable[[], None], Callable[[], Any]]:
    """The timed pair: nx.cuda's contraction of ``ops`` into ``out`` and
    PyTorch's matmul of ``ta`` and ``tb``, each followed by a synchronisation."""
    lib = timing.cuda_library()
    import torch

    def ours() -> None:
        assert lib.contract(spec, [out], ops) is Answer.DONE
        dev.synchronize()

    def theirs() -> Any:
        r = torch.matmul(ta, tb)
        torch.cuda.synchronize()
        return r

    return ours, theirs


def _bf16_cases(dev: Any, n: int, repeats: int) -> list[dict[str, Any]]:
    """bfloat16 n³ and the grouped GEMM into bfloat16 through a float32
    accumulator, against PyTorch."""
    lib = timing.cuda_library()
    if importlib.util.find_spec("torch") is None:
        print("bench_cuda_gemm: the bfloat16 GEMMs are not measured: PyTorch is not installed",
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
    ours, theirs = _against_torch_matmul(dev, spec, out, [ga, gb], ta, tb)
    def check() -> None:
        ours()
        want = theirs().float().cpu().numpy()
        timing.check_close("bench_cuda_gemm: bf16 gemm: nx.cuda and cuBLAS",
                           out.to_numpy().astype(np.float32), want, 2.0**-6, by="norm")

    rows = [timing.row("gemm bf16->f32->bf16 vs torch", n, "bfloat16", ours, theirs, repeats, check=check)]

    # Grouped: row r of a [n, k] multiplies b[ids[r]] of b [g, k, m]; rows shuffled over the groups.
    k, m = n // 4, n // 4
    a2 = a[:, :k].copy()
    bg = D.of_float(D.bfloat16, rng.standard_normal((GROUPS, k, m)))
    ids = rng.permutation(np.repeat(np.arange(GROUPS, dtype=np.int64), n // GROUPS))
    ga2, gbg = Array.from_numpy(a2, dev, D.bfloat16), Array.from_numpy(bg, dev, D.bfloat16)
    gids = Array.from_numpy(ids, dev)
    grouped = Array.empty(D.bfloat16, (n, m), dev)
    gspec = S.Contract((), ((1, 1),), D.float32, segments=S.Rows(0, 0))
    ta2 = torch.from_numpy(a2.view(np.int16)).view(torch.bfloat16).cuda()
    tbg = torch.from_numpy(bg.view(np.int16)).view(torch.bfloat16).cuda()
    tids = torch.from_numpy(ids).cuda()
    members = [torch.nonzero(tids == e).squeeze(1) for e in range(GROUPS)]

    def ours_grouped() -> None:
        assert lib.contract(gspec, [grouped], [ga2, gbg, gids]) is Answer.DONE
        dev.synchronize()

    def theirs_grouped() -> Any:
        r = torch.empty((n, m), dtype=torch.bfloat16, device="cuda")
        for e in range(GROUPS):
            r[members[e]] = torch.matmul(ta2[members[e]], tbg[e])
        torch.cuda.synchronize()
        return r

    def check_grouped() -> None:
        ours_grouped()
        timing.check_close("bench_cuda_gemm: grouped bf16 gemm: nx.cuda and cuBLAS",
                           grouped.to_numpy().astype(np.float32), theirs_grouped().float().cpu().numpy(),
                           2.0**-6, by="norm")

    rows.append(timing.row(f"grouped gemm bf16->f32->bf16 ({GROUPS} groups) vs torch", n, "bfloat16",
                           ours_grouped, theirs_grouped, repeats, check=check_grouped))
    return rows


def _mxfp8_case(dev: Any, n: int, repeats: int) -> list[dict[str, Any]]:
    """MXFP8 n³ (float8_e4m3fn, e8m0 scales in blocks of 32 along K) into
    bfloat16, against PyTorch's bfloat16 matmul of the dequantised operands."""
    if importlib.util.find_spec("torch") is None:
        print("bench_cuda_gemm: the MXFP8 GEMM is not measured: PyTorch is not installed", file=sys.stderr)
        return []
    import torch

    rng = np.random.default_rng(n + 2)
    e4 = D.float8_e4m3fn
    a = D.of_float(e4, rng.standard_normal((n, n)))
    b = D.of_float(e4, rng.standard_normal((n, n)))
    sa = rng.integers(120, 135, (n, n // MX_BLOCK)).astype(np.uint8)
    sb = rng.integers(120, 135, (n // MX_BLOCK, n)).astype(np.uint8)
    ops = [Array.from_numpy(a, dev, e4), Array.from_numpy(b, dev, e4), Array.from_numpy(sa, dev),
           Array.from_numpy(sb, dev)]
    out = Array.empty(D.bfloat16, (n, n), dev)
    spec = S.Contract((), ((1, 0),), D.float32, scales=(S.ScaleKind.EXPONENT, S.ScaleKind.EXPONENT))
    fa = a.astype(np.float32) * np.exp2(np.repeat(sa.astype(np.float32) - 127, MX_BLOCK, axis=1))
    fb = b.astype(np.float32) * np.exp2(np.repeat(sb.astype(np.float32) - 127, MX_BLOCK, axis=0))
    ta = torch.from_numpy(fa).cuda().to(torch.bfloat16)  # exact: 4 significant bits, in range
    tb = torch.from_numpy(fb).cuda().to(torch.bfloat16)
    ours, theirs = _against_torch_matmul(dev, spec, out, ops, ta, tb)
    def check() -> None:
        ours()
        timing.check_close("bench_cuda_gemm: MXFP8 gemm: nx.cuda and cuBLAS on dequantised operands",
                           out.to_numpy().astype(np.float32), theirs().float().cpu().numpy(), 2.0**-6,
                           by="norm")

    return [timing.row("gemm mxfp8 (e4m3, e8m0 blocks of 32)->f32->bf16 vs torch bf16 dequantised", n,
                       "float8_e4m3fn", ours, theirs, repeats, check=check)]


def _f32_case(dev: Any, n: int, repeats: int) -> list[dict[str, Any]]:
    """float32 n³, against CuPy."""
    lib = timing.cuda_library()
    import cupy as cp

    rng = np.random.default_rng(n + 1)
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    ga, gb = Array.from_numpy(a, dev), Array.from_numpy(b, dev)
    ca, cb = cp.asarray(a), cp.asarray(b)
    out = Array.empty(D.float32, (n, n), dev)
    spec = S.Contract((), ((1, 0),), D.float32)

    def ours() -> None:
        assert lib.contract(spec, [out], [ga, gb]) is Answer.DONE
        dev.synchronize()

    def theirs() -> Any:
        r = cp.matmul(ca, cb)
        cp.cuda.get_current_stream().synchronize()
        return r

    def check() -> None:
        ours()
        timing.check_close("bench_cuda_gemm: f32 gemm: nx.cuda and cuBLAS",
                           out.to_numpy(), cp.asnumpy(theirs()), 1e-4, by="norm")

    return [timing.row("gemm f32 vs cupy", n, "float32", ours, theirs, repeats, check=check)]


def run(quick: bool) -> list[dict[str, Any]]:
    """The rows of every case; none (with the reason printed) where no CUDA GPU is usable."""
    dev = timing.cuda_device("bench_cuda_gemm")
    if dev is None:
        return []
    n = 1024 if quick else 4096
    repeats = 3 if quick else 10
    return _bf16_cases(dev, n, repeats) + _mxfp8_case(dev, n, repeats) + _f32_case(dev, n, repeats)


if __name__ == "__main__":
    sys.exit(timing.main(run, __doc__, "1024³ only, fewer repeats"))

"""The host library's contraction, Fourier transforms and matrix routines side
by side with NumPy (and SciPy where named).

Each row times our kernel, called directly with preallocated destinations,
and the function a user would call for the same result, alternately in one
process; times are medians. ``ratio`` is the reference's time over ours (above
1: we are faster). The reference is NumPy's but where the row's name says
``vs scipy.fft``, ``vs dequantise+matmul`` or ``vs loop of matmuls``: then
``numpy_s`` holds that reference's time.

Our kernels pin OpenBLAS to one thread per call and parallelise contractions
themselves (fixed chunks of rows on a thread pool), so their bits do not
depend on thread counts; NumPy's routines use OpenBLAS's own threads.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.fft

from benchmarks.timing import row as _row
from nxkernel_core import dtype as D
from nxkernel_core import spec as S
from nxkernel_core.array import Array
from nxkernel_host.contraction import FAMILY as CONTRACTION
from nxkernel_host.fourier import FAMILY as FOURIER
from nxkernel_host.matrices import FAMILY as MATRICES

LIBRARY = "host"


def _contract_rows(quick: bool, repeats: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(0)
    contract = CONTRACTION.kernels["contract"]
    rows = []

    n = 256 if quick else 1024
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    xa, xb, dst = Array.from_numpy(a), Array.from_numpy(b), Array.empty(D.float32, (n, n))
    spec = S.Contract((), ((1, 0),), D.float32)
    rows.append(_row("contract matmul", n, "float32",
                     lambda: contract(spec, [dst], [xa, xb]), lambda: a @ b, repeats))

    batch, m = (8, 64) if quick else (64, 128)
    ba = rng.standard_normal((batch, m, m)).astype(np.float32)
    bb = rng.standard_normal((batch, m, m)).astype(np.float32)
    xba, xbb = Array.from_numpy(ba), Array.from_numpy(bb)
    bdst = Array.empty(D.float32, (batch, m, m))
    bspec = S.Contract(((0, 0),), ((2, 1),), D.float32)
    rows.append(_row("contract batched matmul", batch * m, "float32",
                     lambda: contract(bspec, [bdst], [xba, xbb]), lambda: ba @ bb, repeats))

    # MXFP8: e4m3 operands with e8m0 scales per 32 along K.
    k = n
    qa = rng.standard_normal((n, k)).astype(np.float32).astype(D.float8_e4m3fn.numpy_dtype)
    qb = rng.standard_normal((k, n)).astype(np.float32).astype(D.float8_e4m3fn.numpy_dtype)
    sa = rng.integers(120, 135, (n, k // 32)).astype(np.uint8)
    sb = rng.integers(120, 135, (k // 32, n)).astype(np.uint8)
    ops = [Array.from_numpy(qa, dtype=D.float8_e4m3fn), Array.from_numpy(qb, dtype=D.float8_e4m3fn),
           Array.from_numpy(sa), Array.from_numpy(sb)]
    mspec = S.Contract((), ((1, 0),), D.float32,
                       scales=(S.ScaleKind.EXPONENT, S.ScaleKind.EXPONENT))

    def dequantised() -> object:
        fa = qa.astype(np.float32) * np.exp2(np.repeat(sa.astype(np.float32) - 127, 32, axis=1))
        fb = qb.astype(np.float32) * np.exp2(np.repeat(sb.astype(np.float32) - 127, 32, axis=0))
        return fa @ fb

    rows.append(_row("contract mxfp8 vs dequantise+matmul", n, "float8_e4m3fn",
                     lambda: contract(mspec, [dst], ops), dequantised, repeats))

    # Grouped GEMM: 8 experts, tokens routed by ids.
    tokens, hidden, out, g = (256, 128, 128, 8) if quick else (4096, 512, 512, 8)
    ta = rng.standard_normal((tokens, hidden)).astype(np.float32)
    tb = rng.standard_normal((g, hidden, out)).astype(np.float32)
    ids = rng.integers(0, g, tokens).astype(np.int64)
    gops = [Array.from_numpy(ta), Array.from_numpy(tb), Array.from_numpy(ids)]
    gdst = Array.empty(D.float32, (tokens, out))
    gspec = S.Contract((), ((1, 1),), D.float32, segments=S.Rows(0, 0))

    def loop() -> object:
        res = np.zeros((tokens, out), np.float32)
        for e in range(g):
            sel = np.flatnonzero(ids == e)
            res[sel] = ta[sel] @ tb[e]
        return res

    rows.append(_row("contract grouped (8 segments) vs loop of matmuls", tokens, "float32",
                     lambda: contract(gspec, [gdst], gops), loop, repeats))
    return rows


def _fft_rows(quick: bool, repeats: int) -> list[dict[str, Any]]:
    fft = FOURIER.kernels["fft"]
    n = 2**14 if quick else 2**20
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(np.complex64)
    xa, dst = Array.from_numpy(x), Array.empty(D.complex64, (n,))
    spec = S.Fft((0,), S.Direction.FORWARD, S.C2c())
    ours = lambda: fft(spec, [dst], [xa])  # noqa: E731
    return [_row("fft c2c", n, "complex64", ours, lambda: np.fft.fft(x), repeats),
            _row("fft c2c vs scipy.fft", n, "complex64", ours, lambda: scipy.fft.fft(x),
                 repeats)]


def _matrix_rows(quick: bool, repeats: int) -> list[dict[str, Any]]:
    k = MATRICES.kernels
    n = 128 if quick else 512
    rng = np.random.default_rng(2)
    a = rng.standard_normal((n, n))
    h = a @ a.T + n * np.eye(n)
    xa, xh = Array.from_numpy(a), Array.from_numpy(h)
    f64 = D.float64
    sq, vec = Array.empty(f64, (n, n)), Array.empty(f64, (n,))
    sq2, sq3 = Array.empty(f64, (n, n)), Array.empty(f64, (n, n))
    return [
        _row("cholesky", n, "float64", lambda: k["cholesky"](S.Cholesky(), [sq], [xh]),
             lambda: np.linalg.cholesky(h), repeats),
        _row("qr", n, "float64", lambda: k["qr"](S.Qr(), [sq, sq2], [xa]),
             lambda: np.linalg.qr(a), repeats),
        _row("svd", n, "float64", lambda: k["svd"](S.Svd(), [sq, vec, sq2], [xa]),
             lambda: np.linalg.svd(a), repeats),
        _row("eigh", n, "float64", lambda: k["eigh"](S.Eigh(), [vec, sq3], [xh]),
             lambda: np.linalg.eigh(h), repeats),
    ]


def run(quick: bool) -> list[dict[str, Any]]:
    """The rows: full sizes (1024³ and 64×128³ contractions, 2^20-point FFT,
    512² routines), or small ones with ``quick``."""
    repeats = 3 if quick else 9
    return [*_contract_rows(quick, repeats), *_fft_rows(quick, repeats),
            *_matrix_rows(quick, repeats)]


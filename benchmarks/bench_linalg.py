"""The host library's contraction, Fourier transforms and matrix routines side
by side with NumPy (and SciPy where named).

Each row times our kernel, called directly with preallocated destinations,
and the function a user would call for the same result, alternately in one
process; times are medians. ``ratio`` is the reference's time over ours (above
1: we are faster). The reference is NumPy's but where the row's name says
``vs scipy.fft``, ``vs dequantise+matmul`` or ``vs loop of matmuls``: then
``numpy_s`` holds that reference's time.

Our contractions multiply on the host library's own single-threaded OpenBLAS
and parallelise themselves (fixed tiles of the output on a thread pool,
``nxkernel_host.tiling``), so their bits do not depend on thread counts;
NumPy's routines use OpenBLAS's own threads. Those keep spinning on the cores
for about 0.1 s after each call (2^28 clock cycles), so a call timed right
after NumPy's would share the cores with them: the contraction rows time each
call, ours and NumPy's alike, once no other thread of the process runs
(``timing.quiet``; NumPy's workers then wake for its call, ours for ours).

Each row checks ours against the reference before timing: contractions
within both sides' largest allowed e(K) = γ(2K + 2) of Σ|a||b| per output;
transforms normwise within twice the host's stated ε(n)·√n; routines by what
their open choices leave fixed (cholesky's factor, r's magnitudes, singular
values and eigenvalues) within a few n·u of the matrix's norm.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.fft

from benchmarks import timing
from benchmarks.timing import Check, check_close, check_within, gamma
from benchmarks.timing import row as _row
from nxkernel_core import dtype as D
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_core.plugins import discover

LIBRARY = "host"

Arr = np.ndarray[Any, Any]


def _products(what: str, call: Callable[[], object], dst: Array, want: Callable[[], Arr],
              mass: Arr, k: int, dtype: type[np.floating[Any]] = np.float32) -> Check:
    """A contraction row's check: ours and the reference each within the
    contract's largest e(K) = γ(2K + 2) (of ``dtype``) of ``mass`` (Σ|a||b|
    per output) of the exact sum, so within twice that of each other."""
    def check() -> None:
        assert call() is Answer.DONE, f"{what}: nxkernel did not compute"
        check_within(what, dst.to_numpy(), want(), 2 * gamma(2 * k + 2, dtype) * mass)

    return check


def _settled_row(name: str, size: int, dtype: str, ours: Callable[[], object],
                 other: Callable[[], object], repeats: int, *, check: Check) -> dict[str, Any]:
    """A contraction row, each call timed once no thread of either BLAS
    still spins (``timing.quiet``)."""
    return _row(name, size, dtype, ours, other, repeats, check=check, settle=True)


def _agrees(what: str, call: Callable[[], object], compare: Callable[[], None]) -> Check:
    """A row's check: one call of ours, then ``compare`` (raising
    AssertionError where the sides disagree)."""
    def check() -> None:
        assert call() is Answer.DONE, f"{what}: nxkernel did not compute"
        compare()

    return check


def _contract_rows(quick: bool, repeats: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(0)
    contract = discover().library("host").contract
    rows = []

    n = 256 if quick else 1024
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    xa, xb, dst = Array.from_numpy(a), Array.from_numpy(b), Array.empty(D.float32, (n, n))
    spec = S.Contract((), ((1, 0),), D.float32)
    matmul = lambda: contract(spec, [dst], [xa, xb])  # noqa: E731
    rows.append(_settled_row("contract matmul", n, "float32", matmul, lambda: a @ b, repeats,
                             check=_products("bench_linalg: matmul: nxkernel and NumPy", matmul, dst,
                                             lambda: a @ b, np.abs(a) @ np.abs(b), n)))

    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    xa64, xb64, dst64 = Array.from_numpy(a64), Array.from_numpy(b64), Array.empty(D.float64, (n, n))
    spec64 = S.Contract((), ((1, 0),), D.float64)
    matmul64 = lambda: contract(spec64, [dst64], [xa64, xb64])  # noqa: E731
    rows.append(_settled_row("contract matmul", n, "float64", matmul64, lambda: a64 @ b64, repeats,
                             check=_products("bench_linalg: matmul f64: nxkernel and NumPy", matmul64,
                                             dst64, lambda: a64 @ b64, np.abs(a64) @ np.abs(b64), n,
                                             np.float64)))

    batch, m = (8, 64) if quick else (64, 128)
    ba = rng.standard_normal((batch, m, m)).astype(np.float32)
    bb = rng.standard_normal((batch, m, m)).astype(np.float32)
    xba, xbb = Array.from_numpy(ba), Array.from_numpy(bb)
    bdst = Array.empty(D.float32, (batch, m, m))
    bspec = S.Contract(((0, 0),), ((2, 1),), D.float32)
    batched = lambda: contract(bspec, [bdst], [xba, xbb])  # noqa: E731
    rows.append(_settled_row("contract batched matmul", batch * m, "float32", batched, lambda: ba @ bb,
                             repeats, check=_products("bench_linalg: batched matmul: nxkernel and NumPy",
                                                      batched, bdst, lambda: ba @ bb,
                                                      np.abs(ba) @ np.abs(bb), m)))

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

    def dequantised() -> Arr:
        fa = qa.astype(np.float32) * np.exp2(np.repeat(sa.astype(np.float32) - 127, 32, axis=1))
        fb = qb.astype(np.float32) * np.exp2(np.repeat(sb.astype(np.float32) - 127, 32, axis=0))
        product: Arr = fa @ fb
        return product

    mx = lambda: contract(mspec, [dst], ops)  # noqa: E731
    fa = qa.astype(np.float64) * np.exp2(np.repeat(sa.astype(np.float64) - 127, 32, axis=1))
    fb = qb.astype(np.float64) * np.exp2(np.repeat(sb.astype(np.float64) - 127, 32, axis=0))
    mass = np.abs(fa) @ np.abs(fb)
    rows.append(_settled_row("contract mxfp8 vs dequantise+matmul", n, "float8_e4m3fn", mx, dequantised,
                             repeats, check=_products("bench_linalg: mxfp8: nxkernel and NumPy", mx, dst,
                                                      dequantised, mass, k)))

    # Grouped GEMM: 8 experts, tokens routed by ids.
    tokens, hidden, out, g = (256, 128, 128, 8) if quick else (4096, 512, 512, 8)
    ta = rng.standard_normal((tokens, hidden)).astype(np.float32)
    tb = rng.standard_normal((g, hidden, out)).astype(np.float32)
    ids = rng.integers(0, g, tokens).astype(np.int64)
    gops = [Array.from_numpy(ta), Array.from_numpy(tb), Array.from_numpy(ids)]
    gdst = Array.empty(D.float32, (tokens, out))
    gspec = S.Contract((), ((1, 1),), D.float32, segments=S.Rows(0, 0))

    def loop(a: Arr = ta, b: Arr = tb) -> Arr:
        res = np.zeros((tokens, out), np.float32)
        for e in range(g):
            sel = np.flatnonzero(ids == e)
            res[sel] = a[sel] @ b[e]
        return res

    grouped = lambda: contract(gspec, [gdst], gops)  # noqa: E731
    rows.append(_settled_row("contract grouped (8 segments) vs loop of matmuls", tokens, "float32",
                             grouped, loop, repeats,
                             check=_products("bench_linalg: grouped: nxkernel and NumPy", grouped, gdst,
                                             loop, loop(np.abs(ta), np.abs(tb)).astype(np.float64), hidden)))
    return rows


def _fft_rows(quick: bool, repeats: int) -> list[dict[str, Any]]:
    fft = discover().library("host").fft
    n = 2**14 if quick else 2**20
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(np.complex64)
    xa, dst = Array.from_numpy(x), Array.empty(D.complex64, (n,))
    spec = S.Fft((0,), S.Direction.FORWARD, S.C2c())
    ours = lambda: fft(spec, [dst], [xa])  # noqa: E731
    # Normwise, each side within ε(n)·√n·‖x‖ of the exact transform, ε(n) =
    # 24(⌈log₂ n⌉ + 1)u (the host's stated bound), so within twice that apart.
    eps = 24 * (math.ceil(math.log2(n)) + 1) * float(np.finfo(np.float32).eps) / 2
    rel = 2 * eps * math.sqrt(n) * float(np.linalg.norm(x)) / float(np.linalg.norm(np.fft.fft(x)))

    def agree(peer: Callable[[], Arr]) -> Check:
        return _agrees("bench_linalg: fft", ours, lambda: check_close(
            "bench_linalg: fft: nxkernel and the reference", dst.to_numpy(), peer(), rel, by="norm"))

    numpy_fft, scipy_fft = (lambda: np.fft.fft(x)), (lambda: scipy.fft.fft(x))
    return [_row("fft c2c", n, "complex64", ours, numpy_fft, repeats, check=agree(numpy_fft)),
            _row("fft c2c vs scipy.fft", n, "complex64", ours, scipy_fft, repeats,
                 check=agree(scipy_fft))]


def _matrix_rows(quick: bool, repeats: int) -> list[dict[str, Any]]:
    lib = discover().library("host")
    n = 128 if quick else 512
    rng = np.random.default_rng(2)
    a = rng.standard_normal((n, n))
    h = a @ a.T + n * np.eye(n)
    xa, xh = Array.from_numpy(a), Array.from_numpy(h)
    f64 = D.float64
    sq, vec = Array.empty(f64, (n, n)), Array.empty(f64, (n,))
    sq2, sq3 = Array.empty(f64, (n, n)), Array.empty(f64, (n, n))
    # The open choices leave cholesky's factor, r's magnitudes, the singular
    # values and the eigenvalues fixed: each is compared with NumPy's within
    # 64·n·u of the matrix's norm (h is well conditioned: σ ≥ n).
    tol = 64 * n * float(np.finfo(np.float64).eps)
    na, nh = float(np.linalg.norm(a, 2)), float(np.linalg.norm(h, 2))

    def near(what: str, ours: Callable[[], Arr], theirs: Callable[[], Arr], scale: float
             ) -> Callable[[], None]:
        return lambda: check_within(f"bench_linalg: {what}: nxkernel and NumPy", ours(), theirs(),
                                    tol * scale)

    chol = lambda: lib.cholesky(S.Cholesky(), [sq], [xh])  # noqa: E731
    qr = lambda: lib.qr(S.Qr(), [sq, sq2], [xa])  # noqa: E731
    svd = lambda: lib.svd(S.Svd(), [sq, vec, sq2], [xa])  # noqa: E731
    eigh = lambda: lib.eigh(S.Eigh(), [vec, sq3], [xh])  # noqa: E731
    return [
        _row("cholesky", n, "float64", chol, lambda: np.linalg.cholesky(h), repeats,
             check=_agrees("cholesky", chol, near("cholesky", sq.to_numpy,
                                                  lambda: np.linalg.cholesky(h), nh**0.5))),
        _row("qr", n, "float64", qr, lambda: np.linalg.qr(a), repeats,
             check=_agrees("qr", qr, near("qr", lambda: np.abs(sq2.to_numpy()),
                                          lambda: np.abs(np.linalg.qr(a)[1]), na))),
        _row("svd", n, "float64", svd, lambda: np.linalg.svd(a), repeats,
             check=_agrees("svd", svd, near("svd", vec.to_numpy,
                                            lambda: np.linalg.svd(a, compute_uv=False), na))),
        _row("eigh", n, "float64", eigh, lambda: np.linalg.eigh(h), repeats,
             check=_agrees("eigh", eigh, near("eigh", vec.to_numpy,
                                              lambda: np.linalg.eigvalsh(h), nh))),
    ]


def run(quick: bool) -> list[dict[str, Any]]:
    """The rows: full sizes (1024³ float32 and float64 and 64×128³ contractions, 2^20-point FFT,
    512² routines), or small ones with ``quick``."""
    repeats = 3 if quick else 9
    return [*_contract_rows(quick, repeats), *_fft_rows(quick, repeats),
            *_matrix_rows(quick, repeats)]



if __name__ == "__main__":
    sys.exit(timing.main(run, __doc__, "256³ contractions, 2^14-point FFT, 128² routines"))

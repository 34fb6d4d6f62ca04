"""nxkernel_cuda.matrices: cholesky, lu, qr, solve_triangular, eigh and svd on
cuda-emu (and cuda:0 where marked), real and complex.

Each routine is judged against the bound its statement gives, with the
reference in wider arithmetic (float64 for float32, longdouble or mpmath for
float64; complex128 for complex64, clongdouble or mpmath on the real
embedding for complex128) and the reference's own rounding added to the
tolerance; lu is the host library's bits; failures are NaN in their own
matrix only; orderings, the read triangle and the open choices nx.cuda states
hold exactly; declines write nothing and misfits are refused."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import mpmath  # type: ignore[import-untyped]
import numpy as np
import numpy.typing as npt
import pytest

from nxkernel_core import dtype as D
from nxkernel_core import shape as SH
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_core.dtype import Dtype
from nxkernel_core.kernel import Call, gamma, unit_roundoff
from nxkernel_core.kernels import kernel as record
from nxkernel_core.layout import Broadcast, Permute
from nxkernel_core.rig import host
from nxkernel_cuda import matrices
from nxkernel_cuda.device import CudaRig
from nxkernel_cuda.library import LIBRARY
from nxkernel_host.library import library as HOST

from .support import canary, on, run, same_bits, untouched

Arr = npt.NDArray[Any]

REALS = [pytest.param(D.float32, np.float32, id="float32"), pytest.param(D.float64, np.float64, id="float64")]

#: The reference's unit roundoff for each dtype: float64 checks float32,
#: longdouble (x86: 64-bit significand) checks float64.
_REF = {D.float32: (np.float64, 2.0**-53), D.float64: (np.longdouble, 2.0**-64)}


def _rand(shape: Sequence[int], np_dt: type, seed: int) -> Arr:
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np_dt)


def _spd(lead: Sequence[int], n: int, np_dt: type, seed: int) -> Arr:
    a = np.random.default_rng(seed).uniform(-1, 1, (*lead, n, n))
    return (a @ np.swapaxes(a, -1, -2) + n * np.eye(n)).astype(np_dt)


def _sym(lead: Sequence[int], n: int, np_dt: type, seed: int) -> Arr:
    a = np.random.default_rng(seed).uniform(-1, 1, (*lead, n, n))
    return ((a + np.swapaxes(a, -1, -2)) / 2).astype(np_dt)


def _t(a: Arr) -> Arr:
    return np.swapaxes(a, -1, -2)


def _norm2(a: Arr) -> float:
    """The largest matrix 2-norm of the batch (in float64 or complex128)."""
    wide = np.complex128 if np.iscomplexobj(a) else np.float64
    return float(np.linalg.norm(a.astype(wide), ord=2, axis=(-2, -1)).max()) if a.size else 0.0


def _batch_of(a: Arr) -> Arr:
    return a.reshape(-1, *a.shape[-2:])


# --------------------------------------------------------------------------
# cholesky
# --------------------------------------------------------------------------


@pytest.mark.parametrize(("dt", "np_dt"), REALS)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_is_within_the_stated_bound_and_reads_one_triangle(dev: CudaRig, dt: Dtype, np_dt: type,
                                                                     upper: bool) -> None:
    # L̂L̂ᵀ = A + ΔA with |ΔA| ≤ γ(n + 1)|L̂||L̂ᵀ| (the statement); the other
    # triangle of a is never read (NaN there changes no bit) and is 0 in f.
    for n in (1, 5, 9):
        a = _spd((2, 3), n, np_dt, n)
        noisy = a.copy()
        hidden = np.tril_indices(n, -1) if upper else np.triu_indices(n, 1)
        noisy[..., hidden[0], hidden[1]] = np.nan
        answer, (f,) = run(S.Cholesky(upper), [on(dev, noisy)], [dt])
        assert answer is Answer.DONE
        assert same_bits(run(S.Cholesky(upper), [on(dev, a)], [dt])[1][0], f, dt)
        assert np.all(f[..., hidden[0], hidden[1]] == 0)
        ref_dt, ur = _REF[dt]
        low = _t(f).astype(ref_dt) if upper else f.astype(ref_dt)
        resid = np.abs(low @ _t(low) - a.astype(ref_dt))
        scale = np.abs(low) @ np.abs(_t(low))
        tol = (gamma(n + 1, unit_roundoff(dt)) + gamma(n + 1, ur)) * scale + ur * np.abs(a)
        assert np.all(resid <= tol)


def test_cholesky_failures_are_nan_in_their_own_matrix(dev: CudaRig) -> None:
    # Not positive definite, a NaN in the read triangle: NaN factors; an
    # infinity in the unread triangle is never read; the others keep their bits.
    n = 4
    a = _spd((5,), n, np.float64, 7)
    a[1, 2, 2] = -50.0
    a[2, 3, 1] = np.nan
    a[3, 0, 3] = np.inf  # strict upper triangle: not read by the lower factor
    _, (f,) = run(S.Cholesky(False), [on(dev, a)], [D.float64])
    assert np.isnan(f[1]).all() and np.isnan(f[2]).all()
    for t in (0, 3, 4):
        clean = a[t].copy()
        clean[0, 3] = clean[3, 0]
        alone = run(S.Cholesky(False), [on(dev, clean[None])], [D.float64])[1][0][0]
        assert same_bits(f[t], alone, D.float64)


# --------------------------------------------------------------------------
# lu
# --------------------------------------------------------------------------


def _lu_reference(a: Arr) -> tuple[Arr, Arr, Arr]:
    """The stated arithmetic in the matrix's dtype, one scalar rounding at a
    time: pivot j the first row of greatest |a_ij|; a_ij / pivot (a zero pivot
    leaves it); a_ic − l_ij·a_jc."""
    a = a.copy()
    m, n = a.shape
    perm = np.arange(m, dtype=np.int64)
    piv = np.zeros(min(m, n), np.int64)
    with np.errstate(all="ignore"):
        for j in range(min(m, n)):
            p = j
            for i in range(j + 1, m):
                if abs(a[i, j]) > abs(a[p, j]):
                    p = i
            piv[j] = p
            a[[j, p]] = a[[p, j]]
            perm[[j, p]] = perm[[p, j]]
            if a[j, j] != 0:
                for i in range(j + 1, m):
                    a[i, j] = a[i, j] / a[j, j]
            for i in range(j + 1, m):
                for c in range(j + 1, n):
                    a[i, c] = a[i, c] - a[i, j] * a[j, c]
    return a, piv, perm


@pytest.mark.parametrize(("dt", "np_dt"), REALS)
def test_lu_is_the_stated_arithmetic_and_the_host_librarys_bits(dev: CudaRig, dt: Dtype,
                                                                np_dt: type) -> None:
    for m, n in ((5, 3), (3, 5), (6, 6), (1, 4), (4, 0)):
        a = _rand((3, m, n), np_dt, 10 * m + n)
        if m == 6:
            a[0, :, 0] = [1, -2, 2, -2, 0.5, 2]  # ties: the first of greatest magnitude, row 1
            a[1, :, 2] = 0  # no pivot in column 2 after two steps only by chance; a zero column
            a[1] = np.tril(a[1], 1)
            a[1, :, 0] = 0  # a zero pivot: its multipliers are left as they are
            a[2, 3, 1] = np.nan  # NaN flows through, never displacing a number as a pivot
        k = min(m, n)
        answer, (lu, piv, perm) = run(S.Lu(), [on(dev, a)], [dt, D.int64, D.int64])
        assert answer is Answer.DONE
        for t in range(3):
            rl, rp, rq = _lu_reference(a[t])
            # NaN bits are open (a GPU's arithmetic gives its own NaN, not the operand's).
            assert same_bits(lu[t], rl, dt, nan_equal=True)
            assert np.array_equal(piv[t], rp) and np.array_equal(perm[t], rq)
        if m == 6:
            assert piv[0, 0] == 1
        hd = [Array.empty(x, s, host) for x, s in zip((dt, D.int64, D.int64), ((3, m, n), (3, k), (3, m)),
                                                       strict=True)]
        assert getattr(HOST, S.Lu.kernel)(S.Lu(), hd, [Array.from_numpy(a, host)]) is Answer.DONE
        assert same_bits(lu, hd[0].to_numpy(), dt, nan_equal=True)
        assert np.array_equal(piv, hd[1].to_numpy()) and np.array_equal(perm, hd[2].to_numpy())


# --------------------------------------------------------------------------
# qr
# --------------------------------------------------------------------------


@pytest.mark.parametrize(("dt", "np_dt"), REALS)
def test_qr_is_within_the_stated_bound(dev: CudaRig, dt: Dtype, np_dt: type) -> None:
    # ‖Q̂R̂ − A‖ per column ≤ γ̃(mn)‖aⱼ‖ and ‖Q̂ᵀQ̂ − I‖_F ≤ γ̃(mn), checked with
    # γ̃(k) = γ(4k); r upper triangular; complete q's first k columns and r's
    # first k rows are the reduced ones' bits; r_00 = −sign(a_00)·‖a_:0‖.
    u = unit_roundoff(dt)
    ref_dt, ur = _REF[dt]
    for m, n in ((6, 4), (4, 6), (5, 5), (7, 1)):
        k = min(m, n)
        a = _rand((2, m, n), np_dt, m * n)
        tol = gamma(4 * m * n, u) + gamma(m * n, ur)
        _, (q, r) = run(S.Qr(False), [on(dev, a)], [dt, dt])
        _, (qf, rf) = run(S.Qr(True), [on(dev, a)], [dt, dt])
        assert q.shape == (2, m, k) and qf.shape == (2, m, m)
        assert same_bits(qf[..., :k], q, dt) and same_bits(rf[..., :k, :], r, dt)
        assert np.all(rf[..., k:, :] == 0)
        for qq, rr in ((q, r), (qf, rf)):
            assert np.all(np.tril(rr, -1) == 0)
            q64, r64 = qq.astype(ref_dt), rr.astype(ref_dt)
            col = np.linalg.norm((q64 @ r64 - a.astype(ref_dt)).astype(np.float64), axis=-2)
            assert np.all(col <= tol * np.linalg.norm(a.astype(np.float64), axis=-2))
            eye = np.eye(qq.shape[-1])
            assert np.all(np.linalg.norm((_t(q64) @ q64 - eye).astype(np.float64), axis=(-2, -1)) <= tol)
        assert np.all(np.sign(r[:, 0, 0]) == -np.sign(a[:, 0, 0]))


def test_qr_of_a_matrix_with_nan_is_nan_alone(dev: CudaRig) -> None:
    a = _rand((3, 4, 3), np.float32, 3)
    a[1, 2, 2] = np.nan
    _, (q, r) = run(S.Qr(True), [on(dev, a)], [D.float32, D.float32])
    assert np.isnan(q[1]).all() and np.isnan(r[1]).all()
    assert not np.isnan(q[[0, 2]]).any() and not np.isnan(r[[0, 2]]).any()
    _, (q0, r0) = run(S.Qr(True), [on(dev, a[[0, 2]])], [D.float32, D.float32])
    assert same_bits(q[[0, 2]], q0, D.float32) and same_bits(r[[0, 2]], r0, D.float32)


# --------------------------------------------------------------------------
# solve_triangular
# --------------------------------------------------------------------------


# --------------------------------------------------------------------------
# eigh
# --------------------------------------------------------------------------


def _exact_eigvals(a: Arr) -> Arr:
    """Eigenvalues of each symmetric matrix to 40 digits (mpmath), ascending."""
    out = np.zeros(a.shape[:-1], np.float64)
    with mpmath.workdps(40):
        for idx in np.ndindex(*a.shape[:-2]):
            e, _ = mpmath.eigsy(mpmath.matrix(a[idx].astype(np.float64).tolist()))
            out[idx] = sorted(float(x) for x in e)
    return out


@pytest.mark.parametrize(("dt", "np_dt"), REALS)
def test_eigh_is_within_the_stated_bound(dev: CudaRig, dt: Dtype, np_dt: type) -> None:
    # Eigenvalues ascending within 4n²·u·‖A‖₂ of the exact ones; ‖AV − VΛ‖ and
    # ‖VᵀV − I‖ within the same; lower triangle alone read; without vectors
    # the same eigenvalue bits.
    u = unit_roundoff(dt)
    for n in (1, 2, 6, 9):
        a = _sym((2,), n, np_dt, n)
        noisy = a.copy()
        iu = np.triu_indices(n, 1)
        noisy[..., iu[0], iu[1]] = np.nan
        answer, (w, v) = run(S.Eigh(True), [on(dev, noisy)], [dt, dt])
        assert answer is Answer.DONE
        assert np.all(np.diff(w, axis=-1) >= 0)
        bound = 4 * n * n * u * _norm2(a)
        assert np.all(np.abs(w - _exact_eigvals(a)) <= bound)
        a64, v64 = a.astype(np.float64), v.astype(np.float64)
        assert np.all(np.abs(a64 @ v64 - v64 * w[..., None, :]) <= bound + 1e-300)
        assert np.all(np.abs(_t(v64) @ v64 - np.eye(n)) <= 4 * n * n * u)
        assert same_bits(run(S.Eigh(False), [on(dev, a)], [dt])[1][0], w, dt)


def test_eigh_orders_ties_by_position_and_leaves_a_diagonal_matrix_alone(dev: CudaRig) -> None:
    # A diagonal matrix takes no rotation: w is its diagonal sorted (equal
    # values in their positions' order) and v the permutation, exactly.
    a = np.diag([2.0, 1.0, 2.0, -3.0])[None]
    _, (w, v) = run(S.Eigh(True), [on(dev, a)], [D.float64, D.float64])
    assert w.tolist() == [[-3.0, 1.0, 2.0, 2.0]]
    assert np.array_equal(v[0], np.eye(4)[:, [3, 1, 0, 2]])


def test_eigh_failures_are_nan_in_their_own_matrix(dev: CudaRig) -> None:
    a = _sym((3,), 4, np.float32, 5)
    a[1, 3, 0] = np.inf
    _, (w, v) = run(S.Eigh(True), [on(dev, a)], [D.float32, D.float32])
    assert np.isnan(w[1]).all() and np.isnan(v[1]).all()
    assert not np.isnan(w[[0, 2]]).any() and not np.isnan(v[[0, 2]]).any()


# --------------------------------------------------------------------------
# svd
# --------------------------------------------------------------------------


def _exact_singular_values(a: Arr) -> Arr:
    """Singular values of each matrix to 40 digits (mpmath), descending."""
    k = min(a.shape[-2:])
    out = np.zeros((*a.shape[:-2], k), np.float64)
    with mpmath.workdps(40):
        for idx in np.ndindex(*a.shape[:-2]):
            if k:
                s = mpmath.svd_r(mpmath.matrix(a[idx].astype(np.float64).tolist()), compute_uv=False)
                out[idx] = sorted((float(x) for x in s), reverse=True)
    return out


def _check_svd(a: Arr, res: list[Arr], dt: Dtype, vectors: S.Factors | None) -> None:
    """s descending within 4·M·n·u·‖A‖₂ of the exact values; with vectors,
    U diag(s) Vᴴ = A and orthonormal factors within the same (relative to
    ‖A‖₂ and to 1)."""
    m, n = a.shape[-2:]
    k = min(m, n)
    u_ = unit_roundoff(dt)
    tol = 4 * max(m, n) * max(k, 1) * u_
    s = res[0] if vectors is None else res[1]
    assert np.all(np.diff(s, axis=-1) <= 0) and np.all(s >= 0)
    assert np.all(np.abs(s - _exact_singular_values(a)) <= tol * _norm2(a))
    if vectors is None:
        return
    uu, vh = res[0].astype(np.float64), res[2].astype(np.float64)
    assert uu.shape[-1] == (m if vectors is S.Factors.COMPLETE else k)
    assert vh.shape[-2] == (n if vectors is S.Factors.COMPLETE else k)
    us = uu[..., :, :k] * s.astype(np.float64)[..., None, :]
    assert np.all(np.abs(us @ vh[..., :k, :] - a) <= tol * max(_norm2(a), 1e-300))
    assert np.all(np.abs(_t(uu) @ uu - np.eye(uu.shape[-1])) <= tol)
    assert np.all(np.abs(vh @ _t(vh) - np.eye(vh.shape[-2])) <= tol)


@pytest.mark.parametrize(("dt", "np_dt"), REALS)
@pytest.mark.parametrize("vectors", [None, S.Factors.REDUCED, S.Factors.COMPLETE], ids=["none", "reduced",
                                                                                    "complete"])
def test_svd_is_within_the_stated_bound(dev: CudaRig, dt: Dtype, np_dt: type,
                                        vectors: S.Factors | None) -> None:
    for m, n in ((6, 4), (4, 6), (5, 5), (7, 1), (1, 3)):
        a = _rand((2, m, n), np_dt, 3 * m + n)
        nres = 1 if vectors is None else 3
        answer, res = run(S.Svd(vectors), [on(dev, a)], [dt] * nres)
        assert answer is Answer.DONE
        _check_svd(a, res, dt, vectors)
        if vectors is not None:  # the same s bits as without vectors
            assert same_bits(res[1], run(S.Svd(None), [on(dev, a)], [dt])[1][0], dt)


@pytest.mark.parametrize("vectors", [S.Factors.REDUCED, S.Factors.COMPLETE], ids=["reduced", "complete"])
def test_svd_of_a_rank_deficient_matrix_completes_orthonormal_factors(dev: CudaRig,
                                                                      vectors: S.Factors) -> None:
    # Zero and repeated columns: zero singular values, whose u columns (and
    # the complete factor's added ones) are completed orthonormally.
    a = _rand((5, 4), np.float64, 9)
    a[:, 1] = 0
    a[:, 3] = a[:, 0]
    for x in (a, a.T.copy()):
        _, res = run(S.Svd(vectors), [on(dev, x[None])], [D.float64] * 3)
        _check_svd(x[None], res, D.float64, vectors)
        assert np.count_nonzero(res[1] == 0) >= 1


def test_svd_of_empty_matrices_gives_identity_complete_factors(dev: CudaRig) -> None:
    for m, n in ((3, 0), (0, 3)):
        _, (u, s, vh) = run(S.Svd(S.Factors.COMPLETE), [on(dev, np.zeros((2, m, n)))], [D.float64] * 3)
        assert s.shape == (2, 0) and np.array_equal(u, np.broadcast_to(np.eye(m), (2, m, m)))
        assert np.array_equal(vh, np.broadcast_to(np.eye(n), (2, n, n)))
    _, (q, r) = run(S.Qr(True), [on(dev, np.zeros((2, 3, 0)))], [D.float64] * 2)
    assert np.array_equal(q, np.broadcast_to(np.eye(3), (2, 3, 3))) and r.shape == (2, 3, 0)


def test_svd_failures_are_nan_in_their_own_matrix(dev: CudaRig) -> None:
    a = _rand((3, 3, 2), np.float64, 4)
    a[0, 0, 1] = np.nan
    _, (u, s, vh) = run(S.Svd(S.Factors.REDUCED), [on(dev, a)], [D.float64] * 3)
    assert np.isnan(u[0]).all() and np.isnan(s[0]).all() and np.isnan(vh[0]).all()
    assert not (np.isnan(u[1:]).any() or np.isnan(s[1:]).any() or np.isnan(vh[1:]).any())


# --------------------------------------------------------------------------
# Complex matrices (complex64, complex128)
# --------------------------------------------------------------------------

COMPLEXES = [pytest.param(D.complex64, np.complex64, id="complex64"),
             pytest.param(D.complex128, np.complex128, id="complex128")]

#: A complex dtype's parts, and the reference's complex dtype and unit
#: roundoff: complex128 checks complex64, clongdouble complex128.
_PART = {D.complex64: D.float32, D.complex128: D.float64}
_CREF: dict[Dtype, tuple[Any, float]] = {D.complex64: (np.complex128, 2.0**-53),
                                         D.complex128: (np.clongdouble, 2.0**-64)}


def _crand(shape: Sequence[int], np_dt: type, seed: int) -> Arr:
    rng = np.random.default_rng(seed)
    return (rng.uniform(-1, 1, shape) + 1j * rng.uniform(-1, 1, shape)).astype(np_dt)


def _h(a: Arr) -> Arr:
    """The conjugate transpose of each matrix."""
    return np.conj(_t(a))


def _hpd(lead: Sequence[int], n: int, np_dt: type, seed: int) -> Arr:
    a = _crand((*lead, n, n), np.complex128, seed)
    return (a @ _h(a) + n * np.eye(n)).astype(np_dt)


def _herm(lead: Sequence[int], n: int, np_dt: type, seed: int) -> Arr:
    a = _crand((*lead, n, n), np.complex128, seed)
    return ((a + _h(a)) / 2).astype(np_dt)


def _embed(a: Arr) -> Arr:
    """The real matrices [[re, −im], [im, re]] (float64, exact): each
    eigenvalue and singular value of a's matrices twice."""
    re, im = a.real.astype(np.float64), a.imag.astype(np.float64)
    return np.concatenate([np.concatenate([re, -im], -1), np.concatenate([im, re], -1)], -2)


def _cgamma(k: int, u: float) -> float:
    """√2·γ(k): a complex chain's bound of k roundings (the statement's)."""
    return math.sqrt(2) * gamma(k, u)


@pytest.mark.parametrize(("dt", "np_dt"), COMPLEXES)
@pytest.mark.parametrize("upper", [False, True])
def test_complex_cholesky_is_within_the_stated_bound_and_reads_one_triangle(
        dev: CudaRig, dt: Dtype, np_dt: type, upper: bool) -> None:
    # L̂L̂ᴴ = A + ΔA, |ΔA| ≤ √2·γ(n + 2)|L̂||L̂ᴴ| (the statement); the other
    # triangle and the diagonal's imaginary parts are never read (NaN, 7 there
    # change no bit); the factor's diagonal is real, the other triangle 0.
    u = unit_roundoff(dt)
    ref_dt, ur = _CREF[dt]
    for n in (1, 6):
        a = _hpd((2,), n, np_dt, n)
        noisy = a.copy()
        hidden = np.tril_indices(n, -1) if upper else np.triu_indices(n, 1)
        noisy[..., hidden[0], hidden[1]] = np.nan
        noisy[..., range(n), range(n)] += np_dt(7j)
        answer, (f,) = run(S.Cholesky(upper), [on(dev, noisy)], [dt])
        assert answer is Answer.DONE
        assert same_bits(run(S.Cholesky(upper), [on(dev, a)], [dt])[1][0], f, dt)
        assert np.all(f[..., hidden[0], hidden[1]] == 0)
        assert np.all(np.diagonal(f, axis1=-2, axis2=-1).imag == 0)
        low = _h(f).astype(ref_dt) if upper else f.astype(ref_dt)
        resid = np.abs(low @ _h(low) - a.astype(ref_dt))
        scale = np.abs(low) @ np.abs(_h(low))
        tol = (_cgamma(n + 2, u) + _cgamma(n + 1, ur)) * scale + ur * np.abs(a)
        assert np.all(resid <= tol)


@pytest.mark.parametrize(("dt", "np_dt"), COMPLEXES)
def test_complex_lu_is_the_host_librarys_bits_and_within_its_bound(dev: CudaRig, dt: Dtype,
                                                                  np_dt: type) -> None:
    # The host library's bits (its pivot rule |re| + |im|, Numba's complex
    # arithmetic); L̂Û = PA + ΔA within γ(4k + 6)|L̂||Û|.
    u = unit_roundoff(dt)
    ref_dt, ur = _CREF[dt]
    for m, n in ((5, 3), (3, 5), (6, 6)):
        a = _crand((3, m, n), np_dt, 7 * m + n)
        if m == 6:
            # Column 0: |re| + |im| is greatest (1.8) at row 2, the modulus
            # (1.5) at row 1; 1.8 again at row 4 (a tie: the first).
            a[0, :, 0] = [0.5, 1.5, 0.9 + 0.9j, 1j, -0.9 - 0.9j, 0.1]
            a[1, :, 0] = 0  # a zero pivot: its multipliers are left as they are
            a[2, 3, 1] = complex(np.nan, 0.5)  # NaN flows through
        k = min(m, n)
        answer, (lu, piv, perm) = run(S.Lu(), [on(dev, a)], [dt, D.int64, D.int64])
        assert answer is Answer.DONE
        if m == 6:
            assert piv[0, 0] == 2
        hd = [Array.empty(x, s, host) for x, s in zip((dt, D.int64, D.int64), ((3, m, n), (3, k), (3, m)),
                                                       strict=True)]
        assert getattr(HOST, S.Lu.kernel)(S.Lu(), hd, [Array.from_numpy(a, host)]) is Answer.DONE
        # Parts compared as floats: a NaN's payload is the device's (x86 keeps
        # an operand's, a GPU makes its own).
        part = _PART[dt]
        assert same_bits(lu.view(part.numpy_dtype), hd[0].to_numpy().view(part.numpy_dtype), part,
                         nan_equal=True)
        assert np.array_equal(piv, hd[1].to_numpy()) and np.array_equal(perm, hd[2].to_numpy())
        for t in range(2):  # the finite matrices
            low = (np.tril(lu[t], -1) + np.eye(m, n))[:, :k].astype(ref_dt)
            up = np.triu(lu[t])[:k].astype(ref_dt)
            resid = np.abs(low @ up - a[t][perm[t]].astype(ref_dt))
            tol = (gamma(4 * k + 6, u) + _cgamma(k + 1, ur)) * (np.abs(low) @ np.abs(up))
            assert np.all(resid <= tol)


@pytest.mark.parametrize(("dt", "np_dt"), COMPLEXES)
def test_complex_qr_is_within_the_stated_bound(dev: CudaRig, dt: Dtype, np_dt: type) -> None:
    # ‖Q̂R̂ − A‖ per column ≤ γ̃(mn)‖aⱼ‖ and ‖Q̂ᴴQ̂ − I‖_F ≤ γ̃(mn), checked with
    # γ̃(k) = γ(12k); r upper triangular with a real diagonal, r_00 =
    # −sign(re a_00)·‖a_:0‖; complete q's first k columns are the reduced one's
    # bits. An upper triangular matrix with complex α still reflects.
    u = unit_roundoff(dt)
    ref_dt, ur = _CREF[dt]
    for m, n in ((6, 4), (4, 6), (3, 3)):
        k = min(m, n)
        a = _crand((2, m, n), np_dt, m * n)
        if m == 3:
            a[1] = np.triu(a[1])
        tol = gamma(12 * m * n, u) + _cgamma(m * n, ur)
        _, (q, r) = run(S.Qr(False), [on(dev, a)], [dt, dt])
        _, (qf, rf) = run(S.Qr(True), [on(dev, a)], [dt, dt])
        assert same_bits(qf[..., :k], q, dt) and same_bits(rf[..., :k, :], r, dt)
        assert np.all(rf[..., k:, :] == 0)
        for qq, rr in ((q, r), (qf, rf)):
            assert np.all(np.tril(rr, -1) == 0) and np.all(np.diagonal(rr, axis1=-2, axis2=-1).imag == 0)
            q64, r64 = qq.astype(ref_dt), rr.astype(ref_dt)
            col = np.linalg.norm((q64 @ r64 - a.astype(ref_dt)).astype(np.complex128), axis=-2)
            assert np.all(col <= tol * np.linalg.norm(a.astype(np.complex128), axis=-2))
            eye = np.eye(qq.shape[-1])
            assert np.all(np.linalg.norm((_h(q64) @ q64 - eye).astype(np.complex128), axis=(-2, -1)) <= tol)
        norm0 = np.linalg.norm(a[:, :, 0].astype(np.complex128), axis=-1)
        want = np.where(a[:, 0, 0].real >= 0, -norm0, norm0)
        assert np.all(np.abs(r[:, 0, 0] - want) <= tol * norm0)


@pytest.mark.parametrize(("dt", "np_dt"), [*REALS, *COMPLEXES])
def test_solve_triangular_every_option_is_within_the_stated_bound(dev: CudaRig, dt: Dtype,
                                                                  np_dt: type) -> None:
    # |b − op(T)x̂| ≤ e·|op(T)||x̂|, e = γ(n) for a real T (Higham Thm 8.5) and
    # √2·γ(n + 8) for a complex one, op the transpose (not the conjugate
    # transpose); the unread triangle (and a unit diagonal) is never read: NaN
    # there changes nothing; x may be b itself: the same bits in place.
    n, kc = 7, 3
    draw, (ref_dt, ur) = (_crand, _CREF[dt]) if dt.is_complex else (_rand, _REF[dt])
    u = unit_roundoff(D.float32 if dt in (D.float32, D.complex64) else D.float64)
    e = _cgamma(n + 8, u) if dt.is_complex else gamma(n, u)
    a: Arr = (draw((2, n, n), np_dt, 1) + (n + 1) * np.eye(n)).astype(np_dt)
    b = draw((2, n, kc), np_dt, 2)
    for lower in (True, False):
        for transpose in (False, True):
            for unit in (False, True):
                spec = S.SolveTriangular(lower, transpose, unit)
                t = np.tril(a) if lower else np.triu(a)
                if unit:
                    t[..., range(n), range(n)] = 1
                noisy: Arr = np.where(t != 0, a, np.nan).astype(np_dt)
                if unit:
                    noisy[..., range(n), range(n)] = np.nan
                answer, (x,) = run(spec, [on(dev, noisy), on(dev, b)], [dt])
                assert answer is Answer.DONE
                op = _t(t) if transpose else t
                resid = np.abs(b.astype(ref_dt) - op.astype(ref_dt) @ x.astype(ref_dt))
                tol = (e + _cgamma(n + 1, ur)) * (np.abs(op) @ np.abs(x)) + ur * np.abs(b)
                assert np.all(resid <= tol)
                bb = on(dev, b)
                assert LIBRARY.solve_triangular(spec, [bb], [on(dev, noisy), bb]) is Answer.DONE
                assert same_bits(bb.to_numpy(), x, dt)


@pytest.mark.parametrize(("dt", "np_dt"), COMPLEXES)
def test_complex_eigh_is_within_the_stated_bound(dev: CudaRig, dt: Dtype, np_dt: type) -> None:
    # Real eigenvalues ascending within 12n²·u·‖A‖₂ of the exact ones (mpmath,
    # by the real embedding); ‖AV − VΛ‖ and ‖VᴴV − I‖ within the same; the
    # lower triangle alone read, the diagonal's imaginary parts not used;
    # without vectors the same eigenvalue bits.
    u = unit_roundoff(dt)
    part = _PART[dt]
    for n in (1, 2, 5):
        a = _herm((2,), n, np_dt, n)
        noisy = a.copy()
        iu = np.triu_indices(n, 1)
        noisy[..., iu[0], iu[1]] = np.nan
        noisy[..., range(n), range(n)] += np_dt(3j)
        answer, (w, v) = run(S.Eigh(True), [on(dev, noisy)], [part, dt])
        assert answer is Answer.DONE
        assert w.dtype == part.numpy_dtype and np.all(np.diff(w, axis=-1) >= 0)
        bound = 12 * n * n * u * _norm2(a)
        assert np.all(np.abs(w - _exact_eigvals(_embed(a))[..., ::2]) <= bound)
        a64, v64 = a.astype(np.complex128), v.astype(np.complex128)
        assert np.all(np.abs(a64 @ v64 - v64 * w[..., None, :]) <= bound + 1e-300)
        assert np.all(np.abs(_h(v64) @ v64 - np.eye(n)) <= 12 * n * n * u)
        assert same_bits(run(S.Eigh(False), [on(dev, a)], [part])[1][0], w, part)
        # Scaled by a power of two whose square overflows: every rounding
        # scales, so the same bits times it (|a_pq| never squared).
        big = 2.0 ** (66 if dt is D.complex64 else 520)
        _, (wb, vb) = run(S.Eigh(True), [on(dev, (a * big).astype(np_dt))], [part, dt])
        assert same_bits(wb, (w * big).astype(part.numpy_dtype), part) and same_bits(vb, v, dt)


def _check_complex_svd(a: Arr, res: list[Arr], dt: Dtype, vectors: S.Factors | None) -> None:
    """s real, descending, within 12·M·k·u·‖A‖₂ of the exact values (mpmath,
    by the real embedding); with vectors, U diag(s) Vᴴ = A and unitary factors
    within the same (relative to ‖A‖₂ and to 1)."""
    m, n = a.shape[-2:]
    k = min(m, n)
    tol = 12 * max(m, n) * max(k, 1) * unit_roundoff(dt)
    s = res[0] if vectors is None else res[1]
    assert s.dtype == _PART[dt].numpy_dtype
    assert np.all(np.diff(s, axis=-1) <= 0) and np.all(s >= 0)
    assert np.all(np.abs(s - _exact_singular_values(_embed(a))[..., ::2]) <= tol * _norm2(a))
    if vectors is None:
        return
    uu, vh = res[0].astype(np.complex128), res[2].astype(np.complex128)
    assert uu.shape[-1] == (m if vectors is S.Factors.COMPLETE else k)
    assert vh.shape[-2] == (n if vectors is S.Factors.COMPLETE else k)
    us = uu[..., :, :k] * s.astype(np.float64)[..., None, :]
    assert np.all(np.abs(us @ vh[..., :k, :] - a) <= tol * max(_norm2(a), 1e-300))
    assert np.all(np.abs(_h(uu) @ uu - np.eye(uu.shape[-1])) <= tol)
    assert np.all(np.abs(vh @ _h(vh) - np.eye(vh.shape[-2])) <= tol)


@pytest.mark.parametrize(("dt", "np_dt"), COMPLEXES)
def test_complex_svd_is_within_the_stated_bound(dev: CudaRig, dt: Dtype, np_dt: type) -> None:
    # Every vectors choice, tall, wide and square; the same s bits with and
    # without vectors; a rank-deficient matrix (a zero column, a repeated one)
    # completes unitary factors.
    part = _PART[dt]
    for m, n in ((5, 3), (3, 5), (4, 4)):
        a = _crand((2, m, n), np_dt, 5 * m + n)
        if m == 5:
            a[1, :, 1] = 0
            a[1, :, 2] = 1j * a[1, :, 0]
        _, (s,) = run(S.Svd(None), [on(dev, a)], [part])
        _check_complex_svd(a, [s], dt, None)
        for vectors in (S.Factors.REDUCED, S.Factors.COMPLETE):
            answer, res = run(S.Svd(vectors), [on(dev, a)], [dt, part, dt])
            assert answer is Answer.DONE
            _check_complex_svd(a, res, dt, vectors)
            assert same_bits(res[1], s, part)
            if m == 5:
                assert np.count_nonzero(res[1][1] == 0) >= 1


def test_complex_failures_are_nan_in_their_own_matrix(dev: CudaRig) -> None:
    # Matrix 1 of each batch fails (not positive definite; a NaN or an
    # infinity in a part read): NaN in both parts of its every result; the
    # others keep the bits they have alone.
    dt, part = D.complex128, D.float64
    spd = _hpd((3,), 4, np.complex128, 3)
    spd[1, 2, 2] = -50.0
    herm = _herm((3,), 4, np.complex128, 4)
    herm[1, 3, 0] = complex(0.5, np.inf)
    rect = _crand((3, 4, 3), np.complex128, 5)
    rect[1, 2, 1] = complex(np.nan, 0)
    cases: list[tuple[Any, Arr, list[Dtype]]] = [
        (S.Cholesky(False), spd, [dt]), (S.Eigh(True), herm, [part, dt]),
        (S.Qr(True), rect, [dt, dt]), (S.Svd(S.Factors.REDUCED), rect, [dt, part, dt])]
    for spec, a, dts in cases:
        _, res = run(spec, [on(dev, a)], dts)
        alone = run(spec, [on(dev, a[[0, 2]])], dts)[1]
        for r, r0, d in zip(res, alone, dts, strict=True):
            assert np.isnan(r[1].real).all() and (d.is_float or np.isnan(r[1].imag).all())
            assert same_bits(r[[0, 2]], r0, d)


def test_complex_layouts_give_the_contiguous_bits(dev: CudaRig) -> None:
    # a stored [n, n, batch] and read as [batch, n, n], and a matrix broadcast
    # over the batch: the bits of contiguous copies, for every routine.
    n, dt = 4, D.complex64
    base = _hpd((3,), n, np.complex64, 6)
    stored = on(dev, np.ascontiguousarray(base.transpose(1, 2, 0))).view(Permute((2, 0, 1)))
    assert np.array_equal(stored.to_numpy(), base)
    single = on(dev, base[:1]).view(Broadcast((3, n, n)))
    cases: list[tuple[Any, list[Dtype], int]] = [
        (S.Cholesky(True), [dt], 1), (S.Lu(), [dt, D.int64, D.int64], 1), (S.Qr(True), [dt] * 2, 1),
        (S.Eigh(True), [D.float32, dt], 1), (S.Svd(S.Factors.COMPLETE), [dt, D.float32, dt], 1),
        (S.SolveTriangular(True, True, False), [dt], 2)]
    for spec, dts, nops in cases:
        got = run(spec, [stored] * nops, dts)[1]
        want = run(spec, [on(dev, base)] * nops, dts)[1]
        assert all(same_bits(g, w_, d) for g, w_, d in zip(got, want, dts, strict=True))
        bcast = run(spec, [single] * nops, dts)[1]
        one = run(spec, [on(dev, base[:1])] * nops, dts)[1]
        assert all(same_bits(g, np.broadcast_to(w_, g.shape), d) for g, w_, d in zip(bcast, one, dts,
                                                                                     strict=True))


def test_the_largest_complex128_matrices_fit_sm80s_shared_memory(dev: CudaRig,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # complex128 at its limit (56): a complete svd, the largest work arrays,
    # asks for at most sm_80's 163 KiB of shared memory, and is within its bound.
    asked: list[int] = []
    launch = matrices._launch

    def spy(dev_: CudaRig, routine: str, dt: Dtype, batch: int, args: Any, shared: int) -> None:
        asked.append(shared)
        launch(dev_, routine, dt, batch, args, shared)

    monkeypatch.setattr(matrices, "_launch", spy)
    n = matrices.MAX_EXTENTS[D.complex128]
    a = _crand((1, n, n), np.complex128, 56)
    _, (uu, s, vh) = run(S.Svd(S.Factors.COMPLETE), [on(dev, a)], [D.complex128, D.float64, D.complex128])
    assert asked and max(asked) <= 163 * 1024
    tol = 12 * n * n * unit_roundoff(D.complex128) * _norm2(a)
    assert np.all(np.abs((uu * s[..., None, :]) @ vh - a) <= tol)


# --------------------------------------------------------------------------
# Layouts, determinism, the largest matrices
# --------------------------------------------------------------------------


def test_any_operand_layout_gives_the_contiguous_bits(dev: CudaRig) -> None:
    # a stored [n, n, batch] and read as [batch, n, n] (a permuted view), and a
    # matrix broadcast over the batch: the bits of contiguous copies.
    n = 5
    base = _sym((3,), n, np.float64, 2) + n * np.eye(n)
    stored = on(dev, np.ascontiguousarray(base.transpose(1, 2, 0))).view(Permute((2, 0, 1)))
    assert np.array_equal(stored.to_numpy(), base)
    single = on(dev, base[:1]).view(Broadcast((3, n, n)))
    cases: list[tuple[Any, list[Dtype]]] = [
        (S.Cholesky(True), [D.float64]), (S.Lu(), [D.float64, D.int64, D.int64]),
        (S.Qr(True), [D.float64] * 2), (S.Eigh(True), [D.float64] * 2),
        (S.Svd(S.Factors.COMPLETE), [D.float64] * 3)]
    for spec, dts in cases:
        got = run(spec, [stored], dts)[1]
        want = run(spec, [on(dev, base)], dts)[1]
        assert all(same_bits(g, w_, dt) for g, w_, dt in zip(got, want, dts, strict=True))
        again = run(spec, [stored], dts)[1]
        assert all(same_bits(g, w_, dt) for g, w_, dt in zip(got, again, dts, strict=True))
        bcast = run(spec, [single], dts)[1]
        one = run(spec, [on(dev, base[:1])], dts)[1]
        assert all(same_bits(g, np.broadcast_to(w_, g.shape), dt) for g, w_, dt in zip(bcast, one, dts,
                                                                                       strict=True))


def test_the_largest_matrices_fit(dev: CudaRig) -> None:
    # 64 x 64 float64, the largest work arrays (complete svd, eigh with vectors).
    n = matrices.MAX_EXTENT
    a = _rand((1, n, n), np.float64, 64)
    _, res = run(S.Svd(S.Factors.COMPLETE), [on(dev, a)], [D.float64] * 3)
    uu, s, vh = res
    assert np.all(np.abs((uu * s[..., None, :]) @ vh - a) <= 4 * n * n * unit_roundoff(D.float64) * _norm2(a))
    h = (a + _t(a)) / 2
    _, (w, v) = run(S.Eigh(True), [on(dev, h)], [D.float64] * 2)
    assert np.all(np.abs(h @ v - v * w[..., None, :]) <= 4 * n * n * unit_roundoff(D.float64) * _norm2(h))


# --------------------------------------------------------------------------
# Declines and refusals
# --------------------------------------------------------------------------


def _dsts(dev: CudaRig, spec: Any, shapes: Sequence[Sequence[int]], dts: Sequence[Dtype]) -> list[Array]:
    out = record(spec.kernel).shapes(spec, [list(s) for s in shapes])
    assert not isinstance(out, SH.Error), out
    return [canary(dev, dt, sh) for dt, sh in zip(dts, out, strict=True)]


def test_declines_are_stated_and_write_nothing(dev: CudaRig) -> None:
    big = matrices.MAX_EXTENT + 1
    f32, c64, c128 = D.float32, D.complex64, D.complex128
    big128 = matrices.MAX_EXTENTS[c128] + 1
    cases: list[tuple[Any, list[tuple[int, ...]], Dtype, list[Dtype]]] = [
        (S.Eig(True), [(2, 2)], f32, [c64, c64]),
        (S.Eig(False), [(2, 2)], c128, [c128]),
        (S.Cholesky(), [(big, big)], c64, [c64]),
        (S.Eigh(False), [(big128, big128)], c128, [D.float64]),
        (S.Svd(None), [(2, big128)], c128, [D.float64]),
        (S.SolveTriangular(), [(big128, big128), (big128, 1)], c128, [c128]),
        (S.Cholesky(), [(big, big)], f32, [f32]),
        (S.Lu(), [(2, big)], f32, [f32, D.int64, D.int64]),
        (S.Qr(False), [(big, 1)], f32, [f32, f32]),
        (S.Svd(None), [(1, big)], f32, [f32]),
        (S.Eigh(True), [(big, big)], f32, [f32, f32]),
        (S.SolveTriangular(), [(big, big), (big, 1)], f32, [f32]),
    ]
    for spec, shapes, dt, dts in cases:
        ops = [on(dev, np.zeros(s, dt.numpy_dtype)) for s in shapes]
        dsts = _dsts(dev, spec, shapes, dts)
        call = Call(spec.kernel, spec, tuple(dsts), tuple(ops))
        assert LIBRARY.statement.declines(call) is not None
        assert getattr(LIBRARY, spec.kernel)(spec, dsts, ops) is Answer.DECLINED
        assert all(untouched(d) for d in dsts)
    # The largest computed extent of each dtype, and b of many columns, are not declined.
    spec = S.SolveTriangular()
    for dt, n in matrices.MAX_EXTENTS.items():
        shapes = [(n, n), (n, 200)]
        call = Call(spec.kernel, spec, tuple(_dsts(dev, spec, shapes, [dt])),
                    tuple(on(dev, np.zeros(s, dt.numpy_dtype)) for s in shapes))
        assert LIBRARY.statement.declines(call) is None
    assert matrices.MAX_EXTENTS[c128] < matrices.MAX_EXTENT


def test_misfits_are_refused(dev: CudaRig) -> None:
    a = on(dev, np.eye(3, dtype=np.float32)[None])
    f = Array.empty(D.float32, (1, 3, 3), dev)
    assert LIBRARY.cholesky(S.Cholesky(), [Array.empty(D.float64, (1, 3, 3), dev)], [a]) is Answer.WRONG_DTYPE
    wrong = Array.empty(D.float32, (1, 3, 2), dev)
    assert LIBRARY.cholesky(S.Cholesky(), [wrong], [a]) is Answer.SHAPE_MISMATCH
    assert LIBRARY.cholesky(S.Cholesky(), [f, f], [a]) is Answer.BAD_ARITY
    half = on(dev, np.eye(3, dtype=np.float16)[None])
    assert LIBRARY.cholesky(S.Cholesky(), [Array.empty(D.float16, (1, 3, 3), dev)],
                            [half]) is Answer.WRONG_DTYPE
    strided = Array.empty(D.float32, (1, 3, 6), dev)[:, :, ::2]
    assert LIBRARY.cholesky(S.Cholesky(), [strided], [a]) is Answer.BAD_LAYOUT
    wide = on(dev, np.zeros((1, 2, 3), np.float32))
    assert LIBRARY.eigh(S.Eigh(False), [Array.empty(D.float32, (1, 2), dev)], [wide]) is Answer.SHAPE_MISMATCH
    call = Call("cholesky", S.Cholesky(), (Array.empty(D.float64, (1, 3, 3), dev),), (a,))
    assert matrices.declines(call) is None  # a misfit is refused, not declined

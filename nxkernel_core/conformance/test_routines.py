"""Laws of the matrix routines: residual checks of each factorisation.

Each routine runs on well-conditioned matrices (``cases.matrices``) and is
judged by residuals in float64 against a tolerance c·n·u·‖A‖ (c = 64, n the
larger extent, u the dtype's unit roundoff): generous for any backward-stable
algorithm, tight enough to catch a wrong triangle, transpose, order or
pivot. Contract (Matrices): 'A routine computes on each matrix of a, its last
two axes, of m rows and n columns, k = min m n'.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st

from .. import dtype as D
from ..kernel import unit_roundoff
from .cases import Case, draw_case, matrices, routine_spec
from .harness import Arr, Data, Subject, fail, invoke, law, operand_of

C: float = 64.0


def _h(a: Arr) -> Arr:
    return np.conj(np.swapaxes(a, -1, -2))


def _tol(case: Case, a: Arr) -> float:
    dt = case.operands[0].dtype
    n = max(a.shape[-2:], default=1) if a.ndim >= 2 else 1
    norm = float(np.abs(a).max()) if a.size else 0.0
    return C * max(n, 1) * unit_roundoff(dt) * max(norm, 1.0)


def _check(name: str, what: str, resid: Arr | float, tol: float) -> None:
    r = float(np.max(resid)) if np.size(resid) else 0.0
    if not r <= tol:
        raise fail(f"{name}: {what} is {r!r}, above the kit's tolerance {tol!r} (c·n·u·‖A‖, c = {C})")


def _run(subject: Subject, data: Data, kernel: str) -> tuple[Case, list[Arr]] | None:
    case = draw_case(data, subject, kernel)
    out = invoke(subject, case.spec, case.dsts, case.operands, data)
    if out.declined:
        return None
    return case, [np.asarray(r).astype(np.complex128) for r in out.results]


@law("cholesky")
def test_cholesky_residual(subject: Subject, data: Data) -> None:
    """The factor of a Hermitian positive-definite matrix, lower (L with
    L Lᴴ = A) or upper (U with Uᴴ U = A), read on its triangle. Contract: a
    routine 'computes on each matrix of a'; spec: 'the factor of a Hermitian
    positive-definite a, lower (or upper)'."""
    run = _run(subject, data, "cholesky")
    if run is None:
        return
    case, (f,) = run
    a = case.values[0].astype(np.complex128)
    if case.spec.upper:
        u = np.triu(f)
        _check("cholesky (upper)", "max |Uᴴ U − A|", np.abs(_h(u) @ u - a), _tol(case, a))
    else:
        low = np.tril(f)
        _check("cholesky (lower)", "max |L Lᴴ − A|", np.abs(low @ _h(low) - a), _tol(case, a))


@law("lu")
def test_lu_residual(subject: Subject, data: Data) -> None:
    """Partial-pivoting LU: lu holds a unit-lower L below the diagonal and U on
    and above it, perm is the row permutation with A[perm] = L U, pivots the
    row swapped in at each step (applied in order they give perm), and every
    multiplier is at most 1 in magnitude. Upstream §8: 'Lu returns three
    results: lu (unit-lower L below the diagonal, U on and above), pivots [k]
    and perm [m]'."""
    run = _run(subject, data, "lu")
    if run is None:
        return
    case, (lu, piv, perm) = run
    a = case.values[0].astype(np.complex128)
    m, n = a.shape[-2:]
    k = min(m, n)
    low = np.tril(lu[..., :, :k], -1) + np.eye(m, k)
    up = np.triu(lu[..., :k, :])
    perm_i = perm.real.astype(np.int64)
    pa = np.take_along_axis(a, perm_i[..., :, None], axis=-2) if m else a
    _check("lu", "max |A[perm] − L U|", np.abs(pa - low @ up), _tol(case, a))
    # Pivoting by |re| + |im| (upstream §8) bounds a complex multiplier by √2.
    limit = (math.sqrt(2) if case.operands[0].dtype.is_complex else 1.0) * (1 + 1e-3)
    if np.abs(low).size and float(np.abs(low).max()) > limit:
        raise fail(f"lu: a multiplier of magnitude {float(np.abs(low).max())!r} exceeds {limit:.4f} "
                   "(partial pivoting picks the largest pivot: 'the first row from j whose magnitude "
                   "is greater than every earlier row's')")
    piv_i = piv.real.astype(np.int64)
    for idx in np.ndindex(*a.shape[:-2]):
        order = list(range(m))
        for j in range(k):
            p = int(piv_i[idx][j])
            if not j <= p < m:
                raise fail(f"lu: pivot {j} is row {p}, not in [{j}, {m})")
            order[j], order[p] = order[p], order[j]
        if order != perm_i[idx].tolist():
            raise fail(f"lu: the pivots {piv_i[idx].tolist()} applied in order give {order}, but perm is "
                       f"{perm_i[idx].tolist()}")


@law("qr")
def test_qr_residual(subject: Subject, data: Data) -> None:
    """QR: Q R = A with R upper triangular and Q's columns orthonormal
    (reduced: k of them; complete: m). Contract: 'qr's factors, unique only up
    to a unit factor per column of q and row of r'."""
    run = _run(subject, data, "qr")
    if run is None:
        return
    case, (q, r) = run
    a = case.values[0].astype(np.complex128)
    tol = _tol(case, a)
    _check("qr", "max |Q R − A|", np.abs(q @ np.triu(r) - a), tol)
    eye = np.eye(q.shape[-1])
    _check("qr", "max |Qᴴ Q − I|", np.abs(_h(q) @ q - eye), tol)


@law("svd")
def test_svd_residual(subject: Subject, data: Data) -> None:
    """SVD: singular values non-negative, descending, those of A; with vectors
    U diag(s) Vᴴ = A and orthonormal U's columns and Vᴴ's rows. Contract: 'the
    vectors of svd ... unique only up to a unit factor where their value is
    simple'."""
    run = _run(subject, data, "svd")
    if run is None:
        return
    case, res = run
    a = case.values[0].astype(np.complex128)
    tol = _tol(case, a)
    s = (res[1] if len(res) == 3 else res[0]).real
    if s.size:
        if (s < -tol).any() or (np.diff(s, axis=-1) > tol).any():
            raise fail(f"svd: singular values {s.tolist()} are not non-negative and descending")
        ref = np.linalg.svd(a, compute_uv=False)
        _check("svd", "max |s − s(A)|", np.abs(s - ref), tol)
    if len(res) == 3:
        u, vh = res[0], res[2]
        k = s.shape[-1]
        us = u[..., :, :k] * s[..., None, :]
        _check("svd", "max |U diag(s) Vᴴ − A|", np.abs(us @ vh[..., :k, :] - a), tol)
        _check("svd", "max |Uᴴ U − I|", np.abs(_h(u) @ u - np.eye(u.shape[-1])), tol)
        _check("svd", "max |Vᴴ V − I|", np.abs(vh @ _h(vh) - np.eye(vh.shape[-2])), tol)


@law("eigh")
def test_eigh_residual(subject: Subject, data: Data) -> None:
    """Eigh: real eigenvalues, ascending, those of the Hermitian A; with
    vectors A V = V diag(w) and VᴴV = I. Spec: 'eigenvalues (ascending, real)
    of a Hermitian a, with its vectors'."""
    run = _run(subject, data, "eigh")
    if run is None:
        return
    case, res = run
    a = case.values[0].astype(np.complex128)
    tol = _tol(case, a)
    w = res[0].real
    if w.size:
        if (np.diff(w, axis=-1) < -tol).any():
            raise fail(f"eigh: eigenvalues {w.tolist()} are not ascending")
        _check("eigh", "max |w − w(A)|", np.abs(w - np.linalg.eigvalsh(a)), tol)
    if len(res) == 2:
        v = res[1]
        _check("eigh", "max |A V − V diag(w)|", np.abs(a @ v - v * w[..., None, :]), tol)
        _check("eigh", "max |Vᴴ V − I|", np.abs(_h(v) @ v - np.eye(v.shape[-1])), tol)


@law("eig")
def test_eig_residual(subject: Subject, data: Data) -> None:
    """Eig: the eigenvalues of A (as a multiset, to √u·n·‖A‖, since a
    nonnormal matrix's eigenvalues are sensitive); with vectors A V = V
    diag(w), each column of unit norm up to the tolerance's slack. Contract:
    'Each kernel library states ... eig's order of eigenvalues'."""
    run = _run(subject, data, "eig")
    if run is None:
        return
    case, res = run
    a = case.values[0].astype(np.complex128)
    tol = _tol(case, a)
    w = res[0]
    if w.size:
        ref = np.linalg.eigvals(a)
        loose = np.sqrt(unit_roundoff(case.operands[0].dtype)) * 64 * max(a.shape[-1], 1) * \
            max(float(np.abs(a).max()), 1.0)
        for idx in np.ndindex(*w.shape[:-1]):
            left = list(ref[idx])
            for x in w[idx]:
                j = int(np.argmin([abs(x - y) for y in left]))
                if abs(x - left[j]) > loose:
                    raise fail(f"eig: eigenvalue {x!r} is none of A's {ref[idx].tolist()} (tolerance "
                               f"{loose!r})")
                left.pop(j)
    if len(res) == 2:
        v = res[1]
        norms = np.linalg.norm(v, axis=-2)
        _check("eig", "max |A V − V diag(w)|", np.abs(a @ v - v * w[..., None, :]) /
               np.maximum(norms[..., None, :], 1e-300), tol)


@law("solve_triangular")
def test_solve_triangular_residual(subject: Subject, data: Data) -> None:
    """A triangular solve: op(T) x = b, T a's lower (or upper) triangle, its
    diagonal ones where unit_diagonal, op transposing where asked; the
    residual is within c·n·u·(|T||x| + |b|). Spec: 'x with op(a) x = b, a's
    lower (else upper) triangle read, op transposing where transpose, a's
    diagonal taken as ones where unit_diagonal'."""
    run = _run(subject, data, "solve_triangular")
    if run is None:
        return
    case, (x,) = run
    spec = case.spec
    a = case.values[0].astype(np.complex128)
    b = case.values[1].astype(np.complex128)
    t = np.tril(a) if spec.lower else np.triu(a)
    if spec.unit_diagonal and t.shape[-1]:
        idx = np.arange(t.shape[-1])
        t[..., idx, idx] = 1
    if spec.transpose:
        t = np.swapaxes(t, -1, -2)
    n = max(a.shape[-1], 1)
    scale = np.abs(t) @ np.abs(x) + np.abs(b)
    resid = np.abs(t @ x - b) / np.maximum(scale, 1e-300)
    _check(f"solve_triangular {spec}", "max |op(T) x − b| / (|T||x| + |b|)", resid,
           C * n * unit_roundoff(case.operands[0].dtype))


@law("cholesky")
def test_cholesky_failure_is_local(subject: Subject, data: Data) -> None:
    """A matrix with a NaN fails alone: the other matrices of the batch are
    factored as if it were absent. Upstream §8: 'Each matrix is computed
    independently; a failed matrix is NaN in its own results only'; contract:
    'A failure that depends on a float's or a complex number's value is a NaN
    result'."""
    dt = data.draw(st.sampled_from((D.float32, D.float64, D.complex64, D.complex128)), label="dtype")
    n = data.draw(st.integers(1, 4), label="n")
    a = matrices(data, "cholesky", dt, (2,), n, n)
    a[0, n - 1, n - 1] = np.nan
    arr = operand_of(data, subject, dt, a, label="a")
    spec = routine_spec(data, "cholesky")
    out = invoke(subject, spec, [(dt, (2, n, n))], [arr], data)
    if out.declined:
        return
    f = np.asarray(out.results[0]).astype(np.complex128)
    good = np.tril(f[1]) if not spec.upper else np.triu(f[1])
    a1 = a[1].astype(np.complex128)
    prod = good @ _h(good) if not spec.upper else _h(good) @ good
    resid = float(np.abs(prod - a1).max())
    tol = C * n * unit_roundoff(dt) * max(float(np.abs(a1).max()), 1.0)
    if not resid <= tol:
        raise fail(f"cholesky: a NaN in matrix 0 of the batch spoiled matrix 1 (residual {resid!r})")
    tri = np.tril(f[0]) if not spec.upper else np.triu(f[0])
    if not np.isnan(tri).any():
        raise fail("cholesky: a matrix holding a NaN gave a factor without NaN (contract: 'A failure "
                   "that depends on a float's ... value is a NaN result')")


@law("solve_triangular")
def test_solve_triangular_singular_is_nan(subject: Subject, data: Data) -> None:
    """A triangle with a zero on its read diagonal (exactly singular) makes its
    matrix's x all NaN, and no other's: the other matrix of the batch solves
    as if it were alone. Contract: 'A failure that depends on a float's or a
    complex number's value is a NaN result'; upstream §8: 'a failed matrix is
    NaN in its own results only'."""
    dt = data.draw(st.sampled_from((D.float32, D.float64, D.complex64, D.complex128)), label="dtype")
    n = data.draw(st.integers(1, 4), label="n")
    k = data.draw(st.integers(1, 3), label="columns")
    spec = routine_spec(data, "solve_triangular")
    spec = type(spec)(spec.lower, spec.transpose, False)  # a unit diagonal reads no zero
    a = matrices(data, "solve_triangular", dt, (2,), n, n)
    j = data.draw(st.integers(0, n - 1), label="zero at")
    a[0, j, j] = 0
    b = np.ones((2, n, k), dt.numpy_dtype)
    ops = [operand_of(data, subject, dt, a, label="a"), operand_of(data, subject, dt, b, label="b")]
    out = invoke(subject, spec, [(dt, (2, n, k))], ops, data)
    if out.declined:
        return
    x = np.asarray(out.results[0]).astype(np.complex128)
    if not np.isnan(x[0]).all():
        raise fail(f"solve_triangular {spec}: a zero at ({j}, {j}) of the diagonal gave x = {x[0]!r}, "
                   "not all NaN (contract: 'A failure that depends on a float's ... value is a NaN "
                   "result')")
    t = np.tril(a[1]) if spec.lower else np.triu(a[1])
    t = (t.T if spec.transpose else t).astype(np.complex128)
    resid = np.abs(t @ x[1] - b[1]) / (np.abs(t) @ np.abs(x[1]) + 1)
    _check(f"solve_triangular {spec}: the matrix beside a singular one", "max |op(T) x − b| / "
           "(|T||x| + |b|)", resid, C * n * unit_roundoff(dt))

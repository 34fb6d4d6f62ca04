"""The host library's matrix routines: residuals and structure against the
stated bounds (‖A − QR‖, LU's componentwise γ(k)|L||U| in exact arithmetic,
orthonormality), the LU pivot rule (first greatest |re| + |im|, checked
against LAPACK's getrf), NaN in a failing matrix's own results only, the
triangles each routine reads, empty matrices, refusals, and bits that do not
depend on layouts or BLAS thread counts."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
import scipy.linalg.lapack as lapack
from hypothesis import given, settings
from hypothesis import strategies as st

from nxkernel_core import dtype as D
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_core.dtype import Dtype
from nxkernel_core.kernel import Call, gamma, unit_roundoff
from nxkernel_core.layout import Permute
from nxkernel_host.library import library

NDArray = np.ndarray[Any, Any]
DTYPES = (D.float32, D.float64, D.complex64, D.complex128)
REAL = {D.float32: D.float32, D.float64: D.float64, D.complex64: D.float32,
        D.complex128: D.float64}
CPLX = {D.float32: D.complex64, D.float64: D.complex128, D.complex64: D.complex64,
        D.complex128: D.complex128}
ids = lambda d: d.name  # noqa: E731


def call(name: str, spec: Any, dts: Sequence[tuple[Dtype, tuple[int, ...]]],
         ops: Sequence[Array]) -> list[NDArray]:
    dsts = [Array.empty(dt, shape) for dt, shape in dts]
    assert getattr(library, name)(spec, dsts, list(ops)) is Answer.DONE
    return [d.to_numpy() for d in dsts]


def random(rng: np.random.Generator, dt: Dtype, shape: tuple[int, ...]) -> NDArray:
    v = rng.standard_normal(shape)
    if dt.is_complex:
        v = v + 1j * rng.standard_normal(shape)
    return v.astype(dt.numpy_dtype)


def transposed(values: NDArray, dt: Dtype) -> Array:
    """``values`` through a layout with the last two axes swapped in memory."""
    r = values.ndim
    order = (*range(r - 2), r - 1, r - 2)
    return Array.from_numpy(np.ascontiguousarray(values.transpose(order)), dtype=dt).view(
        Permute(order))


def hermitian_pd(rng: np.random.Generator, dt: Dtype, batch: int, n: int) -> NDArray:
    a = random(rng, dt, (batch, n, n)).astype(np.complex128 if dt.is_complex else np.float64)
    h = a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n)
    return h.astype(dt.numpy_dtype)


def ct(a: NDArray) -> NDArray:
    return np.conj(np.swapaxes(a, -1, -2))


def tol(dt: Dtype, n: int) -> float:
    return 30 * max(n, 1) * unit_roundoff(dt)


# --------------------------------------------------------------------------
# cholesky
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dt", DTYPES, ids=ids)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_factors_and_fails_alone(dt: Dtype, upper: bool) -> None:
    rng = np.random.default_rng(1)
    n = 6
    h = hermitian_pd(rng, dt, 3, n)
    h[1] = -h[1]  # not positive definite
    # The unread triangle holds NaN: it must not matter.
    read_h = h.copy()
    if upper:
        read_h[:, np.tril_indices(n, -1)[0], np.tril_indices(n, -1)[1]] = np.nan
    else:
        read_h[:, np.triu_indices(n, 1)[0], np.triu_indices(n, 1)[1]] = np.nan
    (f,) = call("cholesky", S.Cholesky(upper), [(dt, (3, n, n))], [transposed(read_h, dt)])
    assert np.isnan(f[1]).all()
    for t in (0, 2):
        tri = np.triu(f[t]) if upper else np.tril(f[t])
        assert np.array_equal(tri, f[t])  # the other triangle is zero
        prod = ct(f[t]) @ f[t] if upper else f[t] @ ct(f[t])
        g = np.abs(ct(f[t])) @ np.abs(f[t]) if upper else np.abs(f[t]) @ np.abs(ct(f[t]))
        bound = gamma(n + 1, unit_roundoff(dt)) * g
        err = np.abs(prod.astype(np.complex128) - h[t])
        assert np.all(err <= 4 * bound + 1e-300)


def test_finite_elements_whose_sum_overflows_are_finite() -> None:
    # The finiteness check starts from the sum of every element, which
    # overflows here although each element is finite.
    d = np.array([1e308, 4e307, 9e307])
    h = np.diag(d)
    h[2, 0] = h[0, 2] = 1e300
    for upper in (False, True):
        (f,) = call("cholesky", S.Cholesky(upper), [(D.float64, (3, 3))], [Array.from_numpy(h)])
        assert np.isfinite(f).all()
        assert np.array_equal(np.diagonal(f)[:2], np.sqrt(d[:2]))


def test_a_non_finite_triangle_gives_nan() -> None:
    h = hermitian_pd(np.random.default_rng(2), D.float64, 2, 3)
    h[0, 2, 0] = np.inf
    (f,) = call("cholesky", S.Cholesky(), [(D.float64, (2, 3, 3))], [Array.from_numpy(h)])
    assert np.isnan(f[0]).all() and np.isfinite(f[1]).all()


# --------------------------------------------------------------------------
# lu
# --------------------------------------------------------------------------


def lu_parts(lu: NDArray, m: int, n: int) -> tuple[NDArray, NDArray]:
    k = min(m, n)
    low = np.tril(lu[:, :k], -1) + np.eye(m, k, dtype=lu.dtype)
    return low, np.triu(lu[:k])


@settings(max_examples=30, deadline=None)
@given(dt=st.sampled_from(DTYPES), m=st.integers(0, 6), n=st.integers(0, 6),
       seed=st.integers(0, 2**32 - 1), small=st.booleans())
def test_lu_is_backward_stable_with_first_max_pivots(dt: Dtype, m: int, n: int, seed: int,
                                                      small: bool) -> None:
    rng = np.random.default_rng(seed)
    a = random(rng, dt, (2, m, n))
    if small:  # small integers: many ties in the pivot search
        a = np.round(a * 2).astype(dt.numpy_dtype)
    lu, piv, perm = call("lu", S.Lu(), [(dt, (2, m, n)), (D.int64, (2, min(m, n))),
                                        (D.int64, (2, m))], [Array.from_numpy(a)])
    k = min(m, n)
    u = unit_roundoff(dt)
    g = gamma(4 * k + 6 if dt.is_complex else k, u)
    for t in range(2):
        replay = list(range(m))
        for j in range(k):
            p = int(piv[t, j])
            assert j <= p < m
            replay[j], replay[p] = replay[p], replay[j]
        assert replay == list(perm[t])
        low, up = lu_parts(lu[t], m, n)
        # Each pivot is a greatest |re| + |im| of its column as elimination left it.
        for j in range(k):
            col = low[j:, j] * up[j, j]
            mags = np.abs(col.real) + np.abs(col.imag)
            assert mags[0] >= mags.max() * (1 - 1e-5), (j, mags)
        # |LU − PA| ≤ γ(k)|L||U| (complex: γ(4k + 6)), LU − PA in exact arithmetic.
        exact_lu = _exact_matmul(low, up)
        pa = a[t][perm[t]].astype(np.complex128)
        size = np.abs(low).astype(np.float64) @ np.abs(up).astype(np.float64)
        for i in range(m):
            for c in range(n):
                re, im = exact_lu[i][c]
                d = abs(complex(float(re - Fraction(pa[i, c].real)),
                                float(im - Fraction(pa[i, c].imag))))
                assert d <= g * size[i, c] * (1 + 1e-9), (i, c, d, g * size[i, c])


def _exact_matmul(a: NDArray, b: NDArray) -> list[list[tuple[Fraction, Fraction]]]:
    """a @ b exactly: each entry's real and imaginary parts as Fractions."""
    fa = [[(Fraction(float(x.real)), Fraction(float(x.imag))) for x in row]
          for row in a.astype(np.complex128)]
    fb = [[(Fraction(float(x.real)), Fraction(float(x.imag))) for x in row]
          for row in b.astype(np.complex128)]
    out = []
    for i in range(a.shape[0]):
        row = []
        for j in range(b.shape[1]):
            re = sum((fa[i][t][0] * fb[t][j][0] - fa[i][t][1] * fb[t][j][1]
                      for t in range(a.shape[1])), Fraction(0))
            im = sum((fa[i][t][0] * fb[t][j][1] + fa[i][t][1] * fb[t][j][0]
                      for t in range(a.shape[1])), Fraction(0))
            row.append((re, im))
        out.append(row)
    return out


def test_lu_pivots_choose_the_first_greatest_magnitude() -> None:
    a = np.array([[1.0, 2.0], [-3.0, 1.0], [3.0, 5.0], [2.0, 1.0]])
    _, piv, _perm = call("lu", S.Lu(), [(D.float64, (4, 2)), (D.int64, (2,)), (D.int64, (4,))],
                        [Array.from_numpy(a)])
    assert piv[0] == 1  # |−3| ties |3|: the first wins
    c = np.array([[1 + 0j, 0], [2 + 1j, 1], [0 + 3j, 1], [-3 + 0j, 0]], np.complex128)
    _, pc, _ = call("lu", S.Lu(), [(D.complex128, (4, 2)), (D.int64, (2,)), (D.int64, (4,))],
                    [Array.from_numpy(c)])
    assert pc[0] == 1  # |re| + |im| = 3 at rows 1, 2 and 3: row 1
    nan = np.array([[1.0, 0.0], [np.nan, 1.0], [5.0, 2.0]])
    _lu, pn, _ = call("lu", S.Lu(), [(D.float64, (3, 2)), (D.int64, (2,)), (D.int64, (3,))],
                     [Array.from_numpy(nan)])
    assert pn[0] == 2  # a NaN never wins against a number
    first_nan = np.array([[np.nan, 0.0], [4.0, 1.0]])
    _, pf, _ = call("lu", S.Lu(), [(D.float64, (2, 2)), (D.int64, (2,)), (D.int64, (2,))],
                    [Array.from_numpy(first_nan)])
    assert pf[0] == 0  # nothing is greater than a NaN at row j


@pytest.mark.parametrize("dt", DTYPES, ids=ids)
def test_lu_pivots_match_lapack_getrf(dt: Dtype) -> None:
    rng = np.random.default_rng(4)
    getrf = lapack.get_lapack_funcs("getrf", dtype=dt.numpy_dtype)
    for trial in range(20):
        a = random(rng, dt, (7, 7))
        if trial % 2:
            a = np.round(a).astype(dt.numpy_dtype)  # ties of small integers
            a[:, 0] = np.array([1, -3, 3, 2, -3, 0, 1], dt.numpy_dtype)
        _, piv, _ = call("lu", S.Lu(), [(dt, (7, 7)), (D.int64, (7,)), (D.int64, (7,))],
                         [Array.from_numpy(a)])
        ref = getrf(a)[1]
        assert piv[0] == ref[0]
        if trial % 2 == 0:
            assert np.array_equal(piv, ref)


def test_lu_zero_pivot_is_not_a_failure() -> None:
    a = np.array([[0.0, 1.0], [0.0, 2.0]])
    lu, piv, _ = call("lu", S.Lu(), [(D.float64, (2, 2)), (D.int64, (2,)), (D.int64, (2,))],
                      [Array.from_numpy(a)])
    assert np.array_equal(lu, [[0.0, 1.0], [0.0, 2.0]]) and list(piv) == [0, 1]


# --------------------------------------------------------------------------
# qr and svd
# --------------------------------------------------------------------------

SHAPES = [(5, 5), (7, 4), (4, 7), (1, 3), (3, 1)]


@pytest.mark.parametrize("dt", DTYPES, ids=ids)
@pytest.mark.parametrize("complete", [False, True])
@pytest.mark.parametrize("mn", SHAPES, ids=str)
def test_qr_reconstructs_with_orthonormal_q(dt: Dtype, complete: bool, mn: tuple[int, int]
                                            ) -> None:
    m, n = mn
    k = min(m, n)
    qc = m if complete else k
    a = random(np.random.default_rng(m * 10 + n), dt, (2, m, n))
    q, r = call("qr", S.Qr(complete), [(dt, (2, m, qc)), (dt, (2, qc, n))], [transposed(a, dt)])
    assert np.array_equal(r, np.triu(r))
    eps = tol(dt, m * n)
    assert np.abs(ct(q) @ q - np.eye(qc)).max() <= eps
    assert np.linalg.norm(q @ r - a, axis=(-2, -1)).max() <= eps * np.linalg.norm(a)


@pytest.mark.parametrize("dt", DTYPES, ids=ids)
@pytest.mark.parametrize("vectors", [None, S.Factors.REDUCED, S.Factors.COMPLETE],
                         ids=str)
@pytest.mark.parametrize("mn", SHAPES, ids=str)
def test_svd_values_and_vectors(dt: Dtype, vectors: S.Factors | None, mn: tuple[int, int]) -> None:
    m, n = mn
    k = min(m, n)
    a = random(np.random.default_rng(m + n), dt, (2, m, n))
    real = REAL[dt]
    if vectors is None:
        (s,) = call("svd", S.Svd(None), [(real, (2, k))], [Array.from_numpy(a)])
    else:
        uc, vr = (m, n) if vectors is S.Factors.COMPLETE else (k, k)
        u, s, vh = call("svd", S.Svd(vectors), [(dt, (2, m, uc)), (real, (2, k)),
                                                (dt, (2, vr, n))], [Array.from_numpy(a)])
        eps = tol(dt, m * n)
        assert np.abs(ct(u) @ u - np.eye(uc)).max() <= eps
        assert np.abs(vh @ ct(vh) - np.eye(vr)).max() <= eps
        rebuilt = (u[..., :k] * s[:, None, :]) @ vh[:, :k]
        assert np.abs(rebuilt - a).max() <= eps * np.abs(a).max() * k
    ref = np.linalg.svd(a.astype(np.complex128), compute_uv=False)
    assert np.all(np.diff(s, axis=-1) <= 0) and np.all(s >= 0)
    assert np.abs(s - ref).max() <= tol(dt, max(m, n)) * ref.max()


def test_empty_matrices_complete_with_identities() -> None:
    a = Array.from_numpy(np.zeros((2, 3, 0)))
    q, _r = call("qr", S.Qr(True), [(D.float64, (2, 3, 3)), (D.float64, (2, 3, 0))], [a])
    assert np.array_equal(q, np.broadcast_to(np.eye(3), (2, 3, 3)))
    u, s, _vh = call("svd", S.Svd(S.Factors.COMPLETE), [(D.float64, (2, 3, 3)),
                                                        (D.float64, (2, 0)),
                                                        (D.float64, (2, 0, 0))], [a])
    assert np.array_equal(u, np.broadcast_to(np.eye(3), (2, 3, 3))) and s.size == 0
    _lu, _piv, perm = call("lu", S.Lu(), [(D.float64, (2, 3, 0)), (D.int64, (2, 0)),
                                        (D.int64, (2, 3))], [a])
    assert np.array_equal(perm, [[0, 1, 2]] * 2)


# --------------------------------------------------------------------------
# eigh and eig
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dt", DTYPES, ids=ids)
def test_eigh_reads_the_lower_triangle(dt: Dtype) -> None:
    n = 6
    h = hermitian_pd(np.random.default_rng(7), dt, 2, n) - n * np.eye(n, dtype=dt.numpy_dtype)
    seen = h.copy()
    iu = np.triu_indices(n, 1)
    seen[:, iu[0], iu[1]] = np.nan
    w, v = call("eigh", S.Eigh(), [(REAL[dt], (2, n)), (dt, (2, n, n))], [Array.from_numpy(seen)])
    (w_only,) = call("eigh", S.Eigh(False), [(REAL[dt], (2, n))], [Array.from_numpy(seen)])
    eps = tol(dt, n)
    scale = np.abs(h).max() * n
    assert np.all(np.diff(w, axis=-1) >= 0)
    assert np.abs(h @ v - v * w[:, None, :]).max() <= eps * scale
    assert np.abs(ct(v) @ v - np.eye(n)).max() <= eps
    assert np.abs(w_only - w).max() <= eps * scale


@pytest.mark.parametrize("dt", DTYPES, ids=ids)
def test_eig_vectors_are_unit_and_satisfy_av_equal_vw(dt: Dtype) -> None:
    n = 6
    a = random(np.random.default_rng(8), dt, (3, n, n))
    c = CPLX[dt]
    w, v = call("eig", S.Eig(), [(c, (3, n)), (c, (3, n, n))], [transposed(a, dt)])
    eps = tol(dt, n)
    assert np.abs(a @ v - v * w[:, None, :]).max() <= eps * np.abs(a).max() * n
    assert np.abs(np.linalg.norm(v, axis=-2) - 1).max() <= eps
    if not dt.is_complex:  # conjugate pairs adjacent, exactly conjugate
        for t in range(3):
            for j in range(n - 1):
                if w[t, j].imag > 0:
                    assert w[t, j + 1] == np.conj(w[t, j])
                    assert np.array_equal(v[t, :, j + 1], np.conj(v[t, :, j]))
    (w_only,) = call("eig", S.Eig(False), [(c, (3, n))], [Array.from_numpy(a)])
    assert np.abs(np.sort_complex(w_only) - np.sort_complex(w)).max() <= eps * n * np.abs(a).max()


@pytest.mark.parametrize("name", ["qr", "svd", "eigh", "eig"])
def test_a_non_finite_matrix_is_nan_in_its_own_results_only(name: str) -> None:
    a = hermitian_pd(np.random.default_rng(9), D.float64, 3, 4)
    a[1, 3, 0] = np.nan
    specs: dict[str, tuple[Any, list[tuple[Dtype, tuple[int, ...]]]]] = {
             "qr": (S.Qr(), [(D.float64, (3, 4, 4))] * 2),
             "svd": (S.Svd(), [(D.float64, (3, 4, 4)), (D.float64, (3, 4)),
                               (D.float64, (3, 4, 4))]),
             "eigh": (S.Eigh(), [(D.float64, (3, 4)), (D.float64, (3, 4, 4))]),
             "eig": (S.Eig(), [(D.complex128, (3, 4)), (D.complex128, (3, 4, 4))])}
    spec, dts = specs[name]
    for r in call(name, spec, dts, [Array.from_numpy(a)]):
        assert np.isnan(r[1]).all()
        assert np.isfinite(r[0]).all() and np.isfinite(r[2]).all()


# --------------------------------------------------------------------------
# solve_triangular
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dt", DTYPES, ids=ids)
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("unit", [False, True])
def test_solve_triangular_reads_its_triangle(dt: Dtype, lower: bool, transpose: bool,
                                             unit: bool) -> None:
    n, k = 5, 3
    rng = np.random.default_rng(10)
    t = random(rng, dt, (2, n, n)) + 4 * np.eye(n, dtype=dt.numpy_dtype)
    tri = np.tril(t) if lower else np.triu(t)
    if unit:
        tri[:, np.arange(n), np.arange(n)] = 1
    seen = t.copy()
    off = np.triu_indices(n, 1) if lower else np.tril_indices(n, -1)
    seen[:, off[0], off[1]] = np.nan  # the unread triangle
    if unit:
        seen[:, np.arange(n), np.arange(n)] = np.nan
    b = random(rng, dt, (2, n, k))
    (x,) = call("solve_triangular", S.SolveTriangular(lower, transpose, unit), [(dt, (2, n, k))],
                [Array.from_numpy(seen), transposed(b, dt)])
    op = np.swapaxes(tri, -1, -2) if transpose else tri
    u = unit_roundoff(dt)
    resid = np.abs(op.astype(np.complex128) @ x - b)
    assert np.all(resid <= 4 * gamma(n + 1, u) * (np.abs(op) @ np.abs(x)) + 1e-30)


# --------------------------------------------------------------------------
# Refusals and determinism
# --------------------------------------------------------------------------


def test_misfits_are_refused_and_nothing_is_declined() -> None:
    a = Array.from_numpy(np.eye(3, dtype=np.float16))
    dst = Array.empty(D.float16, (3, 3))
    assert library.cholesky(S.Cholesky(), [dst], [a]) is Answer.WRONG_DTYPE
    a64 = Array.from_numpy(np.eye(3))
    assert library.cholesky(S.Cholesky(), [Array.empty(D.float32, (3, 3))],
                                      [a64]) is Answer.WRONG_DTYPE
    assert library.cholesky(S.Cholesky(), [Array.empty(D.float64, (3, 2))],
                                      [a64]) is Answer.SHAPE_MISMATCH
    assert library.lu(S.Lu(), [Array.empty(D.float64, (3, 3))], [a64]) \
        is Answer.BAD_ARITY
    b32 = Array.from_numpy(np.ones((3, 1), np.float32))
    assert library.solve_triangular(S.SolveTriangular(), [Array.empty(D.float32,
                                                                                 (3, 1))],
                                              [a64, b32]) is Answer.WRONG_DTYPE
    for name in ("cholesky", "lu", "qr", "svd", "eigh", "eig", "solve_triangular"):
        spec = S.KERNELS[name]()
        assert library.statement.computes[name].declines(Call(name, spec, (a64,), (a64,))) is None


_THREADS_SCRIPT = textwrap.dedent("""
    import hashlib, json, sys
    import numpy as np
    from nxkernel_core import dtype as D, spec as S
    from nxkernel_core.array import Array
    from nxkernel_host.library import library
    rng = np.random.default_rng(0)
    n = 400
    a = rng.standard_normal((n, n))
    h = a @ a.T + n * np.eye(n)
    out = {}
    runs = [("cholesky", S.Cholesky(), h, [(D.float64, (n, n))]),
            ("qr", S.Qr(), a, [(D.float64, (n, n))] * 2),
            ("svd", S.Svd(), a, [(D.float64, (n, n)), (D.float64, (n,)), (D.float64, (n, n))]),
            ("eigh", S.Eigh(), h, [(D.float64, (n,)), (D.float64, (n, n))]),
            ("eig", S.Eig(), a[:200, :200], [(D.complex128, (200,)), (D.complex128, (200, 200))]),
            ("solve_triangular", S.SolveTriangular(), None, [(D.float64, (n, 300))])]
    for name, spec, m, dts in runs:
        dsts = [Array.empty(dt, s) for dt, s in dts]
        ops = [Array.from_numpy(m)] if m is not None else [Array.from_numpy(np.tril(h)),
                                                           Array.from_numpy(a[:, :300].copy())]
        getattr(library, name)(spec, dsts, ops)
        out[name] = hashlib.sha1(b"".join(d.to_numpy().tobytes() for d in dsts)).hexdigest()
    json.dump(out, sys.stdout)
""")


def test_bits_do_not_depend_on_blas_threads() -> None:
    procs = [subprocess.Popen([sys.executable, "-c", _THREADS_SCRIPT], text=True,
                              stdout=subprocess.PIPE,
                              env={"OPENBLAS_NUM_THREADS": threads, "PATH": "/usr/bin:/bin"})
             for threads in ("1", "2")]
    runs = [json.loads(p.communicate(timeout=300)[0]) for p in procs]
    assert runs[0] == runs[1]


# --------------------------------------------------------------------------
# The routines' own BLAS: bits that no thread setting of the program changes
# --------------------------------------------------------------------------

_ROUTINES_SCRIPT = """
import hashlib, json, sys
import numpy as np
from nxkernel_core import dtype as D, spec as S
from nxkernel_core.array import Array
from nxkernel_host.library import library
rng = np.random.default_rng(0)
a = rng.integers(-3, 4, (300, 300)).astype(np.float64) + rng.standard_normal((300, 300)) / 8
m = rng.integers(-3, 4, (300, 300)).astype(np.float64)
h = m @ m.T + 300 * np.eye(300)  # integers: the same bits whatever NumPy's BLAS threads
sq, sq2, vec = (Array.empty(D.float64, (300, 300)), Array.empty(D.float64, (300, 300)),
                Array.empty(D.float64, (300,)))
k = library
out = {}
for name, call, dsts in [("cholesky", lambda: k.cholesky(S.Cholesky(), [sq], [Array.from_numpy(h)]), [sq]),
                         ("qr", lambda: k.qr(S.Qr(), [sq, sq2], [Array.from_numpy(a)]), [sq, sq2]),
                         ("eigh", lambda: k.eigh(S.Eigh(), [vec, sq], [Array.from_numpy(h)]), [vec, sq]),
                         ("svd", lambda: k.svd(S.Svd(), [sq, vec, sq2], [Array.from_numpy(a)]),
                          [sq, vec, sq2])]:
    call()
    out[name] = hashlib.sha1(b"".join(d.to_numpy().tobytes() for d in dsts)).hexdigest()
json.dump(out, sys.stdout)
"""


def test_routine_bits_do_not_depend_on_the_programs_blas_threads() -> None:
    import json
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "NXKERNEL_THREADS")}
    runs = []
    for threads in ("1", "3"):
        done = subprocess.run([sys.executable, "-c", _ROUTINES_SCRIPT], text=True, capture_output=True,
                              env={**env, "OPENBLAS_NUM_THREADS": threads, "NXKERNEL_THREADS": threads},
                              timeout=300, check=True)
        runs.append(json.loads(done.stdout))
    assert runs[0] == runs[1]


def _every_routine(rng: np.random.Generator) -> list[list[NDArray]]:
    """Each routine once (batches of two 40 x 40 matrices, real and complex,
    both triangles and all factor modes), its results as arrays."""
    out = []
    for dt in (D.float64, D.complex64):
        a = random(rng, dt, (2, 40, 40))
        h = hermitian_pd(rng, dt, 2, 40)
        tall = random(rng, dt, (2, 40, 24))
        real, sq, vec = REAL[dt], (2, 40, 40), (2, 40)
        runs: list[tuple[str, Any, list[tuple[Dtype, tuple[int, ...]]], NDArray]] = [
            ("cholesky", S.Cholesky(), [(dt, sq)], h),
            ("cholesky", S.Cholesky(True), [(dt, sq)], h),
            ("lu", S.Lu(), [(dt, sq), (D.int64, vec), (D.int64, vec)], a),
            ("qr", S.Qr(), [(dt, (2, 40, 24)), (dt, (2, 24, 24))], tall),
            ("qr", S.Qr(True), [(dt, sq), (dt, (2, 40, 24))], tall),
            ("svd", S.Svd(), [(dt, (2, 40, 24)), (real, (2, 24)), (dt, (2, 24, 24))], tall),
            ("svd", S.Svd(S.Factors.COMPLETE), [(dt, sq), (real, (2, 24)), (dt, (2, 24, 24))], tall),
            ("svd", S.Svd(None), [(real, (2, 24))], tall),
            ("eigh", S.Eigh(), [(real, vec), (dt, sq)], h),
            ("eigh", S.Eigh(False), [(real, vec)], h),
            ("eig", S.Eig(), [(CPLX[dt], vec), (CPLX[dt], sq)], a)]
        out += [call(name, spec, dts, [Array.from_numpy(m)]) for name, spec, dts, m in runs]
        out.append(call("solve_triangular", S.SolveTriangular(), [(dt, (2, 40, 24))],
                        [Array.from_numpy(h), Array.from_numpy(tall)]))
    return out


def test_routine_bits_do_not_depend_on_the_host_threads() -> None:
    from nxkernel_host import threads

    runs = []
    for n in (1, 3):
        with threads(n):
            runs.append(_every_routine(np.random.default_rng(11)))
    for one, three in zip(*runs, strict=True):
        for x, y in zip(one, three, strict=True):
            assert x.tobytes() == y.tobytes()


def test_destinations_written_through_scratch_arrays_get_the_same_bits(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Where NumPy finds a destination's memory unfit for LAPACK to write in
    # place, the routines compute into scratch arrays and store those.
    from nxkernel_host import matrices

    direct = _every_routine(np.random.default_rng(12))
    monkeypatch.setattr(matrices, "target", lambda d: None)
    stored = _every_routine(np.random.default_rng(12))
    for one, other in zip(direct, stored, strict=True):
        for x, y in zip(one, other, strict=True):
            assert x.tobytes() == y.tobytes()


def test_the_routines_run_on_their_own_instance() -> None:
    from nxkernel_host import blas

    assert blas.library(blas.ROUTINE_THREADS).scipy_openblas_get_num_threads() == blas.ROUTINE_THREADS
    assert blas.library(1).scipy_openblas_get_num_threads() == 1
    assert blas.library(blas.ROUTINE_THREADS)._handle != blas.library(1)._handle

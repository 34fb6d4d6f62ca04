"""The host library's matrix routines: cholesky, lu, qr, svd, eigh, eig, solve_triangular.

Each routine computes on every matrix of a (its last two axes) apart, at
float32, float64, complex64 and complex128 (the dtypes ``full_precision``
names), in that precision; other dtypes answer ``WRONG_DTYPE``. Each matrix
is copied into a Fortran-ordered array first, so its layout never reaches
LAPACK. A matrix that fails, whose read elements hold an infinity or a NaN
(checked first, for the routines LAPACK runs), that LAPACK reports it
cannot factor (``info != 0``: not positive definite, no convergence), or, for
solve_triangular, with a zero on its read diagonal, gives NaN in every result
of its own, and in no other matrix's; no routine raises.

lu is this module's own (Numba, serial): partial pivoting choosing the first
row of greatest magnitude, the rule the contract states. The others call the
LAPACK and BLAS of the library's own OpenBLAS instance for routines
(``lapack``, on a constant two threads), so their bits do not depend on the
program's thread counts and the program's BLAS is never touched.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Final

import numba as nb
import numpy as np
import numpy.typing as npt

from nxkernel_core import dtype as D
from nxkernel_core import fits
from nxkernel_core import spec as S
from nxkernel_core.array import Array

from . import lapack
from .family import Family
from .views import read, store

__all__ = ["FAMILY", "ROUTINES", "cholesky", "eig", "eigh", "lu", "qr", "solve_triangular", "svd"]

NDArray = npt.NDArray[Any]

_REAL: Final = {D.float32: D.float32, D.float64: D.float64,
                D.complex64: D.float32, D.complex128: D.float64}
_COMPLEX: Final = {D.float32: D.complex64, D.float64: D.complex128,
                   D.complex64: D.complex64, D.complex128: D.complex128}


# --------------------------------------------------------------------------
# Fitting calls
# --------------------------------------------------------------------------




def _run(spec: Any, dsts: Sequence[Array], operands: Sequence[Array],
         compute: Callable[[list[NDArray]], list[NDArray]]) -> None:
    """Store ``compute``'s results (one per destination, each ``[batch, ...]``)
    from the operands as ``[batch, m, n]``, for a call that fits, the door
    passed."""
    mats = [read(o) for o in operands]
    mats = [m.reshape(math.prod(m.shape[:-2]), *m.shape[-2:]) for m in mats]
    with np.errstate(all="ignore"):  # NaN is a value, not an error
        results = compute(mats)
    for d, r in zip(dsts, results, strict=True):
        store(d, r.reshape(d.shape))


def _finite(m: NDArray) -> bool:
    return bool(np.isfinite(m).all())


# --------------------------------------------------------------------------
# cholesky
# --------------------------------------------------------------------------


def cholesky(spec: S.Cholesky, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
    """The factor of each Hermitian positive-definite matrix, lower (A = L Lᴴ)
    or upper (A = Uᴴ U), read from that triangle alone; the other is zero."""

    def compute(mats: list[NDArray]) -> list[NDArray]:
        (a,) = mats
        out = np.zeros(a.shape, dtype=a.dtype)
        if a.shape[-1] == 0:
            return [out]
        for t in range(a.shape[0]):
            tri = np.triu(a[t]) if spec.upper else np.tril(a[t])
            if not _finite(tri):
                out[t] = np.nan
                continue
            c, info = lapack.potrf(a[t], lower=not spec.upper)
            out[t] = c if info == 0 else np.nan
        return [out]

    _run(spec, dsts, operands, compute)


# --------------------------------------------------------------------------
# lu
# --------------------------------------------------------------------------


@nb.njit(cache=True)
def _lu_one(a: NDArray, piv: NDArray, perm: NDArray) -> None:
    """LU of one C-ordered matrix in place: pivot j is the first row from j whose
    |re| + |im| is greater than every earlier one's; multipliers a[i,j]/pivot
    (a zero pivot leaves them as they are); a[i,c] − l·a[j,c] rounds twice."""
    m, n = a.shape
    for i in range(m):
        perm[i] = i
    for j in range(min(m, n)):
        p = j
        big = abs(a[j, j].real) + abs(a[j, j].imag)
        for i in range(j + 1, m):
            v = abs(a[i, j].real) + abs(a[i, j].imag)
            if v > big:
                big = v
                p = i
        piv[j] = p
        if p != j:
            for c in range(n):
                tmp = a[j, c]
                a[j, c] = a[p, c]
                a[p, c] = tmp
            q = perm[j]
            perm[j] = perm[p]
            perm[p] = q
        pivot = a[j, j]
        if pivot != 0:
            for i in range(j + 1, m):
                a[i, j] = a[i, j] / pivot
        for i in range(j + 1, m):
            lij = a[i, j]
            for c in range(j + 1, n):
                a[i, c] = a[i, c] - lij * a[j, c]


@nb.njit(cache=True, nogil=True)
def _lu_batch(a: NDArray, piv: NDArray, perm: NDArray) -> None:
    # Serial: no Numba threading layer, so concurrent callers are safe and the
    # bits cannot depend on threads.
    for t in range(a.shape[0]):
        _lu_one(a[t], piv[t], perm[t])


def lu(spec: S.Lu, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
    """Partial-pivoting LU of each matrix: lu (unit-lower L below the diagonal,
    U on and above), pivots [k] (row j was swapped with row pivots[j]) and perm
    [m] (row i of L·U is row perm[i] of a)."""

    def compute(mats: list[NDArray]) -> list[NDArray]:
        (a,) = mats
        work = np.array(a, order="C", copy=True)
        batch, m, n = work.shape
        piv = np.zeros((batch, min(m, n)), dtype=np.int64)
        perm = np.zeros((batch, m), dtype=np.int64)
        if work.size or perm.size:
            _lu_batch(work, piv, perm)
        return [work, piv, perm]

    _run(spec, dsts, operands, compute)


# --------------------------------------------------------------------------
# qr and svd
# --------------------------------------------------------------------------


def _eye(batch: int, rows: int, cols: int, dtype: npt.DTypeLike) -> NDArray:
    return np.broadcast_to(np.eye(rows, cols, dtype=dtype), (batch, rows, cols)).copy()


def qr(spec: S.Qr, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
    """a = q r for each matrix: reduced q [m, k] and r [k, n], or complete q
    [m, m] and r [m, n], by Householder reflections."""

    def compute(mats: list[NDArray]) -> list[NDArray]:
        (a,) = mats
        batch, m, n = a.shape
        k = min(m, n)
        qc = m if spec.complete else k
        q = _eye(batch, m, qc, a.dtype)
        r = np.zeros((batch, qc, n), dtype=a.dtype)
        if k == 0:
            return [q, r]
        for t in range(batch):
            if not _finite(a[t]):
                q[t] = np.nan
                r[t] = np.nan
                continue
            h, tau, info = lapack.geqrf(a[t])
            if info != 0:
                q[t] = np.nan
                r[t] = np.nan
                continue
            r[t] = np.triu(h[:qc])
            if qc > n:
                # Complete q of a tall matrix: the k reflectors applied to all m columns.
                reflectors = np.zeros((m, m), dtype=a.dtype, order="F")
                reflectors[:, :n] = h
            else:
                reflectors = h[:, :qc]
            qt, info = lapack.orgqr(reflectors, tau)
            q[t] = qt if info == 0 else np.nan
        return [q, r]

    _run(spec, dsts, operands, compute)


def svd(spec: S.Svd, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
    """a = u diag(s) vh for each matrix: s [k] descending (real), with reduced u
    [m, k] and vh [k, n], complete ones [m, m] and [n, n], or none."""

    def compute(mats: list[NDArray]) -> list[NDArray]:
        (a,) = mats
        batch, m, n = a.shape
        k = min(m, n)
        real = _REAL[D.of_numpy(a.dtype)].numpy_dtype
        complete = spec.vectors is S.Factors.COMPLETE
        uc, vr = (m, n) if complete else (k, k)
        s = np.zeros((batch, k), dtype=real)
        u = _eye(batch, m, uc, a.dtype)
        vh = _eye(batch, vr, n, a.dtype)
        if k > 0:
            vectors = spec.vectors is not None
            for t in range(batch):
                if not _finite(a[t]):
                    s[t] = u[t] = vh[t] = np.nan
                    continue
                ut, st, vt, info = lapack.gesdd(a[t], vectors, complete)
                if info != 0:
                    s[t] = u[t] = vh[t] = np.nan
                    continue
                s[t] = st
                if vectors:
                    u[t] = ut
                    vh[t] = vt
        return [s] if spec.vectors is None else [u, s, vh]

    _run(spec, dsts, operands, compute)


# --------------------------------------------------------------------------
# eigh and eig
# --------------------------------------------------------------------------


def eigh(spec: S.Eigh, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
    """Eigenvalues w [n] (real, ascending) and, with vectors, v [n, n] (columns)
    of each Hermitian matrix, read from its lower triangle alone."""

    def compute(mats: list[NDArray]) -> list[NDArray]:
        (a,) = mats
        batch, n, _ = a.shape
        w = np.zeros((batch, n), dtype=_REAL[D.of_numpy(a.dtype)].numpy_dtype)
        v = np.zeros(a.shape, dtype=a.dtype)
        if n > 0:
            for t in range(batch):
                if not _finite(np.tril(a[t])):
                    w[t] = v[t] = np.nan
                    continue
                wt, vt, info = lapack.heevd(a[t], spec.vectors)
                if info != 0:
                    w[t] = v[t] = np.nan
                    continue
                w[t] = wt
                if spec.vectors:
                    v[t] = vt
        return [w, v] if spec.vectors else [w]

    _run(spec, dsts, operands, compute)


def eig(spec: S.Eig, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
    """Eigenvalues w [n] (complex) and, with vectors, right eigenvectors v [n, n]
    (columns, unit 2-norm) of each square matrix."""

    def compute(mats: list[NDArray]) -> list[NDArray]:
        (a,) = mats
        batch, n, _ = a.shape
        cplx = _COMPLEX[D.of_numpy(a.dtype)].numpy_dtype
        w = np.zeros((batch, n), dtype=cplx)
        v = np.zeros((batch, n, n), dtype=cplx)
        if n > 0:
            for t in range(batch):
                if not _finite(a[t]):
                    w[t] = v[t] = np.nan
                    continue
                wt, wi, vt, info = lapack.geev(a[t], spec.vectors)
                if wi is not None:
                    vt = _real_eigenvectors(wi, vt) if spec.vectors else vt
                    wt = wt + 1j * wi
                if info != 0:
                    w[t] = v[t] = np.nan
                    continue
                w[t] = wt
                if spec.vectors:
                    v[t] = vt
        return [w, v] if spec.vectors else [w]

    _run(spec, dsts, operands, compute)


def _real_eigenvectors(wi: NDArray, vr: NDArray) -> NDArray:
    """Real ?geev's vectors as complex columns: a pair j, j + 1 with wi[j] > 0 is
    vr[:, j] ± i·vr[:, j + 1]."""
    out = vr.astype(np.result_type(vr.dtype, np.complex64))
    j = 0
    n = wi.shape[0]
    while j < n:
        if wi[j] > 0 and j + 1 < n:
            out[:, j] = vr[:, j] + 1j * vr[:, j + 1]
            out[:, j + 1] = vr[:, j] - 1j * vr[:, j + 1]
            j += 2
        else:
            j += 1
    return out


# --------------------------------------------------------------------------
# solve_triangular
# --------------------------------------------------------------------------


def solve_triangular(spec: S.SolveTriangular, dsts: Sequence[Array],
                     operands: Sequence[Array]) -> None:
    """x with op(a) x = b for each pair of matrices: a's lower (else upper)
    triangle read, op the transpose (not the conjugate transpose) where asked,
    a's diagonal read as ones where ``unit_diagonal``; NaN in the whole x of a
    matrix with a zero on its read diagonal (singular), and no other's."""

    def compute(mats: list[NDArray]) -> list[NDArray]:
        a, b = mats
        x = np.zeros(b.shape, dtype=b.dtype)
        if x.size == 0:
            return [x]
        for t in range(a.shape[0]):
            if not spec.unit_diagonal and not np.diagonal(a[t]).all():
                x[t] = np.nan  # singular: a zero on the read diagonal fails the matrix
                continue
            x[t] = lapack.trsm(a[t], b[t], spec.lower, spec.transpose, spec.unit_diagonal)
        return [x]

    _run(spec, dsts, operands, compute)


# --------------------------------------------------------------------------
# The family
# --------------------------------------------------------------------------

#: The routines, the kernels of this family.
ROUTINES: Final = ("cholesky", "lu", "qr", "svd", "eigh", "eig", "solve_triangular")

_EVERY: Final = "every fitting call at float32, float64, complex64 and complex128, batched"

FAMILY: Final = Family(
    prose={name: f"{_EVERY}; other dtypes answer WRONG_DTYPE." for name in ROUTINES},
    algorithms={
        "cholesky": "LAPACK ?potrf (the routines' instance) on the lower (upper) triangle alone, the other "
                    "triangle zero: L̂L̂ᴴ = A + ΔA, |ΔA| ≤ γ(n + 1)|L̂||L̂ᴴ| (Higham Thm 10.3). "
                    "NaN factor where the read triangle is not finite or potrf finds the "
                    "matrix not positive definite.",
        "lu": "unblocked right-looking elimination in Numba (one thread per matrix): pivot j "
              "is the first row from j whose |re| + |im| (|x| for real) is greater than every "
              "earlier row's, so a NaN never displaces a number and a NaN at row j stays; "
              "multipliers are a[i,j]/pivot (a zero pivot leaves them unscaled, as getrf); "
              "L̂Û = PA + ΔA with |ΔA| ≤ γ(k)|L̂||Û| for real dtypes (Higham Thm 9.3) and "
              "γ(4k + 6)|L̂||Û| for complex ones (a complex product errs by √2·γ(2), a "
              "quotient by √2·γ(4): Higham Lemma 3.5).",
        "qr": "LAPACK ?geqrf (Householder) then ?orgqr/?ungqr (the routines' instance): Q̂R̂ = A + ΔA with "
              "‖Δaⱼ‖₂ ≤ γ̃(mn)‖aⱼ‖₂ for each column and ‖Q̂ᴴQ̂ − I‖ ≤ γ̃(mn), γ̃(k) = c·k·u "
              "for a small constant c (Higham Thm 19.4). NaN where a is not finite.",
        "svd": "LAPACK ?gesdd (divide and conquer, the routines' instance): backward stable, so each "
               "singular value is within p(m, n)·u·‖A‖₂ of the exact one (Weyl) and the "
               "vectors are orthonormal to p(m, n)·u, p a modest polynomial (in practice "
               "below 10·max(m, n)). NaN where a is not finite or gesdd does not converge.",
        "eigh": "LAPACK ?syevd/?heevd (divide and conquer, the routines' instance) on the lower triangle "
                "alone: ascending eigenvalues each within p(n)·u·‖A‖₂ of the exact ones, "
                "vectors orthonormal to p(n)·u. NaN where the lower triangle is not finite "
                "or the solver does not converge.",
        "eig": "LAPACK ?geev (Hessenberg reduction and shifted QR, the routines' instance): the Schur form "
               "of A + ΔA with ‖ΔA‖ ≤ p(n)·u·‖A‖, so an eigenvalue errs by about p(n)·u·‖A‖ "
               "times its condition number. NaN where a is not finite or QR does not "
               "converge.",
        "solve_triangular": "BLAS ?trsm (the routines' instance): each column solves (T + ΔT)x̂ = b with "
                            "|ΔT| ≤ γ(n + 1)|T| (Higham Thm 8.5; one more rounding for the "
                            "diagonal's reciprocal). A zero on the read diagonal (singular T; "
                            "not with unit_diagonal) makes that matrix's x all NaN, and no "
                            "other's; otherwise NaN and infinities flow through the arithmetic.",
    },
    open_choices={
        "LAPACK": "every LAPACK and BLAS call runs on the library's own OpenBLAS instance "
                  "for routines (nxkernel_host.blas: a private copy of scipy-openblas32's, "
                  "always on ROUTINE_THREADS = 2 threads, split by OpenBLAS's static rule), so "
                  "the bits depend on the extents, the OpenBLAS core type and that constant "
                  "alone, and the program's BLAS thread counts are never read or changed.",
        "eig order": "as ?geev leaves them: the diagonal of its Schur form (real input: "
                     "each conjugate pair adjacent, positive imaginary part first); not sorted.",
        "eig vectors": "?geev's: unit 2-norm with the largest component real; a real "
                       "matrix's conjugate pairs get exactly conjugate vectors.",
        "qr factors": "as Householder QR gives them, unnormalised: r's diagonal of any sign "
                      "(complex: any phase), q's columns to match; complete q of a tall matrix "
                      "completes with the same reflectors applied to the identity's columns.",
        "svd vectors": "as ?gesdd returns them, no sign or phase normalisation; complete u and "
                       "vh complete with gesdd's JOBZ = 'A' columns.",
        "eigh vectors": "as ?syevd/?heevd return them, no sign or phase normalisation.",
        "empty matrices": "k = 0: complete q, u and vh are identity matrices; reduced ones "
                          "and s are empty.",
        **fits.ROUTINE_CONVENTIONS,
        "solve_triangular transpose": "transpose solves aᵀx = b, not the conjugate transpose.",
        "lu zero pivot": "a zero pivot leaves its column's multipliers as they are (zeros), "
                         "as LAPACK's getrf; a NaN pivot makes them NaN.",
    },
)

"""The host library's matrix routines: cholesky, lu, qr, svd, eigh, eig, solve_triangular.

Each routine computes on every matrix of a (its last two axes) apart, at
float32, float64, complex64 and complex128 (the dtypes ``full_precision``
names), in that precision; other dtypes answer ``WRONG_DTYPE``. Each matrix
is copied (into its destination where LAPACK works in place there, else into
a scratch array), so its layout never reaches LAPACK; a C-ordered matrix is
handed to LAPACK as its transpose in column-major order, so cholesky, svd
and solve_triangular copy nothing across orders and eigh only its
eigenvectors (qr and eig work on Fortran-ordered copies). A matrix that
fails, whose read elements hold an infinity or a NaN (checked first, for the
routines LAPACK runs), that LAPACK reports it cannot factor (``info != 0``:
not positive definite, no convergence), or, for solve_triangular, with a
zero on its read diagonal, gives NaN in every result of its own, and in no
other matrix's; no routine raises.

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

from nxkernel_core import fits
from nxkernel_core import spec as S
from nxkernel_core.array import Array

from . import lapack
from .family import Family
from .views import read, store, target

__all__ = ["FAMILY", "ROUTINES", "cholesky", "eig", "eigh", "lu", "qr", "solve_triangular", "svd"]

NDArray = npt.NDArray[Any]



# --------------------------------------------------------------------------
# Running calls
# --------------------------------------------------------------------------


def _run(dsts: Sequence[Array], operands: Sequence[Array],
         compute: Callable[[list[NDArray], list[NDArray]], None]) -> None:
    """``compute(mats, outs)`` for a call that fits, the door passed: the
    operands as ``[batch, m, n]`` (read-only), and one C-contiguous
    ``[batch, ...]`` array per destination, of which ``compute`` writes
    every element: the destination's own memory where NumPy finds it
    aligned (the fit check asks for contiguous destinations), else a scratch
    array stored there after."""
    mats = [read(o) for o in operands]
    lead = mats[0].shape[:-2]
    batch = math.prod(lead)
    mats = [m.reshape(batch, *m.shape[-2:]) for m in mats]
    outs, stores = [], []
    for d in dsts:
        view = target(d)
        if view is None or not (view.flags.c_contiguous and view.flags.aligned and view.flags.writeable):
            view = np.empty(d.shape, dtype=d.dtype.numpy_dtype)
            stores.append((d, view))
        outs.append(view.reshape(batch, *d.shape[len(lead):]))
    with np.errstate(all="ignore"):  # NaN is a value, not an error
        compute(mats, outs)
    for d, values in stores:
        store(d, values)


def _finite(m: NDArray, part: Callable[[NDArray], NDArray] | None = None) -> bool:
    """Whether every element of ``m`` (of ``part(m)``, a triangle, where
    given) is finite: a finite sum of all of m's elements answers yes in one
    pass without a temporary; else the elements are looked at."""
    if np.isfinite(m.sum()):
        return True
    return bool(np.isfinite(m if part is None else part(m)).all())


# --------------------------------------------------------------------------
# cholesky
# --------------------------------------------------------------------------


def cholesky(spec: S.Cholesky, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
    """The factor of each Hermitian positive-definite matrix, lower (A = L Lᴴ)
    or upper (A = Uᴴ U), read from that triangle alone; the other is zero."""
    lower = not spec.upper

    def compute(mats: list[NDArray], outs: list[NDArray]) -> None:
        (a,), (out,) = mats, outs
        if a.shape[-1] == 0:
            return
        for t in range(a.shape[0]):
            c = out[t]
            np.copyto(c, a[t])  # potrf_rows factors in place
            if not _finite(c, np.tril if lower else np.triu) or lapack.potrf_rows(c, lower) != 0:
                c[...] = np.nan

    _run(dsts, operands, compute)


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

    def compute(mats: list[NDArray], outs: list[NDArray]) -> None:
        (a,), (work, piv, perm) = mats, outs
        np.copyto(work, a)  # factored in place
        if work.size or perm.size:
            _lu_batch(work, piv, perm)

    _run(dsts, operands, compute)


# --------------------------------------------------------------------------
# qr and svd
# --------------------------------------------------------------------------


def qr(spec: S.Qr, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
    """a = q r for each matrix: reduced q [m, k] and r [k, n], or complete q
    [m, m] and r [m, n], by Householder reflections."""

    def compute(mats: list[NDArray], outs: list[NDArray]) -> None:
        (a,), (q, r) = mats, outs
        batch, m, n = a.shape
        qc = q.shape[-1]
        if min(m, n) == 0:
            q[...] = np.eye(m, qc, dtype=a.dtype)  # r is empty
            return
        for t in range(batch):
            if not _finite(a[t]):
                q[t] = r[t] = np.nan
                continue
            h, tau, info = lapack.geqrf(a[t])
            if info != 0:
                q[t] = r[t] = np.nan
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

    _run(dsts, operands, compute)


def svd(spec: S.Svd, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
    """a = u diag(s) vh for each matrix: s [k] descending (real), with reduced u
    [m, k] and vh [k, n], complete ones [m, m] and [n, n], or none."""

    def compute(mats: list[NDArray], outs: list[NDArray]) -> None:
        (a,) = mats
        u, s, vh = (None, outs[0], None) if spec.vectors is None else outs
        batch, m, n = a.shape
        if min(m, n) == 0:
            if u is not None and vh is not None:  # complete: identities; reduced: empty
                u[...] = np.eye(m, u.shape[-1], dtype=a.dtype)
                vh[...] = np.eye(vh.shape[-2], n, dtype=a.dtype)
            return
        x = np.empty((m, n), dtype=a.dtype)
        for t in range(batch):
            np.copyto(x, a[t])  # gesdd overwrites it
            ut = None if u is None else u[t]
            vt = None if vh is None else vh[t]
            if not _finite(x) or lapack.gesdd_rows(x, s[t], ut, vt) != 0:
                s[t] = np.nan
                if ut is not None and vt is not None:
                    ut[...] = vt[...] = np.nan

    _run(dsts, operands, compute)


# --------------------------------------------------------------------------
# eigh and eig
# --------------------------------------------------------------------------


def eigh(spec: S.Eigh, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
    """Eigenvalues w [n] (real, ascending) and, with vectors, v [n, n] (columns)
    of each Hermitian matrix, read from its lower triangle alone."""

    def compute(mats: list[NDArray], outs: list[NDArray]) -> None:
        (a,) = mats
        w, v = outs if spec.vectors else (outs[0], None)
        batch, n, _ = a.shape
        if n == 0:
            return
        x = np.empty((n, n), dtype=a.dtype)
        for t in range(batch):
            np.copyto(x, a[t])  # the solver overwrites it
            if not _finite(x, np.tril) or lapack.heevd_rows(x, w[t], spec.vectors) != 0:
                w[t] = np.nan
                if v is not None:
                    v[t] = np.nan
            elif v is not None:
                # heevd_rows leaves the eigenvectors as x's conjugated rows.
                if x.dtype.kind == "c":
                    np.conjugate(x.T, out=v[t])
                else:
                    np.copyto(v[t], x.T)

    _run(dsts, operands, compute)


def eig(spec: S.Eig, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
    """Eigenvalues w [n] (complex) and, with vectors, right eigenvectors v [n, n]
    (columns, unit 2-norm) of each square matrix."""

    def compute(mats: list[NDArray], outs: list[NDArray]) -> None:
        (a,) = mats
        w, v = outs if spec.vectors else (outs[0], None)
        if a.shape[-1] == 0:
            return
        for t in range(a.shape[0]):
            if not _finite(a[t]):
                w[t] = np.nan
                if v is not None:
                    v[t] = np.nan
                continue
            wt, wi, vt, info = lapack.geev(a[t], spec.vectors)
            if wi is not None:
                vt = _real_eigenvectors(wi, vt) if spec.vectors else vt
                wt = wt + 1j * wi
            w[t] = wt if info == 0 else np.nan
            if v is not None:
                v[t] = vt if info == 0 else np.nan

    _run(dsts, operands, compute)


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

    def compute(mats: list[NDArray], outs: list[NDArray]) -> None:
        (a, b), (x,) = mats, outs
        for t in range(a.shape[0]):
            if not spec.unit_diagonal and not np.diagonal(a[t]).all():
                x[t] = np.nan  # singular: a zero on the read diagonal fails the matrix
                continue
            np.copyto(x[t], b[t])  # solved in place
            lapack.trsm_rows(a[t], x[t], spec.lower, spec.transpose, spec.unit_diagonal)

    _run(dsts, operands, compute)


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
        "svd vectors": "as ?gesdd returns them for aᵀ (a C-ordered matrix handed to LAPACK as its "
                       "transpose: its right factor is u, its left one vh), no sign or phase "
                       "normalisation; complete u and vh complete with gesdd's JOBZ = 'A' columns.",
        "eigh vectors": "as ?syevd/?heevd return them for aᵀ (conj(A), read from its upper "
                        "triangle: the conjugates of its vectors), no sign or phase normalisation.",
        "empty matrices": "k = 0: complete q, u and vh are identity matrices; reduced ones "
                          "and s are empty.",
        **fits.ROUTINE_CONVENTIONS,
        "solve_triangular transpose": "transpose solves aᵀx = b, not the conjugate transpose.",
        "lu zero pivot": "a zero pivot leaves its column's multipliers as they are (zeros), "
                         "as LAPACK's getrf; a NaN pivot makes them NaN.",
    },
)

"""The matrix routines: cholesky, lu, qr, solve_triangular, eigh and svd, batched
(``kernels/matrices.cu``); eig is not computed (the library declines it).

Rules:

* What it computes: every fitting call of those six routines at float32,
  float64, complex64 and complex128 whose matrices have no extent above the
  dtype's :data:`MAX_EXTENTS` (64, and 56 for complex128; for
  solve_triangular, a's; b may have any number of columns), in the matrix's
  own dtype (a complex one's arithmetic in its parts' dtype; eigh's
  eigenvalues and svd's singular values in the parts' dtype), one block of
  :data:`THREADS` threads a matrix with the matrix and its work arrays in
  shared memory. Operands of any layout (transposed, strided, broadcast
  batch) are read in place. One source, every routine written once over the
  element type (real and complex alike).
* Declined (before any array is touched; :func:`declines` is the rule): a
  matrix with an extent above its dtype's :data:`MAX_EXTENTS`, whose work arrays would not fit one
  block's shared memory on sm_80 (163 KiB: a complete svd takes about 100 KiB
  at 64 for float64 and complex64, 150 KiB at 56 for complex128). Whether a
  call is declined depends on its kernel, dtype and matrix extents only.
* Order: every sum is a chain in increasing index order in one thread, every
  choice (pivot, ordering, completion column) a fixed rule, the Jacobi sweeps a
  fixed round-robin order, and only + − × ÷ and sqrt are used (no fma), so the
  bits are the same on every launch, and on cuda and cuda-emu. lu's bits are the
  host library's (complex: its pivot rule |re| + |im| and Numba's complex
  arithmetic, CPython's quotient).
* A matrix that fails gives NaN in every result of its own and in no other
  matrix's; nothing raises: cholesky where its read triangle is not finite or a
  pivot is not > 0; qr, svd and eigh where a read element is not finite, a
  result is not finite, or Jacobi has not converged in 60 sweeps;
  solve_triangular where its read diagonal has a zero (singular). Otherwise lu
  and solve_triangular compute what the arithmetic gives (NaN and infinities
  flow through), as the host library's do.
* Bounds: :data:`ALGORITHMS`; the choices the contract leaves open:
  :data:`OPEN_CHOICES`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any, Final

import numpy as np

from nxkernel_core import dtype as D
from nxkernel_core import fits
from nxkernel_core import spec as S
from nxkernel_core.array import Array
from nxkernel_core.dtype import Dtype
from nxkernel_core.kernel import Call

from . import loops
from .build import Source, file_source
from .launch import Arg, CudaRig, Pointer

__all__ = ["ALGORITHMS", "KERNELS", "MAX_EXTENT", "MAX_EXTENTS", "OPEN_CHOICES", "PROSE", "ROUTINES",
           "THREADS", "cholesky", "declines", "eigh", "lu", "qr", "solve_triangular", "source", "svd"]

#: The routines nx.cuda computes (eig is declined).
ROUTINES: Final = ("cholesky", "lu", "qr", "svd", "eigh", "solve_triangular")

#: The element type each dtype's kernels are instantiated for (matrices.cu).
_CTYPES: Final = {D.float32: "float", D.float64: "double", D.complex64: "nxk_mx_c64",
                  D.complex128: "nxk_mx_c128"}

#: The kernels of ``kernels/matrices.cu``, one per routine and dtype.
KERNELS: Final = tuple(f"nxk_mx_{r}<{t}>" for r in ("cholesky", "lu", "qr", "trsm", "eigh", "svd")
                       for t in _CTYPES.values())

#: Threads of a block (one block a matrix).
THREADS: Final = 64
#: The largest matrix extent computed at each dtype: a complete svd's work
#: arrays (about 3n² elements) must fit the 163 KiB of shared memory sm_80
#: offers a block: about 100 KiB at 64 for float64 and complex64, 150 KiB at 56
#: for complex128 (64 would take 195 KiB).
MAX_EXTENTS: Final = {D.float32: 64, D.float64: 64, D.complex64: 64, D.complex128: 56}
#: The largest extent computed at any dtype.
MAX_EXTENT: Final = max(MAX_EXTENTS.values())



@functools.cache
def source() -> Source:
    """``kernels/matrices.cu`` with its 24 instantiations."""
    return file_source("matrices.cu", KERNELS)


# --------------------------------------------------------------------------
# Fitting and declining
# --------------------------------------------------------------------------


def _reason(spec: Any, operands: Sequence[Array]) -> str | None:
    """Why nx.cuda declines a fitting call, or None: by kernel, dtype and the
    matrices' extents alone."""
    dt = operands[0].dtype
    limit = MAX_EXTENTS[dt]
    a = operands[0].shape
    extent = a[-1] if spec.kernel == "solve_triangular" else max(a[-2], a[-1])
    if extent > limit:
        return (f"nx.cuda computes {spec.kernel} of {dt.name} matrices with extents up to {limit} only "
                f"(here {extent}): a matrix and its work arrays must fit one block's shared memory")
    return None


def declines(call: Call) -> str | None:
    """Why nx.cuda declines ``call`` of a matrix routine (one that fits), or
    None where it computes it."""
    return _reason(call.spec, call.operands)


# --------------------------------------------------------------------------
# Launching
# --------------------------------------------------------------------------


def _descriptor(dev: CudaRig, lead: Sequence[int], arrays: Sequence[Array]) -> Pointer:
    """The batch walk over ``arrays`` (their offsets and leading strides), then
    each one's row and column strides (a vector's row stride is 0)."""
    nl = len(lead)
    walk = loops.coalesce(tuple(lead), [(x.layout.offset, x.layout.strides[:nl]) for x in arrays])
    rc: list[int] = []
    for x in arrays:
        st = x.layout.strides
        rc += [st[nl], st[nl + 1]] if x.rank == nl + 2 else [0, st[nl]]
    return loops.upload(dev, [*loops.walk_words(walk), *rc])


def _launch(dev: CudaRig, routine: str, dt: Dtype, batch: int, args: Sequence[Arg], shared: int) -> None:
    """Queue ``nxk_mx_<routine>`` for ``batch`` matrices, a block each."""
    fn = dev.load(source()).function(f"nxk_mx_{routine}<{_CTYPES[dt]}>")
    fn((min(batch, loops.MAX_BLOCKS),), (THREADS,), list(args), shared_bytes=shared)


def _run(dsts: Sequence[Array], launch: Callable[[CudaRig], None]) -> None:
    """Queue ``launch`` on the call's device where any destination has an element."""
    if any(d.numel for d in dsts):
        launch(loops.device_of(dsts))


def _lead(a: Array) -> tuple[tuple[int, ...], int]:
    """a's batch shape and its number of matrices."""
    lead = a.shape[:-2]
    return lead, math.prod(lead)


def _size(dt: Dtype) -> int:
    """Bytes of an element of ``dt``."""
    return dt.bits // 8


def _part(dt: Dtype) -> int:
    """Bytes of an element's real part (of the element, for a real dtype)."""
    return dt.bits // 16 if dt.is_complex else dt.bits // 8


# --------------------------------------------------------------------------
# The routines
# --------------------------------------------------------------------------


def cholesky(spec: S.Cholesky, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
    """The factor of each Hermitian positive-definite matrix, lower (A = L Lᴴ)
    or upper (A = Uᴴ U), read from that triangle alone; the other is zero."""

    def go(dev: CudaRig) -> None:
        (a,), (f,) = operands, dsts
        lead, nb = _lead(a)
        n = a.shape[-1]
        desc = _descriptor(dev, lead, [a, f])
        _launch(dev, "cholesky", a.dtype, nb, [desc, np.int64(nb), np.int32(n), np.int32(spec.upper),
                                               loops.base(dev, a), loops.base(dev, f)],
                n * n * _size(a.dtype))

    _run(dsts, go)


def lu(spec: S.Lu, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
    """Partial-pivoting LU of each matrix: lu (unit-lower L below the diagonal,
    U on and above), pivots [k] (row j was swapped with row pivots[j]) and perm
    [m] (row i of L·U is row perm[i] of a); pivot j is the first row from j of
    greatest magnitude (|re| + |im| for complex)."""

    def go(dev: CudaRig) -> None:
        (a,) = operands
        lead, nb = _lead(a)
        m, n = a.shape[-2:]
        desc = _descriptor(dev, lead, [a, *dsts])
        _launch(dev, "lu", a.dtype, nb, [desc, np.int64(nb), np.int32(m), np.int32(n),
                                         *(loops.base(dev, x) for x in (a, *dsts))],
                8 * (m + min(m, n)) + m * n * _size(a.dtype))

    _run(dsts, go)


def qr(spec: S.Qr, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
    """a = q r for each matrix by Householder reflections: reduced q [m, k] and
    r [k, n], or complete q [m, m] and r [m, n]."""

    def go(dev: CudaRig) -> None:
        (a,) = operands
        lead, nb = _lead(a)
        m, n = a.shape[-2:]
        k = min(m, n)
        qc = m if spec.complete else k
        desc = _descriptor(dev, lead, [a, *dsts])
        _launch(dev, "qr", a.dtype, nb, [desc, np.int64(nb), np.int32(m), np.int32(n), np.int32(qc),
                                         *(loops.base(dev, x) for x in (a, *dsts))],
                (m * n + m * qc + k + 2) * _size(a.dtype))

    _run(dsts, go)


def solve_triangular(spec: S.SolveTriangular, dsts: Sequence[Array],
                     operands: Sequence[Array]) -> None:
    """x with op(a) x = b for each pair of matrices, by substitution: a's lower
    (else upper) triangle read, op the transpose where asked, a's diagonal read
    as ones where ``unit_diagonal``; the transpose, never the conjugate
    transpose; NaN in the whole x of a matrix with a zero on its read
    diagonal. x may be b itself."""

    def go(dev: CudaRig) -> None:
        (a, b), (x,) = operands, dsts
        lead, nb = _lead(a)
        n, kc = b.shape[-2:]
        desc = _descriptor(dev, lead, [a, b, x])
        _launch(dev, "trsm", a.dtype, nb, [
            desc, np.int64(nb), np.int32(n), np.int32(kc), np.int32(spec.lower),
            np.int32(spec.transpose), np.int32(spec.unit_diagonal),
            loops.base(dev, a), loops.base(dev, b), loops.base(dev, x)], n * n * _size(a.dtype))

    _run(dsts, go)


def _pairs(n: int) -> int:
    """Pairs of a round-robin round on n indices (n rounded up to even)."""
    return (n + n % 2) // 2


def eigh(spec: S.Eigh, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
    """Eigenvalues w [n] (real, ascending) and, with vectors, v [n, n]
    (columns) of each Hermitian matrix, read from its lower triangle alone, by
    cyclic Jacobi."""

    def go(dev: CudaRig) -> None:
        (a,) = operands
        lead, nb = _lead(a)
        n = a.shape[-1]
        p = _pairs(n)
        arrays = [a, *dsts] if spec.vectors else [a, dsts[0], dsts[0]]
        desc = _descriptor(dev, lead, arrays)
        shared = (n * n * (1 + spec.vectors) + p) * _size(a.dtype) + p * _part(a.dtype) + 4 * (p + n)
        _launch(dev, "eigh", a.dtype, nb, [desc, np.int64(nb), np.int32(n), np.int32(spec.vectors),
                                           *(loops.base(dev, x) for x in arrays)], shared)

    _run(dsts, go)


def svd(spec: S.Svd, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
    """a = u diag(s) vh for each matrix by one-sided Jacobi: s [k] descending (real),
    with reduced u [m, k] and vh [k, n], complete ones [m, m] and [n, n], or
    none."""

    def go(dev: CudaRig) -> None:
        (a,) = operands
        lead, nb = _lead(a)
        m, n = a.shape[-2:]
        big, small = max(m, n), min(m, n)
        mode = 0 if spec.vectors is None else 2 if spec.vectors is S.Factors.COMPLETE else 1
        uc = big if mode == 2 else small
        p = _pairs(small)
        arrays = [a, *dsts] if mode else [a, dsts[0], dsts[0], dsts[0]]
        desc = _descriptor(dev, lead, arrays)
        elements = big * small + (big * uc + small * small if mode else 0) + big + p
        parts = small + big + 1 + p
        shared = elements * _size(a.dtype) + parts * _part(a.dtype) + 4 * (small + p + 1)
        _launch(dev, "svd", a.dtype, nb, [desc, np.int64(nb), np.int32(m), np.int32(n), np.int32(mode),
                                          *(loops.base(dev, x) for x in arrays)], shared)

    _run(dsts, go)


# --------------------------------------------------------------------------
# The statement
# --------------------------------------------------------------------------

_LIMITS: Final = " and ".join(
    f"{limit} ({', '.join(dt.name for dt, x in MAX_EXTENTS.items() if x == limit)})"
    for limit in sorted(set(MAX_EXTENTS.values()), reverse=True))
_COMPUTES: Final = (f"float32, float64, complex64 and complex128 (a complex matrix's arithmetic in its "
                    f"parts' dtype), batched, one block a matrix in shared memory, matrices of extents up "
                    f"to {_LIMITS}")
_DECLINES: Final = ("declines any matrix with an extent above its dtype's limit, whose work arrays would "
                    "not fit one block's shared memory")

#: What each routine computes and declines, in words.
PROSE: Final = {
    "cholesky": f"{_COMPUTES}, Hermitian for complex; {_DECLINES}.",
    "lu": f"{_COMPUTES}, the host library's bits; {_DECLINES}.",
    "qr": f"{_COMPUTES}, reduced or complete; {_DECLINES}.",
    "svd": f"{_COMPUTES}, with reduced, complete or no vectors, s real; {_DECLINES}.",
    "eigh": f"{_COMPUTES}, Hermitian for complex, with or without vectors, w real; {_DECLINES}.",
    "solve_triangular": (f"{_COMPUTES} (a's; b of any number of columns), every option; declines an a "
                         f"of extent above its dtype's limit."),
}


#: How each routine computes, and its error bound. A complex product is
#: within √2·γ(2) of the exact one (Higham Lemma 3.5), so each part of a
#: complex chain of products is a real chain one rounding deeper, of modulus
#: at most √2 times the real terms' sum: a real bound γ(k)|X||Y| of a chain of
#: products holds for complex ones as √2·γ(k + 1)|X||Y|.
ALGORITHMS: Final = {
    "cholesky": "right-looking, unblocked, in shared memory, from the read triangle alone (the other "
                "triangle zero): l_jj = sqrt(re a_jj), l_ij = a_ij / l_jj (each part over the real "
                "l_jj), then a_ic − l_ij·conj(l_cj) for i ≥ c > j, so each entry is a chain over j "
                "increasing: L̂L̂ᴴ = A + ΔA, |ΔA| ≤ γ(n + 1)|L̂||L̂ᴴ| (Higham Thm 10.3) for real "
                "dtypes and √2·γ(n + 2)|L̂||L̂ᴴ| for complex ones (each part of a complex chain is a "
                "real chain one rounding deeper, its terms' moduli summing to at most √2·|L̂||L̂ᴴ|). NaN "
                "factor where the read triangle is not finite or a pivot is not > 0.",
    "lu": "unblocked right-looking elimination, one block a matrix, the host library's arithmetic "
          "and bits: pivot j is the first row from j whose |a_ij| (|re| + |im| for complex) is "
          "greater than every earlier row's (a NaN never displaces a number); multipliers a_ij / "
          "pivot (complex: CPython's quotient, as Numba's, in the parts' dtype; a zero pivot leaves "
          "them); a_ic − l_ij·a_jc rounded twice (complex: the textbook product, then part by part): "
          "L̂Û = PA + ΔA, |ΔA| ≤ γ(k)|L̂||Û| for real dtypes (Higham Thm 9.3) and, as the host "
          "library states for the same bits, γ(4k + 6)|L̂||Û| for complex ones.",
    "qr": "Householder QR as LAPACK's ?geqr2 and ?org2r/?ung2r (unblocked), sums chained in index "
          "order, v = x / (α − β) a complex quotient (CPython's) for complex: Q̂R̂ = A + ΔA with "
          "‖Δaⱼ‖₂ ≤ γ̃(mn)‖aⱼ‖₂ for each column and ‖Q̂ᴴQ̂ − I‖_F ≤ γ̃(mn), γ̃(k) = c·k·u for a small "
          "constant c (Higham Thm 19.4, Lemma 19.3; the tests check γ̃(k) = γ(4k) for real dtypes "
          "and, a complex operation erring by at most 3u where a real one errs by u, γ(12k) for "
          "complex ones). NaN where a or a result is not finite.",
    "svd": "one-sided (Hestenes) Jacobi on a, or aᴴ where m < n, columns paired in a fixed "
           "round-robin order, a pair rotated while |aₚᴴa_q| > M·u·‖aₚ‖‖a_q‖ (M the longer extent) "
           "by the rotation of its 2 × 2 Gram matrix (complex: the real rotation of |aₚᴴa_q| with "
           "its sine times aₚᴴa_q / |aₚᴴa_q|), at most 60 sweeps: backward stable, so each singular "
           "value is within p·u·‖A‖₂ of the exact one (Weyl), with U diag(s) Vᴴ − A within "
           "p·u·‖A‖₂ and UᴴU − I, VVᴴ − I within p·u elementwise, p = 4·max(m, n)·min(m, n) for "
           "real dtypes and 12·max(m, n)·min(m, n) for complex ones, whose products err by "
           "√2·γ(2) < 3u (the rotations' backward error, a modest polynomial; the tests check this "
           "p); σ = ‖column‖₂, chained. NaN where a or a result is not finite or Jacobi has not "
           "converged.",
    "eigh": "cyclic two-sided Jacobi on the Hermitian matrix of the lower triangle (the diagonal's "
            "real parts), pairs in a fixed round-robin order, a pair rotated while |a_pq| > "
            "n·u·sqrt|a_pp|·sqrt|a_qq| (complex: the real rotation of |a_pq| with its sine times "
            "a_pq / |a_pq|, |a_pq| = hi·sqrt(1 + (lo/hi)²) of its parts' magnitudes so that no "
            "square overflows, the rotated diagonal's imaginary parts set to 0), at most 60 sweeps: "
            "backward stable, so each eigenvalue is within p·u·‖A‖₂ of an exact one (Weyl), AV − VΛ "
            "within p·u·‖A‖₂ and VᴴV − I within p·u elementwise, p = 4n² for real dtypes and 12n² "
            "for complex ones, whose products err by √2·γ(2) < 3u (the rotations' backward error, a "
            "modest polynomial; the tests check these). NaN where the lower triangle or a result "
            "is not finite or Jacobi has not converged.",
    "solve_triangular": "substitution, one thread a column of b, x_i = (b_i − Σ_j t_ij·x_j) / t_ii "
                        "with the sum a chain in the order substitution finds the x_j: (T + ΔT)x̂ = b "
                        "with |ΔT| ≤ γ(n)|T| (Higham Thm 8.5) for real dtypes and √2·γ(n + 8)|T| for "
                        "complex ones: the chain √2·γ(n + 1), and the quotient, CPython's (Smith's) "
                        "in the parts' dtype, within γ(7) of the exact one (its denominator errs "
                        "relatively by γ(3), with no cancellation; its numerator by γ(3) in modulus, "
                        "the ratio being at most 1; each part's division by u). A unit diagonal is "
                        "not divided by. A zero on the read diagonal (singular T; not with "
                        "unit_diagonal) makes that matrix's x all NaN, and no other's; otherwise NaN "
                        "and infinities flow through the arithmetic.",
    "eig": "none: nx.cuda declines eig.",
}

#: The choices the contract leaves open, as nx.cuda makes them.
OPEN_CHOICES: Final = {
    "eig order": "none: nx.cuda declines eig.",
    "eig vectors": "none: nx.cuda declines eig.",
    "qr factors": "as Householder QR (LAPACK's ?geqr2 and ?larfg rule) gives them: r_jj = "
                  "−sign(re α)·‖x‖, real, for the column x being reflected, α its leading entry "
                  "(sign(±0) = +), q's columns to match; a column with nothing to reflect below the "
                  "diagonal and a real α keeps its entry (no reflector); complete q of a tall matrix "
                  "completes with the same reflectors applied to the identity's columns.",
    "svd vectors": "one-sided Jacobi's, no sign or phase normalisation: u's column r is the rotated "
                   "column of s[r] over s[r] (vh's row r the conjugated accumulated rotations' "
                   "column; the roles swap where m < n, Jacobi then running on aᴴ); equal singular "
                   "values keep their columns' order; the columns of zero singular values and those "
                   "complete factors add are, in turn, the first standard basis vector of greatest "
                   "component (1 − Σ|u_ij|²) outside the columns so far, orthogonalised against them "
                   "twice (Gram-Schmidt) and normalised.",
    "eigh vectors": "the accumulated Jacobi rotations' columns, no sign or phase normalisation; "
                    "equal eigenvalues keep the order of their diagonal positions.",
    "empty matrices": "k = 0: complete q, u and vh are identity matrices; reduced ones and s are "
                      "empty.",
    **fits.ROUTINE_CONVENTIONS,
    "solve_triangular transpose": "transpose solves aᵀx = b, not the conjugate transpose.",
    "lu zero pivot": "a zero pivot leaves its column's multipliers as they are, as LAPACK's getrf; "
                     "a NaN pivot makes them NaN.",
    "hermitian diagonal": "cholesky and eigh of a complex matrix use the real parts of its "
                          "diagonal alone (as LAPACK's ?potrf and ?heevd), though a non-finite "
                          "imaginary part there fails the matrix as any non-finite read element "
                          "does; cholesky's factor and eigh's work matrix have a real diagonal.",
}

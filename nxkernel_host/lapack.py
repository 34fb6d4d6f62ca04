"""LAPACK routines of the host library's own OpenBLAS instance for routines
(``blas.library(ROUTINE_THREADS)``), through its LAPACKE and CBLAS
interfaces: the few the matrix routines call, at float32, float64, complex64
and complex128.

That instance always runs ``ROUTINE_THREADS`` threads, so the bits depend on
the extents, the OpenBLAS core type and that constant alone, and the
program's own BLAS (NumPy's, SciPy's) is never touched.
``geqrf``, ``orgqr`` and ``geev`` work on fresh Fortran-ordered (column-major)
copies they return; the ``*_rows`` functions work in place on C-ordered
(row-major) matrices, read as their transposes in column-major order, so no
matrix is copied across orders. Each reports LAPACK's ``info`` (0: done;
> 0: the routine's own failure, such as a matrix that is not positive
definite or an iteration that did not converge). The callers check that a
matrix is finite first: LAPACKE refuses NaN input with a negative info.
"""

from __future__ import annotations

import ctypes
import functools
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from .blas import ROUTINE_THREADS, library

__all__ = ["geev", "geqrf", "gesdd_rows", "heevd_rows", "orgqr", "potrf_rows", "trsm_rows"]

NDArray = npt.NDArray[Any]

_COL_MAJOR_ARG: Final = ctypes.c_int(102)
#: CBLAS's enumerations for trsm.
_CBLAS_ROW_MAJOR: Final = 101
_LEFT: Final = 141
_UPPER, _LOWER = 121, 122
_NO_TRANS, _TRANS = 111, 112
_NON_UNIT, _UNIT = 131, 132

#: The LAPACK letter of each NumPy dtype.
_LETTER: Final = {np.dtype(np.float32): "s", np.dtype(np.float64): "d",
                  np.dtype(np.complex64): "c", np.dtype(np.complex128): "z"}


class _Complex64(ctypes.Structure):
    """LAPACKE's ``lapack_complex_float`` passed by value (C's ``float _Complex``:
    two floats, the same ABI)."""

    _fields_ = [("re", ctypes.c_float), ("im", ctypes.c_float)]


class _Complex128(ctypes.Structure):
    """LAPACKE's ``lapack_complex_double`` passed by value."""

    _fields_ = [("re", ctypes.c_double), ("im", ctypes.c_double)]


#: Zero as a scalar argument of each dtype, passed by value.
_ZERO: Final[dict[np.dtype[Any], Any]] = {
    np.dtype(np.float32): ctypes.c_float(0), np.dtype(np.float64): ctypes.c_double(0),
    np.dtype(np.complex64): _Complex64(0, 0), np.dtype(np.complex128): _Complex128(0, 0)}


@functools.cache
def _function(name: str) -> Any:
    """The routines' instance's function ``scipy_{name}``, returning an int."""
    fn = getattr(library(ROUTINE_THREADS), f"scipy_{name}")
    fn.restype = ctypes.c_int
    return fn


def _call(name: str, dtype: np.dtype[Any], *args: Any) -> int:
    """LAPACKE's ``{letter}{name}`` for ``dtype`` on column-major matrices,
    with ``args`` (ints, chars as one-byte strings, arrays as pointers to
    their data, ctypes scalars as they are); its info."""
    converted: list[Any] = [_COL_MAJOR_ARG]
    for arg in args:
        if isinstance(arg, np.ndarray):
            converted.append(ctypes.c_void_p(arg.ctypes.data))
        elif isinstance(arg, bytes):
            converted.append(ctypes.c_char(arg))
        elif isinstance(arg, int):
            converted.append(ctypes.c_int(arg))
        else:  # a ctypes scalar
            converted.append(arg)
    return int(_function(f"LAPACKE_{_LETTER[dtype]}{name}")(*converted))


def _fortran(a: NDArray) -> NDArray:
    """A fresh Fortran-ordered copy: LAPACK overwrites its input."""
    return np.array(a, order="F", copy=True)


def _rows(x: NDArray) -> None:
    """Check that ``x`` is C-contiguous, the layout the ``*_rows`` functions
    hand LAPACK as its transpose."""
    if not (x.flags.c_contiguous and x.flags.aligned and x.flags.writeable):
        raise ValueError(f"nxkernel_host.lapack: a writable, aligned, C-contiguous matrix, not "
                         f"{x.dtype} {list(x.shape)} of strides {x.strides}")


def potrf_rows(c: NDArray, lower: bool) -> int:
    """The Cholesky factor of the square C-ordered ``c``, in place: read from
    its lower (else upper) triangle and written there, the other triangle
    zeroed where info is 0; LAPACK's info."""
    _rows(c)
    n = c.shape[0]
    # c's memory is cᵀ in column-major order, whose upper triangle is c's
    # lower one transposed: ?potrf on it with the other uplo factors conj(A)
    # (A itself for a real dtype) as UᴴU, U = Lᵀ (else as LLᴴ, L = Uᵀ), and
    # Lᵀ in column-major order is L in row-major order.
    info = _call("potrf_work", c.dtype, b"U" if lower else b"L", n, c, max(n, 1))
    if info == 0 and n > 1:
        # The other triangle of c, strict, is cᵀ's other strict triangle in
        # column-major order: ?laset zeroes it (and the diagonal) of the
        # (n - 1)-square block beside cᵀ's diagonal.
        block = c.reshape(-1)[1:] if lower else c.reshape(-1)[n:]
        zero = _ZERO[c.dtype]
        _call("laset_work", c.dtype, b"L" if lower else b"U", n - 1, n - 1, zero, zero, block, n)
    return info


def geqrf(a: NDArray) -> tuple[NDArray, NDArray, int]:
    """Householder QR of ``a [m, n]``: r on and above the diagonal, the
    reflectors below, and their scalars tau [min(m, n)]; and info."""
    h = _fortran(a)
    m, n = h.shape
    tau = np.zeros(min(m, n), dtype=h.dtype)
    info = _call("geqrf", h.dtype, m, n, h, max(m, 1), tau)
    return h, tau, info


def orgqr(reflectors: NDArray, tau: NDArray) -> tuple[NDArray, int]:
    """q [m, c] from the first len(tau) reflectors of ``reflectors [m, c]``
    (?orgqr, or ?ungqr for complex dtypes); and info."""
    q = _fortran(reflectors)
    m, c = q.shape
    name = "ungqr" if q.dtype.kind == "c" else "orgqr"
    info = _call(name, q.dtype, m, c, tau.shape[0], q, max(m, 1), tau)
    return q, info


def heevd_rows(x: NDArray, w: NDArray, vectors: bool) -> int:
    """The eigenvalues (ascending) of the Hermitian matrix read from the
    lower triangle of the square C-ordered ``x`` into ``w`` (contiguous, of
    the real dtype) by ?syevd (?heevd for complex dtypes), and with
    ``vectors`` its eigenvectors into ``x``: v = conj(x)ᵀ (x's conjugated
    rows are the columns of v); LAPACK's info."""
    _rows(x)
    n = x.shape[0]
    name = "heevd" if x.dtype.kind == "c" else "syevd"
    # x's memory is xᵀ in column-major order, whose upper triangle is x's
    # lower one transposed: the Hermitian matrix conj(A) (A for a real
    # dtype), of A's eigenvalues and eigenvectors conj(V); those columns in
    # column-major order are conj(V)ᵀ in row-major order.
    return _call(name, x.dtype, b"V" if vectors else b"N", b"U", n, x, max(n, 1), w)


def gesdd_rows(x: NDArray, s: NDArray, u: NDArray | None, vh: NDArray | None) -> int:
    """The SVD x = u diag(s) vh of the C-ordered ``x [m, n]`` by ?gesdd
    (divide and conquer), x overwritten: s [k] (descending, real, contiguous)
    and, where given, C-contiguous u and vh: [m, k] and [k, n], or [m, m] and
    [n, n] for the complete factors; LAPACK's info."""
    _rows(x)
    m, n = x.shape
    if u is None or vh is None:
        dummy = np.empty(1, dtype=x.dtype)
        return _call("gesdd", x.dtype, b"N", n, m, x, max(n, 1), s, dummy, 1, dummy, 1)
    _rows(u)
    _rows(vh)
    # x's memory is xᵀ = conj(V) diag(s) Uᵀ in column-major order: ?gesdd
    # writes its left factor conj(V) there in column-major order, which is
    # Vᴴ = vh in row-major order, and its right factor Uᵀ as u in row-major
    # order.
    job = b"A" if max(u.shape[1], vh.shape[0]) > min(m, n) else b"S"
    return _call("gesdd", x.dtype, job, n, m, x, max(n, 1), s, vh, max(n, 1), u, max(u.shape[1], 1))


def geev(a: NDArray, vectors: bool) -> tuple[NDArray, NDArray | None, NDArray, int]:
    """The eigenvalues of the square ``a`` and, with ``vectors``, its right
    eigenvectors (columns): real dtypes give (wr, wi, vr, info), complex ones
    (w, None, vr, info)."""
    x = _fortran(a)
    n = x.shape[0]
    job = b"V" if vectors else b"N"
    vl = np.zeros((1, 1), dtype=x.dtype, order="F")
    vr = np.zeros((n, n) if vectors else (1, 1), dtype=x.dtype, order="F")
    ldvr = max(n, 1) if vectors else 1
    if x.dtype.kind == "c":
        w = np.zeros(n, dtype=x.dtype)
        info = _call("geev", x.dtype, b"N", job, n, x, max(n, 1), w, vl, 1, vr, ldvr)
        return w, None, vr, info
    wr = np.zeros(n, dtype=x.dtype)
    wi = np.zeros(n, dtype=x.dtype)
    info = _call("geev", x.dtype, b"N", job, n, x, max(n, 1), wr, wi, vl, 1, vr, ldvr)
    return wr, wi, vr, info


def trsm_rows(a: NDArray, x: NDArray, lower: bool, transpose: bool, unit_diagonal: bool) -> None:
    """x with op(t) x = b in place of the C-ordered ``b`` in ``x [n, k]``, t
    the lower (else upper) triangle of the square ``a``, op the transpose (not
    the conjugate one) where asked, t's diagonal read as ones where
    ``unit_diagonal``: BLAS ?trsm from the left, on row-major matrices."""
    _rows(x)
    n, k = x.shape
    if n == 0 or k == 0:
        return
    # t's rows as BLAS reads them: unit stride along them and a whole number
    # of elements at least n apart (a 1 x 1 matrix's strides say nothing).
    size = a.itemsize
    if n > 1 and (a.strides[1] != size or a.strides[0] % size or a.strides[0] < n * size):
        a = np.ascontiguousarray(a)
    lda = a.strides[0] // size if n > 1 else 1
    fn = getattr(library(ROUTINE_THREADS), f"scipy_cblas_{_LETTER[x.dtype]}trsm")
    fn.restype = None
    alpha: Any
    if x.dtype.kind == "c":
        one = np.ones(1, dtype=x.dtype)
        alpha = ctypes.c_void_p(one.ctypes.data)
    else:
        alpha = (ctypes.c_float if x.dtype == np.float32 else ctypes.c_double)(1.0)
    fn(ctypes.c_int(_CBLAS_ROW_MAJOR), ctypes.c_int(_LEFT), ctypes.c_int(_LOWER if lower else _UPPER),
       ctypes.c_int(_TRANS if transpose else _NO_TRANS), ctypes.c_int(_UNIT if unit_diagonal else _NON_UNIT),
       ctypes.c_int(n), ctypes.c_int(k), alpha, ctypes.c_void_p(a.ctypes.data), ctypes.c_int(lda),
       ctypes.c_void_p(x.ctypes.data), ctypes.c_int(k))

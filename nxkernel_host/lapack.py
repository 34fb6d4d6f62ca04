"""LAPACK routines of the host library's own OpenBLAS instance for routines
(``blas.library(ROUTINE_THREADS)``), through its LAPACKE interface: the few the
matrix routines call, at float32, float64, complex64 and complex128, on
Fortran-ordered (column-major) matrices.

That instance always runs ``ROUTINE_THREADS`` threads, so the bits depend on
the extents, the OpenBLAS core type and that constant alone, and the
program's own BLAS (NumPy's, SciPy's) is never touched.
Each function works on fresh arrays it returns and reports LAPACK's ``info``
(0: done; > 0: the routine's own failure, such as a matrix that is not
positive definite or an iteration that did not converge). The callers check
that a matrix is finite first: LAPACKE refuses NaN input with a negative info.
"""

from __future__ import annotations

import ctypes
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from .blas import ROUTINE_THREADS, library

__all__ = ["geev", "geqrf", "gesdd", "heevd", "orgqr", "potrf", "trsm"]

NDArray = npt.NDArray[Any]

_COL_MAJOR: Final = 102
#: CBLAS's enumerations for trsm.
_CBLAS_COL_MAJOR: Final = 102
_LEFT: Final = 141
_UPPER, _LOWER = 121, 122
_NO_TRANS, _TRANS = 111, 112
_NON_UNIT, _UNIT = 131, 132

#: The LAPACK letter of each NumPy dtype.
_LETTER: Final = {np.dtype(np.float32): "s", np.dtype(np.float64): "d",
                  np.dtype(np.complex64): "c", np.dtype(np.complex128): "z"}


def _call(name: str, dtype: np.dtype[Any], *args: Any) -> int:
    """LAPACKE's ``{letter}{name}`` for ``dtype`` with ``args`` (ints, chars as
    one-byte strings, arrays as pointers to their data); its info."""
    fn = getattr(library(ROUTINE_THREADS), f"scipy_LAPACKE_{_LETTER[dtype]}{name}")
    fn.restype = ctypes.c_int
    converted: list[Any] = [ctypes.c_int(_COL_MAJOR)]
    for arg in args:
        if isinstance(arg, np.ndarray):
            converted.append(ctypes.c_void_p(arg.ctypes.data))
        elif isinstance(arg, bytes):
            converted.append(ctypes.c_char(arg))
        elif arg is None:
            converted.append(ctypes.c_void_p(None))
        else:
            converted.append(ctypes.c_int(int(arg)))
    return int(fn(*converted))


def _fortran(a: NDArray) -> NDArray:
    """A fresh Fortran-ordered copy: LAPACK overwrites its input."""
    return np.array(a, order="F", copy=True)


def potrf(a: NDArray, lower: bool) -> tuple[NDArray, int]:
    """The Cholesky factor of ``a`` from its lower (else upper) triangle, the
    other triangle zero; and info."""
    c = _fortran(a)
    n = c.shape[0]
    info = _call("potrf", c.dtype, b"L" if lower else b"U", n, c, max(n, 1))
    return (np.tril(c) if lower else np.triu(c)), info


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


def _real(dtype: np.dtype[Any]) -> np.dtype[Any]:
    return np.dtype(np.float32) if dtype in (np.float32, np.complex64) else np.dtype(np.float64)


def gesdd(a: NDArray, vectors: bool, complete: bool) -> tuple[NDArray, NDArray, NDArray, int]:
    """The SVD of ``a [m, n]`` by divide and conquer: u, s (descending, real)
    and vh; u [m, m] and vh [n, n] where ``complete``, [m, k] and [k, n] where
    not, both empty without ``vectors``; and info."""
    x = _fortran(a)
    m, n = x.shape
    k = min(m, n)
    s = np.zeros(k, dtype=_real(x.dtype))
    uc, vr = (m, n) if complete else (k, k)
    if not vectors:
        u = np.zeros((1, 1), dtype=x.dtype, order="F")
        vh = np.zeros((1, 1), dtype=x.dtype, order="F")
        info = _call("gesdd", x.dtype, b"N", m, n, x, max(m, 1), s, u, 1, vh, 1)
        return u[:0, :0], s, vh[:0, :0], info
    u = np.zeros((m, uc), dtype=x.dtype, order="F")
    vh = np.zeros((vr, n), dtype=x.dtype, order="F")
    info = _call("gesdd", x.dtype, b"A" if complete else b"S", m, n, x, max(m, 1), s, u,
                 max(m, 1), vh, max(vr, 1))
    return u, s, vh, info


def heevd(a: NDArray, vectors: bool) -> tuple[NDArray, NDArray, int]:
    """Eigenvalues (ascending, real) and, with ``vectors``, eigenvectors
    (columns) of the Hermitian ``a``, read from its lower triangle (?syevd,
    or ?heevd for complex dtypes); and info."""
    v = _fortran(a)
    n = v.shape[0]
    w = np.zeros(n, dtype=_real(v.dtype))
    name = "heevd" if v.dtype.kind == "c" else "syevd"
    info = _call(name, v.dtype, b"V" if vectors else b"N", b"L", n, v, max(n, 1), w)
    return w, v, info


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


def trsm(a: NDArray, b: NDArray, lower: bool, transpose: bool, unit_diagonal: bool) -> NDArray:
    """x with op(t) x = b, t the lower (else upper) triangle of the square
    ``a``, op the transpose (not the conjugate one) where asked, t's diagonal
    read as ones where ``unit_diagonal``: BLAS ?trsm from the left."""
    t = _fortran(a)
    x = _fortran(b)
    m, n = x.shape
    if m == 0 or n == 0:
        return x
    one = np.ones(1, dtype=x.dtype)
    fn = getattr(library(ROUTINE_THREADS), f"scipy_cblas_{_LETTER[x.dtype]}trsm")
    fn.restype = None
    alpha: Any = ctypes.c_void_p(one.ctypes.data)
    if x.dtype.kind != "c":
        alpha = (ctypes.c_float if x.dtype == np.float32 else ctypes.c_double)(1.0)
    fn(ctypes.c_int(_CBLAS_COL_MAJOR), ctypes.c_int(_LEFT), ctypes.c_int(_LOWER if lower else _UPPER),
       ctypes.c_int(_TRANS if transpose else _NO_TRANS), ctypes.c_int(_UNIT if unit_diagonal else _NON_UNIT),
       ctypes.c_int(m), ctypes.c_int(n), alpha, ctypes.c_void_p(t.ctypes.data), ctypes.c_int(max(m, 1)),
       ctypes.c_void_p(x.ctypes.data), ctypes.c_int(max(m, 1)))
    return x

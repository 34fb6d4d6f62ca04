"""The host library's own BLAS: private OpenBLAS instances on fixed thread counts.

OpenBLAS's bits depend on its thread count (its threaded driver splits the
work into other blocks than its one-thread driver does), and the process's
OpenBLAS (NumPy's, SciPy's) belongs to the program: a user may change its
thread count at any moment (``threadpoolctl.threadpool_limits``), from any
thread. So the host library never calls it. It loads its own instance of
OpenBLAS (the ``scipy-openblas32`` wheel's library, whose symbols carry a
``scipy_`` prefix) from a private copy under a name no thread-pool controller
knows (threadpoolctl finds OpenBLAS by file name), sets it to one thread
once, and makes its parallelism itself, over fixed tiles of the output (a
function of the extents alone, ``tiling``) on its own threads. Each
element's order of summation is then a function of the extents and of the
OpenBLAS core type (``corename()``: the CPU's own, which OpenBLAS chooses
when the instance loads), and nothing another thread does to any BLAS
changes it. The environment's OpenBLAS settings that choose kernels or
block sizes (``OPENBLAS_CORETYPE``, ``OPENBLAS_L2_SIZE``,
``OPENBLAS_BLOCK_FACTOR``), which NumPy's OpenBLAS obeys, are taken out of
the environment while an instance loads (the one moment OpenBLAS reads
them) and put back at once: the instance runs the kernels of the CPU it
runs on whatever the environment says, so the bits do not depend on it.

The matrix routines (``lapack``), which factor one matrix at a time, run on
a second private instance kept on ``ROUTINE_THREADS`` threads: OpenBLAS
splits a routine's work over a fixed count of threads by a static rule, so
their bits are a function of the extents, the core type and that constant,
the same on every machine and whatever the program's thread settings.

The copy is made in a new private folder (``mkdtemp``, mode 0700) by this
process, loaded, and deleted at once (the mapping stays): nothing foreign is
ever loaded from a shared cache. It is loaded with ``RTLD_DEEPBIND``, so its
calls into itself never bind to another OpenBLAS that exports the same names
into the global scope (importing the ``scipy_openblas32`` package does that
with the wheel's own copy, which is why this module only reads where the
package lies and never imports it).
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

__all__ = ["INT_MAX", "ROUTINE_THREADS", "SETTINGS", "TRANS", "blas_operand", "corename", "gemm", "gemm_one",
           "gemm_strided", "library"]

NDArray = npt.NDArray[Any]

#: CBLAS's enumerations.
_ROW_MAJOR: Final = 101
NO_TRANS: Final = 111
TRANS: Final = 112
#: The largest extent a 32-bit BLAS integer holds.
INT_MAX: Final = 2**31 - 1
#: The threads of the routines' instance: a constant, so it fixes their bits.
ROUTINE_THREADS: Final = 2
#: The environment variables by which OpenBLAS chooses its kernels or block
#: sizes when it loads; none reaches the library's instances.
SETTINGS: Final = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_BLOCK_FACTOR")

_loading = threading.Lock()
_instances: dict[int, ctypes.CDLL] = {}


def _source() -> Path:
    """The scipy-openblas32 wheel's shared library, found without importing
    the package (whose import loads it into the global scope)."""
    spec = importlib.util.find_spec("scipy_openblas32")
    if spec is None or spec.origin is None:
        raise ImportError("nxkernel_host needs the scipy-openblas32 wheel: pip install scipy-openblas32")
    found = sorted((Path(spec.origin).parent / "lib").glob("libscipy_openblas*.so*"))
    if not found:
        raise ImportError(f"no libscipy_openblas in {Path(spec.origin).parent / 'lib'}")
    return found[0]


@contextlib.contextmanager
def _without_settings() -> Iterator[None]:
    """``SETTINGS`` out of the process's environment (C's, which OpenBLAS
    reads), each put back as it was on leaving. OpenBLAS has no call that
    changes its core type once loaded, so the load is the one place to keep
    the environment's choice from it; another thread reading these variables
    during the load (once per instance, milliseconds) would miss them."""
    saved = {name: os.environ.pop(name) for name in SETTINGS if name in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


def library(threads: int = 1) -> ctypes.CDLL:
    """The private OpenBLAS instance of ``threads`` threads (each count its
    own instance, from its own copy), loaded once, without ``SETTINGS``, and
    set to that count.

    Raises:
        ImportError: the ``scipy-openblas32`` wheel is not installed, or the
            instance does not keep the count.
    """
    lib = _instances.get(threads)
    if lib is None:
        with _loading:  # one load per count, and one change of the environment at a time
            lib = _instances.get(threads)
            if lib is None:
                lib = _instances[threads] = _load(threads)
    return lib


def _load(threads: int) -> ctypes.CDLL:
    """``library(threads)``'s instance, loaded and set up."""
    folder = tempfile.mkdtemp(prefix="nxkernel-blas-")
    try:
        private = Path(folder) / f"libnxkernel_host_blas{threads}.so"
        shutil.copyfile(_source(), private)
        with _without_settings():
            lib = ctypes.CDLL(str(private), mode=os.RTLD_LOCAL | getattr(os, "RTLD_DEEPBIND", 0))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    lib.scipy_openblas_set_num_threads.argtypes = [ctypes.c_int]
    lib.scipy_openblas_set_num_threads.restype = None
    lib.scipy_openblas_get_num_threads.restype = ctypes.c_int
    lib.scipy_openblas_set_num_threads(threads)
    if lib.scipy_openblas_get_num_threads() != threads:
        raise ImportError(f"nxkernel_host.blas: a private OpenBLAS did not keep {threads} threads")
    lib.scipy_openblas_get_corename.restype = ctypes.c_char_p
    pointer, blasint = ctypes.c_void_p, ctypes.c_int
    for name, scalar in (("scipy_cblas_sgemm", ctypes.c_float), ("scipy_cblas_dgemm", ctypes.c_double)):
        fn = getattr(lib, name)
        fn.argtypes = [blasint, blasint, blasint, blasint, blasint, blasint, scalar, pointer, blasint,
                       pointer, blasint, scalar, pointer, blasint]
        fn.restype = None
        # The strided batch: order, transpositions, m, n, k, alpha, a, lda,
        # stride a, b, ldb, stride b, beta, c, ldc, stride c, count.
        fn = getattr(lib, f"{name}_batch_strided")
        fn.argtypes = [blasint, blasint, blasint, blasint, blasint, blasint, scalar, pointer, blasint,
                       blasint, pointer, blasint, blasint, scalar, pointer, blasint, blasint, blasint]
        fn.restype = None
    return lib


def corename() -> str:
    """The OpenBLAS core type the private instance runs: the CPU's own (its
    kernels, and so its bits, are this CPU family's)."""
    return str(library().scipy_openblas_get_corename().decode())


def blas_operand(x: NDArray) -> tuple[NDArray, int, int]:
    """``x`` (2-D) as BLAS reads it row-major: the array (a C-contiguous copy
    where neither axis has unit stride), its transposition flag and its
    leading dimension."""
    rows, cols = x.shape
    size = x.itemsize
    if x.strides[1] == size and x.strides[0] >= max(cols, 1) * size and x.strides[0] % size == 0:
        return x, NO_TRANS, x.strides[0] // size
    if x.strides[0] == size and x.strides[1] >= max(rows, 1) * size and x.strides[1] % size == 0:
        return x, TRANS, x.strides[1] // size
    return np.ascontiguousarray(x), NO_TRANS, max(cols, 1)


def gemm(a: NDArray, b: NDArray, out: NDArray) -> None:
    """``out[...] = a @ b`` by the private instance's sgemm or dgemm, on the
    calling thread: ``a [m, k]`` and ``b [k, n]`` of ``out``'s dtype (float32
    or float64), any strides, ``out [m, n]`` with unit column stride. The
    order of each element's sum is a function of (m, n, k) and the core type.

    Raises:
        ValueError: other dtypes, shapes that do not chain, or extents a
            32-bit BLAS integer does not hold.
    """
    m, k = a.shape
    n = b.shape[1]
    if a.dtype != out.dtype or b.dtype != out.dtype or out.dtype not in (np.float32, np.float64):
        raise ValueError(f"blas.gemm: a, b and out of one dtype, float32 or float64, not "
                         f"{a.dtype}, {b.dtype} and {out.dtype}")
    if b.shape[0] != k or out.shape != (m, n):
        raise ValueError(f"blas.gemm: shapes {a.shape} @ {b.shape} into {out.shape} do not chain")
    if max(m, n, k) > INT_MAX:
        raise ValueError(f"blas.gemm: extents {m}, {n}, {k} exceed a 32-bit BLAS's")
    if m == 0 or n == 0:
        return
    size = out.itemsize
    if out.strides[1] != size or out.strides[0] % size or out.strides[0] < n * size:
        raise ValueError("blas.gemm: out needs unit column stride and rows at least n apart")
    if k == 0:
        out[...] = 0
        return
    a, trans_a, lda = blas_operand(a)
    b, trans_b, ldb = blas_operand(b)
    lib = library()
    fn = lib.scipy_cblas_sgemm if out.dtype == np.float32 else lib.scipy_cblas_dgemm
    fn(_ROW_MAJOR, trans_a, trans_b, m, n, k, 1.0, a.ctypes.data, lda, b.ctypes.data, ldb, 0.0,
       out.ctypes.data, out.strides[0] // size)


def _batch_strided(dtype: npt.DTypeLike) -> Any:
    """The private instance's strided-batch sgemm (float32) or dgemm (float64)."""
    lib = library()
    return (lib.scipy_cblas_sgemm_batch_strided if np.dtype(dtype) == np.float32
            else lib.scipy_cblas_dgemm_batch_strided)


def gemm_strided(dtype: npt.DTypeLike) -> Callable[[int, int, int, int, int, int, int, int, int,
                                                   int, int, int, int], None]:
    """The private instance's sgemm or dgemm over a strided batch, as a
    function of ``(m, n, k, a, lda, stride_a, b, ldb, stride_b, out, ldc,
    stride_c, count)`` (addresses, and extents, leading dimensions and
    strides in elements): ``out_i[...] = a_i @ b_i`` for i < count, each
    operand row-major and not transposed, operand i at its address plus
    ``i · stride`` elements. Each product is computed alone, by a routine
    OpenBLAS chooses from (m, n, k) and its core type (its small-matrix
    kernel up to 100³ multiply-adds, else its blocked driver), so its bits do
    not depend on ``count`` or on the other products. The caller keeps every
    value within a 32-bit BLAS integer, ``(count − 1) · stride`` included (the
    batch indexes in 32 bits), and 1 <= m, n, k, count."""
    fn = _batch_strided(dtype)

    def product(m: int, n: int, k: int, a: int, lda: int, stride_a: int, b: int, ldb: int,
                stride_b: int, out: int, ldc: int, stride_c: int, count: int) -> None:
        fn(_ROW_MAJOR, NO_TRANS, NO_TRANS, m, n, k, 1.0, a, lda, stride_a, b, ldb, stride_b, 0.0,
           out, ldc, stride_c, count)

    return product


def gemm_one(dtype: npt.DTypeLike, m: int, n: int, k: int) -> Callable[[int, int, int], None]:
    """``gemm_strided(dtype)``'s one product of C-contiguous ``a [m, k]``,
    ``b [k, n]`` and ``out [m, n]`` (count 1, its strides 0; the same routine,
    so the same bits) as a function of the three addresses. Every other
    argument is made once as its C type: ctypes passes such an argument as it
    is, and converts a Python number anew each call."""
    wide = np.dtype(dtype) != np.float32
    fn = _batch_strided(dtype)
    c, scalar = ctypes.c_int, ctypes.c_double if wide else ctypes.c_float
    order, no, cm, cn, ck, zero, one = c(_ROW_MAJOR), c(NO_TRANS), c(m), c(n), c(k), c(0), c(1)
    alpha, beta = scalar(1.0), scalar(0.0)

    def product(a: int, b: int, out: int) -> None:
        fn(order, no, no, cm, cn, ck, alpha, a, ck, zero, b, cn, zero, beta, out, cn, zero, one)

    return product

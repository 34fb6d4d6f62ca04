"""BLAS threads: run BLAS and LAPACK with every loaded OpenBLAS on one thread.

OpenBLAS's bits depend on its thread count (its threaded driver splits K into
other blocks than its one-thread driver does), so every BLAS and LAPACK call
of the host library runs inside ``with pinned_blas:``, and the library makes
its parallelism itself, by extents alone.
"""

from __future__ import annotations

import ctypes
import threading
from types import TracebackType
from typing import Any, Final

import scipy.linalg  # noqa: F401 - loads SciPy's OpenBLAS, so pinned_blas finds it too

__all__ = ["pinned_blas"]


#: (set, get) thread-count functions an OpenBLAS build may export: NumPy's
#: 64-bit-index build, SciPy's and a plain one.
_THREAD_SYMBOLS: Final = (
    ("scipy_openblas_set_num_threads64_", "scipy_openblas_get_num_threads64_"),
    ("scipy_openblas_set_num_threads", "scipy_openblas_get_num_threads"),
    ("openblas_set_num_threads64_", "openblas_get_num_threads64_"),
    ("openblas_set_num_threads", "openblas_get_num_threads"),
)


def _openblas_controls() -> list[tuple[Any, Any]]:
    """(set, get) of every OpenBLAS this process has loaded, found in its memory map."""
    try:
        with open("/proc/self/maps") as maps:
            paths = sorted({line.split()[-1] for line in maps
                            if "openblas" in line.lower() and len(line.split()) >= 6})
    except OSError:
        return []
    controls = []
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for set_name, get_name in _THREAD_SYMBOLS:
            if hasattr(lib, set_name) and hasattr(lib, get_name):
                setter, getter = getattr(lib, set_name), getattr(lib, get_name)
                getter.restype = ctypes.c_int
                setter.argtypes = [ctypes.c_int]
                controls.append((setter, getter))
                break
    return controls


class _PinnedBlas:
    """A context manager that runs its body with every loaded OpenBLAS on one
    thread. Re-entrant and safe across threads: the first to enter saves the
    thread counts and sets 1, the last to leave restores them. It finds the
    libraries in ``/proc/self/maps`` on first use; a BLAS that is not OpenBLAS
    (MKL, Accelerate) is not pinned, and its thread count may change bits."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._saved: list[int] = []
        self._controls: list[tuple[Any, Any]] | None = None

    def __enter__(self) -> None:
        with self._lock:
            if self._controls is None:
                self._controls = _openblas_controls()
            if self._depth == 0:
                self._saved = [int(get()) for _, get in self._controls]
                for setter, _ in self._controls:
                    setter(1)
            self._depth += 1

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        with self._lock:
            self._depth -= 1
            if self._depth == 0 and self._controls is not None:
                for (setter, _), n in zip(self._controls, self._saved, strict=True):
                    setter(n)


#: Every BLAS and LAPACK call of the host library runs inside ``with pinned_blas:``.
pinned_blas: Final = _PinnedBlas()

"""nxkernel's kernel library for host memory (NumPy, Numba).

``library`` is the object the ``host`` entry point's plugin returns; the
kernels live in one module per family beside it. ``threads(n)`` runs the host
kernels called in its context on at most ``n`` threads (default
``NXKERNEL_THREADS``, else the CPUs the process may use; see ``pool``).
"""

from .library import HostLibrary, library
from .pool import threads

__all__ = ["HostLibrary", "library", "threads"]

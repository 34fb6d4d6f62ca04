"""nxkernel's kernel library for host memory (NumPy, Numba).

``library`` is the object the ``host`` entry point's plugin returns; the
kernels live in one module per family beside it. ``threads(n)`` runs the host
kernels called in its context on at most ``n`` threads (default
``NXKERNEL_THREADS``, else the CPUs the process may use; see ``pool``).

Importing the package first drops Numba's cached loops where any of its
modules changed since they were cached (``jitcache``).
"""

from . import jitcache

jitcache.guard()

from .library import HostLibrary, library  # noqa: E402 - after the cache's guard
from .pool import threads  # noqa: E402

__all__ = ["HostLibrary", "library", "threads"]

"""nxkernel's kernel library for host memory (NumPy, Numba).

``library`` is the object the ``host`` entry point's plugin returns; the
kernels live in one module per family beside it.
"""

from .library import HostLibrary, library

__all__ = ["HostLibrary", "library"]

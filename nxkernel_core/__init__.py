"""nxkernel's core: the Nx_kernel contract in Python.

Dtypes, layouts and moves, devices and buffers, arrays, the door and its
answers, programs, loads, kernel specs and shape rules, the library protocol,
plugin discovery and the caller ``nx``.
"""

from ._version import __version__

__all__ = ["__version__"]

"""The ``cuda`` plugin (entry point group ``nxkernel.libraries``).

Importing it is cheap and never fails for want of CUDA: CuPy is imported only
when the devices are asked for, and a machine without it (or without a driver
or a GPU) gets the library all the same, computing on no GPU, with the reason
in its statement and in :func:`availability`.

* ``nxkernel_libraries()`` brings ``nx.cuda`` (:data:`~nxkernel_cuda.library.LIBRARY`).
* ``nxkernel_devices()`` brings ``cuda:N`` for each usable GPU and, where
  ``NXKERNEL_CUDA_EMULATE`` is set, ``cuda-emu:0``; the same objects on every
  call.
"""

from __future__ import annotations

from nxkernel_core.kernel import Library
from nxkernel_core.plugins import hookimpl
from nxkernel_core.rig import Rig

from .device import availability, open_devices
from .library import LIBRARY

__all__ = ["availability", "nxkernel_devices", "nxkernel_libraries"]


@hookimpl
def nxkernel_libraries() -> list[Library]:
    """The CUDA library, whatever this machine has."""
    return [LIBRARY]


@hookimpl
def nxkernel_devices() -> list[Rig]:
    """The CUDA devices this process can open (none where CUDA is unusable and
    emulation is not asked for)."""
    return list(open_devices())

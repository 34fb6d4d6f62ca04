"""nxkernel_cuda: the CUDA kernel library ``nx.cuda`` (entry point ``cuda``).

Modules, one concern each:

* ``library``: the library object and its statement (start here);
* ``plugin``: the discovery hooks;
* ``device``: ``cuda:N`` and ``cuda-emu:N``, and ``availability()``;
* ``launch``: the launch path shared by both (Dim3, Pointer, Function, Module);
* ``build``: sources, rendering, NVRTC to cubin, ``CompileError``;
* ``nvrtc``: every NVRTC 12 and 13 found, loaded side by side, and the one
  the driver runs the cubins of;
* ``cache``: the disk cache of cubins and emulator objects;
* ``gpu``: cubins as CuPy RawModules, CUDA errors as device errors;
* ``emulator``: ``emu_cuda.h`` and the driver that runs kernels on the CPU;
* ``catalog``: every hand-written source the library launches;
* ``codegen``: programs as CUDA C (pure rendering);
* ``loops``: walks, descriptors and their upload;
* ``elementwise``, ``reductions``, ``moves``: the kernel families of the
  library (map; reduce and scan; gather, scatter, sort, numbering, assemble);
* ``lane_sum``, ``copy``: the example families.
"""

from __future__ import annotations

from .build import CompileError, Source
from .device import CudaDevice, CudaRig, EmuDevice, availability, open_devices
from .launch import Dim3, LaunchError, Pointer
from .library import LIBRARY

__all__ = [
    "LIBRARY",
    "CompileError",
    "CudaDevice",
    "CudaRig",
    "Dim3",
    "EmuDevice",
    "LaunchError",
    "Pointer",
    "Source",
    "availability",
    "open_devices",
]

"""nxkernel_cuda: the CUDA kernel library ``nx.cuda`` (entry point ``cuda``).

Modules, by layer:

* the library: ``library`` (the ``Library`` subclass: its hooks, declines and
  statement; start here) and ``plugin`` (the discovery hooks);
* runtime: ``launch`` (what both devices share: ``CudaRig``, Dim3, Pointer,
  the launch checks, the Module and Function protocols), ``runtime`` (the GPU:
  ``cuda:N``, its cubins as CuPy RawModules, their launches, CUDA errors as
  device errors), ``device`` (``cuda-emu:N``, ``availability()``, opening
  the devices), ``emulator`` (``emu_cuda.h`` and the driver that runs
  kernels on the CPU) and ``interchange`` (DLPack, the CUDA array interface
  and device copies, for ``nxkernel_core.array_api``);
* compile: ``build`` (sources, NVRTC to cubin, ``CompileError``,
  ``NXKERNEL_CUDA_DUMP``), ``nvrtc`` (every NVRTC 12 and 13 found, and the
  one the driver runs the cubins of), ``cache`` (the disk cache of cubins and
  emulator objects), ``catalog`` (every hand-written source the library
  launches) and ``ptxas`` (registers and spills per kernel);
* render, pure functions from parameters to CUDA source (snapshot-tested in
  ``tests/cuda/test_render.py``): ``codegen`` (programs as CUDA C),
  ``elementwise.map_code``, ``terms.reductions_code``,
  ``statistics.terms_code``, ``attention_code`` and
  ``attention_mma.attention_mma_code``;
* the kernel families, each a hook body and its statement's words:
  ``elementwise`` (map), ``reductions``, ``statistics``, ``terms`` and
  ``term_walks`` (reduce, scan), ``moves``, ``contraction``
  (``contract_simt``, ``contract_mma``), ``folds``, ``fourier``,
  ``matrices``, ``attention`` (``attention_mma``); ``loops`` and ``plans``
  (walks, descriptors, launch plans) serve them.
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

"""The GPU side of the launch path: cubins loaded as CuPy ``RawModule``s, and
CUDA errors mapped to the device errors of ``nxkernel_core.rig``.

Rules:

* A module is a cubin built by :func:`nxkernel_cuda.build.compile` for the
  device's architecture, loaded with ``cupy.RawModule(path=...)`` on the first
  :meth:`GpuModule.function`, in the device's context; a kernel is looked up
  by the lowered name NVRTC gave its name expression.
* A launch is queued on the device's stream (CuPy's current stream for the
  call), so work on one device runs in the order it was queued.
* :func:`guard` maps CUDA's errors: an allocation failure raises ``OutOfMemory``;
  a sticky error (:data:`STICKY`: an illegal address, a launch failure, a
  device-side assert, ...), which leaves the CUDA context unusable, marks the
  device lost and raises ``Lost``, and every later use of the device raises
  ``Lost``; other errors propagate unchanged.

Nothing here imports CuPy at import time; it is imported on first use.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final, final

import numpy as np

from nxkernel_core.rig import Lost, OutOfMemory

from .build import Cubin, Source
from .launch import SHARED_WITHOUT_OPT_IN, Arg, Dim3Like, LaunchError, Pointer, check_args, check_launch

if TYPE_CHECKING:
    from .device import CudaDevice

__all__ = ["STICKY", "GpuFunction", "GpuModule", "guard"]

#: The CUDA error codes (cudaError_t and CUresult agree on them) after which
#: the context is unusable: the device is lost.
STICKY: Final[dict[int, str]] = {
    214: "uncorrectable ECC error",
    700: "illegal memory address",
    702: "launch timed out",
    709: "context is destroyed",
    710: "device-side assert",
    714: "hardware stack error",
    715: "illegal instruction",
    716: "misaligned address",
    717: "invalid address space",
    718: "invalid program counter",
    719: "unspecified launch failure",
}

_OUT_OF_MEMORY: Final = 2


@contextmanager
def guard(device: CudaDevice, nbytes: int = 0) -> Iterator[None]:
    """Run the body, mapping CUDA errors to ``OutOfMemory`` (``nbytes`` being
    the allocation's size) and, for a sticky error, to ``Lost``."""
    import cupy

    try:
        yield
    except cupy.cuda.memory.OutOfMemoryError:
        raise OutOfMemory(device, nbytes) from None
    except (cupy.cuda.runtime.CUDARuntimeError, cupy.cuda.driver.CUDADriverError) as e:
        status = int(getattr(e, "status", -1))
        if status == _OUT_OF_MEMORY:
            raise OutOfMemory(device, nbytes) from e
        if status in STICKY:
            why = f"{STICKY[status]} (CUDA error {status}: {e})"
            device.lose(why)
            raise Lost(device, why) from e
        raise


@final
class GpuFunction:
    """A kernel of a loaded cubin; launches on its device's stream."""

    __slots__ = ("_kernel", "_module", "_shared_set", "name")

    def __init__(self, module: GpuModule, name: str, kernel: Any) -> None:
        self.name: Final = name
        self._module = module
        self._kernel = kernel
        self._shared_set = SHARED_WITHOUT_OPT_IN  # what a kernel may take without opting in

    def __repr__(self) -> str:
        return f"GpuFunction({self.name!r} on {self._module.device.name})"

    @property
    def max_dynamic_shared_size_bytes(self) -> int:
        """The dynamic shared memory a launch may ask for (48 KiB until raised)."""
        return self._shared_set

    @max_dynamic_shared_size_bytes.setter
    def max_dynamic_shared_size_bytes(self, nbytes: int) -> None:
        device = self._module.device
        if not 0 <= nbytes <= device.max_shared_bytes:
            raise LaunchError(f"{self.name}: max_dynamic_shared_size_bytes {nbytes} is outside"
                              f" [0, {device.max_shared_bytes}]")
        import cupy

        with guard(device), cupy.cuda.Device(device.index):
            self._kernel.max_dynamic_shared_size_bytes = nbytes
        self._shared_set = nbytes

    def __call__(self, grid: Dim3Like, block: Dim3Like, args: Sequence[Arg], *,
                 shared_bytes: int = 0) -> None:
        """Opt into ``shared_bytes`` where needed, then :meth:`launch`."""
        if self._shared_set < shared_bytes <= self._module.device.max_shared_bytes:
            self.max_dynamic_shared_size_bytes = shared_bytes
        self.launch(grid, block, args, shared_bytes=shared_bytes)

    def launch(self, grid: Dim3Like, block: Dim3Like, args: Sequence[Arg], *, shared_bytes: int = 0) -> None:
        """Queue the kernel on the device's stream (see :class:`~nxkernel_cuda.launch.Function`)."""
        device = self._module.device
        device.check()
        g, b = check_launch(self.name, grid, block, shared_bytes, device.max_shared_bytes, self._shared_set)
        values = tuple(np.uint64(a.address) if isinstance(a, Pointer) else a
                       for a in check_args(self.name, args))
        import cupy

        with guard(device), cupy.cuda.Device(device.index), device.stream:
            self._kernel(g.as_tuple(), b.as_tuple(), values, shared_mem=shared_bytes)


@final
class GpuModule:
    """A cubin for one device, loaded as a ``cupy.RawModule`` on first use."""

    __slots__ = ("_functions", "_lock", "_raw", "cubin", "device", "source")

    def __init__(self, device: CudaDevice, source: Source, cubin: Cubin) -> None:
        self.device: Final = device
        self.source: Final = source
        self.cubin: Final = cubin
        self._raw: Any = None
        self._functions: dict[str, GpuFunction] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"GpuModule({self.source.name!r} for {self.cubin.arch} on {self.device.name})"

    def function(self, kernel: str) -> GpuFunction:
        """The kernel of name expression ``kernel``."""
        with self._lock:
            fn = self._functions.get(kernel)
            if fn is not None:
                return fn
            lowered = self.cubin.lowered.get(kernel)
            if lowered is None:
                raise KeyError(
                    f"{self.source.name} has no kernel {kernel!r}; it has {', '.join(self.source.kernels)}"
                )
            import cupy

            device = self.device
            device.check()
            with guard(device), cupy.cuda.Device(device.index):
                if self._raw is None:
                    self._raw = cupy.RawModule(path=str(self.cubin.path))
                fn = self._functions[kernel] = GpuFunction(self, kernel, self._raw.get_function(lowered))
            return fn

"""The GPU runtime: ``cuda:N`` as a device, its cubins as modules, their
kernels launched on its stream (the counterpart of tinygrad's
``ops_cuda.py``). ``cuda-emu:N`` is :mod:`nxkernel_cuda.device`'s and the
emulator's; what both share (:class:`~nxkernel_cuda.launch.CudaRig`, the
launch checks) is :mod:`nxkernel_cuda.launch`'s.

Rules:

* :class:`CudaDevice` is GPU ``N``. Its memory is device memory from CuPy's
  memory pool (``shares_host_memory`` False: ``host_bytes`` is ``None`` and
  the door answers ``OFF_HOST`` to a library that needs host memory); bytes
  cross with ``cudaMemcpyAsync`` on the device's stream, which also runs every
  kernel, so work is done in the order it was queued and a read waits for it.
* A module (:class:`GpuModule`) is a cubin built by
  :func:`nxkernel_cuda.build.compile` for the device's architecture, loaded
  with ``cupy.RawModule(path=...)`` on the first :meth:`GpuModule.function`,
  in the device's context; a kernel is looked up by the lowered name NVRTC
  gave its name expression.
* A launch (:class:`GpuFunction`) is queued on the device's stream (CuPy's
  current stream for the call), so work on one device runs in the order it
  was queued.
* :func:`guard` maps CUDA's errors: an allocation failure raises
  ``OutOfMemory``; a sticky error (:data:`STICKY`: an illegal address, a
  launch failure, a device-side assert, ...), which leaves the CUDA context
  unusable, marks the device lost and raises ``Lost``, and every later use of
  the device raises ``Lost``; other errors propagate unchanged.

Nothing here imports CuPy at import time; it is imported on first use.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Final, cast, final

import numpy as np
import numpy.typing as npt

from nxkernel_core.rig import Access, Buffer, Lost, Memory, OutOfMemory

from .build import Cubin, Source, compile, compile_options
from .launch import (
    SHARED_WITHOUT_OPT_IN,
    Arg,
    CudaRig,
    Dim3Like,
    LaunchError,
    Module,
    Pointer,
    check_args,
    check_launch,
)

__all__ = ["STICKY", "CudaDevice", "GpuFunction", "GpuModule", "decoded", "guard"]

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


def decoded(v: object) -> str:
    """A CUDA property (bytes or text) as text."""
    return v.decode(errors="replace") if isinstance(v, bytes) else str(v)


# --------------------------------------------------------------------------
# The device
# --------------------------------------------------------------------------


class CudaDevice(CudaRig):
    """``cuda:N``: GPU N's memory (CuPy's pool), its stream, NVRTC cubins."""

    def __init__(self, index: int) -> None:
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(index)
        major, minor = int(props["major"]), int(props["minor"])
        super().__init__(f"cuda:{index}", model=f"{decoded(props['name'])} (sm_{major}{minor})",
                         shares_host_memory=False)
        self.index: Final = index
        self.arch = f"sm_{major}{minor}"
        self.max_shared_bytes = int(props.get("sharedMemPerBlockOptin", 48 * 1024))
        with cupy.cuda.Device(index):
            self.stream: Final[Any] = cupy.cuda.Stream(non_blocking=True)

    def _current(self) -> Any:
        """A context in which this GPU is CUDA's current device: every host-side
        call that touches the device runs in one (a copy on its stream from
        another device's context fails on a machine with several GPUs)."""
        import cupy

        return cupy.cuda.Device(self.index)

    # ---- memory ---------------------------------------------------------------

    def allocate(self, nbytes: int, access: Access = Access.READ_WRITE) -> Memory:
        """A fresh zeroed device memory of ``nbytes``; its handle is CuPy's
        ``MemoryPointer``. ``OutOfMemory`` past the budget or where CUDA has
        no room."""
        # Rig.allocate makes a Memory without a handle, so this overrides it;
        # the budget and in-use accounting are Rig's own.
        import cupy

        if nbytes < 0:
            raise ValueError(f"{self.name}: allocate: nbytes = {nbytes} is negative")
        self.check()
        with self._lock:
            if self.budget is not None and self._in_use + nbytes > self.budget:
                raise OutOfMemory(self, nbytes)
            self._in_use += nbytes
        try:
            # Allocated with the device's stream current, so CuPy's pool only
            # hands a freed block back to work ordered after its last use.
            with guard(self, nbytes), self._current(), self.stream:
                ptr = cupy.cuda.alloc(max(nbytes, 1))
                cupy.cuda.runtime.memsetAsync(ptr.ptr, 0, max(nbytes, 1), self.stream.ptr)
        except BaseException:
            with self._lock:
                self._in_use -= nbytes
            raise
        return Memory(self, nbytes, access, None, handle=ptr)

    def read_bytes(self, memory: Memory, offset: int, length: int) -> npt.NDArray[np.uint8]:
        """A host copy of ``length`` bytes of ``memory`` from ``offset``, after
        the work queued before it."""
        import ctypes

        self.check()
        out = np.empty(length, dtype=np.uint8)
        if length:
            with guard(self), self._current():
                src = cast(Any, memory.handle) + offset
                src.copy_to_host_async(ctypes.c_void_p(out.ctypes.data), length, self.stream)
                self.stream.synchronize()
        return out

    def write_bytes(self, memory: Memory, offset: int, data: npt.NDArray[np.uint8]) -> None:
        """Copy host bytes ``data`` into ``memory`` at ``offset``, after the work
        queued before it; returns once the copy is done."""
        import ctypes

        self.check()
        host = np.ascontiguousarray(data, dtype=np.uint8)
        if host.size:
            with guard(self), self._current():
                dst = cast(Any, memory.handle) + offset
                dst.copy_from_host_async(ctypes.c_void_p(host.ctypes.data), host.size, self.stream)
                self.stream.synchronize()

    # ---- kernels --------------------------------------------------------------

    def build_options(self) -> tuple[str, ...]:
        return ("nvrtc", *compile_options(self.arch))

    def _load(self, source: Source) -> Module:
        return GpuModule(self, source, compile(source, self.arch))

    def pointer(self, buffer: Buffer) -> Pointer:
        buffer.check_live("CudaDevice.pointer")
        return Pointer(int(cast(Any, buffer.memory.handle).ptr) + buffer.offset)

    def synchronize(self) -> None:
        self.check()
        with guard(self), self._current():
            self.stream.synchronize()

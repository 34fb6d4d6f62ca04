"""The CUDA library's devices, and why CUDA is or is not available here.

* ``cuda:N`` (:class:`CudaDevice`): GPU ``N``. Its memory is device memory
  from CuPy's memory pool (``shares_host_memory`` False: ``host_bytes`` is
  ``None`` and the door answers ``OFF_HOST`` to a library that needs host
  memory); bytes cross with ``cudaMemcpyAsync`` on the device's stream, which
  also runs every kernel, so work is done in the order it was queued and a
  read waits for it. An allocation failure raises ``OutOfMemory``; a sticky
  CUDA error loses the device (``Lost`` ever after).
* ``cuda-emu:N`` (:class:`EmuDevice`), opened where ``NXKERNEL_CUDA_EMULATE``
  is set (to anything but ``0``, ``false`` or ``no``): a device whose memory
  is host memory and whose kernels run on the CPU in the emulator (the same
  sources, compiled by g++). Its ``shares_host_memory`` is True, because the
  host addresses its bytes (``host_bytes`` is set, ``to_numpy`` reads them in
  place), yet it is a device of its own: its arrays are not the host's, the
  door answers ``WRONG_DEVICE`` to a call that mixes them, and only the CUDA
  library computes on it (a host library must claim ``rig.host`` and memory
  devices, not every device that shares host memory). A fault in a kernel
  loses it, as a sticky error loses a GPU.

Both are :class:`CudaRig`, whose ``load(source)`` gives a module of
launchable functions (:mod:`nxkernel_cuda.launch`), so the library above
them is the same code for both.

:func:`availability` says whether GPUs can be used, and why not: no CuPy, no
driver, a driver too old (for CUDA 12, or for the CuPy installed), no device,
no NVRTC the driver can run the cubins of; where they can, which NVRTC.
Discovery never fails for want of CUDA: :func:`open_devices` opens what it can
and records the rest.
"""

from __future__ import annotations

import abc
import functools
import os
import threading
from typing import Any, Final, cast

import numpy as np
import numpy.typing as npt

from nxkernel_core.rig import Access, Buffer, Memory, OutOfMemory, Rig

from . import nvrtc
from .build import NvrtcUnavailable, Source, compile
from .emulator import driver as emulator
from .launch import Module, Pointer

__all__ = [
    "EMULATE_VARIABLE",
    "MIN_DRIVER",
    "WORD",
    "CudaDevice",
    "CudaRig",
    "EmuDevice",
    "availability",
    "emulation_requested",
    "open_devices",
    "open_failures",
]

#: The variable that opens ``cuda-emu:0``.
EMULATE_VARIABLE: Final = "NXKERNEL_CUDA_EMULATE"

#: The oldest driver (``cudaDriverGetVersion``) the kernels run on: CUDA 12.0
#: (a 525 driver), with cupy-cuda12x and NVRTC 12 (``nxkernel[cuda12]``);
#: CUDA 13 drivers (580 and later) run either, and cupy-cuda13x with NVRTC 13.
MIN_DRIVER: Final = 12000

#: Every allocation of a CUDA device starts at a multiple of ``WORD`` bytes and
#: spans a whole number of words (``nbytes`` rounded up): a sub-byte store
#: (``nxk_st_bits``) updates the aligned 32-bit word holding its byte with
#: atomics (CUDA has none narrower than 16 bits, and no aligned word of 2 or 4
#: bytes lies inside a 1-byte allocation), which reach up to 3 bytes past an
#: array's last byte, never before an allocation's start. Without the padding
#: such a store past an allocation's end is what compute-sanitizer's memcheck
#: and the emulator's report.
WORD: Final = 4


def _words(nbytes: int) -> int:
    """``nbytes`` rounded up to whole words (at least one)."""
    return max(-(-nbytes // WORD) * WORD, WORD)


def emulation_requested() -> bool:
    """Whether ``NXKERNEL_CUDA_EMULATE`` asks for ``cuda-emu:0``."""
    return os.environ.get(EMULATE_VARIABLE, "").strip().lower() not in ("", "0", "false", "no")


def _cuda_version(v: int) -> str:
    return f"{v // 1000}.{v % 1000 // 10}"


@functools.cache
def _probe() -> tuple[bool, str, int]:
    """(usable, why, device count): the checks of :func:`availability`, in order."""
    try:
        import cupy
    except Exception as e:
        return False, (f"CuPy is not importable ({type(e).__name__}: {e}); install it with"
                       " pip install 'nxkernel[cuda]'"), 0
    try:
        driver = int(cupy.cuda.runtime.driverGetVersion())
    except Exception as e:
        return False, f"no CUDA driver could be loaded ({type(e).__name__}: {e})", 0
    if driver == 0:
        return False, "no CUDA driver is installed", 0
    if driver < MIN_DRIVER:
        return False, (f"the CUDA driver is too old: it runs CUDA {_cuda_version(driver)}, and the kernels"
                       f" need CUDA {_cuda_version(MIN_DRIVER)} or newer (a 525 or later driver)"), 0
    try:
        built_for = int(cupy.cuda.runtime.runtimeGetVersion())
    except Exception as e:
        return False, f"CuPy's CUDA runtime could not be loaded ({type(e).__name__}: {e})", 0
    if built_for // 1000 > driver // 1000:
        return False, (f"CuPy is built for CUDA {_cuda_version(built_for)}, newer than the driver's CUDA"
                       f" {_cuda_version(driver)}: pip install 'nxkernel[cuda{driver // 1000}]'"), 0
    try:
        count = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as e:
        return False, f"no CUDA device is usable ({type(e).__name__}: {e})", 0
    if count < 1:
        return False, "no CUDA device is present", 0
    try:
        compiler = nvrtc.select(driver)
    except NvrtcUnavailable as e:
        return False, str(e), 0
    major, minor = compiler.version
    names = []
    for i in range(count):
        try:
            props = cupy.cuda.runtime.getDeviceProperties(i)
            names.append(f"cuda:{i} {_text(props['name'])} (sm_{props['major']}{props['minor']})")
        except Exception as e:
            names.append(f"cuda:{i} (unreadable: {e})")
    return True, (f"{count} device(s): {', '.join(names)}; driver CUDA {_cuda_version(driver)};"
                  f" NVRTC {major}.{minor} ({compiler.path})"), count


def availability(refresh: bool = False) -> tuple[bool, str]:
    """Whether this process can use CUDA GPUs, and in words why (not).

    Checks, in order: CuPy imports; a driver loads; it runs CUDA 12.0 or newer,
    and no older major version than CuPy's; a device is present; an NVRTC whose
    cubins the driver runs loads (:func:`nxkernel_cuda.nvrtc.select`: the
    newest of them, said in the answer). Never
    raises. The answer is computed once (again where ``refresh``).
    """
    if refresh:
        _probe.cache_clear()
    ok, why, _ = _probe()
    return ok, why


def _text(v: object) -> str:
    return v.decode(errors="replace") if isinstance(v, bytes) else str(v)


# --------------------------------------------------------------------------
# The devices
# --------------------------------------------------------------------------


class CudaRig(Rig, metaclass=abc.ABCMeta):
    """A device the CUDA library computes on: loads sources as modules.

    ``arch`` is the architecture its kernels are built for (and, emulated, the
    one whose limits it keeps); ``max_shared_bytes`` the dynamic shared memory
    a block may have.
    """

    arch: str
    emulated: bool
    max_shared_bytes: int

    def __init__(self, name: str, *, model: str, shares_host_memory: bool, budget: int | None = None) -> None:
        super().__init__(name, model=model, shares_host_memory=shares_host_memory, budget=budget)
        self._modules: dict[str, Module] = {}
        self._modules_lock = threading.Lock()

    @property
    def arch_number(self) -> int:
        """The architecture as a number (``sm_90`` -> 90)."""
        return int("".join(ch for ch in self.arch if ch.isdigit()))

    def load(self, source: Source) -> Module:
        """``source`` built for this device and loaded (once per device)."""
        self.check()
        with self._modules_lock:
            module = self._modules.get(source.key)
        if module is None:
            module = self._load(source)
            with self._modules_lock:
                module = self._modules.setdefault(source.key, module)
        return module

    @abc.abstractmethod
    def _load(self, source: Source) -> Module:
        """``source`` built and loaded on this device (the GPU's cubin or the
        emulator's shared object)."""

    @abc.abstractmethod
    def pointer(self, buffer: Buffer) -> Pointer:
        """The device address of ``buffer``'s first byte."""

    @abc.abstractmethod
    def synchronize(self) -> None:
        """Wait until the work queued on the device is done."""


class EmuDevice(CudaRig):
    """``cuda-emu:N``: host memory, kernels run by the emulator (sm_90's limits)."""

    emulated = True

    def __init__(self, index: int = 0, budget: int | None = None) -> None:
        super().__init__(f"cuda-emu:{index}", model="cuda-emu (sm_90 emulated on the CPU)",
                         shares_host_memory=True, budget=budget)
        self.index: Final = index
        self.arch = "sm_90"
        self.max_shared_bytes = emulator.DYNAMIC_SHARED_BYTES
        #: Its live allocations, which its kernels may address (the memory checker's table).
        self.allocations: Final = emulator.Allocations()

    def _allocate(self, nbytes: int) -> npt.NDArray[np.uint8] | None:
        """Host bytes of whole words (:data:`WORD`), registered with the memory
        checker as one allocation; the memory's ``nbytes`` are the first."""
        raw = super()._allocate(_words(nbytes))
        assert raw is not None  # Rig's memory is host memory
        self.allocations.add(int(raw.__array_interface__["data"][0]), raw.size)
        return raw[:nbytes]

    def _release(self, memory: Memory) -> None:
        host = memory.host_bytes
        if host is not None:
            self.allocations.remove(int(host.__array_interface__["data"][0]))
        super()._release(memory)

    def _load(self, source: Source) -> Module:
        return emulator.load(self, source)

    def pointer(self, buffer: Buffer) -> Pointer:
        buffer.check_live("EmuDevice.pointer")
        host = buffer.memory.host_bytes
        assert host is not None  # every memory of the device is host memory
        return Pointer(host.ctypes.data + buffer.offset)

    def synchronize(self) -> None:
        self.check()  # a launch runs to its end before it returns: nothing is queued


class CudaDevice(CudaRig):
    """``cuda:N``: GPU N's memory (CuPy's pool), its stream, NVRTC cubins."""

    emulated = False

    def __init__(self, index: int) -> None:
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(index)
        major, minor = int(props["major"]), int(props["minor"])
        super().__init__(f"cuda:{index}", model=f"{_text(props['name'])} (sm_{major}{minor})",
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
        """A fresh zeroed device memory of ``nbytes`` (allocated in whole
        words, :data:`WORD`); its handle is CuPy's ``MemoryPointer``.
        ``OutOfMemory`` past the budget or where CUDA has no room."""
        # Rig.allocate makes a Memory without a handle, so this overrides it;
        # the budget and in-use accounting are Rig's own.
        import cupy

        from . import gpu

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
            with gpu.guard(self, nbytes), self._current(), self.stream:
                ptr = cupy.cuda.alloc(_words(nbytes))  # whole words: WORD
                cupy.cuda.runtime.memsetAsync(ptr.ptr, 0, _words(nbytes), self.stream.ptr)
        except BaseException:
            with self._lock:
                self._in_use -= nbytes
            raise
        return Memory(self, nbytes, access, None, handle=ptr)

    def read_bytes(self, memory: Memory, offset: int, length: int) -> npt.NDArray[np.uint8]:
        """A host copy of ``length`` bytes of ``memory`` from ``offset``, after
        the work queued before it."""
        import ctypes

        from . import gpu

        self.check()
        out = np.empty(length, dtype=np.uint8)
        if length:
            with gpu.guard(self), self._current():
                src = cast(Any, memory.handle) + offset
                src.copy_to_host_async(ctypes.c_void_p(out.ctypes.data), length, self.stream)
                self.stream.synchronize()
        return out

    def write_bytes(self, memory: Memory, offset: int, data: npt.NDArray[np.uint8]) -> None:
        """Copy host bytes ``data`` into ``memory`` at ``offset``, after the work
        queued before it; returns once the copy is done."""
        import ctypes

        from . import gpu

        self.check()
        host = np.ascontiguousarray(data, dtype=np.uint8)
        if host.size:
            with gpu.guard(self), self._current():
                dst = cast(Any, memory.handle) + offset
                dst.copy_from_host_async(ctypes.c_void_p(host.ctypes.data), host.size, self.stream)
                self.stream.synchronize()

    # ---- kernels --------------------------------------------------------------

    def _load(self, source: Source) -> Module:
        from .gpu import GpuModule

        return GpuModule(self, source, compile(source, self.arch))

    def pointer(self, buffer: Buffer) -> Pointer:
        buffer.check_live("CudaDevice.pointer")
        return Pointer(int(cast(Any, buffer.memory.handle).ptr) + buffer.offset)

    def synchronize(self) -> None:
        from . import gpu

        self.check()
        with gpu.guard(self), self._current():
            self.stream.synchronize()


# --------------------------------------------------------------------------
# Opening
# --------------------------------------------------------------------------

_opened: tuple[Rig, ...] | None = None
_failures: list[str] = []
_open_lock: Final = threading.Lock()


def open_devices(refresh: bool = False) -> tuple[Rig, ...]:
    """The devices this library opens, the same objects on every call (new ones
    where ``refresh``): ``cuda:N`` for every GPU where :func:`availability`
    allows, and ``cuda-emu:0`` where emulation is requested. Never raises: a
    device that fails to open is left out and its error recorded
    (:func:`open_failures`)."""
    global _opened
    with _open_lock:
        if _opened is not None and not refresh:
            return _opened
        _failures.clear()
        devices: list[Rig] = []
        ok, _, count = _probe()
        for i in range(count if ok else 0):
            try:
                devices.append(CudaDevice(i))
            except Exception as e:
                _failures.append(f"cuda:{i}: {type(e).__name__}: {e}")
        if emulation_requested():
            devices.append(EmuDevice(0))
        _opened = tuple(devices)
        return _opened


def open_failures() -> tuple[str, ...]:
    """The devices :func:`open_devices` could not open, each with its error."""
    return tuple(_failures)

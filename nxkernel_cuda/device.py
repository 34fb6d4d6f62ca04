"""The CUDA library's devices, and why CUDA is or is not available here.

* ``cuda:N`` (:class:`~nxkernel_cuda.runtime.CudaDevice`, the GPU runtime's):
  GPU ``N``, its memory device memory, its work queued on its stream. An
  allocation failure raises ``OutOfMemory``; a sticky CUDA error loses the
  device (``Lost`` ever after).
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

Both are :class:`~nxkernel_cuda.launch.CudaRig`, whose ``load(source)``
gives a module of launchable functions, so the library above them is the same
code for both. This module re-exports ``CudaRig`` and ``CudaDevice``, the
names the library's users know.

:func:`availability` says whether GPUs can be used, and why not: no CuPy, no
driver, a driver too old (for CUDA 12, or for the CuPy installed), no device,
no NVRTC the driver can run the cubins of; where they can, which NVRTC.
Discovery never fails for want of CUDA: :func:`open_devices` opens what it can
and records the rest.
"""

from __future__ import annotations

import functools
import os
import threading
from typing import Final

import numpy as np
import numpy.typing as npt

from nxkernel_core.rig import Buffer, Memory, Rig

from . import nvrtc
from .build import NvrtcUnavailable, Source
from .emulator import driver as emulator
from .launch import CudaRig, Module, Pointer
from .runtime import CudaDevice, decoded

__all__ = [
    "EMULATE_VARIABLE",
    "MIN_DRIVER",
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
            names.append(f"cuda:{i} {decoded(props['name'])} (sm_{props['major']}{props['minor']})")
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


# --------------------------------------------------------------------------
# The devices
# --------------------------------------------------------------------------


class EmuDevice(CudaRig):
    """``cuda-emu:N``: host memory, kernels run by the emulator (sm_90's limits)."""

    def __init__(self, index: int = 0, budget: int | None = None) -> None:
        super().__init__(f"cuda-emu:{index}", model="cuda-emu (sm_90 emulated on the CPU)",
                         shares_host_memory=True, budget=budget)
        self.index: Final = index
        self.arch = "sm_90"
        self.max_shared_bytes = emulator.DYNAMIC_SHARED_BYTES
        #: Its live allocations, which its kernels may address (the memory checker's table).
        self.allocations: Final = emulator.Allocations()

    def _allocate(self, nbytes: int) -> npt.NDArray[np.uint8] | None:
        """Host bytes, registered with the memory checker rounded up to a
        4-byte word: the sub-byte stores (``nxk_st_bits``) read and write the
        aligned word holding their byte with 32-bit atomics, which reach up to
        3 bytes past an array's end. A GPU's allocations are padded far more
        (256 bytes), so it does not fault there; compute-sanitizer would
        report it. (Rig's host bytes are padded, so the word exists.)"""
        raw = super()._allocate(nbytes)
        assert raw is not None  # Rig's memory is host memory
        self.allocations.add(int(raw.__array_interface__["data"][0]), -(-nbytes // 4) * 4)
        return raw

    def _release(self, memory: Memory) -> None:
        host = memory.host_bytes
        if host is not None:
            self.allocations.remove(int(host.__array_interface__["data"][0]))
        super()._release(memory)

    def build_options(self) -> tuple[str, ...]:
        flags = (*emulator.FLAGS, *(emulator.CHECK_FLAGS if emulator.memcheck() else ()))
        return (os.environ.get("NXKERNEL_CXX", "g++"), *flags)

    def _load(self, source: Source) -> Module:
        return emulator.load(self, source)

    def pointer(self, buffer: Buffer) -> Pointer:
        buffer.check_live("EmuDevice.pointer")
        host = buffer.memory.host_bytes
        assert host is not None  # every memory of the device is host memory
        return Pointer(host.ctypes.data + buffer.offset)

    def synchronize(self) -> None:
        self.check()  # a launch runs to its end before it returns: nothing is queued


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

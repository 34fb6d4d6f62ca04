"""The GPU path's plumbing (CudaDevice, GpuModule, GpuFunction, guard) without
a GPU: a stand-in ``cupy`` whose device memory is host memory and whose
RawModule runs each cubin's kernels in the emulator, found by the cubin's path
and lowered names. It checks what this machine can check: allocation and its
errors, copies, addresses, lowered-name look-up, argument conversion and the
mapping of CUDA errors; not CuPy itself, nor a GPU's arithmetic."""

from __future__ import annotations

import ctypes
import sys
import types
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from nxkernel_core import dtype as D
from nxkernel_core import orders
from nxkernel_core.array import Array
from nxkernel_core.rig import Lost, OutOfMemory
from nxkernel_cuda import build, catalog, device
from nxkernel_cuda.device import CudaDevice, EmuDevice
from nxkernel_cuda.emulator import driver
from nxkernel_cuda.launch import Pointer

from . import copy_kernel as copy
from . import lane_sum, probe

LIMIT = 1 << 20  # the stand-in device's memory


class _Error(RuntimeError):
    def __init__(self, status: int) -> None:
        super().__init__(f"CUDA error {status}")
        self.status = status


class _OutOfMemory(MemoryError):
    pass


#: CUDA's current device of the stand-in (cudaSetDevice's), per the stack of
#: ``Device`` contexts entered.
_current: list[int] = [0]

#: cudaErrorInvalidResourceHandle: what CUDA answers a copy queued on a
#: stream of a device that is not current.
_INVALID_HANDLE = 400


def _on_device(device: int) -> None:
    """Fail as CUDA does where ``device`` is not the current device."""
    if _current[-1] != device:
        raise _Error(_INVALID_HANDLE)


class _Ptr:
    """A stand-in MemoryPointer over host bytes of device ``device``."""

    def __init__(self, base: Any, ptr: int, device: int) -> None:
        self.base, self.ptr, self.device = base, ptr, device

    def __add__(self, offset: int) -> _Ptr:
        return _Ptr(self.base, self.ptr + offset, self.device)

    def copy_to_host_async(self, dst: ctypes.c_void_p, size: int, stream: _Stream) -> None:
        _on_device(self.device)
        _on_device(stream.device)
        ctypes.memmove(dst.value, self.ptr, size)

    def copy_from_host_async(self, src: ctypes.c_void_p, size: int, stream: _Stream) -> None:
        _on_device(self.device)
        _on_device(stream.device)
        ctypes.memmove(self.ptr, src.value, size)


class _Context:
    def __enter__(self) -> _Context:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


class _Device(_Context):
    """``cupy.cuda.Device(i)``: current while its context is entered."""

    def __init__(self, index: int) -> None:
        self.index = index

    def __enter__(self) -> _Device:
        _current.append(self.index)
        return self

    def __exit__(self, *exc: object) -> None:
        _current.pop()


class _Stream(_Context):
    ptr = 1234

    def __init__(self, non_blocking: bool = False) -> None:
        self.device = _current[-1]  # a stream belongs to the device current at its creation

    def synchronize(self) -> None:
        _on_device(self.device)


class _Kernel:
    """A stand-in RawKernel: runs the kernel in the emulator."""

    fail_with: int | None = None

    def __init__(self, function: Any) -> None:
        self.function = function
        self.max_dynamic_shared_size_bytes = 0
        self.calls: list[tuple[Any, ...]] = []

    def __call__(self, grid: tuple[int, ...], block: tuple[int, ...], args: tuple[Any, ...],
                 shared_mem: int = 0) -> None:
        if _Kernel.fail_with is not None:
            raise _Error(_Kernel.fail_with)
        self.calls.append(args)
        converted = [Pointer(int(a)) if isinstance(a, np.uint64) else a for a in args]
        self.function(grid, block, converted, shared_bytes=shared_mem)


class _RawModule:
    #: The emulated device that runs the stand-in's kernels; the stand-in's
    #: memory is its allocations, which its memory checker lets kernels address.
    runner: EmuDevice

    def __init__(self, path: str) -> None:
        self.path = path

    def get_function(self, lowered: str) -> _Kernel:
        for src in (*catalog.sources(), probe.probe_source(), lane_sum.source(), copy.source()):
            cubin = build.compile(src, "sm_90")
            if str(cubin.path) == self.path:
                expr = next(k for k, v in cubin.lowered.items() if v == lowered)
                return _Kernel(driver.load(_RawModule.runner, src).function(expr))
        raise _Error(500)  # cudaErrorNotFound


@pytest.fixture
def gpu(monkeypatch: pytest.MonkeyPatch) -> Iterator[CudaDevice]:
    """A CudaDevice over the stand-in cupy."""
    held: list[Any] = []
    runner = _RawModule.runner = EmuDevice(9)

    def alloc(n: int) -> _Ptr:
        if n > LIMIT:
            raise _OutOfMemory(n)
        raw = np.zeros(n, dtype=np.uint8)
        held.append(raw)
        runner.allocations.add(raw.ctypes.data, n)
        return _Ptr(raw, raw.ctypes.data, _current[-1])

    runtime = types.SimpleNamespace(
        getDeviceProperties=lambda i: {"name": b"Stand-in H200", "major": 9, "minor": 0,
                                       "sharedMemPerBlockOptin": 232448},
        memsetAsync=lambda ptr, value, n, stream: ctypes.memset(ptr, value, n),
        CUDARuntimeError=_Error,
    )
    cuda = types.SimpleNamespace(
        runtime=runtime, driver=types.SimpleNamespace(CUDADriverError=_Error),
        memory=types.SimpleNamespace(OutOfMemoryError=_OutOfMemory),
        Device=_Device, Stream=_Stream, alloc=alloc,
    )
    module = types.ModuleType("cupy")
    module.cuda = cuda  # type: ignore[attr-defined]
    module.RawModule = _RawModule  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cupy", module)
    _Kernel.fail_with = None
    yield CudaDevice(0)
    _Kernel.fail_with = None


def test_the_device_describes_itself(gpu: CudaDevice) -> None:
    assert gpu.name == "cuda:0" and gpu.model == "Stand-in H200 (sm_90)"
    assert gpu.arch == "sm_90" and gpu.max_shared_bytes == 232448 and not gpu.shares_host_memory


def test_memory_is_device_memory_read_through_copies(gpu: CudaDevice) -> None:
    a = Array.from_numpy(np.arange(100, dtype=np.int32), gpu)
    assert a.buffer.memory.host_bytes is None
    assert a.to_numpy().tolist() == list(range(100))
    assert a[10:13].to_numpy().tolist() == [10, 11, 12]
    assert gpu.pointer(a.buffer).address == a.buffer.memory.handle.ptr  # type: ignore[attr-defined]
    assert gpu.in_use == 400


def test_kernels_launch_with_their_lowered_names(gpu: CudaDevice) -> None:
    x = np.random.default_rng(0).standard_normal((3, 2000)).astype(np.float32)
    src = Array.from_numpy(x, gpu)
    dst = Array.empty(D.float32, (3,), gpu)
    lane_sum.sum_rows(dst, src, threads=128)
    want = orders.lane_reduce(x, np.add, np.float32(0))
    assert dst.to_numpy().view(np.uint32).tolist() == want.view(np.uint32).tolist()
    module = gpu.load(lane_sum.source())
    fn = module.function(lane_sum.kernel_name(128))
    assert isinstance(fn._kernel.calls[0][0], np.uint64)  # a Pointer goes to CuPy as a uint64
    assert gpu.load(lane_sum.source()) is module  # loaded once per device
    data = np.arange(999, dtype=np.uint8)
    c_src, c_dst = Array.from_numpy(data, gpu), Array.empty(D.uint8, (999,), gpu)
    copy.copy(c_dst, c_src)
    assert c_dst.to_numpy().tobytes() == data.tobytes()


def test_large_dynamic_shared_memory_is_opted_into(gpu: CudaDevice) -> None:
    fn = gpu.load(probe.probe_source()).function("probe_reverse")
    x = Array.from_numpy(np.arange(1024, dtype=np.int32), gpu)
    out = Array.empty(D.int32, (1024,), gpu)
    fn(1, 1024, [gpu.pointer(out.buffer), gpu.pointer(x.buffer)], shared_bytes=64 * 1024)
    assert fn._kernel.max_dynamic_shared_size_bytes == 64 * 1024
    assert out.to_numpy().tolist() == list(range(1023, -1, -1))


def test_allocation_failures_are_out_of_memory(gpu: CudaDevice) -> None:
    with pytest.raises(OutOfMemory):
        gpu.allocate(LIMIT + 1)
    assert gpu.in_use == 0 and gpu.lost is None


def test_a_sticky_error_loses_the_device(gpu: CudaDevice) -> None:
    fn = gpu.load(copy.source()).function(copy.kernel_name(1))
    buf = Array.empty(D.uint8, (16,), gpu)
    _Kernel.fail_with = 1  # cudaErrorInvalidValue: not sticky, raised as it is
    with pytest.raises(_Error):
        fn(1, 32, [gpu.pointer(buf.buffer), gpu.pointer(buf.buffer), np.int64(0)])
    assert gpu.lost is None
    _Kernel.fail_with = 700  # cudaErrorIllegalAddress
    with pytest.raises(Lost, match="illegal memory address"):
        fn(1, 32, [gpu.pointer(buf.buffer), gpu.pointer(buf.buffer), np.int64(0)])
    with pytest.raises(Lost):
        buf.to_numpy()
    with pytest.raises(Lost):
        gpu.load(lane_sum.source())


def test_host_side_calls_make_their_device_current(gpu: CudaDevice) -> None:
    """With two GPUs, every host-side call on cuda:1 (allocation, copies both
    ways, synchronisation, a launch) works while cuda:0 is CUDA's current
    device: each makes its own device current, as the stand-in, like CUDA,
    refuses a copy on a stream of a device that is not current."""
    second = CudaDevice(1)
    data = np.arange(200, dtype=np.int32)
    with _Device(0):
        a = Array.from_numpy(data, second)  # allocate and write_bytes
        assert a.buffer.memory.handle.device == 1  # type: ignore[attr-defined]
        assert a.to_numpy().tolist() == data.tolist()  # read_bytes
        second.synchronize()
        b = Array.empty(D.int32, (200,), second)
        copy.copy(b, a)  # a launch
        assert b.to_numpy().tolist() == data.tolist()
        c = Array.from_numpy(data[::-1].copy(), gpu)  # and cuda:0 alongside
        assert c.to_numpy()[0] == 199
    raw: Any = a.buffer.memory.handle
    with _Device(0), pytest.raises(_Error):  # what a call that does not make its device current meets
        raw.copy_to_host_async(ctypes.c_void_p(np.empty(4, np.uint8).ctypes.data), 4, second.stream)


def test_open_devices_opens_every_gpu(monkeypatch: pytest.MonkeyPatch, gpu: CudaDevice) -> None:
    monkeypatch.setattr(device, "_probe", lambda: (True, "stand-in", 2))
    monkeypatch.delenv(device.EMULATE_VARIABLE, raising=False)
    try:
        opened = device.open_devices(refresh=True)
        assert [d.name for d in opened] == ["cuda:0", "cuda:1"]
    finally:
        monkeypatch.undo()
        device.open_devices(refresh=True)

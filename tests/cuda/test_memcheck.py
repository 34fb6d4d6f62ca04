"""The emulated device faults where a GPU would: each fault a GPU (and
compute-sanitizer's memcheck) reports is planted (``kernels/faults.cu``) and
caught, naming the kernel, the block and thread and the address; the device
is then lost, as a GPU's sticky error loses it. Launches CUDA refuses are
refused before they run, the device unharmed."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from nxkernel_core.array import Array
from nxkernel_core.rig import Lost
from nxkernel_cuda.build import Source
from nxkernel_cuda.device import EmuDevice
from nxkernel_cuda.emulator import driver
from nxkernel_cuda.launch import SHARED_WITHOUT_OPT_IN, LaunchError, Pointer

from .probe import PROBE_FILE
from .support import needs_nvrtc


@pytest.fixture(autouse=True)
def _memory_checker(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kernels these tests build carry the emulator's memory checker (off by
    default: ``driver.memcheck``)."""
    monkeypatch.setenv(driver.MEMCHECK_VARIABLE, "1")


FAULTS = Source("faults.cu", (PROBE_FILE.parent / "faults.cu").read_text(),
                ("fault_global", "fault_shared", "fault_local"))
WHO = 5  # the thread that makes the access
N = 64  # bytes of the planted allocation


def _arrays(dev: EmuDevice) -> tuple[Array, Array]:
    """The memory a kernel accesses (N bytes) and its 8-byte output."""
    return Array.from_numpy(np.zeros(N, np.uint8), dev), Array.from_numpy(np.zeros(1, np.uint64), dev)


def _global(dev: EmuDevice, at: Pointer, offset: int, width: int, store: bool, out: Array) -> None:
    dev.load(FAULTS).function("fault_global")(2, 32, [at, np.int64(offset), np.int32(width), np.int32(store),
                                                      np.int32(WHO), dev.pointer(out.buffer)])


@pytest.mark.parametrize(("offset", "width", "store"), [(0, 8, False), (16, 16, True), (N - 1, 1, True),
                                                        (N - 4, 4, False)])
def test_accesses_inside_an_allocation_and_aligned_run(emu: EmuDevice, offset: int, width: int,
                                                        store: bool) -> None:
    mem, out = _arrays(emu)
    mem.write_numpy(np.arange(N, dtype=np.uint8))
    _global(emu, emu.pointer(mem.buffer), offset, width, store, out)
    assert emu.lost is None
    if not store and width == 8:
        assert int(out.to_numpy()[0]) == int.from_bytes(bytes(range(8)), "little")


_THREAD = rf"kernel fault_global faulted: block \(0,0,0\) thread \({WHO},0,0\): "


@pytest.mark.parametrize(("offset", "width", "store", "what"), [
    (4, 8, False, r"invalid __global__ read of 8 bytes at 0x[0-9a-f]+: misaligned address, not a multiple"
                  r" of 8"),
    (2, 4, True, r"invalid __global__ write of 4 bytes at 0x[0-9a-f]+: misaligned address, not a multiple"
                 r" of 4"),
    (1, 2, False, r"invalid __global__ read of 2 bytes at 0x[0-9a-f]+: misaligned address, not a multiple"
                  r" of 2"),
    (N, 4, False, r"invalid __global__ read of 4 bytes at 0x[0-9a-f]+: 4 bytes past the end of the nearest"
                  rf" allocation, 0x[0-9a-f]+ of {N} bytes"),
    (N + 64, 8, True, r"invalid __global__ write of 8 bytes at 0x[0-9a-f]+: 72 bytes past the end"),
    (-8, 8, False, r"invalid __global__ read of 8 bytes at 0x[0-9a-f]+: 8 bytes before the nearest"
                   r" allocation"),
])
def test_a_misaligned_or_out_of_bounds_global_access_faults(emu: EmuDevice, offset: int, width: int,
                                                             store: bool, what: str) -> None:
    mem, out = _arrays(emu)
    with pytest.raises(Lost, match=_THREAD + what):
        _global(emu, emu.pointer(mem.buffer), offset, width, store, out)
    assert emu.lost is not None
    with pytest.raises(Lost):  # lost for good, as after a GPU's sticky error
        out.to_numpy()


def test_host_memory_and_freed_memory_are_no_allocation(emu: EmuDevice) -> None:
    """A kernel may address only the device's live allocations: not host
    memory (a NumPy array's), nor an allocation freed before the launch."""
    _mem, out = _arrays(emu)
    host = np.zeros(N, np.uint8)
    with pytest.raises(Lost, match=_THREAD + r"invalid __global__ read of 8 bytes"):
        _global(emu, Pointer(host.ctypes.data), 0, 8, False, out)
    other = EmuDevice(1)
    freed = Array.from_numpy(np.zeros(N, np.uint8), other)
    at = other.pointer(freed.buffer)
    out1 = Array.from_numpy(np.zeros(1, np.uint64), other)
    del freed
    gc.collect()
    with pytest.raises(Lost, match=_THREAD + r"invalid __global__ write of 4 bytes"):
        _global(other, at, 0, 4, True, out1)


def test_a_null_pointer_faults(emu: EmuDevice) -> None:
    _mem, out = _arrays(emu)
    with pytest.raises(Lost, match=_THREAD + r"invalid __global__ read of 4 bytes at 0x0: "):
        _global(emu, Pointer(0), 0, 4, False, out)


def test_a_device_reads_no_other_devices_memory(emu: EmuDevice) -> None:
    mem, _ = _arrays(EmuDevice(1))
    _m, out = _arrays(emu)
    with pytest.raises(Lost, match=_THREAD + r"invalid __global__ read"):
        _global(emu, EmuDevice(1).pointer(mem.buffer), 0, 4, False, out)


def test_shared_accesses_past_the_launchs_bytes_or_misaligned_fault(emu: EmuDevice) -> None:
    fn = emu.load(FAULTS).function("fault_shared")
    _m, out = _arrays(emu)
    fn(1, 64, [np.int64(60), np.int32(4), np.int32(WHO), emu.pointer(out.buffer)], shared_bytes=64)
    assert emu.lost is None
    with pytest.raises(Lost, match=r"kernel fault_shared faulted: block \(0,0,0\) thread \(5,0,0\): invalid"
                                   r" __shared__ read of 4 bytes at 0x[0-9a-f]+: byte 64 of dynamic shared"
                                   r" memory, past the 64 bytes its launch asked for"):
        fn(1, 64, [np.int64(64), np.int32(4), np.int32(WHO), emu.pointer(out.buffer)], shared_bytes=64)
    dev = EmuDevice(0)
    fn = dev.load(FAULTS).function("fault_shared")
    _m, out = _arrays(dev)
    with pytest.raises(Lost, match=r"kernel fault_shared faulted: block \(0,0,0\) thread \(5,0,0\): invalid"
                                   r" __shared__ read of 8 bytes at 0x[0-9a-f]+: misaligned address, not a"
                                   r" multiple of 8"):
        fn(1, 64, [np.int64(4), np.int32(8), np.int32(WHO), dev.pointer(out.buffer)], shared_bytes=64)


def test_a_local_array_read_far_past_its_end_faults(emu: EmuDevice) -> None:
    fn = emu.load(FAULTS).function("fault_local")
    _m, out = _arrays(emu)
    fn(1, 32, [np.int64(3), np.int32(WHO), emu.pointer(out.buffer)])
    assert int(out.to_numpy()[0]) == 3
    with pytest.raises(Lost, match=r"kernel fault_local faulted: block \(0,0,0\) thread \(5,0,0\): invalid"
                                   r" __global__ read of 8 bytes"):
        fn(1, 32, [np.int64(1 << 20), np.int32(WHO), emu.pointer(out.buffer)])


def test_launches_cuda_refuses_are_refused_before_they_run(emu: EmuDevice) -> None:
    """Threads per block over 1024 or a block extent over (1024, 1024, 64), a
    grid extent of 0 or over (2^31 - 1, 65535, 65535), dynamic shared memory
    over 48 KiB without the function attribute or over 227 KiB at all."""
    fn = emu.load(FAULTS).function("fault_shared")
    _m, out = _arrays(emu)
    args = [np.int64(0), np.int32(4), np.int32(WHO), emu.pointer(out.buffer)]
    bad = [((1,), (1025,), 0, "block"), ((1,), (512, 4), 0, "2048 threads"), ((1,), (1, 1, 65), 0, "block"),
           ((1,), (2048, 1), 0, "block"), ((0,), (32,), 0, "grid"), ((1, 65536), (32,), 0, "grid"),
           ((2**31,), (32,), 0, "grid"),
           ((1,), (32,), SHARED_WITHOUT_OPT_IN + 1, "more than the 49152 the kernel opted into"),
           ((1,), (32,), driver.DYNAMIC_SHARED_BYTES + 1, "outside")]
    for grid, block, shared, match in bad:
        with pytest.raises(LaunchError, match=match):
            fn.launch(grid, block, args, shared_bytes=shared)
    with pytest.raises(LaunchError, match="outside"):
        fn.max_dynamic_shared_size_bytes = driver.DYNAMIC_SHARED_BYTES + 1
    assert emu.lost is None and fn.max_dynamic_shared_size_bytes == SHARED_WITHOUT_OPT_IN
    fn.max_dynamic_shared_size_bytes = 64 * 1024  # opting in, as cudaFuncSetAttribute does
    fn.launch((1,), (32,), args, shared_bytes=64 * 1024)
    fn((1,), (32,), args, shared_bytes=100 * 1024)  # a call opts in where it needs to
    assert fn.max_dynamic_shared_size_bytes == 100 * 1024 and emu.lost is None


@needs_nvrtc
def test_the_planted_faults_compile_for_the_gpu() -> None:
    from nxkernel_cuda import build

    assert set(build.compile(FAULTS, "sm_90").lowered) == set(FAULTS.kernels)

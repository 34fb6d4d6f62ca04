"""The emulated device faults where a GPU would: each fault a GPU (and
compute-sanitizer's memcheck) reports is planted (``kernels/faults.cu``) and
caught, naming the kernel, the block and thread and the address; the device
is then lost, as a GPU's sticky error loses it. Launches CUDA refuses are
refused before they run, the device unharmed."""

from __future__ import annotations

import ctypes
import gc
import threading
import time

import numpy as np
import pytest

from nxkernel_core import dtype as D
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_core.prog import Prog
from nxkernel_core.rig import Buffer, Lost, host
from nxkernel_cuda.build import Source
from nxkernel_cuda.device import WORD, EmuDevice
from nxkernel_cuda.emulator import driver
from nxkernel_cuda.launch import SHARED_WITHOUT_OPT_IN, LaunchError, Pointer
from nxkernel_cuda.library import LIBRARY
from nxkernel_host.library import library as HOST

from .probe import PROBE_FILE
from .support import needs_nvrtc, same_bits, values


@pytest.fixture(autouse=True)
def _memory_checker(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kernels these tests build carry the emulator's memory checker (off by
    default: ``driver.memcheck``)."""
    monkeypatch.setenv(driver.MEMCHECK_VARIABLE, "1")


FAULTS = Source("faults.cu", (PROBE_FILE.parent / "faults.cu").read_text(),
                ("fault_global", "fault_shared", "fault_local", "fault_bits", "fault_wait"))
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


def _pairs(allocs: driver.Allocations) -> list[int]:
    """The table a launch checks against, read where ``table`` says it is."""
    at, count = allocs.table()
    return list((ctypes.c_uint64 * (2 * count)).from_address(at))


def test_a_free_inside_the_tables_lock_waits_for_nothing() -> None:
    """A memory's finalizer may run while its thread holds the allocation
    table's lock (the collector, at an allocation in ``table`` or ``add``):
    ``remove`` takes no lock, the next table leaves the freed allocation out,
    and an address freed then allocated again is the new allocation."""
    allocs = driver.Allocations()
    allocs.add(0x1000, 64)
    allocs.add(0x2000, 32)
    finished = threading.Event()

    def free_inside_the_lock() -> None:
        with allocs._lock:
            allocs.remove(0x1000)
        finished.set()

    thread = threading.Thread(target=free_inside_the_lock, daemon=True)
    thread.start()
    thread.join(10)
    assert finished.is_set(), "a free waited on the allocation table's lock"
    assert _pairs(allocs) == [0x2000, 0x2020]
    allocs.remove(0x2000)
    allocs.add(0x2000, 16)
    assert _pairs(allocs) == [0x2000, 0x2010] and len(allocs) == 1


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


def _store_bits(dev: EmuDevice, at: int, pos: int, width: int, code: int) -> None:
    dev.load(FAULTS).function("fault_bits")(1, 32, [Pointer(at), np.int64(pos), np.int32(width),
                                                     np.uint32(code), np.int32(WHO)])


@pytest.mark.parametrize("nbytes", [1, 2, 3, 5, 6, 7, 8])
def test_a_sub_byte_store_stays_inside_a_devices_allocation(emu: EmuDevice, nbytes: int) -> None:
    """A sub-byte store updates the aligned 32-bit word holding its byte
    (``nxk_st_bits``), up to 3 bytes past the byte: the device allocates whole
    words (``device.WORD``), so storing the last 4-bit and 1-bit element of an
    allocation of any size stays inside it, and sets only its own bits."""
    mem = Buffer.create(emu, nbytes)
    at = emu.pointer(mem).address
    assert at % WORD == 0
    _store_bits(emu, at, 2 * nbytes - 1, 4, 0x9)
    _store_bits(emu, at, 8 * nbytes - 2, 1, 1)
    assert emu.lost is None
    want = np.zeros(nbytes, np.uint8)
    want[-1] = 0x90 | 0x40
    assert np.array_equal(mem.host_view(), want)


@pytest.mark.parametrize(("nbytes", "past"), [(1, 3), (2, 2), (3, 1), (5, 3)])
def test_a_sub_byte_store_past_an_unpadded_allocation_faults(emu: EmuDevice, nbytes: int, past: int) -> None:
    """Planted: an allocation that ends at its last byte (as an allocator
    without the devices' padding would give it): the store of its last
    element reads and writes the word past its end, which the checker
    reports as compute-sanitizer would."""
    raw = np.zeros(128, np.uint8)
    at = raw.ctypes.data + (-raw.ctypes.data) % 64
    emu.allocations.add(at, nbytes)
    try:
        with pytest.raises(Lost, match=r"kernel fault_bits faulted: block \(0,0,0\) thread \(5,0,0\): invalid"
                                       rf" __global__ read of 4 bytes at 0x{at + (nbytes - 1) // 4 * 4:x}:"
                                       rf" {past} bytes past the end of the nearest allocation, 0x{at:x} of"
                                       rf" {nbytes} bytes"):
            _store_bits(emu, at, 2 * nbytes - 1, 4, 0x9)
    finally:
        emu.allocations.remove(at)


SUB_BYTE = tuple(dt for dt in D.all if dt.is_sub_byte)


@pytest.mark.parametrize("n", [1, 5, 11, 21])
def test_the_library_stores_sub_byte_arrays_that_end_their_allocation(emu: EmuDevice, n: int) -> None:
    """A map copying one array of each sub-byte dtype into fresh destinations
    of n elements (1 to 11 bytes, each ending its allocation): no fault under
    the checker, and the host library's bits."""
    b = Prog.build(list(SUB_BYTE))
    spec = S.Map(b.finish(*b.ins), (S.PLAIN,) * len(SUB_BYTE))
    xs = [values(dt, n, 3) for dt in SUB_BYTE]
    dsts = [Array.empty(dt, (n,), emu) for dt in SUB_BYTE]
    ops = [Array.from_numpy(x, emu, dt) for x, dt in zip(xs, SUB_BYTE, strict=True)]
    assert LIBRARY.map(spec, dsts, ops) is Answer.DONE
    hdsts = [Array.empty(dt, (n,), host) for dt in SUB_BYTE]
    hops = [Array.from_numpy(x, host, dt) for x, dt in zip(xs, SUB_BYTE, strict=True)]
    assert HOST.map(spec, hdsts, hops) is Answer.DONE
    for dt, d, h in zip(SUB_BYTE, dsts, hdsts, strict=True):
        assert same_bits(d.to_numpy(), h.to_numpy(), dt), dt.name


def test_code_of_the_module_another_thread_runs_during_a_launch_is_not_the_kernels(emu: EmuDevice) -> None:
    """While a kernel runs, another OS thread runs instrumented code of the same
    module (here the query of a kernel's parameters; at a thread's exit, the
    destructor of the runtime's thread-local state, which crashed a
    whole-kit run): that is not the kernel's, so it is not checked (checked,
    its host addresses faulted in the launch's name from a thread with no
    fiber, a segmentation fault). The launch runs on, checked, to its end."""
    module = emu.load(FAULTS)
    flag = Array.from_numpy(np.zeros(4, np.int32), emu)
    view = flag.buffer.host_view().view(np.int32)
    failures: list[BaseException] = []
    returned = threading.Event()

    def other() -> None:
        try:
            while view[1] == 0 and not returned.is_set():  # until the kernel runs
                time.sleep(0.001)
            module.function("fault_bits")  # the module's code, on this thread
        except BaseException as e:
            failures.append(e)
        view[0] = 1

    worker = threading.Thread(target=other)
    worker.start()
    try:
        module.function("fault_wait")(1, 32, [emu.pointer(flag.buffer), np.int64(1 << 32)])
    finally:
        returned.set()
        worker.join()
    assert not failures and emu.lost is None
    assert view[2] == 1  # the kernel saw the other thread finish while it ran


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

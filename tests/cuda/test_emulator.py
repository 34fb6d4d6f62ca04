"""The emulated device runs CUDA's execution model: barriers, dynamic shared
memory, warp collectives (divergent ones too), atomics, faults and limits."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from nxkernel_core.array import Array
from nxkernel_core.rig import Lost
from nxkernel_cuda.build import CompileError, Source
from nxkernel_cuda.device import EmuDevice
from nxkernel_cuda.emulator import driver
from nxkernel_cuda.launch import LaunchError, Pointer

from . import probe


def _on(dev: EmuDevice, a: npt.NDArray[np.generic]) -> tuple[Array, Pointer]:
    """A copy of ``a`` on ``dev`` and its address. The caller keeps the array
    while it uses the address: a Pointer does not keep memory alive."""
    arr = Array.from_numpy(np.ascontiguousarray(a), dev)
    return arr, dev.pointer(arr.buffer)


def _zeros(dev: EmuDevice, shape: tuple[int, ...] | int, dtype: type = np.int32) -> tuple[Array, Pointer]:
    return _on(dev, np.zeros(shape, dtype=dtype))


def test_barrier_and_dynamic_shared_memory(emu: EmuDevice, probe_source: Source) -> None:
    x = np.arange(3 * 96, dtype=np.int32)
    _xs, xp = _on(emu, x)  # the array lives while its pointer is used
    out, op = _zeros(emu, x.size)
    emu.load(probe_source).function("probe_reverse")(3, 96, [op, xp], shared_bytes=96 * 4)
    assert np.array_equal(out.to_numpy(), x.reshape(3, 96)[:, ::-1].reshape(-1))


def test_a_write_past_the_launchs_dynamic_shared_memory_faults(emu: EmuDevice, probe_source: Source,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A block that writes past the dynamic shared memory its launch asked for
    (96 ints into 64 ints' room) faults at the first such write, thread 64's,
    as it would on a GPU, instead of writing into the emulator's spare room
    (the memory checker's finding, so built with it on)."""
    monkeypatch.setenv(driver.MEMCHECK_VARIABLE, "1")
    x = np.arange(96, dtype=np.int32)
    _xs, xp = _on(emu, x)
    _out, op = _zeros(emu, x.size)
    with pytest.raises(Lost, match=r"kernel probe_reverse faulted: block \(0,0,0\) thread \(64,0,0\): invalid"
                       r" __shared__ write of 4 bytes at 0x[0-9a-f]+: byte 256 of dynamic shared memory, past"
                       r" the 256 bytes its launch asked for"):
        emu.load(probe_source).function("probe_reverse")(1, 96, [op, xp], shared_bytes=64 * 4)


def test_extern_shared_names_alias_one_array(emu: EmuDevice, probe_source: Source) -> None:
    out, op = _zeros(emu, 2, np.float32)
    emu.load(probe_source).function("probe_dynamic_floats")(2, 64, [op, np.int32(64)], shared_bytes=256)
    assert out.to_numpy().tolist() == [0.5 * sum(range(64))] * 2
    assert driver.extern_shared_names(probe_source.text) == ("probe_buf", "probe_fbuf")


def test_warp_collectives(emu: EmuDevice, probe_source: Source) -> None:
    rng = np.random.default_rng(7)
    x = rng.integers(0, 100, size=128, dtype=np.int32)
    x[37] = 150  # warp 1 has a value > 100
    _x, xp = _on(emu, x)
    (sums, sp), (ballots, bp), (flags, fp) = _zeros(emu, 4), _zeros(emu, 4, np.uint32), _zeros(emu, 8)
    (bfly, yp), (scan, cp), (bcast, dp) = _zeros(emu, 128), _zeros(emu, 128), _zeros(emu, 128)
    emu.load(probe_source).function("probe_warp")(2, 64, [sp, bp, fp, yp, cp, dp, xp])
    w = x.reshape(4, 32)
    assert sums.to_numpy().tolist() == w.sum(axis=1).tolist()
    bits = (w & 1).astype(np.uint64) << np.arange(32, dtype=np.uint64)
    assert ballots.to_numpy().tolist() == bits.sum(axis=1).tolist()
    assert flags.to_numpy().reshape(4, 2).tolist() == [[0, 1], [1, 1], [0, 1], [0, 1]]
    assert np.array_equal(bfly.to_numpy(), np.repeat(w.sum(axis=1), 32))
    assert np.array_equal(scan.to_numpy(), np.cumsum(w, axis=1).reshape(-1))
    assert np.array_equal(bcast.to_numpy(), np.repeat(w[:, 5], 32))


def test_atomics(emu: EmuDevice, probe_source: Source) -> None:
    x = np.arange(1000, dtype=np.int32) * 7 % 1013
    _x, xp = _on(emu, x)
    (hist, hp), (mx, mp) = _zeros(emu, 10, np.uint32), _zeros(emu, 1)
    (total, tp), (ring, rp) = _zeros(emu, 1, np.uint64), _zeros(emu, 1, np.uint32)
    fsum, fp = _zeros(emu, 1, np.float32)
    fn = emu.load(probe_source).function("probe_atomics")
    fn(3, 128, [hp, mp, tp, rp, fp, xp, np.int32(x.size), np.int32(10)])
    assert np.array_equal(hist.to_numpy(), np.bincount(x % 10, minlength=10))
    assert mx.to_numpy()[0] == x.max()
    assert total.to_numpy()[0] == x.astype(np.uint64).sum()
    assert ring.to_numpy()[0] == x.size % 10  # atomicInc(ring, 9) counts modulo 10
    assert fsum.to_numpy()[0] == np.float32(x.size)


def test_block_votes_2d_blocks_and_partial_warps(emu: EmuDevice, probe_source: Source) -> None:
    threads = 8 * 5  # a 2-D block of 40 threads: its second warp has 8 lanes
    out, op = _zeros(emu, 2 * 3 * threads * 5)
    emu.load(probe_source).function("probe_block_votes")((2, 3), (8, 5), [op])
    got = out.to_numpy().reshape(6, threads, 5)
    t = np.arange(threads)
    assert (got[:, :, 0] == threads // 2).all()
    assert (got[:, :, 1] == 1).all() and (got[:, :, 2] == 1).all()
    assert (got[:, :, 3] == t).all()
    assert (got[:, :, 4] == np.where(t < 32, 32, 8)).all()


def test_collectives_in_divergent_code(emu: EmuDevice, probe_source: Source) -> None:
    x = np.arange(-10, 54, dtype=np.int32)
    _x, xp = _on(emu, x)
    out, op = _zeros(emu, 64)
    emu.load(probe_source).function("probe_divergent")(1, 64, [op, xp])
    got = out.to_numpy().reshape(2, 32)
    w = x.reshape(2, 32)
    assert got[:, 0].tolist() == w[:, :16].sum(axis=1).tolist()
    ballot = [int(sum(1 << (16 + i) for i in range(16) if w[r, 16 + i] > 0)) for r in range(2)]
    assert got[:, 16:].astype(np.uint32).tolist() == [[b] * 16 for b in ballot]


def test_template_kernels_and_static_shared(emu: EmuDevice, probe_source: Source) -> None:
    module = emu.load(probe_source)
    x = np.arange(3 * 64, dtype=np.int32)
    _x, xp = _on(emu, x)
    out, op = _zeros(emu, 3)
    module.function("probe_template_sum<int, 64>")(3, 64, [op, xp])
    assert out.to_numpy().tolist() == x.reshape(3, 64).sum(axis=1).tolist()
    y = np.linspace(0, 1, 2 * 32)
    _y, yp = _on(emu, y)
    dout, dp = _zeros(emu, 2, np.float64)
    module.function("probe_template_sum<double, 32>")(2, 32, [dp, yp])
    assert dout.to_numpy().tolist() == [sum(r.tolist(), 0.0) for r in y.reshape(2, 32)]  # in order, from 0


def test_a_trap_loses_the_device(emu: EmuDevice, probe_source: Source) -> None:
    out, op = _zeros(emu, 64)
    fn = emu.load(probe_source).function("probe_trap")
    fn(1, 64, [op, np.int32(-1)])  # nobody traps
    with pytest.raises(Lost, match=r"thread \(17,0,0\): __trap\(\)"):
        fn(1, 64, [op, np.int32(17)])
    assert emu.lost is not None
    with pytest.raises(Lost):
        fn(1, 64, [op, np.int32(-1)])
    with pytest.raises(Lost):
        Array.empty(out.dtype, (4,), emu)


def test_a_deadlock_is_reported_not_hung(emu: EmuDevice, probe_source: Source) -> None:
    _out, op = _zeros(emu, 32)
    with pytest.raises(Lost, match=r"deadlock.*16 of 32 live threads wait at __syncthreads.*0x0000ffff"):
        emu.load(probe_source).function("probe_deadlock")(1, 32, [op])


def test_launches_are_checked_before_they_run(emu: EmuDevice, probe_source: Source) -> None:
    module = emu.load(probe_source)
    fn = module.function("probe_trap")
    out, op = _zeros(emu, 64)
    bad = [
        ((1,), (1025,), [op, np.int32(0)], 0, "block"),
        ((1,), (64, 32), [op, np.int32(0)], 0, "2048 threads"),
        ((0,), (32,), [op, np.int32(0)], 0, "grid"),
        ((1,), (1, 1, 65), [op, np.int32(0)], 0, "block"),
        ((1,), (32,), [op, np.int32(0)], driver.DYNAMIC_SHARED_BYTES + 1, "shared"),
        ((1,), (32,), [op], 0, "1 arguments for 2 parameters"),
        ((1,), (32,), [op, np.int64(0)], 0, "argument 1 is a int64 of 8 bytes"),
        ((1,), (32,), [op, 3], 0, "argument 1 is a int"),
    ]
    for grid, block, args, shared, match in bad:
        with pytest.raises(LaunchError, match=match):
            fn(grid, block, args, shared_bytes=shared)
    assert emu.lost is None  # a refused launch is no fault
    assert out.to_numpy().sum() == 0
    with pytest.raises(KeyError, match="probe_warp"):
        module.function("no_such_kernel")


def test_ucontext_fibers_run_the_same_kernels(emu: EmuDevice, probe_source: Source) -> None:
    module = driver.load(emu, probe_source, defines=("NXEMU_UCONTEXT",))
    x = np.arange(2 * 64, dtype=np.int32)
    _x, xp = _on(emu, x)
    out, op = _zeros(emu, x.size)
    module.function("probe_reverse")(2, 64, [op, xp], shared_bytes=64 * 4)
    assert np.array_equal(out.to_numpy(), x.reshape(2, 64)[:, ::-1].reshape(-1))


def test_emulator_compile_errors_carry_the_log(emu: EmuDevice) -> None:
    bad = Source("bad_emu.cu", 'extern "C" __global__ void k(int* x) { x[0] = undefined_z; }', ("k",))
    with pytest.raises(CompileError, match="undefined_z") as info:
        emu.load(bad)
    assert info.value.arch == "the emulator" and "-ffp-contract=off" in info.value.options


def test_generated_launchers_are_pure_renderings(probe_source: Source) -> None:
    code = driver.launch_code(probe_source, "probe.cu")
    assert code == driver.launch_code(probe_source, "probe.cu")
    assert '#include "probe.cu"' in code
    assert "::nxemu::launch(&probe_template_sum<double, 32>," in code
    assert code.count("NXEMU_EXPORT int nxemu_launch_") == len(probe.PROBE_KERNELS)

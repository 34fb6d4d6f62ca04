"""nxkernel_cuda on a real GPU (cuda:0): marked ``cuda``, skipped with the
reason where no GPU is present. The same checks as on the emulator, plus the
device's memory and errors."""

from __future__ import annotations

import numpy as np
import pytest

from nxkernel_core import dtype as D
from nxkernel_core import orders
from nxkernel_core.array import Array
from nxkernel_core.rig import OutOfMemory
from nxkernel_cuda import device

from . import copy_kernel as copy
from . import lane_sum

pytestmark = pytest.mark.cuda


@pytest.fixture(scope="module")
def gpu() -> device.CudaDevice:
    ok, why = device.availability()
    if not ok:
        pytest.skip(f"CUDA is not usable: {why}")
    return device.CudaDevice(0)


def test_memory_round_trips(gpu: device.CudaDevice) -> None:
    x = np.arange(1000, dtype=np.float64)
    a = Array.from_numpy(x, gpu)
    assert a.buffer.memory.host_bytes is None
    assert np.array_equal(a.to_numpy(), x)
    assert np.array_equal(a[10:20].to_numpy(), x[10:20])
    assert Array.empty(D.int32, (5,), gpu).to_numpy().tolist() == [0] * 5  # fresh memory is zeroed


@pytest.mark.parametrize("threads", lane_sum.THREADS)
@pytest.mark.parametrize("n", [0, 1, 15, 16, 17, 1023, 1024, 1025, 5000, 70000])
def test_lane_sum_is_lane_order_bit_for_bit(gpu: device.CudaDevice, n: int, threads: int) -> None:
    rng = np.random.default_rng(n)
    x = (rng.standard_normal((3, n)) * np.exp2(rng.integers(-20, 21, size=(3, n)))).astype(np.float32)
    src = Array.from_numpy(x, gpu)
    dst = Array.empty(D.float32, (3,), gpu)
    lane_sum.sum_rows(dst, src, threads=threads)
    want = orders.lane_reduce(x, np.add, np.float32(0))
    assert dst.to_numpy().view(np.uint32).tolist() == want.view(np.uint32).tolist()


def test_copy(gpu: device.CudaDevice) -> None:
    data = np.arange(4099, dtype=np.uint8)
    src = Array.from_numpy(data, gpu)[3:]
    dst = Array.empty(D.uint8, (4096,), gpu)
    copy.copy(dst, src)
    assert dst.to_numpy().tobytes() == data[3:].tobytes()


def test_an_impossible_allocation_is_out_of_memory(gpu: device.CudaDevice) -> None:
    with pytest.raises(OutOfMemory):
        gpu.allocate(1 << 50)
    assert gpu.lost is None

"""The example kernel families on the emulated device: the lane-order block
reduction gives orders.lane_reduce's bits, and the copy copies."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from nxkernel_core import dtype as D
from nxkernel_core import orders
from nxkernel_core.array import Array
from nxkernel_core.layout import Permute
from nxkernel_cuda.device import EmuDevice

from . import copy_kernel as copy
from . import lane_sum

SIZES = (0, 1, 15, 16, 17, 1023, 1024, 1025, 5000)


def _terms(rows: int, n: int, seed: int) -> npt.NDArray[np.float32]:
    """Terms whose sum depends on the order: magnitudes over 2^±20, both signs,
    a few exact cancellations and signed zeros."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, n)) * np.exp2(rng.integers(-20, 21, size=(rows, n)))
    x = x.astype(np.float32)
    if n >= 4:
        x[:, 1] = -x[:, 0]
        x[:, 3] = -0.0
    return x


def _bits(a: npt.NDArray[np.float32]) -> list[int]:
    return a.view(np.uint32).tolist()


def _sum_rows(emu: EmuDevice, x: npt.NDArray[np.float32], threads: int) -> npt.NDArray[np.float32]:
    src = Array.from_numpy(x, emu)
    dst = Array.from_numpy(np.full(x.shape[0], np.nan, dtype=np.float32), emu)
    lane_sum.sum_rows(dst, src, threads=threads)
    return dst.to_numpy()


@pytest.mark.parametrize("threads", [32, 256, 1024])
@pytest.mark.parametrize("n", SIZES)
def test_lane_sum_is_lane_order_bit_for_bit(emu: EmuDevice, n: int, threads: int) -> None:
    x = _terms(3, n, seed=n)
    want = orders.lane_reduce(x, np.add, np.float32(0))
    assert _bits(_sum_rows(emu, x, threads)) == _bits(want)


def test_lane_sum_over_many_chunks_and_full_rounds(emu: EmuDevice) -> None:
    # 40 chunks at 32 threads a block is 20 full rounds; at 128, 5 full rounds of 8
    x = _terms(2, 40 * 1024 - 3, seed=1)
    want = _bits(orders.lane_reduce(x, np.add, np.float32(0)))
    for threads in lane_sum.THREADS:
        assert _bits(_sum_rows(emu, x, threads)) == want, threads


def test_lane_sum_of_signed_zeros_and_infinities(emu: EmuDevice) -> None:
    rows = [[-0.0] * 20, [np.inf, 1.0, -2.0, 3.0], [1.0, -np.inf, 5.0] * 400, [3e38] * 2000]
    for r in rows:
        x = np.array([r], dtype=np.float32)
        with np.errstate(over="ignore"):
            want = orders.lane_reduce(x, np.add, np.float32(0))
        assert _bits(_sum_rows(emu, x, 256)) == _bits(want)
    assert _bits(_sum_rows(emu, np.array([rows[0]], np.float32), 256)) == [0]  # -0 terms sum to +0


def test_lane_sum_reads_strided_and_broadcast_rows(emu: EmuDevice) -> None:
    wide = _terms(4, 3000, seed=3)
    src = Array.from_numpy(wide, emu)[:, 500:2500]  # a row stride of 3000, an offset of 500
    dst = Array.empty(D.float32, (4,), emu)
    lane_sum.sum_rows(dst, src)
    want = orders.lane_reduce(wide[:, 500:2500], np.add, np.float32(0))
    assert _bits(dst.to_numpy()) == _bits(want)


def test_lane_sum_refuses_what_it_cannot_read(emu: EmuDevice) -> None:
    src = Array.from_numpy(np.zeros((2, 8), np.float32), emu)
    with pytest.raises(ValueError, match="float32"):
        lane_sum.sum_rows(Array.empty(D.float64, (2,), emu), src)
    with pytest.raises(ValueError, match="one CUDA device"):
        lane_sum.sum_rows(Array.empty(D.float32, (2,)), src)
    with pytest.raises(ValueError, match="threads"):
        lane_sum.sum_rows(Array.empty(D.float32, (2,), emu), src, threads=48)
    with pytest.raises(ValueError, match="adjacent"):
        lane_sum.sum_rows(Array.empty(D.float32, (8,), emu), src.view(Permute((1, 0))))


@pytest.mark.parametrize(("dtype", "n", "start"), [
    (np.float32, 1000, 0), (np.uint8, 1001, 3), (np.int16, 7, 1), (np.float64, 513, 0),
    (np.complex128, 33, 2),
])
def test_copy_copies_bytes(emu: EmuDevice, dtype: type, n: int, start: int) -> None:
    rng = np.random.default_rng(n)
    data = rng.integers(0, 255, size=(n + start) * np.dtype(dtype).itemsize, dtype=np.uint8).view(dtype)
    src = Array.from_numpy(data, emu)[start:]
    dst = Array.from_numpy(np.zeros(n, dtype=dtype), emu)
    copy.copy(dst, src)
    assert dst.to_numpy().tobytes() == data[start:].tobytes()

"""Arrays: construction checks, NumPy round trips at every dtype, views equal
NumPy's, bitcast."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nxkernel_core import dtype as D
from nxkernel_core.array import Array, asarray, positions
from nxkernel_core.layout import Layout, Permute, Range, Slice
from nxkernel_core.rig import Buffer, host

from .strategies import dtypes, fresh_buffer, views


def random_elements(dt: D.Dtype, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` host elements of ``dt`` from random bits (every code, NaNs included)."""
    if dt.is_bool:
        return rng.integers(0, 2, n).astype(np.bool_)
    if dt.is_sub_byte:
        codes = rng.integers(0, 1 << dt.bits, n).astype(np.uint8)
        return D.unpack(dt, _pack_codes(codes, dt.bits), np.arange(n))
    raw = rng.integers(0, 256, n * dt.itemsize).astype(np.uint8)
    return raw.view(dt.numpy_dtype)


def _pack_codes(codes: np.ndarray, bits: int) -> np.ndarray:
    out = np.zeros((codes.size * bits + 7) // 8, dtype=np.uint8)
    for p, c in enumerate(codes):
        out[p * bits // 8] |= np.uint8(int(c) << (p * bits % 8))
    return out


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    if a.shape != b.shape:
        return False
    if a.dtype == np.bool_:
        return bool(np.array_equal(a, b))
    return bool(np.array_equal(a.reshape(-1).view(np.uint8), b.reshape(-1).view(np.uint8)))


@pytest.mark.parametrize("dt", D.all, ids=lambda d: d.name)
def test_numpy_round_trip_keeps_bits(dt: D.Dtype) -> None:
    rng = np.random.default_rng(dt.code)
    values = random_elements(dt, 37, rng).reshape(37)
    arr = Array.from_numpy(values, host, dt)
    assert arr.dtype is dt and arr.shape == (37,)
    assert arr.buffer.length == D.bytes(dt, 37)
    assert same_bits(arr.to_numpy(), values)


@pytest.mark.parametrize("dt", [D.int4, D.uint4, D.float4_e2m1fn, D.bit], ids=lambda d: d.name)
def test_sub_byte_storage_is_packed_lsb_first(dt: D.Dtype) -> None:
    rng = np.random.default_rng(7)
    codes = rng.integers(0, 1 << dt.bits, 13).astype(np.uint8)
    values = D.unpack(dt, _pack_codes(codes, dt.bits), np.arange(13))
    arr = Array.from_numpy(values, host, dt)
    stored = arr.buffer.host_view()
    assert np.array_equal(stored, _pack_codes(codes, dt.bits))  # zero bits after the last


def test_construction_refuses_elements_outside_the_buffer() -> None:
    buf = Buffer.create(host, 16)
    Array(D.float32, Layout((4,), (1,)), buf)
    with pytest.raises(ValueError, match=r"Array: a float32 \[5\] layout reaches byte 20"):
        Array(D.float32, Layout((5,), (1,)), buf)
    with pytest.raises(ValueError, match="reaches byte"):
        Array(D.float32, Layout((2,), (3,), 1), buf)
    Array(D.int4, Layout((32,), (1,)), buf)
    with pytest.raises(ValueError, match="reaches byte 17"):
        Array(D.int4, Layout((33,), (1,)), buf)


def test_construction_refuses_misaligned_buffers() -> None:
    buf = Buffer.create(host, 32)
    with pytest.raises(ValueError, match="not aligned to 4"):
        Array(D.float32, Layout((2,), (1,)), buf.view(2, 16))
    Array(D.complex64, Layout((2,), (1,)), buf.view(4, 16))  # one component
    with pytest.raises(ValueError, match="not aligned to 8"):
        Array(D.complex128, Layout((1,), (1,)), buf.view(4, 16))


@settings(max_examples=150, deadline=None)
@given(dt=dtypes, data=st.data())
def test_views_equal_numpys(dt: D.Dtype, data: st.DataObject) -> None:
    buf = fresh_buffer(128)
    n = buf.length * 8 // dt.bits
    flat = Array(dt, Layout((n,), (1,)), buf)
    values = random_elements(dt, n, np.random.default_rng(data.draw(st.integers(0, 99))))
    flat.write_numpy(values)
    arr = data.draw(views(buf, dt))
    expected = values[positions(arr.layout)] if arr.numel else np.zeros(arr.shape, dt.numpy_dtype)
    assert same_bits(arr.to_numpy(), expected.reshape(arr.shape))


def test_basic_indexing_is_numpys() -> None:
    values = np.arange(60, dtype=np.int16).reshape(3, 4, 5)
    arr = asarray(values)
    keys = [(1,), (slice(None, None, -1), 2), (..., 3), (slice(1, 3), slice(None), slice(4, 0, -2)),
            (-1, -1, -1)]
    for key in keys:
        assert np.array_equal(arr[key].to_numpy(), values[key])
    with pytest.raises(IndexError, match="out of bounds"):
        arr[3]


@pytest.mark.parametrize("src,dst", [(D.float32, D.uint8), (D.float64, D.int4), (D.uint16, D.bit),
                                     (D.complex64, D.float32), (D.int8, D.int8)])
def test_bitcast_round_trips(src: D.Dtype, dst: D.Dtype) -> None:
    rng = np.random.default_rng(3)
    values = random_elements(src, 24, rng).reshape(2, 12)
    arr = Array.from_numpy(values, host, src)
    narrow = arr.bitcast(dst)
    assert narrow.shape == (2, 12 * src.bits // dst.bits)
    back = narrow.bitcast(src)
    assert back.layout == arr.layout and same_bits(back.to_numpy(), values)


def test_bitcast_reads_little_endian_bits() -> None:
    one = asarray(np.array([1.0], dtype=np.float32))
    assert one.bitcast(D.uint32).to_numpy()[0] == 0x3F800000
    assert list(one.bitcast(D.uint8).to_numpy()) == [0, 0, 0x80, 0x3F]
    assert list(asarray(np.array([0x5A], np.uint8)).bitcast(D.int4).to_numpy()) == [-6, 5]


def test_bitcast_refuses_strided_last_axes() -> None:
    arr = asarray(np.zeros((4, 4), np.float32)).view(Permute((1, 0)))
    with pytest.raises(ValueError, match=r"Array.bitcast: the last axis .* has stride 4"):
        arr.bitcast(D.uint8)
    odd = asarray(np.zeros(3, np.uint8))
    with pytest.raises(ValueError, match="multiples of 2"):
        odd.bitcast(D.uint16)


def test_asarray_applies_the_store_rule() -> None:
    assert asarray([1 + 2**-8 + 2**-30], dtype=D.bfloat16).to_numpy()[0] == ml_dtypes.bfloat16(1 + 2**-7)
    assert asarray([1000.0, np.nan], dtype="float8_e4m3fn").to_numpy()[0] == 448
    assert list(asarray([-3.7, 300.0], dtype=D.int8).to_numpy()) == [-3, 127]
    x = asarray(np.arange(3, dtype=np.int32))
    assert asarray(x) is x and asarray(x, "int32") is x
    assert asarray(x, D.float64).to_numpy().dtype == np.float64


def test_from_numpy_refuses_the_wrong_host_type() -> None:
    with pytest.raises(ValueError, match=r"Array.from_numpy: a float64 array is not of float32"):
        Array.from_numpy(np.zeros(2), host, D.float32)


def test_views_share_the_buffer() -> None:
    arr = asarray(np.arange(6, dtype=np.int32))
    rev = arr.view(Slice((Range(5, 6, -1),)))
    rev.write_numpy(np.arange(6, dtype=np.int32) * 10)
    assert list(arr.to_numpy()) == [50, 40, 30, 20, 10, 0]

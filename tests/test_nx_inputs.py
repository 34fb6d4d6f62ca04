"""Inputs checked as NumPy checks them: indices, axes, byte order, sizes past
any memory, dtypes in every spelling; and softmax's accuracy at large logits."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from nxkernel_core import dtype as D
from nxkernel_core import nx, rig
from nxkernel_core.answer import InvalidArgument
from nxkernel_core.layout import Broadcast

X = np.arange(10, dtype=np.float32) * 1.5


@pytest.mark.parametrize(("index", "match"), [
    ([1.7], r"nx.take: indices must be integers, not float64 \(e.g. 1.7\)"),
    ([np.nan], r"nx.take: indices must be integers, not float64 \(e.g. nan\)"),
    (np.array([2**64 - 1], dtype=np.uint64), r"nx.take: the index 18446744073709551615 is above the int64"),
    ([2**70], r"nx.take: an index is outside int64"),
    (["1"], r"nx.take: indices must be integers, not <U1"),
], ids=["float", "nan", "uint64-max", "python-int-past-int64", "str"])
def test_take_refuses_indices_numpy_refuses(index: Any, match: str) -> None:
    with pytest.raises(InvalidArgument, match=match):
        nx.take(X, index)


def test_take_refuses_index_arrays_that_are_not_integers() -> None:
    with pytest.raises(InvalidArgument, match=r"nx.take: indices must be integers, not float32 \[1\]"):
        nx.take(X, nx.asarray(np.float32([1.0])))
    big = nx.asarray(np.array([2**63], dtype=np.uint64))
    with pytest.raises(InvalidArgument, match=r"nx.take: an index is above the int64 maximum"):
        nx.take(X, big)


def test_take_keeps_integer_bool_and_empty_indices() -> None:
    assert nx.to_numpy(nx.take(X, [3, 0])).tolist() == [4.5, 0.0]
    assert nx.to_numpy(nx.take(X, np.array([9], dtype=np.uint64))).tolist() == [13.5]
    assert nx.to_numpy(nx.take(X, np.array([True, False]))).tolist() == np.take(X, [True, False]).tolist()
    assert nx.to_numpy(nx.take(X, [])).shape == (0,)


def test_gather_refuses_float_indices_and_axes() -> None:
    x = nx.asarray(X)
    with pytest.raises(InvalidArgument, match=r"nx.gather: indices must be integers, not float32 \[2\]"):
        nx.gather(x, nx.asarray(np.float32([1.7, 2.0])), 0)
    with pytest.raises(InvalidArgument, match=r"nx.gather: axis must be an integer .*, not bool True"):
        nx.gather(x, nx.asarray(np.int64([1])), True)  # type: ignore[arg-type]


@pytest.mark.parametrize("axis", [True, np.bool_(False), 1.0, "1", (0, 1.0), [0.5]])
@pytest.mark.parametrize("fn", [nx.sum, nx.max, nx.argmax, nx.cumsum, nx.softmax, nx.sort])
def test_axis_is_an_integer_only(fn: Any, axis: Any) -> None:
    name = f"nx.{fn.__name__}"
    with pytest.raises(InvalidArgument, match=rf"{name}: axis must be an integer or a tuple of integers"):
        fn(np.ones((2, 3), dtype=np.float32), axis=axis)


def test_axis_takes_numpy_integers_and_tuples() -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert nx.to_numpy(nx.sum(x, axis=np.int64(1))).tolist() == [3, 12]
    assert nx.to_numpy(nx.sum(x, axis=[0, np.int32(1)])).tolist() == 15


@pytest.mark.parametrize("dt", [">i4", ">f8", ">c8", ">u2"])
def test_big_endian_input_is_converted(dt: str) -> None:
    a = (np.arange(5) - 1).astype(dt)
    x = nx.asarray(a)
    assert x.dtype is D.of_numpy(a.dtype.newbyteorder("="))
    assert nx.to_numpy(x).tolist() == a.tolist()
    assert nx.to_numpy(nx.add(a, a)).tolist() == (a + a).tolist()


def test_arrays_past_any_memory_raise_out_of_memory_naming_the_device() -> None:
    one = nx.asarray(np.float32([1])).reshape([1, 1])
    huge = one.view(Broadcast((2**31, 2**31)))  # 2^62 elements, 2^64 bytes
    with pytest.raises(rig.OutOfMemory, match=r"host: out of memory allocating 18446744073709551616 bytes"):
        nx.add(huge, huge)
    with pytest.raises(rig.OutOfMemory, match="host: out of memory"):
        rig.host.allocate(2**63)


def test_softmax_subtracts_the_maximum() -> None:
    """Logits near 1e4 in float32: x − m is exact, so the error is exp's (an
    ulp), the sum's n − 1 roundings and the division's: relative (n + 2)·u of
    the exact softmax, u = 2^-24 (the old exp(x − logsumexp(x)) was 3e-4 off,
    the logits' own rounding times 1e4)."""
    rng = np.random.default_rng(3)
    x = (1e4 + rng.uniform(-20, 0, size=(4, 64))).astype(np.float32)
    got = nx.to_numpy(nx.softmax(x)).astype(np.float64)
    e = np.exp(x.astype(np.float64) - x.max(axis=-1, keepdims=True))
    exact = e / e.sum(axis=-1, keepdims=True)
    n, u = x.shape[-1], 2.0**-24
    assert (np.abs(got - exact) / exact).max() <= (n + 2) * u


def test_softmax_keeps_its_special_values() -> None:
    inf = np.float32(np.inf)
    got = nx.to_numpy(nx.softmax(np.float32([[0, -inf, 0], [1, 2, np.nan]])))
    assert got[0].tolist() == [0.5, 0.0, 0.5]
    assert np.isnan(got[1]).all()


@pytest.mark.parametrize("spelling", [D.float64, "float64", "f8", np.float64, np.dtype("<f8")],
                         ids=["Dtype", "name", "numpy-code", "numpy-type", "numpy-dtype"])
def test_a_dtype_in_any_spelling(spelling: Any) -> None:
    x = np.float32([1, 2, 3])
    assert nx.sum(x, dtype=spelling).dtype is D.float64
    assert nx.prod(x, dtype=spelling).dtype is D.float64
    assert nx.cumsum(x, dtype=spelling).dtype is D.float64
    assert nx.cast(x, spelling).dtype is D.float64
    assert nx.asarray(x, spelling).dtype is D.float64


def test_a_dtype_that_is_none_of_those_is_refused() -> None:
    with pytest.raises(ValueError, match=r"nx.cast: 'float33' is not a dtype"):
        nx.cast(np.float32([1]), "float33")
    with pytest.raises(ValueError, match=r"nx.sum: 3 is not a dtype"):
        nx.sum(np.float32([1]), dtype=3)  # type: ignore[arg-type]

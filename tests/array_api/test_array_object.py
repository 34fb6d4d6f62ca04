"""The standard's array object on ``Array``: operators (reflected, in place),
promotion and Python-scalar rules, conversions of 0-d arrays, properties,
indexing and assignment, DLPack both ways. Expected values are NumPy's."""

from __future__ import annotations

import operator

import numpy as np
import pytest

from nxkernel_core import array_api as xp
from nxkernel_core import nx
from nxkernel_core.array import Array

A = np.array([[-3.5, 0.0, 2.25], [7.0, -0.0, 1.5]])
I8 = np.array([-128, -7, 0, 5, 127], dtype=np.int8)

BINARY = [operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
          operator.mod, operator.pow, operator.eq, operator.ne, operator.lt, operator.le,
          operator.gt, operator.ge]


@pytest.mark.parametrize("op", BINARY, ids=lambda f: f.__name__)
def test_float_operators_equal_numpys(op: object) -> None:
    b = np.array([1.5, -2.0, 4.0])
    with np.errstate(all="ignore"):
        want = op(A, b)  # type: ignore[operator]
    got = op(xp.asarray(A), xp.asarray(b))  # type: ignore[operator]
    assert isinstance(got, Array) and got.dtype == xp.asarray(want).dtype
    np.testing.assert_array_equal(got.to_numpy(), want)


@pytest.mark.parametrize("op", [operator.add, operator.sub, operator.mul, operator.floordiv,
                                operator.mod, operator.and_, operator.or_, operator.xor,
                                operator.lshift, operator.rshift], ids=lambda f: f.__name__)
def test_int8_operators_equal_numpys_and_wrap(op: object) -> None:
    b = np.array([3, -2, 7, 1, 2], dtype=np.int8)
    with np.errstate(all="ignore"):
        want = op(I8, b)  # type: ignore[operator]
    got = op(xp.asarray(I8), xp.asarray(b))  # type: ignore[operator]
    assert got.dtype == xp.int8
    np.testing.assert_array_equal(got.to_numpy(), want)


def test_reflected_operators_take_python_scalars_on_the_left() -> None:
    x = xp.asarray(np.array([1.0, 2.0, 4.0], np.float32))
    assert (2 - x).dtype == xp.float32
    np.testing.assert_array_equal((2 - x).to_numpy(), np.float32(2) - x.to_numpy())
    np.testing.assert_array_equal((1 / x).to_numpy(), np.float32(1) / x.to_numpy())
    np.testing.assert_array_equal((3 ** x).to_numpy(), np.float32(3) ** x.to_numpy())


def test_unary_operators() -> None:
    x = xp.asarray(I8)
    np.testing.assert_array_equal((-x).to_numpy(), -I8)  # -(-128) wraps, as NumPy
    np.testing.assert_array_equal((~x).to_numpy(), ~I8)
    np.testing.assert_array_equal(abs(xp.asarray(A)).to_numpy(), np.abs(A))
    np.testing.assert_array_equal((+xp.asarray(A)).to_numpy(), A)


def test_in_place_operators_write_into_the_same_memory() -> None:
    x = xp.asarray(A.copy())
    row = x[0]  # a view: sees the in-place update
    y = x
    x += 1.0
    assert y is x
    np.testing.assert_array_equal(row.to_numpy(), A[0] + 1.0)
    x *= xp.asarray(np.array([2.0, 3.0, 4.0]))  # broadcast into x's shape
    np.testing.assert_array_equal(x.to_numpy(), (A + 1.0) * [2.0, 3.0, 4.0])


def test_in_place_refuses_a_result_of_another_dtype_or_shape() -> None:
    x = xp.asarray(np.array([1.0, 2.0], np.float32))
    with pytest.raises(TypeError, match="in-place add"):
        x += xp.asarray(np.array([1.0, 2.0]))  # float64: x would change dtype
    with pytest.raises(TypeError, match="in-place"):
        x += xp.asarray(np.ones((3, 2), np.float32))


def test_promotion_follows_the_standards_lattice() -> None:
    f32 = xp.asarray(np.ones(2, np.float32))
    f64 = xp.asarray(np.ones(2))
    assert (f32 + f64).dtype == xp.float64
    assert (xp.asarray(np.ones(2, np.uint8)) + xp.asarray(np.ones(2, np.int8))).dtype == xp.int16
    assert (xp.asarray(np.ones(2, np.uint32)) + xp.asarray(np.ones(2, np.int64))).dtype == xp.int64
    c = xp.asarray(np.ones(2, np.complex64))
    assert (c + f64).dtype == xp.complex128
    with pytest.raises(TypeError, match="do not promote"):
        _ = xp.asarray(np.ones(2, np.uint64)) + xp.asarray(np.ones(2, np.int64))
    with pytest.raises(TypeError, match="do not promote"):
        _ = xp.asarray(np.ones(2, np.int32)) + f32


def test_python_scalars_take_the_arrays_dtype_and_refuse_what_does_not_fit() -> None:
    x = xp.asarray(np.array([1, 2], np.int8))
    assert (x + 1).dtype == xp.int8
    with pytest.raises(OverflowError, match="out of range for int8"):
        _ = x + 300
    with pytest.raises(OverflowError, match="out of range for uint8"):
        _ = xp.asarray(np.array([1], np.uint8)) + (-1)
    with pytest.raises(TypeError, match="float does not combine"):
        _ = x + 1.5
    assert (xp.asarray(np.ones(2, np.float32)) + 1).dtype == xp.float32


def test_zero_d_conversions() -> None:
    assert bool(xp.asarray(0.0)) is False and bool(xp.asarray(-0.5)) is True
    assert int(xp.asarray(np.int16(-7))) == -7
    assert float(xp.asarray(2.5)) == 2.5
    assert complex(xp.asarray(1 + 2j)) == 1 + 2j
    assert operator.index(xp.asarray(np.uint8(9))) == 9
    with pytest.raises(TypeError, match="not an integer"):
        operator.index(xp.asarray(1.0))
    with pytest.raises(TypeError, match="not 0-d"):
        bool(xp.asarray([1.0, 2.0]))


def test_properties() -> None:
    x = xp.asarray(np.zeros((2, 3, 4)))
    assert (x.ndim, x.size, x.shape) == (3, 24, (2, 3, 4))
    assert x.mT.shape == (2, 4, 3)
    assert xp.asarray(A).T.shape == (3, 2)
    np.testing.assert_array_equal(xp.asarray(A).T.to_numpy(), A.T)
    assert x.device == "cpu" and x.device == "host"
    assert x.__array_namespace__() is xp
    with pytest.raises(ValueError, match="not a matrix"):
        _ = x.T


KEYS = [
    (1, slice(None, None, -1)),
    (Ellipsis, None, 0),
    (slice(1, None), Ellipsis),
    (None,),
    (np.array([1, 0, -2]),),
    (slice(None), np.array([1, 1, 0])),
    (np.array([0, 1]), np.array([2, 0])),
    (np.array([[True, False, True], [False, True, False]]),),
    (np.array([False, True]), slice(None)),
    (slice(None), np.array([[0], [2]])),
    (np.array([1, 0]), slice(None), None),
]


@pytest.mark.parametrize("key", KEYS, ids=repr)
def test_getitem_equals_numpys(key: tuple[object, ...]) -> None:
    base = np.arange(24.0).reshape(2, 3, 4)[:, :, 1]  # a strided view's elements
    x = xp.asarray(base)
    xkey = tuple(xp.asarray(k) if isinstance(k, np.ndarray) else k for k in key)
    np.testing.assert_array_equal(x[xkey].to_numpy(), base[key])


def test_getitem_refuses_out_of_bounds() -> None:
    x = xp.asarray(A)
    with pytest.raises(IndexError, match="out of bounds"):
        _ = x[2]
    with pytest.raises(IndexError, match="out of bounds"):
        _ = x[xp.asarray(np.array([0, 3]))]


@pytest.mark.parametrize("key", [(0, slice(None)), (slice(None), 1), (np.array([1, 0]),),
                                 (A > 1,), (slice(None), np.array([2, 0]))], ids=repr)
def test_setitem_equals_numpys(key: tuple[object, ...]) -> None:
    want = A.copy()
    want[key] = -9.0
    x = xp.asarray(A.copy())
    xkey = tuple(xp.asarray(k) if isinstance(k, np.ndarray) else k for k in key)
    x[xkey] = -9.0
    np.testing.assert_array_equal(x.to_numpy(), want)


def test_setitem_of_an_overlapping_view_reads_before_it_writes() -> None:
    x = xp.asarray(np.arange(5.0))
    x[1:] = x[:-1]
    np.testing.assert_array_equal(x.to_numpy(), [0.0, 0.0, 1.0, 2.0, 3.0])


def test_dlpack_out_shares_host_memory() -> None:
    x = xp.asarray(np.arange(6.0).reshape(2, 3))
    n = np.from_dlpack(x)
    n[0, 0] = 42.0
    assert float(x[0, 0]) == 42.0
    assert x.__dlpack_device__() == (1, 0)
    torch = pytest.importorskip("torch")
    t = torch.from_dlpack(x)
    t[1, 2] = -1.0
    assert float(x[1, 2]) == -1.0


def test_dlpack_in_shares_numpy_and_torch_memory() -> None:
    a = np.arange(4, dtype=np.float32)
    x = xp.from_dlpack(a)
    a[0] = 7.0
    assert x.dtype == xp.float32 and float(x[0]) == 7.0
    torch = pytest.importorskip("torch")
    t = torch.arange(3, dtype=torch.int32)
    y = xp.from_dlpack(t)
    t[2] = 11
    assert y.dtype == xp.int32 and int(y[2]) == 11
    z = xp.from_dlpack(t, copy=True)
    t[2] = 0
    assert int(z[2]) == 11


def test_numpy_reads_arrays_through_dunder_array() -> None:
    x = xp.asarray(A)
    np.testing.assert_array_equal(np.asarray(x), A)
    view = np.asarray(x, copy=False)
    view[0, 0] = 1.0
    assert float(x[0, 0]) == 1.0


def test_nx_sort_keeps_positions_and_the_namespaces_sort_returns_values() -> None:
    x = xp.asarray(np.array([3.0, 1.0, 2.0]))
    _, positions = nx.sort(x)
    np.testing.assert_array_equal(positions.to_numpy(), [1, 2, 0])
    np.testing.assert_array_equal(xp.sort(x).to_numpy(), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(xp.argsort(x).to_numpy(), [1, 2, 0])


def test_assignment_goes_through_the_door() -> None:
    from nxkernel_core import rig

    x = xp.asarray(np.zeros(4))
    held = rig.claim(donate=[x.buffer])  # another owner holds x's memory exclusive
    try:
        with pytest.raises(ValueError, match=r"Array\.__setitem__: .*held exclusive"):
            x[0] = 1.0
    finally:
        held.release()
    np.testing.assert_array_equal(x.to_numpy(), np.zeros(4))  # nothing was written
    x[0] = 1.0
    assert float(x[0]) == 1.0


def test_asarray_takes_numpy_dtypes_and_names() -> None:
    assert nx.asarray([1, 2], dtype=np.float64).dtype == xp.float64
    assert nx.asarray([1, 2], dtype="bfloat16").dtype.name == "bfloat16"
    assert nx.asarray([1], dtype=np.dtype("int8")).dtype == xp.int8
    with pytest.raises(ValueError, match=r"asarray: .* is not a dtype"):
        nx.asarray([1], dtype=object)

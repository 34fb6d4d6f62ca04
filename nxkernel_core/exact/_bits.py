"""Bits and the total order: elements as bytes, NaNs, sort keys."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

from .. import dtype as D
from ..dtype import Dtype

Arr: TypeAlias = npt.NDArray[Any]


# --------------------------------------------------------------------------
# Bits
# --------------------------------------------------------------------------


def units(a: npt.ArrayLike) -> npt.NDArray[np.uint8]:
    """The bytes of each element of ``a``: shape ``a.shape + (itemsize,)``."""
    arr = np.asarray(a, order="C")
    return arr.reshape(-1).view(np.uint8).reshape((*arr.shape, arr.dtype.itemsize))


def _from_units(u: npt.NDArray[np.uint8], dt: Dtype) -> Arr:
    """The elements of ``dt`` whose bytes are ``u`` (shape + itemsize)."""
    c = np.asarray(u, dtype=np.uint8, order="C")
    return c.reshape(-1, c.shape[-1]).view(dt.numpy_dtype).reshape(c.shape[:-1])


def zeros(dt: Dtype, shape: Sequence[int]) -> Arr:
    """Elements of ``dt`` of zero bits."""
    return _from_units(np.zeros((*shape, dt.itemsize), dtype=np.uint8), dt)


def _part_uint(a: Arr, dt: Dtype) -> tuple[Arr, Dtype]:
    """A float array's bits as unsigned integers (low ``dt.bits`` bits kept)."""
    item = a.dtype.itemsize
    c = np.asarray(a, order="C")
    u = c.reshape(-1).view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[item]).reshape(c.shape)
    if dt.bits < 8:
        u = u & np.uint8((1 << dt.bits) - 1)
    return u, dt


def _parts(dt: Dtype, a: Arr) -> list[tuple[Arr, Dtype]]:
    """A float array as itself; a complex one as its real and imaginary parts."""
    arr = np.asarray(a)
    if dt.is_complex:
        part = D.float64 if dt is D.complex128 else D.float32
        return [(np.asarray(arr.real, order="C"), part), (np.asarray(arr.imag, order="C"), part)]
    return [(arr, dt)]


def _nan_bits(u: Arr, dt: Dtype) -> tuple[Arr, Arr]:
    """Where float bits ``u`` of ``dt`` are a NaN, and where a signalling one."""
    fmt = dt.float_format
    assert fmt is not None
    u64 = u.astype(np.uint64)
    if not fmt.nans:
        none = np.zeros(u.shape, dtype=np.bool_)
        return none, none
    frac_mask = np.uint64((1 << fmt.fraction_bits) - 1)
    exp_mask = np.uint64(((1 << fmt.exponent_bits) - 1) << fmt.fraction_bits)
    if not fmt.infinities:  # e4m3fn: S.1111.111 alone is a NaN, and a quiet one
        nan = (u64 & (exp_mask | frac_mask)) == (exp_mask | frac_mask)
        return nan, np.zeros(u.shape, dtype=np.bool_)
    nan = ((u64 & exp_mask) == exp_mask) & ((u64 & frac_mask) != 0)
    quiet = (u64 & np.uint64(1 << (fmt.fraction_bits - 1))) != 0
    return nan, nan & ~quiet


def is_nan(dt: Dtype, a: npt.ArrayLike) -> npt.NDArray[np.bool_]:
    """Where elements of float or complex ``dt`` are NaNs (a complex number
    with a NaN part is one); all False for other dtypes."""
    arr = np.asarray(a)
    if not (dt.is_float or dt.is_complex):
        return np.zeros(arr.shape, dtype=np.bool_)
    out = np.zeros(arr.shape, dtype=np.bool_)
    for p, pdt in _parts(dt, arr):
        out |= _nan_bits(_part_uint(p, pdt)[0], pdt)[0]
    return out


def is_signalling(dt: Dtype, a: npt.ArrayLike) -> npt.NDArray[np.bool_]:
    """Where elements of float or complex ``dt`` are (or hold) signalling NaNs."""
    arr = np.asarray(a)
    out = np.zeros(arr.shape, dtype=np.bool_)
    if not (dt.is_float or dt.is_complex):
        return out
    for p, pdt in _parts(dt, arr):
        out |= _nan_bits(_part_uint(p, pdt)[0], pdt)[1]
    return out


def to_float64(dt: Dtype, a: npt.ArrayLike) -> Arr:
    """Elements of a real dtype as float64 values (exact but for integers above
    2**53; booleans as 0 and 1 by ``byte != 0``); complex as complex128."""
    arr = np.asarray(a)
    out: Arr
    if dt.is_complex:
        with np.errstate(all="ignore"):
            out = arr.astype(np.complex128)
        return out
    if dt.is_bool:
        out = (units(arr)[..., 0] != 0).astype(np.float64)
        return out
    with np.errstate(all="ignore"):
        return arr.astype(np.float64)


def abs_values(dt: Dtype, a: npt.ArrayLike) -> Arr:
    """|x| as float64 (the modulus of a complex number)."""
    return np.abs(to_float64(dt, a)).astype(np.float64)


# --------------------------------------------------------------------------
# The total order
# --------------------------------------------------------------------------


def _float_key(p: Arr, dt: Dtype) -> Arr:
    """An int64 key of float elements in the total order, NaNs one key above +inf."""
    u, _ = _part_uint(p, dt)
    bits = dt.bits
    u64 = u.astype(np.uint64)
    sign = (u64 >> np.uint64(bits - 1)) & np.uint64(1)
    mag = (u64 & np.uint64((1 << (bits - 1)) - 1)).astype(np.int64)
    key = np.where(sign == 1, -mag - 1, mag)
    return np.where(_nan_bits(u, dt)[0], np.iinfo(np.int64).max, key)


def order_keys(dt: Dtype, a: npt.ArrayLike) -> list[Arr]:
    """Keys of elements of ``dt``, most significant first, whose lexicographic
    order is the contract's total order: −inf < … < −0 < +0 < … < +inf < NaN
    with every NaN equal; complex by real part, then imaginary part, a number
    with a NaN part a NaN; integers by value; false < true."""
    arr = np.asarray(a)
    if dt.is_float:
        return [_float_key(arr, dt)]
    if dt.is_complex:
        (re, part), (im, _) = _parts(dt, arr)
        nan = is_nan(dt, arr)
        return [nan.astype(np.int64),
                np.where(nan, 0, _float_key(re, part)),
                np.where(nan, 0, _float_key(im, part))]
    if dt.is_bool:
        return [(units(arr)[..., 0] != 0).astype(np.int64)]
    if dt is D.uint64:
        return [arr.astype(np.uint64)]
    return [arr.astype(np.int64)]


def _lex_less(ka: list[Arr], kb: list[Arr]) -> Arr:
    """Elementwise: keys ``ka`` strictly before keys ``kb``."""
    less = np.zeros(np.shape(ka[0]), dtype=np.bool_)
    equal = np.ones(np.shape(ka[0]), dtype=np.bool_)
    for x, y in zip(ka, kb, strict=True):
        less |= equal & (x < y)
        equal &= x == y
    return less

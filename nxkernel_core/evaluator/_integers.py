"""The integer and bool kinds: exact, wrapping at their width."""

from __future__ import annotations

from typing import Final

import ml_dtypes
import numpy as np

from .. import dtype as D
from ..dtype import Dtype
from ..prog import (
    Binary,
    Unary,
)
from ._formats import Arr, _truth

# --------------------------------------------------------------------------
# Integer kinds
# --------------------------------------------------------------------------

_I64_MIN: Final = np.int64(np.iinfo(np.int64).min)


def _wide_int(a: Arr, dt: Dtype) -> Arr:
    """An integer array as int64 (signed) or uint64 (unsigned)."""
    return a.astype(np.int64 if dt.kind is D.Kind.SIGNED else np.uint64)


def _wrap(dt: Dtype, v: Arr) -> Arr:
    """Integers ``v`` (int64 or uint64) modulo ``dt``'s width, as ``dt``."""
    if dt.bits >= 8:
        return v.astype(dt.numpy_dtype)
    code = v.astype(np.uint64) & np.uint64(15)
    return _of_codes4(code.astype(np.uint8), dt)


def _of_codes4(code: Arr, dt: Dtype) -> Arr:
    """The elements of a 4-bit dtype whose codes are ``code`` (uint8)."""
    if dt is D.int4:
        s = code.astype(np.int8)
        return np.where(s >= 8, s - 16, s).astype(np.int8).astype(ml_dtypes.int4)
    if dt is D.uint4:
        return code.astype(ml_dtypes.uint4)
    return np.array(code, order="C").view(dt.numpy_dtype)


def _unary_int(kind: Unary, dt: Dtype, x: Arr) -> Arr:
    """A unary kind of integers, exact, wrapped at the width."""
    v = _wide_int(x, dt)
    signed = dt.kind is D.Kind.SIGNED
    t = v.dtype.type
    if kind is Unary.NEG:
        r = t(0) - v
    elif kind is Unary.RECIP:
        r = np.where(v == t(1), v, t(0))
        if signed:
            r = np.where(v == t(-1), v, r)
    elif kind is Unary.ABS:
        r = np.where(v < t(0), t(0) - v, v) if signed else v
    elif kind is Unary.SIGN:
        r = np.sign(v) if signed else (v != t(0)).astype(v.dtype)
    elif kind in (Unary.FLOOR, Unary.CEIL, Unary.ROUND, Unary.TRUNC):
        r = v
    else:
        raise AssertionError(kind)
    return _wrap(dt, r)


def _idiv_mod(v: Arr, w: Arr, signed: bool) -> tuple[Arr, Arr]:
    """Quotient truncated toward zero and remainder with the dividend's sign;
    ``x // 0 = 0``, ``x mod 0 = x``, ``min // -1 = min`` (wrapping)."""
    t = v.dtype.type
    zero = w == t(0)
    if not signed:
        ws = np.where(zero, t(1), w)
        return np.where(zero, t(0), v // ws), np.where(zero, v, v % ws)
    overflow = (v == _I64_MIN) & (w == t(-1))
    ws = np.where(zero | overflow, t(1), w)
    q = v // ws
    r = v - q * ws
    # Floor and truncation differ where the remainder is not 0 and the signs differ.
    adjust = (r != 0) & ((v < 0) != (ws < 0))
    q = np.where(adjust, q + t(1), q)
    r = np.where(adjust, r - ws, r)
    return np.where(zero, t(0), q), np.where(zero, v, r)


def _int_pow(b: Arr, e: Arr, signed: bool) -> Arr:
    """``b ** e`` wrapping; a negative exponent gives 0 but for bases 1 and -1."""
    t = b.dtype.type
    result = np.ones_like(b)
    base = b.copy()
    rest = np.where(e < t(0), t(0), e) if signed else e.copy()
    while rest.any():
        result = np.where((rest & t(1)) != 0, result * base, result)
        base = base * base
        rest = rest >> t(1)
    if signed:
        odd = (e & t(1)) != 0
        unit = np.where(b == t(1), t(1), np.where(b == t(-1), np.where(odd, t(-1), t(1)), t(0)))
        result = np.where(e < t(0), unit, result)
    return result


_ROTATIONS: Final = (13, 15, 26, 6, 17, 29, 16, 24)


def _threefry(counter: Arr, key: Arr) -> Arr:
    """Threefry-2x32, 20 rounds (Random123), words low half first."""
    lo32 = np.uint64(0xFFFFFFFF)
    x0 = (counter & lo32).astype(np.uint32)
    x1 = (counter >> np.uint64(32)).astype(np.uint32)
    k0 = (key & lo32).astype(np.uint32)
    k1 = (key >> np.uint64(32)).astype(np.uint32)
    ks = (k0, k1, k0 ^ k1 ^ np.uint32(0x1BD11BDA))
    x0 = x0 + ks[0]
    x1 = x1 + ks[1]
    for r in range(20):
        rot = _ROTATIONS[r % 8]
        x0 = x0 + x1
        x1 = (x1 << np.uint32(rot)) | (x1 >> np.uint32(32 - rot))
        x1 = x1 ^ x0
        if r % 4 == 3:
            j = r // 4 + 1
            x0 = x0 + ks[j % 3]
            x1 = x1 + ks[(j + 1) % 3] + np.uint32(j)
    return x0.astype(np.uint64) | (x1.astype(np.uint64) << np.uint64(32))


def _binary_int(kind: Binary, dt: Dtype, x: Arr, y: Arr) -> Arr:
    """A binary kind of integers, computed in 64 bits, wrapped at the width."""
    v, w = _wide_int(x, dt), _wide_int(y, dt)
    signed = dt.kind is D.Kind.SIGNED
    if kind is Binary.ADD:
        r = v + w
    elif kind is Binary.SUB:
        r = v - w
    elif kind is Binary.MUL:
        r = v * w
    elif kind is Binary.IDIV:
        r = _idiv_mod(v, w, signed)[0]
    elif kind is Binary.MOD:
        r = _idiv_mod(v, w, signed)[1]
    elif kind is Binary.POW:
        r = _int_pow(v, w, signed)
    elif kind is Binary.MAXIMUM:
        r = np.maximum(v, w)
    elif kind is Binary.MINIMUM:
        r = np.minimum(v, w)
    elif kind is Binary.AND:
        r = v & w
    elif kind is Binary.OR:
        r = v | w
    elif kind is Binary.XOR:
        r = v ^ w
    elif kind is Binary.THREEFRY:
        r = _threefry(v, w)
    else:
        raise AssertionError(kind)
    return _wrap(dt, r)


def _binary_bool(kind: Binary, x: Arr, y: Arr) -> Arr:
    """And, Or, Xor of booleans, logical; Maximum is Or and Minimum And."""
    a, b = _truth(x), _truth(y)
    if kind in (Binary.AND, Binary.MINIMUM):
        return a & b
    if kind in (Binary.OR, Binary.MAXIMUM):
        return a | b
    if kind is Binary.XOR:
        return a ^ b
    raise AssertionError(kind)

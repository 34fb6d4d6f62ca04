"""The host's integer and boolean node kinds (see ``kinds``): exact, wrapping
in the dtype's width.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from nxkernel_core import dtype as D
from nxkernel_core.dtype import Dtype
from nxkernel_core.prog import (
    Binary,
    Unary,
)

from .kindbase import Arr, Impl, int_values, numba_binary, wrap_ints

__all__ = ["binary_bool", "binary_int", "unary_int"]


# --------------------------------------------------------------------------
# Integer and boolean kinds
# --------------------------------------------------------------------------


def unary_int(kind: Unary, dt: Dtype) -> Impl:
    signed = dt.kind is D.Kind.SIGNED
    if kind is Unary.NEG:
        if dt.bits >= 8:
            return lambda out, x: np.negative(x, out=out)
        return lambda out, x: wrap_ints(dt, np.negative(int_values(x)), out)
    if kind is Unary.RECIP:
        def recip(out: Arr | None, x: Arr) -> Arr:
            v = int_values(x)
            t = v.dtype.type
            r = np.where(v == t(1), v, t(0))
            if signed:
                r = np.where(v == t(-1), v, r)
            return wrap_ints(dt, r, out)
        return recip
    if kind is Unary.ABS:
        if dt.bits >= 8:
            return lambda out, x: np.absolute(x, out=out)
        return lambda out, x: wrap_ints(dt, np.absolute(int_values(x)), out)
    if kind is Unary.SIGN:
        if signed:
            return lambda out, x: wrap_ints(dt, np.sign(int_values(x)), out)
        return lambda out, x: wrap_ints(dt, (int_values(x) != 0).astype(np.uint8), out)
    raise AssertionError(f"{kind} of {dt.name} is the identity")


def _idiv_mod(v: Arr, w: Arr, signed: bool) -> tuple[Arr, Arr]:
    """Quotient truncated toward zero and remainder with the dividend's sign,
    wrapping; ``x // 0 = 0``, ``x mod 0 = x``, ``min // -1 = min``."""
    t = v.dtype.type
    zero = w == t(0)
    unit = zero | (w == t(-1)) if signed else zero
    safe = np.where(unit, t(1), w)
    # fmod is C's remainder (the dividend's sign); v - r is then an exact
    # multiple of the divisor, so floor division is exact.
    r = np.fmod(v, safe)
    q = (v - r) // safe
    if signed:
        minus = w == t(-1)
        q = np.where(minus, t(0) - v, q)
        r = np.where(minus, t(0), r)
    return np.where(zero, t(0), q), np.where(zero, v, r)


def _int_pow(b: Arr, e: Arr, signed: bool) -> Arr:
    """``b ** e`` wrapping; a negative exponent gives 0 but for bases 1 and -1."""
    b, e = np.broadcast_arrays(b, e)
    t = b.dtype.type
    result = np.ones(b.shape, dtype=b.dtype)
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


_INT_BINARY: Final[dict[Binary, np.ufunc]] = {
    Binary.ADD: np.add, Binary.SUB: np.subtract, Binary.MUL: np.multiply,
    Binary.MAXIMUM: np.maximum, Binary.MINIMUM: np.minimum, Binary.AND: np.bitwise_and,
    Binary.OR: np.bitwise_or, Binary.XOR: np.bitwise_xor,
}


def binary_int(kind: Binary, dt: Dtype) -> Impl:
    signed = dt.kind is D.Kind.SIGNED
    if kind in _INT_BINARY:
        uf = _INT_BINARY[kind]
        if dt.bits >= 8:
            return lambda out, x, y: uf(x, y, out=out)
        return lambda out, x, y: wrap_ints(dt, uf(int_values(x), int_values(y)), out)
    if kind in (Binary.IDIV, Binary.MOD):
        pick = 0 if kind is Binary.IDIV else 1

        def idiv_mod(out: Arr | None, x: Arr, y: Arr) -> Arr:
            v, w = np.broadcast_arrays(int_values(x), int_values(y))
            return wrap_ints(dt, _idiv_mod(v, w, signed)[pick], out)

        return idiv_mod
    if kind is Binary.POW:
        return lambda out, x, y: wrap_ints(dt, _int_pow(int_values(x), int_values(y), signed), out)
    if kind is Binary.THREEFRY:
        return lambda out, x, y: numba_binary("threefry", np.dtype(np.uint64), out, x, y)
    raise AssertionError(f"{kind} does not take {dt.name}")


def binary_bool(kind: Binary) -> Impl:
    if kind in (Binary.AND, Binary.MINIMUM):
        return lambda out, x, y: np.logical_and(x, y, out=out)
    if kind in (Binary.OR, Binary.MAXIMUM):
        return lambda out, x, y: np.logical_or(x, y, out=out)
    if kind is Binary.XOR:
        return lambda out, x, y: np.logical_xor(x, y, out=out)
    raise AssertionError(f"{kind} does not take bool")

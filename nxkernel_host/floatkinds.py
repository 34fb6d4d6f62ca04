"""The host's float and complex node kinds (see ``kinds``): exact kinds by
NumPy's ufuncs in the compute type, transcendentals in float64 rounded
once (by NumPy's ufuncs; Exp, Tanh and Erf, and the float32 path of the
three, by the vectorised loops of ``simdfloat64``, ``simdfloat32`` and
``simderf``) but Exp, Tanh and Erf of float32, computed in float32
arithmetic by ``simdfloat32`` and ``simderf``, complex kinds as the reference
fixes them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import numpy as np

from nxkernel_core import dtype as D
from nxkernel_core.dtype import Dtype
from nxkernel_core.prog import (
    TRANSCENDENTAL,
    Binary,
    Compare,
    Unary,
)

from . import simderf, simdfloat32, simdfloat64, trig
from .kindbase import (
    C128,
    F64,
    UINT_BY_SIZE,
    Arr,
    Impl,
    bits_of,
    c_contiguous,
    finish_node,
    float_values,
    numba_binary,
    store_float,
    where,
)

__all__ = ["COMPARE", "binary_complex", "binary_float", "compare_complex", "complex_divide",
           "computes_natively", "fma_float", "join_parts", "part_dtype", "unary_float"]


# --------------------------------------------------------------------------
# Float kinds
# --------------------------------------------------------------------------

#: Each takes a ufunc's (x, out=, dtype=); Sin, Cos and Tan reduce huge
#: arguments themselves (``trig``), where the C library's reduction errs;
#: Erf (float64 alone: x, out=) is ``simderf``'s, NumPy having none, and
#: Exp and Tanh (float64 alone: the other floats take ``_SIMD32``) are
#: ``simdfloat64``'s, which a program's compiled loop calls too.
_TRANSCENDENTAL: Final[dict[Unary, Callable[..., Arr]]] = {
    Unary.EXP: simdfloat64.exp64, Unary.EXP2: np.exp2, Unary.LOG: np.log, Unary.LOG2: np.log2,
    Unary.LOG1P: np.log1p, Unary.EXPM1: np.expm1, Unary.SIN: trig.sin, Unary.COS: trig.cos,
    Unary.TAN: trig.tan, Unary.ASIN: np.arcsin, Unary.ACOS: np.arccos, Unary.ATAN: np.arctan,
    Unary.SINH: np.sinh, Unary.COSH: np.cosh, Unary.TANH: simdfloat64.tanh64,
    Unary.ERF: simderf.erf,
}
#: The kinds whose float32 path is ``simdfloat32``'s and ``simderf``'s
#: (faster than NumPy's float64 ufuncs over float32 operands; NumPy has no
#: erf).
_SIMD32: Final[dict[Unary, Callable[..., Arr]]] = {
    Unary.EXP: simdfloat32.exp32, Unary.TANH: simdfloat32.tanh32, Unary.ERF: simderf.erf32,
}
#: The kinds computed in float32 arithmetic at float32 (within an ulp of the
#: correctly rounded value, 16 lanes on AVX-512); the narrow floats keep the
#: float32 path's float64 value, rounded once into their format.
_FLOAT32: Final[dict[Unary, Callable[..., Arr]]] = {
    Unary.EXP: simdfloat32.expf, Unary.TANH: simdfloat32.tanhf, Unary.ERF: simderf.erff,
}
_EXACT_UNARY: Final[dict[Unary, np.ufunc]] = {
    Unary.SQRT: np.sqrt, Unary.RECIP: np.reciprocal, Unary.FLOOR: np.floor,
    Unary.CEIL: np.ceil, Unary.TRUNC: np.trunc,
}
_ARITH: Final[dict[Binary, np.ufunc]] = {
    Binary.ADD: np.add, Binary.SUB: np.subtract, Binary.MUL: np.multiply,
    Binary.FDIV: np.divide, Binary.MOD: np.fmod,
}
COMPARE: Final[dict[Compare, np.ufunc]] = {
    Compare.EQUAL: np.equal, Compare.NOT_EQUAL: np.not_equal, Compare.LESS: np.less,
    Compare.LESS_EQUAL: np.less_equal,
}


def computes_natively(dt: Dtype) -> bool:
    """Whether float ``dt`` computes in its own type (float32, float64)."""
    return dt is D.float32 or dt is D.float64


def _sign(w: Arr) -> Arr:
    """-1, +1, +0 for ±0 (upstream §3, as NumPy), or the NaN operand itself."""
    one = w.dtype.type(1)
    return np.where(w > 0, one, np.where(w < 0, -one, np.where(w == 0, w.dtype.type(0), w)))


def _round_half_away(w: Arr) -> Arr:
    """Round half away from zero, keeping a zero's sign (``w - trunc(w)`` is
    exact, so the comparison with 0.5 is)."""
    t = np.trunc(w)
    one = w.dtype.type(1)
    r = np.where(np.abs(w - t) >= w.dtype.type(0.5), t + np.copysign(one, w), t)
    return np.copysign(r, w)


def _sign_mask(dt: Dtype) -> np.unsignedinteger[Any]:
    """The sign bit of float ``dt`` in its storage's unsigned type."""
    item = dt.numpy_dtype.itemsize
    return UINT_BY_SIZE[item](1 << (dt.bits - 1))


def unary_float(kind: Unary, dt: Dtype) -> Impl:
    native = computes_natively(dt)
    if kind in (Unary.NEG, Unary.ABS):
        if native:
            # float32 and float64 write straight into the node's buffer.
            sign_op: np.ufunc = np.negative if kind is Unary.NEG else np.absolute
            return lambda out, x: sign_op(x, out=out)
        # Narrow floats flip or clear the sign bit in place of arithmetic.
        mask = _sign_mask(dt)
        if kind is Unary.NEG:
            return lambda out, x: finish_node(out, (bits_of(x) ^ mask).view(dt.numpy_dtype))
        keep = ~mask
        return lambda out, x: finish_node(out, (bits_of(x) & keep).view(dt.numpy_dtype))
    if kind in _SIMD32 and dt is not D.float64:
        f = _SIMD32[kind]
        if dt is D.float32:
            g = _FLOAT32.get(kind, f)
            return lambda out, x: g(x, out=out)
        # The narrow floats: the float32 path's float64 value, rounded once.
        return lambda out, x: store_float(dt, f(float_values(x), out=np.empty(np.shape(x), F64)), out)
    if kind in TRANSCENDENTAL:
        uf = _TRANSCENDENTAL[kind]
        if dt is D.float64:
            return lambda out, x: uf(c_contiguous(x), out=out)
        if dt is D.float32:
            # One ufunc call widens, computes in float64 and rounds once into out.
            return lambda out, x: (uf(c_contiguous(x), out=out, dtype=np.float64) if out is not None
                                   else uf(c_contiguous(x), dtype=np.float64).astype(np.float32))
        return lambda out, x: store_float(dt, uf(np.ascontiguousarray(x, dtype=np.float64)), out)
    if kind in _EXACT_UNARY:
        uf = _EXACT_UNARY[kind]
        if native:
            return lambda out, x: uf(x, out=out)
        return lambda out, x: store_float(dt, uf(float_values(x)), out)
    f = _sign if kind is Unary.SIGN else _round_half_away
    return lambda out, x: store_float(dt, f(float_values(x)), out)


def _extreme(kind: Binary) -> Callable[[Arr, Arr, Arr | None], Arr]:
    """Maximum or Minimum of float32 or float64 values, -0 below +0, a NaN
    where either is one."""
    uf = np.maximum if kind is Binary.MAXIMUM else np.minimum
    # Equal operands differ only as ±0: the AND of their bits is the larger,
    # the OR the smaller.
    join = np.bitwise_and if kind is Binary.MAXIMUM else np.bitwise_or

    def f(x: Arr, y: Arr, out: Arr | None) -> Arr:
        r = np.asarray(uf(x, y, out=out))
        eq = x == y
        np.copyto(bits_of(r), join(bits_of(x), bits_of(y)), where=eq)
        return r

    return f


def binary_float(kind: Binary, dt: Dtype) -> Impl:
    native = computes_natively(dt)
    if kind in _ARITH:
        uf = _ARITH[kind]
        if native:
            return lambda out, x, y: uf(x, y, out=out)
        return lambda out, x, y: store_float(dt, uf(float_values(x), float_values(y)), out)
    if kind in (Binary.MAXIMUM, Binary.MINIMUM):
        ext = _extreme(kind)
        if native:
            return lambda out, x, y: ext(x, y, out)

        def narrow(out: Arr | None, x: Arr, y: Arr) -> Arr:
            # Pick an operand's own bits (an infinity of e5m2 would saturate
            # through the store): x where the extreme is x, or x is a NaN.
            wx = float_values(x)
            r = ext(wx, float_values(y), None)
            return where(out, (bits_of(r) == bits_of(wx)) | np.isnan(wx), x, y)

        return narrow
    uf = np.power if kind is Binary.POW else np.arctan2

    def f(out: Arr | None, x: Arr, y: Arr) -> Arr:
        if dt is D.float64:
            r = np.asarray(uf(c_contiguous(x), c_contiguous(y), out=out))
        elif dt is D.float32 and out is not None:
            r = np.asarray(uf(c_contiguous(x), c_contiguous(y), out=out, dtype=np.float64))
        else:
            wide = uf(np.ascontiguousarray(x, dtype=np.float64),
                      np.ascontiguousarray(y, dtype=np.float64))
            return store_float(dt, _annex_f_ones(kind, wide, x, y), out)
        return _annex_f_ones(kind, r, x, y)

    return f


def _annex_f_ones(kind: Binary, r: Arr, x: Arr, y: Arr) -> Arr:
    """``r`` (Pow's or Atan2's results, written in place) with C99 Annex F's
    pow(x, ±0) = pow(1, y) = 1 where ``kind`` is Pow, a NaN operand included,
    as upstream §3 states. NumPy's pow keeps that rule for a quiet NaN but not
    everywhere for a signalling one: where it has no SIMD loop of its own for
    the CPU (AVX2 machines) it calls the C library's, which makes
    pow(sNaN, 0) and pow(1, sNaN) a NaN."""
    if kind is Binary.POW:
        np.copyto(r, 1, where=(np.asarray(x) == 1) | (np.asarray(y) == 0))
    return r


def fma_float(dt: Dtype) -> Impl:
    if dt is D.float64:
        return lambda out, a, b, c: numba_binary("fma", F64, out, a, b, c)

    def f(out: Arr | None, a: Arr, b: Arr, c: Arr) -> Arr:
        # The product of two floats of 24 bits or fewer is exact in float64;
        # TwoSum gives the sum's error, and an inexact sum moves to its odd
        # neighbour, so the store's rounding into 24 bits or fewer is the
        # only one.
        wa, wb, wc = (np.asarray(v).astype(np.float64) for v in (a, b, c))
        p = wa * wb
        s = np.asarray(p + wc)
        bb = s - p
        err = (p - (s - bb)) + (wc - bb)
        nudge = np.isfinite(s) & (err != 0) & ((s.view(np.uint64) & np.uint64(1)) == 0)
        s = np.where(nudge, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
        return store_float(dt, s, out)

    return f


# --------------------------------------------------------------------------
# Complex kinds
# --------------------------------------------------------------------------


def part_dtype(dt: Dtype) -> Dtype:
    """The float dtype of a complex dtype's parts."""
    return D.float32 if dt is D.complex64 else D.float64


def join_parts(re: Arr, im: Arr, dt: Dtype, out: Arr | None) -> Arr:
    """The complex values of ``dt`` with parts ``re`` and ``im``, bits kept."""
    res = out if out is not None else np.empty(np.broadcast_shapes(re.shape, im.shape),
                                               dtype=dt.numpy_dtype)
    res.real = re
    res.imag = im
    return res


def complex_divide(dt: Dtype, x: Arr, y: Arr, out: Arr | None) -> Arr:
    """``x / y`` in complex128 by Smith's algorithm with NumPy's branches, each
    numerator part divided by the scaled denominator (NumPy multiplies by its
    reciprocal, which makes (0 + 2⁻⁵⁰i) / (0 − 2⁻¹⁰⁷⁴i) a spurious
    (−inf, NaN); the reference's (−inf, +0) is upstream's), each part
    rounded once into ``dt``."""
    wx, wy = np.asarray(x).astype(C128), np.asarray(y).astype(C128)
    ar, ai, br, bi = wx.real, wx.imag, wy.real, wy.imag
    q = np.empty(np.broadcast_shapes(wx.shape, wy.shape), C128)
    with np.errstate(all="ignore"):
        wide = np.abs(br) >= np.abs(bi)  # the real part is the larger (False for NaN)
        rat = np.where(wide, bi / br, br / bi)
        den = np.where(wide, br + bi * rat, br * rat + bi)
        q.real = np.where(wide, ar + ai * rat, ar * rat + ai) / den
        q.imag = np.where(wide, ai - ar * rat, ai * rat - ar) / den
        # A zero divisor: each part over +0, NumPy's branch.
        zero = (br == 0) & (bi == 0)
        if zero.any():
            q.real = np.where(zero, ar / np.abs(br), q.real)
            q.imag = np.where(zero, ai / np.abs(br), q.imag)
    return finish_node(out, q if dt is D.complex128 else q.astype(np.complex64))


def _order_key(a: Arr) -> Arr:
    """An int64 key in the float total order: -inf < ... < -0 < +0 < ... < inf."""
    u = bits_of(a).astype(np.uint64)
    sign = np.uint64(1 << (a.dtype.itemsize * 8 - 1))
    mag = (u & (sign - np.uint64(1))).astype(np.int64)
    return np.asarray(np.where((u & sign) != 0, -mag - 1, mag))


def _complex_nan(a: Arr) -> Arr:
    """Where a complex number has a NaN part."""
    return np.asarray(np.isnan(a.real) | np.isnan(a.imag))


def binary_complex(kind: Binary, dt: Dtype) -> Impl:
    if kind in (Binary.ADD, Binary.SUB):
        uf = np.add if kind is Binary.ADD else np.subtract
        return lambda out, x, y: uf(x, y, out=out)
    if kind is Binary.MUL:
        def mul(out: Arr | None, x: Arr, y: Arr) -> Arr:
            # The textbook product, each product and sum rounded, never fused.
            xr, xi, yr, yi = x.real, x.imag, y.real, y.imag
            return join_parts(xr * yr - xi * yi, xr * yi + xi * yr, dt, out)
        return mul
    if kind is Binary.FDIV:
        return lambda out, x, y: complex_divide(dt, x, y, out)
    maximum = kind is Binary.MAXIMUM

    def extreme(out: Arr | None, x: Arr, y: Arr) -> Arr:
        krx, kix, kry, kiy = (_order_key(v) for v in (x.real, x.imag, y.real, y.imag))
        if maximum:
            take_x = (krx > kry) | ((krx == kry) & (kix >= kiy))
        else:
            take_x = (krx < kry) | ((krx == kry) & (kix <= kiy))
        take_x = _complex_nan(x) | (~_complex_nan(y) & take_x)
        return finish_node(out, np.where(take_x, x, y))

    return extreme


def compare_complex(kind: Compare) -> Impl:
    def f(out: Arr | None, x: Arr, y: Arr) -> Arr:
        xr, xi, yr, yi = x.real, x.imag, y.real, y.imag
        eq = (xr == yr) & (xi == yi)
        if kind is Compare.EQUAL:
            return finish_node(out, eq)
        if kind is Compare.NOT_EQUAL:
            return finish_node(out, ~eq)
        tail = xi < yi if kind is Compare.LESS else xi <= yi
        nan = _complex_nan(x) | _complex_nan(y)
        return finish_node(out, ~nan & ((xr < yr) | ((xr == yr) & tail)))
    return f

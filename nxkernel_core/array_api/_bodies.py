"""Program bodies of the standard's elementwise functions.

Each body takes a ``Builder`` and the operands' values (one dtype, already
promoted) and returns the output value. Where the standard's function is a
Prog kind, the body is that kind; elsewhere it composes kinds so that the
special cases the standard lists hold (``copysign`` through the sign bit,
``remainder`` as Python's ``%``, ``round`` half to even, ...). Bodies are
module functions, so ``_base.map_spec`` caches one program per body and
dtypes.
"""

from __future__ import annotations

import math
from typing import Final

from .. import dtype as D
from ..dtype import Dtype
from ..prog import Builder, Value

_UINT: Final[dict[int, Dtype]] = {8: D.uint8, 16: D.uint16, 32: D.uint32, 64: D.uint64}
_SINT: Final[dict[int, Dtype]] = {8: D.int8, 16: D.int16, 32: D.int32, 64: D.int64}


def sign_bit(b: Builder, x: Value) -> Value:
    """Whether x's sign bit is set (bool), for floats and signed integers."""
    if x.dtype.is_float:
        x = b.bitcast(x, _SINT[x.dtype.bits])
    return b.less(x, b.const(x.dtype, 0))


def with_sign(b: Builder, mag: Value, sgn: Value) -> Value:
    """``mag``'s magnitude with ``sgn``'s sign bit (floats): C's copysign."""
    u = _UINT[mag.dtype.bits]
    top = 1 << (mag.dtype.bits - 1)
    m = b.and_(b.bitcast(mag, u), b.const(u, top - 1))
    s = b.and_(b.bitcast(sgn, u), b.const(u, top))
    return b.bitcast(b.or_(m, s), mag.dtype)


def _inf(b: Builder, dt: Dtype) -> Value:
    return b.const(dt, math.inf)


# ---- unary --------------------------------------------------------------------


def abs_(b: Builder, x: Value) -> Value:
    return x if x.dtype.is_bool else b.abs(x)


def acos(b: Builder, x: Value) -> Value:
    return b.acos(x)


def acosh(b: Builder, x: Value) -> Value:
    """log1p(t + √(t(t+2))), t = x − 1; log x + ln 2 past 2²⁸, where t² would overflow."""
    t = x - 1.0
    small = b.log1p(t + b.sqrt(t * (t + 2.0)))
    big = b.log(x) + math.log(2.0)
    r = b.where(b.less(x, b.const(x.dtype, 2.0**28)), small, big)
    return b.where(b.less(x, b.const(x.dtype, 1.0)), b.const(x.dtype, math.nan), r)


def asin(b: Builder, x: Value) -> Value:
    return b.asin(x)


def asinh(b: Builder, x: Value) -> Value:
    """sign(x)·log1p(|x| + x²/(1 + √(1 + x²))); log|x| + ln 2 past 2²⁸."""
    a = b.abs(x)
    small = b.log1p(a + a * a / (b.sqrt(a * a + 1.0) + 1.0))
    big = b.log(a) + math.log(2.0)
    r = b.where(b.less(a, b.const(x.dtype, 2.0**28)), small, big)
    return with_sign(b, r, x)


def atan(b: Builder, x: Value) -> Value:
    return b.atan(x)


def atanh(b: Builder, x: Value) -> Value:
    """½·log1p(2x / (1 − x)), with x's sign kept at ±0."""
    r = b.log1p((x + x) / (1.0 - x)) * 0.5
    return with_sign(b, b.abs(r), x)


def bitwise_invert(b: Builder, x: Value) -> Value:
    return b.xor(x, b.const(x.dtype, True if x.dtype.is_bool else -1))


def ceil(b: Builder, x: Value) -> Value:
    return b.ceil(x)


def cos(b: Builder, x: Value) -> Value:
    return b.cos(x)


def cosh(b: Builder, x: Value) -> Value:
    return b.cosh(x)


def exp(b: Builder, x: Value) -> Value:
    return b.exp(x)


def expm1(b: Builder, x: Value) -> Value:
    return b.expm1(x)


def floor(b: Builder, x: Value) -> Value:
    return b.floor(x)


def isfinite(b: Builder, x: Value) -> Value:
    if not x.dtype.is_float:
        return b.equal(x, x)
    return b.less(b.abs(x), _inf(b, x.dtype))


def isinf(b: Builder, x: Value) -> Value:
    if not x.dtype.is_float:
        return b.not_equal(x, x)
    return b.equal(b.abs(x), _inf(b, x.dtype))


def isnan(b: Builder, x: Value) -> Value:
    return b.not_equal(x, x)


def log(b: Builder, x: Value) -> Value:
    return b.log(x)


def log1p(b: Builder, x: Value) -> Value:
    return b.log1p(x)


def log2(b: Builder, x: Value) -> Value:
    return b.log2(x)


def log10(b: Builder, x: Value) -> Value:
    """log2(x)·log10(2): exact at powers of two's zeros and infinities."""
    return b.log2(x) * math.log10(2.0)


def logical_not(b: Builder, x: Value) -> Value:
    return b.xor(x, b.const(x.dtype, True))


def negative(b: Builder, x: Value) -> Value:
    return b.neg(x)


def positive(b: Builder, x: Value) -> Value:
    return b.copy(x)


def reciprocal(b: Builder, x: Value) -> Value:
    return b.fdiv(b.const(x.dtype, 1.0), x)


def round_(b: Builder, x: Value) -> Value:
    """Half to even: the nearest integer, a tie to the even neighbour (x itself
    where it is an integer, infinite or NaN)."""
    if not x.dtype.is_float:
        return b.copy(x)
    f = b.floor(x)
    frac = x - f
    up = b.where(b.less(b.const(x.dtype, 0.5), frac), b.const(x.dtype, 1.0), b.const(x.dtype, 0.0))
    odd = b.not_equal(b.mod(f, 2.0), b.const(x.dtype, 0.0))
    tie = b.equal(frac, b.const(x.dtype, 0.5))
    step = b.where(tie, b.where(odd, b.const(x.dtype, 1.0), b.const(x.dtype, 0.0)), up)
    r = f + step
    finite = b.less(b.abs(x), _inf(b, x.dtype))
    return b.where(finite, with_sign(b, r, x), x)


def sign(b: Builder, x: Value) -> Value:
    """−1, 0 or 1; +0 for ±0; NaN for NaN."""
    zero = b.const(x.dtype, 0)
    if x.dtype.kind is D.Kind.UNSIGNED:
        return b.where(b.equal(x, zero), zero, b.const(x.dtype, 1))
    return b.where(b.equal(x, zero), zero, b.sign(x))


def signbit(b: Builder, x: Value) -> Value:
    return sign_bit(b, x)


def sin(b: Builder, x: Value) -> Value:
    return b.sin(x)


def sinh(b: Builder, x: Value) -> Value:
    return b.sinh(x)


def square(b: Builder, x: Value) -> Value:
    return x * x


def sqrt(b: Builder, x: Value) -> Value:
    return b.sqrt(x)


def tan(b: Builder, x: Value) -> Value:
    return b.tan(x)


def tanh(b: Builder, x: Value) -> Value:
    return b.tanh(x)


def trunc(b: Builder, x: Value) -> Value:
    return b.trunc(x)


# ---- binary -------------------------------------------------------------------


def add(b: Builder, x: Value, y: Value) -> Value:
    return b.add(x, y)


def subtract(b: Builder, x: Value, y: Value) -> Value:
    return b.sub(x, y)


def multiply(b: Builder, x: Value, y: Value) -> Value:
    return b.mul(x, y)


def divide(b: Builder, x: Value, y: Value) -> Value:
    return b.fdiv(x, y)


def floor_divide(b: Builder, x: Value, y: Value) -> Value:
    """Floats: floor(x / y). Integers: the truncated quotient less one where
    the remainder is non-zero and the signs differ (0 for a zero divisor)."""
    if x.dtype.is_float:
        return b.floor(b.fdiv(x, y))
    q = b.idiv(x, y)
    if x.dtype.kind is D.Kind.UNSIGNED:
        return q
    r = b.mod(x, y)
    zero = b.const(x.dtype, 0)
    adjust = b.and_(b.not_equal(r, zero), b.not_equal(b.less(r, zero), b.less(y, zero)))
    return b.where(adjust, q - 1, q)


def remainder(b: Builder, x: Value, y: Value) -> Value:
    """Python's %: the remainder takes the divisor's sign (a zero remainder
    the divisor's sign, on floats)."""
    r = b.mod(x, y)
    if x.dtype.kind is D.Kind.UNSIGNED:
        return r
    zero = b.const(x.dtype, 0)
    if x.dtype.is_float:
        differ = b.not_equal(sign_bit(b, r), sign_bit(b, y))
        fix = b.and_(b.not_equal(r, zero), differ)
        fixed = b.where(fix, r + y, r)
        return b.where(b.equal(r, zero), with_sign(b, r, y), fixed)
    fix = b.and_(b.not_equal(r, zero), b.not_equal(b.less(r, zero), b.less(y, zero)))
    return b.where(fix, r + y, r)


def pow_(b: Builder, x: Value, y: Value) -> Value:
    """x**y, and 1 where y is ±0 or x is 1, NaN included (C99 Annex F)."""
    p = b.pow(x, y)
    if not x.dtype.is_float:
        return p
    one = b.const(x.dtype, 1.0)
    exact_one = b.or_(b.equal(y, b.const(x.dtype, 0.0)), b.equal(x, one))
    return b.where(exact_one, one, p)


def atan2(b: Builder, x: Value, y: Value) -> Value:
    return b.atan2(x, y)


def hypot(b: Builder, x: Value, y: Value) -> Value:
    """m·√(1 + (n/m)²), m = max(|x|, |y|), n the other: no overflow; +inf
    where either is infinite, NaN included."""
    ax, ay = b.abs(x), b.abs(y)
    m = b.maximum(ax, ay)
    n = b.minimum(ax, ay)
    r = n / m
    h = m * b.sqrt(r * r + 1.0)
    h = b.where(b.equal(m, b.const(x.dtype, 0.0)), m, h)
    inf = _inf(b, x.dtype)
    return b.where(b.or_(b.equal(ax, inf), b.equal(ay, inf)), inf, h)


def logaddexp(b: Builder, x: Value, y: Value) -> Value:
    """max + log1p(exp(−|x − y|)); the max where both are the same infinity."""
    m = b.maximum(x, y)
    d = b.abs(x - y)
    r = m + b.log1p(b.exp(-d))
    return b.where(b.equal(b.abs(m), _inf(b, x.dtype)), m, r)


def maximum(b: Builder, x: Value, y: Value) -> Value:
    return b.maximum(x, y)


def minimum(b: Builder, x: Value, y: Value) -> Value:
    return b.minimum(x, y)


def copysign(b: Builder, x: Value, y: Value) -> Value:
    return with_sign(b, x, y)


def nextafter(b: Builder, x: Value, y: Value) -> Value:
    """The next float after x toward y, by stepping x's bits (NaN where either is)."""
    s = _SINT[x.dtype.bits]
    bits = b.bitcast(x, s)
    zero = b.const(x.dtype, 0.0)
    neg = sign_bit(b, x)
    up = b.less(x, y)
    # Away from zero: bits + 1 for a positive x going up or a negative one going down.
    away = b.equal(up, b.xor(neg, b.const(D.bool_, True)))
    stepped = b.bitcast(b.where(away, bits + 1, bits - 1), x.dtype)
    tiny = b.bitcast(b.const(s, 1), x.dtype)
    from_zero = b.where(up, tiny, -tiny)
    r = b.where(b.equal(x, zero), from_zero, stepped)
    r = b.where(b.equal(x, y), y, r)
    nan = b.or_(b.not_equal(x, x), b.not_equal(y, y))
    return b.where(nan, x + y, r)


def equal(b: Builder, x: Value, y: Value) -> Value:
    return b.equal(x, y)


def not_equal(b: Builder, x: Value, y: Value) -> Value:
    return b.not_equal(x, y)


def less(b: Builder, x: Value, y: Value) -> Value:
    return b.less(x, y)


def less_equal(b: Builder, x: Value, y: Value) -> Value:
    return b.less_equal(x, y)


def greater(b: Builder, x: Value, y: Value) -> Value:
    return b.less(y, x)


def greater_equal(b: Builder, x: Value, y: Value) -> Value:
    return b.less_equal(y, x)


def logical_and(b: Builder, x: Value, y: Value) -> Value:
    return b.and_(x, y)


def logical_or(b: Builder, x: Value, y: Value) -> Value:
    return b.or_(x, y)


def logical_xor(b: Builder, x: Value, y: Value) -> Value:
    return b.xor(x, y)


def bitwise_and(b: Builder, x: Value, y: Value) -> Value:
    return b.and_(x, y)


def bitwise_or(b: Builder, x: Value, y: Value) -> Value:
    return b.or_(x, y)


def bitwise_xor(b: Builder, x: Value, y: Value) -> Value:
    return b.xor(x, y)


def _pow2(b: Builder, y: Value) -> Value:
    """2**y for 0 ≤ y < width (integers), as a product that wraps."""
    return b.pow(b.const(y.dtype, 2), y)


def bitwise_left_shift(b: Builder, x: Value, y: Value) -> Value:
    """x·2^y, wrapping; 0 for a shift of the width or more."""
    w = b.const(y.dtype, x.dtype.bits)
    return b.where(b.less(y, w), x * _pow2(b, b.minimum(y, w - 1)), b.const(x.dtype, 0))


def bitwise_right_shift(b: Builder, x: Value, y: Value) -> Value:
    """⌊x / 2^y⌋ (arithmetic for signed x); past the width 0, or −1 for negative x."""
    if x.dtype.kind is D.Kind.UNSIGNED:
        wide = b.const(y.dtype, x.dtype.bits)
        q = b.idiv(x, _pow2(b, b.minimum(y, wide - 1)))
        return b.where(b.less(y, wide), q, b.const(x.dtype, 0))
    w = b.const(y.dtype, x.dtype.bits - 1)
    q = _floor_div_pos(b, x, _pow2(b, b.minimum(y, w - 1)))
    neg = b.less(x, b.const(x.dtype, 0))
    past = b.where(neg, b.const(x.dtype, -1), b.const(x.dtype, 0))
    return b.where(b.less(y, w), q, past)


def _floor_div_pos(b: Builder, x: Value, p: Value) -> Value:
    """⌊x / p⌋ for p > 0 (p may have wrapped to the minimum at the width)."""
    q = b.idiv(x, p)
    r = b.mod(x, p)
    zero = b.const(x.dtype, 0)
    return b.where(b.less(r, zero), q - 1, q)

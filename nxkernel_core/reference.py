"""The reference evaluator: the oracle kernels are checked against.

``evaluate(prog, operands, shape)`` computes a program at every index of
``shape``. Each node's value is its exact result rounded once to the node's
dtype (upstream §3), by these rules:

Floats. ``+ - * /``, Sqrt, Recip, Mod (fmod), Floor, Ceil, Trunc, Round
(half away from zero), Sign and the casts are exact results rounded once:
float32 and float64 compute in their own IEEE arithmetic, the narrow floats
in float32 and round once on the store (``dtype.of_float``), which is the
same as rounding once because float32 has more than twice their precision
plus two bits. Fma is exact at every float dtype (float64 by integer
arithmetic, the others by round-to-odd in float64). Neg and Abs flip and
clear the sign bit. Sign of ±0 is +0 (upstream's tests, as NumPy).

Transcendentals, Pow and Atan2 compute in float64 and round once into the
node's dtype. NumPy gives the C99 Annex F special values and a value within a
few float64 ulps; where mpmath is installed, every finite, normal float64
result, and every narrower result that those few ulps could round either
way, is recomputed with mpmath at 160 bits, so the reference is correctly
rounded (but for a tie within 2^-107). Without mpmath it is NumPy's value,
a near-reference. Check kernels against these with ``ulps`` and the stated
bounds.

NaNs. A float kind with a NaN operand returns its first NaN operand's bits
unchanged (signalling or not; Neg and Abs set its sign bit as they would a
number's), but where C99 Annex F fixes the result whatever the other operand
(upstream §3): ``pow(x, ±0)`` and ``pow(1, y)`` are 1, a NaN ``x`` or ``y``
included. A NaN made from numbers is the format's
canonical quiet NaN with a clear sign (0x7FF8000000000000, 0x7FC00000,
0x7E00 in float16, 0x7FC0 in bfloat16, 0x7E in e5m2, 0x7F in e4m3fn);
float4_e2m1fn stores it as +0. Maximum and Minimum order -0 below +0 and
return the first NaN operand. Every computed float is stored by the store
rule, so an infinite result saturates in the formats of a byte or less
(e5m2 included: no store makes its infinities), while Neg, Abs and the moves
keep an infinity's bits.

Casts (upstream §3). A float into another float rounds once by the store
rule; a NaN keeps its sign and the high bits of its payload and becomes
quiet (e4m3fn's NaN has no payload); a float keeping its format keeps its
bits (float32 into complex64's real part, complex128's real part into
float64). Integers into floats round their exact value once; into integers
they wrap modulo the width. Into bool is ``x != 0`` (either part of a
complex number); bool is 0 or 1. Float into integer truncates and saturates,
NaN to 0. A cast into the same dtype is Copy.

Complex. Neg flips both parts' signs; Add and Sub are part by part, as
floats. Mul is the textbook ``(ar*br - ai*bi) + i(ar*bi + ai*br)``, each
product and sum rounded to the part's dtype without fusing, within the
contract's 2u. Fdiv and Recip divide by Smith's algorithm with NumPy's
branches in float64, each part of the numerator divided by the scaled
denominator (where NumPy multiplies by its reciprocal, whose overflow makes a
spurious NaN: (0 + 2⁻⁵⁰i) / (0 − 2⁻¹⁰⁷⁴i) is (−inf, +0), upstream §3), and
round each part once; complex64 thus divides in float64. Barring overflow and
underflow each float64 part is within γ(7)·|x/y| of the exact quotient's
(the denominator errs relatively by γ(3), with no cancellation; each
numerator part by γ(3)·|x||y|/|denominator|; the division by u). A NaN part
of a Mul, Fdiv or Recip result is the canonical NaN. Maximum, Minimum and the
comparisons order by the real part, then the imaginary part; a number with
a NaN part is a NaN.

Integers compute exactly and wrap at their width: Idiv truncates toward
zero, ``x // 0 = 0``, the signed minimum ``// -1`` is itself; Mod takes the
dividend's sign and ``x mod 0 = x``; Recip is ``x`` for 1 and -1, else 0;
Pow with a negative exponent is 0 but for a base of 1 or -1; Floor, Ceil,
Round and Trunc are the identity. Unsigned dtypes compare unsigned. Bool
And, Or, Xor are logical, Maximum is Or and Minimum And. Threefry is
Threefry-2x32 with 20 rounds (Random123) of the counter ``x`` under the key
``y``, each a uint64 of two 32-bit words, low half first.

Moves. Copy, Bitcast and Where copy bits, NaN payloads and a bool's byte
included; every other use of a bool reads ``byte != 0``.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

import ml_dtypes
import numpy as np
import numpy.typing as npt

from . import dtype as D
from .dtype import Dtype
from .prog import (
    Binary,
    Compare,
    Const,
    Convert,
    Coord,
    In,
    Node,
    Op1,
    Op2,
    Prog,
    Ternary,
    Unary,
    element,
)

__all__ = ["evaluate", "ulps"]

Arr: TypeAlias = npt.NDArray[Any]

try:
    _MPMATH: Any = importlib.import_module("mpmath")
except ImportError:  # pragma: no cover - mpmath is optional
    _MPMATH = None


# --------------------------------------------------------------------------
# Float formats and bits
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Fmt:
    """A float format's bits: the unsigned type of its storage, exponent and
    fraction widths, sign mask and canonical quiet NaN (None without NaNs)."""

    uint: type[np.unsignedinteger[Any]]
    exp_bits: int
    frac_bits: int
    sign: int
    qnan: int | None


_FMT: Final[dict[Dtype, _Fmt]] = {
    D.float64: _Fmt(np.uint64, 11, 52, 1 << 63, 0x7FF8000000000000),
    D.float32: _Fmt(np.uint32, 8, 23, 1 << 31, 0x7FC00000),
    D.float16: _Fmt(np.uint16, 5, 10, 0x8000, 0x7E00),
    D.bfloat16: _Fmt(np.uint16, 8, 7, 0x8000, 0x7FC0),
    D.float8_e4m3fn: _Fmt(np.uint8, 4, 3, 0x80, 0x7F),
    D.float8_e5m2: _Fmt(np.uint8, 5, 2, 0x80, 0x7E),
    D.float4_e2m1fn: _Fmt(np.uint8, 2, 1, 0x08, None),
}


def _part(dt: Dtype) -> Dtype:
    """The float dtype of a complex dtype's parts."""
    return D.float32 if dt is D.complex64 else D.float64


def _ubits(a: Arr, dt: Dtype) -> Arr:
    """The bits of float array ``a`` of ``dt`` as unsigned integers."""
    return a.view(_FMT[dt].uint)


def _of_ubits(u: Arr, dt: Dtype) -> Arr:
    """The float array of ``dt`` whose bits are the unsigned integers ``u``."""
    return np.asarray(u).astype(_FMT[dt].uint).view(dt.numpy_dtype)


def _copy_bits(a: Arr) -> Arr:
    """A fresh C-contiguous copy of ``a``, byte for byte (no float conversion)."""
    raw = np.array(a.view(np.dtype((np.void, a.dtype.itemsize))), order="C")
    return raw.view(a.dtype)


def _isnan(a: Arr, dt: Dtype) -> Arr:
    """Where float array ``a`` of ``dt`` is a NaN."""
    if dt is D.float64 or dt is D.float32:
        return np.isnan(a)
    return np.isnan(a.astype(np.float32))


def _truth(a: Arr) -> Arr:
    """A boolean array's values: its byte is not 0."""
    return np.asarray(a.view(np.uint8) != 0)


def _select(c: Arr, x: Arr, y: Arr) -> Arr:
    """Element by element, ``x``'s bytes where ``c`` holds, else ``y``'s."""
    n = x.dtype.itemsize
    xb = np.ascontiguousarray(x).view(np.uint8).reshape((*x.shape, n))
    yb = np.ascontiguousarray(y).view(np.uint8).reshape((*y.shape, n))
    out = np.where(c[..., None], xb, yb)
    return np.ascontiguousarray(out).view(x.dtype).reshape(x.shape)


def _nan_rule(dt: Dtype, result: Arr, *operands: Arr) -> Arr:
    """``result`` where no operand is a NaN and it is none; else the first NaN
    operand's bits, or the canonical NaN where the result made one."""
    fmt = _FMT[dt]
    if fmt.qnan is None:
        return result
    out = np.where(_isnan(result, dt), fmt.uint(fmt.qnan), _ubits(result, dt))
    for op in reversed(operands):
        out = np.where(_isnan(op, dt), _ubits(op, dt), out)
    return _of_ubits(out, dt)


def _canonical(dt: Dtype, a: Arr) -> Arr:
    """``a`` with every NaN made the canonical NaN."""
    return _nan_rule(dt, a)


def _wide_float(a: Arr, dt: Dtype) -> Arr:
    """A float array in its compute dtype: float32 for the narrow floats."""
    if dt is D.float64 or dt is D.float32:
        return a
    return a.astype(np.float32)


def _store(dt: Dtype, v: Arr) -> Arr:
    """Float values ``v`` (float32 or float64) rounded once into ``dt``."""
    if v.dtype == dt.numpy_dtype:
        return v
    return D.of_float(dt, v.astype(np.float64))


def _join(re: Arr, im: Arr, dt: Dtype) -> Arr:
    """The complex array of ``dt`` with parts ``re`` and ``im``, bits kept."""
    part = _part(dt)
    pair = np.stack([_ubits(re, part), _ubits(im, part)], axis=-1)
    return np.ascontiguousarray(pair).view(dt.numpy_dtype).reshape(re.shape)


def _parts(a: Arr) -> tuple[Arr, Arr]:
    """A complex array's real and imaginary parts, bits kept."""
    return _copy_bits(a.real), _copy_bits(a.imag)


def _order_key(a: Arr, dt: Dtype) -> Arr:
    """An int64 key in the float total order: -inf < ... < -0 < +0 < ... < inf."""
    fmt = _FMT[dt]
    u = _ubits(a, dt).astype(np.uint64)
    mag = (u & np.uint64(fmt.sign - 1)).astype(np.int64)
    return np.where((u & np.uint64(fmt.sign)) != 0, -mag - 1, mag)


# --------------------------------------------------------------------------
# Float kinds
# --------------------------------------------------------------------------


def _np_erf(x: Arr) -> Arr:
    """erf of float64 ``x`` by the C library (NumPy has none)."""
    return np.asarray(np.vectorize(math.erf, otypes=[np.float64])(x))


_F64: Final[dict[Unary, Callable[[Arr], Arr]]] = {
    Unary.EXP: np.exp, Unary.EXP2: np.exp2, Unary.LOG: np.log, Unary.LOG2: np.log2,
    Unary.LOG1P: np.log1p, Unary.EXPM1: np.expm1, Unary.SIN: np.sin, Unary.COS: np.cos,
    Unary.TAN: np.tan, Unary.ASIN: np.arcsin, Unary.ACOS: np.arccos, Unary.ATAN: np.arctan,
    Unary.SINH: np.sinh, Unary.COSH: np.cosh, Unary.TANH: np.tanh, Unary.ERF: _np_erf,
}

_MP_UNARY: Final[dict[Unary, Callable[[Any, Any], Any]]] = {
    Unary.EXP: lambda m, x: m.exp(x), Unary.EXP2: lambda m, x: m.power(2, x),
    Unary.LOG: lambda m, x: m.log(x), Unary.LOG2: lambda m, x: m.log(x, 2),
    Unary.LOG1P: lambda m, x: m.log1p(x), Unary.EXPM1: lambda m, x: m.expm1(x),
    Unary.SIN: lambda m, x: m.sin(x), Unary.COS: lambda m, x: m.cos(x),
    Unary.TAN: lambda m, x: m.tan(x), Unary.ASIN: lambda m, x: m.asin(x),
    Unary.ACOS: lambda m, x: m.acos(x), Unary.ATAN: lambda m, x: m.atan(x),
    Unary.SINH: lambda m, x: m.sinh(x), Unary.COSH: lambda m, x: m.cosh(x),
    Unary.TANH: lambda m, x: m.tanh(x), Unary.ERF: lambda m, x: m.erf(x),
}

_MIN_NORMAL_F64: Final = 2.0**-1022
#: A bound, in float64 ulps, on the error of NumPy's float64 functions.
_NUMPY_ULPS: Final = 16


def _refine(r: Arr, args: Sequence[Arr], f: Callable[..., float], dt: Dtype) -> Arr:
    """NumPy's float64 values ``r`` of a function of ``args``, made correctly
    rounded into ``dt`` where mpmath is installed: a lane whose arguments are
    finite and nonzero and whose value is finite and normal is recomputed as
    ``f(*arguments)`` (mpmath at 160 bits) where ``dt`` is float64, and for a
    narrower ``dt`` where ``_NUMPY_ULPS`` float64 ulps could change its
    rounding into ``dt``. Other lanes keep NumPy's values and C99 special
    values (mpmath has no signed zeros)."""
    if _MPMATH is None:
        return r
    mask = np.isfinite(r) & (np.abs(r) >= _MIN_NORMAL_F64)
    for a in args:
        mask &= np.isfinite(a) & (a != 0)
    if dt is not D.float64:
        d = _NUMPY_ULPS * np.spacing(np.abs(r))
        below, above = D.of_float(dt, r - d), D.of_float(dt, r + d)
        mask &= _ubits(below, dt) != _ubits(above, dt)
    out = r.copy()
    flat = out.reshape(-1)
    flat_args = [a.reshape(-1) for a in args]
    for i in np.flatnonzero(mask.reshape(-1)):
        flat[i] = f(*(float(a[i]) for a in flat_args))
    return out


def _mp_context() -> Any:
    """A private mpmath context at 160 bits."""
    ctx = _MPMATH.MPContext()
    ctx.prec = 160
    return ctx


def _transcendental(kind: Unary, x: Arr, dt: Dtype) -> Arr:
    """``kind`` of float64 ``x``, in float64, for a result of ``dt`` (see
    ``_refine``)."""
    r = _F64[kind](x)
    if _MPMATH is None:
        return r
    ctx = _mp_context()
    fn = _MP_UNARY[kind]
    return _refine(r, [x], lambda v: float(fn(ctx, ctx.mpf(v))), dt)


def _mp_pow(ctx: Any, x: float, y: float) -> float:
    """``x ** y`` by mpmath for nonzero ``x``: a negative base takes the sign of
    an odd integer exponent (NumPy has already made the others NaN)."""
    v = float(ctx.power(ctx.mpf(abs(x)), ctx.mpf(y)))
    odd = y == math.floor(y) and math.fmod(y, 2.0) != 0
    return -v if x < 0 and odd else v


def _pow_atan2(kind: Binary, x: Arr, y: Arr, dt: Dtype) -> Arr:
    """Pow or Atan2 of float64 ``x`` and ``y``, as ``_transcendental``."""
    r = np.power(x, y) if kind is Binary.POW else np.arctan2(x, y)
    if _MPMATH is None:
        return r
    ctx = _mp_context()
    if kind is Binary.POW:
        return _refine(r, [x, y], lambda a, b: _mp_pow(ctx, a, b), dt)
    return _refine(r, [x, y], lambda a, b: float(ctx.atan2(ctx.mpf(a), ctx.mpf(b))), dt)


def _round_half_away(w: Arr) -> Arr:
    """Round half away from zero, keeping a zero's sign (exact: the fraction
    ``w - trunc(w)`` is exact)."""
    t = np.trunc(w)
    r = np.where(np.abs(w - t) >= 0.5, t + np.copysign(w.dtype.type(1), w), t)
    return np.copysign(r, w)


def _unary_float(kind: Unary, dt: Dtype, x: Arr) -> Arr:
    """A unary kind of floats: Neg and Abs on the sign bit, the rest computed
    and rounded once, then the NaN rule."""
    fmt = _FMT[dt]
    if kind is Unary.NEG:
        return _of_ubits(_ubits(x, dt) ^ fmt.uint(fmt.sign), dt)
    if kind is Unary.ABS:
        return _of_ubits(_ubits(x, dt) & fmt.uint(fmt.sign - 1), dt)
    w = _wide_float(x, dt)
    one = w.dtype.type(1)
    if kind is Unary.SQRT:
        r = np.sqrt(w)
    elif kind is Unary.RECIP:
        r = one / w
    elif kind is Unary.SIGN:
        # ±0 gives +0 (upstream §3); a NaN stays for the NaN rule.
        r = np.where(w > 0, one, np.where(w < 0, -one, np.where(w == 0, w.dtype.type(0), w)))
    elif kind is Unary.FLOOR:
        r = np.floor(w)
    elif kind is Unary.CEIL:
        r = np.ceil(w)
    elif kind is Unary.TRUNC:
        r = np.trunc(w)
    elif kind is Unary.ROUND:
        r = _round_half_away(w)
    else:
        r = _transcendental(kind, w.astype(np.float64), dt)
    return _nan_rule(dt, _store(dt, r), x)


def _extreme(kind: Binary, dt: Dtype, x: Arr, y: Arr) -> Arr:
    """Maximum or Minimum of floats: -0 below +0, the first NaN operand."""
    kx, ky = _order_key(x, dt), _order_key(y, dt)
    take_x = kx >= ky if kind is Binary.MAXIMUM else kx <= ky
    return _nan_rule(dt, _select(take_x, x, y), x, y)


def _binary_float(kind: Binary, dt: Dtype, x: Arr, y: Arr) -> Arr:
    """A binary kind of floats, computed and rounded once, then the NaN rule."""
    if kind in (Binary.MAXIMUM, Binary.MINIMUM):
        return _extreme(kind, dt, x, y)
    wx, wy = _wide_float(x, dt), _wide_float(y, dt)
    if kind is Binary.ADD:
        r = wx + wy
    elif kind is Binary.SUB:
        r = wx - wy
    elif kind is Binary.MUL:
        r = wx * wy
    elif kind is Binary.FDIV:
        r = wx / wy
    elif kind is Binary.MOD:
        r = np.fmod(wx, wy)
    elif kind in (Binary.POW, Binary.ATAN2):
        r = _pow_atan2(kind, wx.astype(np.float64), wy.astype(np.float64), dt)
    else:
        raise AssertionError(kind)
    out = _nan_rule(dt, _store(dt, r), x, y)
    if kind is Binary.POW:
        # Annex F's pow(x, ±0) = pow(1, y) = 1 wins over the NaN rule.
        fixed = (wy == 0) | (wx == 1)
        out = _select(fixed, _store(dt, np.ones(out.shape)), out)
    return out


def _split64(x: float) -> tuple[int, int]:
    """``(m, e)`` with ``x == m * 2**e`` exactly, ``m`` an integer."""
    f, e = math.frexp(x)
    return int(f * 2.0**53), e - 53


def _fma_exact(a: float, b: float, c: float) -> float:
    """``a * b + c`` of finite float64s, rounded once to nearest, ties to even."""
    ma, ea = _split64(a)
    mb, eb = _split64(b)
    mc, ec = _split64(c)
    mp, ep = ma * mb, ea + eb
    if mp == 0 and mc == 0:
        # Both terms are zeros: the sum is -0 only if both are -0.
        negative = math.copysign(1.0, a) * math.copysign(1.0, b) < 0 and math.copysign(1.0, c) < 0
        return -0.0 if negative else 0.0
    e = min(ep, ec)
    m = (mp << (ep - e)) + (mc << (ec - e))
    if m == 0:
        return 0.0
    try:
        return float(m << e) if e >= 0 else m / (1 << -e)
    except OverflowError:
        return math.inf if m > 0 else -math.inf


def _fma_float(dt: Dtype, a: Arr, b: Arr, c: Arr) -> Arr:
    """``a * b + c`` of floats rounded once."""
    if dt is D.float64:
        r = a * b + c
        finite_ab = np.isfinite(a) & np.isfinite(b)
        # With a finite product, an infinite c is the exact sum.
        r = np.where(finite_ab & ~np.isfinite(c), c, r)
        flat, fa, fb, fc = r.reshape(-1), a.reshape(-1), b.reshape(-1), c.reshape(-1)
        for i in np.flatnonzero((finite_ab & np.isfinite(c)).reshape(-1)):
            flat[i] = _fma_exact(float(fa[i]), float(fb[i]), float(fc[i]))
    else:
        # The product of two floats of 24 bits or fewer is exact in float64;
        # the sum is made round-to-odd in float64 (TwoSum, then a nudge to
        # the odd neighbour when inexact), which then rounds once correctly
        # into a format of 51 bits or fewer.
        wa, wb, wc = (v.astype(np.float64) for v in (a, b, c))
        p = wa * wb
        s = p + wc
        bb = s - p
        err = (p - (s - bb)) + (wc - bb)
        finite = np.isfinite(s)
        err = np.where(finite, err, 0.0)
        even = (s.view(np.uint64) & np.uint64(1)) == 0
        nudge = finite & (err != 0) & even
        s = np.where(nudge, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
        r = D.of_float(dt, s)
    return _nan_rule(dt, r, a, b, c)


# --------------------------------------------------------------------------
# Complex kinds
# --------------------------------------------------------------------------


def _smith(ar: Arr, ai: Arr, br: Arr, bi: Arr) -> tuple[Arr, Arr]:
    """``(ar + i ai) / (br + i bi)`` of float64 parts by Smith's algorithm with
    NumPy's branches: the divisor scaled by its larger part (the ratio at most
    1 in magnitude), then each part of the numerator divided by the scaled
    denominator. Dividing, where NumPy multiplies by the denominator's
    reciprocal, keeps a reciprocal that overflows to ±inf from making
    ``0 · inf = NaN``: (0 + 2⁻⁵⁰i) / (0 − 2⁻¹⁰⁷⁴i) is (−inf, +0), as exactly
    (mpmath) and upstream, not NumPy's (−inf, NaN). A zero divisor divides
    each part by +0 (NumPy's branch)."""
    with np.errstate(all="ignore"):
        abr, abi = np.abs(br), np.abs(bi)
        wide = abr >= abi  # False where a part is NaN, as C's fabs(br) >= fabs(bi)
        rat = np.where(wide, bi / br, br / bi)
        den = np.where(wide, br + bi * rat, br * rat + bi)
        qr = np.where(wide, ar + ai * rat, ar * rat + ai) / den
        qi = np.where(wide, ai - ar * rat, ai * rat - ar) / den
        zero = (abr == 0) & (abi == 0)
        return np.where(zero, ar / abr, qr), np.where(zero, ai / abr, qi)


def _complex_divide(dt: Dtype, x: Arr, y: Arr) -> Arr:
    """``x / y`` by ``_smith`` in float64, each part rounded once into ``dt``'s
    part dtype (complex64 thus divides in float64), NaN parts canonical."""
    part = _part(dt)
    wx, wy = x.astype(np.complex128), y.astype(np.complex128)
    qr, qi = _smith(wx.real, wx.imag, wy.real, wy.imag)
    re = _canonical(part, _store(part, qr))
    im = _canonical(part, _store(part, qi))
    return _join(re, im, dt)


def _complex_key_ge(dt: Dtype, x: Arr, y: Arr, strict: bool) -> Arr:
    """``x > y`` (strict) or ``x >= y`` in the total order of complex numbers."""
    part = _part(dt)
    (xr, xi), (yr, yi) = _parts(x), _parts(y)
    krx, kix, kry, kiy = (_order_key(v, part) for v in (xr, xi, yr, yi))
    tail = kix > kiy if strict else kix >= kiy
    return np.asarray((krx > kry) | ((krx == kry) & tail))


def _complex_nan(dt: Dtype, a: Arr) -> Arr:
    """Where a complex number has a NaN part."""
    re, im = _parts(a)
    return _isnan(re, _part(dt)) | _isnan(im, _part(dt))


def _unary_complex(kind: Unary, dt: Dtype, x: Arr) -> Arr:
    """Neg (both signs flipped) or Recip (``1 / x``) of complex numbers."""
    part = _part(dt)
    if kind is Unary.NEG:
        re, im = _parts(x)
        return _join(_unary_float(kind, part, re), _unary_float(kind, part, im), dt)
    if kind is Unary.RECIP:
        return _complex_divide(dt, np.ones_like(x), x)
    raise AssertionError(kind)


def _binary_complex(kind: Binary, dt: Dtype, x: Arr, y: Arr) -> Arr:
    """Add, Sub (part by part), Mul (textbook), Fdiv, Maximum, Minimum of complex
    numbers."""
    part = _part(dt)
    (xr, xi), (yr, yi) = _parts(x), _parts(y)
    if kind in (Binary.ADD, Binary.SUB):
        return _join(_binary_float(kind, part, xr, yr), _binary_float(kind, part, xi, yi), dt)
    if kind is Binary.MUL:
        re = xr * yr - xi * yi
        im = xr * yi + xi * yr
        return _join(_canonical(part, re), _canonical(part, im), dt)
    if kind is Binary.FDIV:
        return _complex_divide(dt, x, y)
    if kind in (Binary.MAXIMUM, Binary.MINIMUM):
        take_x = _complex_key_ge(dt, x, y, strict=False)
        if kind is Binary.MINIMUM:
            take_x = ~_complex_key_ge(dt, x, y, strict=True)
        nan_x, nan_y = _complex_nan(dt, x), _complex_nan(dt, y)
        take_x = nan_x | (~nan_y & take_x)
        return _select(take_x, x, y)
    raise AssertionError(kind)


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


# --------------------------------------------------------------------------
# Comparisons
# --------------------------------------------------------------------------


def _compare(kind: Compare, dt: Dtype, x: Arr, y: Arr) -> Arr:
    """A comparison (IEEE for floats, -0 == +0 and a NaN compares false but
    not-equal; unsigned for unsigned dtypes; complex by real then imaginary
    part, Equal on both), as a bool array."""
    if dt.is_complex:
        (xr, xi), (yr, yi) = _parts(x), _parts(y)
        nan = _complex_nan(dt, x) | _complex_nan(dt, y)
        eq = (xr == yr) & (xi == yi)
        if kind is Compare.EQUAL:
            return np.asarray(eq)
        if kind is Compare.NOT_EQUAL:
            return np.asarray(~eq)
        tail = xi < yi if kind is Compare.LESS else xi <= yi
        return np.asarray(~nan & ((xr < yr) | ((xr == yr) & tail)))
    if dt.is_float:
        a, b = _wide_float(x, dt), _wide_float(y, dt)
    elif dt.is_int:
        a, b = _wide_int(x, dt), _wide_int(y, dt)
    else:
        a, b = _truth(x).astype(np.uint8), _truth(y).astype(np.uint8)
    if kind is Compare.EQUAL:
        return np.asarray(a == b)
    if kind is Compare.NOT_EQUAL:
        return np.asarray(a != b)
    if kind is Compare.LESS:
        return np.asarray(a < b)
    return np.asarray(a <= b)


# --------------------------------------------------------------------------
# Conversions
# --------------------------------------------------------------------------


def _nan_convert(u: Arr, src: Dtype, dst: Dtype) -> Arr:
    """The bits in ``dst`` of NaNs of ``src`` with bits ``u``: the sign, the
    payload's high bits and the quiet bit (e4m3fn's NaN has no payload)."""
    fs, fd = _FMT[src], _FMT[dst]
    u64 = u.astype(np.uint64)
    negative = (u64 & np.uint64(fs.sign)) != 0
    if dst is D.float8_e4m3fn:
        body = np.full(u.shape, 0x7F, dtype=np.uint64)
    else:
        payload = np.zeros_like(u64) if src is D.float8_e4m3fn else (
            u64 & np.uint64((1 << fs.frac_bits) - 1))
        if fd.frac_bits >= fs.frac_bits:
            payload = payload << np.uint64(fd.frac_bits - fs.frac_bits)
        else:
            payload = payload >> np.uint64(fs.frac_bits - fd.frac_bits)
        top = ((1 << fd.exp_bits) - 1) << fd.frac_bits | 1 << (fd.frac_bits - 1)
        body = payload | np.uint64(top)
    return np.where(negative, body | np.uint64(fd.sign), body)


def _float_to_float(x: Arr, src: Dtype, dst: Dtype) -> Arr:
    """A float cast into another float dtype (the store rule; NaNs keep sign
    and high payload bits and become quiet; the same format keeps bits)."""
    if src is dst:
        return _copy_bits(x)
    r = D.of_float(dst, x.astype(np.float64))
    if _FMT[dst].qnan is None:
        return r
    nan = _isnan(x, src)
    nb = _nan_convert(_ubits(x, src), src, dst)
    return _of_ubits(np.where(nan, nb, _ubits(r, dst)), dst)


_TWO53: Final = np.uint64(1 << 53)
_LOW11: Final = np.uint64(0x7FF)


def _int_to_float(v: Arr, src: Dtype, dst: Dtype) -> Arr:
    """Integers ``v`` (int64 or uint64) of ``src`` into float ``dst``, their
    exact value rounded once."""
    if src.bits < 64:
        return D.of_float(dst, v.astype(np.float64))
    negative = v < 0 if src.kind is D.Kind.SIGNED else np.zeros(v.shape, dtype=np.bool_)
    m = v.astype(np.uint64)
    m = np.where(negative, np.uint64(0) - m, m)
    if dst is not D.float64:
        # Round to odd at bit 11: at least 53 - 11 = 42 bits survive above a
        # sticky bit, so the single rounding into 24 bits or fewer is correct.
        sticky = ((m & _LOW11) != 0).astype(np.uint64) << np.uint64(11)
        m = np.where(m >= _TWO53, (m & ~_LOW11) | sticky, m)
    # hi * 2^32 and lo are exact; their sum rounds once (exactly, below 2^53 bits).
    f = (m >> np.uint64(32)).astype(np.float64) * 2.0**32 + (m & np.uint64(0xFFFFFFFF)).astype(
        np.float64)
    return D.of_float(dst, np.where(negative, -f, f))


def _real_to_complex(re: Arr, dt: Dtype) -> Arr:
    """A complex array of ``dt`` with real part ``re`` and imaginary part +0."""
    return _join(re, np.zeros(re.shape, dtype=_part(dt).numpy_dtype), dt)


def _cast(x: Arr, src: Dtype, dst: Dtype) -> Arr:
    """Cast ``x`` of ``src`` into ``dst`` by the module's cast rules."""
    if src is dst:
        return _copy_bits(x)
    if src.is_complex:
        part = _part(src)
        re, im = _parts(x)
        if dst.is_complex:
            return _join(_float_to_float(re, part, _part(dst)),
                         _float_to_float(im, part, _part(dst)), dst)
        if dst.is_bool:
            return np.asarray((re != 0) | (im != 0))
        return _cast(re, part, dst)
    if dst.is_complex:
        return _real_to_complex(_cast(x, src, _part(dst)), dst)
    if src.is_float:
        if dst.is_float:
            return _float_to_float(x, src, dst)
        return D.of_float(dst, x.astype(np.float64))
    if src.is_bool:
        v = _truth(x).astype(np.int64)
        return np.asarray(v != 0) if dst.is_bool else _cast(v, D.int64, dst)
    v = _wide_int(x, src)
    if dst.is_bool:
        return np.asarray(v != 0)
    if dst.is_float:
        return _int_to_float(v, src, dst)
    return _wrap(dst, v)


def _bitcast(x: Arr, src: Dtype, dst: Dtype) -> Arr:
    """``x``'s bits read as ``dst`` of the same width."""
    if src is dst:
        return _copy_bits(x)
    if src.bits >= 8:
        return _copy_bits(x.view(dst.numpy_dtype))
    return _of_codes4(x.view(np.uint8) & np.uint8(15), dst)


# --------------------------------------------------------------------------
# Dispatch
# --------------------------------------------------------------------------


def _unary(kind: Unary, dt: Dtype, x: Arr) -> Arr:
    """A unary kind at any dtype it takes."""
    if dt.is_float:
        return _unary_float(kind, dt, x)
    if dt.is_complex:
        return _unary_complex(kind, dt, x)
    return _unary_int(kind, dt, x)


def _binary(kind: Binary, dt: Dtype, x: Arr, y: Arr) -> Arr:
    """A binary kind at any dtype it takes."""
    if dt.is_float:
        return _binary_float(kind, dt, x, y)
    if dt.is_complex:
        return _binary_complex(kind, dt, x, y)
    if dt.is_bool:
        return _binary_bool(kind, x, y)
    return _binary_int(kind, dt, x, y)


def _fma(dt: Dtype, a: Arr, b: Arr, c: Arr) -> Arr:
    """``a * b + c`` rounded once (floats) or wrapped (integers)."""
    if dt.is_float:
        return _fma_float(dt, a, b, c)
    return _wrap(dt, _wide_int(a, dt) * _wide_int(b, dt) + _wide_int(c, dt))


def _coord(shape: tuple[int, ...], axis: int) -> Arr:
    """Each index of ``shape`` along ``axis`` counted from the last, as int64."""
    rank = len(shape)
    if axis >= rank:
        raise ValueError(f"reference.evaluate: Coord axis {axis} is outside a loop of rank {rank}")
    along = rank - 1 - axis
    idx = np.arange(shape[along], dtype=np.int64).reshape(
        tuple(-1 if i == along else 1 for i in range(rank)))
    return np.ascontiguousarray(np.broadcast_to(idx, shape))


def evaluate(prog: Prog, operands: Sequence[Arr], shape: Sequence[int]) -> list[Arr]:
    """``prog`` at every index of ``shape``: one fresh C-contiguous array of
    ``shape`` per output, of its dtype's ``numpy_dtype``.

    ``operands[i]`` is an array of ``prog.ins[i].numpy_dtype`` that broadcasts
    to ``shape`` (sub-byte dtypes unpacked, one element per host element).
    ``Coord(axis)`` reads the index along array axis ``rank - 1 - axis``. Every
    node follows the module's rules.
    """
    shp = tuple(int(d) for d in shape)
    if len(operands) != prog.n_ins:
        raise ValueError(f"reference.evaluate: the program takes {prog.n_ins} operands, "
                         f"got {len(operands)}")
    ops: list[Arr] = []
    for i, (op, dt) in enumerate(zip(operands, prog.ins, strict=True)):
        a = np.asarray(op)
        if a.dtype != dt.numpy_dtype:
            raise ValueError(f"reference.evaluate: operand {i} is {a.dtype}, not {dt.name} "
                             f"({dt.numpy_dtype})")
        ops.append(_copy_bits(np.broadcast_to(a, shp)))
    vals: list[Arr] = []
    # IEEE exceptions are values here (NaNs, infinities, zeros), never warnings.
    with np.errstate(all="ignore"):
        for i, node in enumerate(prog.nodes):
            vals.append(_node(prog, i, node, ops, vals, shp))
    return [_copy_bits(vals[o]) for o in prog.outs]


def _node(prog: Prog, i: int, node: Node, ops: list[Arr], vals: list[Arr],
          shp: tuple[int, ...]) -> Arr:
    """Node ``i``'s value at every index of ``shp``, C-contiguous."""
    dt = prog.dtype(i)
    if isinstance(node, In):
        v = ops[node.index]
    elif isinstance(node, Coord):
        v = _coord(shp, node.axis)
    elif isinstance(node, Const):
        v = _copy_bits(np.broadcast_to(element(dt, node.bits), shp))
    elif isinstance(node, Op1):
        x, src = vals[node.x], prog.dtype(node.x)
        if node.kind is Convert.COPY:
            v = _copy_bits(x)
        elif node.kind is Convert.CAST:
            v = _cast(x, src, dt)
        elif node.kind is Convert.BITCAST:
            v = _bitcast(x, src, dt)
        else:
            v = _unary(node.kind, dt, x)
    elif isinstance(node, Op2):
        x, y, src = vals[node.x], vals[node.y], prog.dtype(node.x)
        if isinstance(node.kind, Compare):
            v = _compare(node.kind, src, x, y)
        else:
            v = _binary(node.kind, src, x, y)
    elif node.kind is Ternary.WHERE:
        v = _select(_truth(vals[node.c]), vals[node.x], vals[node.y])
    else:
        v = _fma(dt, vals[node.c], vals[node.x], vals[node.y])
    return np.ascontiguousarray(v).reshape(shp)


# --------------------------------------------------------------------------
# Distances
# --------------------------------------------------------------------------


def ulps(a: npt.ArrayLike, b: npt.ArrayLike, dt: Dtype) -> npt.NDArray[np.float64]:
    """The distance in ulps between float arrays ``a`` and ``b`` of ``dt``:
    the number of values of ``dt`` between them, stepping from one to the
    other (±0 count as one value, so they are 0 apart; the largest finite
    value is 1 from infinity). Two NaNs are 0 apart, a NaN and a number
    infinitely far. Of complex arrays, the larger of the parts' distances."""
    if dt.is_complex:
        x = np.asarray(a, dtype=dt.numpy_dtype)
        y = np.asarray(b, dtype=dt.numpy_dtype)
        (xr, xi), (yr, yi) = _parts(x), _parts(y)
        return np.maximum(ulps(xr, yr, _part(dt)), ulps(xi, yi, _part(dt)))
    if not dt.is_float:
        raise ValueError(f"reference.ulps: {dt.name} is not a float or complex dtype")
    x, y = np.broadcast_arrays(np.asarray(a, dtype=dt.numpy_dtype),
                               np.asarray(b, dtype=dt.numpy_dtype))
    kx, ky = _order_key(x, dt), _order_key(y, dt)
    # Merge -0 (key -1) with +0 (key 0): shift every negative key up by one.
    kx = np.where(kx < 0, kx + 1, kx)
    ky = np.where(ky < 0, ky + 1, ky)
    same_side = (kx >= 0) == (ky >= 0)
    with np.errstate(all="ignore"):
        near = np.abs(kx - ky).astype(np.float64)
    far = np.abs(kx).astype(np.float64) + np.abs(ky).astype(np.float64)
    d = np.where(same_side, near, far)
    nx, ny = _isnan(x, dt), _isnan(y, dt)
    d = np.where(nx | ny, np.inf, d)
    return np.where(nx & ny, 0.0, d)

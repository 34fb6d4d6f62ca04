"""The float kinds, each its exact result rounded once (see the package's doc)."""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Sequence
from typing import Any, Final

import numpy as np

from .. import dtype as D
from ..dtype import Dtype
from ..prog import (
    Binary,
    Unary,
)
from ._formats import (
    _FMT,
    Arr,
    _nan_rule,
    _of_ubits,
    _order_key,
    _select,
    _store,
    _ubits,
    _wide_float,
)

try:
    _MPMATH: Any = importlib.import_module("mpmath")
except ImportError:  # pragma: no cover - mpmath is optional
    _MPMATH = None


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

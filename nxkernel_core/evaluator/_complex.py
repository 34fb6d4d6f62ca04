"""The complex kinds (see the package's doc)."""

from __future__ import annotations

import numpy as np

from ..dtype import Dtype
from ..prog import (
    Binary,
    Unary,
)
from ._floats import _binary_float, _unary_float
from ._formats import Arr, _canonical, _isnan, _join, _order_key, _part, _parts, _select, _store

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

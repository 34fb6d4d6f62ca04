"""The comparisons and the conversions (Copy, Cast, Bitcast)."""

from __future__ import annotations

from typing import Final

import numpy as np

from .. import dtype as D
from ..dtype import Dtype
from ..prog import (
    Compare,
)
from ._complex import _complex_nan
from ._formats import (
    _FMT,
    Arr,
    _copy_bits,
    _isnan,
    _join,
    _of_ubits,
    _part,
    _parts,
    _truth,
    _ubits,
    _wide_float,
)
from ._integers import _of_codes4, _wide_int, _wrap

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

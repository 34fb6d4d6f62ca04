"""Sin, Cos and Tan of float64 at huge arguments, by a Payne–Hanek reduction.

Rule: ``sin``, ``cos`` and ``tan`` are NumPy's ufuncs (``np.sin``, ...) but
where ``|x| >= HUGE`` (2^20) and finite, whose value they compute here within
1 ulp of the correctly rounded one. The C library's reduction of such
arguments loses bits where x lies close to a multiple of π/2: at
0x1.6ac5b262ca1ffp+849, the double nearest such a multiple (2^-60.9 from it),
glibc's cos is 8 ulps off and its tan 14.

The reduction (``_reduce``) multiplies x's 53-bit integer significand m by a
192-bit window of 4/π's bits chosen by x's exponent, so that the product's
128 bits kept run from 2^2 down to 2^-125 of x·4/π: 3 bits of octant, then
125 of fraction, short by less than 2^-124. The nearest a double comes to a
multiple of π/2 is 2^-60.9 (Muller's bound, reached at the argument above),
so the reduced argument keeps at least 63 significant bits. It comes out as
a double-double r = rh + rl, |r| <= π/4, with the quadrant n.

Sin and Cos of r are their Taylor series (to x^21 and x^22, whose next terms
are below 2^-80 of the value at π/4) about rh, with rl's first-order term,
each a double-double within about 2^-54 of the value (relative); Tan is their
quotient (-Cos/Sin in odd quadrants) by a double-double division. Each result
is then rounded once: all three are within 1 ulp of the correctly rounded
value (at most 0.65 ulp measured against mpmath over 3,000 arguments, random
and next to multiples of π/2; 1 ulp at most on upstream's goldens).

``nxkernel_cuda``'s ``kernels/nxk_trig.cuh`` is the same algorithm in C, with
the same constants and the same order of operations: both libraries give the
same bits at huge arguments.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Final

import numpy as np
import numpy.typing as npt
from numba import njit

__all__ = ["FOUR_OVER_PI", "HUGE", "cos", "huge", "sin", "tan"]

Arr = npt.NDArray[Any]

#: Arguments at least this large (and finite) take the reduction here.
HUGE: Final = 2.0**20

#: 4/π = Σ FOUR_OVER_PI[i]·2^(-64 i): its integer part, then 1216 bits of its
#: fraction, enough for the largest double's window (words 16 to 19).
FOUR_OVER_PI: Final = np.array([
    0x0000000000000001, 0x45F306DC9C882A53, 0xF84EAFA3EA69BB81, 0xB6C52B3278872083,
    0xFCA2C757BD778AC3, 0x6E48DC74849BA5C0, 0x0C925DD413A32439, 0xFC3BD63962534E7D,
    0xD1046BEA5D768909, 0xD338E04D68BEFC82, 0x7323AC7306A673E9, 0x3908BF177BF25076,
    0x3FF12FFFBC0B301F, 0xDE5E2316B414DA3E, 0xDA6CFD9E4F96136E, 0x9E8C7ECD3CBFD45A,
    0xEA4F758FD7CBE2F6, 0x7A0E73EF14A525D4, 0xD7F6BF623F1ABA10, 0xAC06608DF8F6D757,
], dtype=np.uint64)

#: π/4 as a double-double: PIO4_HI the double nearest, PIO4_LO the rest rounded.
PIO4_HI: Final = float.fromhex("0x1.921fb54442d18p-1")
PIO4_LO: Final = float.fromhex("0x1.1a62633145c07p-55")

#: sin's Taylor coefficients (-1)^k / (2k+1)! for k = 1..10, and cos's
#: (-1)^k / (2k)! for k = 2..11, each the double nearest.
SIN_TAYLOR: Final = tuple((-1) ** k / math.factorial(2 * k + 1) for k in range(1, 11))
COS_TAYLOR: Final = tuple((-1) ** k / math.factorial(2 * k) for k in range(2, 12))

#: The kinds ``_trig`` computes.
_SIN, _COS, _TAN = 0, 1, 2

_M32: Final = np.uint64(0xFFFFFFFF)
_W32: Final = np.uint64(32)
_S1, _S2, _S3, _S4, _S5, _S6, _S7, _S8, _S9, _S10 = SIN_TAYLOR
_C2, _C3, _C4, _C5, _C6, _C7, _C8, _C9, _C10, _C11 = COS_TAYLOR

# Numba's integer rules: a uint64 mixed with a Python int is a float64, so
# every integer constant below is an np.uint64 or np.int64.


@njit(inline="always")
def _mul128(a: np.uint64, b: np.uint64) -> tuple[np.uint64, np.uint64]:  # pragma: no cover
    """The 128-bit product a·b as (high, low) words, from 32-bit halves (each
    partial product fits 64 bits; Numba has no 128-bit integer)."""
    a0, a1, b0, b1 = a & _M32, a >> _W32, b & _M32, b >> _W32
    p00, p01, p10, p11 = a0 * b0, a0 * b1, a1 * b0, a1 * b1
    mid = (p00 >> _W32) + (p01 & _M32) + (p10 & _M32)
    return p11 + (p01 >> _W32) + (p10 >> _W32) + (mid >> _W32), (mid << _W32) | (p00 & _M32)


@njit(inline="always")
def _two_sum(a: float, b: float) -> tuple[float, float]:  # pragma: no cover
    """``(s, e)`` with s = fl(a + b) and s + e == a + b exactly (Knuth)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


@njit(inline="always")
def _two_prod(a: float, b: float) -> tuple[float, float]:  # pragma: no cover
    """``(p, e)`` with p = fl(a·b) and p + e == a·b exactly (Dekker's product
    with Veltkamp's splitting; exact for |a|, |b| <= 2, as here)."""
    p = a * b
    ca = 134217729.0 * a
    ah = ca - (ca - a)
    al = a - ah
    cb = 134217729.0 * b
    bh = cb - (cb - b)
    bl = b - bh
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


@njit(inline="always")
def _reduce(a: float) -> tuple[np.int64, float, float]:  # pragma: no cover
    """``(n, rh, rl)`` with a = n·π/2 + rh + rl modulo 2π, |rh + rl| <= π/4,
    for finite a >= 2^-8 (see the module docstring)."""
    bits = np.float64(a).view(np.uint64)
    e = np.int64((bits >> np.uint64(52)) & np.uint64(0x7FF)) - 1075
    m = (bits & np.uint64(0xFFFFFFFFFFFFF)) | np.uint64(1 << 52)
    # a·4/π = m·2^-61·Y with Y = 4/π·2^s: z0, z1, z2 are Y mod 2^64 and the
    # next 128 bits of its fraction.
    s = e + 61
    d, sh = s // 64, np.uint64(s % 64)
    if sh == 0:
        z0, z1, z2 = FOUR_OVER_PI[d], FOUR_OVER_PI[d + 1], FOUR_OVER_PI[d + 2]
    else:
        back = np.uint64(64) - sh
        z0 = (FOUR_OVER_PI[d] << sh) | (FOUR_OVER_PI[d + 1] >> back)
        z1 = (FOUR_OVER_PI[d + 1] << sh) | (FOUR_OVER_PI[d + 2] >> back)
        z2 = (FOUR_OVER_PI[d + 2] << sh) | (FOUR_OVER_PI[d + 3] >> back)
    z2hi, _ = _mul128(z2, m)
    z1hi, z1lo = _mul128(z1, m)
    lo = z1lo + z2hi
    hi = z0 * m + z1hi + (np.uint64(1) if lo < z1lo else np.uint64(0))
    # hi:lo·2^-125 is a·4/π mod 8: 3 bits of octant j, 125 of fraction f,
    # taken as four doubles that hold their bits exactly.
    j = np.int64(hi >> np.uint64(61))
    fh = (hi << np.uint64(3)) | (lo >> np.uint64(61))
    fl = lo & np.uint64(0x1FFFFFFFFFFFFFFF)
    d1 = float(fh >> np.uint64(11)) * 2.0**-53
    d2 = float(fh & np.uint64(0x7FF)) * 2.0**-64
    d3 = float(fl >> np.uint64(8)) * 2.0**-117
    d4 = float(fl & np.uint64(0xFF)) * 2.0**-125
    if j & 1:
        # Count from the octant above: f - 1 in [-1, 0) (d1 - 1 is exact).
        j += 1
        d1 -= 1.0
    fs, fe = _two_sum(d1, d2)
    fs, fe = _two_sum(fs, fe + (d3 + d4))
    # r = f·π/4 as a double-double.
    ph, pe = _two_prod(fs, PIO4_HI)
    rh, rl = _two_sum(ph, pe + (fs * PIO4_LO + fe * PIO4_HI))
    return (j >> 1) & 3, rh, rl


@njit(inline="always")
def _sin_cos(rh: float, rl: float) -> tuple[float, float, float, float]:  # pragma: no cover
    """sin r and cos r as double-doubles (sh, sl, ch, cl), r = rh + rl, |r| <= π/4."""
    z = rh * rh
    p = _S1 + z * (_S2 + z * (_S3 + z * (_S4 + z * (_S5 + z * (_S6 + z * (_S7 + z * (_S8 + z * (
        _S9 + z * _S10))))))))
    sh, sl = _two_sum(rh, rh * z * p + rl * (1.0 - 0.5 * z))
    q = _C2 + z * (_C3 + z * (_C4 + z * (_C5 + z * (_C6 + z * (_C7 + z * (_C8 + z * (_C9 + z * (
        _C10 + z * _C11))))))))
    hh, he = _two_prod(0.5 * rh, rh)
    w, we = _two_sum(1.0, -hh)
    ch, cl = _two_sum(w, (we - he) - rl * rh + z * z * q)
    return sh, sl, ch, cl


@njit(inline="always")
def _divide(ah: float, al: float, bh: float, bl: float) -> float:  # pragma: no cover
    """(ah + al) / (bh + bl), rounded once but for a 2^-100 relative error."""
    q = ah / bh
    ph, pl = _two_prod(q, bh)
    return q + (((ah - ph) - pl) + al - q * bl) / bh


@njit(nogil=True, cache=True)
def _trig(kind: int, xs: Arr, out: Arr) -> None:  # pragma: no cover - compiled
    """``out[i]`` = Sin (0), Cos (1) or Tan (2) of ``xs[i]``, finite, |x| >= 2^-8."""
    for i in range(xs.size):
        x = xs[i]
        n, rh, rl = _reduce(abs(x))
        sh, sl, ch, cl = _sin_cos(rh, rl)
        if kind == 1:
            out[i] = ch if n == 0 else -sh if n == 1 else -ch if n == 2 else sh
            continue
        if kind == 0:
            v = sh if n == 0 else ch if n == 1 else -sh if n == 2 else -ch
        else:
            v = _divide(sh, sl, ch, cl) if n % 2 == 0 else -_divide(ch, cl, sh, sl)
        out[i] = -v if x < 0 else v


def huge(kind: int, x: Arr) -> Arr:
    """Sin (0), Cos (1) or Tan (2) of finite float64 ``x`` with ``|x| >= 2^-8``
    (the reduction above), as float64."""
    xs = np.ascontiguousarray(x, dtype=np.float64).reshape(-1)
    out = np.empty(xs.shape, dtype=np.float64)
    _trig(kind, xs, out)
    return out.reshape(np.shape(x))


def _fixed(uf: np.ufunc, kind: int) -> Callable[..., Arr]:
    def f(x: Arr, out: Arr | None = None, dtype: Any = None) -> Arr:
        r = np.asarray(uf(x, out=out, dtype=dtype))
        if x.size == 0:
            return r
        lo, hi = np.min(x), np.max(x)
        if lo > -HUGE and hi < HUGE:
            # No huge argument (nor NaN): two SIMD reductions save the mask.
            return r
        xb = np.broadcast_to(x, r.shape).reshape(-1)
        at = np.flatnonzero((np.abs(xb) >= HUGE) & np.isfinite(xb))
        if at.size:
            r.reshape(-1)[at] = huge(kind, xb[at])
        return r

    f.__name__ = uf.__name__
    f.__doc__ = (f"NumPy's {uf.__name__} (same arguments: x, out, dtype), but where "
                 f"2^20 <= |x| < inf, where it is within 1 ulp (Payne–Hanek).")
    return f


#: ``np.sin``, ``np.cos`` and ``np.tan`` with huge arguments reduced here.
sin: Final = _fixed(np.sin, _SIN)
cos: Final = _fixed(np.cos, _COS)
tan: Final = _fixed(np.tan, _TAN)

"""Exp and Tanh of float32 in loops LLVM vectorises (no libm calls): in
float32 arithmetic (``expf``, ``tanhf``: the float32 kinds'), and the float32
path (``exp32``, ``tanh32``: float32 arguments, the narrow floats widened to
them, computed in float64 and rounded once into float32).

Rule: each function writes each element's value into ``out`` (float32 or
float64 for the float32 path, float32 for ``expf`` and ``tanhf``), rounded
once there. ``expf`` and ``tanhf`` are within 1 float32 ulp of the correctly
rounded value (see How). The float32 path's values are within about 2^-35 of
the exact ones, far below a float32 ulp (2^-24 of the value), so each
float32 result is within 1 float32 ulp of the correctly rounded one. C99
Annex F's special values are exact: exp(±0) = 1, exp(+inf) = +inf,
exp(-inf) = +0; tanh(±0) = ±0, tanh(±inf) = ±1; a NaN gives a quiet NaN;
overflow gives +inf and underflow the subnormal or zero that rounding gives.
Each element's value depends on its argument alone (``simdbase``).

Why: Numba's exp and tanh are the C library's scalar ones, a call per
element that keeps a loop from vectorising, and NumPy's float32 loops
computing in float64 (the float32 path before) convert through buffers (Exp
1.9 ns per element against 0.9 here, Tanh 2.4 against 1.7). A program's
compiled loop (``fused``) calls ``expf_one`` and ``tanhf_one`` too.

How:

- The float32 path: e^c = 2^k·(1 + m), m = e^r − 1 by one-part ln2 and the
  Taylor series to r^9/9! (``simdbase.exp_short``); Exp scales in one step;
  Tanh is −t/(2 + t), t = e^(−2|x|) − 1 = 2^k·(1 + m) − 1 (t's relative
  error stays near 2^-36 at small |x|), |x| clamped to 9.5.
- ``expf`` and ``tanhf``, every operation in float32 (twice the lanes of
  float64, no conversions; measured in cache, one thread: Exp 0.37 ns per
  element against NumPy's float32 0.51 and the float32 path's 0.64; Tanh
  0.49-0.65 against NumPy's 0.46-0.54 and the last form's 0.68-0.72, side by
  side on a loaded machine: NumPy's, from SVML, takes a polynomial per
  interval from a table, without a division). Exp: e^x = 2^k·(1 + m), m =
  e^r − 1 = r + r²·E(r) (r by two-part ln2, E a degree-5 fit), fl(s1 +
  s1·m)·s2 with 2^k = s1·s2 both normal, x clamped to [-104, 89]. Tanh:
  below |x| = 0.75, |x| + |x|³·T(x²) (T a degree-5 fit, relative error
  2^-29); from it 1 − 2/(d + 1), d = e^(2b) = 2^(k+1)·(1/2 + h), h =
  (e^(2r) − 1)/2 = r + r²·H(r), r = b − k·ln2/2 by one-part ln2/2 (H a
  degree-4 fit: d's errors are weighed by 2/(d + 1) <= 0.37 in the result),
  d + 1 rounded once by a fused multiply-add, |x| clamped to 9.5: 41
  instructions per 16 lanes on AVX-512 (44 before, one division). Each is
  within 1 ulp of the correctly rounded value: every float32 of [-10, 10]
  for Tanh (2.2·10^9 arguments, 0.24% not correctly rounded, the largest
  error 1.07 ulps of the exact value, at 0.755), every fifth of [-104, 89]
  for Exp (4.5·10^8, 0.77%), against NumPy's float64 rounded
  (``tests/host/test_simd.py``, the sweeps opt-in); 0 ulps on upstream's
  float32 goldens (``tests/goldens``) for the float32 path.
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np
import numpy.typing as npt
from numba import njit

from .simdbase import exp_short, fma, fmaf, over_array, wide_vectors

__all__ = ["exp32", "expf", "expf_one", "expm1f_parts", "pow2f", "tanh32", "tanhf", "tanhf_one"]

Arr = npt.NDArray[Any]


# --------------------------------------------------------------------------
# The float32 path: float64 arithmetic to about 2^-35, rounded into float32
# --------------------------------------------------------------------------


@njit(inline="always")
def _exp32(x: float) -> float:  # pragma: no cover - compiled
    """e^x for a float32 x, to about 2^-36 (float32's range clamped: e^90
    overflows float32, e^-110 underflows it; the comparisons keep a NaN,
    which the arithmetic carries to the result)."""
    c = 90.0 if x > 90.0 else x
    c = -110.0 if c < -110.0 else c
    scale, m = exp_short(c)
    return fma(scale, m, scale)


@njit(inline="always")
def _tanh32(x: float) -> float:  # pragma: no cover - compiled
    """tanh x for a float32 x, to about 2^-35: −t/(2 + t), t = e^(−2|x|) − 1
    (= scale·(1 + m) − 1, scale − 1 exact), |x| clamped to 9.5 (tanh rounds
    to 1 in float32 beyond 9.02)."""
    a = abs(x)
    a = 9.5 if a > 9.5 else a
    scale, m = exp_short(-2.0 * a)
    t = fma(scale, m, scale - 1.0)
    return float(np.copysign(-t / (2.0 + t), x))


# --------------------------------------------------------------------------
# Exp and Tanh of float32 in float32 arithmetic (16 lanes on AVX-512)
# --------------------------------------------------------------------------

_F32: Final = np.float32
#: 1/ln2 and ln2 = LN2F_HI + LN2F_LO, LN2F_HI of 16 bits (k·LN2F_HI exact
#: for |k| < 2^8); 1.5·2^23, whose addition rounds a float32 below 2^22 to an
#: integer, and its bits.
_INVLN2F: Final = _F32(1.4426950408889634)
_LN2F_HI: Final = _F32(0.693145751953125)
_LN2F_LO: Final = _F32(1.4286068203094172e-06)
_SHIFTF: Final = _F32(12582912.0)
_SHIFTF_BITS: Final = np.int32(0x4B400000)
_BIASF: Final = np.int32(127)
_W23: Final = np.int32(23)
#: e^r − 1 = r + r²·E(r) for |r| <= ln2/2: E's coefficients, r^0 first (a
#: minimax fit in float64, relative error 2^-32 of e^r − 1, rounded to float32).
(_E0, _E1, _E2, _E3, _E4, _E5) = (
    _F32(0.5), _F32(0.1666666567325592), _F32(0.041666362434625626),
    _F32(0.008333389647305012), _F32(0.0013940627686679363), _F32(0.00019845877250190824))
#: tanh(a) = a + a·u·T(u), u = a² <= 0.5625: T's coefficients, u^0 first (a
#: minimax fit, relative error 2^-29 of tanh a, rounded to float32).
(_T0, _T1, _T2, _T3, _T4, _T5) = (
    _F32(-0.33333316), _F32(0.13332695), _F32(-0.053892724), _F32(0.02145203),
    _F32(-0.007657248), _F32(0.0017369315))
#: Below it Tanh is T's polynomial, from it 1 − 2/(e^(2|x|) + 1).
_TANH_CUT: Final = _F32(0.75)
#: Tanh's e^(2b) = 2^k·(1 + 2h): 2/ln2 and ln2/2 (one part: an error of ln2/2
#: moves d by k·2^-31 relative, weighed in the result by 2/(d + 1) ≈ 2^(1−k));
#: the bits of 2^(k+1) are those of ``fl(b·2/ln2 + SHIFTF)`` plus
#: ``_TANH_BIAS``, shifted to the exponent.
_TWO_INVLN2F: Final = _F32(2.8853900817779268)
_HALF_LN2F: Final = _F32(0.34657359027997264)
_TANH_BIAS: Final = np.int32(128) - _SHIFTF_BITS
#: h = (e^(2r) − 1)/2 = r + r²·H(r) for |r| <= ln2/4: H's coefficients, r^0
#: first (a fit of relative error 2^-28 of e^(2r) at Chebyshev nodes, halved
#: and rounded to float32).
(_TH0, _TH1, _TH2, _TH3, _TH4) = (
    _F32(0.9999999), _F32(0.6666608), _F32(0.33334714), _F32(0.1339005), _F32(0.044206265))


@njit(inline="always")
def expm1f_parts(c: np.float32) -> tuple[np.int32, np.float32]:  # pragma: no cover - compiled
    """``(k, m)`` with e^c = 2^k·(1 + m), k = round(c/ln2), m = e^r − 1 for
    r = c − k·ln2 (two-part ln2), for float32 |c| <= 110; a NaN c makes m a
    NaN (k is read from bits, never converted)."""
    t = fmaf(c, _INVLN2F, _SHIFTF)
    k = np.int32(_F32(t).view(np.int32)) - _SHIFTF_BITS
    kf = t - _SHIFTF
    r = fmaf(-kf, _LN2F_LO, fmaf(-kf, _LN2F_HI, c))
    r2 = r * r
    e = fmaf(r2, fmaf(r2, fmaf(r, _E5, _E4), fmaf(r, _E3, _E2)), fmaf(r, _E1, _E0))
    return k, fmaf(r2, e, r)


@njit(inline="always")
def pow2f(k: np.int32) -> np.float32:  # pragma: no cover - compiled
    """2^k for -126 <= k <= 127, from its exponent bits."""
    return np.int32((k + _BIASF) << _W23).view(np.float32)


@njit(inline="always")
def expf_one(x: np.float32) -> np.float32:  # pragma: no cover - compiled
    """e^x of a float32, in float32: 2^k·(1 + m) as fl(s1 + s1·m)·s2, 2^k =
    s1·s2 split so both are normal (the last product rounds once more only
    into a subnormal or past the largest float32); x clamped to [-104, 89]
    (e^89 overflows float32, e^-104 underflows it; a NaN passes). Within 1
    ulp of the correctly rounded value."""
    c = _F32(89.0) if x > _F32(89.0) else x
    c = _F32(-104.0) if c < _F32(-104.0) else c
    k, m = expm1f_parts(c)
    k1 = k >> np.int32(1)
    s1 = pow2f(k - k1)
    return fmaf(s1, m, s1) * pow2f(k1)


@njit(inline="always")
def tanhf_one(x: np.float32) -> np.float32:  # pragma: no cover - compiled
    """tanh x of a float32, in float32: |x| below 0.75, |x| + |x|·u·T(u);
    from it, 1 − 2/(d + 1) with d = e^(2b) = 2^(k+1)·(1/2 + h), b = |x|
    clamped to 9.5 (tanh rounds to 1 beyond 9.02), d + 1 rounded once; x's
    sign copied. Within 1 ulp of the correctly rounded value."""
    a = abs(x)
    u = a * a
    u2 = u * u
    t = fmaf(u2, fmaf(u2, fmaf(u, _T5, _T4), fmaf(u, _T3, _T2)), fmaf(u, _T1, _T0))
    small = fmaf(a * u, t, a)
    b = _F32(9.5) if a > _F32(9.5) else a
    c = fmaf(b, _TWO_INVLN2F, _SHIFTF)
    s2 = np.int32((np.int32(_F32(c).view(np.int32)) + _TANH_BIAS) << _W23).view(np.float32)
    r = fmaf(_SHIFTF - c, _HALF_LN2F, b)
    r2 = r * r
    h = fmaf(r2, fmaf(r2, fmaf(r2, _TH4, fmaf(r, _TH3, _TH2)), fmaf(r, _TH1, _TH0)), r)
    large = _F32(1.0) - _F32(2.0) / fmaf(s2, h, fmaf(s2, _F32(0.5), _F32(1.0)))
    # A NaN takes ``large``, a NaN.
    return _F32(np.copysign(small if a < _TANH_CUT else large, x))


@njit(nogil=True, cache=True, error_model="numpy")
def _expf_loop(x: Arr, out: Arr) -> None:  # pragma: no cover - compiled
    wide_vectors()
    for i in range(out.size):
        out[i] = expf_one(x[i])


@njit(nogil=True, cache=True, error_model="numpy")
def _tanhf_loop(x: Arr, out: Arr) -> None:  # pragma: no cover - compiled
    wide_vectors()
    for i in range(out.size):
        out[i] = tanhf_one(x[i])


@njit(nogil=True, cache=True, error_model="numpy")
def _exp32_loop(x: Arr, out: Arr) -> None:  # pragma: no cover - compiled
    wide_vectors()
    for i in range(out.size):
        out[i] = _exp32(np.float64(x[i]))


@njit(nogil=True, cache=True, error_model="numpy")
def _tanh32_loop(x: Arr, out: Arr) -> None:  # pragma: no cover - compiled
    wide_vectors()
    for i in range(out.size):
        out[i] = _tanh32(np.float64(x[i]))


#: ``f(x, out=None)``: the float32 path's Exp and Tanh.
exp32: Final = over_array(_exp32_loop, np.float32, "exp32")
tanh32: Final = over_array(_tanh32_loop, np.float32, "tanh32")
#: ``f(x, out=None)``: Exp and Tanh of float32 computed in float32 (``out``
#: float32).
_IN_FLOAT32: Final = "computed in float32 arithmetic"
expf: Final = over_array(_expf_loop, np.float32, "expf", _IN_FLOAT32)
tanhf: Final = over_array(_tanhf_loop, np.float32, "tanhf", _IN_FLOAT32)

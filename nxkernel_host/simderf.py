"""Erf in loops LLVM vectorises (no libm calls): of float64 (``erf``), of
float32 in float32 arithmetic (``erff``: the float32 kind's), and the float32
path (``erf32``: the narrow floats widened to float32, computed in float64
and rounded once into float32).

Rule: ``erf`` and ``erf32`` write each element's erf, computed in float64,
into ``out`` (float32 or float64), rounded once there; ``erff`` computes in
float32. ``erf`` is within ``ULPS`` (1 ulp) of the correctly rounded value.
The float32 path's values are within about 2^-35 of the exact ones, far below
a float32 ulp (2^-24 of the value), so each float32 result is within 1
float32 ulp of the correctly rounded one; ``erff``'s are within 1.1 float32
ulps of the exact ones, so within 1 ulp of the correctly rounded one (checked
at every float32 below 4; 1.4% of them not correctly rounded). C99 Annex F's
special values are exact: erf(±0) = ±0, erf(±inf) = ±1; a NaN gives a quiet
NaN. Each element's value depends on its argument alone (``simdbase``).

Why: NumPy has no erf, and Numba's is the C library's scalar one, a call per
element that keeps a loop from vectorising. A program's compiled loop
(``fused``) calls ``erf_one`` and ``erff_one`` too: GELU is one pass. ``erff``
runs 16 lanes on AVX-512 where the float64 path runs 8, and shorter fits:
2.5-2.8 times ``erf32``'s speed (measured on one thread, 10^6 elements).

How:

- Erf of float64: for |x| < 1, x·(C0 + u·Q(u)), u = x², C0 = 2/√π as a
  double-double, Q a degree-11 fit (Chebyshev nodes, error below 2^-60); for
  1 <= |x|, 1 − e^(−x²)·F(x), x² a double-double, e^(−x²) by
  ``simdbase.exp_parts``, F = erfc(x)·e^(x²) a degree-17 fit in s = (33 −
  13|x|)/(15 + 5|x|) (Chebyshev nodes in 3/(3 + |x|), relative error below
  2^-61), |x| clamped to 6 (erf rounds to 1 beyond 5.92).
- The float32 path: as above with an 8-term Q and a 17-term F in s = (2|x|
  − 5)/3 on [1, 4], |x| clamped to 4, e^(−x²) by ``simdbase.exp_short``.
- ``erff``, every operation in float32: below |x| = 1, a + a·P(u), u = a²,
  P a degree-6 fit of erf(a)/a − 1 (2^-29.5); from it, 1 − e^(−a²)·F(a),
  F = erfc·e^(a²) a degree-7 fit in s = (6 − 3a)/(2 + a) (relative
  2^-25.8), a² = h + l exactly (a fused multiply-add), e^(−a²) =
  e^(−h)·(1 − l) with e^(−h) by ``simdfloat32.expm1f_parts``, a clamped to
  [1, 4]. Each fit is least squares at Chebyshev nodes against mpmath, its
  coefficients rounded to float32 one at a time, the later ones fitted again
  after each rounding.

Measured against mpmath (``tests/host/test_simd.py``) and on upstream's
correctly rounded vectors (``tests/goldens``): at most 1 ulp from the
correctly rounded value for Erf of float64 and of float32.
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np
import numpy.typing as npt
from numba import njit

from .simdbase import exp_parts, exp_short, fma, fmaf, over_array, pow2, wide_vectors
from .simdfloat32 import expm1f_parts, pow2f

__all__ = ["ULPS", "erf", "erf32", "erf32_one", "erf_one", "erff", "erff_one"]

Arr = npt.NDArray[Any]

#: The bound of ``erf`` (float64) in ulps from the correctly rounded value.
ULPS: Final = 1

#: 2/√π = C0_HI + C0_LO.
_C0_HI: Final = 1.1283791670955126
_C0_LO: Final = 1.533545961316588e-17
#: erf(x)/x = C0 + u·Q(u), u = x² in [0, 1]: Q's coefficients, u^0 first.
(_Q0, _Q1, _Q2, _Q3, _Q4, _Q5, _Q6, _Q7, _Q8, _Q9, _Q10, _Q11) = (
    -0.37612638903183754, 0.11283791670955111, -0.026866170645123838, 0.005223977625303518,
    -0.0008548327010033328, 0.00012055332214716276, -1.4925622504489842e-05,
    1.6461446656928561e-06, -1.6355118610877705e-07, 1.4692484859133263e-08,
    -1.1500357159785296e-09, 6.174097221305255e-11)
#: erfc(x)·e^(x²) for x in [1, 6] as a polynomial in s = (33 − 13x)/(15 + 5x)
#: (s = 1 at x = 1, −1 at x = 6), s^0 first.
(_F0, _F1, _F2, _F3, _F4, _F5, _F6, _F7, _F8, _F9, _F10, _F11, _F12, _F13, _F14, _F15, _F16,
 _F17) = (
    0.20798329133342885, 0.15436117429436919, 0.04969844540339479, 0.012713147695691884,
    0.00247931469707251, 0.00033160296058002244, 1.9563583307619395e-05, -2.425557490937032e-06,
    -5.54127740965682e-07, 4.526754922146699e-09, 1.1340254942109842e-08, 2.637263861967703e-10,
    -2.5808981071930677e-10, -5.963650569479177e-12, 6.7116180144214575e-12,
    -4.239697689489278e-14, -1.668874241933841e-13, 8.915437127980025e-15)


#: The float32 path's fits, accurate to about 2^-37 (a float32 ulp is 2^-24):
#: Q as above from 8 Chebyshev nodes; F = erfc(x)·e^(x²) on [1, 4] as a
#: polynomial in s = (2x − 5)/3, from 17 nodes.
(_G0, _G1, _G2, _G3, _G4, _G5, _G6, _G7) = (
    -0.3761263890283394, 0.11283791626146691, -0.02686616120045799, 0.005223901522381322,
    -0.0008545300982032149, 0.00011989474929662575, -1.4119450134908322e-05,
    1.1131013908553317e-06)
(_H0, _H1, _H2, _H3, _H4, _H5, _H6, _H7, _H8, _H9, _H10, _H11, _H12, _H13, _H14, _H15,
 _H16) = (
    0.2108063640611436, -0.111521020166433, 0.05611049343905012, -0.027005297539129766,
    0.012489374163431244, -0.0055706939996416896, 0.0024036437310381714, -0.0010059073126846983,
    0.0004091094785966628, -0.00016176248976652324, 6.249842547895193e-05,
    -2.4069947374138474e-05, 8.860847089031764e-06, -2.671312099623873e-06,
    9.59334995094123e-07, -6.36497045800298e-07, 2.1340922384406343e-07)


_F32: Final = np.float32
#: ``erff``'s fits (the module's doc): erf(a)/a − 1 = P(u), u = a² in [0, 1],
#: u^0 first; erfc(a)·e^(a²) = E(s), s = (6 − 3a)/(2 + a) in [−1, 1] for a in
#: [1, 4], s^0 first.
(_P0, _P1, _P2, _P3, _P4, _P5, _P6) = (_F32(c) for c in (
    0.12837916612625122, -0.3761262893676758, 0.11283618211746216, -0.026855124160647392,
    0.005190725903958082, -0.000803065428044647, 7.919901690911502e-05))
(_E0, _E1, _E2, _E3, _E4, _E5, _E6, _E7) = (_F32(c) for c in (
    0.25539568066596985, 0.1423952877521515, 0.026850875467061996, 0.002925089094787836,
    4.6151442802511156e-05, -2.87027723970823e-05, -1.1915115010197042e-06,
    3.845130720492307e-07))


@njit(inline="always")
def _q_poly(u: float) -> float:  # pragma: no cover - compiled
    """Q(u), erf's fit below 1."""
    u2 = u * u
    u4 = u2 * u2
    return fma(u4 * u4, fma(u2, fma(u, _Q11, _Q10), fma(u, _Q9, _Q8)),
               fma(u4, fma(u2, fma(u, _Q7, _Q6), fma(u, _Q5, _Q4)),
                   fma(u2, fma(u, _Q3, _Q2), fma(u, _Q1, _Q0))))


@njit(inline="always")
def _f_poly(s: float) -> float:  # pragma: no cover - compiled
    """F(s), erf's fit from 1."""
    s2 = s * s
    s4 = s2 * s2
    s8 = s4 * s4
    lo = fma(s4, fma(s2, fma(s, _F7, _F6), fma(s, _F5, _F4)),
             fma(s2, fma(s, _F3, _F2), fma(s, _F1, _F0)))
    hi = fma(s4, fma(s2, fma(s, _F15, _F14), fma(s, _F13, _F12)),
             fma(s2, fma(s, _F11, _F10), fma(s, _F9, _F8)))
    return fma(s8 * s8, fma(s, _F17, _F16), fma(s8, hi, lo))


@njit(inline="always")
def _g_poly(u: float) -> float:  # pragma: no cover - compiled
    """Q(u) of the float32 path."""
    u2 = u * u
    return fma(u2 * u2, fma(u2, fma(u, _G7, _G6), fma(u, _G5, _G4)),
               fma(u2, fma(u, _G3, _G2), fma(u, _G1, _G0)))


@njit(inline="always")
def _h_poly(s: float) -> float:  # pragma: no cover - compiled
    """F(s) of the float32 path."""
    s2 = s * s
    s4 = s2 * s2
    s8 = s4 * s4
    lo = fma(s4, fma(s2, fma(s, _H7, _H6), fma(s, _H5, _H4)),
             fma(s2, fma(s, _H3, _H2), fma(s, _H1, _H0)))
    hi = fma(s4, fma(s2, fma(s, _H15, _H14), fma(s, _H13, _H12)),
             fma(s2, fma(s, _H11, _H10), fma(s, _H9, _H8)))
    return fma(s8 * s8, _H16, fma(s8, hi, lo))


@njit(inline="always")
def erf_one(x: float) -> float:  # pragma: no cover - compiled
    """erf x of one float64: below |x| = 1, x·(C0 + u·Q(u)); from it,
    1 − e^(−x²)·F(x) (see the module's doc). Within ``ULPS`` (1 ulp) of the
    correctly rounded value; erf(±0) = ±0, erf(±inf) = ±1, a NaN quiet."""
    a = abs(x)
    # Below 1: x·(C0 + u·Q(u)).
    u = a * a if a < 1.0 else 1.0
    q = _q_poly(u)
    small = fma(a, _C0_HI, a * fma(u, q, _C0_LO))
    # From 1: 1 − e^(−x²)·F(x).
    b = a if a >= 1.0 else 1.0
    b = 6.0 if not b <= 6.0 else b
    s = fma(-13.0, b, 33.0) / fma(5.0, b, 15.0)
    f = _f_poly(s)
    hh = b * b
    hl = fma(b, b, -hh)
    k, eh, el = exp_parts(-hh)
    e = (eh + fma(-hl, eh, el)) * pow2(k)
    large = 1.0 - e * f
    v = small if a < 1.0 else large
    return np.copysign(v, x) if x == x else x + x


@njit(inline="always")
def erf32_one(x: float) -> float:  # pragma: no cover - compiled
    """erf x for one float32 x (as float64), to about 2^-35: as ``erf_one``
    with the shorter fits, F a polynomial in s = (2|x| − 5)/3, |x| clamped to
    4 (erf rounds to 1 in float32 beyond 3.92)."""
    a = abs(x)
    u = a * a if a < 1.0 else 1.0
    q = _g_poly(u)
    small = a * fma(u, q, _C0_HI)
    b = a if a >= 1.0 else 1.0
    b = 4.0 if not b <= 4.0 else b
    s = fma(b, 2.0 / 3.0, -5.0 / 3.0)
    f = _h_poly(s)
    scale, m = exp_short(-(b * b))
    large = 1.0 - fma(scale, m, scale) * f
    # A NaN takes ``small``, a NaN.
    return float(np.copysign(large if a >= 1.0 else small, x))


@njit(inline="always")
def erff_one(x: np.float32) -> np.float32:  # pragma: no cover - compiled
    """erf x of a float32, in float32: below |x| = 1, a + a·P(a²); from it,
    1 − e^(−a²)·E(s) (see the module's doc), a clamped to [1, 4] (erf rounds
    to 1 in float32 beyond 3.92); x's sign copied. Within 1 ulp of the
    correctly rounded value; erf(±0) = ±0, erf(±inf) = ±1, a NaN quiet."""
    a = abs(x)
    u = a * a
    u2 = u * u
    p = fmaf(u2 * u2, fmaf(u2, _P6, fmaf(u, _P5, _P4)),
             fmaf(u2, fmaf(u, _P3, _P2), fmaf(u, _P1, _P0)))
    small = fmaf(a, p, a)
    b = _F32(4.0) if a > _F32(4.0) else a
    b = _F32(1.0) if b < _F32(1.0) else b
    h = b * b
    k, m = expm1f_parts(-h)
    scale = pow2f(k)
    e = fmaf(scale, m, scale)
    e = fmaf(-e, fmaf(b, b, -h), e)
    s = fmaf(_F32(-3.0), b, _F32(6.0)) / (_F32(2.0) + b)
    s2 = s * s
    f = fmaf(s2 * s2, fmaf(s2, fmaf(s, _E7, _E6), fmaf(s, _E5, _E4)),
             fmaf(s2, fmaf(s, _E3, _E2), fmaf(s, _E1, _E0)))
    large = _F32(1.0) - e * f
    # A NaN takes ``large``, a NaN.
    return _F32(np.copysign(small if a < _F32(1.0) else large, x))


@njit(nogil=True, cache=True, error_model="numpy")
def _erf_loop(x: Arr, out: Arr) -> None:  # pragma: no cover - compiled
    wide_vectors()
    for i in range(out.size):
        out[i] = erf_one(x[i])


@njit(nogil=True, cache=True, error_model="numpy")
def _erf32_loop(x: Arr, out: Arr) -> None:  # pragma: no cover - compiled
    wide_vectors()
    for i in range(out.size):
        out[i] = erf32_one(np.float64(x[i]))


@njit(nogil=True, cache=True, error_model="numpy")
def _erff_loop(x: Arr, out: Arr) -> None:  # pragma: no cover - compiled
    wide_vectors()
    for i in range(out.size):
        out[i] = erff_one(x[i])


#: ``f(x, out=None)``: Erf of float64, and the float32 path's Erf.
erf: Final = over_array(_erf_loop, np.float64, "erf")
erf32: Final = over_array(_erf32_loop, np.float32, "erf32")
#: ``f(x, out=None)``: Erf of float32 computed in float32 (``out`` float32).
erff: Final = over_array(_erff_loop, np.float32, "erff", "computed in float32 arithmetic")

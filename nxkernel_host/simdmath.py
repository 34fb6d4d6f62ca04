"""Exp, Tanh and Erf in loops LLVM vectorises (no libm calls): the float32
path of the three in float64 (float32 arguments, the narrow floats widened
to them), Erf of float64, and Exp and Tanh of float32 in float32 arithmetic
(``expf``, ``tanhf``: the float32 kinds'), Exp and Tanh of float64
(``exp64``, ``tanh64``).

Rule: each function writes each element's value, computed in float64 (in
float32 by ``expf`` and ``tanhf``), into ``out`` (float32 or float64),
rounded once there. ``expf`` and ``tanhf`` are within 1 float32 ulp of the
correctly rounded value (see How). ``erf``, ``exp64`` and ``tanh64`` are
within ``BOUNDS`` (1 ulp) of the correctly rounded value. The float32 path's
values are within about 2^-35 of the exact ones, far below a float32 ulp
(2^-24 of the value), so each float32 result is within 1 float32 ulp of the
correctly rounded one. C99 Annex F's special values are exact: exp(±0) = 1,
exp(+inf) = +inf, exp(-inf) = +0; tanh(±0) = ±0, tanh(±inf) = ±1;
erf(±0) = ±0, erf(±inf) = ±1; a NaN gives a quiet NaN; overflow gives +inf
and underflow the subnormal or zero that rounding gives. Each element's value
depends on its argument alone: no thread count, box or position changes a
bit (the vector loop and its scalar remainder do the same operations, fused
multiply-adds included).

Why: Numba calls the C library's scalar ``exp``, ``tanh`` and ``erf``, one
element at a time, so a loop that calls them does not vectorise; NumPy has no
erf, and its float32 loops computing in float64 (the float32 path before)
convert through buffers (Exp 1.9 ns per element against 0.9 here, Tanh 2.4
against 1.7). Every function here is branch-free arithmetic (fused
multiply-adds, the bits of the exponent set by integer operations, selects
for the ranges, table reads LLVM makes gathers of), which LLVM turns into
8-wide AVX-512 code (``_wide_vectors``; 16-wide in float32), or 4-wide on
AVX2. Exp of float64 alone runs at NumPy's speed and Tanh of float64 alone
slower (see the float64 section), but a program's compiled loop (``fused``)
can call them, where it could not call NumPy's: ``x·sigmoid(x)`` of float64
is one pass, not four.

How:

- Erf of float64: for |x| < 1, x·(C0 + u·Q(u)), u = x², C0 = 2/√π as a
  double-double, Q a degree-11 fit (Chebyshev nodes, error below 2^-60); for
  1 <= |x|, 1 − e^(−x²)·F(x), x² a double-double, e^(−x²) by ``_exp_parts``,
  F = erfc(x)·e^(x²) a degree-17 fit in s = (33 − 13|x|)/(15 + 5|x|)
  (Chebyshev nodes in 3/(3 + |x|), relative error below 2^-61), |x| clamped
  to 6 (erf rounds to 1 beyond 5.92).
- The float32 path: e^c = 2^k·(1 + m), m = e^r − 1 by one-part ln2 and the
  Taylor series to r^9/9! (``_exp_short``); Exp scales in one step; Tanh is
  −t/(2 + t), t = e^(−2|x|) − 1 = 2^k·(1 + m) − 1 (t's relative error stays
  near 2^-36 at small |x|), |x| clamped to 9.5; Erf as above with an 8-term
  Q and a 17-term F in s = (2|x| − 5)/3 on [1, 4], |x| clamped to 4.

The polynomials are evaluated by Estrin's scheme: the loops are bound by
latency, and Horner's rule chains every coefficient's operation after the
last (a float64 Exp at 4 lanes, measured on a loaded machine: 2.6 ns per
element by Horner, 1.6 by Estrin).

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
  for Exp (4.5·10^8, 0.77%), against NumPy's float64 rounded.

Measured against mpmath (``tests/host/test_simdmath.py``) and on upstream's
correctly rounded vectors (``tests/goldens``): at most 1 ulp from the
correctly rounded value for Erf of float64, 0 on the float32 goldens for the
float32 path; Exp and Tanh of float64 at most 1 ulp over 4·10^7 arguments
each (the opt-in sweep; about 0.04% of Exp's and 2% of Tanh's not correctly
rounded).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Final, cast

import numpy as np
import numpy.typing as npt
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

__all__ = ["BOUNDS", "erf", "erf32", "exp32", "exp64", "expf", "fma", "prefer_wide_vectors",
           "tanh32", "tanh64", "tanhf"]

Arr = npt.NDArray[Any]

#: The bounds of the float64 functions (``erf``, ``exp64``, ``tanh64``) in
#: ulps from the correctly rounded value.
BOUNDS: Final = {"erf": 1, "exp": 1, "tanh": 1}

_INVLN2: Final = 1.4426950408889634
#: ln2 = LN2_HI + LN2_LO, LN2_HI with its low 21 bits clear (fdlibm's).
_LN2_HI: Final = 6.93147180369123816490e-01
_LN2_LO: Final = 1.90821492927058770002e-10
#: 1.5·2^52: adding it rounds a float64 of magnitude below 2^51 to an integer.
_SHIFT: Final = 6755399441055744.0
_SHIFT_BITS: Final = np.int64(np.float64(_SHIFT).view(np.int64))
_BIAS: Final = np.int64(1023)
_W52: Final = np.int64(52)

#: 1/n! for n = 2..13: e^r = 1 + r + r²·(P2 + r·(P3 + ...)).
(_P2, _P3, _P4, _P5, _P6, _P7, _P8, _P9, _P10, _P11, _P12, _P13) = (
    1 / 2, 1 / 6, 1 / 24, 1 / 120, 1 / 720, 1 / 5040, 1 / 40320, 1 / 362880, 1 / 3628800,
    1 / 39916800, 1 / 479001600, 1 / 6227020800)

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
_LN2: Final = 0.6931471805599453


@intrinsic
def _fma_intrinsic(typingctx: Any, a: Any, b: Any, c: Any) -> Any:
    """a·b + c rounded once (LLVM's llvm.fma, a vector instruction)."""
    sig = a(a, b, c)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        ty = context.get_value_type(signature.return_type)
        fn = builder.module.declare_intrinsic("llvm.fma", [ty], ir.FunctionType(ty, [ty] * 3))
        return builder.call(fn, args)

    return sig, codegen


#: ``_fma_intrinsic`` as compiled code calls it, typed for the checker.
fma: Final = cast("Callable[[float, float, float], float]", _fma_intrinsic)
#: The same of float32 operands.
_fmaf: Final = cast("Callable[[np.float32, np.float32, np.float32], np.float32]", _fma_intrinsic)


def prefer_wide_vectors(builder: Any) -> None:
    """Make the function ``builder`` writes prefer 512-bit vectors (LLVM's
    ``prefer-vector-width``), for an intrinsic's code generation."""
    # A string attribute llvmlite's list does not know: set.add skips its check.
    set.add(builder.function.attributes, '"prefer-vector-width"="512"')


@intrinsic
def _wide_vectors_intrinsic(typingctx: Any) -> Any:
    """Nothing, but the function it is called in prefers 512-bit vectors:
    LLVM's x86 tuning prefers 256 bits, which halves the float64 loops'
    lanes on AVX-512 (measured: exp 1.5 ns per element against 1.0)."""
    sig = types.none()

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        prefer_wide_vectors(builder)
        return context.get_dummy_value()

    return sig, codegen


#: ``_wide_vectors_intrinsic`` as compiled code calls it, typed for the checker.
_wide_vectors: Final = cast("Callable[[], None]", _wide_vectors_intrinsic)


@njit(inline="always")
def _pow2(k: np.int64) -> float:  # pragma: no cover - compiled
    """2^k for -1022 <= k <= 1023, from its exponent bits."""
    return np.int64((k + _BIAS) << _W52).view(np.float64)


@njit(inline="always")
def _exp_poly(r: float, r2: float) -> float:  # pragma: no cover - compiled
    """P(r) = Σ r^(n−2)/n!, n = 2..13 (``r2`` = r²)."""
    r4 = r2 * r2
    return fma(r4 * r4, fma(r2, fma(r, _P13, _P12), fma(r, _P11, _P10)),
               fma(r4, fma(r2, fma(r, _P9, _P8), fma(r, _P7, _P6)),
                   fma(r2, fma(r, _P5, _P4), fma(r, _P3, _P2))))


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
def _exp_parts(x: float) -> tuple[np.int64, float, float]:  # pragma: no cover - compiled
    """``(k, eh, el)`` with e^x = 2^k·(eh + el) to about 2^-104 of it, eh =
    fl(1 + r) and el the rest, for finite |x| <= 746: k = round(x/ln2), r =
    x − k·ln2 by Cody and Waite's two-part ln2 (k·LN2_HI and x − k·LN2_HI
    exact), r's rounding kept, e^r = 1 + r + r²·P(r)."""
    t = x * _INVLN2 + _SHIFT
    k = np.int64(np.float64(t).view(np.int64)) - _SHIFT_BITS
    kf = t - _SHIFT
    hi = x - kf * _LN2_HI
    lo = kf * _LN2_LO
    r = hi - lo
    r_err = (hi - r) - lo
    p = _exp_poly(r, r * r)
    eh = 1.0 + r
    return k, eh, ((1.0 - eh) + r) + fma(r * r, p, fma(r_err, r, r_err))


@njit(inline="always")
def _erf(x: float) -> float:  # pragma: no cover - compiled
    """erf x (see the module's doc)."""
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
    k, eh, el = _exp_parts(-hh)
    e = (eh + fma(-hl, eh, el)) * _pow2(k)
    large = 1.0 - e * f
    v = small if a < 1.0 else large
    return np.copysign(v, x) if x == x else x + x


# --------------------------------------------------------------------------
# The float32 path: float64 arithmetic to about 2^-35, rounded into float32
# --------------------------------------------------------------------------


@njit(inline="always")
def _exp_short(c: float) -> tuple[float, float]:  # pragma: no cover - compiled
    """``(scale, m)`` with e^c = scale·(1 + m) to about 2^-37, scale = 2^k
    and m = e^r − 1 (r = c − k·ln2, |r| <= ln2/2, m to about 2^-36 of
    itself), for |c| <= 1000; a NaN c makes m a NaN (and scale any number:
    k is read from bits, never converted, so no operation is undefined)."""
    t = c * _INVLN2 + _SHIFT
    k = np.int64(np.float64(t).view(np.int64)) - _SHIFT_BITS
    r = fma(-(t - _SHIFT), _LN2, c)
    r2 = r * r
    r4 = r2 * r2
    p = fma(r4, fma(r2, fma(r, _P9, _P8), fma(r, _P7, _P6)),
            fma(r2, fma(r, _P5, _P4), fma(r, _P3, _P2)))
    return _pow2(k), fma(r2, p, r)


@njit(inline="always")
def _exp32(x: float) -> float:  # pragma: no cover - compiled
    """e^x for a float32 x, to about 2^-36 (float32's range clamped: e^90
    overflows float32, e^-110 underflows it; the comparisons keep a NaN,
    which the arithmetic carries to the result)."""
    c = 90.0 if x > 90.0 else x
    c = -110.0 if c < -110.0 else c
    scale, m = _exp_short(c)
    return fma(scale, m, scale)


@njit(inline="always")
def _tanh32(x: float) -> float:  # pragma: no cover - compiled
    """tanh x for a float32 x, to about 2^-35: −t/(2 + t), t = e^(−2|x|) − 1
    (= scale·(1 + m) − 1, scale − 1 exact), |x| clamped to 9.5 (tanh rounds
    to 1 in float32 beyond 9.02)."""
    a = abs(x)
    a = 9.5 if a > 9.5 else a
    scale, m = _exp_short(-2.0 * a)
    t = fma(scale, m, scale - 1.0)
    return float(np.copysign(-t / (2.0 + t), x))


@njit(inline="always")
def _erf32(x: float) -> float:  # pragma: no cover - compiled
    """erf x for a float32 x, to about 2^-35: as ``_erf`` with the shorter
    fits, F a polynomial in s = (2|x| − 5)/3, |x| clamped to 4 (erf rounds
    to 1 in float32 beyond 3.92)."""
    a = abs(x)
    u = a * a if a < 1.0 else 1.0
    q = _g_poly(u)
    small = a * fma(u, q, _C0_HI)
    b = a if a >= 1.0 else 1.0
    b = 4.0 if not b <= 4.0 else b
    s = fma(b, 2.0 / 3.0, -5.0 / 3.0)
    f = _h_poly(s)
    scale, m = _exp_short(-(b * b))
    large = 1.0 - fma(scale, m, scale) * f
    # A NaN takes ``small``, a NaN.
    return float(np.copysign(large if a >= 1.0 else small, x))


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
def _expm1f_parts(c: np.float32) -> tuple[np.int32, np.float32]:  # pragma: no cover - compiled
    """``(k, m)`` with e^c = 2^k·(1 + m), k = round(c/ln2), m = e^r − 1 for
    r = c − k·ln2 (two-part ln2), for float32 |c| <= 110; a NaN c makes m a
    NaN (k is read from bits, never converted)."""
    t = _fmaf(c, _INVLN2F, _SHIFTF)
    k = np.int32(_F32(t).view(np.int32)) - _SHIFTF_BITS
    kf = t - _SHIFTF
    r = _fmaf(-kf, _LN2F_LO, _fmaf(-kf, _LN2F_HI, c))
    r2 = r * r
    e = _fmaf(r2, _fmaf(r2, _fmaf(r, _E5, _E4), _fmaf(r, _E3, _E2)), _fmaf(r, _E1, _E0))
    return k, _fmaf(r2, e, r)


@njit(inline="always")
def _pow2f(k: np.int32) -> np.float32:  # pragma: no cover - compiled
    """2^k for -126 <= k <= 127, from its exponent bits."""
    return np.int32((k + _BIASF) << _W23).view(np.float32)


@njit(inline="always")
def _expf(x: np.float32) -> np.float32:  # pragma: no cover - compiled
    """e^x of a float32, in float32: 2^k·(1 + m) as fl(s1 + s1·m)·s2, 2^k =
    s1·s2 split so both are normal (the last product rounds once more only
    into a subnormal or past the largest float32); x clamped to [-104, 89]
    (e^89 overflows float32, e^-104 underflows it; a NaN passes)."""
    c = _F32(89.0) if x > _F32(89.0) else x
    c = _F32(-104.0) if c < _F32(-104.0) else c
    k, m = _expm1f_parts(c)
    k1 = k >> np.int32(1)
    s1 = _pow2f(k - k1)
    return _fmaf(s1, m, s1) * _pow2f(k1)


@njit(inline="always")
def _tanhf(x: np.float32) -> np.float32:  # pragma: no cover - compiled
    """tanh x of a float32, in float32: |x| below 0.75, |x| + |x|·u·T(u);
    from it, 1 − 2/(d + 1) with d = e^(2b) = 2^(k+1)·(1/2 + h), b = |x|
    clamped to 9.5 (tanh rounds to 1 beyond 9.02), d + 1 rounded once; x's
    sign copied."""
    a = abs(x)
    u = a * a
    u2 = u * u
    t = _fmaf(u2, _fmaf(u2, _fmaf(u, _T5, _T4), _fmaf(u, _T3, _T2)), _fmaf(u, _T1, _T0))
    small = _fmaf(a * u, t, a)
    b = _F32(9.5) if a > _F32(9.5) else a
    c = _fmaf(b, _TWO_INVLN2F, _SHIFTF)
    s2 = np.int32((np.int32(_F32(c).view(np.int32)) + _TANH_BIAS) << _W23).view(np.float32)
    r = _fmaf(_SHIFTF - c, _HALF_LN2F, b)
    r2 = r * r
    h = _fmaf(r2, _fmaf(r2, _fmaf(r2, _TH4, _fmaf(r, _TH3, _TH2)), _fmaf(r, _TH1, _TH0)), r)
    large = _F32(1.0) - _F32(2.0) / _fmaf(s2, h, _fmaf(s2, _F32(0.5), _F32(1.0)))
    # A NaN takes ``large``, a NaN.
    return _F32(np.copysign(small if a < _TANH_CUT else large, x))


@njit(nogil=True, cache=True, error_model="numpy")
def _expf_loop(x: Arr, out: Arr) -> None:  # pragma: no cover - compiled
    _wide_vectors()
    for i in range(out.size):
        out[i] = _expf(x[i])


@njit(nogil=True, cache=True, error_model="numpy")
def _tanhf_loop(x: Arr, out: Arr) -> None:  # pragma: no cover - compiled
    _wide_vectors()
    for i in range(out.size):
        out[i] = _tanhf(x[i])


@njit(nogil=True, cache=True, error_model="numpy")
def _erf_loop(x: Arr, out: Arr) -> None:  # pragma: no cover - compiled
    _wide_vectors()
    for i in range(out.size):
        out[i] = _erf(x[i])


@njit(nogil=True, cache=True, error_model="numpy")
def _exp32_loop(x: Arr, out: Arr) -> None:  # pragma: no cover - compiled
    _wide_vectors()
    for i in range(out.size):
        out[i] = _exp32(np.float64(x[i]))


@njit(nogil=True, cache=True, error_model="numpy")
def _tanh32_loop(x: Arr, out: Arr) -> None:  # pragma: no cover - compiled
    _wide_vectors()
    for i in range(out.size):
        out[i] = _tanh32(np.float64(x[i]))


@njit(nogil=True, cache=True, error_model="numpy")
def _erf32_loop(x: Arr, out: Arr) -> None:  # pragma: no cover - compiled
    _wide_vectors()
    for i in range(out.size):
        out[i] = _erf32(np.float64(x[i]))


def _over_array(loop: Any, dtype: type[np.floating[Any]], name: str,
                how: str = "computed in float64 and rounded once into out's type"
                ) -> Callable[..., Arr]:
    def f(x: Arr, out: Arr | None = None) -> Arr:
        xs = np.ascontiguousarray(x, dtype=dtype)
        res = out if out is not None and out.flags.c_contiguous else np.empty(xs.shape, dtype)
        loop(xs.reshape(-1), res.reshape(-1))
        if out is not None and res is not out:
            np.copyto(out, res, casting="same_kind")
            return out
        return res

    f.__name__ = name
    f.__doc__ = (f"{name} of each element of ``x`` (as {dtype.__name__}) into ``out`` (float32 or "
                 f"float64, x's shape; default a fresh {dtype.__name__} array), {how} (see the "
                 f"module's doc).")
    return f


#: ``f(x, out=None)``: the float32 path of each kind, and Erf of float64.
exp32: Final = _over_array(_exp32_loop, np.float32, "exp32")
#: ``f(x, out=None)``: Exp and Tanh of float32 computed in float32 (``out``
#: float32).
_IN_FLOAT32: Final = "computed in float32 arithmetic"
expf: Final = _over_array(_expf_loop, np.float32, "expf", _IN_FLOAT32)
tanhf: Final = _over_array(_tanhf_loop, np.float32, "tanhf", _IN_FLOAT32)
tanh32: Final = _over_array(_tanh32_loop, np.float32, "tanh32")
erf32: Final = _over_array(_erf32_loop, np.float32, "erf32")
erf: Final = _over_array(_erf_loop, np.float64, "erf")


# --------------------------------------------------------------------------
# Exp and Tanh of float64 (8 lanes on AVX-512)
# --------------------------------------------------------------------------
# Exp is e^x = 2^k·2^(j/128)·e^r, |r| <= ln2/256, 2^(j/128) read from a
# table (T_BITS or T_HI, and T_TAIL: two gathers) and e^r by a degree-5
# polynomial: the relative error before the one rounding is below 2^-60, so
# each result is within 0.51 ulp of e^x and within 1 ulp of the correctly
# rounded value (about 0.04% not correctly rounded; without T_TAIL, one
# gather less, 26%). ``exp64`` runs ``_exp64_normal`` (20 operations and 2
# gathers per 8 lanes) over chunks whose results are all normal and finite
# and ``_exp64`` (the clamp, the subnormals' rounding, the two-step scaling;
# the compiled loop's) over the others, the same bits either way. Measured
# on one thread, side by side, in cache and at 10^7: np.exp's time over
# ours 1.02-1.08 (``_exp64`` alone takes 1.4-1.6 times ours; ``_exp_parts``'
# way, before, 2.1 times).
# Tanh costs more than np.tanh (2.7 ns against 2.35): NumPy's loops look up
# tables by vector permutes, which LLVM makes of no scalar loop, and Tanh
# runs ``_exp_parts``'s degree-13 polynomial, a division and double-double
# sums. Both pay in the compiled loop: one pass in place of a pass per node.

#: Exp's clamp: e^710 overflows float64 and e^-746 rounds to +0.
_EXP_TOP: Final = 710.0
_EXP_BOTTOM: Final = -746.0
#: The exponent of the smallest normal float64.
_KMIN: Final = np.int64(-1022)
#: Tanh's clamp: tanh rounds to 1 from 19.06.
_TANH_TOP: Final = 20.0

#: Exp's table: 2^(j/N) = T_HI[j]·(1 + T_TAIL[j]), j = 0..N-1, N = 2^7.
_TBITS: Final = 7
_TN: Final = 1 << _TBITS


def _exp_table() -> tuple[Arr, Arr, Arr]:
    """``(T_HI, T_TAIL, T_BITS)``: 2^(j/N) rounded to float64, the rest
    relative to it, and T_HI's bits less j·2^45 (adding n·2^45, n = k·N + j,
    gives the bits of 2^k·T_HI[j]). 2^(j/N) by seven square roots of 2^j in
    fixed point of 200 fractional bits, each floored (within 2^-198 in all,
    far below T_TAIL's own rounding); T_HI and T_TAIL are the correctly
    rounded quotients of integers."""
    hi, tail = np.empty(_TN), np.empty(_TN)
    one = 1 << 200
    for j in range(_TN):
        v = (1 << j) * one
        for _ in range(_TBITS):
            v = math.isqrt(v * one)
        hi[j] = v / one
        p, q = hi[j].as_integer_ratio()
        tail[j] = (v * q - p * one) / (one * p)
    bits = hi.view(np.int64) - (np.arange(_TN, dtype=np.int64) << np.int64(45))
    return hi, tail, bits


#: Read-only module arrays: Numba compiles them in as constants.
_T_HI, _T_TAIL, _T_BITS = _exp_table()
_INVLN2N: Final = _TN / _LN2
_LN2N_HI: Final = _LN2_HI / _TN
_LN2N_LO: Final = _LN2_LO / _TN
_TMASK: Final = np.int64(_TN - 1)
_TSHIFT: Final = np.int64(_TBITS)
_W45: Final = np.int64(45)
#: e^r = 1 + r + r²·(X2 + r·X3 + r²·X4 + r³·X5) for |r| <= ln2/(2N) within
#: 2^-63.6 of its value (a fit at Chebyshev nodes).
_X2, _X3, _X4, _X5 = (float.fromhex(h) for h in (
    "0x1.fffffffffff58p-2", "0x1.5555555555525p-3", "0x1.55555accc1ca7p-5",
    "0x1.11111430bcc06p-7"))
#: The least float64 whose e^x is normal (e^x >= 2^-1022); the bits of its
#: magnitude, the fast loop's bound on |x| (2^k·T_HI normal and finite).
_EXP_NORMAL: Final = -708.3964185322641
_EXP_FAST_BITS: Final = np.int64(np.float64(-_EXP_NORMAL).view(np.int64))
_ABS_BITS: Final = np.int64(0x7FFFFFFFFFFFFFFF)
#: The fast loop's chunk (elements).
_CHUNK: Final = 512


@njit(inline="always")
def _exp_reduce(x: float) -> tuple[np.int64, float]:  # pragma: no cover - compiled
    """``(n, t)`` with e^x = 2^(n/N)·(1 + t') and 2^(n/N) = 2^k·T_HI[j]:
    n = round(x·N/ln2) = k·N + j, r = x − n·ln2/N (the first fused
    multiply-add exact by Sterbenz, LN2N_HI·n exact), t = T_TAIL[j] + r +
    r²·X(r), the relative error of 1 + t below 2^-60."""
    z = fma(x, _INVLN2N, _SHIFT)
    n = np.int64(np.float64(z).view(np.int64)) - _SHIFT_BITS
    nf = z - _SHIFT
    r = fma(nf, -_LN2N_LO, fma(nf, -_LN2N_HI, x))
    r2 = r * r
    return n, _T_TAIL[n & _TMASK] + fma(r2, fma(r2, fma(r, _X5, _X4), fma(r, _X3, _X2)), r)


@njit(inline="always")
def _exp64_normal(x: float) -> float:  # pragma: no cover - compiled
    """e^x for |x| <= -_EXP_NORMAL: s + s·t rounded once,
    s = 2^k·T_HI[j] built from its bits."""
    n, t = _exp_reduce(x)
    s = np.int64(_T_BITS[n & _TMASK] + (n << _W45)).view(np.float64)
    return fma(s, t, s)


@njit(inline="always")
def _exp64(x: float) -> float:  # pragma: no cover - compiled
    """e^x of a float64: 2^k·(eh + el), eh = T_HI[j], el = eh·t, eh + el
    rounded once (one fused multiply-add, as ``_exp64_normal``) and scaled by
    2^k as s1·s2 (both normal, so the scaling is exact). Where the result is
    subnormal (x < _EXP_NORMAL), eh + el is rounded on the subnormals' grid at
    once: C + eh + el rounded once, C = 2^(-1022-k) (whose ulp is that grid's
    at this k), then C taken away exactly, as glibc does it at another scale.
    x clamped to [-746, 710] (e^710 overflows, e^-746 rounds to +0; a NaN
    passes: the arithmetic carries it)."""
    c = _EXP_TOP if x > _EXP_TOP else x
    c = _EXP_BOTTOM if c < _EXP_BOTTOM else c
    n, t = _exp_reduce(c)
    k = n >> _TSHIFT
    eh = _T_HI[n & _TMASK]
    el = eh * t
    # 1 <= C <= 2^55 (k >= -1077 where c >= -746): C + eh by Fast2Sum.
    tiny = c < _EXP_NORMAL
    big = _pow2(_KMIN - k) if tiny else 0.0
    one = big + eh
    sub = (one + (((big - one) + eh) + el)) - big
    # Elsewhere eh + eh·t rounded once, ``_exp64_normal``'s bits.
    v = sub if tiny else fma(eh, t, eh)
    k1 = k >> np.int64(1)
    return v * _pow2(k - k1) * _pow2(k1)


@njit(inline="always")
def _tanh64(x: float) -> float:  # pragma: no cover - compiled
    """tanh x of a float64: m/(m + 2), m = e^(2|x|) − 1 = 2^k·(eh + el) − 1
    as a double-double (mh + ml), the quotient by one division and one
    correction of its residual; |x| clamped to 20 (a NaN passes); x's sign
    copied."""
    a = abs(x)
    a = _TANH_TOP if a > _TANH_TOP else a
    k, eh, el = _exp_parts(a + a)
    s = _pow2(k)
    sh = eh * s
    sl = el * s
    # m = (sh − 1) + sl, each sum by Fast2Sum: sh − 1 is exact below 1
    # (Sterbenz) and sh >= 1/2; |sh − 1| >= |sl| or the sum is exact.
    t = sh - 1.0
    e1 = -1.0 - (t - sh)
    mh = t + sl
    ml = (sl - (mh - t)) + e1
    # d = m + 2 by 2Sum.
    dh = mh + 2.0
    bb = dh - mh
    dl = ((mh - (dh - bb)) + (2.0 - bb)) + ml
    y = 1.0 / dh
    q = mh * y
    r = fma(-q, dh, mh) + fma(-q, dl, ml)
    return float(np.copysign(fma(r, y, q), x))


@njit(inline="always")
def _abs_bits(x: float) -> np.int64:  # pragma: no cover - compiled
    """|x|'s bits as an integer: above every number's for a NaN."""
    return np.int64(np.float64(x).view(np.int64)) & _ABS_BITS


@njit(nogil=True, cache=True, error_model="numpy")
def _exp64_loop(x: Arr, out: Arr) -> None:  # pragma: no cover - compiled
    # Chunk by chunk: ``_exp64_normal`` where every argument's result is
    # normal and finite (the largest |x| tells), ``_exp64`` (subnormals,
    # overflow, NaN) where one is not. Apart, x and out are read and written
    # in one pass, the chunk written again where the test fails; where they
    # share memory (in place) the test reads the chunk before it is written.
    _wide_vectors()
    a, b = x.ctypes.data, out.ctypes.data
    apart = a + x.nbytes <= b or b + out.nbytes <= a
    for lo in range(0, out.size, _CHUNK):
        # Slice views: indexing from ``lo`` would keep LLVM's loads scalar.
        xs = x[lo:lo + _CHUNK]
        ys = out[lo:lo + _CHUNK]
        top = np.int64(0)
        if apart:
            for i in range(xs.size):
                ys[i] = _exp64_normal(xs[i])
                top = max(top, _abs_bits(xs[i]))
        else:
            for i in range(xs.size):
                top = max(top, _abs_bits(xs[i]))
            if top <= _EXP_FAST_BITS:
                for i in range(xs.size):
                    ys[i] = _exp64_normal(xs[i])
        if top > _EXP_FAST_BITS:
            for i in range(xs.size):
                ys[i] = _exp64(xs[i])


@njit(nogil=True, cache=True, error_model="numpy")
def _tanh64_loop(x: Arr, out: Arr) -> None:  # pragma: no cover - compiled
    _wide_vectors()
    for i in range(out.size):
        out[i] = _tanh64(x[i])


#: ``f(x, out=None)``: Exp and Tanh of float64 (the float64 kinds').
exp64: Final = _over_array(_exp64_loop, np.float64, "exp64")
tanh64: Final = _over_array(_tanh64_loop, np.float64, "tanh64")

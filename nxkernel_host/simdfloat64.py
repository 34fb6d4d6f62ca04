"""Exp and Tanh of float64 in loops LLVM vectorises (no libm calls), 8
lanes on AVX-512: ``exp64`` and ``tanh64``, the float64 kinds'.

Rule: each function writes each element's value, computed in float64, into
``out`` (float32 or float64), rounded once there; each is within ``ULPS`` (1
ulp) of the correctly rounded value. C99 Annex F's special values are exact:
exp(±0) = 1, exp(+inf) = +inf, exp(-inf) = +0; tanh(±0) = ±0, tanh(±inf) =
±1; a NaN gives a quiet NaN; overflow gives +inf and underflow the subnormal
or zero that rounding gives. Each element's value depends on its argument
alone (``simdbase``): ``exp64``'s fast chunks and its full function give the
same bits.

Why: Exp of float64 alone runs at NumPy's speed and Tanh of float64 alone
slower (below), but a program's compiled loop (``fused``) can call them
(``exp64_one``, ``exp64_normal_one``, ``tanh64_one``), where it could not
call NumPy's: ``x·sigmoid(x)`` of float64 is one pass, not four.

How:

- Exp: e^x = 2^k·2^(j/128)·e^r, |r| <= ln2/256, 2^(j/128) read from a table
  (T_BITS or T_HI, and T_TAIL: two gathers) and e^r by a degree-5
  polynomial: the relative error before the one rounding is below 2^-60, so
  each result is within 0.51 ulp of e^x and within 1 ulp of the correctly
  rounded value (about 0.04% not correctly rounded; without T_TAIL, one
  gather less, 26%). ``exp64`` runs ``exp64_normal_one`` (20 operations and
  2 gathers per 8 lanes) over chunks whose results are all normal and finite
  and ``exp64_one`` (the clamp, the subnormals' rounding, the two-step
  scaling) over the others, the same bits either way; the compiled loop
  does the same (``fused``). Measured on one thread, side by side, in cache
  and at 10^7: np.exp's time over ours 1.02-1.08 (``exp64_one`` alone takes
  1.4-1.6 times ours; ``simdbase.exp_parts``' way, before, 2.1 times).
- Tanh: m/(m + 2), m = e^(2|x|) − 1 from ``simdbase.exp_parts`` as a
  double-double. It costs more than np.tanh (2.7 ns against 2.35): NumPy's
  loops look up tables by vector permutes, which LLVM makes of no scalar
  loop, and Tanh runs ``exp_parts``' degree-13 polynomial, a division and
  double-double sums. Both pay in the compiled loop: one pass in place of a
  pass per node.

Measured against mpmath and 80-bit long double (``tests/host/test_simd.py``):
at most 1 ulp over 4·10^7 arguments each (the opt-in sweep; about 0.04% of
Exp's and 2% of Tanh's not correctly rounded).
"""

from __future__ import annotations

import math
from typing import Any, Final

import numpy as np
import numpy.typing as npt
from numba import njit

from .simdbase import (
    LN2,
    LN2_HI,
    LN2_LO,
    SHIFT,
    SHIFT_BITS,
    apart,
    exp_parts,
    fma,
    over_array,
    pow2,
    wide_vectors,
)

__all__ = ["EXP_CHUNK", "EXP_FAST_BITS", "ULPS", "abs_bits", "exp64", "exp64_normal_one",
           "exp64_one", "tanh64", "tanh64_one"]

Arr = npt.NDArray[Any]

#: The bound of ``exp64`` and ``tanh64`` in ulps from the correctly rounded
#: value.
ULPS: Final = 1

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
_INVLN2N: Final = _TN / LN2
_LN2N_HI: Final = LN2_HI / _TN
_LN2N_LO: Final = LN2_LO / _TN
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
EXP_FAST_BITS: Final = np.int64(np.float64(-_EXP_NORMAL).view(np.int64))
_ABS_BITS: Final = np.int64(0x7FFFFFFFFFFFFFFF)
#: The fast loop's chunk (elements).
EXP_CHUNK: Final = 512


@njit(inline="always")
def _exp_reduce(x: float) -> tuple[np.int64, float]:  # pragma: no cover - compiled
    """``(n, t)`` with e^x = 2^(n/N)·(1 + t') and 2^(n/N) = 2^k·T_HI[j]:
    n = round(x·N/ln2) = k·N + j, r = x − n·ln2/N (the first fused
    multiply-add exact by Sterbenz, LN2N_HI·n exact), t = T_TAIL[j] + r +
    r²·X(r), the relative error of 1 + t below 2^-60."""
    z = fma(x, _INVLN2N, SHIFT)
    n = np.int64(np.float64(z).view(np.int64)) - SHIFT_BITS
    nf = z - SHIFT
    r = fma(nf, -_LN2N_LO, fma(nf, -_LN2N_HI, x))
    r2 = r * r
    return n, _T_TAIL[n & _TMASK] + fma(r2, fma(r2, fma(r, _X5, _X4), fma(r, _X3, _X2)), r)


@njit(inline="always")
def exp64_normal_one(x: float) -> float:  # pragma: no cover - compiled
    """e^x for |x| <= -_EXP_NORMAL (``abs_bits(x) <= EXP_FAST_BITS``: the
    result normal and finite): s + s·t rounded once, s = 2^k·T_HI[j] built
    from its bits; there ``exp64_one``'s bits, within 1 ulp of the correctly
    rounded value. Elsewhere its value means nothing (no exception: every
    integer is read from bits, every index masked)."""
    n, t = _exp_reduce(x)
    s = np.int64(_T_BITS[n & _TMASK] + (n << _W45)).view(np.float64)
    return fma(s, t, s)


@njit(inline="always")
def exp64_one(x: float) -> float:  # pragma: no cover - compiled
    """e^x of a float64: 2^k·(eh + el), eh = T_HI[j], el = eh·t, eh + el
    rounded once (one fused multiply-add, as ``exp64_normal_one``) and scaled
    by 2^k as s1·s2 (both normal, so the scaling is exact). Where the result is
    subnormal (x < _EXP_NORMAL), eh + el is rounded on the subnormals' grid at
    once: C + eh + el rounded once, C = 2^(-1022-k) (whose ulp is that grid's
    at this k), then C taken away exactly, as glibc does it at another scale.
    x clamped to [-746, 710] (e^710 overflows, e^-746 rounds to +0; a NaN
    passes: the arithmetic carries it). Within 1 ulp of the correctly
    rounded value (0.51 ulp of e^x where it is normal), Annex F's values
    exact."""
    c = _EXP_TOP if x > _EXP_TOP else x
    c = _EXP_BOTTOM if c < _EXP_BOTTOM else c
    n, t = _exp_reduce(c)
    k = n >> _TSHIFT
    eh = _T_HI[n & _TMASK]
    el = eh * t
    # 1 <= C <= 2^55 (k >= -1077 where c >= -746): C + eh by Fast2Sum.
    tiny = c < _EXP_NORMAL
    big = pow2(_KMIN - k) if tiny else 0.0
    one = big + eh
    sub = (one + (((big - one) + eh) + el)) - big
    # Elsewhere eh + eh·t rounded once, ``exp64_normal_one``'s bits.
    v = sub if tiny else fma(eh, t, eh)
    k1 = k >> np.int64(1)
    return v * pow2(k - k1) * pow2(k1)


@njit(inline="always")
def tanh64_one(x: float) -> float:  # pragma: no cover - compiled
    """tanh x of a float64: m/(m + 2), m = e^(2|x|) − 1 = 2^k·(eh + el) − 1
    as a double-double (mh + ml), the quotient by one division and one
    correction of its residual; |x| clamped to 20 (a NaN passes); x's sign
    copied. Within 1 ulp of the correctly rounded value."""
    a = abs(x)
    a = _TANH_TOP if a > _TANH_TOP else a
    k, eh, el = exp_parts(a + a)
    s = pow2(k)
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
def abs_bits(x: float) -> np.int64:  # pragma: no cover - compiled
    """|x|'s bits as an integer: above every number's for a NaN."""
    return np.int64(np.float64(x).view(np.int64)) & _ABS_BITS


@njit(nogil=True, cache=True, error_model="numpy")
def _exp64_loop(x: Arr, out: Arr) -> None:  # pragma: no cover - compiled
    # Chunk by chunk: ``exp64_normal_one`` where every argument's result is
    # normal and finite (the largest |x| tells), ``exp64_one`` (subnormals,
    # overflow, NaN) where one is not. Apart, x and out are read and written
    # in one pass, the chunk written again where the test fails; where they
    # share memory (in place) the test reads the chunk before it is written.
    wide_vectors()
    one_pass = apart(x, out)
    for lo in range(0, out.size, EXP_CHUNK):
        # Slice views: indexing from ``lo`` would keep LLVM's loads scalar.
        xs = x[lo:lo + EXP_CHUNK]
        ys = out[lo:lo + EXP_CHUNK]
        top = np.int64(0)
        if one_pass:
            for i in range(xs.size):
                ys[i] = exp64_normal_one(xs[i])
                top = max(top, abs_bits(xs[i]))
        else:
            for i in range(xs.size):
                top = max(top, abs_bits(xs[i]))
            if top <= EXP_FAST_BITS:
                for i in range(xs.size):
                    ys[i] = exp64_normal_one(xs[i])
        if top > EXP_FAST_BITS:
            for i in range(xs.size):
                ys[i] = exp64_one(xs[i])


@njit(nogil=True, cache=True, error_model="numpy")
def _tanh64_loop(x: Arr, out: Arr) -> None:  # pragma: no cover - compiled
    wide_vectors()
    for i in range(out.size):
        out[i] = tanh64_one(x[i])


#: ``f(x, out=None)``: Exp and Tanh of float64 (the float64 kinds').
exp64: Final = over_array(_exp64_loop, np.float64, "exp64")
tanh64: Final = over_array(_tanh64_loop, np.float64, "tanh64")

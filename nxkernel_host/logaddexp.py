"""log(e^a + e^b) of float64 in branch-free arithmetic LLVM vectorises: the
combination of the host's Logsumexp scan states (``network``).

Rule: ``lse2(a, b)`` is h + L(l − h), h and l the larger and smaller, with
L(d) = log1p(e^d) computed as stated below; NaN where a or b is, h where h is
±∞. Its value depends on a and b alone and not on their order (lse2(a, b) and
lse2(b, a) are the same bits), so a vector loop and its scalar remainder,
which do the same operations, give the same bits.

How, for d = fl(l − h) <= 0 (NaN and -∞ arguments are selected away):

- t = e^d by ``simdbase.exp_parts`` (e^d = 2^k·(eh + el) to about
  2^-104, rounded once into t), +0 where d <= −708 (e^-708 is below
  2^-1021, far below the error stated for L).
- L = log1p(t), t in [0, 1], by fdlibm's log1p with its exponent k in {0, 1}:
  w = fl(1 + t); below √2, f = t and c = 0; from √2, k = 1, f = w/2 − 1 and
  c = t − (w − 1) (both exact: Sterbenz), so 1 + t = 2^k·(1 + f)·(1 + c/w)
  to first order; s = f/(2 + f), |s| <= 0.1716, and
  L = k·ln2_hi − ((f²/2 − (s·(f²/2 + R) + (k·ln2_lo + c/w))) − f), R =
  z·(Lg1 + ... + z⁶·Lg7), z = s², fdlibm's fit of (log((1 + s)/(1 − s)) − 2s)/s.

Bound: the computed L is within ``L_ULPS``·u (1.5) of log1p(e^d) for the
rounded d, u = 2^-53, an absolute bound (L is in [0, ln 2]): fdlibm's log1p
errs below 1 ulp and t's rounding adds at most u/2 of it; measured against
mpmath over the whole range of d (``tests/host/test_logaddexp.py``), 0.95·u.
With the rounding of d (at most u·|l − h| <= 2B·u, to which L is at most
half as sensitive) and of h + L (at most u·(B + ln 2)), one combination errs
by at most (2B + 3)·u, B the larger |state|.

Why: Numba calls the C library's scalar ``exp`` and ``log1p``, one element at
a time, so the network's loops did not vectorise with them (the Logsumexp
scan made about 2n libm pairs, NumPy's ``logaddexp.accumulate`` n).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Final, cast

import numpy as np
import numpy.typing as npt
from numba import njit, types
from numba.extending import intrinsic

from .simdbase import exp_parts, fma, pow2, wide_vectors

__all__ = ["L_ULPS", "logaddexp", "lse2"]

Arr = npt.NDArray[Any]

#: The bound of the computed L = log1p(e^d) in units of 2^-53 (absolute).
L_ULPS: Final = 1.5

#: Below this d, e^d is taken as +0.
_D_MIN: Final = -708.0
_SQRT2: Final = 1.4142135623730951
_LN2_HI: Final = 6.93147180369123816490e-01
_LN2_LO: Final = 1.90821492927058770002e-10
#: fdlibm's Lg1..Lg7: R(z) = z·(Lg1 + z·(Lg2 + ... + z·Lg7)), z = s².
(_LG1, _LG2, _LG3, _LG4, _LG5, _LG6, _LG7) = (
    6.666666666666735130e-01, 3.999999999940941908e-01, 2.857142874366239149e-01,
    2.222219843214978396e-01, 1.818357216161805012e-01, 1.531383769920937332e-01,
    1.479819860511658591e-01)


@njit(inline="always")
def _log1p_unit(t: float) -> float:  # pragma: no cover - compiled
    """log1p(t) for t in [0, 1] (see the module's doc)."""
    w = 1.0 + t
    up = w >= _SQRT2
    kf = 1.0 if up else 0.0
    f = 0.5 * w - 1.0 if up else t
    c = (t - (w - 1.0)) / w if up else 0.0
    s = f / (2.0 + f)
    z = s * s
    z2 = z * z
    z4 = z2 * z2
    r = z * fma(z4, fma(z2, _LG7, fma(z, _LG6, _LG5)),
                fma(z2, fma(z, _LG4, _LG3), fma(z, _LG2, _LG1)))
    hfsq = 0.5 * f * f
    return kf * _LN2_HI - ((hfsq - (s * (hfsq + r) + (kf * _LN2_LO + c))) - f)


@njit(inline="always")
def softplus_neg(d: float) -> float:  # pragma: no cover - compiled
    """log1p(e^d) for d <= 0 (NaN: any value; the caller selects it away)."""
    dc = d if d > _D_MIN else _D_MIN
    k, eh, el = exp_parts(dc)
    t = pow2(k) * (eh + el)
    return _log1p_unit(t if d > _D_MIN else 0.0)


@intrinsic
def _inlined_intrinsic(typingctx: Any) -> Any:
    """Nothing, but LLVM inlines the function it is called in wherever it is
    called, so that a loop that calls it vectorises: Numba's own inlining
    (``inline="always"``) of a function this long at every call site of the
    network's kernels took 3 times as long to compile."""
    sig = types.none()

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        builder.function.attributes.add("alwaysinline")
        return context.get_dummy_value()

    return sig, codegen


#: ``_inlined_intrinsic`` as compiled code calls it, typed for the checker.
_inlined: Final = cast("Callable[[], None]", _inlined_intrinsic)


@njit(error_model="numpy")
def lse2(a: float, b: float) -> float:  # pragma: no cover - compiled
    """log(e^a + e^b) of float64 (see the module's doc)."""
    _inlined()
    hi = a if a > b else b
    lo = b if a > b else a
    r = hi + softplus_neg(lo - hi)
    r = hi if (hi == math.inf or hi == -math.inf) else r
    return a + b if (a != a or b != b) else r


@njit(nogil=True, cache=True, error_model="numpy")
def _loop(a: Arr, b: Arr, out: Arr) -> None:  # pragma: no cover - compiled
    wide_vectors()
    for i in range(out.size):
        out[i] = lse2(a[i], b[i])


def logaddexp(a: Arr, b: Arr) -> Arr:
    """``lse2`` of float64 arrays of one shape, element by element."""
    a64 = np.ascontiguousarray(a, np.float64)
    b64 = np.ascontiguousarray(b, np.float64)
    if a64.shape != b64.shape:
        raise ValueError(f"logaddexp: a float64 {list(a64.shape)} and b float64 "
                         f"{list(b64.shape)}: one shape")
    out = np.empty_like(a64)
    _loop(a64.reshape(-1), b64.reshape(-1), out.reshape(-1))
    return out

"""The pieces the host's vectorised transcendentals share (``simdfloat32``,
``simdfloat64``, ``simderf``; ``logaddexp`` and the fused loop too): fused
multiply-adds and 512-bit vectors as compiled code asks for them, 2^k from
its bits, e^x in float64 as a double-double (``exp_parts``) and to about
2^-37 (``exp_short``), and the wrapper that runs an element loop over an
array (``over_array``).

Rule shared by every function built on these: each element's value depends
on its argument alone. The loops are branch-free arithmetic (fused
multiply-adds, the bits of an exponent set by integer operations, selects
for the ranges, table reads LLVM makes gathers of), so the vector loop and
its scalar remainder do the same operations and no thread count, box or
position changes a bit.

Why: Numba calls the C library's scalar ``exp``, ``tanh`` and ``erf``, one
element at a time, so a loop that calls them does not vectorise; arithmetic
like this LLVM turns into 8-wide AVX-512 code in float64 (``wide_vectors``;
16-wide in float32), or 4-wide on AVX2.

The polynomials are evaluated by Estrin's scheme: the loops are bound by
latency, and Horner's rule chains every coefficient's operation after the
last (a float64 Exp at 4 lanes, measured on a loaded machine: 2.6 ns per
element by Horner, 1.6 by Estrin).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, cast

import numpy as np
import numpy.typing as npt
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

__all__ = ["INVLN2", "LN2", "LN2_HI", "LN2_LO", "SHIFT", "SHIFT_BITS", "apart", "exp_parts",
           "exp_short", "fma", "fmaf", "over_array", "pow2", "prefer_wide_vectors", "wide_vectors"]

Arr = npt.NDArray[Any]

INVLN2: Final = 1.4426950408889634
LN2: Final = 0.6931471805599453
#: ln2 = LN2_HI + LN2_LO, LN2_HI with its low 21 bits clear (fdlibm's).
LN2_HI: Final = 6.93147180369123816490e-01
LN2_LO: Final = 1.90821492927058770002e-10
#: 1.5·2^52: adding it rounds a float64 of magnitude below 2^51 to an
#: integer, which the low bits of the sum then hold (less SHIFT_BITS).
SHIFT: Final = 6755399441055744.0
SHIFT_BITS: Final = np.int64(np.float64(SHIFT).view(np.int64))
_BIAS: Final = np.int64(1023)
_W52: Final = np.int64(52)

#: 1/n! for n = 2..13: e^r = 1 + r + r²·(P2 + r·(P3 + ...)).
(_P2, _P3, _P4, _P5, _P6, _P7, _P8, _P9, _P10, _P11, _P12, _P13) = (
    1 / 2, 1 / 6, 1 / 24, 1 / 120, 1 / 720, 1 / 5040, 1 / 40320, 1 / 362880, 1 / 3628800,
    1 / 39916800, 1 / 479001600, 1 / 6227020800)


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
fmaf: Final = cast("Callable[[np.float32, np.float32, np.float32], np.float32]", _fma_intrinsic)


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
wide_vectors: Final = cast("Callable[[], None]", _wide_vectors_intrinsic)


@njit(inline="always")
def apart(x: Arr, y: Arr) -> bool:  # pragma: no cover - compiled
    """Whether the memory of the contiguous arrays ``x`` and ``y`` is disjoint
    (a loop that writes ``y`` then leaves ``x`` as it read it)."""
    a, b = x.ctypes.data, y.ctypes.data
    return a + x.nbytes <= b or b + y.nbytes <= a


@njit(inline="always")
def pow2(k: np.int64) -> float:  # pragma: no cover - compiled
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
def exp_parts(x: float) -> tuple[np.int64, float, float]:  # pragma: no cover - compiled
    """``(k, eh, el)`` with e^x = 2^k·(eh + el) to about 2^-104 of it, eh =
    fl(1 + r) and el the rest, for finite |x| <= 746: k = round(x/ln2), r =
    x − k·ln2 by Cody and Waite's two-part ln2 (k·LN2_HI and x − k·LN2_HI
    exact), r's rounding kept, e^r = 1 + r + r²·P(r), P the Taylor series to
    r^11/13!."""
    t = x * INVLN2 + SHIFT
    k = np.int64(np.float64(t).view(np.int64)) - SHIFT_BITS
    kf = t - SHIFT
    hi = x - kf * LN2_HI
    lo = kf * LN2_LO
    r = hi - lo
    r_err = (hi - r) - lo
    p = _exp_poly(r, r * r)
    eh = 1.0 + r
    return k, eh, ((1.0 - eh) + r) + fma(r * r, p, fma(r_err, r, r_err))


@njit(inline="always")
def exp_short(c: float) -> tuple[float, float]:  # pragma: no cover - compiled
    """``(scale, m)`` with e^c = scale·(1 + m) to about 2^-37, scale = 2^k
    and m = e^r − 1 (r = c − k·ln2 by one-part ln2, |r| <= ln2/2, the Taylor
    series to r^9/9!: m to about 2^-36 of itself), for |c| <= 1000; a NaN c
    makes m a NaN (and scale any number: k is read from bits, never
    converted, so no operation is undefined). The float32 path's e^x."""
    t = c * INVLN2 + SHIFT
    k = np.int64(np.float64(t).view(np.int64)) - SHIFT_BITS
    r = fma(-(t - SHIFT), LN2, c)
    r2 = r * r
    r4 = r2 * r2
    p = fma(r4, fma(r2, fma(r, _P9, _P8), fma(r, _P7, _P6)),
            fma(r2, fma(r, _P5, _P4), fma(r, _P3, _P2)))
    return pow2(k), fma(r2, p, r)


def over_array(loop: Any, dtype: type[np.floating[Any]], name: str,
               how: str = "computed in float64 and rounded once into out's type"
               ) -> Callable[..., Arr]:
    """``f(x, out=None)``: ``loop(x, out)`` (a compiled loop over 1-D arrays)
    over ``x`` as a C-contiguous ``dtype`` array of any shape, into ``out``
    (float32 or float64, x's shape; default a fresh ``dtype`` array). An
    ``out`` that is not C-contiguous gets the values through a temporary;
    ``out`` may be ``x`` itself (each loop reads an element before it writes
    it). ``name`` and ``how`` make its docstring."""
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

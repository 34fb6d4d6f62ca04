"""Each program node kind on host arrays: ``op1``, ``op2``, ``fma_float``,
``fma_int`` and ``where`` give a node's implementation, ``impl(out, *args)``.

Each node's value is its exact result rounded once to the node's dtype, by
the rules of ``nxkernel_core.evaluator`` (upstream-facts §3), which these
implementations redo with NumPy ufuncs (and Numba where NumPy has none) and
are tested against bit for bit:

- Exact kinds give the reference's bits: ``+ - * /``, Sqrt, Recip, Fma, Mod,
  Floor, Ceil, Trunc, Round (half away from zero), Sign, Neg, Abs, Maximum
  and Minimum (-0 below +0), the comparisons, every cast (the store rule
  ``dtype.of_float``: one rounding, saturation in the formats of a byte or
  less, NaN to +0 in float4_e2m1fn), the integer kinds (wrapping; Idiv and
  Mod by 0, the signed minimum by -1, Recip, Pow with a negative exponent),
  Threefry-2x32-20, and the complex kinds the reference fixes (Add, Sub,
  textbook Mul, Fdiv and Recip by Smith's complex128 division, Maximum,
  Minimum, the comparisons). Only a NaN result's sign and payload may differ
  from the reference's (the contract leaves them to the library), and a NaN
  is signalling only where an operand is one.
- Moves keep bits: Copy, Bitcast and Where work on the elements' bytes, so NaN
  payloads, signalling NaNs and a bool's byte survive.
- Transcendentals, Pow and Atan2 compute in float64 by NumPy's SIMD ufuncs
  (Exp, Tanh and Erf, and the float32 path of the three, by the vectorised
  loops of ``simdfloat64``, ``simdfloat32`` and ``simderf``; Sin, Cos and
  Tan of |x| >= 2^20 by the Payne–Hanek reduction of ``trig``) and round
  once into their dtype, but Exp, Tanh and Erf of float32, computed in
  float32 arithmetic (``simdfloat32.expf``, ``tanhf``, ``simderf.erff``);
  ``ULPS`` states their bounds, within upstream §3's table. C99 Annex F's
  special values hold exactly, and where Annex F fixes a result it wins over
  the NaN rule: pow(x, ±0) = pow(1, y) = 1, a NaN operand included.

Compute types (upstream §3): float16, bfloat16 and the float8/float4 formats
compute in float32 and round once on the store; integers of 8 and 16 bits
compute in their own width, which wraps as 32 bits would; int4 and uint4
compute in 8 bits and wrap at 4; a bool reads ``byte != 0`` wherever it is
not moved.

The kinds live by family: ``floatkinds`` (float and complex), ``intkinds``
(integer and boolean), on what ``kindbase`` shares; this module holds the
conversions, Where, integer Fma and the nodes' dispatch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import numpy as np

from nxkernel_core import dtype as D
from nxkernel_core.dtype import Dtype
from nxkernel_core.prog import (
    TRANSCENDENTAL,
    Compare,
    Convert,
    Op1,
    Op2,
    Unary,
    element,
)

from .floatkinds import (
    COMPARE,
    binary_complex,
    binary_float,
    compare_complex,
    complex_divide,
    computes_natively,
    fma_float,
    join_parts,
    part_dtype,
    unary_float,
)
from .intkinds import binary_bool, binary_int, unary_int
from .kindbase import (
    Arr,
    Impl,
    bits_of,
    finish_node,
    float_values,
    int_values,
    store_float,
    truth,
    where,
    wrap_ints,
)

__all__ = ["ULPS", "Impl", "const_value", "fma_float", "fma_int", "op1", "op2", "quiet", "truth", "where"]

#: The bounds in ulps of the inexact kinds (transcendentals, Pow, Atan2) per
#: dtype: the distance from the exactly rounded result. float64 is NumPy's
#: SIMD float64, measured within 1.2 ulps of the exact value over millions of
#: arguments, and ``simdfloat64``'s Exp and Tanh and ``simderf``'s Erf (each within 1 ulp of the
#: exactly rounded value); float32 rounds once a float64 value far within a
#: float32 ulp of the exact one (NumPy's float64, or ``simderf``'s float32
#: path of Erf, to about 2^-35), so it lies within an ulp, Exp, Tanh and Erf
#: of float32 (in float32 arithmetic) are within an ulp of the correctly
#: rounded value (Tanh swept over every float32 of [-10, 10] and Erf over
#: every one of [-4, 4], beyond which they round to ±1), and the narrower
#: floats, which round the float64 value of the float32 path once into their
#: format, within an ulp of theirs.
_INEXACT: Final = (*(k.name.lower() for k in sorted(TRANSCENDENTAL, key=lambda k: k.value)),
                   "pow", "atan2")
ULPS: Final[Mapping[str, Mapping[str, int]]] = {
    "float64": {k: 2 for k in _INEXACT},
    "float32": {k: 1 for k in _INEXACT},
    **{dt.name: {k: 1 for k in _INEXACT} for dt in D.all if dt.is_float and dt.bits < 32},
}


# --------------------------------------------------------------------------
# Conversions
# --------------------------------------------------------------------------

_TWO53: Final = np.uint64(1 << 53)
_LOW11: Final = np.uint64(0x7FF)


def _int_to_float(v: Arr, src: Dtype, dst: Dtype, out: Arr | None) -> Arr:
    """Integers of ``src`` into float ``dst``, their exact value rounded once."""
    if src.bits < 64:
        # Every integer of 32 bits or fewer is exact in float64.
        return store_float(dst, np.asarray(v).astype(np.float64), out)
    if computes_natively(dst):
        # A C cast from a 64-bit integer rounds once.
        return finish_node(out, np.asarray(v).astype(dst.numpy_dtype))
    negative = v < 0 if src.kind is D.Kind.SIGNED else np.zeros(v.shape, dtype=np.bool_)
    m = np.asarray(v).astype(np.uint64)
    m = np.where(negative, np.uint64(0) - m, m)
    # Round to odd at bit 11: the float64 then holds the value to 42 bits or
    # more with a sticky bit, and the store's rounding into 24 bits or fewer
    # is the only one.
    sticky = ((m & _LOW11) != 0).astype(np.uint64) << np.uint64(11)
    m = np.where(m >= _TWO53, (m & ~_LOW11) | sticky, m)
    f = m.astype(np.float64)
    return store_float(dst, np.where(negative, -f, f), out)


def _float_to_int(x: Arr, dst: Dtype, out: Arr | None) -> Arr:
    """Floats into integer ``dst``: truncated toward zero, saturated, NaN to 0."""
    t = np.trunc(np.asarray(x).astype(np.float64))
    lo, hi = dst.int_range
    if dst.bits < 64:
        # float64 holds every bound of 32 bits or fewer exactly.
        t = np.where(np.isnan(t), 0.0, np.clip(t, float(lo), float(hi)))
        return wrap_ints(dst, t.astype(np.int64), out)
    over = t >= float(hi + 1)
    under = t < float(lo)
    safe = np.where(over | under | np.isnan(t), 0.0, t).astype(dst.numpy_dtype)
    ones = np.ones_like(safe)
    return finish_node(out, np.where(over, ones * hi, np.where(under, ones * lo, safe)))


def _real_cast(x: Arr, src: Dtype, dst: Dtype, out: Arr | None) -> Arr:
    """A cast between real (not complex) dtypes, ``src is not dst``."""
    if dst.is_bool:
        if src.is_bool:
            return finish_node(out, truth(x))
        return finish_node(out, (float_values(x) if src.is_float else int_values(x)) != 0)
    if src.is_bool:
        return _real_cast(truth(x).astype(np.uint8), D.uint8, dst, out)
    if src.is_float:
        if dst.is_float:
            return store_float(dst, x if src is D.float64 else float_values(x), out)
        return _float_to_int(x, dst, out)
    if dst.is_float:
        return _int_to_float(int_values(x), src, dst, out)
    return wrap_ints(dst, int_values(x), out)


def _cast(src: Dtype, dst: Dtype) -> Impl:
    """Cast (upstream §3 "Cast"), ``src is not dst``."""
    if src.is_complex:
        part = part_dtype(src)
        if dst.is_complex:
            return lambda out, x: finish_node(out, np.asarray(x).astype(dst.numpy_dtype))
        if dst.is_bool:
            return lambda out, x: finish_node(out, (x.real != 0) | (x.imag != 0))
        if dst is part:
            # The real part keeps its format, and its bits.
            return lambda out, x: finish_node(out, np.array(x.real, copy=True))
        return lambda out, x: _real_cast(x.real, part, dst, out)
    if dst.is_complex:
        part = part_dtype(dst)
        zero = np.zeros((), dtype=part.numpy_dtype)
        if src is part:
            return lambda out, x: join_parts(x, zero, dst, out)
        return lambda out, x: join_parts(_real_cast(x, src, part, None), zero, dst, out)
    return lambda out, x: _real_cast(x, src, dst, out)


def _bitcast4(dst: Dtype) -> Impl:
    """Bitcast between the 4-bit dtypes: the low nibble's code, reread."""
    def f(out: Arr | None, x: Arr) -> Arr:
        code = bits_of(x) & np.uint8(15)
        if dst is D.float4_e2m1fn:
            return finish_node(out, code.view(dst.numpy_dtype))
        return wrap_ints(dst, code, out)
    return f


# --------------------------------------------------------------------------
# Integer Fma (Where is kindbase's)
# --------------------------------------------------------------------------


def fma_int(dt: Dtype) -> Impl:
    if dt.bits >= 8:
        def f(out: Arr | None, a: Arr, b: Arr, c: Arr) -> Arr:
            r = np.multiply(a, b, out=out)
            return np.add(r, c, out=r if out is not None else None)
        return f
    return lambda out, a, b, c: wrap_ints(dt, int_values(a) * int_values(b) + int_values(c), out)




# --------------------------------------------------------------------------
# Nodes
# --------------------------------------------------------------------------


def op1(node: Op1, src: Dtype) -> tuple[Impl, bool]:
    """An Op1 node's implementation, and whether its value is a view of its
    argument's (Copy, a Cast into the same dtype, a byte-wide Bitcast, the
    kinds that are the identity on integers)."""
    dst = node.dtype
    kind = node.kind
    if kind is Convert.COPY or (kind is Convert.CAST and src is dst):
        return (lambda out, x: x), True
    if kind is Convert.BITCAST:
        if src.bits < 8 and src is not dst:
            return _bitcast4(dst), False
        return (lambda out, x: np.asarray(x).view(dst.numpy_dtype)), True
    if kind is Convert.CAST:
        return _cast(src, dst), False
    assert isinstance(kind, Unary)
    if src.is_float:
        return unary_float(kind, src), False
    if src.is_complex:
        if kind is Unary.NEG:
            return (lambda out, x: np.negative(x, out=out)), False
        one = np.ones((), dtype=src.numpy_dtype)
        return (lambda out, x: complex_divide(src, one, x, out)), False
    if kind in (Unary.FLOOR, Unary.CEIL, Unary.ROUND, Unary.TRUNC) or (
            kind is Unary.ABS and src.kind is D.Kind.UNSIGNED):
        return (lambda out, x: x), True
    return unary_int(kind, src), False


def op2(node: Op2, src: Dtype) -> tuple[Impl, bool]:
    """An Op2 node's implementation, and whether it reads truth values."""
    kind = node.kind
    if isinstance(kind, Compare):
        if src.is_complex:
            return compare_complex(kind), False
        uf = COMPARE[kind]
        if src.is_float:
            return (lambda out, x, y: uf(float_values(x), float_values(y), out=out)), False
        if src.is_bool:
            return (lambda out, x, y: uf(x, y, out=out)), True
        return (lambda out, x, y: uf(int_values(x), int_values(y), out=out)), False
    if src.is_float:
        return binary_float(kind, src), False
    if src.is_complex:
        return binary_complex(kind, src), False
    if src.is_bool:
        return binary_bool(kind), True
    return binary_int(kind, src), False


def const_value(dt: Dtype, bits: bytes) -> Arr:
    """A constant's element, bits unchanged, as a 0-d array."""
    return np.asarray(element(dt, bits))


def quiet(dt: Dtype, v: Arr) -> Arr:
    """Float or complex values with every signalling NaN made quiet (its quiet
    bit set); other dtypes' values as they are."""
    if dt.is_complex:
        part = D.float32 if dt is D.complex64 else D.float64
        out = np.empty(v.shape, dtype=dt.numpy_dtype)
        out.real = quiet(part, np.array(v.real, copy=True))
        out.imag = quiet(part, np.array(v.imag, copy=True))
        return out
    fmt = dt.float_format
    if fmt is None or not (fmt.infinities and fmt.nans):
        # e4m3fn's one NaN is quiet; e2m1fn has none.
        return v
    u = bits_of(v)
    exp_mask = u.dtype.type(((1 << fmt.exponent_bits) - 1) << fmt.fraction_bits)
    frac_mask = u.dtype.type((1 << fmt.fraction_bits) - 1)
    quiet_bit = u.dtype.type(1 << (fmt.fraction_bits - 1))
    nan = ((u & exp_mask) == exp_mask) & ((u & frac_mask) != u.dtype.type(0))
    return np.asarray(np.where(nan, u | quiet_bit, u)).astype(u.dtype).view(dt.numpy_dtype)

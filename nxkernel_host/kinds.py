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
  (libm's erf through Numba for Erf; Sin, Cos and Tan of |x| >= 2^20 by the
  Payne–Hanek reduction of ``trig``) and round once into their dtype;
  ``ULPS`` states their bounds, within upstream §3's table. C99 Annex F's
  special values hold exactly, and where Annex F fixes a result it wins over
  the NaN rule: pow(x, ±0) = pow(1, y) = 1, a NaN operand included.

Compute types (upstream §3): float16, bfloat16 and the float8/float4 formats
compute in float32 and round once on the store; integers of 8 and 16 bits
compute in their own width, which wraps as 32 bits would; int4 and uint4
compute in 8 bits and wrap at 4; a bool reads ``byte != 0`` wherever it is
not moved.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from nxkernel_core import dtype as D
from nxkernel_core.dtype import Dtype
from nxkernel_core.prog import (
    TRANSCENDENTAL,
    Binary,
    Compare,
    Convert,
    Op1,
    Op2,
    Unary,
    element,
)

from . import trig

__all__ = ["ULPS", "Impl", "const_value", "fma_float", "fma_int", "op1", "op2", "quiet", "truth", "where"]

Arr = npt.NDArray[Any]
#: A node's implementation: ``impl(out, *args)`` returns the node's value,
#: written into ``out`` where ``out`` is not None (a C-contiguous array of the
#: value's shape and host type that aliases no argument).
Impl = Callable[..., Arr]

#: The bounds in ulps of the inexact kinds (transcendentals, Pow, Atan2) per
#: dtype: the distance from the exactly rounded result. float64 is NumPy's
#: SIMD float64, measured within 1.2 ulps of the exact value over millions of
#: arguments, and libm's erf (within 1 ulp of the exactly rounded value);
#: float32 rounds that float64 value once, so it lies within an
#: ulp, and the narrower floats, which round the same value once into their
#: format, within an ulp of theirs.
_INEXACT: Final = (*(k.name.lower() for k in sorted(TRANSCENDENTAL, key=lambda k: k.value)),
                   "pow", "atan2")
ULPS: Final[Mapping[str, Mapping[str, int]]] = {
    "float64": {k: 2 for k in _INEXACT},
    "float32": {k: 1 for k in _INEXACT},
    **{dt.name: {k: 1 for k in _INEXACT} for dt in D.all if dt.is_float and dt.bits < 32},
}

_F32: Final = np.dtype(np.float32)
_F64: Final = np.dtype(np.float64)
_C128: Final = np.dtype(np.complex128)
_UINT: Final[dict[int, type[np.unsignedinteger[Any]]]] = {
    1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}

# --------------------------------------------------------------------------
# Values and stores
# --------------------------------------------------------------------------


def _finish(out: Arr | None, r: Any) -> Arr:
    """``r`` as the node's value: written into ``out`` where given (``r`` has
    out's type, so its bits are copied as they are, broadcast), else ``r``
    itself as an array."""
    if out is None:
        return np.asarray(r)
    if r is not out:
        np.copyto(out, r, casting="no")
    return out


def _bits(x: Arr) -> Arr:
    """A byte-wide array's bits as unsigned integers of its width."""
    return np.asarray(x).view(_UINT[x.dtype.itemsize])


def truth(x: Arr) -> Arr:
    """A bool array's values: its byte is not 0."""
    return np.asarray(np.asarray(x).view(np.uint8) != 0)


def _contig(x: Arr) -> Arr:
    """``x`` C-contiguous (a copy only where it is not). NumPy's transcendental
    loops take another code path, with other bits, for some strides (a
    reversed operand); on contiguous operands every element gets the same
    SIMD code wherever it lies, so a result does not depend on the layout."""
    return x if x.flags.c_contiguous else np.ascontiguousarray(x)


def _wide(x: Arr) -> Arr:
    """Float values in their compute type: float32 and float64 as they are,
    narrower floats widened (exactly) to float32."""
    if x.dtype == _F32 or x.dtype == _F64:
        return x
    return np.asarray(x).astype(np.float32)


def _odd_f32(x: Arr) -> Arr:
    """float64 values rounded to float32 by round-to-odd: an inexact result
    takes the neighbour whose last bit is 1. Rounding that once more, to
    nearest, into a format of 22 bits or fewer rounds ``x`` exactly once."""
    x = np.asarray(x)
    y = x.astype(np.float32)
    back = y.astype(np.float64)
    yb = y.view(np.uint32)
    nudge = (back != x) & np.isfinite(back) & ((yb & np.uint32(1)) == 0)
    if not nudge.any():
        # Nothing to move (every value exact, or odd already): saves three passes.
        return y
    up = np.abs(x) > np.abs(back)
    step = np.where(up, np.uint32(1), np.uint32(0xFFFFFFFF))
    return np.where(nudge, yb + step, yb).astype(np.uint32).view(np.float32)


def _store(dt: Dtype, r: Arr, out: Arr | None) -> Arr:
    """Float values ``r`` (float32 or float64) stored once into float ``dt`` by
    the store rule: round to nearest, ties to even; overflow to ±inf, or
    saturating to ±max_finite in the formats of a byte or less; NaN to +0 in
    float4_e2m1fn."""
    r = np.asarray(r)
    if dt is D.float64 or dt is D.float32:
        return _finish(out, r if r.dtype == dt.numpy_dtype else r.astype(dt.numpy_dtype))
    if r.dtype == _F64:
        r = _odd_f32(r)
    fmt = dt.float_format
    assert fmt is not None
    if fmt.saturates:
        # Clipping before the rounding saturates as rounding then saturating
        # does: every value past max_finite rounds to at least max_finite.
        r = np.clip(r, np.float32(-fmt.max_finite), np.float32(fmt.max_finite))
        if not fmt.nans:
            r = np.where(np.isnan(r), np.float32(0), r)
    return _finish(out, r.astype(dt.numpy_dtype))


def _ival(x: Arr) -> Arr:
    """Integer values in their compute type: int4 and uint4 as int8 and uint8."""
    if x.dtype.itemsize == 1 and x.dtype.kind not in "iub":
        return np.asarray(x).astype(np.int8 if x.dtype == D.int4.numpy_dtype else np.uint8)
    return x


def _iwrap(dt: Dtype, r: Arr, out: Arr | None) -> Arr:
    """Integer values ``r`` modulo ``dt``'s width, as ``dt``."""
    r = np.asarray(r)
    if dt.bits >= 8:
        return _finish(out, r if r.dtype == dt.numpy_dtype else r.astype(dt.numpy_dtype))
    code = r.astype(np.uint8) & np.uint8(15)
    if dt is D.int4:
        signed = (code ^ np.uint8(8)).astype(np.int8) - np.int8(8)
        return _finish(out, signed.astype(dt.numpy_dtype))
    return _finish(out, code.astype(dt.numpy_dtype))


# --------------------------------------------------------------------------
# Numba kernels (compiled on first use: Fma of float64, Threefry, Erf)
# --------------------------------------------------------------------------


@functools.cache
def _numba_kernels() -> dict[str, Any]:
    """The loops NumPy has no ufunc for, compiled once per process: a float64
    Fma by LLVM's fused multiply-add (one rounding), Threefry-2x32-20, and an
    Erf ufunc of float64 (libm's erf, within an ulp)."""
    import numba
    from llvmlite import ir
    from numba.extending import intrinsic

    @intrinsic
    def fma(typingctx: Any, a: Any, b: Any, c: Any) -> Any:
        sig = a(a, b, c)

        def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
            ty = context.get_value_type(signature.return_type)
            fn = builder.module.declare_intrinsic("llvm.fma", [ty], ir.FunctionType(ty, [ty] * 3))
            return builder.call(fn, args)

        return sig, codegen

    @numba.njit(nogil=True)
    def fma_loop(a: Arr, b: Arr, c: Arr, out: Arr) -> None:
        for i in range(out.size):
            out[i] = fma(a[i], b[i], c[i])  # type: ignore[call-arg]

    rotations = np.array([13, 15, 26, 6, 17, 29, 16, 24], dtype=np.uint64)
    mask = np.uint64(0xFFFFFFFF)
    parity = np.uint64(0x1BD11BDA)
    w32 = np.uint64(32)

    @numba.njit(nogil=True)
    def threefry_loop(counter: Arr, key: Arr, out: Arr) -> None:
        # 32-bit words held in uint64 and masked after each addition: Numba
        # widens mixed integer arithmetic, so no step relies on a uint32 wrap.
        ks = np.empty(3, dtype=np.uint64)
        for i in range(out.size):
            c, k = counter[i], key[i]
            ks[0] = k & mask
            ks[1] = k >> w32
            ks[2] = ks[0] ^ ks[1] ^ parity
            x0 = ((c & mask) + ks[0]) & mask
            x1 = ((c >> w32) + ks[1]) & mask
            for r in range(20):
                rot = rotations[r % 8]
                x0 = (x0 + x1) & mask
                x1 = ((x1 << rot) | (x1 >> (w32 - rot))) & mask
                x1 = x1 ^ x0
                if r % 4 == 3:
                    j = r // 4 + 1
                    x0 = (x0 + ks[j % 3]) & mask
                    x1 = (x1 + ks[(j + 1) % 3] + np.uint64(j)) & mask
            out[i] = x0 | (x1 << w32)

    @numba.vectorize(["float64(float64)"], nopython=True)  # type: ignore[untyped-decorator, no-untyped-call]
    def erf(x: float) -> float:
        return math.erf(x)

    return {"fma": fma_loop, "threefry": threefry_loop, "erf": erf}


def _flat(x: Arr, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Arr:
    """``x`` broadcast to ``shape`` as a C-contiguous 1-D array (a copy only
    where it is not contiguous already)."""
    return np.ascontiguousarray(np.broadcast_to(x, shape), dtype=dtype).reshape(-1)


def _numba_binary(name: str, dtype: np.dtype[Any], out: Arr | None, *args: Arr) -> Arr:
    """Numba loop ``name`` over ``args`` broadcast together, into ``out``."""
    shape = np.broadcast_shapes(*(a.shape for a in args))
    res = out if out is not None and out.flags.c_contiguous else np.empty(shape, dtype=dtype)
    _numba_kernels()[name](*(_flat(a, shape, dtype) for a in args), res.reshape(-1))
    return _finish(out, res)


# --------------------------------------------------------------------------
# Float kinds
# --------------------------------------------------------------------------

#: Each takes a ufunc's (x, out=, dtype=); Sin, Cos and Tan reduce huge
#: arguments themselves (``trig``), where the C library's reduction errs.
_TRANSCENDENTAL: Final[dict[Unary, Callable[..., Arr]]] = {
    Unary.EXP: np.exp, Unary.EXP2: np.exp2, Unary.LOG: np.log, Unary.LOG2: np.log2,
    Unary.LOG1P: np.log1p, Unary.EXPM1: np.expm1, Unary.SIN: trig.sin, Unary.COS: trig.cos,
    Unary.TAN: trig.tan, Unary.ASIN: np.arcsin, Unary.ACOS: np.arccos, Unary.ATAN: np.arctan,
    Unary.SINH: np.sinh, Unary.COSH: np.cosh, Unary.TANH: np.tanh,
}
_EXACT_UNARY: Final[dict[Unary, np.ufunc]] = {
    Unary.SQRT: np.sqrt, Unary.RECIP: np.reciprocal, Unary.FLOOR: np.floor,
    Unary.CEIL: np.ceil, Unary.TRUNC: np.trunc,
}
_ARITH: Final[dict[Binary, np.ufunc]] = {
    Binary.ADD: np.add, Binary.SUB: np.subtract, Binary.MUL: np.multiply,
    Binary.FDIV: np.divide, Binary.MOD: np.fmod,
}
_COMPARE: Final[dict[Compare, np.ufunc]] = {
    Compare.EQUAL: np.equal, Compare.NOT_EQUAL: np.not_equal, Compare.LESS: np.less,
    Compare.LESS_EQUAL: np.less_equal,
}


def _native(dt: Dtype) -> bool:
    """Whether float ``dt`` computes in its own type (float32, float64)."""
    return dt is D.float32 or dt is D.float64


def _sign(w: Arr) -> Arr:
    """-1, +1, +0 for ±0 (upstream §3, as NumPy), or the NaN operand itself."""
    one = w.dtype.type(1)
    return np.where(w > 0, one, np.where(w < 0, -one, np.where(w == 0, w.dtype.type(0), w)))


def _round_half_away(w: Arr) -> Arr:
    """Round half away from zero, keeping a zero's sign (``w - trunc(w)`` is
    exact, so the comparison with 0.5 is)."""
    t = np.trunc(w)
    one = w.dtype.type(1)
    r = np.where(np.abs(w - t) >= w.dtype.type(0.5), t + np.copysign(one, w), t)
    return np.copysign(r, w)


def _sign_mask(dt: Dtype) -> np.unsignedinteger[Any]:
    """The sign bit of float ``dt`` in its storage's unsigned type."""
    item = dt.numpy_dtype.itemsize
    return _UINT[item](1 << (dt.bits - 1))


def _unary_float(kind: Unary, dt: Dtype) -> Impl:
    native = _native(dt)
    if kind in (Unary.NEG, Unary.ABS):
        if native:
            # float32 and float64 write straight into the node's buffer.
            sign_op: np.ufunc = np.negative if kind is Unary.NEG else np.absolute
            return lambda out, x: sign_op(x, out=out)
        # Narrow floats flip or clear the sign bit in place of arithmetic.
        mask = _sign_mask(dt)
        if kind is Unary.NEG:
            return lambda out, x: _finish(out, (_bits(x) ^ mask).view(dt.numpy_dtype))
        keep = ~mask
        return lambda out, x: _finish(out, (_bits(x) & keep).view(dt.numpy_dtype))
    if kind in TRANSCENDENTAL:
        # NumPy has no erf; libm's, through Numba, is within an ulp.
        uf: Callable[..., Arr] = _numba_kernels()["erf"] if kind is Unary.ERF else _TRANSCENDENTAL[kind]
        if dt is D.float64:
            return lambda out, x: uf(_contig(x), out=out)
        if dt is D.float32:
            # One ufunc call widens, computes in float64 and rounds once into out.
            return lambda out, x: (uf(_contig(x), out=out, dtype=np.float64) if out is not None
                                   else uf(_contig(x), dtype=np.float64).astype(np.float32))
        return lambda out, x: _store(dt, uf(np.ascontiguousarray(x, dtype=np.float64)), out)
    if kind in _EXACT_UNARY:
        uf = _EXACT_UNARY[kind]
        if native:
            return lambda out, x: uf(x, out=out)
        return lambda out, x: _store(dt, uf(_wide(x)), out)
    f = _sign if kind is Unary.SIGN else _round_half_away
    return lambda out, x: _store(dt, f(_wide(x)), out)


def _extreme(kind: Binary) -> Callable[[Arr, Arr, Arr | None], Arr]:
    """Maximum or Minimum of float32 or float64 values, -0 below +0, a NaN
    where either is one."""
    uf = np.maximum if kind is Binary.MAXIMUM else np.minimum
    # Equal operands differ only as ±0: the AND of their bits is the larger,
    # the OR the smaller.
    join = np.bitwise_and if kind is Binary.MAXIMUM else np.bitwise_or

    def f(x: Arr, y: Arr, out: Arr | None) -> Arr:
        r = np.asarray(uf(x, y, out=out))
        eq = x == y
        np.copyto(_bits(r), join(_bits(x), _bits(y)), where=eq)
        return r

    return f


def _binary_float(kind: Binary, dt: Dtype) -> Impl:
    native = _native(dt)
    if kind in _ARITH:
        uf = _ARITH[kind]
        if native:
            return lambda out, x, y: uf(x, y, out=out)
        return lambda out, x, y: _store(dt, uf(_wide(x), _wide(y)), out)
    if kind in (Binary.MAXIMUM, Binary.MINIMUM):
        ext = _extreme(kind)
        if native:
            return lambda out, x, y: ext(x, y, out)

        def narrow(out: Arr | None, x: Arr, y: Arr) -> Arr:
            # Pick an operand's own bits (an infinity of e5m2 would saturate
            # through the store): x where the extreme is x, or x is a NaN.
            wx = _wide(x)
            r = ext(wx, _wide(y), None)
            return where(out, (_bits(r) == _bits(wx)) | np.isnan(wx), x, y)

        return narrow
    # NumPy's pow gives C99 Annex F's pow(x, ±0) = pow(1, y) = 1 for a NaN
    # operand too, as upstream §3 states; every other NaN operand makes a NaN.
    uf = np.power if kind is Binary.POW else np.arctan2

    def f(out: Arr | None, x: Arr, y: Arr) -> Arr:
        if dt is D.float64:
            return np.asarray(uf(_contig(x), _contig(y), out=out))
        if dt is D.float32 and out is not None:
            return np.asarray(uf(_contig(x), _contig(y), out=out, dtype=np.float64))
        return _store(dt, uf(np.ascontiguousarray(x, dtype=np.float64),
                             np.ascontiguousarray(y, dtype=np.float64)), out)

    return f


def fma_float(dt: Dtype) -> Impl:
    if dt is D.float64:
        return lambda out, a, b, c: _numba_binary("fma", _F64, out, a, b, c)

    def f(out: Arr | None, a: Arr, b: Arr, c: Arr) -> Arr:
        # The product of two floats of 24 bits or fewer is exact in float64;
        # TwoSum gives the sum's error, and an inexact sum moves to its odd
        # neighbour, so the store's rounding into 24 bits or fewer is the
        # only one.
        wa, wb, wc = (np.asarray(v).astype(np.float64) for v in (a, b, c))
        p = wa * wb
        s = np.asarray(p + wc)
        bb = s - p
        err = (p - (s - bb)) + (wc - bb)
        nudge = np.isfinite(s) & (err != 0) & ((s.view(np.uint64) & np.uint64(1)) == 0)
        s = np.where(nudge, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
        return _store(dt, s, out)

    return f


# --------------------------------------------------------------------------
# Integer and boolean kinds
# --------------------------------------------------------------------------


def _unary_int(kind: Unary, dt: Dtype) -> Impl:
    signed = dt.kind is D.Kind.SIGNED
    if kind is Unary.NEG:
        if dt.bits >= 8:
            return lambda out, x: np.negative(x, out=out)
        return lambda out, x: _iwrap(dt, np.negative(_ival(x)), out)
    if kind is Unary.RECIP:
        def recip(out: Arr | None, x: Arr) -> Arr:
            v = _ival(x)
            t = v.dtype.type
            r = np.where(v == t(1), v, t(0))
            if signed:
                r = np.where(v == t(-1), v, r)
            return _iwrap(dt, r, out)
        return recip
    if kind is Unary.ABS:
        if dt.bits >= 8:
            return lambda out, x: np.absolute(x, out=out)
        return lambda out, x: _iwrap(dt, np.absolute(_ival(x)), out)
    if kind is Unary.SIGN:
        if signed:
            return lambda out, x: _iwrap(dt, np.sign(_ival(x)), out)
        return lambda out, x: _iwrap(dt, (_ival(x) != 0).astype(np.uint8), out)
    raise AssertionError(f"{kind} of {dt.name} is the identity")


def _idiv_mod(v: Arr, w: Arr, signed: bool) -> tuple[Arr, Arr]:
    """Quotient truncated toward zero and remainder with the dividend's sign,
    wrapping; ``x // 0 = 0``, ``x mod 0 = x``, ``min // -1 = min``."""
    t = v.dtype.type
    zero = w == t(0)
    unit = zero | (w == t(-1)) if signed else zero
    safe = np.where(unit, t(1), w)
    # fmod is C's remainder (the dividend's sign); v - r is then an exact
    # multiple of the divisor, so floor division is exact.
    r = np.fmod(v, safe)
    q = (v - r) // safe
    if signed:
        minus = w == t(-1)
        q = np.where(minus, t(0) - v, q)
        r = np.where(minus, t(0), r)
    return np.where(zero, t(0), q), np.where(zero, v, r)


def _int_pow(b: Arr, e: Arr, signed: bool) -> Arr:
    """``b ** e`` wrapping; a negative exponent gives 0 but for bases 1 and -1."""
    b, e = np.broadcast_arrays(b, e)
    t = b.dtype.type
    result = np.ones(b.shape, dtype=b.dtype)
    base = b.copy()
    rest = np.where(e < t(0), t(0), e) if signed else e.copy()
    while rest.any():
        result = np.where((rest & t(1)) != 0, result * base, result)
        base = base * base
        rest = rest >> t(1)
    if signed:
        odd = (e & t(1)) != 0
        unit = np.where(b == t(1), t(1), np.where(b == t(-1), np.where(odd, t(-1), t(1)), t(0)))
        result = np.where(e < t(0), unit, result)
    return result


_INT_BINARY: Final[dict[Binary, np.ufunc]] = {
    Binary.ADD: np.add, Binary.SUB: np.subtract, Binary.MUL: np.multiply,
    Binary.MAXIMUM: np.maximum, Binary.MINIMUM: np.minimum, Binary.AND: np.bitwise_and,
    Binary.OR: np.bitwise_or, Binary.XOR: np.bitwise_xor,
}


def _binary_int(kind: Binary, dt: Dtype) -> Impl:
    signed = dt.kind is D.Kind.SIGNED
    if kind in _INT_BINARY:
        uf = _INT_BINARY[kind]
        if dt.bits >= 8:
            return lambda out, x, y: uf(x, y, out=out)
        return lambda out, x, y: _iwrap(dt, uf(_ival(x), _ival(y)), out)
    if kind in (Binary.IDIV, Binary.MOD):
        pick = 0 if kind is Binary.IDIV else 1

        def idiv_mod(out: Arr | None, x: Arr, y: Arr) -> Arr:
            v, w = np.broadcast_arrays(_ival(x), _ival(y))
            return _iwrap(dt, _idiv_mod(v, w, signed)[pick], out)

        return idiv_mod
    if kind is Binary.POW:
        return lambda out, x, y: _iwrap(dt, _int_pow(_ival(x), _ival(y), signed), out)
    if kind is Binary.THREEFRY:
        return lambda out, x, y: _numba_binary("threefry", np.dtype(np.uint64), out, x, y)
    raise AssertionError(f"{kind} does not take {dt.name}")


def _binary_bool(kind: Binary) -> Impl:
    if kind in (Binary.AND, Binary.MINIMUM):
        return lambda out, x, y: np.logical_and(x, y, out=out)
    if kind in (Binary.OR, Binary.MAXIMUM):
        return lambda out, x, y: np.logical_or(x, y, out=out)
    if kind is Binary.XOR:
        return lambda out, x, y: np.logical_xor(x, y, out=out)
    raise AssertionError(f"{kind} does not take bool")


# --------------------------------------------------------------------------
# Complex kinds
# --------------------------------------------------------------------------


def _part(dt: Dtype) -> Dtype:
    """The float dtype of a complex dtype's parts."""
    return D.float32 if dt is D.complex64 else D.float64


def _join(re: Arr, im: Arr, dt: Dtype, out: Arr | None) -> Arr:
    """The complex values of ``dt`` with parts ``re`` and ``im``, bits kept."""
    res = out if out is not None else np.empty(np.broadcast_shapes(re.shape, im.shape),
                                               dtype=dt.numpy_dtype)
    res.real = re
    res.imag = im
    return res


def _complex_divide(dt: Dtype, x: Arr, y: Arr, out: Arr | None) -> Arr:
    """``x / y`` in complex128 by Smith's algorithm with NumPy's branches, each
    numerator part divided by the scaled denominator (NumPy multiplies by its
    reciprocal, which makes (0 + 2⁻⁵⁰i) / (0 − 2⁻¹⁰⁷⁴i) a spurious
    (−inf, NaN); the reference's (−inf, +0) is upstream's), each part
    rounded once into ``dt``."""
    wx, wy = np.asarray(x).astype(_C128), np.asarray(y).astype(_C128)
    ar, ai, br, bi = wx.real, wx.imag, wy.real, wy.imag
    q = np.empty(np.broadcast_shapes(wx.shape, wy.shape), _C128)
    with np.errstate(all="ignore"):
        wide = np.abs(br) >= np.abs(bi)  # the real part is the larger (False for NaN)
        rat = np.where(wide, bi / br, br / bi)
        den = np.where(wide, br + bi * rat, br * rat + bi)
        q.real = np.where(wide, ar + ai * rat, ar * rat + ai) / den
        q.imag = np.where(wide, ai - ar * rat, ai * rat - ar) / den
        # A zero divisor: each part over +0, NumPy's branch.
        zero = (br == 0) & (bi == 0)
        if zero.any():
            q.real = np.where(zero, ar / np.abs(br), q.real)
            q.imag = np.where(zero, ai / np.abs(br), q.imag)
    return _finish(out, q if dt is D.complex128 else q.astype(np.complex64))


def _order_key(a: Arr) -> Arr:
    """An int64 key in the float total order: -inf < ... < -0 < +0 < ... < inf."""
    u = _bits(a).astype(np.uint64)
    sign = np.uint64(1 << (a.dtype.itemsize * 8 - 1))
    mag = (u & (sign - np.uint64(1))).astype(np.int64)
    return np.asarray(np.where((u & sign) != 0, -mag - 1, mag))


def _complex_nan(a: Arr) -> Arr:
    """Where a complex number has a NaN part."""
    return np.asarray(np.isnan(a.real) | np.isnan(a.imag))


def _binary_complex(kind: Binary, dt: Dtype) -> Impl:
    if kind in (Binary.ADD, Binary.SUB):
        uf = np.add if kind is Binary.ADD else np.subtract
        return lambda out, x, y: uf(x, y, out=out)
    if kind is Binary.MUL:
        def mul(out: Arr | None, x: Arr, y: Arr) -> Arr:
            # The textbook product, each product and sum rounded, never fused.
            xr, xi, yr, yi = x.real, x.imag, y.real, y.imag
            return _join(xr * yr - xi * yi, xr * yi + xi * yr, dt, out)
        return mul
    if kind is Binary.FDIV:
        return lambda out, x, y: _complex_divide(dt, x, y, out)
    maximum = kind is Binary.MAXIMUM

    def extreme(out: Arr | None, x: Arr, y: Arr) -> Arr:
        krx, kix, kry, kiy = (_order_key(v) for v in (x.real, x.imag, y.real, y.imag))
        if maximum:
            take_x = (krx > kry) | ((krx == kry) & (kix >= kiy))
        else:
            take_x = (krx < kry) | ((krx == kry) & (kix <= kiy))
        take_x = _complex_nan(x) | (~_complex_nan(y) & take_x)
        return _finish(out, np.where(take_x, x, y))

    return extreme


def _compare_complex(kind: Compare) -> Impl:
    def f(out: Arr | None, x: Arr, y: Arr) -> Arr:
        xr, xi, yr, yi = x.real, x.imag, y.real, y.imag
        eq = (xr == yr) & (xi == yi)
        if kind is Compare.EQUAL:
            return _finish(out, eq)
        if kind is Compare.NOT_EQUAL:
            return _finish(out, ~eq)
        tail = xi < yi if kind is Compare.LESS else xi <= yi
        nan = _complex_nan(x) | _complex_nan(y)
        return _finish(out, ~nan & ((xr < yr) | ((xr == yr) & tail)))
    return f


# --------------------------------------------------------------------------
# Conversions
# --------------------------------------------------------------------------

_TWO53: Final = np.uint64(1 << 53)
_LOW11: Final = np.uint64(0x7FF)


def _int_to_float(v: Arr, src: Dtype, dst: Dtype, out: Arr | None) -> Arr:
    """Integers of ``src`` into float ``dst``, their exact value rounded once."""
    if src.bits < 64:
        # Every integer of 32 bits or fewer is exact in float64.
        return _store(dst, np.asarray(v).astype(np.float64), out)
    if _native(dst):
        # A C cast from a 64-bit integer rounds once.
        return _finish(out, np.asarray(v).astype(dst.numpy_dtype))
    negative = v < 0 if src.kind is D.Kind.SIGNED else np.zeros(v.shape, dtype=np.bool_)
    m = np.asarray(v).astype(np.uint64)
    m = np.where(negative, np.uint64(0) - m, m)
    # Round to odd at bit 11: the float64 then holds the value to 42 bits or
    # more with a sticky bit, and the store's rounding into 24 bits or fewer
    # is the only one.
    sticky = ((m & _LOW11) != 0).astype(np.uint64) << np.uint64(11)
    m = np.where(m >= _TWO53, (m & ~_LOW11) | sticky, m)
    f = m.astype(np.float64)
    return _store(dst, np.where(negative, -f, f), out)


def _float_to_int(x: Arr, dst: Dtype, out: Arr | None) -> Arr:
    """Floats into integer ``dst``: truncated toward zero, saturated, NaN to 0."""
    t = np.trunc(np.asarray(x).astype(np.float64))
    lo, hi = dst.int_range
    if dst.bits < 64:
        # float64 holds every bound of 32 bits or fewer exactly.
        t = np.where(np.isnan(t), 0.0, np.clip(t, float(lo), float(hi)))
        return _iwrap(dst, t.astype(np.int64), out)
    over = t >= float(hi + 1)
    under = t < float(lo)
    safe = np.where(over | under | np.isnan(t), 0.0, t).astype(dst.numpy_dtype)
    ones = np.ones_like(safe)
    return _finish(out, np.where(over, ones * hi, np.where(under, ones * lo, safe)))


def _real_cast(x: Arr, src: Dtype, dst: Dtype, out: Arr | None) -> Arr:
    """A cast between real (not complex) dtypes, ``src is not dst``."""
    if dst.is_bool:
        if src.is_bool:
            return _finish(out, truth(x))
        return _finish(out, (_wide(x) if src.is_float else _ival(x)) != 0)
    if src.is_bool:
        return _real_cast(truth(x).astype(np.uint8), D.uint8, dst, out)
    if src.is_float:
        if dst.is_float:
            return _store(dst, x if src is D.float64 else _wide(x), out)
        return _float_to_int(x, dst, out)
    if dst.is_float:
        return _int_to_float(_ival(x), src, dst, out)
    return _iwrap(dst, _ival(x), out)


def _cast(src: Dtype, dst: Dtype) -> Impl:
    """Cast (upstream §3 "Cast"), ``src is not dst``."""
    if src.is_complex:
        part = _part(src)
        if dst.is_complex:
            return lambda out, x: _finish(out, np.asarray(x).astype(dst.numpy_dtype))
        if dst.is_bool:
            return lambda out, x: _finish(out, (x.real != 0) | (x.imag != 0))
        if dst is part:
            # The real part keeps its format, and its bits.
            return lambda out, x: _finish(out, np.array(x.real, copy=True))
        return lambda out, x: _real_cast(x.real, part, dst, out)
    if dst.is_complex:
        part = _part(dst)
        zero = np.zeros((), dtype=part.numpy_dtype)
        if src is part:
            return lambda out, x: _join(x, zero, dst, out)
        return lambda out, x: _join(_real_cast(x, src, part, None), zero, dst, out)
    return lambda out, x: _real_cast(x, src, dst, out)


def _bitcast4(dst: Dtype) -> Impl:
    """Bitcast between the 4-bit dtypes: the low nibble's code, reread."""
    def f(out: Arr | None, x: Arr) -> Arr:
        code = _bits(x) & np.uint8(15)
        if dst is D.float4_e2m1fn:
            return _finish(out, code.view(dst.numpy_dtype))
        return _iwrap(dst, code, out)
    return f


# --------------------------------------------------------------------------
# Where and Fma
# --------------------------------------------------------------------------


def where(out: Arr | None, c: Arr, x: Arr, y: Arr) -> Arr:
    """``x``'s element where ``c`` holds, else ``y``'s, bits copied."""
    if out is None:
        return np.where(c, x, y)
    np.copyto(out, y)
    np.copyto(out, x, where=c)
    return out


def fma_int(dt: Dtype) -> Impl:
    if dt.bits >= 8:
        def f(out: Arr | None, a: Arr, b: Arr, c: Arr) -> Arr:
            r = np.multiply(a, b, out=out)
            return np.add(r, c, out=r if out is not None else None)
        return f
    return lambda out, a, b, c: _iwrap(dt, _ival(a) * _ival(b) + _ival(c), out)




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
        return _unary_float(kind, src), False
    if src.is_complex:
        if kind is Unary.NEG:
            return (lambda out, x: np.negative(x, out=out)), False
        one = np.ones((), dtype=src.numpy_dtype)
        return (lambda out, x: _complex_divide(src, one, x, out)), False
    if kind in (Unary.FLOOR, Unary.CEIL, Unary.ROUND, Unary.TRUNC) or (
            kind is Unary.ABS and src.kind is D.Kind.UNSIGNED):
        return (lambda out, x: x), True
    return _unary_int(kind, src), False


def op2(node: Op2, src: Dtype) -> tuple[Impl, bool]:
    """An Op2 node's implementation, and whether it reads truth values."""
    kind = node.kind
    if isinstance(kind, Compare):
        if src.is_complex:
            return _compare_complex(kind), False
        uf = _COMPARE[kind]
        if src.is_float:
            return (lambda out, x, y: uf(_wide(x), _wide(y), out=out)), False
        if src.is_bool:
            return (lambda out, x, y: uf(x, y, out=out)), True
        return (lambda out, x, y: uf(_ival(x), _ival(y), out=out)), False
    if src.is_float:
        return _binary_float(kind, src), False
    if src.is_complex:
        return _binary_complex(kind, src), False
    if src.is_bool:
        return _binary_bool(kind), True
    return _binary_int(kind, src), False


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
    u = _bits(v)
    exp_mask = u.dtype.type(((1 << fmt.exponent_bits) - 1) << fmt.fraction_bits)
    frac_mask = u.dtype.type((1 << fmt.fraction_bits) - 1)
    quiet_bit = u.dtype.type(1 << (fmt.fraction_bits - 1))
    nan = ((u & exp_mask) == exp_mask) & ((u & frac_mask) != u.dtype.type(0))
    return np.asarray(np.where(nan, u | quiet_bit, u)).astype(u.dtype).view(dt.numpy_dtype)



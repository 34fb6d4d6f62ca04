"""The standard's elementwise functions: one map call each, its program made
once per body and dtype (``_bodies``), complex arguments through
``_complex`` where the Prog kinds take no complex operands.

A function refuses the dtypes the standard does not give it with
``TypeError`` naming the function and the arrays.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Final

from ..array import Array
from . import _base as B
from . import _bodies as F
from . import _complex as C

__all__: list[str] = []

_X: Final = inspect.Parameter("x", inspect.Parameter.POSITIONAL_ONLY)
_X1: Final = inspect.Parameter("x1", inspect.Parameter.POSITIONAL_ONLY)
_X2: Final = inspect.Parameter("x2", inspect.Parameter.POSITIONAL_ONLY)

#: Results of these are bool arrays.
_PREDICATES: Final = frozenset({"isfinite", "isinf", "isnan", "signbit", "equal", "not_equal",
                                "less", "less_equal", "greater", "greater_equal"})


def _unary(name: str, kind: str, body: B.Body, doc: str) -> Callable[[Array], Array]:
    fn = f"xp.{name}"
    complex_body = C.UNARY.get(name)

    def f(x: Array, /) -> Array:
        a = B.the_array(fn, x)
        B.check_kind(fn, kind, a)
        if a.dtype.is_complex and complex_body is not None:
            return complex_body(fn, a)
        return B.elementwise(fn, body, a)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = doc
    f.__signature__ = inspect.Signature([_X])  # type: ignore[attr-defined]
    globals()[name] = f
    __all__.append(name)
    return f


def _binary(name: str, kind: str, body: B.Body, doc: str) -> Callable[[Any, Any], Array]:
    fn = f"xp.{name}"
    complex_body = C.BINARY.get(name)

    def f(x1: Any, x2: Any, /) -> Array:
        a, b = B.operands(fn, x1, x2, kind=kind)
        if a.dtype.is_complex and complex_body is not None:
            return complex_body(fn, a, b)
        return B.elementwise(fn, body, a, b)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = doc
    f.__signature__ = inspect.Signature([_X1, _X2])  # type: ignore[attr-defined]
    globals()[name] = f
    __all__.append(name)
    return f


for _name, _kind, _body, _doc in [
    ("abs", "numeric", F.abs_, "|x| (the modulus of complex x, a real array)."),
    ("acos", "floating-point", F.acos, "The principal arccosine."),
    ("acosh", "floating-point", F.acosh, "The inverse hyperbolic cosine."),
    ("asin", "floating-point", F.asin, "The principal arcsine."),
    ("asinh", "floating-point", F.asinh, "The inverse hyperbolic sine."),
    ("atan", "floating-point", F.atan, "The principal arctangent."),
    ("atanh", "floating-point", F.atanh, "The inverse hyperbolic tangent."),
    ("bitwise_invert", "integer or boolean", F.bitwise_invert, "~x: every bit flipped."),
    ("ceil", "real-valued", F.ceil, "The least integer not below x (integers unchanged)."),
    ("cos", "floating-point", F.cos, "The cosine."),
    ("cosh", "floating-point", F.cosh, "The hyperbolic cosine."),
    ("exp", "floating-point", F.exp, "e**x."),
    ("expm1", "floating-point", F.expm1, "e**x − 1, exact near 0."),
    ("floor", "real-valued", F.floor, "The greatest integer not above x (integers unchanged)."),
    ("isfinite", "numeric", F.isfinite, "Whether x is finite (both parts, for complex)."),
    ("isinf", "numeric", F.isinf, "Whether x is infinite (either part, for complex)."),
    ("isnan", "numeric", F.isnan, "Whether x is NaN (either part, for complex)."),
    ("log", "floating-point", F.log, "The natural logarithm."),
    ("log1p", "floating-point", F.log1p, "log(1 + x), exact near 0."),
    ("log2", "floating-point", F.log2, "The base-2 logarithm."),
    ("log10", "floating-point", F.log10, "The base-10 logarithm."),
    ("logical_not", "bool", F.logical_not, "not x."),
    ("negative", "numeric", F.negative, "−x (integers wrap)."),
    ("positive", "numeric", F.positive, "+x: a copy."),
    ("reciprocal", "floating-point", F.reciprocal, "1 / x."),
    ("round", "numeric", F.round_, "The nearest integer, ties to even."),
    ("sign", "numeric", F.sign, "−1, 0 or 1 (x / |x| for complex x)."),
    ("signbit", "real floating-point", F.signbit, "Whether x's sign bit is set."),
    ("sin", "floating-point", F.sin, "The sine."),
    ("sinh", "floating-point", F.sinh, "The hyperbolic sine."),
    ("square", "numeric", F.square, "x · x."),
    ("sqrt", "floating-point", F.sqrt, "The principal square root."),
    ("tan", "floating-point", F.tan, "The tangent."),
    ("tanh", "floating-point", F.tanh, "The hyperbolic tangent."),
    ("trunc", "real-valued", F.trunc, "x rounded toward zero (integers unchanged)."),
]:
    _unary(_name, _kind, _body, _doc)

for _name, _kind, _body2, _doc in [
    ("add", "numeric", F.add, "x1 + x2 (integers wrap)."),
    ("subtract", "numeric", F.subtract, "x1 − x2 (integers wrap)."),
    ("multiply", "numeric", F.multiply, "x1 · x2 (integers wrap)."),
    ("divide", "floating-point", F.divide, "x1 / x2."),
    ("floor_divide", "real-valued", F.floor_divide, "⌊x1 / x2⌋."),
    ("remainder", "real-valued", F.remainder, "x1 mod x2 with the divisor's sign, as Python's %."),
    ("pow", "numeric", F.pow_, "x1 ** x2."),
    ("atan2", "real floating-point", F.atan2, "The angle of (x2, x1), in (−π, π]."),
    ("hypot", "real floating-point", F.hypot, "√(x1² + x2²) without overflow."),
    ("logaddexp", "real floating-point", F.logaddexp, "log(e**x1 + e**x2) without overflow."),
    ("maximum", "real-valued", F.maximum, "The greater (NaN where either is)."),
    ("minimum", "real-valued", F.minimum, "The lesser (NaN where either is)."),
    ("copysign", "real floating-point", F.copysign, "|x1| with x2's sign bit."),
    ("nextafter", "real floating-point", F.nextafter, "The next float after x1 toward x2."),
    ("equal", "any", F.equal, "x1 == x2."),
    ("not_equal", "any", F.not_equal, "x1 != x2."),
    ("less", "real-valued", F.less, "x1 < x2."),
    ("less_equal", "real-valued", F.less_equal, "x1 <= x2."),
    ("greater", "real-valued", F.greater, "x1 > x2."),
    ("greater_equal", "real-valued", F.greater_equal, "x1 >= x2."),
    ("logical_and", "bool", F.logical_and, "x1 and x2."),
    ("logical_or", "bool", F.logical_or, "x1 or x2."),
    ("logical_xor", "bool", F.logical_xor, "x1 xor x2."),
    ("bitwise_and", "integer or boolean", F.bitwise_and, "x1 & x2."),
    ("bitwise_or", "integer or boolean", F.bitwise_or, "x1 | x2."),
    ("bitwise_xor", "integer or boolean", F.bitwise_xor, "x1 ^ x2."),
    ("bitwise_left_shift", "integer", F.bitwise_left_shift, "x1 << x2 (0 past the width)."),
    ("bitwise_right_shift", "integer", F.bitwise_right_shift, "x1 >> x2, arithmetic for signed x1."),
]:
    _binary(_name, _kind, _body2, _doc)


def conj(x: Array, /) -> Array:
    """The complex conjugate (a copy for real x)."""
    a = B.the_array("xp.conj", x)
    B.check_kind("xp.conj", "numeric", a)
    return C.conj("xp.conj", a) if a.dtype.is_complex else B.copy("xp.conj", a)


def real(x: Array, /) -> Array:
    """The real part (a copy for real x)."""
    a = B.the_array("xp.real", x)
    B.check_kind("xp.real", "numeric", a)
    return B.copy("xp.real", C.part(a, 0)) if a.dtype.is_complex else B.copy("xp.real", a)


def imag(x: Array, /) -> Array:
    """The imaginary part (zeros for real x)."""
    a = B.the_array("xp.imag", x)
    B.check_kind("xp.imag", "numeric", a)
    if a.dtype.is_complex:
        return B.copy("xp.imag", C.part(a, 1))
    return B.full("xp.imag", a.shape, 0, a.dtype, a.device)


def clip(x: Array, /, min: Any = None, max: Any = None) -> Array:
    """x limited to [min, max] (each an array, a scalar or None; NaN where a bound is)."""
    fn = "xp.clip"
    a = B.the_array(fn, x)
    B.check_kind(fn, "real-valued", a)
    out = a
    for bound, body in ((min, F.maximum), (max, F.minimum)):
        if bound is None:
            continue
        if isinstance(bound, Array) and bound.dtype is not a.dtype:
            bound = B.cast(fn, bound, a.dtype)
        elif not isinstance(bound, Array) and a.dtype.is_int and isinstance(bound, float):
            raise TypeError(f"{fn}: a float bound for an integer array")
        v, w = B.operands(fn, out, _in_range(bound, a), kind="real-valued")
        out = B.elementwise(fn, body, v, w)
    if out.shape != a.shape:
        raise ValueError(f"{fn}: bounds broadcast x to {list(out.shape)}, not its shape {list(a.shape)}")
    return out if out is not a else B.copy(fn, a)


def _in_range(bound: Any, a: Array) -> Any:
    """A Python int bound beyond an integer dtype's range, moved to its edge
    (a bound past every value clips nothing)."""
    if isinstance(bound, int) and not isinstance(bound, bool) and a.dtype.is_int:
        lo, hi = a.dtype.int_range
        return lo if bound < lo else hi if bound > hi else bound
    return bound


__all__ += ["clip", "conj", "imag", "real"]

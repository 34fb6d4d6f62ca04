"""Complex transcendental functions from their parts, with the standard's
(C99 Annex G's) special values.

Each function is a core formula over the real and imaginary parts (complex
arithmetic written out on the parts, so a program computes it in one map)
and a table of special cases, ``(real part, imaginary part) -> result``, as
the standard lists them; the table wins where a case holds, the first
matching row first.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Final

from .. import dtype as D
from ..prog import Builder, Value
from . import _bodies as F

__all__ = ["BODIES"]

Parts = tuple[Value, Value]
_PI: Final = math.pi
_NAN: Final = math.nan
_INF: Final = math.inf


def _pred(b: Builder, name: str, v: Value) -> Value:
    """Whether ``v`` is what ``name`` says (the standard's wording, shortened)."""
    zero = b.const(v.dtype, 0.0)
    inf = b.const(v.dtype, _INF)
    finite = F.isfinite(b, v)
    if name == "+0":
        return b.and_(b.equal(v, zero), b.xor(F.sign_bit(b, v), b.const(D.bool_, True)))
    if name == "-0":
        return b.and_(b.equal(v, zero), F.sign_bit(b, v))
    if name == "0":
        return b.equal(v, zero)
    if name == "+inf":
        return b.equal(v, inf)
    if name == "-inf":
        return b.equal(v, -inf)
    if name == "inf":
        return b.equal(b.abs(v), inf)
    if name == "nan":
        return b.not_equal(v, v)
    if name == "finite":
        return finite
    if name == "pos":  # a positive finite number
        return b.and_(finite, b.less(zero, v))
    if name == "nzf":  # a nonzero finite number
        return b.and_(finite, b.not_equal(v, zero))
    if name == "nz":  # not zero (NaN and infinities included)
        return b.not_equal(v, zero)
    return b.equal(v, b.const(v.dtype, float(name)))


Rule = tuple[str, str, float, float]


def _with_rules(core: Callable[[Builder, Value, Value], Parts], rules: tuple[Rule, ...]
                ) -> Callable[[Builder, Value, Value], Parts]:
    def body(b: Builder, re: Value, im: Value) -> Parts:
        r, i = core(b, re, im)
        for pa, pb, vr, vi in reversed(rules):
            hit = b.and_(_pred(b, pa, re), _pred(b, pb, im))
            r = b.where(hit, b.const(re.dtype, vr), r)
            i = b.where(hit, b.const(re.dtype, vi), i)
        return r, i

    body.__name__ = core.__name__
    return body


# ---- complex arithmetic on parts ----------------------------------------------------


def _mul(b: Builder, x: Parts, y: Parts) -> Parts:
    return x[0] * y[0] - x[1] * y[1], x[0] * y[1] + x[1] * y[0]


def _div(b: Builder, x: Parts, y: Parts) -> Parts:
    d = y[0] * y[0] + y[1] * y[1]
    return (x[0] * y[0] + x[1] * y[1]) / d, (x[1] * y[0] - x[0] * y[1]) / d


def _sqrt(b: Builder, x: Parts) -> Parts:
    re, im = x
    h = F.hypot(b, re, im)
    t = b.sqrt((b.abs(re) + h) * 0.5)
    pos = b.less_equal(b.const(re.dtype, 0.0), re)
    r = b.where(pos, t, b.abs(im) / (t * 2.0))
    i = b.where(pos, im / (t * 2.0), F.with_sign(b, t, im))
    zero = b.equal(h, b.const(re.dtype, 0.0))
    return b.where(zero, b.const(re.dtype, 0.0), r), b.where(zero, b.copy(im), i)


def _log(b: Builder, x: Parts) -> Parts:
    return b.log(F.hypot(b, x[0], x[1])), b.atan2(x[1], x[0])


def _add1(b: Builder, x: Parts, c: float) -> Parts:
    return x[0] + c, b.copy(x[1])


# ---- core formulas ------------------------------------------------------------------


def _asinh_core(b: Builder, re: Value, im: Value) -> Parts:
    """log(z + √(z² + 1)), on the half plane re ≥ 0 (odd symmetry elsewhere)."""
    neg = F.sign_bit(b, re)
    a = b.where(neg, -re, re)
    c = b.where(neg, -im, im)
    z2 = _mul(b, (a, c), (a, c))
    s = _sqrt(b, (z2[0] + 1.0, z2[1]))
    r, i = _log(b, (a + s[0], c + s[1]))
    return b.where(neg, -r, r), b.where(neg, -i, i)


def _acosh_core(b: Builder, re: Value, im: Value) -> Parts:
    """log(z + √(z + 1)·√(z − 1))."""
    p = _mul(b, _sqrt(b, (re + 1.0, b.copy(im))), _sqrt(b, (re - 1.0, b.copy(im))))
    return _log(b, (re + p[0], im + p[1]))


def _acos_core(b: Builder, re: Value, im: Value) -> Parts:
    """π/2 − asin(z), asin(z) = −i·asinh(iz)."""
    u, v = _asinh_core(b, -im, re)
    return _PI / 2 - v, b.copy(u)


def _atanh_core(b: Builder, re: Value, im: Value) -> Parts:
    """½·log((1 + z)/(1 − z))."""
    q = _div(b, (re + 1.0, b.copy(im)), (1.0 - re, -im))
    r, i = _log(b, q)
    return r * 0.5, i * 0.5


def _sinh_core(b: Builder, re: Value, im: Value) -> Parts:
    return b.sinh(re) * b.cos(im), b.cosh(re) * b.sin(im)


def _cosh_core(b: Builder, re: Value, im: Value) -> Parts:
    return b.cosh(re) * b.cos(im), b.sinh(re) * b.sin(im)


def _tanh_core(b: Builder, re: Value, im: Value) -> Parts:
    """Kahan's: t = tan(im), s = sinh(re), β = 1 + t², ρ = √(1 + s²):
    (βρs + it)/(1 + βs²); ±1 + 0i past |re| = 20."""
    t = b.tan(im)
    s = b.sinh(re)
    beta = t * t + 1.0
    rho = b.sqrt(s * s + 1.0)
    d = beta * s * s + 1.0
    r = beta * rho * s / d
    i = t / d
    big = b.less(b.const(re.dtype, 20.0), b.abs(re))
    one = F.with_sign(b, b.const(re.dtype, 1.0), re)
    return b.where(big, one, r), b.where(big, F.with_sign(b, b.const(re.dtype, 0.0), t), i)


def _log1p_core(b: Builder, re: Value, im: Value) -> Parts:
    """log|1 + z| + i·atan2(im, 1 + re), log1p for |z| small."""
    small = b.less(F.hypot(b, re, im), b.const(re.dtype, 0.5))
    r_small = b.log1p(re * (re + 2.0) + im * im) * 0.5
    r_big = b.log(F.hypot(b, re + 1.0, im))
    return b.where(small, r_small, r_big), b.atan2(im, re + 1.0)


def _expm1_core(b: Builder, re: Value, im: Value) -> Parts:
    """(e^re·cos(im) − 1) as expm1(re)·cos(im) − 2 sin²(im/2), and e^re·sin(im)."""
    h = b.sin(im * 0.5)
    return b.expm1(re) * b.cos(im) - h * h * 2.0, b.exp(re) * b.sin(im)


# ---- the standard's special cases ---------------------------------------------------

_ACOS: Final[tuple[Rule, ...]] = (
    ("0", "+0", _PI / 2, -0.0), ("0", "nan", _PI / 2, _NAN), ("finite", "+inf", _PI / 2, -_INF),
    ("nzf", "nan", _NAN, _NAN), ("-inf", "pos", _PI, -_INF), ("+inf", "pos", 0.0, -_INF),
    ("-inf", "+inf", 3 * _PI / 4, -_INF), ("+inf", "+inf", _PI / 4, -_INF),
    ("inf", "nan", _NAN, _INF), ("nan", "finite", _NAN, _NAN), ("nan", "+inf", _NAN, -_INF),
    ("nan", "nan", _NAN, _NAN),
)
_ACOSH: Final[tuple[Rule, ...]] = (
    ("0", "+0", 0.0, _PI / 2), ("finite", "+inf", _INF, _PI / 2), ("nzf", "nan", _NAN, _NAN),
    ("0", "nan", _NAN, _PI / 2), ("-inf", "pos", _INF, _PI), ("+inf", "pos", _INF, 0.0),
    ("-inf", "+inf", _INF, 3 * _PI / 4), ("+inf", "+inf", _INF, _PI / 4),
    ("inf", "nan", _INF, _NAN), ("nan", "finite", _NAN, _NAN), ("nan", "+inf", _INF, _NAN),
    ("nan", "nan", _NAN, _NAN),
)
_ASINH: Final[tuple[Rule, ...]] = (
    ("+0", "+0", 0.0, 0.0), ("pos", "+inf", _INF, _PI / 2), ("finite", "nan", _NAN, _NAN),
    ("+inf", "pos", _INF, 0.0), ("+inf", "+inf", _INF, _PI / 4), ("+inf", "nan", _INF, _NAN),
    ("nan", "+0", _NAN, 0.0), ("nan", "nzf", _NAN, _NAN), ("nan", "+inf", _INF, _NAN),
    ("nan", "nan", _NAN, _NAN),
)
_ATANH: Final[tuple[Rule, ...]] = (
    ("+0", "+0", 0.0, 0.0), ("+0", "nan", 0.0, _NAN), ("1", "+0", _INF, 0.0),
    ("pos", "+inf", 0.0, _PI / 2), ("nzf", "nan", _NAN, _NAN), ("+inf", "pos", 0.0, _PI / 2),
    ("+inf", "+inf", 0.0, _PI / 2), ("+inf", "nan", 0.0, _NAN), ("nan", "finite", _NAN, _NAN),
    ("nan", "+inf", 0.0, _PI / 2), ("nan", "nan", _NAN, _NAN),
)
_COSH: Final[tuple[Rule, ...]] = (
    ("+0", "+0", 1.0, 0.0), ("+0", "+inf", _NAN, 0.0), ("+0", "nan", _NAN, 0.0),
    ("nzf", "+inf", _NAN, _NAN), ("nzf", "nan", _NAN, _NAN), ("+inf", "+0", _INF, 0.0),
    ("+inf", "+inf", _INF, _NAN), ("+inf", "nan", _INF, _NAN), ("nan", "0", _NAN, 0.0),
    ("nan", "nz", _NAN, _NAN),
)
_SINH: Final[tuple[Rule, ...]] = (
    ("+0", "+0", 0.0, 0.0), ("+0", "+inf", 0.0, _NAN), ("+0", "nan", 0.0, _NAN),
    ("pos", "+inf", _NAN, _NAN), ("pos", "nan", _NAN, _NAN), ("+inf", "+0", _INF, 0.0),
    ("+inf", "+inf", _INF, _NAN), ("+inf", "nan", _INF, _NAN), ("nan", "+0", _NAN, 0.0),
    ("nan", "nz", _NAN, _NAN),
)
_TANH: Final[tuple[Rule, ...]] = (
    ("+0", "+0", 0.0, 0.0), ("nzf", "+inf", _NAN, _NAN), ("+0", "+inf", 0.0, _NAN),
    ("nzf", "nan", _NAN, _NAN), ("+0", "nan", 0.0, _NAN), ("+inf", "pos", 1.0, 0.0),
    ("+inf", "+inf", 1.0, 0.0), ("+inf", "nan", 1.0, 0.0), ("nan", "+0", _NAN, 0.0),
    ("nan", "nz", _NAN, _NAN),
)
_LOG1P: Final[tuple[Rule, ...]] = (
    ("-1", "+0", -_INF, 0.0), ("finite", "+inf", _INF, _PI / 2), ("finite", "nan", _NAN, _NAN),
    ("-inf", "pos", _INF, _PI), ("+inf", "pos", _INF, 0.0), ("-inf", "+inf", _INF, 3 * _PI / 4),
    ("+inf", "+inf", _INF, _PI / 4), ("inf", "nan", _INF, _NAN), ("nan", "finite", _NAN, _NAN),
    ("nan", "+inf", _INF, _NAN), ("nan", "nan", _NAN, _NAN),
)
_EXPM1: Final[tuple[Rule, ...]] = (
    ("0", "+0", 0.0, 0.0), ("finite", "+inf", _NAN, _NAN), ("finite", "nan", _NAN, _NAN),
    ("+inf", "+0", _INF, 0.0), ("-inf", "+inf", -1.0, 0.0), ("+inf", "+inf", _INF, _NAN),
    ("-inf", "nan", -1.0, 0.0), ("+inf", "nan", _INF, _NAN), ("nan", "+0", _NAN, 0.0),
    ("nan", "nz", _NAN, _NAN),
)

#: The complex bodies by the standard's function name.
BODIES: Final[dict[str, Callable[[Builder, Value, Value], Parts]]] = {
    "acos": _with_rules(_acos_core, _ACOS),
    "acosh": _with_rules(_acosh_core, _ACOSH),
    "asinh": _with_rules(_asinh_core, _ASINH),
    "atanh": _with_rules(_atanh_core, _ATANH),
    "cosh": _with_rules(_cosh_core, _COSH),
    "sinh": _with_rules(_sinh_core, _SINH),
    "tanh": _with_rules(_tanh_core, _TANH),
    "log1p": _with_rules(_log1p_core, _LOG1P),
    "expm1": _with_rules(_expm1_core, _EXPM1),
}

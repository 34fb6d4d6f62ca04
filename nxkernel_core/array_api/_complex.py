"""Complex elementwise functions from the parts of complex numbers.

Prog's kinds take complex operands only for arithmetic, comparisons and
conversions, so the rest are programs over the real and imaginary parts.
The parts are views: a complex array's bits read as its part dtype with the
last axis doubled (``Array.bitcast``), every second element. A program reads
both parts broadcast along a new last axis of 2 and writes the result's real
part at index 0 and its imaginary part at index 1 (``Coord 0``); that float
array's bits are the complex result. One map call per function.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Final

from .. import dtype as D
from ..array import Array
from ..dtype import Dtype
from ..layout import Broadcast, Range, Slice
from ..prog import Builder, Value
from . import _base as B
from . import _bodies as F
from ._complex_special import BODIES

__all__ = ["BINARY", "UNARY", "conj", "part"]

#: A complex body: the parts of its operands to the parts of its result.
Parts = Callable[..., tuple[Value, Value]]


def part_dtype(dt: Dtype) -> Dtype:
    return D.float64 if dt is D.complex128 else D.float32


def complex_of(dt: Dtype) -> Dtype:
    return D.complex128 if dt is D.float64 else D.complex64


def part(a: Array, which: int) -> Array:
    """The real (0) or imaginary (1) parts of complex ``a``: a view where the
    last axis has stride 1, else of a copy."""
    shape = a.shape
    x = a.reshape([1]) if a.rank == 0 else a
    if x.rank and x.shape[-1] != 1 and x.layout.strides[-1] != 1:
        x = B.copy("xp.real", x)
    flat = x.bitcast(part_dtype(a.dtype))
    n = x.shape[-1]
    ranges = (*(Range(0, d, 1) for d in flat.shape[:-1]), Range(which, n, 2))
    out = flat.view(Slice(ranges))
    return out.reshape(list(shape)) if a.rank == 0 else out


def _paired(a: Array) -> Array:
    """``a`` with a last axis of 2, broadcast (a view)."""
    return a.reshape([*a.shape, 1]).view(Broadcast((*a.shape, 2)))


def _joined(r: Array, shape: tuple[int, ...]) -> Array:
    """The complex array whose parts ``r`` holds along its last axis of 2."""
    c = r.bitcast(complex_of(r.dtype))
    return c.reshape(list(shape))


@functools.cache
def _interleaving(body: Parts) -> B.Body:
    """A real body writing ``body``'s real part at Coord 0 = 0 and its
    imaginary part at 1."""

    def joined(b: Builder, *parts: Value) -> Value:
        re, im = body(b, *parts)
        at_real = b.equal(b.coord(0), b.const(D.int64, 0))
        return b.where(at_real, re, im)

    return joined


def complex_map(fn: str, body: Parts, *xs: Array) -> Array:
    """``body`` over the parts of the complex arrays ``xs`` (one shape, one
    dtype): one map call, a complex result."""
    shape = xs[0].shape
    ins = []
    for x in xs:
        ins += [_paired(part(x, 0)), _paired(part(x, 1))]
    r = B.elementwise(fn, _interleaving(body), *ins)
    return _joined(r, shape)


def real_map(fn: str, body: B.Body, *xs: Array) -> Array:
    """``body`` over the parts of ``xs`` to one real (or bool) value each."""
    ins = []
    for x in xs:
        ins += [part(x, 0), part(x, 1)]
    return B.elementwise(fn, body, *ins)


def conj(fn: str, a: Array) -> Array:
    return complex_map(fn, _conj, a)


def _conj(b: Builder, re: Value, im: Value) -> tuple[Value, Value]:
    return b.copy(re), b.neg(im)


# ---- bodies ---------------------------------------------------------------------


def _abs(b: Builder, re: Value, im: Value) -> Value:
    return F.hypot(b, re, im)


def _isnan(b: Builder, re: Value, im: Value) -> Value:
    return b.or_(b.not_equal(re, re), b.not_equal(im, im))


def _isinf(b: Builder, re: Value, im: Value) -> Value:
    return b.or_(F.isinf(b, re), F.isinf(b, im))


def _isfinite(b: Builder, re: Value, im: Value) -> Value:
    return b.and_(F.isfinite(b, re), F.isfinite(b, im))


def _inf(b: Builder, dt: Dtype) -> Value:
    return b.const(dt, math.inf)


def _nan(b: Builder, dt: Dtype) -> Value:
    return b.const(dt, math.nan)


def _sign(b: Builder, re: Value, im: Value) -> tuple[Value, Value]:
    """z / |z|; 0 at 0; NaN where a part is."""
    h = F.hypot(b, re, im)
    zero = b.equal(h, b.const(re.dtype, 0.0))
    nan = _isnan(b, re, im)
    r = b.where(zero, b.const(re.dtype, 0.0), re / h)
    i = b.where(zero, b.const(re.dtype, 0.0), im / h)
    return b.where(nan, _nan(b, re.dtype), r), b.where(nan, _nan(b, re.dtype), i)


def _square(b: Builder, re: Value, im: Value) -> tuple[Value, Value]:
    return re * re - im * im, (re * im) * 2.0


def _exp(b: Builder, re: Value, im: Value) -> tuple[Value, Value]:
    """e^re·cis(im), C99's special values: an imaginary part of ±0 kept, +∞
    real with a non-finite imaginary part ±∞ + NaN j, −∞ real ±0 ± 0j."""
    dt = re.dtype
    e = b.exp(re)
    r = e * b.cos(im)
    i = e * b.sin(im)
    im_zero = b.equal(im, b.const(dt, 0.0))
    r = b.where(im_zero, e, r)
    i = b.where(im_zero, b.copy(im), i)
    im_bad = b.not_equal(im - im, im - im)  # infinite or NaN
    pos_inf = b.equal(re, _inf(b, dt))
    neg_inf = b.equal(re, -_inf(b, dt))
    r = b.where(b.and_(pos_inf, im_bad), _inf(b, dt), r)
    i = b.where(b.and_(pos_inf, im_bad), _nan(b, dt), i)
    zero = b.const(dt, 0.0)
    r = b.where(b.and_(neg_inf, im_bad), zero, r)
    i = b.where(b.and_(neg_inf, im_bad), zero, i)
    return r, i


def _log(b: Builder, re: Value, im: Value) -> tuple[Value, Value]:
    """log|z| + i·atan2(im, re)."""
    return b.log(F.hypot(b, re, im)), b.atan2(im, re)


def _sqrt(b: Builder, re: Value, im: Value) -> tuple[Value, Value]:
    """Kahan's: t = √((|re| + |z|)/2); re ≥ 0: (t, im/2t); else (|im|/2t, ±t)."""
    dt = re.dtype
    h = F.hypot(b, re, im)
    t = b.sqrt((b.abs(re) + h) * 0.5)
    pos = b.less_equal(b.const(dt, 0.0), re)
    r_pos, i_pos = t, im / (t * 2.0)
    r_neg, i_neg = b.abs(im) / (t * 2.0), F.with_sign(b, t, im)
    r = b.where(pos, r_pos, r_neg)
    i = b.where(pos, i_pos, i_neg)
    zero = b.equal(h, b.const(dt, 0.0))
    r = b.where(zero, b.const(dt, 0.0), r)
    i = b.where(zero, b.copy(im), i)
    inf_im = b.equal(b.abs(im), _inf(b, dt))
    r = b.where(inf_im, _inf(b, dt), r)
    i = b.where(inf_im, b.copy(im), i)
    return r, i


UNARY: Final[dict[str, Callable[[str, Array], Array]]] = {
    "abs": lambda fn, a: real_map(fn, _abs, a),
    "isnan": lambda fn, a: real_map(fn, _isnan, a),
    "isinf": lambda fn, a: real_map(fn, _isinf, a),
    "isfinite": lambda fn, a: real_map(fn, _isfinite, a),
    "sign": lambda fn, a: complex_map(fn, _sign, a),
    "square": lambda fn, a: complex_map(fn, _square, a),
    "exp": lambda fn, a: complex_map(fn, _exp, a),
    "log": lambda fn, a: complex_map(fn, _log, a),
    "sqrt": lambda fn, a: complex_map(fn, _sqrt, a),
}

for _name, _body in BODIES.items():
    UNARY[_name] = functools.partial(lambda body, fn, a: complex_map(fn, body, a), _body)

BINARY: Final[dict[str, Callable[[str, Array, Array], Array]]] = {}


"""The standard's statistical, utility and searching functions: reductions
and scans through ``nx`` (the Reduce and Scan kernels), with the standard's
default dtypes (integer sums in the widest integer of their signedness) and
``keepdims``."""

from __future__ import annotations

import builtins
import math
from collections.abc import Sequence
from typing import Any

from .. import dtype as D
from .. import nx
from .. import spec as S
from ..answer import describe
from ..array import Array
from ..dtype import Dtype, Kind
from ..prog import Builder, Prog, Value
from . import _base as B
from . import _bodies as F

__all__ = [
    "all", "any", "argmax", "argmin", "count_nonzero", "cumulative_prod", "cumulative_sum",
    "diff", "max", "mean", "min", "prod", "std", "sum", "var", "where",
]

Axis = int | Sequence[int] | None


def _keep(x: Array, axes: tuple[int, ...], r: Array, keepdims: bool) -> Array:
    if not keepdims:
        return r
    return r.reshape([1 if i in axes else d for i, d in enumerate(x.shape)])


def _accumulator(fn: str, x: Array, dtype: Any) -> Dtype:
    """The standard's default result dtype of a sum or product of ``x``."""
    if dtype is not None:
        if not isinstance(dtype, Dtype):
            raise TypeError(f"{fn}: {dtype!r} is not a dtype")
        return dtype
    if x.dtype.kind is Kind.SIGNED:
        return D.int64
    if x.dtype.kind is Kind.UNSIGNED:
        return D.uint64
    if x.dtype.is_bool:
        return D.int64
    return x.dtype


def _reduce(fn: str, x: Array, axis: Axis, reduction: S.Reduction, result: Dtype | None,
            keepdims: bool, index: int = 0) -> Array:
    a = B.the_array(fn, x)
    axes = B.axes_of(fn, a, axis)
    if result is not None and result is not a.dtype:
        a = B.cast(fn, a, result)
    if not axes:
        return B.copy(fn, a)
    sp = S.Reduce(Prog.identity(a.dtype), (S.PLAIN,), axes, ((reduction, 0, a.dtype),))
    return _keep(x, axes, nx.call(sp, a, name=fn)[index], keepdims)


def sum(x: Array, /, *, axis: Axis = None, dtype: Any = None, keepdims: bool = False) -> Array:
    """The sum along ``axis`` (all axes for None), from +0."""
    fn = "xp.sum"
    B.check_kind(fn, "numeric", B.the_array(fn, x))
    return _reduce(fn, x, axis, S.Monoid.SUM, _accumulator(fn, x, dtype), keepdims)


def prod(x: Array, /, *, axis: Axis = None, dtype: Any = None, keepdims: bool = False) -> Array:
    """The product along ``axis``; 1 for no term."""
    fn = "xp.prod"
    B.check_kind(fn, "numeric", B.the_array(fn, x))
    return _reduce(fn, x, axis, S.Monoid.PROD, _accumulator(fn, x, dtype), keepdims)


def max(x: Array, /, *, axis: Axis = None, keepdims: bool = False) -> Array:
    """The greatest element (NaN where one is)."""
    fn = "xp.max"
    a = B.the_array(fn, x)
    B.check_kind(fn, "real-valued", a)
    _nonempty(fn, a, axis)
    return _reduce(fn, a, axis, S.Monoid.MAX, None, keepdims)


def min(x: Array, /, *, axis: Axis = None, keepdims: bool = False) -> Array:
    """The least element (NaN where one is)."""
    fn = "xp.min"
    a = B.the_array(fn, x)
    B.check_kind(fn, "real-valued", a)
    _nonempty(fn, a, axis)
    return _reduce(fn, a, axis, S.Monoid.MIN, None, keepdims)


def _nonempty(fn: str, a: Array, axis: Axis) -> None:
    axes = B.axes_of(fn, a, axis)
    if builtins.any(a.shape[i] == 0 for i in axes):
        raise ValueError(f"{fn}: the extreme of no element ({describe([a])})")


def mean(x: Array, /, *, axis: Axis = None, keepdims: bool = False) -> Array:
    """The arithmetic mean (NaN for no term)."""
    fn = "xp.mean"
    a = B.the_array(fn, x)
    B.check_kind(fn, "floating-point", a)
    axes = B.axes_of(fn, a, axis)
    n = math.prod(a.shape[i] for i in axes)
    s = _reduce(fn, a, axes, S.Monoid.SUM, None, keepdims)
    return _scaled(fn, s, n)


def _div_n(b: Builder, x: Value, n: Value) -> Value:
    return b.fdiv(x, n)


def _scaled(fn: str, s: Array, n: float) -> Array:
    """s / n, one map."""
    d = B.scalar_array(n, s.dtype, s.device)
    return B.elementwise(fn, _div_n, *B.broadcast(fn, [s, d]))


def _moments(fn: str, x: Array, axis: Axis, correction: float, keepdims: bool) -> Array:
    a = B.the_array(fn, x)
    B.check_kind(fn, "real floating-point", a)
    axes = B.axes_of(fn, a, axis)
    n = math.prod(a.shape[i] for i in axes)
    if not axes:
        # No axis reduced: each element is its own single term (NaN stays NaN).
        a = B.reshaped(fn, a, [*a.shape, 1])
        axes, keepdims = (a.rank - 1,), False
    var = _reduce(fn, a, axes, S.MOMENTS, None, keepdims, index=1)
    if correction == 0:
        return var
    dof = n - correction
    return _scaled(fn, var, dof / n if n else math.nan) if dof > 0 else _scaled(fn, var, 0.0)


def var(x: Array, /, *, axis: Axis = None, correction: int | float = 0.0,
        keepdims: bool = False) -> Array:
    """The variance, divided by N − correction."""
    return _moments("xp.var", x, axis, correction, keepdims)


def std(x: Array, /, *, axis: Axis = None, correction: int | float = 0.0,
        keepdims: bool = False) -> Array:
    """The standard deviation: the square root of ``var``."""
    v = _moments("xp.std", x, axis, correction, keepdims)
    return B.elementwise("xp.std", F.sqrt, v)


def _scan(fn: str, x: Array, axis: int | None, dtype: Any, include_initial: bool,
          monoid: S.Monoid) -> Array:
    a = B.the_array(fn, x)
    B.check_kind(fn, "numeric", a)
    if axis is None:
        if a.rank > 1:
            raise ValueError(f"{fn}: axis is required for {describe([a])}")
        axis = 0
    if a.rank == 0:
        raise ValueError(f"{fn}: a 0-d array has no axis")
    ax = B.axis_of(fn, a, axis)
    acc = _accumulator(fn, a, dtype)
    c = B.cast(fn, a, acc)
    if a.shape[ax] == 0:
        r = c
    else:
        sp = S.Scan(Prog.identity(acc), (S.PLAIN,), ax, monoid, 0, acc)
        r = nx.call(sp, c, name=fn)[0]
    if not include_initial:
        return r
    shape = list(a.shape)
    shape[ax] = 1
    first = B.full(fn, shape, 0 if monoid is S.Monoid.SUM else 1, acc, a.device)
    from ._manipulation import concat

    return concat([first, r], axis=ax)


def cumulative_sum(x: Array, /, *, axis: int | None = None, dtype: Any = None,
                   include_initial: bool = False) -> Array:
    """The running sum along ``axis``."""
    return _scan("xp.cumulative_sum", x, axis, dtype, include_initial, S.Monoid.SUM)


def cumulative_prod(x: Array, /, *, axis: int | None = None, dtype: Any = None,
                    include_initial: bool = False) -> Array:
    """The running product along ``axis``."""
    return _scan("xp.cumulative_prod", x, axis, dtype, include_initial, S.Monoid.PROD)


def _truth(fn: str, x: Array) -> Array:
    """x != 0 as bool (x itself for bool)."""
    if x.dtype.is_bool:
        return x
    zero = B.scalar_array(0, x.dtype, x.device)
    return B.elementwise(fn, F.not_equal, *B.broadcast(fn, [x, zero]))


def all(x: Array, /, *, axis: Axis = None, keepdims: bool = False) -> Array:
    """Whether every element along ``axis`` is non-zero (True for none)."""
    a = _truth("xp.all", B.the_array("xp.all", x))
    return _reduce("xp.all", a, axis, S.Monoid.MIN, None, keepdims) if a.numel else _keep(
        a, B.axes_of("xp.all", a, axis), B.full("xp.all", _rest(a, axis), True, D.bool_, a.device),
        keepdims)


def any(x: Array, /, *, axis: Axis = None, keepdims: bool = False) -> Array:
    """Whether some element along ``axis`` is non-zero (False for none)."""
    a = _truth("xp.any", B.the_array("xp.any", x))
    return _reduce("xp.any", a, axis, S.Monoid.MAX, None, keepdims) if a.numel else _keep(
        a, B.axes_of("xp.any", a, axis), B.full("xp.any", _rest(a, axis), False, D.bool_, a.device),
        keepdims)


def _rest(a: Array, axis: Axis) -> list[int]:
    axes = B.axes_of("xp", a, axis)
    return [d for i, d in enumerate(a.shape) if i not in axes]


def count_nonzero(x: Array, /, *, axis: Axis = None, keepdims: bool = False) -> Array:
    """The number of non-zero elements along ``axis`` (int64)."""
    a = _truth("xp.count_nonzero", B.the_array("xp.count_nonzero", x))
    return _reduce("xp.count_nonzero", a, axis, S.Monoid.SUM, D.int64, keepdims)


def _arg(fn: str, x: Array, axis: int | None, keepdims: bool, extreme: S.Extreme) -> Array:
    a = B.the_array(fn, x)
    B.check_kind(fn, "real-valued", a)
    if a.numel == 0:
        raise ValueError(f"{fn}: no element ({describe([a])})")
    if axis is None:
        flat = B.flat(fn, a)
        r = _reduce(fn, flat, 0, S.Arg(extreme), None, False, index=1)
        return r.reshape([1] * a.rank) if keepdims else r
    ax = B.axis_of(fn, a, axis)
    return _reduce(fn, a, ax, S.Arg(extreme), None, keepdims, index=1)


def argmax(x: Array, /, *, axis: int | None = None, keepdims: bool = False) -> Array:
    """The int64 position of the first greatest element (of the first NaN)."""
    return _arg("xp.argmax", x, axis, keepdims, S.Extreme.MAX)


def argmin(x: Array, /, *, axis: int | None = None, keepdims: bool = False) -> Array:
    """The int64 position of the first least element (of the first NaN)."""
    return _arg("xp.argmin", x, axis, keepdims, S.Extreme.MIN)


def _where(b: Builder, c: Value, x: Value, y: Value) -> Value:
    return b.where(c, x, y)


def where(condition: Array, x1: Any, x2: Any, /) -> Array:
    """x1 where ``condition`` holds, else x2 (promoted, broadcast)."""
    fn = "xp.where"
    c = B.the_array(fn, condition)
    if not c.dtype.is_bool:
        raise TypeError(f"{fn}: the condition is {describe([c])}, not bool")
    if not isinstance(x1, Array) and not isinstance(x2, Array):
        raise TypeError(f"{fn}: x1 or x2 must be an array")
    a, b = B.operands(fn, x1, x2)
    cc, a, b = B.broadcast(fn, [c, a, b])
    return B.elementwise(fn, _where, cc, a, b)


def _sub(b: Builder, x: Value, y: Value) -> Value:
    return b.xor(x, y) if x.dtype.is_bool else x - y


def diff(x: Array, /, *, axis: int = -1, n: int = 1, prepend: Array | None = None,
         append: Array | None = None) -> Array:
    """The n-th forward difference along ``axis``."""
    fn = "xp.diff"
    a = B.the_array(fn, x)
    ax = B.axis_of(fn, a, axis)
    if n < 0:
        raise ValueError(f"{fn}: n = {n} is negative ({describe([a])})")
    if prepend is not None or append is not None:
        from ._manipulation import concat

        parts = [p for p in (prepend, a, append) if p is not None]
        a = concat(parts, axis=ax)
    from ._manipulation import take_range

    for _ in range(n):
        d = a.shape[ax]
        if d == 0:
            break
        hi, lo = take_range(a, ax, 1, d), take_range(a, ax, 0, d - 1)
        a = B.elementwise(fn, _sub, hi, lo)
    return a


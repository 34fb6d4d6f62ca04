"""Reductions and scans: sum, prod, max, min, argmax, argmin, logsumexp,
mean_var, cumsum, softmax."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Final

from .. import dtype as D
from .. import spec as S
from ..answer import InvalidArgument, describe
from ..array import Array
from ..caller import call, call1
from ..dtype import Dtype
from ..layout import Broadcast
from ..prog import Prog
from .arguments import as_arrays, flattened, reduced_axes


def _keep(x: Array, axes: tuple[int, ...], r: Array, keepdims: bool) -> Array:
    if not keepdims:
        return r
    return r.reshape([1 if i in axes else d for i, d in enumerate(x.shape)])


def _reduce1(fn: str, x: object, axis: int | Sequence[int] | None, reduction: S.Reduction,
             dtype: D.DtypeLike | None, keepdims: bool,
             whole: dict[tuple[Dtype, int], S.Reduce]) -> tuple[Array, ...]:
    """``reduction`` of x along ``axis``; ``whole``: its specs over every axis
    in x's dtype, by dtype and rank, made once (the warm call's look-up)."""
    if type(x) is Array and axis is None and dtype is None and not keepdims:
        key = (x.dtype, len(x.layout.shape))
        sp = whole.get(key)
        if sp is None:
            sp = whole[key] = _reduce_spec(x.dtype, tuple(range(key[1])), reduction, x.dtype)
        return call1(sp, x, None, None, fn)
    (a,) = as_arrays(fn, [x])
    axes = reduced_axes(fn, a, axis)
    sp = _reduce_spec(a.dtype, axes, reduction, a.dtype if dtype is None else D.resolve(dtype, fn))
    return tuple(_keep(a, axes, r, keepdims) for r in call(sp, a, name=fn))


_sum_whole: Final[dict[tuple[Dtype, int], S.Reduce]] = {}
_prod_whole: Final[dict[tuple[Dtype, int], S.Reduce]] = {}
_max_whole: Final[dict[tuple[Dtype, int], S.Reduce]] = {}
_min_whole: Final[dict[tuple[Dtype, int], S.Reduce]] = {}
_argmax_whole: Final[dict[tuple[Dtype, int], S.Reduce]] = {}
_argmin_whole: Final[dict[tuple[Dtype, int], S.Reduce]] = {}
_logsumexp_whole: Final[dict[tuple[Dtype, int], S.Reduce]] = {}
_moments_whole: Final[dict[tuple[Dtype, int], S.Reduce]] = {}
_cumsum_whole: Final[dict[tuple[Dtype, int], S.Scan]] = {}

#: Arg's reductions, made once (a warm call makes no dataclass).
_ARGMAX: Final = S.Arg(S.Extreme.MAX)
_ARGMIN: Final = S.Arg(S.Extreme.MIN)


@functools.lru_cache(maxsize=1024)
def _reduce_spec(dt: Dtype, axes: tuple[int, ...], reduction: S.Reduction,
                 result: Dtype) -> S.Reduce:
    """The reduce spec of one reduction of a ``dt`` operand, made once."""
    return S.Reduce(Prog.identity(dt), (S.PLAIN,), axes, ((reduction, 0, result),))


def sum(x: object, axis: int | Sequence[int] | None = None, dtype: D.DtypeLike | None = None,
        keepdims: bool = False) -> Array:
    """The sum of x's elements along ``axis`` (all where None), from +0, in
    x's dtype unless ``dtype`` (a float sum may round into any float dtype)."""
    return _reduce1("nx.sum", x, axis, S.Monoid.SUM, dtype, keepdims, _sum_whole)[0]


def prod(x: object, axis: int | Sequence[int] | None = None, dtype: D.DtypeLike | None = None,
         keepdims: bool = False) -> Array:
    """The product of x's elements along ``axis``; an empty product is 1."""
    return _reduce1("nx.prod", x, axis, S.Monoid.PROD, dtype, keepdims, _prod_whole)[0]


def max(x: object, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Array:
    """The greatest element along ``axis`` (NaN where one is NaN; −0 below +0)."""
    return _reduce1("nx.max", x, axis, S.Monoid.MAX, None, keepdims, _max_whole)[0]


def min(x: object, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Array:
    """The least element along ``axis`` (NaN where one is NaN; −0 below +0)."""
    return _reduce1("nx.min", x, axis, S.Monoid.MIN, None, keepdims, _min_whole)[0]


def argmax(x: object, axis: int | None = None, keepdims: bool = False) -> Array:
    """int64 positions of the first greatest element (of the first NaN) along
    ``axis``; over the flattened array where None, as NumPy's."""
    return _reduce1("nx.argmax", x, axis, _ARGMAX, None, keepdims, _argmax_whole)[1]


def argmin(x: object, axis: int | None = None, keepdims: bool = False) -> Array:
    """int64 positions of the first least element (of the first NaN) along ``axis``."""
    return _reduce1("nx.argmin", x, axis, _ARGMIN, None, keepdims, _argmin_whole)[1]


def logsumexp(x: object, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Array:
    """log Σ exp(x) along ``axis``, without overflow; −inf for no term."""
    return _reduce1("nx.logsumexp", x, axis, S.LOGSUMEXP, None, keepdims, _logsumexp_whole)[0]


def mean_var(x: object, axis: int | Sequence[int] | None = None,
             keepdims: bool = False) -> tuple[Array, Array]:
    """The population mean and variance along ``axis``, in one pass of the kernel."""
    mean, var = _reduce1("nx.mean_var", x, axis, S.MOMENTS, None, keepdims, _moments_whole)
    return mean, var


def cumsum(x: object, axis: int | None = None, dtype: D.DtypeLike | None = None) -> Array:
    """The inclusive running sum along ``axis`` (of the flattened array where
    None, as NumPy's)."""
    if type(x) is Array and dtype is None:
        # The warm call's look-up: the spec by dtype and axis, made once.
        rank = len(x.layout.shape)
        if (axis is None and rank == 1) or (type(axis) is int and -rank <= axis < rank):
            key = (x.dtype, 0 if axis is None else axis % rank)
            sp = _cumsum_whole.get(key)
            if sp is None:
                sp = _cumsum_whole[key] = _cumsum_spec(x.dtype, key[1], x.dtype)
            return call1(sp, x, None, None, "nx.cumsum")[0]
    (a,) = as_arrays("nx.cumsum", [x])
    if axis is None:
        a = flattened("nx.cumsum", a)
        axis = 0
    (ax,) = reduced_axes("nx.cumsum", a, axis)
    result = a.dtype if dtype is None else D.resolve(dtype, "nx.cumsum")
    return call(_cumsum_spec(a.dtype, ax, result), a, name="nx.cumsum")[0]


@functools.lru_cache(maxsize=256)
def _cumsum_spec(dt: Dtype, axis: int, result: Dtype) -> S.Scan:
    """The scan spec of a running sum of a ``dt`` operand, made once."""
    return S.Scan(Prog.identity(dt), (S.PLAIN,), axis, S.Monoid.SUM, 0, result)


def softmax(x: object, axis: int = -1) -> Array:
    """exp(x − m) / Σ exp(x − m) along ``axis``, m the maximum: x − m is exact
    near the maximum, so large logits lose nothing (about an ulp at 1e4,
    where exp(x − logsumexp(x)) loses the logits' own rounding). A Max
    reduction, a Sum reduction of exp(x − m), then a map."""
    (a,) = as_arrays("nx.softmax", [x])
    (ax,) = reduced_axes("nx.softmax", a, axis)
    m = max(a, ax, keepdims=True).view(Broadcast(a.shape))
    try:
        shifted, quotient = _softmax_progs(a.dtype)
    except ValueError:
        raise InvalidArgument(f"nx.softmax: exp does not take {a.dtype.name} ({describe([a])})") from None
    total = call(S.Reduce(shifted, (S.PLAIN, S.PLAIN), (ax,), ((S.Monoid.SUM, 0, a.dtype),)),
                 a, m, name="nx.softmax")[0]
    s = total.reshape([1 if i == ax else d for i, d in enumerate(a.shape)]).view(Broadcast(a.shape))
    return call(S.Map(quotient, (S.PLAIN,) * 3), a, m, s, name="nx.softmax")[0]


@functools.lru_cache(maxsize=32)
def _softmax_progs(dt: Dtype) -> tuple[Prog, Prog]:
    """exp(x − m), and exp(x − m) / s, at ``dt``."""
    b = Prog.build([dt, dt])
    shifted = b.finish(b.exp(b.ins[0] - b.ins[1]))
    b = Prog.build([dt, dt, dt])
    quotient = b.finish(b.exp(b.ins[0] - b.ins[1]) / b.ins[2])
    return shifted, quotient

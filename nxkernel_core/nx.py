"""The caller: check that a call fits, allocate its destinations, ask the libraries.

``call(spec, *operands)`` (``caller``) is the one checked entry to every
kernel: it checks the call fits (an error names the function and lists the
arrays as ``dtype [shape]``), allocates the destinations on the operands'
device, asks the libraries that compute on that device in priority order, and
raises ``refused(...)`` on a refusal, or ``InvalidArgument`` naming each
library and its reason when every one declines. Nothing computes in a
library's place.

On top sit one function per kernel taking friendlier arguments (``map``,
``reduce``, ``gather``, ...) and the conveniences a NumPy user expects
(``add``, ``sum``, ``argmax``, ``sort``, ``matmul``, ``fft``, ``cholesky``,
``softmax``, ``attention``, ...), each a kernel call or two. All accept and
return ``Array``s; ``asarray`` and ``to_numpy`` cross to NumPy.
"""

from __future__ import annotations

import builtins
import functools
import math
from collections.abc import Sequence
from typing import Any, Final

import numpy as np

from . import dtype as D
from . import spec as S
from .answer import Answer, InvalidArgument, describe, refused
from .array import Array, asarray
from .caller import call
from .dtype import Dtype
from .kernels.fourier import COMPLEX_OF, REAL_OF
from .layout import Broadcast, Permute, Reshape
from .prog import Binary, Compare, Prog, Unary

__all__ = ["add", "argmax", "argmin", "asarray", "assemble", "attention", "call", "cast",
           "cholesky", "contract", "cumsum", "eig", "eigh", "exp", "fft", "fold", "gather", "ifft",
           "irfft", "logsumexp", "lu", "map", "matmul", "max", "mean_var", "min", "mul",
           "numbering", "prod", "qr", "range_gather", "reduce", "rfft", "scan", "scatter",
           "searchsorted", "softmax", "solve_triangular", "sort", "sub", "sum", "svd", "take",
           "to_numpy", "topk", "where"]


# --------------------------------------------------------------------------
# One function per kernel
# --------------------------------------------------------------------------


def _arrays(fn: str, xs: Sequence[object], like: Array | None = None) -> list[Array]:
    """Operands as Arrays: Arrays as they are, anything else converted on the
    first Array's device, Python scalars to its dtype."""
    anchor = like if like is not None else next((x for x in xs if isinstance(x, Array)), None)
    out = []
    for x in xs:
        if isinstance(x, Array):
            out.append(x)
        elif anchor is not None and isinstance(x, (int, float, bool, complex)):
            out.append(asarray(x, anchor.dtype, anchor.device))
        elif anchor is not None:
            out.append(asarray(x, device=anchor.device))
        else:
            out.append(asarray(x))
    return out


def _broadcast(fn: str, xs: Sequence[Array]) -> list[Array]:
    """Operands broadcast to their common shape, as NumPy's rules give it."""
    first = xs[0].layout.shape if xs else ()
    for x in xs:
        if x.layout.shape != first:
            break
    else:
        return list(xs)  # one shape already: nothing to broadcast
    try:
        common = np.broadcast_shapes(*(x.shape for x in xs))
    except ValueError:
        raise InvalidArgument(f"{fn}: shapes do not broadcast ({describe(xs)})") from None
    return [x if x.shape == common else x.view(Broadcast(tuple(common))) for x in xs]


def map(prog: Prog, *operands: Array, loads: Sequence[S.Load] | None = None) -> tuple[Array, ...]:
    """``prog`` at every index of its operands' (loaded) shape; one array per output."""
    sp = S.Map(prog, tuple(loads) if loads is not None else (S.PLAIN,) * len(operands))
    return call(sp, *operands)


def reduce(prog: Prog, *operands: Array, axes: Sequence[int],
           reductions: Sequence[tuple[S.Reduction, int, Dtype]],
           loads: Sequence[S.Load] | None = None) -> tuple[Array, ...]:
    """The reductions of ``prog``'s outputs along ``axes``, results in order."""
    sp = S.Reduce(prog, tuple(loads) if loads is not None else (S.PLAIN,) * len(operands),
                  tuple(axes), tuple(reductions))
    return call(sp, *operands)


def scan(prog: Prog, *operands: Array, axis: int, reduction: S.Reduction, output: int = 0,
         dtype: D.DtypeLike | None = None, reverse: bool = False, carry: Array | None = None,
         loads: Sequence[S.Load] | None = None) -> tuple[Array, ...]:
    """The inclusive scan by ``reduction`` of output ``output`` along ``axis``,
    continuing from ``carry`` where given."""
    sp = S.Scan(prog, tuple(loads) if loads is not None else (S.PLAIN,) * len(operands), axis,
                reduction, output, prog.out_dtypes[output] if dtype is None else D.resolve(dtype, "nx.scan"),
                reverse, carry is not None)
    return call(sp, *([carry] if carry is not None else []), *operands)


def fold(x: Array, shape: Sequence[int], pad: S.Pad) -> Array:
    """The adjoint of a Padded load by ``pad`` of an operand of ``shape``."""
    return call(S.Fold(tuple(shape), pad), x)[0]


def gather(x: Array, index: Array, axis: int) -> Array:
    """x's elements at the positions ``index`` holds along ``axis`` (index has x's
    rank, x's extents but along axis); outside [0, d) reads zero bits."""
    _axis_values("nx.gather", axis)
    if isinstance(index, Array) and not index.dtype.is_int:
        raise InvalidArgument(f"nx.gather: indices must be integers, not {describe([index])}")
    return call(S.Gather(axis), index, x)[0]


def range_gather(x: Array, starts: Array, axis: int, run: int) -> Array:
    """Runs of ``run`` elements of x along ``axis`` from each of ``starts``."""
    return call(S.RangeGather(axis, run), starts, x)[0]


def scatter(into: Array, index: Array, updates: Array, axis: int, combine: str = "set",
            unique: bool = False) -> Array:
    """``into`` with ``updates`` combined (set, add, max, min) at ``index`` along
    ``axis``, in C order of the updates; out-of-range updates dropped."""
    try:
        how = S.Combine[combine.upper()]
    except KeyError:
        raise InvalidArgument(f"nx.scatter: combine {combine!r} is not set, add, max or min") from None
    return call(S.Scatter(axis, how, unique), into, index, updates)[0]


def numbering(keys: Array, x: Array, side: str = "left") -> Array:
    """Per batch row, the number of keys below (left) or not above (right) each
    element of x, in sort's total order."""
    return call(S.Numbering(_side(side)), keys, x)[0]


def assemble(pieces: Sequence[Array], shape: Sequence[int], regions: Sequence[Sequence[Any]],
             fill: object = 0, dtype: D.DtypeLike | None = None) -> Array:
    """An array of ``shape``: each piece pasted into its region (a Range per
    axis), the last piece winning, ``fill`` elsewhere."""
    from .prog import bits

    dt = D.resolve(dtype, "nx.assemble") if dtype is not None else (pieces[0].dtype if pieces else None)
    if dt is None:
        raise InvalidArgument("nx.assemble: give dtype= when there is no piece")
    fill_bits = fill if isinstance(fill, bytes) else bits(dt, fill)  # type: ignore[arg-type]
    sp = S.Assemble(tuple(shape), fill_bits, tuple(tuple(r) for r in regions))
    return call(sp, *pieces, dtypes=(dt,), device=pieces[0].device if pieces else None)[0]


# --------------------------------------------------------------------------
# Elementwise conveniences
# --------------------------------------------------------------------------


@functools.cache
def _map_spec(kind: Binary | Unary, dt: Dtype) -> S.Map:
    """The map spec of one kind at ``dt``, made once: building a program costs
    more than a small map computes."""
    if isinstance(kind, Unary):
        return S.Map(Prog.unary(kind, dt), (S.PLAIN,))
    return S.Map(Prog.binary(kind, dt), (S.PLAIN, S.PLAIN))


def _kind_spec(fn: str, kind: Binary | Unary, arrays: Sequence[Array]) -> S.Map:
    """``_map_spec``, a kind that does not take the dtype refused naming ``fn``
    and the arrays (not the program's node)."""
    try:
        return _map_spec(kind, arrays[0].dtype)
    except ValueError:
        raise InvalidArgument(f"{fn}: {kind.name.lower()} does not take {arrays[0].dtype.name} "
                              f"({describe(arrays)})") from None


def _binary(fn: str, kind: Binary, x: object, y: object, specs: dict[Dtype, S.Map]) -> Array:
    """``kind`` of x and y; ``specs``: its map specs by dtype, made once (a
    dict keyed by the dtype alone: the warm call's look-up)."""
    if type(x) is Array and type(y) is Array and x.layout.shape == y.layout.shape:
        a, b = x, y  # what _arrays and _broadcast give two Arrays of one shape
    else:
        a, b = _broadcast(fn, _arrays(fn, [x, y]))
    if a.dtype is not b.dtype:
        raise InvalidArgument(f"{fn}: operands of dtypes {a.dtype.name} and {b.dtype.name} differ; "
                              f"cast one first ({describe([a, b])})")
    sp = specs.get(a.dtype)
    if sp is None:
        sp = specs[a.dtype] = _kind_spec(fn, kind, [a, b])
    return call(sp, a, b, name=fn)[0]


_add_specs: Final[dict[Dtype, S.Map]] = {}
_sub_specs: Final[dict[Dtype, S.Map]] = {}
_mul_specs: Final[dict[Dtype, S.Map]] = {}


def add(x: object, y: object) -> Array:
    """x + y elementwise, NumPy broadcasting; one dtype, integers wrap."""
    return _binary("nx.add", Binary.ADD, x, y, _add_specs)


def sub(x: object, y: object) -> Array:
    """x − y elementwise, NumPy broadcasting; one dtype, integers wrap."""
    return _binary("nx.sub", Binary.SUB, x, y, _sub_specs)


def mul(x: object, y: object) -> Array:
    """x · y elementwise, NumPy broadcasting; one dtype, integers wrap."""
    return _binary("nx.mul", Binary.MUL, x, y, _mul_specs)


def exp(x: object) -> Array:
    """e^x elementwise, for float x."""
    (a,) = _arrays("nx.exp", [x])
    return call(_kind_spec("nx.exp", Unary.EXP, [a]), a, name="nx.exp")[0]


def where(c: object, x: object, y: object) -> Array:
    """x where the bool c holds, else y; NumPy broadcasting."""
    cc, a, b = _broadcast("nx.where", _arrays("nx.where", [c, x, y]))
    if a.dtype is not b.dtype:
        raise InvalidArgument(f"nx.where: x and y have dtypes {a.dtype.name} and {b.dtype.name}")
    return call(_where_spec(a.dtype), cc, a, b, name="nx.where")[0]


@functools.lru_cache(maxsize=64)
def _where_spec(dt: Dtype) -> S.Map:
    return S.Map(Prog.where(dt), (S.PLAIN,) * 3)


def cast(x: object, dtype: D.DtypeLike) -> Array:
    """x converted to ``dtype`` by the Cast rules (floats by the store rule)."""
    (a,) = _arrays("nx.cast", [x])
    dt = D.resolve(dtype, "nx.cast")
    return call(_cast_spec(a.dtype, dt), a, name="nx.cast")[0]


@functools.lru_cache(maxsize=512)
def _cast_spec(src: Dtype, dst: Dtype) -> S.Map:
    """The map spec of a cast of ``src`` into ``dst`` (a copy for one dtype), made once."""
    prog = Prog.identity(src) if dst is src else Prog.cast(src, dst)
    return S.Map(prog, (S.PLAIN,))


# --------------------------------------------------------------------------
# Reductions and scans
# --------------------------------------------------------------------------


def _axis_values(fn: str, axis: object) -> tuple[int, ...]:
    """``axis`` (an integer, or a tuple or list of them) as ints; an
    ``InvalidArgument`` naming ``fn`` for anything else, bools included (NumPy
    refuses them too, rather than read True as 1)."""
    items = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    for a in items:
        if isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, np.integer)):
            what = f"{type(a).__name__} {a!r}"
            raise InvalidArgument(f"{fn}: axis must be an integer or a tuple of integers, not {what}")
    return tuple(int(a) for a in items)


def _axes(fn: str, x: Array, axis: int | Sequence[int] | None) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(x.rank))
    raw = _axis_values(fn, axis)
    out = []
    for a in raw:
        if not -x.rank <= a < x.rank:
            raise InvalidArgument(f"{fn}: axis {a} is out of range for {describe([x])}")
        out.append(int(a) % x.rank)
    if len(set(out)) != len(out):
        raise InvalidArgument(f"{fn}: repeated axis in {raw}")
    return tuple(sorted(out))


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
        return call(sp, x, name=fn)
    (a,) = _arrays(fn, [x])
    axes = _axes(fn, a, axis)
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
    return _reduce1("nx.argmax", x, axis, S.Arg(S.Extreme.MAX), None, keepdims, _argmax_whole)[1]


def argmin(x: object, axis: int | None = None, keepdims: bool = False) -> Array:
    """int64 positions of the first least element (of the first NaN) along ``axis``."""
    return _reduce1("nx.argmin", x, axis, S.Arg(S.Extreme.MIN), None, keepdims, _argmin_whole)[1]


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
    (a,) = _arrays("nx.cumsum", [x])
    if axis is None:
        a = _flat("nx.cumsum", a)
        axis = 0
    (ax,) = _axes("nx.cumsum", a, axis)
    result = a.dtype if dtype is None else D.resolve(dtype, "nx.cumsum")
    return call(_cumsum_spec(a.dtype, ax, result), a, name="nx.cumsum")[0]


@functools.lru_cache(maxsize=256)
def _cumsum_spec(dt: Dtype, axis: int, result: Dtype) -> S.Scan:
    """The scan spec of a running sum of a ``dt`` operand, made once."""
    return S.Scan(Prog.identity(dt), (S.PLAIN,), axis, S.Monoid.SUM, 0, result)


def _flat(fn: str, a: Array) -> Array:
    """``a`` as one axis: a view where strides allow, else a copy."""
    if a.rank == 1:
        return a
    lay = a.layout.move(Reshape((a.numel,)))
    if lay is not None:
        return Array(a.dtype, lay, a.buffer)
    return call(S.Map(Prog.identity(a.dtype), (S.PLAIN,)), a, name=fn)[0].reshape([a.numel])


def softmax(x: object, axis: int = -1) -> Array:
    """exp(x − m) / Σ exp(x − m) along ``axis``, m the maximum: x − m is exact
    near the maximum, so large logits lose nothing (about an ulp at 1e4,
    where exp(x − logsumexp(x)) loses the logits' own rounding). A Max
    reduction, a Sum reduction of exp(x − m), then a map."""
    (a,) = _arrays("nx.softmax", [x])
    (ax,) = _axes("nx.softmax", a, axis)
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


# --------------------------------------------------------------------------
# Moves
# --------------------------------------------------------------------------


_INT64_MAX: Final = (1 << 63) - 1


def _int64(fn: str, x: object, like: Array) -> Array:
    """Indices as an int64 Array, as NumPy's take checks them: integers (or
    bools) only, never rounded from floats, and within int64; an
    ``InvalidArgument`` naming ``fn`` otherwise."""
    if isinstance(x, Array):
        if not (x.dtype.is_int or x.dtype.is_bool):
            raise InvalidArgument(f"{fn}: indices must be integers, not {describe([x])}")
        if x.dtype is D.uint64 and x.numel and int(np.max(x.to_numpy())) > _INT64_MAX:
            raise InvalidArgument(f"{fn}: an index is above the int64 maximum ({describe([x])})")
        return x if x.dtype is D.int64 else cast(x, D.int64)
    arr = np.asarray(x)
    if arr.size == 0:
        arr = arr.astype(np.int64)  # [] is float64 to NumPy, and holds no index
    if arr.dtype.kind == "O" and all(isinstance(v, int) for v in arr.flat):
        raise InvalidArgument(f"{fn}: an index is outside int64 ([{int(np.min(arr))}, {int(np.max(arr))}])")
    if arr.dtype.kind not in "iub":
        example = arr.reshape(-1)[0].item()
        raise InvalidArgument(f"{fn}: indices must be integers, not {arr.dtype} (e.g. {example!r})")
    if arr.dtype.kind == "u" and int(arr.max()) > _INT64_MAX:
        raise InvalidArgument(f"{fn}: the index {int(arr.max())} is above the int64 maximum")
    return asarray(arr.astype(np.int64), device=like.device)


def take(x: object, index: object, axis: int = 0) -> Array:
    """x's elements at ``index`` along ``axis``, shaped as NumPy's take gives:
    ``x.shape[:axis] + index.shape + x.shape[axis+1:]``. Unlike NumPy, a position
    outside [0, d) (negative ones included) reads zero bits."""
    (a,) = _arrays("nx.take", [x])
    (ax,) = _axes("nx.take", a, axis)
    idx = _int64("nx.take", index, a)
    flat = _flat("nx.take", idx) if idx.rank != 1 else idx
    n = flat.shape[0]
    lifted = flat.reshape([n if i == ax else 1 for i in range(a.rank)])
    full = lifted.view(Broadcast(tuple(n if i == ax else d for i, d in enumerate(a.shape))))
    out = gather(a, full, ax)
    return out.reshape([*a.shape[:ax], *idx.shape, *a.shape[ax + 1 :]])


def sort(x: object, axis: int = -1, descending: bool = False) -> tuple[Array, Array]:
    """``(values, positions)``: a stable sort along ``axis`` in the total order
    −inf < … < −0 < +0 < … < +inf < NaN; descending keeps equal elements in
    increasing position."""
    (a,) = _arrays("nx.sort", [x])
    (ax,) = _axes("nx.sort", a, axis)
    values, positions = call(S.Sort(ax, descending), a, name="nx.sort")
    return values, positions


def topk(x: object, k: int, axis: int = -1, largest: bool = True) -> tuple[Array, Array]:
    """``(values, positions)`` of the k largest (or smallest) along ``axis``, in
    order, ties by increasing position."""
    (a,) = _arrays("nx.topk", [x])
    (ax,) = _axes("nx.topk", a, axis)
    values, positions = call(S.Sort(ax, largest, k), a, name="nx.topk")
    return values, positions


def _side(side: str) -> S.Side:
    try:
        return S.Side[side.upper()]
    except KeyError:
        raise InvalidArgument(f"nx.searchsorted: side {side!r} is not 'left' or 'right'") from None


def searchsorted(keys: object, x: object, side: str = "left") -> Array:
    """Insertion positions of x into the ascending ``keys``: 1-D keys take x of
    any shape (NumPy's searchsorted); keys ``[b…; m]`` take x ``[b…; n]`` row by row."""
    k, v = _arrays("nx.searchsorted", [keys, x])
    if k.rank == 1:
        flat = _flat("nx.searchsorted", v) if v.rank != 1 else v
        return numbering(k, flat, side).reshape(v.shape)
    return numbering(k, v, side)


# --------------------------------------------------------------------------
# Contraction
# --------------------------------------------------------------------------


def _acc_for(dt: Dtype) -> Dtype:
    """The accumulator a contraction of ``dt`` operands uses by default."""
    if D.accumulates(dt):
        return dt
    if dt.is_float:
        return D.float32
    raise InvalidArgument(f"nx.matmul: {dt.name} operands have no accumulator; cast them first")


def contract(subscripts: str, a: object, b: object, init: object | None = None,
             acc: D.DtypeLike | None = None, dtype: D.DtypeLike | None = None) -> Array:
    """An einsum-style contraction of two operands, e.g. ``"bij,bjk->bik"``:
    letters in both inputs and the output are batch axes, in both inputs only
    contracted, in one input and the output free. Computed in ``acc`` (the
    operands' dtype, float32 for narrow floats), rounded into ``dtype``; plus
    ``init`` where given."""
    fn = "nx.contract"
    x, y = _arrays(fn, [a, b])
    try:
        ins, out = subscripts.replace(" ", "").split("->")
        sa, sb = ins.split(",")
    except ValueError:
        raise InvalidArgument(f"{fn}: subscripts {subscripts!r} are not of the form 'ab,bc->ac'") from None
    for s, arr in ((sa, x), (sb, y)):
        if len(s) != arr.rank or len(set(s)) != len(s):
            raise InvalidArgument(f"{fn}: subscripts {s!r} do not name each of the {arr.rank} "
                                  f"axes of {describe([arr])} once")
    if len(set(out)) != len(out) or not set(out) <= set(sa) | set(sb):
        raise InvalidArgument(f"{fn}: output subscripts {out!r} are not distinct input letters")
    only_one = [c for c in sa + sb if (c in sa) != (c in sb) and c not in out]
    if only_one:
        raise InvalidArgument(f"{fn}: letters {only_one} appear in one input and not the output; "
                              "reduce them with nx.sum first")
    batch = [c for c in out if c in sa and c in sb]
    contracted = [c for c in sa if c in sb and c not in out]
    free_a = [c for c in sa if c not in sb]
    free_b = [c for c in sb if c not in sa]
    acc_dt = _acc_for(x.dtype) if acc is None else D.resolve(acc, fn)
    sp = S.Contract(tuple((sa.index(c), sb.index(c)) for c in batch),
                    tuple((sa.index(c), sb.index(c)) for c in contracted), acc_dt,
                    init=init is not None)
    ops = [x, y] + ([_arrays(fn, [init], like=x)[0]] if init is not None else [])
    (r,) = call(sp, *ops, dtypes=(x.dtype if dtype is None else D.resolve(dtype, fn),), name=fn)
    natural = batch + free_a + free_b
    if natural == list(out):
        return r
    return r.view(Permute(tuple(natural.index(c) for c in out)))


def matmul(a: object, b: object) -> Array:
    """NumPy's matmul: ``[…, m, k] @ […, k, n]`` with broadcast batch axes; a 1-D
    operand is a vector. Computed in the operands' dtype (float32 for narrow
    floats) and rounded into it."""
    fn = "nx.matmul"
    x, y = (a, b) if type(a) is Array and type(b) is Array else _arrays(fn, [a, b])
    xs, ys = x.layout.shape, y.layout.shape
    if not xs or not ys:
        raise InvalidArgument(f"{fn}: operands must have at least one axis ({describe([x, y])})")
    dt = x.dtype
    if dt is not y.dtype:
        raise InvalidArgument(f"{fn}: operands of dtypes {dt.name} and {y.dtype.name} differ")
    vec_a, vec_b = len(xs) == 1, len(ys) == 1
    xa = x.reshape([1, xs[0]]) if vec_a else x
    yb = y.reshape([ys[0], 1]) if vec_b else y
    xs, ys = xa.layout.shape, yb.layout.shape
    if xs[-1] != ys[-2]:
        refused(fn, Answer.SHAPE_MISMATCH, [x, y],
                f"contracted extents {xs[-1]} and {ys[-2]} differ")
    lead = xs[:-2]
    if ys[:-2] != lead:
        try:
            lead = tuple(np.broadcast_shapes(xs[:-2], ys[:-2]))
        except ValueError:
            raise InvalidArgument(f"{fn}: batch shapes do not broadcast ({describe([x, y])})") from None
        if xs[:-2] != lead:
            xa = xa.view(Broadcast((*lead, *xs[-2:])))
        if ys[:-2] != lead:
            yb = yb.view(Broadcast((*lead, *ys[-2:])))
    sp = _matmul_specs.get((len(lead), dt))
    if sp is None:
        sp = _matmul_specs[(len(lead), dt)] = _matmul_spec(len(lead), _acc_for(dt))
    (r,) = call(sp, xa, yb, dtypes=(dt,), name=fn)
    if not vec_a and not vec_b:
        return r
    shape = list(r.shape)
    if vec_b:
        shape.pop(-1)
    if vec_a:
        shape.pop(-2 if not vec_b else -1)
    return r.reshape(shape) if shape != list(r.shape) else r


#: matmul's spec by the batch axes' count and the operands' dtype (a dict:
#: the warm call's look-up).
_matmul_specs: Final[dict[tuple[int, Dtype], S.Contract]] = {}


@functools.lru_cache(maxsize=256)
def _matmul_spec(nb: int, acc: Dtype) -> S.Contract:
    """The contraction of matmul with ``nb`` batch axes in ``acc``, made once."""
    return S.Contract(tuple((i, i) for i in range(nb)), ((nb + 1, nb),), acc)


# --------------------------------------------------------------------------
# Fourier transforms
# --------------------------------------------------------------------------


def _scale(fn: str, x: Array, factor: float) -> Array:
    """x times a real ``factor`` rounded to x's (part) dtype: one map."""
    b = Prog.build([x.dtype])
    part = REAL_OF[x.dtype]
    c = b.const(part, factor)
    if x.dtype.is_complex:
        c = b.cast(c, x.dtype)
    return call(S.Map(b.finish(b.ins[0] * c), (S.PLAIN,)), x, name=fn)[0]


def _to_complex(fn: str, x: Array) -> Array:
    if x.dtype.is_complex:
        return x
    if x.dtype not in (D.float32, D.float64):
        x = cast(x, D.float32)
    return cast(x, COMPLEX_OF[x.dtype])


def fft(x: object, axis: int = -1) -> Array:
    """The forward DFT along ``axis`` (real input becomes complex), as NumPy's fft."""
    (a,) = _arrays("nx.fft", [x])
    a = _to_complex("nx.fft", a)
    (ax,) = _axes("nx.fft", a, axis)
    return call(S.Fft((ax,), S.Direction.FORWARD, S.C2c()), a, name="nx.fft")[0]


def ifft(x: object, axis: int = -1) -> Array:
    """The inverse DFT along ``axis``, divided by n as NumPy's ifft (the kernel
    itself is unnormalised; the division is a second, map call)."""
    (a,) = _arrays("nx.ifft", [x])
    a = _to_complex("nx.ifft", a)
    (ax,) = _axes("nx.ifft", a, axis)
    r = call(S.Fft((ax,), S.Direction.INVERSE, S.C2c()), a, name="nx.ifft")[0]
    n = a.shape[ax]
    return _scale("nx.ifft", r, 1.0 / n) if n > 1 else r


def rfft(x: object, axis: int = -1) -> Array:
    """The forward DFT of real x along ``axis``, bins 0..n//2, as NumPy's rfft."""
    (a,) = _arrays("nx.rfft", [x])
    (ax,) = _axes("nx.rfft", a, axis)
    return call(S.Fft((ax,), S.Direction.FORWARD, S.R2c()), a, name="nx.rfft")[0]


def irfft(x: object, n: int | None = None, axis: int = -1) -> Array:
    """The real inverse of ``rfft`` along ``axis`` of ``n`` points (default
    2·(bins − 1)), divided by n as NumPy's irfft."""
    (a,) = _arrays("nx.irfft", [x])
    (ax,) = _axes("nx.irfft", a, axis)
    points = n if n is not None else 2 * (a.shape[ax] - 1)
    r = call(S.Fft((ax,), S.Direction.INVERSE, S.C2r(points)), a, name="nx.irfft")[0]
    return _scale("nx.irfft", r, 1.0 / points) if points > 1 else r


# --------------------------------------------------------------------------
# Matrix routines
# --------------------------------------------------------------------------


def cholesky(a: object, upper: bool = False) -> Array:
    """The Cholesky factor of each matrix (lower, as NumPy's, unless ``upper``);
    NaN for a matrix that is not positive definite."""
    (x,) = _arrays("nx.cholesky", [a])
    return call(S.Cholesky(upper), x, name="nx.cholesky")[0]


def lu(a: object) -> tuple[Array, Array, Array]:
    """``(lu, pivots, perm)``: partial-pivoting LU of each matrix."""
    (x,) = _arrays("nx.lu", [a])
    r = call(S.Lu(), x, name="nx.lu")
    return r[0], r[1], r[2]


def qr(a: object, mode: str = "reduced") -> tuple[Array, Array]:
    """``(q, r)`` of each matrix; ``mode`` 'reduced' or 'complete' as NumPy's."""
    (x,) = _arrays("nx.qr", [a])
    if mode not in ("reduced", "complete"):
        raise InvalidArgument(f"nx.qr: mode {mode!r} is not 'reduced' or 'complete'")
    q, r = call(S.Qr(mode == "complete"), x, name="nx.qr")
    return q, r


def svd(a: object, full_matrices: bool = True,
        compute_uv: bool = True) -> tuple[Array, Array, Array] | Array:
    """NumPy's svd: ``(u, s, vh)``, or ``s`` alone without ``compute_uv``."""
    (x,) = _arrays("nx.svd", [a])
    vectors = None if not compute_uv else (S.Factors.COMPLETE if full_matrices else S.Factors.REDUCED)
    r = call(S.Svd(vectors), x, name="nx.svd")
    return (r[0], r[1], r[2]) if compute_uv else r[0]


def eigh(a: object) -> tuple[Array, Array]:
    """``(w, v)``: ascending eigenvalues and eigenvectors of each Hermitian matrix."""
    (x,) = _arrays("nx.eigh", [a])
    w, v = call(S.Eigh(True), x, name="nx.eigh")
    return w, v


def eig(a: object) -> tuple[Array, Array]:
    """``(w, v)``: complex eigenvalues and right eigenvectors of each matrix."""
    (x,) = _arrays("nx.eig", [a])
    w, v = call(S.Eig(True), x, name="nx.eig")
    return w, v


def solve_triangular(a: object, b: object, lower: bool = True, trans: bool = False,
                     unit_diagonal: bool = False) -> Array:
    """x with ``op(a) x = b`` for triangular a (SciPy's names)."""
    x, y = _arrays("nx.solve_triangular", [a, b])
    sp = S.SolveTriangular(lower, trans, unit_diagonal)
    return call(sp, x, y, name="nx.solve_triangular")[0]


# --------------------------------------------------------------------------
# Attention
# --------------------------------------------------------------------------


def attention(q: object, k: object, v: object, *, scale: float | None = None,
              causal: bool = False, lengths: object | None = None,
              acc: Dtype | None = None) -> tuple[Array, Array]:
    """``(o, lse)``: softmax(scale·q·kᵀ)·v per query row, over Dense keys
    ``[lead…; hk; tk; d]`` (hk dividing hq); ``causal`` hides keys after the
    query row (aligned to the last key), ``lengths`` ``[lead…]`` hides keys past
    each lead index's length. ``scale`` defaults to 1/√d."""
    fn = "nx.attention"
    qa, ka, va = _arrays(fn, [q, k, v])
    acc_dt = acc or (D.float64 if qa.dtype is D.float64 else D.float32)
    s = scale if scale is not None else 1.0 / math.sqrt(builtins.max(qa.shape[-1], 1))
    b = Prog.build([acc_dt])
    if causal:
        # Coord counts from the loop's last axis: Coord 0 reads the key (loop
        # axis rank − 1), Coord 1 the query row (loop axis rank − 2).
        tq, tk = qa.shape[-2], ka.shape[-2]
        row = b.coord(1)
        key = b.coord(0)
        visible = b.binary(Compare.LESS_EQUAL, key, row + b.const(D.int64, tk - tq))
    else:
        visible = b.const(D.bool_, True)
    prog = b.finish(visible, b.ins[0])
    ops = [qa, ka, va]
    if lengths is not None:
        ops.append(_int64(fn, lengths, qa))
    sp = S.Attention(prog, (), s, acc_dt, S.Dense(), lengths is not None)
    o, lse = call(sp, *ops, name=fn)
    return o, lse


def to_numpy(x: Array) -> Any:
    """A NumPy copy of x's elements."""
    return x.to_numpy()

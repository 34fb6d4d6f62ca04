"""The standard's manipulation and indexing functions: moves are views
(``reshape``, ``permute_dims``, ``flip``, ``broadcast_to``, ...) where strides
express them, copies by the Copy map where not; ``concat`` is one Assemble
call; ``take`` and ``take_along_axis`` are Gather calls."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .. import dtype as D
from .. import nx
from .. import spec as S
from ..answer import describe
from ..array import Array
from ..layout import Broadcast, Permute, Range, Reshape, Slice
from ..prog import Builder, Value, bits
from . import _base as B
from . import _dtypes as T

__all__ = [
    "broadcast_arrays", "broadcast_to", "concat", "expand_dims", "flip", "moveaxis",
    "permute_dims", "repeat", "reshape", "roll", "squeeze", "stack", "take", "take_along_axis",
    "tile", "unstack",
]


def take_range(x: Array, axis: int, start: int, stop: int, step: int = 1) -> Array:
    """The view of ``x`` at [start, stop) by ``step`` along ``axis``."""
    ranges = tuple(Range(start, len(range(start, stop, step)), step) if i == axis else Range(0, d, 1)
                   for i, d in enumerate(x.shape))
    return x.view(Slice(ranges))


def reshape(x: Array, /, shape: Sequence[int], *, copy: bool | None = None) -> Array:
    """x's elements in C order in ``shape`` (one extent may be −1): a view
    where strides allow (never with ``copy=True``), else a copy."""
    fn = "xp.reshape"
    a = B.the_array(fn, x)
    dims = [int(d) for d in shape]
    if dims.count(-1) > 1:
        raise ValueError(f"{fn}: more than one -1 in {dims}")
    if -1 in dims:
        known = math.prod(d for d in dims if d != -1)
        if known == 0 or a.numel % known:
            raise ValueError(f"{fn}: cannot reshape {describe([a])} into {dims}")
        dims[dims.index(-1)] = a.numel // known
    if math.prod(dims) != a.numel or any(d < 0 for d in dims):
        raise ValueError(f"{fn}: cannot reshape {describe([a])} into {list(shape)}")
    if copy:
        return B.copy(fn, a).reshape(dims)
    lay = a.layout.move(Reshape(tuple(dims)))
    if lay is not None:
        return Array(a.dtype, lay, a.buffer)
    if copy is False:
        raise ValueError(f"{fn}: {describe([a])} cannot be reshaped into {dims} without a copy")
    return B.copy(fn, a).reshape(dims)


def permute_dims(x: Array, /, axes: Sequence[int]) -> Array:
    """The view with result axis i being x's axis ``axes[i]``."""
    fn = "xp.permute_dims"
    a = B.the_array(fn, x)
    perm = tuple(B.axis_of(fn, a, i) for i in axes)
    if sorted(perm) != list(range(a.rank)):
        raise ValueError(f"{fn}: {list(axes)} is not a permutation of {a.rank} axes")
    return a.view(Permute(perm))


def moveaxis(x: Array, source: int | Sequence[int], destination: int | Sequence[int], /) -> Array:
    """The view with axes ``source`` moved to ``destination``."""
    fn = "xp.moveaxis"
    a = B.the_array(fn, x)
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    if len(src) != len(dst):
        raise ValueError(f"{fn}: {len(src)} sources for {len(dst)} destinations")
    s = [B.axis_of(fn, a, i) for i in src]
    d = [B.axis_of(fn, a, i) for i in dst]
    if len(set(s)) != len(s) or len(set(d)) != len(d):
        raise ValueError(f"{fn}: repeated axes")
    order = [i for i in range(a.rank) if i not in s]
    for dd, ss in sorted(zip(d, s, strict=True)):
        order.insert(dd, ss)
    return a.view(Permute(tuple(order)))


def expand_dims(x: Array, /, axis: int = 0) -> Array:
    """The view with a new axis of extent 1 at ``axis`` (in [−rank−1, rank])."""
    fn = "xp.expand_dims"
    a = B.the_array(fn, x)
    if not -a.rank - 1 <= axis <= a.rank:
        raise IndexError(f"{fn}: axis {axis} is out of range for {describe([a])}")
    ax = axis % (a.rank + 1)
    return reshape(a, [*a.shape[:ax], 1, *a.shape[ax:]])


def squeeze(x: Array, /, axis: int | Sequence[int]) -> Array:
    """The view without the axes ``axis``, each of extent 1."""
    fn = "xp.squeeze"
    a = B.the_array(fn, x)
    axes = B.axes_of(fn, a, axis)
    for i in axes:
        if a.shape[i] != 1:
            raise ValueError(f"{fn}: axis {i} of {describe([a])} has extent {a.shape[i]}, not 1")
    return reshape(a, [d for i, d in enumerate(a.shape) if i not in axes])


def flip(x: Array, /, *, axis: int | Sequence[int] | None = None) -> Array:
    """The view with the order along ``axis`` (all axes for None) reversed."""
    fn = "xp.flip"
    a = B.the_array(fn, x)
    axes = B.axes_of(fn, a, axis)
    ranges = tuple(Range(d - 1, d, -1) if i in axes and d > 0 else Range(0, d, 1)
                   for i, d in enumerate(a.shape))
    return a.view(Slice(ranges))


def broadcast_to(x: Array, /, shape: Sequence[int]) -> Array:
    """The view of x broadcast to ``shape``."""
    fn = "xp.broadcast_to"
    a = B.the_array(fn, x)
    target = tuple(int(d) for d in shape)
    try:
        if tuple(np.broadcast_shapes(a.shape, target)) != target:
            raise ValueError
    except ValueError:
        raise ValueError(f"{fn}: {describe([a])} does not broadcast to {list(target)}") from None
    return a if a.shape == target else a.view(Broadcast(target))


def broadcast_arrays(*arrays: Array) -> list[Array]:
    """The arrays broadcast to their common shape (views)."""
    xs = [B.the_array("xp.broadcast_arrays", a) for a in arrays]
    return B.broadcast("xp.broadcast_arrays", xs) if xs else []


def concat(arrays: Sequence[Array] | tuple[Array, ...], /, *, axis: int | None = 0) -> Array:
    """The arrays joined along ``axis`` (flattened first for None), promoted: one
    Assemble call."""
    fn = "xp.concat"
    xs = [B.the_array(fn, a) for a in arrays]
    if not xs:
        raise ValueError(f"{fn}: no arrays")
    dt = T.result_type(*xs)
    xs = [B.cast(fn, a, dt) for a in xs]
    if axis is None:
        xs = [B.flat(fn, a) if a.rank != 1 else a for a in xs]
        axis = 0
    rank = xs[0].rank
    if rank == 0:
        raise ValueError(f"{fn}: 0-d arrays have no axis to join")
    ax = B.axis_of(fn, xs[0], axis)
    for a in xs[1:]:
        if a.rank != rank or any(d != e for i, (d, e) in enumerate(zip(a.shape, xs[0].shape, strict=True))
                                 if i != ax):
            raise ValueError(f"{fn}: shapes differ off axis {ax} ({describe(xs)})")
    total = sum(a.shape[ax] for a in xs)
    shape = tuple(total if i == ax else d for i, d in enumerate(xs[0].shape))
    regions, pieces, at = [], [], 0
    for a in xs:
        n = a.shape[ax]
        if n:
            regions.append(tuple(Range(at, n, 1) if i == ax else Range(0, d, 1)
                                 for i, d in enumerate(shape)))
            pieces.append(a)
        at += n
    if not pieces:
        return Array.empty(dt, shape, xs[0].device)
    sp = S.Assemble(shape, bits(dt, 0), tuple(regions))
    return nx.call(sp, *pieces, dtypes=(dt,), device=xs[0].device, name=fn)[0]


def stack(arrays: Sequence[Array] | tuple[Array, ...], /, *, axis: int = 0) -> Array:
    """The arrays (one shape) joined along a new axis."""
    fn = "xp.stack"
    xs = [B.the_array(fn, a) for a in arrays]
    if not xs:
        raise ValueError(f"{fn}: no arrays")
    if any(a.shape != xs[0].shape for a in xs):
        raise ValueError(f"{fn}: shapes differ ({describe(xs)})")
    rank = xs[0].rank + 1
    if not -rank <= axis < rank:
        raise IndexError(f"{fn}: axis {axis} is out of range for rank {rank}")
    ax = axis % rank
    return concat([expand_dims(a, axis=ax) for a in xs], axis=ax)


def unstack(x: Array, /, *, axis: int = 0) -> tuple[Array, ...]:
    """The views of x at each index along ``axis``."""
    fn = "xp.unstack"
    a = B.the_array(fn, x)
    if a.rank == 0:
        raise ValueError(f"{fn}: a 0-d array has no axis")
    ax = B.axis_of(fn, a, axis)
    shape = [d for i, d in enumerate(a.shape) if i != ax]
    return tuple(reshape(take_range(a, ax, i, i + 1), shape) for i in range(a.shape[ax]))


def roll(x: Array, /, shift: int | Sequence[int], *,
         axis: int | Sequence[int] | None = None) -> Array:
    """x shifted along ``axis`` (the flattened array for None), elements wrapping."""
    fn = "xp.roll"
    a = B.the_array(fn, x)
    if axis is None:
        if not isinstance(shift, int):
            raise ValueError(f"{fn}: one shift for the flattened array")
        return reshape(roll(B.flat(fn, a), shift, axis=0), list(a.shape))
    shifts = [shift] if isinstance(shift, int) else list(shift)
    axes = [axis] if isinstance(axis, int) else list(axis)
    if len(shifts) != len(axes):
        shifts = shifts * len(axes) if len(shifts) == 1 else shifts
        if len(shifts) != len(axes):
            raise ValueError(f"{fn}: {len(shifts)} shifts for {len(axes)} axes")
    out = a
    for s, ax_ in zip(shifts, axes, strict=True):
        ax = B.axis_of(fn, a, ax_)
        d = a.shape[ax]
        if d == 0:
            continue
        k = s % d
        if k:
            out = concat([take_range(out, ax, d - k, d), take_range(out, ax, 0, d - k)], axis=ax)
    return out if out is not a else B.copy(fn, a)


def tile(x: Array, repetitions: Sequence[int], /) -> Array:
    """x repeated ``repetitions[i]`` times along each axis: a broadcast view copied."""
    fn = "xp.tile"
    a = B.the_array(fn, x)
    reps = [int(r) for r in repetitions]
    if any(r < 0 for r in reps):
        raise ValueError(f"{fn}: repetitions {reps} of {describe([a])} must not be negative")
    rank = max(a.rank, len(reps))
    shape = [1] * (rank - a.rank) + list(a.shape)
    reps = [1] * (rank - len(reps)) + reps
    lifted = reshape(a, [v for d in shape for v in (1, d)])
    big = lifted.view(Broadcast(tuple(v for r, d in zip(reps, shape, strict=True) for v in (r, d))))
    return B.copy(fn, big).reshape([r * d for r, d in zip(reps, shape, strict=True)])


def _normalised(fn: str, idx: Array, n: int) -> Array:
    """int64 positions, a negative one counted from the end."""
    i = B.cast(fn, idx, D.int64)
    nn = B.scalar_array(n, D.int64, i.device)
    return B.elementwise(fn, _wrap_negative, *B.broadcast(fn, [i, nn]))


def _wrap_negative(b: Builder, i: Value, n: Value) -> Value:
    return b.where(b.less(i, b.const(D.int64, 0)), i + n, i)


def take(x: Array, indices: Array, /, *, axis: int | None = None) -> Array:
    """x's elements at ``indices`` along ``axis`` (required past 1-D)."""
    fn = "xp.take"
    a = B.the_array(fn, x)
    idx = B.the_array(fn, indices)
    B.check_kind(fn, "integer", idx)
    if axis is None:
        if a.rank != 1:
            raise ValueError(f"{fn}: axis is required for {describe([a])}")
        axis = 0
    ax = B.axis_of(fn, a, axis)
    return nx.take(a, _normalised(fn, idx, a.shape[ax]), axis=ax)


def take_along_axis(x: Array, indices: Array, /, *, axis: int = -1) -> Array:
    """x's elements at ``indices`` along ``axis``, the other axes broadcast."""
    fn = "xp.take_along_axis"
    a = B.the_array(fn, x)
    idx = B.the_array(fn, indices)
    B.check_kind(fn, "integer", idx)
    if a.rank != idx.rank:
        raise ValueError(f"{fn}: {describe([a, idx])} differ in rank")
    ax = B.axis_of(fn, a, axis)
    try:
        common = list(np.broadcast_shapes(tuple(d for i, d in enumerate(a.shape) if i != ax),
                                          tuple(d for i, d in enumerate(idx.shape) if i != ax)))
    except ValueError:
        raise ValueError(f"{fn}: {describe([a, idx])} do not broadcast off axis {ax}") from None
    xs = (*common[:ax], a.shape[ax], *common[ax:])
    js = (*common[:ax], idx.shape[ax], *common[ax:])
    xa = a if a.shape == xs else a.view(Broadcast(xs))
    ia = _normalised(fn, idx, a.shape[ax])
    ia = ia if ia.shape == js else ia.view(Broadcast(js))
    if 0 in js:
        return Array.empty(a.dtype, js, a.device)
    return nx.gather(xa, ia, ax) if xa.shape[ax] else Array.empty(a.dtype, js, a.device)


def repeat(x: Array, repeats: int | Array, /, *, axis: int | None = None) -> Array:
    """Each element repeated ``repeats`` times (per element, for an array)
    along ``axis`` (the flattened array for None)."""
    fn = "xp.repeat"
    a = B.the_array(fn, x)
    if axis is None:
        a = B.flat(fn, a)
        axis = 0
    ax = B.axis_of(fn, a, axis)
    n = a.shape[ax]
    if isinstance(repeats, Array):
        if repeats.shape not in ((n,), (1,), ()):
            raise ValueError(f"{fn}: repeats {describe([repeats])} do not fit axis {axis} "
                             f"of {describe([a])}")
        counts = B.cast(fn, repeats, D.int64)
        counts = counts.view(Broadcast((n,))) if counts.shape != (n,) else counts
    else:
        counts = B.scalar_array(int(repeats), D.int64, a.device).view(Broadcast((n,)))
    from ._reductions import cumulative_sum

    ends = cumulative_sum(counts)
    total = int(ends[n - 1]) if n else 0
    if total == 0:
        return Array.empty(a.dtype, [0 if i == ax else d for i, d in enumerate(a.shape)], a.device)
    from ._creation import arange

    positions = arange(total, device=a.device)
    src = nx.searchsorted(ends, positions, side="right")
    return nx.take(a, src, axis=ax)


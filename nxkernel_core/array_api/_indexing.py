"""Indexing of the standard's array object: ``x[key]`` and ``x[key] = v``.

Basic keys (ints, slices, ``...``, ``None``) give views. Integer arrays (and
ints beside them) index their axes together, broadcast, as NumPy does; a
boolean array selects the elements where it holds (its flat positions by a
Scan and a Scatter, ``_sets.flat_positions``). Advanced keys become one
Gather over the flattened indexed axes. ``x[key] = v`` writes through a Map
into the view for a basic key, and for an advanced key scatters ``v`` into a
copy of x and writes that back: both destinations are x's own memory,
claimed exclusively by the library that writes it.
"""

from __future__ import annotations

import functools
import operator
from typing import Any

import numpy as np

from .. import dtype as D
from .. import nx
from .. import spec as S
from ..answer import describe
from ..array import Array
from ..layout import Broadcast, Layout, Permute, Range, Slice
from ..prog import Builder, Value
from . import _base as B
from . import _dtypes as T

__all__ = ["getitem", "setitem"]


def _expand(x: Array, key: tuple[Any, ...]) -> list[Any]:
    """The key with ``...`` replaced by full slices and 0-d integer arrays and
    ``__index__`` objects as ints; ``IndexError`` for too many indices."""
    out: list[Any] = []
    for k in key:
        if isinstance(k, Array) and k.rank == 0 and k.dtype.is_int:
            out.append(int(k))
        elif isinstance(k, bool | np.bool_):
            out.append(Array.from_numpy(np.asarray(bool(k)), x.device))
        elif isinstance(k, slice | Array) or k is None or k is Ellipsis:
            out.append(k)
        elif hasattr(k, "__index__"):
            out.append(operator.index(k))
        else:
            raise IndexError(f"Array: {k!r} is not an index")
    consumed = sum(k.rank if isinstance(k, Array) and k.dtype.is_bool else 1
                   for k in out if k is not None and k is not Ellipsis)
    if sum(k is Ellipsis for k in out) > 1:
        raise IndexError("Array: an index can only have a single ellipsis ('...')")
    if consumed > x.rank:
        raise IndexError(f"Array: {consumed} indices for {describe([x])}")
    if Ellipsis in out:
        i = next(j for j, k in enumerate(out) if k is Ellipsis)
        out[i : i + 1] = [slice(None)] * (x.rank - consumed)
    else:
        out += [slice(None)] * (x.rank - consumed)
    return out


def _basic(x: Array, key: list[Any]) -> tuple[Array, list[tuple[int, Any]]]:
    """The view of x by the key's ints, slices and Nones; the advanced entries
    (arrays) left as full axes, returned with their axes in the view."""
    ranges: list[Range] = []
    shape_ops: list[tuple[str, int]] = []
    advanced: list[tuple[int, Any]] = []
    ax = 0
    out_axis = 0
    for k in key:
        if k is None:
            shape_ops.append(("new", -1))
            out_axis += 1
            continue
        if isinstance(k, Array):
            n = k.rank if k.dtype.is_bool else 1
            for j in range(n):
                ranges.append(Range(0, x.shape[ax + j], 1))
                shape_ops.append(("keep", ax + j))
            advanced.append((out_axis, k))
            out_axis += n
            ax += n
            continue
        d = x.shape[ax]
        if isinstance(k, slice):
            start, stop, step = k.indices(d)
            ranges.append(Range(start, len(range(start, stop, step)), step))
            shape_ops.append(("keep", ax))
            out_axis += 1
        else:
            i = k + d if k < 0 else k
            if not 0 <= i < d:
                raise IndexError(f"Array: index {k} is out of bounds for axis {ax} of {d}")
            ranges.append(Range(i, 1, 1))
            shape_ops.append(("drop", ax))
        ax += 1
    sliced = x.view(Slice(tuple(ranges))) if x.rank else x
    lay = sliced.layout
    shape, strides = [], []
    for op, a in shape_ops:
        if op == "new":
            shape.append(1)
            strides.append(0)
        elif op == "keep":
            shape.append(lay.shape[a])
            strides.append(lay.strides[a])
    return Array(x.dtype, Layout(tuple(shape), tuple(strides), lay.offset), x.buffer), advanced


def _index_arrays(fn: str, view: Array, advanced: list[tuple[int, Any]]) -> tuple[list[int], list[Array]]:
    """The view's indexed axes and one int64 index array per axis (boolean
    arrays become their nonzero positions; negative ints count from the end)."""
    axes: list[int] = []
    idx: list[Array] = []
    for at, k in advanced:
        if k.dtype.is_bool:
            if k.rank == 0:
                raise IndexError("Array: a 0-d boolean index beside others")
            for j, d in enumerate(k.shape):
                if view.shape[at + j] != d:
                    raise IndexError(f"Array: boolean index {describe([k])} does not match "
                                     f"{describe([view])} at axis {at + j}")
            from ._sets import flat_positions, unravel

            parts = unravel(fn, flat_positions(fn, k), k.shape)
            axes += [at + j for j in range(k.rank)]
            idx += list(parts)
        else:
            B.check_kind(fn, "integer", k)
            axes.append(at)
            idx.append(B.cast(fn, k, D.int64))
    return axes, idx


def _wrapped(b: Builder, i: Value, d: Value) -> Value:
    """i, counted from the end where negative."""
    return b.where(b.less(i, b.const(D.int64, 0)), i + d, i)


def _flat_index(b: Builder, acc: Value, i: Value, d: Value) -> Value:
    """acc·d + i, i counted from the end where negative."""
    return acc * d + _wrapped(b, i, d)


def _bounds(b: Builder, i: Value, d: Value) -> Value:
    return b.or_(b.less(i, -d), b.less_equal(d, i))


@functools.lru_cache(maxsize=64)
def _out_of_bounds(rank: int) -> S.Reduce:
    """Whether any index lies outside [−d, d): one Max reduction of ``_bounds``."""
    return S.Reduce(B.map_spec(_bounds, (D.int64, D.int64)).prog, (S.PLAIN, S.PLAIN),
                    tuple(range(rank)), ((S.Monoid.MAX, 0, D.bool_),))


def _combined(fn: str, view: Array, axes: list[int], idx: list[Array]) -> Array:
    """One flat int64 position per index tuple, over the indexed axes in order."""
    arrays = B.broadcast(fn, idx) if len(idx) > 1 else idx
    shape = arrays[0].shape
    acc: Array | None = None
    for ax, i in zip(axes, arrays, strict=True):
        d = B.scalar_array(view.shape[ax], D.int64, view.device).view(Broadcast(shape))
        if i.numel and bool(nx.call(_out_of_bounds(i.rank), i, d, name=fn)[0]):
            raise IndexError(f"Array: an index of {describe([i])} is out of bounds for axis {ax} "
                             f"of {view.shape[ax]}")
        acc = B.elementwise(fn, _wrapped, i, d) if acc is None else B.elementwise(
            fn, _flat_index, acc, i, d)
    assert acc is not None
    return acc


def getitem(x: Array, key: tuple[Any, ...]) -> Array:
    """``x[key]`` for a key with ``None``, booleans or arrays (see the module's doc)."""
    fn = "Array.__getitem__"
    full = _expand(x, key)
    zero_d_bool = [k for k in full if isinstance(k, Array) and k.dtype.is_bool and k.rank == 0]
    if zero_d_bool:
        # x[True] adds an axis of 1, x[False] one of 0 (NumPy's rule).
        keep = bool(zero_d_bool[0])
        rest = [k for k in full if not (isinstance(k, Array) and k.dtype.is_bool and k.rank == 0)]
        y = getitem(x, tuple(rest)) if rest else x
        y = B.reshaped(fn, y, [1, *y.shape])
        empty = tuple(Range(0, 0 if i == 0 else d, 1) for i, d in enumerate(y.shape))
        return y if keep else y.view(Slice(empty))
    view, advanced = _basic(x, full)
    if not advanced:
        return view
    only = advanced[0][1]
    if len(advanced) == 1 and only.dtype.is_bool and only.shape == view.shape:
        # x[mask] over every axis: the mask's flat positions gather the flat view.
        from ._sets import flat_positions

        if only.device is not x.device:
            raise ValueError(f"{fn}: the mask {describe([only])} is on {only.device.name}")
        pos = flat_positions(fn, only)
        flat = B.flat(fn, view)
        return nx.take(flat, pos, axis=0) if pos.numel else Array.empty(x.dtype, (0,), x.device)
    axes, idx = _index_arrays(fn, view, advanced)
    flat_pos = _combined(fn, view, axes, idx)
    # The indexed axes first, as one axis; the rest after, in order.
    rest = [a for a in range(view.rank) if a not in axes]
    moved = view.view(Permute(tuple(axes + rest)))
    n = int(np.prod([view.shape[a] for a in axes]))
    flat = B.reshaped(fn, moved, [n, *(view.shape[a] for a in rest)])
    picked = nx.take(flat, flat_pos, axis=0) if flat.numel and flat_pos.numel else Array.empty(
        x.dtype, (*flat_pos.shape, *flat.shape[1:]), x.device)
    adjacent = axes == list(range(axes[0], axes[0] + len(axes)))
    if not adjacent or axes[0] == 0:
        return picked
    # NumPy places the indexed result's axes where adjacent indexed axes were.
    k = flat_pos.rank
    lead = axes[0]
    perm = list(range(k, k + lead)) + list(range(k)) + list(range(k + lead, picked.rank))
    return picked.view(Permute(tuple(perm)))


def _value(fn: str, x: Array, value: Any) -> Array:
    if isinstance(value, Array):
        if value.device is not x.device:
            raise ValueError(f"{fn}: {describe([value])} is on {value.device.name}, x on {x.device.name}")
        if value.dtype is not x.dtype:
            T.promote(value.dtype, x.dtype, fn)
        return B.cast(fn, value, x.dtype)
    if not isinstance(value, bool | int | float | complex):
        raise TypeError(f"{fn}: a {type(value).__name__} is not an array or a Python scalar")
    return B.scalar_array(value, T.scalar_dtype(value, x.dtype, fn), x.device)


def setitem(x: Array, key: Any, value: Any) -> None:
    """``x[key] = value`` (see the module's doc)."""
    fn = "Array.__setitem__"
    keys = key if isinstance(key, tuple) else (key,)
    v = _value(fn, x, value)
    full = _expand(x, keys)
    if not any(isinstance(k, Array) for k in full):
        view, _ = _basic(x, full)
        B.write_into(fn, view, v)
        return
    positions = getitem(_iota(fn, x), keys)
    if positions.numel == 0:
        return
    vb = v if v.shape == positions.shape else B.broadcast(fn, [v, positions])[0]
    if vb.shape != positions.shape:
        raise ValueError(f"{fn}: {describe([v])} does not broadcast to the {list(positions.shape)} indexed")
    flat = B.flat(fn, B.copy(fn, x))
    updated = nx.scatter(flat, B.flat(fn, positions), B.flat(fn, B.copy(fn, vb)), 0, "set")
    B.write_into(fn, x, updated.reshape(list(x.shape)))


def _iota(fn: str, x: Array) -> Array:
    """Each element's flat C-order position, shaped as x."""
    from ._creation import arange

    return arange(x.numel, device=x.device).reshape(list(x.shape))


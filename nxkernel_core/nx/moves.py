"""Moves: take, sort, topk, searchsorted."""

from __future__ import annotations

import functools
from typing import Final

import numpy as np

from .. import dtype as D
from .. import spec as S
from ..answer import InvalidArgument, describe
from ..array import Array, asarray
from ..caller import call
from ..layout import Broadcast, Layout, Reshape
from .arguments import as_arrays, flattened, reduced_axes
from .elementwise import cast
from .kernel_calls import gather, numbering

#: The largest int64.
INT64_MAX: Final = (1 << 63) - 1


def int64_operand(fn: str, x: object, like: Array) -> Array:
    """Indices as an int64 Array, as NumPy's take checks them: integers (or
    bools) only, never rounded from floats, and within int64; an
    ``InvalidArgument`` naming ``fn`` otherwise."""
    if isinstance(x, Array):
        if not (x.dtype.is_int or x.dtype.is_bool):
            raise InvalidArgument(f"{fn}: indices must be integers, not {describe([x])}")
        if x.dtype is D.uint64 and x.numel and int(np.max(x.to_numpy())) > INT64_MAX:
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
    if arr.dtype.kind == "u" and int(arr.max()) > INT64_MAX:
        raise InvalidArgument(f"{fn}: the index {int(arr.max())} is above the int64 maximum")
    return asarray(arr.astype(np.int64), device=like.device)


def take(x: object, index: object, axis: int = 0) -> Array:
    """x's elements at ``index`` along ``axis``, shaped as NumPy's take gives:
    ``x.shape[:axis] + index.shape + x.shape[axis+1:]``. Unlike NumPy, a position
    outside [0, d) (negative ones included) reads zero bits."""
    (a,) = as_arrays("nx.take", [x])
    (ax,) = reduced_axes("nx.take", a, axis)
    idx = int64_operand("nx.take", index, a)
    flat = flattened("nx.take", idx) if idx.rank != 1 else idx
    full, result = _take_layouts(flat.layout, a.shape, ax, idx.shape)
    out = gather(a, Array(flat.dtype, full, flat.buffer), ax)
    return Array(out.dtype, result, out.buffer)


@functools.lru_cache(maxsize=256)
def _take_layouts(index: Layout, shape: tuple[int, ...], ax: int,
                  index_shape: tuple[int, ...]) -> tuple[Layout, Layout]:
    """What ``take`` makes of a rank-1 ``index`` layout for x of ``shape``,
    once per layouts and shapes (the same Layout objects again, which the
    caller's plan finds by identity): the index lifted to x's rank along
    ``ax`` and broadcast over x's other axes, and the layout of gather's
    fresh, C-contiguous result reshaped as NumPy's take shapes it."""
    n = index.shape[0]
    lifted = index.move(Reshape(tuple([n if i == ax else 1 for i in range(len(shape))])))
    assert lifted is not None  # inserting axes of extent 1 needs no copy
    full = lifted.move(Broadcast(tuple([n if i == ax else d for i, d in enumerate(shape)])))
    assert full is not None  # the extents along ax agree, the others are 1
    # Gather's result has full's shape, C-contiguous (``call`` makes it so).
    result = Layout.c_contiguous(full.shape).move(
        Reshape((*shape[:ax], *index_shape, *shape[ax + 1:])))
    assert result is not None  # a C-contiguous layout takes any shape of its size
    return full, result


def sort(x: object, axis: int = -1, descending: bool = False) -> tuple[Array, Array]:
    """``(values, positions)``: a stable sort along ``axis`` in the total order
    −inf < … < −0 < +0 < … < +inf < NaN; descending keeps equal elements in
    increasing position."""
    (a,) = as_arrays("nx.sort", [x])
    (ax,) = reduced_axes("nx.sort", a, axis)
    values, positions = call(S.Sort(ax, descending), a, name="nx.sort")
    return values, positions


def topk(x: object, k: int, axis: int = -1, largest: bool = True) -> tuple[Array, Array]:
    """``(values, positions)`` of the k largest (or smallest) along ``axis``, in
    order, ties by increasing position."""
    (a,) = as_arrays("nx.topk", [x])
    (ax,) = reduced_axes("nx.topk", a, axis)
    values, positions = call(S.Sort(ax, largest, k), a, name="nx.topk")
    return values, positions


def searchsorted(keys: object, x: object, side: str = "left") -> Array:
    """Insertion positions of x into the ascending ``keys``: 1-D keys take x of
    any shape (NumPy's searchsorted); keys ``[b…; m]`` take x ``[b…; n]`` row by row."""
    k, v = as_arrays("nx.searchsorted", [keys, x])
    if k.rank == 1:
        flat = flattened("nx.searchsorted", v) if v.rank != 1 else v
        return numbering(k, flat, side).reshape(v.shape)
    return numbering(k, v, side)

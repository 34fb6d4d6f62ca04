"""Hypothesis strategies shared by the core's tests: dtypes, layouts made by
moves, and arrays over shared buffers."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from nxkernel_core import dtype as D
from nxkernel_core.array import Array
from nxkernel_core.layout import Broadcast, Layout, Move, Permute, Range, Slice, Window, Windows
from nxkernel_core.rig import Buffer, host

dtypes = st.sampled_from(D.all)
shapes = st.lists(st.integers(0, 5), min_size=0, max_size=4).map(tuple)


@st.composite
def moves(draw: st.DrawFn, layout: Layout) -> Move:
    """One move that fits ``layout``."""
    rank = layout.rank
    options = ["broadcast", "permute", "slice"]
    if rank and all(d > 0 for d in layout.shape):
        options.append("window")
    kind = draw(st.sampled_from(options))
    if kind == "broadcast":
        lead = draw(st.lists(st.integers(0, 3), max_size=2))
        tail = [draw(st.integers(0, 3)) if d == 1 else d for d in layout.shape]
        return Broadcast((*lead, *tail))
    if kind == "permute":
        return Permute(tuple(draw(st.permutations(range(rank)))))
    if kind == "slice":
        ranges = []
        for d in layout.shape:
            if d == 0:
                ranges.append(Range(0, 0, 1))
                continue
            step = draw(st.sampled_from([1, 2, -1, -2, 3]))
            start = draw(st.integers(0, d - 1))
            room = (d - 1 - start) // step + 1 if step > 0 else start // -step + 1
            ranges.append(Range(start, draw(st.integers(0, room)), step))
        return Slice(tuple(ranges))
    axis = draw(st.integers(0, rank - 1))
    d = layout.shape[axis]
    size = draw(st.integers(1, d))
    dilation = draw(st.integers(1, max(1, (d - 1) // max(1, size - 1)))) if size > 1 else 1
    return Windows((Window(axis, size, draw(st.integers(1, 3)), dilation),))


@st.composite
def views(draw: st.DrawFn, buffer: Buffer, dt: D.Dtype, max_moves: int = 3) -> Array:
    """An array of ``dt`` over ``buffer``: a contiguous base at a drawn offset,
    viewed through a few moves."""
    capacity = buffer.length * 8 // dt.bits
    shape = draw(shapes)
    n = int(np.prod(shape)) if shape else 1
    if n > capacity:
        shape, n = (capacity,), capacity
    offset = draw(st.integers(0, capacity - n))
    arr = Array(dt, Layout.c_contiguous(shape, offset), buffer)
    for _ in range(draw(st.integers(0, max_moves))):
        mv = draw(moves(arr.layout))
        lay = arr.layout.move(mv)
        if lay is None or lay.numel > 4096:
            continue
        arr = Array(dt, lay, buffer)
    return arr


def fresh_buffer(nbytes: int = 256) -> Buffer:
    return Buffer.create(host, nbytes)

"""The moves: gather, range gather, scatter, sort (and top-k), numbering, assemble.

Every kernel is one of ``kernels/moves.cu`` (one source, compiled once per
device), walking its arrays by descriptors (:mod:`nxkernel_cuda.loops`), so
operands may be strided, broadcast or offset and destinations take any
layout; elements move as bits (NaN payloads, -0, a bool's byte, packed
sub-byte codes).

Rules, beyond the contract's:

* gather and range gather copy bits at every dtype; a position outside
  [0, d) reads zero bits.
* scatter is deterministic: each element takes its updates in C order of the
  updates (Set the last, Add ``+0 + x + u1 + …`` in the dtype's Add — float32
  for the narrow floats, rounded once —, Max and Min as Prog's Maximum and
  Minimum), and no atomic reorders them: a thread owns a destination element
  and reads its slice's updates in order where the axis has at most
  :data:`OWNER_MAX` elements or the sum needs float32 accumulation (narrow
  floats), else a thread owns a slice of updates and applies them in order.
  It declines Add, Max and Min of complex dtypes (Set moves any dtype).
* sort orders each row's (key, position) pairs, keys in the total order
  (complemented for descending): a stable sort (positions ascending among
  equal keys, in both directions), bitonic within tiles, merged pairwise; top-k
  keeps the first k. It declines complex dtypes and axes of 2^31 or more.
* numbering counts by binary search (keys ascending in sort's total order). It
  declines complex dtypes.
* assemble fills, then copies the pieces in order (the last piece holding an
  index wins); it computes every dtype.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Final

import numpy as np

from nxkernel_core import spec as S
from nxkernel_core.array import Array
from nxkernel_core.dtype import Dtype
from nxkernel_core.kernel import Call
from nxkernel_core.layout import Layout, Range, Slice

from . import loops
from .build import Source, file_source
from .launch import Arg, CudaRig, Pointer

__all__ = [
    "KERNELS",
    "OWNER_MAX",
    "PROSE",
    "assemble",
    "declines",
    "gather",
    "numbering",
    "range_gather",
    "scatter",
    "sort",
    "source",
]

#: The kernels of ``moves.cu``.
KERNELS: Final = (
    "nxk_fill", "nxk_copy", "nxk_gather", "nxk_scatter_owner", "nxk_scatter_serial", "nxk_sort_keys",
    "nxk_sort_tiles", "nxk_sort_merge", "nxk_sort_out", "nxk_numbering",
)

#: A scatter's axis of at most this many elements is done by destination element.
OWNER_MAX: Final = 256
#: The most pairs a block sorts in shared memory.
MAX_TILE: Final = 2048
#: The longest sort axis (positions are 32-bit in the sort's pairs).
MAX_SORT_AXIS: Final = 2**31 - 1

_COMBINE: Final[dict[S.Combine, int]] = {
    S.Combine.SET: 0, S.Combine.ADD: 1, S.Combine.MAX: 2, S.Combine.MIN: 3,
}


@functools.cache
def source() -> Source:
    """``moves.cu`` with every kernel."""
    return file_source("moves.cu", KERNELS)


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------


def _launch(dev: CudaRig, kernel: str, n: int, args: Sequence[Arg], shared: int = 0) -> None:
    """A grid-stride launch of ``kernel`` over ``n`` items."""
    dev.load(source()).function(kernel)((loops.blocks_for(n),), (loops.THREADS,), args, shared_bytes=shared)


def _without(seq: Sequence[int], axis: int) -> list[int]:
    return [v for i, v in enumerate(seq) if i != axis]


def _with_zero(strides: Sequence[int], axis: int) -> list[int]:
    return [0 if i == axis else s for i, s in enumerate(strides)]


def _desc(dev: CudaRig, shape: Sequence[int], parts: Sequence[tuple[int, Sequence[int]]]) -> Pointer:
    return loops.upload(dev, loops.walk_words(loops.coalesce(shape, parts)))


def _lay(a: Array) -> tuple[int, Sequence[int]]:
    return (a.layout.offset, a.layout.strides)


def copy_into(dev: CudaRig, dst: Array, src: Array) -> None:
    """Queue dst = src, bits, element by element (one shape, any layouts)."""
    n = dst.numel
    if n == 0:
        return
    desc = _desc(dev, dst.shape, [_lay(dst), _lay(src)])
    _launch(dev, "nxk_copy", n, [desc, np.int64(n), np.int32(dst.dtype.bits), loops.base(dev, dst),
                                 loops.base(dev, src)])


def fill(dev: CudaRig, dst: Array, bits: bytes) -> None:
    """Queue dst = one element's ``bits`` (little-endian) everywhere."""
    n = dst.numel
    if n == 0:
        return
    value = int.from_bytes(bits.ljust(16, b"\0"), "little")
    desc = _desc(dev, dst.shape, [_lay(dst)])
    lo, hi = np.uint64(value & (2**64 - 1)), np.uint64(value >> 64)
    _launch(dev, "nxk_fill", n, [desc, np.int64(n), np.int32(dst.dtype.bits), lo, hi, loops.base(dev, dst)])


# --------------------------------------------------------------------------
# Gathers
# --------------------------------------------------------------------------


def _range_gather(dev: CudaRig, axis: int, run: int | None, dst: Array, index: Array, x: Array) -> None:
    """Queue a range gather (a gather where ``run`` is None)."""
    n = dst.numel
    if n == 0:
        return
    ist, xst = list(index.layout.strides), _with_zero(x.layout.strides, axis)
    div = 1
    if run is not None:
        ist.insert(axis + 1, 0)
        xst.insert(axis + 1, 0)
        div = math.prod(dst.shape[axis + 2:])
    desc = _desc(dev, dst.shape, [_lay(dst), (index.layout.offset, ist), (x.layout.offset, xst)])
    _launch(dev, "nxk_gather", n, [
        desc, np.int64(n), np.int32(x.dtype.bits), np.int64(x.shape[axis]), np.int64(x.layout.strides[axis]),
        np.int64(div), np.int64(1 if run is None else run), loops.base(dev, dst), loops.base(dev, index),
        loops.base(dev, x)])


def gather(spec: S.Gather, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
    """``S.gather`` of a call that fits, its arrays claimed: dst = x's elements
    at index's positions along the axis."""
    _range_gather(loops.device_of(dsts), spec.axis, None, dsts[0], operands[0], operands[1])


def range_gather(spec: S.RangeGather, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
    """``S.range_gather`` of a call that fits, its arrays claimed: runs of
    ``spec.run`` elements from the starts."""
    _range_gather(loops.device_of(dsts), spec.axis, spec.run, dsts[0], operands[0], operands[1])


# --------------------------------------------------------------------------
# Scatter
# --------------------------------------------------------------------------


def _scatter_decline(spec: S.Scatter, dt: Dtype) -> str | None:
    if dt.is_complex and spec.combine is not S.Combine.SET:
        return f"nx.cuda scatters {dt.name} by Set only, not {spec.combine.name.title()}"
    return None


def scatter(spec: S.Scatter, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
    """``S.scatter`` of a call that fits and is not declined, its arrays
    claimed: dst = into with each update combined, in C order."""
    _scatter(loops.device_of(dsts), spec, dsts[0], *operands)


def _scatter(dev: CudaRig, spec: S.Scatter, dst: Array, into: Array, index: Array, updates: Array) -> None:
    axis = spec.axis
    d, n = dst.shape[axis], index.shape[axis]
    dt = dst.dtype
    combine = np.int32(_COMBINE[spec.combine])
    narrow_add = spec.combine is S.Combine.ADD and dt.is_float and dt.bits < 32
    if dst.numel == 0:
        return
    if d <= OWNER_MAX or narrow_add:
        total = dst.numel
        desc = _desc(dev, dst.shape, [
            _lay(dst), _lay(into), (index.layout.offset, _with_zero(index.layout.strides, axis)),
            (updates.layout.offset, _with_zero(updates.layout.strides, axis))])
        _launch(dev, "nxk_scatter_owner", total, [
            desc, np.int64(total), np.int32(dt.bits), np.int32(dt.code), combine, np.int64(d),
            np.int64(math.prod(dst.shape[axis + 1:])), np.int64(n), np.int64(index.layout.strides[axis]),
            np.int64(updates.layout.strides[axis]), loops.base(dev, dst), loops.base(dev, into),
            loops.base(dev, index), loops.base(dev, updates)])
        return
    if not dst.identical(into):
        copy_into(dev, dst, into)
    slices = index.numel // n if n else 0
    if slices == 0:
        return
    shape = _without(index.shape, axis)
    desc = _desc(dev, shape, [
        (dst.layout.offset, _without(dst.layout.strides, axis)),
        (index.layout.offset, _without(index.layout.strides, axis)),
        (updates.layout.offset, _without(updates.layout.strides, axis))])
    _launch(dev, "nxk_scatter_serial", slices, [
        desc, np.int64(slices), np.int32(dt.bits), np.int32(dt.code), combine, np.int64(d), np.int64(n),
        np.int64(dst.layout.strides[axis]), np.int64(index.layout.strides[axis]),
        np.int64(updates.layout.strides[axis]), loops.base(dev, dst), loops.base(dev, index),
        loops.base(dev, updates)])


# --------------------------------------------------------------------------
# Sort and numbering
# --------------------------------------------------------------------------


def _sort_decline(dt: Dtype, extent: int) -> str | None:
    if dt.is_complex:
        return f"nx.cuda sorts no {dt.name}"
    if extent > MAX_SORT_AXIS:
        return f"the sort axis has {extent} elements, more than nx.cuda's {MAX_SORT_AXIS}"
    return None


def sort(spec: S.Sort, dsts: Sequence[Array], operands: Sequence[Array], *,
         tile: int | None = None) -> None:
    """``S.sort`` of a call that fits and is not declined, its arrays claimed:
    the stable sort of x along the axis (its first k), values and int64
    positions. ``tile`` (a power of two up to :data:`MAX_TILE`) chooses the
    pairs a block sorts before the merges (tests only); any gives the same
    result."""
    _sort(loops.device_of(dsts), spec, dsts[0], dsts[1], operands[0], tile)


def _sort(dev: CudaRig, spec: S.Sort, values: Array, positions: Array, x: Array,
          tile: int | None = None) -> None:
    axis = spec.axis
    n = x.shape[axis]
    k = values.shape[axis]
    rows_shape = _without(x.shape, axis)
    rows = math.prod(rows_shape)
    if rows == 0 or k == 0:
        return
    xs = x.layout.strides[axis]
    rows_desc = _desc(dev, rows_shape, [(x.layout.offset, _without(x.layout.strides, axis))])
    keys_buf, keys = loops.scratch(dev, rows * n * 8)
    idx_buf, idx = loops.scratch(dev, rows * n * 4)
    _launch(dev, "nxk_sort_keys", rows * n, [
        rows_desc, np.int64(rows), np.int64(n), np.int32(x.dtype.bits), np.int32(x.dtype.code),
        np.int32(spec.descending), np.int64(xs), loops.base(dev, x), keys, idx])
    t = tile or min(MAX_TILE, 1 << max(1, (n - 1).bit_length()))
    tiles = -(-n // t)
    threads = min(1024, max(32, t // 2))
    module = dev.load(source())
    blocks = rows * tiles
    module.function("nxk_sort_tiles")((max(1, min(blocks, 1 << 20)),), (threads,), [
        np.int64(n), np.int64(tiles), np.int32(t), keys, idx, np.int64(blocks)], shared_bytes=t * 12)
    keep = [keys_buf, idx_buf]
    run = t
    while run < n:
        okeys_buf, okeys = loops.scratch(dev, rows * n * 8)
        oidx_buf, oidx = loops.scratch(dev, rows * n * 4)
        keep += [okeys_buf, oidx_buf]
        _launch(dev, "nxk_sort_merge", rows * n, [np.int64(rows), np.int64(n), np.int64(run), keys, idx,
                                                  okeys, oidx])
        keys, idx = okeys, oidx
        run *= 2
    out_desc = _desc(dev, rows_shape, [
        (values.layout.offset, _without(values.layout.strides, axis)),
        (positions.layout.offset, _without(positions.layout.strides, axis)),
        (x.layout.offset, _without(x.layout.strides, axis))])
    _launch(dev, "nxk_sort_out", rows * k, [
        out_desc, np.int64(rows), np.int64(n), np.int64(k), np.int32(x.dtype.bits),
        np.int64(values.layout.strides[axis]), np.int64(positions.layout.strides[axis]), np.int64(xs), idx,
        loops.base(dev, values), loops.base(dev, positions), loops.base(dev, x)])
    del keep  # queued work holds no reference: the stream orders the buffers' reuse


def numbering(spec: S.Numbering, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
    """``S.numbering`` of a call that fits and is not declined, its arrays
    claimed: per element of x, the keys of its row below it (left) or not
    above it (right)."""
    dev = loops.device_of(dsts)
    (dst,), (keys, x) = dsts, operands
    total = dst.numel
    if total:
        kst = list(keys.layout.strides)
        kst[-1] = 0
        desc = _desc(dev, x.shape, [_lay(dst), _lay(x), (keys.layout.offset, kst)])
        _launch(dev, "nxk_numbering", total, [
            desc, np.int64(total), np.int32(x.dtype.bits), np.int32(x.dtype.code),
            np.int32(spec.side is S.Side.RIGHT), np.int64(keys.shape[-1]),
            np.int64(keys.layout.strides[-1]),
            loops.base(dev, dst), loops.base(dev, x), loops.base(dev, keys)])


# --------------------------------------------------------------------------
# Assemble
# --------------------------------------------------------------------------


def assemble(spec: S.Assemble, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
    """``S.assemble`` of a call that fits, its arrays claimed: the fill, then
    each piece's bits in its region, in order."""
    dev = loops.device_of(dsts)
    (dst,) = dsts
    # A region of d indices of each axis of extent d (it lies inside) is the whole.
    whole = bool(spec.regions) and all(
        r.count == d and (abs(r.step) == 1 or d <= 1)
        for r, d in zip(spec.regions[0], dst.shape, strict=True))
    if not whole:
        fill(dev, dst, spec.fill)
    for i, (piece, region) in enumerate(zip(operands, spec.regions, strict=True)):
        if i == 0 and whole and piece.identical(dst):
            continue  # the first piece is the result itself: read at its own index
        view = Array(dst.dtype, _region(dst.layout, region), dst.buffer)
        copy_into(dev, view, piece)


def _region(layout: Layout, region: Sequence[Range]) -> Layout:
    """The layout of ``region`` of ``layout`` (a Slice)."""
    out = layout.move(Slice(tuple(region)))
    assert out is not None  # a Slice always has strides
    return out


#: What each move computes, in words.
PROSE: Final[dict[str, str]] = {
    "gather": "every case at every dtype (bits; a position outside [0, d) reads zero bits).",
    "range_gather": "every case at every dtype (bits; a position outside [0, d) reads zero bits).",
    "scatter": (
        "Set at every dtype; Add, Max and Min at every real dtype they take, deterministically: each "
        "element takes its updates in C order (Add +0 + x + u1 + …, narrow floats in float32 rounded "
        "once; Max and Min the first NaN), with no reordering atomics. It declines Add, Max and Min of "
        "complex dtypes."),
    "sort": (
        "a stable sort (and top-k) at every real dtype: keys in the total order (-0 below +0, every NaN "
        "equal and last), equal keys in increasing positions in both directions; bitonic tiles merged "
        "pairwise. It declines complex dtypes and sort axes of 2^31 or more elements."),
    "numbering": "every case at every real dtype, by binary search in sort's total order; it declines "
                 "complex dtypes.",
    "assemble": "every case at every dtype: the fill, then each piece's bits in order.",
}


def declines(call: Call) -> str | None:
    """Why the moves decline ``call`` (a call of one of them), or None."""
    spec = call.spec
    if isinstance(spec, S.Scatter):
        return _scatter_decline(spec, call.operands[0].dtype)
    if isinstance(spec, S.Sort):
        x = call.operands[0]
        return _sort_decline(x.dtype, x.shape[spec.axis])
    if isinstance(spec, S.Numbering):
        dt = call.operands[1].dtype
        return f"nx.cuda numbers no {dt.name}" if dt.is_complex else None
    return None

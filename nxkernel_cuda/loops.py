"""Walks: how the kernels find their arrays' elements, and the descriptors
that tell them (``kernels/nxk_loop.cuh`` reads them).

Rules:

* A *walk* is a loop shape and, per array, an element offset and one stride
  per axis (in elements; 0 for a broadcast axis, negative for a reversed one).
  :func:`coalesce` drops extent-1 axes and merges neighbours that every array
  runs across, in C order, so the linear index of the loop keeps its meaning
  and a contiguous loop becomes rank 1 (the kernel then divides nothing).
* A descriptor is a tuple of int64 words (:func:`walk_words`). :func:`upload`
  puts one in the device's memory once and keeps it, per device, in a
  least-recently-used cache keyed by its words, so a repeated call uploads
  nothing and a descriptor lives until evicted (a GPU's stream-ordered pool
  reuses an evicted one only after the work queued before).
* Arrays reach kernels as the address of their buffer's first byte
  (:func:`base`); the element offset of their layout is in the walk.
* A Padded load's operand is not walked: its descriptor (:func:`pad_words`,
  read by ``kernels/nxk_pad.cuh``) holds, per operand axis, the padding and
  the stride, and one or two walks of *coordinate arrays*, one per operand
  axis, whose position at a loop index is that axis's padded position (the
  loop index along the axis, times the window step where it is windowed,
  plus the tap index times the dilation). Summed over the walks (a
  reduction's rows and terms), it gives the operand's index or the fill.
"""

from __future__ import annotations

import math
import threading
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from typing import Final

import numpy as np

from nxkernel_core import shape as SH
from nxkernel_core import spec as S
from nxkernel_core.array import Array
from nxkernel_core.rig import Buffer, Rig

from .launch import CudaRig, Pointer

__all__ = [
    "MAX_BLOCKS",
    "THREADS",
    "CoordWalk",
    "Walk",
    "base",
    "blocks_for",
    "coalesce",
    "coord_words",
    "cuda_device",
    "device_of",
    "loop_shape",
    "packed",
    "pad_coords",
    "pad_key",
    "pad_words",
    "upload",
    "walk_of",
    "walk_words",
]

#: Threads per block of the elementwise kernels.
THREADS: Final = 256
#: Blocks of a grid-stride launch, at most.
MAX_BLOCKS: Final = 16384

#: A walk: the shape, then per array (offset, strides).
Walk = tuple[tuple[int, ...], tuple[tuple[int, tuple[int, ...]], ...]]


def coalesce(shape: Sequence[int], arrays: Sequence[tuple[int, Sequence[int]]]) -> Walk:
    """The walk of ``shape`` over ``arrays`` (offset, strides) with extent-1 axes
    dropped and neighbouring axes merged wherever every array runs across
    them, without reordering: index i (C order) reaches the same elements."""
    keep = [ax for ax, d in enumerate(shape) if d != 1]
    out_shape: list[int] = []
    out_strides: list[list[int]] = [[] for _ in arrays]
    for ax in keep:
        d = shape[ax]
        if out_shape and all(st[-1] == s[ax] * d for st, (_, s) in zip(out_strides, arrays, strict=True)):
            out_shape[-1] *= d
            for st, (_, s) in zip(out_strides, arrays, strict=True):
                st[-1] = s[ax]
        else:
            out_shape.append(d)
            for st, (_, s) in zip(out_strides, arrays, strict=True):
                st.append(s[ax])
    return tuple(out_shape), tuple((off, tuple(st)) for (off, _), st in zip(arrays, out_strides, strict=True))


def walk_of(shape: Sequence[int], arrays: Sequence[Array | tuple[int, Sequence[int]]]) -> Walk:
    """The coalesced walk of ``shape`` over arrays (each an Array of that
    shape, or an explicit (offset, strides))."""
    parts: list[tuple[int, Sequence[int]]] = []
    for a in arrays:
        if isinstance(a, Array):
            parts.append((a.layout.offset, a.layout.strides))
        else:
            parts.append(a)
    return coalesce(tuple(shape), parts)


def walk_words(walk: Walk) -> list[int]:
    """The descriptor words of a walk: ``rank, shape..., then per array:
    offset, strides...``."""
    shape, arrays = walk
    words = [len(shape), *shape]
    for off, strides in arrays:
        words += [off, *strides]
    return words


def coord_words(shape: Sequence[int], axes: Sequence[int]) -> list[int]:
    """For each Coord axis (counted from the last) of a loop of ``shape``, the
    (div, ext) that give its index from the loop's linear index."""
    words: list[int] = []
    rank = len(shape)
    for axis in axes:
        along = rank - 1 - axis
        words += [math.prod(shape[along + 1:]), shape[along]]
    return words


# --------------------------------------------------------------------------
# Padded loads
# --------------------------------------------------------------------------

#: A walk of coordinate arrays: the loop axes it runs over (their extents
#: ``shape``, in C order of the loop) and whether its index runs them from
#: their ends (a reverse scan's).
CoordWalk = tuple[Sequence[int], Sequence[int], bool]


def pad_coords(pad: S.Pad) -> list[list[int]]:
    """Per operand axis ``a``, the strides over the loop's axes (the loaded
    rank) of ``a``'s padded position: the window step along ``a`` where it is
    windowed (else 1) and the dilation along its tap axis."""
    rank, loaded = pad.rank, pad.loaded_rank
    out = [[0] * loaded for _ in range(rank)]
    for a in range(rank):
        out[a][a] = 1
    for k, w in enumerate(pad.windows):
        out[w.axis][w.axis] = w.step
        out[w.axis][rank + k] = w.dilation
    return out


def pad_key(loads: Sequence[S.Load]) -> tuple[int | None, ...]:
    """What generated code needs of the loads: per load, the operand's rank
    where it is Padded, None where Plain; () where every load is Plain (so
    a program over Plain loads keeps one source)."""
    key = tuple(ld.pad.rank if isinstance(ld, S.Padded) else None for ld in loads)
    return key if any(r is not None for r in key) else ()


def loop_shape(loads: Sequence[S.Load], operands: Sequence[Array]) -> tuple[int, ...]:
    """The loop's shape, as load 0 reads it (every load reads it alike in a
    call that fits): the operand's, padded and windowed where Padded."""
    first, a = loads[0], operands[0]
    if isinstance(first, S.Plain):
        return a.shape
    shape = SH.padded(a.shape, first.pad)
    assert not isinstance(shape, SH.Error), shape  # a fitting call's load pads
    return shape


def _signed(word: int) -> int:
    """An unsigned 64-bit word as the int64 with its bits."""
    return word - (1 << 64) if word >= 1 << 63 else word


def pad_words(a: Array, load: S.Padded, walks: Sequence[CoordWalk]) -> list[int]:
    """The descriptor of operand ``a`` read by ``load`` (``kernels/nxk_pad.cuh``):
    ``offset, the fill's bytes (two words, zero after them: an element at
    word 1), then per operand axis: lo, interior + 1, extent, stride``, then
    one coalesced walk of the coordinate arrays per entry of ``walks`` (each
    (shape, loop axes, reversed))."""
    pad = load.pad
    fill = load.fill.ljust(16, b"\0")
    words = [a.layout.offset, *(_signed(int.from_bytes(fill[k:k + 8], "little")) for k in (0, 8))]
    for ax in range(pad.rank):
        words += [pad.lo[ax], pad.interior[ax] + 1, a.shape[ax], a.layout.strides[ax]]
    coords = pad_coords(pad)
    for shape, axes, reverse in walks:
        arrays: list[tuple[int, Sequence[int]]] = []
        for c in coords:
            strides = [c[x] for x in axes]
            if reverse:
                arrays.append((sum((d - 1) * s for d, s in zip(shape, strides, strict=True)),
                               [-s for s in strides]))
            else:
                arrays.append((0, strides))
        words += walk_words(coalesce(shape, arrays))
    return words


def packed(head: Sequence[int], parts: Sequence[Sequence[int]]) -> list[int]:
    """``head``, then the offset (in words, from the head's start) of each
    part, then the parts: so generated code finds part j at
    ``d + d[len(head) + j]``."""
    out = [*head]
    at = len(head) + len(parts)
    for part in parts:
        out.append(at)
        at += len(part)
    for part in parts:
        out += part
    return out


# --------------------------------------------------------------------------
# Devices, addresses, descriptors
# --------------------------------------------------------------------------


def cuda_device(arrays: Sequence[Array]) -> CudaRig | None:
    """The CUDA device of the first array, or None where it is on another device."""
    if not arrays:
        return None
    dev = arrays[0].device
    return dev if isinstance(dev, CudaRig) else None


def device_of(dsts: Sequence[Array]) -> CudaRig:
    """The CUDA device of a call the door passed (its arrays are all there)."""
    dev = dsts[0].device
    assert isinstance(dev, CudaRig)
    return dev


def base(dev: CudaRig, a: Array) -> Pointer:
    """The address of the first byte of ``a``'s buffer."""
    return dev.pointer(a.buffer)


def blocks_for(n: int, threads: int = THREADS) -> int:
    """Blocks for a grid-stride loop over ``n`` items (at least 1)."""
    return max(1, min(-(-n // threads), MAX_BLOCKS))


#: Descriptors kept per device.
_CACHE_SIZE: Final = 1024


class _Descriptors:
    """One device's uploaded descriptors, least recently used first."""

    def __init__(self) -> None:
        self.entries: OrderedDict[tuple[int, ...], tuple[Buffer, Pointer]] = OrderedDict()
        self.lock = threading.Lock()


_caches: weakref.WeakKeyDictionary[Rig, _Descriptors] = weakref.WeakKeyDictionary()
_caches_lock: Final = threading.Lock()


def upload(dev: CudaRig, words: Sequence[int]) -> Pointer:
    """The device address of int64 ``words`` in ``dev``'s memory, uploaded once
    and cached by their value."""
    key = tuple(int(w) for w in words) or (0,)
    with _caches_lock:
        cache = _caches.get(dev)
        if cache is None:
            cache = _caches[dev] = _Descriptors()
    with cache.lock:
        hit = cache.entries.get(key)
        if hit is not None:
            cache.entries.move_to_end(key)
            return hit[1]
    data = np.asarray(key, dtype=np.int64).view(np.uint8)
    buf = Buffer.create(dev, data.size)
    dev.write_bytes(buf.memory, buf.offset, data)
    ptr = dev.pointer(buf)
    with cache.lock:
        cache.entries[key] = (buf, ptr)
        while len(cache.entries) > _CACHE_SIZE:
            cache.entries.popitem(last=False)
    return ptr


def scratch(dev: CudaRig, nbytes: int) -> tuple[Buffer, Pointer]:
    """A fresh buffer of ``nbytes`` (at least 1) on ``dev`` and its address; the
    caller keeps the buffer while queued work uses it."""
    buf = Buffer.create(dev, max(nbytes, 1))
    return buf, dev.pointer(buf)

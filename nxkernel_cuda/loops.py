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
"""

from __future__ import annotations

import math
import threading
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from typing import Final

import numpy as np

from nxkernel_core.array import Array
from nxkernel_core.rig import Buffer, Rig

from .device import CudaRig
from .launch import Pointer

__all__ = [
    "MAX_BLOCKS",
    "THREADS",
    "Walk",
    "base",
    "blocks_for",
    "coalesce",
    "coord_words",
    "cuda_device",
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
# Devices, addresses, descriptors
# --------------------------------------------------------------------------


def cuda_device(arrays: Sequence[Array]) -> CudaRig | None:
    """The CUDA device of the first array, or None where it is on another device."""
    if not arrays:
        return None
    dev = arrays[0].device
    return dev if isinstance(dev, CudaRig) else None


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

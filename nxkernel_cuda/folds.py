"""The fold kernel: ``S.fold``, the adjoint of a Padded load (``kernels/fold.cu``).

Rules:

* Each element of dst is +0 plus every element of x that a Padded load by
  ``spec.pad`` reads from that index, added one by one in C order of the taps
  (the window axes), in the carrier: float32 for float32 and the narrow
  floats, float64 for float64, a complex number part by part in its part
  dtype, integers in 64 bits wrapping. Then the sum rounds once into dst
  (integers keep their low bits). An element no tap reads is +0.
* One thread owns each element of dst and walks its taps itself: no atomics
  and no split, so the bits are the same on every launch, on cuda-emu and on
  a GPU, and they are the host library's (``nxkernel_host.fold.fold``
  adds tap by tap in the same order, from +0, in the same carrier) but for
  a NaN result's bits, which the contract leaves open.
* Bound: a dst element read by t taps is t − 1 roundings from the exact sum
  (the first addition, to +0, is exact): within γ(t − 1) Σ|x| before the
  rounding into dst (Higham, Thm. 4.1's recursive summation).
* Operands and destinations of any layout (strided, broadcast, offset,
  reversed), read and written in place.
* Declines nothing. bool and bit, which Prog's Add does not take, do not fit
  (``WRONG_DTYPE``, ``shape.fold_refusal``, as the caller refuses them).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Final

import numpy as np

from nxkernel_core import dtype as D
from nxkernel_core import spec as S
from nxkernel_core.array import Array
from nxkernel_core.dtype import Dtype

from . import loops
from .build import Source, file_source
from .launch import Arg, CudaRig

__all__ = ["ASSOCIATION", "ELEMENTS", "KERNELS", "PROSE", "fold", "fold_words", "source"]

#: The element type ``kernels/fold.cu`` instantiates ``nxk_fold`` with, per dtype.
ELEMENTS: Final[dict[Dtype, str]] = {
    D.float64: "NxkFoldF64", D.float32: "NxkFoldF32", D.float16: "NxkFoldF16",
    D.bfloat16: "NxkFoldBF16", D.float8_e4m3fn: "NxkFoldE4M3", D.float8_e5m2: "NxkFoldE5M2",
    D.float4_e2m1fn: "NxkFoldE2M1", D.int64: "NxkFoldI64", D.uint64: "NxkFoldU64",
    D.int32: "NxkFoldI32", D.uint32: "NxkFoldU32", D.int16: "NxkFoldI16", D.uint16: "NxkFoldU16",
    D.int8: "NxkFoldI8", D.uint8: "NxkFoldU8", D.int4: "NxkFoldI4", D.uint4: "NxkFoldU4",
    D.complex64: "NxkFoldC64", D.complex128: "NxkFoldC128",
}

#: Every kernel of ``kernels/fold.cu``, as launched.
KERNELS: Final = tuple(f"nxk_fold<{e}>" for e in ELEMENTS.values())


@functools.cache
def source() -> Source:
    """``kernels/fold.cu`` with one instantiation per dtype fold computes."""
    return file_source("fold.cu", KERNELS)


def fold_words(spec: S.Fold, dst: Array, x: Array) -> list[int]:
    """The descriptor ``kernels/fold.cu`` reads: rank, windows, offsets, then
    per dst axis (extent, lo, interior + 1, dst stride, x stride and extent
    along that loop axis, its window's index or -1), then per window (step,
    dilation, size, x stride along its tap axis, its axis)."""
    pad, rank = spec.pad, len(spec.shape)
    window = {w.axis: k for k, w in enumerate(pad.windows)}
    words = [rank, len(pad.windows), dst.layout.offset, x.layout.offset]
    for a in range(rank):
        words += [spec.shape[a], pad.lo[a], pad.interior[a] + 1, dst.layout.strides[a],
                  x.layout.strides[a], x.shape[a], window.get(a, -1)]
    for k, w in enumerate(pad.windows):
        words += [w.step, w.dilation, w.size, x.layout.strides[rank + k], w.axis]
    return words


def _launch(dev: CudaRig, spec: S.Fold, dst: Array, x: Array) -> None:
    """Queue the fold of x into dst."""
    n = math.prod(spec.shape)
    if n == 0:
        return
    desc = loops.upload(dev, fold_words(spec, dst, x))
    fn = dev.load(source()).function(f"nxk_fold<{ELEMENTS[x.dtype]}>")
    args: list[Arg] = [desc, np.int64(n), loops.base(dev, dst), loops.base(dev, x)]
    fn((loops.blocks_for(n),), (loops.THREADS,), args)


def fold(spec: S.Fold, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
    """``S.fold`` of a call that fits, its arrays claimed: each element of dst
    is +0 plus every element of x the Padded load by ``spec.pad`` reads from
    it, added in C order of the taps in the carrier, rounded once (see the
    module's doc)."""
    _launch(loops.device_of(dsts), spec, dsts[0], operands[0])


#: What fold computes and declines, in words.
PROSE: Final = (
    "every fold of every dtype Add takes (floats, the narrow floats, integers, complex), any pad "
    "(lo, hi, crops, interior, windows of any size, step and dilation), x and dst of any layout: "
    "each element of dst is +0 plus the x elements the Padded load reads from it, added one by one "
    "in C order of the taps in the carrier (float32 for float32 and narrower, float64 for float64, "
    "complex part by part, integers wrapping), by one thread with no atomics, then rounded once "
    "into dst: the host library's bits but for NaN bits. It declines nothing; bool and bit, which Add "
    "does not take, do not fit (WRONG_DTYPE)."
)

#: The association of each fold element's sum.
ASSOCIATION: Final = (
    "each dst element is +0 plus the x elements its index is read from, added left to right in C "
    "order of the taps (the window axes), one thread an element, no atomics, in the carrier "
    "(float32 for float32 and the narrow floats, float64 for float64, a complex sum part by part): "
    "the host library's order, so its bits but for NaN bits. For t taps read, within "
    "γ(t − 1) Σ|x| of the exact sum (the first addition, to +0, is exact), then rounded once "
    "into the destination. Integers wrap, exactly."
)

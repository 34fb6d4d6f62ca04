"""The SIMT contraction launches (``kernels/contract.cu``): the tiled kernel for
real accumulators without scales or segments, and the one-thread-an-output
kernel for block scales, segments and complex accumulators.

Both compute each output as the same chain (see :mod:`nxkernel_cuda.contraction`):
from +0 over its products in increasing K, each product fused into the
addition that takes it, init added last; so a call's bits do not depend on
which of the two computes it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

from nxkernel_core import dtype as D
from nxkernel_core import spec as S
from nxkernel_core.array import Array
from nxkernel_core.dtype import Dtype

from . import loops
from .build import Source, file_source
from .launch import CudaRig, Pointer

__all__ = ["KERNELS", "Problem", "launch_general", "launch_tiled", "problem", "source", "walks"]

#: The kernels of ``kernels/contract.cu``: tiled, one per real accumulator;
#: general, one per part type and complexity.
KERNELS: Final = ("nxk_contract<float>", "nxk_contract<double>", "nxk_contract<nxk_u64>",
                  "nxk_contract_gen<float, false>", "nxk_contract_gen<double, false>",
                  "nxk_contract_gen<nxk_u64, false>", "nxk_contract_gen<float, true>",
                  "nxk_contract_gen<double, true>")

#: The output tile of a tiled block, its K step and its threads.
TILE_M: Final = 64
TILE_N: Final = 64
TILE_K: Final = 16
THREADS: Final = 256


@functools.cache
def source() -> Source:
    """``kernels/contract.cu`` with its instantiations."""
    return file_source("contract.cu", KERNELS)


@dataclass(frozen=True, slots=True)
class Problem:
    """A call's canonical axes: a's batch, free and contracting axes, b's, and
    the destination's batch, rows and columns axes (a Rows segment's b axis
    is left out of b's free axes; a Contracting segment's groups axis is the
    destination's axis 0, before the batch)."""

    batch_a: list[int]
    batch_b: list[int]
    con_a: list[int]
    con_b: list[int]
    free_a: list[int]
    free_b: list[int]
    d_batch: list[int]
    d_rows: list[int]
    d_cols: list[int]

    def extents(self, a: Array, b: Array) -> tuple[int, int, int, int]:
        """(batch, rows, cols, K): the canonical extents."""
        return (math.prod(a.shape[i] for i in self.batch_a), math.prod(a.shape[i] for i in self.free_a),
                math.prod(b.shape[j] for j in self.free_b), math.prod(a.shape[i] for i in self.con_a))


def problem(spec: S.Contract, a: Array, b: Array) -> Problem:
    """The canonical axes of ``spec`` over a and b."""
    batch_a = [i for i, _ in spec.batch]
    batch_b = [j for _, j in spec.batch]
    con_a = [i for i, _ in spec.contracting]
    con_b = [j for _, j in spec.contracting]
    free_a = [i for i in range(a.rank) if i not in batch_a + con_a]
    seg = spec.segments
    free_b = [j for j in range(b.rank) if j not in batch_b + con_b
              and not (isinstance(seg, S.Rows) and j == seg.b_axis)]
    lead = 1 if isinstance(seg, S.ContractingSegments) else 0
    nb, nr = len(batch_a), len(free_a)
    return Problem(batch_a, batch_b, con_a, con_b, free_a, free_b, list(range(lead, lead + nb)),
                   list(range(lead + nb, lead + nb + nr)),
                   list(range(lead + nb + nr, lead + nb + nr + len(free_b))))


def _strides(x: Array, axes: Sequence[int]) -> tuple[int, list[int]]:
    """(0, strides) of ``x`` along ``axes``: a walk part without the offset."""
    return 0, [x.layout.strides[i] for i in axes]


def walks(pr: Problem, a: Array, b: Array, dst: Array, out: Array,
          ids: tuple[Array, list[int], list[int]] | None = None) -> list[list[int]]:
    """The descriptor words of the batch walk (a, b, dst, out[, ids]), the rows
    walk (a, dst, out[, ids]), the columns walk (b, dst, out) and the K walk
    (a, b[, ids]); ``ids`` (the array, its strides along a's free axes and
    along a's contracting axes) adds the ids parts."""
    batch = [a.shape[i] for i in pr.batch_a]
    rows = [a.shape[i] for i in pr.free_a]
    cols = [b.shape[j] for j in pr.free_b]
    ks = [a.shape[i] for i in pr.con_a]
    bparts = [(a.layout.offset, [a.layout.strides[i] for i in pr.batch_a]),
              (b.layout.offset, [b.layout.strides[j] for j in pr.batch_b]),
              (dst.layout.offset, [dst.layout.strides[i] for i in pr.d_batch]),
              (out.layout.offset, [out.layout.strides[i] for i in pr.d_batch])]
    rparts = [_strides(a, pr.free_a), _strides(dst, pr.d_rows), _strides(out, pr.d_rows)]
    cparts = [_strides(b, pr.free_b), _strides(dst, pr.d_cols), _strides(out, pr.d_cols)]
    kparts = [_strides(a, pr.con_a), _strides(b, pr.con_b)]
    if ids is not None:
        arr, along_rows, along_k = ids
        bparts.append((arr.layout.offset, list(arr.layout.strides[:len(batch)])))
        rparts.append((0, along_rows))
        kparts.append((0, along_k))
    return [loops.walk_words(loops.coalesce(shape, parts))
            for shape, parts in ((batch, bparts), (rows, rparts), (cols, cparts), (ks, kparts))]


def upload_walks(dev: CudaRig, words: Sequence[Sequence[int]]) -> list[Pointer]:
    """The device addresses of the walks ``words``, uploaded as one descriptor."""
    desc = loops.upload(dev, [x for w in words for x in w])
    at = [0]
    for w in words[:-1]:
        at.append(at[-1] + len(w))
    return [desc + 8 * p for p in at]


def _ctype(acc: Dtype) -> str:
    """The C type of a real accumulator or of a complex one's parts."""
    if acc in (D.float32, D.complex64):
        return "float"
    if acc in (D.float64, D.complex128):
        return "double"
    return "nxk_u64"


def launch_tiled(dev: CudaRig, spec: S.Contract, dst: Array, operands: Sequence[Array]) -> None:
    """Queue the tiled kernel: a real accumulator, no scales, no segments."""
    a, b = operands[0], operands[1]
    init = operands[2] if spec.init else None
    pr = problem(spec, a, b)
    nbatch, rows, cols, k = pr.extents(a, b)
    if nbatch * rows * cols == 0:
        return
    bw, rw, cw, kw = upload_walks(dev, walks(pr, a, b, dst, init if init is not None else dst))
    acc = spec.acc
    acc_bytes = 4 if acc is D.float32 else 8
    tiles_m, tiles_n = -(-rows // TILE_M), -(-cols // TILE_N)
    blocks = nbatch * tiles_m * tiles_n
    module = dev.load(source())
    pa, pb, pd = loops.base(dev, a), loops.base(dev, b), loops.base(dev, dst)
    pi = loops.base(dev, init) if init is not None else pd
    module.function(f"nxk_contract<{_ctype(acc)}>")((min(blocks, loops.MAX_BLOCKS),), (THREADS,), [
        bw, rw, cw, kw, np.int64(rows), np.int64(cols), np.int64(k), np.int64(tiles_m),
        np.int64(tiles_n), np.int32(a.dtype.code), np.int32(b.dtype.code),
        np.int32(init.dtype.code if init is not None else -1), np.int32(dst.dtype.code),
        np.int32(dst.dtype is acc), pa, pb, pi, pd, np.int64(blocks)],
        shared_bytes=2 * TILE_K * max(TILE_M, TILE_N) * acc_bytes)


def _scale_map(x: Array, s: Array, axes: Sequence[int], base: int) -> list[int]:
    """The scale map of ``x``'s scale ``s`` over the part of ``x``'s ``axes``
    (in C order): ``[n, base, then (div, ext, block, stride) per axis whose
    scale index moves]``."""
    entries: list[int] = []
    for pos, ax in enumerate(axes):
        ext, sext, stride = x.shape[ax], s.shape[ax], s.layout.strides[ax]
        if sext <= 1 or stride == 0:
            continue
        div = math.prod(x.shape[j] for j in axes[pos + 1:])
        entries += [div, ext, ext // sext, stride]
    return [len(entries) // 4, base, *entries]


#: Scale kinds as the general kernel numbers them.
_KIND: Final = {None: 0, S.ScaleKind.EXPONENT: 1, S.ScaleKind.VALUE: 2}


def launch_general(dev: CudaRig, spec: S.Contract, dst: Array, operands: Sequence[Array]) -> None:
    """Queue the one-thread-an-output kernel: any accumulator, block scales,
    Rows and Contracting segments."""
    a, b = operands[0], operands[1]
    rest = list(operands[2:])
    init = rest.pop(0) if spec.init else None
    scales = [rest.pop(0) if kind is not None else None for kind in spec.scales]
    ids = rest.pop(0) if spec.segments is not None else None
    pr = problem(spec, a, b)
    nbatch, rows, cols, k = pr.extents(a, b)
    seg = spec.segments
    groups = seg.groups if isinstance(seg, S.ContractingSegments) else 1
    outs = groups * nbatch * rows * cols
    if outs == 0:
        return
    out = init if init is not None else dst
    seg_kind, g, b_g, d_g, i_g = 0, 0, 0, 0, 0
    sbg = [1, 0]
    id_parts: tuple[Array, list[int], list[int]] | None = None
    if isinstance(seg, S.Rows):
        assert ids is not None
        seg_kind, g, b_g = 1, b.shape[seg.b_axis], b.layout.strides[seg.b_axis]
        last = ids.layout.strides[-1]
        id_parts = (ids, [last if i == seg.a_axis else 0 for i in pr.free_a], [0] * len(pr.con_a))
        sb = scales[1]
        if sb is not None and sb.shape[seg.b_axis] > 1:
            sbg = [g // sb.shape[seg.b_axis], sb.layout.strides[seg.b_axis]]
    elif isinstance(seg, S.ContractingSegments):
        assert ids is not None
        seg_kind, g = 2, seg.groups
        d_g, i_g = dst.layout.strides[0], out.layout.strides[0]
        pa_axis = spec.contracting[seg.pair][0]
        last = ids.layout.strides[-1]
        id_parts = (ids, [0] * len(pr.free_a), [last if i == pa_axis else 0 for i in pr.con_a])
    # Without segments the kernel's ids parts are dst's offset and no strides, never read.
    wds = walks(pr, a, b, dst, out, id_parts or (dst, [0] * len(pr.free_a), [0] * len(pr.con_a)))
    maps: list[list[int]] = []
    for x, s, parts in ((a, scales[0], (pr.batch_a, pr.free_a, pr.con_a)),
                        (b, scales[1], (pr.batch_b, pr.con_b, pr.free_b))):
        for n, axes in enumerate(parts):
            maps.append(_scale_map(x, s, axes, s.layout.offset if n == 0 else 0) if s is not None
                        else [0, 0])
    codes = [a.dtype.code, b.dtype.code, init.dtype.code if init is not None else -1, dst.dtype.code,
             int(dst.dtype is spec.acc)]
    head = [outs, rows, cols, k, nbatch, seg_kind, g, b_g, d_g, i_g, *codes]
    for kind, s in zip(spec.scales, scales, strict=True):
        head += [_KIND[kind], s.dtype.code if s is not None else -1]
    head += sbg
    plan = loops.upload(dev, loops.packed(head, [*wds, *maps]))
    pd = loops.base(dev, dst)

    def ptr(x: Array | None) -> Pointer:
        return loops.base(dev, x) if x is not None else pd

    cx = "true" if spec.acc.is_complex else "false"
    module = dev.load(source())
    module.function(f"nxk_contract_gen<{_ctype(spec.acc)}, {cx}>")(
        (loops.blocks_for(outs, THREADS),), (THREADS,),
        [plan, ptr(a), ptr(b), ptr(init), pd, ptr(scales[0]), ptr(scales[1]), ptr(ids)])

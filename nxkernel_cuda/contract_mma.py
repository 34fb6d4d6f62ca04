"""The tensor-core contraction (``kernels/contract_mma.cu``): mma.sync on sm_80
and later (and its plain C++ model on ``cuda-emu``).

Which calls take it depends on dtypes, attributes and the device model alone
(:func:`takes`): a float32 accumulator with a and b both bfloat16 or both
float16 (m16n8k8), int32 with a and b int8, uint32 with a and b uint8
(m16n8k32); no block scales; unsegmented or with Rows or Contracting
segments; init and dst as the SIMT kernels take them. Float8 operands stay on
the SIMT kernels: the float8 tensor-core paths of sm_89/sm_90 keep fewer
accumulator bits than float32 (13 fraction bits reported on sm_90), outside
the bound nx.cuda states; so do segments of other dtypes.

Order (deterministic): each instruction sums 8 products of consecutive k
(float) or 32 (integer) from C = 0; its result is added into the output's
accumulator, a chain from +0 rounded to nearest in increasing k, no split of
K, no atomics; init added last.

Bound, float32 (u = 2^-24): the tensor core's products are exact; an
instruction's sum of its m nonzero products, aligned to the largest and
truncated (Fasi, Higham, Mikaitis, Pranesh 2021: no extra bits, truncation),
errs by at most (m - 1) ulps of the largest plus one truncation of the sum, so
at most 2u·m Σ|p| (u doubled for truncation), 0 at m = 1; the chain of
T = ⌈K/8⌉ instruction results rounds each term at most T - 1 more times and
init once more: e(K) = γ(2·min(K, 8) + ⌈K/8⌉) ≤ γ(2K + 2). This assumes an
m16n8k8 instruction fuses its 8 products in one block (sm_80 fuses 8, Fasi et
al.; later parts as many or more, with as many or more alignment bits); a part
that chained smaller blocks with truncation could exceed it. No GPU has
checked it here. Integers: exact, wrapping.

Segments, one launch of the kernel for all groups after a pre-pass of three
small launches (per batch index a stable counting sort of the segmented
axis's indices by group, ids outside [0, g) a last bucket of no group, from
ids on the device: nothing is read back, no atomics): Rows take blocks
(batch, tile, column tile) over an upper bound of tiles (⌈rows/64⌉ + g a
batch index), each tile 64 rows of one group gathered through the
permutation (rows in no group a tile of their own, without products: init or
+0), b from the group's slice; Contracting blocks (group, batch, tile, column
tile), K the group's indices in increasing order through the permutation.
Each output's products and their order are those of the unsegmented path on
gathered operands, so are its bits, and its bound is e(K) of the group's K.

On cuda-emu the instruction is the plain C++ model of ``kernels/nxk_mma.cuh``
(that measurement: truncation toward zero, no extra bits); a GPU's bits may
differ from it, both within the bound.
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
from nxkernel_core.kernel import gamma, unit_roundoff
from nxkernel_core.rig import Buffer

from . import loops
from .build import Source, file_source
from .contract_simt import problem, upload_walks, walks
from .device import CudaRig
from .launch import Pointer

__all__ = ["KERNELS", "error_factor", "kind", "launch", "source", "takes"]

#: The kernels of ``kernels/contract_mma.cu``: bfloat16, float16, int8, uint8;
#: the segments' pre-pass.
KERNELS: Final = ("nxk_contract_mma<0>", "nxk_contract_mma<1>", "nxk_contract_mma<2>",
                  "nxk_contract_mma<3>", "nxk_cm_count", "nxk_cm_offsets", "nxk_cm_place")

#: The output tile of a block, its K step, its threads and its staged row's bytes past 32 elements.
TILE_M: Final = 64
TILE_N: Final = 64
TILE_K: Final = 32
THREADS: Final = 128
PAD: Final = 16

#: (acc, operand dtype) -> the kernel's KIND.
_KINDS: Final = {(D.float32, D.bfloat16): 0, (D.float32, D.float16): 1, (D.int32, D.int8): 2,
                 (D.uint32, D.uint8): 3}

#: The least architecture with mma.sync of these shapes and types.
MIN_ARCH: Final = 80

#: Products a float instruction sums.
K_STEP: Final = 8

#: The pre-pass: indices a warp walks, warps a block, threads a block.
SPAN: Final = 1024
SORT_WARPS: Final = 4
SORT_THREADS: Final = 128


@functools.cache
def source() -> Source:
    """``kernels/contract_mma.cu`` with its four instantiations."""
    return file_source("contract_mma.cu", KERNELS)


def kind(spec: S.Contract, operands: Sequence[Dtype]) -> int | None:
    """The tensor-core kernel's KIND for these dtypes, or None."""
    if any(s is not None for s in spec.scales):
        return None
    if operands[0] is not operands[1]:
        return None
    return _KINDS.get((spec.acc, operands[0]))


def takes(dev: CudaRig, spec: S.Contract, operands: Sequence[Dtype]) -> bool:
    """Whether a computed call of these dtypes takes the tensor cores on ``dev``."""
    return dev.arch_number >= MIN_ARCH and kind(spec, operands) is not None


def error_factor(k: int) -> float:
    """e(K) of the float tensor-core path: γ(2·min(K, 8) + ⌈K/8⌉), u float32's
    (see the module's doc); 0 at K = 0."""
    if k == 0:
        return 0.0
    return gamma(2 * min(k, K_STEP) + -(-k // K_STEP), unit_roundoff(D.float32))


@dataclass(frozen=True, slots=True)
class _Groups:
    """The pre-pass's tables of a segmented call (device addresses): perm
    [nbatch][n] the segmented axis's indices by bucket, starts and tstarts
    [nbatch][g + 2] each bucket's first slot and first tile of 64 (bucket g: no
    group; the last entry the total); buf holds them until queued."""

    perm: Pointer
    starts: Pointer
    tstarts: Pointer
    buf: Buffer


def _sort(dev: CudaRig, ids: Array, batch: Sequence[int], seq: Sequence[int], seq_strides: Sequence[int],
          groups: int) -> _Groups:
    """Queue the pre-pass: per batch index (``batch``, ids's leading axes), the
    indices 0..n of ``seq`` (n its product; ``seq_strides`` ids's strides along
    it) stably sorted by their id's bucket (the id in [0, groups), else
    ``groups``)."""
    nbatch, n = math.prod(batch), math.prod(seq)
    nb = groups + 1
    nw = max(1, -(-n // SPAN))
    bwords = loops.walk_words(loops.coalesce(batch, [(ids.layout.offset, ids.layout.strides[:len(batch)])]))
    swords = loops.walk_words(loops.coalesce(seq, [(0, seq_strides)]))
    bw, sw = upload_walks(dev, [bwords, swords])
    # One buffer: starts, tstarts [nbatch][nb + 1], counts [nbatch][nw][nb], perm [nbatch][n].
    at = np.cumsum([0, nbatch * (nb + 1), nbatch * (nb + 1), nbatch * nw * nb, nbatch * n]).tolist()
    buf, base = loops.scratch(dev, 8 * at[-1])
    starts, tstarts, cnt, perm = (base + 8 * p for p in at[:4])
    blocks = nbatch * -(-nw // SORT_WARPS)
    grid = (min(blocks, loops.MAX_BLOCKS),)
    module = dev.load(source())
    pid = loops.base(dev, ids)
    module.function("nxk_cm_count")(grid, (SORT_THREADS,), [
        bw, sw, pid, np.int64(n), np.int64(groups), np.int64(nw), cnt, np.int64(blocks)])
    module.function("nxk_cm_offsets")((min(nbatch, loops.MAX_BLOCKS),), (SORT_THREADS,), [
        np.int64(nbatch), np.int64(groups), np.int64(nw), cnt, starts, tstarts])
    module.function("nxk_cm_place")(grid, (SORT_THREADS,), [
        bw, sw, pid, np.int64(n), np.int64(groups), np.int64(nw), cnt, perm, np.int64(blocks)])
    return _Groups(perm, starts, tstarts, buf)


def launch(dev: CudaRig, spec: S.Contract, dst: Array, operands: Sequence[Array]) -> None:
    """Queue the tensor-core kernel into dst (a call :func:`takes` admits),
    after the segments' pre-pass where the call has segments."""
    a, b = operands[0], operands[1]
    init = operands[2] if spec.init else None
    ids = operands[-1] if spec.segments is not None else None
    knd = kind(spec, [a.dtype, b.dtype])
    assert knd is not None
    pr = problem(spec, a, b)
    nbatch, rows, cols, k = pr.extents(a, b)
    seg = spec.segments
    lead = seg.groups if isinstance(seg, S.ContractingSegments) else 1
    if lead * nbatch * rows * cols == 0:
        return
    out = init if init is not None else dst
    bw, rw, cw, kw = upload_walks(dev, walks(pr, a, b, dst, out))
    tiles_m, tiles_n = -(-rows // TILE_M), -(-cols // TILE_N)
    pd = loops.base(dev, dst)
    seg_kind, groups, b_g, d_g, i_g, n = 0, 0, 0, 0, 0, 0
    tables: _Groups | None = None
    batch = [a.shape[i] for i in pr.batch_a]
    if isinstance(seg, S.Rows):
        assert ids is not None
        seg_kind, groups, b_g, n = 1, b.shape[seg.b_axis], b.layout.strides[seg.b_axis], rows
        tiles_m += groups  # a bound: each of the g + 1 buckets adds at most one partial tile
        tables = _sort(dev, ids, batch, [a.shape[i] for i in pr.free_a],
                       [ids.layout.strides[-1] if i == seg.a_axis else 0 for i in pr.free_a], groups)
    elif isinstance(seg, S.ContractingSegments):
        assert ids is not None
        seg_kind, groups, n = 2, seg.groups, k
        d_g, i_g = dst.layout.strides[0], out.layout.strides[0]
        pair = spec.contracting[seg.pair][0]
        tables = _sort(dev, ids, batch, [a.shape[i] for i in pr.con_a],
                       [ids.layout.strides[-1] if i == pair else 0 for i in pr.con_a], groups)
    blocks = lead * nbatch * tiles_m * tiles_n
    stride = TILE_K * a.dtype.itemsize + PAD
    pi = loops.base(dev, init) if init is not None else pd
    module = dev.load(source())
    module.function(f"nxk_contract_mma<{knd}>")((min(blocks, loops.MAX_BLOCKS),), (THREADS,), [
        bw, rw, cw, kw, np.int64(rows), np.int64(cols), np.int64(k), np.int64(tiles_m),
        np.int64(tiles_n), np.int32(init.dtype.code if init is not None else -1),
        np.int32(dst.dtype.code), np.int32(dst.dtype is spec.acc), loops.base(dev, a),
        loops.base(dev, b), pi, pd, np.int64(blocks), np.int32(seg_kind), np.int64(nbatch),
        tables.perm if tables else pd, tables.starts if tables else pd, tables.tstarts if tables else pd,
        np.int64(n), np.int64(groups), np.int64(b_g), np.int64(d_g), np.int64(i_g)],
        shared_bytes=(TILE_M + TILE_N) * stride)
    del tables  # queued work holds no reference: the stream orders the buffer's reuse

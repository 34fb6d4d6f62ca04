"""The tensor-core contraction (``kernels/contract_mma.cu``): mma.sync on sm_80
and later (and its plain C++ model on ``cuda-emu``).

Which calls take it depends on dtypes, attributes, the extents and the
device model alone (:func:`takes`): a float32 accumulator with a and b each
float16, float8_e4m3fn, float8_e5m2 or float4_e2m1fn (float16 m16n8k8), or
each bfloat16 or one of those float8/float4 (bfloat16 m16n8k8; float16 with
bfloat16 stays SIMT: neither holds the other); int32 with a and b each int8
or int4, uint32 with a and b each uint8 or uint4 (m16n8k32); unscaled, or
with Exponent scales (no segments, or Rows) where :func:`scales_fit` holds; no Value
scales; unsegmented or with Rows or Contracting segments; init and dst as the
SIMT kernels take them. Segments of other dtypes stay on the SIMT kernels.

Narrow operands are widened exactly at staging (runtime dtype codes, no
further instantiations): every float8_e4m3fn, float8_e5m2 and float4_e2m1fn
value is a float16 and a bfloat16 value (a NaN a NaN), int4 and uint4 an
int8 and a uint8 one; so a call's bits are those of the float16, bfloat16 or
int8/uint8 path on operands widened beforehand, and its bound the one below.
The native float8 mma instructions stay unused: the float8 tensor-core paths
of sm_89/sm_90 keep fewer accumulator bits than float32 (13 fraction bits
reported on sm_90), outside the bound nx.cuda states; float8 and float4 now
take the float16/bfloat16 instruction instead.

Exponent (e8m0) block scales: an element is a·2^(e − 127), code 255 NaN.
Scaling by a power of two commutes with the instruction's exact products, its
alignment to the largest and its truncations, so an instruction whose 8
products share one scale block of a and one of b gives its unscaled result d
times 2^(ea + eb − 254). :func:`scales_fit` admits a call only where that
holds for every output, from the extents alone: for each scaled operand, K =
0, or the scale's extent 1 along every contracting axis, or the innermost
contracting pair's extent n and the scale block along it (n over the scale's
extent) both multiples of 8 (then each aligned run of 8 k lies within one
index of the outer pairs and one block: MXFP8/MXFP4 blocks of 32 along K);
other layouts take the SIMT kernel (one thread an output), as do scaled
calls with Contracting segments (a group's runs of 8 products need not share
a block); under Rows, a row's codes are its own (through the permutation)
and b's are its group's. The kernel stages each run's two codes beside the tiles
and forms d·2^(ea + eb − 254) in float32 without forming the product of the
scales (whose exponent, in [−254, 254], may exceed float32's range where
neither factor does): exact where the result is a normal float32 or zero;
below 2^-126 it rounds once to nearest (underflow: at most 2^-150 an
instruction, which the contract's bound bars as it bars the SIMT path's
subnormal scaled elements); above the finite range it is an infinity
(overflow, likewise barred; where the exact value is in range it is finite,
while the SIMT path's scaled element may already overflow); code 255 makes it
NaN. Barring those, e(K) below holds unchanged: the scaled instruction result
is within 2u·m·Σ|p| of its scaled products' sum, the chain as before.

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
from .contract_simt import Problem, problem, upload_walks, walks
from .launch import CudaRig, Pointer

__all__ = ["KERNELS", "error_factor", "kind", "launch", "run_mode", "scale_map", "scales_fit", "source",
           "takes"]

#: The kernels of ``kernels/contract_mma.cu``: bfloat16, float16, int8, uint8
#: staging (narrower operands widened into them at run time); the segments'
#: pre-pass.
KERNELS: Final = ("nxk_contract_mma<0>", "nxk_contract_mma<1>", "nxk_contract_mma<2>",
                  "nxk_contract_mma<3>", "nxk_cm_count", "nxk_cm_offsets", "nxk_cm_place")

#: The output tile of a block, its K step, its threads and its staged row's bytes past 32 elements.
TILE_M: Final = 64
TILE_N: Final = 64
TILE_K: Final = 32
THREADS: Final = 128
PAD: Final = 16

#: Narrow float operands: each value is exactly a float16 and a bfloat16 value.
_NARROW: Final = frozenset({D.float8_e4m3fn, D.float8_e5m2, D.float4_e2m1fn})
#: Operands staged as float16 (KIND 1) and as bfloat16 (KIND 0) codes.
_AS_F16: Final = _NARROW | {D.float16}
_AS_BF16: Final = _NARROW | {D.bfloat16}
#: (integer accumulator, operands staged as its 8-bit codes, KIND).
_INT_KINDS: Final = ((D.int32, frozenset({D.int8, D.int4}), 2), (D.uint32, frozenset({D.uint8, D.uint4}), 3))

#: The staged code's bytes per KIND (16-bit floats, 8-bit integers).
STAGED_BYTES: Final = (2, 2, 1, 1)
#: The staged dtypes per KIND: operands of these are staged as they are.
_STAGED: Final = (D.bfloat16, D.float16, D.int8, D.uint8)

#: Runs of K_STEP k a K step holds, and the staged scale codes' bytes.
RUNS: Final = TILE_K // 8
SCALE_BYTES: Final = (TILE_M + TILE_N) * RUNS

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
    """The tensor-core kernel's KIND for these dtypes and attributes, or None:
    float32 from a and b each float16 or narrower float (1: float16 codes) or
    each bfloat16 or narrower float (0: bfloat16 codes); int32 from int8 or
    int4 (2), uint32 from uint8 or uint4 (3); Exponent scales on the float
    kinds, unsegmented or with Rows segments, no Value scales."""
    scaled = any(s is not None for s in spec.scales)
    if scaled and (isinstance(spec.segments, S.ContractingSegments) or not spec.acc.is_float
                   or any(s is S.ScaleKind.VALUE for s in spec.scales)):
        return None
    a, b = operands[0], operands[1]
    if spec.acc is D.float32:
        if a in _AS_F16 and b in _AS_F16:
            return 1
        if a in _AS_BF16 and b in _AS_BF16:
            return 0
        return None
    for acc, ops, knd in _INT_KINDS:
        if spec.acc is acc and a in ops and b in ops:
            return knd
    return None


def _scale_positions(spec: S.Contract) -> list[int | None]:
    """The operand positions of a's and b's scales (None: no scale)."""
    at = 2 + int(spec.init)
    out: list[int | None] = []
    for sk in spec.scales:
        out.append(at if sk is not None else None)
        at += sk is not None
    return out


def scales_fit(spec: S.Contract, shapes: Sequence[Sequence[int]]) -> bool:
    """Whether every aligned run of K_STEP consecutive k (C order of the
    contracting pairs) of an output lies in one scale block of each scaled
    operand, from the extents alone (a sufficient condition): K = 0, or the
    scale's extent 1 along every contracting axis of its operand, or the
    innermost contracting pair's extent n and the scale block n / s along it
    both multiples of 8 (a run then lies within one index of the outer pairs
    and within one block along the innermost one)."""
    for side, pos in enumerate(_scale_positions(spec)):
        if pos is None or not spec.contracting:
            continue
        x, s = shapes[side], shapes[pos]
        axes = [p[side] for p in spec.contracting]
        if any(x[ax] == 0 for ax in axes) or all(s[ax] == 1 for ax in axes):
            continue
        n, sn = x[axes[-1]], s[axes[-1]]
        if n % K_STEP or (n // sn) % K_STEP:
            return False
    return True


def takes(dev: CudaRig, spec: S.Contract, operands: Sequence[Dtype],
          shapes: Sequence[Sequence[int]] | None = None) -> bool:
    """Whether a computed call of these dtypes (and, for block scales, operand
    ``shapes``: without them a scaled call does not) takes the tensor cores on
    ``dev``."""
    if dev.arch_number < MIN_ARCH or kind(spec, operands) is None:
        return False
    if any(s is not None for s in spec.scales):
        return shapes is not None and scales_fit(spec, shapes)
    return True


def scale_map(x: Array, s: Array, axes: Sequence[int], base: int) -> list[int]:
    """The scale map of ``x``'s scale ``s`` over the canonical part of
    ``x``'s ``axes`` (C order): ``[n, base, then (div, ext, block, stride)
    per axis whose scale index moves]`` (contract.cu's layout)."""
    entries: list[int] = []
    for pos, ax in enumerate(axes):
        ext, sext, stride = x.shape[ax], s.shape[ax], s.layout.strides[ax]
        if sext <= 1 or stride == 0:
            continue
        entries += [math.prod(x.shape[j] for j in axes[pos + 1:]), ext, ext // sext, stride]
    return [len(entries) // 4, base, *entries]


def _scale_words(pr: Problem, a: Array, b: Array, sa: Array | None, sb: Array | None) -> list[int]:
    """The kernel's smap: six offsets, then the maps of a's batch, rows and K
    and of b's batch, K and columns ([0, 0] for a side without a scale)."""
    maps: list[list[int]] = []
    sides = ((a, sa, (pr.batch_a, pr.free_a, pr.con_a)), (b, sb, (pr.batch_b, pr.con_b, pr.free_b)))
    for x, s, parts in sides:
        for n, axes in enumerate(parts):
            maps.append(scale_map(x, s, axes, s.layout.offset if n == 0 else 0) if s is not None else [0, 0])
    at = [6]
    for m in maps[:-1]:
        at.append(at[-1] + len(m))
    return [*at, *(w for m in maps for w in m)]


def _group_scale(seg: S.Rows | S.ContractingSegments | None, b: Array, sb: Array | None) -> list[np.int64]:
    """b's scale block and stride along b's groups axis (Rows, b scaled), else 1 and 0."""
    if not isinstance(seg, S.Rows) or sb is None or sb.shape[seg.b_axis] <= 1:
        return [np.int64(1), np.int64(0)]
    ax = seg.b_axis
    return [np.int64(b.shape[ax] // sb.shape[ax]), np.int64(sb.layout.strides[ax])]


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


def run_mode(x: Array, knd: int, runs_k: Sequence[int], lines: Sequence[int], others: Sequence[int],
             lines_ok: bool) -> int:
    """How the kernel stages operand x by 16-byte runs of V = 16 / staged bytes
    codes (0: code by code): 1 along its innermost contracting axis ``runs_k[-1]``,
    2 along its innermost free axis ``lines[-1]`` (where ``lines_ok``), each
    where that axis has stride 1, holds whole runs (a multiple of V, or it is
    the only axis of its kind), x's offset and its strides along every other
    axis it walks (``others``, and the other of those two kinds) are multiples
    of V (so every run starts 16-byte aligned), and x is of the staged dtype
    (no widening). A function of the layouts alone; the bits do not depend on
    it."""
    if x.dtype is not _STAGED[knd]:
        return 0
    v = 16 // STAGED_BYTES[knd]
    st, sh = x.layout.strides, x.shape

    def fits(run: Sequence[int], rest: Sequence[int]) -> bool:
        if not run or st[run[-1]] != 1 or (len(run) > 1 and sh[run[-1]] % v):
            return False
        return x.layout.offset % v == 0 and all(st[i] % v == 0 for i in [*run[:-1], *rest])

    if fits(runs_k, [*lines, *others]):
        return 1
    if lines_ok and fits(lines, [*runs_k, *others]):
        return 2
    return 0


def launch(dev: CudaRig, spec: S.Contract, dst: Array, operands: Sequence[Array]) -> None:
    """Queue the tensor-core kernel into dst (a call :func:`takes` admits),
    after the segments' pre-pass where the call has segments."""
    a, b = operands[0], operands[1]
    init = operands[2] if spec.init else None
    ids = operands[-1] if spec.segments is not None else None
    knd = kind(spec, [a.dtype, b.dtype])
    assert knd is not None
    spos = _scale_positions(spec)
    sa, sb = (operands[p] if p is not None else None for p in spos)
    pr = problem(spec, a, b)
    nbatch, rows, cols, k = pr.extents(a, b)
    seg = spec.segments
    lead = seg.groups if isinstance(seg, S.ContractingSegments) else 1
    if lead * nbatch * rows * cols == 0:
        return
    out = init if init is not None else dst
    bw, rw, cw, kw, smap = upload_walks(dev, [*walks(pr, a, b, dst, out), _scale_words(pr, a, b, sa, sb)])
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
    stride = TILE_K * STAGED_BYTES[knd] + PAD
    # Runs: not along a contracting axis cut into groups, nor along a's rows gathered by group.
    contracting = not isinstance(seg, S.ContractingSegments)
    b_others = [*pr.batch_b, *([seg.b_axis] if isinstance(seg, S.Rows) else [])]
    a_mode = run_mode(a, knd, pr.con_a, pr.free_a, pr.batch_a, seg is None) if contracting else 0
    b_mode = run_mode(b, knd, pr.con_b, pr.free_b, b_others, True) if contracting else 0
    pi = loops.base(dev, init) if init is not None else pd
    module = dev.load(source())
    module.function(f"nxk_contract_mma<{knd}>")((min(blocks, loops.MAX_BLOCKS),), (THREADS,), [
        bw, rw, cw, kw, np.int64(rows), np.int64(cols), np.int64(k), np.int64(tiles_m),
        np.int64(tiles_n), np.int32(init.dtype.code if init is not None else -1),
        np.int32(dst.dtype.code), np.int32(dst.dtype is spec.acc), loops.base(dev, a),
        loops.base(dev, b), pi, pd, np.int64(blocks), np.int32(seg_kind), np.int64(nbatch),
        tables.perm if tables else pd, tables.starts if tables else pd, tables.tstarts if tables else pd,
        np.int64(n), np.int64(groups), np.int64(b_g), np.int64(d_g), np.int64(i_g),
        np.int32(a.dtype.code), np.int32(b.dtype.code), np.int32((sa is not None) + 2 * (sb is not None)),
        loops.base(dev, sa) if sa is not None else pd, loops.base(dev, sb) if sb is not None else pd, smap,
        np.int32(a_mode), np.int32(b_mode), *_group_scale(seg, b, sb)],
        shared_bytes=(TILE_M + TILE_N) * stride + SCALE_BYTES)
    del tables  # queued work holds no reference: the stream orders the buffer's reuse

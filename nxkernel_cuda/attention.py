"""The attention kernel: fused flash attention, one CUDA source generated per
program, dtypes and head dimensions (``kernels/nxk_attention.cuh``).

Calls whose q, k and v are all bfloat16 or all float16 into a float32
accumulator take the tensor-core kernel of :mod:`nxkernel_cuda.attention_mma`
where it fits (:func:`kernel_for`); the rules below are the SIMT kernel's,
and those that module states differently (q·k and weighted values by
mma.sync, weights rounded into v's dtype, hidden values in a read tile) are
its own. Both take the same launch arguments.

Rules:

* A block of 4 warps owns a tile of ``BM = 4·R`` query rows of one (lead
  index, query head) and one split of its keys; warp w owns rows ``w·R`` to
  ``w·R + R − 1`` of the tile. Key tiles of ``BN`` keys (32 or 64) stream
  through shared memory with the query tile, every element widened exactly
  into the accumulator A (float32 or float64) on its load; query head h
  reads key head ``h // (hq / hk)``; Dense keys by their strides, Paged keys
  through the table (an entry outside ``[0, pages)`` hides the key, which is
  never read); keys at or past the lead index's length are never read.
* Per pair: ``q·k`` a chain from +0 in increasing d (``nxk_attn_qk``), then
  the score ``s × q·k`` (s rounded to A, one rounding), then the program
  (:mod:`nxkernel_cuda.codegen`) over the score and the loads at the pair,
  its Coord nodes reading the key (axis 0), the row (1), the head (2) and
  the lead indices; output 0 hides the pair, output 1 is its logit x.
* Online softmax per row (FlashAttention-2): the running maximum m
  (NaN-propagating), e = exp(x − m) per visible pair (0 where m is −∞), the
  tile's Σ e (each lane its keys in order, then a 5-level xor butterfly),
  ``l = l·α + Σ e`` and the weighted values ``acc = acc·α`` then ``+ e·v``
  in key order (``nxk_attn_wv``), α = exp(m_old − m_new), exactly 1 where
  the maximum did not move. A hidden pair adds nothing anywhere, so a NaN or
  an infinity at a hidden pair never reaches o or lse (SIMT).
* Splits: where the blocks of (lead, head, row tile) are fewer than
  ``TARGET_BLOCKS`` (decode: tq = 1, long tk), the keys are cut into at most
  ``MAX_SPLITS`` splits of whole key tiles, a function of the extents alone;
  each leaves (m, l, acc) in scratch and ``kernels/attention.cu`` folds them
  in split order. No atomics: the bits are the same on every launch.
* A row of no visible pair or of only −∞ outputs: o = +0, lse = −∞; the
  maximum +∞: lse = +∞ (o a NaN); a NaN output: NaNs. o = acc / l + 0,
  rounded once into its dtype; lse = m + ln l (in double for float32),
  rounded once into A.
* Masks of the form ``key ≤ row + c`` (``key < row + c``), alone or And-ed
  with anything (causal attention), give each row tile its last key, so key
  tiles no row of it sees are skipped (the program still runs per pair).
* Declined (before any array is touched, as :func:`declines` says): Padded
  loads, a float64 q, k or v with a float32 accumulator (they do not widen
  into it), head dimensions whose tiles do not fit ``SHARED_BYTES`` of
  shared memory (float32: dk = dv up to 174; float64: up to 86), and an o
  identical to k or v (other blocks would read what it writes; an o
  identical to q or to a load is computed: a block reads those only at its
  own rows, before it writes them).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, final

import numpy as np

from nxkernel_core import dtype as D
from nxkernel_core import spec as S
from nxkernel_core.array import Array
from nxkernel_core.dtype import Dtype
from nxkernel_core.kernel import Call, unit_roundoff
from nxkernel_core.prog import Binary, Compare, Const, Convert, Coord, Op1, Op2, Prog

from . import attention_mma, codegen, loops
from .attention_code import COMBINE_KERNELS, KERNEL, Tiles, attention_code, attention_source, combine_source
from .build import Source
from .launch import Arg, CudaRig

__all__ = [
    "ALGORITHM",
    "ASSOCIATION",
    "COMBINE_KERNELS",
    "KERNEL",
    "PROSE",
    "Kernel",
    "Tiles",
    "attention",
    "attention_code",
    "attention_source",
    "combine_source",
    "declines",
    "epsilon",
    "kernel_for",
    "tiles_for",
]

#: Threads (4 warps) of an attention block.
THREADS: Final = 128
#: Shared memory a block's tiles may take: CUDA's static limit, with no opt-in.
SHARED_BYTES: Final = 48 * 1024
#: (rows per warp R, keys per tile BN), tried in order: the first whose tiles fit.
CONFIGS: Final = ((8, 64), (4, 64), (4, 32), (2, 32), (1, 32))
#: Blocks below which the keys are split (a constant: never the device's SM count).
TARGET_BLOCKS: Final = 256
#: Splits of a row's keys, at most.
MAX_SPLITS: Final = 32
#: Key tiles a split holds, at least.
MIN_TILES_PER_SPLIT: Final = 4


def shared_bytes(tiles: Tiles, dk: int, dv: int, acc: Dtype) -> int:
    """Dynamic shared memory of a block: the keys' and values' element offsets
    (int64, BN each), then in the accumulator q [BM; dk], kᵀ [dk; BN + 1],
    v [BN; dv] and the weights [BM; BN]."""
    a = acc.itemsize
    bm, bn = tiles.bm, tiles.keys
    return 16 * bn + a * (bm * dk + dk * (bn + 1) + bn * dv + bm * bn)


def tiles_for(dk: int, dv: int, acc: Dtype) -> Tiles | None:
    """The first of ``CONFIGS`` whose tiles fit ``SHARED_BYTES``, or None: a
    function of dk, dv and the accumulator alone."""
    for rows, keys in CONFIGS:
        t = Tiles(rows, keys)
        if shared_bytes(t, dk, dv, acc) <= SHARED_BYTES:
            return t
    return None


# --------------------------------------------------------------------------
# What it declines
# --------------------------------------------------------------------------


def _reason(spec: S.Attention, dtypes: Sequence[Dtype], dk: int, dv: int) -> str | None:
    """Why nx.cuda declines this attention (q, k, v of ``dtypes``), or None."""
    padded = [i for i, ld in enumerate(spec.loads) if isinstance(ld, S.Padded)]
    if padded:
        return f"load {padded[0]} is Padded, and nx.cuda's attention reads Plain loads only"
    if spec.acc is D.float32 and D.float64 in dtypes:
        return "a float64 q, k or v does not widen into the float32 accumulator"
    if tiles_for(dk, dv, spec.acc) is None:
        return (f"head dimensions dk = {dk}, dv = {dv} with a {spec.acc.name} accumulator: the tiles "
                f"do not fit {SHARED_BYTES // 1024} KiB of shared memory")
    return None


def _aliasing_reason(dsts: Sequence[Array], operands: Sequence[Array]) -> str | None:
    """Why a call whose o is k or v itself is declined (other blocks would
    read the keys or values it writes), or None."""
    if dsts and any(x.identical(dsts[0]) for x in operands[1:3]):
        return "nx.cuda declines an attention whose o is k or v itself"
    return None


def declines(call: Call) -> str | None:
    """Why ``attention`` declines ``call`` (one that fits), or None where it
    computes it."""
    spec = call.spec
    assert isinstance(spec, S.Attention)
    ops = call.operands
    why = _reason(spec, [o.dtype for o in ops[:3]], ops[0].shape[-1], ops[2].shape[-1])
    return why if why is not None else _aliasing_reason(call.dsts, ops)


# --------------------------------------------------------------------------
# Causal limits: key ≤ row + c
# --------------------------------------------------------------------------

#: Offsets beyond this are not used: row + c stays far from int64's wrap.
_SAFE: Final = 1 << 60


def _row_plus(prog: Prog, i: int) -> int | None:
    """c where node i is the int64 value ``row + c`` (Coord 1, plus or minus a
    constant), else None."""
    node = prog.nodes[i]
    if prog.dtype(i) is not D.int64:
        return None
    if isinstance(node, Coord):
        return 0 if node.axis == 1 else None
    if isinstance(node, Op1) and node.kind is Convert.COPY:
        return _row_plus(prog, node.x)
    if isinstance(node, Op2) and node.kind in (Binary.ADD, Binary.SUB):
        x, y = prog.nodes[node.x], prog.nodes[node.y]
        if isinstance(y, Const):
            c = int(np.frombuffer(y.bits, dtype="<i8")[0])
            base = _row_plus(prog, node.x)
            if base is not None and abs(c) < _SAFE:
                return base + c if node.kind is Binary.ADD else base - c
        if isinstance(x, Const) and node.kind is Binary.ADD:
            c = int(np.frombuffer(x.bits, dtype="<i8")[0])
            base = _row_plus(prog, node.y)
            if base is not None and abs(c) < _SAFE:
                return base + c
    return None


def _is_key(prog: Prog, i: int) -> bool:
    node = prog.nodes[i]
    if isinstance(node, Op1) and node.kind is Convert.COPY:
        return _is_key(prog, node.x)
    return isinstance(node, Coord) and node.axis == 0 and prog.dtype(i) is D.int64


def _limit(prog: Prog, i: int) -> int | None:
    """c such that bool node i holds only where ``key ≤ row + c``, or None
    where the program shows none (Compare of Coord 0 with Coord 1 plus a
    constant, through Copy and And)."""
    node = prog.nodes[i]
    if isinstance(node, Op1) and node.kind is Convert.COPY:
        return _limit(prog, node.x)
    if not isinstance(node, Op2):
        return None
    if node.kind is Binary.AND and prog.dtype(i) is D.bool_:
        got = [c for c in (_limit(prog, node.x), _limit(prog, node.y)) if c is not None]
        return min(got) if got else None
    if node.kind in (Compare.LESS, Compare.LESS_EQUAL) and _is_key(prog, node.x):
        c = _row_plus(prog, node.y)
        if c is not None:
            return c if node.kind is Compare.LESS_EQUAL else c - 1
    return None


def key_limit(prog: Prog) -> int | None:
    """c where program output 0 implies ``key ≤ row + c``, else None."""
    return _limit(prog, prog.outs[0])


# --------------------------------------------------------------------------
# The call
# --------------------------------------------------------------------------


def splits(units: int, row_tiles: int, tk: int, tiles: Tiles) -> tuple[int, int]:
    """(nsplit, keys per split): a function of the extents alone. One split
    where the (unit, row tile) blocks reach ``TARGET_BLOCKS`` or the keys are
    few; else as many as fill them, each of at least ``MIN_TILES_PER_SPLIT``
    whole key tiles, at most ``MAX_SPLITS``."""
    key_tiles = -(-tk // tiles.keys)
    work = units * row_tiles
    if work == 0 or work >= TARGET_BLOCKS or key_tiles < 2 * MIN_TILES_PER_SPLIT:
        return 1, max(tk, 1)
    want = min(MAX_SPLITS, -(-TARGET_BLOCKS // work), key_tiles // MIN_TILES_PER_SPLIT)
    per = -(-key_tiles // want) * tiles.keys
    return -(-tk // per), per


def _offsets(a: Array, lead: tuple[int, ...], axes: Sequence[int], idx: np.ndarray) -> np.ndarray:
    """Element offsets of ``a`` at the lead indices ``idx`` ([n, len(lead)])
    along its axes ``axes`` (one per lead axis), plus its layout's offset."""
    st = np.asarray([a.layout.strides[ax] for ax in axes], dtype=np.int64)
    off = np.full(idx.shape[0], a.layout.offset, dtype=np.int64)
    return off + (idx @ st if len(lead) else 0)


@final
@dataclass(frozen=True, slots=True)
class Kernel:
    """The kernel a call launches: its source, name, tiles and shared memory;
    ``packs``, whether a unit may hold several query heads of one key head
    (the tensor-core kernel's ``pack`` argument)."""

    source: Source
    name: str
    tiles: Tiles
    shared_bytes: int
    packs: bool = False

    def pack(self, group: int, tq: int) -> int:
        """Query heads a unit holds: all ``group`` heads of a key head where
        the kernel packs and their rows fit one row tile (decode shapes of
        grouped heads read each key tile once for the group), else 1."""
        return group if self.packs and group > 1 and group * tq <= self.tiles.bm else 1

    def extra_args(self, pack: int) -> list[Arg]:
        """The arguments after tk that this kernel takes (the pack)."""
        return [np.int64(pack)] if self.packs else []


def kernel_for(dev: CudaRig, spec: S.Attention, operands: Sequence[Array], loads: Sequence[Dtype]) -> Kernel:
    """The tensor-core kernel where :func:`attention_mma.takes` the call, else
    the SIMT kernel (a call ``_reason`` admits): a function of the dtypes,
    the head dimensions and the device model."""
    q, k, v = (a.dtype for a in operands[:3])
    dk, dv = operands[0].shape[-1], operands[2].shape[-1]
    paged = isinstance(spec.kv, S.Paged)
    if attention_mma.takes(dev, spec.acc, q, k, v, dk, dv):
        keys = attention_mma.tile_keys(dk, dv)
        assert keys is not None
        return Kernel(attention_mma.attention_mma_source(spec.prog, tuple(loads), q, dk, dv, keys, paged),
                      attention_mma.KERNEL, Tiles(16, keys), attention_mma.shared_bytes(keys, dk, dv), True)
    tiles = tiles_for(dk, dv, spec.acc)
    assert tiles is not None
    return Kernel(attention_source(spec.prog, tuple(loads), q, k, v, spec.acc, dk, dv, tiles, paged), KERNEL,
                  tiles, shared_bytes(tiles, dk, dv, spec.acc))


@final
@dataclass(frozen=True, slots=True)
class _Call:
    """An attention call's arrays and extents, as the launch reads them."""

    q: Array
    k: Array
    v: Array
    o: Array
    lse: Array
    table: Array | None
    lengths: Array | None
    loads: list[Array]
    lead: tuple[int, ...]
    hq: int
    hk: int
    tq: int
    tk: int
    page: int
    pages: int


def _call_of(spec: S.Attention, dsts: Sequence[Array], operands: Sequence[Array]) -> _Call:
    paged = isinstance(spec.kv, S.Paged)
    n_kv = 4 if paged else 3
    q, k, v = operands[:3]
    table = operands[3] if paged else None
    hq, tq = q.shape[-3:-1]
    if table is not None:
        hk, page, pages, tk = k.shape[1], k.shape[2], k.shape[0], table.shape[-1] * k.shape[2]
    else:
        hk, page, pages, tk = k.shape[-3], 1, 0, k.shape[-2]
    return _Call(q, k, v, dsts[0], dsts[1], table, operands[n_kv] if spec.lengths else None,
                 list(operands[n_kv + spec.lengths:]), tuple(q.shape[:-3]), hq, hk, tq, tk, page, pages)


def _units(spec: S.Attention, c: _Call, pack: int) -> np.ndarray:
    """The units' descriptor words ([units, words], NXK_ATTN_U_* then the
    loads' and the extra Coord axes' words): a unit per (lead index, group of
    ``pack`` consecutive query heads sharing a key head), its words at the
    group's first head, unit = b · (hq / pack) + h / pack."""
    nl = len(c.lead)
    lead_idx = np.asarray(list(np.ndindex(*c.lead)), dtype=np.int64).reshape(math.prod(c.lead), nl)
    per = c.hq // pack
    b_idx = np.repeat(lead_idx, per, axis=0)
    heads = np.tile(np.arange(0, c.hq, pack, dtype=np.int64), max(len(lead_idx), 1))
    kv_heads = heads // (c.hq // c.hk)
    n = len(heads)
    lax = list(range(nl))
    cols = [_offsets(a, c.lead, lax, b_idx) + heads * a.layout.strides[nl] for a in (c.q, c.o, c.lse)]
    if c.table is not None:
        cols += [a.layout.offset + kv_heads * a.layout.strides[1] for a in (c.k, c.v)]
    else:
        cols += [_offsets(a, c.lead, lax, b_idx) + kv_heads * a.layout.strides[nl] for a in (c.k, c.v)]
    cols.append(_offsets(c.lengths, c.lead, lax, b_idx) if c.lengths is not None else np.full(n, -1))
    cols.append(_offsets(c.table, c.lead, lax, b_idx) if c.table is not None else np.zeros(n, np.int64))
    cols += [_offsets(a, c.lead, lax, b_idx) + heads * a.layout.strides[nl] for a in c.loads]
    for axis in (a for a in codegen.coord_axes(spec.prog) if a >= 2):
        cols.append(heads if axis == 2 else b_idx[:, nl - (axis - 2)])
    return np.stack([np.asarray(x, dtype=np.int64) for x in cols], axis=1)


def _strides(c: _Call) -> list[int]:
    """The strides' words (NXK_ATTN_G_*, then each load's row, key and head strides)."""
    nl = len(c.lead)
    q, k, v, o, lse = c.q, c.k, c.v, c.o, c.lse
    g = [q.layout.strides[-2], q.layout.strides[-1], o.layout.strides[-2], o.layout.strides[-1],
         lse.layout.strides[-1]]
    if c.table is not None:
        g += [k.layout.strides[2], k.layout.strides[3], v.layout.strides[2], v.layout.strides[3],
              k.layout.strides[0], v.layout.strides[0], c.table.layout.strides[-1]]
    else:
        g += [k.layout.strides[-2], k.layout.strides[-1], v.layout.strides[-2], v.layout.strides[-1], 0, 0, 0]
    g += [q.layout.strides[nl], o.layout.strides[nl], lse.layout.strides[nl]]
    for a in c.loads:
        g += [a.layout.strides[-2], a.layout.strides[-1], a.layout.strides[nl]]
    return g


def _launch(dev: CudaRig, spec: S.Attention, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
    """Queue the attention kernel (and the combine, where the keys are split)."""
    c = _call_of(spec, dsts, operands)
    n_units = math.prod(c.lead) * c.hq
    if n_units * c.tq == 0:
        return
    dv = c.v.shape[-1]
    kernel = kernel_for(dev, spec, operands, [a.dtype for a in c.loads])
    tiles = kernel.tiles
    pack = kernel.pack(c.hq // c.hk, c.tq)
    g_ptr = loops.upload(dev, _strides(c))
    units = _units(spec, c, 1)
    u_ptr = loops.upload(dev, units.reshape(-1).tolist())
    pu_ptr = u_ptr if pack == 1 else loops.upload(dev, _units(spec, c, pack).reshape(-1).tolist())
    row_tiles = -(-(pack * c.tq) // tiles.bm)
    nsplit, per = splits(n_units // pack, row_tiles, c.tk, tiles)
    blocks = n_units // pack * row_tiles * nsplit
    limit = key_limit(spec.prog)
    lim = 0 if limit is None else max(-(c.tq + 1), min(limit, c.tk))
    acc_bytes = spec.acc.itemsize
    part_buf, part = (loops.scratch(dev, n_units * c.tq * nsplit * (dv + 2) * acc_bytes) if nsplit > 1
                      else (None, loops.base(dev, c.lse)))
    base = loops.base
    args: list[Arg] = [
        g_ptr, pu_ptr, np.int64(blocks), np.int64(row_tiles), np.int64(nsplit), np.int64(per), np.int64(c.tq),
        np.int64(c.tk), *kernel.extra_args(pack), np.int64(c.page), np.int64(c.pages),
        np.int64(limit is not None), np.int64(lim), np.float64(spec.scale), np.int32(c.o.dtype.code),
        base(dev, c.q), base(dev, c.k), base(dev, c.v), base(dev, c.table if c.table is not None else c.q),
        base(dev, c.lengths if c.lengths is not None else c.q), *(base(dev, a) for a in c.loads),
        base(dev, c.o), base(dev, c.lse), part]
    dev.load(kernel.source).function(kernel.name)((min(blocks, loops.MAX_BLOCKS),), (THREADS,), args,
                                                  shared_bytes=kernel.shared_bytes)
    if nsplit > 1:
        n = n_units * c.tq * (dv + 1)
        ctype = "float" if spec.acc is D.float32 else "double"
        dev.load(combine_source()).function(f"nxk_attn_combine<{ctype}>")(
            (loops.blocks_for(n),), (loops.THREADS,),
            [g_ptr, u_ptr, np.int64(units.shape[1]), np.int64(c.tq), np.int64(dv), np.int64(nsplit),
             np.int64(n), np.int32(c.o.dtype.code), part, base(dev, c.o), base(dev, c.lse)])
    del part_buf  # held until both launches are queued


def attention(spec: S.Attention, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
    """``S.attention`` of a call that fits and is not declined, its arrays
    claimed: o and lse of every query row (the module's doc)."""
    _launch(loops.device_of(dsts), spec, dsts, operands)


# --------------------------------------------------------------------------
# The statement
# --------------------------------------------------------------------------


def rho(acc: Dtype) -> float:
    """The relative error of the exponentials: float32 computes exp in double
    and rounds once (u + 2^-52); float64 is the C library's or libdevice's,
    within 1 ulp (2u)."""
    u = unit_roundoff(acc)
    return u + 2.0**-52 if acc is D.float32 else 2 * u


#: The fewest keys a key tile of either kernel holds.
MIN_TILE_KEYS: Final = 32


def rescales(tk: int) -> int:
    """T: key tiles plus splits a row's weights pass through, at most:
    ⌈tk / 32⌉ + MAX_SPLITS (a key tile holds 32 keys or more)."""
    return -(-tk // MIN_TILE_KEYS) + MAX_SPLITS


def epsilon(acc: Dtype, b: float, tk: int) -> float:
    """The stated ε on |lse − L|: (6b + 3 ln tk + 8T + 12)·u, T the rescales
    (:func:`rescales`), b a bound on the visible outputs' magnitudes, u the
    accumulator's unit roundoff; 0 for tk ≤ 1 beyond the rounding of lse."""
    u = unit_roundoff(acc)
    t = rescales(tk)
    return (6 * b + 3 * math.log(max(tk, 1)) + 8 * t + 12) * u


#: What attention computes and declines, in words.
PROSE: Final = (
    "fused flash attention (FlashAttention-2 style, online softmax, 4 warps a block, key tiles streamed "
    "through shared memory). Tensor cores (mma.sync m16n8k8, sm_80 and later, cuda-emu included) where q, "
    "k and v are all bfloat16 or all float16 into a float32 accumulator with dk, dv ≤ 256 and tiles within "
    "48 KiB (64 query rows a block, key tiles of 64 keys, or 32 where 64 do not fit; the query heads "
    "sharing a key head packed into one block where their rows fit it, so decode shapes read each key "
    "tile once for the group); SIMT otherwise "
    "(a tile of 4R query rows, key tiles of 32 or 64 keys). Both: Dense keys and values of any layout or "
    "Paged pools through a table (an entry outside [0, pages) hides its keys, never read), hk dividing hq "
    "(grouped and multi-query heads), lengths per lead index (keys past the length never read), any "
    "program over the pair and Plain loads (compiled into the kernel; Coord nodes read key, row, head and "
    "lead indices), q, k and v of any float dtype widened exactly into a float32 or float64 accumulator, o "
    "in v's dtype rounded once, lse in the accumulator; decode shapes split over key tiles with a combine "
    "in split order. Declines Padded loads, a float64 q, k or v with a float32 accumulator, an o identical "
    "to k or v, and head dimensions whose SIMT tiles exceed 48 KiB of shared memory (16·BN + a·(BM·dk + "
    "dk·(BN + 1) + BN·dv + BM·BN) bytes, a the accumulator's size, for every (R, BN) of (8, 64), (4, 64), "
    "(4, 32), (2, 32), (1, 32), BM = 4R: float32 dk = dv up to 174, float64 up to 86)."
)

#: The association of attention's sums.
ASSOCIATION: Final = (
    "q·k, SIMT: a chain from +0 over d = 0 … dk − 1 in the accumulator, each product rounded then added "
    "(no fma), within γ(dk) Σ|qᵢkᵢ|; tensor cores: per 8 consecutive d (dk padded with +0 products to a "
    "multiple of 8) one m16n8k8 instruction from C = 0, each result added into a float32 chain from +0 in "
    "increasing d, within γ(2·min(dk, 8) + ⌈dk/8⌉) Σ|qᵢkᵢ|; both within e(dk); then s × q·k, one "
    "rounding. Weights: per row and key tile, e = exp(x − m) (m the running maximum with the tile's keys, "
    "0 where it is −∞); the tile's Σ e, SIMT: each lane its keys j ≡ lane (mod 32) in increasing order "
    "from +0, then a 5-level xor butterfly; tensor cores: each thread its 16 (or 8) keys of the row in "
    "increasing order from +0, then a 2-level xor butterfly over its quad; the running sum l = l·α + "
    "that, α = exp(m_old − m_new) (exactly 1 where m did not move); splits combined in split order from "
    "+0, each scaled by exp(m_s − M). o: per row and element a chain in increasing key order from +0, "
    "scaled by α at each key tile; SIMT: + e·v per visible key, each product rounded; tensor cores: e "
    "rounded to nearest into v's dtype (r(e)), then per 8 keys one m16n8k8 instruction of r(e)·v from C = "
    "0, its result added; splits combined in split order from +0; o = acc / l + 0, rounded once into o's "
    "dtype. Within γ(tk − 1) (SIMT) or γ(2·min(tk, 8) + ⌈tk/8⌉) (tensor cores) Σ|wⱼ||vⱼ| ≤ e(tk) of "
    "Σ wⱼvⱼ, the weights wⱼ it applies being e (or r(e))·(the α and split scales)/l with each product's "
    "rounding. No atomics: the same bits on every launch; the kernel, its tiles and the splits are "
    "functions of the dtypes, dk, dv, the accumulator, the device model and the extents."
)

#: How attention computes, its ε and its NaN rules.
ALGORITHM: Final = (
    "ε: |lse − L| ≤ (6b + 3 ln tk + 8T + 12)·u, u the accumulator's unit roundoff, b a bound on the visible "
    "outputs' magnitudes, T = ⌈tk / 32⌉ + 32 (key tiles, of 32 keys or more, plus splits), barring "
    "overflow and underflow (first order: each e within 2bu + ρ, ρ ≤ 2u the exponential's error — float32 "
    "computes exp and lse = m + ln l in double, rounded once; float64 the C library's or libdevice's, "
    "≤ 1 ulp — the rescales' product within 2bu + T(ρ + u), l's additions ≤ (2T + 7)u, lse's rounding "
    "(b + ln tk)u). Weights w = e·(scales)/l, each product p·v rounded: exp(x − L + δ), |δ| ≤ (8b + 8T + "
    "13)u ≤ (1 + u)ε + (2b + ln tk)u + 5u'. On the tensor cores the weight applied is r(c·w)/c, c = l / "
    "(scales) ≥ 1 and c·w = e ≤ 1, r the rounding to nearest into v's dtype (float16 or bfloat16), as the "
    "contract allows; the SIMT kernel never rounds weights. Special rows: no visible pair or only −∞ "
    "outputs: o = +0, lse = −∞; a +∞ output and no NaN: lse = +∞, o a NaN; a NaN output: NaNs. A visible "
    "pair of weight 0 with a NaN value makes o a NaN. Keys and values past the length or on hidden pages "
    "are never read. SIMT: a NaN or an infinity at a pair the program hides never reaches o or lse (a "
    "hidden pair adds nothing to any sum). Tensor cores: a NaN or an infinity value at a pair the program "
    "hides, in a key tile the block reads, makes o a NaN at that row and the value's element (its weight +0 "
    "times it); it never reaches lse."
)

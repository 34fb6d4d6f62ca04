"""The host library's own product kernels, in orders stated here: dot
products in 64-byte lanes, weighted sums of rows and a register-blocked
matrix product, in vector code generated through LLVM (Numba intrinsics).

OpenBLAS is built for products whose three extents are all large; a product
of a few query rows against thousands of keys (attention's ``K·Qᵀ`` with n =
4, ``eᵀ·V`` with m = 4) or of 128³ runs its kernels at a fraction of their
speed, and its order of summation is OpenBLAS's, by core type. These
kernels keep their operands in place and sum in orders of their own, the
same on every machine (LLVM's IEEE operations on vectors give the same bits
whatever the vector width the CPU has; ``llvm.fma`` is always fused):

* ``scores``: ``st[j, i] = k[j]·q[i]`` with the d products of a pair in
  ``W`` lanes (``W = 64 / itemsize``: 16 float32, 8 float64), product m in
  lane ``m mod W``, each lane a chain of fused multiply-adds in order of m
  from −0 (so a lane of one product holds that product rounded once, and an
  empty lane −0, which every later addition ignores), the lanes then added
  as a halving tree: lane l + lane l + W/2 for l < W/2, then l + l + W/4, …,
  down to lane 0. Streams each key once for a few query rows (decoding).
* ``weighted``: ``out[i, c] = Σ_j e[j, i]·v[j, c]``, per element a chain of
  fused multiply-adds over j in order from +0, a few rows at a time.
* ``product``: ``c = a @ b``, per element a chain of fused multiply-adds over
  k in order from −0, in register blocks of accumulators sized for the
  CPU's vector registers (the contraction's small tiles, attention's tiles).

Each is within ``γ(n)·Σ|xᵢyᵢ|`` of the exact sum of n products (any order
of additions of n terms, each product or multiply-add rounded once); which
block or thread computes an element changes none of its bits.

Rule on operands: ``scores`` and ``weighted`` read matrices with unit stride
along their last axis and a row stride that is a multiple of their itemsize
(``unit_rows``), ``product`` b and c so, a of any strides; the wrappers copy
other views first. float32 and float64 only, all of one dtype.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, cast

import numpy as np
import numpy.typing as npt
from llvmlite import binding as llvm
from llvmlite import ir
from numba import njit, types
from numba.core import config
from numba.extending import intrinsic

from .irvectors import I32, I64, Vectors, cgutils

__all__ = ["LANE_BYTES", "product", "product_at", "scores", "scores_at", "unit_rows", "weighted",
           "weighted_at"]

Arr = npt.NDArray[Any]

#: The bytes of a lane vector: 16 float32 or 8 float64.
LANE_BYTES: Final = 64


def _targets_avx512() -> bool:
    """Whether Numba compiles for a CPU with AVX-512 (its ``NUMBA_CPU_FEATURES``
    where set, else the host's): 32 vector registers of 64 bytes, against
    AVX2's 16 of 32."""
    features: str | None = getattr(config, "CPU_FEATURES", None)
    if features is not None:
        return "+avx512f" in features.split(",")
    return bool(llvm.get_host_cpu_features().get("avx512f", False))


#: The register file the blocks below are sized for: accumulators that
#: outgrow it spill to memory on every step (AVX2 ran the AVX-512 blocks at
#: a third of OpenBLAS's speed). The sizes change no bit: each element's
#: chain is the same whichever block or vector holds it.
_AVX512: Final = _targets_avx512()
#: The bytes of the vectors ``weighted`` and ``product`` compute in: one register.
_VECTOR_BYTES: Final = 64 if _AVX512 else 32
#: Query rows of one block: ``scores`` makes W results (16 float32) from
#: at most 4 rows at once; ``weighted`` holds 4 rows × ``_WEIGHTED_VECTORS``
#: registers of sums (16 of 32 on AVX-512, 8 of 16 on AVX2: 64 float32
#: columns in 4 whole blocks, where 12 took 3 blocks, the last one partial,
#: and ran a third slower).
_BLOCK_ROWS: Final = 4
_WEIGHTED_VECTORS: Final = 4 if _AVX512 else 2
#: The pairs ``scores`` accumulates in one pass over d: all W of a group on
#: AVX-512 (W lane vectors, 16 registers); 4 on AVX2 (8 of its 16).
_PASS_PAIRS: Final = 16 if _AVX512 else 4
#: ``product``'s register blocks, (rows, registers of accumulators), for n of
#: at least 3 registers, of 2 and of 1; at most 24 of 32 registers on AVX-512
#: and 12 of 16 on AVX2, leaving room for b's row and a's broadcast element.
_WIDE_BLOCK: Final = (6, 4) if _AVX512 else (6, 2)
_MID_BLOCK: Final = (12, 2) if _AVX512 else (6, 2)
_NARROW_BLOCK: Final = (24, 1) if _AVX512 else (12, 1)
#: The steps over k of one pass of ``product``'s blocks: b's rows of a pass
#: (16 KiB of a block of 64-byte columns) stay in the first-level cache.
_K_CHUNK: Final = 256
#: The blocks of columns that must read a wide block's rows of a before they
#: are packed side by side (``_pack``, read through one pointer) rather than
#: read in place: the scalar copy pays only where many blocks read it.
#: Measured on AVX-512 (Zen 4, one thread, float32 and float64): in place
#: was as fast or faster at 2 to 16 blocks, 1.1–1.4× faster at attention's
#: tiles (1024×128×64; 128×64×1024 of a transposed a) and 1.6–2× for the mid
#: and narrow blocks (one block of columns each); AVX2's blocks (compiled for
#: Haswell, run on the same core) lost up to 1.3× in place at 16 blocks of
#: float64.
_PACK_MIN_BLOCKS: Final = 16


def unit_rows(x: Arr) -> bool:
    """Whether the kernels read 2-D ``x`` in place: unit stride along its last
    axis, a row stride that is a whole number of elements."""
    size = x.itemsize
    return x.ndim == 2 and (x.shape[1] <= 1 or x.strides[1] == size) and x.strides[0] % size == 0


# --------------------------------------------------------------------------
# Generated code: vectors of W lanes
# --------------------------------------------------------------------------


def _data(context: Any, builder: Any, aryty: Any, ary: Any, offset: Any) -> Any:
    """A pointer to element ``offset`` (from the first) of array ``ary``."""
    return builder.gep(context.make_array(aryty)(context, builder, ary).data, [offset])


def _clamped(builder: Any, i: int, n: Any) -> Any:
    """``min(i, n − 1)`` for a constant i and an int64 n ≥ 1."""
    at = ir.Constant(I64, i)
    return builder.select(builder.icmp_signed("<", at, n), at, builder.sub(n, ir.Constant(I64, 1)))


def _floats(*arrays: Any) -> bool:
    """Whether the Numba types are arrays of one dtype, float32 or float64."""
    first = arrays[0]
    return all(isinstance(a, types.Array) for a in arrays) and first.dtype in (
        types.float32, types.float64) and all(a.dtype == first.dtype for a in arrays)


def _halving_tree(vec: Vectors, parts: list[Any]) -> Any:
    """W vectors of W partial lanes each → one vector whose lane t is vector t's
    lanes added as the halving tree (module doc). Each level pairs vectors
    (A, B) whose groups of 2h lanes each hold one dot product and adds lane
    l to lane l + h within every group, so the W trees share their shuffles."""
    b, w = vec.builder, vec.w
    h = w // 2
    while len(parts) > 1:
        lo = [g + lane for g in range(0, w, 2 * h) for lane in range(h)]
        hi = [g + h + lane for g in range(0, w, 2 * h) for lane in range(h)]
        pick_lo = ir.Constant(ir.VectorType(I32, w), lo + [w + x for x in lo])
        pick_hi = ir.Constant(ir.VectorType(I32, w), hi + [w + x for x in hi])
        parts = [b.fadd(b.shuffle_vector(x, y, pick_lo), b.shuffle_vector(x, y, pick_hi))
                 for x, y in zip(parts[0::2], parts[1::2], strict=True)]
        h //= 2
    return parts[0]


@intrinsic
def _dots_intrinsic(typingctx: Any, k: Any, ko: Any, ldk: Any, nk: Any, q: Any, qo: Any,
                    ldq: Any, nq: Any, rows: Any, d: Any, out: Any, oo: Any,
                    groups: Any) -> Any:
    """``groups`` groups of W dot products of length d, group t into ``out[oo +
    t·W : oo + (t + 1)·W]``: its result ``g·rows + i`` is key row ``t·W/rows +
    min(g, nk − 1)`` (at ``ko + (t·W/rows + g)·ldk``) against query row
    ``min(i, nq − 1)`` (at ``qo + i·ldq``), for g < W / rows, i < rows, rows a
    literal 1, 2 or 4; lanes and the halving tree (module doc). One call
    takes many groups, so the query rows' pointers and the loop's set-up are
    paid once."""
    if not (_floats(k, q, out) and isinstance(rows, types.IntegerLiteral)
            and all(isinstance(x, types.Integer)
                    for x in (ko, ldk, nk, qo, ldq, nq, d, oo, groups))):
        return None
    r = rows.literal_value

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        ka, ko_, ldk_, nk_, qa, qo_, ldq_, nq_, _, d_, oa, oo_, groups_ = args
        vec = Vectors(context, builder, sig.args[0].dtype, LANE_BYTES)
        w = vec.w
        keys = w // r
        qp = _data(context, builder, sig.args[4], qa, qo_)
        qrows = [builder.gep(qp, [builder.mul(_clamped(builder, i, nq_), ldq_)]) for i in range(r)]
        acc = [cgutils.alloca_once(builder, vec.vty) for _ in range(w)]
        with cgutils.for_range(builder, groups_) as group:
            first_key = builder.mul(group.index, ir.Constant(I64, keys))
            kp = _data(context, builder, sig.args[0], ka,
                       builder.add(ko_, builder.mul(first_key, ldk_)))
            krows = [builder.gep(kp, [builder.mul(_clamped(builder, g, nk_), ldk_)])
                     for g in range(keys)]
            out_at = builder.add(oo_, builder.mul(group.index, ir.Constant(I64, w)))
            _dot_group(vec, builder, acc, krows, qrows, r, d_,
                       _data(context, builder, sig.args[10], oa, out_at))
        return context.get_dummy_value()

    return types.none(k, ko, ldk, nk, q, qo, ldq, nq, rows, d, out, oo, groups), codegen


def _dot_group(vec: Vectors, builder: Any, acc: list[Any], krows: list[Any], qrows: list[Any],
               r: int, d: Any, out: Any) -> None:
    """One group of ``_dots``: the W pairs' lanes from −0 over d in passes of
    ``_PASS_PAIRS`` pairs, then their halving trees stored at ``out``."""
    w = vec.w
    for a in acc:
        builder.store(vec.splat(-0.0), a)

    def step(pairs: range, at: Any, mask: Any | None) -> None:
        kv = {g: vec.load(builder.gep(krows[g], [at]), mask) for g in {p // r for p in pairs}}
        qv = {i: vec.load(builder.gep(qrows[i], [at]), mask) for i in {p % r for p in pairs}}
        for p in pairs:
            old = builder.load(acc[p])
            new = vec.fma(kv[p // r], qv[p % r], old)
            builder.store(new if mask is None else builder.select(mask, new, old), acc[p])

    # A pass over d per ``_PASS_PAIRS`` pairs, whose accumulators stay in registers.
    width = ir.Constant(I64, w)
    whole = builder.udiv(d, width)
    rest = builder.urem(d, width)
    for first in range(0, w, _PASS_PAIRS):
        pairs = range(first, min(w, first + _PASS_PAIRS))
        with cgutils.for_range(builder, whole) as loop:
            step(pairs, builder.mul(loop.index, width), None)
        with builder.if_then(builder.icmp_unsigned("!=", rest, ir.Constant(I64, 0))):
            step(pairs, builder.mul(whole, width), vec.mask(rest))
    vec.store(_halving_tree(vec, [builder.load(a) for a in acc]), out, None)


@intrinsic
def _weighted_intrinsic(typingctx: Any, e: Any, eo: Any, lde: Any, r: Any, v: Any, vo: Any,
                        ldv: Any, n: Any, dv: Any, out: Any, oo: Any, ldo: Any,
                        fresh: Any) -> Any:
    """``out[oo + i·ldo + c] = s + Σ_j e[eo + j·lde + i]·v[vo + j·ldv + c]`` for
    i < r ≤ 4, c < dv, with s +0 where ``fresh`` is true, else out's element
    (the chain so far): per element an FMA chain over j in order, in blocks of
    4 rows × ``_WEIGHTED_VECTORS`` registers of accumulators (rows past r
    computed from row r − 1 and never stored)."""
    if not (_floats(e, v, out) and isinstance(fresh, types.Boolean)
            and all(isinstance(x, types.Integer) for x in (eo, lde, r, vo, ldv, n, dv, oo, ldo))):
        return None

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        ea, eo_, lde_, r_, va, vo_, ldv_, n_, dv_, oa, oo_, ldo_, fresh_ = args
        vec = Vectors(context, builder, sig.args[0].dtype, _VECTOR_BYTES)
        w = vec.w
        span = ir.Constant(I64, _WEIGHTED_VECTORS * w)
        ep = _data(context, builder, sig.args[0], ea, eo_)
        vp = _data(context, builder, sig.args[4], va, vo_)
        op = _data(context, builder, sig.args[9], oa, oo_)
        rows = [_clamped(builder, i, r_) for i in range(_BLOCK_ROWS)]
        acc = [[cgutils.alloca_once(builder, vec.vty) for _ in range(_WEIGHTED_VECTORS)]
               for _ in range(_BLOCK_ROWS)]
        blocks = builder.udiv(builder.add(dv_, builder.sub(span, ir.Constant(I64, 1))), span)
        with cgutils.for_range(builder, blocks) as block:
            c0 = builder.mul(block.index, span)
            masks = [vec.mask(builder.sub(dv_, builder.add(c0, ir.Constant(I64, c * w))))
                     for c in range(_WEIGHTED_VECTORS)]
            # Whole blocks of columns load and store without masks (``_block``).
            whole = builder.icmp_signed("<=", builder.add(c0, span), dv_)
            with builder.if_else(whole) as (unmasked, masked):
                for branch, use in ((unmasked, None), (masked, masks)):
                    with branch:
                        _weighted_block(vec, builder, acc, rows, use, fresh_, ep, lde_, vp, ldv_,
                                        n_, op, ldo_, r_, c0)
        return context.get_dummy_value()

    return types.none(e, eo, lde, r, v, vo, ldv, n, dv, out, oo, ldo, fresh), codegen


def _chains_from(vec: Vectors, builder: Any, acc: list[list[Any]], fresh: Any, zero: float,
                 rows: list[Any], masks: list[Any] | None) -> None:
    """Start a register block's chains: ``zero`` in every lane where ``fresh``
    is true, else the chains so far, row i's registers read from ``rows[i]``
    (a scalar pointer; lanes past the columns masked off where ``masks`` is
    given)."""
    with builder.if_else(fresh) as (start, carry_on):
        with start:
            for row in acc:
                for slot in row:
                    builder.store(vec.splat(zero), slot)
        with carry_on:
            for at, row in zip(rows, acc, strict=True):
                for v, slot in enumerate(row):
                    builder.store(vec.load(builder.gep(at, [ir.Constant(I64, v * vec.w)]),
                                           None if masks is None else masks[v]), slot)


def _store_rows(vec: Vectors, builder: Any, acc: list[list[Any]], rows: list[Any], count: Any,
                masks: list[Any] | None) -> None:
    """Store a register block's rows below ``count``, row i's registers at
    ``rows[i]`` (lanes past the columns masked off where ``masks`` is given)."""
    for i, (at, row) in enumerate(zip(rows, acc, strict=True)):
        with builder.if_then(builder.icmp_signed("<", ir.Constant(I64, i), count)):
            for v, slot in enumerate(row):
                vec.store(builder.load(slot), builder.gep(at, [ir.Constant(I64, v * vec.w)]),
                          None if masks is None else masks[v])


def _weighted_block(vec: Vectors, builder: Any, acc: list[list[Any]], rows: list[Any],
                    masks: list[Any] | None, fresh: Any, ep: Any, lde: Any, vp: Any, ldv: Any,
                    n: Any, op: Any, ldo: Any, r: Any, c0: Any) -> None:
    """``_weighted``'s block of columns from c0: the sums from +0 (``fresh``)
    or from out's elements, the chains over n keys, then the rows below r
    stored; registers past the columns masked off where ``masks`` is given."""
    w = vec.w
    orows = [builder.gep(op, [builder.add(builder.mul(i, ldo), c0)]) for i in rows]
    _chains_from(vec, builder, acc, fresh, 0.0, orows, masks)
    with cgutils.for_range(builder, n) as key:
        erow = builder.gep(ep, [builder.mul(key.index, lde)])
        vrow = builder.gep(vp, [builder.add(builder.mul(key.index, ldv), c0)])
        weights = [vec.splat(builder.load(builder.gep(erow, [i]))) for i in rows]
        for c in range(_WEIGHTED_VECTORS):
            values = vec.load(builder.gep(vrow, [ir.Constant(I64, c * w)]),
                              None if masks is None else masks[c])
            for i in range(_BLOCK_ROWS):
                slot = acc[i][c]
                builder.store(vec.fma(weights[i], values, builder.load(slot)), slot)
    _store_rows(vec, builder, acc, orows, r, masks)


@intrinsic
def _block_intrinsic(typingctx: Any, a: Any, ao: Any, lda: Any, ak: Any, mr: Any, b: Any, bo: Any,
                     ldb: Any, nc: Any, k: Any, c: Any, co: Any, ldc: Any, fresh: Any, like: Any,
                     rows: Any, vectors: Any) -> Any:
    """One register block of a matrix product whose operands start ``ao``,
    ``bo`` and ``co`` elements past addresses a, b and c (int64): ``c[i, j] =
    Σ_t a[i, t]·b[t, j]`` for i < mr ≤ rows and j < nc, j < vectors·V (V
    elements in a register of ``_VECTOR_BYTES``), each
    element a chain of fused multiply-adds over t < k in order, from −0 where
    ``fresh`` is true, else from c's element (the chain so far), in
    ``rows × vectors`` vectors of accumulators (both literals; rows past mr
    computed from row mr − 1 and never stored, columns past nc neither read
    nor written). ``a[i, t]`` lies at ``i·lda + t·ak``, ``b[t, j]`` at ``t·ldb
    + j`` and ``c[i, j]`` at ``i·ldc + j``; ``like`` is a float32 or float64
    value of the dtype."""
    if not (isinstance(like, types.Float) and isinstance(rows, types.IntegerLiteral)
            and isinstance(vectors, types.IntegerLiteral) and isinstance(fresh, types.Boolean)
            and all(isinstance(x, types.Integer)
                    for x in (a, ao, lda, ak, mr, b, bo, ldb, nc, k, c, co, ldc))):
        return None
    mrows, nvec = rows.literal_value, vectors.literal_value

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        a_, ao_, lda_, ak_, mr_, b_, bo_, ldb_, nc_, k_, c_, co_, ldc_, fresh_ = args[:14]
        vec = Vectors(context, builder, sig.args[14], _VECTOR_BYTES)
        w = vec.w
        pointer = vec.fty.as_pointer()
        ap, bp, cp = (builder.gep(builder.inttoptr(x, pointer), [at])
                      for x, at in ((a_, ao_), (b_, bo_), (c_, co_)))
        arows = [builder.gep(ap, [builder.mul(_clamped(builder, i, mr_), lda_)])
                 for i in range(mrows)]
        masks = [vec.mask(builder.sub(nc_, ir.Constant(I64, v * w))) for v in range(nvec)]
        acc = [[cgutils.alloca_once(builder, vec.vty) for _ in range(nvec)] for _ in range(mrows)]
        crows = [builder.gep(cp, [builder.mul(_clamped(builder, i, mr_), ldc_)])
                 for i in range(mrows)]
        # Whole blocks load and store without masks (a masked store is
        # microcoded on AMD's cores: it took as long as a block's products).
        whole = builder.icmp_signed(">=", nc_, ir.Constant(I64, nvec * w))
        with builder.if_else(whole) as (unmasked, masked):
            for branch, use in ((unmasked, None), (masked, masks)):
                with branch:
                    _chains_from(vec, builder, acc, fresh_, -0.0, crows, use)
                    with cgutils.for_range(builder, k_) as step:
                        brow = builder.gep(bp, [builder.mul(step.index, ldb_)])
                        bv = [vec.load(builder.gep(brow, [ir.Constant(I64, v * w)]),
                                       None if use is None else use[v]) for v in range(nvec)]
                        at = builder.mul(step.index, ak_)
                        for i in range(mrows):
                            av = vec.splat(builder.load(builder.gep(arows[i], [at])))
                            for v in range(nvec):
                                slot = acc[i][v]
                                builder.store(vec.fma(av, bv[v], builder.load(slot)), slot)
                    _store_rows(vec, builder, acc, crows, mr_, use)
        return context.get_dummy_value()

    return types.none(a, ao, lda, ak, mr, b, bo, ldb, nc, k, c, co, ldc, fresh, like, rows,
                      vectors), codegen


@intrinsic
def _pack_intrinsic(typingctx: Any, a: Any, ao: Any, lda: Any, ak: Any, mr: Any, k: Any,
                    into: Any, like: Any, rows: Any) -> Any:
    """Copy ``rows`` rows of a (element (i, t) at ``ao + i·lda + t·ak`` past
    address a) to address ``into`` as ``into[t·rows + i]`` for t < k: the rows
    of a register block side by side, read by one pointer; rows past mr are
    copies of row mr − 1 (``_block`` never stores them)."""
    if not (isinstance(like, types.Float) and isinstance(rows, types.IntegerLiteral)
            and all(isinstance(x, types.Integer) for x in (a, ao, lda, ak, mr, k, into))):
        return None
    count = rows.literal_value

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        a_, ao_, lda_, ak_, mr_, k_, into_ = args[:7]
        pointer = context.get_value_type(sig.args[7]).as_pointer()
        ap = builder.gep(builder.inttoptr(a_, pointer), [ao_])
        arows = [builder.gep(ap, [builder.mul(_clamped(builder, i, mr_), lda_)])
                 for i in range(count)]
        out = builder.inttoptr(into_, pointer)
        with cgutils.for_range(builder, k_) as step:
            at = builder.mul(step.index, ak_)
            base = builder.mul(step.index, ir.Constant(I64, count))
            for i, row in enumerate(arows):
                value = builder.load(builder.gep(row, [at]))
                builder.store(value, builder.gep(out, [builder.add(base, ir.Constant(I64, i))]))
        return context.get_dummy_value()

    return types.none(a, ao, lda, ak, mr, k, into, like, rows), codegen


@intrinsic
def _itemsize_intrinsic(typingctx: Any, like: Any) -> Any:
    """The bytes of float ``like``'s dtype, a constant of the compiled code."""
    if not isinstance(like, types.Float):
        return None
    size = like.bitwidth // 8

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return context.get_constant(types.int64, size)

    return types.int64(like), codegen


_dots = cast("Callable[..., None]", _dots_intrinsic)
_weighted = cast("Callable[..., None]", _weighted_intrinsic)
_block = cast("Callable[..., None]", _block_intrinsic)
_pack = cast("Callable[..., None]", _pack_intrinsic)
_itemsize = cast("Callable[[Any], int]", _itemsize_intrinsic)


# --------------------------------------------------------------------------
# The kernels
# --------------------------------------------------------------------------


@njit(cache=True, nogil=True, boundscheck=False)
def _dots_of(rows: int, k: Arr, ko: int, ldk: int, nk: int, q: Arr, qo: int, ldq: int, nq: int,
             d: int, out: Arr, oo: int, groups: int) -> None:  # pragma: no cover - compiled
    """``_dots`` for ``rows`` of 1, 2 or 4 known only at run time."""
    if rows == 1:
        _dots(k, ko, ldk, nk, q, qo, ldq, nq, 1, d, out, oo, groups)
    elif rows == 2:
        _dots(k, ko, ldk, nk, q, qo, ldq, nq, 2, d, out, oo, groups)
    else:
        _dots(k, ko, ldk, nk, q, qo, ldq, nq, 4, d, out, oo, groups)


@njit(cache=True, nogil=True, boundscheck=False)
def scores_at(k: Arr, ko: int, ldk: int, n: int, q: Arr, qo: int, ldq: int, r: int, d: int,
              st: Arr) -> None:  # pragma: no cover - compiled
    """``st[j, i] = k[j]·q[i]`` in lanes and a halving tree (module doc), key
    row j of d elements at ``ko + j·ldk`` in k and query row i at ``qo + i·ldq``
    in q (elements from each array's first, unit stride within a row); st
    ``[n, r]`` with unit stride along its last axis. Query rows are taken in
    blocks of at most 4, each block with the keys in groups of ``W / rows``
    (rows the block's row count rounded up to 1, 2 or 4), so one pass of the
    generated code makes W results from W accumulators. The blocks change no
    bit: each result is its own pair's lanes and tree. d = 0 gives +0, an
    empty sum."""
    if d == 0:
        st[...] = 0
        return
    w = LANE_BYTES // k.itemsize
    spare = np.empty(w, k.dtype)
    flat = st.ravel() if st.flags.c_contiguous else spare
    for i0 in range(0, r, _BLOCK_ROWS):
        nq = min(_BLOCK_ROWS, r - i0)
        rows = 1
        while rows < nq:
            rows *= 2
        keys = w // rows
        # Whole groups of keys straight into a C-contiguous st of these rows
        # alone, in one call; the others through ``spare``.
        done = 0
        if st.flags.c_contiguous and rows == nq == r and n >= keys:
            done = n - n % keys
            _dots_of(rows, k, ko, ldk, keys, q, qo + i0 * ldq, ldq, nq, d, flat, 0, done // keys)
        for j in range(done, n, keys):
            nk = min(keys, n - j)
            _dots_of(rows, k, ko + j * ldk, ldk, nk, q, qo + i0 * ldq, ldq, nq, d, spare, 0, 1)
            for g in range(nk):
                for i in range(nq):
                    st[j + g, i0 + i] = spare[g * rows + i]


@njit(cache=True, nogil=True, boundscheck=False)
def weighted_at(e: Arr, eo: int, lde: int, r: int, v: Arr, vo: int, ldv: int, n: int, dv: int,
                out: Arr, oo: int, ldo: int) -> None:  # pragma: no cover - compiled
    """``out[i, c] = Σ_j e[j, i]·v[j, c]`` (module doc) for i < r, c < dv and
    n keys: e's row j at ``eo + j·lde``, v's at ``vo + j·ldv``, out's row i at
    ``oo + i·ldo`` (elements from each array's first, unit stride within a
    row); rows in blocks of 4, keys in chunks of about 16 KiB of v (at least
    16 keys), each chunk's rows read from the first-level cache for every
    block of columns, each chunk continuing the chains the last one stored
    (the same bits as one pass)."""
    chunk = max(16, 16384 // max(1, dv * v.itemsize))
    for i0 in range(0, r, _BLOCK_ROWS):
        rows = min(_BLOCK_ROWS, r - i0)
        for j0 in range(0, max(n, 1), chunk):
            _weighted(e, eo + i0 + j0 * lde, lde, rows, v, vo + j0 * ldv, ldv, min(chunk, n - j0),
                      dv, out, oo + i0 * ldo, ldo, j0 == 0)


@njit(inline="always")
def _wide_rows(a: int, ao: int, lda: int, ak: int, mr: int, b: int, bo: int, ldb: int, n: int,
               k: int, c: int, co: int, ldc: int, first: bool,
               like: Any) -> None:  # pragma: no cover - compiled
    """One block of ``_WIDE_BLOCK[0]`` rows (mr of them stored) across all n
    columns (``_block``'s arguments): whole blocks of ``_WIDE_BLOCK[1]``
    registers, then the columns left in whole registers, then at most one
    masked register. A block narrower than its registers would mask every
    load and store of all of them (a masked store is microcoded on AMD's
    cores) and multiply the registers past n too: measured on Zen 4, one
    thread, the old and new kernels alternately, 1.25-1.6x slower than the
    split at attention's heads of 35 to 45 rows (k 32), 1.1-1.25x at 128 x
    100 x 64 and 64 x 200 x 256. The bits are the same (each element's
    chain is its own, in whichever block or register)."""
    w = _VECTOR_BYTES // _itemsize(like)
    rows, vectors = _WIDE_BLOCK
    span = vectors * w
    whole = n - n % span
    for j0 in range(0, whole, span):
        _block(a, ao, lda, ak, mr, b, bo + j0, ldb, span, k, c, co + j0, ldc, first, like, rows,
               vectors)
    full = (n - whole) // w
    if full == 3:
        _block(a, ao, lda, ak, mr, b, bo + whole, ldb, 3 * w, k, c, co + whole, ldc, first, like,
               rows, 3)
    elif full == 2:
        _block(a, ao, lda, ak, mr, b, bo + whole, ldb, 2 * w, k, c, co + whole, ldc, first, like,
               rows, 2)
    elif full == 1:
        _block(a, ao, lda, ak, mr, b, bo + whole, ldb, w, k, c, co + whole, ldc, first, like,
               rows, 1)
    at = whole + full * w
    if at < n:
        _block(a, ao, lda, ak, mr, b, bo + at, ldb, n - at, k, c, co + at, ldc, first, like, rows,
               1)


@njit(cache=True, nogil=True, boundscheck=False)
def product_at(count: int, m: int, n: int, k: int, a: int, sa: int, lda: int, ak: int, b: int,
               sb: int, ldb: int, c: int, sc: int, ldc: int,
               like: Any) -> None:  # pragma: no cover - compiled
    """``c_e = a_e @ b_e`` for e < count: ``a_e [m, k]`` (element (i, t) at
    ``i·lda + t·ak``), ``b_e [k, n]`` and ``c_e [m, n]`` (row strides ``ldb``,
    ``ldc``, unit stride within rows) of ``like``'s dtype, starting ``e·sx``
    elements past addresses a, b and c: each element a chain of fused
    multiply-adds over k in order from −0 (module doc). k ≥ 1. Register
    blocks by n's width in registers: ``_WIDE_BLOCK`` from 3, ``_MID_BLOCK``
    at 2, ``_NARROW_BLOCK`` at 1 (1 row × 4 registers where m is 1); the
    wide blocks' columns past their last whole block in fewer registers
    (``_wide_rows``). k is
    taken in chunks of ``_K_CHUNK`` (each chunk's rows of b stay in the cache
    for every block of rows), each chunk continuing the chains the last one
    stored in c; a block reads its rows of a in place, or, where at least
    ``_PACK_MIN_BLOCKS`` blocks of columns read them, first packed side by
    side (``_pack``). Neither blocks, chunks nor packs change a bit."""
    w = _VECTOR_BYTES // _itemsize(like)
    wide = -(-n // w)
    rows, span = _WIDE_BLOCK[0], _WIDE_BLOCK[1] * w
    packs = wide >= 3 and -(-n // span) >= _PACK_MIN_BLOCKS
    # Its address is taken where it is used: Numba frees an array after its
    # last use, and an address kept in a variable is none.
    packed = np.full(rows * min(k, _K_CHUNK) if packs else 1, like)
    for e in range(count):
        ao, bo, co = e * sa, e * sb, e * sc
        if m == 1:
            for j0 in range(0, n, 4 * w):
                _block(a, ao, lda, ak, 1, b, bo + j0, ldb, n - j0, k, c, co + j0, ldc, True, like,
                       1, 4)
            continue
        for t0 in range(0, k, _K_CHUNK):
            kc, first, a0, b0 = min(_K_CHUNK, k - t0), t0 == 0, ao + t0 * ak, bo + t0 * ldb
            if wide >= 3:
                for i0 in range(0, m, rows):
                    mr = min(rows, m - i0)
                    if packs:
                        _pack(a, a0 + i0 * lda, lda, ak, mr, kc, packed.ctypes.data, like, rows)
                        _wide_rows(packed.ctypes.data, 0, 1, rows, mr, b, b0, ldb, n, kc, c,
                                   co + i0 * ldc, ldc, first, like)
                        continue
                    _wide_rows(a, a0 + i0 * lda, lda, ak, mr, b, b0, ldb, n, kc, c,
                               co + i0 * ldc, ldc, first, like)
            elif wide == 2:
                for i0 in range(0, m, _MID_BLOCK[0]):
                    mr = min(_MID_BLOCK[0], m - i0)
                    _block(a, a0 + i0 * lda, lda, ak, mr, b, b0, ldb, n, kc, c, co + i0 * ldc, ldc,
                           first, like, _MID_BLOCK[0], _MID_BLOCK[1])
            else:
                for i0 in range(0, m, _NARROW_BLOCK[0]):
                    mr = min(_NARROW_BLOCK[0], m - i0)
                    _block(a, a0 + i0 * lda, lda, ak, mr, b, b0, ldb, n, kc, c, co + i0 * ldc,
                           ldc, first, like, _NARROW_BLOCK[0], _NARROW_BLOCK[1])


def product(a: Arr, b: Arr, out: Arr) -> None:
    """``out[...] = a @ b`` by ``product_at``: a ``[m, k]`` of any strides, b
    ``[k, n]`` and out ``[m, n]`` of a's dtype (float32 or float64), out with
    unit stride along its last axis, b copied first where it is not
    ``unit_rows`` (a where a stride is no whole number of elements); k = 0
    gives +0."""
    m, k = a.shape
    n = b.shape[1]
    if m == 0 or n == 0:
        return
    if k == 0:
        out[...] = 0
        return
    size = a.itemsize
    if a.strides[0] % size or a.strides[1] % size:
        a = np.ascontiguousarray(a)
    b = _in_place(b)
    product_at(1, m, n, k, a.ctypes.data, 0, a.strides[0] // size, a.strides[1] // size,
               b.ctypes.data, 0, b.strides[0] // size, out.ctypes.data, 0, out.strides[0] // size,
               a.dtype.type(0))


def scores(k: Arr, q: Arr, st: Arr) -> None:
    """``st[...] = k @ q.T`` by ``scores_at``: k ``[n, d]``, q ``[r, d]`` of
    st's dtype (float32 or float64), st ``[n, r]`` with unit stride along its
    last axis; k and q copied first where they are not ``unit_rows``."""
    k, q = _in_place(k), _in_place(q)
    size = k.itemsize
    scores_at(k, 0, k.strides[0] // size, k.shape[0], q, 0, q.strides[0] // size, q.shape[0],
              k.shape[1], st)


def weighted(e: Arr, v: Arr, out: Arr) -> None:
    """``out[...] = e.T @ v`` by ``weighted_at``: e ``[n, r]``, v ``[n, dv]`` of
    out's dtype (float32 or float64), out ``[r, dv]`` with unit stride along
    its last axis; e and v copied first where they are not ``unit_rows``."""
    e, v = _in_place(e), _in_place(v)
    size = e.itemsize
    weighted_at(e, 0, e.strides[0] // size, e.shape[1], v, 0, v.strides[0] // size, e.shape[0],
                v.shape[1], out, 0, out.strides[0] // size)


def _in_place(x: Arr) -> Arr:
    """x, or a C-contiguous copy where the kernels cannot read it in place."""
    return x if unit_rows(x) else np.ascontiguousarray(x)

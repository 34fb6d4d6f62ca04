"""The contraction kernels: ``contract`` on SIMT cores (``kernels/contract.cu``).

Rules:

* What it computes: batch and contracting pairs of any layout (transposed,
  strided, broadcast, reversed or offset operands, read in place through
  walks, :mod:`nxkernel_cuda.loops`), with or without init (which may be
  dst itself), into three accumulators:

  - float32: a and b (and init) of float32, float16, bfloat16, float8_e4m3fn,
    float8_e5m2, or integers of at most 16 bits (int4 to uint16);
  - float64: those and float64, int32 and uint32;
  - integers: a, b and init integers of the accumulator's signedness, no wider
    than it; the sum wraps modulo 2^bits.

  Every operand converts exactly into the accumulator. dst is the
  accumulator's dtype, or, for a float accumulator, a narrower float but
  float4_e2m1fn, rounded once by the store rule.
* Order: the canonical problem is ``a [batch, rows, K]`` times
  ``b [batch, K, cols]``, K the contracting pairs' indices in C order. Each
  output is a chain from +0 in increasing K, each product rounded and then
  added (no fma: NVRTC ``--fmad=false``), one thread owning the output, no
  split of K and no atomics, so its bits are the same on every launch and on
  cuda-emu and cuda alike; init is added last (one more rounding). An output
  without products (K = 0) is init's element as the accumulator holds it,
  bits untouched (-0 stays -0, a NaN keeps its payload), or +0.
* Bound: each product and each addition round once, so before init the chain
  is within γ(K) Σ|a||b| (Higham, Thm. 3.1, the first addition to +0 being
  exact); adding init rounds once more, so the result in the accumulator is
  within γ(K) Σ|a||b| + u (|init| + (1 + γ(K)) Σ|a||b|) ≤ γ(K + 1) (|init| + Σ|a||b|):
  e(K) = γ(K + 1) (≤ γ(2K + 2)), 0 at K = 0, 0 for integers (exact, wrapping).
* Declined (before any array is touched, the same rules as :func:`declines`):
  complex accumulators, block scales, segments, operand or init dtypes outside
  the lists above (booleans, float4_e2m1fn, wider or other-signedness
  integers), destinations other than the accumulator's dtype or a narrower
  float, and a or b identical to dst (the kernel would read what it writes).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Final

import numpy as np

from nxkernel_core import dtype as D
from nxkernel_core import shape as SH
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_core.door import door
from nxkernel_core.dtype import Dtype
from nxkernel_core.kernel import Call, KernelStatement, gamma, unit_roundoff

from . import loops
from .build import Source, file_source
from .device import CudaRig

__all__ = ["ASSOCIATION", "KERNELS", "PROSE", "STATEMENT", "contract", "declines", "error_factor",
           "source"]

#: The kernels of ``kernels/contract.cu``, one per accumulator type.
KERNELS: Final = ("nxk_contract<float>", "nxk_contract<double>", "nxk_contract<nxk_u64>")

#: The output tile of a block, its K step and its threads.
TILE_M: Final = 64
TILE_N: Final = 64
TILE_K: Final = 16
THREADS: Final = 256

#: Operand (and init) dtypes each float accumulator takes: all convert exactly.
_INTO_F32: Final = frozenset({D.float32, D.float16, D.bfloat16, D.float8_e4m3fn, D.float8_e5m2,
                              D.int16, D.uint16, D.int8, D.uint8, D.int4, D.uint4})
_INTO_F64: Final = _INTO_F32 | {D.float64, D.int32, D.uint32}


@functools.cache
def source() -> Source:
    """``kernels/contract.cu`` with its three instantiations."""
    return file_source("contract.cu", KERNELS)


def _operand_reason(what: str, dt: Dtype, acc: Dtype) -> str | None:
    """Why an operand or init of ``dt`` is declined into ``acc``, or None."""
    if acc.is_int:
        if dt.is_int and dt.kind is acc.kind and dt.bits <= acc.bits:
            return None
        return (f"{what} {dt.name} is not an integer of the {acc.name} accumulator's signedness "
                f"no wider than it")
    takes = _INTO_F32 if acc is D.float32 else _INTO_F64
    if dt in takes:
        return None
    return f"{what} {dt.name} is not one nx.cuda converts exactly into the {acc.name} accumulator"


def _spec_reason(spec: S.Contract, dst: Dtype, operands: Sequence[Dtype]) -> str | None:
    """Why the SIMT kernels decline ``spec`` with these dtypes, or None."""
    acc = spec.acc
    if acc.is_complex:
        return f"nx.cuda computes no complex contraction ({acc.name} accumulator)"
    if any(s is not None for s in spec.scales):
        return "nx.cuda computes no block-scaled contraction yet"
    if spec.segments is not None:
        return "nx.cuda computes no segmented contraction yet"
    for what, dt in zip(("a", "b", "init")[:2 + spec.init], operands[:2 + spec.init], strict=True):
        why = _operand_reason(what, dt, acc)
        if why is not None:
            return why
    if dst is acc:
        return None
    if acc.is_float and dst.is_float and dst.bits < acc.bits and dst is not D.float4_e2m1fn:
        return None
    return (f"a {acc.name} contraction stores into {acc.name} or a narrower float but "
            f"float4_e2m1fn, not {dst.name}" if acc.is_float
            else f"a {acc.name} contraction stores into {acc.name} only, not {dst.name}")


def _aliasing_reason(dsts: Sequence[Array], operands: Sequence[Array]) -> str | None:
    """Why a call whose a or b is dst itself is declined, or None."""
    if dsts and any(o.identical(dsts[0]) for o in operands[:2]):
        return "nx.cuda declines a contraction whose a or b is dst itself"
    return None


def declines(call: Call) -> str | None:
    """Why ``contract`` declines ``call``, or None where it computes it (a call
    that does not fit is None here: the kernel refuses it)."""
    spec = call.spec
    assert isinstance(spec, S.Contract)
    if len(call.dsts) != 1 or len(call.operands) != spec.n_operands():
        return None
    why = _spec_reason(spec, call.dsts[0].dtype, [o.dtype for o in call.operands])
    return why if why is not None else _aliasing_reason(call.dsts, call.operands)


def error_factor(k: int, acc: Dtype) -> float:
    """e(K) = γ(K + 1), u the accumulator's, for float32 and float64: K rounded
    products chained from +0 in order (γ(K), the first addition exact) and
    init added last (one rounding); 0 at K = 0 and for integers (exact,
    wrapping). Complex accumulators are declined: the contract's ceiling
    γ(2K + 2) of the parts' u."""
    if k == 0 or not (acc.is_float or acc.is_complex):
        return 0.0
    if acc.is_complex:
        return gamma(2 * k + 2, unit_roundoff(acc))
    return gamma(k + 1, unit_roundoff(acc))


def _misfit(spec: S.Contract, dsts: Sequence[Array], operands: Sequence[Array]) -> Answer | None:
    """The refusal of a call that does not fit (``shape.contract_refusal``)."""
    return SH.contract_refusal(spec, [d.shape for d in dsts], [o.shape for o in operands],
                               [o.dtype for o in operands])


def _parts(x: Array, axes: Sequence[int]) -> tuple[int, list[int]]:
    """(0, strides) of ``x`` along ``axes``: a walk part without the offset."""
    return 0, [x.layout.strides[i] for i in axes]


def _launch(dev: CudaRig, spec: S.Contract, dst: Array, operands: Sequence[Array]) -> None:
    """Queue the contraction into dst."""
    a, b = operands[0], operands[1]
    init = operands[2] if spec.init else None
    batch_a = [i for i, _ in spec.batch]
    batch_b = [j for _, j in spec.batch]
    con_a = [i for i, _ in spec.contracting]
    con_b = [j for _, j in spec.contracting]
    free_a = [i for i in range(a.rank) if i not in batch_a + con_a]
    free_b = [j for j in range(b.rank) if j not in batch_b + con_b]
    batch = [a.shape[i] for i in batch_a]
    rows_shape = [a.shape[i] for i in free_a]
    cols_shape = [b.shape[j] for j in free_b]
    k_shape = [a.shape[i] for i in con_a]
    nbatch, rows, cols = math.prod(batch), math.prod(rows_shape), math.prod(cols_shape)
    k = math.prod(k_shape)
    if nbatch * rows * cols == 0:
        return
    nb, nr = len(batch), len(rows_shape)
    d_batch = list(range(nb))
    d_rows = list(range(nb, nb + nr))
    d_cols = list(range(nb + nr, dst.rank))
    out = init if init is not None else dst
    batch_walk = loops.coalesce(batch, [
        (a.layout.offset, [a.layout.strides[i] for i in batch_a]),
        (b.layout.offset, [b.layout.strides[j] for j in batch_b]),
        (dst.layout.offset, [dst.layout.strides[i] for i in d_batch]),
        (out.layout.offset, [out.layout.strides[i] for i in d_batch])])
    rows_walk = loops.coalesce(rows_shape, [_parts(a, free_a), _parts(dst, d_rows), _parts(out, d_rows)])
    cols_walk = loops.coalesce(cols_shape, [_parts(b, free_b), _parts(dst, d_cols), _parts(out, d_cols)])
    k_walk = loops.coalesce(k_shape, [_parts(a, con_a), _parts(b, con_b)])
    words = [loops.walk_words(w) for w in (batch_walk, rows_walk, cols_walk, k_walk)]
    desc = loops.upload(dev, [x for w in words for x in w])
    at = [0]
    for w in words[:-1]:
        at.append(at[-1] + len(w))
    bw, rw, cw, kw = (desc + 8 * p for p in at)
    acc = spec.acc
    ctype = "float" if acc is D.float32 else "double" if acc is D.float64 else "nxk_u64"
    acc_bytes = 4 if acc is D.float32 else 8
    tiles_m, tiles_n = -(-rows // TILE_M), -(-cols // TILE_N)
    blocks = nbatch * tiles_m * tiles_n
    module = dev.load(source())
    pa, pb, pd = loops.base(dev, a), loops.base(dev, b), loops.base(dev, dst)
    pi = loops.base(dev, init) if init is not None else pd
    module.function(f"nxk_contract<{ctype}>")((min(blocks, loops.MAX_BLOCKS),), (THREADS,), [
        bw, rw, cw, kw, np.int64(rows), np.int64(cols), np.int64(k), np.int64(tiles_m),
        np.int64(tiles_n), np.int32(a.dtype.code), np.int32(b.dtype.code),
        np.int32(init.dtype.code if init is not None else -1), np.int32(dst.dtype.code),
        np.int32(dst.dtype is acc), pa, pb, pi, pd, np.int64(blocks)],
        shared_bytes=2 * TILE_K * max(TILE_M, TILE_N) * acc_bytes)


def contract(spec: S.Contract, dsts: Sequence[Array], operands: Sequence[Array]) -> Answer:
    """``dst = init + Σ a·b`` over the contracting pairs in ``spec.acc``, each
    output a chain from +0 in increasing K with init added last, rounded once
    into dst (see the module's doc). Operands: a, b, [init]; a call with
    scales or segments is declined."""
    misfit = _misfit(spec, dsts, operands)
    if misfit is not None:
        return misfit
    dev = loops.cuda_device([*dsts, *operands])
    if dev is None or any(x.device is not dev for x in (*dsts, *operands)):
        return Answer.WRONG_DEVICE
    if (_spec_reason(spec, dsts[0].dtype, [o.dtype for o in operands]) is not None
            or _aliasing_reason(dsts, operands) is not None):
        return Answer.DECLINED
    with door(dsts, operands, device=dev) as refusal:
        if refusal is not None:
            return refusal
        _launch(dev, spec, dsts[0], operands)
    return Answer.DONE


#: What contract computes and declines, in words.
PROSE: Final = (
    "SIMT tiled kernels (64 x 64 output tiles, 16 K-steps staged in shared memory, 256 threads) for "
    "batch and contracting pairs of any layout (transposed, strided, broadcast batch, read in place), "
    "with or without init (which may be dst). Accumulators: float32 (a, b and init of float32, float16, "
    "bfloat16, float8_e4m3fn, float8_e5m2 or integers of at most 16 bits), float64 (those, float64, "
    "int32 and uint32) and integers (operands and init integers of the accumulator's signedness no "
    "wider, wrapping). dst is the accumulator's dtype or, from a float one, a narrower float but "
    "float4_e2m1fn, rounded once by the store rule. Declines complex accumulators, block scales, "
    "segments, any other operand, init or destination dtype, and a or b identical to dst."
)

#: The association of each output's sum.
ASSOCIATION: Final = (
    "each output a chain from +0 over the contracting pairs' indices in C order (K increasing), each "
    "product rounded then added in the accumulator (no fma), one thread an output, no split of K and "
    "no atomics: the same bits on every launch, on cuda-emu and on a GPU; init added last (one "
    "rounding); K = 0 gives init's element untouched, or +0; the result rounds once into dst. "
    "Integers exact, wrapping."
)

#: The statement entry of contract.
STATEMENT: Final = KernelStatement(PROSE, declines)

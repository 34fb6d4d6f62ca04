"""The contraction kernel ``contract``: what it computes and declines, which
kernel computes a call, and the statement (order and bound).

Rules:

* What it computes: batch and contracting pairs of any layout (transposed,
  strided, broadcast, reversed or offset operands, read in place through
  walks, :mod:`nxkernel_cuda.loops`), with or without init (which may be
  dst itself), Exponent and Value block scales applied at load by the
  operand's own index, Rows and Contracting segments, into these
  accumulators:

  - float32: a, b, init and Value scales of float32, float16, bfloat16,
    float8_e4m3fn, float8_e5m2, float4_e2m1fn, or integers of at most 16 bits
    (int4 to uint16);
  - float64: those and float64, int32 and uint32;
  - complex64 and complex128: those of their parts' accumulator, complex64,
    and complex128 into complex128 (no Value scales);
  - integers: a, b, init and Value scales integers of the accumulator's
    signedness, no wider than it (no Exponent scales); the sum wraps modulo
    2^bits.

  Every operand converts exactly into the accumulator. dst is the
  accumulator's dtype, or, for a float accumulator, a narrower float but
  float4_e2m1fn, for complex128 complex64, rounded once by the store rule.
* Which kernel: the tensor cores (:mod:`~nxkernel_cuda.contract_mma`) on
  sm_80 and later (cuda-emu included) for float32 from a and b each float16,
  float8_e4m3fn, float8_e5m2 or float4_e2m1fn (the float16 instruction) or
  each bfloat16 or one of those float8/float4 (the bfloat16 one), and
  int32/uint32 from a and b each int8/int4 or uint8/uint4, narrower operands
  widened exactly at staging (the bits of the wide path on operands widened
  beforehand); unscaled, with or without Rows or Contracting segments (one
  launch for all groups after a pre-pass that sorts the segmented indices by
  group on the device), or unsegmented or with Rows segments with Exponent
  scales whose blocks hold
  every aligned run of 8 products of an output (for each scaled side: its
  extent 1 along every contracting axis, or the innermost contracting
  extent and the block along it multiples of 8, as MXFP8/MXFP4's blocks of
  32), each instruction's result times 2^(ea + eb − 254). Else the SIMT
  kernels (:mod:`~nxkernel_cuda.contract_simt`): tiled for real accumulators
  without scales or segments, one thread an output otherwise (Value scales,
  Exponent scales of other layouts or with Contracting segments, complex
  accumulators,
  and segments of other dtypes: float32, float64, float16 with bfloat16,
  float8 with float32, wider integers). The choice reads dtypes,
  attributes, the scales' extents and the device model, never data.
* Order (SIMT): each output is a chain from +0 over its products in
  increasing K (C order of the contracting pairs' indices; a Contracting
  segment's products in their order among the group's indices), each product
  fused into the addition that takes it (fmaf/fma, one rounding a step), one
  thread an output, no split of K, no atomics: the same bits on every launch
  and on cuda-emu and a GPU alike; init added last (one more rounding). A
  complex output chains its even terms 2p (ar·br, ar·bi) and its odd terms
  2p + 1 (−ai·bi, ai·br) apart, each part their sum, then init. A scaled
  element is the element times its scale in the accumulator (Exponent exact,
  Value one rounding). An output without products (K = 0, a Rows id outside
  [0, g), an empty Contracting group) is init's element as the accumulator
  holds it, bits untouched, or +0.
* Bound: e(K) = γ(K + 3) for float64 and the SIMT float32 path (the chain
  γ(K), init one more, a Value scale's two rounded factors two more); float32
  also covers the tensor cores' γ(2·min(K, 8) + ⌈K/8⌉), so its e(K) is the
  larger (narrow and Exponent-scaled operands included: the scaled
  instruction result is exact barring underflow, where it rounds once, and
  overflow, as the contract's bound bars); complex √2·γ(K + 2) (K ≥ 2; each part's chains γ(K), their sum and
  init two more; the modulus √2 times the parts') and γ(4) at K = 1 (the
  textbook product within √5·u, Brent, Percival, Zimmermann 2007, then init);
  0 at K = 0 and for integers. All within γ(2K + 2).
* Declined (before any array is touched, the same rules as :func:`declines`):
  operand, init, scale or destination dtypes outside the lists above
  (booleans, wider or other-signedness integers), Exponent
  scales into integer accumulators, Value scales into complex ones, and an
  operand but init identical to dst (the kernel would read what it writes).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

from nxkernel_core import dtype as D
from nxkernel_core import spec as S
from nxkernel_core.array import Array
from nxkernel_core.declines import contract_declines
from nxkernel_core.dtype import Dtype
from nxkernel_core.kernel import Call, gamma, unit_roundoff

from . import contract_mma, contract_simt, loops
from .build import Source

__all__ = ["ALGORITHM", "ASSOCIATION", "PROSE", "contract", "declines", "error_factor",
           "sources"]

#: Operand (and init) dtypes each float accumulator takes: all convert exactly.
_INTO_F32: Final = frozenset({D.float32, D.float16, D.bfloat16, D.float8_e4m3fn, D.float8_e5m2,
                              D.float4_e2m1fn, D.int16, D.uint16, D.int8, D.uint8, D.int4, D.uint4})
_INTO_F64: Final = _INTO_F32 | {D.float64, D.int32, D.uint32}
_INTO: Final = {D.float32: _INTO_F32, D.float64: _INTO_F64, D.complex64: _INTO_F32 | {D.complex64},
                D.complex128: _INTO_F64 | {D.complex64, D.complex128}}


def sources() -> tuple[Source, ...]:
    """The contraction's sources: the SIMT kernels and the tensor-core kernels."""
    return contract_simt.source(), contract_mma.source()


def _operand_reason(what: str, dt: Dtype, acc: Dtype) -> str | None:
    """Why an operand, init or Value scale of ``dt`` is declined into ``acc``, or None."""
    if acc.is_int:
        if dt.is_int and dt.kind is acc.kind and dt.bits <= acc.bits:
            return None
        return (f"{what} {dt.name} is not an integer of the {acc.name} accumulator's signedness "
                f"no wider than it")
    if dt in _INTO[acc]:
        return None
    return f"{what} {dt.name} is not one nx.cuda converts exactly into the {acc.name} accumulator"


def _dst_reason(acc: Dtype, dst: Dtype) -> str | None:
    """Why a destination of ``dst`` is declined for ``acc``, or None."""
    if dst is acc:
        return None
    if acc.is_float and dst.is_float and dst.bits < acc.bits and dst is not D.float4_e2m1fn:
        return None
    if acc is D.complex128 and dst is D.complex64:
        return None
    if acc.is_float:
        return (f"a {acc.name} contraction stores into {acc.name} or a narrower float but "
                f"float4_e2m1fn, not {dst.name}")
    if acc.is_complex:
        return f"a {acc.name} contraction stores into {acc.name} or complex64, not {dst.name}"
    return f"a {acc.name} contraction stores into {acc.name} only, not {dst.name}"


def _spec_reason(spec: S.Contract, dst: Dtype, operands: Sequence[Dtype]) -> str | None:
    """Why nx.cuda declines ``spec`` with these dtypes (of a fitting call), or
    None: the core's walk (``declines.contract_declines``) with nx.cuda's
    operand and destination rules (init converts as an operand does)."""
    return contract_declines(spec, dst, operands, operand=_operand_reason, init=_operand_reason,
                             result=_dst_reason)


def _aliasing_reason(dsts: Sequence[Array], operands: Sequence[Array], spec: S.Contract) -> str | None:
    """Why a call reading dst itself as an operand but init is declined, or None."""
    reads = [o for i, o in enumerate(operands) if not (spec.init and i == 2)]
    if dsts and any(o.identical(dsts[0]) for o in reads):
        return "nx.cuda declines a contraction whose a, b, scale or ids is dst itself"
    return None


def declines(call: Call) -> str | None:
    """Why ``contract`` declines ``call`` (one that fits), or None where it
    computes it."""
    spec = call.spec
    assert isinstance(spec, S.Contract)
    why = _spec_reason(spec, call.dsts[0].dtype, [o.dtype for o in call.operands])
    return why if why is not None else _aliasing_reason(call.dsts, call.operands, spec)


def error_factor(k: int, acc: Dtype) -> float:
    """e(K), u the accumulator's (its parts'): γ(K + 3) for float64; for float32
    the larger of that and the tensor cores' γ(2·min(K, 8) + ⌈K/8⌉);
    √2·γ(K + 2) for complex at K ≥ 2, γ(4) at K = 1; 0 at K = 0 and for
    integers (exact, wrapping). See the module's doc."""
    if k == 0 or not (acc.is_float or acc.is_complex):
        return 0.0
    u = unit_roundoff(acc)
    if acc.is_complex:
        return gamma(4, u) if k == 1 else math.sqrt(2.0) * gamma(k + 2, u)
    simt = gamma(k + 3, u)
    return max(simt, contract_mma.error_factor(k)) if acc is D.float32 else simt


def contract(spec: S.Contract, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
    """``dst = init + Σ a·b`` of a call that fits and is not declined, its
    arrays claimed: over the contracting pairs in ``spec.acc``, each output a
    chain in increasing K with init added last, rounded once into dst (see the
    module's doc). Operands: a, b, [init], [a's scale], [b's scale], [ids]."""
    dev = loops.device_of(dsts)
    if contract_mma.takes(dev, spec, [o.dtype for o in operands], [o.shape for o in operands]):
        contract_mma.launch(dev, spec, dsts[0], operands)
    elif (spec.acc.is_complex or spec.segments is not None
          or any(s is not None for s in spec.scales)):
        contract_simt.launch_general(dev, spec, dsts[0], operands)
    else:
        contract_simt.launch_tiled(dev, spec, dsts[0], operands)


#: What contract computes and declines, in words.
PROSE: Final = (
    "Tensor cores (mma.sync, sm_80 and later; a C++ model of the instruction on cuda-emu) for float32 "
    "from a and b each float16, float8_e4m3fn, float8_e5m2 or float4_e2m1fn (the float16 m16n8k8) or each "
    "bfloat16 or one of those float8/float4 (the bfloat16 m16n8k8), and int32/uint32 from a and b each "
    "int8/int4 or uint8/uint4 (m16n8k32): narrower operands widened exactly at staging (each float8 and "
    "float4 value is a float16 and a bfloat16 value; the native float8 instructions stay unused, keeping "
    "about 13 fraction bits of the sum on sm_89/sm_90; float8 and float4 take the float16/bfloat16 "
    "instruction instead); unscaled, unsegmented or with Rows or Contracting segments, or unsegmented or "
    "with Rows segments with Exponent (e8m0) scales whose blocks hold every aligned run of 8 products of "
    "an output (each scaled "
    "side's extent 1 along every contracting axis, or the innermost contracting extent and its block "
    "along it multiples of 8: MXFP8/MXFP4 blocks of 32), each instruction's result times "
    "2^(ea + eb - 254) in float32 without forming the scales' product (code 255 NaN): 64 x 64 tiles, 32 "
    "K-steps staged in shared memory, 4 warps; segments in one launch for all groups after a pre-pass of "
    "three small launches that stably sorts the segmented indices by group on the device (ids never read "
    "back): Rows (grouped GEMM) tiles of one group's rows gathered through the permutation over a bound "
    "of ceil(rows/64) + g tiles a batch index, Contracting blocks per group running K over the group's "
    "indices. Otherwise SIMT kernels: 64 x 64 tiles of 256 threads for real accumulators, one thread an "
    "output for Value scales, Exponent scales of other layouts or with Contracting segments, complex "
    "accumulators and "
    "the segments of other dtypes. Batch and contracting pairs of any layout (read in place), init (which "
    "may be dst), Exponent and Value block scales applied at load by the operand's own index (on the "
    "tensor cores per instruction, as above), Rows (grouped, one launch of the computing kernel) and "
    "Contracting segments. Accumulators: float32 (a, b, init and Value scales of float32, float16, "
    "bfloat16, float8_e4m3fn, float8_e5m2, float4_e2m1fn or integers of at most 16 bits), float64 "
    "(those, float64, int32, uint32), "
    "complex64/complex128 (their parts' dtypes, complex64, complex128 into complex128) and integers "
    "(integers of the accumulator's signedness no wider, wrapping). dst is the accumulator's dtype, a "
    "narrower float but float4_e2m1fn, or complex64 from complex128, rounded once. Declines other operand, "
    "init, scale or destination dtypes, Exponent scales into integer accumulators, Value scales into "
    "complex ones, and an operand but init identical to dst. The tensor-core path's bits model the "
    "hardware as Fasi et al. (2021) measured it (alignment to the largest product with truncation, "
    "truncated sums): the emulator's bits may differ from a GPU's there, within the same stated bound."
)

#: The association of each output's sum.
ASSOCIATION: Final = (
    "SIMT: each output a chain from +0 over its products in increasing K (C order of the contracting "
    "pairs' indices; a Contracting group's in their order among its indices), each product fused into "
    "the addition that takes it (fmaf/fma), one thread an output, no split of K, no atomics: the same "
    "bits on every launch, on cuda-emu and on a GPU; a complex output's even terms 2p and odd terms "
    "2p + 1 chained apart, each part their sum; init added last (one rounding). Tensor cores (float32 "
    "from bfloat16/float16): each mma.sync sums 8 consecutive products from C = 0 (exact products, "
    "aligned and truncated by the hardware), each result added to a float32 chain from +0 rounded to "
    "nearest in increasing K, init last; deterministic on a device, its instruction bits the "
    "hardware's; a Contracting group's products numbered by their order among its indices, so a "
    "segmented output's bits are the unsegmented path's on gathered operands (int8/uint8: 32 products "
    "an instruction, exact). Narrow operands (float8, float4, int4/uint4) widened exactly at staging: the "
    "bits of the float16/bfloat16/int8/uint8 path on operands widened beforehand. Exponent scales on the "
    "tensor cores: each instruction's result (its 8 products in one scale block a side) times "
    "2^(ea + eb - 254) before it joins the chain, exact but for underflow (one rounding to nearest) and "
    "overflow (an infinity), NaN for code 255: the bits of the unscaled call on host-scaled operands "
    "where those are exact. Outputs without products are init untouched, or +0; the result rounds "
    "once into dst. Integers exact, wrapping."
)

#: The bound of contract, per path, dtype and device model.
ALGORITHM: Final = (
    "e(K), u the accumulator's (its parts'): SIMT float32 and float64 γ(K + 3) (the fma chain γ(K), "
    "init one rounding, a Value scale's two rounded factors two); tensor cores (float32 from "
    "bfloat16/float16, sm_80 and later, cuda-emu's model included) γ(2·min(K, 8) + ⌈K/8⌉): exact "
    "products, an instruction's sum of m products within 2u·m Σ|p| (alignment to the largest with "
    "truncation and a truncated sum, u doubled; Fasi, Higham, Mikaitis, Pranesh 2021; it assumes the 8 "
    "products of an m16n8k8 fused in one block, as sm_80 does), ⌈K/8⌉ - 1 rounded additions and init; "
    "the stated float32 e(K) is the larger of the two; segments take it with K a group's count. "
    "Complex √2·γ(K + 2) (K ≥ 2), γ(4) (K = 1). "
    "0 at K = 0 and for integers (exact, wrapping; int8/uint8 and widened int4/uint4 tensor cores too). "
    "Float8 and float4 operands, widened exactly, take the float16/bfloat16 instruction and its e(K) "
    "(not the native float8 tensor cores, which keep about 13 fraction bits of the sum on sm_89/sm_90). "
    "Exponent scales on the tensor cores keep that e(K): a power of two commutes with the instruction's "
    "alignment and truncation, and the scaled result d·2^(ea + eb - 254) is exact barring underflow "
    "(below 2^-126 one rounding, at most 2^-150 an instruction) and overflow, which the contract's bound "
    "bars; where the exact value is in float32's range it is finite though the two scales' product is not."
)

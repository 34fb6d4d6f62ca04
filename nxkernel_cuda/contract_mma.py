"""The tensor-core contraction (``kernels/contract_mma.cu``): mma.sync on sm_80
and later (and its plain C++ model on ``cuda-emu``).

Which calls take it depends on dtypes, attributes and the device model alone
(:func:`takes`): a float32 accumulator with a and b both bfloat16 or both
float16 (m16n8k8), int32 with a and b int8, uint32 with a and b uint8
(m16n8k32); no block scales, no segments; init and dst as the SIMT kernels
take them. Float8 operands stay on the SIMT kernels: the float8 tensor-core
paths of sm_89/sm_90 keep fewer accumulator bits than float32 (13 fraction
bits reported on sm_90), outside the bound nx.cuda states.

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

On cuda-emu the instruction is the plain C++ model of ``kernels/nxk_mma.cuh``
(that measurement: truncation toward zero, no extra bits); a GPU's bits may
differ from it, both within the bound.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Final

import numpy as np

from nxkernel_core import dtype as D
from nxkernel_core import spec as S
from nxkernel_core.array import Array
from nxkernel_core.dtype import Dtype
from nxkernel_core.kernel import gamma, unit_roundoff

from . import loops
from .build import Source, file_source
from .contract_simt import problem, upload_walks, walks
from .device import CudaRig

__all__ = ["KERNELS", "error_factor", "kind", "launch", "source", "takes"]

#: The kernels of ``kernels/contract_mma.cu``: bfloat16, float16, int8, uint8.
KERNELS: Final = ("nxk_contract_mma<0>", "nxk_contract_mma<1>", "nxk_contract_mma<2>",
                  "nxk_contract_mma<3>")

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


@functools.cache
def source() -> Source:
    """``kernels/contract_mma.cu`` with its four instantiations."""
    return file_source("contract_mma.cu", KERNELS)


def kind(spec: S.Contract, operands: Sequence[Dtype]) -> int | None:
    """The tensor-core kernel's KIND for these dtypes, or None."""
    if any(s is not None for s in spec.scales) or spec.segments is not None:
        return None
    if operands[0] is not operands[1]:
        return None
    return _KINDS.get((spec.acc, operands[0]))


def _arch(dev: CudaRig) -> int:
    """The device's architecture number (``sm_90`` -> 90)."""
    return int("".join(ch for ch in dev.arch if ch.isdigit()))


def takes(dev: CudaRig, spec: S.Contract, operands: Sequence[Dtype]) -> bool:
    """Whether a computed call of these dtypes takes the tensor cores on ``dev``."""
    return _arch(dev) >= MIN_ARCH and kind(spec, operands) is not None


def error_factor(k: int) -> float:
    """e(K) of the float tensor-core path: γ(2·min(K, 8) + ⌈K/8⌉), u float32's
    (see the module's doc); 0 at K = 0."""
    if k == 0:
        return 0.0
    return gamma(2 * min(k, K_STEP) + -(-k // K_STEP), unit_roundoff(D.float32))


def launch(dev: CudaRig, spec: S.Contract, dst: Array, operands: Sequence[Array]) -> None:
    """Queue the tensor-core kernel into dst (a call :func:`takes` admits)."""
    a, b = operands[0], operands[1]
    init = operands[2] if spec.init else None
    knd = kind(spec, [a.dtype, b.dtype])
    assert knd is not None
    pr = problem(spec, a, b)
    nbatch, rows, cols, k = pr.extents(a, b)
    if nbatch * rows * cols == 0:
        return
    bw, rw, cw, kw = upload_walks(dev, walks(pr, a, b, dst, init if init is not None else dst))
    tiles_m, tiles_n = -(-rows // TILE_M), -(-cols // TILE_N)
    blocks = nbatch * tiles_m * tiles_n
    stride = TILE_K * a.dtype.itemsize + PAD
    pd = loops.base(dev, dst)
    pi = loops.base(dev, init) if init is not None else pd
    module = dev.load(source())
    module.function(f"nxk_contract_mma<{knd}>")((min(blocks, loops.MAX_BLOCKS),), (THREADS,), [
        bw, rw, cw, kw, np.int64(rows), np.int64(cols), np.int64(k), np.int64(tiles_m),
        np.int64(tiles_n), np.int32(init.dtype.code if init is not None else -1),
        np.int32(dst.dtype.code), np.int32(dst.dtype is spec.acc), loops.base(dev, a),
        loops.base(dev, b), pi, pd, np.int64(blocks)],
        shared_bytes=(TILE_M + TILE_N) * stride)

"""The reduce and scan kernels: one CUDA source per program output.

Rules:

* A reduction's or a scan's terms are one program output over the loop. An
  output that is an operand (``In(i)``, or a Copy of one) reads that operand
  alone, through the source of the one-node program of its dtype, so every
  ``sum(x)`` of one dtype shares one source; any other output is the program
  evaluated per term (:mod:`nxkernel_cuda.codegen`), fused into the kernels.
* Rows: the loop's other axes (C order) give the results' indices; each row's
  terms are numbered in C order of the reduced axes (a scan's: along its axis,
  from its end where reversed). Both are walked by descriptors
  (:mod:`nxkernel_cuda.loops`), so operands may be strided, broadcast or
  offset and the results land in any layout of their destinations.
* Float Sum and Prod reduce in **lane order** (design.md §6,
  ``kernels/nxk_reduce.cuh``), in the carrier (float32 for float32 and the
  narrow floats, float64 for float64), each lane chained from +0 (Sum) or 1
  (Prod): bit for bit ``nxkernel_core.orders.lane_reduce``, whatever the
  block size or the number of blocks a row is cut into. Each result rounds
  once into its destination (any float dtype). Integers wrap in 64 bits and
  then in the destination, which any order gives alike. A complex Sum is two
  such float sums, one per part; a complex Prod multiplies by Prog's Mul in
  the same lane order, each lane chained from its first term (never from 1:
  a lane without terms is left out), the empty product 1.
* Max, Min and Arg keep (key, position, bits) per term, the key ordering the
  terms as Prog's Maximum and Minimum do (-0 below +0, every NaN above all for
  Max and below all for Min, booleans by truth, complex64 by its parts' keys,
  real part high, a NaN part a NaN), ties to the lower position:
  an associative, commutative choice, so the result is the first term with
  the extreme's bits, or the first NaN, in any order.
* Scans combine states by the **odd/even network** (design.md §6): Sum and
  Prod in the carrier (integers wrapping in 64 bits), Max and Min by Prog's
  Maximum and Minimum; a carry is state 0, so result i is the network's
  result i + 1 over the carry and the terms. Chunks of C states (a power of
  two) scan in shared memory; the full chunks' totals scan by the same network
  (recursively), and each chunk finishes from the scanned total before it:
  the whole row's network, bit for bit, for every C.
* Sources: a generated one per program output (:mod:`nxkernel_cuda.terms`)
  holds the passes over terms (``nxk_red_sum``, ``nxk_red_ext``,
  ``nxk_scan_totals``, ``nxk_scan_chunks``);
  the passes that depend on no program (a row's groups finished, the network
  over states in memory) are ``kernels/reductions.cu``, instantiated per
  carrier and state type and compiled once per device.
* Padded loads: a Padded operand is read through its descriptor
  (``loops.pad_words``, ``kernels/nxk_pad.cuh``) from the row's and the
  term's index, its walk slots running nowhere.
* Logsumexp and Moments reductions and Arg, Logsumexp and Moments scans are
  :mod:`nxkernel_cuda.statistics`' (over the same loads).
* Declined (before any array is touched): Max, Min and Arg reductions of
  complex128 terms (no 64-bit key orders them), and what :mod:`~nxkernel_cuda.statistics` declines.
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
from nxkernel_core.kernel import Call
from nxkernel_core.prog import Prog

from . import loops, plans, statistics, term_walks, terms
from .build import Source, file_source
from .launch import CudaRig

__all__ = [
    "REDUCE_PROSE",
    "SCAN_PROSE",
    "declines_reduce",
    "declines_scan",
    "reduce",
    "scan",
]

#: The C types of the sums' carriers and the scans' states the program-
#: independent passes (``kernels/reductions.cu``) are instantiated for.
SUM_TYPES: Final = ("float", "double", "nxk_u64", "NxkCAcc<float>", "NxkCAcc<double>")
STATE_TYPES: Final = ("float", "double", "nxk_i64", "nxk_u64", "nxk_u32", "NxkC64", "NxkC128")


def arrays_kernels() -> tuple[str, ...]:
    """Every kernel of ``kernels/reductions.cu``, as launched."""
    return (*(f"nxk_sum_finish<{t}>" for t in SUM_TYPES), "nxk_ext_finish",
            *(f"nxk_scan_totals_arr<{t}>" for t in STATE_TYPES),
            *(f"nxk_scan_chunks_arr<{t}>" for t in STATE_TYPES))


@functools.cache
def arrays_source() -> Source:
    """``kernels/reductions.cu``: the passes that depend on no program."""
    return file_source("reductions.cu", arrays_kernels())

#: Scan combinations, as the kernels number them.
_OPS: Final[dict[S.Monoid, int]] = {S.Monoid.SUM: 0, S.Monoid.PROD: 1, S.Monoid.MAX: 2, S.Monoid.MIN: 3}


# --------------------------------------------------------------------------
# Launching
# --------------------------------------------------------------------------




def _reduce_one(dev: CudaRig, prog: Prog, output: int, red: S.Reduction, result: Dtype,
                operands: Sequence[Array], axes: Sequence[int], dsts: Sequence[Array],
                threads: int | None, group_chunks: int | None, loads: Sequence[S.Load]) -> None:
    """Queue one reduction of output ``output`` into ``dsts`` (1 or 2), the
    operands read by ``loads``."""
    d0 = dsts[0]
    d1 = dsts[1] if len(dsts) > 1 else dsts[0]
    w = term_walks.term_walks(dev, prog, output, loads, operands, axes, per_row=(d0, d1))
    if w is None:
        return
    tprog, tout, arrays, tloads = w.tprog, w.tout, w.arrays, w.tloads
    kept_shape, rows, n = w.kept_shape, w.rows, w.n
    kept_p, red_p, coords_p = w.kept_p, w.red_p, w.coords_p
    module = dev.load(terms.reductions_source(tprog, tout, loops.pad_key(tloads)))
    tb, g_chunks, groups = plans.lane_plan(rows, n, threads, group_chunks)
    bases = [loops.base(dev, a) for a in arrays]
    p0, p1 = loops.base(dev, d0), loops.base(dev, d1)
    ext = not (red is S.Monoid.SUM or red is S.Monoid.PROD)
    t = terms.of_dtype(tprog.out_dtypes[tout])
    acc_bytes = 24 if ext else t.sum_bytes
    partial_buf, partial = loops.scratch(dev, rows * groups * acc_bytes) if groups > 1 else (None, p0)
    grid = rows * groups
    shared = max(1, min(g_chunks, -(-n // 1024))) * acc_bytes  # the group's chunk values
    finish_blocks = (loops.blocks_for(rows),), (loops.THREADS,)
    if groups > 1:
        # The finishing pass walks the results alone.
        out_walk = loops.upload(dev, loops.walk_words(loops.coalesce(
            kept_shape, [(d.layout.offset, d.layout.strides) for d in (d0, d1)])))
    if ext:
        is_max = np.int32(red is S.Monoid.MAX or (isinstance(red, S.Arg) and red.extreme is S.Extreme.MAX))
        arg = np.int32(isinstance(red, S.Arg))
        module.function("nxk_red_ext")((plans.grid(grid),), (tb,), [
            kept_p, red_p, coords_p, np.int64(n), np.int64(groups), np.int64(g_chunks), is_max, arg,
            partial, p0, p1, np.int64(grid), *bases], shared_bytes=shared)
        if groups > 1:
            dev.load(arrays_source()).function("nxk_ext_finish")(*finish_blocks, [
                out_walk, np.int64(rows), np.int64(groups), is_max, arg, np.int32(result.code), partial, p0,
                p1])
    else:
        mul = np.int32(red is S.Monoid.PROD)
        code = np.int32(result.code)
        module.function("nxk_red_sum")((plans.grid(grid),), (tb,), [
            kept_p, red_p, coords_p, np.int64(n), np.int64(groups), np.int64(g_chunks), mul, code,
            partial, p0, np.int64(grid), *bases], shared_bytes=shared)
        if groups > 1:
            dev.load(arrays_source()).function(f"nxk_sum_finish<{t.sum_t}>")(*finish_blocks, [
                out_walk, np.int64(rows), np.int64(groups), mul, code, partial, p0])
    del partial_buf  # queued work holds no reference: the stream orders its reuse


def _scan(dev: CudaRig, spec: S.Scan, dsts: Sequence[Array], operands: Sequence[Array],
          chunk: int | None) -> None:
    """Queue the scan of ``spec`` into ``dsts``."""
    carry = operands[0] if spec.carry else None
    ops = operands[1:] if spec.carry else operands
    d0 = dsts[0]
    carry_part = (carry.layout.offset, carry.layout.strides) if carry is not None else None
    w = term_walks.term_walks(dev, spec.prog, spec.output, spec.loads, ops, [spec.axis], reverse=spec.reverse,
                              along=(d0,), extra=(carry_part,))
    if w is None or w.n == 0:
        return
    tprog, tout, arrays, tloads = w.tprog, w.tout, w.arrays, w.tloads
    rows, n = w.rows, w.n
    kept_p, red_p, coords_p = w.kept_p, w.red_p, w.coords_p
    module = dev.load(terms.reductions_source(tprog, tout, loops.pad_key(tloads)))
    t = terms.of_dtype(tprog.out_dtypes[tout])
    has_carry = int(carry is not None)
    m = n + has_carry
    c = plans.scan_chunk(m, chunk)
    q, nfull = -(-m // c), m // c
    op = _OPS[spec.reduction]  # type: ignore[index]
    bases = [loops.base(dev, a) for a in arrays]
    p0 = loops.base(dev, d0)
    pc = loops.base(dev, carry) if carry is not None else p0
    keep: list[object] = []
    scanned = p0
    shared = c * t.state_bytes
    if q > 1:
        tot_buf, totals = loops.scratch(dev, rows * nfull * t.state_bytes)
        keep.append(tot_buf)
        module.function("nxk_scan_totals")((plans.grid(rows * nfull),), (c // 2,), [
            kept_p, red_p, coords_p, np.int64(m), np.int32(has_carry), np.int64(nfull), np.int32(c),
            np.int32(op), totals, pc, np.int64(rows * nfull), *bases], shared_bytes=shared)
        scanned = plans.scan_states(dev, dev.load(arrays_source()), (f"nxk_scan_totals_arr<{t.state_t}>",
                                    f"nxk_scan_chunks_arr<{t.state_t}>"), op, t.state_bytes, rows, nfull, c,
                                    totals, keep)
    module.function("nxk_scan_chunks")((plans.grid(rows * q),), (c // 2,), [
        kept_p, red_p, coords_p, np.int64(m), np.int32(has_carry), np.int64(q), np.int64(nfull),
        np.int32(c), np.int32(op), scanned, np.int32(spec.dtype.code), p0, pc, np.int64(rows * q), *bases],
        shared_bytes=shared)
    del keep  # queued work holds no reference: the stream orders the buffers' reuse


# --------------------------------------------------------------------------
# The kernels
# --------------------------------------------------------------------------


def declines_reduce(call: Call) -> str | None:
    """Why reduce declines ``call``, or None where it computes it: Max, Min and
    Arg of complex128 terms, whose 128-bit order no key holds."""
    spec = call.spec
    assert isinstance(spec, S.Reduce)
    for r, k, _ in spec.reductions:
        if spec.prog.out_dtypes[k] is D.complex128 and r is not S.Monoid.SUM and r is not S.Monoid.PROD:
            return "nx.cuda computes no Max, Min or Arg reduction of complex128 terms"
    return None


def declines_scan(call: Call) -> str | None:
    """Why scan declines ``call``, or None where it computes it."""
    spec = call.spec
    assert isinstance(spec, S.Scan)
    return statistics.declines_scan(spec)


def reduce(spec: S.Reduce, dsts: Sequence[Array], operands: Sequence[Array], *,
           threads: int | None = None, group_chunks: int | None = None) -> None:
    """``S.reduce`` of a call that fits and is not declined, its arrays
    claimed: each reduction of ``spec.reductions`` over ``spec.axes`` of its
    program output, into the destinations in order. ``threads`` and
    ``group_chunks`` choose the lane plan (:func:`~nxkernel_cuda.plans.lane_plan`; tests only)."""
    dev = loops.device_of(dsts)
    at = 0
    for red, k, dt in spec.reductions:
        count = S.results(red)
        if isinstance(red, S.Logsumexp | S.Moments):
            statistics.reduce_one(dev, spec.prog, k, red, dt, operands, spec.axes, dsts[at:at + count],
                                  threads, group_chunks, spec.loads)
        else:
            _reduce_one(dev, spec.prog, k, red, dt, operands, spec.axes, dsts[at:at + count],
                        threads, group_chunks, spec.loads)
        at += count


def scan(spec: S.Scan, dsts: Sequence[Array], operands: Sequence[Array], *,
         chunk: int | None = None) -> None:
    """``S.scan`` of a call that fits and is not declined, its arrays claimed:
    the inclusive scan of ``spec.output`` along ``spec.axis`` (from its end
    where ``reverse``), after the carry where given. ``chunk`` chooses the
    states a block scans (:func:`scan_chunk`; tests only)."""
    dev = loops.device_of(dsts)
    if isinstance(spec.reduction, S.Monoid):
        _scan(dev, spec, dsts, operands, chunk)
    else:
        statistics.scan(dev, spec, dsts, operands, chunk)


#: What reduce computes, in words.
REDUCE_PROSE: Final = (
    "Monoid Sum, Prod, Max and Min and Arg Max and Min of any program output over "
    "Plain and Padded loads (one kernel per program output, the program fused into it; an output that is an "
    "operand reads it directly): float Sum and Prod in lane order in the carrier (float32 for the "
    "narrow floats), bit for bit the host library's and orders.lane_reduce's, each result rounded "
    "once into its destination; integers wrap; Max, Min and Arg the first term with the extreme's "
    "bits (the first NaN; booleans any and all); complex Sum part by part and complex Prod by Prog's Mul "
    "in the same lane order (each lane from its first term), the host library's bits but for NaN parts' "
    "bits; Logsumexp and Moments of float terms (two lane-order passes in float64, see algorithms; "
    "Moments the host library's bits). It declines Max, Min and Arg of complex128 terms."
)

#: What scan computes, in words.
SCAN_PROSE: Final = (
    "Monoid Sum, Prod, Max and Min scans of any program output (complex ones included) over Plain and "
    "Padded loads, "
    "forward and reverse, with or without a carry (the carrier state before term 0): every one by "
    "the odd/even network in the carrier (float Sum and Prod bit for bit the host library's; "
    "complex Sum part by part and Prod by Prog's Mul, likewise; integers wrap; Max and Min exact), the "
    "carry as state 0 (a Sum without one from +0: its state 0 is +0 + term 0), each result rounded "
    "once into its "
    "destination; Arg scans (exact: the first position, in scan order, with the running extreme's "
    "bits, complex64 keyed as Arg reductions key it) and Logsumexp and Moments scans of float terms "
    "(float64 states, see algorithms; Moments the host library's bits) by the same network. It "
    "declines Arg scans of complex128 terms."
)

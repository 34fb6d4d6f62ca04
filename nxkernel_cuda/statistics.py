"""Logsumexp and Moments reductions; Arg, Logsumexp and Moments scans.

:mod:`nxkernel_cuda.reductions` dispatches these kinds here; its rules hold
(terms are one program output over the loop, rows and terms walked by
descriptors, an operand output read through the one-node program of its
dtype). Here:

* Logsumexp and Moments reduce each row in two lane-order passes
  (``kernels/nxk_reduce.cuh``) over float64 accumulators, the host library's
  algorithms (``nxkernel_host.reduce``): a first pass (Logsumexp: the
  terms' maximum m in the carrier, a NaN where a term is; Moments: the sum of
  the terms), a per-row centre (m; the sum over n, the mean), a second pass
  (Σ exp(x − m), x − m and exp in the carrier; Σ (x − mean)² in float64), then
  ``m + log s`` (m where m is not finite) or the mean and ``s / n``, each
  rounded once into its destination. Float64 sums of float64 values with no
  fma: Moments has the host's bits, Logsumexp the host's order (its exp and
  log are libdevice's on a GPU, libm's on cuda-emu).
* Scans run the odd/even network (design.md §6) over states
  (``kernels/nxk_stats.cuh``): Arg over (key, position, bits), whose
  combination is associative and commutative, so exact; Logsumexp over
  float64 log-sum-exps; Moments over float64 (count, mean, M2) by Chan's
  merge (the host's bits). A carry is state 0. Chunks, their totals' scan
  (recursively, ``kernels/statistics.cu``) and the finishing pass follow
  the reductions' scan plan (:mod:`~nxkernel_cuda.plans`).
* A NaN result of Logsumexp or Moments is stored as the positive quiet NaN,
  so a scan's prefix is bit for bit the prefix of its scan.
* Loads: a Padded operand is read through its descriptor
  (``loops.pad_words``), as :mod:`~nxkernel_cuda.reductions` reads it.
* Declined (before any array is touched): Arg scans of complex128 terms
  (complex64 terms key as Arg reductions key them).
"""

from __future__ import annotations

import functools
import string
from collections.abc import Sequence
from typing import Final

import numpy as np

from nxkernel_core import dtype as D
from nxkernel_core import spec as S
from nxkernel_core.array import Array
from nxkernel_core.dtype import Dtype
from nxkernel_core.prog import Prog

from . import codegen, loops, plans, term_walks, terms
from .build import Source, file_source, render
from .launch import Arg, CudaRig

__all__ = [
    "ALGORITHMS",
    "ARRAY_KERNELS",
    "ASSOCIATION",
    "declines_scan",
    "reduce_one",
    "scan",
    "source",
    "terms_code",
    "terms_source",
]

#: The state types of the scans' array passes, as ``kernels/nxk_stats.cuh``
#: names their combinations, and each state's size in bytes.
_OPS: Final = {"arg": ("NxkArgOp", 24), "lse": ("NxkLseOp", 8), "mom": ("NxkMomOp", 24)}

#: Every kernel of ``kernels/statistics.cu``, as launched.
ARRAY_KERNELS: Final = ("nxk_stat_center", "nxk_stat_finish",
                        *(f"nxk_stat_totals_arr<{op}>" for op, _ in _OPS.values()),
                        *(f"nxk_stat_chunks_arr<{op}>" for op, _ in _OPS.values()))


@functools.cache
def source() -> Source:
    """``kernels/statistics.cu``: the passes that depend on no program."""
    return file_source("statistics.cu", ARRAY_KERNELS)


# --------------------------------------------------------------------------
# The generated source
# --------------------------------------------------------------------------

# Slots as in reductions' template: eval, nin, T, coords, loads, outs, args,
# aparams; key, code, store_code, the per-dtype bodies of terms.Terms.
# Internal variables: rowpos[a], array a's position at the row's first term
# (kept walk: operands, then the destinations d0 and d1, then a scan's carry);
# pos[a], the offset of term t (reduced walk: operands, then a scan's d0, d1).
_COMMON: Final = string.Template("""\
#include "nxk_scalar.cuh"
#include "nxk_loop.cuh"
#include "nxk_pad.cuh"
#include "nxk_reduce.cuh"
#include "nxk_stats.cuh"

${eval}
#define NIN ${nin}
typedef ${T} NxkT;

__device__ __forceinline__ nxk_i64 nxk_key(NxkT v, int is_max) { ${key} }
__device__ __forceinline__ nxk_u64 nxk_code(NxkT v) { ${code} }
__device__ __forceinline__ void nxk_store_code(char* d, nxk_i64 p, nxk_u64 c) { ${store_code} }

""" + codegen.TERM_CODE + """
// A scan's row: its terms, carry and destinations (the chunk sources' base).
struct NxkScanRow {
    NxkIn in;
    const nxk_i64* red;
    const nxk_i64* coords;
    nxk_i64 rowpos[NIN + 3];
    nxk_i64 row;
    int has_carry;
    const char* carry;
    nxk_i64 cstride;
    int dtc;
    char* d0;
    char* d1;
    __device__ NxkT term(nxk_i64 t) const { return nxk_term<NIN + 2>(in, red, coords, rowpos, row, t); }
    // The positions of result t in d0 and d1.
    __device__ void at(nxk_i64 t, nxk_i64* p0, nxk_i64* p1) const {
        nxk_i64 pos[NIN + 2];
        nxk_walk<NIN + 2>(red, t, pos);
        *p0 = rowpos[NIN] + pos[NIN];
        *p1 = rowpos[NIN + 1] + pos[NIN + 1];
    }
};

template <class P>
__device__ __forceinline__ void nxk_scan_setup(P& p, const nxk_i64* red, const nxk_i64* coords, int has_carry,
                                               int param, const char* carry, nxk_i64 cstride, int dtc,
                                               char* d0, char* d1) {
    p.red = red;
    p.coords = coords;
    p.has_carry = has_carry;
    p.carry = carry;
    p.cstride = cstride;
    p.dtc = dtc;
    p.d0 = d0;
    p.d1 = d1;
    p.op = decltype(p.op)::make(param);
}

// The full chunks' totals of a scan of source P: block (row, k), k < nfull.
template <class P>
__device__ __forceinline__ void nxk_scan_totals_of(P& p, const nxk_i64* kept, int csize, nxk_i64 nfull,
                                                   char* totals, nxk_i64 blocks) {
    typedef typename P::State State;
    for (nxk_i64 b = blockIdx.x; b < blocks; b += gridDim.x) {
        p.row = b / nfull;
        const nxk_i64 k = b % nfull;
        nxk_walk<NIN + 3>(kept, p.row, p.rowpos);
        nxk_net_total(p, k, csize, reinterpret_cast<State*>(totals) + p.row * nfull + k);
    }
}

// The results of chunk k of each row of a scan of source P, after the
// scanned totals `scanned` (nfull a row): block (row, k), k < q.
template <class P>
__device__ __forceinline__ void nxk_scan_chunks_of(P& p, const nxk_i64* kept, nxk_i64 m, int csize, nxk_i64 q,
                                                   nxk_i64 nfull, const char* scanned, nxk_i64 blocks) {
    typedef typename P::State State;
    for (nxk_i64 b = blockIdx.x; b < blocks; b += gridDim.x) {
        p.row = b / q;
        const nxk_i64 k = b % q;
        nxk_walk<NIN + 3>(kept, p.row, p.rowpos);
        nxk_net_chunk(p, k, m, csize, reinterpret_cast<const State*>(scanned) + p.row * nfull);
    }
}

// ---- Arg scans: (key, position, bits), no carry --------------------------------

struct NxkArgSrc : NxkScanRow {
    typedef NxkExt State;
    NxkArgOp op;
    __device__ State state(nxk_i64 s) const {
        const NxkT v = term(s);
        State a;
        a.key = nxk_key(v, op.is_max);
        a.pos = s;
        a.code = nxk_code(v);
        return a;
    }
    __device__ void store(nxk_i64 s, State v) const {
        nxk_i64 p0, p1;
        at(s, &p0, &p1);
        nxk_store_code(d0, p0, v.code);
        nxk_st_i64(d1, p1, v.pos);
    }
};

${arg_kernels}
${floats}""")

# The float terms' part. Slots: val, the carrier value of a term (carrier C
# type NxkC); carry, the carry's loader (its dtype is the carrier).
_FLOATS: Final = string.Template("""
typedef ${carrier} NxkC;
__device__ __forceinline__ NxkC nxk_val(NxkT v) { return nxk_val_${name}(v); }
__device__ __forceinline__ double nxk_carry_at(const char* c, nxk_i64 p) {
    return (double)nxk_ld_${cname}(c, p);
}

// ---- Logsumexp and Moments reductions: two lane-order passes ------------------

// kind 0 Logsumexp, 1 Moments; pass 1: the maximum (from -inf, a NaN where a
// term is) or the sum of the terms; pass 2: the sum of exp(x - m) (x - m and
// exp in the carrier, m replaced by 0 where it is not finite) or of
// (x - mean)^2; in double from +0.
struct NxkStatSrc {
    typedef double Acc;
    NxkIn in;
    const nxk_i64* red;
    const nxk_i64* coords;
    const nxk_i64* rowpos;
    nxk_i64 row;
    int kind;
    int pass;
    double center;
    __device__ Acc start() const { return (pass == 1 && kind == 0) ? -nxk_inf() : 0.0; }
    __device__ Acc term(nxk_i64 t) const {
        const NxkC x = nxk_val(nxk_term<NIN>(in, red, coords, rowpos, row, t));
        if (pass == 1) return (double)x;
        if (kind == 0) return (double)nxk_exp_c((NxkC)(x - (NxkC)center));
        const double d = (double)x - center;
        return d * d;
    }
    __device__ Acc combine(Acc a, Acc b) const { return (pass == 1 && kind == 0) ? nxk_nanmax(a, b) : a + b; }
    __device__ Acc shfl_down(Acc v, int d) const { return __shfl_down_sync(NXK_FULL_MASK, v, d, NXK_LANES); }
};

// Block b = (row, group) of a pass: the group's lane-order value into
// partial[b]. center: a row's m (0 where not finite) or mean, for pass 2.
extern "C" __global__ void __launch_bounds__(256)
nxk_stat_pass(const nxk_i64* __restrict__ kept, const nxk_i64* __restrict__ red,
              const nxk_i64* __restrict__ coords, nxk_i64 n, nxk_i64 groups, nxk_i64 group_chunks,
              int kind, int pass, const char* center, char* partial, nxk_i64 blocks, ${aparams})
{
    for (nxk_i64 b = blockIdx.x; b < blocks; b += gridDim.x) {
        const nxk_i64 row = b / groups;
        const nxk_i64 g = b % groups;
        nxk_i64 rowpos[NIN];
        nxk_walk<NIN>(kept, row, rowpos);
        NxkStatSrc src;
${sins}
        src.red = red;
        src.coords = coords;
        src.rowpos = rowpos;
        src.row = row;
        src.kind = kind;
        src.pass = pass;
        src.center = 0.0;
        if (pass == 2) {
            const double c = reinterpret_cast<const double*>(center)[row];
            src.center = (kind == 1 || nxk_finite(c)) ? c : 0.0;
        }
        const nxk_i64 chunks = (n + NXK_LANE_BLOCK - 1) / NXK_LANE_BLOCK;
        const nxk_i64 c0 = g * group_chunks;
        const nxk_i64 c1 = c0 + group_chunks < chunks ? c0 + group_chunks : chunks;
        double r;
        nxk_lane_group(src, n, c0, c1, &r);
        if (threadIdx.x == 0) reinterpret_cast<double*>(partial)[b] = r;
        __syncthreads();  // shared memory is reused by the next block index
    }
}

// ---- Logsumexp scans: float64 log-sum-exps --------------------------------------

struct NxkLseSrc : NxkScanRow {
    typedef double State;
    NxkLseOp op;
    __device__ State state(nxk_i64 s) const {
        if (has_carry && s == 0) return nxk_carry_at(carry, rowpos[NIN + 2]);
        return (double)nxk_val(term(s - has_carry));
    }
    __device__ void store(nxk_i64 s, State v) const {
        if (s < has_carry) return;
        nxk_i64 p0, p1;
        at(s - has_carry, &p0, &p1);
        nxk_store_float(dtc, d0, p0, nxk_canon_f64(v));
    }
};

${lse_kernels}

// ---- Moments scans: float64 (count, mean, M2) -----------------------------------

struct NxkMomSrc : NxkScanRow {
    typedef NxkMom State;
    NxkMomOp op;
    __device__ State state(nxk_i64 s) const {
        State a;
        if (has_carry && s == 0) {
            const nxk_i64 c = rowpos[NIN + 2];
            a.n = nxk_carry_at(carry, c);
            a.mean = nxk_carry_at(carry, c + cstride);
            a.m2 = nxk_carry_at(carry, c + 2 * cstride) * a.n;
            return a;
        }
        a.n = 1.0;
        a.mean = (double)nxk_val(term(s - has_carry));
        a.m2 = nxk_finite(a.mean) ? 0.0 : nxk_f64_of_bits(NXK_QNAN_F64);
        return a;
    }
    __device__ void store(nxk_i64 s, State v) const {
        if (s < has_carry) return;
        nxk_i64 p0, p1;
        at(s - has_carry, &p0, &p1);
        nxk_store_float(dtc, d0, p0, nxk_canon_f64(v.mean));
        nxk_store_float(dtc, d1, p1, nxk_canon_f64(v.m2 / v.n));
    }
};

${mom_kernels}
""")

# A scan's two passes over terms, for chunk source ${src}: nxk_${kind}_totals
# (block (row, k), k < nfull) and nxk_${kind}_chunks (block (row, k), k < q).
_SCAN_KERNELS: Final = string.Template("""\
extern "C" __global__ void __launch_bounds__(1024)
nxk_${kind}_totals(const nxk_i64* __restrict__ kept, const nxk_i64* __restrict__ red,
                   const nxk_i64* __restrict__ coords, int has_carry, int param, const char* carry,
                   nxk_i64 cstride, int csize, nxk_i64 nfull, char* totals, nxk_i64 blocks, ${aparams})
{
    ${src} p;
${pins}
    nxk_scan_setup(p, red, coords, has_carry, param, carry, cstride, 0, nullptr, nullptr);
    nxk_scan_totals_of(p, kept, csize, nfull, totals, blocks);
}

extern "C" __global__ void __launch_bounds__(1024)
nxk_${kind}_chunks(const nxk_i64* __restrict__ kept, const nxk_i64* __restrict__ red,
                   const nxk_i64* __restrict__ coords, int has_carry, int param, const char* carry,
                   nxk_i64 cstride, int csize, nxk_i64 m, nxk_i64 q, nxk_i64 nfull, const char* scanned,
                   int dtc, char* d0, char* d1, nxk_i64 blocks, ${aparams})
{
    ${src} p;
${pins}
    nxk_scan_setup(p, red, coords, has_carry, param, carry, cstride, dtc, d0, d1);
    nxk_scan_chunks_of(p, kept, m, csize, q, nfull, scanned, blocks);
}
""")

#: The kernels of a generated source of float terms, and of other terms.
FLOAT_KERNELS: Final = ("nxk_arg_totals", "nxk_arg_chunks", "nxk_stat_pass", "nxk_lse_totals",
                        "nxk_lse_chunks", "nxk_mom_totals", "nxk_mom_chunks")
OTHER_KERNELS: Final = ("nxk_arg_totals", "nxk_arg_chunks")


def terms_code(prog: Prog, output: int, pads: tuple[int | None, ...] = ()) -> str:
    """The CUDA source of the passes over terms of ``prog``'s output
    ``output`` over loads of ``pads`` (``loops.pad_key``, as
    ``terms.reductions_code`` reads them; pure): Arg scans for every
    real dtype, and for floats the Logsumexp and Moments reductions and
    scans."""
    dt = prog.out_dtypes[output]
    t = terms.of_dtype(dt)  # the Arg reductions' key and bits, shared
    nin = prog.n_ins
    aparams = ", ".join(f"const char* a{i}" for i in range(nin))
    pins = "\n".join(f"    p.in.a[{i}] = a{i};" for i in range(nin))

    def kernels(kind: str, src: str) -> str:
        return render(_SCAN_KERNELS, kind=kind, src=src, aparams=aparams, pins=pins)

    floats = ""
    if dt.is_float:
        carrier = D.carrier(dt)
        floats = render(_FLOATS, carrier="double" if dt is D.float64 else "float",
                        name=codegen.scalar(dt).name, cname=codegen.scalar(carrier).name, aparams=aparams,
                        sins="\n".join(f"        src.in.a[{i}] = a{i};" for i in range(nin)),
                        lse_kernels=kernels("lse", "NxkLseSrc"), mom_kernels=kernels("mom", "NxkMomSrc"))
    return render(
        _COMMON, **terms.term_slots(prog, output, pads), key=t.key, code=t.code, store_code=t.store_code,
        arg_kernels=kernels("arg", "NxkArgSrc"), floats=floats)


@functools.lru_cache(maxsize=256)
def terms_source(prog: Prog, output: int, pads: tuple[int | None, ...] = ()) -> Source:
    """The generated source of ``prog``'s output ``output`` over loads of
    ``pads`` (cached)."""
    kernels = FLOAT_KERNELS if prog.out_dtypes[output].is_float else OTHER_KERNELS
    return Source("statistics_terms.cu", terms_code(prog, output, pads), kernels)


# --------------------------------------------------------------------------
# Reductions
# --------------------------------------------------------------------------


def reduce_one(dev: CudaRig, prog: Prog, output: int, red: S.Logsumexp | S.Moments, result: Dtype,
               operands: Sequence[Array], axes: Sequence[int], dsts: Sequence[Array],
               threads: int | None, group_chunks: int | None, loads: Sequence[S.Load]) -> None:
    """Queue the Logsumexp (one destination) or Moments (mean, then variance)
    reduction of output ``output`` over ``axes`` into ``dsts``, the operands
    read by ``loads``: two lane-order passes, the lane plan
    ``plans.lane_plan``'s. A Padded operand is read through its
    descriptor, its walk slots running nowhere."""
    w = term_walks.term_walks(dev, prog, output, loads, operands, axes)
    if w is None:
        return
    tprog, tout, arrays, tloads = w.tprog, w.tout, w.arrays, w.tloads
    kept_shape, rows, n = w.kept_shape, w.rows, w.n
    kept_p, red_p, coords_p = w.kept_p, w.red_p, w.coords_p
    d0 = dsts[0]
    d1 = dsts[1] if len(dsts) > 1 else d0
    out_walk = loops.upload(dev, loops.walk_words(loops.coalesce(
        kept_shape, [(d.layout.offset, d.layout.strides) for d in (d0, d1)])))
    module = dev.load(terms_source(tprog, tout, loops.pad_key(tloads)))
    passes = dev.load(source())
    tb, g_chunks, groups = plans.lane_plan(rows, n, threads, group_chunks)
    partial_buf, partial = loops.scratch(dev, rows * groups * 8)
    center_buf, center = loops.scratch(dev, rows * 8)
    bases = [loops.base(dev, a) for a in arrays]
    kind = np.int32(isinstance(red, S.Moments))
    grid = rows * groups
    shared = max(1, min(g_chunks, -(-n // 1024))) * 8  # the group's chunk values
    one_row = (loops.blocks_for(rows),), (loops.THREADS,)
    for p in (1, 2):
        module.function("nxk_stat_pass")((plans.grid(grid),), (tb,), [
            kept_p, red_p, coords_p, np.int64(n), np.int64(groups), np.int64(g_chunks), kind, np.int32(p),
            center, partial, np.int64(grid), *bases], shared_bytes=shared)
        if p == 1:
            passes.function("nxk_stat_center")(*one_row, [
                np.int64(rows), np.int64(groups), kind, np.int64(n), partial, center])
    passes.function("nxk_stat_finish")(*one_row, [
        out_walk, np.int64(rows), np.int64(groups), kind, np.int64(n), np.int32(result.code), partial, center,
        loops.base(dev, d0), loops.base(dev, d1)])
    del partial_buf, center_buf  # queued work holds no reference: the stream orders their reuse


# --------------------------------------------------------------------------
# Scans
# --------------------------------------------------------------------------


def _kind(r: S.Reduction) -> str:
    """The scan's state kind: ``arg``, ``lse`` or ``mom``."""
    if isinstance(r, S.Arg):
        return "arg"
    return "lse" if isinstance(r, S.Logsumexp) else "mom"


def scan(dev: CudaRig, spec: S.Scan, dsts: Sequence[Array], operands: Sequence[Array],
         chunk: int | None) -> None:
    """Queue the Arg, Logsumexp or Moments scan of ``spec`` into ``dsts``: the
    network over states, chunked by ``plans.scan_chunk``."""
    carry = operands[0] if spec.carry else None
    ops = operands[1:] if spec.carry else operands
    d0 = dsts[0]
    d1 = dsts[1] if len(dsts) > 1 else d0
    cstride = 0
    carry_part: tuple[int, Sequence[int]] | None = None
    if carry is not None:
        strides = carry.layout.strides
        if isinstance(spec.reduction, S.Moments):  # its last axis: count, mean, variance
            cstride, strides = strides[-1], strides[:-1]
        carry_part = (carry.layout.offset, strides)
    w = term_walks.term_walks(dev, spec.prog, spec.output, spec.loads, ops, [spec.axis], reverse=spec.reverse,
                              along=(d0, d1), extra=(carry_part,))
    if w is None or w.n == 0:
        return
    tprog, tout, arrays, tloads = w.tprog, w.tout, w.arrays, w.tloads
    rows, n = w.rows, w.n
    kept_p, red_p, coords_p = w.kept_p, w.red_p, w.coords_p
    module = dev.load(terms_source(tprog, tout, loops.pad_key(tloads)))
    kind = _kind(spec.reduction)
    op, state_bytes = _OPS[kind]
    param = int(isinstance(spec.reduction, S.Arg) and spec.reduction.extreme is S.Extreme.MAX)
    has_carry = int(carry is not None)
    m = n + has_carry
    c = plans.scan_chunk(m, chunk)
    q, nfull = -(-m // c), m // c
    bases = [loops.base(dev, a) for a in arrays]
    p0, p1 = loops.base(dev, d0), loops.base(dev, d1)
    pc = loops.base(dev, carry) if carry is not None else p0
    head: list[Arg] = [kept_p, red_p, coords_p, np.int32(has_carry), np.int32(param), pc, np.int64(cstride),
                       np.int32(c)]
    keep: list[object] = []
    scanned = p0
    shared = c * state_bytes
    if q > 1:
        tot_buf, totals = loops.scratch(dev, rows * nfull * state_bytes)
        keep.append(tot_buf)
        module.function(f"nxk_{kind}_totals")((plans.grid(rows * nfull),), (c // 2,), [
            *head, np.int64(nfull), totals, np.int64(rows * nfull), *bases], shared_bytes=shared)
        scanned = plans.scan_states(dev, dev.load(source()), (f"nxk_stat_totals_arr<{op}>",
                                    f"nxk_stat_chunks_arr<{op}>"), param, state_bytes, rows, nfull, c, totals,
                                    keep)
    module.function(f"nxk_{kind}_chunks")((plans.grid(rows * q),), (c // 2,), [
        *head, np.int64(m), np.int64(q), np.int64(nfull), scanned, np.int32(spec.dtype.code), p0, p1,
        np.int64(rows * q), *bases], shared_bytes=shared)
    del keep  # queued work holds no reference: the stream orders the buffers' reuse


# --------------------------------------------------------------------------
# Declines
# --------------------------------------------------------------------------


def declines_scan(spec: S.Scan) -> str | None:
    """Why an Arg, Logsumexp or Moments scan of ``spec`` declines (Arg of
    complex128 terms, whose 128-bit order no key holds), or None (a Monoid
    scan too)."""
    if isinstance(spec.reduction, S.Arg) and spec.prog.out_dtypes[spec.output] is D.complex128:
        return "nx.cuda computes no Arg scan of complex128 terms"
    return None


# --------------------------------------------------------------------------
# The statement's entries
# --------------------------------------------------------------------------

#: The order of the Logsumexp and Moments reductions' sums.
ASSOCIATION: Final = {
    "reduce Logsumexp": (
        "Σ exp(x − m) in lane order (as reduce Sum) with float64 lanes chained from +0, each term "
        "exp(x − m) computed in the carrier and widened exactly: the host library's order, on every block "
        "size and grid."),
    "reduce Moments": (
        "two float64 sums in lane order (as reduce Sum), of the terms (widened exactly) and of (x − mean)², "
        "with no fused multiply-add: the host library's bits, on every block size and grid."),
}

#: Logsumexp's and Moments' algorithms and bounds.
ALGORITHMS: Final = {
    "Logsumexp": (
        "reduce: m = the terms' maximum in the carrier c (float32 for float32 and narrower, float64 for "
        "float64; exact; NaN where a term is); where m is finite, m + log s with s = Σ exp(x − m): x − m "
        "rounded once in c, exp in c (on a GPU libdevice's expf, within 2 ulps, or exp, within 1 ulp; on "
        "cuda-emu the C library's, within 1 ulp), the sum in float64 in lane order, log (1 ulp) and "
        "m + log s in float64; then rounded once into the destination. Special values: −∞ for no term or "
        "terms all −∞, +∞ where m is +∞, NaN where a term is (stored as the positive quiet NaN). Bound, "
        "barring overflow and underflow, b the largest |x|, n the terms: |lse − L| ≤ (2b + 9)·u_c + "
        "(n + 2b + 3 ln n + 3)·u₆₄ before the rounding into the destination (it allows exp 4 ulps). "
        "scan: the states are log-sum-exps in float64 (a term's is the term, the carry's is itself), "
        "combined by the odd/even network with lse(a, b) = h + log1p(exp(l − h)), h and l the larger and "
        "smaller (NaN where either is, h where h is ±∞), exp and log1p within 1 ulp (libdevice's on a GPU, "
        "the C library's on cuda-emu: the host library's bits where they round alike). Each combination "
        "errs by at most (2B + 3)·u, u = 2⁻⁵³, B the largest |state| (at most b + ln(k + 1), the carry "
        "counted), so |result i − L| ≤ D·(2B + 3)·u, D the network's combinations (see scan), to first "
        "order, before the rounding into the destination; a NaN result is the positive quiet NaN."),
    "Moments": (
        "reduce: two passes in float64 (terms widen exactly), mean = (lane-order sum of x)/n, variance = "
        "(lane-order sum of (x − mean)²)/n: the host library's bits. NaN for no term or where a term is; "
        "with an infinite term and no NaN the mean is the sum of the infinities (NaN with both signs) and "
        "the variance NaN; the variance is never negative; a NaN is stored as the positive quiet NaN. "
        "Bounds, barring overflow and underflow, u = 2⁻⁵³, μ and σ² the exact mean and variance: "
        "|mean − μ| ≤ δ = γ(n)·Σ|x|/n, |var − σ²| ≤ γ(n + 3)·σ² + (1 + γ(n + 3))·δ², before the "
        "rounding into the destination. scan: the states are (count, mean, M2) in float64: a term's is "
        "(1, x, 0), with M2 NaN for an infinite or NaN x; the carry's is (count, mean, variance·count). "
        "They combine by the odd/even network with Chan's merge: n = na + nb, d = mb − ma, mean = "
        "ma + d·(nb/n), M2 = M2a + M2b + d²·(na·(nb/n)), no fused multiply-add; a state of count 0 leaves "
        "the other; an infinite or NaN mean gives mean ma + mb and M2 NaN: the host library's bits. The "
        "variance is M2/n, never negative. Bounds to first order, D the network's combinations, M the "
        "largest |x| (and |carry mean|), μ and σ² the exact moments of the terms up to i: "
        "|mean − μ| ≤ 7·D·u·M and |var − σ²| ≤ D·u·(6σ² + 10·√D·M·σ), before the rounding into the "
        "destination."),
}

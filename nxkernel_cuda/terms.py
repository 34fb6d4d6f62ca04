"""The generated source of the reduce and scan kernels over a program's output.

Rules:

* ``of_dtype(dt)`` gives the C of terms of ``dt`` (``Terms``): the Sum/Prod
  carrier and the scan state (float32 for float32 and the narrow floats,
  float64 for float64, 64-bit integers wrapping, ``NxkCAcc`` part by part for
  complex), the keys that order Max, Min and Arg (-0 below +0, NaN above all
  for Max and below all for Min), and the stores that round each result once
  into its destination.
* ``reductions_code(prog, output, pads)`` renders one source per program
  output holding the passes over terms (``KERNELS``): the term is output
  ``output`` evaluated at the term's index through walks (operands strided,
  broadcast, offset, Padded) and Coord indices; ``term_program`` reads an
  output that is an operand, or its Copy, through the one-node program of
  its dtype, so every ``sum(x)`` of one dtype shares one source.
"""

from __future__ import annotations

import functools
import string
from dataclasses import dataclass
from typing import Final, final

from nxkernel_core import dtype as D
from nxkernel_core.dtype import Dtype, Kind
from nxkernel_core.prog import Convert, In, Op1, Prog

from . import codegen
from .build import Source, render

__all__ = ["KERNELS", "Terms", "of_dtype", "reductions_code", "reductions_source", "term_program",
           "term_slots"]

#: The kernels of every generated reductions source.
KERNELS: Final = ("nxk_red_sum", "nxk_red_ext", "nxk_scan_totals", "nxk_scan_chunks")


# --------------------------------------------------------------------------
# Terms of each dtype, as C
# --------------------------------------------------------------------------


@final
@dataclass(frozen=True, slots=True)
class Terms:
    """The C of a term dtype's reductions: the Sum/Prod carrier, the scan state
    (C types of ``SUM_TYPES`` and ``STATE_TYPES``) and their sizes in bytes,
    and the bodies of the per-dtype functions."""

    sum_t: str
    sum_bytes: int
    state_t: str
    state_bytes: int
    to_sum: str
    key: str
    code: str
    to_state: str
    carry_state: str
    store_sum: str
    store_state: str
    store_code: str


def _complex_terms(dt: Dtype) -> Terms:
    """The C of complex terms (``kernels/nxk_complex.cuh``): Sum and Prod
    accumulate ``NxkCAcc`` (part by part; Prog's Mul from the first term, the
    empty product 1), scans combine the complex value itself, and each result
    rounds once per part into its complex destination. Max, Min and Arg key a
    complex64 term by its parts' keys, real part high; complex128's 128 bits
    fit no key, and reduce declines those reductions of it (its key is then
    the real part's, never launched)."""
    s = codegen.scalar(dt)
    c64 = dt is D.complex64
    part = "float" if c64 else "double"
    return Terms(
        sum_t=f"NxkCAcc<{part}>", sum_bytes=12 if c64 else 24, state_t=s.ctype, state_bytes=8 if c64 else 16,
        to_sum="return nxk_cacc(v);",
        key="return nxk_key_c64(v, is_max);" if c64 else "return (nxk_i64)nxk_key_f64(v.re);",
        code="return nxk_code_c64(v);" if c64 else "return nxk_bits_f64(v.re);",
        to_state="return v;",
        carry_state=f"return nxk_ld_{s.name}(c, p);",
        store_sum="nxk_store_cacc(code, d, p, v);",
        store_state="nxk_store_cpx(code, d, p, v);",
        store_code=("nxk_st_c64(d, p, nxk_of_code_c64(c));" if c64
                    else "nxk_st_f64(d, p, nxk_of_code_f64(c));"),
    )


def of_dtype(dt: Dtype) -> Terms:
    """The C of terms of ``dt`` (its storage value is ``v``)."""
    if dt.is_complex:
        return _complex_terms(dt)
    s = codegen.scalar(dt)
    n = s.name
    store_code = f"nxk_st_{n}(d, p, nxk_of_code_{n}(c));"
    if dt is D.float8_e5m2:
        # A Max, Min or Arg extreme (in the carrier) rounds once into its
        # destination, as a scan's does: no store makes an infinity of e5m2
        # (±0x7C), which saturates to ±57344 (±0x7B).
        store_code = f"c = (c & 0x7Full) == 0x7Cull ? c - 1 : c; {store_code}"
    if dt.is_float:
        wide = "double" if dt is D.float64 else "float"
        suffix = "f64" if dt is D.float64 else "f32"
        key = (f"(nxk_i64)(nxk_key_{n}(v) ^ 0x8000000000000000ull)" if dt is D.float64
               else f"(nxk_i64)nxk_key_{n}(v)")
        return Terms(
            sum_t=wide, sum_bytes=8 if dt is D.float64 else 4, state_t=wide,
            state_bytes=8 if dt is D.float64 else 4,
            to_sum=f"return nxk_val_{n}(v);",
            key=f"if (nxk_isnan_{n}(v)) return is_max ? NXK_I64_MAX : NXK_I64_MIN; return {key};",
            code=f"return nxk_code_{n}(v);",
            to_state=f"return nxk_val_{n}(v);",
            # The carry is in the carrier: float32 for the narrow floats.
            carry_state=f"return nxk_ld_{suffix}(c, p);",
            store_sum="nxk_store_float(code, d, p, (double)v);",
            store_state="nxk_store_float(code, d, p, (double)v);",
            store_code=store_code,
        )
    carrier = codegen.scalar(D.carrier(dt))
    if dt.is_int:
        signed = dt.kind is Kind.SIGNED
        state = "nxk_i64" if signed else "nxk_u64"
        return Terms(
            sum_t="nxk_u64", sum_bytes=8, state_t=state, state_bytes=8,
            to_sum=f"return (nxk_u64)({state})v;",
            key="return (nxk_i64)v;" if signed else "return (nxk_i64)((nxk_u64)v ^ 0x8000000000000000ull);",
            code=f"return nxk_code_{n}(v);",
            to_state=f"return ({state})v;",
            carry_state=f"return ({state})nxk_ld_{carrier.name}(c, p);",
            store_sum=f"nxk_st_{n}(d, p, nxk_of_code_{n}(v));",
            store_state=f"nxk_st_{n}(d, p, nxk_of_code_{n}((nxk_u64)v));",
            store_code=store_code,
        )
    return Terms(
        sum_t="nxk_u64", sum_bytes=8, state_t="nxk_u32", state_bytes=4,
        to_sum="return (nxk_u64)(v != 0);",
        key="return (nxk_i64)(v != 0);",
        code="return (nxk_u64)(v != 0);",
        to_state="return (nxk_u32)(v != 0);",
        carry_state=f"return (nxk_u32)(nxk_ld_{carrier.name}(c, p) != 0);",
        store_sum=f"nxk_st_{n}(d, p, (nxk_u8)(v != 0));",
        store_state=f"nxk_st_{n}(d, p, (nxk_u8)v);",
        store_code=store_code,
    )


# --------------------------------------------------------------------------
# The source
# --------------------------------------------------------------------------

# Slots: eval, the program; nin, its operands; T, the term's storage type;
# out, the output the terms are; coords, loads, outs, args: the term's
# evaluation (as in elementwise.TEMPLATE); the per-dtype bodies of Terms;
# aparams, the operand pointer parameters a<i>; ains, the lines filling
# NxkIn from them. Internal variables: rowpos[a], array a's position at the
# row's first term (kept walk: operands, then the two destinations, or a
# scan's destination and carry); pos[a], the offset of term t (reduced
# walk: operands, then a scan's destination).
_TEMPLATE: Final = string.Template("""\
#include "nxk_scalar.cuh"
#include "nxk_loop.cuh"
#include "nxk_pad.cuh"
#include "nxk_reduce.cuh"

${eval}
#define NIN ${nin}
typedef ${T} NxkT;
typedef ${sum_t} NxkSum;
typedef ${state_t} NxkState;

__device__ __forceinline__ NxkSum nxk_to_sum(NxkT v) { ${to_sum} }
__device__ __forceinline__ nxk_i64 nxk_key(NxkT v, int is_max) { ${key} }
__device__ __forceinline__ nxk_u64 nxk_code(NxkT v) { ${code} }
__device__ __forceinline__ NxkState nxk_to_state(NxkT v) { ${to_state} }
__device__ __forceinline__ NxkState nxk_carry_state(const char* c, nxk_i64 p) { ${carry_state} }
__device__ __forceinline__ void nxk_store_sum(int code, char* d, nxk_i64 p, NxkSum v) { ${store_sum} }
__device__ __forceinline__ void nxk_store_state(int code, char* d, nxk_i64 p, NxkState v) { ${store_state} }
__device__ __forceinline__ void nxk_store_code(char* d, nxk_i64 p, nxk_u64 c) { ${store_code} }

""" + codegen.TERM_CODE + """
struct NxkSumSrc {
    typedef NxkSum Acc;
    NxkIn in;
    const nxk_i64* red;
    const nxk_i64* coords;
    const nxk_i64* rowpos;
    nxk_i64 row;
    int mul;
    __device__ Acc start() const { return mul ? (Acc)1 : (Acc)0; }
    __device__ Acc term(nxk_i64 t) const {
        return nxk_to_sum(nxk_term<NIN>(in, red, coords, rowpos, row, t));
    }
    __device__ Acc combine(Acc a, Acc b) const { return mul ? a * b : a + b; }
    __device__ Acc shfl_down(Acc v, int d) const { return __shfl_down_sync(NXK_FULL_MASK, v, d, NXK_LANES); }
};

struct NxkExtSrc {
    typedef NxkExt Acc;
    NxkIn in;
    const nxk_i64* red;
    const nxk_i64* coords;
    const nxk_i64* rowpos;
    nxk_i64 row;
    int is_max;
    __device__ Acc start() const {
        Acc a;
        a.key = is_max ? NXK_I64_MIN : NXK_I64_MAX;
        a.pos = NXK_I64_MAX;
        a.code = 0ull;
        return a;
    }
    __device__ Acc term(nxk_i64 t) const {
        const NxkT v = nxk_term<NIN>(in, red, coords, rowpos, row, t);
        Acc a;
        a.key = nxk_key(v, is_max);
        a.pos = t;
        a.code = nxk_code(v);
        return a;
    }
    __device__ Acc combine(Acc a, Acc b) const { return nxk_ext_combine(is_max, a, b); }
    __device__ Acc shfl_down(Acc v, int d) const {
        Acc o;
        o.key = __shfl_down_sync(NXK_FULL_MASK, v.key, d, NXK_LANES);
        o.pos = __shfl_down_sync(NXK_FULL_MASK, v.pos, d, NXK_LANES);
        o.code = __shfl_down_sync(NXK_FULL_MASK, v.code, d, NXK_LANES);
        return o;
    }
};

typedef NxkStateOp<NxkState> NxkScanOp;

// ---- reduce: Sum and Prod in lane order --------------------------------------

extern "C" __global__ void __launch_bounds__(256)
nxk_red_sum(const nxk_i64* __restrict__ kept, const nxk_i64* __restrict__ red,
            const nxk_i64* __restrict__ coords, nxk_i64 n, nxk_i64 groups,
            nxk_i64 group_chunks, int mul, int dst_code, char* partial, char* d0,
            nxk_i64 blocks, ${aparams})
{
    for (nxk_i64 b = blockIdx.x; b < blocks; b += gridDim.x) {
        const nxk_i64 row = b / groups;
        const nxk_i64 g = b % groups;
        nxk_i64 rowpos[NIN + 2];
        nxk_walk<NIN + 2>(kept, row, rowpos);
        NxkSumSrc src;
${ains}
        src.red = red;
        src.coords = coords;
        src.rowpos = rowpos;
        src.row = row;
        src.mul = mul;
        const nxk_i64 chunks = (n + NXK_LANE_BLOCK - 1) / NXK_LANE_BLOCK;
        const nxk_i64 c0 = g * group_chunks;
        const nxk_i64 c1 = c0 + group_chunks < chunks ? c0 + group_chunks : chunks;
        NxkSum r;
        nxk_lane_group(src, n, c0, c1, &r);
        if (threadIdx.x == 0) {
            if (groups == 1) nxk_store_sum(dst_code, d0, rowpos[NIN], r);
            else reinterpret_cast<NxkSum*>(partial)[b] = r;
        }
        __syncthreads();  // shared memory is reused by the next block index
    }
}

// ---- reduce: Max, Min and Arg -------------------------------------------------

extern "C" __global__ void __launch_bounds__(256)
nxk_red_ext(const nxk_i64* __restrict__ kept, const nxk_i64* __restrict__ red,
            const nxk_i64* __restrict__ coords, nxk_i64 n, nxk_i64 groups,
            nxk_i64 group_chunks, int is_max, int arg, char* partial, char* d0,
            char* d1, nxk_i64 blocks, ${aparams})
{
    for (nxk_i64 b = blockIdx.x; b < blocks; b += gridDim.x) {
        const nxk_i64 row = b / groups;
        const nxk_i64 g = b % groups;
        nxk_i64 rowpos[NIN + 2];
        nxk_walk<NIN + 2>(kept, row, rowpos);
        NxkExtSrc src;
${ains}
        src.red = red;
        src.coords = coords;
        src.rowpos = rowpos;
        src.row = row;
        src.is_max = is_max;
        const nxk_i64 chunks = (n + NXK_LANE_BLOCK - 1) / NXK_LANE_BLOCK;
        const nxk_i64 c0 = g * group_chunks;
        const nxk_i64 c1 = c0 + group_chunks < chunks ? c0 + group_chunks : chunks;
        NxkExt r;
        nxk_lane_group(src, n, c0, c1, &r);
        if (threadIdx.x == 0) {
            if (groups == 1) {
                nxk_store_code(d0, rowpos[NIN], r.code);
                if (arg) nxk_st_i64(d1, rowpos[NIN + 1], r.pos);
            } else {
                reinterpret_cast<NxkExt*>(partial)[b] = r;
            }
        }
        __syncthreads();  // shared memory is reused by the next block index
    }
}

// ---- scan: the odd/even network ----------------------------------------------

// State s of a row (no carry at s == 0) from its term v: a Sum's state 0 is
// +0 + v, since Monoid Sum adds its terms from +0 (a -0 first term makes +0).
__device__ __forceinline__ NxkState nxk_term_state(const NxkScanOp& sop, nxk_i64 s, NxkT v) {
    const NxkState t = nxk_to_state(v);
    return (s == 0 && sop.op == 0) ? sop.combine(NxkState(), t) : t;
}

// The full chunks' totals: block (row, k), k < nfull.
extern "C" __global__ void __launch_bounds__(1024)
nxk_scan_totals(const nxk_i64* __restrict__ kept, const nxk_i64* __restrict__ red,
                const nxk_i64* __restrict__ coords, nxk_i64 m, int has_carry,
                nxk_i64 nfull, int csize, int op, char* totals, const char* carry,
                nxk_i64 blocks, ${aparams})
{
    for (nxk_i64 b = blockIdx.x; b < blocks; b += gridDim.x) {
        const nxk_i64 row = b / nfull;
        const nxk_i64 k = b % nfull;
        nxk_i64 rowpos[NIN + 2];
        nxk_walk<NIN + 2>(kept, row, rowpos);
        NxkIn in;
${iins}
        NxkScanOp sop;
        sop.op = op;
        NxkState* a = reinterpret_cast<NxkState*>(nxk_dynamic_shared);
        const nxk_i64 s0 = k * csize;
        for (int j = (int)threadIdx.x; j < csize; j += (int)blockDim.x) {
            const nxk_i64 s = s0 + j;
            a[j] = (has_carry && s == 0)
                       ? nxk_carry_state(carry, rowpos[NIN + 1])
                       : nxk_term_state(sop, s,
                                        nxk_term<NIN + 1>(in, red, coords, rowpos, row, s - has_carry));
        }
        __syncthreads();
        nxk_upsweep(sop, a, csize);
        if (threadIdx.x == 0) reinterpret_cast<NxkState*>(totals)[row * nfull + k] = a[csize - 1];
        __syncthreads();  // shared memory is reused by the next block index
    }
}

// The results of chunk k of each row, after the scanned totals `scanned`
// (row-major, nfull a row) of the chunks before it: block (row, k), k < q.
extern "C" __global__ void __launch_bounds__(1024)
nxk_scan_chunks(const nxk_i64* __restrict__ kept, const nxk_i64* __restrict__ red,
                const nxk_i64* __restrict__ coords, nxk_i64 m, int has_carry,
                nxk_i64 q, nxk_i64 nfull, int csize, int op, const char* scanned,
                int dst_code, char* d0, const char* carry, nxk_i64 blocks,
                ${aparams})
{
    for (nxk_i64 b = blockIdx.x; b < blocks; b += gridDim.x) {
        const nxk_i64 row = b / q;
        const nxk_i64 k = b % q;
        nxk_i64 rowpos[NIN + 2];
        nxk_walk<NIN + 2>(kept, row, rowpos);
        NxkIn in;
${iins}
        NxkScanOp sop;
        sop.op = op;
        NxkState* a = reinterpret_cast<NxkState*>(nxk_dynamic_shared);
        const nxk_i64 s0 = k * csize;
        const int len = (int)(m - s0 < csize ? m - s0 : csize);
        for (int j = (int)threadIdx.x; j < len; j += (int)blockDim.x) {
            const nxk_i64 s = s0 + j;
            a[j] = (has_carry && s == 0)
                       ? nxk_carry_state(carry, rowpos[NIN + 1])
                       : nxk_term_state(sop, s,
                                        nxk_term<NIN + 1>(in, red, coords, rowpos, row, s - has_carry));
        }
        __syncthreads();
        nxk_upsweep(sop, a, len);
        const bool full = len == csize;
        const NxkState* sc = reinterpret_cast<const NxkState*>(scanned);
        const NxkState before = k > 0 ? sc[row * nfull + k - 1] : NxkState();
        nxk_downsweep(sop, a, len, full ? csize / 2 : nxk_floor_pow2(len), k > 0, before);
        if (full && k > 0 && threadIdx.x == 0) a[csize - 1] = sc[row * nfull + k];
        __syncthreads();
        for (int j = (int)threadIdx.x; j < len; j += (int)blockDim.x) {
            const nxk_i64 s = s0 + j;
            if (s < has_carry) continue;
            nxk_i64 pos[NIN + 1];
            nxk_walk<NIN + 1>(red, s - has_carry, pos);
            nxk_store_state(dst_code, d0, rowpos[NIN] + pos[NIN], a[j]);
        }
        __syncthreads();  // shared memory is reused by the next block index
    }
}
""")


def term_slots(prog: Prog, output: int, pads: tuple[int | None, ...] = ()) -> dict[str, str]:
    """The slots of ``codegen.TERM_CODE`` and the program's: eval, nin, T (the
    term's storage type), out, coords (Coord indices), loads (each operand
    read at the term, a Padded operand j through its descriptor at
    ``coords[4·coord axes + j]``), outs and args (pure)."""
    axes = codegen.coord_axes(prog)
    coords = [f"    const nxk_i64 k{a} = nxk_rcoord(coords + {4 * j}, row, t);" for j, a in enumerate(axes)]
    loads: list[str] = []
    for i, d in enumerate(prog.ins):
        rank = pads[i] if pads else None
        if rank is None:
            loads.append(f"    const {codegen.scalar(d).ctype} in{i} = "
                         f"{codegen.load_expr(d, f'in.a[{i}]', f'rowpos[{i}] + pos[{i}]')};")
        else:
            j = sum(r is not None for r in pads[:i])
            desc = f"coords + coords[{4 * len(axes) + j}]"
            load = codegen.padded_load_stmt(d, f"in{i}", f"in.a[{i}]", rank, desc, ["row", "t"])
            loads.append("    " + load)
    outs = [f"    {codegen.scalar(d).ctype} o{k};" for k, d in enumerate(prog.out_dtypes)]
    args = ([f"in{i}" for i in range(prog.n_ins)] + [f"k{a}" for a in axes]
            + [f"&o{k}" for k in range(prog.n_outs)])
    return {"eval": codegen.eval_code(prog), "nin": str(prog.n_ins),
            "T": codegen.scalar(prog.out_dtypes[output]).ctype, "out": str(output),
            "coords": "\n".join(coords), "loads": "\n".join(loads), "outs": "\n".join(outs),
            "args": ", ".join(args)}


def reductions_code(prog: Prog, output: int, pads: tuple[int | None, ...] = ()) -> str:
    """The CUDA source of the reduce and scan kernels of ``prog``'s output
    ``output`` (pure), over loads of ``pads`` (``loops.pad_key``: () where
    every load is Plain; a Padded operand j's descriptor is found from the
    word after the Coord entries, ``coords[4·coord axes + j]``)."""
    t = of_dtype(prog.out_dtypes[output])
    nin = prog.n_ins
    return render(
        _TEMPLATE, **term_slots(prog, output, pads),
        sum_t=t.sum_t, state_t=t.state_t, to_sum=t.to_sum, key=t.key, code=t.code, to_state=t.to_state,
        carry_state=t.carry_state, store_sum=t.store_sum, store_state=t.store_state,
        store_code=t.store_code,
        aparams=", ".join(f"const char* a{i}" for i in range(nin)),
        ains="\n".join(f"        src.in.a[{i}] = a{i};" for i in range(nin)),
        iins="\n".join(f"        in.a[{i}] = a{i};" for i in range(nin)),
    )


@functools.lru_cache(maxsize=512)
def reductions_source(prog: Prog, output: int, pads: tuple[int | None, ...] = ()) -> Source:
    """The reductions source of ``prog``'s output ``output`` over loads of
    ``pads`` (``loops.pad_key``; cached)."""
    return Source("reductions.cu", reductions_code(prog, output, pads), KERNELS)


def term_program(prog: Prog, output: int) -> tuple[Prog, int, tuple[int, ...]]:
    """The program, output and operands (indices into the call's) whose terms
    are output ``output`` of ``prog``: the one-node program of the operand's
    dtype where the output is an operand or its Copy, else ``prog`` itself."""
    node = prog.nodes[prog.outs[output]]
    if isinstance(node, Op1) and node.kind is Convert.COPY:
        node = prog.nodes[node.x]
    if isinstance(node, In):
        return Prog([prog.ins[node.index]], [In(0)], [0]), 0, (node.index,)
    return prog, output, tuple(range(prog.n_ins))

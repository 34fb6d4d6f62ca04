"""The tensor-core attention kernel: flash attention with ``mma.sync`` for q·k
and for the weighted values, one CUDA source generated per program, dtype
and head dimensions (the SIMT kernel is :mod:`nxkernel_cuda.attention`,
which dispatches here and launches either).

Which calls take it (:func:`takes`): q, k and v all bfloat16 or all float16,
a float32 accumulator, an sm_80 or later device (cuda-emu included, which
runs the instruction's C++ model of ``kernels/nxk_mma.cuh``), dk and dv at
most ``MAX_HEAD_DIM`` and tiles that fit ``attention.SHARED_BYTES``: a
function of dtypes, device model and head dimensions alone.

Rules (beyond the SIMT kernel's, which hold here too: the program, hidden
keys never read, splits, the causal skip, the special rows):

* A unit is one lead index and one query head, or, where the group of query
  heads reading a key head has rows that fit one row tile (group·tq ≤ 64:
  decode shapes), the whole group, its rows head by head, so that each key
  tile is read once for the group (the pack, ``Kernel.pack``); a row's
  query head and query row drive its q, o, lse, loads and Coord nodes.
* A block of 4 warps owns 64 rows of a unit, warp w rows ``16w`` to ``16w + 15``;
  key tiles of BN = 64 keys (32 where 64 do not fit) are staged in shared
  memory as their 16-bit codes (k as [key][d], v transposed as [d][key]),
  dk and dv padded with +0 to multiples of 8 (8 codes a 16-byte load where
  a row's elements are consecutive and aligned); q's tile is staged once and
  held in registers as the instruction's fragments.
* q·k: per (row, key), m16n8k8 instructions over d = 8i … 8i + 7 in
  increasing i, each from C = 0 (8 exact products, the tensor core's
  alignment and truncation), each result added into a float32 chain from +0
  rounded to nearest: within γ(2·min(dk, 8) + ⌈dk/8⌉) Σ|qᵢkᵢ|, the
  tensor-core e(dk) of :func:`nxkernel_cuda.contract_mma.error_factor`.
* Softmax per row as the SIMT kernel's, in the instruction's layout: a
  thread holds 2 rows × 2 keys of each 8-key column block; a row's maximum
  and sum go over its thread's keys in increasing order, then over the 4
  threads of its quad by a 2-level xor butterfly.
* Weights: e = exp(x − m) ≤ 1 (m the running maximum with this tile's
  keys) is rounded to nearest, ties to even, into v's dtype (r(e), the
  contract's r(c·w)/c with c = l / (the later rescales) ≥ 1 and c·w = e ≤ 1);
  the row sum l adds the unrounded e. o's element: per 8 keys an m16n8k8
  instruction from C = 0 of r(e)·v, each result added into its float32
  chain in increasing key order (the chain scaled by α at each key tile):
  within γ(2·min(tk, 8) + ⌈tk/8⌉) Σ|wⱼ||vⱼ| of Σ wⱼvⱼ.
* A hidden pair (mask) of a key tile the block reads has weight +0, and
  +0·v is a NaN where v is a NaN or an infinity: on this path such a value
  reaches o. Keys past the length and on pages outside ``[0, pages)`` are
  never read (staged as +0), as on the SIMT path.
"""

from __future__ import annotations

import functools
import string
from typing import Final

from nxkernel_core import dtype as D
from nxkernel_core.dtype import Dtype
from nxkernel_core.prog import Prog

from . import codegen
from .build import Source, render
from .launch import CudaRig

__all__ = ["KERNEL", "MAX_HEAD_DIM", "MIN_ARCH", "attention_mma_code", "attention_mma_source",
           "shared_bytes", "takes", "tile_keys"]

#: The kernel of every generated tensor-core attention source.
KERNEL: Final = "nxk_attention_mma"
#: The least architecture with mma.sync m16n8k8 of 16-bit floats.
MIN_ARCH: Final = 80
#: The largest dk and dv the kernel holds in registers.
MAX_HEAD_DIM: Final = 256
#: Query rows of a block (4 warps of 16).
BLOCK_ROWS: Final = 64
#: Keys per key tile, tried in order: the first whose tiles fit.
TILE_KEYS: Final = (64, 32)
#: Shared memory a block may take (the SIMT kernel's limit).
SHARED_BYTES: Final = 48 * 1024


def _pad8(n: int) -> int:
    return -(-n // 8) * 8


def shared_bytes(keys: int, dk: int, dv: int) -> int:
    """Dynamic shared memory of a block: the keys' and values' element offsets
    (int64, ``keys`` each), then the larger of q's codes [64; dk⁸ + 8] and
    k's [keys; dk⁸ + 8] with vᵀ's [dv⁸; keys + 8] (q is read into registers
    before the first key tile), d⁸ the dimension rounded up to 8."""
    ld = _pad8(dk) + 8
    return 16 * keys + 2 * max(BLOCK_ROWS * ld, keys * ld + _pad8(dv) * (keys + 8))


def tile_keys(dk: int, dv: int) -> int | None:
    """The first of ``TILE_KEYS`` whose tiles fit, or None."""
    if dk > MAX_HEAD_DIM or dv > MAX_HEAD_DIM:
        return None
    return next((n for n in TILE_KEYS if shared_bytes(n, dk, dv) <= SHARED_BYTES), None)


def takes(dev: CudaRig, acc: Dtype, q: Dtype, k: Dtype, v: Dtype, dk: int, dv: int) -> bool:
    """Whether an attention of these dtypes and head dimensions takes the
    tensor cores on ``dev``."""
    return (acc is D.float32 and q is k is v and q in (D.bfloat16, D.float16)
            and dev.arch_number >= MIN_ARCH and tile_keys(dk, dv) is not None)


# Slots: eval (codegen.eval_code); keys, dk, dv, bf16, paged, words, the tile
# constants; load_params, one pointer per load; loads, the load statements
# of a pair (in<1+i>); nargs, nxk_eval's operands. The kernel's parameters
# are the SIMT kernel's (attention._launch passes either the same arguments).
# Variables: u the unit's words, r0 the block's first row, [kb, ke) the keys
# it reads, t0 the key tile's first key, n its keys; in a warp, g = lane / 4
# and t = lane % 4 name the fragment's row and column pair; qa the q
# fragments, s the scores then the weights of [column block][fragment slot],
# ov the weighted values, m and l the running maximum and sum of rows
# g (h = 0) and g + 8 (h = 1).
_TEMPLATE: Final = string.Template("""\
#include "nxk_scalar.cuh"
#include "nxk_mma.cuh"
#include "nxk_attention.cuh"

${eval}
typedef float A;
constexpr int NXK_BM = 64;
constexpr int NXK_BN = ${keys};
constexpr int NXK_NT = NXK_BN / 8;
constexpr int NXK_DK = ${dk};
constexpr int NXK_DV = ${dv};
constexpr int NXK_DKP = (NXK_DK + 7) / 8 * 8;
constexpr int NXK_DVP = (NXK_DV + 7) / 8 * 8;
constexpr int NXK_KS = NXK_DKP / 8;
constexpr int NXK_VT = NXK_DVP / 8;
constexpr int NXK_LD = NXK_DKP + 8;
constexpr int NXK_LDV = NXK_BN + 8;
constexpr bool NXK_BF16 = ${bf16};
constexpr bool NXK_PAGED = ${paged};
constexpr int NXK_WORDS = ${words};

// Codes d0 … d0 + 7 of the row at element position p of b (elements sd
// apart, +0 at or past dim, all +0 where p < 0): one 16-byte load where they
// are consecutive and aligned, else one by one.
__device__ __forceinline__ uint4 nxk_attn_row8(const char* b, nxk_i64 p, nxk_i64 sd, int d0, int dim) {
    uint4 r = make_uint4(0u, 0u, 0u, 0u);
    if (p < 0) return r;
    const char* at = b + 2 * (p + d0);
    if (sd == 1 && d0 + 8 <= dim && ((unsigned long long)at & 15ull) == 0) return *(const uint4*)at;
    nxk_u32 w[4] = {0u, 0u, 0u, 0u};
    for (int e = 0; e < 8 && d0 + e < dim; ++e)
        w[e / 2] |= (nxk_u32)nxk_ld_u16(b, p + (d0 + e) * sd) << (16 * (e % 2));
    return make_uint4(w[0], w[1], w[2], w[3]);
}

extern "C" __global__ void __launch_bounds__(128)
nxk_attention_mma(const nxk_i64* __restrict__ g, const nxk_i64* __restrict__ units, nxk_i64 blocks,
                  nxk_i64 row_tiles, nxk_i64 nsplit, nxk_i64 split_keys, nxk_i64 tq, nxk_i64 tk,
                  nxk_i64 pack, nxk_i64 page, nxk_i64 pages, nxk_i64 limited, nxk_i64 limit, double scale_in,
                  int o_code,
                  const char* q, const char* k, const char* v, const char* table, const char* lengths,
                  ${load_params}char* o, char* lse, A* part)
{
    nxk_i64* kbase = (nxk_i64*)nxk_dynamic_shared;   // [BN] each key's element offset, -1 if unread
    nxk_i64* vbase = kbase + NXK_BN;
    nxk_u16* qs = (nxk_u16*)(vbase + NXK_BN);   // [BM][LD], before the key tiles
    nxk_u16* ks = qs;                            // [BN][LD]
    nxk_u16* vt = ks + NXK_BN * NXK_LD;          // [DVP][LDV]
    const A scale = (A)scale_in;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int gq = lane >> 2, tq4 = lane & 3;
    const nxk_i64 rows = pack * tq;  // a unit's rows: row rho is query row rho % tq of head rho / tq
    for (nxk_i64 blk = blockIdx.x; blk < blocks; blk += gridDim.x) {
        const nxk_i64 sp = blk % nsplit;
        const nxk_i64 rt = (blk / nsplit) % row_tiles;
        const nxk_i64 unit = blk / (nsplit * row_tiles);
        const nxk_i64* u = units + unit * NXK_WORDS;
        const nxk_i64 r0 = rt * NXK_BM;
        nxk_i64 kb, ke;
        // Packed heads (a unit's rows in one tile) read the keys of every query row.
        nxk_attn_key_range(lengths, u[NXK_ATTN_U_LEN], tk, sp, split_keys, pack > 1 ? 0 : r0,
                           pack > 1 ? tq : NXK_BM, tq, limited, limit, &kb, &ke);
        __syncthreads();  // the previous item's tiles are read
        if constexpr (NXK_KS > 0) {
            for (int i = tid; i < NXK_BM * NXK_KS; i += blockDim.x) {
                const int r = i / NXK_KS, d0 = 8 * (i % NXK_KS);
                const nxk_i64 rho = r0 + r;
                const nxk_i64 p = rho < rows ? u[NXK_ATTN_U_Q] + (rho / tq) * g[NXK_ATTN_G_Q_HEAD]
                                                   + (rho % tq) * g[NXK_ATTN_G_Q_ROW] : -1;
                *(uint4*)(qs + r * NXK_LD + d0) = nxk_attn_row8(q, p, g[NXK_ATTN_G_Q_D], d0, NXK_DK);
            }
        }
        __syncthreads();
        nxk_u32 qa[NXK_KS > 0 ? NXK_KS : 1][2];
#pragma unroll
        for (int kk = 0; kk < NXK_KS; ++kk) {
            const int r = warp * 16 + gq;
            qa[kk][0] = *(const nxk_u32*)(qs + r * NXK_LD + 8 * kk + 2 * tq4);
            qa[kk][1] = *(const nxk_u32*)(qs + (r + 8) * NXK_LD + 8 * kk + 2 * tq4);
        }
        A m[2], l[2], ov[NXK_VT > 0 ? NXK_VT : 1][4];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            m[h] = nxk_attn_ninf<A>();
            l[h] = (A)0;
        }
#pragma unroll
        for (int c = 0; c < NXK_VT; ++c)
#pragma unroll
            for (int e = 0; e < 4; ++e) ov[c][e] = (A)0;
        for (nxk_i64 t0 = kb; t0 < ke; t0 += NXK_BN) {
            const int n = (int)(ke - t0 < NXK_BN ? ke - t0 : NXK_BN);
            __syncthreads();  // q's fragments or the previous key tile are read
            nxk_attn_tile_keys<NXK_PAGED>(tid, NXK_BN, n, t0, g, u, table, page, pages, kbase, vbase);
            __syncthreads();
            if constexpr (NXK_KS > 0) {
                for (int i = tid; i < NXK_BN * NXK_KS; i += blockDim.x) {
                    const int j = i / NXK_KS, d0 = 8 * (i % NXK_KS);
                    const uint4 w = nxk_attn_row8(k, kbase[j], g[NXK_ATTN_G_K_D], d0, NXK_DK);
                    *(uint4*)(ks + j * NXK_LD + d0) = w;
                }
            }
            for (int i = tid; i < NXK_BN * NXK_VT; i += blockDim.x) {
                const int j = i % NXK_BN, c0 = 8 * (i / NXK_BN);  // lanes on consecutive keys
                const uint4 w = nxk_attn_row8(v, vbase[j], g[NXK_ATTN_G_V_D], c0, NXK_DV);
                const nxk_u32 ws[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
                for (int e = 0; e < 8; ++e)
                    vt[(c0 + e) * NXK_LDV + j] = (nxk_u16)(ws[e / 2] >> (16 * (e % 2)));
            }
            __syncthreads();
            A s[NXK_NT][4];
#pragma unroll
            for (int nt = 0; nt < NXK_NT; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) s[nt][e] = (A)0;
#pragma unroll
            for (int kk = 0; kk < NXK_KS; ++kk)
#pragma unroll
                for (int nt = 0; nt < NXK_NT; ++nt) {
                    const nxk_u32 b = *(const nxk_u32*)(ks + (nt * 8 + gq) * NXK_LD + 8 * kk + 2 * tq4);
                    float d[4];
                    nxk_mma_k8<NXK_BF16>(d, qa[kk], b);
#pragma unroll
                    for (int e = 0; e < 4; ++e) s[nt][e] = s[nt][e] + d[e];
                }
            bool hid[NXK_NT][4];
            A tmax[2] = {nxk_attn_ninf<A>(), nxk_attn_ninf<A>()};
#pragma unroll
            for (int nt = 0; nt < NXK_NT; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int h = e >> 1, j = nt * 8 + 2 * tq4 + (e & 1);
                    const nxk_i64 rho = r0 + warp * 16 + gq + 8 * h;
                    const nxk_i64 key = t0 + j;
                    hid[nt][e] = true;
                    if (rho < rows && j < n && kbase[j] >= 0) {
                        const nxk_i64 hj = rho / tq, row = rho % tq;
                        const A in0 = scale * s[nt][e];
${loads}
                        nxk_u8 seen;
                        A x;
                        nxk_eval(in0, ${nargs}&seen, &x);
                        if (seen != 0) {
                            hid[nt][e] = false;
                            s[nt][e] = x;
                            tmax[h] = nxk_attn_max(tmax[h], x);
                        }
                    }
                }
            A alpha[2], shift[2], sum[2];
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                A tm = tmax[h];
                tm = nxk_attn_max(tm, __shfl_xor_sync(0xffffffffu, tm, 1));
                tm = nxk_attn_max(tm, __shfl_xor_sync(0xffffffffu, tm, 2));
                const A mnew = nxk_attn_max(m[h], tm);
                alpha[h] = nxk_attn_rescale(m[h], mnew);
                shift[h] = nxk_attn_shift(mnew);
                m[h] = mnew;
                sum[h] = (A)0;
            }
#pragma unroll
            for (int nt = 0; nt < NXK_NT; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int h = e >> 1;
                    s[nt][e] = hid[nt][e] ? (A)0 : nxk_attn_exp(s[nt][e] - shift[h]);
                    sum[h] = sum[h] + s[nt][e];
                }
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                sum[h] = sum[h] + __shfl_xor_sync(0xffffffffu, sum[h], 1);
                sum[h] = sum[h] + __shfl_xor_sync(0xffffffffu, sum[h], 2);
                l[h] = l[h] * alpha[h] + sum[h];
            }
#pragma unroll
            for (int c = 0; c < NXK_VT; ++c)
#pragma unroll
                for (int e = 0; e < 4; ++e) ov[c][e] = ov[c][e] * alpha[e >> 1];
#pragma unroll
            for (int nt = 0; nt < NXK_NT; ++nt) {
                const nxk_u32 pa[2] = {nxk_attn_pack<NXK_BF16>(s[nt][0], s[nt][1]),
                                       nxk_attn_pack<NXK_BF16>(s[nt][2], s[nt][3])};
#pragma unroll
                for (int c = 0; c < NXK_VT; ++c) {
                    const nxk_u32 b = *(const nxk_u32*)(vt + (c * 8 + gq) * NXK_LDV + nt * 8 + 2 * tq4);
                    float d[4];
                    nxk_mma_k8<NXK_BF16>(d, pa, b);
#pragma unroll
                    for (int e = 0; e < 4; ++e) ov[c][e] = ov[c][e] + d[e];
                }
            }
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const nxk_i64 rho = r0 + warp * 16 + gq + 8 * h;
            if (rho >= rows) continue;
            const nxk_i64 hj = rho / tq, row = rho % tq;
            if (nsplit == 1) {
#pragma unroll
                for (int c = 0; c < NXK_VT; ++c)
#pragma unroll
                    for (int e = 0; e < 2; ++e) {
                        const int col = c * 8 + 2 * tq4 + e;
                        const nxk_i64 at = u[NXK_ATTN_U_O] + hj * g[NXK_ATTN_G_O_HEAD]
                                           + row * g[NXK_ATTN_G_O_ROW] + col * g[NXK_ATTN_G_O_D];
                        if (col < NXK_DV)
                            nxk_store_float(o_code, o, at, (double)nxk_attn_o(m[h], l[h], ov[c][2 * h + e]));
                    }
                const nxk_i64 at = u[NXK_ATTN_U_LSE] + hj * g[NXK_ATTN_G_LSE_HEAD]
                                   + row * g[NXK_ATTN_G_LSE_ROW];
                if (tq4 == 0) nxk_attn_st(lse, at, nxk_attn_lse_of(m[h], l[h]));
            } else {
                A* st = part + (((unit * pack + hj) * tq + row) * nsplit + sp) * (NXK_DV + 2);
                if (tq4 == 0) {
                    st[0] = m[h];
                    st[1] = l[h];
                }
#pragma unroll
                for (int c = 0; c < NXK_VT; ++c)
#pragma unroll
                    for (int e = 0; e < 2; ++e) {
                        const int col = c * 8 + 2 * tq4 + e;
                        if (col < NXK_DV) st[2 + col] = ov[c][2 * h + e];
                    }
            }
        }
    }
}
""")


def attention_mma_code(prog: Prog, loads: tuple[Dtype, ...], dtype: Dtype, dk: int, dv: int, keys: int,
                       paged: bool) -> str:
    """The CUDA source of the tensor-core attention kernel for ``prog`` over
    loads of these dtypes, q, k and v of ``dtype`` (pure)."""
    load_lines, nargs, words = codegen.pair_loads(prog, loads, indent=24)
    return render(
        _TEMPLATE, eval=codegen.eval_code(prog), keys=str(keys), dk=str(dk), dv=str(dv),
        bf16="true" if dtype is D.bfloat16 else "false", paged="true" if paged else "false",
        words=str(words), load_params="".join(f"const char* a{i}, " for i in range(len(loads))),
        loads=load_lines, nargs=nargs)


@functools.lru_cache(maxsize=256)
def attention_mma_source(prog: Prog, loads: tuple[Dtype, ...], dtype: Dtype, dk: int, dv: int, keys: int,
                         paged: bool) -> Source:
    """The tensor-core attention source of these (cached)."""
    return Source("attention_mma_gen.cu", attention_mma_code(prog, loads, dtype, dk, dv, keys, paged),
                  (KERNEL,))

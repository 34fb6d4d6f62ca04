"""The source of the SIMT attention kernel (pure rendering): one CUDA source
generated per program, dtypes, head dimensions and tiles, over
``kernels/nxk_attention.cuh``; :mod:`nxkernel_cuda.attention` chooses the
kernel, launches it and states the rules it keeps.
"""

from __future__ import annotations

import functools
import string
from dataclasses import dataclass
from typing import Final, final

from nxkernel_core import dtype as D
from nxkernel_core.dtype import Dtype
from nxkernel_core.prog import Prog

from . import codegen
from .build import Source, file_source, render

__all__ = ["COMBINE_KERNELS", "KERNEL", "Tiles", "attention_code", "attention_source", "combine_source"]

#: The kernel of every generated attention source.
KERNEL: Final = "nxk_attention"
#: The split combine, one per accumulator.
COMBINE_KERNELS: Final = ("nxk_attn_combine<float>", "nxk_attn_combine<double>")


@final
@dataclass(frozen=True, slots=True)
class Tiles:
    """A block's tiles: R rows per warp (BM = 4R rows), BN keys per key tile."""

    rows: int
    keys: int

    @property
    def bm(self) -> int:
        return 4 * self.rows


# Slots: eval (codegen.eval_code); acc, A's C type; rows, keys, dk, dv, vpl,
# paged, words (one unit's descriptor words), the tile constants; q_at, k_at,
# v_at, element loads widened into A (b the base, p the element position);
# load_params, one pointer per load; loads, the load statements of a pair
# (in<1+i>); coords, nxk_eval's Coord arguments; nargs, its operands.
# Variables: u the unit's words, r0 the tile's first row, [kb, ke) the keys
# this block reads, t0 the key tile's first key, n its keys, s the q·k
# chains then the pairs' outputs x, hid the hidden pairs.
_TEMPLATE: Final = string.Template("""\
#include "nxk_scalar.cuh"
#include "nxk_attention.cuh"

${eval}
typedef ${acc} A;
constexpr int NXK_R = ${rows};
constexpr int NXK_BM = 4 * NXK_R;
constexpr int NXK_BN = ${keys};
constexpr int NXK_KPL = NXK_BN / 32;
constexpr int NXK_LDK = NXK_BN + 1;
constexpr int NXK_DK = ${dk};
constexpr int NXK_DV = ${dv};
constexpr int NXK_VPL = ${vpl};
constexpr bool NXK_PAGED = ${paged};
constexpr int NXK_WORDS = ${words};

extern __shared__ double nxk_attn_smem[];

__device__ __forceinline__ A nxk_q_at(const char* b, nxk_i64 p) { return (A)(${q_at}); }
__device__ __forceinline__ A nxk_k_at(const char* b, nxk_i64 p) { return (A)(${k_at}); }
__device__ __forceinline__ A nxk_v_at(const char* b, nxk_i64 p) { return (A)(${v_at}); }

extern "C" __global__ void __launch_bounds__(128)
nxk_attention(const nxk_i64* __restrict__ g, const nxk_i64* __restrict__ units, nxk_i64 blocks,
              nxk_i64 row_tiles, nxk_i64 nsplit, nxk_i64 split_keys, nxk_i64 tq, nxk_i64 tk,
              nxk_i64 page, nxk_i64 pages, nxk_i64 limited, nxk_i64 limit, double scale_in, int o_code,
              const char* q, const char* k, const char* v, const char* table, const char* lengths,
              ${load_params}char* o, char* lse, A* part)
{
    nxk_i64* kbase = (nxk_i64*)nxk_attn_smem;  // [BN] each key's element offset, -1 if unread
    nxk_i64* vbase = kbase + NXK_BN;
    A* qs = (A*)(vbase + NXK_BN);              // [BM][DK]
    A* kt = qs + NXK_BM * NXK_DK;               // [DK][LDK]
    A* vs = kt + NXK_DK * NXK_LDK;              // [BN][DV]
    A* ps = vs + NXK_BN * NXK_DV;               // [BM][BN] weights, NXK_ATTN_HIDDEN if hidden
    const A scale = (A)scale_in;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    for (nxk_i64 blk = blockIdx.x; blk < blocks; blk += gridDim.x) {
        const nxk_i64 sp = blk % nsplit;
        const nxk_i64 rt = (blk / nsplit) % row_tiles;
        const nxk_i64 unit = blk / (nsplit * row_tiles);
        const nxk_i64* u = units + unit * NXK_WORDS;
        const nxk_i64 r0 = rt * NXK_BM;
        nxk_i64 kb, ke;
        nxk_attn_key_range(lengths, u[NXK_ATTN_U_LEN], tk, sp, split_keys, r0, NXK_BM, tq, limited, limit,
                           &kb, &ke);
        __syncthreads();  // the previous item's tiles are read
        if constexpr (NXK_DK > 0) {
            for (int i = tid; i < NXK_BM * NXK_DK; i += blockDim.x) {
                const nxk_i64 row = r0 + i / NXK_DK;
                const nxk_i64 d = i % NXK_DK;
                const nxk_i64 at = u[NXK_ATTN_U_Q] + row * g[NXK_ATTN_G_Q_ROW] + d * g[NXK_ATTN_G_Q_D];
                qs[i] = row < tq ? nxk_q_at(q, at) : (A)0;
            }
        }
        A m[NXK_R], l[NXK_R], acc[NXK_R][NXK_VPL];
#pragma unroll
        for (int i = 0; i < NXK_R; ++i) {
            m[i] = nxk_attn_ninf<A>();
            l[i] = (A)0;
#pragma unroll
            for (int c = 0; c < NXK_VPL; ++c) acc[i][c] = (A)0;
        }
        for (nxk_i64 t0 = kb; t0 < ke; t0 += NXK_BN) {
            const int n = (int)(ke - t0 < NXK_BN ? ke - t0 : NXK_BN);
            __syncthreads();  // the previous key tile is read
            nxk_attn_tile_keys<NXK_PAGED>(tid, NXK_BN, n, t0, g, u, table, page, pages, kbase, vbase);
            __syncthreads();
            if constexpr (NXK_DK > 0) {
                for (int i = tid; i < NXK_BN * NXK_DK; i += blockDim.x) {
                    const int j = i / NXK_DK, d = i % NXK_DK;
                    const nxk_i64 at = kbase[j] + d * g[NXK_ATTN_G_K_D];
                    kt[d * NXK_LDK + j] = kbase[j] >= 0 ? nxk_k_at(k, at) : (A)0;
                }
            }
            if constexpr (NXK_DV > 0) {
                for (int i = tid; i < NXK_BN * NXK_DV; i += blockDim.x) {
                    const int j = i / NXK_DV, c = i % NXK_DV;
                    vs[i] = vbase[j] >= 0 ? nxk_v_at(v, vbase[j] + c * g[NXK_ATTN_G_V_D]) : (A)0;
                }
            }
            __syncthreads();
            A s[NXK_R][NXK_KPL];
            nxk_attn_qk<A, NXK_R, NXK_KPL>(qs + warp * NXK_R * NXK_DK, NXK_DK, kt, NXK_LDK, NXK_DK, lane, s);
#pragma unroll
            for (int i = 0; i < NXK_R; ++i) {
                const nxk_i64 row = r0 + warp * NXK_R + i;
                bool hid[NXK_KPL];
                A tmax = nxk_attn_ninf<A>();
#pragma unroll
                for (int c = 0; c < NXK_KPL; ++c) {
                    const int j = lane + 32 * c;
                    const nxk_i64 key = t0 + j;
                    hid[c] = true;
                    if (row < tq && j < n && kbase[j] >= 0) {
                        const nxk_i64 hj = 0;  // one query head a unit
                        const A in0 = scale * s[i][c];
${loads}
                        nxk_u8 seen;
                        A x;
                        nxk_eval(in0, ${nargs}&seen, &x);
                        if (seen != 0) {
                            hid[c] = false;
                            s[i][c] = x;
                            tmax = nxk_attn_max(tmax, x);
                        }
                    }
                }
                const A mnew = nxk_attn_max(m[i], nxk_attn_warp_max(tmax));
                const A alpha = nxk_attn_rescale(m[i], mnew);
                const A shift = nxk_attn_shift(mnew);
                A sum = (A)0;
#pragma unroll
                for (int c = 0; c < NXK_KPL; ++c) {
                    const A e = hid[c] ? (A)0 : nxk_attn_exp(s[i][c] - shift);
                    ps[(warp * NXK_R + i) * NXK_BN + lane + 32 * c] = hid[c] ? (A)NXK_ATTN_HIDDEN : e;
                    sum = sum + e;
                }
                l[i] = l[i] * alpha + nxk_attn_warp_sum(sum);
                m[i] = mnew;
#pragma unroll
                for (int c = 0; c < NXK_VPL; ++c) acc[i][c] = acc[i][c] * alpha;
            }
            __syncwarp();
            nxk_attn_wv<A, NXK_R, NXK_VPL>(ps + warp * NXK_R * NXK_BN, NXK_BN, vs, NXK_DV, n, NXK_DV, lane,
                                           acc);
        }
#pragma unroll
        for (int i = 0; i < NXK_R; ++i) {
            const nxk_i64 row = r0 + warp * NXK_R + i;
            if (row >= tq) continue;
            if (nsplit == 1) {
#pragma unroll
                for (int c = 0; c < NXK_VPL; ++c) {
                    const int col = lane + 32 * c;
                    const nxk_i64 at = u[NXK_ATTN_U_O] + row * g[NXK_ATTN_G_O_ROW] + col * g[NXK_ATTN_G_O_D];
                    const double oc = (double)nxk_attn_o(m[i], l[i], acc[i][c]);
                    if (col < NXK_DV) nxk_store_float(o_code, o, at, oc);
                }
                const nxk_i64 at = u[NXK_ATTN_U_LSE] + row * g[NXK_ATTN_G_LSE_ROW];
                if (lane == 0) nxk_attn_st(lse, at, nxk_attn_lse_of(m[i], l[i]));
            } else {
                A* st = part + ((unit * tq + row) * nsplit + sp) * (NXK_DV + 2);
                if (lane == 0) {
                    st[0] = m[i];
                    st[1] = l[i];
                }
#pragma unroll
                for (int c = 0; c < NXK_VPL; ++c) {
                    const int col = lane + 32 * c;
                    if (col < NXK_DV) st[2 + col] = acc[i][c];
                }
            }
        }
    }
}
""")


def _widen(dt: Dtype) -> str:
    """The C expression of an element of ``dt`` at ``p`` of ``b``, as a float or double (exact)."""
    load = codegen.load_expr(dt, "b", "p")
    sc = codegen.scalar(dt)
    return f"nxk_val_{sc.name}({load})" if sc.narrow else load


def attention_code(prog: Prog, loads: tuple[Dtype, ...], q: Dtype, k: Dtype, v: Dtype, acc: Dtype,
                   dk: int, dv: int, tiles: Tiles, paged: bool) -> str:
    """The CUDA source of the attention kernel for ``prog`` over loads of
    these dtypes (pure)."""
    load_lines, nargs, words = codegen.pair_loads(prog, loads, indent=24)
    return render(
        _TEMPLATE, eval=codegen.eval_code(prog), acc="float" if acc is D.float32 else "double",
        rows=str(tiles.rows), keys=str(tiles.keys), dk=str(dk), dv=str(dv), vpl=str(max(1, -(-dv // 32))),
        paged="true" if paged else "false", words=str(words),
        q_at=_widen(q), k_at=_widen(k), v_at=_widen(v),
        load_params="".join(f"const char* a{i}, " for i in range(len(loads))),
        loads=load_lines, nargs=nargs)


@functools.lru_cache(maxsize=256)
def attention_source(prog: Prog, loads: tuple[Dtype, ...], q: Dtype, k: Dtype, v: Dtype, acc: Dtype,
                     dk: int, dv: int, tiles: Tiles, paged: bool) -> Source:
    """The attention source of these (cached)."""
    return Source("attention_gen.cu", attention_code(prog, loads, q, k, v, acc, dk, dv, tiles, paged),
                  (KERNEL,))


@functools.cache
def combine_source() -> Source:
    """``kernels/attention.cu``: the split combine, per accumulator."""
    return file_source("attention.cu", COMBINE_KERNELS)

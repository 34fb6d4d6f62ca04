// contract.cu: the SIMT contraction kernels (nxkernel_cuda/contract_simt.py).
//
// nxk_contract<Acc>: dst[t, r, c] = init[t, r, c] + sum_k a[t, r, k] * b[t, k, c],
// in the accumulator Acc (float, double, or nxk_u64 for every integer
// accumulator, wrapping modulo 2^64 and then to the destination's width).
// nxk_contract_gen<P, CX>: the same chain, one thread an output, with block
// scales, Rows and Contracting segments, and complex accumulators (CX, parts P).
//
// * Operands are found by walks (nxk_loop.cuh) that the host builds from the
//   caller's layouts: the batch walk over (a, b, dst, init[, ids]) carries the
//   arrays' offsets, the rows walk (a, dst, init[, ids]), the columns walk
//   (b, dst, init) and the K walk (a, b[, ids]) carry strides only; an
//   element's position is the sum of its batch, row or column, and K
//   positions. Any layout (transposed, strided, broadcast, reversed) is read
//   in place.
// * Tiles (nxk_contract): a block of 256 threads computes a 64 x 64 tile of
//   one batch index, staging 64 x 16 of a and 16 x 64 of b in shared memory
//   per step; each thread holds 4 x 4 outputs (rows ty + 16i, columns
//   tx + 16j) and stages a's rows and b's columns ty + 16i at k = k0 + tx, so
//   one K walk a step serves both. Loads, walks and the epilogue are
//   out-of-line functions, which keeps NVRTC's compile time to seconds.
// * Order: each output is a chain from +0 over k = 0, 1, ..., K - 1, each
//   product fused into the addition that takes it (fmaf/fma: one rounding a
//   step; NVRTC --fmad=false and g++ -ffp-contract=off add no other fma), no
//   split of K, no atomics: the same bits on every launch and device (fma is
//   correctly rounded on both). Past K the staged elements are +0, and
//   fma(+0, +0, x) is x for every x a chain from +0 reaches (never -0).
// * Then init is added last (one more rounding), except for an output
//   without products, which is init as the accumulator holds it, untouched
//   (or +0).
// * Store: a destination of the accumulator's dtype takes the bits as they
//   are; a narrower float rounds once by the store rule (nxk_store_float);
//   an integer destination takes the low bits (nxk_store_code_of).
#include "nxk_mma.cuh"

#define NXK_CT_TM 64
#define NXK_CT_TN 64
#define NXK_CT_TK 16
#define NXK_CT_THREADS 256

// Index i's position in the first array of the three-array walk w.
__device__ __noinline__ nxk_i64 nxk_ct_first(const nxk_i64* __restrict__ w, nxk_i64 i) {
    nxk_i64 p[3];
    nxk_walk<3>(w, i, p);
    return p[0];
}

// Block index b = (t, tile_m, tile_n) striding over `blocks`; init_code < 0:
// no init. Dynamic shared memory: 2 * 16 * 64 accumulators.
template <class Acc>
__global__ void __launch_bounds__(NXK_CT_THREADS)
nxk_contract(const nxk_i64* __restrict__ bw, const nxk_i64* __restrict__ rw,
             const nxk_i64* __restrict__ cw, const nxk_i64* __restrict__ kw,
             nxk_i64 rows, nxk_i64 cols, nxk_i64 K, nxk_i64 tiles_m, nxk_i64 tiles_n,
             int a_code, int b_code, int init_code, int dst_code, int same,
             const char* a, const char* b, const char* init, char* dst, nxk_i64 blocks)
{
    Acc* as = reinterpret_cast<Acc*>(nxk_dynamic_shared);   // [TK][TM]
    Acc* bs = as + NXK_CT_TK * NXK_CT_TM;                   // [TK][TN]
    const int tid = (int)threadIdx.x;
    const int tx = tid % 16;   // this thread's output columns tx + 16j; its staged k
    const int ty = tid / 16;   // its output rows ty + 16i; its staged row/column ty + 16i
    for (nxk_i64 blk = blockIdx.x; blk < blocks; blk += gridDim.x) {
        const nxk_i64 t = blk / (tiles_m * tiles_n);
        const nxk_i64 rem = blk % (tiles_m * tiles_n);
        const nxk_i64 r0 = (rem / tiles_n) * NXK_CT_TM;
        const nxk_i64 c0 = (rem % tiles_n) * NXK_CT_TN;
        nxk_i64 bp[4];
        nxk_walk<4>(bw, t, bp);
        // Positions of the rows of a and columns of b this thread stages.
        nxk_i64 ap[4], bq[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const nxk_i64 r = r0 + ty + 16 * i, c = c0 + ty + 16 * i;
            ap[i] = r < rows ? bp[0] + nxk_ct_first(rw, r) : -1;
            bq[i] = c < cols ? bp[1] + nxk_ct_first(cw, c) : -1;
        }
        Acc acc[4][4];
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j) acc[i][j] = (Acc)0;
        for (nxk_i64 k0 = 0; k0 < K; k0 += NXK_CT_TK) {
            const nxk_i64 k = k0 + tx;
            nxk_i64 kp[2] = {0, 0};
            if (k < K) nxk_walk<2>(kw, k, kp);
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                Acc va = (Acc)0, vb = (Acc)0;
                if (k < K && ap[i] >= 0) nxk_ct_ld(&va, a_code, a, ap[i] + kp[0]);
                if (k < K && bq[i] >= 0) nxk_ct_ld(&vb, b_code, b, bq[i] + kp[1]);
                as[tx * NXK_CT_TM + ty + 16 * i] = va;
                bs[tx * NXK_CT_TN + ty + 16 * i] = vb;
            }
            __syncthreads();
#pragma unroll
            for (int kk = 0; kk < NXK_CT_TK; ++kk) {
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    const Acc x = as[kk * NXK_CT_TM + ty + 16 * i];
#pragma unroll
                    for (int j = 0; j < 4; ++j) {
                        acc[i][j] = nxk_ct_fma(x, bs[kk * NXK_CT_TN + tx + 16 * j], acc[i][j]);
                    }
                }
            }
            __syncthreads();
        }
        // The epilogue: init added last, each result stored once.
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j)
                nxk_ct_finish(rw, cw, r0 + ty + 16 * i, c0 + tx + 16 * j, rows, cols, K == 0, bp[2], bp[3],
                              init_code, init, same, dst_code, dst, acc[i][j]);
    }
}


// ---------------------------------------------------------------------------
// nxk_contract_gen: one thread an output, for what the tiles leave out.
// ---------------------------------------------------------------------------

// The plan's words (int64, contract_simt.py writes them): the scalars, then
// the offsets (in words from the plan) of the walks and scale maps.
#define NXK_CG_OUTS 0      // outputs: groups x batch x rows x cols
#define NXK_CG_ROWS 1
#define NXK_CG_COLS 2
#define NXK_CG_K 3
#define NXK_CG_NBATCH 4
#define NXK_CG_SEG 5       // 0 none, 1 Rows, 2 Contracting
#define NXK_CG_G 6         // Rows: b's groups axis extent; Contracting: groups
#define NXK_CG_BG 7        // Rows: b's stride along its groups axis
#define NXK_CG_DG 8        // Contracting: dst's stride along the groups axis
#define NXK_CG_IG 9        // Contracting: init's stride along the groups axis
#define NXK_CG_CODES 10    // a, b, init (-1: none), dst codes, same
#define NXK_CG_SA 15       // a's scale: kind (0 none, 1 Exponent, 2 Value), code
#define NXK_CG_SB 17       // b's scale: kind, code
#define NXK_CG_SBG 19      // Rows: b's scale block and stride along b's groups axis
#define NXK_CG_AT 21       // offsets: batch, rows, cols, K walks; a's scale maps
                           // (batch, rows, K); b's (batch, K, cols)

// A block scale of kind 1 (Exponent: code e is 2^(e - 127), 255 NaN) or 2
// (Value, its dtype's code) in the part type P.
template <class P>
__device__ __noinline__ P nxk_cg_scale(int kind, int code, const char* s, nxk_i64 p) {
    if (kind == 1) {
        const int e = (int)nxk_ld_u8(s, p);
        if (e == 255) return (P)nxk_f32_of_bits(NXK_QNAN_F32);
        return (P)nxk_pow2f(e - 127);
    }
    P v;
    nxk_ct_ld(&v, code, s, p);
    return v;
}

// The chain of an output: a real one fused step by step; a complex one as two
// chains a part, of the even terms 2p (ar*br, ar*bi) and of the odd terms
// 2p + 1 (-ai*bi, ai*br), summed at the end.
template <class P, bool CX>
struct NxkChain {
    P er = (P)0, or_ = (P)0, ei = (P)0, oi = (P)0;
    __device__ void step(P ar, P ai, P br, P bi) {
        if (CX) {
            er = nxk_ct_fma(ar, br, er);
            or_ = nxk_ct_fma(-ai, bi, or_);
            ei = nxk_ct_fma(ar, bi, ei);
            oi = nxk_ct_fma(ai, br, oi);
        } else {
            er = nxk_ct_fma(ar, br, er);
        }
    }
};

// Store a complex result (parts re, im of P) into complex64 (18) or complex128 (17).
template <class P>
__device__ __noinline__ void nxk_cg_stc(int dtc, char* d, nxk_i64 p, P re, P im) {
    if (dtc == 17) {
        nxk_st_f64(d, 2 * p, (double)re);
        nxk_st_f64(d, 2 * p + 1, (double)im);
    } else {
        nxk_st_f32(d, 2 * p, (float)re);
        nxk_st_f32(d, 2 * p + 1, (float)im);
    }
}

template <class P, bool CX>
__global__ void __launch_bounds__(NXK_CT_THREADS)
nxk_contract_gen(const nxk_i64* __restrict__ plan, const char* a, const char* b, const char* init, char* dst,
                 const char* sa, const char* sb, const char* ids)
{
    const nxk_i64* bw = plan + plan[NXK_CG_AT + 0];
    const nxk_i64* rw = plan + plan[NXK_CG_AT + 1];
    const nxk_i64* cw = plan + plan[NXK_CG_AT + 2];
    const nxk_i64* kw = plan + plan[NXK_CG_AT + 3];
    const nxk_i64 rows = plan[NXK_CG_ROWS], cols = plan[NXK_CG_COLS], K = plan[NXK_CG_K];
    const nxk_i64 nbatch = plan[NXK_CG_NBATCH], seg = plan[NXK_CG_SEG], g = plan[NXK_CG_G];
    const int a_code = (int)plan[NXK_CG_CODES], b_code = (int)plan[NXK_CG_CODES + 1];
    const int init_code = (int)plan[NXK_CG_CODES + 2], dst_code = (int)plan[NXK_CG_CODES + 3];
    const int same = (int)plan[NXK_CG_CODES + 4];
    const int sak = (int)plan[NXK_CG_SA], sac = (int)plan[NXK_CG_SA + 1];
    const int sbk = (int)plan[NXK_CG_SB], sbc = (int)plan[NXK_CG_SB + 1];
    const nxk_i64 step = (nxk_i64)gridDim.x * blockDim.x;
    for (nxk_i64 o = (nxk_i64)blockIdx.x * blockDim.x + threadIdx.x; o < plan[NXK_CG_OUTS]; o += step) {
        const nxk_i64 c = o % cols;
        const nxk_i64 r = (o / cols) % rows;
        const nxk_i64 t = (o / (cols * rows)) % nbatch;
        const nxk_i64 e = o / (cols * rows * nbatch);   // Contracting: the group; else 0
        nxk_i64 bp[5], rp[4], cp[3];
        nxk_walk<5>(bw, t, bp);
        nxk_walk<4>(rw, r, rp);
        nxk_walk<3>(cw, c, cp);
        nxk_i64 pa = bp[0] + rp[0], pb = bp[1] + cp[0];
        nxk_i64 psa = 0, psb = 0;
        if (sak) psa = nxk_scale_at(plan + plan[NXK_CG_AT + 4], t) + nxk_scale_at(plan + plan[NXK_CG_AT + 5], r);
        if (sbk) psb = nxk_scale_at(plan + plan[NXK_CG_AT + 7], t) + nxk_scale_at(plan + plan[NXK_CG_AT + 9], c);
        bool none = K == 0;   // an output without products
        if (seg == 1) {
            const nxk_i64 grp = nxk_ld_i64(ids, bp[4] + rp[3]);
            none = none || grp < 0 || grp >= g;
            if (!none) {
                pb += grp * plan[NXK_CG_BG];
                if (sbk) psb += nxk_div(grp, plan[NXK_CG_SBG]) * plan[NXK_CG_SBG + 1];
            }
        }
        NxkChain<P, CX> ch;
        bool took = false;
        for (nxk_i64 k = 0; k < K && !none; ++k) {
            nxk_i64 kp[3];
            nxk_walk<3>(kw, k, kp);
            if (seg == 2 && nxk_ld_i64(ids, bp[4] + kp[2]) != e) continue;
            P ar, ai, br, bi;
            nxk_ct_ldc(&ar, &ai, a_code, a, pa + kp[0]);
            nxk_ct_ldc(&br, &bi, b_code, b, pb + kp[1]);
            if (sak) {
                const P s = nxk_cg_scale<P>(sak, sac, sa, psa + nxk_scale_at(plan + plan[NXK_CG_AT + 6], k));
                ar = ar * s;
                ai = ai * s;
            }
            if (sbk) {
                const P s = nxk_cg_scale<P>(sbk, sbc, sb, psb + nxk_scale_at(plan + plan[NXK_CG_AT + 8], k));
                br = br * s;
                bi = bi * s;
            }
            ch.step(ar, ai, br, bi);
            took = true;
        }
        none = none || !took;
        const nxk_i64 pd = bp[2] + rp[1] + cp[1] + e * plan[NXK_CG_DG];
        const nxk_i64 pi = bp[3] + rp[2] + cp[2] + e * plan[NXK_CG_IG];
        P re = ch.er, im = (P)0;
        if (CX) {
            re = ch.er + ch.or_;
            im = ch.ei + ch.oi;
        }
        if (init_code >= 0) {
            P wr, wi;
            nxk_ct_ldc(&wr, &wi, init_code, init, pi);
            re = none ? wr : re + wr;
            im = none ? wi : im + wi;
        }
        if (CX) nxk_cg_stc(dst_code, dst, pd, re, im);
        else nxk_ct_st(same, dst_code, dst, pd, re);
    }
}

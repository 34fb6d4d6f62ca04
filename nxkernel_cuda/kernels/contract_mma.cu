// contract_mma.cu: the tensor-core contraction kernels (nxkernel_cuda/contract_mma.py).
//
// nxk_contract_mma<KIND>: dst[t, r, c] = init[t, r, c] + sum_k a[t, r, k] * b[t, k, c]
// with mma.sync (nxk_mma.cuh): KIND 0 bfloat16 and 1 float16 operands into a
// float32 accumulator (m16n8k8), 2 int8 into int32 and 3 uint8 into uint32
// (m16n8k32), wrapping.
//
// * Operands are found by the walks of contract.cu (batch over a, b, dst,
//   init; rows over a, dst, init; columns over b, dst, init; K over a, b), so
//   any layout is read in place. Each operand's dtype code (a_code, b_code,
//   runtime arguments) says how it is staged: a code of the staged format as
//   it is; a narrower one widened exactly into it (nxk_cm_wide16,
//   nxk_cm_wide8): float8_e4m3fn, float8_e5m2 and float4_e2m1fn values are
//   each a float16 and a bfloat16 value (NaN a NaN), int4 and uint4 an int8
//   and a uint8 one. The instruction then sees the widened operands: the bits
//   are those of the same call on operands widened beforehand.
// * Exponent block scales (scaled: bit 1 a's, bit 2 b's; KIND 0 and 1 only;
//   unsegmented or Rows: a's rows' codes through perm, b's at its group):
//   the host takes this kernel only where every aligned run of 8 consecutive
//   k of an output lies in one scale block of a and one of b, so each
//   instruction's 8 products share the factor 2^(ea - 127) * 2^(eb - 127).
//   The codes of each staged row's and column's 4 runs of a K step are staged
//   beside the tiles (127, a factor 1, past the extents or without a scale),
//   and each instruction result d becomes d * 2^(ea + eb - 254)
//   (nxk_cm_scale: exact but where the result is below float32's normal
//   range, where it rounds once to nearest, or above its finite range, where
//   it is an infinity; a code 255 makes it NaN) before it joins the chain.
//   Power-of-two scaling commutes with the instruction's alignment and
//   truncation, so that is the instruction's sum of the scaled products.
// * Tiles: a block of 128 threads (four warps, 2 x 2) computes a 64 x 64 tile
//   of one batch index; each step stages 64 x 32 of a (row-major) and 32 x 64
//   of b (column-major) in shared memory, each thread loading k = k0 + tid % 32
//   of rows and columns tid / 32 + 4m; each warp computes 32 x 32 outputs as
//   2 x 4 tiles of 16 x 8. Elements past the extents are staged as +0.
// * Order: K steps in increasing order, no split of K, no atomics. Floats:
//   each instruction sums 8 exact products of consecutive k from C = 0 (the
//   tensor core's own alignment and truncation), and its result is added to
//   the output's float32 accumulator, a chain from +0 rounded to nearest, in
//   increasing k: the same bits on every launch. Integers: each instruction's
//   32 products summed exactly, added modulo 2^32.
// * Then init is added last (one more rounding), except at K = 0, where the
//   output is init as the accumulator holds it, untouched (or +0); stores as
//   contract.cu's.
// * Segments (seg 1 Rows, 2 Contracting), one launch for all groups, after
//   the pre-pass below has sorted the segmented axis's indices by group:
//   Rows: blocks (batch, tile, column tile) over an upper bound of tiles;
//   each bucket (group, or no group last) of a batch index has its own tiles
//   of 64 of its rows, gathered through the permutation, b from the group's
//   slice; a tile of rows in no group has no products (init or +0); blocks
//   past the batch index's tiles return. Contracting: blocks (group, batch,
//   tile, column tile), K the group's count, its indices in increasing order
//   through the permutation. Each output's products are then those of the
//   unsegmented kernel on gathered operands, in the same order: the same bits.
#include "nxk_mma.cuh"

#define NXK_CM_TM 64
#define NXK_CM_TN 64
#define NXK_CM_KS 32
#define NXK_CM_THREADS 128
// Row strides of the staged tiles, in bytes: 32 elements and a pad, a
// multiple of 4 (fragments are read as 32-bit words).
#define NXK_CM_PAD 16
// Runs of 8 k in a K step: the staged scale codes of a row or column.
#define NXK_CM_RUNS 4

template <int KIND>
struct NxkMmaKind {
    typedef nxk_u16 E;      // the staged element: its code
    typedef float Acc;      // the accumulator in registers
    typedef float Out;      // the accumulator of the epilogue
};
template <>
struct NxkMmaKind<2> {
    typedef nxk_u8 E;
    typedef nxk_u32 Acc;
    typedef nxk_u64 Out;
};
template <>
struct NxkMmaKind<3> {
    typedef nxk_u8 E;
    typedef nxk_u32 Acc;
    typedef nxk_u64 Out;
};

// The code, in float16 (bf false) or bfloat16 (bf true), of the element of
// dtype code c (4 float8_e4m3fn, 5 float8_e5m2, 6 float4_e2m1fn) at position
// p: its value exactly (each of those values is one of both formats; a NaN a
// NaN), through float32, which holds it exactly too.
__device__ __noinline__ nxk_u16 nxk_cm_wide16(int c, bool bf, const char* b, nxk_i64 p) {
    if (c == 5 && !bf) return (nxk_u16)((nxk_u32)nxk_ld_e5m2(b, p) << 8);   // e5m2 is float16's top byte
    const float v = c == 4 ? nxk_val_e4m3(nxk_ld_e4m3(b, p))
                  : c == 5 ? nxk_val_e5m2(nxk_ld_e5m2(b, p)) : nxk_val_e2m1(nxk_ld_e2m1(b, p));
    return bf ? (nxk_u16)(nxk_bits_f32(v) >> 16) : nxk_f16_of_f32(v);   // bfloat16: float32's top half, exact
}

// The code, as an 8-bit integer, of the element of dtype code c (15 int4, 16
// uint4) at position p: sign- or zero-extended.
__device__ __noinline__ nxk_u8 nxk_cm_wide8(int c, const char* b, nxk_i64 p) {
    return c == 15 ? (nxk_u8)nxk_ld_i4(b, p) : nxk_ld_u4(b, p);
}

// The staged code of an element of dtype code c at position p: the code
// itself where c is the staged format's (float16 2, bfloat16 3, int8 13,
// uint8 14), else widened exactly.
__device__ __forceinline__ void nxk_cm_ld(nxk_u16* out, int c, bool bf, const char* b, nxk_i64 p) {
    *out = c == 2 || c == 3 ? nxk_ld_u16(b, p) : nxk_cm_wide16(c, bf, b, p);
}
__device__ __forceinline__ void nxk_cm_ld(nxk_u8* out, int c, bool, const char* b, nxk_i64 p) {
    *out = c == 13 || c == 14 ? nxk_ld_u8(b, p) : nxk_cm_wide8(c, b, p);
}

// d * 2^(ea - 127) * 2^(eb - 127) for Exponent codes ea, eb, rounded once:
// exact where the result is a normal float32 or zero, rounded to nearest
// where it is below 2^-126 (two steps, the first exact: d * 2^(s + 126) is
// normal or the whole result is below 2^-252 and rounds to a zero either
// way), an infinity above the finite range (the first step of s > 127 is
// exact or already infinite); a code 255 gives NaN. The exponent s = ea + eb
// - 254 of the two scales' product, in [-254, 254], is never formed as a
// float32 (it may exceed its range where neither scale does).
__device__ __forceinline__ float nxk_cm_scale(float d, int ea, int eb) {
    if (ea == 255 || eb == 255) return nxk_f32_of_bits(NXK_QNAN_F32);
    const int s = ea + eb - 254;
    if (s > 127) return (d * nxk_pow2f(127)) * nxk_pow2f(s - 127);
    if (s < -126) return (d * nxk_pow2f(s + 126)) * nxk_pow2f(-126);
    return d * nxk_pow2f(s);
}

// Index i's position in the first array of the three-array walk w.
__device__ __noinline__ nxk_i64 nxk_cm_first(const nxk_i64* __restrict__ w, nxk_i64 i) {
    nxk_i64 p[3];
    nxk_walk<3>(w, i, p);
    return p[0];
}

// The row of slot x below rend: x itself, or (Rows, seg 1) the row perm holds
// there; -1 past rend.
__device__ __noinline__ nxk_i64 nxk_cm_row(int seg, const nxk_i64* __restrict__ pt, nxk_i64 x, nxk_i64 rend) {
    if (x >= rend) return -1;
    return seg == 1 ? pt[x] : x;
}

// The bucket e < nb whose tiles hold tile j: ts[e] <= j < ts[e + 1], for
// nondecreasing ts with ts[0] = 0 <= j < ts[nb] (so bucket e has tiles).
__device__ __noinline__ nxk_i64 nxk_cm_bucket(const nxk_i64* __restrict__ ts, nxk_i64 nb, nxk_i64 j) {
    nxk_i64 lo = 0, hi = nb;   // ts[lo] <= j < ts[hi]
    while (hi - lo > 1) {
        const nxk_i64 mid = lo + (hi - lo) / 2;
        if (ts[mid] <= j) lo = mid;
        else hi = mid;
    }
    return lo;
}

// One step of K (32 elements) of a warp's 2 x 4 tiles: KIND 0 and 1 four
// m16n8k8 instructions in increasing k, each result (scaled by the staged
// codes ss, a's rows' then b's columns', where `scaled`) added into acc; KIND
// 2 and 3 one m16n8k32.
template <int KIND>
__device__ __forceinline__ void nxk_cm_step(typename NxkMmaKind<KIND>::Acc (*acc)[4][4], const unsigned char* as,
                                            const unsigned char* bs, const unsigned char* ss, int scaled,
                                            int wm, int wn, int g, int t) {
    const int stride = NXK_CM_KS * (int)sizeof(typename NxkMmaKind<KIND>::E) + NXK_CM_PAD;
    if (KIND <= 1) {
        for (int kk = 0; kk < NXK_CM_KS; kk += 8) {
            const int kb = 2 * (kk + 2 * t);   // the byte of k = kk + 2t
#pragma unroll
            for (int mi = 0; mi < 2; ++mi) {
                const int r = wm * 32 + mi * 16 + g;
                nxk_u32 a[2];
                a[0] = *(const nxk_u32*)(as + r * stride + kb);
                a[1] = *(const nxk_u32*)(as + (r + 8) * stride + kb);
#pragma unroll
                for (int ni = 0; ni < 4; ++ni) {
                    const int c = wn * 32 + ni * 8 + g;
                    const nxk_u32 b = *(const nxk_u32*)(bs + c * stride + kb);
                    float d[4];
                    nxk_mma_k8<KIND == 0>(d, a, b);
                    if (scaled) {
#pragma unroll
                        for (int q = 0; q < 4; ++q) {
                            const int rr = r + 8 * (q / 2), cc = wn * 32 + ni * 8 + 2 * t + (q % 2);
                            d[q] = nxk_cm_scale(d[q], ss[rr * NXK_CM_RUNS + kk / 8],
                                                ss[(NXK_CM_TM + cc) * NXK_CM_RUNS + kk / 8]);
                        }
                    }
#pragma unroll
                    for (int q = 0; q < 4; ++q) acc[mi][ni][q] = (typename NxkMmaKind<KIND>::Acc)(acc[mi][ni][q] + d[q]);
                }
            }
        }
    } else {
#pragma unroll
        for (int mi = 0; mi < 2; ++mi) {
            const int r = wm * 32 + mi * 16 + g;
            nxk_u32 a[4];
            a[0] = *(const nxk_u32*)(as + r * stride + 4 * t);
            a[1] = *(const nxk_u32*)(as + (r + 8) * stride + 4 * t);
            a[2] = *(const nxk_u32*)(as + r * stride + 16 + 4 * t);
            a[3] = *(const nxk_u32*)(as + (r + 8) * stride + 16 + 4 * t);
#pragma unroll
            for (int ni = 0; ni < 4; ++ni) {
                const int c = wn * 32 + ni * 8 + g;
                nxk_u32 b[2];
                b[0] = *(const nxk_u32*)(bs + c * stride + 4 * t);
                b[1] = *(const nxk_u32*)(bs + c * stride + 16 + 4 * t);
                nxk_u32 d[4];
                nxk_mma_k32<KIND == 2>(d, a, b);
#pragma unroll
                for (int q = 0; q < 4; ++q) acc[mi][ni][q] = (typename NxkMmaKind<KIND>::Acc)(acc[mi][ni][q] + d[q]);
            }
        }
    }
}

// Staging by 16-byte runs of V = 16 / sizeof(E) codes (the host's run modes,
// contract_mma.py's run_mode): mode 1, a line's (a's row's, b's column's) V
// consecutive k, where its innermost contracting axis has stride 1; mode 2,
// V consecutive lines at one k, where its innermost free axis has stride 1.
// The host takes a mode only where every run starts 16-byte aligned and lies
// within one axis (codes staged as they are, no widening); a run past the
// extents or K's end is staged code by code, +0 past them. The tile holds the
// same codes as the scalar staging: the bits do not depend on the mode.
//
// A side's lines of one block: the positions of this thread's mode-1 lines
// (-1: none), or of its mode-2 run's first line (-1: not whole, code by code).
struct NxkCmRuns {
    nxk_i64 lp[2];
};

template <class E>
__device__ __forceinline__ E nxk_cm_code(const char* x, nxk_i64 p) {
    if (sizeof(E) == 2) return (E)nxk_ld_u16(x, p);
    return (E)nxk_ld_u8(x, p);
}

// Line l's position in the side's walk lw from xbase, or -1 (past lend; a's
// rows through perm under Rows, seg_rows 1).
__device__ __forceinline__ nxk_i64 nxk_cm_line(const nxk_i64* __restrict__ lw, nxk_i64 xbase, int seg_rows,
                                               const nxk_i64* __restrict__ pt, nxk_i64 l, nxk_i64 lend) {
    const nxk_i64 r = nxk_cm_row(seg_rows, pt, l, lend);
    return r >= 0 ? xbase + nxk_cm_first(lw, r) : -1;
}

template <class E>
__device__ __forceinline__ NxkCmRuns nxk_cm_runs(int mode, const nxk_i64* __restrict__ lw, nxk_i64 xbase,
                                                 int seg_rows, const nxk_i64* __restrict__ pt, nxk_i64 l0,
                                                 nxk_i64 lend, int tid) {
    constexpr int V = 16 / (int)sizeof(E);
    NxkCmRuns runs;
    runs.lp[0] = runs.lp[1] = -1;
    if (mode == 1) {
        for (int i = 0; i < 16 / V; ++i)
            runs.lp[i] = nxk_cm_line(lw, xbase, seg_rows, pt, l0 + (tid + 128 * i) / (32 / V), lend);
    } else if (mode == 2) {
        const nxk_i64 first = l0 + (tid % (64 / V)) * V;
        if (first + V <= lend) runs.lp[0] = xbase + nxk_cm_first(lw, first);
    }
    return runs;
}

// Stage the side's K step [k0, k0 + 32) of its 64 lines into tile[line][k]
// (rows `stride` bytes apart) by runs; `side` 0 reads a's K positions, 1 b's.
template <class E>
__device__ __forceinline__ void nxk_cm_stage_runs(unsigned char* tile, int stride, int mode, const NxkCmRuns& runs,
                                                  const char* x, int side, const nxk_i64* __restrict__ kw,
                                                  const nxk_i64* __restrict__ lw, nxk_i64 xbase, nxk_i64 l0,
                                                  nxk_i64 lend, nxk_i64 k0, nxk_i64 kn, int tid) {
    constexpr int V = 16 / (int)sizeof(E);
    union { uint4 w; E c[V]; } u;
    nxk_i64 kp[2];
    if (mode == 1) {
        const int kv = (tid % (32 / V)) * V;
        const bool whole = k0 + kv + V <= kn;
        if (whole) nxk_walk<2>(kw, k0 + kv, kp);
        for (int i = 0; i < 16 / V; ++i) {
            const int y = (tid + 128 * i) / (32 / V);
            const nxk_i64 lp = runs.lp[i];
            if (lp >= 0 && whole) {
                u.w = *(const uint4*)(x + (lp + kp[side]) * (nxk_i64)sizeof(E));
            } else {
                for (int e = 0; e < V; ++e) {
                    u.c[e] = 0;
                    if (lp >= 0 && k0 + kv + e < kn) {
                        nxk_walk<2>(kw, k0 + kv + e, kp);
                        u.c[e] = nxk_cm_code<E>(x, lp + kp[side]);
                    }
                }
            }
            *(uint4*)(tile + y * stride + kv * (int)sizeof(E)) = u.w;
        }
    } else {
        const int yv = (tid % (64 / V)) * V;
        for (int i = 0; i < 16 / V; ++i) {
            const int kk = (tid + 128 * i) / (64 / V);
            for (int e = 0; e < V; ++e) u.c[e] = 0;
            if (k0 + kk < kn) {
                nxk_walk<2>(kw, k0 + kk, kp);
                if (runs.lp[0] >= 0) {
                    u.w = *(const uint4*)(x + (runs.lp[0] + kp[side]) * (nxk_i64)sizeof(E));
                } else {
                    for (int e = 0; e < V; ++e)
                        if (l0 + yv + e < lend) u.c[e] = nxk_cm_code<E>(x, xbase + nxk_cm_first(lw, l0 + yv + e) + kp[side]);
                }
            }
            for (int e = 0; e < V; ++e) *(E*)(tile + (yv + e) * stride + kk * (int)sizeof(E)) = u.c[e];
        }
    }
}

// Block index b = ([group,] t, tile_m, tile_n) striding over `blocks`;
// init_code < 0: no init. seg 0: no segments (perm, starts, tstarts unread);
// 1 Rows: tiles_m the bound of a batch index's tiles, perm [nbatch][n = rows]
// rows by bucket, starts and tstarts [nbatch][groups + 2] each bucket's first
// slot and first tile (bucket `groups`: no group), b_g b's stride along its
// groups axis; 2 Contracting: perm [nbatch][n = K] indices by group, starts
// as for Rows, d_g and i_g dst's and init's strides along the groups axis.
// a_code, b_code: the operands' dtype codes (staged as they are or widened).
// scaled (KIND 0 and 1, seg 0): bit 1 a's Exponent scale sa, bit 2 b's sb;
// smap: six offsets (words from smap) of the scale maps of a's batch, rows
// and K, and of b's batch, K and columns, then the maps.
// sb_gblock, sb_gstride (Rows, b scaled): b's scale block and stride along
// b's groups axis.
// a_mode, b_mode: each side's staging (0 code by code, 1 and 2 by runs, see
// nxk_cm_stage_runs; taken as 0 where the buffer is not 16-byte aligned).
// Dynamic shared memory: two tiles of 64 rows of the row stride, then the
// scale codes [64 rows of a, 64 columns of b][4 runs].
template <int KIND>
__global__ void __launch_bounds__(NXK_CM_THREADS)
nxk_contract_mma(const nxk_i64* __restrict__ bw, const nxk_i64* __restrict__ rw,
                 const nxk_i64* __restrict__ cw, const nxk_i64* __restrict__ kw,
                 nxk_i64 rows, nxk_i64 cols, nxk_i64 K, nxk_i64 tiles_m, nxk_i64 tiles_n,
                 int init_code, int dst_code, int same,
                 const char* a, const char* b, const char* init, char* dst, nxk_i64 blocks,
                 int seg, nxk_i64 nbatch, const nxk_i64* __restrict__ perm,
                 const nxk_i64* __restrict__ starts, const nxk_i64* __restrict__ tstarts, nxk_i64 n,
                 nxk_i64 groups, nxk_i64 b_g, nxk_i64 d_g, nxk_i64 i_g,
                 int a_code, int b_code, int scaled, const char* sa, const char* sb,
                 const nxk_i64* __restrict__ smap, int a_mode, int b_mode, nxk_i64 sb_gblock,
                 nxk_i64 sb_gstride)
{
    typedef typename NxkMmaKind<KIND>::E E;
    typedef typename NxkMmaKind<KIND>::Acc Acc;
    typedef typename NxkMmaKind<KIND>::Out Out;
    const int stride = NXK_CM_KS * (int)sizeof(E) + NXK_CM_PAD;
    unsigned char* as = nxk_dynamic_shared;                  // [TM][stride bytes]
    unsigned char* bs = nxk_dynamic_shared + NXK_CM_TM * stride;  // [TN][stride bytes]
    unsigned char* ss = bs + NXK_CM_TN * stride;                  // [TM + TN][runs]
    const int tid = (int)threadIdx.x;
    const int lane = tid % 32, warp = tid / 32;
    const int g = lane / 4, t = lane % 4;
    const int wm = warp / 2, wn = warp % 2;
    const int kx = tid % 32;   // the k this thread stages
    const int ry = tid / 32;   // its staged rows and columns ry + 4m
    const nxk_i64 per = tiles_m * tiles_n;
    if (((unsigned long long)a & 15ull) != 0) a_mode = 0;   // runs need 16-byte aligned buffers
    if (((unsigned long long)b & 15ull) != 0) b_mode = 0;
    for (nxk_i64 blk = blockIdx.x; blk < blocks; blk += gridDim.x) {
        const nxk_i64 tb = (blk / per) % nbatch;
        const nxk_i64 rem = blk % per;
        const nxk_i64 c0 = (rem % tiles_n) * NXK_CM_TN;
        nxk_i64 bp[4];
        nxk_walk<4>(bw, tb, bp);
        // The block's rows: slots [r0, r0 + 64) below rend, each its own row or
        // (Rows) the row perm holds there; kn products an output from index kb
        // of perm (Contracting) or k = 0 on.
        nxk_i64 r0 = (rem / tiles_n) * NXK_CM_TM, rend = rows, kn = K, kb = 0, sb_group = 0;
        const nxk_i64* pt = perm + tb * n;
        if (seg == 1) {
            const nxk_i64* st = starts + tb * (groups + 2);
            const nxk_i64* ts = tstarts + tb * (groups + 2);
            const nxk_i64 j = rem / tiles_n;
            if (j >= ts[groups + 1]) continue;   // past this batch index's tiles
            nxk_i64 e = nxk_cm_bucket(ts, groups + 1, j);
            r0 = st[e] + (j - ts[e]) * NXK_CM_TM;
            rend = st[e + 1];
            if (e == groups) {
                kn = 0;   // rows in no group: no products
            } else {
                bp[1] += e * b_g;
                sb_group = (e / sb_gblock) * sb_gstride;   // b's scale along its groups axis
            }
        } else if (seg == 2) {
            const nxk_i64 e = blk / (per * nbatch);
            const nxk_i64* st = starts + tb * (groups + 2);
            kb = st[e];
            kn = st[e + 1] - kb;
            bp[2] += e * d_g;
            bp[3] += e * i_g;
        }
        // Positions of the rows of a and columns of b this thread stages (-1: past the extent).
        // Exponent scales: each side's scale position of the batch index.
        const nxk_i64 sat = scaled & 1 ? nxk_scale_at(smap + smap[0], tb) : 0;
        const nxk_i64 sbt = scaled & 2 ? nxk_scale_at(smap + smap[3], tb) + sb_group : 0;
        nxk_i64 ap[16], bq[16];
        for (int m = 0; m < 16; ++m) {
            const nxk_i64 r = nxk_cm_row(seg, pt, r0 + ry + 4 * m, rend), c = c0 + ry + 4 * m;
            ap[m] = r >= 0 ? bp[0] + nxk_cm_first(rw, r) : -1;
            bq[m] = c < cols ? bp[1] + nxk_cm_first(cw, c) : -1;
        }
        const NxkCmRuns aruns = nxk_cm_runs<E>(a_mode, rw, bp[0], seg == 1, pt, r0, rend, tid);
        const NxkCmRuns bruns = nxk_cm_runs<E>(b_mode, cw, bp[1], 0, pt, c0, cols, tid);
        Acc acc[2][4][4];
#pragma unroll
        for (int mi = 0; mi < 2; ++mi)
#pragma unroll
            for (int ni = 0; ni < 4; ++ni)
#pragma unroll
                for (int q = 0; q < 4; ++q) acc[mi][ni][q] = (Acc)0;
        for (nxk_i64 k0 = 0; k0 < kn; k0 += NXK_CM_KS) {
            const nxk_i64 k = k0 + kx;
            nxk_i64 kp[2] = {0, 0};
            if (k < kn && (a_mode == 0 || b_mode == 0)) nxk_walk<2>(kw, seg == 2 ? pt[kb + k] : k, kp);
            for (int m = 0; m < 16; ++m) {
                E va = 0, vb = 0;
                if (a_mode == 0) {
                    if (k < kn && ap[m] >= 0) nxk_cm_ld(&va, a_code, KIND == 0, a, ap[m] + kp[0]);
                    *(E*)(as + (ry + 4 * m) * stride + kx * (int)sizeof(E)) = va;
                }
                if (b_mode == 0) {
                    if (k < kn && bq[m] >= 0) nxk_cm_ld(&vb, b_code, KIND == 0, b, bq[m] + kp[1]);
                    *(E*)(bs + (ry + 4 * m) * stride + kx * (int)sizeof(E)) = vb;
                }
            }
            if (a_mode != 0) nxk_cm_stage_runs<E>(as, stride, a_mode, aruns, a, 0, kw, rw, bp[0], r0, rend, k0, kn, tid);
            if (b_mode != 0) nxk_cm_stage_runs<E>(bs, stride, b_mode, bruns, b, 1, kw, cw, bp[1], c0, cols, k0, kn, tid);
            if (scaled && kx % 8 == 0) {
                // The codes of the run of 8 from k (its scale block, the host
                // checked, is k's): 127 (a factor 1) past K or the extents.
                const bool in = k < kn;
                const nxk_i64 ka = in && (scaled & 1) ? sat + nxk_scale_at(smap + smap[2], k) : 0;
                const nxk_i64 kb2 = in && (scaled & 2) ? sbt + nxk_scale_at(smap + smap[4], k) : 0;
                for (int m = 0; m < 16; ++m) {
                    const int y = ry + 4 * m;
                    int ea = 127, eb = 127;
                    if (in && (scaled & 1) && ap[m] >= 0)   // the row itself (Rows: through perm)
                        ea = (int)nxk_ld_u8(sa, ka + nxk_scale_at(smap + smap[1], nxk_cm_row(seg, pt, r0 + y, rend)));
                    if (in && (scaled & 2) && bq[m] >= 0)
                        eb = (int)nxk_ld_u8(sb, kb2 + nxk_scale_at(smap + smap[5], c0 + y));
                    ss[y * NXK_CM_RUNS + kx / 8] = (unsigned char)ea;
                    ss[(NXK_CM_TM + y) * NXK_CM_RUNS + kx / 8] = (unsigned char)eb;
                }
            }
            __syncthreads();
            nxk_cm_step<KIND>(acc, as, bs, ss, KIND <= 1 ? scaled : 0, wm, wn, g, t);
            __syncthreads();
        }
        // This thread's four output rows (mi, q / 2); rows stands for none past rend.
        nxk_i64 er[4];
        for (int h = 0; h < 4; ++h) {
            const nxk_i64 r = nxk_cm_row(seg, pt, r0 + wm * 32 + (h / 2) * 16 + g + 8 * (h % 2), rend);
            er[h] = r < 0 ? rows : r;
        }
#pragma unroll
        for (int mi = 0; mi < 2; ++mi)
#pragma unroll
            for (int ni = 0; ni < 4; ++ni)
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                    const nxk_i64 c = c0 + wn * 32 + ni * 8 + 2 * t + (q % 2);
                    nxk_ct_finish(rw, cw, er[2 * mi + q / 2], c, rows, cols, kn == 0, bp[2], bp[3], init_code,
                                  init, same, dst_code, dst, (Out)acc[mi][ni][q]);
                }
    }
}


// ---------------------------------------------------------------------------
// The segments' pre-pass: per batch index, a stable counting sort of the
// segmented axis's indices (Rows: a's rows; Contracting: K, C order) by
// group, in three launches, without atomics (the same tables every launch):
//
//   nxk_cm_count:   warp w of batch index t counts the groups of its span of
//                   NXK_CS_SPAN indices into its row cnt[t][w][0..nb) (nb =
//                   groups + 1 buckets, the last one no group: ids outside
//                   [0, groups)), 32 indices a step (__match_any_sync: one
//                   leader per group and step adds its count);
//   nxk_cm_offsets: per batch index, each bucket's first slot starts[t][e]
//                   and first tile of 64 tstarts[t][e] (exclusive prefix
//                   sums; starts[t][nb] = n, tstarts[t][nb] the tiles), and
//                   each warp's row turned into its first slot per bucket:
//                   starts[t][e] + the counts of the warps before it;
//   nxk_cm_place:   each warp walks its span again: an index goes to its
//                   warp's next slot of its bucket plus its rank among the
//                   step's lanes of that bucket, so perm[t][..] holds each
//                   bucket's indices in increasing order.
//
// An index's group: ids at the batch walk bw's position of t plus the
// sequence walk sw's of the index (one array each).
// ---------------------------------------------------------------------------

#define NXK_CS_SPAN 1024   // indices a warp walks: 32 steps of 32
#define NXK_CS_WARPS 4     // warps a block of nxk_cm_count and nxk_cm_place
#define NXK_CS_THREADS 128

// The bucket of index i (< n) at batch position pt: its id in [0, groups), else groups.
__device__ __noinline__ nxk_i64 nxk_cs_bucket(const nxk_i64* __restrict__ sw, const char* ids, nxk_i64 pt,
                                              nxk_i64 i, nxk_i64 groups) {
    nxk_i64 p[1];
    nxk_walk<1>(sw, i, p);
    const nxk_i64 e = nxk_ld_i64(ids, pt + p[0]);
    return e >= 0 && e < groups ? e : groups;
}

// Phase 0 (count) or 1 (place) of warp w's span of batch index t; blocks
// (t, warps / NXK_CS_WARPS); cnt [nbatch][nw][nb].
__device__ __forceinline__ void nxk_cs_walk(int phase, const nxk_i64* __restrict__ bw,
                                            const nxk_i64* __restrict__ sw, const char* ids, nxk_i64 n,
                                            nxk_i64 groups, nxk_i64 nw, nxk_i64* cnt, nxk_i64* perm,
                                            nxk_i64 blocks) {
    const nxk_i64 nb = groups + 1;
    const int lane = (int)threadIdx.x % 32;
    const nxk_i64 per = (nw + NXK_CS_WARPS - 1) / NXK_CS_WARPS;
    for (nxk_i64 blk = blockIdx.x; blk < blocks; blk += gridDim.x) {
        const nxk_i64 t = blk / per;
        const nxk_i64 w = (blk % per) * NXK_CS_WARPS + (nxk_i64)threadIdx.x / 32;
        if (w >= nw) continue;   // the whole warp: no collective is skipped halfway
        nxk_i64 bp[1];
        nxk_walk<1>(bw, t, bp);
        nxk_i64* c = cnt + (t * nw + w) * nb;
        if (phase == 0) {
            for (nxk_i64 e = lane; e < nb; e += 32) c[e] = 0;
            __syncwarp();
        }
        const nxk_i64 end = (w + 1) * NXK_CS_SPAN < n ? (w + 1) * NXK_CS_SPAN : n;
        for (nxk_i64 i0 = w * NXK_CS_SPAN; i0 < end; i0 += 32) {
            const nxk_i64 i = i0 + lane;
            const nxk_i64 e = i < end ? nxk_cs_bucket(sw, ids, bp[0], i, groups) : -1;
            const unsigned same = __match_any_sync(NXK_FULL_MASK, e);
            const bool leader = lane == __ffs((int)same) - 1;
            if (phase == 1 && e >= 0) perm[t * n + c[e] + __popc(same & ((1u << lane) - 1u))] = i;
            __syncwarp();
            if (leader && e >= 0) c[e] += __popc(same);
            __syncwarp();
        }
    }
}

__global__ void __launch_bounds__(NXK_CS_THREADS)
nxk_cm_count(const nxk_i64* __restrict__ bw, const nxk_i64* __restrict__ sw, const char* ids, nxk_i64 n,
             nxk_i64 groups, nxk_i64 nw, nxk_i64* cnt, nxk_i64 blocks) {
    nxk_cs_walk(0, bw, sw, ids, n, groups, nw, cnt, cnt, blocks);
}

__global__ void __launch_bounds__(NXK_CS_THREADS)
nxk_cm_place(const nxk_i64* __restrict__ bw, const nxk_i64* __restrict__ sw, const char* ids, nxk_i64 n,
             nxk_i64 groups, nxk_i64 nw, nxk_i64* cnt, nxk_i64* perm, nxk_i64 blocks) {
    nxk_cs_walk(1, bw, sw, ids, n, groups, nw, cnt, perm, blocks);
}

// One block a batch index (striding over nbatch); starts and tstarts
// [nbatch][nb + 1].
__global__ void __launch_bounds__(NXK_CS_THREADS)
nxk_cm_offsets(nxk_i64 nbatch, nxk_i64 groups, nxk_i64 nw, nxk_i64* cnt, nxk_i64* starts, nxk_i64* tstarts) {
    __shared__ nxk_i64 part[2][NXK_CS_THREADS];
    const nxk_i64 nb = groups + 1;
    const int tid = (int)threadIdx.x;
    const nxk_i64 chunk = (nb + NXK_CS_THREADS - 1) / NXK_CS_THREADS;
    const nxk_i64 e0 = tid * chunk < nb ? tid * chunk : nb;
    const nxk_i64 e1 = e0 + chunk < nb ? e0 + chunk : nb;
    for (nxk_i64 t = blockIdx.x; t < nbatch; t += gridDim.x) {
        nxk_i64* c = cnt + t * nw * nb;
        nxk_i64* st = starts + t * (nb + 1);
        nxk_i64* ts = tstarts + t * (nb + 1);
        // Each bucket of this thread's run: warp rows to counts before it, its total in st.
        nxk_i64 sum = 0, tiles = 0;
        for (nxk_i64 e = e0; e < e1; ++e) {
            nxk_i64 run = 0;
            for (nxk_i64 w = 0; w < nw; ++w) {
                const nxk_i64 v = c[w * nb + e];
                c[w * nb + e] = run;
                run += v;
            }
            st[e] = run;
            sum += run;
            tiles += (run + NXK_CM_TM - 1) / NXK_CM_TM;
        }
        part[0][tid] = sum;
        part[1][tid] = tiles;
        __syncthreads();
        if (tid == 0) {
            nxk_i64 s0 = 0, s1 = 0;
            for (int j = 0; j < NXK_CS_THREADS; ++j) {
                const nxk_i64 a0 = part[0][j], a1 = part[1][j];
                part[0][j] = s0;
                part[1][j] = s1;
                s0 += a0;
                s1 += a1;
            }
            st[nb] = s0;
            ts[nb] = s1;
        }
        __syncthreads();
        sum = part[0][tid];
        tiles = part[1][tid];
        for (nxk_i64 e = e0; e < e1; ++e) {
            const nxk_i64 run = st[e];
            st[e] = sum;
            ts[e] = tiles;
            for (nxk_i64 w = 0; w < nw; ++w) c[w * nb + e] += sum;
            sum += run;
            tiles += (run + NXK_CM_TM - 1) / NXK_CM_TM;
        }
        __syncthreads();   // part is read again by the next batch index
    }
}

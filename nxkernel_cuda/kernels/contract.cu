// contract.cu: the SIMT contraction kernels (nxkernel_cuda/contraction.py).
//
// nxk_contract<Acc>: dst[t, r, c] = init[t, r, c] + sum_k a[t, r, k] * b[t, k, c],
// in the accumulator Acc (float, double, or nxk_u64 for every integer
// accumulator, wrapping modulo 2^64 and then to the destination's width).
//
// * Operands are found by four walks (nxk_loop.cuh) that the host builds from
//   the caller's layouts: the batch walk over (a, b, dst, init) carries the
//   arrays' offsets, the rows walk (a, dst, init), the columns walk
//   (b, dst, init) and the K walk (a, b) carry strides only; an element's
//   position is the sum of its batch, row or column, and K positions. Any
//   layout (transposed, strided, broadcast, reversed) is read in place.
// * Tiles: a block of 256 threads computes a 64 x 64 tile of one batch index,
//   staging 64 x 16 of a and 16 x 64 of b in shared memory per step; each
//   thread holds 4 x 4 outputs (rows ty + 16i, columns tx + 16j) and stages
//   a's rows and b's columns ty + 16i at k = k0 + tx, so one K walk a step
//   serves both. Loads, walks and the epilogue are out-of-line functions,
//   which keeps NVRTC's compile time to seconds.
// * Order: each output is a chain from +0 over k = 0, 1, ..., K - 1, each
//   product rounded and then added (NVRTC --fmad=false; the emulator
//   -ffp-contract=off), no split of K, no atomics: the same bits on every
//   launch and device. Past K the staged elements are +0, and x + (+0 * +0)
//   is x for every x a chain from +0 reaches (it never reaches -0).
// * Then init is added last (one more rounding), except at K = 0, where the
//   output is init as the accumulator holds it, untouched (or +0).
// * Store: a destination of the accumulator's dtype takes the bits as they
//   are; a narrower float rounds once by the store rule (nxk_store_float);
//   an integer destination takes the low bits (nxk_store_code_of).
#include "nxk_scalar.cuh"
#include "nxk_loop.cuh"

#define NXK_CT_TM 64
#define NXK_CT_TN 64
#define NXK_CT_TK 16
#define NXK_CT_THREADS 256

// An element of dtype code `c` at position p, as the accumulator holds it.
// Only codes the host admits for that accumulator reach these (each converts
// exactly, but init into float32 from nothing wider).
__device__ __noinline__ void nxk_ct_ld(float* out, int c, const char* b, nxk_i64 p) {
    switch (c) {
        case 1: *out = nxk_ld_f32(b, p); break;
        case 2: *out = nxk_val_f16(nxk_ld_f16(b, p)); break;
        case 3: *out = nxk_val_bf16(nxk_ld_bf16(b, p)); break;
        case 4: *out = nxk_val_e4m3(nxk_ld_e4m3(b, p)); break;
        case 5: *out = nxk_val_e5m2(nxk_ld_e5m2(b, p)); break;
        case 11: *out = (float)nxk_ld_i16(b, p); break;
        case 12: *out = (float)nxk_ld_u16(b, p); break;
        case 13: *out = (float)nxk_ld_i8(b, p); break;
        case 14: *out = (float)nxk_ld_u8(b, p); break;
        case 15: *out = (float)nxk_ld_i4(b, p); break;
        default: *out = (float)nxk_ld_u4(b, p); break;
    }
}

__device__ __noinline__ void nxk_ct_ld(double* out, int c, const char* b, nxk_i64 p) {
    switch (c) {
        case 0: *out = nxk_ld_f64(b, p); break;
        case 1: *out = (double)nxk_ld_f32(b, p); break;
        case 2: *out = (double)nxk_val_f16(nxk_ld_f16(b, p)); break;
        case 3: *out = (double)nxk_val_bf16(nxk_ld_bf16(b, p)); break;
        case 4: *out = (double)nxk_val_e4m3(nxk_ld_e4m3(b, p)); break;
        case 5: *out = (double)nxk_val_e5m2(nxk_ld_e5m2(b, p)); break;
        case 9: *out = (double)nxk_ld_i32(b, p); break;
        case 10: *out = (double)nxk_ld_u32(b, p); break;
        case 11: *out = (double)nxk_ld_i16(b, p); break;
        case 12: *out = (double)nxk_ld_u16(b, p); break;
        case 13: *out = (double)nxk_ld_i8(b, p); break;
        case 14: *out = (double)nxk_ld_u8(b, p); break;
        case 15: *out = (double)nxk_ld_i4(b, p); break;
        default: *out = (double)nxk_ld_u4(b, p); break;
    }
}

// Integers: sign- or zero-extended to 64 bits (congruent modulo 2^64).
__device__ __noinline__ void nxk_ct_ld(nxk_u64* out, int c, const char* b, nxk_i64 p) {
    switch (c) {
        case 7: *out = (nxk_u64)nxk_ld_i64(b, p); break;
        case 8: *out = nxk_ld_u64(b, p); break;
        case 9: *out = (nxk_u64)(nxk_i64)nxk_ld_i32(b, p); break;
        case 10: *out = (nxk_u64)nxk_ld_u32(b, p); break;
        case 11: *out = (nxk_u64)(nxk_i64)nxk_ld_i16(b, p); break;
        case 12: *out = (nxk_u64)nxk_ld_u16(b, p); break;
        case 13: *out = (nxk_u64)(nxk_i64)nxk_ld_i8(b, p); break;
        case 14: *out = (nxk_u64)nxk_ld_u8(b, p); break;
        case 15: *out = (nxk_u64)(nxk_i64)nxk_ld_i4(b, p); break;
        default: *out = (nxk_u64)nxk_ld_u4(b, p); break;
    }
}

// Store into dst: the accumulator's own dtype by its bits, else once rounded.
__device__ __noinline__ void nxk_ct_st(int same, int dtc, char* d, nxk_i64 p, float v) {
    if (same) nxk_st_f32(d, p, v);
    else nxk_store_float(dtc, d, p, (double)v);
}
__device__ __noinline__ void nxk_ct_st(int same, int dtc, char* d, nxk_i64 p, double v) {
    if (same) nxk_st_f64(d, p, v);
    else nxk_store_float(dtc, d, p, v);
}
__device__ __noinline__ void nxk_ct_st(int same, int dtc, char* d, nxk_i64 p, nxk_u64 v) {
    nxk_store_code_of(dtc, d, p, v);
}

// Index i's position in the first array of the three-array walk w.
__device__ __noinline__ nxk_i64 nxk_ct_first(const nxk_i64* __restrict__ w, nxk_i64 i) {
    nxk_i64 p[3];
    nxk_walk<3>(w, i, p);
    return p[0];
}

// Output (r, c) of the tile, where it is one: init (its position bi + the
// walks') added last, except at K = 0 where init is the result untouched;
// then the store into dst (position bd + the walks').
template <class Acc>
__device__ __noinline__ void nxk_ct_finish(const nxk_i64* __restrict__ rw, const nxk_i64* __restrict__ cw,
                                           nxk_i64 r, nxk_i64 c, nxk_i64 rows, nxk_i64 cols, nxk_i64 K,
                                           nxk_i64 bd, nxk_i64 bi, int init_code, const char* init,
                                           int same, int dst_code, char* dst, Acc v) {
    if (r >= rows || c >= cols) return;
    nxk_i64 rp[3], cp[3];
    nxk_walk<3>(rw, r, rp);
    nxk_walk<3>(cw, c, cp);
    if (init_code >= 0) {
        Acc w;
        nxk_ct_ld(&w, init_code, init, bi + rp[2] + cp[2]);
        v = K == 0 ? w : v + w;
    }
    nxk_ct_st(same, dst_code, dst, bd + rp[1] + cp[1], v);
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
                        const Acc prod = x * bs[kk * NXK_CT_TN + tx + 16 * j];
                        acc[i][j] = acc[i][j] + prod;
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
                nxk_ct_finish(rw, cw, r0 + ty + 16 * i, c0 + tx + 16 * j, rows, cols, K, bp[2], bp[3],
                              init_code, init, same, dst_code, dst, acc[i][j]);
    }
}

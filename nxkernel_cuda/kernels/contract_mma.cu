// contract_mma.cu: the tensor-core contraction kernels (nxkernel_cuda/contract_mma.py).
//
// nxk_contract_mma<KIND>: dst[t, r, c] = init[t, r, c] + sum_k a[t, r, k] * b[t, k, c]
// with mma.sync (nxk_mma.cuh): KIND 0 bfloat16 and 1 float16 operands into a
// float32 accumulator (m16n8k8), 2 int8 into int32 and 3 uint8 into uint32
// (m16n8k32), wrapping.
//
// * Operands are found by the walks of contract.cu (batch over a, b, dst,
//   init; rows over a, dst, init; columns over b, dst, init; K over a, b), so
//   any layout is read in place; their codes are staged as they are.
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
#include "nxk_mma.cuh"

#define NXK_CM_TM 64
#define NXK_CM_TN 64
#define NXK_CM_KS 32
#define NXK_CM_THREADS 128
// Row strides of the staged tiles, in bytes: 32 elements and a pad, a
// multiple of 4 (fragments are read as 32-bit words).
#define NXK_CM_PAD 16

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

// The code of an element at position p (a 16-bit float's or an 8-bit integer's).
__device__ __forceinline__ void nxk_cm_ld(nxk_u16* out, const char* b, nxk_i64 p) { *out = nxk_ld_u16(b, p); }
__device__ __forceinline__ void nxk_cm_ld(nxk_u8* out, const char* b, nxk_i64 p) { *out = nxk_ld_u8(b, p); }

// Index i's position in the first array of the three-array walk w.
__device__ __noinline__ nxk_i64 nxk_cm_first(const nxk_i64* __restrict__ w, nxk_i64 i) {
    nxk_i64 p[3];
    nxk_walk<3>(w, i, p);
    return p[0];
}

// One step of K (32 elements) of a warp's 2 x 4 tiles: KIND 0 and 1 four
// m16n8k8 instructions in increasing k, each result added into acc; KIND 2
// and 3 one m16n8k32.
template <int KIND>
__device__ __forceinline__ void nxk_cm_step(typename NxkMmaKind<KIND>::Acc (*acc)[4][4], const unsigned char* as,
                                            const unsigned char* bs, int wm, int wn, int g, int t) {
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

// Block index b = (t, tile_m, tile_n) striding over `blocks`; init_code < 0:
// no init. Dynamic shared memory: two tiles of 64 rows of the row stride.
template <int KIND>
__global__ void __launch_bounds__(NXK_CM_THREADS)
nxk_contract_mma(const nxk_i64* __restrict__ bw, const nxk_i64* __restrict__ rw,
                 const nxk_i64* __restrict__ cw, const nxk_i64* __restrict__ kw,
                 nxk_i64 rows, nxk_i64 cols, nxk_i64 K, nxk_i64 tiles_m, nxk_i64 tiles_n,
                 int init_code, int dst_code, int same,
                 const char* a, const char* b, const char* init, char* dst, nxk_i64 blocks)
{
    typedef typename NxkMmaKind<KIND>::E E;
    typedef typename NxkMmaKind<KIND>::Acc Acc;
    typedef typename NxkMmaKind<KIND>::Out Out;
    const int stride = NXK_CM_KS * (int)sizeof(E) + NXK_CM_PAD;
    unsigned char* as = nxk_dynamic_shared;                  // [TM][stride bytes]
    unsigned char* bs = nxk_dynamic_shared + NXK_CM_TM * stride;  // [TN][stride bytes]
    const int tid = (int)threadIdx.x;
    const int lane = tid % 32, warp = tid / 32;
    const int g = lane / 4, t = lane % 4;
    const int wm = warp / 2, wn = warp % 2;
    const int kx = tid % 32;   // the k this thread stages
    const int ry = tid / 32;   // its staged rows and columns ry + 4m
    for (nxk_i64 blk = blockIdx.x; blk < blocks; blk += gridDim.x) {
        const nxk_i64 tb = blk / (tiles_m * tiles_n);
        const nxk_i64 rem = blk % (tiles_m * tiles_n);
        const nxk_i64 r0 = (rem / tiles_n) * NXK_CM_TM;
        const nxk_i64 c0 = (rem % tiles_n) * NXK_CM_TN;
        nxk_i64 bp[4];
        nxk_walk<4>(bw, tb, bp);
        // Positions of the rows of a and columns of b this thread stages (-1: past the extent).
        nxk_i64 ap[16], bq[16];
        for (int m = 0; m < 16; ++m) {
            const nxk_i64 r = r0 + ry + 4 * m, c = c0 + ry + 4 * m;
            ap[m] = r < rows ? bp[0] + nxk_cm_first(rw, r) : -1;
            bq[m] = c < cols ? bp[1] + nxk_cm_first(cw, c) : -1;
        }
        Acc acc[2][4][4];
#pragma unroll
        for (int mi = 0; mi < 2; ++mi)
#pragma unroll
            for (int ni = 0; ni < 4; ++ni)
#pragma unroll
                for (int q = 0; q < 4; ++q) acc[mi][ni][q] = (Acc)0;
        for (nxk_i64 k0 = 0; k0 < K; k0 += NXK_CM_KS) {
            const nxk_i64 k = k0 + kx;
            nxk_i64 kp[2] = {0, 0};
            if (k < K) nxk_walk<2>(kw, k, kp);
            for (int m = 0; m < 16; ++m) {
                E va = 0, vb = 0;
                if (k < K && ap[m] >= 0) nxk_cm_ld(&va, a, ap[m] + kp[0]);
                if (k < K && bq[m] >= 0) nxk_cm_ld(&vb, b, bq[m] + kp[1]);
                *(E*)(as + (ry + 4 * m) * stride + kx * (int)sizeof(E)) = va;
                *(E*)(bs + (ry + 4 * m) * stride + kx * (int)sizeof(E)) = vb;
            }
            __syncthreads();
            nxk_cm_step<KIND>(acc, as, bs, wm, wn, g, t);
            __syncthreads();
        }
#pragma unroll
        for (int mi = 0; mi < 2; ++mi)
#pragma unroll
            for (int ni = 0; ni < 4; ++ni)
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                    const nxk_i64 r = r0 + wm * 32 + mi * 16 + g + 8 * (q / 2);
                    const nxk_i64 c = c0 + wn * 32 + ni * 8 + 2 * t + (q % 2);
                    nxk_ct_finish(rw, cw, r, c, rows, cols, K == 0, bp[2], bp[3], init_code, init, same,
                                  dst_code, dst, (Out)acc[mi][ni][q]);
                }
    }
}

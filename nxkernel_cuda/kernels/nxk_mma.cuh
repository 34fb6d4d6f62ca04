// nxk_mma.cuh: what the contraction kernels share (contract.cu, contract_mma.cu):
// elements loaded into an accumulator, the fused multiply-add of each
// accumulator, the epilogue's store, and the tensor-core instructions
// (mma.sync) with the plain C++ path the emulator runs in their place.
#ifndef NXK_MMA_CUH
#define NXK_MMA_CUH

#include "nxk_scalar.cuh"
#include "nxk_loop.cuh"

// ---------------------------------------------------------------------------
// Loads: an element of dtype code `c` at position p, as the accumulator holds
// it. Only codes the host admits for that accumulator reach these, each
// converting exactly.
// ---------------------------------------------------------------------------

__device__ __noinline__ void nxk_ct_ld(float* out, int c, const char* b, nxk_i64 p) {
    switch (c) {
        case 1: *out = nxk_ld_f32(b, p); break;
        case 2: *out = nxk_val_f16(nxk_ld_f16(b, p)); break;
        case 3: *out = nxk_val_bf16(nxk_ld_bf16(b, p)); break;
        case 4: *out = nxk_val_e4m3(nxk_ld_e4m3(b, p)); break;
        case 5: *out = nxk_val_e5m2(nxk_ld_e5m2(b, p)); break;
        case 6: *out = nxk_val_e2m1(nxk_ld_e2m1(b, p)); break;
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
        case 6: *out = (double)nxk_val_e2m1(nxk_ld_e2m1(b, p)); break;
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

// A complex accumulator's parts of an element: complex128 (17) and complex64
// (18) by their parts, a real dtype with an imaginary +0.
template <class P>
__device__ __noinline__ void nxk_ct_ldc(P* re, P* im, int c, const char* b, nxk_i64 p) {
    if (c == 17) {
        *re = (P)nxk_ld_f64(b, 2 * p);
        *im = (P)nxk_ld_f64(b, 2 * p + 1);
    } else if (c == 18) {
        *re = (P)nxk_ld_f32(b, 2 * p);
        *im = (P)nxk_ld_f32(b, 2 * p + 1);
    } else {
        nxk_ct_ld(re, c, b, p);
        *im = (P)0;
    }
}

// A scale map (contract_simt.py's and contract_mma.py's): [n, base, then n x
// (div, ext, block, stride)]: index i of a canonical part (its C order) is at
// scale position
// base + sum ((i / div) % ext) / block * stride: each axis's index, divided by
// its block, times the scale's stride (the scale's offset is one map's base).
__device__ __noinline__ nxk_i64 nxk_scale_at(const nxk_i64* __restrict__ m, nxk_i64 i) {
    nxk_i64 p = m[1];
    const nxk_i64 n = m[0];
    for (nxk_i64 j = 0; j < n; ++j) {
        const nxk_i64* e = m + 2 + 4 * j;
        p += nxk_div(nxk_coord(i, e[0], e[1]), e[2]) * e[3];
    }
    return p;
}

// ---------------------------------------------------------------------------
// The fused multiply-add of each accumulator: x*y + s rounded once (integers
// wrap modulo 2^64).
// ---------------------------------------------------------------------------

__device__ __forceinline__ float nxk_ct_fma(float x, float y, float s) { return fmaf(x, y, s); }
__device__ __forceinline__ double nxk_ct_fma(double x, double y, double s) { return fma(x, y, s); }
__device__ __forceinline__ nxk_u64 nxk_ct_fma(nxk_u64 x, nxk_u64 y, nxk_u64 s) { return x * y + s; }

// ---------------------------------------------------------------------------
// Stores into dst: the accumulator's own dtype by its bits, else rounded once
// (a float into a narrower float; an integer's low bits).
// ---------------------------------------------------------------------------

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

// The epilogue of output (r, c) of a [rows, cols] tile walk, where it is
// one: init (at bi + the walks' third array) added last, except where the
// output has no products (`empty`), which is init as the accumulator holds
// it, untouched (or +0, v's value then); then the store into dst (at bd +
// the walks' second array).
template <class Acc>
__device__ __noinline__ void nxk_ct_finish(const nxk_i64* __restrict__ rw, const nxk_i64* __restrict__ cw,
                                           nxk_i64 r, nxk_i64 c, nxk_i64 rows, nxk_i64 cols, bool empty,
                                           nxk_i64 bd, nxk_i64 bi, int init_code, const char* init,
                                           int same, int dst_code, char* dst, Acc v) {
    if (r >= rows || c >= cols) return;
    nxk_i64 rp[3], cp[3];
    nxk_walk<3>(rw, r, rp);
    nxk_walk<3>(cw, c, cp);
    if (init_code >= 0) {
        Acc w;
        nxk_ct_ld(&w, init_code, init, bi + rp[2] + cp[2]);
        v = empty ? w : v + w;
    }
    nxk_ct_st(same, dst_code, dst, bd + rp[1] + cp[1], v);
}

// ---------------------------------------------------------------------------
// Tensor cores. Fragments of one warp (PTX ISA, "Matrix fragments for
// mma.m16n8k8" and "mma.m16n8k32"), g = lane / 4, t = lane % 4:
//
//   m16n8k8 .bf16/.f16:  a[0] = A[g][2t, 2t+1], a[1] = A[g+8][2t, 2t+1];
//                        b = B[2t, 2t+1][g]; d[0..1] = D[g][2t, 2t+1],
//                        d[2..3] = D[g+8][2t, 2t+1] (low half the lower index).
//   m16n8k32 .s8/.u8:    a[0] = A[g][4t..4t+3], a[1] = A[g+8][4t..4t+3],
//                        a[2] = A[g][16+4t..], a[3] = A[g+8][16+4t..];
//                        b[0] = B[4t..4t+3][g], b[1] = B[16+4t..][g]; d as above.
//
// Each instruction here starts from C = 0; the kernels add its D into their
// own accumulators.
// ---------------------------------------------------------------------------

#ifdef NXKERNEL_EMULATE

// What a tensor core computes of eight exact products and C = +0, as Fasi,
// Higham, Mikaitis and Pranesh (2021) measured it on sm_80: the products are
// exact, aligned to the largest one's exponent, each truncated toward zero to
// that exponent's float32 ulp (no extra bits), summed exactly, and the sum
// truncated toward zero to float32. Infinities and NaNs give IEEE's sum.
__device__ __noinline__ float nxk_mma_fused8(const double* p) {
    double amax = 0.0;
    bool finite = true;
    for (int i = 0; i < 8; ++i) {
        finite = finite && (p[i] - p[i] == 0.0);
        amax = fabs(p[i]) > amax ? fabs(p[i]) : amax;
    }
    if (!finite) {
        double s = 0.0;
        for (int i = 0; i < 8; ++i) s += p[i];
        return (float)s;
    }
    if (amax == 0.0) return 0.0f;
    int e;
    frexp(amax, &e);                       // amax in [2^(e-1), 2^e)
    const double ulp = ldexp(1.0, e - 24);  // float32 ulp of amax
    double s = 0.0;
    for (int i = 0; i < 8; ++i) s += trunc(p[i] / ulp) * ulp;   // exact: < 2^28 ulps
    const float f = (float)s;
    return fabs((double)f) > fabs(s) ? nextafterf(f, 0.0f) : f;
}

// D = A*B + 0 of m16n8k8 with 16-bit operands: each thread gathers its rows
// of A and columns of B from the warp's fragments and computes its outputs.
template <bool BF16>
__device__ __forceinline__ void nxk_mma_k8(float* d, const nxk_u32* a, nxk_u32 b) {
    const int lane = (int)(threadIdx.x % 32);
    const int g = lane / 4, t = lane % 4;
    float av[2][8], bv[2][8];
    for (int s = 0; s < 4; ++s) {
        const nxk_u32 a0 = __shfl_sync(NXK_FULL_MASK, a[0], g * 4 + s);
        const nxk_u32 a1 = __shfl_sync(NXK_FULL_MASK, a[1], g * 4 + s);
        const nxk_u32 b0 = __shfl_sync(NXK_FULL_MASK, b, (2 * t) * 4 + s);
        const nxk_u32 b1 = __shfl_sync(NXK_FULL_MASK, b, (2 * t + 1) * 4 + s);
        const nxk_u32 w[4] = {a0, a1, b0, b1};
        for (int h = 0; h < 2; ++h) {
            float v[4];
            for (int q = 0; q < 4; ++q) {
                const nxk_u16 code = (nxk_u16)(w[q] >> (16 * h));
                v[q] = BF16 ? nxk_val_bf16(code) : nxk_val_f16(code);
            }
            av[0][2 * s + h] = v[0];
            av[1][2 * s + h] = v[1];
            bv[0][2 * s + h] = v[2];
            bv[1][2 * s + h] = v[3];
        }
    }
    for (int o = 0; o < 4; ++o) {
        double p[8];
        for (int k = 0; k < 8; ++k) p[k] = (double)av[o / 2][k] * (double)bv[o % 2][k];
        d[o] = nxk_mma_fused8(p);
    }
}

// D = A*B + 0 of m16n8k32 with 8-bit integers: exact.
template <bool SIGNED>
__device__ __forceinline__ void nxk_mma_k32(nxk_u32* d, const nxk_u32* a, const nxk_u32* b) {
    const int lane = (int)(threadIdx.x % 32);
    const int g = lane / 4, t = lane % 4;
    nxk_i32 av[2][32], bv[2][32];
    for (int s = 0; s < 4; ++s) {
        for (int half = 0; half < 2; ++half) {
            const nxk_u32 ar0 = __shfl_sync(NXK_FULL_MASK, a[2 * half], g * 4 + s);
            const nxk_u32 ar1 = __shfl_sync(NXK_FULL_MASK, a[2 * half + 1], g * 4 + s);
            const nxk_u32 bc0 = __shfl_sync(NXK_FULL_MASK, b[half], (2 * t) * 4 + s);
            const nxk_u32 bc1 = __shfl_sync(NXK_FULL_MASK, b[half], (2 * t + 1) * 4 + s);
            for (int q = 0; q < 4; ++q) {
                const int k = 16 * half + 4 * s + q;
                const nxk_u32 sh = 8u * (nxk_u32)q;
                av[0][k] = SIGNED ? (nxk_i32)(nxk_i8)(ar0 >> sh) : (nxk_i32)(nxk_u8)(ar0 >> sh);
                av[1][k] = SIGNED ? (nxk_i32)(nxk_i8)(ar1 >> sh) : (nxk_i32)(nxk_u8)(ar1 >> sh);
                bv[0][k] = SIGNED ? (nxk_i32)(nxk_i8)(bc0 >> sh) : (nxk_i32)(nxk_u8)(bc0 >> sh);
                bv[1][k] = SIGNED ? (nxk_i32)(nxk_i8)(bc1 >> sh) : (nxk_i32)(nxk_u8)(bc1 >> sh);
            }
        }
    }
    for (int o = 0; o < 4; ++o) {
        nxk_i32 s = 0;
        for (int k = 0; k < 32; ++k) s += av[o / 2][k] * bv[o % 2][k];
        d[o] = (nxk_u32)s;
    }
}

#else

template <bool BF16>
__device__ __forceinline__ void nxk_mma_k8(float* d, const nxk_u32* a, nxk_u32 b) {
    if (BF16) {
        asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 "
                     "{%0, %1, %2, %3}, {%4, %5}, {%6}, {%7, %7, %7, %7};\n"
                     : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(b), "f"(0.0f));
    } else {
        asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 "
                     "{%0, %1, %2, %3}, {%4, %5}, {%6}, {%7, %7, %7, %7};\n"
                     : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(b), "f"(0.0f));
    }
}

template <bool SIGNED>
__device__ __forceinline__ void nxk_mma_k32(nxk_u32* d, const nxk_u32* a, const nxk_u32* b) {
    if (SIGNED) {
        asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 "
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %10, %10, %10};\n"
                     : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(0));
    } else {
        asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.u8.u8.s32 "
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %10, %10, %10};\n"
                     : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(0));
    }
}

#endif  // NXKERNEL_EMULATE

#endif  // NXK_MMA_CUH

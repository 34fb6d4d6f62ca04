// fold.cu: S.fold, the adjoint of a Padded load (nxkernel_cuda/folds.py).
//
// One thread owns one element of dst and adds, from +0, the elements of x the
// load reads from it, tap by tap in C order of the taps (the window axes), in
// the carrier (float for float32 and the narrow floats, double for float64,
// 64-bit wrapping integers, a complex number part by part): no atomics and
// no split, so the bits are the same on every launch and on cuda-emu.
//
// The descriptor (int64 words, folds.py writes it):
//
//   [r, W, dst offset, x offset,
//    per dst axis a (7 words): extent, lo, interior + 1, dst stride,
//      x stride along loop axis a, x extent along loop axis a,
//      the index of the window on a (-1 for none),
//    per window k (5 words): step, dilation, size, x stride along tap axis r + k, its axis]
//
// Along axis a, dst index e sits at padded position P = lo + e·(interior + 1).
// An unwindowed axis reads it at loop index P where 0 <= P < x extent; a
// window of step s and dilation t reads it at tap j from window w where
// P = w·s + j·t, 0 <= w < x extent (its window count).
#include "nxk_scalar.cuh"
#include "nxk_loop.cuh"

#define NXK_FOLD_AXIS 7
#define NXK_FOLD_WINDOW 5
#define NXK_FOLD_MAX_RANK 32

// A real element type: Acc its carrier, term() x's element at p in it,
// store() the carrier rounded (or wrapped) once into dst's element at p.
#define NXK_FOLD_FLOAT(NAME, ACC, LOAD, STORE)                                               \
    struct NAME {                                                                            \
        typedef ACC Acc;                                                                     \
        static __device__ __forceinline__ Acc zero() { return (Acc)0; }                      \
        static __device__ __forceinline__ Acc add(Acc a, Acc b) { return a + b; }            \
        static __device__ __forceinline__ Acc term(const char* x, nxk_i64 p) { return LOAD; } \
        static __device__ __forceinline__ void store(char* d, nxk_i64 p, Acc v) { STORE; }   \
    };

NXK_FOLD_FLOAT(NxkFoldF64, double, nxk_ld_f64(x, p), nxk_st_f64(d, p, v))
NXK_FOLD_FLOAT(NxkFoldF32, float, nxk_ld_f32(x, p), nxk_st_f32(d, p, v))
NXK_FOLD_FLOAT(NxkFoldF16, float, nxk_val_f16(nxk_ld_f16(x, p)), nxk_st_f16(d, p, nxk_f16_of_f32(v)))
NXK_FOLD_FLOAT(NxkFoldBF16, float, nxk_val_bf16(nxk_ld_bf16(x, p)), nxk_st_bf16(d, p, nxk_bf16_of_f32(v)))
NXK_FOLD_FLOAT(NxkFoldE4M3, float, nxk_val_e4m3(nxk_ld_e4m3(x, p)), nxk_st_e4m3(d, p, nxk_e4m3_of_f32(v)))
NXK_FOLD_FLOAT(NxkFoldE5M2, float, nxk_val_e5m2(nxk_ld_e5m2(x, p)), nxk_st_e5m2(d, p, nxk_e5m2_of_f32(v)))
NXK_FOLD_FLOAT(NxkFoldE2M1, float, nxk_val_e2m1(nxk_ld_e2m1(x, p)), nxk_st_e2m1(d, p, nxk_e2m1_of_f32(v)))
#undef NXK_FOLD_FLOAT

// Integers add in 64 bits, wrapping, and keep their low bits on the store.
#define NXK_FOLD_INT(NAME, SUFFIX, WIDE)                                                     \
    struct NAME {                                                                            \
        typedef nxk_u64 Acc;                                                                 \
        static __device__ __forceinline__ Acc zero() { return 0ull; }                        \
        static __device__ __forceinline__ Acc add(Acc a, Acc b) { return a + b; }            \
        static __device__ __forceinline__ Acc term(const char* x, nxk_i64 p) {               \
            return (nxk_u64)(WIDE)nxk_ld_##SUFFIX(x, p);                                     \
        }                                                                                    \
        static __device__ __forceinline__ void store(char* d, nxk_i64 p, Acc v) {            \
            nxk_st_##SUFFIX(d, p, nxk_of_code_##SUFFIX(v));                                  \
        }                                                                                    \
    };

NXK_FOLD_INT(NxkFoldI64, i64, nxk_i64)
NXK_FOLD_INT(NxkFoldU64, u64, nxk_u64)
NXK_FOLD_INT(NxkFoldI32, i32, nxk_i64)
NXK_FOLD_INT(NxkFoldU32, u32, nxk_u64)
NXK_FOLD_INT(NxkFoldI16, i16, nxk_i64)
NXK_FOLD_INT(NxkFoldU16, u16, nxk_u64)
NXK_FOLD_INT(NxkFoldI8, i8, nxk_i64)
NXK_FOLD_INT(NxkFoldU8, u8, nxk_u64)
NXK_FOLD_INT(NxkFoldI4, i4, nxk_i64)
NXK_FOLD_INT(NxkFoldU4, u4, nxk_u64)
#undef NXK_FOLD_INT

// A complex element: two parts of P, the real part first; each part a float
// sum of its own.
template <class P>
struct NxkFoldPair {
    P re;
    P im;
};
template <class P>
struct NxkFoldCpx {
    typedef NxkFoldPair<P> Acc;
    static __device__ __forceinline__ Acc zero() {
        Acc a;
        a.re = (P)0;
        a.im = (P)0;
        return a;
    }
    static __device__ __forceinline__ Acc add(Acc a, Acc b) {
        a.re = a.re + b.re;
        a.im = a.im + b.im;
        return a;
    }
    static __device__ __forceinline__ Acc term(const char* x, nxk_i64 p) {
        Acc a;
        a.re = nxk_ld<P>(x, 2 * p);
        a.im = nxk_ld<P>(x, 2 * p + 1);
        return a;
    }
    static __device__ __forceinline__ void store(char* d, nxk_i64 p, Acc v) {
        nxk_st<P>(d, 2 * p, v.re);
        nxk_st<P>(d, 2 * p + 1, v.im);
    }
};
typedef NxkFoldCpx<float> NxkFoldC64;
typedef NxkFoldCpx<double> NxkFoldC128;

template <class E>
__global__ void __launch_bounds__(256)
nxk_fold(const nxk_i64* __restrict__ desc, nxk_i64 n, char* dst, const char* x)
{
    const int r = (int)desc[0];
    const int nw = (int)desc[1];
    const nxk_i64* axes = desc + 4;
    const nxk_i64* wins = axes + NXK_FOLD_AXIS * r;
    const nxk_i64 step = (nxk_i64)gridDim.x * blockDim.x;
    for (nxk_i64 i = (nxk_i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        // dst's index, its position, x's position along the unwindowed axes,
        // and the padded position along each windowed one.
        nxk_i64 rem = i;
        nxk_i64 dpos = desc[2];
        nxk_i64 xbase = desc[3];
        nxk_i64 at[NXK_FOLD_MAX_RANK];
        bool read = true;
        for (int a = r - 1; a >= 0; --a) {
            const nxk_i64* ax = axes + NXK_FOLD_AXIS * a;
            nxk_i64 e = rem;
            if (a > 0) {
                const nxk_i64 q = nxk_div(rem, ax[0]);
                e = rem - q * ax[0];
                rem = q;
            }
            dpos += e * ax[3];
            const nxk_i64 padded = ax[1] + e * ax[2];
            if (ax[6] >= 0) {
                at[ax[6]] = padded;
            } else if (padded < 0 || padded >= ax[5]) {
                read = false;
            } else {
                xbase += padded * ax[4];
            }
        }
        typename E::Acc acc = E::zero();
        if (read) {
            nxk_i64 tap[NXK_FOLD_MAX_RANK];
            for (int k = 0; k < nw; ++k) tap[k] = 0;
            for (;;) {
                nxk_i64 pos = xbase;
                bool hit = true;
                for (int k = 0; k < nw && hit; ++k) {
                    const nxk_i64* w = wins + NXK_FOLD_WINDOW * k;
                    const nxk_i64* ax = axes + NXK_FOLD_AXIS * w[4];
                    const nxk_i64 q = at[k] - tap[k] * w[1];
                    const nxk_i64 win = q >= 0 ? nxk_div(q, w[0]) : -1;
                    if (q < 0 || win * w[0] != q || win >= ax[5]) {
                        hit = false;
                    } else {
                        pos += win * ax[4] + tap[k] * w[3];
                    }
                }
                if (hit) acc = E::add(acc, E::term(x, pos));
                // The next tap, C order.
                int k = nw - 1;
                while (k >= 0 && ++tap[k] == wins[NXK_FOLD_WINDOW * k + 2]) tap[k--] = 0;
                if (k < 0) break;
            }
        }
        E::store(dst, dpos, acc);
    }
}

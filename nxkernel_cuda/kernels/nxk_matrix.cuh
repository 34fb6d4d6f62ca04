// nxk_matrix.cuh: what the batched matrix routines share (matrices.cu,
// jacobi.cu; nxkernel_cuda/matrices.py launches them).
//
// One block of NXK_MX_THREADS threads a matrix (blocks stride over the
// batch), the matrix and its work arrays in dynamic shared memory; float,
// double, complex64 and complex128 (NxkMxC<float>, NxkMxC<double>), the
// arithmetic in the matrix's own dtype (a complex one's in its parts' dtype).
//
// * Every routine is written once, over the element type T; the scalar
//   helpers below (conj, abs2, scale, ...) are the identity or the real
//   operation for float and double, so the real kernels compute exactly the
//   operations they would written for reals alone.
// * Arrays are found by a descriptor the host builds (matrices.py): a walk
//   over the batch (nxk_loop.cuh) carrying each array's offset, then per array
//   its row and column strides (a vector result, such as s, has row stride 0).
//   Any layout is read in place.
// * Determinism: every sum is a chain in increasing index order computed by
//   one thread, every pivot and every ordering is chosen by a fixed rule, and
//   the Jacobi sweeps run in a fixed round-robin order; only + - * / and sqrt
//   (correctly rounded) are used, and NVRTC compiles with --fmad=false, so the
//   bits are the same on every launch and on cuda and cuda-emu alike.
// * A matrix that fails (cholesky: a pivot not > 0; solve_triangular: a zero
//   on the read diagonal; a read element that is not
//   finite for cholesky, qr, svd and eigh; a Jacobi iteration that has not
//   converged in NXK_MX_SWEEPS sweeps; a result that is not finite) gives the
//   quiet NaN in every element (both parts) of its own results.
// * Compile time: loops carry NXK_MX_SERIAL (no unrolling). The chains are
//   serial anyway, and unrolled copies of the 24 kernels' loops nearly
//   doubled NVRTC's time (the bits are the same either way: unrolling never
//   reorders an operation).
#ifndef NXK_MATRIX_CUH
#define NXK_MATRIX_CUH

#include "nxk_loop.cuh"

#define NXK_MX_THREADS 64
#define NXK_MX_SWEEPS 60
#define NXK_MX_SERIAL _Pragma("unroll 1")

template <class T> struct nxk_mx;

template <> struct nxk_mx<float> {
    static __device__ __forceinline__ float root(float x) { return sqrtf(x); }
    static __device__ __forceinline__ float mag(float x) { return fabsf(x); }
    static __device__ __forceinline__ float nan() { return __int_as_float(0x7fc00000); }
    // The unit roundoff, and where 1 + z^2 rounds to z^2 with room to spare.
    static __device__ __forceinline__ float unit() { return 5.9604644775390625e-08f; }
    static __device__ __forceinline__ float big() { return 1073741824.0f; }
};

template <> struct nxk_mx<double> {
    static __device__ __forceinline__ double root(double x) { return sqrt(x); }
    static __device__ __forceinline__ double mag(double x) { return fabs(x); }
    static __device__ __forceinline__ double nan() { return __longlong_as_double(0x7ff8000000000000LL); }
    static __device__ __forceinline__ double unit() { return 1.1102230246251565e-16; }
    static __device__ __forceinline__ double big() { return 1152921504606846976.0; }
};

// ---------------------------------------------------------------------------
// The element types and their scalar helpers
// ---------------------------------------------------------------------------

// A complex element: the real part then the imaginary part, each of P, the
// bytes of complex64 (P = float) and complex128 (P = double) as memory holds
// them. Its arithmetic is the host library's (Numba's, CPython's formulas):
// + and - part by part; * the textbook (ac - bd) + i(ad + bc), each product
// and sum rounded, never fused; nxk_mx_div CPython's (Smith's) quotient. No
// NaN is canonicalised (unlike nxk_complex.cuh's Mul): lu's bits are Numba's.
template <class P>
struct NxkMxC {
    P re;
    P im;
};
typedef NxkMxC<float> nxk_mx_c64;
typedef NxkMxC<double> nxk_mx_c128;

template <class P>
__device__ __forceinline__ NxkMxC<P> nxk_mx_cpx(P re, P im) {
    NxkMxC<P> z;
    z.re = re;
    z.im = im;
    return z;
}
template <class P>
__device__ __forceinline__ NxkMxC<P> operator+(NxkMxC<P> x, NxkMxC<P> y) { return nxk_mx_cpx(x.re + y.re, x.im + y.im); }
template <class P>
__device__ __forceinline__ NxkMxC<P> operator-(NxkMxC<P> x, NxkMxC<P> y) { return nxk_mx_cpx(x.re - y.re, x.im - y.im); }
template <class P>
__device__ __forceinline__ NxkMxC<P> operator*(NxkMxC<P> x, NxkMxC<P> y) {
    const P ac = x.re * y.re, bd = x.im * y.im, ad = x.re * y.im, bc = x.im * y.re;
    return nxk_mx_cpx(ac - bd, ad + bc);
}

// The element traits: R the real (part) type, of(r) the element r + 0i,
// make(re, im) re + i im (re for a real T), nan() the quiet NaN (in both
// parts).
template <class T>
struct nxk_mx_s {
    typedef T R;
    static __device__ __forceinline__ T of(R r) { return r; }
    static __device__ __forceinline__ T make(R re, R) { return re; }
    static __device__ __forceinline__ T nan() { return nxk_mx<T>::nan(); }
};
template <class P>
struct nxk_mx_s<NxkMxC<P> > {
    typedef P R;
    static __device__ __forceinline__ NxkMxC<P> of(P r) { return nxk_mx_cpx(r, (P)0); }
    static __device__ __forceinline__ NxkMxC<P> make(P re, P im) { return nxk_mx_cpx(re, im); }
    static __device__ __forceinline__ NxkMxC<P> nan() { return nxk_mx_cpx(nxk_mx<P>::nan(), nxk_mx<P>::nan()); }
};

// The conjugate; the real part; the imaginary part (0 for a real).
template <class T> __device__ __forceinline__ T nxk_mx_conj(T x) { return x; }
template <class P> __device__ __forceinline__ NxkMxC<P> nxk_mx_conj(NxkMxC<P> x) { return nxk_mx_cpx(x.re, -x.im); }
template <class T> __device__ __forceinline__ T nxk_mx_re(T x) { return x; }
template <class P> __device__ __forceinline__ P nxk_mx_re(NxkMxC<P> x) { return x.re; }
template <class T> __device__ __forceinline__ T nxk_mx_im(T) { return (T)0; }
template <class P> __device__ __forceinline__ P nxk_mx_im(NxkMxC<P> x) { return x.im; }
// |x|^2: x*x, or re*re + im*im.
template <class T> __device__ __forceinline__ T nxk_mx_abs2(T x) { return x * x; }
template <class P> __device__ __forceinline__ P nxk_mx_abs2(NxkMxC<P> x) { return x.re * x.re + x.im * x.im; }
// |x|: the modulus; a complex one's as hi sqrt(1 + (lo / hi)^2), hi and lo
// its parts' greater and lesser magnitude, so that no square overflows (a
// Jacobi rotation of parts near the dtype's largest squares stays unitary);
// NaN where a part is NaN.
template <class T> __device__ __forceinline__ T nxk_mx_abs(T x) { return nxk_mx<T>::mag(x); }
template <class P> __device__ __forceinline__ P nxk_mx_abs(NxkMxC<P> x) {
    const P a = nxk_mx<P>::mag(x.re), b = nxk_mx<P>::mag(x.im);
    const P hi = a < b ? b : a, lo = a < b ? a : b;
    if (!(hi > (P)0)) return hi + lo;  // 0, or a NaN
    const P r = lo / hi;
    return hi * nxk_mx<P>::root((P)1 + r * r);
}
// lu's pivot magnitude: |x|, or |re| + |im| (the host library's).
template <class T> __device__ __forceinline__ T nxk_mx_pmag(T x) { return nxk_mx<T>::mag(x); }
template <class P> __device__ __forceinline__ P nxk_mx_pmag(NxkMxC<P> x) {
    return nxk_mx<P>::mag(x.re) + nxk_mx<P>::mag(x.im);
}
// r x and x / r for a real r: part by part, each part rounded once.
template <class T> __device__ __forceinline__ T nxk_mx_scale(T r, T x) { return r * x; }
template <class P> __device__ __forceinline__ NxkMxC<P> nxk_mx_scale(P r, NxkMxC<P> x) { return nxk_mx_cpx(r * x.re, r * x.im); }

// The plane rotation of a pair in place: (x, y) <- (c x - conj(s) y, s x + c y),
// each product rounded, then the difference and the sum.
template <class T, class R>
__device__ __forceinline__ void nxk_mx_rotate(R c, T s, T* x, T* y) {
    const T a = *x, b = *y;
    *x = nxk_mx_scale(c, a) - nxk_mx_conj(s) * b;
    *y = s * a + nxk_mx_scale(c, b);
}
template <class T> __device__ __forceinline__ T nxk_mx_rdiv(T x, T r) { return x / r; }
template <class P> __device__ __forceinline__ NxkMxC<P> nxk_mx_rdiv(NxkMxC<P> x, P r) { return nxk_mx_cpx(x.re / r, x.im / r); }
// x is not zero (a NaN part counts as not zero).
template <class T> __device__ __forceinline__ bool nxk_mx_nz(T x) { return x != (T)0; }
template <class P> __device__ __forceinline__ bool nxk_mx_nz(NxkMxC<P> x) { return x.re != (P)0 || x.im != (P)0; }
// x is neither an infinity nor a NaN (in either part).
template <class T>
__device__ __forceinline__ bool nxk_mx_finite(T x) { return x - x == (T)0; }
template <class P>
__device__ __forceinline__ bool nxk_mx_finite(NxkMxC<P> x) { return x.re - x.re == (P)0 && x.im - x.im == (P)0; }

// x / y: a real quotient, or CPython's complex one (Numba's, Smith's
// algorithm) in P: by y's part of greater magnitude, ratio = the other over
// it, denom = that part + the other times ratio, each part of the quotient a
// numerator over denom; a NaN part of y gives (NaN, NaN). A zero y (which lu
// never divides by) gives each part over +0, as NumPy's division does.
template <class T> __device__ __forceinline__ T nxk_mx_div(T x, T y) { return x / y; }
template <class P>
__device__ NxkMxC<P> nxk_mx_div(NxkMxC<P> a, NxkMxC<P> b) {
    const P abr = nxk_mx<P>::mag(b.re), abi = nxk_mx<P>::mag(b.im);
    if (abr >= abi) {
        if (abr == (P)0) return nxk_mx_cpx(a.re / abr, a.im / abr);
        const P ratio = b.im / b.re;
        const P denom = b.re + b.im * ratio;
        return nxk_mx_cpx((a.re + a.im * ratio) / denom, (a.im - a.re * ratio) / denom);
    }
    if (abi >= abr) {
        const P ratio = b.re / b.im;
        const P denom = b.re * ratio + b.im;
        return nxk_mx_cpx((a.re * ratio + a.im) / denom, (a.im * ratio - a.re) / denom);
    }
    return nxk_mx_s<NxkMxC<P> >::nan();
}

// The positions of batch index t in the descriptor's N arrays; returns the
// arrays' (row stride, column stride) pairs.
template <int N>
__device__ __forceinline__ const nxk_i64* nxk_mx_at(const nxk_i64* __restrict__ d, nxk_i64 t,
                                                     nxk_i64* pos) {
    nxk_walk<N>(d, t, pos);
    return d + nxk_walk_words((int)d[0], N);
}

// Pair p of round r of the round-robin (circle) order on np indices, np even:
// index np - 1 stays, the others turn; every pair meets once in np - 1 rounds.
__device__ __forceinline__ void nxk_mx_pair(int np, int r, int p, int* lo, int* hi) {
    int x, y;
    if (p == 0) {
        x = np - 1;
        y = r;
    } else {
        x = (r + p) % (np - 1);
        y = (r - p + np - 1) % (np - 1);
    }
    *lo = x < y ? x : y;
    *hi = x < y ? y : x;
}

// The Jacobi rotation (c, s) that diagonalises [[app, apq], [apq, aqq]] (Golub
// and Van Loan, sym.schur2): zeta = (aqq - app) / 2apq, t = sign(zeta) /
// (|zeta| + sqrt(1 + zeta^2)) (1 / 2|zeta| where zeta^2 swamps 1), c = 1 /
// sqrt(1 + t^2), s = c t; columns p and q become c x_p - s x_q and s x_p + c x_q.
template <class T>
__device__ __forceinline__ void nxk_mx_rotation(T app, T aqq, T apq, T* c, T* s) {
    const T zeta = (aqq - app) / (apq + apq);
    const T az = nxk_mx<T>::mag(zeta);
    T t = az > nxk_mx<T>::big() ? (T)0.5 / az : (T)1 / (az + nxk_mx<T>::root((T)1 + zeta * zeta));
    if (zeta < (T)0) t = -t;
    const T cc = (T)1 / nxk_mx<T>::root((T)1 + t * t);
    *c = cc;
    *s = cc * t;
}

// The rotation of the Hermitian [[app, g], [conj g, aqq]] (app, aqq real):
// for a real g, nxk_mx_rotation's; for a complex one, the real rotation (c,
// s') of [[app, |g|], [|g|, aqq]] and s = s' g / |g| (each part s' (g_part /
// |g|)). The unitary [[c, s], [-conj s, c]] diagonalises it: columns p and q
// of a matrix times it become c x_p - conj(s) x_q and s x_p + c x_q, rows p
// and q of its conjugate transpose times one c x_p - s x_q and conj(s) x_p +
// c x_q (for a real s: the real rotation's columns and rows).
template <class T>
__device__ __forceinline__ void nxk_mx_jacobi(T app, T aqq, T g, T* c, T* s) { nxk_mx_rotation(app, aqq, g, c, s); }
template <class P>
__device__ __forceinline__ void nxk_mx_jacobi(P app, P aqq, NxkMxC<P> g, P* c, NxkMxC<P>* s) {
    const P ag = nxk_mx_abs(g);
    P sr;
    nxk_mx_rotation(app, aqq, ag, c, &sr);
    *s = nxk_mx_cpx(sr * (g.re / ag), sr * (g.im / ag));
}

#endif  // NXK_MATRIX_CUH

// matrices.cu: the batched matrix routines (nxkernel_cuda/matrices.py).
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

// ---------------------------------------------------------------------------
// cholesky: arrays a, f. Shared: L [n][n] (lower triangle used).
// ---------------------------------------------------------------------------

// Right-looking: column j is l_jj = sqrt(re a_jj), l_ij = a_ij / l_jj (each
// part over the real l_jj), then each a_ic (i >= c > j) less l_ij conj(l_cj),
// so element (i, c) is a chain over j in increasing order; a diagonal
// element's imaginary part is never read (LAPACK's ?potrf reads none either),
// the factor's is 0. upper reads a's upper triangle as the conjugate
// transposed lower one and stores the factor conjugate transposed.
template <class T>
__global__ void __launch_bounds__(NXK_MX_THREADS)
nxk_mx_cholesky(const nxk_i64* __restrict__ d, nxk_i64 nb, int n, int upper, const T* a, T* f) {
    typedef typename nxk_mx_s<T>::R R;
    T* L = reinterpret_cast<T*>(nxk_dynamic_shared);
    const int tid = (int)threadIdx.x, bd = (int)blockDim.x;
    for (nxk_i64 t = blockIdx.x; t < nb; t += gridDim.x) {
        nxk_i64 pos[2];
        const nxk_i64* rc = nxk_mx_at<2>(d, t, pos);
        int bad = 0;
        NXK_MX_SERIAL
        for (int e = tid; e < n * n; e += bd) {
            const int i = e / n, j = e % n;
            if (j <= i) {
                const T v = upper ? nxk_mx_conj(a[pos[0] + j * rc[0] + i * rc[1]])
                                  : a[pos[0] + i * rc[0] + j * rc[1]];
                L[e] = v;
                if (!nxk_mx_finite(v)) bad = 1;
            }
        }
        int fail = __syncthreads_or(bad);
        NXK_MX_SERIAL
        for (int j = 0; j < n && !fail; ++j) {
            const R piv = nxk_mx_re(L[j * n + j]);
            __syncthreads();
            if (!(piv > (R)0)) {
                fail = 1;  // the same for every thread: it read the same element
                break;
            }
            const R l = nxk_mx<R>::root(piv);
            NXK_MX_SERIAL
            for (int i = j + tid; i < n; i += bd)
                L[i * n + j] = i == j ? nxk_mx_s<T>::of(l) : nxk_mx_rdiv(L[i * n + j], l);
            __syncthreads();
            const int w = n - j - 1;
            NXK_MX_SERIAL
            for (int e = tid; e < w * w; e += bd) {
                const int i = j + 1 + e / w, c = j + 1 + e % w;
                if (c <= i) L[i * n + c] = L[i * n + c] - L[i * n + j] * nxk_mx_conj(L[c * n + j]);
            }
            __syncthreads();
        }
        NXK_MX_SERIAL
        for (int e = tid; e < n * n; e += bd) {
            const int i = e / n, j = e % n;
            T v = nxk_mx_s<T>::of((R)0);
            if (upper ? j >= i : j <= i) v = upper ? nxk_mx_conj(L[j * n + i]) : L[i * n + j];
            f[pos[1] + i * rc[2] + j * rc[3]] = fail ? nxk_mx_s<T>::nan() : v;
        }
        __syncthreads();
    }
}

// ---------------------------------------------------------------------------
// lu: arrays a, lu, pivots, perm. Shared: perm [m], piv [k] (int64), A [m][n].
// ---------------------------------------------------------------------------

// Unblocked right-looking elimination: pivot j is the first row from j whose
// |a_ij| (|re| + |im| for a complex one) is greater than every earlier one's;
// multipliers a_ij / pivot (a nonzero pivot; a zero one leaves them); a_ic -
// l_ij a_jc, the product and the difference each rounded. No check of
// finiteness: NaN and infinities flow through. The host library's arithmetic.
template <class T>
__global__ void __launch_bounds__(NXK_MX_THREADS)
nxk_mx_lu(const nxk_i64* __restrict__ d, nxk_i64 nb, int m, int n, const T* a, T* lu, nxk_i64* pivots,
          nxk_i64* perm) {
    typedef typename nxk_mx_s<T>::R R;
    const int k = m < n ? m : n;
    nxk_i64* pm = reinterpret_cast<nxk_i64*>(nxk_dynamic_shared);
    nxk_i64* pv = pm + m;
    T* A = reinterpret_cast<T*>(pv + k);
    const int tid = (int)threadIdx.x, bd = (int)blockDim.x;
    for (nxk_i64 t = blockIdx.x; t < nb; t += gridDim.x) {
        nxk_i64 pos[4];
        const nxk_i64* rc = nxk_mx_at<4>(d, t, pos);
        NXK_MX_SERIAL
        for (int e = tid; e < m * n; e += bd) A[e] = a[pos[0] + (e / n) * rc[0] + (e % n) * rc[1]];
        NXK_MX_SERIAL
        for (int i = tid; i < m; i += bd) pm[i] = i;
        __syncthreads();
        NXK_MX_SERIAL
        for (int j = 0; j < k; ++j) {
            if (tid == 0) {
                int p = j;
                R best = nxk_mx_pmag(A[j * n + j]);
                NXK_MX_SERIAL
                for (int i = j + 1; i < m; ++i) {
                    const R v = nxk_mx_pmag(A[i * n + j]);
                    if (v > best) {
                        best = v;
                        p = i;
                    }
                }
                pv[j] = p;
                const nxk_i64 q = pm[j];
                pm[j] = pm[p];
                pm[p] = q;
            }
            __syncthreads();
            const int p = (int)pv[j];
            if (p != j) {
                NXK_MX_SERIAL
                for (int c = tid; c < n; c += bd) {
                    const T x = A[j * n + c];
                    A[j * n + c] = A[p * n + c];
                    A[p * n + c] = x;
                }
            }
            __syncthreads();
            const T piv = A[j * n + j];
            if (nxk_mx_nz(piv)) {
                NXK_MX_SERIAL
                for (int i = j + 1 + tid; i < m; i += bd) A[i * n + j] = nxk_mx_div(A[i * n + j], piv);
            }
            __syncthreads();
            const int rows = m - j - 1, cols = n - j - 1;
            NXK_MX_SERIAL
            for (int e = tid; e < rows * cols; e += bd) {
                const int i = j + 1 + e / cols, c = j + 1 + e % cols;
                A[i * n + c] = A[i * n + c] - A[i * n + j] * A[j * n + c];
            }
            __syncthreads();
        }
        NXK_MX_SERIAL
        for (int e = tid; e < m * n; e += bd) lu[pos[1] + (e / n) * rc[2] + (e % n) * rc[3]] = A[e];
        NXK_MX_SERIAL
        for (int j = tid; j < k; j += bd) pivots[pos[2] + j * rc[5]] = pv[j];
        NXK_MX_SERIAL
        for (int i = tid; i < m; i += bd) perm[pos[3] + i * rc[7]] = pm[i];
        __syncthreads();
    }
}

// ---------------------------------------------------------------------------
// qr: arrays a, q, r. Shared: A [m][n] (R and the reflectors), Q [m][qc],
// tau [k], two scalars.
// ---------------------------------------------------------------------------

// Householder QR (LAPACK's ?geqr2 and ?org2r/?ung2r): reflector j from x =
// A[j:, j], alpha = x_0: sigma = sum of |x_i|^2 below the diagonal (chained);
// sigma = 0 with alpha real gives tau = 0; else beta = -sign(re alpha)
// sqrt(|alpha|^2 + sigma) (real), tau = ((beta - re alpha) / beta, -im alpha
// / beta), v = x / (alpha - beta) with v_0 = 1. Each column c > j takes w =
// conj(tau) (a_jc + sum conj(v_i) a_ic) and a_ic - v_i w (H^H applied). Q =
// H_0 ... H_{k-1} applied to the first qc columns of the identity, last
// reflector first, each taking w = tau (q_jc + sum conj(v_i) q_ic).
template <class T>
__global__ void __launch_bounds__(NXK_MX_THREADS)
nxk_mx_qr(const nxk_i64* __restrict__ d, nxk_i64 nb, int m, int n, int qc, const T* a, T* q, T* r) {
    typedef typename nxk_mx_s<T>::R R;
    const int k = m < n ? m : n;
    T* A = reinterpret_cast<T*>(nxk_dynamic_shared);
    T* Q = A + m * n;
    T* tau = Q + m * qc;
    T* sc = tau + k;  // beta, alpha - beta
    const T zero = nxk_mx_s<T>::of((R)0), one = nxk_mx_s<T>::of((R)1);
    const int tid = (int)threadIdx.x, bd = (int)blockDim.x;
    for (nxk_i64 t = blockIdx.x; t < nb; t += gridDim.x) {
        nxk_i64 pos[3];
        const nxk_i64* rc = nxk_mx_at<3>(d, t, pos);
        int bad = 0;
        NXK_MX_SERIAL
        for (int e = tid; e < m * n; e += bd) {
            const T v = a[pos[0] + (e / n) * rc[0] + (e % n) * rc[1]];
            A[e] = v;
            if (!nxk_mx_finite(v)) bad = 1;
        }
        NXK_MX_SERIAL
        for (int e = tid; e < m * qc; e += bd) Q[e] = e / qc == e % qc ? one : zero;
        int fail = __syncthreads_or(bad);
        NXK_MX_SERIAL
        for (int j = 0; j < k && !fail; ++j) {
            if (tid == 0) {
                const T alpha = A[j * n + j];
                const R ar = nxk_mx_re(alpha), ai = nxk_mx_im(alpha);
                R sigma = (R)0;
                NXK_MX_SERIAL
                for (int i = j + 1; i < m; ++i) sigma = sigma + nxk_mx_abs2(A[i * n + j]);
                if (sigma == (R)0 && ai == (R)0) {
                    tau[j] = zero;
                    sc[0] = alpha;
                    sc[1] = one;
                } else {
                    const R norm = nxk_mx<R>::root(nxk_mx_abs2(alpha) + sigma);
                    const R beta = ar >= (R)0 ? -norm : norm;
                    tau[j] = nxk_mx_s<T>::make((beta - ar) / beta, -ai / beta);
                    sc[0] = nxk_mx_s<T>::of(beta);
                    sc[1] = alpha - nxk_mx_s<T>::of(beta);
                }
            }
            __syncthreads();
            const T tj = tau[j], div = sc[1];
            if (nxk_mx_nz(tj)) {
                NXK_MX_SERIAL
                for (int i = j + 1 + tid; i < m; i += bd) A[i * n + j] = nxk_mx_div(A[i * n + j], div);
            }
            __syncthreads();
            if (nxk_mx_nz(tj)) {
                const T ct = nxk_mx_conj(tj);
                NXK_MX_SERIAL
                for (int c = j + 1 + tid; c < n; c += bd) {
                    T w = A[j * n + c];
                    NXK_MX_SERIAL
                    for (int i = j + 1; i < m; ++i) w = w + nxk_mx_conj(A[i * n + j]) * A[i * n + c];
                    w = ct * w;
                    A[j * n + c] = A[j * n + c] - w;
                    NXK_MX_SERIAL
                    for (int i = j + 1; i < m; ++i) A[i * n + c] = A[i * n + c] - w * A[i * n + j];
                }
            }
            __syncthreads();
            if (tid == 0) A[j * n + j] = sc[0];
            __syncthreads();
        }
        NXK_MX_SERIAL
        for (int j = k - 1; j >= 0 && !fail; --j) {
            const T tj = tau[j];
            if (nxk_mx_nz(tj)) {
                NXK_MX_SERIAL
                for (int c = tid; c < qc; c += bd) {
                    T w = Q[j * qc + c];
                    NXK_MX_SERIAL
                    for (int i = j + 1; i < m; ++i) w = w + nxk_mx_conj(A[i * n + j]) * Q[i * qc + c];
                    w = tj * w;
                    Q[j * qc + c] = Q[j * qc + c] - w;
                    NXK_MX_SERIAL
                    for (int i = j + 1; i < m; ++i) Q[i * qc + c] = Q[i * qc + c] - w * A[i * n + j];
                }
            }
            __syncthreads();
        }
        bad = 0;
        NXK_MX_SERIAL
        for (int e = tid; e < m * n; e += bd)
            if (e / n <= e % n && !nxk_mx_finite(A[e])) bad = 1;
        NXK_MX_SERIAL
        for (int e = tid; e < m * qc; e += bd)
            if (!nxk_mx_finite(Q[e])) bad = 1;
        fail = __syncthreads_or(bad) || fail;
        NXK_MX_SERIAL
        for (int e = tid; e < m * qc; e += bd)
            q[pos[1] + (e / qc) * rc[2] + (e % qc) * rc[3]] = fail ? nxk_mx_s<T>::nan() : Q[e];
        NXK_MX_SERIAL
        for (int e = tid; e < qc * n; e += bd) {
            const int i = e / n, c = e % n;
            const T v = i <= c && i < k ? A[i * n + c] : zero;
            r[pos[2] + i * rc[4] + c * rc[5]] = fail ? nxk_mx_s<T>::nan() : v;
        }
        __syncthreads();
    }
}

// ---------------------------------------------------------------------------
// solve_triangular: arrays a, b, x. Shared: T [n][n], op(a)'s triangle.
// ---------------------------------------------------------------------------

// op(a) x = b by substitution, one thread a column of b: x_i = (b_i - sum_j
// t_ij x_j) / t_ii, the sum a chain over j in the order the substitution
// finds them (increasing for a lower op(a), decreasing from n - 1 for an
// upper one); op is the transpose where asked (never the conjugate
// transpose); a unit diagonal is read as 1 and not divided by. x is written
// as it is found and read back, so x may be b itself. A zero on the read
// diagonal (both parts, for complex) fails the matrix: its x is all the quiet
// NaN, as the contract's rule for a failure that depends on a value.
template <class T>
__global__ void __launch_bounds__(NXK_MX_THREADS)
nxk_mx_trsm(const nxk_i64* __restrict__ d, nxk_i64 nb, int n, int kc, int lower, int trans, int unit,
            const T* a, const T* b, T* x) {
    typedef typename nxk_mx_s<T>::R R;
    T* S = reinterpret_cast<T*>(nxk_dynamic_shared);
    const int low = lower != trans;  // op(a) is lower triangular
    const int tid = (int)threadIdx.x, bd = (int)blockDim.x;
    for (nxk_i64 t = blockIdx.x; t < nb; t += gridDim.x) {
        nxk_i64 pos[3];
        const nxk_i64* rc = nxk_mx_at<3>(d, t, pos);
        int bad = 0;
        NXK_MX_SERIAL
        for (int e = tid; e < n * n; e += bd) {
            const int i = e / n, j = e % n;
            T v = nxk_mx_s<T>::of((R)0);
            if (i == j && unit) v = nxk_mx_s<T>::of((R)1);
            else if (low ? j <= i : j >= i)
                v = trans ? a[pos[0] + j * rc[0] + i * rc[1]] : a[pos[0] + i * rc[0] + j * rc[1]];
            if (i == j && !nxk_mx_nz(v)) bad = 1;
            S[e] = v;
        }
        if (__syncthreads_or(bad)) {  // the same for every thread
            NXK_MX_SERIAL
            for (int e = tid; e < n * kc; e += bd)
                x[pos[2] + (e / kc) * rc[4] + (e % kc) * rc[5]] = nxk_mx_s<T>::nan();
            continue;  // no thread reads S again before the next matrix's barrier
        }
        NXK_MX_SERIAL
        for (int c = tid; c < kc; c += bd) {
            NXK_MX_SERIAL
            for (int s = 0; s < n; ++s) {
                const int i = low ? s : n - 1 - s;
                T acc = b[pos[1] + i * rc[2] + c * rc[3]];
                if (low) {
                    NXK_MX_SERIAL
                    for (int j = 0; j < i; ++j) acc = acc - S[i * n + j] * x[pos[2] + j * rc[4] + c * rc[5]];
                } else {
                    NXK_MX_SERIAL
                    for (int j = n - 1; j > i; --j)
                        acc = acc - S[i * n + j] * x[pos[2] + j * rc[4] + c * rc[5]];
                }
                x[pos[2] + i * rc[4] + c * rc[5]] = unit ? acc : nxk_mx_div(acc, S[i * n + i]);
            }
        }
        __syncthreads();
    }
}

// ---------------------------------------------------------------------------
// eigh: arrays a, w, v. Shared: A [n][n], V [n][n] (with vectors), s [P] (T);
// c [P] (R); rot [P], ord [n] (int). P = pairs a round.
// ---------------------------------------------------------------------------

// Cyclic two-sided Jacobi on the Hermitian matrix read from a's lower
// triangle (a diagonal element's imaginary part is not used, as LAPACK's
// ?heevd uses none): sweeps of np - 1 rounds (np = n rounded up to even) of
// the round-robin pairs; in a round each pair (p, q) with |a_pq| > n u
// sqrt|a_pp| sqrt|a_qq| takes its rotation (nxk_mx_jacobi), computed from the
// round's start, applied to the columns (and V's), then to the rows; a_qp is
// set to 0, the rotated diagonal elements' imaginary parts to 0, and the
// upper triangle to the conjugate of the lower. Sweeps until one rotates
// nothing (at most NXK_MX_SWEEPS). w ascending (the diagonal's real parts),
// ties by index; v's column r is V's column of w[r].
template <class T>
__global__ void __launch_bounds__(NXK_MX_THREADS)
nxk_mx_eigh(const nxk_i64* __restrict__ d, nxk_i64 nb, int n, int vectors, const T* a,
            typename nxk_mx_s<T>::R* w, T* v) {
    typedef typename nxk_mx_s<T>::R R;
    const int np = n + (n & 1), P = np / 2;
    T* A = reinterpret_cast<T*>(nxk_dynamic_shared);
    T* V = A + n * n;
    T* ss = V + (vectors ? n * n : 0);
    R* cc = reinterpret_cast<R*>(ss + P);
    int* rot = reinterpret_cast<int*>(cc + P);
    int* ord = rot + P;
    const R tol = (R)n * nxk_mx<R>::unit();
    const T zero = nxk_mx_s<T>::of((R)0), one = nxk_mx_s<T>::of((R)1);
    const int tid = (int)threadIdx.x, bd = (int)blockDim.x;
    for (nxk_i64 t = blockIdx.x; t < nb; t += gridDim.x) {
        nxk_i64 pos[3];
        const nxk_i64* rc = nxk_mx_at<3>(d, t, pos);
        int bad = 0;
        NXK_MX_SERIAL
        for (int e = tid; e < n * n; e += bd) {
            const int i = e / n, j = e % n;
            if (j < i) {
                const T x = a[pos[0] + i * rc[0] + j * rc[1]];
                A[i * n + j] = x;
                A[j * n + i] = nxk_mx_conj(x);
                if (!nxk_mx_finite(x)) bad = 1;
            } else if (j == i) {
                const T x = a[pos[0] + i * rc[0] + j * rc[1]];
                A[e] = nxk_mx_s<T>::of(nxk_mx_re(x));
                if (!nxk_mx_finite(x)) bad = 1;
            }
            if (vectors) V[e] = i == j ? one : zero;
        }
        int fail = __syncthreads_or(bad);
        int busy = !fail, sweeps = 0;
        NXK_MX_SERIAL
        while (busy && sweeps < NXK_MX_SWEEPS) {
            int mine = 0;
            NXK_MX_SERIAL
            for (int round = 0; round < np - 1; ++round) {
                NXK_MX_SERIAL
                for (int p = tid; p < P; p += bd) {
                    int lo, hi;
                    nxk_mx_pair(np, round, p, &lo, &hi);
                    int go = 0;
                    if (hi < n) {
                        const R app = nxk_mx_re(A[lo * n + lo]), aqq = nxk_mx_re(A[hi * n + hi]);
                        const T apq = nxk_mx_conj(A[hi * n + lo]);
                        const R lim = tol * nxk_mx<R>::root(nxk_mx<R>::mag(app)) *
                                      nxk_mx<R>::root(nxk_mx<R>::mag(aqq));
                        if (nxk_mx_abs(apq) > lim) {
                            nxk_mx_jacobi(app, aqq, apq, &cc[p], &ss[p]);
                            go = 1;
                        }
                    }
                    rot[p] = go;
                    mine |= go;
                }
                __syncthreads();
                NXK_MX_SERIAL
                for (int e = tid; e < P * n; e += bd) {
                    const int p = e / n, i = e % n;
                    if (!rot[p]) continue;
                    int lo, hi;
                    nxk_mx_pair(np, round, p, &lo, &hi);
                    const R c = cc[p];
                    nxk_mx_rotate(c, ss[p], &A[i * n + lo], &A[i * n + hi]);
                    if (vectors) nxk_mx_rotate(c, ss[p], &V[i * n + lo], &V[i * n + hi]);
                }
                __syncthreads();
                NXK_MX_SERIAL
                for (int e = tid; e < P * n; e += bd) {
                    const int p = e / n, i = e % n;
                    if (!rot[p]) continue;
                    int lo, hi;
                    nxk_mx_pair(np, round, p, &lo, &hi);
                    const R c = cc[p];
                    nxk_mx_rotate(c, nxk_mx_conj(ss[p]), &A[lo * n + i], &A[hi * n + i]);
                }
                __syncthreads();
                NXK_MX_SERIAL
                for (int p = tid; p < P; p += bd) {
                    if (!rot[p]) continue;
                    int lo, hi;
                    nxk_mx_pair(np, round, p, &lo, &hi);
                    A[hi * n + lo] = zero;
                    A[lo * n + lo] = nxk_mx_s<T>::of(nxk_mx_re(A[lo * n + lo]));
                    A[hi * n + hi] = nxk_mx_s<T>::of(nxk_mx_re(A[hi * n + hi]));
                }
                __syncthreads();
                NXK_MX_SERIAL
                for (int e = tid; e < n * n; e += bd)
                    if (e / n > e % n) A[(e % n) * n + e / n] = nxk_mx_conj(A[e]);
                __syncthreads();
            }
            busy = __syncthreads_or(mine);
            ++sweeps;
        }
        bad = busy || fail;
        NXK_MX_SERIAL
        for (int i = tid; i < n; i += bd) {
            const R wi = nxk_mx_re(A[i * n + i]);
            if (!nxk_mx_finite(wi)) bad = 1;
            int r = 0;
            NXK_MX_SERIAL
            for (int j = 0; j < n; ++j) {
                const R wj = nxk_mx_re(A[j * n + j]);
                if (wj < wi || (wj == wi && j < i)) ++r;
            }
            ord[r] = i;
        }
        if (vectors) {
            NXK_MX_SERIAL
            for (int e = tid; e < n * n; e += bd)
                if (!nxk_mx_finite(V[e])) bad = 1;
        }
        fail = __syncthreads_or(bad);
        NXK_MX_SERIAL
        for (int r = tid; r < n; r += bd)
            w[pos[1] + r * rc[3]] = fail ? nxk_mx<R>::nan() : nxk_mx_re(A[ord[r] * (n + 1)]);
        if (vectors) {
            NXK_MX_SERIAL
            for (int e = tid; e < n * n; e += bd) {
                const int i = e / n, r = e % n;
                v[pos[2] + i * rc[4] + r * rc[5]] = fail ? nxk_mx_s<T>::nan() : V[i * n + ord[r]];
            }
        }
        __syncthreads();
    }
}

// ---------------------------------------------------------------------------
// svd: arrays a, u, s, vh. mode 0: s alone; 1: reduced; 2: complete. The work
// matrix W is a, or a's conjugate transpose where m < n, of M >= N rows.
// Shared: W [N][M] (columns), with vectors U [uc][M] (columns) and V [N][N]
// (columns); dots [M], sn [P] (T); sg [N], tmp [M], one scalar, cs [P] (R);
// ord [N], rot [P], one index (int).
// ---------------------------------------------------------------------------

// The columns of U from `from` to uc: each the first e_i of greatest 1 - sum
// over the columns so far of |U_ij|^2, orthogonalised against them twice
// (classical Gram-Schmidt, chained sums, the coefficients U_j^H u) and
// normalised.
template <class T>
__device__ void nxk_mx_complete(T* U, int M, int from, int uc, typename nxk_mx_s<T>::R* tmp, T* dots,
                                typename nxk_mx_s<T>::R* sc, int* pick) {
    typedef typename nxk_mx_s<T>::R R;
    const int tid = (int)threadIdx.x, bd = (int)blockDim.x;
    NXK_MX_SERIAL
    for (int col = from; col < uc; ++col) {
        NXK_MX_SERIAL
        for (int i = tid; i < M; i += bd) {
            R acc = (R)1;
            NXK_MX_SERIAL
            for (int j = 0; j < col; ++j) acc = acc - nxk_mx_abs2(U[j * M + i]);
            tmp[i] = acc;
        }
        __syncthreads();
        if (tid == 0) {
            int best = 0;
            NXK_MX_SERIAL
            for (int i = 1; i < M; ++i)
                if (tmp[i] > tmp[best]) best = i;
            *pick = best;
        }
        __syncthreads();
        const int bi = *pick;
        NXK_MX_SERIAL
        for (int i = tid; i < M; i += bd) U[col * M + i] = nxk_mx_s<T>::of(i == bi ? (R)1 : (R)0);
        __syncthreads();
        NXK_MX_SERIAL
        for (int pass = 0; pass < 2; ++pass) {
            NXK_MX_SERIAL
            for (int j = tid; j < col; j += bd) {
                T acc = nxk_mx_s<T>::of((R)0);
                NXK_MX_SERIAL
                for (int i = 0; i < M; ++i) acc = acc + nxk_mx_conj(U[j * M + i]) * U[col * M + i];
                dots[j] = acc;
            }
            __syncthreads();
            NXK_MX_SERIAL
            for (int i = tid; i < M; i += bd) {
                T acc = U[col * M + i];
                NXK_MX_SERIAL
                for (int j = 0; j < col; ++j) acc = acc - dots[j] * U[j * M + i];
                U[col * M + i] = acc;
            }
            __syncthreads();
        }
        if (tid == 0) {
            R acc = (R)0;
            NXK_MX_SERIAL
            for (int i = 0; i < M; ++i) acc = acc + nxk_mx_abs2(U[col * M + i]);
            *sc = nxk_mx<R>::root(acc);
        }
        __syncthreads();
        const R norm = *sc;
        NXK_MX_SERIAL
        for (int i = tid; i < M; i += bd) U[col * M + i] = nxk_mx_rdiv(U[col * M + i], norm);
        __syncthreads();
    }
}

// One-sided (Hestenes) Jacobi on W's columns: sweeps of round-robin rounds; a
// pair (p, q) with |g| > M u sqrt(alpha) sqrt(beta) (alpha, beta, g: the
// columns' chained sums of |x|^2, |y|^2 and conj(x) y) rotates W's columns
// (and V's) by the rotation of [[alpha, g], [conj g, beta]] (nxk_mx_jacobi).
// Then sigma_c = sqrt(chained sum of |W_ic|^2), s descending (ties by index),
// U's column r = W's column of s[r] over its sigma, and columns of zero
// sigma, and the complete ones, completed (nxk_mx_complete). a = W: u = U, vh
// = V^H; a = W^H: u = V, vh = U^H.
template <class T>
__global__ void __launch_bounds__(NXK_MX_THREADS)
nxk_mx_svd(const nxk_i64* __restrict__ d, nxk_i64 nb, int m, int n, int mode, const T* a, T* u,
           typename nxk_mx_s<T>::R* s, T* vh) {
    typedef typename nxk_mx_s<T>::R R;
    const int tr = m < n, M = tr ? n : m, N = tr ? m : n;
    const int vec = mode != 0, uc = mode == 2 ? M : N;
    const int np = N + (N & 1), P = np / 2;
    T* W = reinterpret_cast<T*>(nxk_dynamic_shared);
    T* U = W + M * N;
    T* V = U + (vec ? M * uc : 0);
    T* dots = V + (vec ? N * N : 0);
    T* sn = dots + M;
    R* sg = reinterpret_cast<R*>(sn + P);
    R* tmp = sg + N;
    R* sc = tmp + M;
    R* cs = sc + 1;
    int* ord = reinterpret_cast<int*>(cs + P);
    int* rot = ord + N;
    int* pick = rot + P;
    const R tol = (R)M * nxk_mx<R>::unit();
    const int tid = (int)threadIdx.x, bd = (int)blockDim.x;
    for (nxk_i64 t = blockIdx.x; t < nb; t += gridDim.x) {
        nxk_i64 pos[4];
        const nxk_i64* rc = nxk_mx_at<4>(d, t, pos);
        int bad = 0;
        NXK_MX_SERIAL
        for (int e = tid; e < M * N; e += bd) {
            const int c = e / M, i = e % M;  // W_ic
            const T x = tr ? nxk_mx_conj(a[pos[0] + c * rc[0] + i * rc[1]]) : a[pos[0] + i * rc[0] + c * rc[1]];
            W[e] = x;
            if (!nxk_mx_finite(x)) bad = 1;
        }
        if (vec) {
            NXK_MX_SERIAL
            for (int e = tid; e < N * N; e += bd) V[e] = nxk_mx_s<T>::of(e / N == e % N ? (R)1 : (R)0);
        }
        int fail = __syncthreads_or(bad);
        int busy = !fail, sweeps = 0;
        NXK_MX_SERIAL
        while (busy && sweeps < NXK_MX_SWEEPS) {
            int mine = 0;
            NXK_MX_SERIAL
            for (int round = 0; round < np - 1; ++round) {
                NXK_MX_SERIAL
                for (int p = tid; p < P; p += bd) {
                    int lo, hi;
                    nxk_mx_pair(np, round, p, &lo, &hi);
                    int go = 0;
                    if (hi < N) {
                        R al = (R)0, be = (R)0;
                        T ga = nxk_mx_s<T>::of((R)0);
                        NXK_MX_SERIAL
                        for (int i = 0; i < M; ++i) {
                            const T x = W[lo * M + i], y = W[hi * M + i];
                            al = al + nxk_mx_abs2(x);
                            be = be + nxk_mx_abs2(y);
                            ga = ga + nxk_mx_conj(x) * y;
                        }
                        if (nxk_mx_abs(ga) > tol * nxk_mx<R>::root(al) * nxk_mx<R>::root(be)) {
                            nxk_mx_jacobi(al, be, ga, &cs[p], &sn[p]);
                            go = 1;
                        }
                    }
                    rot[p] = go;
                    mine |= go;
                }
                __syncthreads();
                NXK_MX_SERIAL
                for (int e = tid; e < P * M; e += bd) {
                    const int p = e / M, i = e % M;
                    if (!rot[p]) continue;
                    int lo, hi;
                    nxk_mx_pair(np, round, p, &lo, &hi);
                    const R c = cs[p];
                    nxk_mx_rotate(c, sn[p], &W[lo * M + i], &W[hi * M + i]);
                }
                if (vec) {
                    NXK_MX_SERIAL
                    for (int e = tid; e < P * N; e += bd) {
                        const int p = e / N, i = e % N;
                        if (!rot[p]) continue;
                        int lo, hi;
                        nxk_mx_pair(np, round, p, &lo, &hi);
                        const R c = cs[p];
                        nxk_mx_rotate(c, sn[p], &V[lo * N + i], &V[hi * N + i]);
                    }
                }
                __syncthreads();
            }
            busy = __syncthreads_or(mine);
            ++sweeps;
        }
        bad = busy || fail;
        NXK_MX_SERIAL
        for (int c = tid; c < N; c += bd) {
            R acc = (R)0;
            NXK_MX_SERIAL
            for (int i = 0; i < M; ++i) acc = acc + nxk_mx_abs2(W[c * M + i]);
            sg[c] = nxk_mx<R>::root(acc);
            if (!nxk_mx_finite(sg[c])) bad = 1;
        }
        __syncthreads();
        NXK_MX_SERIAL
        for (int c = tid; c < N; c += bd) {
            int r = 0;
            NXK_MX_SERIAL
            for (int j = 0; j < N; ++j)
                if (sg[j] > sg[c] || (sg[j] == sg[c] && j < c)) ++r;
            ord[r] = c;
        }
        fail = __syncthreads_or(bad);
        if (vec && !fail) {
            int live = 0;
            NXK_MX_SERIAL
            for (int c = 0; c < N; ++c) live += sg[c] > (R)0;
            NXK_MX_SERIAL
            for (int e = tid; e < M * live; e += bd) {
                const int r = e / M, i = e % M, c = ord[r];
                U[r * M + i] = nxk_mx_rdiv(W[c * M + i], sg[c]);
            }
            __syncthreads();
            nxk_mx_complete(U, M, live, uc, tmp, dots, sc, pick);
            bad = 0;
            NXK_MX_SERIAL
            for (int e = tid; e < M * uc; e += bd)
                if (!nxk_mx_finite(U[e])) bad = 1;
            NXK_MX_SERIAL
            for (int e = tid; e < N * N; e += bd)
                if (!nxk_mx_finite(V[e])) bad = 1;
            fail = __syncthreads_or(bad);
        }
        const T qnan = nxk_mx_s<T>::nan();
        NXK_MX_SERIAL
        for (int r = tid; r < N; r += bd) s[pos[2] + r * rc[5]] = fail ? nxk_mx<R>::nan() : sg[ord[r]];
        if (vec) {
            // The factor on W's side: u (rows < m, M of them) or vh's rows (uc of them).
            NXK_MX_SERIAL
            for (int e = tid; e < M * uc; e += bd) {
                const int r = e / M, i = e % M;
                const T x = U[r * M + i];
                if (tr) vh[pos[3] + r * rc[6] + i * rc[7]] = fail ? qnan : nxk_mx_conj(x);
                else u[pos[1] + i * rc[2] + r * rc[3]] = fail ? qnan : x;
            }
            // The factor on V's side: vh's rows (n = N) or u's columns (m = N).
            NXK_MX_SERIAL
            for (int e = tid; e < N * N; e += bd) {
                const int r = e / N, i = e % N;
                const T x = V[ord[r] * N + i];
                if (tr) u[pos[1] + i * rc[2] + r * rc[3]] = fail ? qnan : x;
                else vh[pos[3] + r * rc[6] + i * rc[7]] = fail ? qnan : nxk_mx_conj(x);
            }
        }
        __syncthreads();
    }
}

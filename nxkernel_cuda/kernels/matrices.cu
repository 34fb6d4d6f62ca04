// matrices.cu: the batched matrix routines (nxkernel_cuda/matrices.py).
//
// One block of NXK_MX_THREADS threads a matrix (blocks stride over the
// batch), the matrix and its work arrays in dynamic shared memory; float and
// double, the arithmetic in the matrix's own dtype.
//
// * Arrays are found by a descriptor the host builds (matrices.py): a walk
//   over the batch (nxk_loop.cuh) carrying each array's offset, then per array
//   its row and column strides (a vector result, such as s, has row stride 0).
//   Any layout is read in place.
// * Determinism: every sum is a chain in increasing index order computed by
//   one thread, every pivot and every ordering is chosen by a fixed rule, and
//   the Jacobi sweeps run in a fixed round-robin order; only + - * / and sqrt
//   (correctly rounded) are used, and NVRTC compiles with --fmad=false, so the
//   bits are the same on every launch and on cuda and cuda-emu alike.
// * A matrix that fails (cholesky: a pivot not > 0; a read element that is not
//   finite for cholesky, qr, svd and eigh; a Jacobi iteration that has not
//   converged in NXK_MX_SWEEPS sweeps; a result that is not finite) gives the
//   quiet NaN in every element of its own results.
#include "nxk_loop.cuh"

#define NXK_MX_THREADS 64
#define NXK_MX_SWEEPS 60

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

// x is neither an infinity nor a NaN.
template <class T>
__device__ __forceinline__ bool nxk_mx_finite(T x) { return x - x == (T)0; }

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

// ---------------------------------------------------------------------------
// cholesky: arrays a, f. Shared: L [n][n] (lower triangle used).
// ---------------------------------------------------------------------------

// Right-looking: column j is l_jj = sqrt(a_jj), l_ij = a_ij / l_jj, then each
// a_ic (i >= c > j) less l_ij l_cj, so element (i, c) is a chain over j in
// increasing order. upper reads a's upper triangle as the transposed lower
// one and stores the factor transposed.
template <class T>
__global__ void __launch_bounds__(NXK_MX_THREADS)
nxk_mx_cholesky(const nxk_i64* __restrict__ d, nxk_i64 nb, int n, int upper, const T* a, T* f) {
    T* L = reinterpret_cast<T*>(nxk_dynamic_shared);
    const int tid = (int)threadIdx.x, bd = (int)blockDim.x;
    for (nxk_i64 t = blockIdx.x; t < nb; t += gridDim.x) {
        nxk_i64 pos[2];
        const nxk_i64* rc = nxk_mx_at<2>(d, t, pos);
        int bad = 0;
        for (int e = tid; e < n * n; e += bd) {
            const int i = e / n, j = e % n;
            if (j <= i) {
                const T v = upper ? a[pos[0] + j * rc[0] + i * rc[1]] : a[pos[0] + i * rc[0] + j * rc[1]];
                L[e] = v;
                if (!nxk_mx_finite(v)) bad = 1;
            }
        }
        int fail = __syncthreads_or(bad);
        for (int j = 0; j < n && !fail; ++j) {
            const T piv = L[j * n + j];
            __syncthreads();
            if (!(piv > (T)0)) {
                fail = 1;  // the same for every thread: it read the same element
                break;
            }
            const T l = nxk_mx<T>::root(piv);
            for (int i = j + tid; i < n; i += bd) L[i * n + j] = i == j ? l : L[i * n + j] / l;
            __syncthreads();
            const int w = n - j - 1;
            for (int e = tid; e < w * w; e += bd) {
                const int i = j + 1 + e / w, c = j + 1 + e % w;
                if (c <= i) L[i * n + c] = L[i * n + c] - L[i * n + j] * L[c * n + j];
            }
            __syncthreads();
        }
        for (int e = tid; e < n * n; e += bd) {
            const int i = e / n, j = e % n;
            T v = (T)0;
            if (upper ? j >= i : j <= i) v = upper ? L[j * n + i] : L[i * n + j];
            f[pos[1] + i * rc[2] + j * rc[3]] = fail ? nxk_mx<T>::nan() : v;
        }
        __syncthreads();
    }
}

// ---------------------------------------------------------------------------
// lu: arrays a, lu, pivots, perm. Shared: perm [m], piv [k] (int64), A [m][n].
// ---------------------------------------------------------------------------

// Unblocked right-looking elimination: pivot j is the first row from j whose
// |a_ij| is greater than every earlier one's; multipliers a_ij / pivot (a zero
// pivot leaves them); a_ic - l_ij a_jc, the product and the difference each
// rounded. No check of finiteness: NaN and infinities flow through.
template <class T>
__global__ void __launch_bounds__(NXK_MX_THREADS)
nxk_mx_lu(const nxk_i64* __restrict__ d, nxk_i64 nb, int m, int n, const T* a, T* lu, nxk_i64* pivots,
          nxk_i64* perm) {
    const int k = m < n ? m : n;
    nxk_i64* pm = reinterpret_cast<nxk_i64*>(nxk_dynamic_shared);
    nxk_i64* pv = pm + m;
    T* A = reinterpret_cast<T*>(pv + k);
    const int tid = (int)threadIdx.x, bd = (int)blockDim.x;
    for (nxk_i64 t = blockIdx.x; t < nb; t += gridDim.x) {
        nxk_i64 pos[4];
        const nxk_i64* rc = nxk_mx_at<4>(d, t, pos);
        for (int e = tid; e < m * n; e += bd) A[e] = a[pos[0] + (e / n) * rc[0] + (e % n) * rc[1]];
        for (int i = tid; i < m; i += bd) pm[i] = i;
        __syncthreads();
        for (int j = 0; j < k; ++j) {
            if (tid == 0) {
                int p = j;
                T best = nxk_mx<T>::mag(A[j * n + j]);
                for (int i = j + 1; i < m; ++i) {
                    const T v = nxk_mx<T>::mag(A[i * n + j]);
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
                for (int c = tid; c < n; c += bd) {
                    const T x = A[j * n + c];
                    A[j * n + c] = A[p * n + c];
                    A[p * n + c] = x;
                }
            }
            __syncthreads();
            const T piv = A[j * n + j];
            if (piv != (T)0)
                for (int i = j + 1 + tid; i < m; i += bd) A[i * n + j] = A[i * n + j] / piv;
            __syncthreads();
            const int rows = m - j - 1, cols = n - j - 1;
            for (int e = tid; e < rows * cols; e += bd) {
                const int i = j + 1 + e / cols, c = j + 1 + e % cols;
                A[i * n + c] = A[i * n + c] - A[i * n + j] * A[j * n + c];
            }
            __syncthreads();
        }
        for (int e = tid; e < m * n; e += bd) lu[pos[1] + (e / n) * rc[2] + (e % n) * rc[3]] = A[e];
        for (int j = tid; j < k; j += bd) pivots[pos[2] + j * rc[5]] = pv[j];
        for (int i = tid; i < m; i += bd) perm[pos[3] + i * rc[7]] = pm[i];
        __syncthreads();
    }
}

// ---------------------------------------------------------------------------
// qr: arrays a, q, r. Shared: A [m][n] (R and the reflectors), Q [m][qc],
// tau [k], two scalars.
// ---------------------------------------------------------------------------

// Householder QR (LAPACK's dgeqr2 and dorg2r): reflector j from x = A[j:, j]:
// sigma = sum of x_i^2 below the diagonal (chained); sigma = 0 gives tau = 0;
// else beta = -sign(alpha) sqrt(alpha^2 + sigma), tau = (beta - alpha) / beta,
// v = x / (alpha - beta) with v_0 = 1. Each column c > j takes w = tau (a_jc +
// sum v_i a_ic) and a_ic - w v_i. Q = H_0 ... H_{k-1} applied to the first qc
// columns of the identity, last reflector first.
template <class T>
__global__ void __launch_bounds__(NXK_MX_THREADS)
nxk_mx_qr(const nxk_i64* __restrict__ d, nxk_i64 nb, int m, int n, int qc, const T* a, T* q, T* r) {
    const int k = m < n ? m : n;
    T* A = reinterpret_cast<T*>(nxk_dynamic_shared);
    T* Q = A + m * n;
    T* tau = Q + m * qc;
    T* sc = tau + k;  // beta, alpha - beta
    const int tid = (int)threadIdx.x, bd = (int)blockDim.x;
    for (nxk_i64 t = blockIdx.x; t < nb; t += gridDim.x) {
        nxk_i64 pos[3];
        const nxk_i64* rc = nxk_mx_at<3>(d, t, pos);
        int bad = 0;
        for (int e = tid; e < m * n; e += bd) {
            const T v = a[pos[0] + (e / n) * rc[0] + (e % n) * rc[1]];
            A[e] = v;
            if (!nxk_mx_finite(v)) bad = 1;
        }
        for (int e = tid; e < m * qc; e += bd) Q[e] = e / qc == e % qc ? (T)1 : (T)0;
        int fail = __syncthreads_or(bad);
        for (int j = 0; j < k && !fail; ++j) {
            if (tid == 0) {
                const T alpha = A[j * n + j];
                T sigma = (T)0;
                for (int i = j + 1; i < m; ++i) sigma = sigma + A[i * n + j] * A[i * n + j];
                if (sigma == (T)0) {
                    tau[j] = (T)0;
                    sc[0] = alpha;
                    sc[1] = (T)1;
                } else {
                    const T norm = nxk_mx<T>::root(alpha * alpha + sigma);
                    const T beta = alpha >= (T)0 ? -norm : norm;
                    tau[j] = (beta - alpha) / beta;
                    sc[0] = beta;
                    sc[1] = alpha - beta;
                }
            }
            __syncthreads();
            const T tj = tau[j], div = sc[1];
            if (tj != (T)0)
                for (int i = j + 1 + tid; i < m; i += bd) A[i * n + j] = A[i * n + j] / div;
            __syncthreads();
            if (tj != (T)0) {
                for (int c = j + 1 + tid; c < n; c += bd) {
                    T w = A[j * n + c];
                    for (int i = j + 1; i < m; ++i) w = w + A[i * n + j] * A[i * n + c];
                    w = tj * w;
                    A[j * n + c] = A[j * n + c] - w;
                    for (int i = j + 1; i < m; ++i) A[i * n + c] = A[i * n + c] - w * A[i * n + j];
                }
            }
            __syncthreads();
            if (tid == 0) A[j * n + j] = sc[0];
            __syncthreads();
        }
        for (int j = k - 1; j >= 0 && !fail; --j) {
            const T tj = tau[j];
            if (tj != (T)0) {
                for (int c = tid; c < qc; c += bd) {
                    T w = Q[j * qc + c];
                    for (int i = j + 1; i < m; ++i) w = w + A[i * n + j] * Q[i * qc + c];
                    w = tj * w;
                    Q[j * qc + c] = Q[j * qc + c] - w;
                    for (int i = j + 1; i < m; ++i) Q[i * qc + c] = Q[i * qc + c] - w * A[i * n + j];
                }
            }
            __syncthreads();
        }
        bad = 0;
        for (int e = tid; e < m * n; e += bd)
            if (e / n <= e % n && !nxk_mx_finite(A[e])) bad = 1;
        for (int e = tid; e < m * qc; e += bd)
            if (!nxk_mx_finite(Q[e])) bad = 1;
        fail = __syncthreads_or(bad) || fail;
        for (int e = tid; e < m * qc; e += bd)
            q[pos[1] + (e / qc) * rc[2] + (e % qc) * rc[3]] = fail ? nxk_mx<T>::nan() : Q[e];
        for (int e = tid; e < qc * n; e += bd) {
            const int i = e / n, c = e % n;
            const T v = i <= c && i < k ? A[i * n + c] : (T)0;
            r[pos[2] + i * rc[4] + c * rc[5]] = fail ? nxk_mx<T>::nan() : v;
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
// upper one); a unit diagonal is read as 1 (the division is then exact). x is
// written as it is found and read back, so x may be b itself.
template <class T>
__global__ void __launch_bounds__(NXK_MX_THREADS)
nxk_mx_trsm(const nxk_i64* __restrict__ d, nxk_i64 nb, int n, int kc, int lower, int trans, int unit,
            const T* a, const T* b, T* x) {
    T* S = reinterpret_cast<T*>(nxk_dynamic_shared);
    const int low = lower != trans;  // op(a) is lower triangular
    const int tid = (int)threadIdx.x, bd = (int)blockDim.x;
    for (nxk_i64 t = blockIdx.x; t < nb; t += gridDim.x) {
        nxk_i64 pos[3];
        const nxk_i64* rc = nxk_mx_at<3>(d, t, pos);
        for (int e = tid; e < n * n; e += bd) {
            const int i = e / n, j = e % n;
            T v = (T)0;
            if (i == j && unit) v = (T)1;
            else if (low ? j <= i : j >= i)
                v = trans ? a[pos[0] + j * rc[0] + i * rc[1]] : a[pos[0] + i * rc[0] + j * rc[1]];
            S[e] = v;
        }
        __syncthreads();
        for (int c = tid; c < kc; c += bd) {
            for (int s = 0; s < n; ++s) {
                const int i = low ? s : n - 1 - s;
                T acc = b[pos[1] + i * rc[2] + c * rc[3]];
                if (low) {
                    for (int j = 0; j < i; ++j) acc = acc - S[i * n + j] * x[pos[2] + j * rc[4] + c * rc[5]];
                } else {
                    for (int j = n - 1; j > i; --j)
                        acc = acc - S[i * n + j] * x[pos[2] + j * rc[4] + c * rc[5]];
                }
                x[pos[2] + i * rc[4] + c * rc[5]] = acc / S[i * n + i];
            }
        }
        __syncthreads();
    }
}

// ---------------------------------------------------------------------------
// eigh: arrays a, w, v. Shared: A [n][n], V [n][n] (with vectors), cs [2P]
// (T); rot [P], ord [n] (int). P = pairs a round.
// ---------------------------------------------------------------------------

// Cyclic two-sided Jacobi on the symmetric matrix read from a's lower
// triangle: sweeps of np - 1 rounds (np = n rounded up to even) of the
// round-robin pairs; in a round each pair (p, q) with |a_pq| > n u
// sqrt|a_pp| sqrt|a_qq| takes its rotation, computed from the round's start,
// applied to the columns (and V's), then to the rows; a_qp is set to 0 and the
// lower triangle copied to the upper. Sweeps until one rotates nothing (at
// most NXK_MX_SWEEPS). w ascending, ties by index; v's column r is V's column
// of w[r].
template <class T>
__global__ void __launch_bounds__(NXK_MX_THREADS)
nxk_mx_eigh(const nxk_i64* __restrict__ d, nxk_i64 nb, int n, int vectors, const T* a, T* w, T* v) {
    const int np = n + (n & 1), P = np / 2;
    T* A = reinterpret_cast<T*>(nxk_dynamic_shared);
    T* V = A + n * n;
    T* cs = V + (vectors ? n * n : 0);
    int* rot = reinterpret_cast<int*>(cs + 2 * P);
    int* ord = rot + P;
    const T tol = (T)n * nxk_mx<T>::unit();
    const int tid = (int)threadIdx.x, bd = (int)blockDim.x;
    for (nxk_i64 t = blockIdx.x; t < nb; t += gridDim.x) {
        nxk_i64 pos[3];
        const nxk_i64* rc = nxk_mx_at<3>(d, t, pos);
        int bad = 0;
        for (int e = tid; e < n * n; e += bd) {
            const int i = e / n, j = e % n;
            if (j <= i) {
                const T x = a[pos[0] + i * rc[0] + j * rc[1]];
                A[i * n + j] = x;
                A[j * n + i] = x;
                if (!nxk_mx_finite(x)) bad = 1;
            }
            if (vectors) V[e] = i == j ? (T)1 : (T)0;
        }
        int fail = __syncthreads_or(bad);
        int busy = !fail, sweeps = 0;
        while (busy && sweeps < NXK_MX_SWEEPS) {
            int mine = 0;
            for (int round = 0; round < np - 1; ++round) {
                for (int p = tid; p < P; p += bd) {
                    int lo, hi;
                    nxk_mx_pair(np, round, p, &lo, &hi);
                    int go = 0;
                    if (hi < n) {
                        const T app = A[lo * n + lo], aqq = A[hi * n + hi], apq = A[hi * n + lo];
                        const T lim = tol * nxk_mx<T>::root(nxk_mx<T>::mag(app)) *
                                      nxk_mx<T>::root(nxk_mx<T>::mag(aqq));
                        if (nxk_mx<T>::mag(apq) > lim) {
                            nxk_mx_rotation(app, aqq, apq, &cs[2 * p], &cs[2 * p + 1]);
                            go = 1;
                        }
                    }
                    rot[p] = go;
                    mine |= go;
                }
                __syncthreads();
                for (int e = tid; e < P * n; e += bd) {
                    const int p = e / n, i = e % n;
                    if (!rot[p]) continue;
                    int lo, hi;
                    nxk_mx_pair(np, round, p, &lo, &hi);
                    const T c = cs[2 * p], s = cs[2 * p + 1];
                    const T x = A[i * n + lo], y = A[i * n + hi];
                    A[i * n + lo] = c * x - s * y;
                    A[i * n + hi] = s * x + c * y;
                    if (vectors) {
                        const T vx = V[i * n + lo], vy = V[i * n + hi];
                        V[i * n + lo] = c * vx - s * vy;
                        V[i * n + hi] = s * vx + c * vy;
                    }
                }
                __syncthreads();
                for (int e = tid; e < P * n; e += bd) {
                    const int p = e / n, i = e % n;
                    if (!rot[p]) continue;
                    int lo, hi;
                    nxk_mx_pair(np, round, p, &lo, &hi);
                    const T c = cs[2 * p], s = cs[2 * p + 1];
                    const T x = A[lo * n + i], y = A[hi * n + i];
                    A[lo * n + i] = c * x - s * y;
                    A[hi * n + i] = s * x + c * y;
                }
                __syncthreads();
                for (int p = tid; p < P; p += bd) {
                    if (!rot[p]) continue;
                    int lo, hi;
                    nxk_mx_pair(np, round, p, &lo, &hi);
                    A[hi * n + lo] = (T)0;
                }
                __syncthreads();
                for (int e = tid; e < n * n; e += bd)
                    if (e / n > e % n) A[(e % n) * n + e / n] = A[e];
                __syncthreads();
            }
            busy = __syncthreads_or(mine);
            ++sweeps;
        }
        bad = busy || fail;
        for (int i = tid; i < n; i += bd) {
            const T wi = A[i * n + i];
            if (!nxk_mx_finite(wi)) bad = 1;
            int r = 0;
            for (int j = 0; j < n; ++j) {
                const T wj = A[j * n + j];
                if (wj < wi || (wj == wi && j < i)) ++r;
            }
            ord[r] = i;
        }
        if (vectors)
            for (int e = tid; e < n * n; e += bd)
                if (!nxk_mx_finite(V[e])) bad = 1;
        fail = __syncthreads_or(bad);
        for (int r = tid; r < n; r += bd)
            w[pos[1] + r * rc[3]] = fail ? nxk_mx<T>::nan() : A[ord[r] * (n + 1)];
        if (vectors)
            for (int e = tid; e < n * n; e += bd) {
                const int i = e / n, r = e % n;
                v[pos[2] + i * rc[4] + r * rc[5]] = fail ? nxk_mx<T>::nan() : V[i * n + ord[r]];
            }
        __syncthreads();
    }
}

// ---------------------------------------------------------------------------
// svd: arrays a, u, s, vh. mode 0: s alone; 1: reduced; 2: complete. The work
// matrix W is a, or a's transpose where m < n, of M >= N rows. Shared: W
// [N][M] (columns), with vectors U [uc][M] (columns) and V [N][N] (columns);
// sg [N], tmp [M], dots [M], one scalar, cs [2P] (T); ord [N], rot [P], one
// index (int).
// ---------------------------------------------------------------------------

// The columns of U from `from` to uc: each the first e_i of greatest 1 - sum
// over the columns so far of U_ij^2, orthogonalised against them twice
// (classical Gram-Schmidt, chained sums) and normalised.
template <class T>
__device__ void nxk_mx_complete(T* U, int M, int from, int uc, T* tmp, T* dots, T* sc, int* pick) {
    const int tid = (int)threadIdx.x, bd = (int)blockDim.x;
    for (int col = from; col < uc; ++col) {
        for (int i = tid; i < M; i += bd) {
            T acc = (T)1;
            for (int j = 0; j < col; ++j) acc = acc - U[j * M + i] * U[j * M + i];
            tmp[i] = acc;
        }
        __syncthreads();
        if (tid == 0) {
            int best = 0;
            for (int i = 1; i < M; ++i)
                if (tmp[i] > tmp[best]) best = i;
            *pick = best;
        }
        __syncthreads();
        const int bi = *pick;
        for (int i = tid; i < M; i += bd) U[col * M + i] = i == bi ? (T)1 : (T)0;
        __syncthreads();
        for (int pass = 0; pass < 2; ++pass) {
            for (int j = tid; j < col; j += bd) {
                T acc = (T)0;
                for (int i = 0; i < M; ++i) acc = acc + U[j * M + i] * U[col * M + i];
                dots[j] = acc;
            }
            __syncthreads();
            for (int i = tid; i < M; i += bd) {
                T acc = U[col * M + i];
                for (int j = 0; j < col; ++j) acc = acc - dots[j] * U[j * M + i];
                U[col * M + i] = acc;
            }
            __syncthreads();
        }
        if (tid == 0) {
            T acc = (T)0;
            for (int i = 0; i < M; ++i) acc = acc + U[col * M + i] * U[col * M + i];
            *sc = nxk_mx<T>::root(acc);
        }
        __syncthreads();
        const T norm = *sc;
        for (int i = tid; i < M; i += bd) U[col * M + i] = U[col * M + i] / norm;
        __syncthreads();
    }
}

// One-sided (Hestenes) Jacobi on W's columns: sweeps of round-robin rounds; a
// pair (p, q) with |g| > M u sqrt(alpha) sqrt(beta) (alpha, beta, g: the
// columns' chained sums of squares and products) rotates W's columns (and
// V's) by the rotation of [[alpha, g], [g, beta]]. Then sigma_c = sqrt(chained
// sum of W_ic^2), s descending (ties by index), U's column r = W's column of
// s[r] over its sigma, and columns of zero sigma, and the complete ones,
// completed (nxk_mx_complete). a = W: u = U, vh = V^T; a = W^T: u = V, vh = U^T.
template <class T>
__global__ void __launch_bounds__(NXK_MX_THREADS)
nxk_mx_svd(const nxk_i64* __restrict__ d, nxk_i64 nb, int m, int n, int mode, const T* a, T* u, T* s,
           T* vh) {
    const int tr = m < n, M = tr ? n : m, N = tr ? m : n;
    const int vec = mode != 0, uc = mode == 2 ? M : N;
    const int np = N + (N & 1), P = np / 2;
    T* W = reinterpret_cast<T*>(nxk_dynamic_shared);
    T* U = W + M * N;
    T* V = U + (vec ? M * uc : 0);
    T* sg = V + (vec ? N * N : 0);
    T* tmp = sg + N;
    T* dots = tmp + M;
    T* sc = dots + M;
    T* cs = sc + 1;
    int* ord = reinterpret_cast<int*>(cs + 2 * P);
    int* rot = ord + N;
    int* pick = rot + P;
    const T tol = (T)M * nxk_mx<T>::unit();
    const int tid = (int)threadIdx.x, bd = (int)blockDim.x;
    for (nxk_i64 t = blockIdx.x; t < nb; t += gridDim.x) {
        nxk_i64 pos[4];
        const nxk_i64* rc = nxk_mx_at<4>(d, t, pos);
        int bad = 0;
        for (int e = tid; e < M * N; e += bd) {
            const int c = e / M, i = e % M;  // W_ic
            const T x = tr ? a[pos[0] + c * rc[0] + i * rc[1]] : a[pos[0] + i * rc[0] + c * rc[1]];
            W[e] = x;
            if (!nxk_mx_finite(x)) bad = 1;
        }
        if (vec)
            for (int e = tid; e < N * N; e += bd) V[e] = e / N == e % N ? (T)1 : (T)0;
        int fail = __syncthreads_or(bad);
        int busy = !fail, sweeps = 0;
        while (busy && sweeps < NXK_MX_SWEEPS) {
            int mine = 0;
            for (int round = 0; round < np - 1; ++round) {
                for (int p = tid; p < P; p += bd) {
                    int lo, hi;
                    nxk_mx_pair(np, round, p, &lo, &hi);
                    int go = 0;
                    if (hi < N) {
                        T al = (T)0, be = (T)0, ga = (T)0;
                        for (int i = 0; i < M; ++i) {
                            const T x = W[lo * M + i], y = W[hi * M + i];
                            al = al + x * x;
                            be = be + y * y;
                            ga = ga + x * y;
                        }
                        if (nxk_mx<T>::mag(ga) > tol * nxk_mx<T>::root(al) * nxk_mx<T>::root(be)) {
                            nxk_mx_rotation(al, be, ga, &cs[2 * p], &cs[2 * p + 1]);
                            go = 1;
                        }
                    }
                    rot[p] = go;
                    mine |= go;
                }
                __syncthreads();
                for (int e = tid; e < P * M; e += bd) {
                    const int p = e / M, i = e % M;
                    if (!rot[p]) continue;
                    int lo, hi;
                    nxk_mx_pair(np, round, p, &lo, &hi);
                    const T c = cs[2 * p], sn = cs[2 * p + 1];
                    const T x = W[lo * M + i], y = W[hi * M + i];
                    W[lo * M + i] = c * x - sn * y;
                    W[hi * M + i] = sn * x + c * y;
                }
                if (vec)
                    for (int e = tid; e < P * N; e += bd) {
                        const int p = e / N, i = e % N;
                        if (!rot[p]) continue;
                        int lo, hi;
                        nxk_mx_pair(np, round, p, &lo, &hi);
                        const T c = cs[2 * p], sn = cs[2 * p + 1];
                        const T x = V[lo * N + i], y = V[hi * N + i];
                        V[lo * N + i] = c * x - sn * y;
                        V[hi * N + i] = sn * x + c * y;
                    }
                __syncthreads();
            }
            busy = __syncthreads_or(mine);
            ++sweeps;
        }
        bad = busy || fail;
        for (int c = tid; c < N; c += bd) {
            T acc = (T)0;
            for (int i = 0; i < M; ++i) acc = acc + W[c * M + i] * W[c * M + i];
            sg[c] = nxk_mx<T>::root(acc);
            if (!nxk_mx_finite(sg[c])) bad = 1;
        }
        __syncthreads();
        for (int c = tid; c < N; c += bd) {
            int r = 0;
            for (int j = 0; j < N; ++j)
                if (sg[j] > sg[c] || (sg[j] == sg[c] && j < c)) ++r;
            ord[r] = c;
        }
        fail = __syncthreads_or(bad);
        if (vec && !fail) {
            int live = 0;
            for (int c = 0; c < N; ++c) live += sg[c] > (T)0;
            for (int e = tid; e < M * live; e += bd) {
                const int r = e / M, i = e % M, c = ord[r];
                U[r * M + i] = W[c * M + i] / sg[c];
            }
            __syncthreads();
            nxk_mx_complete(U, M, live, uc, tmp, dots, sc, pick);
            bad = 0;
            for (int e = tid; e < M * uc; e += bd)
                if (!nxk_mx_finite(U[e])) bad = 1;
            for (int e = tid; e < N * N; e += bd)
                if (!nxk_mx_finite(V[e])) bad = 1;
            fail = __syncthreads_or(bad);
        }
        const T qnan = nxk_mx<T>::nan();
        for (int r = tid; r < N; r += bd) s[pos[2] + r * rc[5]] = fail ? qnan : sg[ord[r]];
        if (vec) {
            // The factor on W's side: u (rows < m, M of them) or vh's rows (uc of them).
            for (int e = tid; e < M * uc; e += bd) {
                const int r = e / M, i = e % M;
                const T x = fail ? qnan : U[r * M + i];
                if (tr) vh[pos[3] + r * rc[6] + i * rc[7]] = x;
                else u[pos[1] + i * rc[2] + r * rc[3]] = x;
            }
            // The factor on V's side: vh's rows (n = N) or u's columns (m = N).
            for (int e = tid; e < N * N; e += bd) {
                const int r = e / N, i = e % N;
                const T x = fail ? qnan : V[ord[r] * N + i];
                if (tr) u[pos[1] + i * rc[2] + r * rc[3]] = x;
                else vh[pos[3] + r * rc[6] + i * rc[7]] = x;
            }
        }
        __syncthreads();
    }
}

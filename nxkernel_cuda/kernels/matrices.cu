// matrices.cu: the factorisations of the batched matrix routines: cholesky,
// lu, qr and solve_triangular (nxk_mx_trsm). The rules every routine keeps
// (one block a matrix, descriptors, determinism, failures) are in
// nxk_matrix.cuh.
#include "nxk_matrix.cuh"

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

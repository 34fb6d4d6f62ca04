// jacobi.cu: the batched matrix routines computed by Jacobi sweeps: eigh
// (cyclic two-sided) and svd (one-sided, Hestenes). The rules every routine
// keeps (one block a matrix, descriptors, determinism, failures) are in
// nxk_matrix.cuh.
#include "nxk_matrix.cuh"

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

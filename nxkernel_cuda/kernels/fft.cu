// fft.cu: the Fourier transform kernels (nxkernel_cuda/fourier.py).
//
// Every transform runs on lines: L contiguous sequences of n complex points
// of the working precision T (float for complex64, double for complex128),
// line l at l * n. Gathers fill them from any layout and scatter them back.
//
// * nxk_fft_pass<T>: one pass of the Stockham autosort algorithm of radix P
//   (Govindaraju et al., SC 2008): for each j < n / P of each line, with
//   Ns the product of the earlier passes' radices,
//     v[r] = src[j + r n/P] * w(r (j mod Ns), Ns P),   r < P,
//     v = DFT_P(v),
//     dst[(j / Ns) Ns P + j mod Ns + r Ns] = v[r],
//   w(m, K) = e^(sign 2 pi i m / K). A block takes B consecutive j into
//   shared memory and runs DFT_P there as Stockham stages of radix 2, 3, 4,
//   5, 7 or 8 (the same rule inside, on a table of the P-th roots), between
//   two buffers. Passes never read what they write: src and dst differ.
// * Twiddles and chirps: nxk_fft_root computes w(m, K) in double from the
//   exact integer reduction of m / K to an angle in [0, pi/4] (quadrant and
//   octant symmetries), then rounds each part once into T.
// * Packed real lines (R2c and C2r along a real axis of even n = 2h): a real
//   line of n points is read as h complex points z_j = x_2j + i x_2j+1
//   (nxk_fft_gather mode 3, or in place), transformed as such, and
//   nxk_fft_r2c_post turns Z = DFT_h(z) into bins 0..h; C2r the reverse:
//   nxk_fft_c2r_pre turns bins 0..h into h complex points whose transform
//   of h points is the real line itself, its parts in order (written in
//   place, or by nxk_fft_scatter mode 2).
// * Bluestein (lengths with a prime factor above 7): nxk_fft_chirp_in,
//   nxk_fft_pointwise and nxk_fft_chirp_out around two power-of-two passes;
//   nxk_fft_chirp_b makes the convolution's kernel, which the host
//   transforms once in double.
// * No atomics and a fixed order of operations: the same bits on every run.
#include "nxk_scalar.cuh"
#include "nxk_loop.cuh"

// A complex number of T, aligned as T (so complex64/128 arrays at any element
// offset may be read in place).
template <class T>
struct nxk_cx {
    T re, im;
};

template <class T>
__device__ __forceinline__ nxk_cx<T> nxk_cx_of(T re, T im) {
    nxk_cx<T> z;
    z.re = re;
    z.im = im;
    return z;
}
template <class T>
__device__ __forceinline__ nxk_cx<T> nxk_cadd(nxk_cx<T> a, nxk_cx<T> b) { return nxk_cx_of(a.re + b.re, a.im + b.im); }
template <class T>
__device__ __forceinline__ nxk_cx<T> nxk_csub(nxk_cx<T> a, nxk_cx<T> b) { return nxk_cx_of(a.re - b.re, a.im - b.im); }
// Each product rounded, then the difference and the sum (no fma).
template <class T>
__device__ __forceinline__ nxk_cx<T> nxk_cmul(nxk_cx<T> a, nxk_cx<T> b) {
    const T rr = a.re * b.re, ii = a.im * b.im, ri = a.re * b.im, ir = a.im * b.re;
    return nxk_cx_of(rr - ii, ri + ir);
}
// a * (sign i), exact.
template <class T>
__device__ __forceinline__ nxk_cx<T> nxk_cmul_i(nxk_cx<T> a, int sign) {
    return sign > 0 ? nxk_cx_of(-a.im, a.re) : nxk_cx_of(a.im, -a.re);
}

// w(m, k) = e^(sign 2 pi i m / k) for 0 <= m < k < 2^60, in double: the
// quadrant q = floor(4m / k) and the rest r = 4m - qk are exact integers
// (found by at most three subtractions), the rest r / k of a quarter turn is
// folded to [0, 1/2] (cos and sin swap), so sin and cos see one angle
// t = (r / k)(pi / 2) in [0, pi / 4], within a few ulps.
__device__ __noinline__ void nxk_fft_root(nxk_i64 m, nxk_i64 k, int sign, double* c, double* s) {
    nxk_i64 r = 4 * m;
    int q = 0;
    while (r >= k) {
        r -= k;
        ++q;
    }
    const bool swap = 2 * r > k;
    if (swap) r = k - r;
    const double t = ((double)r / (double)k) * 1.5707963267948966;
    const double st = sin(t), ct = cos(t);
    const double ca = swap ? st : ct, sa = swap ? ct : st;
    double cc, ss;
    switch (q & 3) {
        case 0: cc = ca; ss = sa; break;
        case 1: cc = -sa; ss = ca; break;
        case 2: cc = -ca; ss = -sa; break;
        default: cc = sa; ss = -ca; break;
    }
    *c = cc;
    *s = sign > 0 ? ss : -ss;
}

template <class T>
__device__ __forceinline__ nxk_cx<T> nxk_fft_w(nxk_i64 m, nxk_i64 k, int sign) {
    double c, s;
    nxk_fft_root(m, k, sign, &c, &s);
    return nxk_cx_of((T)c, (T)s);
}

// ---------------------------------------------------------------------------
// Butterflies: v <- DFT_R(v) in direction sign; tab holds the P-th roots
// w(m, P) and step = P / R, so tab[m step] = w(m, R).
// ---------------------------------------------------------------------------

template <class T, int R>
struct nxk_bfly {
    // The direct sums y_k = v_0 + sum_r v_r w(r k mod R, R), for R = 3, 5, 7.
    __device__ __forceinline__ static void run(nxk_cx<T>* v, int sign, const nxk_cx<T>* tab, int step) {
        nxk_cx<T> y[R];
#pragma unroll
        for (int k = 0; k < R; ++k) {
            nxk_cx<T> acc = v[0];
#pragma unroll
            for (int r = 1; r < R; ++r) acc = nxk_cadd(acc, nxk_cmul(v[r], tab[((r * k) % R) * step]));
            y[k] = acc;
        }
#pragma unroll
        for (int k = 0; k < R; ++k) v[k] = y[k];
    }
};

template <class T>
struct nxk_bfly<T, 2> {
    __device__ __forceinline__ static void run(nxk_cx<T>* v, int, const nxk_cx<T>*, int) {
        const nxk_cx<T> a = v[0], b = v[1];
        v[0] = nxk_cadd(a, b);
        v[1] = nxk_csub(a, b);
    }
};

template <class T>
__device__ __forceinline__ void nxk_dft4(nxk_cx<T> v0, nxk_cx<T> v1, nxk_cx<T> v2, nxk_cx<T> v3, int sign,
                                         nxk_cx<T>* y0, nxk_cx<T>* y1, nxk_cx<T>* y2, nxk_cx<T>* y3) {
    const nxk_cx<T> a = nxk_cadd(v0, v2), b = nxk_csub(v0, v2), c = nxk_cadd(v1, v3);
    const nxk_cx<T> d = nxk_cmul_i(nxk_csub(v1, v3), sign);
    *y0 = nxk_cadd(a, c);
    *y2 = nxk_csub(a, c);
    *y1 = nxk_cadd(b, d);
    *y3 = nxk_csub(b, d);
}

template <class T>
struct nxk_bfly<T, 4> {
    __device__ __forceinline__ static void run(nxk_cx<T>* v, int sign, const nxk_cx<T>*, int) {
        nxk_dft4(v[0], v[1], v[2], v[3], sign, &v[0], &v[1], &v[2], &v[3]);
    }
};

// Radix 8: DFT4 of the even and the odd points, the odd ones' k-th output
// turned by w(k, 8) (k = 2 exactly, k = 1 and 3 by sqrt(1/2)(+-1 + sign i)).
template <class T>
struct nxk_bfly<T, 8> {
    __device__ __forceinline__ static void run(nxk_cx<T>* v, int sign, const nxk_cx<T>*, int) {
        nxk_cx<T> e[4], o[4];
        nxk_dft4(v[0], v[2], v[4], v[6], sign, &e[0], &e[1], &e[2], &e[3]);
        nxk_dft4(v[1], v[3], v[5], v[7], sign, &o[0], &o[1], &o[2], &o[3]);
        const T h = (T)0.70710678118654752440;
        const T sg = (T)sign;
        // o1 * h (1 + sign i), o3 * h (-1 + sign i)
        o[1] = nxk_cx_of((o[1].re - sg * o[1].im) * h, (o[1].im + sg * o[1].re) * h);
        o[2] = nxk_cmul_i(o[2], sign);
        o[3] = nxk_cx_of((-o[3].re - sg * o[3].im) * h, (sg * o[3].re - o[3].im) * h);
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            v[k] = nxk_cadd(e[k], o[k]);
            v[k + 4] = nxk_csub(e[k], o[k]);
        }
    }
};

// One Stockham stage of radix R over B sequences of P points (sequence b at
// b * (P + 1): the pad spreads a column of the B sequences over the banks),
// x to y in shared memory: butterfly jj < P / R of a sequence reads
// x[jj + r P/R], turns it by w(r (jj mod ns), ns R), and writes
// y[(jj / ns) ns R + jj mod ns + r ns].
template <class T, int R>
__device__ __noinline__ void nxk_fft_stage(const nxk_cx<T>* x, nxk_cx<T>* y, const nxk_cx<T>* tab, int P, int ns,
                                           int B, int sign) {
    const int per = P / R;
    const int tstep = P / (ns * R);
    for (int q = (int)threadIdx.x; q < B * per; q += (int)blockDim.x) {
        const int b = q / per, jj = q - b * per;
        const nxk_cx<T>* xs = x + b * (P + 1);
        nxk_cx<T>* ys = y + b * (P + 1);
        const int k = jj % ns;
        nxk_cx<T> v[R];
#pragma unroll
        for (int r = 0; r < R; ++r) v[r] = xs[jj + r * per];
        if (k != 0) {
#pragma unroll
            for (int r = 1; r < R; ++r) v[r] = nxk_cmul(v[r], tab[r * k * tstep]);
        }
        nxk_bfly<T, R>::run(v, sign, tab, P / R);
        const int base = (jj / ns) * ns * R + k;
#pragma unroll
        for (int r = 0; r < R; ++r) ys[base + r * ns] = v[r];
    }
}

// One global pass (see the header): lines of n points from src to dst,
// radix P = the product of the nst radices packed 4 bits each in `radices`
// (first stage lowest), ns the earlier passes' product, B points j a block.
// Dynamic shared memory: P roots, two buffers of B (P + 1) points, then per point
// j of the group its source and destination positions and j mod ns (the
// divisions done once a point, not once an element).
template <class T>
__global__ void __launch_bounds__(256)
nxk_fft_pass(const nxk_cx<T>* __restrict__ src, nxk_cx<T>* __restrict__ dst, nxk_i64 lines, nxk_i64 n,
             nxk_i64 ns, int P, int B, int nst, nxk_i64 radices, int sign)
{
    nxk_cx<T>* tab = reinterpret_cast<nxk_cx<T>*>(nxk_dynamic_shared);
    nxk_cx<T>* buf0 = tab + P;
    nxk_cx<T>* buf1 = buf0 + B * (P + 1);
    nxk_i64* sbase = reinterpret_cast<nxk_i64*>(buf1 + B * (P + 1));   // -1: past the last point
    nxk_i64* dbase = sbase + B;
    int* jmod = reinterpret_cast<int*>(dbase + B);
    const int tid = (int)threadIdx.x, nt = (int)blockDim.x;
    for (int m = tid; m < P; m += nt) tab[m] = nxk_fft_w<T>(m, P, sign);
    const nxk_i64 per_line = n / P;                  // points j of a line
    const nxk_i64 total = lines * per_line;          // points j of all lines
    const nxk_i64 groups = (total + B - 1) / B;
    const bool load_runs = per_line == 1;            // a sequence is P contiguous points
    const bool store_runs = ns == 1;                 // a sequence's outputs are contiguous
    for (nxk_i64 g = blockIdx.x; g < groups; g += gridDim.x) {
        const nxk_i64 j0 = g * B;
        __syncthreads();  // the table is written; the last group's buffers are read
        for (int b = tid; b < B; b += nt) {
            const nxk_i64 jg = j0 + b;
            if (jg < total) {
                const nxk_i64 line = jg / per_line, j = jg - line * per_line;
                const nxk_i64 jm = j % ns;
                sbase[b] = line * n + j;
                dbase[b] = line * n + (j - jm) * P + jm;
                jmod[b] = (int)jm;
            } else {
                sbase[b] = -1;
            }
        }
        __syncthreads();
        for (int e = tid; e < B * P; e += nt) {
            const int b = load_runs ? e / P : e % B;
            const int r = load_runs ? e % P : e / B;
            nxk_cx<T> v = nxk_cx_of((T)0, (T)0);
            if (sbase[b] >= 0) {
                v = src[sbase[b] + (nxk_i64)r * per_line];
                const int jm = jmod[b];
                if (r != 0 && jm != 0) v = nxk_cmul(v, nxk_fft_w<T>((nxk_i64)r * jm, ns * P, sign));
            }
            buf0[b * (P + 1) + r] = v;
        }
        nxk_cx<T>* x = buf0;
        nxk_cx<T>* y = buf1;
        int inner = 1;
        for (int s = 0; s < nst; ++s) {
            __syncthreads();
            const int R = (int)((radices >> (4 * s)) & 15);
            switch (R) {
                case 2: nxk_fft_stage<T, 2>(x, y, tab, P, inner, B, sign); break;
                case 3: nxk_fft_stage<T, 3>(x, y, tab, P, inner, B, sign); break;
                case 4: nxk_fft_stage<T, 4>(x, y, tab, P, inner, B, sign); break;
                case 5: nxk_fft_stage<T, 5>(x, y, tab, P, inner, B, sign); break;
                case 7: nxk_fft_stage<T, 7>(x, y, tab, P, inner, B, sign); break;
                default: nxk_fft_stage<T, 8>(x, y, tab, P, inner, B, sign); break;
            }
            inner *= R;
            nxk_cx<T>* t = x;
            x = y;
            y = t;
        }
        __syncthreads();
        for (int e = tid; e < B * P; e += nt) {
            const int b = store_runs ? e / P : e % B;
            const int k = store_runs ? e % P : e / B;
            if (sbase[b] >= 0) dst[dbase[b] + (nxk_i64)k * ns] = x[b * (P + 1) + k];
        }
    }
}

// ---------------------------------------------------------------------------
// Gathers and scatters between any layout and the lines.
// ---------------------------------------------------------------------------

// out[l n + k] for k < n from the source line l (its first point at the
// position walk `lw` gives l, points `step` elements apart):
// mode 0, a complex line of n points; mode 1, a real one (imaginary parts 0);
// mode 2, the Hermitian extension of n / 2 + 1 complex bins: bin k for
// k <= n / 2 (bin 0's and, n even, bin n/2's imaginary part dropped), the
// conjugate of bin n - k above; mode 3, a real line of 2n points read in
// pairs, point k = (x_2k, x_2k+1).
template <class T>
__global__ void nxk_fft_gather(const nxk_i64* __restrict__ lw, const char* __restrict__ src, nxk_i64 step,
                               int mode, nxk_i64 lines, nxk_i64 n, nxk_cx<T>* __restrict__ out)
{
    const nxk_i64 total = lines * n;
    const nxk_i64 stride = (nxk_i64)gridDim.x * blockDim.x;
    for (nxk_i64 i = (nxk_i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        const nxk_i64 l = i / n, k = i - l * n;
        nxk_i64 pos[1];
        nxk_walk<1>(lw, l, pos);
        nxk_cx<T> v;
        if (mode == 1) {
            v = nxk_cx_of(reinterpret_cast<const T*>(src)[pos[0] + k * step], (T)0);
        } else if (mode == 3) {
            const T* x = reinterpret_cast<const T*>(src) + pos[0] + 2 * k * step;
            v = nxk_cx_of(x[0], x[step]);
        } else if (mode == 0) {
            v = reinterpret_cast<const nxk_cx<T>*>(src)[pos[0] + k * step];
        } else {
            const bool upper = 2 * k > n;
            v = reinterpret_cast<const nxk_cx<T>*>(src)[pos[0] + (upper ? n - k : k) * step];
            if (upper) v.im = -v.im;
            if (k == 0 || 2 * k == n) v.im = (T)0;
        }
        out[i] = v;
    }
}

// The first h points of each line l of `in` (n points a line) to the target
// line l (the walk `lw`, points `step` elements apart): mode 0, complex;
// mode 1, the real parts alone; mode 2, a real line of 2h points, point k's
// parts at 2k and 2k + 1.
template <class T>
__global__ void nxk_fft_scatter(const nxk_i64* __restrict__ lw, char* __restrict__ dst, nxk_i64 step,
                                int mode, nxk_i64 lines, nxk_i64 n, nxk_i64 h,
                                const nxk_cx<T>* __restrict__ in)
{
    const nxk_i64 total = lines * h;
    const nxk_i64 stride = (nxk_i64)gridDim.x * blockDim.x;
    for (nxk_i64 i = (nxk_i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        const nxk_i64 l = i / h, k = i - l * h;
        nxk_i64 pos[1];
        nxk_walk<1>(lw, l, pos);
        const nxk_cx<T> v = in[l * n + k];
        if (mode == 1) {
            reinterpret_cast<T*>(dst)[pos[0] + k * step] = v.re;
        } else if (mode == 2) {
            T* x = reinterpret_cast<T*>(dst) + pos[0] + 2 * k * step;
            x[0] = v.re;
            x[step] = v.im;
        } else {
            reinterpret_cast<nxk_cx<T>*>(dst)[pos[0] + k * step] = v;
        }
    }
}

// ---------------------------------------------------------------------------
// Packed real lines of n = 2h points, w = w(1, n) = e^(sign 2 pi i / n).
// With E and O the transforms of h points of the even and the odd points,
// X_k = E_k + w^k O_k, X_(k+h) = E_k - w^k O_k, and for Z = E + i O (the
// transform of z_j = x_2j + i x_2j+1), E_k = (Z_k + conj Z_(h-k)) / 2,
// O_k = -i (Z_k - conj Z_(h-k)) / 2 (indices mod h).
// ---------------------------------------------------------------------------

// R2c: bins k = 0..h of line l from Z (lines of h points at l h) to the
// target line l (the walk `lw`, bins `step` complex elements apart):
// s = Z_k + conj Z_(h-k), d = Z_k - conj Z_(h-k), p = d w^k (nxk_cmul), then
// X_k = (s - i p) / 2, the halving exact barring underflow.
template <class T>
__global__ void nxk_fft_r2c_post(const nxk_i64* __restrict__ lw, char* __restrict__ dst, nxk_i64 step,
                                 nxk_i64 lines, nxk_i64 h, const nxk_cx<T>* __restrict__ z, int sign)
{
    const nxk_i64 per = h + 1;
    const nxk_i64 total = lines * per;
    const nxk_i64 stride = (nxk_i64)gridDim.x * blockDim.x;
    for (nxk_i64 i = (nxk_i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        const nxk_i64 l = i / per, k = i - l * per;
        nxk_i64 pos[1];
        nxk_walk<1>(lw, l, pos);
        const nxk_cx<T> a = z[l * h + (k == h ? 0 : k)];
        const nxk_cx<T> c = z[l * h + (k == 0 ? 0 : h - k)];
        const nxk_cx<T> b = nxk_cx_of(c.re, -c.im);
        const nxk_cx<T> s = nxk_cadd(a, b), d = nxk_csub(a, b);
        const nxk_cx<T> p = nxk_cmul(d, nxk_fft_w<T>(k, 2 * h, sign));
        const T half = (T)0.5;
        const nxk_cx<T> x = nxk_cx_of((s.re + p.im) * half, (s.im - p.re) * half);
        reinterpret_cast<nxk_cx<T>*>(dst)[pos[0] + k * step] = x;
    }
}

// C2r: the h points C_k = s + i p of line l (out, lines of h at l h) from the
// source line l of h + 1 bins Y (the walk `lw`, bins `step` complex elements
// apart; bin 0's and bin h's imaginary parts dropped): s = Y_k + conj Y_(h-k),
// d = Y_k - conj Y_(h-k), p = d w^k (nxk_cmul). The transform of h points of
// C in direction sign is z_j = x_2j + i x_2j+1, x the transform of the
// Hermitian extension of Y.
template <class T>
__global__ void nxk_fft_c2r_pre(const nxk_i64* __restrict__ lw, const char* __restrict__ src, nxk_i64 step,
                                nxk_i64 lines, nxk_i64 h, nxk_cx<T>* __restrict__ out, int sign)
{
    const nxk_i64 total = lines * h;
    const nxk_i64 stride = (nxk_i64)gridDim.x * blockDim.x;
    for (nxk_i64 i = (nxk_i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        const nxk_i64 l = i / h, k = i - l * h;
        nxk_i64 pos[1];
        nxk_walk<1>(lw, l, pos);
        const nxk_cx<T>* y = reinterpret_cast<const nxk_cx<T>*>(src) + pos[0];
        nxk_cx<T> a = y[k * step];
        const nxk_cx<T> c = y[(h - k) * step];
        nxk_cx<T> b = nxk_cx_of(c.re, -c.im);
        if (k == 0) {
            a.im = (T)0;
            b.im = (T)0;
        }
        const nxk_cx<T> s = nxk_cadd(a, b), d = nxk_csub(a, b);
        const nxk_cx<T> p = nxk_cmul(d, nxk_fft_w<T>(k, 2 * h, sign));
        out[i] = nxk_cx_of(s.re - p.im, s.im + p.re);
    }
}

// nbytes zero bytes at dst: the result of an empty sum.
__global__ void nxk_fft_zero(unsigned char* __restrict__ dst, nxk_i64 nbytes)
{
    const nxk_i64 stride = (nxk_i64)gridDim.x * blockDim.x;
    for (nxk_i64 i = (nxk_i64)blockIdx.x * blockDim.x + threadIdx.x; i < nbytes; i += stride) dst[i] = 0;
}

// ---------------------------------------------------------------------------
// Bluestein: y_k = c_k sum_j (x_j c_j) conj(c_(k-j)), c_j = w(j^2 mod 2n, 2n),
// the convolution cyclic over m >= 2n - 1 points.
// ---------------------------------------------------------------------------

// out[l m + j] = in[l n + j] c_j for j < n, else 0.
template <class T>
__global__ void nxk_fft_chirp_in(const nxk_cx<T>* __restrict__ in, nxk_cx<T>* __restrict__ out, nxk_i64 lines,
                                 nxk_i64 n, nxk_i64 m, int sign)
{
    const nxk_i64 total = lines * m;
    const nxk_i64 stride = (nxk_i64)gridDim.x * blockDim.x;
    for (nxk_i64 i = (nxk_i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        const nxk_i64 l = i / m, j = i - l * m;
        nxk_cx<T> v = nxk_cx_of((T)0, (T)0);
        if (j < n) v = nxk_cmul(in[l * n + j], nxk_fft_w<T>((j * j) % (2 * n), 2 * n, sign));
        out[i] = v;
    }
}

// The kernel b of the convolution, m points in double: b_j = conj(c_j) at
// j and m - j for j < n, else 0.
__global__ void nxk_fft_chirp_b(nxk_cx<double>* __restrict__ b, nxk_i64 n, nxk_i64 m, int sign)
{
    const nxk_i64 stride = (nxk_i64)gridDim.x * blockDim.x;
    for (nxk_i64 i = (nxk_i64)blockIdx.x * blockDim.x + threadIdx.x; i < m; i += stride) {
        const nxk_i64 j = i < n ? i : m - i;
        nxk_cx<double> v = nxk_cx_of(0.0, 0.0);
        if (j < n) v = nxk_fft_w<double>((j * j) % (2 * n), 2 * n, -sign);
        b[i] = v;
    }
}

// a[l m + k] *= bh[k], bh rounded once into T.
template <class T>
__global__ void nxk_fft_pointwise(nxk_cx<T>* __restrict__ a, const nxk_cx<double>* __restrict__ bh,
                                  nxk_i64 lines, nxk_i64 m)
{
    const nxk_i64 total = lines * m;
    const nxk_i64 stride = (nxk_i64)gridDim.x * blockDim.x;
    for (nxk_i64 i = (nxk_i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        const nxk_cx<double> w = bh[i % m];
        a[i] = nxk_cmul(a[i], nxk_cx_of((T)w.re, (T)w.im));
    }
}

// out[l n + k] = c_k (in[l m + k] / m), k < n; m a power of two, so the
// division is exact barring underflow.
template <class T>
__global__ void nxk_fft_chirp_out(const nxk_cx<T>* __restrict__ in, nxk_cx<T>* __restrict__ out, nxk_i64 lines,
                                  nxk_i64 n, nxk_i64 m, int sign)
{
    const nxk_i64 total = lines * n;
    const nxk_i64 stride = (nxk_i64)gridDim.x * blockDim.x;
    const T inv = (T)1 / (T)m;
    for (nxk_i64 i = (nxk_i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        const nxk_i64 l = i / n, k = i - l * n;
        const nxk_cx<T> v = in[l * m + k];
        out[i] = nxk_cmul(nxk_cx_of(v.re * inv, v.im * inv), nxk_fft_w<T>((k * k) % (2 * n), 2 * n, sign));
    }
}

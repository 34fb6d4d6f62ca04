// nxk_stats.cuh: the states and combinations of the Logsumexp and Moments
// reductions and scans and of the Arg scans (nxkernel_cuda/statistics.py),
// and the odd/even network's two passes over one chunk of a row of states,
// whatever gives the states.
//
// * Logsumexp scan: a state is a log-sum-exp in double; lse(a, b) is
//   h + log1p(exp(l - h)), h and l the larger and the smaller, a NaN where
//   either is, h where h is infinite: the host library's combination.
// * Moments scan: a state is (count, mean, M2) in double, merged by Chan's
//   rule, the earlier state first; a count-0 state leaves the other; an
//   infinite or NaN mean gives the sum of the means and a NaN M2. Every
//   operation rounds once (no fma: the library compiles with --fmad=false),
//   so the bits are the host library's.
// * Arg scan: a state is an NxkExt (nxk_reduce.cuh), whose combination is
//   associative and commutative: every network gives the exact result.
// * A chunk source P gives `State`, `Op op` (the combination), `state(s)`
//   (state s of the block's row) and `store(s, v)` (result s); the passes are
//   those of nxk_reduce.cuh's network, so a row cut into chunks has the
//   whole row's network bits.
#ifndef NXK_STATS_CUH
#define NXK_STATS_CUH

#include "nxk_common.cuh"
#include "nxk_loop.cuh"
#include "nxk_reduce.cuh"
#include "nxk_scalar.cuh"

#define NXK_DBL_MAX 1.7976931348623157e308

// Whether v is a finite number (a NaN is not).
__device__ __forceinline__ bool nxk_finite(double v) { return fabs(v) <= NXK_DBL_MAX; }
__device__ __forceinline__ double nxk_inf() { return nxk_f64_of_bits(0x7FF0000000000000ull); }

// The greater of a and b, a NaN where either is (a Logsumexp's m: which
// NaN, or which zero, changes no result).
__device__ __forceinline__ double nxk_nanmax(double a, double b) { return a != a ? a : (b != b || b > a ? b : a); }

// exp in the carrier of a Logsumexp's terms.
__device__ __forceinline__ float nxk_exp_c(float v) { return expf(v); }
__device__ __forceinline__ double nxk_exp_c(double v) { return exp(v); }

// log(exp a + exp b), the earlier state a.
__device__ __forceinline__ double nxk_lse2(double a, double b) {
    if (a != a || b != b) return nxk_f64_of_bits(NXK_QNAN_F64);
    const double hi = a > b ? a : b;
    const double lo = a > b ? b : a;
    if (!nxk_finite(hi)) return hi;
    return hi + log1p(exp(lo - hi));
}

struct NxkLseOp {
    typedef double State;
    __device__ __forceinline__ State combine(State a, State b) const { return nxk_lse2(a, b); }
    __device__ static NxkLseOp make(int) { return NxkLseOp(); }
};

struct NxkMom {
    double n;
    double mean;
    double m2;
};

// Chan's merge of (count, mean, M2) states, the earlier state a.
__device__ __forceinline__ NxkMom nxk_mom_merge(NxkMom a, NxkMom b) {
    if (a.n == 0.0) return b;
    if (b.n == 0.0) return a;
    NxkMom r;
    r.n = a.n + b.n;
    if (!(nxk_finite(a.mean) && nxk_finite(b.mean))) {
        r.mean = a.mean + b.mean;
        r.m2 = nxk_f64_of_bits(NXK_QNAN_F64);
        return r;
    }
    const double d = b.mean - a.mean;
    const double w = b.n / r.n;
    r.mean = a.mean + d * w;
    r.m2 = a.m2 + b.m2 + d * d * (a.n * w);
    return r;
}

struct NxkMomOp {
    typedef NxkMom State;
    __device__ __forceinline__ State combine(State a, State b) const { return nxk_mom_merge(a, b); }
    __device__ static NxkMomOp make(int) { return NxkMomOp(); }
};

struct NxkArgOp {
    typedef NxkExt State;
    int is_max;
    __device__ __forceinline__ State combine(State a, State b) const { return nxk_ext_combine(is_max, a, b); }
    __device__ static NxkArgOp make(int is_max) {
        NxkArgOp o;
        o.is_max = is_max;
        return o;
    }
};

// The up-swept total of full chunk k (csize states) of the source's row,
// into *total by thread 0. Every thread of the block calls it.
template <class P>
__device__ void nxk_net_total(const P& p, nxk_i64 k, int csize, typename P::State* total) {
    typedef typename P::State State;
    State* a = reinterpret_cast<State*>(nxk_dynamic_shared);
    const nxk_i64 s0 = k * csize;
    for (int j = (int)threadIdx.x; j < csize; j += (int)blockDim.x) a[j] = p.state(s0 + j);
    __syncthreads();
    nxk_upsweep(p.op, a, csize);
    if (threadIdx.x == 0) *total = a[csize - 1];
    __syncthreads();  // shared memory is reused by the next block index
}

// The results of chunk k of the source's row of m states, after the row's
// scanned full-chunk totals `sc` (those of the chunks before it). Every
// thread of the block calls it.
template <class P>
__device__ void nxk_net_chunk(const P& p, nxk_i64 k, nxk_i64 m, int csize, const typename P::State* sc) {
    typedef typename P::State State;
    State* a = reinterpret_cast<State*>(nxk_dynamic_shared);
    const nxk_i64 s0 = k * csize;
    const int len = (int)(m - s0 < csize ? m - s0 : csize);
    for (int j = (int)threadIdx.x; j < len; j += (int)blockDim.x) a[j] = p.state(s0 + j);
    __syncthreads();
    nxk_upsweep(p.op, a, len);
    const bool full = len == csize;
    const State before = k > 0 ? sc[k - 1] : State();
    nxk_downsweep(p.op, a, len, full ? csize / 2 : nxk_floor_pow2(len), k > 0, before);
    if (full && k > 0 && threadIdx.x == 0) a[csize - 1] = sc[k];
    __syncthreads();
    for (int j = (int)threadIdx.x; j < len; j += (int)blockDim.x) p.store(s0 + j, a[j]);
    __syncthreads();  // shared memory is reused by the next block index
}

#endif  // NXK_STATS_CUH

// statistics.cu: the program-independent passes of the Logsumexp and Moments
// reductions and of the Arg, Logsumexp and Moments scans
// (nxkernel_cuda/statistics.py); the passes over a program's terms are
// generated.
//
// * nxk_stat_center: per row, its groups' first-pass values combined: the
//   greatest (a NaN where one is) for Logsumexp, the m; the chunk tree's
//   sum over n for Moments, the mean.
// * nxk_stat_finish: per row, its groups' second-pass sums combined by the
//   chunk tree, s; Logsumexp m + log s where m is finite, else m; Moments the
//   mean and s / n; each rounded once into its destination, a NaN stored as
//   the positive quiet NaN.
// * nxk_stat_totals_arr<Op> and nxk_stat_chunks_arr<Op>: the odd/even
//   network's two passes over rows of states in memory (nxk_stats.cuh), as
//   the generated passes run them over a program's terms.
#include "nxk_scalar.cuh"
#include "nxk_loop.cuh"
#include "nxk_reduce.cuh"
#include "nxk_stats.cuh"

// One thread a row; kind 0 Logsumexp, 1 Moments. partial: rows x groups doubles.
extern "C" __global__ void nxk_stat_center(nxk_i64 rows, nxk_i64 groups, int kind, nxk_i64 n,
                                           char* partial, char* center)
{
    NxkSumOp<double> add;
    add.mul = 0;
    const nxk_i64 step = (nxk_i64)gridDim.x * blockDim.x;
    for (nxk_i64 row = (nxk_i64)blockIdx.x * blockDim.x + threadIdx.x; row < rows; row += step) {
        double* p = reinterpret_cast<double*>(partial) + row * groups;
        double r;
        if (kind == 0) {
            r = p[0];
            for (nxk_i64 g = 1; g < groups; ++g) r = nxk_nanmax(r, p[g]);
        } else {
            nxk_tree_serial(add, p, groups);
            r = p[0] / (double)n;
        }
        reinterpret_cast<double*>(center)[row] = r;
    }
}

// One thread a row: walk over the results with (d0, d1).
extern "C" __global__ void nxk_stat_finish(const nxk_i64* __restrict__ walk, nxk_i64 rows, nxk_i64 groups,
                                           int kind, nxk_i64 n, int dtc, char* partial, const char* center,
                                           char* d0, char* d1)
{
    NxkSumOp<double> add;
    add.mul = 0;
    const nxk_i64 step = (nxk_i64)gridDim.x * blockDim.x;
    for (nxk_i64 row = (nxk_i64)blockIdx.x * blockDim.x + threadIdx.x; row < rows; row += step) {
        nxk_i64 pos[2];
        nxk_walk<2>(walk, row, pos);
        double* p = reinterpret_cast<double*>(partial) + row * groups;
        nxk_tree_serial(add, p, groups);
        const double c = reinterpret_cast<const double*>(center)[row];
        if (kind == 0) {
            nxk_store_float(dtc, d0, pos[0], nxk_canon_f64(nxk_finite(c) ? c + log(p[0]) : c));
        } else {
            nxk_store_float(dtc, d0, pos[0], nxk_canon_f64(c));
            nxk_store_float(dtc, d1, pos[1], nxk_canon_f64(p[0] / (double)n));
        }
    }
}

// Rows of m states in memory (row-major): the source of the array passes.
template <class Op>
struct NxkArrSrc {
    typedef typename Op::State State;
    Op op;
    const State* x;
    State* y;
    __device__ State state(nxk_i64 s) const { return x[s]; }
    __device__ void store(nxk_i64 s, State v) const { y[s] = v; }
};

// The full chunks' totals of rows of m states: block index b = (row, k),
// k < nfull, striding over `blocks` of them. param: the Op's (Arg: is_max).
template <class Op>
__global__ void __launch_bounds__(1024) nxk_stat_totals_arr(nxk_i64 m, nxk_i64 nfull, int csize, int param,
                                                            const char* src, char* totals, nxk_i64 blocks)
{
    typedef typename Op::State State;
    NxkArrSrc<Op> p;
    p.op = Op::make(param);
    p.y = nullptr;
    for (nxk_i64 b = blockIdx.x; b < blocks; b += gridDim.x) {
        const nxk_i64 row = b / nfull;
        const nxk_i64 k = b % nfull;
        p.x = reinterpret_cast<const State*>(src) + row * m;
        nxk_net_total(p, k, csize, reinterpret_cast<State*>(totals) + row * nfull + k);
    }
}

// The results of chunk k of each row after the scanned totals of the chunks
// before it (`scanned`, nfull a row): block index b = (row, k), k < q.
template <class Op>
__global__ void __launch_bounds__(1024) nxk_stat_chunks_arr(nxk_i64 m, nxk_i64 q, nxk_i64 nfull, int csize,
                                                            int param, const char* src, const char* scanned,
                                                            char* out, nxk_i64 blocks)
{
    typedef typename Op::State State;
    NxkArrSrc<Op> p;
    p.op = Op::make(param);
    for (nxk_i64 b = blockIdx.x; b < blocks; b += gridDim.x) {
        const nxk_i64 row = b / q;
        const nxk_i64 k = b % q;
        p.x = reinterpret_cast<const State*>(src) + row * m;
        p.y = reinterpret_cast<State*>(out) + row * m;
        nxk_net_chunk(p, k, m, csize, reinterpret_cast<const State*>(scanned) + row * nfull);
    }
}

// reductions.cu: the program-independent passes of the reductions and scans
// (nxkernel_cuda/reductions.py); the per-program passes are generated.
//
// * nxk_sum_finish<T>: a row's group values (a Sum's or a Prod's, carrier T)
//   combined bottom up, pairs first (the chunk tree of lane order, since each
//   group is a complete subtree but the last), then rounded once into the
//   destination: a float dtype by nxk_store_float, an integer by its bits.
// * nxk_ext_finish: a row's group values of a Max, Min or Arg combined (any
//   order gives the same winner), the extreme's bits (an infinity of e5m2
//   saturated, as every store does) and its position stored.
// * nxk_scan_totals_arr<S> and nxk_scan_chunks_arr<S>: the odd/even network's
//   two passes over rows of states of type S in memory, as the generated
//   nxk_scan_totals and nxk_scan_chunks run them over a program's terms
//   (nxk_reduce.cuh states the network and its chunked form).
//
// Destinations are found by walks over the results' shape (nxk_loop.cuh).
#include "nxk_scalar.cuh"
#include "nxk_loop.cuh"
#include "nxk_reduce.cuh"

__device__ __forceinline__ void nxk_store_sum(int dtc, char* d, nxk_i64 p, float v) {
    nxk_store_float(dtc, d, p, (double)v);
}
__device__ __forceinline__ void nxk_store_sum(int dtc, char* d, nxk_i64 p, double v) {
    nxk_store_float(dtc, d, p, v);
}
__device__ __forceinline__ void nxk_store_sum(int dtc, char* d, nxk_i64 p, nxk_u64 v) {
    nxk_store_code_of(dtc, d, p, v);  // an integer's wrapped sum: its width's low bits
}

// One thread a row: walk over the results with (d0).
template <class T>
__global__ void nxk_sum_finish(const nxk_i64* __restrict__ walk, nxk_i64 rows, nxk_i64 groups, int mul, int dtc,
                               char* partial, char* d0)
{
    NxkSumOp<T> op;
    op.mul = mul;
    const nxk_i64 step = (nxk_i64)gridDim.x * blockDim.x;
    for (nxk_i64 row = (nxk_i64)blockIdx.x * blockDim.x + threadIdx.x; row < rows; row += step) {
        nxk_i64 pos[1];
        nxk_walk<1>(walk, row, pos);
        T* p = reinterpret_cast<T*>(partial) + row * groups;
        nxk_tree_serial(op, p, groups);
        nxk_store_sum(dtc, d0, pos[0], p[0]);
    }
}

// One thread a row: walk over the results with (d0, d1); d1 (int64) takes the
// position where `arg`.
extern "C" __global__ void nxk_ext_finish(const nxk_i64* __restrict__ walk, nxk_i64 rows, nxk_i64 groups,
                                          int is_max, int arg, int dtc, const char* partial, char* d0, char* d1)
{
    const nxk_i64 step = (nxk_i64)gridDim.x * blockDim.x;
    for (nxk_i64 row = (nxk_i64)blockIdx.x * blockDim.x + threadIdx.x; row < rows; row += step) {
        nxk_i64 pos[2];
        nxk_walk<2>(walk, row, pos);
        const NxkExt* p = reinterpret_cast<const NxkExt*>(partial) + row * groups;
        NxkExt r = p[0];
        for (nxk_i64 g = 1; g < groups; ++g) r = nxk_ext_combine(is_max, r, p[g]);
        // The extreme rounds once into its destination: no store makes an
        // infinity of e5m2 (dtc 5, ±0x7C), which saturates to ±57344 (±0x7B).
        if (dtc == 5 && (r.code & 0x7Full) == 0x7Cull) r.code -= 1;
        nxk_store_code_of(dtc, d0, pos[0], r.code);
        if (arg) nxk_st_i64(d1, pos[1], r.pos);
    }
}

// The full chunks' totals of rows of m states (row-major): block index
// b = (row, k), k < nfull, striding over `blocks` of them.
template <class S>
__global__ void __launch_bounds__(1024) nxk_scan_totals_arr(nxk_i64 m, nxk_i64 nfull, int csize, int op, const char* src, char* totals,
                                    nxk_i64 blocks)
{
    NxkStateOp<S> sop;
    sop.op = op;
    S* a = reinterpret_cast<S*>(nxk_dynamic_shared);
    for (nxk_i64 b = blockIdx.x; b < blocks; b += gridDim.x) {
        const nxk_i64 row = b / nfull;
        const nxk_i64 k = b % nfull;
        const S* x = reinterpret_cast<const S*>(src) + row * m + k * csize;
        for (int j = (int)threadIdx.x; j < csize; j += (int)blockDim.x) a[j] = x[j];
        __syncthreads();
        nxk_upsweep(sop, a, csize);
        if (threadIdx.x == 0) reinterpret_cast<S*>(totals)[row * nfull + k] = a[csize - 1];
        __syncthreads();  // shared memory is reused by the next block index
    }
}

// The results of chunk k of each row after the scanned totals of the chunks
// before it (`scanned`, nfull a row): block index b = (row, k), k < q.
template <class S>
__global__ void __launch_bounds__(1024) nxk_scan_chunks_arr(nxk_i64 m, nxk_i64 q, nxk_i64 nfull, int csize, int op, const char* src,
                                    const char* scanned, char* out, nxk_i64 blocks)
{
    NxkStateOp<S> sop;
    sop.op = op;
    S* a = reinterpret_cast<S*>(nxk_dynamic_shared);
    const S* sc = reinterpret_cast<const S*>(scanned);
    for (nxk_i64 b = blockIdx.x; b < blocks; b += gridDim.x) {
        const nxk_i64 row = b / q;
        const nxk_i64 k = b % q;
        const nxk_i64 s0 = k * csize;
        const int len = (int)(m - s0 < csize ? m - s0 : csize);
        const S* x = reinterpret_cast<const S*>(src) + row * m + s0;
        for (int j = (int)threadIdx.x; j < len; j += (int)blockDim.x) a[j] = x[j];
        __syncthreads();
        nxk_upsweep(sop, a, len);
        const bool full = len == csize;
        const S before = k > 0 ? sc[row * nfull + k - 1] : S();
        nxk_downsweep(sop, a, len, full ? csize / 2 : nxk_floor_pow2(len), k > 0, before);
        if (full && k > 0 && threadIdx.x == 0) a[csize - 1] = sc[row * nfull + k];
        __syncthreads();
        S* y = reinterpret_cast<S*>(out) + row * m + s0;
        for (int j = (int)threadIdx.x; j < len; j += (int)blockDim.x) y[j] = a[j];
        __syncthreads();  // shared memory is reused by the next block index
    }
}

// nxk_loop.cuh: how a kernel finds its arrays' elements from a descriptor.
//
// A walk descriptor (int64, in device memory; nxkernel_cuda/loops.py writes
// it) describes a loop of `rank` axes over `N` arrays:
//
//   [rank, shape[0..rank), then per array: offset, strides[0..rank)]
//
// in elements. Index i of the loop (C order, 0 <= i < prod(shape)) reaches
// element position offset + sum_d idx_d * strides[d] of each array. Axis 0
// takes the quotient left after the others, so a rank-1 walk divides nothing.
// Walks are coalesced on the host (extent-1 axes dropped, neighbours merged
// where every array runs across them), so a contiguous loop is rank 1.
#ifndef NXK_LOOP_CUH
#define NXK_LOOP_CUH

#include "nxk_common.cuh"

// The dynamic shared memory of every kernel of the library.
extern __shared__ __align__(16) unsigned char nxk_dynamic_shared[];

// a / b of non-negative int64s, out of line: a 64-bit division is a long
// instruction sequence, and inlined into every unrolled walk it made NVRTC's
// compile times grow several-fold; a rank-1 walk divides nothing anyway.
__device__ __noinline__ nxk_i64 nxk_div(nxk_i64 a, nxk_i64 b) { return a / b; }

// The number of int64 words of a walk of `rank` axes over `n` arrays.
__device__ __forceinline__ int nxk_walk_words(int rank, int n) { return 1 + rank + n * (rank + 1); }

// pos[a] = the position of index i of the walk at `w` in array a, for a < N.
template <int N>
__device__ __forceinline__ void nxk_walk(const nxk_i64* __restrict__ w, nxk_i64 i, nxk_i64* pos) {
    const int rank = (int)w[0];
    const nxk_i64* shape = w + 1;
    const nxk_i64* arr = w + 1 + rank;
#pragma unroll
    for (int a = 0; a < N; ++a) pos[a] = arr[a * (rank + 1)];
    nxk_i64 rem = i;
    for (int d = rank - 1; d >= 0; --d) {
        nxk_i64 idx = rem;
        if (d > 0) {
            const nxk_i64 q = nxk_div(rem, shape[d]);
            idx = rem - q * shape[d];
            rem = q;
        }
#pragma unroll
        for (int a = 0; a < N; ++a) pos[a] += idx * arr[a * (rank + 1) + 1 + d];
    }
}

// Coordinates: entries (div, ext) give the index along one loop axis of
// linear index i (C order of the whole, uncoalesced loop) as (i / div) % ext.
__device__ __forceinline__ nxk_i64 nxk_coord(nxk_i64 i, nxk_i64 div, nxk_i64 ext) {
    const nxk_i64 q = nxk_div(i, div);
    return q - nxk_div(q, ext) * ext;
}

#endif  // NXK_LOOP_CUH

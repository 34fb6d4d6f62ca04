// nxk_pad.cuh: how a kernel reads an operand through a Padded load.
//
// A padded-load descriptor (int64, in device memory; nxkernel_cuda/loops.py's
// pad_words writes it) for an operand of rank R:
//
//   [offset, the fill element's bytes (two words, zeros after them), then per
//    operand axis: lo, interior + 1, extent, stride, then NW walks
//    (nxk_loop.cuh) of R coordinate arrays each]
//
// Coordinate array a of walk k, at index i_k of that walk, is a position
// along operand axis a of the padded operand; summed over the NW walks (a
// map's one loop index, or a reduction's row and term), it is the padded
// position p_a of the loop index. Operand element e_a sits at padded position
// lo_a + e_a * (interior_a + 1), so the load reads element
// (p_a - lo_a) / (interior_a + 1) where that divides exactly and lies in
// [0, extent_a) along every axis, and the fill everywhere else.
#ifndef NXK_PAD_CUH
#define NXK_PAD_CUH

#include "nxk_loop.cuh"

// The words of a padded-load descriptor before its walks.
#define NXK_PAD_HEAD(R) (3 + 4 * (R))

// Whether loop index (i0, i1) (i1 read only where NW == 2) reads an element of
// the operand of the descriptor at `d` (rank R), and then its position, *at;
// false where it reads the fill (element 0 at d + 1).
template <int R, int NW>
__device__ __forceinline__ bool nxk_pad_at(const nxk_i64* __restrict__ d, nxk_i64 i0, nxk_i64 i1,
                                           nxk_i64* at) {
    nxk_i64 p[R > 0 ? R : 1];
    nxk_i64 q[R > 0 ? R : 1];
    const nxk_i64* w = d + NXK_PAD_HEAD(R);
    nxk_walk<R>(w, i0, p);
    if (NW == 2) {
        w += nxk_walk_words((int)w[0], R);
        nxk_walk<R>(w, i1, q);
#pragma unroll
        for (int a = 0; a < R; ++a) p[a] += q[a];
    }
    nxk_i64 pos = d[0];
#pragma unroll
    for (int a = 0; a < R; ++a) {
        const nxk_i64* ax = d + 3 + 4 * a;
        nxk_i64 e = p[a] - ax[0];
        if (e < 0) return false;
        if (ax[1] != 1) {
            const nxk_i64 k = nxk_div(e, ax[1]);
            if (k * ax[1] != e) return false;
            e = k;
        }
        if (e >= ax[2]) return false;
        pos += e * ax[3];
    }
    *at = pos;
    return true;
}

#endif  // NXK_PAD_CUH

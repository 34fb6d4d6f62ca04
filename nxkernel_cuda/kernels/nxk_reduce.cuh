// nxk_reduce.cuh: the orders of design.md §6 as block-level templates, for
// the generated reduce and scan kernels (nxkernel_cuda/reductions.py).
//
// Lane order (reductions). A row's terms in chunks of NXK_LANE_BLOCK (1024);
// in a chunk, term t goes to lane t mod 16, each lane chained from the
// start (+0 for a sum, 1 for a product) in term order; lanes combined
// i ⊕= i+8 (i < 8), i ⊕= i+4, i ⊕= i+2, then 0 ⊕= 1; chunks combined in a
// binary tree whose left part is the largest power of two below their count,
// which is the bottom-up pairwise tree (neighbours at distance 1, 2, 4, ...,
// a lone last one carried up). A block computes one aligned *group* of G
// chunks (G a power of two): for every count of chunks, the tree's left part
// is then a whole number of groups, so the tree of the groups' values (each a
// complete subtree, the last one the tree of its own chunks) is the tree of
// the chunks, and the row's value depends on neither G nor the block size. A
// round of the block takes blockDim.x / 16 chunks, 16 threads (half a warp)
// each, lanes combined by shuffles of width 16; the group's chunk values wait
// in shared memory and combine bottom up, in parallel, after the last round.
//
// The odd/even network (scans). Neighbours 2j and 2j+1 combine into pairs,
// the pairs scan by the same network, result 2j+1 is the pairs' result j,
// result 2j (j > 0) the pairs' result j-1 combined with state 2j, the earlier
// state first. In place, with d = 1, 2, 4, ...: the up-sweep sets
// a[i] = a[i-d] ⊕ a[i] at i = 2dk + 2d - 1, building level 2d (pair k of
// level d at position 2dk + 2d - 1); the down-sweep, d from the top down, sets
// a[i] = a[i-d] ⊕ a[i] at i = d(2j + 1) - 1, j >= 1 (level d's even states
// after the first). A block scans a chunk of C = 2^c states that way; the
// level-C states of a row are its full chunks' totals, which scan by the same
// network (a second pass, recursively), and a chunk k >= 1 then finishes with
// the scanned total P of chunk k-1 as its carry-in: at every level d < C of
// the down-sweep, its first state (position d - 1) becomes P ⊕ a[d-1], and a
// full chunk's last result is the scanned total of chunk k. That is the
// whole row's network, bit for bit, for every C.
#ifndef NXK_REDUCE_CUH
#define NXK_REDUCE_CUH

#include "nxk_common.cuh"
#include "nxk_loop.cuh"
#include "nxk_scalar.cuh"

// ---------------------------------------------------------------------------
// Combinations
// ---------------------------------------------------------------------------

// Sum (mul == 0) or Prod of a carrier: float, double, or nxk_u64 for the
// integers (wrapping in 64 bits).
template <class T>
struct NxkSumOp {
    typedef T Acc;
    int mul;
    __device__ __forceinline__ Acc combine(Acc a, Acc b) const { return mul ? a * b : a + b; }
};

// Max, Min and Arg: a term's order key (NaN beyond every number), its
// position and its bits; the greater (is_max) or lesser key wins, ties to the
// lower position: associative and commutative.
struct NxkExt {
    nxk_i64 key;
    nxk_i64 pos;
    nxk_u64 code;
};

__device__ __forceinline__ NxkExt nxk_ext_combine(int is_max, NxkExt a, NxkExt b) {
    const bool beyond = is_max ? b.key > a.key : b.key < a.key;
    return (beyond || (b.key == a.key && b.pos < a.pos)) ? b : a;
}

struct NxkExtOp {
    typedef NxkExt Acc;
    int is_max;
    __device__ __forceinline__ Acc combine(Acc a, Acc b) const { return nxk_ext_combine(is_max, a, b); }
};

// A scan's states, by state type: op 0 Sum, 1 Prod, 2 Max, 3 Min (Prog's
// Maximum and Minimum: the first NaN, -0 below +0); integers wrap in 64
// bits; booleans (nxk_u32 truths) take Or for Max and And for Min.
__device__ __forceinline__ float nxk_state_combine(int op, float a, float b) {
    return op == 0 ? a + b : (op == 1 ? a * b : (op == 2 ? nxk_fmax_f32(a, b) : nxk_fmin_f32(a, b)));
}
__device__ __forceinline__ double nxk_state_combine(int op, double a, double b) {
    return op == 0 ? a + b : (op == 1 ? a * b : (op == 2 ? nxk_fmax_f64(a, b) : nxk_fmin_f64(a, b)));
}
__device__ __forceinline__ nxk_i64 nxk_state_combine(int op, nxk_i64 a, nxk_i64 b) {
    return op == 0 ? (nxk_i64)((nxk_u64)a + (nxk_u64)b)
                   : (op == 1 ? (nxk_i64)((nxk_u64)a * (nxk_u64)b) : (op == 2 ? (a > b ? a : b) : (a < b ? a : b)));
}
__device__ __forceinline__ nxk_u64 nxk_state_combine(int op, nxk_u64 a, nxk_u64 b) {
    return op == 0 ? a + b : (op == 1 ? a * b : (op == 2 ? (a > b ? a : b) : (a < b ? a : b)));
}
__device__ __forceinline__ nxk_u32 nxk_state_combine(int op, nxk_u32 a, nxk_u32 b) { return op == 3 ? (a & b) : (a | b); }

template <class S>
struct NxkStateOp {
    typedef S State;
    int op;
    __device__ __forceinline__ State combine(State a, State b) const { return nxk_state_combine(op, a, b); }
};

// ---------------------------------------------------------------------------
// The chunk tree, bottom up
// ---------------------------------------------------------------------------

// v[0] = the tree of v[0, count): neighbours at distance w = 1, 2, 4, ...
// combined, the left one first. Bottom up, pairs first, a lone last value
// carried up as it is: for every count, the tree whose left part is the
// largest power of two below the count. One thread (a row's finish) calls it.
template <class Op>
__device__ void nxk_tree_serial(const Op& op, typename Op::Acc* v, nxk_i64 count) {
    for (nxk_i64 w = 1; w < count; w *= 2) {
        for (nxk_i64 i = 0; i + w < count; i += 2 * w) v[i] = op.combine(v[i], v[i + w]);
    }
}

// ---------------------------------------------------------------------------
// Lane order: one group of chunks
// ---------------------------------------------------------------------------

// The lane-order value of chunks [c0, c1) of a row of n terms, into *out by
// thread 0 (src.start() where c0 == c1). Src gives Acc, start(), term(t),
// combine(a, b) (a the earlier) and shfl_down(v, delta) (of width 16).
// Every thread of the block calls it; blockDim.x is a power of two in [32,
// 256]; dynamic shared memory holds c1 - c0 Accs (the group's chunks, at
// least one), which combine bottom up in parallel once every round is done.
template <class Src>
__device__ void nxk_lane_group(const Src& src, nxk_i64 n, nxk_i64 c0, nxk_i64 c1, typename Src::Acc* out) {
    typedef typename Src::Acc Acc;
    const int threads = (int)blockDim.x;
    const int per_round = threads / NXK_LANES;
    Acc* chunk = reinterpret_cast<Acc*>(nxk_dynamic_shared);
    const int t = (int)threadIdx.x;
    const int lane = t % NXK_LANES;
    const int slot = t / NXK_LANES;
    const int count = (int)(c1 - c0);

    for (nxk_i64 base = c0; base < c1; base += per_round) {
        const nxk_i64 c = base + slot;
        Acc v = src.start();
        if (c < c1) {
            const nxk_i64 end = (c + 1) * NXK_LANE_BLOCK < n ? (c + 1) * NXK_LANE_BLOCK : n;
            // Unrolled so a thread keeps several loads in flight; the
            // additions stay in term order.
#pragma unroll 4
            for (nxk_i64 i = c * NXK_LANE_BLOCK + lane; i < end; i += NXK_LANES) {
                v = src.combine(v, src.term(i));
            }
        }
        v = src.combine(v, src.shfl_down(v, 8));
        v = src.combine(v, src.shfl_down(v, 4));
        v = src.combine(v, src.shfl_down(v, 2));
        v = src.combine(v, src.shfl_down(v, 1));
        if (lane == 0 && c < c1) chunk[c - c0] = v;
    }
    __syncthreads();
    for (int w = 1; w < count; w *= 2) {
        for (int i = 2 * w * t; i + w < count; i += 2 * w * threads) chunk[i] = src.combine(chunk[i], chunk[i + w]);
        __syncthreads();
    }
    if (t == 0) *out = count > 0 ? chunk[0] : src.start();
}

// ---------------------------------------------------------------------------
// The odd/even network on a chunk in shared memory
// ---------------------------------------------------------------------------

// The up-sweep of a[0, len): every thread of the block calls it.
template <class Op>
__device__ void nxk_upsweep(const Op& op, typename Op::State* a, int len) {
    for (int d = 1; d < len; d *= 2) {
        for (int k = (int)threadIdx.x;; k += (int)blockDim.x) {
            const int i = 2 * d * k + 2 * d - 1;
            if (i >= len) break;
            a[i] = op.combine(a[i - d], a[i]);
        }
        __syncthreads();
    }
}

// The down-sweep of a[0, len) after the up-sweep, from level `top` (a power
// of two; levels at and above the chunk's size are the caller's), chained
// after `carry` where `has_carry`. Every thread of the block calls it.
template <class Op>
__device__ void nxk_downsweep(const Op& op, typename Op::State* a, int len, int top, bool has_carry,
                              typename Op::State carry) {
    for (int d = top; d >= 1; d /= 2) {
        for (int j = (int)threadIdx.x + 1;; j += (int)blockDim.x) {
            const int i = d * (2 * j + 1) - 1;
            if (i >= len) break;
            a[i] = op.combine(a[i - d], a[i]);
        }
        if (has_carry && threadIdx.x == 0 && d - 1 < len) a[d - 1] = op.combine(carry, a[d - 1]);
        __syncthreads();
    }
}

// The largest power of two at most v (v >= 1).
__device__ __forceinline__ int nxk_floor_pow2(int v) { return 1 << (31 - __clz(v)); }

#endif  // NXK_REDUCE_CUH

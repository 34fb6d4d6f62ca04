// lane_sum.cu: the float32 Sum of each row in lane order (design.md §6), one
// block per row; bit for bit nxkernel_core.orders.lane_reduce.
//
// Lane order: the row's terms in chunks of 1024; in a chunk, term t goes to
// lane t mod 16, each lane chained from +0 in term order; lanes combined
// i += i+8 (i < 8), i += i+4, i += i+2, then 0 += 1; the chunks combined in a
// binary tree whose left part is the largest power of two below their count.
//
// How the block computes it. The BLOCK_THREADS threads take CHUNKS =
// BLOCK_THREADS / 16 chunks a round, 16 threads (a half warp) a chunk, thread
// `lane` of the half warp chaining lane `lane` (a skipped term past the row's
// end would add +0 to a lane that is never -0, which changes nothing). The
// half warp combines its lanes with __shfl_down_sync by 8, 4, 2, 1 at width
// 16. The chunk tree is built as a binary counter: thread 0 keeps, per level
// L, at most one finished subtree of 2^L chunks (`level`, `filled`); pushing a
// subtree at level L merges it, left operand first, with the one waiting there
// and carries upward; at the end the waiting subtrees are combined from the
// lowest level up, each higher (earlier) one on the left. That is the tree of
// lane order: its left part of 2^k chunks is a complete subtree the counter
// finishes before it takes any chunk of the right part. A full round's CHUNKS
// chunks are a complete subtree aligned to its size, so the block builds it in
// shared memory (adjacent pairs first, as the counter would) and pushes it at
// level log2(CHUNKS); the last, partial round pushes its chunks one by one.
#include "nxk_common.cuh"

// Template parameter: BLOCK_THREADS, a power of two in [32, 1024] (so a chunk's
// 16 lanes are half of one warp and CHUNKS is a power of two).
template <int BLOCK_THREADS>
__global__ void __launch_bounds__(BLOCK_THREADS)
nxk_lane_sum_f32(float* __restrict__ dst, const float* __restrict__ src, nxk_i64 n, nxk_i64 row_stride)
{
    constexpr int CHUNKS = BLOCK_THREADS / NXK_LANES;
    constexpr int CHUNK_LEVEL = nxk_log2(CHUNKS);
    __shared__ float chunk[CHUNKS];

    const float* x = src + (nxk_i64)blockIdx.x * row_stride;
    const int t = (int)threadIdx.x;
    const int lane = t % NXK_LANES;
    const int slot = t / NXK_LANES;
    const nxk_i64 chunks = (n + NXK_LANE_BLOCK - 1) / NXK_LANE_BLOCK;

    float level[64];            // thread 0's counter: a subtree of 2^L chunks at level L
    nxk_u64 filled = 0;         // bit L set iff level[L] holds one

    for (nxk_i64 base = 0; base < chunks; base += CHUNKS) {
        const nxk_i64 c = base + slot;
        float v = 0.0f;
        if (c < chunks) {
            const nxk_i64 end = (c + 1) * NXK_LANE_BLOCK < n ? (c + 1) * NXK_LANE_BLOCK : n;
            for (nxk_i64 i = c * NXK_LANE_BLOCK + lane; i < end; i += NXK_LANES) {
                v = v + x[i];
            }
        }
        v = v + __shfl_down_sync(NXK_FULL_MASK, v, 8, NXK_LANES);
        v = v + __shfl_down_sync(NXK_FULL_MASK, v, 4, NXK_LANES);
        v = v + __shfl_down_sync(NXK_FULL_MASK, v, 2, NXK_LANES);
        v = v + __shfl_down_sync(NXK_FULL_MASK, v, 1, NXK_LANES);
        if (lane == 0) {
            chunk[slot] = v;
        }
        __syncthreads();

        const nxk_i64 count = chunks - base < CHUNKS ? chunks - base : CHUNKS;
        if (count == CHUNKS) {
            for (int w = 1; w < CHUNKS; w *= 2) {
                if (t < CHUNKS && t % (2 * w) == 0) {
                    chunk[t] = chunk[t] + chunk[t + w];
                }
                __syncthreads();
            }
        }
        if (t == 0) {
            const int pushes = count == CHUNKS ? 1 : (int)count;
            for (int k = 0; k < pushes; ++k) {
                float s = chunk[k];
                int L = count == CHUNKS ? CHUNK_LEVEL : 0;
                while ((filled >> L) & 1ull) {
                    s = level[L] + s;
                    filled &= ~(1ull << L);
                    ++L;
                }
                level[L] = s;
                filled |= 1ull << L;
            }
        }
        __syncthreads();   // chunk[] is rewritten next round
    }

    if (t == 0) {
        float acc = 0.0f;   // no chunk: the empty sum, +0
        bool first = true;
        for (int L = 0; L < 64; ++L) {
            if ((filled >> L) & 1ull) {
                acc = first ? level[L] : level[L] + acc;
                first = false;
            }
        }
        dst[blockIdx.x] = acc;
    }
}

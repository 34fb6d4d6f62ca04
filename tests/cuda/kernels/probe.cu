// probe.cu: kernels that exercise the CUDA execution model, for the
// emulator's tests (tests/cuda/test_emulator.py); NVRTC compiles them too.
#include "nxk_common.cuh"

// Dynamic shared memory and __syncthreads(): each block reverses its slice.
extern "C" __global__ void probe_reverse(int* out, const int* in)
{
    extern __shared__ int probe_buf[];
    const int t = threadIdx.x, n = blockDim.x;
    probe_buf[t] = in[blockIdx.x * n + t];
    __syncthreads();
    out[blockIdx.x * n + t] = probe_buf[n - 1 - t];
}

// A second extern __shared__ name, of another type: it aliases the first.
extern "C" __global__ void probe_dynamic_floats(float* out, int n)
{
    extern __shared__ float probe_fbuf[];
    const int t = threadIdx.x;
    probe_fbuf[t] = 0.5f * t;
    __syncthreads();
    if (t == 0) {
        float s = 0.0f;
        for (int i = 0; i < n; ++i) s = s + probe_fbuf[i];
        out[blockIdx.x] = s;
    }
}

// Warp collectives, per warp w of the block (warp-sized arrays indexed w):
//   sums[w]       the warp's sum by __shfl_down_sync (lane 0's)
//   ballots[w]    __ballot_sync of "value is odd"
//   flags[2w..]   __any_sync(value > 100), __all_sync(value >= 0)
// and per thread i:
//   butterfly[i]  the warp's sum by __shfl_xor_sync, at every lane
//   scan[i]       inclusive prefix sum by __shfl_up_sync
//   bcast[i]      lane 5's value by __shfl_sync
extern "C" __global__ void probe_warp(int* sums, unsigned* ballots, int* flags, int* butterfly, int* scan,
                                      int* bcast, const int* in)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int lane = threadIdx.x % 32, w = i / 32;
    const int v = in[i];
    int s = v;
    for (int d = 16; d > 0; d /= 2) s += __shfl_down_sync(NXK_FULL_MASK, s, d);
    if (lane == 0) sums[w] = s;
    const unsigned b = __ballot_sync(NXK_FULL_MASK, v & 1);
    if (lane == 0) ballots[w] = b;
    const int any = __any_sync(NXK_FULL_MASK, v > 100), all = __all_sync(NXK_FULL_MASK, v >= 0);
    if (lane == 0) {
        flags[2 * w] = any;
        flags[2 * w + 1] = all;
    }
    int x = v;
    for (int m = 1; m < 32; m *= 2) x += __shfl_xor_sync(NXK_FULL_MASK, x, m);
    butterfly[i] = x;
    int p = v;
    for (int d = 1; d < 32; d *= 2) {
        const int q = __shfl_up_sync(NXK_FULL_MASK, p, d);
        if (lane >= d) p += q;
    }
    scan[i] = p;
    bcast[i] = __shfl_sync(NXK_FULL_MASK, v, 5);
}

// Atomics: a histogram (atomicAdd), the maximum (atomicMax), a 64-bit total
// by an atomicCAS loop, a count that wraps (atomicInc) and a float sum.
extern "C" __global__ void probe_atomics(unsigned* hist, int* maximum, nxk_u64* total, unsigned* ring,
                                         float* fsum, const int* in, int n, int bins)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const int v = in[i];
        atomicAdd(&hist[v % bins], 1u);
        atomicMax(maximum, v);
        nxk_u64 old = *total, seen;
        do {
            seen = old;
            old = atomicCAS(total, seen, seen + (nxk_u64)v);
        } while (old != seen);
        atomicInc(ring, 9u);
        atomicAdd(fsum, 1.0f);
    }
}

// __syncthreads_count/_and/_or, a 2-D block with a partial last warp, and
// the built-in variables: out[t] holds, per thread t of block b (row b*7+...):
// count of odd threads, and of all >= 0, or of any == 3, the linear thread
// index from threadIdx/blockDim, and the warp's lane count by __activemask.
extern "C" __global__ void probe_block_votes(int* out)
{
    const int t = threadIdx.x + threadIdx.y * blockDim.x;
    const int base = (blockIdx.x + blockIdx.y * gridDim.x) * (blockDim.x * blockDim.y) * 5 + t * 5;
    out[base + 0] = __syncthreads_count(t & 1);
    out[base + 1] = __syncthreads_and(t >= 0);
    out[base + 2] = __syncthreads_or(t == 3);
    out[base + 3] = t;
    out[base + 4] = __popc(__activemask());
}

// Collectives in divergent code, each group naming only its own lanes: the
// low half-warp sums by shuffles, the high half-warp takes a ballot.
extern "C" __global__ void probe_divergent(int* out, const int* in)
{
    const int lane = threadIdx.x % 32;
    const int v = in[threadIdx.x];
    if (lane < 16) {
        int s = v;
        for (int d = 8; d > 0; d /= 2) s += __shfl_down_sync(0x0000ffffu, s, d, 16);
        out[threadIdx.x] = s;
    } else {
        out[threadIdx.x] = (int)__ballot_sync(0xffff0000u, v > 0);
        __syncwarp(0xffff0000u);
    }
}

// Faults: __trap() at thread `who`.
extern "C" __global__ void probe_trap(int* out, int who)
{
    if ((int)threadIdx.x == who) __trap();
    out[threadIdx.x] = 1;
}

// A deadlock: lanes 0-15 wait in a full-warp shuffle that lanes 16-31 never
// reach, as they wait at __syncthreads().
extern "C" __global__ void probe_deadlock(int* out)
{
    int v = threadIdx.x;
    if (threadIdx.x < 16) v = __shfl_sync(NXK_FULL_MASK, v, 0);
    __syncthreads();
    out[threadIdx.x] = v;
}

// A template kernel with a static __shared__ array of its parameter's size:
// each block sums its slice through shared memory.
template <typename T, int N>
__global__ void probe_template_sum(T* out, const T* in)
{
    __shared__ T tile[N];
    tile[threadIdx.x] = in[blockIdx.x * N + threadIdx.x];
    __syncthreads();
    if (threadIdx.x == 0) {
        T s = 0;
        for (int i = 0; i < N; ++i) s += tile[i];
        out[blockIdx.x] = s;
    }
}

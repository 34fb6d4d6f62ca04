// faults.cu: kernels that plant the faults a GPU reports (compute-sanitizer's
// memcheck: misaligned and out-of-bounds accesses), for the emulator's tests
// (tests/cuda/test_memcheck.py); NVRTC compiles them too. Thread `who` of
// block 0 makes the access; every other thread does nothing.
#include "nxk_scalar.cuh"

// A global access of `width` bytes (1, 2, 4, 8 or 16) at `p + offset`: a
// load (`store` 0) into out[0], or a store of zeros.
extern "C" __global__ void fault_global(char* p, long long offset, int width, int store, int who,
                                        unsigned long long* out)
{
    if (blockIdx.x != 0 || (int)threadIdx.x != who) return;
    char* at = p + offset;
    unsigned long long v = 0;
    switch (width) {
        case 1: if (store) *(nxk_u8*)at = 0; else v = *(const nxk_u8*)at; break;
        case 2: if (store) *(nxk_u16*)at = 0; else v = *(const nxk_u16*)at; break;
        case 4: if (store) *(nxk_u32*)at = 0; else v = *(const nxk_u32*)at; break;
        case 8: if (store) *(nxk_u64*)at = 0; else v = *(const nxk_u64*)at; break;
        default:
            if (store) *(uint4*)at = make_uint4(0u, 0u, 0u, 0u);
            else v = (*(const uint4*)at).x;
            break;
    }
    out[0] = v;
}

// A shared access: thread `who` reads 4 bytes `offset` bytes into the
// dynamic shared memory, or 8 bytes there (`width` 8, misaligned where
// offset % 8 != 0); static shared memory is read at an index in bounds.
extern "C" __global__ void fault_shared(long long offset, int width, int who, unsigned long long* out)
{
    extern __shared__ unsigned char fault_dyn[];
    __shared__ unsigned int fault_static[64];
    fault_static[threadIdx.x % 64] = threadIdx.x;
    __syncthreads();
    if ((int)threadIdx.x != who) return;
    unsigned long long v = fault_static[(who + 1) % 64];
    if (width == 8) v += *(const nxk_u64*)(fault_dyn + offset);
    else v += *(const nxk_u32*)(fault_dyn + offset);
    out[0] = v;
}

// A local array indexed `i` (in bounds for 0 <= i < 8) far past its end.
extern "C" __global__ void fault_local(long long i, int who, unsigned long long* out)
{
    volatile unsigned long long local[8];
    for (int k = 0; k < 8; ++k) local[k] = k;
    if ((int)threadIdx.x == who) out[0] = local[i];
}

// Sub-byte element `pos` of `p` (`width` bits) set to `code` by thread `who`,
// as every kernel stores one (nxk_st_bits: atomics on its aligned 32-bit word).
extern "C" __global__ void fault_bits(char* p, long long pos, int width, unsigned code, int who)
{
    if (blockIdx.x == 0 && (int)threadIdx.x == who) nxk_st_bits(p, pos, width, code);
}

// Thread 0 sets flag[1], then waits (at most `spins` reads) until the host
// sets flag[0], and copies it to flag[2]: a launch that runs while another
// OS thread runs the module's code.
extern "C" __global__ void fault_wait(volatile int* flag, long long spins)
{
    if (threadIdx.x != 0) return;
    flag[1] = 1;
    for (long long i = 0; i < spins && flag[0] == 0; ++i) {
    }
    flag[2] = flag[0];
}

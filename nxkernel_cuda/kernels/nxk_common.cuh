// nxk_common.cuh: what every nxkernel CUDA source shares.
//
// Sources compile under NVRTC (no system headers: builtin types only) and,
// for the emulated device, under g++ with emu_cuda.h force-included
// (NXKERNEL_EMULATE is then defined). Anything either compiler lacks goes
// here, behind #ifdef NXKERNEL_EMULATE, never in a kernel source.
#ifndef NXK_COMMON_CUH
#define NXK_COMMON_CUH

typedef signed char nxk_i8;
typedef unsigned char nxk_u8;
typedef short nxk_i16;
typedef unsigned short nxk_u16;
typedef int nxk_i32;
typedef unsigned int nxk_u32;
typedef long long nxk_i64;
typedef unsigned long long nxk_u64;

// Every lane of a warp, for the *_sync collectives of full warps.
#define NXK_FULL_MASK 0xffffffffu

// Lane order (design.md §6): blocks of NXK_LANE_BLOCK terms, NXK_LANES lanes each.
#define NXK_LANE_BLOCK 1024
#define NXK_LANES 16

// log2 of a power of two, at compile time.
__host__ __device__ constexpr int nxk_log2(int v) { return v <= 1 ? 0 : 1 + nxk_log2(v / 2); }

#endif  // NXK_COMMON_CUH

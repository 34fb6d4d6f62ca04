// emu_cuda.h: CUDA's execution model on the CPU, for g++.
//
// The emulator compiles the same .cu text NVRTC compiles, with this header
// included before it (the first line of the launcher unit). It gives the text what CUDA C++
// gives a kernel: the execution-space keywords, dim3 and the vector types,
// threadIdx/blockIdx/blockDim/gridDim, __shared__ and extern __shared__
// memory, __syncthreads(), and (in emu_warp.h) 32-lane warps with their
// collectives and (in emu_intrinsics.h) atomics, the device intrinsics and
// libm's math. It declares the runtime (fibers, barrier, rendezvous, launch,
// memory checker); emu_runtime.cpp defines it, compiled once and linked into
// every module, so a build compiles the source and its launchers alone.
//
// The rules it keeps (README.md next to it says more):
//
//  * A launch runs its blocks one after another on the calling OS thread, in
//    the order blockIdx.x fastest, then y, then z.
//  * The threads of a block are cooperative fibers, one stack each, run by a
//    round-robin scheduler in linear thread order (x fastest). A fiber runs
//    until it waits: at __syncthreads() (a real barrier of every thread of the
//    block that has not exited; an exited thread counts as arrived) or in a
//    warp collective (a rendezvous of the lanes its mask names that exist and
//    have not exited). No fiber is ever preempted, so an atomic is a plain
//    read-modify-write and a data race is deterministic.
//  * A warp collective matches, per warp, the lanes that call the same kind
//    of collective with the same mask; a lane takes part in one at a time.
//    A lane outside its own mask, or a pass of the scheduler in which no fiber
//    can run (a deadlock: lanes waiting in different collectives, or some
//    threads at __syncthreads() while others wait in a warp collective), is a
//    fault: the launch stops and reports it, as a GPU reports a sticky error.
//  * __shared__ is `thread_local`: a block's fibers all run on one OS thread,
//    so they share it, and a block that runs on another OS thread has its own.
//    `extern __shared__ T name[]` refers to one thread-local array of
//    dynamic shared memory that the driver defines under every such name (so
//    all of them alias, as on a GPU); it is filled with 0xFF bytes before
//    each block (NaN floats, -1 integers), so a read of unwritten dynamic
//    shared memory shows. Static __shared__ variables keep the previous
//    block's values.
//  * Floating point is IEEE: the driver compiles with -ffp-contract=off and
//    -fno-fast-math, and each launch runs under the default environment
//    (round to nearest, no flush to zero), whatever the process has set.
//
// What cannot run here: inline PTX (asm("...") in a kernel); such code needs a
// plain C++ path under #ifdef NXKERNEL_EMULATE. Textures, surfaces,
// cooperative groups, dynamic parallelism, __constant__ memory written from
// the host, clusters and the tensor-memory instructions are not provided.

#ifndef NXKERNEL_EMU_CUDA_H
#define NXKERNEL_EMU_CUDA_H

#define NXKERNEL_EMULATE 1
// The emulator keeps the limits and the arch-dependent paths of sm_90.
#ifndef __CUDA_ARCH__
#define __CUDA_ARCH__ 900
#endif

#include <math.h>
#include <stdio.h>

#include <cfenv>
#include <cfloat>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#if !defined(__x86_64__) || defined(NXEMU_UCONTEXT)
#define NXEMU_USE_UCONTEXT 1
#include <ucontext.h>
#endif

// ---------------------------------------------------------------------------
// Execution-space and memory-space keywords
// ---------------------------------------------------------------------------

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __restrict__ __restrict
#define __shared__ thread_local
#define __constant__
#define __managed__
#define __grid_constant__
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __cudart_builtin__

#define NXEMU_EXPORT extern "C" __attribute__((visibility("default")))

// The memory checker's own functions (emu_memcheck.h) are not instrumented.
#define NXEMU_RT __attribute__((no_sanitize_address))

// The runtime's variables: each module links its own copy (emu_runtime.cpp).
#define NXEMU_LOCAL __attribute__((visibility("hidden")))

// ---------------------------------------------------------------------------
// Vector types, dim3 (CUDA's vector_types.h: 2- and 4-vectors aligned to
// their size up to 16 bytes, 1- and 3-vectors to their element)
// ---------------------------------------------------------------------------

#define NXEMU_ALIGN2(T) __attribute__((aligned(2 * sizeof(T) < 16 ? 2 * sizeof(T) : 16)))
#define NXEMU_ALIGN4(T) __attribute__((aligned(4 * sizeof(T) < 16 ? 4 * sizeof(T) : 16)))
#define NXEMU_VECTORS(T, N)                                                          \
    struct N##1 { T x; };                                                            \
    struct NXEMU_ALIGN2(T) N##2 { T x, y; };                                         \
    struct N##3 { T x, y, z; };                                                      \
    struct NXEMU_ALIGN4(T) N##4 { T x, y, z, w; };                                   \
    static inline N##1 make_##N##1(T x) { return N##1{x}; }                          \
    static inline N##2 make_##N##2(T x, T y) { return N##2{x, y}; }                  \
    static inline N##3 make_##N##3(T x, T y, T z) { return N##3{x, y, z}; }         \
    static inline N##4 make_##N##4(T x, T y, T z, T w) { return N##4{x, y, z, w}; }

NXEMU_VECTORS(signed char, char)
NXEMU_VECTORS(unsigned char, uchar)
NXEMU_VECTORS(short, short)
NXEMU_VECTORS(unsigned short, ushort)
NXEMU_VECTORS(int, int)
NXEMU_VECTORS(unsigned int, uint)
NXEMU_VECTORS(long, long)
NXEMU_VECTORS(unsigned long, ulong)
NXEMU_VECTORS(long long, longlong)
NXEMU_VECTORS(unsigned long long, ulonglong)
NXEMU_VECTORS(float, float)
NXEMU_VECTORS(double, double)
#undef NXEMU_VECTORS

struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
    constexpr operator uint3() const { return uint3{x, y, z}; }
};

constexpr int warpSize = 32;

// ---------------------------------------------------------------------------
// The runtime: fibers, the block barrier, warp rendezvous
// ---------------------------------------------------------------------------

// The dynamic shared memory the driver defines (in a second translation unit,
// under every name an `extern __shared__` declaration uses).
extern "C" unsigned char* nxemu_dynamic_shared_base();
extern "C" unsigned long nxemu_dynamic_shared_capacity();

namespace nxemu {

using Body = void (*)(void*);

enum class Run : unsigned char { ready, at_barrier, in_collective, done };

enum Kind : int {
    k_shfl, k_ballot, k_any, k_all, k_syncwarp, k_match_any, k_match_all, k_reduce, k_activemask, k_kinds
};

// One warp collective in progress: the lanes that arrived, their values.
// Invariant: a lane is in at most one rendezvous of its warp at a time, so 32
// per warp always suffice; `readers` counts the arrived lanes that have not
// read the result yet, and the rendezvous is free again when it reaches 0.
struct Rendezvous {
    bool used = false;
    bool complete = false;
    int kind = 0;
    unsigned mask = 0;
    unsigned arrived = 0;
    unsigned preds = 0;
    unsigned readers = 0;
    unsigned long long slots[32];
};

struct Warp {
    unsigned present = 0;  // lanes that exist (a block's last warp may be partial)
    unsigned exited = 0;   // lanes whose thread has returned
    Rendezvous rv[32];
};

struct Fiber {
#ifdef NXEMU_USE_UCONTEXT
    ucontext_t ctx;
#else
    void* sp = nullptr;
#endif
    uint3 thread_idx{0, 0, 0};
    unsigned linear = 0, warp = 0, lane = 0;
    Run run = Run::ready;
    unsigned wait_gen = 0;
    Rendezvous* wait_rv = nullptr;
};

// The launch running on this OS thread. Invariants: `live` counts the fibers
// of the block that have not returned; `bar_arrived` those waiting at the
// current barrier generation `bar_gen`; the counts of generation g live in
// slot g & 1, which the release of g - 1 cleared.
struct State {
    uint3 block_idx{0, 0, 0};
    dim3 block_dim, grid_dim;
    Body body = nullptr;
    void* body_ctx = nullptr;
    std::vector<Fiber> fibers;
    std::vector<Warp> warps;
    Fiber* current = nullptr;
    unsigned live = 0;
    unsigned bar_arrived = 0;
    unsigned bar_gen = 0;
    unsigned bar_count[2] = {0, 0};
    unsigned bar_total[2] = {0, 0};
    bool failed = false;
    char message[1024] = {0};
#ifdef NXEMU_USE_UCONTEXT
    ucontext_t sched_ctx;
#else
    void* sched_sp = nullptr;
#endif
    // The fibers' stacks while a launch runs: `stack_count` stacks of
    // `stack_bytes`, each above a guard page, in one mapping of `map_bytes`.
    unsigned char* stacks = nullptr;
    size_t map_bytes = 0, stack_bytes = 0;
    unsigned stack_count = 0;
    ~State() {
        if (stacks != nullptr) munmap(stacks, map_bytes);
    }
};

// The regions a running kernel may address, and whether its code runs now
// (`on`; off while the runtime runs: the scheduler, a barrier, a warp
// collective, a fault read the runtime's own state, which no kernel may
// address). `hit` caches the allocations found last (HITS of them, replaced
// in turn), so that a kernel that walks a few arrays finds each at once.
constexpr unsigned HITS = 4;
struct Memcheck {
    bool on = false;
    unsigned next_hit = 0;
    uintptr_t hit_lo[HITS] = {}, hit_len[HITS] = {};
    uintptr_t shared_lo = 0, shared_len = 0;        // thread-local block up to the launch's dynamic bytes
    uintptr_t stack_lo = 0, stack_len = 0;          // the running fiber's stack
    uintptr_t tail_lo = 0, tail_len = 0;            // thread-local bytes after the dynamic storage
    uintptr_t image_lo = 0, image_len = 0;          // the module's loaded segments
    uintptr_t dyn_lo = 0, dyn_asked = 0, dyn_cap = 0;
    const unsigned long long* allocs = nullptr;     // sorted [lo, hi) pairs
    size_t nallocs = 0;
};

// The module's memory checker (emu_memcheck.h): one per module, which its OS
// threads share (launches are serialised).
extern NXEMU_LOCAL Memcheck g_check;

NXEMU_RT inline void memcheck_off() { g_check.on = false; }
NXEMU_RT inline void memcheck_on() { g_check.on = true; }

// The runtime called from kernel code: unchecked for the guard's scope.
struct Unchecked {
    bool was = g_check.on;
    NXEMU_RT Unchecked() { memcheck_off(); }
    NXEMU_RT ~Unchecked() {
        if (was) memcheck_on();
    }
    Unchecked(const Unchecked&) = delete;
    Unchecked& operator=(const Unchecked&) = delete;
};

// ---- what emu_runtime.cpp defines ------------------------------------------

// The launch running on this OS thread (made on first use).
State& state();
inline Fiber& self() { return *state().current; }

// Back to the scheduler; returns when the scheduler resumes this fiber.
void yield();

// Record a fault and leave the fiber for good: the launch stops.
[[noreturn]] void fault_exit();

// Record a fault, "block (…) thread (…): " then `fmt` formatted as printf
// does, and leave the fiber for good.
[[noreturn]] void fault(const char* fmt, ...);

// The built-in variables of the running thread, kept where a kernel reads
// them at constant addresses (unchecked): the block's when it starts, the
// thread's when its fiber resumes.
extern NXEMU_LOCAL uint3 g_thread_idx, g_block_idx;
extern NXEMU_LOCAL dim3 g_block_dim, g_grid_dim;

// Join the collective `kind` of the calling lane's warp with `mask`, giving
// `value` (of up to 8 bytes) and `pred`; returns the completed rendezvous. The
// caller reads it, then calls `leave`.
Rendezvous& join(int kind, unsigned mask, const void* value, size_t size, bool pred);
void leave(Rendezvous& r);
unsigned lane_id();
// Faults unless `width` is a power of two in [1, 32].
void check_width(const char* fn, int width);

// Source lanes, as CUDA states them: __shfl_sync reads lane srcLane of the
// caller's group of `width`; _up and _down read delta lanes away and keep the
// caller's value where that leaves the group; _xor reads lane ^ laneMask and
// keeps the caller's value where that is in a later group.
unsigned src_idx(unsigned lane, int src, int width);
unsigned src_up(unsigned lane, int delta, int width);
unsigned src_down(unsigned lane, int delta, int width);
unsigned src_xor(unsigned lane, int mask, int width);

// Wait until every live thread of the block arrives; the number of arrived
// threads whose `pred` is nonzero, and in `total` the number that arrived.
unsigned barrier(int pred, unsigned* total);

// Launch `body` over the grid, its accesses checked against the device's
// allocations `allocs` (n sorted [lo, hi) pairs): 0 done, 1 a fault in the
// kernel (the device's state is then unknown, as after a GPU's sticky error),
// 2 a launch the configuration refuses. The message goes to err.
int run_grid(Body body, void* ctx, const unsigned* grid, const unsigned* block, unsigned long shared,
             const unsigned long long* allocs, size_t n_allocs, char* err, size_t errlen);

// ---- templates over the kernel's types ---------------------------------------

// The value lane `from` gave, or the caller's own where `from` gave none.
template <class T>
inline T slot_value(const Rendezvous& r, unsigned from, T own) {
    if (from >= 32 || ((r.arrived >> from) & 1u) == 0) return own;
    T out;
    std::memcpy(&out, &r.slots[from], sizeof(T));
    return out;
}

template <class T>
inline T shuffle(const char* fn, unsigned mask, T var, int width, unsigned (*source)(unsigned, int, int), int arg) {
    Unchecked runtime;
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "a shuffle moves up to 8 bytes");
    check_width(fn, width);
    Rendezvous& r = join(k_shfl, mask, &var, sizeof(T), false);
    unsigned lane = lane_id();
    unsigned from = source(lane, arg, width);
    T out = from == lane ? var : slot_value(r, from, var);
    leave(r);
    return out;
}

// Calls a kernel with its arguments read from an array of pointers, as
// cuLaunchKernel's kernelParams: args[i] points at parameter i's bytes.
template <class... A>
struct Thunk {
    void (*kernel)(A...);
    void** args;
    // The parameters are read before checking starts: kernel code, and only
    // kernel code, runs checked.
    template <size_t... I>
    void call(std::index_sequence<I...>) {
        std::tuple<std::remove_cv_t<A>...> values(*static_cast<std::remove_cv_t<A>*>(args[I])...);
        void (*const entry)(A...) = kernel;
        memcheck_on();
        entry(std::get<I>(values)...);
        memcheck_off();
    }
    static void run(void* self) { static_cast<Thunk*>(self)->call(std::index_sequence_for<A...>{}); }
};

template <class... A>
inline int launch(void (*kernel)(A...), const unsigned* grid, const unsigned* block, unsigned long shared,
                           void** args, const unsigned long long* allocs, size_t n_allocs, char* err, size_t errlen) {
    Thunk<A...> t{kernel, args};
    return run_grid(&Thunk<A...>::run, &t, grid, block, shared, allocs, n_allocs, err, errlen);
}

// The number of a kernel's parameters, and their sizes in `sizes`.
template <class... A>
inline int parameters(void (*)(A...), unsigned* sizes, int room) {
    const unsigned each[] = {unsigned(sizeof(A))..., 0u};
    int n = int(sizeof...(A));
    for (int i = 0; i < n && i < room; ++i) sizes[i] = each[i];
    return n;
}

}  // namespace nxemu

// ---------------------------------------------------------------------------
// Built-in variables
// ---------------------------------------------------------------------------

#define threadIdx (static_cast<const uint3&>(::nxemu::g_thread_idx))
#define blockIdx (static_cast<const uint3&>(::nxemu::g_block_idx))
#define blockDim (static_cast<const dim3&>(::nxemu::g_block_dim))
#define gridDim (static_cast<const dim3&>(::nxemu::g_grid_dim))

// ---------------------------------------------------------------------------
// Synchronisation
// ---------------------------------------------------------------------------

static inline void __syncthreads() { ::nxemu::barrier(0, nullptr); }
static inline int __syncthreads_count(int pred) { return int(::nxemu::barrier(pred, nullptr)); }
static inline int __syncthreads_and(int pred) {
    unsigned total = 0, count = ::nxemu::barrier(pred, &total);
    return count == total;
}
static inline int __syncthreads_or(int pred) { return ::nxemu::barrier(pred, nullptr) != 0; }
static inline void __syncwarp(unsigned mask = 0xFFFFFFFFu) {
    ::nxemu::Unchecked runtime;
    ::nxemu::leave(::nxemu::join(::nxemu::k_syncwarp, mask, nullptr, 0, false));
}
static inline void __threadfence() {}
static inline void __threadfence_block() {}
static inline void __threadfence_system() {}
static inline void __nanosleep(unsigned) {}
[[noreturn]] static inline void __trap() { ::nxemu::fault("__trap()"); }
[[noreturn]] static inline void __brkpt() { ::nxemu::fault("__brkpt()"); }
static inline long long clock64() {
    static thread_local long long ticks = 0;
    return ++ticks;
}

#include "emu_warp.h"
#include "emu_intrinsics.h"

#endif  // NXKERNEL_EMU_CUDA_H

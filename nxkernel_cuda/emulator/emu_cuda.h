// emu_cuda.h: CUDA's execution model on the CPU, for g++.
//
// The emulator compiles the same .cu text NVRTC compiles, with this header
// included before it (the first line of the launcher unit). It gives the text what CUDA C++
// gives a kernel: the execution-space keywords, dim3 and the vector types,
// threadIdx/blockIdx/blockDim/gridDim, __shared__ and extern __shared__
// memory, __syncthreads(), and (in emu_warp.h) 32-lane warps with their
// collectives and (in emu_intrinsics.h) atomics, the device intrinsics and
// libm's math.
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

inline const char* kind_name(int k) {
    static const char* const names[] = {"__shfl*_sync", "__ballot_sync", "__any_sync", "__all_sync",
                                        "__syncwarp", "__match_any_sync", "__match_all_sync",
                                        "__reduce*_sync", "__activemask"};
    return k >= 0 && k < k_kinds ? names[k] : "?";
}

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

inline Memcheck g_check;

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

// Unmaps the fibers' stacks. Each guard page splits the mapping, so a block's
// stacks take two of the process's vm.max_map_count mappings per thread; a
// launch releases them when it ends, so the many loaded modules hold none.
inline void release_stacks(State& s) {
    if (s.stacks != nullptr) munmap(s.stacks, s.map_bytes);
    s.stacks = nullptr;
    s.map_bytes = 0;
    s.stack_count = 0;
}

inline thread_local std::unique_ptr<State> tls_state;

inline State& state() {
    if (!tls_state) tls_state.reset(new State());
    return *tls_state;
}

inline Fiber& self() { return *state().current; }

// ---- context switching -----------------------------------------------------

#ifndef NXEMU_USE_UCONTEXT
// x86-64 System V: save the callee-saved registers, MXCSR and the x87 control
// word on the old stack, store its pointer, load the new one, restore, return.
// Saves glibc swapcontext's signal-mask system call on every switch.
extern "C" void nxemu_switch(void** save_sp, void* load_sp);
__asm__(
    ".text\n"
    ".p2align 4\n"
    ".hidden nxemu_switch\n"
    ".type nxemu_switch, @function\n"
    "nxemu_switch:\n"
    "    pushq %rbp\n"
    "    pushq %rbx\n"
    "    pushq %r12\n"
    "    pushq %r13\n"
    "    pushq %r14\n"
    "    pushq %r15\n"
    "    subq $8, %rsp\n"
    "    stmxcsr (%rsp)\n"
    "    fnstcw 4(%rsp)\n"
    "    movq %rsp, (%rdi)\n"
    "    movq %rsi, %rsp\n"
    "    ldmxcsr (%rsp)\n"
    "    fldcw 4(%rsp)\n"
    "    addq $8, %rsp\n"
    "    popq %r15\n"
    "    popq %r14\n"
    "    popq %r13\n"
    "    popq %r12\n"
    "    popq %rbx\n"
    "    popq %rbp\n"
    "    ret\n"
    ".size nxemu_switch, .-nxemu_switch\n");
#endif

// Back to the scheduler; returns when the scheduler resumes this fiber.
inline void yield() {
    State& s = state();
    Fiber* f = s.current;
#ifdef NXEMU_USE_UCONTEXT
    swapcontext(&f->ctx, &s.sched_ctx);
#else
    nxemu_switch(&f->sp, s.sched_sp);
#endif
}

// Record a fault and leave the fiber for good: the launch stops.
[[noreturn]] inline void fault_exit() {
    State& s = state();
    s.failed = true;
    for (;;) yield();  // the scheduler never resumes a fiber of a failed launch
}

template <class... A>
[[noreturn]] inline void fault(const char* fmt, A... args) {
    memcheck_off();
    State& s = state();
    if (!s.failed) {
        const uint3 t = s.current->thread_idx;
        int n = snprintf(s.message, sizeof s.message, "block (%u,%u,%u) thread (%u,%u,%u): ", s.block_idx.x,
                         s.block_idx.y, s.block_idx.z, t.x, t.y, t.z);
        if (n > 0 && size_t(n) < sizeof s.message) snprintf(s.message + n, sizeof s.message - n, fmt, args...);
    }
    fault_exit();
}

}  // namespace nxemu

#include "emu_memcheck.h"

namespace nxemu {

// The built-in variables of the running thread, kept where a kernel reads
// them at constant addresses (unchecked): the block's when it starts, the
// thread's when its fiber resumes.
inline uint3 g_thread_idx{0, 0, 0}, g_block_idx{0, 0, 0};
inline dim3 g_block_dim, g_grid_dim;

// ---- warp rendezvous -------------------------------------------------------

inline unsigned popc(unsigned v) { return unsigned(__builtin_popcount(v)); }

// The lanes of warp `wi` that wait elsewhere than in `r`: at a block barrier
// not yet released, or in another collective not yet complete. (A lane whose
// wait is over is as good as running: it will reach what its warp reaches.)
inline unsigned waiting_elsewhere(const State& s, unsigned wi, const Rendezvous& r) {
    unsigned out = 0;
    for (unsigned l = 0; l < 32; ++l) {
        unsigned i = wi * 32 + l;
        if (i >= s.fibers.size()) break;
        const Fiber& f = s.fibers[i];
        bool at_barrier = f.run == Run::at_barrier && f.wait_gen == s.bar_gen;
        bool in_other = f.run == Run::in_collective && f.wait_rv != &r && !f.wait_rv->complete;
        if (at_barrier || in_other) out |= 1u << l;
    }
    return out;
}

// Complete `r` once every lane it waits for has arrived: for a collective,
// the lanes of its mask that exist and have not exited; for __activemask,
// those of the warp that neither exited nor wait elsewhere (lanes that have
// not run yet in this pass count as converged with the caller).
inline void check_complete(const State& s, unsigned wi, Rendezvous& r) {
    if (r.complete) return;
    const Warp& w = s.warps[wi];
    unsigned need = r.mask & w.present & ~w.exited;
    if (r.kind == k_activemask) need &= ~waiting_elsewhere(s, wi, r);
    if ((r.arrived & need) == need) {
        r.complete = true;
        r.readers = popc(r.arrived);
    }
}

// A lane of warp `wi` started to wait, or exited: a rendezvous waiting for
// it may be complete now.
inline void recheck(State& s, unsigned wi) {
    for (Rendezvous& r : s.warps[wi].rv)
        if (r.used && !r.complete) check_complete(s, wi, r);
}

// Join the collective `kind` of the calling lane's warp with `mask`, giving
// `value` (of up to 8 bytes) and `pred`; returns the completed rendezvous. The
// caller reads it, then calls `leave`.
inline Rendezvous& join(int kind, unsigned mask, const void* value, size_t size, bool pred) {
    State& s = state();
    Fiber* f = s.current;
    Warp& w = s.warps[f->warp];
    unsigned bit = 1u << f->lane;
    if ((mask & bit) == 0)
        fault("%s with mask 0x%08x, which does not name the calling lane %u", kind_name(kind), mask, f->lane);
    Rendezvous* r = nullptr;
    for (Rendezvous& c : w.rv)
        if (c.used && !c.complete && c.kind == kind && c.mask == mask && (c.arrived & bit) == 0) {
            r = &c;
            break;
        }
    if (r == nullptr) {
        for (Rendezvous& c : w.rv)
            if (!c.used) {
                r = &c;
                break;
            }
        if (r == nullptr) fault("internal: no free rendezvous in warp %u", f->warp);
        r->used = true;
        r->complete = false;
        r->kind = kind;
        r->mask = mask;
        r->arrived = r->preds = r->readers = 0;
    }
    r->slots[f->lane] = 0;
    if (size > 0) std::memcpy(&r->slots[f->lane], value, size);
    if (pred) r->preds |= bit;
    r->arrived |= bit;
    f->run = Run::in_collective;
    f->wait_rv = r;
    recheck(s, f->warp);  // r, and an __activemask that no longer waits for this lane
    if (!r->complete) yield();
    f->run = Run::ready;
    return *r;
}

inline void leave(Rendezvous& r) {
    if (--r.readers == 0) r.used = false;
}

inline unsigned lane_id() { return self().lane; }

inline void check_width(const char* fn, int width) {
    if (width < 1 || width > 32 || (width & (width - 1)) != 0)
        fault("%s with width %d, not a power of two in [1, 32]", fn, width);
}

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

// Source lanes, as CUDA states them: __shfl_sync reads lane srcLane of the
// caller's group of `width`; _up and _down read delta lanes away and keep the
// caller's value where that leaves the group; _xor reads lane ^ laneMask and
// keeps the caller's value where that is in a later group.
inline unsigned src_idx(unsigned lane, int src, int width) {
    return (lane & ~unsigned(width - 1)) + (unsigned(src) & unsigned(width - 1));
}
inline unsigned src_up(unsigned lane, int delta, int width) {
    return (lane & unsigned(width - 1)) < unsigned(delta) ? lane : lane - unsigned(delta);
}
inline unsigned src_down(unsigned lane, int delta, int width) {
    return (lane & unsigned(width - 1)) + unsigned(delta) >= unsigned(width) ? lane : lane + unsigned(delta);
}
inline unsigned src_xor(unsigned lane, int mask, int width) {
    unsigned from = lane ^ unsigned(mask);
    unsigned end = (lane & ~unsigned(width - 1)) + unsigned(width);
    return from >= end ? lane : from;
}

// ---- the block barrier -----------------------------------------------------

inline void release_barrier(State& s) {
    unsigned slot = s.bar_gen & 1u;
    s.bar_total[slot] = s.bar_arrived;
    s.bar_arrived = 0;
    s.bar_gen += 1;
    s.bar_count[s.bar_gen & 1u] = 0;
}

// Wait until every live thread of the block arrives; the number of arrived
// threads whose `pred` is nonzero, and in `total` the number that arrived.
inline unsigned barrier(int pred, unsigned* total) {
    Unchecked runtime;
    State& s = state();
    Fiber* f = s.current;
    unsigned gen = s.bar_gen, slot = gen & 1u;
    s.bar_count[slot] += pred != 0;
    s.bar_arrived += 1;
    if (s.bar_arrived >= s.live) {
        release_barrier(s);
    } else {
        f->run = Run::at_barrier;
        f->wait_gen = gen;
        recheck(s, f->warp);  // an __activemask no longer waits for this lane
        yield();
        f->run = Run::ready;
    }
    if (total != nullptr) *total = s.bar_total[slot];
    return s.bar_count[slot];
}

// ---- launching -------------------------------------------------------------

[[noreturn]] inline void fiber_main() {
    State& s = state();
    s.body(s.body_ctx);
    // The thread returned: it leaves the block barrier and its warp's rendezvous.
    Fiber* f = s.current;
    f->run = Run::done;
    s.live -= 1;
    if (s.bar_arrived > 0 && s.bar_arrived >= s.live) release_barrier(s);
    s.warps[f->warp].exited |= 1u << f->lane;
    recheck(s, f->warp);
    for (;;) yield();  // the scheduler never resumes a finished fiber
}

#ifdef NXEMU_USE_UCONTEXT
inline void fiber_entry() { fiber_main(); }
#endif

inline size_t page_size() { return size_t(sysconf(_SC_PAGESIZE)); }

// Stack bytes per fiber: $NXKERNEL_EMU_STACK_KIB KiB, 256 KiB by default: headroom
// for deep device code (the matrix routines' frames are under 1 KiB, checked or
// not; a whole-kit crash once blamed on 64 KiB stacks was the memory checker's,
// see emu_memcheck.h's check), and untouched pages cost nothing.
inline size_t wanted_stack() {
    const char* e = getenv("NXKERNEL_EMU_STACK_KIB");
    size_t kib = 256;
    if (e != nullptr && *e != '\0') kib = strtoul(e, nullptr, 10);
    if (kib < 16) kib = 16;
    size_t ps = page_size();
    return (kib * 1024 + ps - 1) / ps * ps;
}

inline bool ensure_stacks(State& s, unsigned count, char* err, size_t errlen) {
    size_t want = wanted_stack();
    if (s.stacks != nullptr && s.stack_count >= count && s.stack_bytes == want) return true;
    release_stacks(s);
    size_t ps = page_size(), each = want + ps;
    size_t total = each * count;
    void* m = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) {
        s.stacks = nullptr;
        snprintf(err, errlen, "cannot map %zu bytes of fiber stacks", total);
        return false;
    }
    s.stacks = static_cast<unsigned char*>(m);
    s.map_bytes = total;
    s.stack_bytes = want;
    s.stack_count = count;
    for (unsigned i = 0; i < count; ++i) mprotect(s.stacks + i * each, ps, PROT_NONE);  // a guard page below each
    return true;
}

inline void start_fiber(State& s, Fiber& f, unsigned i) {
    size_t each = s.stack_bytes + page_size();
    unsigned char* lo = s.stacks + i * each + page_size();
#ifdef NXEMU_USE_UCONTEXT
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = lo;
    f.ctx.uc_stack.ss_size = s.stack_bytes;
    f.ctx.uc_link = nullptr;
    makecontext(&f.ctx, fiber_entry, 0);
#else
    // The frame nxemu_switch pops: MXCSR and x87 control word, six registers,
    // then the return into fiber_main, entered as if called (rsp = 8 mod 16).
    uintptr_t top = (uintptr_t(lo) + s.stack_bytes) & ~uintptr_t(15);
    void** sp = reinterpret_cast<void**>(top);
    *--sp = nullptr;  // fiber_main's return address: it never returns
    *--sp = reinterpret_cast<void*>(&fiber_main);
    for (int r = 0; r < 6; ++r) *--sp = nullptr;
    *--sp = nullptr;
    unsigned* env = reinterpret_cast<unsigned*>(sp);
    env[0] = 0x1F80u;  // MXCSR: round to nearest, exceptions masked, no FTZ or DAZ
    env[1] = 0x037Fu;  // x87 control word: the default
    f.sp = sp;
#endif
}

inline void resume(State& s, Fiber& f) {
    s.current = &f;
    g_thread_idx = f.thread_idx;
    memcheck_stack(reinterpret_cast<uintptr_t>(s.stacks) + f.linear * (s.stack_bytes + page_size()) + page_size(),
                   s.stack_bytes);
#ifdef NXEMU_USE_UCONTEXT
    swapcontext(&s.sched_ctx, &f.ctx);
#else
    nxemu_switch(&s.sched_sp, f.sp);
#endif
}

inline void describe_deadlock(State& s) {
    unsigned at_bar = 0;
    for (const Fiber& f : s.fibers)
        if (f.run == Run::at_barrier) at_bar += 1;
    int n = snprintf(s.message, sizeof s.message,
                     "deadlock in block (%u,%u,%u): %u of %u live threads wait at __syncthreads()", s.block_idx.x,
                     s.block_idx.y, s.block_idx.z, at_bar, s.live);
    for (size_t wi = 0; wi < s.warps.size() && n > 0 && size_t(n) < sizeof s.message; ++wi)
        for (const Rendezvous& r : s.warps[wi].rv)
            if (r.used && !r.complete) {
                int m = snprintf(s.message + n, sizeof s.message - n,
                                 "; warp %zu: lanes 0x%08x wait in %s(mask 0x%08x)", wi, r.arrived,
                                 kind_name(r.kind), r.mask);
                if (m < 0) break;
                n += m;
                if (size_t(n) >= sizeof s.message) break;
            }
}

// Run one block to its end: 0, or 1 for a fault (the message in s.message).
inline int run_block(State& s, unsigned count) {
    s.live = count;
    s.bar_arrived = 0;
    s.bar_count[0] = s.bar_count[1] = 0;
    s.bar_gen = 0;
    for (size_t wi = 0; wi < s.warps.size(); ++wi) {
        Warp& w = s.warps[wi];
        unsigned lanes = count - unsigned(wi) * 32u;
        w.present = lanes >= 32 ? 0xFFFFFFFFu : (1u << lanes) - 1u;
        w.exited = 0;
        for (Rendezvous& r : w.rv) r.used = false;
    }
    const unsigned bx = s.block_dim.x, bxy = s.block_dim.x * s.block_dim.y;
    for (unsigned i = 0; i < count; ++i) {
        Fiber& f = s.fibers[i];
        f.linear = i;
        f.thread_idx = uint3{i % bx, (i % bxy) / bx, i / bxy};
        f.warp = i / 32;
        f.lane = i % 32;
        f.run = Run::ready;
        f.wait_rv = nullptr;
        start_fiber(s, f, i);
    }
    while (s.live > 0) {
        bool ran = false;
        for (unsigned i = 0; i < count; ++i) {
            Fiber& f = s.fibers[i];
            if (f.run == Run::done) continue;
            if (f.run == Run::at_barrier && s.bar_gen == f.wait_gen) continue;
            if (f.run == Run::in_collective && !f.wait_rv->complete) continue;
            resume(s, f);
            ran = true;
            if (s.failed) return 1;
        }
        if (!ran && s.live > 0) {
            describe_deadlock(s);
            return 1;
        }
    }
    return 0;
}

// Launch `body` over the grid, its accesses checked against the device's
// allocations `allocs` (n sorted [lo, hi) pairs): 0 done, 1 a fault in the
// kernel (the device's state is then unknown, as after a GPU's sticky error),
// 2 a launch the configuration refuses. The message goes to err.
inline int run_grid(Body body, void* ctx, const unsigned* grid, const unsigned* block, unsigned long shared,
                             const unsigned long long* allocs, size_t n_allocs, char* err, size_t errlen) {
    State& s = state();
    unsigned long long count = 1ull * block[0] * block[1] * block[2];
    if (count == 0 || count > 1024 || block[0] > 1024 || block[1] > 1024 || block[2] > 64) {
        snprintf(err, errlen,
                 "block (%u,%u,%u) is not a CUDA block: each extent >= 1, x, y <= 1024, z <= 64, "
                 "at most 1024 threads",
                 block[0], block[1], block[2]);
        return 2;
    }
    if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0 || grid[0] > 2147483647u || grid[1] > 65535u ||
        grid[2] > 65535u) {
        snprintf(err, errlen, "grid (%u,%u,%u) is not a CUDA grid: each extent >= 1, x < 2^31, y, z <= 65535",
                 grid[0], grid[1], grid[2]);
        return 2;
    }
    if (shared > nxemu_dynamic_shared_capacity()) {
        snprintf(err, errlen, "%lu bytes of dynamic shared memory, more than the %lu a block has", shared,
                 nxemu_dynamic_shared_capacity());
        return 2;
    }
    unsigned n = unsigned(count);
    if (!ensure_stacks(s, n, err, errlen)) return 2;
    if (s.fibers.size() < n) s.fibers.resize(n);
    s.warps.resize((n + 31) / 32);
    s.block_dim = dim3(block[0], block[1], block[2]);
    s.grid_dim = dim3(grid[0], grid[1], grid[2]);
    s.body = body;
    s.body_ctx = ctx;
    s.failed = false;
    s.message[0] = '\0';
    fenv_t saved;
    fegetenv(&saved);
    fesetenv(FE_DFL_ENV);
    int status = 0;
    g_block_dim = s.block_dim;
    g_grid_dim = s.grid_dim;
    unsigned char* dyn = nxemu_dynamic_shared_base();
    memcheck_begin(shared, allocs, n_allocs);
    for (unsigned z = 0; z < grid[2] && status == 0; ++z)
        for (unsigned y = 0; y < grid[1] && status == 0; ++y)
            for (unsigned x = 0; x < grid[0] && status == 0; ++x) {
                s.block_idx = uint3{x, y, z};
                g_block_idx = s.block_idx;
                if (shared > 0) std::memset(dyn, 0xFF, shared);
                status = run_block(s, n);
            }
    memcheck_end();
    fesetenv(&saved);
    s.current = nullptr;
    release_stacks(s);
    if (status != 0) snprintf(err, errlen, "%s", s.message);
    return status;
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

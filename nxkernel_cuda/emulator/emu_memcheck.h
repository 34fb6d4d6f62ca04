// emu_memcheck.h: every memory access of a kernel checked as a GPU (and
// compute-sanitizer's memcheck) checks it. Included by emu_runtime.cpp, after
// emu_cuda.h: every module links these functions with the runtime.
//
// The driver compiles each source with g++'s instrumentation and no runtime
// library of g++'s: -fsanitize=kernel-address with outline calls makes every
// load and store a call to __asan_{load,store}{1,2,4,8,16}_noabort(address)
// for an access of a type aligned to its size n, or
// __asan_{load,store}N_noabort(address, n) for an under-aligned aggregate
// (a struct of two floats) or a builtin memcpy. This header defines those
// functions. While a kernel runs (`on`), an access
//
//  * of a type aligned to its size n faults where its address is not a
//    multiple of n (of 8 for 16 bytes, which g++ also calls the 16-byte hook
//    for when 8-aligned): a GPU's load or store of n bytes needs one, and NVRTC
//    emits the type's own width (an unsigned long long or a float2 is one
//    8-byte access; a struct of two floats is two 4-byte accesses, which the
//    N hooks leave unchecked for alignment);
//  * of n bytes at address a faults unless [a, a + n) lies inside one of:
//    a live allocation of the launch's device (the table the driver passes),
//    the block's shared memory (the module's thread-local block, with the
//    dynamic shared memory cut at the bytes the launch asked for), the
//    running thread's stack (its local memory), or the module's own image
//    (__device__ and __constant__ variables, literals).
//
// The runtime's own functions are NXEMU_RT (not instrumented); the built-in
// variables are globals read at constant addresses, which g++ does not
// instrument. Checks run in launch order, so the first faulting access of the
// first faulting thread is the one reported. Only code running on the running
// fiber's stack is checked: `g_check` is the module's, one for every OS thread.

#ifndef NXKERNEL_EMU_MEMCHECK_H
#define NXKERNEL_EMU_MEMCHECK_H

#include <link.h>
#include <pthread.h>

namespace nxemu {

// The module's image and this thread's instance of its thread-local block.
struct ModuleSpans {
    uintptr_t image_lo = ~uintptr_t(0), image_hi = 0, tls_lo = 0, tls_len = 0;
    bool found = false;
};

NXEMU_RT inline int find_module(struct dl_phdr_info* info, size_t, void* out) {
    ModuleSpans& m = *static_cast<ModuleSpans*>(out);
    const uintptr_t me = reinterpret_cast<uintptr_t>(&g_check);
    uintptr_t lo = ~uintptr_t(0), hi = 0, tls_len = 0;
    bool mine = false;
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr)& ph = info->dlpi_phdr[i];
        if (ph.p_type == PT_TLS) tls_len = ph.p_memsz;
        if (ph.p_type != PT_LOAD) continue;
        const uintptr_t a = info->dlpi_addr + ph.p_vaddr, b = a + ph.p_memsz;
        if (a < lo) lo = a;
        if (b > hi) hi = b;
        if (me >= a && me < b) mine = true;
    }
    if (!mine) return 0;
    m.image_lo = lo;
    m.image_hi = hi;
    m.tls_lo = reinterpret_cast<uintptr_t>(info->dlpi_tls_data);
    m.tls_len = tls_len;
    m.found = true;
    return 1;
}

// Set the regions for a launch with `shared` bytes of dynamic shared memory
// over the device's allocations `allocs` (n sorted [lo, hi) pairs).
NXEMU_RT inline void memcheck_begin(unsigned long shared, const unsigned long long* allocs, size_t n) {
    Memcheck& c = g_check;
    unsigned char* dyn = nxemu_dynamic_shared_base();  // touching it allocates this thread's block
    (void)state();
    ModuleSpans m;
    dl_iterate_phdr(find_module, &m);
    c.dyn_lo = reinterpret_cast<uintptr_t>(dyn);
    c.dyn_asked = shared;
    c.dyn_cap = nxemu_dynamic_shared_capacity();
    c.image_lo = m.image_lo;
    c.image_len = m.found ? m.image_hi - m.image_lo : 0;
    if (m.found && m.tls_lo != 0 && c.dyn_lo >= m.tls_lo && c.dyn_lo + c.dyn_cap <= m.tls_lo + m.tls_len) {
        c.shared_lo = m.tls_lo;
        c.shared_len = c.dyn_lo + shared - m.tls_lo;
        c.tail_lo = c.dyn_lo + c.dyn_cap;
        c.tail_len = m.tls_lo + m.tls_len - c.tail_lo;
    } else {  // no thread-local block found: the dynamic memory alone
        c.shared_lo = c.dyn_lo;
        c.shared_len = shared;
        c.tail_lo = c.tail_len = 0;
    }
    c.allocs = allocs;
    c.nallocs = n;
    c.stack_lo = c.stack_len = 0;
    for (unsigned i = 0; i < HITS; ++i) c.hit_lo[i] = c.hit_len[i] = 0;
    memcheck_off();  // until a kernel's code runs
}

NXEMU_RT inline void memcheck_end() {
    memcheck_off();
    g_check.allocs = nullptr;
    g_check.nallocs = 0;
}

NXEMU_RT inline void memcheck_stack(uintptr_t lo, size_t len) {
    g_check.stack_lo = lo;
    g_check.stack_len = len;
}

NXEMU_RT inline bool inside(uintptr_t a, size_t n, uintptr_t lo, uintptr_t len) {
    const uintptr_t off = a - lo;
    return off < len && len - off >= n;
}

// The allocation holding or nearest to `a` (the device has one at least).
NXEMU_RT inline size_t nearest_allocation(uintptr_t a) {
    const Memcheck& c = g_check;
    size_t lo = 0, hi = c.nallocs;  // the first allocation starting after a
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (c.allocs[2 * mid] <= a) lo = mid + 1; else hi = mid;
    }
    if (lo == 0) return 0;
    const size_t below = lo - 1;
    if (lo == c.nallocs || a < c.allocs[2 * below + 1]) return below;
    // the one below unless a is nearer the start of the one above
    return a - c.allocs[2 * below + 1] <= c.allocs[2 * lo] - a ? below : lo;
}

[[noreturn]] NXEMU_RT __attribute__((noinline)) inline void out_of_bounds(uintptr_t a, size_t n, bool store) {
    const Memcheck& c = g_check;
    const char* what = store ? "write" : "read";
    if (a >= c.dyn_lo && a < c.dyn_lo + c.dyn_cap)
        fault("invalid __shared__ %s of %zu bytes at 0x%lx: byte %lu of dynamic shared memory, past the %lu "
              "bytes its launch asked for",
              what, n, (unsigned long)a, (unsigned long)(a - c.dyn_lo), (unsigned long)c.dyn_asked);
    if (c.nallocs == 0)
        fault("invalid __global__ %s of %zu bytes at 0x%lx: the device has no live allocation", what, n,
              (unsigned long)a);
    const size_t i = nearest_allocation(a);
    const unsigned long long lo = c.allocs[2 * i], hi = c.allocs[2 * i + 1];
    if (a < lo)
        fault("invalid __global__ %s of %zu bytes at 0x%lx: %llu bytes before the nearest allocation, 0x%llx "
              "of %llu bytes",
              what, n, (unsigned long)a, lo - a, lo, hi - lo);
    fault("invalid __global__ %s of %zu bytes at 0x%lx: %llu bytes past the end of the nearest allocation, "
          "0x%llx of %llu bytes",
          what, n, (unsigned long)a, (unsigned long long)(a + n) - hi, lo, hi - lo);
}

NXEMU_RT __attribute__((noinline)) inline void check_slow(uintptr_t a, size_t n, bool store) {
    Memcheck& c = g_check;
    if (!c.on) return;
    if (inside(a, n, c.tail_lo, c.tail_len) || inside(a, n, c.image_lo, c.image_len)) return;
    if (c.nallocs > 0) {
        const size_t i = nearest_allocation(a);
        const uintptr_t lo = c.allocs[2 * i], len = c.allocs[2 * i + 1] - lo;
        if (inside(a, n, lo, len)) {
            c.hit_lo[c.next_hit] = lo;
            c.hit_len[c.next_hit] = len;
            c.next_hit = (c.next_hit + 1) % HITS;
            return;
        }
    }
    out_of_bounds(a, n, store);
}

NXEMU_RT inline const char* space_of(uintptr_t a) {
    const Memcheck& c = g_check;
    if (inside(a, 1, c.stack_lo, c.stack_len)) return "__local__";
    if (inside(a, 1, c.shared_lo, c.shared_len) || inside(a, 1, c.dyn_lo, c.dyn_cap) ||
        inside(a, 1, c.tail_lo, c.tail_len))
        return "__shared__";
    return "__global__";
}

[[noreturn]] NXEMU_RT __attribute__((noinline)) inline void misaligned(uintptr_t a, size_t n, bool store) {
    fault("invalid %s %s of %zu bytes at 0x%lx: misaligned address, not a multiple of %zu", space_of(a),
          store ? "write" : "read", n, (unsigned long)a, n);
}

// The check of every access of n bytes at a: its alignment where `aligned`
// (g++ calls the fixed-size hooks for an access of a type aligned to its
// size, or to 8 bytes for a 16-byte one, as a pair of doubles; the N hooks
// for an under-aligned aggregate or a builtin memcpy, which a GPU splits into
// narrower accesses), then inline range compares of the allocations found
// last, the shared memory and the stack, then a search.
NXEMU_RT inline void check(uintptr_t a, size_t n, bool store, bool aligned) {
    const Memcheck& c = g_check;
    if (!c.on) return;
    // Kernel code runs on the running fiber's stack. Code of the module that
    // another OS thread runs meanwhile (the destructor of the runtime's
    // thread-local state as a thread exits, a query of a kernel's parameters:
    // the launch lock orders launches only) is no kernel's: unchecked, where
    // it would fault in the launch's name, from a thread with no fiber.
    if (!inside(reinterpret_cast<uintptr_t>(__builtin_frame_address(0)), 1, c.stack_lo, c.stack_len)) return;
    if (aligned && (a & ((n < 8 ? n : 8) - 1)) != 0) misaligned(a, n < 8 ? n : 8, store);
    static_assert(HITS == 4, "the compares below are unrolled");
    if (inside(a, n, c.hit_lo[0], c.hit_len[0]) || inside(a, n, c.hit_lo[1], c.hit_len[1]) ||
        inside(a, n, c.hit_lo[2], c.hit_len[2]) || inside(a, n, c.hit_lo[3], c.hit_len[3]) ||
        inside(a, n, c.shared_lo, c.shared_len) || inside(a, n, c.stack_lo, c.stack_len))
        return;
    check_slow(a, n, store);
}

}  // namespace nxemu

// The functions g++'s instrumentation calls (hidden: each module has its own).
#define NXEMU_HOOK extern "C" NXEMU_RT __attribute__((visibility("hidden")))
#define NXEMU_HOOKS(N)                                                                                 \
    NXEMU_HOOK void __asan_load##N##_noabort(uintptr_t a) { ::nxemu::check(a, N, false, true); }       \
    NXEMU_HOOK void __asan_store##N##_noabort(uintptr_t a) { ::nxemu::check(a, N, true, true); }
NXEMU_HOOKS(1)
NXEMU_HOOKS(2)
NXEMU_HOOKS(4)
NXEMU_HOOKS(8)
NXEMU_HOOKS(16)
#undef NXEMU_HOOKS
NXEMU_HOOK void __asan_loadN_noabort(uintptr_t a, size_t n) { ::nxemu::check(a, n, false, false); }
NXEMU_HOOK void __asan_storeN_noabort(uintptr_t a, size_t n) { ::nxemu::check(a, n, true, false); }
NXEMU_HOOK void __asan_handle_no_return() {}
#undef NXEMU_HOOK

#endif  // NXKERNEL_EMU_MEMCHECK_H

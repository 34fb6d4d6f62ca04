// emu_runtime.cpp: the emulator's runtime, compiled once (per compiler, flags
// and emulator text) and linked into every module: the fibers and their
// scheduler, the block barrier, the warp rendezvous, the launch of a grid, and
// the memory checker (emu_memcheck.h). emu_cuda.h declares what kernel code and
// its templates call; each module links its own copy (hidden symbols), so a
// module's checker, thread-local state and built-in variables are its own.
// What emu_cuda.h declares is documented there; the comments here are on
// the runtime's own helpers.

#include <cstdarg>

#include "emu_cuda.h"
#include "emu_memcheck.h"

namespace nxemu {

Memcheck g_check;

static const char* kind_name(int k) {
    static const char* const names[] = {"__shfl*_sync", "__ballot_sync", "__any_sync", "__all_sync",
                                        "__syncwarp", "__match_any_sync", "__match_all_sync",
                                        "__reduce*_sync", "__activemask"};
    return k >= 0 && k < k_kinds ? names[k] : "?";
}

// Unmaps the fibers' stacks. Each guard page splits the mapping, so a block's
// stacks take two of the process's vm.max_map_count mappings per thread; a
// launch releases them when it ends, so the many loaded modules hold none.
static void release_stacks(State& s) {
    if (s.stacks != nullptr) munmap(s.stacks, s.map_bytes);
    s.stacks = nullptr;
    s.map_bytes = 0;
    s.stack_count = 0;
}

thread_local std::unique_ptr<State> tls_state;

State& state() {
    if (!tls_state) tls_state.reset(new State());
    return *tls_state;
}

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

void yield() {
    State& s = state();
    Fiber* f = s.current;
#ifdef NXEMU_USE_UCONTEXT
    swapcontext(&f->ctx, &s.sched_ctx);
#else
    nxemu_switch(&f->sp, s.sched_sp);
#endif
}

[[noreturn]] void fault_exit() {
    State& s = state();
    s.failed = true;
    for (;;) yield();  // the scheduler never resumes a fiber of a failed launch
}

[[noreturn]] void fault(const char* fmt, ...) {
    memcheck_off();
    State& s = state();
    if (!s.failed) {
        const uint3 t = s.current->thread_idx;
        int n = snprintf(s.message, sizeof s.message, "block (%u,%u,%u) thread (%u,%u,%u): ", s.block_idx.x,
                         s.block_idx.y, s.block_idx.z, t.x, t.y, t.z);
        if (n > 0 && size_t(n) < sizeof s.message) {
            va_list args;
            va_start(args, fmt);
            vsnprintf(s.message + n, sizeof s.message - n, fmt, args);
            va_end(args);
        }
    }
    fault_exit();
}

uint3 g_thread_idx{0, 0, 0}, g_block_idx{0, 0, 0};
dim3 g_block_dim, g_grid_dim;

// ---- warp rendezvous -------------------------------------------------------

static unsigned popc(unsigned v) { return unsigned(__builtin_popcount(v)); }

// The lanes of warp `wi` that wait elsewhere than in `r`: at a block barrier
// not yet released, or in another collective not yet complete. (A lane whose
// wait is over is as good as running: it will reach what its warp reaches.)
static unsigned waiting_elsewhere(const State& s, unsigned wi, const Rendezvous& r) {
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
static void check_complete(const State& s, unsigned wi, Rendezvous& r) {
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
static void recheck(State& s, unsigned wi) {
    for (Rendezvous& r : s.warps[wi].rv)
        if (r.used && !r.complete) check_complete(s, wi, r);
}

Rendezvous& join(int kind, unsigned mask, const void* value, size_t size, bool pred) {
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

void leave(Rendezvous& r) {
    if (--r.readers == 0) r.used = false;
}

unsigned lane_id() { return self().lane; }

void check_width(const char* fn, int width) {
    if (width < 1 || width > 32 || (width & (width - 1)) != 0)
        fault("%s with width %d, not a power of two in [1, 32]", fn, width);
}


unsigned src_idx(unsigned lane, int src, int width) {
    return (lane & ~unsigned(width - 1)) + (unsigned(src) & unsigned(width - 1));
}
unsigned src_up(unsigned lane, int delta, int width) {
    return (lane & unsigned(width - 1)) < unsigned(delta) ? lane : lane - unsigned(delta);
}
unsigned src_down(unsigned lane, int delta, int width) {
    return (lane & unsigned(width - 1)) + unsigned(delta) >= unsigned(width) ? lane : lane + unsigned(delta);
}
unsigned src_xor(unsigned lane, int mask, int width) {
    unsigned from = lane ^ unsigned(mask);
    unsigned end = (lane & ~unsigned(width - 1)) + unsigned(width);
    return from >= end ? lane : from;
}

// ---- the block barrier -----------------------------------------------------

static void release_barrier(State& s) {
    unsigned slot = s.bar_gen & 1u;
    s.bar_total[slot] = s.bar_arrived;
    s.bar_arrived = 0;
    s.bar_gen += 1;
    s.bar_count[s.bar_gen & 1u] = 0;
}

unsigned barrier(int pred, unsigned* total) {
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

[[noreturn]] static void fiber_main() {
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
static void fiber_entry() { fiber_main(); }
#endif

static size_t page_size() { return size_t(sysconf(_SC_PAGESIZE)); }

// Stack bytes per fiber: $NXKERNEL_EMU_STACK_KIB KiB, 256 KiB by default: headroom
// for deep device code (the matrix routines' frames are under 1 KiB, checked or
// not; a whole-kit crash once blamed on 64 KiB stacks was the memory checker's,
// see emu_memcheck.h's check), and untouched pages cost nothing.
static size_t wanted_stack() {
    const char* e = getenv("NXKERNEL_EMU_STACK_KIB");
    size_t kib = 256;
    if (e != nullptr && *e != '\0') kib = strtoul(e, nullptr, 10);
    if (kib < 16) kib = 16;
    size_t ps = page_size();
    return (kib * 1024 + ps - 1) / ps * ps;
}

static bool ensure_stacks(State& s, unsigned count, char* err, size_t errlen) {
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

static void start_fiber(State& s, Fiber& f, unsigned i) {
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

static void resume(State& s, Fiber& f) {
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

static void describe_deadlock(State& s) {
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
static int run_block(State& s, unsigned count) {
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

int run_grid(Body body, void* ctx, const unsigned* grid, const unsigned* block, unsigned long shared,
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

}  // namespace nxemu

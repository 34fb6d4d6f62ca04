// emu_warp.h: CUDA's warp collectives on the CPU. Included by emu_cuda.h,
// after the runtime, whose rendezvous (nxemu::join) they are built on.
//
// Rule: a collective completes when every lane its mask names that exists and
// has not exited has called the same kind of collective with the same mask;
// a lane reads what the others gave, and a source lane that gave nothing
// (outside the mask, or past the group of `width`) reads as the caller's own
// value, which CUDA leaves undefined.

#ifndef NXKERNEL_EMU_WARP_H
#define NXKERNEL_EMU_WARP_H

// ---------------------------------------------------------------------------
// Warp collectives
// ---------------------------------------------------------------------------

template <class T>
static inline T __shfl_sync(unsigned mask, T var, int src, int width = warpSize) {
    return ::nxemu::shuffle("__shfl_sync", mask, var, width, ::nxemu::src_idx, src);
}
template <class T>
static inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {
    return ::nxemu::shuffle("__shfl_up_sync", mask, var, width, ::nxemu::src_up, int(delta));
}
template <class T>
static inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {
    return ::nxemu::shuffle("__shfl_down_sync", mask, var, width, ::nxemu::src_down, int(delta));
}
template <class T>
static inline T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize) {
    return ::nxemu::shuffle("__shfl_xor_sync", mask, var, width, ::nxemu::src_xor, lane_mask);
}

static inline unsigned __ballot_sync(unsigned mask, int pred) {
    ::nxemu::Unchecked runtime;
    ::nxemu::Rendezvous& r = ::nxemu::join(::nxemu::k_ballot, mask, nullptr, 0, pred != 0);
    unsigned out = r.preds & r.arrived;
    ::nxemu::leave(r);
    return out;
}
static inline int __any_sync(unsigned mask, int pred) {
    ::nxemu::Unchecked runtime;
    ::nxemu::Rendezvous& r = ::nxemu::join(::nxemu::k_any, mask, nullptr, 0, pred != 0);
    int out = (r.preds & r.arrived) != 0;
    ::nxemu::leave(r);
    return out;
}
static inline int __all_sync(unsigned mask, int pred) {
    ::nxemu::Unchecked runtime;
    ::nxemu::Rendezvous& r = ::nxemu::join(::nxemu::k_all, mask, nullptr, 0, pred != 0);
    int out = (r.preds & r.arrived) == r.arrived;
    ::nxemu::leave(r);
    return out;
}
// The lanes that reach this call together: a rendezvous of the warp's lanes
// that have neither exited nor wait elsewhere (see check_complete). Where
// lanes of a warp call it at different points, the emulator may join them.
static inline unsigned __activemask() {
    ::nxemu::Unchecked runtime;
    ::nxemu::Rendezvous& r = ::nxemu::join(::nxemu::k_activemask, 0xFFFFFFFFu, nullptr, 0, false);
    unsigned out = r.arrived;
    ::nxemu::leave(r);
    return out;
}

template <class T>
static inline unsigned __match_any_sync(unsigned mask, T value) {
    ::nxemu::Unchecked runtime;
    static_assert(sizeof(T) <= 8, "__match_any_sync takes 32- and 64-bit values");
    ::nxemu::Rendezvous& r = ::nxemu::join(::nxemu::k_match_any, mask, &value, sizeof(T), false);
    unsigned out = 0;
    for (unsigned l = 0; l < 32; ++l)
        if (((r.arrived >> l) & 1u) && std::memcmp(&r.slots[l], &value, sizeof(T)) == 0) out |= 1u << l;
    ::nxemu::leave(r);
    return out;
}
template <class T>
static inline unsigned __match_all_sync(unsigned mask, T value, int* pred) {
    ::nxemu::Unchecked runtime;
    static_assert(sizeof(T) <= 8, "__match_all_sync takes 32- and 64-bit values");
    ::nxemu::Rendezvous& r = ::nxemu::join(::nxemu::k_match_all, mask, &value, sizeof(T), false);
    bool all = true;
    for (unsigned l = 0; l < 32; ++l)
        if (((r.arrived >> l) & 1u) && std::memcmp(&r.slots[l], &value, sizeof(T)) != 0) all = false;
    unsigned out = all ? r.arrived : 0u;
    ::nxemu::leave(r);
    *pred = all;
    return out;
}

namespace nxemu {
// The collective reduction of the arrived lanes' values, in lane order.
template <class T, class F>
inline T warp_reduce(unsigned mask, T value, F op) {
    Unchecked runtime;
    Rendezvous& r = join(k_reduce, mask, &value, sizeof(T), false);
    bool first = true;
    T acc = value;
    for (unsigned l = 0; l < 32; ++l)
        if ((r.arrived >> l) & 1u) {
            T v;
            std::memcpy(&v, &r.slots[l], sizeof(T));
            acc = first ? v : op(acc, v);
            first = false;
        }
    leave(r);
    return acc;
}
}  // namespace nxemu

static inline unsigned __reduce_add_sync(unsigned mask, unsigned v) {
    return ::nxemu::warp_reduce(mask, v, [](unsigned a, unsigned b) { return a + b; });
}
static inline int __reduce_add_sync(unsigned mask, int v) { return int(__reduce_add_sync(mask, unsigned(v))); }
static inline unsigned __reduce_min_sync(unsigned mask, unsigned v) {
    return ::nxemu::warp_reduce(mask, v, [](unsigned a, unsigned b) { return a < b ? a : b; });
}
static inline int __reduce_min_sync(unsigned mask, int v) {
    return ::nxemu::warp_reduce(mask, v, [](int a, int b) { return a < b ? a : b; });
}
static inline unsigned __reduce_max_sync(unsigned mask, unsigned v) {
    return ::nxemu::warp_reduce(mask, v, [](unsigned a, unsigned b) { return a > b ? a : b; });
}
static inline int __reduce_max_sync(unsigned mask, int v) {
    return ::nxemu::warp_reduce(mask, v, [](int a, int b) { return a > b ? a : b; });
}
static inline unsigned __reduce_and_sync(unsigned mask, unsigned v) {
    return ::nxemu::warp_reduce(mask, v, [](unsigned a, unsigned b) { return a & b; });
}
static inline unsigned __reduce_or_sync(unsigned mask, unsigned v) {
    return ::nxemu::warp_reduce(mask, v, [](unsigned a, unsigned b) { return a | b; });
}
static inline unsigned __reduce_xor_sync(unsigned mask, unsigned v) {
    return ::nxemu::warp_reduce(mask, v, [](unsigned a, unsigned b) { return a ^ b; });
}

#endif  // NXKERNEL_EMU_WARP_H

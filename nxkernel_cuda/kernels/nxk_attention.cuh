// Attention's arithmetic (nxkernel_cuda.attention): the pieces every
// generated attention source and the split combine (attention.cu) share.
//
// Rules:
// * A is the accumulator, float or double; every value is widened exactly
//   into it before it is used; no fma (NVRTC --fmad=false, g++
//   -ffp-contract=off), so each product and each sum rounds once, in the
//   order written here.
// * q·k (nxk_attn_qk) is a chain from +0 over d = 0, 1, ..., dk - 1: within
//   γ(dk) Σ|q_d k_d|. The weighted values (nxk_attn_wv) are a chain per
//   output element over the tile's keys in increasing order, each product
//   p·v rounded then added; a hidden pair (p < 0, the mark) adds nothing.
//   Both are device functions over shared-memory tiles; the tensor-core
//   kernels (nxkernel_cuda.attention_mma) replace them with mma.sync and
//   share the softmax below.
// * Maxima propagate NaN (the first NaN met keeps the place); the warp
//   combinations are xor butterflies, each lane computing x + y or y + x,
//   the same bits, so every lane holds the same result.
// * exp of a float runs in double and rounds once (relative error ≤ u +
//   2^-52); of a double it is the C library's or libdevice's (≤ 1 ulp).

#ifndef NXK_ATTENTION_CUH
#define NXK_ATTENTION_CUH

#include "nxk_scalar.cuh"

#define NXK_ATTN_DEV __device__ __forceinline__

//: The mark of a hidden pair in the weight tile: weights are ≥ 0 or NaN.
#define NXK_ATTN_HIDDEN (-1)

NXK_ATTN_DEV float nxk_attn_exp(float x) { return (float)exp((double)x); }
NXK_ATTN_DEV double nxk_attn_exp(double x) { return exp(x); }

// m + ln l, rounded once into A (computed in double for float).
NXK_ATTN_DEV float nxk_attn_lse(float m, float l) { return (float)((double)m + log((double)l)); }
NXK_ATTN_DEV double nxk_attn_lse(double m, double l) { return m + log(l); }

template <typename A> NXK_ATTN_DEV A nxk_attn_ninf();
template <> NXK_ATTN_DEV float nxk_attn_ninf<float>() { return nxk_f32_of_bits(0xFF800000u); }
template <> NXK_ATTN_DEV double nxk_attn_ninf<double>() { return nxk_f64_of_bits(0xFFF0000000000000ull); }

// The larger of a and b; a NaN a stays, a NaN b replaces a.
template <typename A> NXK_ATTN_DEV A nxk_attn_max(A a, A b) { return (b > a || b != b) ? b : a; }

// The shift the exponentials subtract: the maximum, or 0 where it is -inf
// (every output so far -inf or hidden), so exp(x - shift) is 0, not a NaN.
template <typename A> NXK_ATTN_DEV A nxk_attn_shift(A m) { return m == nxk_attn_ninf<A>() ? (A)0 : m; }

// The scale applied to a state kept against `old` when the maximum becomes
// `m`: exactly 1 where it did not move, exp(old - shift(m)) otherwise (0
// from an old maximum of -inf).
template <typename A> NXK_ATTN_DEV A nxk_attn_rescale(A old, A m) {
    return old == m ? (A)1 : nxk_attn_exp(old - nxk_attn_shift(m));
}

template <typename A> NXK_ATTN_DEV A nxk_attn_warp_max(A x) {
    for (int w = 16; w > 0; w >>= 1) x = nxk_attn_max(x, __shfl_xor_sync(0xffffffffu, x, w));
    return x;
}

template <typename A> NXK_ATTN_DEV A nxk_attn_warp_sum(A x) {
    for (int w = 16; w > 0; w >>= 1) x = x + __shfl_xor_sync(0xffffffffu, x, w);
    return x;
}

// s[i][c] = q_i · k_j, j = lane + 32 c: rows qs[i * ldq + d], keys kt[d * ldk + j]
// (transposed, so the lanes read consecutive words), each a chain from +0 in
// increasing d.
template <typename A, int R, int KPL>
NXK_ATTN_DEV void nxk_attn_qk(const A* __restrict__ qs, int ldq, const A* __restrict__ kt, int ldk, int dk,
                              int lane, A (&s)[R][KPL]) {
#pragma unroll
    for (int i = 0; i < R; ++i)
#pragma unroll
        for (int c = 0; c < KPL; ++c) s[i][c] = (A)0;
    for (int d = 0; d < dk; ++d) {
        A kv[KPL];
#pragma unroll
        for (int c = 0; c < KPL; ++c) kv[c] = kt[d * ldk + lane + 32 * c];
#pragma unroll
        for (int i = 0; i < R; ++i) {
            const A qv = qs[i * ldq + d];
#pragma unroll
            for (int c = 0; c < KPL; ++c) s[i][c] = s[i][c] + qv * kv[c];
        }
    }
}

// acc[i][c] += Σ_j p[i][j] v[j][col], col = lane + 32 c, over keys j < n in
// increasing order, skipping hidden pairs (p < 0); columns at or past dv are
// left alone.
template <typename A, int R, int VPL>
NXK_ATTN_DEV void nxk_attn_wv(const A* __restrict__ ps, int ldp, const A* __restrict__ vs, int ldv, int n,
                              int dv, int lane, A (&acc)[R][VPL]) {
#pragma unroll
    for (int c = 0; c < VPL; ++c) {
        const int col = lane + 32 * c;
        if (col >= dv) continue;
        for (int j = 0; j < n; ++j) {
            const A v = vs[j * ldv + col];
#pragma unroll
            for (int i = 0; i < R; ++i) {
                const A p = ps[i * ldp + j];
                if (!(p < (A)0)) acc[i][c] = acc[i][c] + p * v;
            }
        }
    }
}

// A row's o element and lse from its final state (maximum m, sum l, weighted
// values acc): o = acc / l + 0 (so -0 becomes +0) and lse = m + ln l; a row
// whose maximum is -inf (no visible pair, or only -inf outputs) gets o = +0
// and lse = -inf; one whose maximum is +inf gets lse = +inf.
template <typename A> NXK_ATTN_DEV A nxk_attn_o(A m, A l, A acc) {
    return m == nxk_attn_ninf<A>() ? (A)0 : acc / l + (A)0;
}
template <typename A> NXK_ATTN_DEV A nxk_attn_lse_of(A m, A l) {
    if (m == nxk_attn_ninf<A>() || m == -nxk_attn_ninf<A>()) return m;
    return nxk_attn_lse(m, l);
}

// Two float32 weights rounded to nearest, ties to even, into bfloat16
// (BF16) or float16 codes, packed into one word: lo in the low half, as an
// mma.sync fragment holds two consecutive elements. A NaN is cvt's 0x7FFF
// (both formats), which the emulated path gives too.
template <bool BF16> NXK_ATTN_DEV nxk_u32 nxk_attn_pack(float lo, float hi) {
#ifdef NXKERNEL_EMULATE
    const nxk_u32 a = lo != lo ? 0x7FFFu : (BF16 ? nxk_bf16_of_f32(lo) : nxk_f16_of_f32(lo));
    const nxk_u32 b = hi != hi ? 0x7FFFu : (BF16 ? nxk_bf16_of_f32(hi) : nxk_f16_of_f32(hi));
    return a | (b << 16);
#else
    nxk_u32 d;
    if (BF16) asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
    else asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
    return d;
#endif
}

NXK_ATTN_DEV void nxk_attn_st(char* p, nxk_i64 pos, float x) { nxk_st_f32(p, pos, x); }
NXK_ATTN_DEV void nxk_attn_st(char* p, nxk_i64 pos, double x) { nxk_st_f64(p, pos, x); }

// The unit descriptor's words (one row of `units`, NXK_ATTN_WORDS_FIXED first).
#define NXK_ATTN_U_Q 0
#define NXK_ATTN_U_O 1
#define NXK_ATTN_U_LSE 2
#define NXK_ATTN_U_K 3
#define NXK_ATTN_U_V 4
#define NXK_ATTN_U_LEN 5
#define NXK_ATTN_U_TABLE 6
#define NXK_ATTN_WORDS_FIXED 7
// The strides' words (`g`), in elements: rows, elements, keys, pages, and
// query heads (a unit of packed heads, attention_mma); then per load its
// strides along rows, keys and query heads.
#define NXK_ATTN_G_Q_ROW 0
#define NXK_ATTN_G_Q_D 1
#define NXK_ATTN_G_O_ROW 2
#define NXK_ATTN_G_O_D 3
#define NXK_ATTN_G_LSE_ROW 4
#define NXK_ATTN_G_K_T 5
#define NXK_ATTN_G_K_D 6
#define NXK_ATTN_G_V_T 7
#define NXK_ATTN_G_V_D 8
#define NXK_ATTN_G_K_PAGE 9
#define NXK_ATTN_G_V_PAGE 10
#define NXK_ATTN_G_TABLE 11
#define NXK_ATTN_G_Q_HEAD 12
#define NXK_ATTN_G_O_HEAD 13
#define NXK_ATTN_G_LSE_HEAD 14
#define NXK_ATTN_G_FIXED 15

// The keys [*kb, *ke) a block of rows [r0, r0 + bm) reads in split sp: the
// split's keys, cut at the unit's length (lengths at word len_at, < 0: no
// lengths) and, where `limited`, after the last row's key limit (key ≤ row +
// limit).
NXK_ATTN_DEV void nxk_attn_key_range(const char* lengths, nxk_i64 len_at, nxk_i64 tk, nxk_i64 sp,
                                     nxk_i64 split_keys, nxk_i64 r0, nxk_i64 bm, nxk_i64 tq, nxk_i64 limited,
                                     nxk_i64 limit, nxk_i64* kb, nxk_i64* ke) {
    nxk_i64 kmax = tk;
    if (len_at >= 0) {
        const nxk_i64 len = nxk_ld_i64(lengths, len_at);
        kmax = len < 0 ? 0 : (len < tk ? len : tk);
    }
    *kb = sp * split_keys;
    *ke = *kb + split_keys < kmax ? *kb + split_keys : kmax;
    if (limited) {
        const nxk_i64 last = (r0 + bm < tq ? r0 + bm : tq) - 1;
        if (last + limit + 1 < *ke) *ke = last + limit + 1;
    }
}

// The element offsets of key `key`'s row of k and of v for the unit u (-1
// both where a paged key's table entry is outside [0, pages): never read).
template <bool PAGED>
NXK_ATTN_DEV void nxk_attn_key_pos(const nxk_i64* __restrict__ g, const nxk_i64* u, const char* table,
                                   nxk_i64 page, nxk_i64 pages, nxk_i64 key, nxk_i64* kpos, nxk_i64* vpos) {
    *kpos = -1;
    *vpos = -1;
    if (PAGED) {
        const nxk_i64 e = nxk_ld_i64(table, u[NXK_ATTN_U_TABLE] + (key / page) * g[NXK_ATTN_G_TABLE]);
        const nxk_i64 t = key % page;
        if (e >= 0 && e < pages) {
            *kpos = u[NXK_ATTN_U_K] + e * g[NXK_ATTN_G_K_PAGE] + t * g[NXK_ATTN_G_K_T];
            *vpos = u[NXK_ATTN_U_V] + e * g[NXK_ATTN_G_V_PAGE] + t * g[NXK_ATTN_G_V_T];
        }
    } else {
        *kpos = u[NXK_ATTN_U_K] + key * g[NXK_ATTN_G_K_T];
        *vpos = u[NXK_ATTN_U_V] + key * g[NXK_ATTN_G_V_T];
    }
}

// The key tile from t0: thread tid < bn writes key t0 + tid's offsets into
// kbase[tid] and vbase[tid] (-1 past the tile's n keys or on a hidden page).
template <bool PAGED>
NXK_ATTN_DEV void nxk_attn_tile_keys(int tid, int bn, int n, nxk_i64 t0, const nxk_i64* __restrict__ g,
                                     const nxk_i64* u, const char* table, nxk_i64 page, nxk_i64 pages,
                                     nxk_i64* kbase, nxk_i64* vbase) {
    if (tid >= bn) return;
    nxk_i64 kpos = -1, vpos = -1;
    if (tid < n) nxk_attn_key_pos<PAGED>(g, u, table, page, pages, t0 + tid, &kpos, &vpos);
    kbase[tid] = kpos;
    vbase[tid] = vpos;
}

#endif

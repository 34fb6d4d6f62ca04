// Attention's split combine (nxkernel_cuda.attention): where a row's keys
// were cut into `nsplit` splits, each split left its state (maximum m, sum l
// and dv weighted values, in A) in `part`; this folds them in split order.
//
// Rule: per row, M = the NaN-propagating maximum of the m_s in split order;
// each split's scale a_s = exp(m_s - shift(M)) (exactly 1 where m_s = M);
// L = Σ_s l_s a_s and O = Σ_s O_s a_s, each a chain from +0 in split order;
// then o = O / L + 0 rounded once into o's dtype and lse = M + ln L (the
// single-pass rules of nxk_attention.cuh). One thread per (row, slot): slot
// c < dv writes o's element c, slot dv writes lse; every thread computes M
// and the scales by the same operations, so they agree.

#include "nxk_scalar.cuh"
#include "nxk_attention.cuh"

template <typename A>
__global__ void __launch_bounds__(256)
nxk_attn_combine(const nxk_i64* __restrict__ g, const nxk_i64* __restrict__ units, nxk_i64 words,
                 nxk_i64 tq, nxk_i64 dv, nxk_i64 nsplit, nxk_i64 n, int o_code,
                 const A* __restrict__ part, char* o, char* lse)
{
    const nxk_i64 step = (nxk_i64)gridDim.x * blockDim.x;
    for (nxk_i64 i = (nxk_i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        const nxk_i64 slot = i % (dv + 1);
        const nxk_i64 row_index = i / (dv + 1);  // unit * tq + row
        const nxk_i64 row = row_index % tq;
        const nxk_i64* u = units + (row_index / tq) * words;
        const A* st = part + row_index * nsplit * (dv + 2);
        A m = nxk_attn_ninf<A>();
        for (nxk_i64 s = 0; s < nsplit; ++s) m = nxk_attn_max(m, st[s * (dv + 2)]);
        A l = (A)0;
        A acc = (A)0;
        for (nxk_i64 s = 0; s < nsplit; ++s) {
            const A* p = st + s * (dv + 2);
            const A a = nxk_attn_rescale(p[0], m);
            l = l + p[1] * a;
            if (slot < dv) acc = acc + p[2 + slot] * a;
        }
        if (slot < dv) {
            const nxk_i64 pos = u[NXK_ATTN_U_O] + row * g[NXK_ATTN_G_O_ROW] + slot * g[NXK_ATTN_G_O_D];
            nxk_store_float(o_code, o, pos, (double)nxk_attn_o(m, l, acc));
        } else {
            nxk_attn_st(lse, u[NXK_ATTN_U_LSE] + row * g[NXK_ATTN_G_LSE_ROW], nxk_attn_lse_of(m, l));
        }
    }
}

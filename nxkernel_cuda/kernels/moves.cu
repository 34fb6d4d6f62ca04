// moves.cu: gather, range gather, scatter, sort, numbering, fill and copy.
//
// Every kernel copies or compares bits. An element is moved as its bits, an
// NxkElem of up to 128 (a complex128 is two words); `width` (1, 4, 8, 16,
// 32, 64 or 128 bits) and the dtype code `dtc` (dtype.code) are launch
// arguments, uniform across the grid, so one kernel serves every dtype and
// the branch on them costs nothing that matters. Arrays are walked by
// descriptors (nxk_loop.cuh): destinations first.
//
// Orders. A scatter applies its updates to each element in C order of the
// updates (along the axis, the other indices fixed): Set keeps the last, Add
// computes +0 + x + u1 + u2 ... in the dtype's Add (float32 for the narrow
// floats, rounded once at the end; integers wrapping), Max and Min are Prog's
// Maximum and Minimum (the first NaN, -0 below +0); an element no update
// reaches keeps into's bits. No atomic reorders anything: either a thread owns
// a destination element and reads every update of its slice in order
// (nxk_scatter_owner), or a thread owns a slice and applies its updates in
// order (nxk_scatter_serial). A sort orders (key, position) pairs, keys in
// the total order (nxk_key_of: -0 below +0, every NaN equal and above all,
// complemented for descending), positions ascending: unique pairs, so any
// correct sorting network gives the one stable order. Tiles of a row sort by
// a bitonic network in shared memory, then runs merge pairwise, each element
// finding its place by a binary search in the other run.
#include "nxk_scalar.cuh"
#include "nxk_loop.cuh"

struct NxkElem {
    nxk_u64 lo;
    nxk_u64 hi;
};

// ---------------------------------------------------------------------------
// Elements by width, and values, keys and combinations by dtype code
// ---------------------------------------------------------------------------

__device__ __forceinline__ NxkElem nxk_ld_elem(int width, const char* b, nxk_i64 p) {
    NxkElem e;
    e.hi = 0ull;
    switch (width) {
        case 1: e.lo = nxk_ld_bits(b, p, 1); break;
        case 4: e.lo = nxk_ld_bits(b, p, 4); break;
        case 8: e.lo = nxk_ld<nxk_u8>(b, p); break;
        case 16: e.lo = nxk_ld<nxk_u16>(b, p); break;
        case 32: e.lo = nxk_ld<nxk_u32>(b, p); break;
        case 64: e.lo = nxk_ld_u64_a4(b, p); break;  // complex64 may be 4-byte aligned
        default:
            e.lo = nxk_ld<nxk_u64>(b, 2 * p);
            e.hi = nxk_ld<nxk_u64>(b, 2 * p + 1);
            break;
    }
    return e;
}

__device__ __forceinline__ void nxk_st_elem(int width, char* b, nxk_i64 p, NxkElem e) {
    switch (width) {
        case 1: nxk_st_bits(b, p, 1, (nxk_u32)e.lo); break;
        case 4: nxk_st_bits(b, p, 4, (nxk_u32)e.lo); break;
        case 8: nxk_st<nxk_u8>(b, p, (nxk_u8)e.lo); break;
        case 16: nxk_st<nxk_u16>(b, p, (nxk_u16)e.lo); break;
        case 32: nxk_st<nxk_u32>(b, p, (nxk_u32)e.lo); break;
        case 64: nxk_st_u64_a4(b, p, e.lo); break;
        default:
            nxk_st<nxk_u64>(b, 2 * p, e.lo);
            nxk_st<nxk_u64>(b, 2 * p + 1, e.hi);
            break;
    }
}

// Dtype codes (dtype.code): 0 f64, 1 f32, 2 f16, 3 bf16, 4 e4m3fn, 5 e5m2,
// 6 e2m1fn, 7 i64, 8 u64, 9 i32, 10 u32, 11 i16, 12 u16, 13 i8, 14 u8,
// 15 i4, 16 u4, 17 c128, 18 c64, 19 bool, 20 bit.
__device__ __forceinline__ int nxk_bits_of(int dtc) {
    switch (dtc) {
        case 0: case 7: case 8: return 64;
        case 1: case 9: case 10: return 32;
        case 2: case 3: case 11: case 12: return 16;
        case 6: case 15: case 16: return 4;
        case 20: return 1;
        default: return 8;
    }
}
__device__ __forceinline__ bool nxk_is_float(int dtc) { return dtc <= 6; }
__device__ __forceinline__ bool nxk_is_signed(int dtc) {
    return dtc == 7 || dtc == 9 || dtc == 11 || dtc == 13 || dtc == 15;
}
__device__ __forceinline__ bool nxk_is_bool(int dtc) { return dtc == 19 || dtc == 20; }

// A signed integer's value from its code.
__device__ __forceinline__ nxk_i64 nxk_sext(int dtc, nxk_u64 c) {
    const int b = nxk_bits_of(dtc);
    return b == 64 ? (nxk_i64)c : (nxk_i64)(c << (64 - b)) >> (64 - b);
}

// A float's value, exactly, from its bits.
__device__ __forceinline__ double nxk_fvalue(int dtc, nxk_u64 c) {
    switch (dtc) {
        case 0: return nxk_f64_of_bits(c);
        case 1: return (double)nxk_f32_of_bits((nxk_u32)c);
        case 2: return (double)NxkF16::to_f32((nxk_u32)c);
        case 3: return (double)NxkBF16::to_f32((nxk_u32)c);
        case 4: return (double)NxkE4M3::to_f32((nxk_u32)c);
        case 5: return (double)NxkE5M2::to_f32((nxk_u32)c);
        default: return (double)NxkE2M1::to_f32((nxk_u32)c);
    }
}

// A float value's bits in a float dtype, rounded once (float32 for codes >= 1).
__device__ __forceinline__ nxk_u64 nxk_fbits(int dtc, double v) {
    switch (dtc) {
        case 0: return nxk_bits_f64(v);
        case 1: return nxk_bits_f32((float)v);
        case 2: return NxkF16::of_f64(v);
        case 3: return NxkBF16::of_f64(v);
        case 4: return NxkE4M3::of_f64(v);
        case 5: return NxkE5M2::of_f64(v);
        default: return NxkE2M1::of_f64(v);
    }
}

__device__ __forceinline__ bool nxk_fnan(int dtc, nxk_u64 c) {
    switch (dtc) {
        case 0: return nxk_f64_of_bits(c) != nxk_f64_of_bits(c);
        case 1: return nxk_f32_of_bits((nxk_u32)c) != nxk_f32_of_bits((nxk_u32)c);
        case 2: return NxkF16::isnan((nxk_u32)c);
        case 3: return NxkBF16::isnan((nxk_u32)c);
        case 4: return NxkE4M3::isnan((nxk_u32)c);
        case 5: return NxkE5M2::isnan((nxk_u32)c);
        default: return false;
    }
}

// The key of an element in the total order: every NaN equal and above all,
// -0 below +0; integers by value; false below true.
__device__ __forceinline__ nxk_u64 nxk_key_of(int dtc, nxk_u64 c) {
    switch (dtc) {
        case 0: return nxk_key_f64(nxk_f64_of_bits(c));
        case 1: return nxk_key_f32(nxk_f32_of_bits((nxk_u32)c));
        case 2: return NxkF16::key((nxk_u32)c);
        case 3: return NxkBF16::key((nxk_u32)c);
        case 4: return NxkE4M3::key((nxk_u32)c);
        case 5: return NxkE5M2::key((nxk_u32)c);
        case 6: return NxkE2M1::key((nxk_u32)c);
        case 19: case 20: return c != 0ull ? 1ull : 0ull;
        default: return nxk_is_signed(dtc) ? nxk_key_signed(nxk_sext(dtc, c)) : c;
    }
}

// Prog's Maximum (is_max) or Minimum of two elements: the first NaN, -0 below
// +0, any and all on booleans.
__device__ __forceinline__ nxk_u64 nxk_extreme(int dtc, bool is_max, nxk_u64 a, nxk_u64 b) {
    if (nxk_is_bool(dtc)) {
        const bool x = a != 0ull, y = b != 0ull;
        return (is_max ? (x || y) : (x && y)) ? 1ull : 0ull;
    }
    if (nxk_is_float(dtc)) {
        if (nxk_fnan(dtc, a)) return a;
        if (nxk_fnan(dtc, b)) return b;
    }
    const nxk_u64 ka = nxk_key_of(dtc, a), kb = nxk_key_of(dtc, b);
    return (is_max ? ka >= kb : ka <= kb) ? a : b;
}

// ---------------------------------------------------------------------------
// Fill and copy
// ---------------------------------------------------------------------------

// dst[i] = the fill's bits: walk over dst alone.
extern "C" __global__ void nxk_fill(const nxk_i64* __restrict__ walk, nxk_i64 n, int width, nxk_u64 lo,
                                    nxk_u64 hi, char* dst)
{
    NxkElem e;
    e.lo = lo;
    e.hi = hi;
    const nxk_i64 step = (nxk_i64)gridDim.x * blockDim.x;
    for (nxk_i64 i = (nxk_i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        nxk_i64 pos[1];
        nxk_walk<1>(walk, i, pos);
        nxk_st_elem(width, dst, pos[0], e);
    }
}

// dst[i] = src[i], bits: walk over (dst, src).
extern "C" __global__ void nxk_copy(const nxk_i64* __restrict__ walk, nxk_i64 n, int width, char* dst,
                                    const char* src)
{
    const nxk_i64 step = (nxk_i64)gridDim.x * blockDim.x;
    for (nxk_i64 i = (nxk_i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        nxk_i64 pos[2];
        nxk_walk<2>(walk, i, pos);
        nxk_st_elem(width, dst, pos[0], nxk_ld_elem(width, src, pos[1]));
    }
}

// ---------------------------------------------------------------------------
// Gathers
// ---------------------------------------------------------------------------

// A range gather (a gather is one of run 1): walk over dst's shape with
// (dst, starts, x), starts' stride 0 along the run axis and x's 0 along both
// the gathered and the run axis; the run index j is (i / run_div) % run_ext.
// dst[i] = x at position starts + j along the axis, zero bits outside [0, d).
extern "C" __global__ void nxk_gather(const nxk_i64* __restrict__ walk, nxk_i64 n, int width, nxk_i64 d,
                                      nxk_i64 x_stride, nxk_i64 run_div, nxk_i64 run_ext, char* dst,
                                      const char* starts, const char* x)
{
    const nxk_i64 step = (nxk_i64)gridDim.x * blockDim.x;
    for (nxk_i64 i = (nxk_i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        nxk_i64 pos[3];
        nxk_walk<3>(walk, i, pos);
        const nxk_i64 at = nxk_ld<nxk_i64>(starts, pos[1]) + nxk_coord(i, run_div, run_ext);
        NxkElem e;
        e.lo = 0ull;
        e.hi = 0ull;
        if (at >= 0 && at < d) e = nxk_ld_elem(width, x, pos[2] + at * x_stride);
        nxk_st_elem(width, dst, pos[0], e);
    }
}

// ---------------------------------------------------------------------------
// Scatters
// ---------------------------------------------------------------------------

// Combine kinds: 0 Set, 1 Add, 2 Max, 3 Min.

// One thread per destination element: walk over dst's shape with (dst, into,
// index, updates), index's and updates' strides 0 along the axis; the
// element's index along the axis is (i / p_div) % d.
extern "C" __global__ void nxk_scatter_owner(const nxk_i64* __restrict__ walk, nxk_i64 total, int width,
                                             int dtc, int combine, nxk_i64 d, nxk_i64 p_div, nxk_i64 n,
                                             nxk_i64 index_stride, nxk_i64 updates_stride, char* dst,
                                             const char* into, const char* index, const char* updates)
{
    const nxk_i64 step = (nxk_i64)gridDim.x * blockDim.x;
    for (nxk_i64 i = (nxk_i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
        nxk_i64 pos[4];
        nxk_walk<4>(walk, i, pos);
        const nxk_i64 p = nxk_coord(i, p_div, d);
        NxkElem x = nxk_ld_elem(width, into, pos[1]);
        bool hit = false;
        double facc = 0.0;  // Add of floats: in float64, or float32 kept exact in it
        float facc32 = 0.0f;
        nxk_u64 iacc = x.lo;
        for (nxk_i64 k = 0; k < n; ++k) {
            if (nxk_ld<nxk_i64>(index, pos[2] + k * index_stride) != p) continue;
            const NxkElem u = nxk_ld_elem(width, updates, pos[3] + k * updates_stride);
            if (combine == 0) {
                x = u;
            } else if (combine == 1) {
                if (dtc == 0) {
                    facc = (hit ? facc : 0.0 + nxk_fvalue(0, x.lo)) + nxk_fvalue(0, u.lo);
                } else if (nxk_is_float(dtc)) {
                    facc32 = (hit ? facc32 : 0.0f + (float)nxk_fvalue(dtc, x.lo)) + (float)nxk_fvalue(dtc, u.lo);
                } else {
                    iacc += u.lo;
                }
            } else {
                x.lo = nxk_extreme(dtc, combine == 2, x.lo, u.lo);
            }
            hit = true;
        }
        if (hit && combine == 1) {
            if (dtc == 0) x.lo = nxk_bits_f64(facc);
            else if (nxk_is_float(dtc)) x.lo = nxk_fbits(dtc, (double)facc32);
            else x.lo = iacc;  // the store keeps the width's low bits
        }
        nxk_st_elem(width, dst, pos[0], x);
    }
}

// One thread per slice, updates in order, after dst holds into: walk over
// index's shape without the axis, with (dst, index, updates), dst's stride 0
// along the axis; element p of the slice is at dst_stride * p.
extern "C" __global__ void nxk_scatter_serial(const nxk_i64* __restrict__ walk, nxk_i64 slices, int width,
                                              int dtc, int combine, nxk_i64 d, nxk_i64 n, nxk_i64 dst_stride,
                                              nxk_i64 index_stride, nxk_i64 updates_stride, char* dst,
                                              const char* index, const char* updates)
{
    const nxk_i64 step = (nxk_i64)gridDim.x * blockDim.x;
    for (nxk_i64 s = (nxk_i64)blockIdx.x * blockDim.x + threadIdx.x; s < slices; s += step) {
        nxk_i64 pos[3];
        nxk_walk<3>(walk, s, pos);
        if (combine == 1 && nxk_is_float(dtc)) {
            // +0 + x at every element an update reaches (idempotent), so a
            // reached -0 becomes +0 as the sum from +0 makes it.
            for (nxk_i64 k = 0; k < n; ++k) {
                const nxk_i64 p = nxk_ld<nxk_i64>(index, pos[1] + k * index_stride);
                if (p < 0 || p >= d) continue;
                const nxk_i64 at = pos[0] + p * dst_stride;
                NxkElem x = nxk_ld_elem(width, dst, at);
                x.lo = dtc == 0 ? nxk_bits_f64(0.0 + nxk_fvalue(0, x.lo))
                                : nxk_bits_f32(0.0f + (float)nxk_fvalue(1, x.lo));
                nxk_st_elem(width, dst, at, x);
            }
        }
        for (nxk_i64 k = 0; k < n; ++k) {
            const nxk_i64 p = nxk_ld<nxk_i64>(index, pos[1] + k * index_stride);
            if (p < 0 || p >= d) continue;
            const nxk_i64 at = pos[0] + p * dst_stride;
            const NxkElem u = nxk_ld_elem(width, updates, pos[2] + k * updates_stride);
            NxkElem x = nxk_ld_elem(width, dst, at);
            if (combine == 0) {
                x = u;
            } else if (combine == 1) {
                if (dtc == 0) x.lo = nxk_bits_f64(nxk_fvalue(0, x.lo) + nxk_fvalue(0, u.lo));
                else if (dtc == 1) x.lo = nxk_bits_f32((float)nxk_fvalue(1, x.lo) + (float)nxk_fvalue(1, u.lo));
                else x.lo += u.lo;  // integers wrap: the store keeps the width's low bits
            } else {
                x.lo = nxk_extreme(dtc, combine == 2, x.lo, u.lo);
            }
            nxk_st_elem(width, dst, at, x);
        }
    }
}

// ---------------------------------------------------------------------------
// Sort
// ---------------------------------------------------------------------------

// keys[r * n + j], idx[r * n + j] for element j of row r: walk over the rows
// (x without its axis) with x; x's element j of a row is at x_stride * j.
extern "C" __global__ void nxk_sort_keys(const nxk_i64* __restrict__ walk, nxk_i64 rows, nxk_i64 n, int width,
                                         int dtc, int descending, nxk_i64 x_stride, const char* x,
                                         nxk_u64* keys, nxk_u32* idx)
{
    const nxk_i64 total = rows * n;
    const nxk_i64 step = (nxk_i64)gridDim.x * blockDim.x;
    for (nxk_i64 i = (nxk_i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
        const nxk_i64 r = i / n, j = i - r * n;
        nxk_i64 pos[1];
        nxk_walk<1>(walk, r, pos);
        const nxk_u64 k = nxk_key_of(dtc, nxk_ld_elem(width, x, pos[0] + j * x_stride).lo);
        keys[i] = descending ? ~k : k;
        idx[i] = (nxk_u32)j;
    }
}

__device__ __forceinline__ bool nxk_pair_less(nxk_u64 ka, nxk_u32 ia, nxk_u64 kb, nxk_u32 ib) {
    return ka < kb || (ka == kb && ia < ib);
}

// Sort each tile of `tile` pairs (a power of two, at most 2 * blockDim.x) of
// each row in shared memory by a bitonic network: block index b = (row, t),
// striding over `blocks` of them.
extern "C" __global__ void __launch_bounds__(1024) nxk_sort_tiles(nxk_i64 n, nxk_i64 tiles, int tile, nxk_u64* keys, nxk_u32* idx,
                                          nxk_i64 blocks)
{
  for (nxk_i64 b = blockIdx.x; b < blocks; b += gridDim.x) {
    const nxk_i64 r = b / tiles;
    const nxk_i64 t = b % tiles;
    nxk_u64* sk = reinterpret_cast<nxk_u64*>(nxk_dynamic_shared);
    nxk_u32* si = reinterpret_cast<nxk_u32*>(sk + tile);
    const nxk_i64 start = t * tile;
    const int len = (int)(n - start < tile ? n - start : tile);
    nxk_u64* rk = keys + r * n + start;
    nxk_u32* ri = idx + r * n + start;
    for (int j = (int)threadIdx.x; j < tile; j += (int)blockDim.x) {
        // Padding sorts last: the greatest key with positions past every real one.
        sk[j] = j < len ? rk[j] : ~0ull;
        si[j] = j < len ? ri[j] : 0xFFFFFFFFu;
    }
    __syncthreads();
    for (int size = 2; size <= tile; size *= 2) {
        for (int stride = size / 2; stride > 0; stride /= 2) {
            for (int j = (int)threadIdx.x; j < tile; j += (int)blockDim.x) {
                const int o = j ^ stride;
                if (o > j) {
                    const bool up = (j & size) == 0;
                    const bool swap = up ? nxk_pair_less(sk[o], si[o], sk[j], si[j])
                                         : nxk_pair_less(sk[j], si[j], sk[o], si[o]);
                    if (swap) {
                        const nxk_u64 k = sk[j];
                        sk[j] = sk[o];
                        sk[o] = k;
                        const nxk_u32 x = si[j];
                        si[j] = si[o];
                        si[o] = x;
                    }
                }
            }
            __syncthreads();
        }
    }
    for (int j = (int)threadIdx.x; j < len; j += (int)blockDim.x) {
        rk[j] = sk[j];
        ri[j] = si[j];
    }
    __syncthreads();  // shared memory is reused by the next block index
  }
}

// Merge sorted runs of `run` pairs pairwise, row by row, from (keys, idx)
// into (okeys, oidx): each pair goes to its run pair's start plus its place in
// its own run plus the pairs of the other run below it.
extern "C" __global__ void nxk_sort_merge(nxk_i64 rows, nxk_i64 n, nxk_i64 run, const nxk_u64* keys,
                                          const nxk_u32* idx, nxk_u64* okeys, nxk_u32* oidx)
{
    const nxk_i64 total = rows * n;
    const nxk_i64 step = (nxk_i64)gridDim.x * blockDim.x;
    for (nxk_i64 i = (nxk_i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
        const nxk_i64 r = i / n, j = i - r * n;
        const nxk_i64 mine = j / run, other = mine ^ 1;
        const nxk_i64 lo = other * run;
        const nxk_u64 k = keys[i];
        const nxk_u32 x = idx[i];
        nxk_i64 out = j;
        if (lo < n) {
            const nxk_i64 hi = lo + run < n ? lo + run : n;
            const nxk_u64* rk = keys + r * n;
            const nxk_u32* ri = idx + r * n;
            nxk_i64 a = lo, b = hi;  // the other run's pairs below (k, x): [lo, a)
            while (a < b) {
                const nxk_i64 mid = a + (b - a) / 2;
                if (nxk_pair_less(rk[mid], ri[mid], k, x)) a = mid + 1;
                else b = mid;
            }
            const nxk_i64 first = (mine < other ? mine : other) * run;
            out = first + (j - mine * run) + (a - lo);
        }
        okeys[r * n + out] = k;
        oidx[r * n + out] = x;
    }
}

// values[.., j, ..] = x at the row's idx[j], positions = idx[j], for j < k:
// walk over the results' shape without the axis, with (values, positions,
// x); along the axis, values at v_stride * j, positions at p_stride * j.
extern "C" __global__ void nxk_sort_out(const nxk_i64* __restrict__ walk, nxk_i64 rows, nxk_i64 n, nxk_i64 k,
                                        int width, nxk_i64 v_stride, nxk_i64 p_stride, nxk_i64 x_stride,
                                        const nxk_u32* idx, char* values, char* positions, const char* x)
{
    const nxk_i64 total = rows * k;
    const nxk_i64 step = (nxk_i64)gridDim.x * blockDim.x;
    for (nxk_i64 i = (nxk_i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
        const nxk_i64 r = i / k, j = i - r * k;
        nxk_i64 pos[3];
        nxk_walk<3>(walk, r, pos);
        const nxk_i64 at = (nxk_i64)idx[r * n + j];
        nxk_st_elem(width, values, pos[0] + j * v_stride, nxk_ld_elem(width, x, pos[2] + at * x_stride));
        nxk_st<nxk_i64>(positions, pos[1] + j * p_stride, at);
    }
}

// ---------------------------------------------------------------------------
// Numbering
// ---------------------------------------------------------------------------

// dst[i] = the keys of x[i]'s row below it (right: not above it), by binary
// search of the row's m keys (ascending in the total order): walk over x's
// shape with (dst, x, keys), keys' stride 0 along the last axis, its keys
// k_stride apart.
extern "C" __global__ void nxk_numbering(const nxk_i64* __restrict__ walk, nxk_i64 total, int width, int dtc,
                                         int right, nxk_i64 m, nxk_i64 k_stride, char* dst, const char* x,
                                         const char* keys)
{
    const nxk_i64 step = (nxk_i64)gridDim.x * blockDim.x;
    for (nxk_i64 i = (nxk_i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
        nxk_i64 pos[3];
        nxk_walk<3>(walk, i, pos);
        const nxk_u64 kx = nxk_key_of(dtc, nxk_ld_elem(width, x, pos[1]).lo);
        nxk_i64 a = 0, b = m;
        while (a < b) {
            const nxk_i64 mid = a + (b - a) / 2;
            const nxk_u64 km = nxk_key_of(dtc, nxk_ld_elem(width, keys, pos[2] + mid * k_stride).lo);
            if (right ? km <= kx : km < kx) a = mid + 1;
            else b = mid;
        }
        nxk_st<nxk_i64>(dst, pos[0], a);
    }
}

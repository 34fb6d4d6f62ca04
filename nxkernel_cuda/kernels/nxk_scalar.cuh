// nxk_scalar.cuh: one element of every real dtype, as the generated kernels
// and the moves hold, convert, load and store it (complex dtypes: the
// nxk_complex.cuh it includes at its end).
//
// Representation (the "storage value" of a dtype, what a program node holds):
//   f64 double, f32 float; f16 and bf16 their 16 bits (nxk_u16), e4m3fn,
//   e5m2 and e2m1fn their bits (nxk_u8), so Copy, Bitcast, Where and NaN
//   payloads keep every bit; i64..u8 their C integer; i4 a sign-extended
//   nxk_i8 and u4 an nxk_u8 (their 4-bit code in the low bits); bool its raw
//   byte (a use reads byte != 0, a move keeps the byte); bit 0 or 1.
//
// Arithmetic on narrow floats computes in float32 and rounds once on the
// store (nxk_<X>_of_f32), or computes in double and rounds once from it
// (nxk_<X>_of_f64), by the store rule of dtype.of_float: to nearest, ties to
// even, exponent unbounded above; overflow goes to +-inf for f16 and bf16 and
// saturates to the largest finite value for e4m3fn, e5m2 and e2m1fn; a NaN
// made from numbers is the format's canonical quiet NaN (sign clear), and
// becomes +0 in e2m1fn. Conversions are integer code, not the GPU's cvt,
// so the GPU and the emulator give the same bits.
//
// Sub-byte elements are packed, least significant bit first: element p of a
// b-bit dtype is bits p*b .. p*b+b-1 of the buffer. A load reads its byte; a
// store clears, then sets, its bits in the aligned 32-bit word that holds
// them with atomicAnd/atomicOr, so threads storing neighbours in one byte
// never lose each other's bits. That word reaches up to 3 bytes past an
// array's last byte (never before an allocation's start, which is
// 4-aligned), and CUDA has no atomic narrower than 16 bits, so the devices
// allocate whole 4-byte words (device.WORD): the word lies inside the
// allocation, as compute-sanitizer's memcheck and the emulator's check.
#ifndef NXK_SCALAR_CUH
#define NXK_SCALAR_CUH

#include "nxk_common.cuh"

#define NXK_DEV __device__ __forceinline__

// ---------------------------------------------------------------------------
// Bits of float32 and float64
// ---------------------------------------------------------------------------

NXK_DEV nxk_u32 nxk_bits_f32(float x) { return __float_as_uint(x); }
NXK_DEV float nxk_f32_of_bits(nxk_u32 b) { return __uint_as_float(b); }
NXK_DEV nxk_u64 nxk_bits_f64(double x) { return (nxk_u64)__double_as_longlong(x); }
NXK_DEV double nxk_f64_of_bits(nxk_u64 b) { return __longlong_as_double((long long)b); }

#define NXK_QNAN_F32 0x7FC00000u
#define NXK_QNAN_F64 0x7FF8000000000000ull
#define NXK_I64_MIN ((nxk_i64)0x8000000000000000ull)
#define NXK_I64_MAX ((nxk_i64)0x7FFFFFFFFFFFFFFFull)

// 2^k as a float, for k in [-149, 127].
NXK_DEV float nxk_pow2f(int k) {
    return k >= -126 ? nxk_f32_of_bits((nxk_u32)(k + 127) << 23) : nxk_f32_of_bits(1u << (k + 149));
}

// ---------------------------------------------------------------------------
// The NaN rule of a float kind: the first NaN operand, bits unchanged; else a
// NaN the operation made from numbers is the canonical quiet NaN.
// ---------------------------------------------------------------------------

NXK_DEV float nxk_canon_f32(float r) { return r != r ? nxk_f32_of_bits(NXK_QNAN_F32) : r; }
NXK_DEV double nxk_canon_f64(double r) { return r != r ? nxk_f64_of_bits(NXK_QNAN_F64) : r; }
NXK_DEV float nxk_nan1_f32(float r, float x) { return x != x ? x : nxk_canon_f32(r); }
NXK_DEV float nxk_nan2_f32(float r, float x, float y) { return x != x ? x : (y != y ? y : nxk_canon_f32(r)); }
NXK_DEV float nxk_nan3_f32(float r, float a, float b, float c) {
    return a != a ? a : (b != b ? b : (c != c ? c : nxk_canon_f32(r)));
}
NXK_DEV double nxk_nan1_f64(double r, double x) { return x != x ? x : nxk_canon_f64(r); }
NXK_DEV double nxk_nan2_f64(double r, double x, double y) { return x != x ? x : (y != y ? y : nxk_canon_f64(r)); }
NXK_DEV double nxk_nan3_f64(double r, double a, double b, double c) {
    return a != a ? a : (b != b ? b : (c != c ? c : nxk_canon_f64(r)));
}

// ---------------------------------------------------------------------------
// Narrow float formats: EB exponent bits, FB fraction bits, bias 2^(EB-1)-1.
// KIND 0: IEEE infinities and NaNs (f16, bf16, e5m2); 1: no infinity, the
// all-ones magnitude is the NaN (e4m3fn); 2: neither (e2m1fn). SAT: overflow
// saturates to the largest finite value instead of going to infinity.
// ---------------------------------------------------------------------------

template <int EB, int FB, int KIND, bool SAT>
struct NxkFmt {
    static constexpr int BIAS = (1 << (EB - 1)) - 1;
    static constexpr nxk_u32 SIGN = 1u << (EB + FB);
    static constexpr nxk_u32 MAG = SIGN - 1u;
    static constexpr nxk_u32 EXPALL = ((1u << EB) - 1u) << FB;
    static constexpr nxk_u32 MAXF = KIND == 0 ? EXPALL - 1u : (KIND == 1 ? MAG - 1u : MAG);
    static constexpr nxk_u32 QNAN = KIND == 0 ? (EXPALL | (1u << (FB - 1))) : (KIND == 1 ? MAG : 0u);

    static NXK_DEV bool isnan(nxk_u32 b) {
        return KIND == 0 ? (b & MAG) > EXPALL : (KIND == 1 ? (b & MAG) == MAG : false);
    }

    // The value, exactly, as a float32 (a NaN keeps its payload's high bits).
    static NXK_DEV float to_f32(nxk_u32 b) {
        const nxk_u32 s = (b & SIGN) ? 0x80000000u : 0u;
        const nxk_u32 mag = b & MAG;
        const nxk_u32 e = mag >> FB;
        const nxk_u32 f = mag & ((1u << FB) - 1u);
        if (KIND == 0 && e == (1u << EB) - 1u) {
            return nxk_f32_of_bits(s | 0x7F800000u | (f << (23 - FB)));
        }
        if (KIND == 1 && mag == MAG) {
            return nxk_f32_of_bits(s | NXK_QNAN_F32);
        }
        if (e == 0) {
            const float v = (float)f * nxk_pow2f(1 - BIAS - FB);
            return s ? -v : v;
        }
        return nxk_f32_of_bits(s | ((e - BIAS + 127u) << 23) | (f << (23 - FB)));
    }

    // The payload of a NaN, its fraction left-aligned in 52 bits (none for KIND 1).
    static NXK_DEV nxk_u64 payload(nxk_u32 b) {
        return KIND == 0 ? (nxk_u64)(b & ((1u << FB) - 1u)) << (52 - FB) : 0ull;
    }

    // A cast's NaN: the sign, the payload's high bits, the quiet bit (KIND 1:
    // the one NaN; KIND 2: +0).
    static NXK_DEV nxk_u32 nan(bool negative, nxk_u64 payload52) {
        if (KIND == 2) return 0u;
        const nxk_u32 s = negative ? SIGN : 0u;
        if (KIND == 1) return s | MAG;
        return s | EXPALL | (1u << (FB - 1)) | (nxk_u32)(payload52 >> (52 - FB));
    }

    // x rounded once by the store rule; a NaN is the canonical quiet NaN (+0
    // for KIND 2).
    static NXK_DEV nxk_u32 of_f64(double x) {
        const nxk_u64 b = nxk_bits_f64(x);
        const nxk_u32 s = (b >> 63) ? SIGN : 0u;
        const nxk_u64 mag = b & 0x7FFFFFFFFFFFFFFFull;
        if (mag > 0x7FF0000000000000ull) return QNAN;
        if (mag == 0x7FF0000000000000ull) return s | (SAT ? MAXF : EXPALL);
        const int e = (int)(mag >> 52) - 1023;
        // Below a quarter of the least subnormal (double subnormals included): a signed zero.
        if (e < 1 - BIAS - FB - 2) return s;
        const nxk_u64 m = (mag & ((1ull << 52) - 1ull)) | (1ull << 52);
        const int emin = 1 - BIAS;
        const int q = (e < emin ? emin : e) - FB;  // the exponent of the last kept bit
        const int shift = 52 + q - e;               // in [52 - FB, 54]
        nxk_u64 r = m >> shift;
        const nxk_u64 rem = m & ((1ull << shift) - 1ull);
        const nxk_u64 half = 1ull << (shift - 1);
        if (rem > half || (rem == half && (r & 1ull))) r += 1ull;
        const nxk_u64 code = e < emin ? r : ((nxk_u64)(e - emin + 1) << FB) + r - (1ull << FB);
        if (code > MAXF) return s | (SAT ? MAXF : EXPALL);
        return s | (nxk_u32)code;
    }

    // A float32 result rounded once (exactly of_f64 of it: double holds it).
    static NXK_DEV nxk_u32 of_f32(float x) { return of_f64((double)x); }

    // Keys in the total order (-0 below +0, every NaN the greatest), as
    // unsigned integers.
    static NXK_DEV nxk_u64 key(nxk_u32 b) {
        if (isnan(b)) return (nxk_u64)((SIGN << 1) - 1u);
        return (b & SIGN) ? (nxk_u64)(~b & ((SIGN << 1) - 1u)) : (nxk_u64)(b | SIGN);
    }
};

typedef NxkFmt<5, 10, 0, false> NxkF16;
typedef NxkFmt<8, 7, 0, false> NxkBF16;
typedef NxkFmt<4, 3, 1, true> NxkE4M3;
typedef NxkFmt<5, 2, 0, true> NxkE5M2;
typedef NxkFmt<2, 1, 2, true> NxkE2M1;

// ---------------------------------------------------------------------------
// float32 and float64: casts' NaNs and payloads, keys
// ---------------------------------------------------------------------------

NXK_DEV nxk_u64 nxk_payload_f32(float x) { return (nxk_u64)(nxk_bits_f32(x) & 0x7FFFFFu) << 29; }
NXK_DEV nxk_u64 nxk_payload_f64(double x) { return nxk_bits_f64(x) & 0xFFFFFFFFFFFFFull; }
NXK_DEV float nxk_nan_f32(bool negative, nxk_u64 payload52) {
    return nxk_f32_of_bits((negative ? 0x80000000u : 0u) | NXK_QNAN_F32 | (nxk_u32)(payload52 >> 29));
}
NXK_DEV double nxk_nan_f64(bool negative, nxk_u64 payload52) {
    return nxk_f64_of_bits((negative ? 0x8000000000000000ull : 0ull) | NXK_QNAN_F64 | payload52);
}
NXK_DEV nxk_u64 nxk_key_f32(float x) {
    if (x != x) return 0xFFFFFFFFull;
    const nxk_u32 b = nxk_bits_f32(x);
    return (b & 0x80000000u) ? (nxk_u64)(~b) : (nxk_u64)(b | 0x80000000u);
}
NXK_DEV nxk_u64 nxk_key_f64(double x) {
    if (x != x) return 0xFFFFFFFFFFFFFFFFull;
    const nxk_u64 b = nxk_bits_f64(x);
    return (b >> 63) ? ~b : (b | 0x8000000000000000ull);
}

// ---------------------------------------------------------------------------
// Float to integer: truncated toward zero, saturated to the range, NaN to 0.
// ---------------------------------------------------------------------------

NXK_DEV nxk_i64 nxk_sat_signed(double v, nxk_i64 lo, nxk_i64 hi) {
    const double t = trunc(v);
    if (t != t) return 0;
    if (t < (double)lo) return lo;
    if (t >= (double)hi + 1.0) return hi;  // (double)hi + 1 is 2^(bits-1) exactly
    return (nxk_i64)t;
}
NXK_DEV nxk_u64 nxk_sat_unsigned(double v, nxk_u64 hi) {
    const double t = trunc(v);
    if (t != t || t < 1.0) return 0;
    if (t >= (double)hi + 1.0) return hi;  // (double)hi + 1 is 2^bits exactly
    return (nxk_u64)t;
}

// A 64-bit integer as a double that rounds once, correctly, into any format
// of 24 or fewer significant bits: exact below 2^53, else rounded to odd at
// bit 11 (the bits below it folded into a sticky bit).
NXK_DEV double nxk_odd_f64_of_u64(nxk_u64 m) {
    if (m < (1ull << 53)) return (double)m;
    const nxk_u64 sticky = (m & 0x7FFull) != 0 ? 0x800ull : 0ull;
    return (double)((m & ~0x7FFull) | sticky);
}
NXK_DEV double nxk_odd_f64_of_i64(nxk_i64 v) {
    const nxk_u64 m = v < 0 ? 0ull - (nxk_u64)v : (nxk_u64)v;
    const double f = nxk_odd_f64_of_u64(m);
    return v < 0 ? -f : f;
}

// a*b + c of float32 values, exact, rounded to odd in double: it then rounds
// once, correctly, into any format of 24 or fewer significant bits (the
// product of two 24-bit significands is exact in double; TwoSum gives the
// sum's error, and an inexact sum moves to its odd neighbour toward it).
NXK_DEV double nxk_fma_odd(float a, float b, float c) {
    const double p = (double)a * (double)b;
    const double cd = (double)c;
    const double s = p + cd;
    if (!(s - s == 0.0)) return s;  // an infinity or a NaN: the caller's rules
    const double bb = s - p;
    const double err = (p - (s - bb)) + (cd - bb);
    nxk_u64 u = nxk_bits_f64(s);
    if (err != 0.0 && (u & 1ull) == 0ull) u = ((err > 0.0) == (s > 0.0)) ? u + 1ull : u - 1ull;
    return nxk_f64_of_bits(u);
}

// ---------------------------------------------------------------------------
// 4-bit integers and bits
// ---------------------------------------------------------------------------

NXK_DEV nxk_i8 nxk_wrap_i4(nxk_i64 v) { return (nxk_i8)((((nxk_i32)(v & 15)) ^ 8) - 8); }
NXK_DEV nxk_u8 nxk_wrap_u4(nxk_u64 v) { return (nxk_u8)(v & 15u); }

// ---------------------------------------------------------------------------
// Loads and stores at element position `pos` of the buffer at `base`
// ---------------------------------------------------------------------------

template <class T>
NXK_DEV T nxk_ld(const char* base, nxk_i64 pos) {
    return *(const T*)(base + pos * (nxk_i64)sizeof(T));
}
template <class T>
NXK_DEV void nxk_st(char* base, nxk_i64 pos, T v) {
    *(T*)(base + pos * (nxk_i64)sizeof(T)) = v;
}

// A 64-bit element that may sit at a 4-byte-aligned address (a complex64
// does: the core aligns it to one part): one 8-byte access where the address
// is 8-aligned, else two 4-byte accesses, the low word first. An 8-byte
// access at an address = 4 (mod 8) is a GPU's "misaligned address" fault.
NXK_DEV nxk_u64 nxk_ld_u64_a4(const char* base, nxk_i64 pos) {
    const char* at = base + pos * 8;
    if (((nxk_u64)at & 7ull) == 0ull) return *(const nxk_u64*)at;
    const nxk_u32* w = (const nxk_u32*)at;
    return (nxk_u64)w[0] | ((nxk_u64)w[1] << 32);
}
NXK_DEV void nxk_st_u64_a4(char* base, nxk_i64 pos, nxk_u64 v) {
    char* at = base + pos * 8;
    if (((nxk_u64)at & 7ull) == 0ull) {
        *(nxk_u64*)at = v;
        return;
    }
    nxk_u32* w = (nxk_u32*)at;
    w[0] = (nxk_u32)v;
    w[1] = (nxk_u32)(v >> 32);
}

// The `width`-bit code of sub-byte element `pos`.
NXK_DEV nxk_u32 nxk_ld_bits(const char* base, nxk_i64 pos, int width) {
    const nxk_i64 bit = pos * width;
    const nxk_u8 byte = *(const nxk_u8*)(base + (bit >> 3));
    return ((nxk_u32)byte >> (bit & 7)) & ((1u << width) - 1u);
}
// Store the `width`-bit code of sub-byte element `pos`, leaving every other bit.
NXK_DEV void nxk_st_bits(char* base, nxk_i64 pos, int width, nxk_u32 code) {
    const nxk_i64 bit = pos * width;
    const nxk_u64 addr = (nxk_u64)(base + (bit >> 3));
    nxk_u32* word = (nxk_u32*)(addr & ~3ull);
    const int shift = (int)((addr & 3ull) * 8ull) + (int)(bit & 7);
    const nxk_u32 mask = ((1u << width) - 1u) << shift;
    atomicAnd(word, ~mask);
    atomicOr(word, (code << shift) & mask);
}

// ---------------------------------------------------------------------------
// Per dtype: load, store, code (bits, zero-extended) and of_code.
// ---------------------------------------------------------------------------

#define NXK_BYTEWIDE(NAME, T, U)                                                              \
    NXK_DEV T nxk_ld_##NAME(const char* b, nxk_i64 p) { return nxk_ld<T>(b, p); }             \
    NXK_DEV void nxk_st_##NAME(char* b, nxk_i64 p, T v) { nxk_st<T>(b, p, v); }                \
    NXK_DEV nxk_u64 nxk_code_##NAME(T v) { return (nxk_u64)(U)v; }                            \
    NXK_DEV T nxk_of_code_##NAME(nxk_u64 c) { return (T)(U)c; }

NXK_BYTEWIDE(i64, nxk_i64, nxk_u64)
NXK_BYTEWIDE(u64, nxk_u64, nxk_u64)
NXK_BYTEWIDE(i32, nxk_i32, nxk_u32)
NXK_BYTEWIDE(u32, nxk_u32, nxk_u32)
NXK_BYTEWIDE(i16, nxk_i16, nxk_u16)
NXK_BYTEWIDE(u16, nxk_u16, nxk_u16)
NXK_BYTEWIDE(i8, nxk_i8, nxk_u8)
NXK_BYTEWIDE(u8, nxk_u8, nxk_u8)
NXK_BYTEWIDE(f16, nxk_u16, nxk_u16)
NXK_BYTEWIDE(bf16, nxk_u16, nxk_u16)
NXK_BYTEWIDE(e4m3, nxk_u8, nxk_u8)
NXK_BYTEWIDE(e5m2, nxk_u8, nxk_u8)
NXK_BYTEWIDE(bool, nxk_u8, nxk_u8)
#undef NXK_BYTEWIDE

NXK_DEV float nxk_ld_f32(const char* b, nxk_i64 p) { return nxk_ld<float>(b, p); }
NXK_DEV void nxk_st_f32(char* b, nxk_i64 p, float v) { nxk_st<float>(b, p, v); }
NXK_DEV nxk_u64 nxk_code_f32(float v) { return (nxk_u64)nxk_bits_f32(v); }
NXK_DEV float nxk_of_code_f32(nxk_u64 c) { return nxk_f32_of_bits((nxk_u32)c); }
NXK_DEV double nxk_ld_f64(const char* b, nxk_i64 p) { return nxk_ld<double>(b, p); }
NXK_DEV void nxk_st_f64(char* b, nxk_i64 p, double v) { nxk_st<double>(b, p, v); }
NXK_DEV nxk_u64 nxk_code_f64(double v) { return nxk_bits_f64(v); }
NXK_DEV double nxk_of_code_f64(nxk_u64 c) { return nxk_f64_of_bits(c); }

NXK_DEV nxk_i8 nxk_ld_i4(const char* b, nxk_i64 p) { return nxk_wrap_i4(nxk_ld_bits(b, p, 4)); }
NXK_DEV void nxk_st_i4(char* b, nxk_i64 p, nxk_i8 v) { nxk_st_bits(b, p, 4, (nxk_u32)v & 15u); }
NXK_DEV nxk_u64 nxk_code_i4(nxk_i8 v) { return (nxk_u64)((nxk_u32)v & 15u); }
NXK_DEV nxk_i8 nxk_of_code_i4(nxk_u64 c) { return nxk_wrap_i4((nxk_i64)c); }
NXK_DEV nxk_u8 nxk_ld_u4(const char* b, nxk_i64 p) { return (nxk_u8)nxk_ld_bits(b, p, 4); }
NXK_DEV void nxk_st_u4(char* b, nxk_i64 p, nxk_u8 v) { nxk_st_bits(b, p, 4, v & 15u); }
NXK_DEV nxk_u64 nxk_code_u4(nxk_u8 v) { return (nxk_u64)(v & 15u); }
NXK_DEV nxk_u8 nxk_of_code_u4(nxk_u64 c) { return (nxk_u8)(c & 15u); }
NXK_DEV nxk_u8 nxk_ld_e2m1(const char* b, nxk_i64 p) { return (nxk_u8)nxk_ld_bits(b, p, 4); }
NXK_DEV void nxk_st_e2m1(char* b, nxk_i64 p, nxk_u8 v) { nxk_st_bits(b, p, 4, v & 15u); }
NXK_DEV nxk_u64 nxk_code_e2m1(nxk_u8 v) { return (nxk_u64)(v & 15u); }
NXK_DEV nxk_u8 nxk_of_code_e2m1(nxk_u64 c) { return (nxk_u8)(c & 15u); }
NXK_DEV nxk_u8 nxk_ld_bit(const char* b, nxk_i64 p) { return (nxk_u8)nxk_ld_bits(b, p, 1); }
NXK_DEV void nxk_st_bit(char* b, nxk_i64 p, nxk_u8 v) { nxk_st_bits(b, p, 1, v & 1u); }
NXK_DEV nxk_u64 nxk_code_bit(nxk_u8 v) { return (nxk_u64)(v & 1u); }
NXK_DEV nxk_u8 nxk_of_code_bit(nxk_u64 c) { return (nxk_u8)(c & 1u); }

// ---------------------------------------------------------------------------
// Narrow floats by name: value (float32, exact), NaN test, stores from
// float32 and from double, a cast's NaN, payload, sign, key.
// ---------------------------------------------------------------------------

#define NXK_NARROW(NAME, T, F)                                                                    \
    NXK_DEV float nxk_val_##NAME(T v) { return F::to_f32(v); }                                    \
    NXK_DEV bool nxk_isnan_##NAME(T v) { return F::isnan(v); }                                    \
    NXK_DEV T nxk_##NAME##_of_f32(float x) { return (T)F::of_f32(x); }                           \
    NXK_DEV T nxk_##NAME##_of_f64(double x) { return (T)F::of_f64(x); }                          \
    NXK_DEV T nxk_nan_##NAME(bool negative, nxk_u64 payload52) { return (T)F::nan(negative, payload52); } \
    NXK_DEV nxk_u64 nxk_payload_##NAME(T v) { return F::payload(v); }                            \
    NXK_DEV bool nxk_neg_##NAME(T v) { return (v & F::SIGN) != 0; }                              \
    NXK_DEV nxk_u64 nxk_key_##NAME(T v) { return F::key(v); }

NXK_NARROW(f16, nxk_u16, NxkF16)
NXK_NARROW(bf16, nxk_u16, NxkBF16)
NXK_NARROW(e4m3, nxk_u8, NxkE4M3)
NXK_NARROW(e5m2, nxk_u8, NxkE5M2)
NXK_NARROW(e2m1, nxk_u8, NxkE2M1)
#undef NXK_NARROW

NXK_DEV float nxk_val_f32(float v) { return v; }
NXK_DEV double nxk_val_f64(double v) { return v; }
NXK_DEV bool nxk_isnan_f32(float v) { return v != v; }
NXK_DEV bool nxk_isnan_f64(double v) { return v != v; }
NXK_DEV float nxk_f32_of_f32(float x) { return x; }
NXK_DEV float nxk_f32_of_f64(double x) { return (float)x; }  // a NaN's bits: the caller's rule
NXK_DEV double nxk_f64_of_f64(double x) { return x; }
NXK_DEV bool nxk_neg_f32(float v) { return (nxk_bits_f32(v) >> 31) != 0; }
NXK_DEV bool nxk_neg_f64(double v) { return (nxk_bits_f64(v) >> 63) != 0; }

// Store a float result into a float dtype by its code (dtype.code: 0 float64,
// 1 float32, 2 float16, 3 bfloat16, 4 e4m3fn, 5 e5m2, 6 e2m1fn), rounded
// once from `v` (a float32 result widens to double exactly). A NaN result's
// bits are unspecified (a reduction's or a scan's).
NXK_DEV void nxk_store_float(int code, char* d, nxk_i64 p, double v) {
    switch (code) {
        case 0: nxk_st_f64(d, p, v); break;
        case 1: nxk_st_f32(d, p, (float)v); break;
        case 2: nxk_st_f16(d, p, nxk_f16_of_f64(v)); break;
        case 3: nxk_st_bf16(d, p, nxk_bf16_of_f64(v)); break;
        case 4: nxk_st_e4m3(d, p, nxk_e4m3_of_f64(v)); break;
        case 5: nxk_st_e5m2(d, p, nxk_e5m2_of_f64(v)); break;
        default: nxk_st_e2m1(d, p, nxk_e2m1_of_f64(v)); break;
    }
}

// Store an element of any real dtype or complex64, by its code (dtype.code),
// from its bits.
NXK_DEV void nxk_store_code_of(int dtc, char* d, nxk_i64 p, nxk_u64 c) {
    switch (dtc) {
        case 0: nxk_st_f64(d, p, nxk_of_code_f64(c)); break;
        case 1: nxk_st_f32(d, p, nxk_of_code_f32(c)); break;
        case 2: nxk_st_f16(d, p, nxk_of_code_f16(c)); break;
        case 3: nxk_st_bf16(d, p, nxk_of_code_bf16(c)); break;
        case 4: nxk_st_e4m3(d, p, nxk_of_code_e4m3(c)); break;
        case 5: nxk_st_e5m2(d, p, nxk_of_code_e5m2(c)); break;
        case 6: nxk_st_e2m1(d, p, nxk_of_code_e2m1(c)); break;
        case 7: nxk_st_i64(d, p, nxk_of_code_i64(c)); break;
        case 8: nxk_st_u64(d, p, nxk_of_code_u64(c)); break;
        case 9: nxk_st_i32(d, p, nxk_of_code_i32(c)); break;
        case 10: nxk_st_u32(d, p, nxk_of_code_u32(c)); break;
        case 11: nxk_st_i16(d, p, nxk_of_code_i16(c)); break;
        case 12: nxk_st_u16(d, p, nxk_of_code_u16(c)); break;
        case 13: nxk_st_i8(d, p, nxk_of_code_i8(c)); break;
        case 14: nxk_st_u8(d, p, nxk_of_code_u8(c)); break;
        case 15: nxk_st_i4(d, p, nxk_of_code_i4(c)); break;
        case 16: nxk_st_u4(d, p, nxk_of_code_u4(c)); break;
        case 18: nxk_st_u64_a4(d, p, c); break;  // complex64 (4-byte aligned): nxk_code_c64's bits
        case 20: nxk_st_bit(d, p, nxk_of_code_bit(c)); break;
        default: nxk_st_bool(d, p, nxk_of_code_bool(c)); break;
    }
}

// Prog's Maximum and Minimum of float values: the first NaN, -0 below +0.
NXK_DEV float nxk_fmax_f32(float a, float b) {
    return a != a ? a : (b != b ? b : ((a > b || (a == b && nxk_neg_f32(b))) ? a : b));
}
NXK_DEV float nxk_fmin_f32(float a, float b) {
    return a != a ? a : (b != b ? b : ((a < b || (a == b && nxk_neg_f32(a))) ? a : b));
}
NXK_DEV double nxk_fmax_f64(double a, double b) {
    return a != a ? a : (b != b ? b : ((a > b || (a == b && nxk_neg_f64(b))) ? a : b));
}
NXK_DEV double nxk_fmin_f64(double a, double b) {
    return a != a ? a : (b != b ? b : ((a < b || (a == b && nxk_neg_f64(a))) ? a : b));
}

// Integer keys in their order, as unsigned integers.
NXK_DEV nxk_u64 nxk_key_signed(nxk_i64 v) { return (nxk_u64)v ^ 0x8000000000000000ull; }
NXK_DEV nxk_u64 nxk_key_unsigned(nxk_u64 v) { return v; }

// ---------------------------------------------------------------------------
// Integer kinds that need more than an operator
// ---------------------------------------------------------------------------

// b^e wrapping, e >= 0.
NXK_DEV nxk_u64 nxk_ipow_u64(nxk_u64 b, nxk_u64 e) {
    nxk_u64 r = 1ull;
    while (e != 0ull) {
        if (e & 1ull) r *= b;
        b *= b;
        e >>= 1;
    }
    return r;
}
// A signed power: a negative exponent gives 0 but for bases 1 and -1.
NXK_DEV nxk_u64 nxk_ipow_i64(nxk_i64 b, nxk_i64 e) {
    if (e < 0) return b == 1 ? 1ull : (b == -1 ? ((e & 1) ? ~0ull : 1ull) : 0ull);
    return nxk_ipow_u64((nxk_u64)b, (nxk_u64)e);
}

// Threefry-2x32, 20 rounds (Random123), words low half first.
NXK_DEV nxk_u64 nxk_threefry(nxk_u64 counter, nxk_u64 key) {
    const int rot[8] = {13, 15, 26, 6, 17, 29, 16, 24};
    nxk_u32 x0 = (nxk_u32)counter, x1 = (nxk_u32)(counter >> 32);
    const nxk_u32 ks[3] = {(nxk_u32)key, (nxk_u32)(key >> 32),
                           (nxk_u32)key ^ (nxk_u32)(key >> 32) ^ 0x1BD11BDAu};
    x0 += ks[0];
    x1 += ks[1];
    for (int r = 0; r < 20; ++r) {
        const int k = rot[r % 8];
        x0 += x1;
        x1 = (x1 << k) | (x1 >> (32 - k));
        x1 ^= x0;
        if (r % 4 == 3) {
            const int j = r / 4 + 1;
            x0 += ks[j % 3];
            x1 += ks[(j + 1) % 3] + (nxk_u32)j;
        }
    }
    return (nxk_u64)x0 | ((nxk_u64)x1 << 32);
}

#include "nxk_trig.cuh"
#include "nxk_complex.cuh"

#endif  // NXK_SCALAR_CUH

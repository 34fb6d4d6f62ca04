// emu_intrinsics.h: CUDA's atomics, device intrinsics and math on the CPU.
// Included by emu_cuda.h, after the runtime.
//
// Rules: an atomic is a plain read-modify-write (no fiber is preempted);
// integer arithmetic wraps as on the GPU; the correctly rounded operations
// (+ - * / sqrt fma, the _rn intrinsics, conversions to nearest) give the
// GPU's bits; a float-to-integer conversion saturates and takes NaN to 0 as
// the GPU's cvt does; the functions the GPU computes approximately
// (__expf, __sinf, rsqrtf, __fdividef, ...) and libm's transcendental
// functions are libm's here, which need not give the GPU's bits.

#ifndef NXKERNEL_EMU_INTRINSICS_H
#define NXKERNEL_EMU_INTRINSICS_H

// ---------------------------------------------------------------------------
// Atomics
// ---------------------------------------------------------------------------

namespace nxemu {
template <class T>
struct identity {
    using type = T;
};
template <class T>
using arg_t = typename identity<T>::type;  // not deduced: atomicAdd(&u, 1) takes u's type

template <class T>
inline T wrap_add(T a, T b) {
    if constexpr (std::is_integral<T>::value) {
        using U = std::make_unsigned_t<T>;
        return T(U(a) + U(b));
    } else {
        return a + b;
    }
}
template <class T>
inline T wrap_sub(T a, T b) {
    if constexpr (std::is_integral<T>::value) {
        using U = std::make_unsigned_t<T>;
        return T(U(a) - U(b));
    } else {
        return a - b;
    }
}
}  // namespace nxemu

#define NXEMU_ATOMIC(NAME, EXPR)                                                                   \
    template <class T>                                                                             \
    static inline T NAME(T* address, ::nxemu::arg_t<T> val) {                                      \
        T old = *address;                                                                          \
        *address = (EXPR);                                                                         \
        return old;                                                                                \
    }                                                                                              \
    template <class T>                                                                             \
    static inline T NAME##_block(T* address, ::nxemu::arg_t<T> val) { return NAME(address, val); } \
    template <class T>                                                                             \
    static inline T NAME##_system(T* address, ::nxemu::arg_t<T> val) { return NAME(address, val); }

NXEMU_ATOMIC(atomicAdd, ::nxemu::wrap_add(old, val))
NXEMU_ATOMIC(atomicSub, ::nxemu::wrap_sub(old, val))
NXEMU_ATOMIC(atomicExch, val)
NXEMU_ATOMIC(atomicMin, val < old ? val : old)
NXEMU_ATOMIC(atomicMax, val > old ? val : old)
NXEMU_ATOMIC(atomicAnd, T(old & val))
NXEMU_ATOMIC(atomicOr, T(old | val))
NXEMU_ATOMIC(atomicXor, T(old ^ val))
#undef NXEMU_ATOMIC

static inline unsigned atomicInc(unsigned* address, unsigned val) {
    unsigned old = *address;
    *address = old >= val ? 0u : old + 1u;
    return old;
}
static inline unsigned atomicDec(unsigned* address, unsigned val) {
    unsigned old = *address;
    *address = (old == 0u || old > val) ? val : old - 1u;
    return old;
}
template <class T>
static inline T atomicCAS(T* address, ::nxemu::arg_t<T> compare, ::nxemu::arg_t<T> val) {
    T old = *address;
    if (old == compare) *address = val;
    return old;
}
template <class T>
static inline T atomicCAS_block(T* address, ::nxemu::arg_t<T> compare, ::nxemu::arg_t<T> val) {
    return atomicCAS(address, compare, val);
}
template <class T>
static inline T atomicCAS_system(T* address, ::nxemu::arg_t<T> compare, ::nxemu::arg_t<T> val) {
    return atomicCAS(address, compare, val);
}

// ---------------------------------------------------------------------------
// Bit casts and conversions
// ---------------------------------------------------------------------------

namespace nxemu {
template <class To, class From>
inline To bits(From v) {
    static_assert(sizeof(To) == sizeof(From), "a bit cast keeps the size");
    To out;
    std::memcpy(&out, &v, sizeof(To));
    return out;
}

// A float's conversion to an integer as the GPU's cvt does it: rounded as
// asked (in double, which holds every float and rounds no integer part),
// saturated to the integer's range, NaN to 0.
template <class I>
inline I saturate(double rounded) {
    if (rounded != rounded) return I(0);
    if (rounded <= double(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
    if (rounded >= double(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
    return I(rounded);
}
}  // namespace nxemu

static inline int __float_as_int(float x) { return ::nxemu::bits<int>(x); }
static inline unsigned __float_as_uint(float x) { return ::nxemu::bits<unsigned>(x); }
static inline float __int_as_float(int x) { return ::nxemu::bits<float>(x); }
static inline float __uint_as_float(unsigned x) { return ::nxemu::bits<float>(x); }
static inline long long __double_as_longlong(double x) { return ::nxemu::bits<long long>(x); }
static inline double __longlong_as_double(long long x) { return ::nxemu::bits<double>(x); }
static inline int __double2hiint(double x) { return int(::nxemu::bits<unsigned long long>(x) >> 32); }
static inline int __double2loint(double x) { return int(unsigned(::nxemu::bits<unsigned long long>(x))); }
static inline double __hiloint2double(int hi, int lo) {
    return ::nxemu::bits<double>((static_cast<unsigned long long>(unsigned(hi)) << 32) | unsigned(lo));
}

#define NXEMU_CVT(FROM, TY, NAME)                                                               \
    static inline TY NAME##_rn(FROM x) { return ::nxemu::saturate<TY>(nearbyint(double(x))); } \
    static inline TY NAME##_rz(FROM x) { return ::nxemu::saturate<TY>(trunc(double(x))); }     \
    static inline TY NAME##_ru(FROM x) { return ::nxemu::saturate<TY>(ceil(double(x))); }      \
    static inline TY NAME##_rd(FROM x) { return ::nxemu::saturate<TY>(floor(double(x))); }
NXEMU_CVT(float, int, __float2int)
NXEMU_CVT(float, unsigned, __float2uint)
NXEMU_CVT(float, long long, __float2ll)
NXEMU_CVT(float, unsigned long long, __float2ull)
NXEMU_CVT(double, int, __double2int)
NXEMU_CVT(double, unsigned, __double2uint)
NXEMU_CVT(double, long long, __double2ll)
NXEMU_CVT(double, unsigned long long, __double2ull)
#undef NXEMU_CVT

// Conversions that round to nearest (the environment every launch runs in).
static inline float __int2float_rn(int x) { return float(x); }
static inline float __uint2float_rn(unsigned x) { return float(x); }
static inline float __ll2float_rn(long long x) { return float(x); }
static inline float __ull2float_rn(unsigned long long x) { return float(x); }
static inline double __int2double_rn(int x) { return double(x); }
static inline double __uint2double_rn(unsigned x) { return double(x); }
static inline double __ll2double_rn(long long x) { return double(x); }
static inline double __ull2double_rn(unsigned long long x) { return double(x); }
static inline float __double2float_rn(double x) { return x != x ? ::nxemu::bits<float>(0x7fffffffu) : float(x); }

// ---------------------------------------------------------------------------
// Float arithmetic
// ---------------------------------------------------------------------------

namespace nxemu {
// The GPU's float32 NaN: its float arithmetic and cvt to float32 return the
// canonical NaN 0x7fffffff whatever the operands' payloads (x86 keeps an
// operand's payload, or makes 0xffc00000).
inline float gpu_f32(float r) { return r != r ? bits<float>(0x7fffffffu) : r; }
}  // namespace nxemu

// Correctly rounded (the _rn forms; nothing contracts into an fma), with the
// GPU's NaN (an operator on floats keeps x86's: see README.md).
static inline float __fadd_rn(float a, float b) { return ::nxemu::gpu_f32(a + b); }
static inline float __fsub_rn(float a, float b) { return ::nxemu::gpu_f32(a - b); }
static inline float __fmul_rn(float a, float b) { return ::nxemu::gpu_f32(a * b); }
static inline float __fdiv_rn(float a, float b) { return ::nxemu::gpu_f32(a / b); }
static inline float __frcp_rn(float a) { return ::nxemu::gpu_f32(1.0f / a); }
static inline float __fsqrt_rn(float a) { return ::nxemu::gpu_f32(sqrtf(a)); }
static inline float __fmaf_rn(float a, float b, float c) { return ::nxemu::gpu_f32(fmaf(a, b, c)); }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dsub_rn(double a, double b) { return a - b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __ddiv_rn(double a, double b) { return a / b; }
static inline double __drcp_rn(double a) { return 1.0 / a; }
static inline double __dsqrt_rn(double a) { return sqrt(a); }
static inline double __fma_rn(double a, double b, double c) { return fma(a, b, c); }
static inline float __saturatef(float x) { return x != x ? 0.0f : (x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x)); }

// What the GPU computes approximately: libm's (or an exact) result here,
// which need not have the GPU's bits. (Macros where glibc's math.h already
// declares the name for its own use.)
static inline float rsqrtf(float x) { return ::nxemu::gpu_f32(1.0f / sqrtf(x)); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
static inline float rcbrtf(float x) { return 1.0f / cbrtf(x); }
static inline double rcbrt(double x) { return 1.0 / cbrt(x); }
static inline float __fdividef(float a, float b) { return ::nxemu::gpu_f32(a / b); }
#define __expf(x) expf(x)
#define __exp10f(x) exp10f(x)
#define __logf(x) logf(x)
#define __log2f(x) log2f(x)
#define __log10f(x) log10f(x)
#define __sinf(x) sinf(x)
#define __cosf(x) cosf(x)
#define __tanf(x) tanf(x)
#define __powf(a, b) powf(a, b)
#define __sincosf(x, s, c) sincosf(x, s, c)
static inline float sinpif(float x) { return float(sin(M_PI * double(x))); }
static inline float cospif(float x) { return float(cos(M_PI * double(x))); }
static inline double sinpi(double x) { return sin(M_PI * x); }
static inline double cospi(double x) { return cos(M_PI * x); }

// ---------------------------------------------------------------------------
// Integer intrinsics
// ---------------------------------------------------------------------------

static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(unsigned(x)); }
static inline int __clzll(long long x) {
    return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x));
}
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
static inline unsigned __brev(unsigned x) {
    unsigned r = 0;
    for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
    return r;
}
static inline unsigned long long __brevll(unsigned long long x) {
    return (static_cast<unsigned long long>(__brev(unsigned(x))) << 32) | __brev(unsigned(x >> 32));
}
static inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
    unsigned long long v = (static_cast<unsigned long long>(y) << 32) | x;
    unsigned r = 0;
    for (int i = 0; i < 4; ++i) r |= unsigned((v >> (8 * ((s >> (4 * i)) & 7u))) & 0xFFu) << (8 * i);
    return r;
}
static inline unsigned __funnelshift_l(unsigned lo, unsigned hi, unsigned shift) {
    unsigned long long v = (static_cast<unsigned long long>(hi) << 32) | lo;
    return unsigned((v << (shift & 31u)) >> 32);
}
static inline unsigned __funnelshift_lc(unsigned lo, unsigned hi, unsigned shift) {
    unsigned long long v = (static_cast<unsigned long long>(hi) << 32) | lo;
    return unsigned((v << (shift < 32u ? shift : 32u)) >> 32);
}
static inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned shift) {
    unsigned long long v = (static_cast<unsigned long long>(hi) << 32) | lo;
    return unsigned(v >> (shift & 31u));
}
static inline unsigned __funnelshift_rc(unsigned lo, unsigned hi, unsigned shift) {
    unsigned long long v = (static_cast<unsigned long long>(hi) << 32) | lo;
    return unsigned(v >> (shift < 32u ? shift : 32u));
}
static inline int __mulhi(int a, int b) { return int((static_cast<long long>(a) * b) >> 32); }
static inline unsigned __umulhi(unsigned a, unsigned b) {
    return unsigned((static_cast<unsigned long long>(a) * b) >> 32);
}
static inline long long __mul64hi(long long a, long long b) { return (long long)((__int128)a * b >> 64); }
static inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
    return (unsigned long long)((unsigned __int128)a * b >> 64);
}
static inline int __mul24(int a, int b) {
    long long sa = int(unsigned(a) << 8) >> 8, sb = int(unsigned(b) << 8) >> 8;  // low 24 bits, sign-extended
    return int(unsigned(static_cast<unsigned long long>(sa * sb)));
}
static inline unsigned __umul24(unsigned a, unsigned b) { return (a & 0xFFFFFFu) * (b & 0xFFFFFFu); }
static inline int __hadd(int a, int b) { return int((static_cast<long long>(a) + b) >> 1); }
static inline int __rhadd(int a, int b) { return int((static_cast<long long>(a) + b + 1) >> 1); }
static inline unsigned __uhadd(unsigned a, unsigned b) {
    return unsigned((static_cast<unsigned long long>(a) + b) >> 1);
}
static inline unsigned __urhadd(unsigned a, unsigned b) {
    return unsigned((static_cast<unsigned long long>(a) + b + 1) >> 1);
}
static inline unsigned __sad(int a, int b, unsigned c) {
    return c + unsigned(a > b ? static_cast<long long>(a) - b : static_cast<long long>(b) - a);
}
static inline unsigned __usad(unsigned a, unsigned b, unsigned c) { return c + (a > b ? a - b : b - a); }

// CUDA's min and max overloads (floats as fminf and fmaxf).
#define NXEMU_MINMAX(T)                                     \
    static inline T min(T a, T b) { return a < b ? a : b; } \
    static inline T max(T a, T b) { return a > b ? a : b; }
NXEMU_MINMAX(int)
NXEMU_MINMAX(unsigned)
NXEMU_MINMAX(long)
NXEMU_MINMAX(unsigned long)
NXEMU_MINMAX(long long)
NXEMU_MINMAX(unsigned long long)
#undef NXEMU_MINMAX
static inline unsigned min(int a, unsigned b) { return min(unsigned(a), b); }
static inline unsigned min(unsigned a, int b) { return min(a, unsigned(b)); }
static inline unsigned max(int a, unsigned b) { return max(unsigned(a), b); }
static inline unsigned max(unsigned a, int b) { return max(a, unsigned(b)); }
static inline float min(float a, float b) { return fminf(a, b); }
static inline float max(float a, float b) { return fmaxf(a, b); }
static inline double min(double a, double b) { return fmin(a, b); }
static inline double max(double a, double b) { return fmax(a, b); }
static inline unsigned umin(unsigned a, unsigned b) { return min(a, b); }
static inline unsigned umax(unsigned a, unsigned b) { return max(a, b); }
static inline long long llmin(long long a, long long b) { return min(a, b); }
static inline long long llmax(long long a, long long b) { return max(a, b); }
static inline unsigned long long ullmin(unsigned long long a, unsigned long long b) { return min(a, b); }
static inline unsigned long long ullmax(unsigned long long a, unsigned long long b) { return max(a, b); }

// Cache-hinted loads and stores are plain ones.
template <class T>
static inline T __ldg(const T* p) { return *p; }
template <class T>
static inline T __ldca(const T* p) { return *p; }
template <class T>
static inline T __ldcg(const T* p) { return *p; }
template <class T>
static inline T __ldcs(const T* p) { return *p; }
template <class T>
static inline T __ldlu(const T* p) { return *p; }
template <class T>
static inline T __ldcv(const T* p) { return *p; }
template <class T>
static inline void __stwb(T* p, T v) { *p = v; }
template <class T>
static inline void __stcg(T* p, T v) { *p = v; }
template <class T>
static inline void __stcs(T* p, T v) { *p = v; }
template <class T>
static inline void __stwt(T* p, T v) { *p = v; }

#endif  // NXKERNEL_EMU_INTRINSICS_H

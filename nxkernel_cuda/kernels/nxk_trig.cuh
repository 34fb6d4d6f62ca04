// nxk_trig.cuh: Sin, Cos and Tan of a double, within 1 ulp at huge arguments.
//
// nxk_sin(x), nxk_cos(x) and nxk_tan(x) are the C library's sin, cos and tan
// (libdevice's on a GPU, glibc's on cuda-emu) but where 2^20 <= |x| < inf:
// there both reduce x modulo π/2 with too few bits where x lies close to a
// multiple of π/2 (glibc's cos at 0x1.6ac5b262ca1ffp+849, 2^-60.9 from one,
// is 8 ulps off, its tan 14), and these functions reduce it by Payne–Hanek.
//
// The algorithm, its constants and its order of operations are those of the
// host library's nxkernel_host/trig.py (read its docstring for the error
// analysis), so both libraries give the same bits at huge arguments:
//
// * nxk_trig_reduce: the 53-bit significand m of |x| times a 192-bit window
//   of 4/π's bits chosen by x's exponent keeps the 128 bits of |x|·4/π from
//   2^2 to 2^-125: 3 bits of octant, 125 of fraction, short by < 2^-124. An
//   odd octant counts from the octant above (fraction - 1). The fraction
//   times π/4 (a double-double) is r = rh + rl, |r| <= π/4, and the octant
//   gives the quadrant n.
// * nxk_trig_sincos: sin r and cos r as double-doubles by their Taylor series
//   about rh (to x^21 and x^22) with rl's first-order term.
// * Tan is sin/cos (-cos/sin in odd quadrants) by a double-double division.
//
// Products are Dekker's two-product by Veltkamp's splitting, not fma: the
// host computes them the same way, and both compile without contraction
// (--fmad=false, -ffp-contract=off), on which the splitting relies.
#ifndef NXK_TRIG_CUH
#define NXK_TRIG_CUH

#include "nxk_common.cuh"

// Arguments at least this large (and finite) take the reduction below.
#define NXK_TRIG_HUGE 0x1p20

struct NxkDd {
    double hi, lo;
};

// hi = fl(a + b), hi + lo == a + b exactly (Knuth's two-sum).
__device__ __forceinline__ NxkDd nxk_two_sum(double a, double b) {
    const double s = a + b;
    const double bb = s - a;
    return {s, (a - (s - bb)) + (b - bb)};
}

// hi = fl(a·b), hi + lo == a·b exactly for |a|, |b| <= 2 (Dekker, Veltkamp).
__device__ __forceinline__ NxkDd nxk_two_prod(double a, double b) {
    const double p = a * b;
    const double ca = 134217729.0 * a;
    const double ah = ca - (ca - a);
    const double al = a - ah;
    const double cb = 134217729.0 * b;
    const double bh = cb - (cb - b);
    const double bl = b - bh;
    return {p, ((ah * bh - p) + ah * bl + al * bh) + al * bl};
}

// a = n·π/2 + r modulo 2π for finite a >= 2^-8: returns n in [0, 4), r in *r.
static __device__ __noinline__ int nxk_trig_reduce(double a, NxkDd* r) {
    // 4/π = Σ w[i]·2^(-64 i): its integer part, then 1216 bits of fraction.
    const nxk_u64 w[20] = {
        0x0000000000000001ull, 0x45F306DC9C882A53ull, 0xF84EAFA3EA69BB81ull, 0xB6C52B3278872083ull,
        0xFCA2C757BD778AC3ull, 0x6E48DC74849BA5C0ull, 0x0C925DD413A32439ull, 0xFC3BD63962534E7Dull,
        0xD1046BEA5D768909ull, 0xD338E04D68BEFC82ull, 0x7323AC7306A673E9ull, 0x3908BF177BF25076ull,
        0x3FF12FFFBC0B301Full, 0xDE5E2316B414DA3Eull, 0xDA6CFD9E4F96136Eull, 0x9E8C7ECD3CBFD45Aull,
        0xEA4F758FD7CBE2F6ull, 0x7A0E73EF14A525D4ull, 0xD7F6BF623F1ABA10ull, 0xAC06608DF8F6D757ull,
    };
    const nxk_u64 bits = (nxk_u64)__double_as_longlong(a);
    const int e = (int)((bits >> 52) & 0x7FFull) - 1075;
    const nxk_u64 m = (bits & 0xFFFFFFFFFFFFFull) | (1ull << 52);
    // a·4/π = m·2^-61·Y with Y = 4/π·2^s: z0, z1, z2 are Y mod 2^64 and the
    // next 128 bits of its fraction.
    const int s = e + 61;
    const int d = s / 64;
    const int sh = s % 64;
    nxk_u64 z0 = w[d], z1 = w[d + 1], z2 = w[d + 2];
    if (sh != 0) {
        z0 = (w[d] << sh) | (w[d + 1] >> (64 - sh));
        z1 = (w[d + 1] << sh) | (w[d + 2] >> (64 - sh));
        z2 = (w[d + 2] << sh) | (w[d + 3] >> (64 - sh));
    }
    const nxk_u64 z1lo = z1 * m;
    const nxk_u64 lo = z1lo + __umul64hi(z2, m);
    const nxk_u64 hi = z0 * m + __umul64hi(z1, m) + (lo < z1lo ? 1ull : 0ull);
    // hi:lo·2^-125 is a·4/π mod 8: 3 bits of octant j, 125 of fraction f,
    // taken as four doubles that hold their bits exactly.
    int j = (int)(hi >> 61);
    const nxk_u64 fh = (hi << 3) | (lo >> 61);
    const nxk_u64 fl = lo & 0x1FFFFFFFFFFFFFFFull;
    double d1 = (double)(fh >> 11) * 0x1p-53;
    const double d2 = (double)(fh & 0x7FFull) * 0x1p-64;
    const double d3 = (double)(fl >> 8) * 0x1p-117;
    const double d4 = (double)(fl & 0xFFull) * 0x1p-125;
    if (j & 1) {
        // Count from the octant above: f - 1 in [-1, 0) (d1 - 1 is exact).
        j += 1;
        d1 -= 1.0;
    }
    NxkDd f = nxk_two_sum(d1, d2);
    f = nxk_two_sum(f.hi, f.lo + (d3 + d4));
    // r = f·π/4 as a double-double.
    const double pio4_hi = 0x1.921fb54442d18p-1, pio4_lo = 0x1.1a62633145c07p-55;
    const NxkDd p = nxk_two_prod(f.hi, pio4_hi);
    *r = nxk_two_sum(p.hi, p.lo + (f.hi * pio4_lo + f.lo * pio4_hi));
    return (j >> 1) & 3;
}

// sin r and cos r as double-doubles, |r| <= π/4.
__device__ __forceinline__ void nxk_trig_sincos(NxkDd r, NxkDd* s, NxkDd* c) {
    const double rh = r.hi, rl = r.lo;
    const double z = rh * rh;
    // (-1)^k / (2k+1)!, k = 1..10, and (-1)^k / (2k)!, k = 2..11, each rounded.
    const double p = -0x1.5555555555555p-3 + z * (0x1.1111111111111p-7 + z * (-0x1.a01a01a01a01ap-13 +
        z * (0x1.71de3a556c734p-19 + z * (-0x1.ae64567f544e4p-26 + z * (0x1.6124613a86d09p-33 +
        z * (-0x1.ae7f3e733b81fp-41 + z * (0x1.952c77030ad4ap-49 + z * (-0x1.2f49b46814157p-57 +
        z * 0x1.71b8ef6dcf572p-66))))))));
    *s = nxk_two_sum(rh, rh * z * p + rl * (1.0 - 0.5 * z));
    const double q = 0x1.5555555555555p-5 + z * (-0x1.6c16c16c16c17p-10 + z * (0x1.a01a01a01a01ap-16 +
        z * (-0x1.27e4fb7789f5cp-22 + z * (0x1.1eed8eff8d898p-29 + z * (-0x1.93974a8c07c9dp-37 +
        z * (0x1.ae7f3e733b81fp-45 + z * (-0x1.6827863b97d97p-53 + z * (0x1.e542ba4020225p-62 +
        z * -0x1.0ce396db7f853p-70))))))));
    const NxkDd h = nxk_two_prod(0.5 * rh, rh);
    const NxkDd w = nxk_two_sum(1.0, -h.hi);
    *c = nxk_two_sum(w.hi, (w.lo - h.lo) - rl * rh + z * z * q);
}

// (a.hi + a.lo) / (b.hi + b.lo), rounded once but for a 2^-100 relative error.
__device__ __forceinline__ double nxk_dd_divide(NxkDd a, NxkDd b) {
    const double q = a.hi / b.hi;
    const NxkDd p = nxk_two_prod(q, b.hi);
    return q + (((a.hi - p.hi) - p.lo) + a.lo - q * b.lo) / b.hi;
}

// Sin (0), Cos (1) or Tan (2) of a finite x with |x| >= 2^-8.
static __device__ __noinline__ double nxk_trig_huge(int kind, double x) {
    NxkDd r, s, c;
    const int n = nxk_trig_reduce(fabs(x), &r);
    nxk_trig_sincos(r, &s, &c);
    if (kind == 1) return n == 0 ? c.hi : n == 1 ? -s.hi : n == 2 ? -c.hi : s.hi;
    const double v = kind == 0 ? (n == 0 ? s.hi : n == 1 ? c.hi : n == 2 ? -s.hi : -c.hi)
                               : (n % 2 == 0 ? nxk_dd_divide(s, c) : -nxk_dd_divide(c, s));
    return x < 0 ? -v : v;
}

__device__ __forceinline__ bool nxk_trig_is_huge(double x) {
    return fabs(x) >= NXK_TRIG_HUGE && fabs(x) <= 0x1.fffffffffffffp+1023;
}

__device__ __forceinline__ double nxk_sin(double x) { return nxk_trig_is_huge(x) ? nxk_trig_huge(0, x) : sin(x); }
__device__ __forceinline__ double nxk_cos(double x) { return nxk_trig_is_huge(x) ? nxk_trig_huge(1, x) : cos(x); }
__device__ __forceinline__ double nxk_tan(double x) { return nxk_trig_is_huge(x) ? nxk_trig_huge(2, x) : tan(x); }

#endif  // NXK_TRIG_CUH

// nxk_complex.cuh: complex64 and complex128 elements as the generated kernels
// hold, compute, load and store them, by the rules of the reference evaluator
// (nxkernel_core.reference, "Complex"):
//
// * The storage value is NxkCpx<P>, the real part then the imaginary part,
//   each of the part dtype P (float for complex64, double for complex128):
//   the element's bytes as memory holds them.
// * Neg flips both parts' sign bits; Add and Sub are part by part, each part
//   by the float NaN rule (the first NaN operand's bits, else a NaN made
//   from numbers is canonical).
// * Mul is the textbook (ar*br - ai*bi) + i(ar*bi + ai*br), each product and
//   sum rounded to P, never fused (NVRTC --fmad=false, g++
//   -ffp-contract=off): the host's and NumPy's formula, bit for bit.
// * Fdiv and Recip are Smith's algorithm with NumPy's branches (its branch
//   for a zero divisor included) in double, each part of the numerator
//   divided by the scaled denominator, never multiplied by its reciprocal,
//   whose overflow would make (0 + 2^-50 i) / (0 - 2^-1074 i) a spurious
//   (-inf, NaN) in place of (-inf, +0); each part rounded once into P
//   (complex64 thus divides in double, as the reference does).
// * A NaN part of a Mul, Fdiv or Recip result is P's canonical quiet NaN.
// * Maximum, Minimum and the comparisons order by the real part, then the
//   imaginary part (-0 below +0 for Maximum and Minimum, IEEE for the
//   comparisons); a number with a NaN part is a NaN: Maximum and Minimum
//   return the first NaN operand, Less and LessEqual are false, Equal is
//   both parts' IEEE equality.
//
// The reductions' accumulator NxkCAcc<P> is a complex number or the empty
// product (has == 0), which a product never multiplies by: a complex Prod
// multiplies from its first term, never by 1.
#ifndef NXK_COMPLEX_CUH
#define NXK_COMPLEX_CUH

#include "nxk_scalar.cuh"

template <class P>
struct NxkCpx {
    P re;
    P im;
};
typedef NxkCpx<float> NxkC64;
typedef NxkCpx<double> NxkC128;

// ---------------------------------------------------------------------------
// Parts: the float rules by overloading on float and double
// ---------------------------------------------------------------------------

NXK_DEV float nxk_pnan2(float r, float x, float y) { return nxk_nan2_f32(r, x, y); }
NXK_DEV double nxk_pnan2(double r, double x, double y) { return nxk_nan2_f64(r, x, y); }
NXK_DEV float nxk_pcanon(float r) { return nxk_canon_f32(r); }
NXK_DEV double nxk_pcanon(double r) { return nxk_canon_f64(r); }
NXK_DEV float nxk_pneg(float x) { return nxk_f32_of_bits(nxk_bits_f32(x) ^ 0x80000000u); }
NXK_DEV double nxk_pneg(double x) { return nxk_f64_of_bits(nxk_bits_f64(x) ^ 0x8000000000000000ull); }
// Keys in the total order of the part (-0 below +0); NaNs are the callers'.
NXK_DEV nxk_u64 nxk_pkey(float x) { return nxk_key_f32(x); }
NXK_DEV nxk_u64 nxk_pkey(double x) { return nxk_key_f64(x); }

template <class P>
NXK_DEV NxkCpx<P> nxk_cpx(P re, P im) {
    NxkCpx<P> z;
    z.re = re;
    z.im = im;
    return z;
}

template <class P>
NXK_DEV bool nxk_cisnan(NxkCpx<P> x) { return x.re != x.re || x.im != x.im; }

// ---------------------------------------------------------------------------
// Loads, stores and bits
// ---------------------------------------------------------------------------

NXK_DEV NxkC64 nxk_ld_c64(const char* b, nxk_i64 p) { return nxk_ld<NxkC64>(b, p); }
NXK_DEV void nxk_st_c64(char* b, nxk_i64 p, NxkC64 v) { nxk_st<NxkC64>(b, p, v); }
NXK_DEV NxkC128 nxk_ld_c128(const char* b, nxk_i64 p) { return nxk_ld<NxkC128>(b, p); }
NXK_DEV void nxk_st_c128(char* b, nxk_i64 p, NxkC128 v) { nxk_st<NxkC128>(b, p, v); }

// complex64's 64 bits, the real part's in the low half (its bytes first).
NXK_DEV nxk_u64 nxk_code_c64(NxkC64 v) { return (nxk_u64)nxk_bits_f32(v.re) | ((nxk_u64)nxk_bits_f32(v.im) << 32); }
NXK_DEV NxkC64 nxk_of_code_c64(nxk_u64 c) {
    return nxk_cpx(nxk_f32_of_bits((nxk_u32)c), nxk_f32_of_bits((nxk_u32)(c >> 32)));
}
// complex128 from its two 64-bit halves, the real part's first.
NXK_DEV NxkC128 nxk_of_codes_c128(nxk_u64 lo, nxk_u64 hi) { return nxk_cpx(nxk_f64_of_bits(lo), nxk_f64_of_bits(hi)); }

// ---------------------------------------------------------------------------
// Arithmetic
// ---------------------------------------------------------------------------

template <class P>
NXK_DEV NxkCpx<P> nxk_cneg(NxkCpx<P> x) { return nxk_cpx(nxk_pneg(x.re), nxk_pneg(x.im)); }

template <class P>
NXK_DEV NxkCpx<P> nxk_cadd(NxkCpx<P> x, NxkCpx<P> y) {
    return nxk_cpx(nxk_pnan2(x.re + y.re, x.re, y.re), nxk_pnan2(x.im + y.im, x.im, y.im));
}

template <class P>
NXK_DEV NxkCpx<P> nxk_csub(NxkCpx<P> x, NxkCpx<P> y) {
    return nxk_cpx(nxk_pnan2(x.re - y.re, x.re, y.re), nxk_pnan2(x.im - y.im, x.im, y.im));
}

// The textbook product, unfused, NaN parts canonical.
template <class P>
NXK_DEV NxkCpx<P> nxk_cmul(NxkCpx<P> x, NxkCpx<P> y) {
    const P rr = x.re * y.re;
    const P ii = x.im * y.im;
    const P ri = x.re * y.im;
    const P ir = x.im * y.re;
    return nxk_cpx(nxk_pcanon(rr - ii), nxk_pcanon(ri + ir));
}

// Smith's division of (ar + i ai) by (br + i bi) in double, NumPy's branches,
// each numerator part divided by the scaled denominator (the reference's).
NXK_DEV void nxk_smith(double ar, double ai, double br, double bi, double* qr, double* qi) {
    const double abr = fabs(br);
    const double abi = fabs(bi);
    if (abr >= abi) {
        if (abr == 0.0 && abi == 0.0) {
            *qr = ar / abr;
            *qi = ai / abr;
        } else {
            const double rat = bi / br;
            const double den = br + bi * rat;
            *qr = (ar + ai * rat) / den;
            *qi = (ai - ar * rat) / den;
        }
    } else {
        const double rat = br / bi;
        const double den = br * rat + bi;
        *qr = (ar * rat + ai) / den;
        *qi = (ai * rat - ar) / den;
    }
}

// x / y by Smith's division in double, each part rounded once into P, NaN
// parts canonical.
template <class P>
NXK_DEV NxkCpx<P> nxk_cdiv(NxkCpx<P> x, NxkCpx<P> y) {
    double qr, qi;
    nxk_smith((double)x.re, (double)x.im, (double)y.re, (double)y.im, &qr, &qi);
    return nxk_cpx(nxk_pcanon((P)qr), nxk_pcanon((P)qi));
}

template <class P>
NXK_DEV NxkCpx<P> nxk_crecip(NxkCpx<P> x) { return nxk_cdiv(nxk_cpx((P)1, (P)0), x); }

// ---------------------------------------------------------------------------
// Order and comparisons
// ---------------------------------------------------------------------------

// x >= y (or x > y where strict) by the real part's key, then the imaginary
// part's (no NaN part).
template <class P>
NXK_DEV bool nxk_ckey_ge(NxkCpx<P> x, NxkCpx<P> y, bool strict) {
    const nxk_u64 krx = nxk_pkey(x.re), kry = nxk_pkey(y.re);
    const nxk_u64 kix = nxk_pkey(x.im), kiy = nxk_pkey(y.im);
    return krx > kry || (krx == kry && (strict ? kix > kiy : kix >= kiy));
}

// Prog's Maximum and Minimum: the first NaN operand, else the greater (the
// lesser), x where the two have the same bits.
template <class P>
NXK_DEV NxkCpx<P> nxk_cmax(NxkCpx<P> x, NxkCpx<P> y) {
    if (nxk_cisnan(x)) return x;
    if (nxk_cisnan(y)) return y;
    return nxk_ckey_ge(x, y, false) ? x : y;
}
template <class P>
NXK_DEV NxkCpx<P> nxk_cmin(NxkCpx<P> x, NxkCpx<P> y) {
    if (nxk_cisnan(x)) return x;
    if (nxk_cisnan(y)) return y;
    return nxk_ckey_ge(x, y, true) ? y : x;
}

template <class P>
NXK_DEV bool nxk_ceq(NxkCpx<P> x, NxkCpx<P> y) { return x.re == y.re && x.im == y.im; }
template <class P>
NXK_DEV bool nxk_clt(NxkCpx<P> x, NxkCpx<P> y) {
    return !nxk_cisnan(x) && !nxk_cisnan(y) && (x.re < y.re || (x.re == y.re && x.im < y.im));
}
template <class P>
NXK_DEV bool nxk_cle(NxkCpx<P> x, NxkCpx<P> y) {
    return !nxk_cisnan(x) && !nxk_cisnan(y) && (x.re < y.re || (x.re == y.re && x.im <= y.im));
}

// complex64's key for Max, Min and Arg: the parts' keys, real part high, as a
// signed integer; a NaN above all (is_max) or below all, beyond every number.
NXK_DEV nxk_i64 nxk_key_c64(NxkC64 v, int is_max) {
    if (nxk_cisnan(v)) return is_max ? NXK_I64_MAX : NXK_I64_MIN;
    return (nxk_i64)(((nxk_pkey(v.re) << 32) | nxk_pkey(v.im)) ^ 0x8000000000000000ull);
}

// ---------------------------------------------------------------------------
// Reductions and scans (nxkernel_cuda/reductions.py, kernels/reductions.cu)
// ---------------------------------------------------------------------------

// A Sum's or a Prod's accumulator: (Acc)0 is the zero sum (+0, +0), (Acc)1
// the empty product, which a product leaves out (Prod multiplies from its
// first term). Sums add part by part; products are Prog's Mul.
template <class P>
struct NxkCAcc {
    P re;
    P im;
    int has;
    NxkCAcc() = default;
    __device__ NxkCAcc(int identity) : re((P)0), im((P)0), has(identity == 0) {}
};

template <class P>
NXK_DEV NxkCAcc<P> nxk_cacc(NxkCpx<P> v) {
    NxkCAcc<P> a;
    a.re = v.re;
    a.im = v.im;
    a.has = 1;
    return a;
}
template <class P>
NXK_DEV NxkCAcc<P> operator+(NxkCAcc<P> a, NxkCAcc<P> b) {
    a.re = a.re + b.re;
    a.im = a.im + b.im;
    return a;
}
template <class P>
NXK_DEV NxkCAcc<P> operator*(NxkCAcc<P> a, NxkCAcc<P> b) {
    if (!a.has) return b;
    if (!b.has) return a;
    return nxk_cacc(nxk_cmul(nxk_cpx(a.re, a.im), nxk_cpx(b.re, b.im)));
}

// The lane-order shuffle of an accumulator, part by part (the generated
// kernels shuffle their accumulators by this name, in width 16).
template <class P>
NXK_DEV NxkCAcc<P> __shfl_down_sync(unsigned mask, NxkCAcc<P> v, unsigned delta, int width) {
    NxkCAcc<P> o;
    o.re = __shfl_down_sync(mask, v.re, delta, width);
    o.im = __shfl_down_sync(mask, v.im, delta, width);
    o.has = __shfl_down_sync(mask, v.has, delta, width);
    return o;
}

// Store complex parts into a complex dtype by its code (17 complex128, 18
// complex64), each part rounded once.
template <class P>
NXK_DEV void nxk_store_cpx(int dtc, char* d, nxk_i64 p, NxkCpx<P> v) {
    if (dtc == 18) nxk_st_c64(d, p, nxk_cpx((float)v.re, (float)v.im));
    else nxk_st_c128(d, p, nxk_cpx((double)v.re, (double)v.im));
}

// A reduction's result: the empty product is 1. nxk_store_sum is the name
// kernels/reductions.cu's nxk_sum_finish stores a row's value by.
template <class P>
NXK_DEV void nxk_store_cacc(int dtc, char* d, nxk_i64 p, NxkCAcc<P> v) {
    nxk_store_cpx(dtc, d, p, v.has ? nxk_cpx(v.re, v.im) : nxk_cpx((P)1, (P)0));
}
template <class P>
NXK_DEV void nxk_store_sum(int dtc, char* d, nxk_i64 p, NxkCAcc<P> v) { nxk_store_cacc(dtc, d, p, v); }

// A scan's combination of complex states (op 0 Sum, 1 Prod, 2 Max, 3 Min),
// the earlier state first.
template <class P>
NXK_DEV NxkCpx<P> nxk_state_combine(int op, NxkCpx<P> a, NxkCpx<P> b) {
    if (op == 0) return nxk_cpx(a.re + b.re, a.im + b.im);
    if (op == 1) return nxk_cmul(a, b);
    return op == 2 ? nxk_cmax(a, b) : nxk_cmin(a, b);
}

#endif  // NXK_COMPLEX_CUH

// nan_codes.cu: the NaN codes of the float32 operations and conversions whose
// NaN the GPU fixes, for tests/cuda/test_nan_codes.py: the _rn intrinsics,
// the approximate ones, the conversion of a float64 NaN to float32, and the
// kernels' pack of two float32 into bfloat16 or float16 codes (cvt.rn.bf16x2
// / cvt.rn.f16x2.f32 on the GPU). Thread 0 of block 0 writes out[0..11].
#include "nxk_attention.cuh"

extern "C" __global__ void nan_codes(const float* f, const double* d, unsigned* out)
{
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    const float p = f[0], s = f[1];  // a quiet NaN with a payload and its sign set, a signalling NaN
    const float one = f[2], zero = f[3], inf = f[4], neg = f[5];
    out[0] = __float_as_uint(__fadd_rn(p, one));
    out[1] = __float_as_uint(__fsub_rn(one, s));
    out[2] = __float_as_uint(__fmul_rn(p, one));
    out[3] = __float_as_uint(__fdiv_rn(zero, zero));  // made from numbers
    out[4] = __float_as_uint(__fmaf_rn(inf, zero, one));
    out[5] = __float_as_uint(__fsqrt_rn(neg));
    out[6] = __float_as_uint(__frcp_rn(p));
    out[7] = __float_as_uint(rsqrtf(neg));
    out[8] = __float_as_uint(__fdividef(p, one));
    out[9] = __float_as_uint(__double2float_rn(d[0]));  // a float64 NaN with a payload
    out[10] = nxk_attn_pack<true>(p, one);
    out[11] = nxk_attn_pack<false>(one, s);
}

"""The reference evaluator of programs: what every program computes, exactly.

``evaluate(prog, operands, shape)`` computes a program at every index of
``shape``. Each node's value is its exact result rounded once to the node's
dtype (upstream §3), by these rules:

Floats. ``+ - * /``, Sqrt, Recip, Mod (fmod), Floor, Ceil, Trunc, Round
(half away from zero), Sign and the casts are exact results rounded once:
float32 and float64 compute in their own IEEE arithmetic, the narrow floats
in float32 and round once on the store (``dtype.of_float``), which is the
same as rounding once because float32 has more than twice their precision
plus two bits. Fma is exact at every float dtype (float64 by integer
arithmetic, the others by round-to-odd in float64). Neg and Abs flip and
clear the sign bit. Sign of ±0 is +0 (upstream's tests, as NumPy).

Transcendentals, Pow and Atan2 compute in float64 and round once into the
node's dtype. NumPy gives the C99 Annex F special values and a value within a
few float64 ulps; where mpmath is installed, every finite, normal float64
result, and every narrower result that those few ulps could round either
way, is recomputed with mpmath at 160 bits, so the reference is correctly
rounded (but for a tie within 2^-107). Without mpmath it is NumPy's value,
a near-reference. Check kernels against these with ``ulps`` and the stated
bounds.

NaNs. A float kind with a NaN operand returns its first NaN operand's bits
unchanged (signalling or not; Neg and Abs set its sign bit as they would a
number's), but where C99 Annex F fixes the result whatever the other operand
(upstream §3): ``pow(x, ±0)`` and ``pow(1, y)`` are 1, a NaN ``x`` or ``y``
included. A NaN made from numbers is the format's
canonical quiet NaN with a clear sign (0x7FF8000000000000, 0x7FC00000,
0x7E00 in float16, 0x7FC0 in bfloat16, 0x7E in e5m2, 0x7F in e4m3fn);
float4_e2m1fn stores it as +0. Maximum and Minimum order -0 below +0 and
return the first NaN operand. Every computed float is stored by the store
rule, so an infinite result saturates in the formats of a byte or less
(e5m2 included: no store makes its infinities), while Neg, Abs and the moves
keep an infinity's bits.

Casts (upstream §3). A float into another float rounds once by the store
rule; a NaN keeps its sign and the high bits of its payload and becomes
quiet (e4m3fn's NaN has no payload); a float keeping its format keeps its
bits (float32 into complex64's real part, complex128's real part into
float64). Integers into floats round their exact value once; into integers
they wrap modulo the width. Into bool is ``x != 0`` (either part of a
complex number); bool is 0 or 1. Float into integer truncates and saturates,
NaN to 0. A cast into the same dtype is Copy.

Complex. Neg flips both parts' signs; Add and Sub are part by part, as
floats. Mul is the textbook ``(ar*br - ai*bi) + i(ar*bi + ai*br)``, each
product and sum rounded to the part's dtype without fusing, within the
contract's 2u. Fdiv and Recip divide by Smith's algorithm with NumPy's
branches in float64, each part of the numerator divided by the scaled
denominator (where NumPy multiplies by its reciprocal, whose overflow makes a
spurious NaN: (0 + 2⁻⁵⁰i) / (0 − 2⁻¹⁰⁷⁴i) is (−inf, +0), upstream §3), and
round each part once; complex64 thus divides in float64. Barring overflow and
underflow each float64 part is within γ(7)·|x/y| of the exact quotient's
(the denominator errs relatively by γ(3), with no cancellation; each
numerator part by γ(3)·|x||y|/|denominator|; the division by u). A NaN part
of a Mul, Fdiv or Recip result is the canonical NaN. Maximum, Minimum and the
comparisons order by the real part, then the imaginary part; a number with
a NaN part is a NaN.

Integers compute exactly and wrap at their width: Idiv truncates toward
zero, ``x // 0 = 0``, the signed minimum ``// -1`` is itself; Mod takes the
dividend's sign and ``x mod 0 = x``; Recip is ``x`` for 1 and -1, else 0;
Pow with a negative exponent is 0 but for a base of 1 or -1; Floor, Ceil,
Round and Trunc are the identity. Unsigned dtypes compare unsigned. Bool
And, Or, Xor are logical, Maximum is Or and Minimum And. Threefry is
Threefry-2x32 with 20 rounds (Random123) of the counter ``x`` under the key
``y``, each a uint64 of two 32-bit words, low half first.

Moves. Copy, Bitcast and Where copy bits, NaN payloads and a bool's byte
included; every other use of a bool reads ``byte != 0``.

The package's modules: ``programs`` (``evaluate`` and ``ulps``), and behind
it ``_formats`` (float formats and bits), ``_floats``, ``_complex``,
``_integers`` and ``_conversions`` (the kinds of each domain). The exact
references of whole kernels are :mod:`nxkernel_core.exact`'s.
"""

from .programs import evaluate, ulps

__all__ = ["evaluate", "ulps"]

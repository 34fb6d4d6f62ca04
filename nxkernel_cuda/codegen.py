"""Programs as CUDA C: pure rendering functions from a ``Prog`` to device code.

Rule: :func:`eval_code` renders a program as one ``__device__`` function,
``nxk_eval``, that takes each operand's element (its *storage value*, see
``kernels/nxk_scalar.cuh``), the loop index along each axis a Coord node
reads, and one pointer per output, and computes every node as the reference
evaluator (``nxkernel_core.evaluator``) does, rounded once to the node's dtype:

* float32 and float64 compute in their own IEEE arithmetic (NVRTC compiles
  with ``--fmad=false``, IEEE division and square root, no flush to zero; the
  emulator with ``-ffp-contract=off``); float16, bfloat16 and the float8 and
  float4 formats are held as bits and compute in float32, rounding once on
  the store by the store rule (``nxk_<X>_of_f32``), as the reference does.
  Fma is exact at every float dtype (the narrow ones by round-to-odd in
  double). The transcendental kinds, Pow and Atan2 of float32 and narrower
  compute in double and round once into the node's dtype, so they are within
  one ulp (correctly rounded but where the double's own error straddles a
  rounding point); of float64 they are CUDA's (libdevice, at most 2 ulps) on
  a GPU and the C library's on the emulated device.
* The NaN rule of upstream §3 holds at every float node: the first NaN
  operand's bits, unchanged (Neg and Abs flip and clear its sign bit); a NaN
  made from numbers is the format's canonical quiet NaN, so NaN results have
  the reference's bits on both devices. Annex F's pow(x, ±0) = pow(1, y) = 1
  win over it, a NaN operand included.
* Sin, Cos and Tan of a double with 2^20 <= |x| < inf reduce x by Payne–Hanek
  (``kernels/nxk_trig.cuh``), within 1 ulp, the host library's bits there.
* Integers of 8 and 16 bits and the 4-bit ones compute in 32 bits, 32-bit
  ones in 32 and 64-bit ones in 64, and wrap on the store; Idiv and Mod by 0
  and the signed minimum by -1 follow upstream §3; Pow by squaring.
* Booleans are held as their byte: Copy, Bitcast and Where keep it, every
  other use reads ``byte != 0``.
* Casts follow upstream §3's rules with integer code (``nxk_scalar.cuh``), not
  the GPU's ``cvt``: a float into another float rounds once, a NaN keeping its
  sign and its payload's high bits, made quiet; a float into an integer
  truncates and saturates, NaN to 0; a 64-bit integer into a format narrower
  than float32 rounds once through round-to-odd.

* Complex numbers (``kernels/nxk_complex.cuh``) are a pair of their part
  dtype, real part first. Neg, Add and Sub are part by part (the NaN rule per
  part); Mul is the textbook product, unfused, each product and sum rounded
  to the part dtype; Fdiv and Recip are Smith's division with NumPy's
  branches in double, each numerator part divided by the scaled denominator
  (no reciprocal, which would make (0 + 2⁻⁵⁰i) / (0 − 2⁻¹⁰⁷⁴i) a spurious
  NaN), each part rounded once; a NaN part they make is canonical.
  Maximum, Minimum and the comparisons order by the real part, then the
  imaginary part, a number with a NaN part being a NaN. A complex number
  casts part by part into another complex dtype, as its real part into a
  float or an integer, and as "either part nonzero" into a boolean; a real
  number casts into its part dtype, the imaginary part +0. So complex results
  are the reference's bits on both devices.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, final

from nxkernel_core import dtype as D
from nxkernel_core.dtype import Dtype, Kind
from nxkernel_core.kernel import KIND_ULPS
from nxkernel_core.prog import (
    TRANSCENDENTAL,
    Binary,
    Compare,
    Const,
    Convert,
    Coord,
    In,
    Op1,
    Op2,
    Op3,
    Prog,
    Ternary,
    Unary,
)

from .build import render

__all__ = [
    "ATTN_WORDS_FIXED",
    "SCALARS",
    "TERM_CODE",
    "ULPS",
    "Scalar",
    "code_expr",
    "eval_code",
    "load_expr",
    "of_code_expr",
    "padded_load_stmt",
    "pair_loads",
    "scalar",
    "store_stmt",
]


@final
@dataclass(frozen=True, slots=True)
class Scalar:
    """How generated code holds one dtype's element.

    ``name`` names its helpers in ``nxk_scalar.cuh`` (``nxk_ld_<name>``,
    ``nxk_st_<name>``, ``nxk_code_<name>``, ...); ``ctype`` is its storage
    value's C type; ``wide`` the C type a float computes in (float32 for the
    narrow formats), or, for an integer, the signed and unsigned types it
    computes in (``signed``, ``unsigned``); ``part`` a complex dtype's part
    dtype.
    """

    dtype: Dtype
    name: str
    ctype: str
    wide: str = ""
    signed: str = ""
    unsigned: str = ""
    part: Dtype | None = None

    @property
    def narrow(self) -> bool:
        """A float held as bits, computing in float32."""
        return self.dtype.is_float and self.dtype.bits < 32


def _int(dt: Dtype, name: str, ctype: str) -> Scalar:
    s, u = ("nxk_i64", "nxk_u64") if dt.bits == 64 else ("nxk_i32", "nxk_u32")
    return Scalar(dt, name, ctype, signed=s, unsigned=u)


#: Every dtype generated code holds, by dtype.
SCALARS: Final[dict[Dtype, Scalar]] = {
    D.float64: Scalar(D.float64, "f64", "double", wide="double"),
    D.float32: Scalar(D.float32, "f32", "float", wide="float"),
    D.float16: Scalar(D.float16, "f16", "nxk_u16", wide="float"),
    D.bfloat16: Scalar(D.bfloat16, "bf16", "nxk_u16", wide="float"),
    D.float8_e4m3fn: Scalar(D.float8_e4m3fn, "e4m3", "nxk_u8", wide="float"),
    D.float8_e5m2: Scalar(D.float8_e5m2, "e5m2", "nxk_u8", wide="float"),
    D.float4_e2m1fn: Scalar(D.float4_e2m1fn, "e2m1", "nxk_u8", wide="float"),
    D.int64: _int(D.int64, "i64", "nxk_i64"),
    D.uint64: _int(D.uint64, "u64", "nxk_u64"),
    D.int32: _int(D.int32, "i32", "nxk_i32"),
    D.uint32: _int(D.uint32, "u32", "nxk_u32"),
    D.int16: _int(D.int16, "i16", "nxk_i16"),
    D.uint16: _int(D.uint16, "u16", "nxk_u16"),
    D.int8: _int(D.int8, "i8", "nxk_i8"),
    D.uint8: _int(D.uint8, "u8", "nxk_u8"),
    D.int4: _int(D.int4, "i4", "nxk_i8"),
    D.uint4: _int(D.uint4, "u4", "nxk_u8"),
    D.bool_: Scalar(D.bool_, "bool", "nxk_u8"),
    D.bit: Scalar(D.bit, "bit", "nxk_u8"),
    D.complex128: Scalar(D.complex128, "c128", "NxkC128", part=D.float64),
    D.complex64: Scalar(D.complex64, "c64", "NxkC64", part=D.float32),
}


def scalar(dt: Dtype) -> Scalar:
    """The Scalar of ``dt``."""
    return SCALARS[dt]


# --------------------------------------------------------------------------
# Elements: loads, stores, codes
# --------------------------------------------------------------------------


def load_expr(dt: Dtype, base: str, pos: str) -> str:
    """The C expression loading the element at position ``pos`` of ``base``."""
    return f"nxk_ld_{SCALARS[dt].name}({base}, {pos})"


def padded_load_stmt(dt: Dtype, var: str, base: str, rank: int, desc: str, indices: Sequence[str]) -> str:
    """The C statements declaring ``var``, the element a Padded load reads at
    loop index ``indices`` (one or two walk indices, ``kernels/nxk_pad.cuh``)
    from ``base``, an operand of rank ``rank`` whose descriptor is at
    ``desc``: the operand's element where the index falls on one, else the
    element whose bits are the fill's."""
    i0, i1 = (indices[0], indices[1]) if len(indices) == 2 else (indices[0], "0")
    at = f"{var}_at"
    fill = load_expr(dt, f"(const char*)({desc} + 1)", "0")
    return (f"nxk_i64 {at} = 0; const {SCALARS[dt].ctype} {var} = "
            f"nxk_pad_at<{rank}, {len(indices)}>({desc}, {i0}, {i1}, &{at})"
            f" ? {load_expr(dt, base, at)} : {fill};")


def store_stmt(dt: Dtype, base: str, pos: str, value: str) -> str:
    """The C statement storing storage value ``value`` at ``pos`` of ``base``."""
    return f"nxk_st_{SCALARS[dt].name}({base}, {pos}, {value});"


def code_expr(dt: Dtype, value: str) -> str:
    """The bits of storage value ``value`` as an ``nxk_u64`` (a 4-bit code, a
    bool's byte; not of complex128, whose 128 bits no code holds)."""
    return f"nxk_code_{SCALARS[dt].name}({value})"


def of_code_expr(dt: Dtype, code: str) -> str:
    """The storage value whose bits are ``code`` (an ``nxk_u64``), truncated to
    the width (a 4-bit signed code sign-extended; not of complex128)."""
    return f"nxk_of_code_{SCALARS[dt].name}({code})"


# --------------------------------------------------------------------------
# Nodes
# --------------------------------------------------------------------------

#: The bounds in ulps of the inexact kinds by float dtype (``Statement.ulps``):
#: float64 libdevice's (a GPU) or the C library's (cuda-emu), at most 2 each;
#: float32 and the narrow floats compute in double and round once, within 1.
ULPS: Final = {dt.name: {k: 2 if dt is D.float64 else 1 for k in KIND_ULPS} for dt in D.all if dt.is_float}

#: Each a function of a double; Sin, Cos and Tan reduce huge arguments
#: themselves (``kernels/nxk_trig.cuh``), where the C library's reduction errs.
_TRANSCENDENTAL_C: Final[dict[Unary, str]] = {
    Unary.EXP: "exp", Unary.EXP2: "exp2", Unary.LOG: "log", Unary.LOG2: "log2",
    Unary.LOG1P: "log1p", Unary.EXPM1: "expm1", Unary.SIN: "nxk_sin", Unary.COS: "nxk_cos",
    Unary.TAN: "nxk_tan", Unary.ASIN: "asin", Unary.ACOS: "acos", Unary.ATAN: "atan",
    Unary.SINH: "sinh", Unary.COSH: "cosh", Unary.TANH: "tanh", Unary.ERF: "erf",
}
_ROUNDING_C: Final[dict[Unary, str]] = {
    Unary.SQRT: "sqrt", Unary.FLOOR: "floor", Unary.CEIL: "ceil", Unary.TRUNC: "trunc",
    Unary.ROUND: "round",
}
_ARITH_C: Final[dict[Binary, str]] = {Binary.ADD: "+", Binary.SUB: "-", Binary.MUL: "*", Binary.FDIV: "/"}
_COMPARE_C: Final[dict[Compare, str]] = {
    Compare.EQUAL: "==", Compare.NOT_EQUAL: "!=", Compare.LESS: "<", Compare.LESS_EQUAL: "<=",
}
_BITWISE_C: Final[dict[Binary, str]] = {Binary.AND: "&", Binary.OR: "|", Binary.XOR: "^"}
_COMPLEX_C: Final[dict[Binary, str]] = {
    Binary.ADD: "nxk_cadd", Binary.SUB: "nxk_csub", Binary.MUL: "nxk_cmul", Binary.FDIV: "nxk_cdiv",
    Binary.MAXIMUM: "nxk_cmax", Binary.MINIMUM: "nxk_cmin",
}
_COMPLEX_COMPARE_C: Final[dict[Compare, str]] = {
    Compare.EQUAL: "nxk_ceq({x}, {y})", Compare.NOT_EQUAL: "!nxk_ceq({x}, {y})",
    Compare.LESS: "nxk_clt({x}, {y})", Compare.LESS_EQUAL: "nxk_cle({x}, {y})",
}


def _v(i: int) -> str:
    return f"v{i}"


def _wide(dt: Dtype, var: str) -> str:
    """A float storage value in its compute type."""
    s = SCALARS[dt]
    return f"nxk_val_{s.name}({var})" if s.narrow else var


def _f32_fn(fn: str, dt: Dtype) -> str:
    """The float32 (or float64) C function ``fn`` for a float dtype's compute type."""
    return fn if dt is D.float64 else f"{fn}f"


class _Emitter:
    """Renders the nodes of one program into statements, ``lines``."""

    def __init__(self, prog: Prog) -> None:
        self.prog = prog
        self.lines: list[str] = []

    def emit(self, line: str) -> None:
        self.lines.append("    " + line)

    def dt(self, i: int) -> Dtype:
        return self.prog.dtype(i)

    # ---- float results with the NaN rule ------------------------------------

    def float_result(self, i: int, dt: Dtype, expr: str, operands: Sequence[int],
                     in_double: bool = False, one_if: str | None = None) -> None:
        """Node ``i`` of float ``dt`` = ``expr`` (in the compute type, or in
        double where ``in_double``) rounded once, then the NaN rule over the
        operand nodes ``operands``; but 1 where the C condition ``one_if``
        holds (Annex F's pow(x, ±0) and pow(1, y), which win over the NaN rule)."""
        s = SCALARS[dt]
        args = ", ".join(_v(o) for o in operands)
        if not s.narrow:
            value = f"(float)({expr})" if in_double and dt is D.float32 else expr
            value = f"nxk_nan{len(operands)}_{s.name}({value}, {args})"
            if one_if is not None:
                value = f"({one_if}) ? {'1.0' if dt is D.float64 else '1.0f'} : {value}"
            self.emit(f"const {s.ctype} {_v(i)} = {value};")
            return
        conv = f"nxk_{s.name}_of_f64" if in_double else f"nxk_{s.name}_of_f32"
        self.emit(f"{s.ctype} {_v(i)} = {conv}({expr});")
        chain = " else ".join(f"if (nxk_isnan_{s.name}({_v(o)})) {_v(i)} = {_v(o)};" for o in operands)
        self.emit(chain)
        if one_if is not None:
            self.emit(f"if ({one_if}) {_v(i)} = {conv}(1.0{'' if in_double else 'f'});")

    # ---- kinds ----------------------------------------------------------------

    def unary(self, i: int, kind: Unary, x: int) -> None:
        dt = self.dt(i)
        s = SCALARS[dt]
        vx = _v(x)
        if dt.is_complex:
            fn = {Unary.NEG: "nxk_cneg", Unary.RECIP: "nxk_crecip"}[kind]
            self.emit(f"const {s.ctype} {_v(i)} = {fn}({vx});")
            return
        if dt.is_float:
            if kind in (Unary.NEG, Unary.ABS):
                code = code_expr(dt, vx)
                sign = f"(1ull << {dt.bits - 1})"
                bits = f"({code} ^ {sign})" if kind is Unary.NEG else f"({code} & ~{sign})"
                self.emit(f"const {s.ctype} {_v(i)} = {of_code_expr(dt, bits)};")
                return
            w = _wide(dt, vx)
            one = "1.0" if dt is D.float64 else "1.0f"
            zero = "0.0" if dt is D.float64 else "0.0f"
            if kind in TRANSCENDENTAL:
                fn = _TRANSCENDENTAL_C[kind]
                if dt is D.float64:
                    self.float_result(i, dt, f"{fn}({w})", [x])
                else:
                    self.float_result(i, dt, f"{fn}((double){w})", [x], in_double=True)
            elif kind in _ROUNDING_C:
                self.float_result(i, dt, f"{_f32_fn(_ROUNDING_C[kind], dt)}({w})", [x])
            elif kind is Unary.RECIP:
                self.float_result(i, dt, f"{one} / {w}", [x])
            elif kind is Unary.SIGN:
                # ±0 gives +0 (upstream §3); a NaN passes to the NaN rule.
                self.float_result(i, dt, f"({w} > {zero} ? {one} : ({w} < {zero} ? -{one} : "
                                         f"({w} == {zero} ? {zero} : {w})))", [x])
            else:
                raise AssertionError(kind)
            return
        if dt.is_int:
            st, ut = s.signed, s.unsigned
            signed = dt.kind is Kind.SIGNED
            if kind is Unary.NEG:
                expr = self.wrap(dt, f"({ut})0 - ({ut}){vx}")
            elif kind is Unary.RECIP:
                one = f"({vx} == 1 || {vx} == -1)" if signed else f"({vx} == 1)"
                expr = f"({one} ? {vx} : ({s.ctype})0)"
            elif kind is Unary.ABS:
                expr = self.wrap(dt, f"({vx} < 0 ? ({ut})0 - ({ut}){vx} : ({ut}){vx})") if signed else vx
            elif kind is Unary.SIGN:
                expr = (f"({s.ctype})((({st}){vx} > 0) - (({st}){vx} < 0))" if signed
                        else f"({s.ctype})({vx} != 0)")
            elif kind in (Unary.FLOOR, Unary.CEIL, Unary.ROUND, Unary.TRUNC):
                expr = vx
            else:
                raise AssertionError(kind)
            self.emit(f"const {s.ctype} {_v(i)} = {expr};")
            return
        raise AssertionError(f"{kind} of {dt.name}")

    def wrap(self, dt: Dtype, expr: str) -> str:
        """An integer expression (of the compute types) wrapped into ``dt``."""
        s = SCALARS[dt]
        if dt is D.int4:
            return f"nxk_wrap_i4((nxk_i64)({expr}))"
        if dt is D.uint4:
            return f"nxk_wrap_u4((nxk_u64)({expr}))"
        return f"({s.ctype})({s.unsigned})({expr})"

    def binary(self, i: int, kind: Binary, x: int, y: int) -> None:
        src = self.dt(x)
        s = SCALARS[src]
        vx, vy = _v(x), _v(y)
        if src.is_complex:
            fn = _COMPLEX_C[kind]
            self.emit(f"const {s.ctype} {_v(i)} = {fn}({vx}, {vy});")
            return
        if kind in (Binary.MAXIMUM, Binary.MINIMUM):
            self.extreme(i, kind, src, vx, vy)
            return
        if src.is_float:
            wx, wy = _wide(src, vx), _wide(src, vy)
            if kind in _ARITH_C:
                self.float_result(i, src, f"{wx} {_ARITH_C[kind]} {wy}", [x, y])
            elif kind is Binary.MOD:
                self.float_result(i, src, f"{_f32_fn('fmod', src)}({wx}, {wy})", [x, y])
            elif kind in (Binary.POW, Binary.ATAN2):
                fn = "pow" if kind is Binary.POW else "atan2"
                one_if = f"{wy} == 0 || {wx} == 1" if kind is Binary.POW else None
                if src is D.float64:
                    self.float_result(i, src, f"{fn}({wx}, {wy})", [x, y], one_if=one_if)
                else:
                    self.float_result(i, src, f"{fn}((double){wx}, (double){wy})", [x, y], in_double=True,
                                      one_if=one_if)
            else:
                raise AssertionError(kind)
            return
        if src.is_bool:
            op = {Binary.AND: "&", Binary.OR: "|", Binary.XOR: "^"}[kind]
            self.emit(f"const nxk_u8 {_v(i)} = (nxk_u8)(({vx} != 0) {op} ({vy} != 0));")
            return
        st, ut = s.signed, s.unsigned
        signed = src.kind is Kind.SIGNED
        if kind in (Binary.ADD, Binary.SUB, Binary.MUL):
            expr = self.wrap(src, f"({ut}){vx} {_ARITH_C[kind]} ({ut}){vy}")
        elif kind is Binary.IDIV:
            if signed:
                expr = (f"({vy} == 0 ? ({s.ctype})0 : ({vy} == -1 ? {self.wrap(src, f'({ut})0 - ({ut}){vx}')}"
                        f" : ({s.ctype})(({st}){vx} / ({st}){vy})))")
            else:
                expr = f"({vy} == 0 ? ({s.ctype})0 : ({s.ctype})(({ut}){vx} / ({ut}){vy}))"
        elif kind is Binary.MOD:
            if signed:
                expr = (f"({vy} == 0 ? {vx} : ({vy} == -1 ? ({s.ctype})0"
                        f" : ({s.ctype})(({st}){vx} % ({st}){vy})))")
            else:
                expr = f"({vy} == 0 ? {vx} : ({s.ctype})(({ut}){vx} % ({ut}){vy}))"
        elif kind is Binary.POW:
            fn = "nxk_ipow_i64((nxk_i64)" if signed else "nxk_ipow_u64((nxk_u64)"
            cast = "(nxk_i64)" if signed else "(nxk_u64)"
            expr = self.wrap(src, f"{fn}{vx}, {cast}{vy})")
        elif kind in _BITWISE_C:
            expr = f"({s.ctype})({vx} {_BITWISE_C[kind]} {vy})"
        elif kind is Binary.THREEFRY:
            expr = f"nxk_threefry({vx}, {vy})"
        else:
            raise AssertionError(kind)
        self.emit(f"const {s.ctype} {_v(i)} = {expr};")

    def extreme(self, i: int, kind: Binary, dt: Dtype, vx: str, vy: str) -> None:
        """Maximum or Minimum: -0 below +0, the first NaN operand, any/all on booleans."""
        s = SCALARS[dt]
        if dt.is_bool:
            op = "|" if kind is Binary.MAXIMUM else "&"
            self.emit(f"const nxk_u8 {_v(i)} = (nxk_u8)(({vx} != 0) {op} ({vy} != 0));")
            return
        if dt.is_int:
            op = ">" if kind is Binary.MAXIMUM else "<"
            self.emit(f"const {s.ctype} {_v(i)} = {vx} {op} {vy} ? {vx} : {vy};")
            return
        wx, wy = _wide(dt, vx), _wide(dt, vy)
        if kind is Binary.MAXIMUM:
            take_x = f"({wx} > {wy} || ({wx} == {wy} && nxk_neg_{s.name}({vy})))"
        else:
            take_x = f"({wx} < {wy} || ({wx} == {wy} && nxk_neg_{s.name}({vx})))"
        self.emit(f"const {s.ctype} {_v(i)} = nxk_isnan_{s.name}({vx}) ? {vx} : (nxk_isnan_{s.name}({vy})"
                  f" ? {vy} : ({take_x} ? {vx} : {vy}));")

    def compare(self, i: int, kind: Compare, x: int, y: int) -> None:
        src = self.dt(x)
        vx, vy = _v(x), _v(y)
        if src.is_complex:
            self.emit(f"const nxk_u8 {_v(i)} = (nxk_u8)({_COMPLEX_COMPARE_C[kind].format(x=vx, y=vy)});")
            return
        if src.is_float:
            a, b = _wide(src, vx), _wide(src, vy)
        elif src.is_bool:
            a, b = f"({vx} != 0)", f"({vy} != 0)"
        else:
            a, b = vx, vy
        self.emit(f"const nxk_u8 {_v(i)} = (nxk_u8)({a} {_COMPARE_C[kind]} {b});")

    def fma(self, i: int, a: int, b: int, c: int) -> None:
        dt = self.dt(i)
        s = SCALARS[dt]
        va, vb, vc = _v(a), _v(b), _v(c)
        if dt.is_float:
            if s.narrow:
                expr = f"nxk_fma_odd({_wide(dt, va)}, {_wide(dt, vb)}, {_wide(dt, vc)})"
                self.float_result(i, dt, expr, [a, b, c], in_double=True)
            else:
                self.float_result(i, dt, f"{_f32_fn('fma', dt)}({va}, {vb}, {vc})", [a, b, c])
            return
        ut = s.unsigned
        self.emit(f"const {s.ctype} {_v(i)} = {self.wrap(dt, f'({ut}){va} * ({ut}){vb} + ({ut}){vc}')};")

    # ---- conversions ----------------------------------------------------------

    def cast(self, i: int, x: int) -> None:
        self.cast_value(self.dt(x), self.dt(i), _v(x), _v(i))

    def cast_value(self, src: Dtype, dst: Dtype, vx: str, out: str) -> None:
        """Declare ``out``, the storage value ``vx`` of ``src`` cast into ``dst``."""
        ss, sd = SCALARS[src], SCALARS[dst]
        if src is dst:
            self.emit(f"const {sd.ctype} {out} = {vx};")
            return
        if src.is_complex or dst.is_complex:
            self.complex_cast(src, dst, vx, out)
            return
        if src.is_float:
            value = vx if src is D.float64 else f"(double){_wide(src, vx)}"
            if dst.is_float:
                if dst is D.float64:
                    enc = value
                elif dst is D.float32:
                    enc = f"(float)({value})"
                else:
                    enc = f"nxk_{sd.name}_of_f64({value})"
                self.emit(f"const {sd.ctype} {out} = nxk_isnan_{ss.name}({vx})"
                          f" ? nxk_nan_{sd.name}(nxk_neg_{ss.name}({vx}), nxk_payload_{ss.name}({vx}))"
                          f" : {enc};")
            elif dst.is_int:
                lo, hi = dst.int_range
                if dst.kind is Kind.SIGNED:
                    lo_c = "NXK_I64_MIN" if dst.bits == 64 else f"(nxk_i64)({lo})"
                    expr = f"({sd.ctype})nxk_sat_signed({value}, {lo_c}, (nxk_i64){hi}ll)"
                else:
                    expr = f"({sd.ctype})nxk_sat_unsigned({value}, {hi}ull)"
                self.emit(f"const {sd.ctype} {out} = {expr};")
            else:
                self.emit(f"const nxk_u8 {out} = (nxk_u8)({_wide(src, vx)} != 0);")
            return
        if src.is_int:
            wide = "nxk_i64" if src.kind is Kind.SIGNED else "nxk_u64"
            value = f"({wide}){vx}"
            if dst.is_float:
                if dst is D.float64:
                    enc = f"(double){value}"
                elif dst is D.float32:
                    enc = f"(float){value}"
                elif src.bits == 64:
                    odd = "nxk_odd_f64_of_i64" if src.kind is Kind.SIGNED else "nxk_odd_f64_of_u64"
                    enc = f"nxk_{sd.name}_of_f64({odd}({value}))"
                else:
                    enc = f"nxk_{sd.name}_of_f64((double){value})"
                self.emit(f"const {sd.ctype} {out} = {enc};")
            elif dst.is_int:
                self.emit(f"const {sd.ctype} {out} = {self.wrap(dst, value)};")
            else:
                self.emit(f"const nxk_u8 {out} = (nxk_u8)({vx} != 0);")
            return
        # A boolean source: its truth, 0 or 1.
        truth = f"({vx} != 0)"
        if dst.is_float:
            if dst is D.float64:
                enc = f"(double){truth}"
            elif dst is D.float32:
                enc = f"(float){truth}"
            else:
                enc = f"nxk_{sd.name}_of_f32((float){truth})"
        elif dst.is_int:
            enc = f"({sd.ctype}){truth}"
        else:
            enc = f"(nxk_u8){truth}"
        self.emit(f"const {sd.ctype} {out} = {enc};")

    def complex_cast(self, src: Dtype, dst: Dtype, vx: str, out: str) -> None:
        """A cast from or into a complex dtype (not both the same): part by
        part between complex dtypes, the real part into a float or an integer,
        either part's truth into a boolean, a real number into the real part
        (the imaginary part +0)."""
        sd = SCALARS[dst]
        if src.is_complex:
            part = SCALARS[src].part
            assert part is not None
            if dst.is_bool:
                self.emit(f"const nxk_u8 {out} = (nxk_u8)({vx}.re != 0 || {vx}.im != 0);")
            elif dst.is_complex:
                dpart = sd.part
                assert dpart is not None
                self.cast_value(part, dpart, f"{vx}.re", f"{out}_re")
                self.cast_value(part, dpart, f"{vx}.im", f"{out}_im")
                self.emit(f"const {sd.ctype} {out} = nxk_cpx({out}_re, {out}_im);")
            else:
                self.cast_value(part, dst, f"{vx}.re", out)
            return
        dpart = sd.part
        assert dpart is not None
        self.cast_value(src, dpart, vx, f"{out}_re")
        zero = "0.0" if dpart is D.float64 else "0.0f"
        self.emit(f"const {sd.ctype} {out} = nxk_cpx({out}_re, {zero});")

    def bitcast(self, i: int, x: int) -> None:
        src, dst = self.dt(x), self.dt(i)
        if src is dst:
            self.emit(f"const {SCALARS[dst].ctype} {_v(i)} = {_v(x)};")
            return
        self.emit(f"const {SCALARS[dst].ctype} {_v(i)} = {of_code_expr(dst, code_expr(src, _v(x)))};")

    # ---- the program ----------------------------------------------------------

    def node(self, i: int) -> None:
        n = self.prog.nodes[i]
        dt = self.dt(i)
        ctype = SCALARS[dt].ctype
        if isinstance(n, In):
            self.emit(f"const {ctype} {_v(i)} = in{n.index};")
        elif isinstance(n, Coord):
            self.emit(f"const nxk_i64 {_v(i)} = k{n.axis};")
        elif isinstance(n, Const):
            code = int.from_bytes(n.bits, "little")
            if dt is D.complex128:
                lo, hi = code & (2**64 - 1), code >> 64
                self.emit(f"const {ctype} {_v(i)} = nxk_of_codes_c128({lo:#x}ull, {hi:#x}ull);")
                return
            self.emit(f"const {ctype} {_v(i)} = {of_code_expr(dt, f'{code:#x}ull')};")
        elif isinstance(n, Op1):
            if n.kind is Convert.COPY:
                self.emit(f"const {ctype} {_v(i)} = {_v(n.x)};")
            elif n.kind is Convert.CAST:
                self.cast(i, n.x)
            elif n.kind is Convert.BITCAST:
                self.bitcast(i, n.x)
            else:
                self.unary(i, n.kind, n.x)
        elif isinstance(n, Op2):
            if isinstance(n.kind, Compare):
                self.compare(i, n.kind, n.x, n.y)
            else:
                self.binary(i, n.kind, n.x, n.y)
        elif isinstance(n, Op3):
            if n.kind is Ternary.WHERE:
                self.emit(f"const {ctype} {_v(i)} = ({_v(n.c)} != 0) ? {_v(n.x)} : {_v(n.y)};")
            else:
                self.fma(i, n.c, n.x, n.y)
        else:
            raise AssertionError(n)


# Slots: params, the function's parameters (the operands' storage values
# in0.., the Coord indices k<axis>, the output pointers o0..); body, one
# statement per node (node i's value is v<i>, of its dtype's storage type)
# then one store per output. Invariant: node i reads only v<j>, j < i.
_EVAL: Final = string.Template("""\
// The program, node by node (nxkernel_cuda.codegen).
__device__ __forceinline__ void nxk_eval(${params})
{
${body}
}
""")


def eval_code(prog: Prog) -> str:
    """``nxk_eval``: the program as a device function of its operands' storage
    values ``in<i>``, the loop indices ``k<axis>`` its Coord nodes read
    (sorted), and output pointers ``o<k>`` (pure)."""
    em = _Emitter(prog)
    for i in range(len(prog.nodes)):
        em.node(i)
    for k, o in enumerate(prog.outs):
        em.emit(f"*o{k} = {_v(o)};")
    params = [f"const {SCALARS[dt].ctype} in{i}" for i, dt in enumerate(prog.ins)]
    params += [f"const nxk_i64 k{a}" for a in coord_axes(prog)]
    params += [f"{SCALARS[prog.dtype(o)].ctype}* __restrict__ o{k}" for k, o in enumerate(prog.outs)]
    return render(_EVAL, params=", ".join(params), body="\n".join(em.lines))


def coord_axes(prog: Prog) -> tuple[int, ...]:
    """The axes (counted from the last) that the program's Coord nodes read, sorted."""
    return tuple(sorted({n.axis for n in prog.nodes if isinstance(n, Coord)}))


#: Fixed words of an attention unit's descriptor (q, o, lse, k, v, length,
#: table: ``NXK_ATTN_WORDS_FIXED`` of ``nxk_attention.cuh``).
ATTN_WORDS_FIXED: Final = 7


def pair_loads(prog: Prog, loads: Sequence[Dtype], indent: int) -> tuple[str, str, int]:
    """What the attention kernels generate of a pair's program evaluation, at
    variables ``row`` (the query row), ``key`` and ``hj`` (the query head
    past the unit's first): the statements loading ``in<1+i>`` (load i from
    ``a<i>`` at its unit word plus row, key and head strides), ``nxk_eval``'s
    operand list after the score (loads, then Coord arguments: key for axis
    0, row for 1, the unit's words after the loads for the head, plus hj, and
    the lead axes), and the unit descriptor's word count (pure)."""
    pad = " " * indent
    lines = []
    for i, dt in enumerate(loads):
        at = f"NXK_ATTN_G_FIXED + {3 * i}"
        pos = (f"u[NXK_ATTN_WORDS_FIXED + {i}] + row * g[{at}] + key * g[{at} + 1]"
               f" + hj * g[{at} + 2]")
        lines.append(f"{pad}const {scalar(dt).ctype} in{i + 1} = {load_expr(dt, f'a{i}', pos)};")
    axes = coord_axes(prog)
    extra = [a for a in axes if a >= 2]
    coord = {0: "key", 1: "row"}
    coord.update({a: f"u[NXK_ATTN_WORDS_FIXED + {len(loads) + j}]" for j, a in enumerate(extra)})
    if 2 in coord:
        coord[2] = f"{coord[2]} + hj"
    nargs = "".join(f"in{i + 1}, " for i in range(len(loads))) + "".join(f"{coord[a]}, " for a in axes)
    return "\n".join(lines), nargs, ATTN_WORDS_FIXED + len(loads) + len(extra)


#: The operands of a row (NxkIn), a Coord index (nxk_rcoord) and term t of a
#: row (nxk_term): the part of the generated sources over terms that reduce
#: and scan (:mod:`nxkernel_cuda.reductions`) and the statistics kinds
#: (:mod:`nxkernel_cuda.statistics`) share. Slots: coords, loads, outs, args
#: (the evaluation, as in elementwise.TEMPLATE) and out, the output the terms
#: are.
TERM_CODE: Final = """\
struct NxkIn {
    const char* a[NIN];
};

// A Coord index: entry (source, div, ext, reversed), source 0 the row's
// linear index, 1 the term's.
__device__ __forceinline__ nxk_i64 nxk_rcoord(const nxk_i64* c, nxk_i64 row, nxk_i64 t) {
    const nxk_i64 v = nxk_coord(c[0] == 0 ? row : t, c[1], c[2]);
    return c[3] ? c[2] - 1 - v : v;
}

// Term t of the row whose kept positions are rowpos: output ${out} there.
template <int NW>
__device__ __forceinline__ NxkT nxk_term(const NxkIn& in, const nxk_i64* __restrict__ red,
                                         const nxk_i64* __restrict__ coords, const nxk_i64* rowpos,
                                         nxk_i64 row, nxk_i64 t) {
    nxk_i64 pos[NW];
    nxk_walk<NW>(red, t, pos);
${coords}
${loads}
${outs}
    nxk_eval(${args});
    return o${out};
}
"""

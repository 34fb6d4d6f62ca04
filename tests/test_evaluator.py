"""The reference evaluator against exact arithmetic and the concrete values of
upstream §3 and §7."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nxkernel_core import dtype as D
from nxkernel_core.evaluator import _floats, evaluate, ulps
from nxkernel_core.prog import (
    Binary,
    Compare,
    Const,
    Convert,
    In,
    Nullary,
    Op1,
    Prog,
    Ternary,
    Unary,
    accepts,
    bits,
)

Arr = npt.NDArray[Any]
# Converting a signalling NaN to float64 (to read a value) raises IEEE's invalid flag.
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered in cast:RuntimeWarning")
FLOATS = [dt for dt in D.all if dt.is_float]
INTS = [dt for dt in D.all if dt.is_int]
UINT = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
CANONICAL = {D.float64: 0x7FF8000000000000, D.float32: 0x7FC00000, D.float16: 0x7E00,
             D.bfloat16: 0x7FC0, D.float8_e5m2: 0x7E, D.float8_e4m3fn: 0x7F}


def run(p: Prog, *operands: Any) -> list[Arr]:
    """``p`` over ``operands`` (values, or arrays of each In's numpy dtype),
    broadcast together."""
    ops = [o if isinstance(o, np.ndarray) and o.dtype == dt.numpy_dtype
           else np.asarray(o, dtype=dt.numpy_dtype) for o, dt in zip(operands, p.ins, strict=True)]
    shape = np.broadcast_shapes(*(o.shape for o in ops)) if ops else ()
    return evaluate(p, ops, shape)


def one(p: Prog, *operands: Any) -> Arr:
    (r,) = run(p, *operands)
    return r


def codes(a: Arr, dt: D.Dtype) -> list[int]:
    """Each element's bits as an int (a sub-byte element's low bits)."""
    flat = np.ascontiguousarray(a).reshape(-1)
    if dt.is_complex:
        half = UINT[dt.bits // 2]
        pairs = flat.view(half).reshape(-1, 2)
        return [int(re) | int(im) << (dt.bits // 2) for re, im in pairs]
    if dt.bits < 8:
        return [int(c) & ((1 << dt.bits) - 1) for c in flat.view(np.uint8)]
    return [int(c) for c in flat.view(UINT[dt.bits])]


def of_codes(cs: Sequence[int], dt: D.Dtype) -> Arr:
    """Elements of a float dtype of 8 bits or more, or a 4-bit one, from bits."""
    if dt.bits < 8:
        raw = np.asarray(cs, dtype=np.uint8)
        if dt is D.int4:
            return np.where(raw >= 8, raw.astype(np.int8) - 16, raw).astype(np.int8).astype(
                dt.numpy_dtype)
        if dt is D.uint4:
            return raw.astype(dt.numpy_dtype)
        return raw.view(dt.numpy_dtype)
    return np.asarray(cs, dtype=UINT[dt.bits]).view(dt.numpy_dtype)


def f32_of(code: int) -> float:
    return float(np.uint32(code).view(np.float32))


# --------------------------------------------------------------------------
# Values: random bits and the specials of upstream §7
# --------------------------------------------------------------------------


def specials(dt: D.Dtype) -> list[int]:
    """Bit patterns of ±0, ±inf, NaNs (quiet and signalling, both signs, with
    payloads), ties, format limits and subnormal edges of float ``dt``."""
    values = [0.0, -0.0, 1.0, -1.0, 0.5, 2.5, -2.5, 127.5, 448.0, 464.0, 57344.0, 65504.0,
              65519.99, 65520.0, 3.0, 1.5, 6.0, 2.0**-149, 2.0**-126, 2.0**-14, 2.0**-24,
              2.0**-1074, 2.0**-1022, 1e300, -1e-300, math.pi, 1 / 3, 2.0**53 + 2]
    cs = set(codes(D.of_float(dt, values), dt))
    fmt = dt.float_format
    assert fmt is not None
    top = (1 << dt.bits) - 1
    if dt.bits >= 8 and fmt.infinities:
        sign = 1 << (dt.bits - 1)
        frac = fmt.fraction_bits
        inf = (top >> 1) ^ ((1 << frac) - 1)
        cs |= {inf, inf | sign, inf | 1, inf | 1 | sign, inf | (1 << (frac - 1)),
               inf | (1 << (frac - 1)) | 3 | sign, inf - 1, inf - 1 | sign, 1, 1 | sign}
    elif fmt.nans:
        cs |= {0x7F, 0xFF, 0x7E, 0x01}
    return sorted(cs)


def float_codes(dt: D.Dtype) -> st.SearchStrategy[int]:
    return st.one_of(st.integers(0, (1 << dt.bits) - 1), st.sampled_from(specials(dt)))


@st.composite
def float_rows(draw: st.DrawFn, dt: D.Dtype, arity: int) -> list[list[int]]:
    """``arity`` equally long lists of bit patterns; some later operands are
    near the first (a few ulps away), so sums cancel and round at ties."""
    n = draw(st.integers(1, 24))
    first = draw(st.lists(float_codes(dt), min_size=n, max_size=n))
    rows = [first]
    top = (1 << dt.bits) - 1
    for _ in range(arity - 1):
        near = [min(top, max(0, c + draw(st.integers(-3, 3))))
                ^ (draw(st.sampled_from([0, 1 << (dt.bits - 1)]))) for c in first]
        other = draw(st.lists(float_codes(dt), min_size=n, max_size=n))
        rows.append(draw(st.sampled_from([near, other])))
    return rows


def is_nan(code: int, dt: D.Dtype) -> bool:
    return bool(np.isnan(of_codes([code], dt).astype(np.float64))[0])


# --------------------------------------------------------------------------
# The exact references for + - * / sqrt fma
# --------------------------------------------------------------------------


def exact_sqrt(q: Fraction) -> Fraction:
    """A rational that rounds as sqrt(q) does: the root truncated to 2^-1200
    and, if inexact, nudged to the middle of its last unit (a sticky bit)."""
    k = 1200
    scaled = q * 4**k
    n = scaled.numerator // scaled.denominator
    r = math.isqrt(n)
    if r * r == n and scaled.denominator == 1:
        return Fraction(r, 2**k)
    return Fraction(2 * r + 1, 2 ** (k + 1))


def f64_op(kind: object, vs: Sequence[float]) -> float:
    """The operation in float64 (for infinities, NaNs and zeros, whose results
    do not depend on the precision)."""
    a = np.float64(vs[0])
    with np.errstate(all="ignore"):
        if kind is Unary.SQRT:
            return float(np.sqrt(a))
        b = np.float64(vs[1])
        if kind is Binary.ADD:
            return float(a + b)
        if kind is Binary.SUB:
            return float(a - b)
        if kind is Binary.MUL:
            return float(a * b)
        if kind is Binary.FDIV:
            return float(a / b)
        c = np.float64(vs[2])
        if math.isfinite(a) and math.isfinite(b):
            return float(c) if math.isinf(c) else float(a * b + c)
        return float(a * b + c)


def exact_op(kind: object, vs: Sequence[float]) -> Fraction | None:
    """The exact result of finite operands, or None where it is not a finite
    rational (a division by zero, a negative root)."""
    q = [Fraction(v) for v in vs]
    if kind is Unary.SQRT:
        return exact_sqrt(q[0]) if q[0] >= 0 else None
    if kind is Binary.ADD:
        return q[0] + q[1]
    if kind is Binary.SUB:
        return q[0] - q[1]
    if kind is Binary.MUL:
        return q[0] * q[1]
    if kind is Binary.FDIV:
        return q[0] / q[1] if q[1] != 0 else None
    return q[0] * q[1] + q[2]


def expected_value(kind: object, vs: Sequence[float], dt: D.Dtype) -> float:
    """The value the rules give non-NaN operands, before the store: the exact
    result rounded once (``of_fraction``); a signed zero by IEEE's rules; NaN
    where the operation makes one."""
    if all(math.isfinite(v) for v in vs):
        q = exact_op(kind, vs)
        if q is not None and q != 0:
            return D.of_fraction(dt, q)
        if q == 0 and kind is Ternary.FMA:
            # An exact zero is -0 only as the sum of two -0 terms.
            product_negative = math.copysign(1, vs[0]) * math.copysign(1, vs[1]) < 0
            both_zero = vs[0] * vs[1] == 0 and vs[2] == 0
            return -0.0 if both_zero and product_negative and math.copysign(1, vs[2]) < 0 else 0.0
    return f64_op(kind, vs)


def expected(kind: object, dt: D.Dtype, rows: Sequence[Sequence[int]]) -> list[int]:
    """The bits the rules give each column of operand bits ``rows``: the first
    NaN operand's, else the exact result rounded once, a made NaN canonical."""
    vals = [of_codes(r, dt).astype(np.float64).tolist() for r in rows]
    first_nan: dict[int, int] = {}
    out: list[float] = []
    for i in range(len(rows[0])):
        vs = [v[i] for v in vals]
        nans = [r[i] for r, v in zip(rows, vs, strict=True) if math.isnan(v)]
        if nans:
            first_nan[i] = nans[0]
        out.append(0.0 if nans else expected_value(kind, vs, dt))
    stored = codes(D.of_float(dt, out), dt)
    return [first_nan.get(i, CANONICAL.get(dt, 0) if math.isnan(v) else c)
            for i, (c, v) in enumerate(zip(stored, out, strict=True))]


EXACT_KINDS: list[object] = [Binary.ADD, Binary.SUB, Binary.MUL, Binary.FDIV, Unary.SQRT,
                             Ternary.FMA]


def kind_prog(kind: object, dt: D.Dtype) -> Prog:
    if isinstance(kind, Unary):
        return Prog.unary(kind, dt)
    if isinstance(kind, Binary | Compare):
        return Prog.binary(kind, dt)
    return Prog.fma(dt)


def arity(kind: object) -> int:
    return 1 if isinstance(kind, Unary) else 2 if isinstance(kind, Binary | Compare) else 3


@pytest.mark.parametrize("kind", EXACT_KINDS, ids=str)
@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: d.name)
def test_exact_kinds_round_once(dt: D.Dtype, kind: object) -> None:
    @settings(max_examples=15, deadline=None, database=None)
    @given(float_rows(dt, arity(kind)))
    def check(rows: list[list[int]]) -> None:
        got = codes(one(kind_prog(kind, dt), *(of_codes(r, dt) for r in rows)), dt)
        want = expected(kind, dt, rows)
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert g == w, (kind, dt.name, [hex(r[i]) for r in rows], hex(g), hex(w))

    check()


@pytest.mark.parametrize("kind", EXACT_KINDS, ids=str)
def test_every_e2m1fn_operand(kind: object) -> None:
    """Every code, pair or triple of codes of float4_e2m1fn."""
    dt = D.float4_e2m1fn
    grids = np.meshgrid(*([np.arange(16)] * arity(kind)), indexing="ij")
    rows = [g.reshape(-1).tolist() for g in grids]
    got = codes(one(kind_prog(kind, dt), *(of_codes(r, dt) for r in rows)), dt)
    assert got == expected(kind, dt, rows)


@pytest.mark.parametrize("dt", [D.float8_e4m3fn, D.float8_e5m2], ids=lambda d: d.name)
def test_every_byte_float_operand(dt: D.Dtype) -> None:
    """Sqrt of every code, and every code against a spread of second operands."""
    every = list(range(256))
    assert codes(one(Prog.unary(Unary.SQRT, dt), of_codes(every, dt)), dt) == expected(
        Unary.SQRT, dt, [every])
    rng = np.random.default_rng(dt.code)
    seconds = rng.integers(0, 256, 256).tolist()
    for kind in (Binary.ADD, Binary.SUB, Binary.MUL, Binary.FDIV):
        got = codes(one(Prog.binary(kind, dt), of_codes(every, dt), of_codes(seconds, dt)), dt)
        assert got == expected(kind, dt, [every, seconds]), kind


def rounded(kind: Unary, v: float) -> float:
    """Floor, Ceil, Trunc or Round (half away from zero) of a finite ``v``,
    exactly; a zero result keeps ``v``'s sign."""
    q = Fraction(v)
    if kind is Unary.FLOOR:
        n = math.floor(q)
    elif kind is Unary.CEIL:
        n = math.ceil(q)
    elif kind is Unary.TRUNC:
        n = math.trunc(q)
    else:
        n = math.floor(abs(q) + Fraction(1, 2)) * (1 if q >= 0 else -1)
    return math.copysign(0.0, v) if n == 0 else float(n)


@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: d.name)
def test_rounding_order_and_comparisons(dt: D.Dtype) -> None:
    @settings(max_examples=15, deadline=None, database=None)
    @given(float_rows(dt, 2))
    def check(rows: list[list[int]]) -> None:
        xs, ys = (of_codes(r, dt) for r in rows)
        vx, vy = (a.astype(np.float64).tolist() for a in (xs, ys))
        for kind in (Unary.FLOOR, Unary.CEIL, Unary.TRUNC, Unary.ROUND):
            got = codes(one(Prog.unary(kind, dt), xs), dt)
            want = codes(D.of_float(dt, [rounded(kind, v) if math.isfinite(v) else v
                                         for v in vx]), dt)
            want = [c if math.isnan(v) else w for c, v, w in zip(rows[0], vx, want, strict=True)]
            assert got == want, kind

        def key(v: float) -> tuple[float, bool]:
            return (v, not math.copysign(1.0, v) < 0)

        for kind in (Binary.MAXIMUM, Binary.MINIMUM):
            got = codes(one(Prog.binary(kind, dt), xs, ys), dt)
            for g, cx, cy, a, b in zip(got, *rows, vx, vy, strict=True):
                if math.isnan(a) or math.isnan(b):
                    assert g == (cx if math.isnan(a) else cy)
                else:
                    take_x = key(a) >= key(b) if kind is Binary.MAXIMUM else key(a) <= key(b)
                    assert g == (cx if take_x else cy), (kind, hex(cx), hex(cy))
        compares = {Compare.EQUAL: lambda a, b: a == b, Compare.NOT_EQUAL: lambda a, b: a != b,
                    Compare.LESS: lambda a, b: a < b, Compare.LESS_EQUAL: lambda a, b: a <= b}
        for kind, f in compares.items():
            got = one(Prog.binary(kind, dt), xs, ys).tolist()
            assert got == [f(a, b) for a, b in zip(vx, vy, strict=True)], kind

    check()


# --------------------------------------------------------------------------
# Casts against exact values
# --------------------------------------------------------------------------


def cast_expected(src: D.Dtype, dst: D.Dtype, cs: Sequence[int]) -> list[int | None]:
    """The bits a float cast gives each of ``cs``, None for a NaN (checked apart)."""
    vals = of_codes(cs, src).astype(np.float64).tolist()
    if src is dst:
        return list(cs)
    if dst.is_float:
        rounded = [D.of_fraction(dst, Fraction(v)) if v != 0 and math.isfinite(v) else v
                   for v in vals]
        stored = codes(D.of_float(dst, rounded), dst)
        return [None if math.isnan(v) else c for v, c in zip(vals, stored, strict=True)]
    if dst.is_bool:
        return [None if math.isnan(v) else int(v != 0) for v in vals]
    lo, hi = dst.int_range
    out: list[int | None] = []
    for v in vals:
        if math.isnan(v):
            out.append(None)
            continue
        n = min(max(math.trunc(v), lo), hi) if math.isfinite(v) else (hi if v > 0 else lo)
        out.append(n & ((1 << dst.bits) - 1))
    return out


@pytest.mark.parametrize("src", FLOATS, ids=lambda d: d.name)
def test_float_casts_round_once(src: D.Dtype) -> None:
    @settings(max_examples=12, deadline=None, database=None)
    @given(st.lists(float_codes(src), min_size=1, max_size=32))
    def check(cs: list[int]) -> None:
        x = of_codes(cs, src)
        for dst in D.all:
            if dst.is_complex:
                continue
            got = codes(one(Prog.cast(src, dst), x), dst)
            for c, g, want in zip(cs, got, cast_expected(src, dst, cs), strict=True):
                if want is None and dst.is_float:
                    if dst is D.float4_e2m1fn:
                        assert g == 0
                        continue
                    assert is_nan(g, dst), (src.name, dst.name, hex(c), hex(g))
                    src_sign, dst_sign = c >> (src.bits - 1), g >> (dst.bits - 1)
                    assert src_sign == dst_sign
                elif want is None:
                    assert g == (1 if dst.is_bool else 0)
                else:
                    assert g == want, (src.name, dst.name, hex(c), hex(g), hex(want))

    check()


def int_values(dt: D.Dtype) -> st.SearchStrategy[int]:
    lo, hi = dt.int_range
    edges = [lo, hi, 0, 1, -1, lo + 1, hi - 1, 2**24 + 1, 2**53 + 1, 2**62 + 2**38 + 1,
             -(2**62) - 2**38 - 1, 65520, 65519, 449, 57344 + 4095]
    return st.one_of(st.integers(lo, hi), st.sampled_from([e for e in edges if lo <= e <= hi]))


@pytest.mark.parametrize("src", INTS, ids=lambda d: d.name)
def test_integer_casts(src: D.Dtype) -> None:
    @settings(max_examples=20, deadline=None, database=None)
    @given(st.lists(int_values(src), min_size=1, max_size=32))
    def check(vs: list[int]) -> None:
        x = np.array(vs, dtype=np.int64 if src is not D.uint64 else np.uint64).astype(
            src.numpy_dtype)
        for dst in D.all:
            got = one(Prog.cast(src, dst), x)
            if dst.is_float:
                want = codes(D.of_float(dst, [D.of_fraction(dst, v) for v in vs]), dst)
                assert codes(got, dst) == want, dst
            elif dst.is_int:
                assert codes(got, dst) == [v & ((1 << dst.bits) - 1) for v in vs]
            elif dst.is_bool:
                assert got.tolist() == [v != 0 for v in vs]
            else:
                part = D.float32 if dst is D.complex64 else D.float64
                want_re = codes(D.of_float(part, [D.of_fraction(part, v) for v in vs]), part)
                assert codes(got.real.copy(), part) == want_re
                assert not got.imag.any()

    check()


def test_int64_to_float32_rounds_once() -> None:
    # Through float64 this would round twice: 2^62 + 2^38 + 1 -> 2^62 + 2^38 (a tie) -> 2^62.
    v = 2**62 + 2**38 + 1
    got = one(Prog.cast(D.int64, D.float32), [v, -v])
    assert got.tolist() == [2.0**62 + 2.0**39, -(2.0**62 + 2.0**39)]
    assert one(Prog.cast(D.uint64, D.bfloat16), np.array([2**64 - 1], np.uint64)) == 2.0**64
    assert one(Prog.cast(D.uint64, D.float64), np.array([2**64 - 1], np.uint64)) == 2.0**64
    assert one(Prog.cast(D.int64, D.float16), [70000, -65519, 65520]).tolist() == [
        math.inf, -65504.0, math.inf]
    assert one(Prog.cast(D.int32, D.float8_e4m3fn), [1000, 465]).tolist() == [448.0, 448.0]


# --------------------------------------------------------------------------
# Integers wrap at their width
# --------------------------------------------------------------------------


def wrap(v: int, dt: D.Dtype) -> int:
    lo, _ = dt.int_range
    return (v - lo) % (1 << dt.bits) + lo


def trunc_div(x: int, y: int) -> int:
    q = abs(x) // abs(y)
    return q if (x < 0) == (y < 0) else -q


def int_expected(kind: object, dt: D.Dtype, x: int, y: int, z: int) -> int | bool:
    if kind is Binary.ADD:
        return wrap(x + y, dt)
    if kind is Binary.SUB:
        return wrap(x - y, dt)
    if kind is Binary.MUL:
        return wrap(x * y, dt)
    if kind is Binary.IDIV:
        return 0 if y == 0 else wrap(trunc_div(x, y), dt)
    if kind is Binary.MOD:
        return x if y == 0 else wrap(x - trunc_div(x, y) * y, dt)
    if kind is Binary.POW:
        if y < 0:
            return x if x in (1, -1) and (x == 1 or y % 2) else (1 if x == -1 else 0)
        return wrap(pow(x, y, 1 << 64), dt)
    if kind is Binary.MAXIMUM:
        return max(x, y)
    if kind is Binary.MINIMUM:
        return min(x, y)
    if kind is Binary.AND:
        return wrap(x & y, dt)
    if kind is Binary.OR:
        return wrap(x | y, dt)
    if kind is Binary.XOR:
        return wrap(x ^ y, dt)
    if kind is Ternary.FMA:
        return wrap(x * y + z, dt)
    if kind is Unary.NEG:
        return wrap(-x, dt)
    if kind is Unary.ABS:
        return wrap(abs(x), dt)
    if kind is Unary.SIGN:
        return (x > 0) - (x < 0)
    if kind is Unary.RECIP:
        return x if x in (1, -1) else 0
    if kind in (Unary.FLOOR, Unary.CEIL, Unary.ROUND, Unary.TRUNC):
        return x
    if kind is Compare.EQUAL:
        return x == y
    if kind is Compare.NOT_EQUAL:
        return x != y
    if kind is Compare.LESS:
        return x < y
    assert kind is Compare.LESS_EQUAL
    return x <= y


INT_KINDS: list[object] = [
    Binary.ADD, Binary.SUB, Binary.MUL, Binary.IDIV, Binary.MOD, Binary.POW, Binary.MAXIMUM,
    Binary.MINIMUM, Binary.AND, Binary.OR, Binary.XOR, Ternary.FMA, Unary.NEG, Unary.ABS,
    Unary.SIGN, Unary.RECIP, Unary.FLOOR, Unary.ROUND, *Compare]


@pytest.mark.parametrize("dt", INTS, ids=lambda d: d.name)
def test_integers_wrap(dt: D.Dtype) -> None:
    np_wide = np.uint64 if dt is D.uint64 else np.int64

    @settings(max_examples=15, deadline=None, database=None)
    @given(st.lists(st.tuples(int_values(dt), int_values(dt), int_values(dt)),
                    min_size=1, max_size=24))
    def check(triples: list[tuple[int, int, int]]) -> None:
        cols = [np.array([t[i] for t in triples], dtype=np_wide).astype(dt.numpy_dtype)
                for i in range(3)]
        for kind in INT_KINDS:
            if kind is Binary.POW:
                # Small exponents keep the reference's loop short; negatives included.
                cols_pow = [cols[0], (cols[1].astype(np.int64) % 70 - (5 if dt.kind is
                            D.Kind.SIGNED else 0)).astype(dt.numpy_dtype)]
                got = one(Prog.binary(kind, dt), *cols_pow).astype(np_wide).tolist()
                ys = cols_pow[1].astype(np_wide).tolist()
                want = [int_expected(kind, dt, t[0], y, 0) for t, y in zip(triples, ys,
                                                                          strict=True)]
            else:
                p = kind_prog(kind, dt)
                got = one(p, *cols[: arity(kind)])
                got = got.tolist() if got.dtype == np.bool_ else got.astype(np_wide).tolist()
                want = [int_expected(kind, dt, *t) for t in triples]
            assert got == want, (kind, dt.name, triples)

    check()


# --------------------------------------------------------------------------
# The concrete values of upstream §3 and §7
# --------------------------------------------------------------------------


def test_upstream_concrete_values() -> None:
    i8 = D.int8
    assert one(Prog.binary(Binary.IDIV, i8), [-128, 7, 5], [-1, 0, -2]).tolist() == [-128, 0, -2]
    assert one(Prog.binary(Compare.LESS, D.uint8), [200], [100]).tolist() == [False]
    assert one(Prog.binary(Compare.LESS, D.float32), [-0.0], [0.0]).tolist() == [False]
    mx = one(Prog.binary(Binary.MAXIMUM, D.float32), [-0.0, 0.0], [0.0, -0.0])
    assert codes(mx, D.float32) == [0, 0]
    mn = one(Prog.binary(Binary.MINIMUM, D.float32), [-0.0, 0.0], [0.0, -0.0])
    assert codes(mn, D.float32) == [0x80000000, 0x80000000]
    assert one(Prog.binary(Binary.ADD, D.int4), [7], [1]).astype(int).tolist() == [-8]
    assert one(Prog.binary(Binary.ADD, D.bfloat16), [256.0], [1.0]).astype(float).tolist() == [
        256.0]
    r = one(Prog.unary(Unary.ROUND, D.float32), [2.5, -2.5, 0.49999997, -0.3, 0.5, -0.5, 1.5])
    assert r.tolist() == [3.0, -3.0, 0.0, -0.0, 1.0, -1.0, 2.0]
    assert np.signbit(r[3]) and not np.signbit(r[2])
    r64 = one(Prog.unary(Unary.ROUND, D.float64), [0.49999999999999994, 2.0**52 + 1, -4.5])
    assert r64.tolist() == [0.0, 2.0**52 + 1, -5.0]
    assert one(Prog.unary(Unary.EXP2, D.float32), [-149.0]).tolist() == [2.0**-149]
    assert one(Prog.unary(Unary.LOG2, D.float32), [2.0**-149]).tolist() == [-149.0]
    assert one(Prog.unary(Unary.EXP2, D.float64), [-1074.0, 1023.0]).tolist() == [
        2.0**-1074, 2.0**1023]
    assert one(Prog.unary(Unary.LOG2, D.float64), [2.0**-1074]).tolist() == [-1074.0]
    assert np.isnan(one(Prog.unary(Unary.SIGN, D.float32), [math.nan])).all()
    assert one(Prog.unary(Unary.RECIP, i8), [1, -1, 2, 0]).tolist() == [1, -1, 0, 0]
    assert one(Prog.bitcast(D.float32, D.uint32), [1.0]).tolist() == [0x3F800000]


def test_sign() -> None:
    # Sign of ±0 is +0 (upstream §3, as NumPy).
    s = one(Prog.unary(Unary.SIGN, D.float32), [-0.0, 0.0, 3.0, -2.0, math.inf, -1e-45])
    assert codes(s, D.float32) == [0, 0, 0x3F800000, 0xBF800000, 0x3F800000, 0xBF800000]
    for dt in (D.float64, D.float16, D.bfloat16, D.float8_e4m3fn, D.float8_e5m2, D.float4_e2m1fn):
        assert codes(one(Prog.unary(Unary.SIGN, dt), [-0.0, 0.0]), dt) == [0, 0]
    assert one(Prog.unary(Unary.SIGN, D.int8), [-128, 0, 5]).tolist() == [-1, 0, 1]
    assert one(Prog.unary(Unary.SIGN, D.uint8), [0, 200]).tolist() == [0, 1]


def test_floor_ceil_trunc_keep_zero_signs() -> None:
    x = [-0.5, 0.5, -1.5, 1.5, -0.0, math.inf]
    f32 = D.float32
    assert one(Prog.unary(Unary.FLOOR, f32), x).tolist() == [-1.0, 0.0, -2.0, 1.0, -0.0, math.inf]
    ceil = one(Prog.unary(Unary.CEIL, f32), x)
    assert ceil.tolist() == [-0.0, 1.0, -1.0, 2.0, -0.0, math.inf] and np.signbit(ceil[0])
    assert np.signbit(one(Prog.unary(Unary.TRUNC, f32), [-0.7])[0])
    assert one(Prog.unary(Unary.FLOOR, D.int16), [-7]).tolist() == [-7]


def test_idiv_mod_and_pow_on_integers() -> None:
    i8, u8 = D.int8, D.uint8
    assert one(Prog.binary(Binary.MOD, i8), [-7, 7, -128, 5], [2, -2, -1, 0]).tolist() == [
        -1, 1, 0, 5]
    assert one(Prog.binary(Binary.IDIV, u8), [200, 7], [3, 0]).tolist() == [66, 0]
    assert one(Prog.binary(Binary.IDIV, D.int64), [-(2**63)], [-1]).tolist() == [-(2**63)]
    assert one(Prog.binary(Binary.IDIV, D.int32), [-(2**31)], [-1]).tolist() == [-(2**31)]
    pw = one(Prog.binary(Binary.POW, i8), [2, 2, 1, -1, -1, 3, 0], [7, -1, -5, -3, -4, 5, 0])
    assert pw.tolist() == [-128, 0, 1, -1, 1, wrap(243, i8), 1]


def test_bool_kinds() -> None:
    b = D.bool_
    t, f = [True, True, False, False], [True, False, True, False]
    assert one(Prog.binary(Binary.AND, b), t, f).tolist() == [True, False, False, False]
    assert one(Prog.binary(Binary.OR, b), t, f).tolist() == [True, True, True, False]
    assert one(Prog.binary(Binary.XOR, b), t, f).tolist() == [False, True, True, False]
    assert one(Prog.binary(Binary.MAXIMUM, b), t, f).tolist() == [True, True, True, False]
    assert one(Prog.binary(Binary.MINIMUM, D.bit), t, f).tolist() == [True, False, False, False]
    assert one(Prog.binary(Compare.LESS, b), t, f).tolist() == [False, False, True, False]
    assert one(Prog.binary(Compare.LESS, b), f, t).tolist() == [False, True, False, False]
    # A bool is true where its byte is not 0; moves keep the byte.
    two = np.array([2, 1, 0], np.uint8).view(np.bool_)
    assert one(Prog.binary(Binary.AND, b), two, [True, True, True]).view(np.uint8).tolist() == [
        1, 1, 0]
    assert one(Prog.identity(b), two).view(np.uint8).tolist() == [2, 1, 0]
    assert one(Prog.bitcast(b, D.uint8), two).tolist() == [2, 1, 0]
    assert one(Prog.cast(b, D.uint8), two).tolist() == [1, 1, 0]
    assert one(Prog.cast(b, D.float32), two).tolist() == [1.0, 1.0, 0.0]
    assert one(Prog.cast(b, D.bit), two).tolist() == [True, True, False]
    assert one(Prog.binary(Compare.EQUAL, b), two, [True, True, False]).tolist() == [True] * 3


def test_unsigned_and_float_comparisons() -> None:
    u64 = np.array([2**64 - 1, 0], np.uint64)
    assert one(Prog.binary(Compare.LESS, D.uint64), u64, np.array([1, 1], np.uint64)).tolist() == [
        False, True]
    x, y = [1.0, math.nan, -0.0, 2.0], [math.nan, math.nan, 0.0, 1.0]
    f16 = D.float16
    assert one(Prog.binary(Compare.EQUAL, f16), x, y).tolist() == [False, False, True, False]
    assert one(Prog.binary(Compare.NOT_EQUAL, f16), x, y).tolist() == [True, True, False, True]
    assert one(Prog.binary(Compare.LESS_EQUAL, f16), x, y).tolist() == [False, False, True, False]
    assert one(Prog.binary(Compare.LESS, D.int4), [-8, 7], [7, -8]).tolist() == [True, False]


# --------------------------------------------------------------------------
# NaN rules and moves keep bits
# --------------------------------------------------------------------------


def test_first_nan_operand_wins() -> None:
    f32 = D.float32
    a = of_codes([0x7FC00001, 0x3F800000, 0x7F800001, 0xFFC00005], f32)
    b = of_codes([0x7FC00002, 0x7F800003, 0x7FC00009, 0x3F800000], f32)
    for kind in (Binary.ADD, Binary.MUL, Binary.MAXIMUM, Binary.MINIMUM, Binary.ATAN2, Binary.MOD):
        got = codes(one(Prog.binary(kind, f32), a, b), f32)
        assert got == [0x7FC00001, 0x7F800003, 0x7F800001, 0xFFC00005], kind
    # Pow but where Annex F fixes the result (pow(1, y) at the second element).
    got = codes(one(Prog.binary(Binary.POW, f32), a, b), f32)
    assert got == [0x7FC00001, 0x3F800000, 0x7F800001, 0xFFC00005]
    fma = one(Prog.fma(f32), [math.inf, 1.0], [0.0, 1.0], of_codes([0x7F800005, 0x7FC00006], f32))
    assert codes(fma, f32) == [0x7F800005, 0x7FC00006]


@pytest.mark.parametrize("dt", [D.float64, D.float32, D.bfloat16, D.float8_e4m3fn, D.float4_e2m1fn],
                         ids=lambda d: d.name)
def test_annex_f_fixes_pow_whatever_the_other_operand(dt: D.Dtype) -> None:
    # pow(x, ±0) = 1 and pow(1, y) = 1 for any other operand, NaN (signalling
    # too) included: Annex F wins over the NaN rule (upstream §3).
    fmt = dt.float_format
    assert fmt is not None
    pairs = [(1.0, 0.0), (-1.0, -0.0), (0.0, 0.0), (-0.0, -0.0), (2.0, 0.0), (0.5, -0.0), (1.0, 3.0),
             (1.0, -0.5)]
    if fmt.nans:
        pairs += [(math.nan, 0.0), (math.nan, -0.0), (1.0, math.nan), (-math.nan, 0.0)]
    if fmt.infinities:
        pairs += [(math.inf, 0.0), (-math.inf, -0.0), (1.0, math.inf), (1.0, -math.inf)]
    xs, ys = (D.of_float(dt, list(v)) for v in zip(*pairs, strict=True))
    got = one(Prog.binary(Binary.POW, dt), xs, ys)
    assert codes(got, dt) == codes(D.of_float(dt, [1.0] * len(pairs)), dt)
    if fmt.nans:
        # A NaN operand where Annex F fixes nothing keeps the NaN rule.
        pw = one(Prog.binary(Binary.POW, dt), D.of_float(dt, [math.nan, 2.0]),
                 D.of_float(dt, [1.0, math.nan]))
        assert np.isnan(pw.astype(np.float64)).all()


def test_annex_f_fixes_pow_of_a_signalling_nan() -> None:
    f32 = D.float32
    pw = one(Prog.binary(Binary.POW, f32), of_codes([0x7F800001, 0x3F800000], f32),
             of_codes([0x80000000, 0x7F800002], f32))
    assert codes(pw, f32) == [0x3F800000, 0x3F800000]


def test_neg_and_abs_set_a_nans_sign() -> None:
    for dt, nan in [(D.float32, 0x7F800001), (D.float64, 0x7FF0000000000001),
                    (D.bfloat16, 0x7F81), (D.float8_e4m3fn, 0x7F), (D.float8_e5m2, 0x7D)]:
        sign = 1 << (dt.bits - 1)
        x = of_codes([nan, nan | sign], dt)
        assert codes(one(Prog.unary(Unary.NEG, dt), x), dt) == [nan | sign, nan]
        assert codes(one(Prog.unary(Unary.ABS, dt), x), dt) == [nan, nan]
        assert codes(one(Prog.unary(Unary.SQRT, dt), x), dt) == [nan, nan | sign]


def test_made_nans_are_canonical() -> None:
    for dt, canon in CANONICAL.items():
        assert codes(one(Prog.unary(Unary.SQRT, dt), [-1.0]), dt) == [canon], dt
        assert codes(one(Prog.unary(Unary.SIN, dt), [math.inf]), dt) == [canon], dt
        if dt.float_format is not None and dt.float_format.infinities:
            got = one(Prog.binary(Binary.SUB, dt), [math.inf], [math.inf])
            assert codes(got, dt) == [canon], dt
    assert codes(one(Prog.binary(Binary.MUL, D.float64), [0.0], [math.inf]), D.float64) == [
        0x7FF8000000000000]
    assert codes(one(Prog.unary(Unary.SQRT, D.float4_e2m1fn), [-1.0]), D.float4_e2m1fn) == [0]
    assert codes(one(Prog.fma(D.float32), [math.inf], [0.0], [1.0]), D.float32) == [0x7FC00000]


def test_moves_keep_bits() -> None:
    snan32 = of_codes([0x7F800001, 0xFF800123, 0x3F800000], D.float32)
    assert codes(one(Prog.identity(D.float32), snan32), D.float32) == codes(snan32, D.float32)
    b = Prog.build([D.bool_, D.float32, D.float32])
    c, x, y = b.ins
    w = b.finish(b.where(c, x, y))
    got = one(w, [True, False, True], snan32, of_codes([1, 2, 3], D.float32))
    assert codes(got, D.float32) == [0x7F800001, 2, 0x3F800000]
    snan64 = of_codes([0x7FF0000000000001], D.float64)
    assert codes(one(Prog.bitcast(D.float64, D.uint64), snan64), D.uint64) == [0x7FF0000000000001]
    c64 = one(Prog.cast(D.float32, D.complex64), snan32)
    assert codes(c64, D.complex64) == codes(snan32, D.float32)
    back = one(Prog.cast(D.complex64, D.float32), c64)
    assert codes(back, D.float32) == codes(snan32, D.float32)
    assert codes(one(Prog.bitcast(D.complex64, D.uint64), c64), D.uint64) == codes(
        snan32, D.float32)
    c128 = one(Prog.bitcast(D.complex128, D.complex128), np.array([1 + 2j], np.complex128))
    assert c128.tolist() == [1 + 2j]


def test_sub_byte_bitcasts() -> None:
    x = np.array([-1, 7, -8, 0], dtype=D.int4.numpy_dtype)
    u = one(Prog.bitcast(D.int4, D.uint4), x)
    assert u.astype(int).tolist() == [15, 7, 8, 0]
    e = one(Prog.bitcast(D.uint4, D.float4_e2m1fn), u)
    assert e.astype(float).tolist() == [-6.0, 6.0, -0.0, 0.0]
    assert one(Prog.bitcast(D.float4_e2m1fn, D.int4), e).astype(int).tolist() == [-1, 7, -8, 0]


def test_nan_casts() -> None:
    f32, f64, f16 = D.float32, D.float64, D.float16
    got = one(Prog.cast(f32, f64), of_codes([0x7F800001, 0xFFC00003], f32))
    assert codes(got, f64) == [0x7FF8000020000000, 0xFFF8000060000000]
    got16 = one(Prog.cast(f64, f16), of_codes([0xFFF4000000000000], f64))
    assert codes(got16, f16) == [0xFF00 | 0x200 | 0x100]
    assert codes(one(Prog.cast(f32, D.float8_e4m3fn), [math.nan, -math.nan]),
                 D.float8_e4m3fn) == [0x7F, 0xFF]
    assert codes(one(Prog.cast(D.float8_e4m3fn, f32), of_codes([0xFF], D.float8_e4m3fn)),
                 f32) == [0xFFC00000]
    assert one(Prog.cast(f32, D.int32), [math.nan, 3e9, -3e9, -2.7]).tolist() == [
        0, 2**31 - 1, -(2**31), -2]
    assert one(Prog.cast(f32, D.bool_), [math.nan, 0.0, -0.0]).tolist() == [True, False, False]
    assert one(Prog.cast(f32, D.float4_e2m1fn), [math.nan, 100.0]).astype(float).tolist() == [
        0.0, 6.0]


def test_complex_casts() -> None:
    z = np.array([1.5 - 2j, 0j, -0.0 + 3j], np.complex64)
    assert one(Prog.cast(D.complex64, D.bool_), z).tolist() == [True, False, True]
    assert one(Prog.cast(D.complex64, D.int8), z).tolist() == [1, 0, 0]
    assert one(Prog.cast(D.complex64, D.complex128), z).tolist() == z.astype(complex).tolist()
    assert one(Prog.cast(D.int8, D.complex64), [-3]).tolist() == [-3 + 0j]
    assert one(Prog.cast(D.complex128, D.float16), np.array([65520 + 1j])).tolist() == [math.inf]


# --------------------------------------------------------------------------
# Complex arithmetic
# --------------------------------------------------------------------------


def test_complex_arithmetic() -> None:
    c64 = D.complex64
    x = np.array([1 + 2j, 3 - 1j, 0j], np.complex64)
    x[2] = complex(-0.0, -0.0)
    y = np.array([3 - 1j, 0.5 + 0.25j, 1 + 0j], np.complex64)
    assert one(Prog.binary(Binary.ADD, c64), x, y).tolist() == (x + y).tolist()
    assert one(Prog.binary(Binary.MUL, c64), x, y).tolist()[:2] == [5 + 5j, 1.75 + 0.25j]
    q = one(Prog.binary(Binary.FDIV, D.complex128), x.astype(complex), y.astype(complex))
    assert q[0] == pytest.approx(0.1 + 0.7j) and q[1] == pytest.approx(4 - 4j)
    neg = one(Prog.unary(Unary.NEG, c64), x)
    assert codes(neg, c64)[2] == 0  # -(-0 - 0i) = +0 + 0i
    r = one(Prog.unary(Unary.RECIP, c64), np.array([2j], np.complex64))
    assert r.tolist() == [-0.5j]
    # A divisor whose reciprocal overflows makes no NaN (upstream §3): mpmath
    # gives (2⁻⁵⁰i) / (−2⁻¹⁰⁷⁴i) = −2¹⁰²⁴, overflowing to −inf, imaginary part 0.
    edge = one(Prog.binary(Binary.FDIV, D.complex128), np.array([complex(0.0, 2.0**-50)]),
               np.array([complex(0.0, -(2.0**-1074))]))
    assert codes(edge.real.copy(), D.float64) == [0xFFF0000000000000]
    assert codes(edge.imag.copy(), D.float64) == [0]
    tiny = one(Prog.unary(Unary.RECIP, D.complex128), np.array([complex(0.0, -(2.0**-1074))]))
    assert tiny.real.tolist() == [0.0] and tiny.imag.tolist() == [math.inf]
    nan = one(Prog.binary(Binary.MUL, c64), np.array([complex(math.inf, 0)], np.complex64),
              np.array([0j], np.complex64))
    assert codes(nan.real.copy(), D.float32) == [0x7FC00000]


def test_complex_order() -> None:
    c = D.complex128
    x = np.array([1 + 5j, 1 + 1j, complex(-0.0, 0), complex(math.nan, 0), 2 + 0j])
    y = np.array([1 + 2j, 2 + 0j, 0j, 1 + 0j, complex(0, math.nan)])
    assert one(Prog.binary(Compare.LESS, c), x, y).tolist() == [False, True, False, False, False]
    assert one(Prog.binary(Compare.EQUAL, c), x, y).tolist() == [False, False, True, False, False]
    assert one(Prog.binary(Compare.NOT_EQUAL, c), x, y).tolist() == [True, True, False, True, True]
    mx = one(Prog.binary(Binary.MAXIMUM, c), x, y)
    assert mx[:3].tolist() == [1 + 5j, 2 + 0j, 0j] and not np.signbit(mx[2].real)
    assert np.isnan(mx[3].real) and np.isnan(mx[4].imag)
    mn = one(Prog.binary(Binary.MINIMUM, c), x, y)
    assert mn[:3].tolist() == [1 + 2j, 1 + 1j, 0j] and np.signbit(mn[2].real)


# --------------------------------------------------------------------------
# Transcendentals: special values and accuracy
# --------------------------------------------------------------------------

INF, NAN = math.inf, math.nan
ANNEX_F: list[tuple[object, list[float], float]] = [
    (Unary.EXP, [-INF], 0.0), (Unary.EXP, [INF], INF), (Unary.EXP, [-0.0], 1.0),
    (Unary.EXP2, [-INF], 0.0), (Unary.EXPM1, [-INF], -1.0), (Unary.EXPM1, [-0.0], -0.0),
    (Unary.LOG, [0.0], -INF), (Unary.LOG, [-0.0], -INF), (Unary.LOG, [-1.0], NAN),
    (Unary.LOG, [1.0], 0.0), (Unary.LOG, [INF], INF), (Unary.LOG2, [-0.0], -INF),
    (Unary.LOG1P, [-1.0], -INF), (Unary.LOG1P, [-2.0], NAN), (Unary.LOG1P, [-0.0], -0.0),
    (Unary.SQRT, [-0.0], -0.0), (Unary.SQRT, [INF], INF), (Unary.SQRT, [-INF], NAN),
    (Unary.SIN, [-0.0], -0.0), (Unary.SIN, [INF], NAN), (Unary.COS, [-INF], NAN),
    (Unary.TAN, [-0.0], -0.0), (Unary.ASIN, [2.0], NAN), (Unary.ACOS, [1.0], 0.0),
    (Unary.ATAN, [INF], math.pi / 2), (Unary.SINH, [-INF], -INF), (Unary.COSH, [-INF], INF),
    (Unary.TANH, [-INF], -1.0), (Unary.TANH, [-0.0], -0.0), (Unary.ERF, [-INF], -1.0),
    (Unary.ERF, [-0.0], -0.0), (Unary.RECIP, [-0.0], -INF),
    (Binary.ATAN2, [0.0, -0.0], math.pi), (Binary.ATAN2, [-0.0, -0.0], -math.pi),
    (Binary.ATAN2, [-0.0, 0.0], -0.0), (Binary.ATAN2, [1.0, INF], 0.0),
    (Binary.ATAN2, [INF, -INF], 3 * math.pi / 4),
    (Binary.POW, [2.0, 0.0], 1.0), (Binary.POW, [INF, -0.0], 1.0), (Binary.POW, [0.0, -1.0], INF),
    (Binary.POW, [-0.0, -1.0], -INF), (Binary.POW, [-1.0, INF], 1.0),
    (Binary.POW, [-8.0, 1 / 3], NAN), (Binary.POW, [-2.0, 3.0], -8.0),
    (Binary.POW, [0.5, -INF], INF), (Binary.MOD, [5.0, 0.0], NAN), (Binary.MOD, [INF, 2.0], NAN),
    (Binary.MOD, [-5.5, INF], -5.5), (Binary.MOD, [-0.0, 3.0], -0.0),
    (Binary.MOD, [-7.5, 2.0], -1.5),
]


@pytest.mark.parametrize("dt", [D.float64, D.float32, D.float16], ids=lambda d: d.name)
@pytest.mark.parametrize(("kind", "args", "want"), ANNEX_F)
def test_annex_f_special_values(dt: D.Dtype, kind: object, args: list[float],
                                want: float) -> None:
    p = Prog.unary(kind, dt) if isinstance(kind, Unary) else Prog.binary(kind, dt)  # type: ignore[arg-type]
    got = one(p, *([a] for a in args))
    if math.isnan(want):
        assert codes(got, dt) == [CANONICAL[dt]]
    else:
        assert codes(got, dt) == codes(D.of_float(dt, [want]), dt)


def test_transcendentals_are_correctly_rounded() -> None:
    mpmath = pytest.importorskip("mpmath")
    ctx = mpmath.MPContext()
    ctx.prec = 200
    rng = np.random.default_rng(7)
    x = rng.uniform(-3, 3, 200)
    fns: dict[Unary, Callable[[Any], Any]] = {
        Unary.EXP: ctx.exp, Unary.SIN: ctx.sin, Unary.TANH: ctx.tanh, Unary.ERF: ctx.erf,
        Unary.ATAN: ctx.atan, Unary.EXPM1: ctx.expm1, Unary.SINH: ctx.sinh}
    for kind, f in fns.items():
        for dt in (D.float32, D.float64, D.bfloat16):
            xs = x.astype(dt.numpy_dtype)
            got = one(Prog.unary(kind, dt), xs)
            want = D.of_float(dt, [float(f(ctx.mpf(float(v)))) for v in xs.astype(np.float64)])
            assert ulps(got, want, dt).max() == 0, (kind, dt)
    logs = rng.uniform(1e-3, 1e3, 200)
    got = one(Prog.unary(Unary.LOG, D.float64), logs)
    assert got.tolist() == [float(ctx.log(ctx.mpf(v))) for v in logs]
    pw = one(Prog.binary(Binary.POW, D.float64), logs, x)
    assert pw.tolist() == [float(ctx.power(ctx.mpf(a), ctx.mpf(b))) for a, b in zip(logs, x,
                                                                                   strict=True)]


def test_without_mpmath_numpy_is_a_near_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    x = np.random.default_rng(5).uniform(-20, 20, 500)
    exact = [one(Prog.unary(Unary.EXP, dt), x.astype(dt.numpy_dtype)) for dt in (D.float64,
                                                                                  D.float32)]
    monkeypatch.setattr(_floats, "_MPMATH", None)
    near = [one(Prog.unary(Unary.EXP, dt), x.astype(dt.numpy_dtype)) for dt in (D.float64,
                                                                                 D.float32)]
    assert ulps(near[0], exact[0], D.float64).max() <= 4
    assert ulps(near[1], exact[1], D.float32).max() <= 1
    assert one(Prog.unary(Unary.LOG, D.float64), [0.0, -1.0]).tolist()[0] == -math.inf


# --------------------------------------------------------------------------
# Threefry
# --------------------------------------------------------------------------


def test_threefry_known_answers() -> None:
    # Random123's threefry2x32_20 vectors; words low half first.
    ctr = np.array([0, 0xFFFFFFFFFFFFFFFF, 0x85A308D3243F6A88], np.uint64)
    key = np.array([0, 0xFFFFFFFFFFFFFFFF, 0x0370734413198A2E], np.uint64)
    got = one(Prog.binary(Binary.THREEFRY, D.uint64), ctr, key)
    assert [hex(v) for v in got.tolist()] == [
        hex(0x99BA4EFE6B200159), hex(0xBB002BE71CB996FC), hex(0x483DF7A0C4923A9C)]


# --------------------------------------------------------------------------
# Programs, coordinates, constants, shapes
# --------------------------------------------------------------------------


def test_multi_output_program_with_coords_and_consts() -> None:
    b = Prog.build([D.float32, D.int32])
    x, n = b.ins
    row, col = b.coord(1), b.coord(0)
    idx = b.cast(row * 10 + col, D.float32)
    p = b.finish(x * idx + 0.5, b.cast(n, D.float16), b.less(row, col), idx)
    x_in = np.arange(3, dtype=np.float32).reshape(3, 1)  # broadcast along the last axis
    out = evaluate(p, [x_in, np.array(7, np.int32)], (3, 4))
    assert [o.shape for o in out] == [(3, 4)] * 4
    assert [o.dtype for o in out] == [np.float32, np.float16, np.bool_, np.float32]
    want_idx = np.arange(3)[:, None] * 10 + np.arange(4)[None, :]
    assert (out[3] == want_idx).all()
    assert (out[0] == np.arange(3)[:, None] * want_idx + 0.5).all()
    assert (out[1] == 7).all()
    assert (out[2] == (np.arange(3)[:, None] < np.arange(4)[None, :])).all()
    assert all(o.flags.c_contiguous for o in out)


def test_fill_and_iota() -> None:
    fill = evaluate(Prog.fill(D.float32, bytes.fromhex("0100807f")), [], (2, 3))[0]
    assert codes(fill, D.float32) == [0x7F800001] * 6
    int4 = evaluate(Prog.fill(D.int4, bits(D.int4, -3)), [], (2,))[0]
    assert int4.astype(int).tolist() == [-3, -3]
    assert evaluate(Prog.iota(D.float16, 0), [], (2, 3))[0].tolist() == [[0, 1, 2]] * 2
    assert evaluate(Prog.iota(D.int8, 1), [], (2, 1))[0].tolist() == [[0], [1]]
    assert evaluate(Prog.fill(D.bit, b"\x01"), [], ())[0].tolist() is True


def test_empty_and_scalar_shapes() -> None:
    p = Prog.binary(Binary.ADD, D.float32)
    assert evaluate(p, [np.zeros((0, 3), np.float32)] * 2, (0, 3))[0].shape == (0, 3)
    assert evaluate(p, [np.float32(1).reshape(())] * 2, ())[0].tolist() == 2.0


def test_evaluate_rejects_misfits() -> None:
    p = Prog.binary(Binary.ADD, D.float32)
    with pytest.raises(ValueError, match=r"evaluator.evaluate: .*2 operands"):
        evaluate(p, [np.zeros(2, np.float32)], (2,))
    with pytest.raises(ValueError, match=r"evaluator.evaluate: operand 1"):
        evaluate(p, [np.zeros(2, np.float32), np.zeros(2, np.float64)], (2,))
    with pytest.raises(ValueError, match=r"Coord axis 2"):
        evaluate(Prog.iota(D.float32, 2), [], (3, 3))


@pytest.mark.parametrize("dt", D.all, ids=lambda d: d.name)
def test_every_kind_evaluates_at_every_dtype_it_takes(dt: D.Dtype) -> None:
    rng = np.random.default_rng(dt.code)
    raw = rng.integers(0, 256, size=(5, 3, dt.itemsize), dtype=np.uint8)
    if dt.bits < 8:
        raw &= (1 << dt.bits) - 1
    x = np.ascontiguousarray(raw).view(dt.numpy_dtype).reshape(5, 3) if dt.bits > 1 else (
        raw[..., 0] & 1).astype(np.bool_)
    progs = [Prog.unary(u, dt) for u in Unary if accepts(u, dt)]
    progs += [Prog.binary(k, dt) for k in [*Binary, *Compare] if accepts(k, dt)]
    progs += [Prog.cast(dt, d) for d in D.all] + [Prog.bitcast(dt, d) for d in D.all
                                                  if d.bits == dt.bits]
    progs += [Prog.where(dt), Prog.identity(dt)]
    if accepts(Ternary.FMA, dt):
        progs.append(Prog.fma(dt))
    if accepts(Nullary.IOTA, dt):
        progs.append(Prog.iota(dt, 1))
    cond = np.array([[True, False, True]] * 5)
    for p in progs:
        ops = [cond if t is D.bool_ and p.nodes[-1].kind is Ternary.WHERE and i == 0  # type: ignore[union-attr]
               else x for i, t in enumerate(p.ins)]
        (out,) = evaluate(p, ops, (5, 3))
        assert out.shape == (5, 3) and out.dtype == p.out_dtypes[0].numpy_dtype, str(p)


def test_nodes_compose() -> None:
    # A program whose const is an Op1's operand: Const, then Copy.
    p = Prog((), (Const(D.float64, bits(D.float64, 2.5)), Op1(Convert.COPY, D.float64, 0)), (1,))
    assert evaluate(p, [], (2,))[0].tolist() == [2.5, 2.5]
    q = Prog((D.int8,), (In(0), Op1(Unary.NEG, D.int8, 0), Op1(Unary.ABS, D.int8, 1)), (2, 1))
    assert [o.tolist() for o in run(q, [-128, 5])] == [[-128, 5], [-128, -5]]


# --------------------------------------------------------------------------
# ulps
# --------------------------------------------------------------------------


def test_ulps() -> None:
    f32 = D.float32
    one_ = np.float32(1)
    assert ulps([1.0], [np.nextafter(one_, np.float32(2))], f32).tolist() == [1.0]
    assert ulps([-0.0], [0.0], f32).tolist() == [0.0]
    tiny = float(np.float32(1e-45))
    assert ulps([-tiny], [tiny], f32).tolist() == [2.0]
    assert ulps([float(np.finfo(np.float32).max)], [math.inf], f32).tolist() == [1.0]
    assert ulps([math.nan, math.nan, 1.0], [math.nan, 1.0, 1.0], f32).tolist() == [0.0, math.inf,
                                                                                   0.0]
    assert ulps([1.0], [-1.0], D.float64).tolist() == [2.0 * 0x3FF0000000000000]
    assert ulps([1 + 1j], [1 + 2j], D.complex64).tolist() == [2.0**23]
    assert ulps([448.0], [416.0], D.float8_e4m3fn).tolist() == [1.0]
    with pytest.raises(ValueError, match=r"evaluator.ulps"):
        ulps([1], [1], D.int32)

"""Programs: building, validation, bytes, equality, printing and the kinds' domains."""

from __future__ import annotations

import copy
import pickle
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nxkernel_core import dtype as D
from nxkernel_core.prog import (
    MAX_OPERANDS,
    TRANSCENDENTAL,
    Binary,
    Compare,
    Const,
    Convert,
    Coord,
    In,
    Node,
    Nullary,
    Op1,
    Op2,
    Op3,
    Prog,
    Ternary,
    Unary,
    Value,
    accepts,
    bits,
    element,
)

f32, f64, i32, u8, b8 = D.float32, D.float64, D.int32, D.uint8, D.bool_

# --------------------------------------------------------------------------
# Domains, written from upstream-facts §3 "Domains" and the §5 table
# --------------------------------------------------------------------------

FLOATS = {"float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2",
          "float4_e2m1fn"}
INTS = {"int64", "uint64", "int32", "uint32", "int16", "uint16", "int8", "uint8", "int4", "uint4"}
COMPLEX = {"complex128", "complex64"}
BOOLS = {"bool", "bit"}
EVERY = FLOATS | INTS | COMPLEX | BOOLS
BITS = {"float64": 64, "float32": 32, "float16": 16, "bfloat16": 16, "float8_e4m3fn": 8,
        "float8_e5m2": 8, "float4_e2m1fn": 4, "int64": 64, "uint64": 64, "int32": 32,
        "uint32": 32, "int16": 16, "uint16": 16, "int8": 8, "uint8": 8, "int4": 4, "uint4": 4,
        "complex128": 128, "complex64": 64, "bool": 8, "bit": 1}

TRANSCENDENTAL_NAMES = ["EXP", "EXP2", "LOG", "LOG2", "LOG1P", "EXPM1", "SIN", "COS", "TAN",
                        "ASIN", "ACOS", "ATAN", "SINH", "COSH", "TANH", "ERF"]

DOMAIN: dict[object, set[str]] = {
    # Neg, Recip, Add, Sub, Mul: every dtype except bool.
    Unary.NEG: EVERY - BOOLS, Unary.RECIP: EVERY - BOOLS,
    Binary.ADD: EVERY - BOOLS, Binary.SUB: EVERY - BOOLS, Binary.MUL: EVERY - BOOLS,
    # Fdiv: floats and complex. Idiv: integers.
    Binary.FDIV: FLOATS | COMPLEX, Binary.IDIV: INTS,
    # Abs, Sign, Floor, Ceil, Round, Trunc, Mod, Pow, Fma: floats and integers.
    Unary.ABS: FLOATS | INTS, Unary.SIGN: FLOATS | INTS, Unary.FLOOR: FLOATS | INTS,
    Unary.CEIL: FLOATS | INTS, Unary.ROUND: FLOATS | INTS, Unary.TRUNC: FLOATS | INTS,
    Binary.MOD: FLOATS | INTS, Binary.POW: FLOATS | INTS, Ternary.FMA: FLOATS | INTS,
    # Sqrt, Atan2 and the transcendentals: floats.
    Unary.SQRT: FLOATS, Binary.ATAN2: FLOATS,
    **{Unary[n]: FLOATS for n in TRANSCENDENTAL_NAMES},
    # And, Or, Xor: integers and bool. Threefry: uint64.
    Binary.AND: INTS | BOOLS, Binary.OR: INTS | BOOLS, Binary.XOR: INTS | BOOLS,
    Binary.THREEFRY: {"uint64"},
    # Maximum, Minimum and the comparisons: every dtype.
    Binary.MAXIMUM: EVERY, Binary.MINIMUM: EVERY,
    Compare.EQUAL: EVERY, Compare.NOT_EQUAL: EVERY, Compare.LESS: EVERY,
    Compare.LESS_EQUAL: EVERY,
    # Where: two operands of one dtype. Fill: every dtype. Iota: floats and integers.
    Ternary.WHERE: EVERY, Nullary.FILL: EVERY, Nullary.IOTA: FLOATS | INTS,
}


def test_the_kinds_are_upstreams() -> None:
    assert [k.name for k in Unary] == [
        "NEG", "RECIP", "ABS", "SIGN", "SQRT", "EXP", "EXP2", "LOG", "LOG2", "LOG1P", "EXPM1",
        "SIN", "COS", "TAN", "ASIN", "ACOS", "ATAN", "SINH", "COSH", "TANH", "ERF", "FLOOR",
        "CEIL", "ROUND", "TRUNC"]
    assert [k.name for k in Binary] == [
        "ADD", "SUB", "MUL", "FDIV", "IDIV", "MOD", "POW", "ATAN2", "MAXIMUM", "MINIMUM", "AND",
        "OR", "XOR", "THREEFRY"]
    assert [k.name for k in Compare] == ["EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL"]
    assert [k.name for k in Convert] == ["COPY", "CAST", "BITCAST"]
    assert [k.name for k in Ternary] == ["WHERE", "FMA"]
    assert [k.name for k in Nullary] == ["FILL", "IOTA"]
    assert {k.name for k in TRANSCENDENTAL} == set(TRANSCENDENTAL_NAMES)
    assert len(D.all) == len(EVERY) == 21


@pytest.mark.parametrize("kind", list(DOMAIN), ids=lambda k: str(k))
def test_domain_matches_upstream(kind: object) -> None:
    every_kind = list(Unary) + list(Binary) + list(Compare) + list(Ternary) + list(Nullary)
    assert set(DOMAIN) == set(every_kind)
    for dt in D.all:
        assert accepts(kind, dt) == (dt.name in DOMAIN[kind]), (kind, dt)  # type: ignore[arg-type]


def test_conversion_domains() -> None:
    for src in D.all:
        for dst in D.all:
            assert accepts(Convert.CAST, src, dst)
            assert accepts(Convert.COPY, src, dst) == (src is dst)
            assert accepts(Convert.BITCAST, src, dst) == (BITS[src.name] == BITS[dst.name])
            assert BITS[src.name] == src.bits


def test_accepts_rejects_a_pair_for_a_kind_of_one_dtype() -> None:
    with pytest.raises(ValueError, match=r"prog.accepts"):
        accepts(Binary.ADD, f32, f64)


@pytest.mark.parametrize("dt", D.all, ids=lambda d: d.name)
def test_programs_agree_with_accepts(dt: D.Dtype) -> None:
    for u in Unary:
        if accepts(u, dt):
            assert Prog.unary(u, dt).out_dtypes == (dt,)
        else:
            with pytest.raises(ValueError, match=r"^Prog: "):
                Prog.unary(u, dt)
    for k in list(Binary) + list(Compare):
        if accepts(k, dt):
            assert Prog.binary(k, dt).out_dtypes == ((b8,) if isinstance(k, Compare) else (dt,))
        else:
            with pytest.raises(ValueError, match=r"^Prog: "):
                Prog.binary(k, dt)
    if accepts(Ternary.FMA, dt):
        assert Prog.fma(dt).out_dtypes == (dt,)
    else:
        with pytest.raises(ValueError, match=r"^Prog: "):
            Prog.fma(dt)
    assert Prog.where(dt).out_dtypes == (dt,)
    assert Prog.identity(dt).out_dtypes == (dt,)
    assert Prog.fill(dt, bits(dt, 1)).out_dtypes == (dt,)
    if accepts(Nullary.IOTA, dt):
        assert Prog.iota(dt, 0).out_dtypes == (dt,)
    else:
        with pytest.raises(ValueError, match=r"^Prog: "):
            Prog.iota(dt, 0)
    for dst in D.all:
        assert Prog.cast(dt, dst).out_dtypes == (dst,)
        if dst.bits == dt.bits:
            assert Prog.bitcast(dt, dst).out_dtypes == (dst,)
        else:
            with pytest.raises(ValueError, match=r"^Prog: .*width"):
                Prog.bitcast(dt, dst)


# --------------------------------------------------------------------------
# Building and reading
# --------------------------------------------------------------------------


def test_builder_reads_like_arithmetic() -> None:
    b = Prog.build([f32, f32])
    x, y = b.ins
    assert isinstance(x, Value) and x.dtype is f32
    p = b.finish(b.exp(x) * y + 1.0, b.less(x, y))
    assert p.ins == (f32, f32)
    assert p.nodes == (
        In(0), In(1), Op1(Unary.EXP, f32, 0), Op2(Binary.MUL, 2, 1),
        Const(f32, bytes.fromhex("0000803f")), Op2(Binary.ADD, 3, 4), Op2(Compare.LESS, 0, 1))
    assert p.outs == (5, 6)
    assert p.n_ins == 2 and p.n_outs == 2
    assert p.out_dtypes == (f32, b8)
    assert p.dtype(6) is b8 and p.dtype(4) is f32
    assert p.coord_axes == frozenset()


def test_builder_operators() -> None:
    b = Prog.build([i32, i32])
    x, y = b.ins
    p = b.finish(x + y, x - y, x * y, x // y, x % y, x**y, x & y, x | y, x ^ y, -x, 2 - x)
    kinds = [p.nodes[o].kind for o in p.outs]  # type: ignore[union-attr]
    assert kinds == [Binary.ADD, Binary.SUB, Binary.MUL, Binary.IDIV, Binary.MOD, Binary.POW,
                     Binary.AND, Binary.OR, Binary.XOR, Unary.NEG, Binary.SUB]
    last = p.nodes[p.outs[-1]]
    assert isinstance(last, Op2) and p.nodes[last.x] == Const(i32, (2).to_bytes(4, "little"))
    b2 = Prog.build([f32])
    (z,) = b2.ins
    q = b2.finish(z / 2, 1 / z)
    assert [q.nodes[o].kind for o in q.outs] == [Binary.FDIV, Binary.FDIV]  # type: ignore[union-attr]


def test_builder_methods_cover_every_kind() -> None:
    b = Prog.build([f32, f32, u8, D.uint64])
    x, y, n, w = b.ins
    outs = [getattr(b, u.name.lower())(x) for u in Unary]
    outs += [getattr(b, k.name.lower())(x, y) for k in Binary
             if k not in (Binary.IDIV, Binary.AND, Binary.OR, Binary.XOR, Binary.THREEFRY)]
    outs += [b.idiv(n, n), b.and_(n, n), b.or_(n, n), b.xor(n, n), b.threefry(w, w)]
    outs += [getattr(b, c.name.lower())(x, y) for c in Compare]
    c = b.less(x, y)
    outs += [b.where(c, x, y), b.fma(x, y, 1.0), b.cast(n, D.float16), b.bitcast(x, D.int32),
             b.copy(x), b.coord(2), b.const(D.int4, -3), b.const_bits(u8, b"\x07")]
    p = b.finish(*outs[:10])
    assert p.n_outs == 10
    # A program holds every node built, output or not.
    kinds = {n.kind for n in p.nodes if isinstance(n, Op1 | Op2 | Op3)}
    assert kinds == set(Unary) | set(Binary) | set(Compare) | set(Convert) | set(Ternary)
    assert [p.dtype(v.index) for v in outs] == [v.dtype for v in outs]


def test_builder_checks_as_it_goes() -> None:
    b = Prog.build([i32, f32])
    x, y = b.ins
    with pytest.raises(ValueError, match=r"^Prog: .*exp does not take int32"):
        b.exp(x)
    with pytest.raises(ValueError, match=r"^Prog: .*share a dtype"):
        b.add(x, y)
    with pytest.raises(ValueError, match=r"^Prog: .*idiv does not take float32"):
        b.idiv(y, y)
    with pytest.raises(ValueError, match=r"^Prog: .*condition"):
        b.where(x, y, y)
    with pytest.raises(ValueError, match=r"^Prog: .*another builder"):
        Prog.build([f32]).finish(y)
    with pytest.raises(ValueError, match=r"^Prog: .*at least one output"):
        b.finish()


def test_reads_and_coord_axes() -> None:
    b = Prog.build([f32, f32, i32])
    x, y, n = b.ins
    k = b.coord(1)
    j = b.coord(0)
    p = b.finish(x + y, b.cast(n, f32) * x, b.cast(k + j, f32), b.sin(y))
    assert [[p.reads(o, i) for i in range(3)] for o in range(4)] == [
        [True, True, False], [True, False, True], [False, False, False], [False, True, False]]
    assert p.coord_axes == frozenset({0, 1})
    with pytest.raises(ValueError, match=r"Prog.reads"):
        p.reads(4, 0)
    with pytest.raises(ValueError, match=r"Prog.reads"):
        p.reads(0, 3)
    with pytest.raises(ValueError, match=r"Prog.dtype"):
        p.dtype(len(p.nodes))


def test_convenience_constructors() -> None:
    assert Prog.unary(Unary.NEG, f32).nodes == (In(0), Op1(Unary.NEG, f32, 0))
    assert Prog.binary(Compare.LESS, u8).out_dtypes == (b8,)
    assert Prog.identity(f64).nodes == (In(0), Op1(Convert.COPY, f64, 0))
    assert Prog.cast(f32, D.int4).nodes == (In(0), Op1(Convert.CAST, D.int4, 0))
    assert Prog.fill(D.uint4, b"\x0f").nodes == (Const(D.uint4, b"\x0f"),)
    assert Prog.iota(f32, 3).nodes == (Coord(3), Op1(Convert.CAST, f32, 0))
    assert Prog.iota(f32, 3).coord_axes == frozenset({3})
    assert Prog.where(f64).ins == (b8, f64, f64)


# --------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------

BAD: list[tuple[tuple[D.Dtype, ...], tuple[Node, ...], tuple[int, ...], str]] = [
    ((f32,), (In(0), Op2(Binary.ADD, 0, 2)), (1,), "not an earlier node"),
    ((f32,), (In(0), Op1(Unary.NEG, f32, 1)), (1,), "not an earlier node"),
    ((f32,), (In(1),), (0,), "operand 1"),
    ((f32,), (In(0),), (), "at least one output"),
    ((f32,), (In(0),), (1,), "output %1"),
    ((), (Coord(32),), (0,), "axis 32"),
    ((), (Coord(-1),), (0,), "axis -1"),
    ((), (Const(f32, b"\x00"),), (0,), "takes 4 bytes"),
    ((), (Const(D.int4, b"\x1f"),), (0,), "bits above"),
    ((), (Const(b8, b"\x02"),), (0,), "node %0: a bool constant is byte 0 or 1, not 0x02"),
    ((i32,), (In(0), Op1(Unary.EXP, i32, 0)), (1,), "exp does not take int32"),
    ((f32,), (In(0), Op1(Unary.NEG, f64, 0)), (1,), "has dtype float32"),
    ((f32,), (In(0), Op1(Convert.COPY, f64, 0)), (1,), "has dtype float32"),
    ((f32,), (In(0), Op1(Convert.BITCAST, f64, 0)), (1,), "changes the width"),
    ((f32,), (In(0), Op1(Binary.ADD, f32, 0)), (1,), "not an Op1 kind"),  # type: ignore[arg-type]
    ((f32, f64), (In(0), In(1), Op2(Binary.ADD, 0, 1)), (2,), "share a dtype"),
    ((f32,), (In(0), Op2(Binary.IDIV, 0, 0)), (1,), "idiv does not take float32"),
    ((f32,), (In(0), Op2(Unary.NEG, 0, 0)), (1,), "not an Op2 kind"),  # type: ignore[arg-type]
    ((f32,), (In(0), Op3(Ternary.WHERE, 0, 0, 0)), (1,), "condition is float32"),
    ((b8, f32, f64), (In(0), In(1), In(2), Op3(Ternary.WHERE, 0, 1, 2)), (3,), "share a dtype"),
    ((b8,), (In(0), Op3(Ternary.FMA, 0, 0, 0)), (1,), "fma does not take bool"),
    ((f32, i32), (In(0), In(1), Op3(Ternary.FMA, 0, 1, 0)), (2,), "share a dtype"),
    ((f32,) * 16, (In(0),), (0,), "MAX_OPERANDS"),
    ((f32,) * 8, (In(0),), (0,) * 9, "MAX_OPERANDS"),
]


@pytest.mark.parametrize(("ins", "nodes", "outs", "why"), BAD)
def test_invalid_programs_raise(ins: tuple[D.Dtype, ...], nodes: tuple[Node, ...],
                                outs: tuple[int, ...], why: str) -> None:
    with pytest.raises(ValueError, match=r"^Prog: ") as e:
        Prog(ins, nodes, outs)
    assert why in str(e.value)


def test_a_bool_constant_is_0_or_1() -> None:
    """Upstream refuses a bool constant of any other byte: the builder names the
    node, and a program's bytes holding one do not decode."""
    b = Prog.build([f32])
    with pytest.raises(ValueError, match=r"^Prog: node %1: a bool constant is byte 0 or 1, "
                                         r"not 0xff$"):
        b.const_bits(b8, b"\xff")
    assert Prog.fill(b8, b"\x01").nodes == (Const(b8, b"\x01"),)
    assert b.const(b8, 2).index == 1  # a value stores as != 0: byte 1
    raw = bytearray(Prog.fill(b8, b"\x01").to_bytes())
    raw[16 + 24] = 2  # the header, then the node's six int32 words, then the constant
    with pytest.raises(ValueError, match="bool constant"):
        Prog.from_bytes(bytes(raw))


def test_max_operands_bound_is_inclusive() -> None:
    assert MAX_OPERANDS == 16
    Prog((f32,) * 15, (In(0),), (0,))
    Prog((f32,) * 8, (In(0),), (0,) * 8)


def test_prog_is_immutable_and_pickles() -> None:
    p = Prog.unary(Unary.NEG, f32)
    with pytest.raises(AttributeError):
        p.outs = (0,)  # type: ignore[misc]
    q = pickle.loads(pickle.dumps(p))
    assert q == p and q.out_dtypes == (f32,) and q.ins[0] is f32
    assert copy.deepcopy(p) == p


# --------------------------------------------------------------------------
# Bytes, equality, hashing, printing
# --------------------------------------------------------------------------


@st.composite
def programs(draw: st.DrawFn) -> Prog:
    """Random valid programs, built by choosing among the kinds each value's
    dtype takes."""
    ins = draw(st.lists(st.sampled_from(D.all), min_size=0, max_size=4))
    b = Prog.build(ins)
    values: list[Value] = list(b.ins)
    for _ in range(draw(st.integers(1, 8))):
        choice = draw(st.integers(0, 6))
        if choice == 0 or not values:
            if draw(st.booleans()):
                values.append(b.coord(draw(st.integers(0, 31))))
            else:
                dt = draw(st.sampled_from(D.all))
                values.append(b.const_bits(dt, bits(dt, draw(st.integers(-300, 300)))))
            continue
        x = draw(st.sampled_from(values))
        same = [v for v in values if v.dtype is x.dtype]
        y = draw(st.sampled_from(same))
        if choice == 1:
            ks = [u for u in Unary if accepts(u, x.dtype)]
            if ks:
                values.append(b.unary(draw(st.sampled_from(ks)), x))
        elif choice == 2:
            ks2 = [k for k in list(Binary) + list(Compare) if accepts(k, x.dtype)]
            values.append(b.binary(draw(st.sampled_from(ks2)), x, y))
        elif choice == 3:
            values.append(b.cast(x, draw(st.sampled_from(D.all))))
        elif choice == 4:
            widths = [d for d in D.all if d.bits == x.dtype.bits]
            values.append(b.bitcast(x, draw(st.sampled_from(widths))))
        elif choice == 5:
            conds = [v for v in values if v.dtype.is_bool]
            if conds:
                values.append(b.where(draw(st.sampled_from(conds)), x, y))
        elif accepts(Ternary.FMA, x.dtype):
            values.append(b.fma(x, y, draw(st.sampled_from(same))))
    if not values:
        values.append(b.coord(0))
    n_outs = draw(st.integers(1, min(4, MAX_OPERANDS - len(ins))))
    return b.finish(*draw(st.lists(st.sampled_from(values), min_size=n_outs, max_size=n_outs)))


@settings(max_examples=60, deadline=None)
@given(programs())
def test_bytes_round_trip(p: Prog) -> None:
    b = p.to_bytes()
    q = Prog.from_bytes(b)
    assert q == p and hash(q) == hash(p)
    assert q.ins == p.ins and q.nodes == p.nodes and q.outs == p.outs
    assert q.to_bytes() == b
    assert len(b) == 16 + 4 * p.n_ins + 40 * len(p.nodes) + 4 * p.n_outs
    assert struct.unpack_from("<4i", b) == (p.n_ins, len(p.nodes), p.n_outs, 0)
    assert str(q) == str(p)
    assert {p: 1}[q] == 1


@settings(max_examples=40, deadline=None)
@given(programs(), programs())
def test_equal_iff_same_bytes(p: Prog, q: Prog) -> None:
    assert (p == q) == (p.to_bytes() == q.to_bytes())
    assert (p == q) == ((p.ins, p.nodes, p.outs) == (q.ins, q.nodes, q.outs))


def test_equality_sees_constant_bits() -> None:
    zero = Prog.fill(f32, bits(f32, 0.0))
    negzero = Prog.fill(f32, bits(f32, -0.0))
    assert zero != negzero
    assert zero == Prog.fill(f32, b"\x00\x00\x00\x00")
    assert len({zero, negzero, Prog.fill(f32, bytes(4))}) == 2
    assert Prog.unary(Unary.NEG, f32) != Prog.unary(Unary.NEG, f64)
    assert Prog.unary(Unary.NEG, f32) != Prog.unary(Unary.ABS, f32)
    assert Prog.unary(Unary.NEG, f32) != "neg"


def test_record_layout() -> None:
    p = Prog.build([f32])
    (x,) = p.ins
    prog = p.finish(x + 2.0)
    b = prog.to_bytes()
    assert struct.unpack_from("<i", b, 16) == (f32.code,)
    rec = struct.unpack_from("<6i16s", b, 20 + 40 * 1)
    assert rec[:6] == (2, -1, f32.code, -1, -1, -1)  # Const: tag 2
    assert rec[6] == bits(f32, 2.0) + bytes(12)
    add = struct.unpack_from("<6i16s", b, 20 + 40 * 2)
    assert add[0] == 4 and add[2:6] == (f32.code, 0, 1, -1)
    assert struct.unpack_from("<i", b, len(b) - 4) == (2,)


def test_from_bytes_rejects_garbage() -> None:
    good = Prog.binary(Binary.ADD, f32).to_bytes()
    with pytest.raises(ValueError, match=r"^Prog: .*too few"):
        Prog.from_bytes(good[:8])
    with pytest.raises(ValueError, match=r"^Prog: .*take"):
        Prog.from_bytes(good[:-1])
    with pytest.raises(ValueError, match=r"^Prog: .*fourth word"):
        Prog.from_bytes(good[:12] + b"\x01\x00\x00\x00" + good[16:])
    bad_code = bytearray(good)
    struct.pack_into("<i", bad_code, 16, 99)
    with pytest.raises(ValueError, match=r"^Prog: .*dtype code 99"):
        Prog.from_bytes(bytes(bad_code))
    bad_tag = bytearray(good)
    struct.pack_into("<i", bad_tag, 24, 9)
    with pytest.raises(ValueError, match=r"^Prog: .*tag 9"):
        Prog.from_bytes(bytes(bad_tag))
    stray = bytearray(good)
    struct.pack_into("<i", stray, 24 + 16, 5)  # In(0)'s unused second operand slot
    with pytest.raises(ValueError, match=r"^Prog: .*canonical"):
        Prog.from_bytes(bytes(stray))
    wrong_dtype = bytearray(good)
    struct.pack_into("<i", wrong_dtype, 24 + 8, f64.code)  # In(0) recorded as float64
    with pytest.raises(ValueError, match=r"^Prog: .*canonical"):
        Prog.from_bytes(bytes(wrong_dtype))
    bad_kind = bytearray(good)
    struct.pack_into("<i", bad_kind, 24 + 80 + 4, 1000)
    with pytest.raises(ValueError, match=r"^Prog: .*kind code 1000"):
        Prog.from_bytes(bytes(bad_kind))


def test_printing() -> None:
    b = Prog.build([f32, f32])
    x, y = b.ins
    p = b.finish(x + y, b.where(b.less(x, y), x, b.const(f32, 1.0)))
    assert str(p).splitlines() == [
        "prog (f32, f32)",
        "  %0 = in 0 f32",
        "  %1 = in 1 f32",
        "  %2 = add f32 %0 %1",
        "  %3 = less bool %0 %1",
        "  %4 = const f32 0x3f800000 (1.0)",
        "  %5 = where f32 %3 %0 %4",
        "  out %2, %5",
    ]
    assert "%1 = cast bf16 %0" in str(Prog.cast(D.int4, D.bfloat16))
    assert "%0 = coord 2 i64" in str(Prog.iota(D.uint8, 2))


# --------------------------------------------------------------------------
# Elements
# --------------------------------------------------------------------------


def test_bits_follow_the_store_rule() -> None:
    assert bits(f32, 1.0) == bytes.fromhex("0000803f")
    assert bits(D.float16, 65519.0) == bytes.fromhex("ff7b")  # 65504
    assert bits(D.float16, 65520.0) == bytes.fromhex("007c")  # inf
    assert bits(D.float8_e4m3fn, 1e6) == bytes([0x7E])  # saturates to 448
    assert bits(D.int8, 300) == bytes([127]) and bits(D.int8, -3.7) == bytes([0xFD])
    assert bits(D.uint8, float("nan")) == b"\x00"
    assert bits(D.int4, -1) == b"\x0f" and bits(D.uint4, 3) == b"\x03"
    assert bits(D.bit, 2) == b"\x01" and bits(b8, float("nan")) == b"\x01"
    assert bits(D.complex64, 1 - 2j) == bits(f32, 1.0) + bits(f32, -2.0)
    assert bits(D.complex128, 3) == bits(f64, 3.0) + bits(f64, 0.0)
    # An exact int rounds once: 2^24 + 1 is a tie in f32, to even.
    assert bits(f32, 2**24 + 1) == bits(f32, 2.0**24)
    assert bits(f32, 2**62 + 2**38 + 1) == bits(f32, 2.0**62 + 2.0**39)
    assert bits(D.uint64, 2**64 - 1) == b"\xff" * 8
    with pytest.raises(ValueError, match=r"prog.bits"):
        bits(f32, 1j)


@pytest.mark.parametrize("dt", D.all, ids=lambda d: d.name)
def test_element_reads_bits_back(dt: D.Dtype) -> None:
    b = bits(dt, 1)
    e = element(dt, b)
    assert e.shape == () and e.dtype == dt.numpy_dtype
    assert bits(dt, e[()]) == b
    with pytest.raises(ValueError, match=r"prog.element"):
        element(dt, b + b"\x00")

"""The host library's ``map``: every kind at every dtype against the reference
evaluator, loads, layouts, chunking and threads, and the refusals.

Exact kinds must give the reference's bits, but for a NaN result of a kind
that is not a move (whose sign and payload the contract leaves open); moves
(Copy, Bitcast, Where, a Cast keeping a float's format) must keep every bit;
transcendentals must lie within the bounds the library states.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Callable, Sequence
from typing import Any

import mpmath
import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nxkernel_core import dtype as D
from nxkernel_core import evaluator as R
from nxkernel_core import shape as SH
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_core.kernel import Call
from nxkernel_core.layout import Broadcast, Layout, Permute, Window
from nxkernel_core.prog import (
    TRANSCENDENTAL,
    Binary,
    Compare,
    Convert,
    Coord,
    In,
    Op1,
    Op2,
    Prog,
    Ternary,
    Unary,
    accepts,
    bits,
)
from nxkernel_core.rig import Buffer, host
from nxkernel_core.spec import PLAIN, Load, Map, Pad, Padded
from nxkernel_host import program, threads
from nxkernel_host.library import library

Arr = npt.NDArray[Any]
UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
N = 600


# ---- values -----------------------------------------------------------------------


def _codes4(dt: D.Dtype, codes: Arr) -> Arr:
    if dt is D.bit:
        return (codes & 1).astype(np.bool_)
    if dt is D.int4:
        s = (codes & 15).astype(np.int8)
        return np.where(s >= 8, s - 16, s).astype(np.int8).astype(dt.numpy_dtype)
    if dt is D.uint4:
        return (codes & 15).astype(dt.numpy_dtype)
    return (codes & 15).view(dt.numpy_dtype)


def values(dt: D.Dtype, n: int, rng: np.random.Generator) -> Arr:
    """``n`` host elements of ``dt``: random bit patterns, ordinary numbers and
    the special values (±0, ±inf, NaNs with payloads, signalling NaNs, ties,
    format and integer limits, bool bytes other than 0 and 1)."""
    if dt.is_sub_byte:
        return _codes4(dt, rng.integers(0, 16, n).astype(np.uint8))
    if dt is D.bool_:
        return rng.choice(np.array([0, 1, 1, 0, 2, 255], dtype=np.uint8), n).view(np.bool_)
    if dt.is_complex:
        part = D.float32 if dt is D.complex64 else D.float64
        out = np.empty(n, dtype=dt.numpy_dtype)
        out.real = values(part, n, rng)
        out.imag = values(part, n, rng)
        return out
    u = UINT[dt.numpy_dtype.itemsize]
    raw = rng.integers(0, np.iinfo(u).max, n, dtype=u, endpoint=True).view(dt.numpy_dtype)
    pick = rng.random(n)
    if dt.is_float:
        nice = rng.standard_normal(n) * np.exp2(rng.integers(-4, 5, n))
        nice = np.where(rng.random(n) < 0.3, np.round(nice * 2) / 2, nice)
        fmt = dt.float_format
        assert fmt is not None
        special = [0.0, -0.0, np.inf, -np.inf, np.nan, 0.5, -0.5, 1.5, 2.5, -2.5, 1.0, -1.0,
                   3.0, fmt.max_finite, -fmt.max_finite, 2.0**fmt.min_exponent]
        sp = D.of_float(dt, np.array(special))
        if dt.bits >= 16:
            # Signalling NaNs with payloads, of either sign.
            quiet = 1 << (fmt.fraction_bits - 1)
            top = ((1 << (dt.bits - fmt.fraction_bits - 1)) - 1) << fmt.fraction_bits
            snan = np.array([top | 1, top | (quiet >> 1) | (1 << (dt.bits - 1)), top | quiet | 5],
                            dtype=u).view(dt.numpy_dtype)
            sp = np.concatenate([sp, snan])
        out = np.where(pick < 0.35, raw, np.where(
            pick < 0.75, D.of_float(dt, nice), sp[rng.integers(0, len(sp), n)]))
        return out.astype(dt.numpy_dtype)
    lo, hi = dt.int_range
    sp = np.array([0, 1, 2, 3, 7, lo, hi, lo + 1, hi - 1, (lo + hi) // 2], dtype=object)
    if lo < 0:
        sp = np.concatenate([sp, np.array([-1, -2, -3], dtype=object)])
    sp_arr = np.array([int(v) for v in sp]).astype(dt.numpy_dtype) if dt.bits < 64 else \
        np.array([int(v) % (1 << 64) for v in sp], dtype=np.uint64).view(dt.numpy_dtype)
    small = rng.integers(-5 if lo < 0 else 0, 6, n).astype(dt.numpy_dtype)
    out = np.where(pick < 0.35, raw, np.where(pick < 0.7, small,
                                              sp_arr[rng.integers(0, len(sp_arr), n)]))
    return out.astype(dt.numpy_dtype)


def _isnan(a: Arr, dt: D.Dtype) -> Arr:
    return np.isnan(a.astype(np.float32) if dt.bits < 32 else a)


def same(want: Arr, got: Arr, dt: D.Dtype, move: bool) -> Arr:
    """Where ``got`` has ``want``'s bits; for a kind that is not a move, two
    NaNs count as the same (their sign and payload are the library's)."""
    if dt.is_complex:
        part = D.float32 if dt is D.complex64 else D.float64
        return (same(np.ascontiguousarray(want.real), np.ascontiguousarray(got.real), part, move)
                & same(np.ascontiguousarray(want.imag), np.ascontiguousarray(got.imag), part,
                       move))
    w = np.ascontiguousarray(want)
    g = np.ascontiguousarray(got)
    eq = w.view(UINT[w.dtype.itemsize]) == g.view(UINT[w.dtype.itemsize])
    if dt.is_float and not move:
        nw, ng = _isnan(w, dt), _isnan(g, dt)
        eq = np.where(nw | ng, nw & ng, eq)
    return np.asarray(eq)


# ---- running map --------------------------------------------------------------


def run_map(prog: Prog, operands: Sequence[Arr], loads: Sequence[Load] | None = None
            ) -> list[Arr]:
    """``prog`` through the library's ``map`` on fresh arrays of ``operands``."""
    arrays = [Array.from_numpy(x, dtype=dt) for x, dt in zip(operands, prog.ins, strict=True)]
    spec = Map(prog, tuple(loads) if loads is not None else (PLAIN,) * prog.n_ins)
    shapes = SH.map(spec, [a.shape for a in arrays])
    assert not isinstance(shapes, SH.Error), shapes
    dsts = [Array.empty(dt, shapes[0]) for dt in prog.out_dtypes]
    assert library.map(spec, dsts, arrays) is Answer.DONE
    return [d.to_numpy() for d in dsts]


def check(prog: Prog, operands: Sequence[Arr], move: bool = False, what: str = "") -> None:
    """``map`` of ``prog`` has the reference's bits at every index."""
    shape = operands[0].shape if operands else ()
    want = R.evaluate(prog, operands, shape)
    got = run_map(prog, operands)
    for k, (w, g, dt) in enumerate(zip(want, got, prog.out_dtypes, strict=True)):
        ok = same(w, g, dt, move)
        if not ok.all():
            i = np.flatnonzero(~ok.reshape(-1))[:4]
            args = [np.asarray(x).reshape(-1)[i] for x in operands]
            raise AssertionError(f"{what} output {k}: operands {args} want "
                                 f"{w.reshape(-1)[i]} got {g.reshape(-1)[i]}")


def rng_for(*key: object) -> np.random.Generator:
    """A generator seeded by ``key``, the same in every run."""
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


# ---- every kind at every dtype ---------------------------------------------------

EXACT_UNARY = [k for k in Unary if k not in TRANSCENDENTAL]


@pytest.mark.parametrize("dt", D.all, ids=lambda d: d.name)
def test_exact_unary_kinds(dt: D.Dtype) -> None:
    rng = rng_for("unary", dt.name)
    for kind in EXACT_UNARY:
        if accepts(kind, dt):
            check(Prog.unary(kind, dt), [values(dt, N, rng)], what=f"{kind.name} {dt.name}")


@pytest.mark.parametrize("dt", D.all, ids=lambda d: d.name)
def test_binary_kinds_and_comparisons(dt: D.Dtype) -> None:
    rng = rng_for("binary", dt.name)
    for kind in [*Binary, *Compare]:
        if not accepts(kind, dt) or (dt.is_float and kind in (Binary.POW, Binary.ATAN2)):
            continue
        x, y = values(dt, N, rng), values(dt, N, rng)
        # Equal operands exercise ties, ±0 pairs and x == y comparisons.
        y[::7] = x[::7]
        check(Prog.binary(kind, dt), [x, y], what=f"{kind.name} {dt.name}")


@pytest.mark.parametrize("dt", [d for d in D.all if accepts(Ternary.FMA, d)], ids=lambda d: d.name)
def test_fma_rounds_once(dt: D.Dtype) -> None:
    rng = rng_for("fma", dt.name)
    a, b, c = (values(dt, N, rng) for _ in range(3))
    if dt.is_float:
        # c = -(a·b) rounded makes the exact sum tiny: a double rounding would show.
        with np.errstate(all="ignore"):
            c[::3] = -(a[::3].astype(np.float64) * b[::3].astype(np.float64)).astype(
                dt.numpy_dtype)
    check(Prog.fma(dt), [a, b, c], what=f"FMA {dt.name}")


@pytest.mark.parametrize("src", D.all, ids=lambda d: d.name)
def test_casts(src: D.Dtype) -> None:
    rng = rng_for("cast", src.name)
    x = values(src, N, rng)
    for dst in D.all:
        keeps_format = ((src.is_float and dst.is_complex and dst.bits == 2 * src.bits)
                        or (src.is_complex and dst.is_float and src.bits == 2 * dst.bits))
        check(Prog.cast(src, dst), [x], move=keeps_format or src is dst,
              what=f"CAST {src.name} -> {dst.name}")


@pytest.mark.parametrize("src", D.all, ids=lambda d: d.name)
def test_moves_keep_bits(src: D.Dtype) -> None:
    """Copy, Bitcast and Where keep every bit: NaN payloads, signalling NaNs,
    a bool's byte."""
    rng = rng_for("move", src.name)
    x, y = values(src, N, rng), values(src, N, rng)
    check(Prog.identity(src), [x], move=True, what=f"COPY {src.name}")
    check(Prog.where(src), [values(D.bool_, N, rng), x, y], move=True, what=f"WHERE {src.name}")
    for dst in D.all:
        if dst.bits == src.bits:
            check(Prog.bitcast(src, dst), [x], move=True, what=f"BITCAST {src.name} -> {dst.name}")


# ---- transcendentals ---------------------------------------------------------------

_MP: dict[Unary, Callable[[Any, Any], Any]] = {
    Unary.EXP: lambda m, x: m.exp(x), Unary.EXP2: lambda m, x: m.power(2, x),
    Unary.LOG: lambda m, x: m.log(x), Unary.LOG2: lambda m, x: m.log(x, 2),
    Unary.LOG1P: lambda m, x: m.log1p(x), Unary.EXPM1: lambda m, x: m.expm1(x),
    Unary.SIN: lambda m, x: m.sin(x), Unary.COS: lambda m, x: m.cos(x),
    Unary.TAN: lambda m, x: m.tan(x), Unary.ASIN: lambda m, x: m.asin(x),
    Unary.ACOS: lambda m, x: m.acos(x), Unary.ATAN: lambda m, x: m.atan(x),
    Unary.SINH: lambda m, x: m.sinh(x), Unary.COSH: lambda m, x: m.cosh(x),
    Unary.TANH: lambda m, x: m.tanh(x), Unary.ERF: lambda m, x: m.erf(x),
}


def _domain_sample(kind: Unary, rng: np.random.Generator, n: int) -> Arr:
    """Arguments spread over the kind's interesting range."""
    if kind in (Unary.ASIN, Unary.ACOS):
        return rng.uniform(-1, 1, n)
    if kind in (Unary.LOG, Unary.LOG2):
        return np.exp(rng.uniform(-80, 80, n))
    if kind is Unary.LOG1P:
        return np.where(rng.random(n) < 0.5, rng.uniform(-0.99, 3, n), rng.uniform(-1e-6, 1e-6, n))
    if kind in (Unary.EXP, Unary.EXP2, Unary.SINH, Unary.COSH):
        return rng.uniform(-80, 80, n)
    if kind is Unary.EXPM1:
        return np.where(rng.random(n) < 0.5, rng.uniform(-20, 80, n), rng.uniform(-1e-5, 1e-5, n))
    return np.where(rng.random(n) < 0.7, rng.uniform(-6, 6, n), rng.uniform(-1e4, 1e4, n))


@pytest.mark.parametrize("dt", [D.float64, D.float32, D.float16, D.bfloat16, D.float8_e4m3fn],
                         ids=lambda d: d.name)
def test_transcendentals_against_the_reference(dt: D.Dtype) -> None:
    """Every transcendental, Pow and Atan2 over specials and random bits, within
    the stated ulps of the reference (exact for float64, float64-rounded for
    the rest); the specials (NaN, ±inf, ±0) as the reference gives them."""
    rng = rng_for("transcendental", dt.name)
    bound = program.ULPS["float64" if dt is D.float64 else "float32"]
    for kind in sorted(TRANSCENDENTAL, key=lambda k: k.value):
        x = values(dt, 200, rng)
        want = R.evaluate(Prog.unary(kind, dt), [x], x.shape)[0]
        got = run_map(Prog.unary(kind, dt), [x])[0]
        d = R.ulps(want, got, dt)
        assert d.max() <= bound[kind.name.lower()], (kind, x[d.argmax()], want[d.argmax()])
    for kind in (Binary.POW, Binary.ATAN2):
        x, y = values(dt, 200, rng), values(dt, 200, rng)
        want = R.evaluate(Prog.binary(kind, dt), [x, y], x.shape)[0]
        got = run_map(Prog.binary(kind, dt), [x, y])[0]
        d = R.ulps(want, got, dt)
        assert d.max() <= bound[kind.name.lower()], (kind, x[d.argmax()], y[d.argmax()])


def test_float32_transcendentals_against_exact_values() -> None:
    """float32 transcendentals lie within their stated ulps of the exactly
    rounded value (mpmath at 100 bits)."""
    ctx = mpmath.MPContext()
    ctx.prec = 100
    rng = np.random.default_rng(7)
    for kind in sorted(TRANSCENDENTAL, key=lambda k: k.value):
        x = _domain_sample(kind, rng, 120).astype(np.float32)
        got = run_map(Prog.unary(kind, D.float32), [x])[0]
        exact = np.array([float(_MP[kind](ctx, ctx.mpf(float(v)))) for v in x])
        want = D.of_float(D.float32, exact)
        d = R.ulps(want, got, D.float32)
        assert d.max() <= program.ULPS["float32"][kind.name.lower()], (kind, x[d.argmax()])


def test_exact_points_of_transcendentals() -> None:
    """Exp2 is exact at integers, Log2 at powers of two; C99's special values."""
    for dt in (D.float64, D.float32, D.float16):
        ints = np.arange(-14, 16).astype(dt.numpy_dtype)
        assert np.array_equal(run_map(Prog.unary(Unary.EXP2, dt), [ints])[0],
                              np.exp2(ints.astype(np.float64)).astype(dt.numpy_dtype))
        assert np.array_equal(run_map(Prog.unary(Unary.LOG2, dt), [np.exp2(ints).astype(
            dt.numpy_dtype)])[0], ints)
    x = np.array([-np.inf, np.inf, 0.0, -0.0], dtype=np.float64)
    assert run_map(Prog.unary(Unary.EXP, D.float64), [x])[0].tolist() == [0.0, np.inf, 1.0, 1.0]
    log = run_map(Prog.unary(Unary.LOG, D.float64), [x])[0]
    assert np.isnan(log[0]) and log[1:].tolist() == [np.inf, -np.inf, -np.inf]
    p = run_map(Prog.binary(Binary.POW, D.float32),
                [np.array([np.nan, 1, 2, -8], np.float32), np.array([0, np.nan, -1, 1 / 3],
                                                                   np.float32)])[0]
    # Annex F wins over the NaN rule: pow(NaN, 0) and pow(1, NaN) are 1.
    assert p[0] == 1 and p[1] == 1 and p[2] == 0.5 and np.isnan(p[3])


@pytest.mark.parametrize("dt", [D.float64, D.float32, D.float16, D.bfloat16],
                         ids=lambda d: d.name)
def test_pow_keeps_annex_f_ones_for_signalling_nans(dt: D.Dtype) -> None:
    """pow(x, ±0) = pow(1, y) = 1 for a signalling NaN operand too (the C
    library's pow makes those a NaN, and NumPy calls it on CPUs without a
    SIMD loop of its own), in a Pow alone and inside a program; any other
    NaN operand makes a NaN."""
    width = {8: np.uint64, 4: np.uint32, 2: np.uint16}[dt.itemsize]
    mantissa = {D.float64: 52, D.float32: 23, D.float16: 10, D.bfloat16: 7}[dt]
    exponent = (1 << (8 * dt.itemsize - 1)) - (1 << mantissa)
    snan = np.array([exponent | (1 << (mantissa - 2)), exponent | 1], width)
    one, zero = np.array(_float_bits(dt, 1.0), width), np.array(0, width)
    xs = np.array([snan[0], snan[1], one, one, snan[0] | (1 << (8 * dt.itemsize - 1)),
                   snan[0], one], width)
    ys = np.array([zero, zero | (1 << (8 * dt.itemsize - 1)), snan[0], snan[1], zero, one, one],
                  width)
    x, y = (v.view(dt.numpy_dtype) for v in (xs, ys))
    b = Prog.build([dt, dt])
    p, q = b.ins
    in_program = b.finish(b.pow(p, q) + b.pow(p, q))
    for prog, scale in ((Prog.binary(Binary.POW, dt), 1.0), (in_program, 2.0)):
        got = run_map(prog, [x, y])[0].astype(np.float64)
        assert got[:5].tolist() == [scale] * 5, (prog, got)
        assert np.isnan(got[5]) and got[6] == scale


def _float_bits(dt: D.Dtype, v: float) -> int:
    """The bits of ``v`` in the float dtype ``dt``."""
    return int(np.asarray(D.of_float(dt, np.array([v])))[0].view(
        {8: np.uint64, 4: np.uint32, 2: np.uint16}[dt.itemsize]))


# ---- programs ----------------------------------------------------------------------


def test_several_outputs_coords_and_constants() -> None:
    """Several outputs of one program, Coord nodes of every axis, and nodes of
    constants alone, on a loop cut into many boxes."""
    b = Prog.build([D.float32, D.int16])
    x, i = b.ins
    r = b.cast(b.coord(0), D.float32) * 0.5 + b.cast(b.coord(2), D.float32)
    k = b.const(D.float64, 2.0) * b.const(D.float64, 3.0)
    p = b.finish(x * r, i + b.cast(b.coord(1), D.int16), b.cast(k, D.float32) + x, b.coord(1), k)
    rng = rng_for("multi")
    shape = (5, 37, 301)
    ops = [rng.standard_normal(shape).astype(np.float32),
           rng.integers(-9, 9, shape).astype(np.int16)]
    with pytest.MonkeyPatch.context() as mp:
        # Boxes of 512 elements: ranges of rows and single rows.
        mp.setattr(program, "CHUNK_BYTES", 512 * 8)
        program.compile.cache_clear()
        check(p, ops, what="multi")
    program.compile.cache_clear()


def test_constant_programs_broadcast() -> None:
    """Programs of constants alone (folded once) fill every index."""
    for dt in (D.float32, D.bfloat16, D.int4, D.complex64, D.bool_, D.uint64):
        b = Prog.build([dt])
        (x,) = b.ins
        one = b.const(dt, 1)
        p = b.finish(x, one, b.maximum(one, one) if not dt.is_complex else b.neg(one))
        check(p, [values(dt, 10, rng_for("const", dt.name))], move=True, what=dt.name)


def test_signalling_constants_come_out_quiet() -> None:
    """A constant is no operand: its signalling NaN reaches a float output quiet
    (the NaN rule), through Copy or Where too, and its bits only through a
    Bitcast."""
    for dt, snan, qbit in ((D.float16, 0x7C01, 0x0200), (D.float32, 0x7F800001, 0x00400000),
                           (D.float64, 0x7FF0000000000001, 1 << 51)):
        u = D.of_float(dt, np.zeros(1)).view(UINT[dt.numpy_dtype.itemsize]).dtype.type
        b = Prog.build([D.bool_])
        (c,) = b.ins
        k = b.const_bits(dt, int(snan).to_bytes(dt.bits // 8, "little"))
        p = b.finish(k, b.copy(k), b.where(c, k, k), b.bitcast(k, D.by_name(f"uint{dt.bits}")))
        outs = run_map(p, [np.array([True, False])])
        for out in outs[:3]:
            assert (out.view(u) == u(snan | qbit)).all()
        assert (outs[3] == snan).all()


@st.composite
def programs(draw: st.DrawFn) -> Prog:
    """Small random programs over float32, float64, int32, uint8 and bool."""
    dts = [D.float32, D.float64, D.int32, D.uint8, D.bool_]
    ins = draw(st.lists(st.sampled_from(dts), min_size=1, max_size=3))
    b = Prog.build(ins)
    vals = list(b.ins)
    for _ in range(draw(st.integers(1, 6))):
        choice = draw(st.integers(0, 5))
        x = draw(st.sampled_from(vals))
        if choice == 0:
            kinds = [k for k in EXACT_UNARY if accepts(k, x.dtype)]
            if kinds:
                vals.append(b.unary(draw(st.sampled_from(kinds)), x))
        elif choice == 1:
            vals.append(b.cast(x, draw(st.sampled_from(dts))))
        elif choice in (2, 3):
            same_dt = [v for v in vals if v.dtype is x.dtype]
            y = draw(st.sampled_from(same_dt))
            kinds = [k for k in [*Binary, *Compare] if accepts(k, x.dtype)
                     and k not in (Binary.POW, Binary.ATAN2, Binary.THREEFRY)]
            vals.append(b.binary(draw(st.sampled_from(kinds)), x, y))
        elif choice == 4:
            y = draw(st.sampled_from([v for v in vals if v.dtype is x.dtype]))
            c = b.less(x, y) if not x.dtype.is_bool else x
            vals.append(b.where(c, x, y))
        else:
            vals.append(b.const(x.dtype, draw(st.sampled_from([0, 1, -1, 2.5]))))
    outs = draw(st.lists(st.sampled_from(vals), min_size=1, max_size=3))
    return b.finish(*outs)


@settings(max_examples=60, deadline=None)
@given(programs(), st.integers(0, 2**32))
def test_random_programs_match_the_reference(p: Prog, seed: int) -> None:
    rng = np.random.default_rng(seed)
    ops = [values(dt, 50, rng).reshape(5, 10) for dt in p.ins]
    # Moves inside a program keep bits too; only NaNs of other kinds may differ.
    check(p, ops, what=str(p))


# ---- loads and layouts -------------------------------------------------------------


def test_padded_loads_feed_the_program() -> None:
    """A program over 3×3 windows of a padded, interior-spread and cropped
    operand sees the windows of a NumPy construction of the padded operand."""
    rng = rng_for("pool")
    x = rng.standard_normal((6, 7)).astype(np.float32)
    pad = Pad((1, -1), (2, 1), (1, 0), (Window(0, 3, 2, 1), Window(1, 3, 1, 2)))
    spec = Padded(bits(D.float32, -1.0), pad)
    b = Prog.build([D.float32])
    (v,) = b.ins
    p = b.finish(v * 2.0)
    got = run_map(p, [x], [spec])[0]
    padded = np.full((1 + 6 + 2 + 5, -1 + 7 + 1), -1.0, dtype=np.float32)
    padded[1:12:2, :6] = x[:, 1:]
    w0, w1, j0, j1 = np.indices((6, 3, 3, 3))
    assert np.array_equal(got, padded[2 * w0 + j0, w1 + 2 * j1] * 2)


def _strided(x: Arr, dt: D.Dtype, kind: str) -> Array:
    """``x`` as an operand laid out by ``kind``: offset into a larger buffer,
    reversed, permuted or broadcast along a stride-0 axis."""
    if kind == "offset":
        big = np.concatenate([np.zeros(3, dtype=x.dtype), x.reshape(-1)])
        return Array.from_numpy(big, dtype=dt)[3:].reshape(x.shape)
    if kind == "reversed":
        a = Array.from_numpy(np.ascontiguousarray(x[::-1, ::-1]), dtype=dt)
        return a[::-1, ::-1]
    if kind == "permuted":
        return Array.from_numpy(np.ascontiguousarray(x.T), dtype=dt).view(Permute((1, 0)))
    if kind == "strided":
        wide = np.zeros((x.shape[0], 2 * x.shape[1]), dtype=x.dtype)
        wide[:, ::2] = x
        return Array.from_numpy(wide, dtype=dt)[:, ::2]
    row = Array.from_numpy(np.ascontiguousarray(x[:1]), dtype=dt)
    return row.view(Broadcast(x.shape))


@pytest.mark.parametrize("kind", ["offset", "reversed", "permuted", "strided", "broadcast"])
@pytest.mark.parametrize("dt", [D.float32, D.int4, D.complex128, D.bool_], ids=lambda d: d.name)
def test_operand_layouts(kind: str, dt: D.Dtype) -> None:
    """Operands of any layout read as their elements."""
    rng = rng_for("layout", kind, dt.name)
    x = values(dt, 6 * 9, rng).reshape(6, 9)
    y = values(dt, 6 * 9, rng).reshape(6, 9)
    if kind == "broadcast":
        x = np.broadcast_to(x[:1], x.shape).copy()
    a = _strided(x, dt, kind)
    p = Prog.binary(Binary.MAXIMUM, dt) if not dt.is_bool else Prog.binary(Binary.XOR, dt)
    want = R.evaluate(p, [x, y], x.shape)[0]
    dst = Array.empty(dt, x.shape)
    assert library.map(Map(p, (PLAIN, PLAIN)), [dst], [a, Array.from_numpy(y, dtype=dt)]) \
        is Answer.DONE
    assert same(want, dst.to_numpy(), dt, move=False).all()


@pytest.mark.parametrize("kind", ["reversed", "permuted", "strided", "broadcast"])
@pytest.mark.parametrize("dt", [D.float64, D.float32, D.bfloat16], ids=lambda d: d.name)
def test_transcendentals_do_not_depend_on_layout(kind: str, dt: D.Dtype) -> None:
    """Transcendentals of an operand in any layout have the bits they have on
    a contiguous one (NumPy's loops take other paths for some strides)."""
    rng = rng_for("layout-transcendental", kind, dt.name)
    x = D.of_float(dt, rng.uniform(0.05, 0.95, (6, 40)))
    if kind == "broadcast":
        x = np.broadcast_to(x[:1], x.shape).copy()
    b = Prog.build([dt, dt])
    u, v = b.ins
    p = b.finish(b.exp(u), b.log(u), b.sinh(u), b.asin(u), b.pow(u, v), b.atan2(v, u))
    spec = Map(p, (PLAIN, PLAIN))
    y = Array.from_numpy(x[::-1].copy(), dtype=dt)
    fresh = [Array.empty(dt, x.shape) for _ in range(6)]
    moved = [Array.empty(dt, x.shape) for _ in range(6)]
    assert library.map(spec, fresh, [Array.from_numpy(x, dtype=dt), y]) is Answer.DONE
    assert library.map(spec, moved, [_strided(x, dt, kind), y]) is Answer.DONE
    for f, m in zip(fresh, moved, strict=True):
        assert same(f.to_numpy(), m.to_numpy(), dt, move=True).all()


def test_identical_destination_equals_fresh() -> None:
    """A destination identical to a Plain operand gets what a fresh one does,
    even where another output copies that operand."""
    rng = rng_for("inplace")
    x = rng.standard_normal((70, 300)).astype(np.float32)
    y = rng.standard_normal((70, 300)).astype(np.float32)
    b = Prog.build([D.float32, D.float32])
    u, v = b.ins
    p = b.finish(u * v + 1.0, u, b.exp(u))
    fresh = run_map(p, [x, y])
    a = Array.from_numpy(x)
    dsts = [a, Array.empty(D.float32, x.shape), Array.empty(D.float32, x.shape)]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(program, "CHUNK_BYTES", 4096)
        program.compile.cache_clear()
        assert library.map(Map(p, (PLAIN, PLAIN)), dsts, [a, Array.from_numpy(y)]) is Answer.DONE
    program.compile.cache_clear()
    for f, d in zip(fresh, dsts, strict=True):
        assert np.array_equal(f.view(np.uint32), d.to_numpy().view(np.uint32))


@pytest.mark.parametrize("n", [1, 1023, 1024, 1025, 4097])
def test_boxes_and_threads_give_the_same_bits(n: int) -> None:
    """Loops of sizes around the box size, cut into boxes of 1024 elements, on
    one and two threads, give the bits of one whole evaluation."""
    rng = rng_for("boxes", n)
    shape = (3, n)
    x = rng.standard_normal(shape)
    b = Prog.build([D.float64])
    (v,) = b.ins
    p = b.finish(b.tanh(v) * b.cast(b.coord(0), D.float64) + b.sqrt(b.abs(v)),
                 b.cast(b.coord(1), D.float64))
    whole = program.compile(p)([x], shape)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(program, "CHUNK_BYTES", 1024 * 8)
        mp.setattr(program, "PARALLEL_MIN", 0)
        program.compile.cache_clear()
        for t in (1, 2):
            with threads(t):
                got = run_map(p, [x])
            for w, g in zip(whole, got, strict=True):
                assert np.array_equal(w.view(np.uint64), g.view(np.uint64))
    program.compile.cache_clear()


def test_evaluator_boxes_alone_give_the_whole() -> None:
    """A box evaluated alone, its Coord offset given, has the whole's bits."""
    b = Prog.build([D.int32])
    (v,) = b.ins
    p = b.finish(v * b.cast(b.coord(0), D.int32) + b.cast(b.coord(1), D.int32))
    x = np.arange(60, dtype=np.int32).reshape(6, 10)
    ev = program.compile(p)
    whole = ev([x], x.shape)[0]
    part = ev([x[2:5, 3:7]], (3, 4), (2, 3))[0]
    assert np.array_equal(part, whole[2:5, 3:7])


# ---- sub-byte, empty and rank-0 ------------------------------------------------------


@pytest.mark.parametrize("dt", [D.int4, D.uint4, D.float4_e2m1fn, D.bit], ids=lambda d: d.name)
def test_sub_byte_destination_keeps_its_neighbours(dt: D.Dtype) -> None:
    """A packed destination at an odd element offset is written at its own
    elements only; a packed operand at one is read at its own."""
    rng = rng_for("subbyte", dt.name)
    x = values(dt, 13, rng)
    buf = Buffer.create(host, 16)
    buf.host_view()[:] = 0xA5
    dst = Array(dt, Layout.c_contiguous((13,), 1), buf)
    src_buf = Buffer.create(host, 16)
    src = Array(dt, Layout.c_contiguous((13,), 3), src_buf)
    src.write_numpy(x)
    p = Prog.binary(Binary.MAXIMUM, dt)
    assert library.map(Map(p, (PLAIN, PLAIN)), [dst], [src, src]) is Answer.DONE
    want = R.evaluate(p, [x, x], (13,))[0]
    assert same(want, dst.to_numpy(), dt, move=True).all()
    whole = Array(dt, Layout.c_contiguous((16 * 8 // dt.bits,)), buf).to_numpy()
    canary = Array(dt, Layout.c_contiguous((16 * 8 // dt.bits,)), Buffer.create(host, 16))
    canary.buffer.host_view()[:] = 0xA5
    keep = np.ones(whole.shape, dtype=bool)
    keep[1:14] = False
    assert same(canary.to_numpy()[keep], whole[keep], dt, move=True).all()


def test_empty_and_rank_zero_loops() -> None:
    p = Prog.binary(Binary.ADD, D.float32)
    assert run_map(p, [np.zeros((0, 3), np.float32)] * 2)[0].shape == (0, 3)
    got = run_map(p, [np.array(1.5, np.float32), np.array(2.0, np.float32)])[0]
    assert got.shape == () and got == 3.5
    b = np.array(2, dtype=np.uint8).view(np.bool_).reshape(())
    assert run_map(Prog.identity(D.bool_), [b])[0].view(np.uint8) == 2


# ---- refusals ----------------------------------------------------------------------


def _canary(dt: D.Dtype, shape: tuple[int, ...]) -> Array:
    a = Array.empty(dt, shape)
    a.buffer.host_view()[:] = 0x5A
    return a


def _untouched(a: Array) -> bool:
    return bool((a.buffer.host_view() == 0x5A).all())


def test_misfits_answer_a_refusal_and_write_nothing() -> None:
    f32 = D.float32
    add = Prog.binary(Binary.ADD, f32)
    x = Array.from_numpy(np.ones((2, 3), np.float32))
    cases: list[tuple[Prog, tuple[Load, ...], list[Array], list[Array], Answer]] = [
        (add, (PLAIN, PLAIN), [_canary(f32, (2, 3))], [x], Answer.BAD_ARITY),
        (add, (PLAIN, PLAIN), [_canary(f32, (2, 3)), _canary(f32, (2, 3))], [x, x],
         Answer.BAD_ARITY),
        (add, (PLAIN, PLAIN), [_canary(D.float64, (2, 3))], [x, x], Answer.WRONG_DTYPE),
        (add, (PLAIN, PLAIN), [_canary(f32, (2, 3))],
         [x, Array.from_numpy(np.ones((2, 3), np.int32))], Answer.WRONG_DTYPE),
        (add, (PLAIN, PLAIN), [_canary(f32, (3, 2))], [x, x], Answer.SHAPE_MISMATCH),
        (add, (PLAIN, PLAIN), [_canary(f32, (2, 3))],
         [x, Array.from_numpy(np.ones((3, 2), np.float32))], Answer.SHAPE_MISMATCH),
        (add, (PLAIN, Padded(b"\x00", Pad((0, 0), (0, 0), (0, 0)))), [_canary(f32, (2, 3))],
         [x, x], Answer.WRONG_DTYPE),
        (Prog((f32,), (In(0), Coord(2), Op1(Convert.CAST, f32, 1), Op2(Binary.ADD, 0, 2)), (3,)),
         (PLAIN,), [_canary(f32, (2, 3))], [x], Answer.SHAPE_MISMATCH),
    ]
    for prog, loads, dsts, ops, answer in cases:
        spec = Map(prog, loads)
        got = library.map(spec, dsts, ops)
        assert got is answer, (prog, got)
        assert all(_untouched(d) for d in dsts)


def test_door_refusals_come_before_writes() -> None:
    """Overlapping arrays are refused by the door, before any write."""
    buf = Buffer.create(host, 64)
    buf.host_view()[:] = 0x5A
    a = Array(D.float32, Layout.c_contiguous((4,), 0), buf)
    shifted = Array(D.float32, Layout.c_contiguous((4,), 1), buf)
    got = library.map(Map(Prog.identity(D.float32), (PLAIN,)), [shifted], [a])
    assert got is Answer.OVERLAPPING
    assert (buf.host_view() == 0x5A).all()


# ---- the statement and concurrency ------------------------------------------------


def test_statement_declines_nothing_and_states_ulps() -> None:
    x = Array.from_numpy(np.ones(3, np.float32))
    call = Call("map", Map(Prog.unary(Unary.EXP, D.float32), (PLAIN,)), (Array.empty(
        D.float32, (3,)),), (x,))
    assert library.statement.declines(call) is None
    for dt in ("float32", "float64"):
        text = library.statement.algorithms[f"map {dt} ulps"]
        for kind in program.ULPS[dt]:
            assert f"{kind} {program.ULPS[dt][kind]}" in text
        for kind, bound in program.ULPS[dt].items():
            assert bound <= (2 if dt == "float64" else {"exp": 2, "exp2": 2, "sin": 2, "cos": 2,
                                                        "asin": 2, "acos": 2, "atan": 2,
                                                        "cosh": 2, "tanh": 2, "erf": 2,
                                                        "expm1": 1, "log": 1, "log2": 1,
                                                        "log1p": 1, "atan2": 3, "sinh": 3,
                                                        "tan": 4, "pow": 4}[kind])


def test_concurrent_calls_agree() -> None:
    """Four threads mapping at once each get the one-thread result."""
    rng = rng_for("concurrent")
    x = rng.standard_normal((64, 1000)).astype(np.float32)
    b = Prog.build([D.float32])
    (v,) = b.ins
    p = b.finish(v / (b.exp(-v) + 1.0))
    want = run_map(p, [x])[0]
    results: list[Arr] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(3):
                results.append(run_map(p, [x])[0])
        except BaseException as e:
            errors.append(e)

    ts = [threading.Thread(target=work) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors
    assert len(results) == 12
    assert all(np.array_equal(r.view(np.uint32), want.view(np.uint32)) for r in results)


def test_concurrent_small_nx_calls_agree() -> None:
    """Threads calling ``nx`` on small arrays at once (one box each, on the
    calling thread, through the caller's and the library's caches) each get
    NumPy's exact bits: float32 and int32 addition, an int32 sum (wrapping)."""
    from nxkernel_core import nx

    rng = rng_for("concurrent-nx")
    cases = []
    for shape in ((8,), (3, 5), ()):
        xf, yf = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
        xi = rng.integers(-(2**31), 2**31, shape, dtype=np.int32)
        cases.append((xf, yf, xi))
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(30):
                for xf, yf, xi in cases:
                    got = nx.add(nx.asarray(xf), nx.asarray(yf)).to_numpy()
                    assert np.array_equal(got.view(np.uint32), np.add(xf, yf).view(np.uint32))
                    assert np.array_equal(nx.add(nx.asarray(xi), nx.asarray(xi)).to_numpy(),
                                          np.add(xi, xi))
                    assert nx.sum(nx.asarray(xi)).to_numpy() == np.sum(xi, dtype=np.int32)
        except BaseException as e:
            errors.append(e)

    ts = [threading.Thread(target=work) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors[0]


def test_threefry_matches_random123() -> None:
    """Threefry-2x32-20 of Random123's known-answer vectors."""
    def word(lo: int, hi: int) -> int:
        return lo | hi << 32

    counters = np.array([word(0, 0), word(0xFFFFFFFF, 0xFFFFFFFF),
                         word(0x243F6A88, 0x85A308D3)], dtype=np.uint64)
    keys = np.array([word(0, 0), word(0xFFFFFFFF, 0xFFFFFFFF),
                     word(0x13198A2E, 0x03707344)], dtype=np.uint64)
    got = run_map(Prog.binary(Binary.THREEFRY, D.uint64), [counters, keys])[0]
    want = [word(0x6B200159, 0x99BA4EFE), word(0x1CB996FC, 0xBB002BE7),
            word(0xC4923A9C, 0x483DF7A0)]
    assert [int(v) for v in got] == want

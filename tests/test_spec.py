"""Specs: each class checks its own attributes; reductions' rules."""

from __future__ import annotations

from contextlib import AbstractContextManager

import pytest

from nxkernel_core import dtype as D
from nxkernel_core import spec as S
from nxkernel_core.layout import Range, Window
from nxkernel_core.prog import Prog


def _two() -> Prog:
    b = Prog.build([D.float32, D.float32])
    x, y = b.ins
    return b.finish(x + y, x * y)


def _attention_prog() -> Prog:
    """Score and one f32 load: visible where the load is below 1, logit score + load."""
    b = Prog.build([D.float32, D.float32])
    s, m = b.ins
    return b.finish(b.less(m, 1.0), s + m)


f32, f64, i64 = D.float32, D.float64, D.int64
P1 = Prog.identity(f32)
P2 = _two()
PAD = S.Pad((1,), (1,), (0,))


def raises(match: str) -> AbstractContextManager[object]:
    return pytest.raises(ValueError, match=match)


# ---- loads -----------------------------------------------------------------


def test_pad_normalises_and_hashes() -> None:
    p = S.Pad([1, -2], [0, 3], [0, 1], [Window(1, 2)])  # type: ignore[arg-type]
    assert p.lo == (1, -2) and p.hi == (0, 3) and p.interior == (0, 1)
    assert p.windows == (Window(1, 2),)
    assert p.rank == 2 and p.loaded_rank == 3
    assert hash(p) == hash(S.Pad((1, -2), (0, 3), (0, 1), (Window(1, 2),)))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (((1, 2), (1,), (0, 0)), r"spec\.Pad: lo \(1, 2\), hi \(1,\) and interior"),
        (((1,), (1,), (-1,)), r"spec\.Pad: interior \(-1,\) must be at least 0"),
        (((1,), (1,), (0,), (Window(1, 2),)), r"spec\.Pad: window axis 1 is past the rank 1"),
        (((0, 0), (0, 0), (0, 0), (Window(1, 2), Window(0, 2))),
         r"spec\.Pad: window axes \(1, 0\) must increase strictly"),
        (((0,), (0,), (0,), (Window(0, 0),)), r"spec\.Pad: window .* needs size, step"),
        (((0,), (0,), (0,), (Window(0, 2, 1, 0),)), r"spec\.Pad: window .* needs size"),
        (((0.5,), (0,), (0,)), r"spec\.Pad: lo .* must be an int"),
        (((True,), (0,), (0,)), r"spec\.Pad: lo .* must be an int"),
        (((0,) * 32, (0,) * 32, (0,) * 32, (Window(0, 1),)), r"spec\.Pad: rank 32 with 1"),
    ],
)
def test_pad_refuses(args: tuple[object, ...], message: str) -> None:
    with raises(message):
        S.Pad(*args)  # type: ignore[arg-type]


def test_plain_and_padded() -> None:
    assert S.Plain() == S.PLAIN
    p = S.Padded(bytearray(b"\x00\x00\x80\x3f"), PAD)  # type: ignore[arg-type]
    assert p.fill == b"\x00\x00\x80\x3f" and isinstance(p.fill, bytes)
    with raises(r"spec\.Padded: fill has 0 bytes, not 1 to 16"):
        S.Padded(b"", PAD)
    with raises(r"spec\.Padded: fill has 17 bytes"):
        S.Padded(bytes(17), PAD)
    with raises(r"spec\.Padded: fill must be bytes"):
        S.Padded("x", PAD)  # type: ignore[arg-type]
    with raises(r"spec\.Padded: pad must be a Pad"):
        S.Padded(b"\x00", (1,))  # type: ignore[arg-type]


def test_fill_fits() -> None:
    assert S.fill_fits(bytes(4), f32)
    assert not S.fill_fits(bytes(8), f32)
    assert S.fill_fits(bytes(16), D.complex128)
    assert S.fill_fits(b"\x01", D.bit) and S.fill_fits(b"\x07", D.int4)


# ---- reductions --------------------------------------------------------------


def test_accepts_per_contract() -> None:
    for dt in D.all:
        assert S.accepts(S.Monoid.SUM, dt) == (not dt.is_bool)
        assert S.accepts(S.Monoid.PROD, dt) == (not dt.is_bool)
        assert S.accepts(S.Monoid.MAX, dt) and S.accepts(S.Monoid.MIN, dt)
        assert S.accepts(S.Arg(S.Extreme.MAX), dt) and S.accepts(S.Arg(S.Extreme.MIN), dt)
        assert S.accepts(S.LOGSUMEXP, dt) == dt.is_float
        assert S.accepts(S.MOMENTS, dt) == dt.is_float


def test_results_and_result_dtypes() -> None:
    assert [S.results(r) for r in (S.Monoid.SUM, S.LOGSUMEXP, S.MOMENTS, S.Arg(S.Extreme.MIN))] \
        == [1, 1, 2, 2]
    assert S.result_dtypes(S.Monoid.SUM, f32) == (f32,)
    assert S.result_dtypes(S.MOMENTS, f64) == (f64, f64)
    assert S.result_dtypes(S.Arg(S.Extreme.MAX), D.int8) == (D.int8, i64)


def test_result_fits() -> None:
    bf16, c64, c128 = D.bfloat16, D.complex64, D.complex128
    assert S.result_fits(S.Monoid.SUM, bf16, f32)
    assert S.result_fits(S.MOMENTS, f64, D.float16)
    assert S.result_fits(S.LOGSUMEXP, bf16, bf16)
    assert S.result_fits(S.Monoid.PROD, c64, c128)
    assert not S.result_fits(S.LOGSUMEXP, f32, c64)
    assert not S.result_fits(S.Monoid.MAX, bf16, f32)
    assert not S.result_fits(S.Arg(S.Extreme.MAX), f32, f64)
    assert not S.result_fits(S.Monoid.SUM, D.int8, i64)
    assert not S.result_fits(S.Monoid.SUM, f32, i64)
    assert S.result_fits(S.Monoid.SUM, D.int4, D.int4)


def test_arg_checks_extreme() -> None:
    with raises(r"spec\.Arg: extreme must be an Extreme"):
        S.Arg("max")  # type: ignore[arg-type]


# ---- loops -------------------------------------------------------------------


def test_map() -> None:
    m = S.Map(P2, [S.PLAIN, S.Padded(bytes(4), PAD)])  # type: ignore[arg-type]
    assert isinstance(m.loads, tuple)
    assert (m.n_operands(), m.n_results(), m.kernel) == (2, 2, "map")
    with raises(r"spec\.Map: 1 loads for 2 program inputs"):
        S.Map(P2, (S.PLAIN,))
    with raises(r"spec\.Map: a load must be a Plain or Padded"):
        S.Map(P1, (None,))  # type: ignore[arg-type]


def test_reduce() -> None:
    rs: list[tuple[S.Reduction, int, D.Dtype]] = [
        (S.Monoid.SUM, 0, f32), (S.Arg(S.Extreme.MAX), 1, f32), (S.MOMENTS, 0, f64)]
    r = S.Reduce(P2, (S.PLAIN, S.PLAIN), [0, 2], rs)  # type: ignore[arg-type]
    assert r.axes == (0, 2) and r.n_results() == 5 and r.n_operands() == 2
    assert r.result_dtypes() == (f32, f32, i64, f64, f64)
    assert S.Reduce(P1, (S.PLAIN,), (), ((S.Monoid.MAX, 0, f32),)).n_results() == 1


@pytest.mark.parametrize(
    ("axes", "reductions", "message"),
    [
        ((2, 1), ((S.Monoid.SUM, 0, f32),), r"^spec\.Reduce: axes \(2, 1\) must increase strictly$"),
        ((1, 1), ((S.Monoid.SUM, 0, f32),), r"spec\.Reduce: axes \(1, 1\) must increase"),
        ((-1,), ((S.Monoid.SUM, 0, f32),), r"spec\.Reduce: axes \(-1,\) must be at least 0"),
        ((0,), (), r"spec\.Reduce: takes at least one reduction"),
        ((0,), ((S.Monoid.SUM, 1, f32),), r"spec\.Reduce: output 1 is past the program's 1"),
        ((0,), ((S.Monoid.SUM, -1, f32),), r"spec\.Reduce: output must be at least 0"),
        ((0,), (("sum", 0, f32),), r"spec\.Reduce: a reduction must be a Monoid or"),
        ((0,), ((S.Monoid.SUM, 0),), r"spec\.Reduce: reduction .* is not \(reduction, output"),
        ((0,), ((S.Monoid.SUM, 0, "f32"),), r"spec\.Reduce: a result dtype must be a Dtype"),
        ((0,), ((S.MOMENTS, 0, f32),) * 8, r"spec\.Reduce: 1 loads and 16 results are more "
                                             r"than 16"),
    ],
)
def test_reduce_refuses(axes: object, reductions: object, message: str) -> None:
    with raises(message):
        S.Reduce(P1, (S.PLAIN,), axes, reductions)  # type: ignore[arg-type]


def test_scan() -> None:
    s = S.Scan(P1, (S.PLAIN,), 0, S.MOMENTS, 0, f32, carry=True)
    assert (s.n_operands(), s.n_results(), s.result_dtypes()) == (2, 2, (f32, f32))
    arg = S.Scan(P1, (S.PLAIN,), 1, S.Arg(S.Extreme.MIN), 0, f32, reverse=True)
    assert (arg.n_operands(), arg.result_dtypes()) == (1, (f32, i64))
    with raises(r"spec\.Scan: an Arg scan takes no carry"):
        S.Scan(P1, (S.PLAIN,), 0, S.Arg(S.Extreme.MIN), 0, f32, carry=True)
    with raises(r"spec\.Scan: output 1 is past the program's 1"):
        S.Scan(P1, (S.PLAIN,), 0, S.Monoid.SUM, 1, f32)
    with raises(r"spec\.Scan: axis must be at least 0"):
        S.Scan(P1, (S.PLAIN,), -1, S.Monoid.SUM, 0, f32)
    with raises(r"spec\.Scan: reverse must be a bool"):
        S.Scan(P1, (S.PLAIN,), 0, S.Monoid.SUM, 0, f32, reverse=1)  # type: ignore[arg-type]
    with raises(r"spec\.Scan: dtype must be a Dtype"):
        S.Scan(P1, (S.PLAIN,), 0, S.Monoid.SUM, 0, "float32")  # type: ignore[arg-type]
    with raises(r"spec\.Scan: 0 loads for 1 program inputs"):
        S.Scan(P1, (), 0, S.Monoid.SUM, 0, f32)


# ---- moves -------------------------------------------------------------------


def test_moves() -> None:
    assert S.Fold([2, 3], S.Pad((0, 0), (0, 0), (0, 0))).shape == (2, 3)  # type: ignore[arg-type]
    with raises(r"spec\.Fold: pad of rank 1 for shape \[2, 3\]"):
        S.Fold((2, 3), PAD)
    with raises(r"spec\.Fold: shape .* must be at least 0"):
        S.Fold((-1,), PAD)
    with raises(r"spec\.Fold: shape \[.*\] has rank 33"):
        S.Fold((1,) * 33, PAD)
    with raises(r"spec\.Gather: axis must be at least 0"):
        S.Gather(-1)
    with raises(r"spec\.RangeGather: run must be at least 0"):
        S.RangeGather(0, -2)
    assert S.Scatter(1, S.Combine.ADD).unique is False
    with raises(r"spec\.Scatter: combine must be a Combine"):
        S.Scatter(0, "add")  # type: ignore[arg-type]
    with raises(r"spec\.Scatter: unique must be a bool"):
        S.Scatter(0, S.Combine.SET, None)  # type: ignore[arg-type]
    with raises(r"spec\.Sort: k must be at least 0"):
        S.Sort(0, k=-1)
    assert S.Sort(0, True, 3).n_results() == 2
    with raises(r"spec\.Numbering: side must be a Side"):
        S.Numbering("left")  # type: ignore[arg-type]
    assert [(s.n_operands(), s.n_results()) for s in (S.Gather(0), S.Scatter(0, S.Combine.SET))] \
        == [(2, 1), (3, 1)]


def test_assemble() -> None:
    regions: list[object] = [[Range(0, 2), Range(3, 4, -1)], (Range(1, 0, 5), Range(0, 0))]
    a = S.Assemble([4, 4], bytearray(b"\x00"), regions)  # type: ignore[arg-type]
    assert a.shape == (4, 4) and a.fill == b"\x00" and a.n_operands() == 2
    with raises(r"spec\.Assemble: region 0 has 1 ranges for rank 2"):
        S.Assemble((4, 4), b"\x00", ((Range(0, 1),),))
    with raises(r"spec\.Assemble: region 0's .* along axis 1 leaves \[0, 4\)"):
        S.Assemble((4, 4), b"\x00", ((Range(0, 1), Range(2, 2, 2)),))
    with raises(r"spec\.Assemble: region 0's .* needs step != 0"):
        S.Assemble((4,), b"\x00", ((Range(0, 1, 0),),))
    with raises(r"spec\.Assemble: fill has 0 bytes"):
        S.Assemble((4,), b"", ())


# ---- contractions and transforms -----------------------------------------------


def test_contract() -> None:
    c = S.Contract([[0, 0]], [(2, 1)], f32)  # type: ignore[arg-type]
    assert c.batch == ((0, 0),) and c.contracting == ((2, 1),) and c.n_operands() == 2
    full = S.Contract((), ((1, 0),), f32, init=True, scales=(S.ScaleKind.EXPONENT, None),
                      segments=S.Rows(0, 1))
    assert full.n_operands() == 5
    both = S.Contract((), ((1, 0),), i64, scales=(S.ScaleKind.VALUE, S.ScaleKind.VALUE),
                      segments=S.ContractingSegments(0, 3))
    assert both.n_operands() == 5


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"batch": ((0, 0),), "contracting": ((0, 1),)}, r"spec\.Contract: a's axes \[0, 0\]"),
        ({"contracting": ((1, 0), (2, 0))}, r"spec\.Contract: b's axes \[0, 0\] repeat"),
        ({"contracting": ((1, 0, 2),)}, r"spec\.Contract: contracting pair .* is not"),
        ({"contracting": ((-1, 0),)}, r"spec\.Contract: contracting must be at least 0"),
        ({"acc": D.bfloat16}, r"spec\.Contract: acc bfloat16 does not accumulate"),
        ({"acc": D.bool_}, r"spec\.Contract: acc bool does not accumulate"),
        ({"scales": (None,)}, r"spec\.Contract: scales \(None,\) are not"),
        ({"scales": ("e", None)}, r"spec\.Contract: a scale must be a ScaleKind"),
        ({"segments": S.Rows(1, 1)}, r"spec\.Contract: Rows' a_axis 1 is not a free axis of a"),
        ({"segments": S.Rows(0, 0)}, r"spec\.Contract: Rows' b_axis 0 is not a free axis of b"),
        ({"segments": S.ContractingSegments(1, 2)},
         r"spec\.Contract: segments' pair 1 is past the 1 contracting pairs"),
        ({"segments": (0, 1)}, r"spec\.Contract: segments must be Rows, ContractingSegments"),
        ({"init": 1}, r"spec\.Contract: init must be a bool"),
    ],
)
def test_contract_refuses(kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"batch": (), "contracting": ((1, 0),), "acc": f32}
    with raises(message):
        S.Contract(**(args | kwargs))  # type: ignore[arg-type]


def test_segments_refuse() -> None:
    with raises(r"spec\.Rows: b_axis must be at least 0"):
        S.Rows(0, -1)
    with raises(r"spec\.ContractingSegments: groups must be at least 0"):
        S.ContractingSegments(0, -1)


def test_fft() -> None:
    f = S.Fft([0, 2], S.Direction.INVERSE, S.C2r(8))  # type: ignore[arg-type]
    assert f.axes == (0, 2)
    with raises(r"spec\.Fft: takes at least one axis"):
        S.Fft((), S.Direction.FORWARD, S.C2c())
    with raises(r"spec\.Fft: axes \(1, 0\) must increase strictly"):
        S.Fft((1, 0), S.Direction.FORWARD, S.C2c())
    with raises(r"spec\.Fft: kind must be a C2c or R2c or C2r"):
        S.Fft((0,), S.Direction.FORWARD, "c2c")  # type: ignore[arg-type]
    with raises(r"spec\.Fft: direction must be a Direction"):
        S.Fft((0,), 1, S.R2c())  # type: ignore[arg-type]
    with raises(r"spec\.C2r: n must be at least 0"):
        S.C2r(-1)


def test_routines() -> None:
    assert [S.Svd().n_results(), S.Svd(None).n_results(), S.Svd(S.Factors.COMPLETE).n_results()] \
        == [3, 1, 3]
    assert (S.Eigh().n_results(), S.Eigh(False).n_results(), S.Eig(False).n_results()) == (2, 1, 1)
    assert (S.Lu().n_results(), S.Qr().n_results(), S.Cholesky().n_results()) == (3, 2, 1)
    assert S.SolveTriangular().n_operands() == 2
    with raises(r"spec\.Svd: vectors must be a Factors"):
        S.Svd("reduced")  # type: ignore[arg-type]
    for cls, field in ((S.Cholesky, "upper"), (S.Qr, "complete"), (S.Eigh, "vectors"),
                       (S.Eig, "vectors"), (S.SolveTriangular, "unit_diagonal")):
        with raises(rf"spec\.{cls.__name__}: {field} must be a bool"):
            cls(**{field: 0})  # type: ignore[arg-type]


# ---- attention ---------------------------------------------------------------


def test_attention() -> None:
    prog = _attention_prog()
    a = S.Attention(prog, (S.PLAIN,), 1, f32, S.Dense(), lengths=True)
    assert a.scale == 1.0 and isinstance(a.scale, float)
    assert (a.n_operands(), a.n_results()) == (5, 2)
    assert S.Attention(prog, (S.PLAIN,), 0.5, f64, S.Paged(16)).n_operands() == 5
    with raises(r"spec\.Attention: acc must be float32 or float64"):
        S.Attention(prog, (S.PLAIN,), 1.0, D.float16, S.Dense())
    with raises(r"spec\.Attention: 0 loads for 1 program inputs after the score"):
        S.Attention(prog, (), 1.0, f32, S.Dense())
    with raises(r"spec\.Attention: the program takes no score"):
        b = Prog.build([])
        S.Attention(b.finish(b.const(D.bool_, True), b.const(f32, 0.0)), (), 1.0, f32, S.Dense())
    with raises(r"spec\.Attention: scale is a NaN"):
        S.Attention(prog, (S.PLAIN,), float("nan"), f32, S.Dense())
    with raises(r"spec\.Attention: scale must be a float"):
        S.Attention(prog, (S.PLAIN,), True, f32, S.Dense())
    with raises(r"spec\.Attention: kv must be a Dense or Paged"):
        S.Attention(prog, (S.PLAIN,), 1.0, f32, None)  # type: ignore[arg-type]
    with raises(r"spec\.Paged: page must be at least 1"):
        S.Paged(0)


def test_kernels_table() -> None:
    assert list(S.KERNELS) == [
        "map", "reduce", "scan", "fold", "gather", "range_gather", "scatter", "sort",
        "numbering", "assemble", "contract", "fft", "cholesky", "lu", "qr", "svd", "eigh",
        "eig", "solve_triangular", "attention",
    ]
    for name, cls in S.KERNELS.items():
        assert cls.kernel == name  # type: ignore[attr-defined]


def test_counts_of_every_kernel() -> None:
    """Each spec's operands and destinations, as its class documents them."""
    cases: list[tuple[object, int, int]] = [
        (S.Map(P2, (S.PLAIN, S.PLAIN)), 2, 2),
        (S.Reduce(P1, (S.PLAIN,), (0,), ((S.Arg(S.Extreme.MAX), 0, f32),)), 1, 2),
        (S.Scan(P1, (S.PLAIN,), 0, S.Monoid.SUM, 0, f32, carry=True), 2, 1),
        (S.Fold((3,), PAD), 1, 1),
        (S.Gather(0), 2, 1),
        (S.RangeGather(0, 2), 2, 1),
        (S.Scatter(0, S.Combine.MAX, True), 3, 1),
        (S.Sort(0), 1, 2),
        (S.Numbering(), 2, 1),
        (S.Assemble((2,), b"\x00", ((Range(0, 1),),) * 3), 3, 1),
        (S.Contract((), ((1, 0),), f32, init=True), 3, 1),
        (S.Fft((0,), S.Direction.FORWARD, S.R2c()), 1, 1),
        (S.Cholesky(upper=True), 1, 1),
        (S.Lu(), 1, 3),
        (S.Qr(complete=True), 1, 2),
        (S.Svd(None), 1, 1),
        (S.Eigh(), 1, 2),
        (S.Eig(), 1, 2),
        (S.SolveTriangular(False, True, True), 2, 1),
        (S.Attention(_attention_prog(), (S.PLAIN,), 1.0, f32, S.Paged(4), True), 6, 2),
    ]
    assert sorted(type(c).kernel for c, _, _ in cases) == sorted(S.KERNELS)  # type: ignore[attr-defined]
    for spec, n_operands, n_results in cases:
        assert (spec.n_operands(), spec.n_results()) == (n_operands, n_results), spec  # type: ignore[attr-defined]


def test_malformed_collections() -> None:
    with raises(r"spec\.Pad: lo must be a sequence of ints, got 3"):
        S.Pad(3, (0,), (0,))  # type: ignore[arg-type]
    with raises(r"spec\.Map: loads must be a sequence of loads"):
        S.Map(P1, S.PLAIN)  # type: ignore[arg-type]
    with raises(r"spec\.Reduce: reductions must be a sequence of sequences"):
        S.Reduce(P1, (S.PLAIN,), (), (S.Monoid.SUM,))  # type: ignore[arg-type]
    with raises(r"spec\.Reduce: axes .* are more than 32"):
        S.Reduce(P1, (S.PLAIN,), range(33), ((S.Monoid.SUM, 0, f32),))  # type: ignore[arg-type]
    with raises(r"spec\.Assemble: region 0's \(0, 1\) along axis 0 is not a Range"):
        S.Assemble((2,), b"\x00", (((0, 1),),))  # type: ignore[arg-type]


def test_specs_are_frozen_and_hashable() -> None:
    s = S.Sort(0)
    with pytest.raises(AttributeError):
        s.axis = 1  # type: ignore[misc]
    specs = {S.Sort(0), S.Sort(0), S.Gather(1), S.Contract((), ((1, 0),), f32)}
    assert len(specs) == 3

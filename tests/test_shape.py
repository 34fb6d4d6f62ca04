"""Shape: every kernel's destinations' shapes, its Errors, and the refusal rules."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nxkernel_core import dtype as D
from nxkernel_core import shape as SH
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.layout import Layout, Range, Window, Windows
from nxkernel_core.prog import Prog

f16, f32, f64, i32, i64, b8 = D.float16, D.float32, D.float64, D.int32, D.int64, D.bool_
P = S.PLAIN
ZERO = S.Pad((0, 0), (0, 0), (0, 0))


def err(result: object, match: str) -> None:
    """``result`` is an Error whose reason contains ``match``."""
    assert isinstance(result, SH.Error), result
    assert match in result.reason, result.reason


def two(dt: object = f32) -> Prog:
    b = Prog.build([dt, dt])  # type: ignore[list-item]
    x, y = b.ins
    return b.finish(x + y, x * y)


def padded(lo: tuple[int, ...], hi: tuple[int, ...], interior: tuple[int, ...],
           windows: tuple[Window, ...] = (), fill: bytes = bytes(4)) -> S.Padded:
    return S.Padded(fill, S.Pad(lo, hi, interior, windows))


# ---- padded --------------------------------------------------------------------


def test_padded_hand_worked() -> None:
    assert SH.padded((3,), S.Pad((1,), (2,), (1,))) == (8,)  # 1 + 3 + 2 + 1·2
    assert SH.padded((5, 4), S.Pad((-1, 0), (-2, 1), (0, 0))) == (2, 5)
    assert SH.padded((0,), S.Pad((1,), (1,), (3,))) == (2,)  # no neighbours in an empty axis
    # (5 − 1 − 1·2) // 2 + 1 = 2 windows of 3 taps; dilation 2: (6 − 1 − 2·1) // 1 + 1 = 4.
    assert SH.padded((5,), S.Pad((0,), (0,), (0,), (Window(0, 3, 2),))) == (2, 3)
    assert SH.padded((4, 3), S.Pad((1, 0), (1, 0), (0, 0), (Window(0, 2, 1, 2),))) == (4, 3, 2)
    assert SH.padded((4, 4), S.Pad((0, 0), (0, 0), (0, 0),
                                   (Window(0, 2, 2), Window(1, 3)))) == (2, 2, 2, 3)


def test_padded_errors() -> None:
    err(SH.padded((3,), S.Pad((-2,), (-2,), (0,))), "axis 0 of extent 3 padded by lo -2")
    err(SH.padded((3, 3), S.Pad((0,), (0,), (0,))), "a pad of rank 1 for an operand of shape")
    err(SH.padded((3,), S.Pad((0,), (0,), (0,), (Window(0, 4),))), "reaches 4 elements")
    err(SH.padded((0,), S.Pad((0,), (0,), (0,), (Window(0, 1),))), "past padded axis 0's 0")
    err(SH.padded((-1,), S.Pad((0,), (0,), (0,))), "has a negative extent")
    err(SH.padded((2**40, 2**40), S.Pad((0, 0), (0, 0), (0, 0))), "more than 2**62 elements")
    err(SH.padded((2**31,) * 2, S.Pad((0, 0), (0, 0), (0, 0), (Window(0, 2),))),
        "more than 2**62")


def _numpy_padded_length(d: int, lo: int, hi: int, interior: int) -> int:
    """The padded length by construction: interior zeros, then pad or crop."""
    x = np.ones(d)
    spread = np.zeros(max(d + interior * (d - 1), 0))
    spread[:: interior + 1] = x
    spread = np.concatenate([np.zeros(max(lo, 0)), spread, np.zeros(max(hi, 0))])
    return len(spread[max(-lo, 0): len(spread) - max(-hi, 0)])


@settings(max_examples=150, deadline=None)
@given(
    axes=st.lists(st.tuples(st.integers(0, 6), st.integers(-3, 3), st.integers(-3, 3),
                            st.integers(0, 2)), min_size=1, max_size=3),
    window=st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(1, 2)),
)
def test_padded_matches_construction(axes: list[tuple[int, int, int, int]],
                                     window: tuple[int, int, int]) -> None:
    shape = tuple(a[0] for a in axes)
    pad = S.Pad(tuple(a[1] for a in axes), tuple(a[2] for a in axes), tuple(a[3] for a in axes),
                (Window(0, *window),))
    ext = []
    for d, lo, hi, interior in axes:
        total = lo + hi + d + interior * max(d - 1, 0)
        ext.append(_numpy_padded_length(d, lo, hi, interior) if total >= 0 else -1)
    got = SH.padded(shape, pad)
    if min(ext) < 0:
        assert isinstance(got, SH.Error)
        return
    try:
        want = Layout.c_contiguous(ext).move(Windows(pad.windows))
    except ValueError:
        assert isinstance(got, SH.Error)
        return
    assert want is not None and got == want.shape


# ---- loops ---------------------------------------------------------------------


def test_map() -> None:
    m = S.Map(two(), (P, padded((0, 1), (0, 1), (0, 0))))
    assert SH.map(m, [(2, 5), (2, 3)]) == ((2, 5), (2, 5))
    err(SH.map(m, [(2, 5), (2, 4)]), "load 1 reads [2, 6], load 0 reads [2, 5]")
    err(SH.map(m, [(2, 5)]), "takes 2 operands (load 0, load 1), got 1")
    err(SH.map(m, [(1,) * 33, (1,) * 33]), "load 0 [1, 1, 1")
    err(SH.map(S.Map(Prog.fill(f32, bytes(4)), ()), []), "a loop with no load")
    assert SH.map(S.Map(Prog.identity(f32), (P,)), [()]) == ((),)


def test_reduce() -> None:
    r = S.Reduce(two(), (P, P), (0, 2), ((S.Monoid.SUM, 0, f32), (S.MOMENTS, 1, f32),
                                         (S.Arg(S.Extreme.MAX), 0, f32)))
    assert SH.reduce(r, [(2, 3, 4)] * 2) == ((3,),) * 5
    err(SH.reduce(r, [(2, 3)] * 2), "reduced axis 2 is not an axis of rank 2")
    err(SH.reduce(r, [(2, 3), (3, 2)]), "load 1 reads [3, 2]")
    err(SH.reduce(r, [(0, 3, 4)] * 2), "has no term")
    assert SH.reduce(r, [(2, 0, 4)] * 2) == ((0,),) * 5  # no result, so no Error
    s = S.Reduce(two(), (P, P), (1,), ((S.Monoid.SUM, 0, f32), (S.Monoid.PROD, 1, f32),
                                       (S.LOGSUMEXP, 0, f32), (S.MOMENTS, 1, f32)))
    assert SH.reduce(s, [(2, 0)] * 2) == ((2,),) * 5  # empty sums, products, lse, moments
    for m in (S.Monoid.MAX, S.Monoid.MIN, S.Arg(S.Extreme.MIN)):
        err(SH.reduce(S.Reduce(Prog.identity(f32), (P,), (1,), ((m, 0, f32),)), [(2, 0)]),
            "has no term")
    assert SH.reduce(S.Reduce(Prog.identity(f32), (P,), (), ((S.Monoid.MAX, 0, f32),)),
                     [(2, 3)]) == ((2, 3),)


def test_scan_and_carry() -> None:
    s = S.Scan(Prog.identity(f32), (P,), 1, S.Monoid.SUM, 0, f32, carry=True)
    assert SH.carry(s, (2, 5, 3)) == (2, 3)
    assert SH.scan(s, [(2, 3), (2, 5, 3)]) == ((2, 5, 3),)
    err(SH.scan(s, [(2, 5), (2, 5, 3)]), "the carry [2, 5] must be [2, 3]")
    err(SH.scan(s, [(2, 3)]), "takes 2 operands (the carry, load 0), got 1")
    err(SH.scan(s, [(2,), (4,)]), "the scanned axis 1 is not an axis of rank 1")
    moments = S.Scan(Prog.identity(f32), (P,), 0, S.MOMENTS, 0, f32, carry=True)
    assert SH.carry(moments, (4, 2)) == (2, 3)
    assert SH.scan(moments, [(2, 3), (4, 2)]) == ((4, 2), (4, 2))
    arg = S.Scan(Prog.identity(f32), (P,), 0, S.Arg(S.Extreme.MAX), 0, f32)
    assert SH.scan(arg, [(0, 2)]) == ((0, 2), (0, 2))  # every result has a term
    err(SH.carry(arg, (4,)), "an Arg scan takes no carry")
    err(SH.carry(s, (4,)), "the scanned axis 1 is not an axis of rank 1")


# ---- moves and folds -------------------------------------------------------------


def test_fold() -> None:
    f = S.Fold((5,), S.Pad((1,), (1,), (0,), (Window(0, 3),)))
    assert SH.fold(f, [(5, 3)]) == ((5,),)
    err(SH.fold(f, [(5,)]), "x [5] must be [5, 3], the padded [5]")
    err(SH.fold(S.Fold((1,), S.Pad((0,), (0,), (0,), (Window(0, 2),))), [(1, 2)]),
        "reaches 2 elements")


def test_fold_refusal_takes_the_dtypes_add_takes() -> None:
    """Fold adds by Prog's Add: bool and bit do not fit (upstream §2)."""
    for dt in D.all:
        want = None if dt.kind is not D.Kind.BOOLEAN else (
            Answer.WRONG_DTYPE, f"fold adds by Prog's Add, which does not take {dt.name}")
        assert SH.fold_refusal(dt, dt) == want
    assert SH.fold_refusal(D.float32, D.float64) == (
        Answer.WRONG_DTYPE, "dst is float64, x float32: fold keeps x's dtype")


def test_gather_and_range_gather() -> None:
    assert SH.gather(S.Gather(1), [(2, 7), (2, 3)]) == ((2, 7),)
    err(SH.gather(S.Gather(1), [(3, 7), (2, 3)]), "index [3, 7] must have x's rank")
    err(SH.gather(S.Gather(2), [(3, 7), (2, 3)]), "axis 2 is not an axis of rank 2")
    err(SH.gather(S.Gather(0), [(3,), (2, 3)]), "index [3] must have x's rank")
    assert SH.range_gather(S.RangeGather(1, 4), [(2, 6, 3), (2, 9, 3)]) == ((2, 6, 4, 3),)
    assert SH.range_gather(S.RangeGather(0, 0), [(5,), (2,)]) == ((5, 0),)
    err(SH.range_gather(S.RangeGather(1, 4), [(2, 6, 4), (2, 9, 3)]), "starts [2, 6, 4]")
    err(SH.range_gather(S.RangeGather(0, 1), [(1,) * 32, (1,) * 32]), "rank 33")


def test_scatter() -> None:
    sc = S.Scatter(0, S.Combine.ADD)
    assert SH.scatter(sc, [(5, 3), (8, 3), (8, 3)]) == ((5, 3),)
    err(SH.scatter(sc, [(5, 3), (8, 3), (8, 2)]), "index [8, 3] and updates [8, 2] differ")
    err(SH.scatter(sc, [(5, 3), (8, 2), (8, 2)]), "index [8, 2] must have into's rank")
    err(SH.scatter(S.Scatter(2, S.Combine.SET), [(5, 3), (8, 3), (8, 3)]), "axis 2 is not")


def test_sort() -> None:
    assert SH.sort(S.Sort(1), [(2, 7)]) == ((2, 7), (2, 7))
    assert SH.sort(S.Sort(0, k=2), [(3, 4)]) == ((2, 4), (2, 4))
    assert SH.sort(S.Sort(0, k=0), [(0, 4)]) == ((0, 4), (0, 4))
    err(SH.sort(S.Sort(0, k=4), [(3, 4)]), "k = 4 is above axis 0's extent 3")
    err(SH.sort(S.Sort(0), [()]), "axis 0 is not an axis of rank 0")


def test_numbering() -> None:
    n = S.Numbering(S.Side.RIGHT)
    assert SH.numbering(n, [(2, 5), (2, 9)]) == ((2, 9),)
    assert SH.numbering(n, [(0,), (4,)]) == ((4,),)
    err(SH.numbering(n, [(3, 5), (2, 9)]), "must be [b…; m] and [b…; n]")
    err(SH.numbering(n, [(), ()]), "must be [b…; m]")
    err(SH.numbering(n, [(2, 5), (1, 2, 9)]), "must be [b…; m]")


def test_assemble() -> None:
    a = S.Assemble((4, 6), b"\x00", ((Range(0, 2), Range(5, 3, -2)), (Range(0, 4), Range(0, 6))))
    assert SH.assemble(a, [(2, 3), (4, 6)]) == ((4, 6),)
    err(SH.assemble(a, [(2, 3), (4, 5)]), "piece 1 [4, 5] must be its region's [4, 6]")
    err(SH.assemble(a, [(2, 3)]), "takes 2 operands (piece 0, piece 1), got 1")
    assert SH.assemble(S.Assemble((3,), b"\x00", ()), []) == ((3,),)


# ---- contractions and transforms -------------------------------------------------


def test_contract_plain() -> None:
    mm = S.Contract(((0, 0),), ((2, 1),), f32)
    assert SH.contract(mm, [(2, 3, 4), (2, 4, 5)]) == ((2, 3, 5),)
    # einsum "ibj,kj->bik": batch b, then a's free i, then b's free k.
    e = S.Contract(((1, 0),), ((2, 2),), f32)
    assert SH.contract(e, [(3, 7, 4), (7, 5, 4)]) == ((7, 3, 5),)
    err(SH.contract(mm, [(2, 3, 4), (2, 3, 5)]), "contracting pair (2, 1) must name axes")
    err(SH.contract(mm, [(2, 3, 4), (3, 4, 5)]), "batch pair (0, 0)")
    err(SH.contract(mm, [(2, 3), (2, 4, 5)]), "contracting pair (2, 1)")
    outer = S.Contract((), (), i64)
    assert SH.contract(outer, [(2,), (3,)]) == ((2, 3),)
    err(SH.contract(outer, [(1,) * 16, (1,) * 17]), "the result [1, 1")
    dot = S.Contract((), ((0, 0),), f64)
    assert SH.contract(dot, [(0,), (0,)]) == ((),)


def test_contract_init_and_scales() -> None:
    c = S.Contract((), ((1, 0),), f32, init=True,
                   scales=(S.ScaleKind.EXPONENT, S.ScaleKind.VALUE))
    a, b = (4, 64), (64, 6)
    assert SH.contract(c, [a, b, (4, 6), (4, 2), (2, 6)]) == ((4, 6),)
    assert SH.contract(c, [a, b, (4, 6), (1, 1), (64, 1)]) == ((4, 6),)
    err(SH.contract(c, [a, b, (6, 4), (4, 2), (2, 6)]), "init [6, 4] must be the result's")
    err(SH.contract(c, [a, b, (4, 6), (4, 3), (2, 6)]), "a's scale [4, 3] must have")
    err(SH.contract(c, [a, b, (4, 6), (4, 2), (2,)]), "b's scale [2] must have")
    err(SH.contract(c, [a, b, (4, 6), (4, 0), (2, 6)]), "a's scale [4, 0]")
    empty = S.Contract((), ((1, 0),), f32, scales=(S.ScaleKind.VALUE, None))
    assert SH.contract(empty, [(4, 0), (0, 6), (2, 0)]) == ((4, 6),)
    assert SH.contract(empty, [(4, 0), (0, 6), (2, 5)]) == ((4, 6),)  # 5 divides 0
    err(SH.contract(empty, [(4, 0), (0, 6)]), "takes 3 operands (a, b, a's scale), got 2")


def test_contract_segments() -> None:
    # Grouped matmul: a [b=2; r=10; k=8], b [b=2; g=3; k=8; n=5], ids [2; 10].
    rows = S.Contract(((0, 0),), ((2, 2),), f32, segments=S.Rows(1, 1))
    assert SH.contract(rows, [(2, 10, 8), (2, 3, 8, 5), (2, 10)]) == ((2, 10, 5),)
    err(SH.contract(rows, [(2, 10, 8), (2, 3, 8, 5), (10,)]), "ids [10] must be [2, 10]")
    err(SH.contract(rows, [(2, 10), (2, 3, 8, 5), (2, 10)]), "contracting pair (2, 2)")
    err(SH.contract(S.Contract((), ((0, 0),), f32, segments=S.Rows(1, 2)),
                    [(4, 3), (4, 5), (3,)]), "Rows' b_axis 2 is not an axis of rank 2")
    err(SH.contract(S.Contract((), ((0, 0),), f32, segments=S.Rows(2, 1)),
                    [(4, 3), (4, 5), (3,)]), "Rows' a_axis 2 is not an axis of rank 2")
    # Per-group weight gradients: contracting over tokens t=12 cut into 4 groups.
    cs = S.Contract((), ((0, 0),), f32, init=True, segments=S.ContractingSegments(0, 4))
    assert SH.contract(cs, [(12, 3), (12, 5), (4, 3, 5), (12,)]) == ((4, 3, 5),)
    err(SH.contract(cs, [(12, 3), (12, 5), (3, 5), (12,)]), "init [3, 5] must be")
    err(SH.contract(cs, [(12, 3), (12, 5), (4, 3, 5), (3,)]), "ids [3] must be [12]")


def test_fft() -> None:
    fwd = S.Direction.FORWARD
    assert SH.fft(S.Fft((0, 1), fwd, S.C2c()), [(4, 6)]) == ((4, 6),)
    assert SH.fft(S.Fft((0, 1), fwd, S.R2c()), [(4, 6)]) == ((4, 4),)
    assert SH.fft(S.Fft((1,), fwd, S.R2c()), [(4, 7)]) == ((4, 4),)
    assert SH.fft(S.Fft((0,), fwd, S.R2c()), [(0, 3)]) == ((1, 3),)
    inv = S.Direction.INVERSE
    assert SH.fft(S.Fft((0, 1), inv, S.C2r(6)), [(4, 4)]) == ((4, 6),)
    assert SH.fft(S.Fft((1,), inv, S.C2r(7)), [(2, 4)]) == ((2, 7),)
    err(SH.fft(S.Fft((1,), inv, S.C2r(8)), [(2, 4)]), "C2r of 8 points reads 5 bins")
    err(SH.fft(S.Fft((2,), fwd, S.C2c()), [(2, 4)]), "transformed axis 2 is not an axis")


# ---- matrix routines -------------------------------------------------------------


def test_routines() -> None:
    assert SH.cholesky(S.Cholesky(), [(3, 4, 4)]) == ((3, 4, 4),)
    err(SH.cholesky(S.Cholesky(), [(4, 3)]), "a [4, 3] must be [..., m, n] with m = n")
    err(SH.cholesky(S.Cholesky(), [(4,)]), "a [4] must be [..., m, n]")
    assert SH.lu(S.Lu(), [(2, 5, 3)]) == ((2, 5, 3), (2, 3), (2, 5))
    assert SH.qr(S.Qr(), [(5, 3)]) == ((5, 3), (3, 3))
    assert SH.qr(S.Qr(complete=True), [(5, 3)]) == ((5, 5), (5, 3))
    assert SH.qr(S.Qr(), [(3, 5)]) == ((3, 3), (3, 5))
    assert SH.svd(S.Svd(), [(7, 5, 3)]) == ((7, 5, 3), (7, 3), (7, 3, 3))
    assert SH.svd(S.Svd(S.Factors.COMPLETE), [(5, 3)]) == ((5, 5), (3,), (3, 3))
    assert SH.svd(S.Svd(None), [(2, 6)]) == ((2,),)
    assert SH.eigh(S.Eigh(), [(2, 3, 3)]) == ((2, 3), (2, 3, 3))
    assert SH.eigh(S.Eigh(False), [(3, 3)]) == ((3,),)
    assert SH.eig(S.Eig(), [(0, 0)]) == ((0,), (0, 0))
    err(SH.eig(S.Eig(False), [(2, 3)]), "with m = n")
    st_ = S.SolveTriangular()
    assert SH.solve_triangular(st_, [(2, 4, 4), (2, 4, 7)]) == ((2, 4, 7),)
    err(SH.solve_triangular(st_, [(2, 4, 4), (3, 4, 7)]), "must be [..., n, n] and [..., n, k]")
    err(SH.solve_triangular(st_, [(4, 4), (5, 1)]), "must be [..., n, n]")
    err(SH.solve_triangular(st_, [(4, 4), (4,)]), "must be [..., n, n]")


# ---- attention -----------------------------------------------------------------


def attention_prog(n_loads: int = 1, reads_score: bool = False, coord: int | None = None,
                   score: object = f32, out1: object = None) -> Prog:
    """Visibility: load 0 below 1 (or the score, where ``reads_score``); logit:
    the score plus every load (and a Coord, where given)."""
    b = Prog.build([score] + [f32] * n_loads)  # type: ignore[arg-type]
    s, *loads = b.ins
    vis = b.less(s if reads_score else loads[0], 1.0)
    logit = s
    for x in loads:
        logit = logit + (x if x.dtype is logit.dtype else b.cast(x, logit.dtype))
    if coord is not None:
        logit = logit + b.cast(b.coord(coord), logit.dtype)
    if out1 is not None:
        logit = b.cast(logit, out1)  # type: ignore[arg-type]
    return b.finish(vis, logit)


def test_attention_dense() -> None:
    a = S.Attention(attention_prog(), (P,), 0.125, f32, S.Dense(), lengths=True)
    q, k, v = (2, 8, 5, 16), (2, 2, 9, 16), (2, 2, 9, 32)
    assert SH.attention(a, [q, k, v, (2,), (2, 8, 5, 9)]) == ((2, 8, 5, 32), (2, 8, 5))
    err(SH.attention(a, [q, k, v, (3,), (2, 8, 5, 9)]), "lengths [3] must be")
    err(SH.attention(a, [q, k, v, (2,), (2, 8, 5, 8)]), "load 0 reads [2, 8, 5, 8], the loop")
    err(SH.attention(a, [q, (2, 3, 9, 16), (2, 3, 9, 32), (2,), (2, 8, 5, 9)]),
        "3 key heads do not divide 8 query heads")
    err(SH.attention(a, [q, (2, 2, 9, 15), v, (2,), (2, 8, 5, 9)]), "k [2, 2, 9, 15] must be")
    err(SH.attention(a, [q, k, (2, 2, 8, 32), (2,), (2, 8, 5, 9)]), "v [2, 2, 8, 32] must be")
    err(SH.attention(a, [(8, 16), k, v, (2,), (2, 8, 5, 9)]), "q [8, 16] must be")
    bare = S.Attention(attention_prog(), (padded((0, 0, 0), (0, 0, 0), (0, 0, 0)),), 1.0, f32,
                       S.Dense())
    # No lead axes; the mask comes broadcast to [hq, tq, tk] by the caller.
    assert SH.attention(bare, [(4, 3, 8), (1, 6, 8), (1, 6, 2), (4, 3, 6)]) \
        == ((4, 3, 2), (4, 3))
    assert SH.attention(bare, [(0, 3, 8), (0, 6, 8), (0, 6, 2), (0, 3, 6)]) \
        == ((0, 3, 2), (0, 3))


def test_attention_paged() -> None:
    a = S.Attention(attention_prog(), (P,), 0.125, f32, S.Paged(16))
    q, kp, vp, table = (3, 4, 1, 64), (10, 2, 16, 64), (10, 2, 16, 128), (3, 5)
    assert SH.attention(a, [q, kp, vp, table, (3, 4, 1, 80)]) == ((3, 4, 1, 128), (3, 4, 1))
    err(SH.attention(a, [q, (10, 2, 8, 64), vp, table, (3, 4, 1, 80)]),
        "k [10, 2, 8, 64] must be [pages; hk; 16; 64]")
    err(SH.attention(a, [q, kp, (10, 1, 16, 128), table, (3, 4, 1, 80)]), "v [10, 1, 16, 128]")
    err(SH.attention(a, [q, kp, vp, (2, 5), (3, 4, 1, 80)]), "table [2, 5] must be")
    err(SH.attention(a, [q, kp, vp, table]), "takes 5 operands (q, k, v, table, load 0)")


# ---- refusal rules ---------------------------------------------------------------


def test_map_refusal_fits() -> None:
    p = two()
    b = Prog.build([f32])
    coord = b.finish(b.ins[0] + b.cast(b.coord(1), f32))
    win = padded((0,), (0,), (0,), (Window(0, 2),))
    assert SH.map_refusal(p, 2, [f32, f32], [f32, f32], [P, padded((0, 0), (1, 1), (0, 0))]) \
        is None
    assert SH.map_refusal(coord, 2, [f32], [f32], [win]) is None


@pytest.mark.parametrize(
    ("rank", "dsts", "loads", "specs", "answer", "why"),
    [
        (1, [f32, f32], [f32], [P], Answer.BAD_ARITY, "1 loads where the program takes 2"),
        (1, [f32, f32], [f32, f32], [P], Answer.BAD_ARITY, "1 load specs for 2 loads"),
        (1, [f32], [f32, f32], [P, P], Answer.BAD_ARITY, "1 destinations where"),
        (1, [f32, f32], [f32, f64], [P, P], Answer.WRONG_DTYPE, "load 1 is float64"),
        (1, [f32, f32], [f32, f32], [P, padded((0,), (0,), (0,), fill=bytes(2))],
         Answer.WRONG_DTYPE, "load 1's fill has 2 bytes, a float32 element 4"),
        (1, [f32, f64], [f32, f32], [P, P], Answer.WRONG_DTYPE, "destination 1 is float64"),
        (33, [f32, f32], [f32, f32], [P, P], Answer.SHAPE_MISMATCH, "a loop of rank 33"),
        (-1, [f32, f32], [f32, f32], [P, P], Answer.SHAPE_MISMATCH, "a loop of rank -1"),
        (2, [f32, f32], [f32, f32], [P, padded((0,), (0,), (0,))], Answer.SHAPE_MISMATCH,
         "load 1 pads rank 1 with 0 windows, reading rank 1 in a loop of rank 2"),
    ],
)
def test_map_refusal(rank: int, dsts: list[D.Dtype], loads: list[D.Dtype],
                     specs: list[S.Load], answer: Answer, why: str) -> None:
    got = SH.map_refusal(two(), rank, dsts, loads, specs)
    assert got is not None and got[0] is answer and why in got[1], got


def test_map_refusal_no_load_and_coord() -> None:
    got = SH.map_refusal(Prog.fill(f32, bytes(4)), 1, [f32], [], [])
    assert got == (Answer.BAD_ARITY, "a loop takes at least one load")
    got = SH.map_refusal(Prog.iota(f32, 2), 2, [f32], [], [])
    assert got is not None and got[0] is Answer.BAD_ARITY
    b = Prog.build([f32])
    coord = b.finish(b.ins[0] + b.cast(b.coord(2), f32))
    assert SH.map_refusal(coord, 2, [f32], [f32], [P]) == (
        Answer.SHAPE_MISMATCH, "the program reads Coord axis 2 of a loop of rank 2")


SUM, MAX, LSE, MOM = S.Monoid.SUM, S.Monoid.MAX, S.LOGSUMEXP, S.MOMENTS
ARG = S.Arg(S.Extreme.MAX)


def test_reduce_refusal_fits() -> None:
    p = two()
    rs: list[tuple[S.Reduction, int, D.Dtype]] = [(SUM, 0, f32), (MOM, 1, f64), (ARG, 0, f32)]
    assert SH.reduce_refusal(p, 2, rs, [f32, f64, f64, f32, i64], [f32, f32], [P, P]) is None
    bf = Prog.identity(D.bfloat16)
    assert SH.reduce_refusal(bf, 1, [(SUM, 0, f32)], [f32], [D.bfloat16], [P]) is None
    ints = Prog.identity(i32)
    assert SH.reduce_refusal(ints, 0, [(MAX, 0, i32)], [i32], [i32], [P]) is None


@pytest.mark.parametrize(
    ("rs", "dsts", "loads", "answer", "why"),
    [
        ([], [], [f32, f32], Answer.BAD_ARITY, "no reduction"),
        ([(SUM, 2, f32)], [f32], [f32, f32], Answer.BAD_ARITY, "output 2 is not one of"),
        ([(SUM, -1, f32)], [f32], [f32, f32], Answer.BAD_ARITY, "output -1 is not one of"),
        ([(MOM, 0, f32)], [f32], [f32, f32], Answer.BAD_ARITY, "1 destinations where the "
                                                                "program takes 2"),
        ([(SUM, 0, f32)], [f32], [f32], Answer.BAD_ARITY, "1 loads where the program takes 2"),
        ([(SUM, 0, f32)], [f32], [f32, i32], Answer.WRONG_DTYPE, "load 1 is int32"),
        ([(MAX, 0, f64)], [f64], [f32, f32], Answer.WRONG_DTYPE,
         "does not round into float64"),
        ([(ARG, 1, f32)], [f32, i32], [f32, f32], Answer.WRONG_DTYPE,
         "destination 1 is int32, the reduction's result's dtype is int64"),
        ([(SUM, 0, f32)], [f64], [f32, f32], Answer.WRONG_DTYPE, "destination 0 is float64"),
    ],
)
def test_reduce_refusal(rs: list[tuple[S.Reduction, int, D.Dtype]], dsts: list[D.Dtype],
                        loads: list[D.Dtype], answer: Answer, why: str) -> None:
    got = SH.reduce_refusal(two(), 1, rs, dsts, loads, [P] * len(loads))
    assert got is not None and got[0] is answer and why in got[1], got


def test_reduce_refusal_rules_of_dtypes_and_rank() -> None:
    ints = Prog.identity(i32)
    got = SH.reduce_refusal(ints, 1, [(LSE, 0, i32)], [i32], [i32], [P])
    assert got == (Answer.WRONG_DTYPE, f"{LSE} does not reduce output 0's int32")
    bools = Prog.identity(b8)
    got = SH.reduce_refusal(bools, 1, [(SUM, 0, b8)], [b8], [b8], [P])
    assert got is not None and got[0] is Answer.WRONG_DTYPE
    got = SH.reduce_refusal(ints, 1, [(SUM, 0, i64)], [i64], [i32], [P])
    assert got is not None and got[0] is Answer.WRONG_DTYPE and "round into int64" in got[1]
    got = SH.reduce_refusal(ints, 1, [(SUM, 0, i32)], [i32], [i32],
                            [padded((0,), (0,), (0,), fill=bytes(8))])
    assert got is not None and got[0] is Answer.WRONG_DTYPE and "fill has 8 bytes" in got[1]
    got = SH.reduce_refusal(ints, 1, [(SUM, 0, i32)], [i32], [i32],
                            [padded((0, 0), (0, 0), (0, 0))])
    assert got is not None and got[0] is Answer.SHAPE_MISMATCH
    got = SH.reduce_refusal(Prog.fill(f32, bytes(4)), 1, [(SUM, 0, f32)], [f32], [], [])
    assert got == (Answer.BAD_ARITY, "a loop takes at least one load")


def test_reduce_refusal_too_many() -> None:
    b = Prog.build([f32] * 15)
    wide = b.finish(b.ins[0])
    got = SH.reduce_refusal(wide, 1, [(ARG, 0, f32)], [f32, i64], [f32] * 15, [P] * 15)
    assert got == (Answer.BAD_ARITY, "17 operands and destinations, above 16")


def test_scan_refusal_fits() -> None:
    p = Prog.identity(D.float16)
    h = D.float16
    assert SH.scan_refusal(p, 1, SUM, 0, [h], f32, [h], [P]) is None
    assert SH.scan_refusal(p, 2, MOM, 0, [f32, f32], f32, [h], [P]) is None
    assert SH.scan_refusal(p, 1, ARG, 0, [h, i64], None, [h], [P]) is None
    assert SH.scan_refusal(p, 1, LSE, 0, [h], None, [h], [P]) is None


@pytest.mark.parametrize(
    ("r", "output", "dsts", "carry", "rank", "answer", "why"),
    [
        (SUM, 1, [f16], None, 1, Answer.BAD_ARITY, "output 1 is not one of"),
        (MOM, 0, [f16], None, 1, Answer.BAD_ARITY, "1 destinations where the program takes 2"),
        (ARG, 0, [f16, i64], f32, 1, Answer.BAD_ARITY, "an Arg scan takes no carry"),
        (SUM, 0, [i64], None, 1, Answer.WRONG_DTYPE, "does not round into int64"),
        (MAX, 0, [f32], None, 1, Answer.WRONG_DTYPE, "does not round into float32"),
        (MOM, 0, [f32, f16], None, 1, Answer.WRONG_DTYPE, "destination 1 is float16"),
        (ARG, 0, [f16, i32], None, 1, Answer.WRONG_DTYPE, "destination 1 is int32"),
        (SUM, 0, [f16], f16, 1, Answer.WRONG_DTYPE, "the carry is float16, the carrier of "
                                                   "float16 is float32"),
        (SUM, 0, [f16], None, 0, Answer.SHAPE_MISMATCH, "a loop of rank 0, not in [1, 32]"),
    ],
)
def test_scan_refusal(r: S.Reduction, output: int, dsts: list[D.Dtype], carry: D.Dtype | None,
                      rank: int, answer: Answer, why: str) -> None:
    b = Prog.build([f16])
    p = b.finish(b.ins[0])
    got = SH.scan_refusal(p, rank, r, output, dsts, carry, [f16], [P])
    assert got is not None and got[0] is answer and why in got[1], got


def test_scan_refusal_loads_and_program() -> None:
    p = Prog.identity(i32)
    got = SH.scan_refusal(p, 1, LSE, 0, [i32], None, [i32], [P])
    assert got is not None and got[0] is Answer.WRONG_DTYPE and "does not reduce" in got[1]
    got = SH.scan_refusal(p, 1, SUM, 0, [i32], None, [i64], [P])
    assert got is not None and got[0] is Answer.WRONG_DTYPE and "load 0 is int64" in got[1]
    got = SH.scan_refusal(p, 1, SUM, 0, [i32], None, [], [])
    assert got == (Answer.BAD_ARITY, "a loop takes at least one load")
    b = Prog.build([f32] * 14)
    wide = b.finish(b.ins[0])
    assert SH.scan_refusal(wide, 1, SUM, 0, [f32], f32, [f32] * 14, [P] * 14) is None
    got = SH.scan_refusal(wide, 1, MOM, 0, [f32, f32], f32, [f32] * 14, [P] * 14)
    assert got == (Answer.BAD_ARITY, "17 operands and destinations, above 16")


def test_attention_refusal_fits() -> None:
    p = attention_prog(2, coord=1)
    loads = [f32, f32]
    specs: list[S.Load] = [P, padded((0, 0, 0, 0), (0, 0, 0, 0), (0, 0, 0, 0))]
    assert SH.attention_refusal(p, D.bfloat16, 4, D.bfloat16, f32, loads, specs) is None
    p64 = attention_prog(1, score=f64, out1=f64)
    assert SH.attention_refusal(p64, f16, 3, f32, f64, [f32], [P]) is None


@pytest.mark.parametrize(
    ("prog", "q", "rank", "o", "acc", "loads", "answer", "why"),
    [
        (attention_prog(2), f32, 3, f32, f32, [f32], Answer.BAD_ARITY,
         "1 loads where the program takes 2"),
        (attention_prog(1, reads_score=True), f32, 3, f32, f32, [f32], Answer.BAD_ARITY,
         "output 0 (visibility) reads the score"),
        (attention_prog(1), f32, 3, f32, f16, [f32], Answer.WRONG_DTYPE,
         "the accumulator is float16, not float32 or float64"),
        (attention_prog(1), i32, 3, f32, f32, [f32], Answer.WRONG_DTYPE, "q is int32"),
        (attention_prog(1), f32, 3, D.complex64, f32, [f32], Answer.WRONG_DTYPE,
         "o is complex64"),
        (attention_prog(1), f32, 3, f32, f64, [f32], Answer.WRONG_DTYPE,
         "the score is float32, the accumulator float64"),
        (attention_prog(1), f32, 3, f32, f32, [f64], Answer.WRONG_DTYPE, "load 0 is float64"),
        (attention_prog(1, out1=f64), f32, 3, f32, f32, [f32], Answer.WRONG_DTYPE,
         "output 1 is float64, the accumulator float32"),
        (attention_prog(1), f32, 2, f32, f32, [f32], Answer.SHAPE_MISMATCH,
         "a loop of rank 2, not in [3, 32]"),
        (attention_prog(1, coord=3), f32, 3, f32, f32, [f32], Answer.SHAPE_MISMATCH,
         "Coord axis 3 of a loop of rank 3"),
    ],
)
def test_attention_refusal(prog: Prog, q: D.Dtype, rank: int, o: D.Dtype, acc: D.Dtype,
                           loads: list[D.Dtype], answer: Answer, why: str) -> None:
    got = SH.attention_refusal(prog, q, rank, o, acc, loads, [P] * len(loads))
    assert got is not None and got[0] is answer and why in got[1], got


def test_attention_refusal_program_shape() -> None:
    b = Prog.build([])
    no_score = b.finish(b.const(b8, True), b.const(f32, 0.0))
    got = SH.attention_refusal(no_score, f32, 3, f32, f32, [], [])
    assert got == (Answer.BAD_ARITY, "the program reads no score (input 0)")
    got = SH.attention_refusal(Prog.identity(f32), f32, 3, f32, f32, [], [])
    assert got == (Answer.BAD_ARITY, "the program has 1 outputs, not 2")
    p = attention_prog(1)
    got = SH.attention_refusal(p, f32, 3, f32, f32, [f32], [])
    assert got == (Answer.BAD_ARITY, "0 load specs for 1 loads")
    got = SH.attention_refusal(p, f32, 3, f32, f32, [f32], [padded((0,), (0,), (0,),
                                                                   fill=b"\x00")])
    assert got is not None and got[0] is Answer.WRONG_DTYPE and "fill has 1 bytes" in got[1]
    got = SH.attention_refusal(p, f32, 4, f32, f32, [f32], [padded((0,) * 3, (0,) * 3, (0,) * 3)])
    assert got is not None and got[0] is Answer.SHAPE_MISMATCH and "load 0 pads rank 3" in got[1]
    b = Prog.build([f32, f32])
    s, m = b.ins
    not_bool = b.finish(m, s + m)
    got = SH.attention_refusal(not_bool, f32, 3, f32, f32, [f32], [P])
    assert got == (Answer.WRONG_DTYPE, "output 0 is float32, not bool")


def test_contract_refusal_counts_shapes_then_dtypes() -> None:
    plain = S.Contract(((0, 0),), ((2, 1),), D.float32)
    shapes = [(2, 3, 4), (2, 4, 5)]
    f32 = [D.float32, D.float32]
    assert SH.contract_refusal(plain, [(2, 3, 5)], shapes, f32) is None
    assert SH.contract_refusal(plain, [], shapes, f32) is Answer.BAD_ARITY
    assert SH.contract_refusal(plain, [(2, 3, 5)], shapes[:1], f32[:1]) is Answer.BAD_ARITY
    assert SH.contract_refusal(plain, [(2, 5, 3)], shapes, f32) is Answer.SHAPE_MISMATCH
    assert SH.contract_refusal(plain, [(2, 3, 5)], [(2, 3, 4), (2, 3, 5)], f32) \
        is Answer.SHAPE_MISMATCH
    scaled = S.Contract((), ((1, 0),), D.float32, scales=(S.ScaleKind.EXPONENT, None))
    ops = [(2, 4), (4, 3), (2, 1)]
    assert SH.contract_refusal(scaled, [(2, 3)], ops, [D.float32] * 2 + [D.uint8]) is None
    assert SH.contract_refusal(scaled, [(2, 3)], ops, [D.float32] * 3) is Answer.WRONG_DTYPE

"""nxkernel_core.masks: a mask program that ``band`` accepts holds exactly on
the keys of ``Band.intervals`` at every row (checked against the reference
evaluator at every (row, key) of a small grid, for random And/Or trees of
affine comparisons), ``merged`` keeps the union of the intervals clipped to
the keys, and programs outside the form are refused (None)."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from hypothesis import given, settings
from hypothesis import strategies as st

from nxkernel_core import dtype as D
from nxkernel_core import masks
from nxkernel_core.evaluator import evaluate
from nxkernel_core.prog import Builder, Prog, Value

Arr = npt.NDArray[Any]
ROWS, KEYS = 9, 13

_COMPARES = ("less", "less_equal", "equal", "not_equal")


@st.composite
def _affine(draw: st.DrawFn, b: Builder, row: Value, key: Value) -> Value:
    """a·row + key·β + c, β in {−1, 0, 1}, built from Coord, Const, Add, Sub, Mul and Neg."""
    a, c = draw(st.integers(-2, 2)), draw(st.integers(-6, 6))
    beta = draw(st.sampled_from((-1, 0, 1)))
    v = row * b.const(D.int64, a) + b.const(D.int64, c)
    if beta == 1:
        v = v + key
    elif beta == -1:
        v = v - key
    return -v if draw(st.booleans()) else v


@st.composite
def _tree(draw: st.DrawFn, b: Builder, row: Value, key: Value, depth: int = 0) -> Value:
    """A comparison of two affine values (one without the key, so the half
    plane's key coefficient stays in {−1, 0, 1}), or an And/Or of two trees."""
    if depth < 2 and draw(st.booleans()):
        x, y = draw(_tree(b, row, key, depth + 1)), draw(_tree(b, row, key, depth + 1))
        return b.and_(x, y) if draw(st.booleans()) else b.or_(x, y)
    lhs = draw(_affine(b, row, key))
    rhs = row * b.const(D.int64, draw(st.integers(-2, 2))) + b.const(D.int64, draw(st.integers(-6, 6)))
    op = draw(st.sampled_from(_COMPARES))
    return getattr(b, op)(lhs, rhs) if draw(st.booleans()) else getattr(b, op)(rhs, lhs)


@st.composite
def _mask_programs(draw: st.DrawFn) -> Prog:
    b = Prog.build([D.float32])
    row, key = b.coord(1), b.coord(0)
    return b.finish(draw(_tree(b, row, key)), b.copy(b.ins[0]))


def _truth(prog: Prog) -> Arr:
    """Output 0 at every (row, key) of the grid, by the reference evaluator."""
    x = np.zeros((ROWS, KEYS), np.float32)
    return np.asarray(evaluate(prog, [x], (ROWS, KEYS))[0]).astype(bool)


def _covered(ivs: masks.Intervals, rows: Arr) -> Arr:
    keys = np.arange(KEYS)[None, :]
    out = np.zeros((len(rows), KEYS), bool)
    for lo, hi in ivs:
        out |= (lo[:, None] <= keys) & (keys < hi[:, None])
    return out


@settings(max_examples=150, deadline=None, derandomize=True)
@given(_mask_programs())
def test_a_band_holds_exactly_on_its_intervals(prog: Prog) -> None:
    band = masks.band(prog)
    assert band is not None, "an And/Or of affine comparisons is a band"
    assert band.exact_for(ROWS, KEYS)
    rows = np.arange(ROWS, dtype=np.int64)
    want = _truth(prog)
    np.testing.assert_array_equal(_covered(band.intervals(rows), rows), want)
    merged = masks.merged(band.intervals(rows), KEYS)
    np.testing.assert_array_equal(_covered(merged, rows), want)
    for lo, hi in merged:
        assert np.all((lo >= 0) & (hi <= KEYS))


def test_constant_masks_are_all_keys_or_none() -> None:
    rows = np.arange(ROWS, dtype=np.int64)
    for value in (True, False):
        b = Prog.build([D.float32])
        prog = b.finish(b.const(D.bool_, value), b.copy(b.ins[0]))
        band = masks.band(prog)
        assert band is not None
        np.testing.assert_array_equal(_covered(masks.merged(band.intervals(rows), KEYS), rows),
                                      np.full((ROWS, KEYS), value))


def test_programs_outside_the_form_are_no_band() -> None:
    b = Prog.build([D.float32])
    row, key = b.coord(1), b.coord(0)
    every_third = b.not_equal((row + key) % b.const(D.int64, 3), b.const(D.int64, 0))
    assert masks.band(b.finish(every_third, b.copy(b.ins[0]))) is None
    b = Prog.build([D.float32])
    row, key = b.coord(1), b.coord(0)
    narrow = b.less_equal(b.cast(key, D.int32), b.cast(row, D.int32))
    assert masks.band(b.finish(narrow, b.copy(b.ins[0]))) is None
    b = Prog.build([D.float32])
    row, key = b.coord(1), b.coord(0)
    steep = b.less_equal(key * b.const(D.int64, 2), row)
    assert masks.band(b.finish(steep, b.copy(b.ins[0]))) is None


def test_large_constants_are_not_exact() -> None:
    b = Prog.build([D.float32])
    row, key = b.coord(1), b.coord(0)
    far = b.less_equal(key, row + b.const(D.int64, 1 << 61))
    band = masks.band(b.finish(far, b.copy(b.ins[0])))
    assert band is not None and not band.exact_for(4, 4)

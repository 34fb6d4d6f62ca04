"""The exact references of ``nxkernel_core.exact`` on cases worked by hand, and
the kit's generators on what they promise."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from nxkernel_core import dtype as D
from nxkernel_core import exact as O
from nxkernel_core import shape as SH
from nxkernel_core import spec as S
from nxkernel_core.conformance import generators as G
from nxkernel_core.layout import Range, Window


def test_order_keys_put_negative_zero_below_positive_and_nans_last() -> None:
    x = np.array([np.nan, 1.0, -0.0, 0.0, -np.inf, -np.nan])
    values, positions = O.sort(x, D.float64, 0, False, None)
    assert positions.tolist() == [4, 2, 3, 1, 0, 5]
    assert np.signbit(values[1]) and not np.signbit(values[2])
    _, down = O.sort(x, D.float64, 0, True, 3)
    assert down.tolist() == [0, 5, 1]  # NaNs first, stable among themselves


def test_numbering_counts_in_the_total_order() -> None:
    keys = np.array([[-0.0, 0.0, 1.0, np.nan]])
    x = np.array([[0.0, -0.0, np.nan, 2.0]])
    assert O.numbering(keys, x, D.float64, right=False).tolist() == [[1, 0, 3, 3]]
    assert O.numbering(keys, x, D.float64, right=True).tolist() == [[2, 1, 4, 3]]


def test_gathers_read_zero_bits_outside() -> None:
    x = np.array([[1.5, -2.0, 3.0]], dtype=np.float32)
    assert O.gather(x, np.array([[2, -1, 3, 0]]), 1).tolist() == [[3.0, 0.0, 0.0, 1.5]]
    assert O.range_gather(x, np.array([[1, 2]]), 1, 2).tolist() == [[[-2.0, 3.0], [3.0, 0.0]]]


def test_scatter_set_keeps_the_last_update_and_drops_outside() -> None:
    out, chains = O.scatter(np.zeros(3), np.array([1, 1, 7]), np.array([5.0, 6.0, 9.0]), 0,
                            S.Combine.SET)
    assert out.tolist() == [0.0, 6.0, 0.0]
    assert [len(c) for c in chains] == [1, 3, 1]


def test_assemble_lets_the_last_piece_win() -> None:
    fill = np.float32(7).tobytes()
    regions = ((Range(0, 2, 1),), (Range(1, 2, 1),))
    out = O.assemble((4,), D.float32, fill, regions, [np.array([1, 2], np.float32),
                                                      np.array([3, 4], np.float32)])
    assert out.tolist() == [1.0, 3.0, 4.0, 7.0]


def test_pad_and_fold_sources_agree_with_shape() -> None:
    p = S.Pad((1, -1), (0, 2), (1, 0), (Window(1, 2, 1, 1),))
    x = np.arange(6, dtype=np.int64).reshape(2, 3)
    padded = O.pad(x, D.int64, np.int64(-1).tobytes(), p)
    assert padded.shape == SH.padded((2, 3), p)
    assert (O.fold_sources((2, 3), p) == padded).all()


def test_exact_sums_and_bounds() -> None:
    sums, absum = O.exact_sums(np.array([[1e16, 1.0, -1e16], [np.inf, -np.inf, 0.0]]))
    assert sums[0] == 1.0 and math.isnan(sums[1])
    assert absum[0] == 2e16 + 1
    prefix, _ = O.exact_prefix_sums(np.array([[1e16, 1.0, -1e16, 0.5]]))
    assert prefix.tolist() == [[1e16, 1e16, 1.0, 1.5]]
    assert O.within(D.float16, np.float16(65504), 65519.0, 0.0)
    assert not O.within(D.float32, np.float32(1.0), 1.0 + 2**-20, 0.0)


@given(st.floats(allow_nan=False, allow_infinity=False, width=32),
       st.floats(allow_nan=False, allow_infinity=False, width=32))
@settings(max_examples=50, deadline=None)
def test_two_product_is_exact(a: float, b: float) -> None:
    p, e = O.two_product(np.array([a]), np.array([b]))
    if math.isfinite(p[0]) and (p[0] == 0 or abs(p[0]) > 1e-290):
        from fractions import Fraction

        assert Fraction(float(p[0])) + Fraction(float(e[0])) == Fraction(a) * Fraction(b)


def test_reduce_fixed_takes_the_first_extreme_and_the_first_nan() -> None:
    rows = np.array([[0.0, -0.0, 0.0], [1.0, np.nan, np.nan]])
    value, pos, nan = O.reduce_fixed(D.float64, rows, S.Arg(S.Extreme.MIN))
    assert pos is not None and pos.tolist() == [1, 1] and nan.tolist() == [False, True]
    assert np.signbit(value[0])
    wrapped, _, _ = O.reduce_fixed(D.int8, np.array([[100, 100]], np.int8), S.Monoid.SUM)
    assert wrapped.tolist() == [-56]


def test_reduce_fixed_stores_an_e5m2_infinity_as_a_reduction_does() -> None:
    # A reduction's extreme rounds into its destination (no e5m2 infinity);
    # a scatter's Max keeps the winning term's bits.
    e5m2 = D.float8_e5m2
    rows = np.array([[0x3C, 0x7C, 0x7B], [0xFC, 0x7E, 0x3C]], np.uint8).view(e5m2.numpy_dtype)
    value, pos, nan = O.reduce_fixed(e5m2, rows, S.Arg(S.Extreme.MAX))
    assert value.view(np.uint8)[0] == 0x7B and pos is not None and pos.tolist() == [1, 1]
    assert nan.tolist() == [False, True]
    kept, _, _ = O.reduce_fixed(e5m2, rows, S.Monoid.MAX, in_carrier=False)
    assert kept.view(np.uint8)[0] == 0x7C


def test_dft_is_unnormalised() -> None:
    x = np.array([1.0, 2.0, 3.0, 4.0])
    y = O.dft(x, (0,), S.Direction.FORWARD, S.R2c())
    assert np.allclose(y, np.fft.rfft(x))
    back = O.dft(y, (0,), S.Direction.INVERSE, S.C2r(4))
    assert np.allclose(back, 4 * x)


def test_specials_hold_the_promised_values() -> None:
    f16 = G.specials(D.float16).astype(np.float64)
    assert 65504.0 in f16 and 0.5 in f16 and 2.5 in f16
    assert O.is_signalling(D.float16, G.specials(D.float16)).any()
    assert 448.0 in G.specials(D.float8_e4m3fn).astype(np.float64)
    assert 2**62 + 2**38 + 1 in G.specials(D.int64).tolist()


@given(st.data())
@settings(max_examples=30, deadline=None)
def test_values_are_of_their_dtype(data: st.DataObject) -> None:
    dt = data.draw(G.dtypes())
    shape = data.draw(G.shapes(max_rank=3))
    v = G.values(dt, shape, data.draw(G.profiles()), data.draw(st.integers(0, 99)))
    assert v.shape == shape and v.dtype == dt.numpy_dtype


def test_exact_prefix_sums_bar_overflow_without_raising() -> None:
    # Finite terms whose partials overflow to both infinities (math.fsum would
    # raise): no exact value is claimed there, and Σ|x| says why.
    big = float(np.finfo(np.float64).max)
    sums, absum = O.exact_prefix_sums(np.array([[big, big, -big, -big, 1.0]]))
    assert sums[0, 0] == big and not np.isfinite(sums[0, 2:]).any()
    assert np.isinf(absum[0, 1:]).all()

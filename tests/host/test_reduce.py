"""The host ``reduce`` kernel against the contract's Reductions: lane order bit
for bit, bounds against exact sums, special values, layouts, threads, and
refusals and declines that write nothing."""

from __future__ import annotations

import math
import threading
from fractions import Fraction
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nxkernel_core import dtype as D
from nxkernel_core import shape as SH
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_core.evaluator import evaluate
from nxkernel_core.kernel import Call, Library, check_library, gamma, unit_roundoff
from nxkernel_core.layout import Broadcast, Permute, Range, Slice, Window
from nxkernel_core.orders import lane_reduce
from nxkernel_core.prog import Binary, Prog
from nxkernel_host import threads
from nxkernel_host.library import library

SUM, PROD, MAX, MIN = S.Monoid.SUM, S.Monoid.PROD, S.Monoid.MAX, S.Monoid.MIN
ARGMAX, ARGMIN = S.Arg(S.Extreme.MAX), S.Arg(S.Extreme.MIN)
EDGES = [0, 1, 15, 16, 17, 1023, 1024, 1025, 4095, 4096, 4097]

lib: Library = check_library(library)


def reduce(a: Array, axes: tuple[int, ...], reductions: list[tuple[Any, int, D.Dtype]],
           prog: Prog | None = None, loads: tuple[S.Load, ...] = (S.PLAIN,),
           more: list[Array] | None = None) -> list[np.ndarray]:
    """Run host reduce over ``a`` and return the destinations as NumPy arrays."""
    spec = S.Reduce(prog or Prog.identity(a.dtype), loads, axes, tuple(reductions))
    first = loads[0]
    loop = a.shape
    if isinstance(first, S.Padded):
        got = SH.padded(a.shape, first.pad)
        assert not isinstance(got, SH.Error)
        loop = got
    kept = tuple(d for i, d in enumerate(loop) if i not in axes)
    dsts = [Array.empty(dt, kept) for dt in spec.result_dtypes()]
    assert lib.reduce(spec, dsts, [a, *(more or [])]) is Answer.DONE
    return [d.to_numpy() for d in dsts]


def bits(x: np.ndarray) -> bytes:
    return np.ascontiguousarray(x).tobytes()


def spread(rng: np.random.Generator, shape: tuple[int, ...], dt: Any) -> np.ndarray:
    """Values of many magnitudes and both signs: sums that round a lot."""
    return (rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 5, shape)).astype(dt)


# ---------------------------------------------------------------------------
# Lane order, bit for bit
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("n", EDGES)
@pytest.mark.parametrize("dt", [D.float32, D.float64])
def test_float_sum_and_prod_are_lane_order_bit_for_bit(n: int, dt: D.Dtype) -> None:
    rng = np.random.default_rng(n)
    x = spread(rng, (3, n), dt.numpy_dtype)
    p = (1 + rng.standard_normal((3, n)) * 1e-3).astype(dt.numpy_dtype)
    (s,) = reduce(Array.from_numpy(x), (1,), [(SUM, 0, dt)])
    (q,) = reduce(Array.from_numpy(p), (1,), [(PROD, 0, dt)])
    assert bits(s) == bits(lane_reduce(x, np.add, dt.numpy_dtype.type(0)))
    assert bits(q) == bits(lane_reduce(p, np.multiply, dt.numpy_dtype.type(1)))


def test_terms_are_numbered_in_c_order_of_the_reduced_axes() -> None:
    rng = np.random.default_rng(1)
    x = spread(rng, (7, 5, 300), np.float32)
    (s,) = reduce(Array.from_numpy(x), (0, 2), [(SUM, 0, D.float32)])
    terms = x.transpose(1, 0, 2).reshape(5, -1)
    assert bits(s) == bits(lane_reduce(terms, np.add, np.float32(0)))


@pytest.mark.parametrize("dt", [D.float16, D.bfloat16, D.float8_e4m3fn, D.float8_e5m2,
                                D.float4_e2m1fn])
def test_narrow_floats_sum_in_float32_and_round_once(dt: D.Dtype) -> None:
    rng = np.random.default_rng(2)
    x = D.of_float(dt, rng.standard_normal((4, 2000)) * 3)
    for out in (dt, D.float32, D.float64):
        (s,) = reduce(Array.from_numpy(x, dtype=dt), (1,), [(SUM, 0, out)])
        wide = lane_reduce(x.astype(np.float32), np.add, np.float32(0))
        assert bits(s) == bits(D.of_float(out, wide.astype(np.float64)))


def test_sum_within_gamma_bound_of_the_exact_sum() -> None:
    rng = np.random.default_rng(3)
    for n in (17, 1025, 4097, 20000):
        x = spread(rng, (n,), np.float32)
        (s,) = reduce(Array.from_numpy(x), (0,), [(SUM, 0, D.float32)])
        exact = math.fsum(float(v) for v in x)
        bound = gamma(n - 1, unit_roundoff(D.float32)) * float(np.abs(x.astype(np.float64)).sum())
        # Before the rounding into the destination: half an ulp more after it.
        assert abs(float(s) - exact) <= bound + abs(exact) * 2.0**-24


def test_sum_results_do_not_depend_on_extents_that_are_not_reduced() -> None:
    rng = np.random.default_rng(4)
    x = spread(rng, (9, 3000), np.float32)
    (whole,) = reduce(Array.from_numpy(x), (1,), [(SUM, 0, D.float32)])
    (part,) = reduce(Array.from_numpy(x[3:5]), (1,), [(SUM, 0, D.float32)])
    assert bits(whole[3:5]) == bits(part)


# ---------------------------------------------------------------------------
# Monoid special cases
# ---------------------------------------------------------------------------


def test_sum_of_negative_zeros_is_positive_zero_and_empty_reductions() -> None:
    z = Array.from_numpy(np.full((2, 5), -0.0, np.float32))
    (s,) = reduce(z, (1,), [(SUM, 0, D.float32)])
    assert bits(s) == bits(np.zeros(2, np.float32))
    e = Array.from_numpy(np.zeros((3, 0), np.float64))
    s, p, lse, mean, var = reduce(e, (1,), [(SUM, 0, D.float64), (PROD, 0, D.float64),
                                            (S.LOGSUMEXP, 0, D.float64),
                                            (S.MOMENTS, 0, D.float64)])
    assert bits(s) == bits(np.zeros(3)) and bits(p) == bits(np.ones(3))
    assert np.all(lse == -np.inf) and np.all(np.isnan(mean)) and np.all(np.isnan(var))
    c = Array.from_numpy(np.zeros((2, 0), np.complex64))
    (cp,) = reduce(c, (1,), [(PROD, 0, D.complex64)])
    assert bits(cp) == bits(np.ones(2, np.complex64))


@pytest.mark.parametrize("dt", [D.float32, D.float64, D.float16, D.bfloat16, D.complex64])
def test_a_nan_sum_prod_logsumexp_or_moments_is_the_positive_quiet_nan(dt: D.Dtype) -> None:
    """Whatever NaNs the additions meet (both signs, payloads), each NaN result
    (each NaN part) of a float or complex Sum, Prod, Logsumexp or Moments is
    the positive quiet NaN; a Max's NaN stays the first NaN term's bits."""
    nan = np.float32(np.nan)
    rows = [[-nan, nan, 1, 2, 3], [1.0, nan, 2.0, -nan, 0], [nan, -nan, 1, 2, 0], [-nan, 4, 5, 6, 7]]
    x = np.array(rows, np.float32)
    if dt is D.complex64:
        x = (x + 1j * x[:, ::-1]).astype(np.complex64)
    a = Array.from_numpy(x.astype(dt.numpy_dtype))
    reductions: list[tuple[Any, int, D.Dtype]] = [(SUM, 0, dt), (PROD, 0, dt)]
    if dt.is_float:
        reductions += [(S.Logsumexp(), 0, dt), (S.Moments(), 0, dt)]
    want = np.array(np.nan, dt.numpy_dtype if dt.is_float else np.float32)
    for v in reduce(a, (1,), reductions):
        parts = v.view(np.float32) if dt is D.complex64 else v
        assert all(bits(p) == bits(want) for p in parts.ravel())
    (top,) = reduce(a, (1,), [(MAX, 0, dt)]) if dt.is_float else (None,)
    if top is not None:
        assert bits(top[0]) == bits(x.astype(dt.numpy_dtype)[0, 0])  # −NaN, the first NaN term


def test_the_warm_sum_stores_the_positive_quiet_nan() -> None:
    """``nx.sum``'s prepared small sum (one compiled call over the bytes)
    stores a NaN as ``reduce`` does."""
    from nxkernel_core import nx
    nan = np.float32(np.nan)
    for dt in (np.float32, np.float64):
        x = nx.asarray(np.array([-nan, nan, 1, 2, 3], dt))
        for _ in range(3):  # cold, then the caller's warm path
            got = nx.sum(x).to_numpy()
            assert bits(got) == bits(np.array(np.nan, dt))


@pytest.mark.parametrize("dt", [D.int8, D.uint8, D.int16, D.int32, D.uint32, D.int64, D.uint64,
                                D.int4, D.uint4])
def test_integers_wrap(dt: D.Dtype) -> None:
    rng = np.random.default_rng(5)
    lo, hi = dt.int_range
    vals = rng.integers(lo, hi, (3, 500), endpoint=True, dtype=np.int64 if lo < 0 else np.uint64)
    x = vals.astype(dt.numpy_dtype)
    width = 1 << dt.bits
    s, p, mx, mn = reduce(Array.from_numpy(x, dtype=dt), (1,),
                          [(SUM, 0, dt), (PROD, 0, dt), (MAX, 0, dt), (MIN, 0, dt)])
    for r in range(3):
        row = [int(v) for v in vals[r]]
        want_s, want_p = sum(row) % width, math.prod(row) % width
        if lo < 0:
            want_s = want_s - width if want_s > hi else want_s
            want_p = want_p - width if want_p > hi else want_p
        assert int(s[r]) == want_s and int(p[r]) == want_p
        assert int(mx[r]) == max(row) and int(mn[r]) == min(row)


def test_booleans_max_min_are_any_all_and_arg_finds_the_first() -> None:
    x = np.array([[0, 0, 0], [0, 1, 1], [1, 1, 1], [1, 0, 1]], np.bool_)
    for dt in (D.bool_, D.bit):
        mx, mn, vmax, pmax, vmin, pmin = reduce(
            Array.from_numpy(x, dtype=dt), (1,),
            [(MAX, 0, dt), (MIN, 0, dt), (ARGMAX, 0, dt), (ARGMIN, 0, dt)])
        assert list(mx) == [False, True, True, True] and list(mn) == [False, False, True, False]
        assert list(vmax) == list(mx) and list(pmax) == [0, 1, 0, 0]
        assert list(vmin) == list(mn) and list(pmin) == [0, 0, 0, 1]


def test_max_min_put_negative_zero_below_positive_zero() -> None:
    x = np.array([[-0.0, 0.0, -0.0], [0.0, -0.0, -0.0], [-0.0, -0.0, -1.0]], np.float32)
    mx, mn, vmax, pmax, vmin, pmin = reduce(
        Array.from_numpy(x), (1,),
        [(MAX, 0, D.float32), (MIN, 0, D.float32), (ARGMAX, 0, D.float32),
         (ARGMIN, 0, D.float32)])
    assert list(np.signbit(mx)) == [False, False, True]
    assert list(np.signbit(mn)) == [True, True, True] and mn[2] == -1
    assert list(pmax) == [1, 0, 0] and list(pmin) == [0, 1, 2]
    assert bits(vmax) == bits(mx) and bits(vmin) == bits(mn)


def test_a_nan_extreme_is_the_first_nan_term_with_its_bits() -> None:
    payload = np.array([0x7FC00001, 0xFFC00002], np.uint32).view(np.float32)
    x = np.array([[1.0, payload[0], 5.0, payload[1]], [payload[1], 9.0, payload[0], 1.0]],
                 np.float32)
    mx, mn, vmax, pmax = reduce(Array.from_numpy(x), (1,),
                                [(MAX, 0, D.float32), (MIN, 0, D.float32), (ARGMAX, 0, D.float32)])
    assert bits(mx) == bits(np.array([payload[0], payload[1]]))
    assert bits(mn) == bits(mx) and bits(vmax) == bits(mx) and list(pmax) == [1, 0]


@pytest.mark.parametrize("dt", [D.float16, D.bfloat16, D.float8_e5m2, D.float4_e2m1fn])
def test_narrow_float_extremes_keep_the_terms_bits(dt: D.Dtype) -> None:
    rng = np.random.default_rng(6)
    x = D.of_float(dt, rng.standard_normal((5, 77)) * 2)
    vmax, pmax, _, pmin = reduce(Array.from_numpy(x, dtype=dt), (1,),
                                    [(ARGMAX, 0, dt), (ARGMIN, 0, dt)])
    w = x.astype(np.float32)
    assert list(pmax) == list(np.argmax(w, axis=1)) and list(pmin) == list(np.argmin(w, axis=1))
    assert bits(vmax) == bits(x[np.arange(5), pmax])


def test_an_extreme_of_e5m2_infinity_rounds_into_the_destination() -> None:
    # No store makes an infinity of e5m2 (upstream §5): a Max, Min or Arg
    # reduction stores ±57344 (±0x7B) for an infinite extreme, as its scans
    # do, and Arg's position is the first infinite term's.
    e5m2 = D.float8_e5m2
    x = np.array([[0x3C, 0xFC, 0x7B, 0x7C, 0x40], [0x3C, 0x40, 0xBC, 0x7B, 0xFB]],
                 np.uint8).view(e5m2.numpy_dtype)
    mx, mn, vmax, pmax, vmin, pmin = reduce(Array.from_numpy(x, dtype=e5m2), (1,), [
        (MAX, 0, e5m2), (MIN, 0, e5m2), (ARGMAX, 0, e5m2), (ARGMIN, 0, e5m2)])
    assert mx.view(np.uint8).tolist() == [0x7B, 0x7B] and mn.view(np.uint8).tolist() == [0xFB, 0xFB]
    assert vmax.view(np.uint8).tolist() == [0x7B, 0x7B] and pmax.tolist() == [3, 3]
    assert vmin.view(np.uint8).tolist() == [0xFB, 0xFB] and pmin.tolist() == [1, 4]


def test_complex_max_orders_by_real_then_imaginary_part() -> None:
    x = np.array([[1 + 2j, 1 + 3j, 0 + 9j, 1 + 3j], [2 + 0j, complex(np.nan, 0), 5, 1]],
                 np.complex64)
    vmax, pmax, _, pmin = reduce(Array.from_numpy(x), (1,),
                                    [(ARGMAX, 0, D.complex64), (ARGMIN, 0, D.complex64)])
    assert list(pmax) == [1, 1] and list(pmin) == [2, 1]
    assert vmax[0] == 1 + 3j and np.isnan(vmax[1].real)


def test_complex_sum_per_part_and_prod_never_by_one() -> None:
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((2, 3000)) + 1j * rng.standard_normal((2, 3000))).astype(np.complex64)
    (s,) = reduce(Array.from_numpy(x), (1,), [(SUM, 0, D.complex64)])
    assert bits(s.real.copy()) == bits(lane_reduce(x.real.copy(), np.add, np.float32(0)))
    assert bits(s.imag.copy()) == bits(lane_reduce(x.imag.copy(), np.add, np.float32(0)))
    # One term: the product is that term, signed zeros and all.
    one = np.array([[complex(-0.0, -0.0)], [complex(np.inf, 0.0)]], np.complex64)
    (p,) = reduce(Array.from_numpy(one), (1,), [(PROD, 0, D.complex64)])
    assert bits(p) == bits(one[:, 0])


def test_complex_prod_multiplies_by_prog_mul_in_lane_order() -> None:
    rng = np.random.default_rng(8)
    mul = Prog.binary(Binary.MUL, D.complex128)

    def m(a: complex, b: complex) -> complex:
        return complex(evaluate(mul, [np.array(a), np.array(b)], ())[0])

    for n in (1, 5, 9, 16, 23):
        x = rng.standard_normal(n) + 1j * rng.standard_normal(n)
        (p,) = reduce(Array.from_numpy(x[None]), (1,), [(PROD, 0, D.complex128)])
        lane = [complex(v) for v in x[:16]]
        for t in range(16, n):
            lane[t % 16] = m(lane[t % 16], complex(x[t]))
        present = min(n, 16)
        for half in (8, 4, 2, 1):
            for i in range(half):
                if i + half < present:
                    lane[i] = m(lane[i], lane[i + half])
            present = min(present, half)
        assert p[0] == lane[0]


# ---------------------------------------------------------------------------
# Logsumexp and Moments
# ---------------------------------------------------------------------------


def test_logsumexp_special_values() -> None:
    inf, nan = np.inf, np.nan
    x = np.array([[-inf, -inf], [inf, 1.0], [inf, nan], [-inf, 3.0], [inf, -inf]], np.float32)
    (lse,) = reduce(Array.from_numpy(x), (1,), [(S.LOGSUMEXP, 0, D.float32)])
    assert lse[0] == -inf and lse[1] == inf and np.isnan(lse[2]) and lse[3] == 3.0
    assert lse[4] == inf


@pytest.mark.parametrize("dt", [D.float32, D.float64, D.float16])
def test_logsumexp_within_its_stated_bound(dt: D.Dtype) -> None:
    rng = np.random.default_rng(9)
    for n in (1, 17, 1025, 5000):
        x = D.of_float(dt, rng.standard_normal(n) * 20)
        (lse,) = reduce(Array.from_numpy(x, dtype=dt), (0,), [(S.LOGSUMEXP, 0, D.float64)])
        w = x.astype(np.float64)
        m = float(w.max())
        exact = m + math.log(math.fsum(math.exp(float(v) - m) for v in w))
        b = float(np.abs(w).max())
        uc = unit_roundoff(D.carrier(dt))
        u64 = 2.0**-53
        bound = (2 * b + 9) * uc + (n + 2 * b + 3 * math.log(n) + 3) * u64
        # The reference itself errs by a few float64 ulps of its terms.
        assert abs(float(lse) - exact) <= bound + 8 * u64 * (abs(exact) + 1)


def test_moments_special_values() -> None:
    inf, nan = np.inf, np.nan
    x = np.array([[1.0, nan, 2.0], [inf, 1.0, 2.0], [inf, -inf, 0.0], [inf, inf, 1.0],
                  [3.0, 3.0, 3.0]], np.float64)
    mean, var = reduce(Array.from_numpy(x), (1,), [(S.MOMENTS, 0, D.float64)])
    assert np.isnan(mean[0]) and np.isnan(var[0])
    assert mean[1] == inf and np.isnan(var[1])
    assert np.isnan(mean[2]) and np.isnan(var[2])
    assert mean[3] == inf and np.isnan(var[3])
    assert mean[4] == 3.0 and var[4] == 0.0


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 3000), offset=st.sampled_from([0.0, 1e3, 1e6]),
       seed=st.integers(0, 2**32 - 1))
def test_moments_within_their_stated_bounds(n: int, offset: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = (offset + rng.standard_normal(n)).astype(np.float32)
    mean, var = reduce(Array.from_numpy(x), (0,), [(S.MOMENTS, 0, D.float64)])
    q = [Fraction(float(v)) for v in x]
    mu = sum(q, Fraction(0)) / n
    sigma2 = sum(((v - mu) ** 2 for v in q), Fraction(0)) / n
    g = gamma(n, 2.0**-53)
    g3 = gamma(n + 3, 2.0**-53)
    delta = g * float(sum((abs(v) for v in q), Fraction(0))) / n
    assert abs(Fraction(float(mean)) - mu) <= Fraction(delta)
    assert float(var) >= 0
    assert abs(Fraction(float(var)) - sigma2) <= Fraction(g3 * float(sigma2)
                                                             + (1 + g3) * delta**2)


def test_variance_is_never_negative_for_constant_terms() -> None:
    x = np.full((4, 3333), 0.1, np.float32) * np.array([[1], [3], [7], [1e7]], np.float32)
    _, var = reduce(Array.from_numpy(x), (1,), [(S.MOMENTS, 0, D.float32)])
    assert np.all(var >= 0)


# ---------------------------------------------------------------------------
# Layouts, threads, several reductions, programs and loads
# ---------------------------------------------------------------------------

ALL = [(SUM, 0, D.float32), (PROD, 0, D.float32), (MAX, 0, D.float32), (ARGMIN, 0, D.float32),
       (S.LOGSUMEXP, 0, D.float32), (S.MOMENTS, 0, D.float32)]


def test_layouts_give_identical_bits() -> None:
    rng = np.random.default_rng(10)
    x = spread(rng, (6, 1100), np.float32)
    a = Array.from_numpy(x)
    want = reduce(a, (1,), ALL)
    base = Array.from_numpy(np.ascontiguousarray(x.T))
    permuted = base.view(Permute((1, 0)))
    big = Array.from_numpy(np.repeat(x, 2, axis=1)[::-1, ::-1].copy())
    reversed_strided = big.view(Slice((Range(5, 6, -1), Range(2199, 1100, -2))))
    for view in (permuted, reversed_strided):
        assert np.array_equal(view.to_numpy(), x)
        got = reduce(view, (1,), ALL)
        assert all(bits(g) == bits(w) for g, w in zip(got, want, strict=True))
    row = Array.from_numpy(x[2:3])
    got = reduce(row.view(Broadcast((6, 1100))), (1,), ALL)
    for g, w in zip(got, want, strict=True):
        assert bits(g) == bits(np.repeat(w[2:3], 6))


def test_one_and_two_threads_give_identical_bits() -> None:
    rng = np.random.default_rng(11)
    x = spread(rng, (1, 600_000), np.float32)
    y = spread(rng, (300, 2000), np.float64)
    results = []
    for n in (1, 2):
        with threads(n):
            results.append(reduce(Array.from_numpy(x), (1,), ALL)
                           + reduce(Array.from_numpy(y), (1,), [(r, 0, D.float64) for r, _, _ in ALL]))
    assert all(bits(a) == bits(b) for a, b in zip(*results, strict=True))


def test_four_threads_may_call_at_once() -> None:
    rng = np.random.default_rng(12)
    arrays = [Array.from_numpy(spread(rng, (3, 50_000), np.float32)) for _ in range(4)]
    want = [reduce(a, (1,), ALL) for a in arrays]
    got: list[Any] = [None] * 4

    def work(i: int) -> None:
        got[i] = reduce(arrays[i], (1,), ALL)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for g, w in zip(got, want, strict=True):
        assert all(bits(a) == bits(b) for a, b in zip(g, w, strict=True))


def test_several_reductions_of_several_outputs_in_one_call() -> None:
    rng = np.random.default_rng(13)
    x = spread(rng, (4, 3, 50), np.float32)
    # Two outputs: a Copy of the operand, and the operand node itself.
    two = Prog((D.float32,), Prog.identity(D.float32).nodes, (1, 0))
    got = reduce(Array.from_numpy(x), (0, 2), [(SUM, 1, D.float64), (ARGMAX, 0, D.float32),
                                               (MIN, 1, D.float32)], prog=two)
    terms = x.transpose(1, 0, 2).reshape(3, -1)
    assert bits(got[0]) == bits(lane_reduce(terms, np.add, np.float32(0)).astype(np.float64))
    assert list(got[2]) == list(np.argmax(terms, axis=1))
    assert bits(got[1]) == bits(terms.max(axis=1)) and bits(got[3]) == bits(terms.min(axis=1))


def test_few_terms_per_result_are_lane_order() -> None:
    rng = np.random.default_rng(15)
    for n in range(1, 17):
        x = spread(rng, (40, n), np.float32)
        x[::3, 0] = -0.0
        x[5] = -0.0
        p = (1 + rng.standard_normal((40, n))).astype(np.float32)
        (s,) = reduce(Array.from_numpy(x), (1,), [(SUM, 0, D.float32)])
        (q,) = reduce(Array.from_numpy(p), (1,), [(PROD, 0, D.float32)])
        assert bits(s) == bits(lane_reduce(x, np.add, np.float32(0)))
        assert bits(q) == bits(lane_reduce(p, np.multiply, np.float32(1)))


def test_a_program_is_evaluated_for_its_terms() -> None:
    rng = np.random.default_rng(16)
    x = spread(rng, (6, 2000), np.float32)
    y = rng.standard_normal((6, 2000)).astype(np.float32)
    b = Prog.build([D.float32, D.float32])
    u, v = b.ins
    prog = b.finish(u * v + 1.0, b.maximum(u, v))
    s, m, pos = reduce(Array.from_numpy(x), (1,), [(SUM, 0, D.float32), (ARGMAX, 1, D.float32)],
                       prog=prog, loads=(S.PLAIN, S.PLAIN), more=[Array.from_numpy(y)])
    terms = evaluate(prog, [x, y], x.shape)
    assert bits(s) == bits(lane_reduce(terms[0], np.add, np.float32(0)))
    assert list(pos) == list(np.argmax(terms[1], axis=1)) and bits(m) == bits(terms[1].max(1))


def test_a_padded_window_load_reduces_windows() -> None:
    rng = np.random.default_rng(14)
    x = rng.standard_normal((6, 7)).astype(np.float32)
    pad = S.Pad((1, 1), (1, 1), (0, 0), (Window(0, 3), Window(1, 3)))
    load = S.Padded(np.float32(0).tobytes(), pad)
    (s,) = reduce(Array.from_numpy(x), (2, 3), [(SUM, 0, D.float32)], loads=(load,))
    padded = np.pad(x, 1)
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3)).reshape(6, 7, 9)
    assert bits(s) == bits(lane_reduce(windows, np.add, np.float32(0)))


@settings(max_examples=30, deadline=None)
@given(shape=st.lists(st.integers(0, 6), min_size=1, max_size=4),
       data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_any_axes_sum_lane_order_and_argmax(shape: list[int], data: st.DataObject,
                                           seed: int) -> None:
    axes = tuple(sorted(data.draw(st.sets(st.integers(0, len(shape) - 1)))))
    x = spread(np.random.default_rng(seed), tuple(shape), np.float64)
    reds: list[tuple[Any, int, D.Dtype]] = [(SUM, 0, D.float64)]
    kept = [a for a in range(len(shape)) if a not in axes]
    terms = x.transpose(*kept, *axes).reshape(math.prod(shape[a] for a in kept),
                                              math.prod(shape[a] for a in axes))
    if terms.shape[1] > 0:
        reds.append((ARGMAX, 0, D.float64))
    got = reduce(Array.from_numpy(x), axes, reds)
    assert bits(got[0].reshape(-1)) == bits(lane_reduce(terms, np.add, np.float64(0)))
    if len(got) > 1:
        assert list(got[2].reshape(-1)) == list(np.argmax(terms, axis=1))


# ---------------------------------------------------------------------------
# Refusals and declines write nothing
# ---------------------------------------------------------------------------


def canary(dt: D.Dtype, shape: tuple[int, ...]) -> Array:
    a = Array.empty(dt, shape)
    a.write_numpy(np.full(shape, 7, dt.numpy_dtype))
    return a


def test_a_misfit_is_refused_before_any_write() -> None:
    x = Array.from_numpy(np.ones((3, 4), np.float32))
    spec = S.Reduce(Prog.identity(D.float32), (S.PLAIN,), (1,), ((SUM, 0, D.float32),))
    cases = [
        ([canary(D.float64, (3,))], Answer.WRONG_DTYPE),
        ([canary(D.float32, (4,))], Answer.SHAPE_MISMATCH),
        ([canary(D.float32, (3,)), canary(D.float32, (3,))], Answer.BAD_ARITY),
    ]
    for dsts, answer in cases:
        assert lib.reduce(spec, dsts, [x]) is answer
        assert all(np.all(d.to_numpy() == 7) for d in dsts)
    wrong_int = S.Reduce(Prog.identity(D.bool_), (S.PLAIN,), (1,), ((SUM, 0, D.bool_),))
    b = Array.from_numpy(np.ones((3, 4), np.bool_))
    assert lib.reduce(wrong_int, [canary(D.bool_, (3,))], [b]) is Answer.WRONG_DTYPE


def test_the_statement_declines_what_the_kernel_declines() -> None:
    x = Array.from_numpy(np.ones((3, 4), np.float32))
    spec = S.Reduce(Prog.identity(D.float32), (S.PLAIN,), (1,), ((SUM, 0, D.float32),))
    d = canary(D.float32, (3,))
    call = Call("reduce", spec, (d,), (x,))
    assert lib.statement.declines(call) is None
    assert lib.reduce(spec, [d], [x]) is Answer.DONE
    assert "reduce Sum" in lib.statement.association
    assert "Moments (reduce)" in lib.statement.algorithms


def test_narrow_float_terms_need_ml_dtypes_host_types() -> None:
    x = np.array([[1.5, -2.0]], ml_dtypes.bfloat16)
    (s,) = reduce(Array.from_numpy(x, dtype=D.bfloat16), (1,), [(SUM, 0, D.bfloat16)])
    assert float(s[0]) == -0.5

"""The host ``scan`` kernel against the contract's Scans: the odd/even network
bit for bit, the prefix law, exact scans continued from a carry, special
values, bounds in D, layouts, threads, and refusals that write nothing."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nxkernel_core import dtype as D
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_core.evaluator import evaluate
from nxkernel_core.kernel import Library, check_library, gamma
from nxkernel_core.layout import Permute, Range, Slice
from nxkernel_core.orders import depth, odd_even_scan
from nxkernel_core.prog import Binary, Prog
from nxkernel_host import threads
from nxkernel_host.library import library

SUM, PROD, MAX, MIN = S.Monoid.SUM, S.Monoid.PROD, S.Monoid.MAX, S.Monoid.MIN
ARGMAX, ARGMIN = S.Arg(S.Extreme.MAX), S.Arg(S.Extreme.MIN)
EDGES = [1, 2, 15, 16, 17, 1023, 1024, 1025, 4095, 4096, 4097]

lib: Library = check_library(library)


def scan(a: Array, axis: int, red: Any, dt: D.Dtype | None = None, reverse: bool = False,
         carry: np.ndarray | None = None) -> list[np.ndarray]:
    """Run host scan over ``a`` and return the destinations as NumPy arrays."""
    dt = dt or a.dtype
    spec = S.Scan(Prog.identity(a.dtype), (S.PLAIN,), axis, red, 0, dt, reverse,
                  carry is not None)
    dsts = [Array.empty(d, a.shape) for d in spec.result_dtypes()]
    ops = [a] if carry is None else [Array.from_numpy(carry, dtype=D.carrier(a.dtype)), a]
    assert lib.scan(spec, dsts, ops) is Answer.DONE
    return [d.to_numpy() for d in dsts]


def bits(x: np.ndarray) -> bytes:
    return np.ascontiguousarray(x).tobytes()


def network(x: np.ndarray, op: Any) -> np.ndarray:
    (out,) = odd_even_scan((x,), lambda a, b: (op(a[0], b[0]),))
    return out


def spread(rng: np.random.Generator, shape: tuple[int, ...], dt: Any) -> np.ndarray:
    return (rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 5, shape)).astype(dt)


# ---------------------------------------------------------------------------
# The network, bit for bit
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("n", [*EDGES, 20_000])
@pytest.mark.parametrize("dt", [D.float32, D.float64])
def test_float_sum_and_prod_scans_are_the_network(n: int, dt: D.Dtype) -> None:
    rng = np.random.default_rng(n)
    x = spread(rng, (2, n), dt.numpy_dtype)
    p = (1 + rng.standard_normal((2, n)) * 1e-3).astype(dt.numpy_dtype)
    (s,) = scan(Array.from_numpy(x), 1, SUM)
    (q,) = scan(Array.from_numpy(p), 1, PROD)
    with np.errstate(all="ignore"):
        assert bits(s) == bits(network(x, np.add))
        assert bits(q) == bits(network(p, np.multiply))


def test_a_sum_scan_adds_its_terms_from_positive_zero() -> None:
    # Monoid Sum adds from +0: a −0 first term gives +0, and so does every
    # result over −0 terms alone; a carry is state 0 as it is. The operand
    # itself is left as it was.
    x = np.array([[-0.0, -0.0, -0.0, 1.5, -1.5], [-0.0, 2.0, -0.0, -2.0, -0.0]])
    a = Array.from_numpy(x)
    for reverse, want in ((False, [[0.0, 0.0, 0.0, 1.5, 0.0], [0.0, 2.0, 2.0, 0.0, 0.0]]),
                          (True, [[0.0, 0.0, 0.0, 0.0, -1.5], [0.0, 0.0, -2.0, -2.0, 0.0]])):
        (got,) = scan(a, 1, SUM, reverse=reverse)
        assert bits(got) == bits(np.array(want)), reverse
    assert bits(a.to_numpy()) == bits(x)
    (half,) = scan(Array.from_numpy(x.astype(np.float16)), 1, SUM)
    assert bits(half) == bits(np.array([[0.0, 0.0, 0.0, 1.5, 0.0], [0.0, 2.0, 2.0, 0.0, 0.0]], np.float16))
    (cpx,) = scan(Array.from_numpy(np.array([[complex(-0.0, -0.0)] * 3])), 1, SUM)
    assert not np.signbit(cpx.view(np.float64)).any()
    (carried,) = scan(a, 1, SUM, carry=np.array([-0.0, -0.0]))
    assert np.signbit(carried[0, :3]).all()  # −0 + −0 from a carry of −0
    (prod,) = scan(a, 1, PROD)
    assert np.signbit(prod[0, 0])  # a product is from its first term


def test_a_carry_is_state_zero_and_reverse_scans_from_the_end() -> None:
    rng = np.random.default_rng(1)
    x = spread(rng, (3, 5000), np.float32)
    c = spread(rng, (3,), np.float32)
    (s,) = scan(Array.from_numpy(x), 1, SUM, carry=c)
    assert bits(s) == bits(network(np.concatenate([c[:, None], x], axis=1), np.add)[:, 1:])
    (r,) = scan(Array.from_numpy(x), 1, SUM, reverse=True)
    assert bits(r) == bits(network(x[:, ::-1], np.add)[:, ::-1])
    (rc,) = scan(Array.from_numpy(x), 1, SUM, reverse=True, carry=c)
    want = network(np.concatenate([c[:, None], x[:, ::-1]], axis=1), np.add)[:, 1:][:, ::-1]
    assert bits(rc) == bits(want)


@pytest.mark.parametrize("dt", [D.float16, D.bfloat16, D.float8_e4m3fn])
def test_narrow_float_scans_run_in_float32_and_round_once(dt: D.Dtype) -> None:
    rng = np.random.default_rng(2)
    x = D.of_float(dt, rng.standard_normal((2, 300)))
    for out in (dt, D.float32):
        (s,) = scan(Array.from_numpy(x, dtype=dt), 1, SUM, out)
        wide = network(x.astype(np.float32), np.add)
        assert bits(s) == bits(D.of_float(out, wide.astype(np.float64)))


def test_complex_scans_add_per_part_and_multiply_by_prog_mul() -> None:
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((2, 40)) + 1j * rng.standard_normal((2, 40))).astype(np.complex64)
    (s,) = scan(Array.from_numpy(x), 1, SUM)
    assert bits(s.real.copy()) == bits(network(x.real.copy(), np.add))
    assert bits(s.imag.copy()) == bits(network(x.imag.copy(), np.add))
    mul = Prog.binary(Binary.MUL, D.complex64)
    (p,) = scan(Array.from_numpy(x), 1, PROD)
    want = network(x, lambda a, b: evaluate(mul, [a, b], a.shape)[0])
    assert bits(p) == bits(want)
    one = np.array([[complex(-0.0, -0.0), 2]], np.complex64)
    (p1,) = scan(Array.from_numpy(one), 1, PROD)
    assert bits(p1[:, :1]) == bits(one[:, :1])


def test_sum_scan_within_gamma_of_depth() -> None:
    rng = np.random.default_rng(4)
    n = 3000
    x = spread(rng, (n,), np.float32)
    (s,) = scan(Array.from_numpy(x), 0, SUM, D.float64)
    u = 2.0**-24
    for i in range(0, n, 97):
        terms = [float(v) for v in x[: i + 1]]
        exact = math.fsum(terms)
        assert abs(float(s[i]) - exact) <= gamma(depth(i), u) * math.fsum(map(abs, terms))


# ---------------------------------------------------------------------------
# The prefix law and exact scans
# ---------------------------------------------------------------------------

LAWFUL = [SUM, PROD, MAX, ARGMIN, S.LOGSUMEXP, S.MOMENTS]


@settings(max_examples=12, deadline=None)
@given(n=st.integers(1, 5000), k=st.integers(1, 5000), reverse=st.booleans(),
       seed=st.integers(0, 2**32 - 1))
def test_the_scan_of_a_prefix_is_the_prefix_of_the_scan(n: int, k: int, reverse: bool,
                                                        seed: int) -> None:
    k = min(k, n)
    x = spread(np.random.default_rng(seed), (2, n), np.float32)
    part = x[:, :k] if not reverse else x[:, n - k:]
    for red in LAWFUL:
        whole = scan(Array.from_numpy(x), 1, red, D.float32, reverse)
        pre = scan(Array.from_numpy(np.ascontiguousarray(part)), 1, red, D.float32, reverse)
        for w, p in zip(whole, pre, strict=True):
            assert bits(w[:, :k] if not reverse else w[:, n - k:]) == bits(p), red


@pytest.mark.parametrize("dt", [D.int8, D.uint16, D.int32, D.uint64, D.int4, D.bool_, D.float32])
def test_exact_scans_continue_from_a_carry_bit_for_bit(dt: D.Dtype) -> None:
    rng = np.random.default_rng(5)
    if dt.is_bool:
        x = rng.integers(0, 2, (3, 200)).astype(np.bool_)
    elif dt.is_int:
        lo, hi = dt.int_range
        x = rng.integers(lo, hi, (3, 200), endpoint=True,
                         dtype=np.int64 if lo < 0 else np.uint64).astype(dt.numpy_dtype)
    else:
        x = rng.standard_normal((3, 200)).astype(np.float32)
        x[0, 50] = np.nan
        x[1, ::7] = -0.0
        x[1, 3::7] = 0.0
    reds = [MAX, MIN] if dt.is_bool else [SUM, PROD, MAX, MIN] if dt.is_int else [MAX, MIN]
    for red in reds:
        (whole,) = scan(Array.from_numpy(x, dtype=dt), 1, red)
        k = 77
        carry = whole[:, k - 1].astype(D.carrier(dt).numpy_dtype)
        (rest,) = scan(Array.from_numpy(np.ascontiguousarray(x[:, k:]), dtype=dt), 1, red,
                       carry=carry)
        if dt.is_float:
            assert np.array_equal(np.isnan(rest), np.isnan(whole[:, k:]))
            ok = ~np.isnan(whole[:, k:])
            assert bits(rest[ok]) == bits(whole[:, k:][ok])
        else:
            assert bits(rest) == bits(whole[:, k:]), red


def test_integer_sum_scan_wraps() -> None:
    x = np.array([[100, 100, 100, -128]], np.int8)
    (s,) = scan(Array.from_numpy(x), 1, SUM)
    assert list(s[0]) == [100, -56, 44, -84]


def test_max_min_and_arg_scans() -> None:
    nan = np.float32(np.nan)
    x = np.array([[1, -0.0, 0.0, 3, 3, nan, 9, nan],
                  [-0.0, -0.0, 0.0, -1, 0.0, -5, -5, -6]], np.float32)
    mx, mn = scan(Array.from_numpy(x), 1, MAX)[0], scan(Array.from_numpy(x), 1, MIN)[0]
    vmax, pmax = scan(Array.from_numpy(x), 1, ARGMAX)
    vmin, pmin = scan(Array.from_numpy(x), 1, ARGMIN)
    assert list(pmax[0]) == [0, 0, 0, 3, 3, 5, 5, 5]
    assert list(pmax[1]) == [0, 0, 2, 2, 2, 2, 2, 2]
    assert list(pmin[1]) == [0, 0, 0, 3, 3, 5, 5, 7]
    assert list(pmin[0]) == [0, 1, 1, 1, 1, 5, 5, 5]
    assert bits(vmax) == bits(mx) and bits(vmin) == bits(mn)
    assert list(np.signbit(mx[1, :3])) == [True, True, False]
    _, rpos = scan(Array.from_numpy(x), 1, ARGMAX, reverse=True)
    # Positions are term numbers in scan order: from the end where reverse.
    assert list(rpos[1]) == [0, 1, 1, 3, 3, 3, 3, 3][::-1]


def test_arg_scan_of_booleans_and_complex() -> None:
    b = np.array([[0, 1, 0, 1]], np.bool_)
    v, p = scan(Array.from_numpy(b), 1, ARGMAX)
    assert list(v[0]) == [False, True, True, True] and list(p[0]) == [0, 1, 1, 1]
    c = np.array([[1 + 1j, 1 + 2j, 0 + 5j, complex(np.nan, 1), 7]], np.complex128)
    v, p = scan(Array.from_numpy(c), 1, ARGMAX)
    assert list(p[0]) == [0, 1, 1, 3, 3]


# ---------------------------------------------------------------------------
# Logsumexp and Moments scans
# ---------------------------------------------------------------------------


def test_logsumexp_scan_special_values_and_bound() -> None:
    inf = np.inf
    x = np.array([[-inf, -inf, 2.0, inf, 1.0, np.nan, 0.0]], np.float64)
    (lse,) = scan(Array.from_numpy(x), 1, S.LOGSUMEXP)
    assert lse[0, 0] == -inf and lse[0, 1] == -inf and lse[0, 2] == 2.0
    assert lse[0, 3] == inf and lse[0, 4] == inf and np.isnan(lse[0, 5]) and np.isnan(lse[0, 6])
    rng = np.random.default_rng(6)
    y = rng.standard_normal(2000) * 10
    (got,) = scan(Array.from_numpy(y), 0, S.LOGSUMEXP)
    b = float(np.abs(y).max())
    for i in range(0, 2000, 61):
        m = float(y[: i + 1].max())
        exact = m + math.log(math.fsum(math.exp(v - m) for v in y[: i + 1]))
        big = b + math.log(i + 1)
        bound = max(depth(i), 1) * (2 * big + 3) * 2.0**-53
        assert abs(float(got[i]) - exact) <= bound + 4 * 2.0**-53 * abs(exact)


def test_moments_scan_special_values() -> None:
    inf = np.inf
    x = np.array([[inf, 1.0, -inf, 2.0], [1.0, np.nan, 2.0, 3.0], [inf, inf, 5.0, 6.0]])
    mean, var = scan(Array.from_numpy(x), 1, S.MOMENTS)
    assert mean[0, 0] == inf and mean[0, 1] == inf and np.all(np.isnan(mean[0, 2:]))
    assert np.all(np.isnan(var[0])) and var[1, 0] == 0 and np.all(np.isnan(mean[1, 1:]))
    assert np.all(mean[2] == inf) and np.all(np.isnan(var[2]))


def test_moments_scan_within_its_bounds_and_continues_a_carry() -> None:
    rng = np.random.default_rng(7)
    n = 1500
    x = 1e4 + rng.standard_normal(n)
    mean, var = scan(Array.from_numpy(x), 0, S.MOMENTS)
    u = 2.0**-53
    q = [Fraction(float(v)) for v in x]
    total, big = Fraction(0), 0.0
    for i in range(n):
        total += q[i]
        big = max(big, abs(float(x[i])))
        if i % 50:
            continue
        mu = total / (i + 1)
        s2 = sum(((v - mu) ** 2 for v in q[: i + 1]), Fraction(0)) / (i + 1)
        dd = max(depth(i), 1)
        assert abs(Fraction(float(mean[i])) - mu) <= Fraction(7 * dd * u * big)
        sig = math.sqrt(float(s2))
        assert abs(Fraction(float(var[i])) - s2) <= Fraction(
            dd * u * (6 * float(s2) + 10 * math.sqrt(dd) * big * sig))
        assert var[i] >= 0
    # A carry of (count, mean, variance) stands for the terms before.
    k = 600
    c = np.array([k, mean[k - 1], var[k - 1]])
    m2, v2 = scan(Array.from_numpy(np.ascontiguousarray(x[k:])), 0, S.MOMENTS, carry=c)
    assert np.allclose(m2, mean[k:], rtol=1e-12) and np.allclose(v2, var[k:], rtol=1e-6)


# ---------------------------------------------------------------------------
# Layouts, threads, axes, refusals
# ---------------------------------------------------------------------------


def test_layouts_axes_and_threads_give_identical_bits() -> None:
    rng = np.random.default_rng(8)
    x = spread(rng, (5, 3001), np.float32)
    want = {red: scan(Array.from_numpy(x), 1, red) for red in (SUM, S.MOMENTS, ARGMAX)}
    permuted = Array.from_numpy(np.ascontiguousarray(x.T)).view(Permute((1, 0)))
    big = Array.from_numpy(np.repeat(x, 2, axis=1)[::-1, ::-1].copy())
    strided = big.view(Slice((Range(4, 5, -1), Range(6001, 3001, -2))))
    for red, w in want.items():
        for view in (permuted, strided):
            assert all(bits(g) == bits(v) for g, v in zip(scan(view, 1, red), w, strict=True))
        along0 = scan(Array.from_numpy(np.ascontiguousarray(x.T)), 0, red)
        assert all(bits(g.T) == bits(v) for g, v in zip(along0, w, strict=True))
    long = spread(rng, (1, 400_000), np.float32)
    results = []
    for n in (1, 2):
        with threads(n):
            results.append(scan(Array.from_numpy(long), 1, SUM)[0])
    assert bits(results[0]) == bits(results[1])


@pytest.mark.parametrize("n", [6, 7, 4099, 2**19 + 3])
@pytest.mark.parametrize("red", [SUM, PROD])
def test_a_scan_into_its_own_operand_gives_the_bits_of_a_fresh_destination(
        n: int, red: Any) -> None:
    # A destination identical to the operand (the door lets it): each block's
    # states are read before its results are stored, and 2^19 + 3 float32
    # states (over the sharing threshold) stay on one thread.
    rng = np.random.default_rng(n)
    x = (1 + rng.standard_normal((1, n)) * 1e-3 if red is PROD
         else spread(rng, (1, n), np.float32)).astype(np.float32)
    (want,) = scan(Array.from_numpy(x), 1, red)
    a = Array.from_numpy(x)
    spec = S.Scan(Prog.identity(D.float32), (S.PLAIN,), 1, red, 0, D.float32)
    with threads(2):
        assert lib.scan(spec, [a], [a]) is Answer.DONE
    assert bits(a.to_numpy()) == bits(want)


def test_a_program_is_evaluated_for_its_terms() -> None:
    rng = np.random.default_rng(9)
    x = rng.standard_normal((3, 700)).astype(np.float64)
    b = Prog.build([D.float64])
    (u,) = b.ins
    prog = b.finish(b.exp(u), u * u)
    spec = S.Scan(prog, (S.PLAIN,), 1, SUM, 1, D.float64)
    dst = Array.empty(D.float64, x.shape)
    assert lib.scan(spec, [dst], [Array.from_numpy(x)]) is Answer.DONE
    assert bits(dst.to_numpy()) == bits(network(x * x, np.add))


def test_a_misfit_is_refused_before_any_write() -> None:
    x = Array.from_numpy(np.ones((3, 4), np.float32))
    spec = S.Scan(Prog.identity(D.float32), (S.PLAIN,), 1, SUM, 0, D.float32)
    bad = Array.empty(D.float64, (3, 4))
    bad.write_numpy(np.full((3, 4), 7.0))
    assert lib.scan(spec, [bad], [x]) is Answer.WRONG_DTYPE
    small = Array.empty(D.float32, (3, 3))
    small.write_numpy(np.full((3, 3), 7.0, np.float32))
    assert lib.scan(spec, [small], [x]) is Answer.SHAPE_MISMATCH
    carried = S.Scan(Prog.identity(D.float32), (S.PLAIN,), 1, SUM, 0, D.float32, carry=True)
    wrong_carry = Array.from_numpy(np.zeros(4, np.float32))
    dst = Array.empty(D.float32, (3, 4))
    dst.write_numpy(np.full((3, 4), 7.0, np.float32))
    assert lib.scan(carried, [dst], [wrong_carry, x]) is Answer.SHAPE_MISMATCH
    assert np.all(bad.to_numpy() == 7) and np.all(small.to_numpy() == 7)
    assert np.all(dst.to_numpy() == 7)


def test_an_extreme_of_e5m2_infinity_rounds_into_the_destination() -> None:
    # No store makes an infinity of e5m2: Max, Min and Arg scans store ±57344
    # for an infinite extreme, with or without a carry, so a scan continued
    # from the carrier value of a result has the whole scan's bits.
    e5m2 = D.float8_e5m2
    x = np.array([[0x3C, 0xFC, 0x7C, 0x40, 0x7D]], np.uint8).view(e5m2.numpy_dtype)
    a = Array.from_numpy(x, dtype=e5m2)
    assert scan(a, 1, MAX)[0].view(np.uint8).tolist() == [[0x3C, 0x3C, 0x7B, 0x7B, 0x7D]]
    assert scan(a, 1, MIN)[0].view(np.uint8).tolist() == [[0x3C, 0xFB, 0xFB, 0xFB, 0x7D]]
    val, pos = scan(a, 1, ARGMAX)
    assert val.view(np.uint8).tolist() == [[0x3C, 0x3C, 0x7B, 0x7B, 0x7D]]
    assert pos.tolist() == [[0, 0, 2, 2, 4]]
    rest = Array.from_numpy(np.ascontiguousarray(x[:, 3:]), dtype=e5m2)
    carried = scan(rest, 1, MAX, carry=np.array([np.inf], np.float32))[0]
    assert carried.view(np.uint8)[0, 0] == 0x7B and np.isnan(carried[0, 1])  # any NaN for a NaN


def test_a_moments_carry_whose_count_cancels_the_terms_makes_no_error() -> None:
    # Count -1 beside one term: Chan's merge divides by a count of +0, which is
    # IEEE's infinity (as on a GPU), never a ZeroDivisionError.
    a = Array.from_numpy(np.array([[2.0, 3.0]]))
    mean, _ = scan(a, 1, S.MOMENTS, carry=np.array([[-1.0, 5.0, 0.0]]))
    assert mean[0, 0] == -math.inf  # 5 + (2 - 5)·(1 / +0)

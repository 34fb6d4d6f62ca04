"""nxkernel_cuda.reductions: float Sum and Prod bit for bit in lane order
(``orders.lane_reduce``) and scans bit for bit by the odd/even network
(``orders.odd_even_scan``), whatever the launch plan; integers wrap; Max, Min
and Arg give the first term with the extreme's bits; fused programs; the
host library's bits on the same inputs; misfits write nothing
(Logsumexp, Moments and the Arg scans: ``test_statistics``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from nxkernel_core import dtype as D
from nxkernel_core import evaluator, orders
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_core.dtype import Dtype
from nxkernel_core.kernel import Call
from nxkernel_core.layout import Broadcast, Permute
from nxkernel_core.rig import host
from nxkernel_cuda import reductions
from nxkernel_cuda.device import CudaRig
from nxkernel_cuda.library import LIBRARY

from . import programs
from .support import canary, on, run, same_bits, untouched, values

Arr = npt.NDArray[Any]

SIZES = (0, 1, 17, 1023, 1025, 5000)
SCAN_SIZES = (1, 2, 5, 17, 1025, 3000)


def _terms(shape: tuple[int, ...], dt: npt.DTypeLike, seed: int) -> Arr:
    """Terms whose sum depends on the order: magnitudes over 2^±20, both
    signs, exact cancellations and signed zeros."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * np.exp2(rng.integers(-20, 21, size=shape))).astype(dt)
    if shape[-1] >= 4:
        x[..., 1] = -x[..., 0]
        x[..., 3] = -0.0
    return x


def _factors(shape: tuple[int, ...], dt: npt.DTypeLike, seed: int) -> Arr:
    """Factors near 1, so a product of thousands stays finite and rounds often."""
    rng = np.random.default_rng(seed)
    return (1.0 + rng.standard_normal(shape) / 64).astype(dt)


def _network(x: Arr, mul: bool, carry: Arr | None = None) -> Arr:
    """orders.odd_even_scan of rows x after the carry (state 0)."""
    if carry is not None:
        x = np.concatenate([carry[:, None], x], axis=1)
    with np.errstate(all="ignore"):
        out = orders.odd_even_scan((x,), lambda a, b: (a[0] * b[0] if mul else a[0] + b[0],))[0]
    return out[:, 1:] if carry is not None else out


def _reduce(spec: S.Reduce, ops: list[Array], **kw: Any) -> list[Arr]:
    answer, got = run(spec, ops, spec.result_dtypes(), **kw)
    assert answer is Answer.DONE
    return got


# --------------------------------------------------------------------------
# Lane order and the odd/even network, bit for bit
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dt", [D.float32, D.float64])
@pytest.mark.parametrize("n", SIZES)
def test_sum_and_prod_are_lane_order_bit_for_bit(dev: CudaRig, dt: Dtype, n: int) -> None:
    ident = programs.identity(dt)
    x, f = _terms((3, n), dt.numpy_dtype, n), _factors((3, n), dt.numpy_dtype, n)
    for red, terms, start, op in ((S.Monoid.SUM, x, 0, np.add), (S.Monoid.PROD, f, 1, np.multiply)):
        spec = S.Reduce(ident, (S.PLAIN,), (1,), ((red, 0, dt),))
        want = orders.lane_reduce(terms, op, dt.numpy_dtype.type(start))
        (got,) = _reduce(spec, [on(dev, terms)])
        assert same_bits(got, want, dt), (red, n)


def test_a_sum_has_the_same_bits_on_every_launch_plan(dev: CudaRig) -> None:
    x = _terms((2, 40 * 1024 - 3), np.float32, 7)
    want = orders.lane_reduce(x, np.add, np.float32(0))
    spec = S.Reduce(programs.identity(D.float32), (S.PLAIN,), (1,), ((S.Monoid.SUM, 0, D.float32),))
    xs = on(dev, x)
    for threads, group in ((32, 2), (64, 8), (256, 16), (256, 64), (None, None)):
        dst = Array.empty(D.float32, (2,), dev)
        reductions.reduce(spec, [dst], [xs], threads=threads, group_chunks=group)
        assert same_bits(dst.to_numpy(), want, D.float32), (threads, group)


@pytest.mark.parametrize("dt", [D.float32, D.float64])
@pytest.mark.parametrize("n", SCAN_SIZES)
def test_scans_are_the_odd_even_network_bit_for_bit(dev: CudaRig, dt: Dtype, n: int) -> None:
    ident = programs.identity(dt)
    x, f = _terms((3, n), dt.numpy_dtype, n), _factors((3, n), dt.numpy_dtype, n)
    carry = _terms((3,), dt.numpy_dtype, n + 1)
    for red, terms, mul in ((S.Monoid.SUM, x, False), (S.Monoid.PROD, f, True)):
        for reverse in (False, True):
            for with_carry in (False, True):
                spec = S.Scan(ident, (S.PLAIN,), 1, red, 0, dt, reverse=reverse, carry=with_carry)
                ordered = terms[:, ::-1] if reverse else terms
                want = _network(ordered, mul, carry if with_carry else None)
                want = want[:, ::-1] if reverse else want
                ops = ([on(dev, carry)] if with_carry else []) + [on(dev, terms)]
                answer, (got,) = run(spec, ops, spec.result_dtypes())
                assert answer is Answer.DONE
                assert same_bits(got, want, dt), (red, reverse, with_carry)


def test_a_scan_has_the_same_bits_for_every_chunk(dev: CudaRig) -> None:
    x = _terms((2, 3000), np.float32, 3)
    want = _network(x, False)
    spec = S.Scan(programs.identity(D.float32), (S.PLAIN,), 1, S.Monoid.SUM, 0, D.float32)
    xs = on(dev, x)
    for chunk in (2, 4, 64, 1024, None):  # chunk 2 recurses through eleven levels of totals
        dst = Array.empty(D.float32, (2, 3000), dev)
        reductions.scan(spec, [dst], [xs], chunk=chunk)
        assert same_bits(dst.to_numpy(), want, D.float32), chunk


def test_a_sum_scan_adds_its_terms_from_positive_zero(dev: CudaRig) -> None:
    # Monoid Sum adds from +0: state 0 is +0 + term 0, so results over −0
    # terms alone are +0, in every chunk plan (the totals' pass included).
    x = np.full((2, 3000), -0.0, np.float32)
    x[1, 2000:] = 1.5
    forward = np.zeros((2, 3000), np.float32)
    forward[1, 2000:] = 1.5 * np.arange(1, 1001)
    backward = np.zeros((2, 3000), np.float32)
    backward[1] = 1.5 * np.minimum(3000 - np.arange(3000), 1000)
    xs = on(dev, x)
    for reverse, want in ((False, forward), (True, backward)):
        spec = S.Scan(programs.identity(D.float32), (S.PLAIN,), 1, S.Monoid.SUM, 0, D.float32,
                      reverse=reverse)
        for chunk in (2, 64, None):
            dst = Array.empty(D.float32, (2, 3000), dev)
            reductions.scan(spec, [dst], [xs], chunk=chunk)
            assert same_bits(dst.to_numpy(), want, D.float32), (reverse, chunk)
    for dt in (D.float16, D.complex64):
        z = np.zeros((1, 5), dt.numpy_dtype)
        z.view(np.float16 if dt is D.float16 else np.float32)[:] = -0.0
        spec = S.Scan(programs.identity(dt), (S.PLAIN,), 1, S.Monoid.SUM, 0, dt)
        answer, (got,) = run(spec, [on(dev, z)], spec.result_dtypes())
        assert answer is Answer.DONE and same_bits(got, np.zeros((1, 5), dt.numpy_dtype), dt), dt


# --------------------------------------------------------------------------
# Extremes, integers, narrow floats, layouts
# --------------------------------------------------------------------------


def _order_keys(a: Arr, dt: Dtype, is_max: bool) -> Arr:
    """Keys ordering floats as Maximum or Minimum does: -0 below +0, NaN
    beyond every number."""
    with np.errstate(invalid="ignore"):
        c = a.astype(np.float64)
    signed = c.view(np.int64)
    keys = np.where(signed < 0, ~(signed & np.int64(2**63 - 1)), signed)
    return np.where(np.isnan(c), np.iinfo(np.int64).max if is_max else np.iinfo(np.int64).min, keys)


def _first_extreme(rows: Arr, dt: Dtype, is_max: bool) -> tuple[Arr, Arr]:
    """Per row, the first term with the extreme's bits (the first NaN) and its position."""
    keys = _order_keys(rows, dt, is_max) if dt.is_float else rows.astype(np.int64)
    pos = np.argmax(keys, axis=1) if is_max else np.argmin(keys, axis=1)
    return rows[np.arange(rows.shape[0]), pos], pos.astype(np.int64)


def test_max_min_and_arg_give_the_first_extreme(dev: CudaRig) -> None:
    x = np.tile(values(D.float32, 600, seed=5).reshape(4, 150), (1, 2))  # every value twice
    x[1] = -0.0
    x[1, 77] = 0.0
    x[2, :] = np.abs(x[2, :])
    x[2, 5] = np.nan
    xs = on(dev, x)
    ident = programs.identity(D.float32)
    for axes, rows in (((1,), x), ((0,), x.T)):
        for is_max in (True, False):
            v, pos = _first_extreme(rows, D.float32, is_max)
            mono = S.Monoid.MAX if is_max else S.Monoid.MIN
            arg = S.Arg(S.Extreme.MAX if is_max else S.Extreme.MIN)
            spec = S.Reduce(ident, (S.PLAIN,), axes, ((mono, 0, D.float32), (arg, 0, D.float32)))
            got = _reduce(spec, [xs])
            assert same_bits(got[0], v, D.float32) and same_bits(got[1], v, D.float32)
            assert got[2].tolist() == pos.tolist()


def test_an_extreme_of_e5m2_infinity_rounds_into_the_destination(dev: CudaRig) -> None:
    # No store makes an infinity of e5m2 (upstream §5): Max, Min and Arg
    # reductions store ±57344 (±0x7B) for an infinite extreme, as the scans
    # do, in one group a row and through the finishing pass of several.
    e5m2 = D.float8_e5m2
    x = np.full((2, 2100), 0x3C, np.uint8)
    x[0, [5, 1500]], x[0, [7, 2000]] = 0x7C, 0xFC
    x[1, [3, 1030]], x[1, [9, 2099]] = 0x7B, 0xFB
    spec = S.Reduce(programs.identity(e5m2), (S.PLAIN,), (1,), (
        (S.Monoid.MAX, 0, e5m2), (S.Monoid.MIN, 0, e5m2), (S.Arg(S.Extreme.MAX), 0, e5m2),
        (S.Arg(S.Extreme.MIN), 0, e5m2)))
    xs = on(dev, x.view(e5m2.numpy_dtype))
    for group in (4, 1):
        dsts = [Array.empty(d, (2,), dev) for d in spec.result_dtypes()]
        reductions.reduce(spec, dsts, [xs], group_chunks=group)
        mx, mn, vmax, pmax, vmin, pmin = (d.to_numpy() for d in dsts)
        assert [v.view(np.uint8).tolist() for v in (mx, mn, vmax, vmin)] == [[0x7B, 0x7B], [0xFB, 0xFB]] * 2
        assert pmax.tolist() == [5, 3] and pmin.tolist() == [7, 9], group


def test_integers_wrap_whatever_the_layout(dev: CudaRig) -> None:
    base = values(D.int32, 7 * 9, seed=2).reshape(7, 9)
    view = on(dev, base).view(Permute((1, 0)))[::-1, 1:]  # [9, 6], reversed and offset
    host_view = base.T[::-1, 1:].astype(np.int64)
    ident = programs.identity(D.int32)
    for red, fn in ((S.Monoid.SUM, np.sum), (S.Monoid.PROD, np.prod)):
        for axis in (0, 1):
            (got,) = _reduce(S.Reduce(ident, (S.PLAIN,), (axis,), ((red, 0, D.int32),)), [view])
            want = (fn(host_view, axis=axis) % 2**32).astype(np.uint32).view(np.int32)
            assert got.tolist() == want.tolist(), (red, axis)
    spec = S.Scan(ident, (S.PLAIN,), 0, S.Monoid.SUM, 0, D.int32, reverse=True)
    answer, (got,) = run(spec, [view], [D.int32])
    want = (np.cumsum(host_view[::-1], axis=0)[::-1] % 2**32).astype(np.uint32).view(np.int32)
    assert answer is Answer.DONE and got.tolist() == want.tolist()
    answer, (got,) = run(S.Scan(ident, (S.PLAIN,), 1, S.Monoid.MAX, 0, D.int32), [view], [D.int32])
    assert answer is Answer.DONE and got.tolist() == np.maximum.accumulate(host_view, axis=1).tolist()


def test_narrow_floats_reduce_in_float32_and_round_once(dev: CudaRig) -> None:
    x = D.of_float(D.float16, _terms((3, 2100), np.float64, 9) / 2**10)
    carrier = orders.lane_reduce(x.astype(np.float32), np.add, np.float32(0))
    ident = programs.identity(D.float16)
    xs = on(dev, x)
    for result in (D.float32, D.float64, D.float16, D.bfloat16):
        (got,) = _reduce(S.Reduce(ident, (S.PLAIN,), (1,), ((S.Monoid.SUM, 0, result),)), [xs])
        assert same_bits(got, D.of_float(result, carrier.astype(np.float64)), result), result
    carry = np.array([np.nan, -1e9, 0.125], np.float32)
    spec = S.Scan(ident, (S.PLAIN,), 1, S.Monoid.MAX, 0, D.float16, carry=True)
    answer, (got,) = run(spec, [on(dev, carry), xs], [D.float16])
    states = np.concatenate([carry[:, None], x.astype(np.float32)], axis=1)
    keys = np.maximum.accumulate(_order_keys(states, D.float32, True), axis=1)
    # Keys map back to values: the first state holding each running key.
    first = np.maximum.accumulate(np.where(_order_keys(states, D.float32, True) == keys,
                                           np.arange(states.shape[1]), 0), axis=1)
    want = np.take_along_axis(states, first, axis=1)[:, 1:]
    assert answer is Answer.DONE and same_bits(got, D.of_float(D.float16, want), D.float16, nan_equal=True)


def test_fused_programs_reduce_and_scan_with_coordinates(dev: CudaRig) -> None:
    prog = programs.fused()
    a, b = _terms((4, 1500), np.float32, 1), _terms((1500,), np.float32, 2)
    ops = [on(dev, a), on(dev, b).view(Broadcast((4, 1500)))]
    out0, out1 = evaluator.evaluate(prog, [a, np.broadcast_to(b, (4, 1500))], (4, 1500))
    spec = S.Reduce(prog, (S.PLAIN,) * 2, (1,), ((S.Monoid.SUM, 0, D.float32), (S.Monoid.MAX, 1, D.bool_),
                                                 (S.Monoid.MIN, 1, D.bool_)))
    got = _reduce(spec, ops)
    assert same_bits(got[0], orders.lane_reduce(out0, np.add, np.float32(0)), D.float32)
    assert got[1].tolist() == out1.any(axis=1).tolist() and got[2].tolist() == out1.all(axis=1).tolist()
    (col,) = _reduce(S.Reduce(prog, (S.PLAIN,) * 2, (0,), ((S.Monoid.SUM, 0, D.float64),)), ops)
    want = orders.lane_reduce(np.ascontiguousarray(out0.T), np.add, np.float32(0)).astype(np.float64)
    assert same_bits(col, want, D.float64)
    spec_scan = S.Scan(prog, (S.PLAIN,) * 2, 1, S.Monoid.SUM, 0, D.float32, reverse=True)
    answer, (got_scan,) = run(spec_scan, ops, [D.float32])
    assert answer is Answer.DONE
    assert same_bits(got_scan, _network(out0[:, ::-1], False)[:, ::-1], D.float32)


def test_empty_reductions_are_their_identities(dev: CudaRig) -> None:
    ident = programs.identity(D.float32)
    xs = on(dev, np.zeros((3, 0), np.float32))
    spec = S.Reduce(ident, (S.PLAIN,), (1,), ((S.Monoid.SUM, 0, D.float32), (S.Monoid.PROD, 0, D.float32)))
    got = _reduce(spec, [xs])
    assert got[0].view(np.uint32).tolist() == [0] * 3 and got[1].tolist() == [1.0] * 3
    assert _reduce(spec, [on(dev, np.zeros((0, 5), np.float32))])[0].shape == (0,)


# --------------------------------------------------------------------------
# The host library's bits
# --------------------------------------------------------------------------

def test_reductions_and_scans_have_the_host_librarys_bits(dev: CudaRig) -> None:
    from nxkernel_host.library import library as host_library

    for dt in (D.float32, D.float64):
        ident = programs.identity(dt)
        x = _terms((3, 5000), dt.numpy_dtype, 11)
        carry = _terms((3,), dt.numpy_dtype, 12)
        specs: list[tuple[Any, list[Arr]]] = [
            (S.Reduce(ident, (S.PLAIN,), (1,), ((S.Monoid.SUM, 0, dt), (S.Monoid.PROD, 0, dt))), [x]),
            (S.Scan(ident, (S.PLAIN,), 1, S.Monoid.SUM, 0, dt, reverse=True, carry=True), [carry, x]),
            (S.Scan(ident, (S.PLAIN,), 1, S.Monoid.PROD, 0, dt), [_factors((3, 5000), dt.numpy_dtype, 3)]),
        ]
        for spec, arrays in specs:
            answer, ours = run(spec, [on(dev, a) for a in arrays], spec.result_dtypes())
            assert answer is Answer.DONE
            theirs = [Array.empty(d, o.shape, host) for d, o in zip(spec.result_dtypes(), ours, strict=True)]
            kernel = host_library.reduce if isinstance(spec, S.Reduce) else host_library.scan
            assert kernel(spec, theirs, [Array.from_numpy(a, host) for a in arrays]) is Answer.DONE
            for o, t, d in zip(ours, theirs, spec.result_dtypes(), strict=True):
                assert same_bits(o, t.to_numpy(), d, nan_equal=True), (dt, spec)


# --------------------------------------------------------------------------
# Misfits
# --------------------------------------------------------------------------


def test_misfit_reductions_and_scans_write_nothing(dev: CudaRig) -> None:
    ident = programs.identity(D.float32)
    xs = on(dev, np.ones((2, 8), np.float32))
    scan = S.Scan(ident, (S.PLAIN,), 1, S.Monoid.SUM, 0, D.float32)
    dst64 = canary(dev, D.float64, (2, 8))
    assert LIBRARY.scan(scan, [dst64], [xs]) is Answer.WRONG_DTYPE
    assert LIBRARY.scan(scan, [canary(dev, D.float32, (2, 7))], [xs]) is Answer.SHAPE_MISMATCH
    assert untouched(dst64)
    computed = S.Reduce(ident, (S.PLAIN,), (1,), ((S.Arg(S.Extreme.MIN), 0, D.float32),))
    assert LIBRARY.statement.declines(Call("reduce", computed, (), (xs,))) is None
    wrong = S.Reduce(ident, (S.PLAIN,), (1,), ((S.Monoid.SUM, 0, D.float32),))
    dst = canary(dev, D.float32, (2,))
    assert LIBRARY.reduce(wrong, [dst], [on(dev, np.ones((2, 8), np.float64))]) is Answer.WRONG_DTYPE
    assert untouched(dst)

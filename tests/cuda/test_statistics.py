"""nxkernel_cuda.statistics: Logsumexp and Moments reductions and Arg,
Logsumexp and Moments scans. Moments is bit for bit lane order
(``orders.lane_reduce``) and the odd/even network (``orders.odd_even_scan``)
over Chan's merge, so the host library's bits; Logsumexp keeps the stated
bounds against mpmath's exact values and the contract's special values, with
the same bits on every launch plan; Arg scans are exact; a scan's prefix is
the prefix of its scan; Padded loads read the padded operand; complex64 Arg
scans key as Arg reductions; declines and misfits write nothing; the
generated sources compile for the CI architectures."""

from __future__ import annotations

import math
from typing import Any

import mpmath  # type: ignore[import-untyped]
import numpy as np
import numpy.typing as npt
import pytest

from nxkernel_core import dtype as D
from nxkernel_core import evaluator, orders
from nxkernel_core import exact as O
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_core.dtype import Dtype
from nxkernel_core.kernel import Call
from nxkernel_core.layout import Broadcast, Permute, Range, Slice, Window
from nxkernel_core.rig import host
from nxkernel_cuda import build, statistics
from nxkernel_cuda.device import CudaRig
from nxkernel_cuda.library import LIBRARY
from tests.moments_reference import moments_network

from . import programs
from .support import CI_NVRTC, canary, nvrtc_of, on, run, same_bits, untouched, values

Arr = npt.NDArray[Any]

U64 = 2.0**-53
ARG_MAX, ARG_MIN = S.Arg(S.Extreme.MAX), S.Arg(S.Extreme.MIN)


def _u(dt: Dtype) -> float:
    """The unit roundoff of ``dt``'s carrier."""
    return 2.0**-53 if dt is D.float64 else 2.0**-24


def _terms(dt: Dtype, shape: tuple[int, ...], seed: int, scale: float = 4.0) -> Arr:
    """Terms of ``dt`` (host elements) spread over ±scale·3."""
    rng = np.random.default_rng(seed)
    return D.of_float(dt, rng.standard_normal(shape) * scale)


def _reduce(spec: S.Reduce, ops: list[Array], **kw: Any) -> list[Arr]:
    answer, got = run(spec, ops, spec.result_dtypes(), **kw)
    assert answer is Answer.DONE
    return got


def _f64(dt: Dtype, a: Arr) -> Arr:
    return O.to_float64(dt, a)


# --------------------------------------------------------------------------
# Exact references
# --------------------------------------------------------------------------

mpmath.mp.prec = 120


def _exact_lse_prefixes(row: Arr, carry: float | None = None) -> list[float]:
    """log Σ exp of each prefix of finite ``row`` (after exp(carry)), to
    float64 from 120-bit arithmetic."""
    total = mpmath.mpf(0) if carry is None else mpmath.exp(mpmath.mpf(carry))
    out = []
    for v in row.tolist():
        total += mpmath.exp(mpmath.mpf(v))
        out.append(float(mpmath.log(total)))
    return out


def _lse_special(row: Arr) -> float | None:
    """The contract's special value of Logsumexp of ``row``, or None."""
    if np.isnan(row).any():
        return math.nan
    if row.size == 0 or np.isneginf(row).all():
        return -math.inf
    if np.isposinf(row).any():
        return math.inf
    return None


def _moments_special(row: Arr) -> tuple[float, float] | None:
    """The contract's special (mean, variance) of ``row``, or None."""
    if row.size == 0 or np.isnan(row).any():
        return math.nan, math.nan
    infs = row[np.isinf(row)]
    if infs.size:
        return (math.nan if (infs > 0).any() and (infs < 0).any() else float(infs[0])), math.nan
    return None


def _lanes64(x: Arr) -> Arr:
    """orders.lane_reduce of float64 rows from +0."""
    with np.errstate(all="ignore"):
        return orders.lane_reduce(x, np.add, np.float64(0))


def _moments_lanes(x: Arr) -> tuple[Arr, Arr]:
    """The stated Moments reduction of float64 rows: lane-order sums."""
    n = x.shape[-1]
    with np.errstate(all="ignore"):
        mean = _lanes64(x) / n
        var = _lanes64((x - mean[:, None]) ** 2) / n
    return mean, var


# --------------------------------------------------------------------------
# Logsumexp reductions
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dt", [D.float32, D.float64, D.bfloat16])
@pytest.mark.parametrize("n", [0, 1, 17, 1025, 3000])
def test_logsumexp_is_within_the_stated_bound(dev: CudaRig, dt: Dtype, n: int) -> None:
    x = _terms(dt, (5, n), n)
    if n >= 4:
        x[1, 2] = np.nan
        x[2, :] = -np.inf
        x[2, 3] = np.inf
        x[3, 1] = -np.inf
    x[4, :] = -np.inf
    xs = on(dev, x)
    for rdt in {dt, D.float64}:
        spec = S.Reduce(programs.identity(dt), (S.PLAIN,), (1,), ((S.LOGSUMEXP, 0, rdt),))
        (got,) = _reduce(spec, [xs])
        g = _f64(rdt, got)
        for i, row in enumerate(_f64(dt, x)):
            special = _lse_special(row)
            if special is not None:
                assert same_bits(got[i:i + 1], D.of_float(rdt, [special]), rdt, nan_equal=True), (i, got[i])
                continue
            fin = row[np.isfinite(row)]
            exact = float(mpmath.log(mpmath.fsum(mpmath.exp(mpmath.mpf(v)) for v in fin.tolist())))
            b = float(np.abs(fin).max())
            bound = (2 * b + 9) * _u(dt) + (n + 2 * b + 3 * math.log(n) + 3) * U64
            assert O.within(rdt, g[i], exact, bound), (rdt, i, g[i], exact, bound)


def test_logsumexp_has_the_same_bits_on_every_launch_plan(dev: CudaRig) -> None:
    x = _terms(D.float32, (2, 9 * 1024 + 5), 3, scale=30.0)
    spec = S.Reduce(programs.identity(D.float32), (S.PLAIN,), (1,),
                    ((S.LOGSUMEXP, 0, D.float64), (S.MOMENTS, 0, D.float64)))
    xs = on(dev, x)
    first = None
    for threads, group in ((32, 1), (64, 2), (256, 4), (None, None)):
        got = _reduce(spec, [xs], threads=threads, group_chunks=group)
        first = first or got
        assert all(same_bits(g, f, D.float64) for g, f in zip(got, first, strict=True)), (threads, group)


def test_large_terms_do_not_overflow(dev: CudaRig) -> None:
    x = np.array([[700.0, 709.0, 705.0, 710.5], [1e300, 1e300, -1e300, 0.0]])  # exp(710) overflows
    spec = S.Reduce(programs.identity(D.float64), (S.PLAIN,), (1,), ((S.LOGSUMEXP, 0, D.float64),))
    (got,) = _reduce(spec, [on(dev, x)])
    for i, row in enumerate(x):
        exact = float(mpmath.log(mpmath.fsum(mpmath.exp(mpmath.mpf(v)) for v in row.tolist())))
        b = float(np.abs(row).max())
        assert O.within(D.float64, got[i], exact, (2 * b + 9) * U64 + (4 + 2 * b + 3 * math.log(4) + 3) * U64)


# --------------------------------------------------------------------------
# Moments reductions
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dt", [D.float32, D.float64, D.float16])
@pytest.mark.parametrize("n", [0, 1, 17, 1025, 3000])
def test_moments_are_lane_order_bit_for_bit(dev: CudaRig, dt: Dtype, n: int) -> None:
    x = _terms(dt, (4, n), n + 7)
    x[:, : n // 2] += D.of_float(dt, [1000.0])[0] if n else 0  # a large mean: cancellation in (x − mean)
    if n >= 4:
        x[1, 2] = np.inf
        x[2, 1] = -np.inf
        x[2, 3] = np.inf
        x[3, 0] = np.nan
    xs = on(dev, x)
    rows = _f64(dt, x)
    mean, var = _moments_lanes(rows)
    for rdt in {dt, D.float64}:
        spec = S.Reduce(programs.identity(dt), (S.PLAIN,), (1,), ((S.MOMENTS, 0, rdt),))
        got = _reduce(spec, [xs], threads=32, group_chunks=1)
        assert same_bits(got[0], D.of_float(rdt, mean), rdt, nan_equal=True), rdt
        assert same_bits(got[1], D.of_float(rdt, var), rdt, nan_equal=True), rdt
        gm, gv = _f64(rdt, got[0]), _f64(rdt, got[1])
        assert not (gv < 0).any()
        for i, row in enumerate(rows):
            special = _moments_special(row)
            if special is not None:
                want = D.of_float(rdt, list(special))
                assert same_bits(got[0][i:i + 1], want[:1], rdt, nan_equal=True)
                assert same_bits(got[1][i:i + 1], want[1:], rdt, nan_equal=True)
                continue
            mu = sum(mpmath.mpf(v) for v in row.tolist()) / n
            sigma2 = sum((mpmath.mpf(v) - mu) ** 2 for v in row.tolist()) / n
            g = n * U64 / (1 - n * U64)
            delta = g * float(np.abs(row).sum()) / n
            assert O.within(rdt, gm[i], float(mu), delta)
            gn3 = (n + 3) * U64 / (1 - (n + 3) * U64)
            assert O.within(rdt, gv[i], float(sigma2), gn3 * float(sigma2) + (1 + gn3) * delta**2)


def test_moments_of_a_strided_view_and_a_fused_program(dev: CudaRig) -> None:
    base = _terms(D.float32, (40, 70), 5)
    view = on(dev, base).view(Permute((1, 0)))[::-1, 3:]  # [70, 37], reversed and offset
    host_view = base.T[::-1, 3:].astype(np.float64)
    spec = S.Reduce(programs.identity(D.float32), (S.PLAIN,), (0,), ((S.MOMENTS, 0, D.float32),))
    mean, var = _moments_lanes(np.ascontiguousarray(host_view.T))
    got = _reduce(spec, [view])
    assert same_bits(got[0], mean.astype(np.float32), D.float32)
    assert same_bits(got[1], var.astype(np.float32), D.float32)
    prog = programs.fused()
    a, b = _terms(D.float32, (3, 1500), 1, 0.5), _terms(D.float32, (1500,), 2, 0.5)
    ops = [on(dev, a), on(dev, b).view(Broadcast((3, 1500)))]
    out0, _ = evaluator.evaluate(prog, [a, np.broadcast_to(b, (3, 1500))], (3, 1500))
    spec = S.Reduce(prog, (S.PLAIN,) * 2, (1,), ((S.MOMENTS, 0, D.float64), (S.LOGSUMEXP, 0, D.float32)))
    got = _reduce(spec, ops)
    mean, var = _moments_lanes(out0.astype(np.float64))
    assert same_bits(got[0], mean, D.float64) and same_bits(got[1], var, D.float64)
    for i, row in enumerate(out0.astype(np.float64)):
        exact = float(mpmath.log(mpmath.fsum(mpmath.exp(mpmath.mpf(v)) for v in row.tolist())))
        b_ = float(np.abs(row).max())
        assert O.within(D.float32, got[2][i], exact, (2 * b_ + 9) * 2.0**-24 + (1500 + 2 * b_ + 30) * U64)


# --------------------------------------------------------------------------
# Scans
# --------------------------------------------------------------------------


def _order_keys(a: Arr, is_max: bool) -> Arr:
    """Keys ordering float64 values as Maximum or Minimum does: -0 below +0,
    NaN beyond every number."""
    signed = a.view(np.int64)
    keys = np.where(signed < 0, ~(signed & np.int64(2**63 - 1)), signed)
    return np.where(np.isnan(a), np.iinfo(np.int64).max if is_max else np.iinfo(np.int64).min, keys)


def _running_extreme(rows: Arr, keys: Arr, is_max: bool) -> tuple[Arr, Arr]:
    """Per row and index, the first term up to it with the greatest (least)
    key, and its position."""
    m = keys.shape[1]
    best = np.maximum.accumulate(keys, axis=1) if is_max else np.minimum.accumulate(keys, axis=1)
    new = np.ones(keys.shape, bool)
    new[:, 1:] = keys[:, 1:] > best[:, :-1] if is_max else keys[:, 1:] < best[:, :-1]
    pos = np.maximum.accumulate(np.where(new, np.arange(m), 0), axis=1)
    return np.take_along_axis(rows, pos, axis=1), pos


@pytest.mark.parametrize("dt", [D.float32, D.float16, D.int8, D.uint4, D.bool_])
def test_arg_scans_are_exact(dev: CudaRig, dt: Dtype) -> None:
    n = 1100
    x = values(dt, 3 * n, seed=4).reshape(3, n)
    x[1] = x[1, :: -1]
    if dt.is_float:
        x[2, :600] = D.of_float(dt, [0.0, -0.0, 1.0, -1.0])[np.arange(600) % 4]  # ties of both zeros
    xs = on(dev, x)
    if dt.is_float:
        wide = _f64(dt, x)
    elif dt.is_bool:
        wide = (x.view(np.uint8) != 0).astype(np.int64)
    else:
        wide = x.astype(np.int64)
    for r, is_max in ((ARG_MAX, True), (ARG_MIN, False)):
        for reverse in (False, True):
            spec = S.Scan(programs.identity(dt), (S.PLAIN,), 1, r, 0, dt, reverse=reverse)
            answer, (val, pos) = run(spec, [xs], spec.result_dtypes(), chunk=64)
            assert answer is Answer.DONE
            order = (slice(None), slice(None, None, -1)) if reverse else (slice(None), slice(None))
            keys = _order_keys(wide[order], is_max) if dt.is_float else wide[order]
            want_v, want_p = _running_extreme(x[order], keys, is_max)
            if dt.is_bool:
                assert (val[order].view(np.uint8) != 0).tolist() == (want_v.view(np.uint8) != 0).tolist()
            else:
                assert same_bits(val[order], want_v, dt), (r, reverse)
            assert pos[order].tolist() == want_p.tolist(), (r, reverse)


@pytest.mark.parametrize("dt", [D.float32, D.float64, D.bfloat16])
@pytest.mark.parametrize("with_carry", [False, True])
def test_logsumexp_scans_are_within_the_stated_bound(dev: CudaRig, dt: Dtype, with_carry: bool) -> None:
    n = 1500
    x = _terms(dt, (3, n), 9, scale=8.0)
    x[2, 5] = -np.inf
    cdt = D.carrier(dt)
    carry = D.of_float(cdt, [0.5, -3.0, -np.inf])
    spec = S.Scan(programs.identity(dt), (S.PLAIN,), 1, S.LOGSUMEXP, 0, dt, reverse=True, carry=with_carry)
    ops = ([on(dev, carry)] if with_carry else []) + [on(dev, x)]
    answer, (got,) = run(spec, ops, [dt], chunk=256)
    assert answer is Answer.DONE
    rows = _f64(dt, x)[:, ::-1]
    g = _f64(dt, got)[:, ::-1]
    k0 = int(with_carry)
    for i in range(3):
        c = float(carry[i]) if with_carry else None
        exact = _exact_lse_prefixes(rows[i], None if c == -math.inf else c)
        states = np.abs(rows[i][np.isfinite(rows[i])])
        big = max(float(states.max()), abs(c) if c is not None and math.isfinite(c) else 0.0)
        for j in range(n):
            d = orders.depth(j + k0)
            bound = d * (2 * (big + math.log(j + 2)) + 3) * U64
            assert O.within(dt, g[i, j], exact[j], bound), (i, j, g[i, j], exact[j])


@pytest.mark.parametrize("dt", [D.float32, D.float64, D.float16])
def test_moments_scans_are_the_network_bit_for_bit(dev: CudaRig, dt: Dtype) -> None:
    n = 1300
    x = _terms(dt, (3, n), 2)
    x[:, 100:] += D.of_float(dt, [64.0])[0]
    x[1, 700] = np.inf
    x[2, 40] = np.nan
    cdt = D.carrier(dt)
    carry = D.of_float(cdt, np.array([[3.0, 1.5, 0.25], [0.0, 9.0, 9.0], [2.0, -1.0, 0.0]]))
    rows = _f64(dt, x)
    for reverse in (False, True):
        for with_carry in (False, True):
            spec = S.Scan(programs.identity(dt), (S.PLAIN,), 1, S.MOMENTS, 0, dt, reverse=reverse,
                          carry=with_carry)
            ops = ([on(dev, carry)] if with_carry else []) + [on(dev, x)]
            answer, (mean, var) = run(spec, ops, spec.result_dtypes(), chunk=128)
            assert answer is Answer.DONE
            order = (slice(None), slice(None, None, -1)) if reverse else (slice(None), slice(None))
            wm, wv = moments_network(np.ascontiguousarray(rows[order]),
                                      _f64(cdt, carry) if with_carry else None)
            assert same_bits(mean[order], D.of_float(dt, wm), dt, nan_equal=True), (reverse, with_carry)
            assert same_bits(var[order], D.of_float(dt, wv), dt, nan_equal=True), (reverse, with_carry)
            assert not (_f64(dt, var) < 0).any()
            if not with_carry and not reverse:
                # Row 0 (finite) within the stated first-order bounds of the exact moments.
                r0 = [mpmath.mpf(v) for v in rows[0].tolist()]
                for j in (1, 2, 100, 513, n - 1):
                    mu = mpmath.fsum(r0[: j + 1]) / (j + 1)
                    s2 = mpmath.fsum((v - mu) ** 2 for v in r0[: j + 1]) / (j + 1)
                    dd, mm = orders.depth(j), float(np.abs(rows[0, : j + 1]).max())
                    assert O.within(dt, _f64(dt, mean)[0, j], float(mu), 7 * dd * U64 * mm)
                    bound = dd * U64 * (6 * float(s2) + 10 * math.sqrt(dd) * mm * math.sqrt(float(s2)))
                    assert O.within(dt, _f64(dt, var)[0, j], float(s2), bound)


def test_moments_and_arg_have_the_host_librarys_bits(dev: CudaRig) -> None:
    from nxkernel_host.library import library as host_library

    x = _terms(D.float64, (2, 2100), 6)
    x[1, 9] = np.nan
    carry = np.array([[2.0, 0.5, 1.0], [0.0, 0.0, 0.0]])
    ident = programs.identity(D.float64)
    specs: list[tuple[S.Reduce | S.Scan, list[Arr]]] = [
        (S.Reduce(ident, (S.PLAIN,), (1,), ((S.MOMENTS, 0, D.float32),)), [x]),
        (S.Scan(ident, (S.PLAIN,), 1, S.MOMENTS, 0, D.float64, reverse=True, carry=True), [carry, x]),
        (S.Scan(ident, (S.PLAIN,), 1, ARG_MIN, 0, D.float64, reverse=True), [x]),
        (S.Scan(ident, (S.PLAIN,), 1, S.MOMENTS, 0, D.float64), [x]),
    ]
    for spec, arrays in specs:
        answer, ours = run(spec, [on(dev, a) for a in arrays], spec.result_dtypes())
        assert answer is Answer.DONE
        theirs = [Array.empty(d, o.shape, host) for d, o in zip(spec.result_dtypes(), ours, strict=True)]
        hops = [Array.from_numpy(a, host) for a in arrays]
        done = (host_library.reduce(spec, theirs, hops) if isinstance(spec, S.Reduce)
                else host_library.scan(spec, theirs, hops))
        assert done is Answer.DONE
        for o, t, d in zip(ours, theirs, spec.result_dtypes(), strict=True):
            assert same_bits(o, t.to_numpy(), d, nan_equal=True), spec


@pytest.mark.parametrize("dt", [D.float32, D.bfloat16, D.float8_e4m3fn])
def test_scans_have_the_special_values_of_their_prefixes(dev: CudaRig, dt: Dtype) -> None:
    rng = np.random.default_rng(1)
    v = rng.standard_normal((6, 60))
    v[0, 10], v[1, 5], v[1, 40] = np.nan, np.inf, -np.inf
    v[2, :30], v[3, 20], v[4, 0], v[5, 33] = -np.inf, np.inf, -np.inf, np.nan
    x = D.of_float(dt, v)
    rows = _f64(dt, x)
    xs = on(dev, x)
    for r in (S.LOGSUMEXP, S.MOMENTS):
        spec = S.Scan(programs.identity(dt), (S.PLAIN,), 1, r, 0, dt)
        answer, got = run(spec, [xs], spec.result_dtypes())
        assert answer is Answer.DONE
        res = [_f64(dt, g) for g in got]
        for i in range(6):
            for j in range(60):
                pre = rows[i, : j + 1]
                lse = _lse_special(pre)
                want = (None if lse is None else (lse,)) if r is S.LOGSUMEXP else _moments_special(pre)
                if want is None:
                    assert all(np.isfinite(a[i, j]) for a in res), (r, i, j)
                    continue
                for a, w in zip(res, want, strict=True):
                    stored = float(D.of_float(dt, [w]).astype(np.float64)[0])
                    assert (math.isnan(stored) and math.isnan(a[i, j])) or a[i, j] == stored, (r, i, j)
                if r is S.MOMENTS:
                    assert not res[1][i, j] < 0


@pytest.mark.parametrize("r", [S.LOGSUMEXP, S.MOMENTS, ARG_MAX])
def test_a_scan_prefix_is_the_prefix_of_the_scan_for_every_chunk(dev: CudaRig, r: S.Reduction) -> None:
    n = 2000
    x = _terms(D.float32, (2, n), 8)
    x[0, 1500] = np.nan
    x[1, 30] = np.inf
    xs = on(dev, x)
    spec = S.Scan(programs.identity(D.float32), (S.PLAIN,), 1, r, 0, D.float32)
    whole = run(spec, [xs], spec.result_dtypes())[1]
    for chunk, k in ((2, 1999), (64, 1501), (1024, 1025), (None, 7)):
        part = xs.view(Slice((Range(0, 2, 1), Range(0, k, 1))))
        answer, got = run(spec, [part], spec.result_dtypes(), chunk=chunk)
        assert answer is Answer.DONE
        for g, w, d in zip(got, whole, spec.result_dtypes(), strict=True):
            assert same_bits(g, w[:, :k], d), (chunk, k)


def test_scans_of_a_fused_program_along_a_middle_axis_with_a_strided_carry(dev: CudaRig) -> None:
    prog = programs.fused()
    a, b = _terms(D.float32, (2, 300, 3), 1, 0.5), _terms(D.float32, (300, 3), 2, 0.5)
    ops = [on(dev, a), on(dev, b).view(Broadcast((2, 300, 3)))]
    out0, _ = evaluator.evaluate(prog, [a, np.broadcast_to(b, (2, 300, 3))], (2, 300, 3))
    rows = np.moveaxis(out0, 1, -1).reshape(6, 300)[:, ::-1].astype(np.float64)
    carry_host = np.asfortranarray(np.array([[[1.0, 0.5, 2.0]] * 3, [[4.0, -1.0, 0.5]] * 3], np.float32))
    carry = on(dev, np.ascontiguousarray(carry_host.transpose(2, 1, 0))).view(Permute((2, 1, 0)))
    spec = S.Scan(prog, (S.PLAIN,) * 2, 1, S.MOMENTS, 0, D.float32, reverse=True, carry=True)
    answer, (mean, var) = run(spec, [carry, *ops], spec.result_dtypes())
    assert answer is Answer.DONE
    wm, wv = moments_network(rows, carry_host.reshape(6, 3))
    got_m = np.moveaxis(mean, 1, -1).reshape(6, 300)[:, ::-1]
    got_v = np.moveaxis(var, 1, -1).reshape(6, 300)[:, ::-1]
    assert same_bits(got_m, wm.astype(np.float32), D.float32)
    assert same_bits(got_v, wv.astype(np.float32), D.float32)


# --------------------------------------------------------------------------
# Declines, misfits, the statement, the build
# --------------------------------------------------------------------------


def test_the_statement_computes_these_kinds_and_states_their_algorithms() -> None:
    st = LIBRARY.statement
    for key in ("Logsumexp", "Moments"):
        assert "declines" not in st.algorithms[key] and "odd/even" in st.algorithms[key]
    for key in ("reduce Logsumexp", "reduce Moments"):
        assert "lane order" in st.association[key]
    xs = Array.empty(D.float32, (2, 8), host)
    for r in (S.LOGSUMEXP, S.MOMENTS):
        spec = S.Reduce(programs.identity(D.float32), (S.PLAIN,), (1,), ((r, 0, D.float32),))
        assert LIBRARY.statement.declines(Call("reduce", spec, (), (xs,))) is None
    for kind in (S.LOGSUMEXP, S.MOMENTS, ARG_MAX):
        scan = S.Scan(programs.identity(D.float32), (S.PLAIN,), 1, kind, 0, D.float32)
        assert LIBRARY.statement.declines(Call("scan", scan, (), (xs,))) is None


def test_padded_loads_read_the_padded_operand(dev: CudaRig) -> None:
    x = _terms(D.float32, (4, 300), 12)
    fill = np.float32(-1.5).tobytes()
    pad = S.Pad((1, 2), (0, 3), (0, 1), (Window(1, 3, 2, 2),))
    load = S.Padded(fill, pad)
    loaded = _f64(D.float32, O.pad(x, D.float32, fill, pad))  # [5, 302, 3]: the window's taps last
    xs = on(dev, x)
    spec = S.Reduce(programs.identity(D.float32), (load,), (1, 2), ((S.MOMENTS, 0, D.float64),))
    got = _reduce(spec, [xs])
    mean, var = _moments_lanes(loaded.reshape(5, -1))
    assert same_bits(got[0], mean, D.float64) and same_bits(got[1], var, D.float64)
    for r in (ARG_MIN, S.MOMENTS):
        scan = S.Scan(programs.identity(D.float32), (load,), 1, r, 0, D.float32, reverse=True)
        answer, res = run(scan, [xs], scan.result_dtypes())
        assert answer is Answer.DONE
        rows = np.ascontiguousarray(np.moveaxis(loaded, 1, -1).reshape(-1, loaded.shape[1])[:, ::-1])
        out = [np.moveaxis(a, 1, -1).reshape(rows.shape)[:, ::-1] for a in res]
        if r is ARG_MIN:
            want_v, want_p = _running_extreme(rows, _order_keys(rows, False), False)
            assert same_bits(out[0], want_v.astype(np.float32), D.float32)
            assert out[1].tolist() == want_p.tolist()
        else:
            wm, wv = moments_network(rows)
            assert same_bits(out[0], wm.astype(np.float32), D.float32)
            assert same_bits(out[1], wv.astype(np.float32), D.float32)


def test_complex64_arg_scans_key_as_arg_reductions(dev: CudaRig) -> None:
    rng = np.random.default_rng(3)
    z = (rng.integers(-2, 3, (3, 600)) + 1j * rng.integers(-2, 3, (3, 600))).astype(np.complex64)
    z[1, 40] = complex(np.nan, 1.0)
    z[2, 7] = complex(-0.0, 0.0)
    zs = on(dev, z)
    with np.errstate(invalid="ignore"):
        kr, ki = (_order_keys(p.astype(np.float64), True).ravel() for p in (z.real, z.imag))
    order = np.lexsort((ki, kr))  # Maximum's order: the real part, then the imaginary part
    change = np.ones(order.size, bool)
    change[1:] = (np.diff(kr[order]) != 0) | (np.diff(ki[order]) != 0)
    rank = np.empty(order.size, np.int64)
    rank[order] = np.cumsum(change)
    nan = np.isnan(z.real) | np.isnan(z.imag)
    for r, is_max in ((ARG_MAX, True), (ARG_MIN, False)):
        beyond = np.iinfo(np.int64).max if is_max else np.iinfo(np.int64).min
        keys = np.where(nan, beyond, rank.reshape(z.shape))
        want_v, want_p = _running_extreme(z, keys, is_max)
        spec = S.Scan(programs.identity(D.complex64), (S.PLAIN,), 1, r, 0, D.complex64)
        answer, (val, pos) = run(spec, [zs], spec.result_dtypes(), chunk=32)
        assert answer is Answer.DONE
        assert same_bits(val, want_v, D.complex64) and pos.tolist() == want_p.tolist(), r


def test_declines_and_misfits_write_nothing(dev: CudaRig) -> None:
    zs = on(dev, np.ones((2, 7), np.complex128))
    scan = S.Scan(programs.identity(D.complex128), (S.PLAIN,), 1, ARG_MAX, 0, D.complex128)
    dsts = [canary(dev, d, (2, 7)) for d in scan.result_dtypes()]
    assert statistics.declines_scan(scan) is not None
    assert LIBRARY.statement.declines(Call("scan", scan, tuple(dsts), (zs,))) is not None
    assert LIBRARY.scan(scan, dsts, [zs]) is Answer.DECLINED and all(untouched(d) for d in dsts)
    xs = on(dev, np.ones((2, 7), np.float32))
    ident = programs.identity(D.float32)
    wrong = S.Reduce(ident, (S.PLAIN,), (1,), ((S.MOMENTS, 0, D.float32),))
    dsts = [canary(dev, D.float32, (2,)), canary(dev, D.float32, (2,))]
    assert LIBRARY.reduce(wrong, dsts, [on(dev, np.ones((2, 7), np.float64))]) is Answer.WRONG_DTYPE
    assert LIBRARY.reduce(wrong, dsts[:1], [xs]) is Answer.BAD_ARITY
    lse = S.Scan(ident, (S.PLAIN,), 1, S.LOGSUMEXP, 0, D.float32)
    assert LIBRARY.scan(lse, [dsts[0]], [xs]) is Answer.SHAPE_MISMATCH
    assert all(untouched(d) for d in dsts)
    assert LIBRARY.reduce(wrong, [Array.empty(D.float32, (2,), host)] * 2, [xs]) is Answer.WRONG_DEVICE




@pytest.mark.parametrize("major", CI_NVRTC)
@pytest.mark.parametrize("arch", build.CI_ARCHES)
def test_generated_sources_compile_for_the_ci_arches(arch: str, major: int) -> None:
    for prog, k in ((programs.fused(), 0), (programs.identity(D.int4), 0)):
        source = statistics.terms_source(prog, k)
        cubin = build.compile(source, arch, nvrtc_of(major))
        assert cubin.path.read_bytes()[:4] == b"\x7fELF" and set(cubin.lowered) == set(source.kernels)



def test_an_extreme_of_e5m2_infinity_rounds_into_the_destination(dev: CudaRig) -> None:
    # No store makes an infinity of e5m2: Max and Arg scans store ±57344 for
    # an infinite extreme (the host library's bits).
    e5m2 = D.float8_e5m2
    x = np.array([[0x3C, 0xFC, 0x7C, 0x40]], np.uint8).view(e5m2.numpy_dtype)
    for r, want in ((ARG_MAX, [0x3C, 0x3C, 0x7B, 0x7B]), (ARG_MIN, [0x3C, 0xFB, 0xFB, 0xFB]),
                    (S.Monoid.MAX, [0x3C, 0x3C, 0x7B, 0x7B])):
        spec = S.Scan(programs.identity(e5m2), (S.PLAIN,), 1, r, 0, e5m2)
        answer, got = run(spec, [on(dev, x)], spec.result_dtypes())
        assert answer is Answer.DONE
        assert got[0].view(np.uint8).tolist() == [want], r

"""Laws of ``scan``: inclusive scans, their carries, prefixes and bounds."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st

from .. import dtype as D
from .. import exact as O
from .. import orders
from .. import shape as SH
from .. import spec as S
from ..array import Array
from ..dtype import Dtype, Kind
from ..kernel import gamma
from ..layout import Range, Slice
from ..prog import Prog
from . import generators as G
from .cases import draw_reduction, result_dtype
from .harness import (
    Arr,
    Data,
    Outcome,
    Subject,
    assert_bits,
    check_nan_rule,
    contiguous,
    fail,
    invoke,
    law,
    operand,
    operand_of,
)
from .judge import carrier_u, signalling_in, states_order
from .test_reduce import _special_ok, near_one, ties

_EXACT = (S.Monoid.SUM, S.Monoid.PROD, S.Monoid.MAX, S.Monoid.MIN, S.Arg(S.Extreme.MAX),
          S.Arg(S.Extreme.MIN))


def _exact(r: S.Reduction, dt: Dtype) -> bool:
    """Whether a scan by ``r`` of ``dt`` is exact: integers, booleans, Max, Min
    and Arg."""
    return r in _EXACT and (dt.is_int or dt.is_bool or r not in (S.Monoid.SUM, S.Monoid.PROD))


def scan_call(subject: Subject, data: Data | None, dt: Dtype, r: S.Reduction, rdt: Dtype, x: Array,
              axis: int, reverse: bool, carry: Array | None = None) -> Outcome:
    """Run an identity-program scan of ``x`` along ``axis``."""
    spec = S.Scan(Prog.identity(dt), (S.PLAIN,), axis, r, 0, rdt, reverse, carry is not None)
    ops = ([carry] if carry is not None else []) + [x]
    return invoke(subject, spec, [(d, x.shape) for d in spec.result_dtypes()], ops, data)


def _rows(v: Arr, axis: int, reverse: bool) -> Arr:
    """Terms along a last axis, in scan order."""
    rows = np.moveaxis(v, axis, -1)
    return rows[..., ::-1] if reverse else rows


def _unrows(v: Arr, axis: int, reverse: bool) -> Arr:
    return np.moveaxis(v[..., ::-1] if reverse else v, -1, axis)


def _carry_operand(data: Data, subject: Subject, term: Dtype, shape: tuple[int, ...], r: S.Reduction
                   ) -> tuple[Array, Arr]:
    cdt = D.carrier(term)
    if r in (S.Monoid.MAX, S.Monoid.MIN) or cdt.is_bool:
        v = ties(data, cdt, shape, "carry")
        return contiguous(subject, cdt, v), v
    return operand(data, subject, cdt, shape, profiles=("ints", "moderate", "bits"), label="carry")


def exact_scan(dt: Dtype, rdt: Dtype, r: S.Reduction, rows: Arr, carry: Arr | None
               ) -> tuple[Arr, Arr | None, Arr]:
    """The reference of an exact scan along the last axis of ``rows`` (in scan
    order): results stored into ``rdt``, positions (Arg), and where a result
    is a NaN."""
    if r in (S.Monoid.SUM, S.Monoid.PROD) and (dt.is_int or dt.is_bool):
        assert isinstance(r, S.Monoid)
        return O.int_scan(dt, rows, r, carry), None, np.zeros(rows.shape, dtype=np.bool_)
    cdt = D.carrier(dt)
    wide = rows if cdt is dt else _to_carrier(dt, cdt, rows)
    if carry is not None:
        wide = np.concatenate([np.asarray(carry)[..., None], wide], axis=-1)
    vals, pos, nan = O.extreme_scan(cdt, wide, r)
    if carry is not None:
        vals, nan = vals[..., 1:], nan[..., 1:]
    if cdt is not rdt:
        vals = _to_carrier(cdt, rdt, vals)
    return vals, pos, nan


def _to_carrier(src: Dtype, dst: Dtype, v: Arr) -> Arr:
    """Exact conversion of elements between a dtype and its carrier (either
    way: widening is exact; narrowing a value that came from the narrow dtype
    is exact too)."""
    if src.is_bool or dst.is_bool:
        truth: Arr = (O.units(v)[..., 0] != 0).astype(np.bool_)
        return truth
    if src.is_float:
        from ..evaluator import evaluate

        return evaluate(Prog.cast(src, dst), [np.asarray(v)], np.shape(v))[0]
    out: Arr = np.asarray(v).astype(np.int64).astype(dst.numpy_dtype) if dst.bits >= 8 else \
        np.asarray(v).astype(dst.numpy_dtype)
    return out


def _loop(data: Data) -> tuple[tuple[int, ...], int]:
    shape, (axis,) = data.draw(G.loop_with_axes(min_rank=1, n_axes=1, max_elements=5000), label="loop")
    return shape, axis


@law("scan")
def test_scan_exact(subject: Subject, data: Data) -> None:
    """Integer and boolean Sum and Prod scans (wrapping in the carrier), and
    Max, Min and Arg scans, forward or reverse, from a carry or not, give the
    reference's bits (any NaN for a NaN; Arg's positions checked forward).
    Contract: 'A scan of integers or booleans, and a Max or Min scan, is
    exact'; 'a carry, the state a scan continues from'."""
    dt = data.draw(G.dtypes(), label="dtype")
    shape, axis = _loop(data)
    pool = [r for r in _EXACT if S.accepts(r, dt) and _exact(r, dt)]
    r = data.draw(st.sampled_from(pool), label="reduction")
    reverse = data.draw(st.booleans(), label="reverse")
    x = operand_of(data, subject, dt, ties(data, dt, shape, "x"), label="x") \
        if data.draw(st.booleans(), label="ties?") else operand(data, subject, dt, shape, label="x")[0]
    carry = None
    cv = None
    if not isinstance(r, S.Arg) and data.draw(st.integers(0, 2), label="carry?") > 0:
        cshape = tuple(d for i, d in enumerate(shape) if i != axis)
        carry, cv = _carry_operand(data, subject, dt, cshape, r)
    out = scan_call(subject, data, dt, r, dt, x, axis, reverse, carry)
    if out.declined:
        return
    xv = x.to_numpy()
    want, pos, nan = exact_scan(dt, dt, r, _rows(xv, axis, reverse), cv)
    what = f"scan {r} of {dt.name} along axis {axis} of {list(shape)}{' reversed' if reverse else ''}" \
        f"{' from a carry' if carry is not None else ''}"
    assert_bits(dt, out.results[0], _unrows(want, axis, reverse), what, any_nan=_unrows(nan, axis, reverse),
                truth=True)
    operands, values = ([x], [xv]) if carry is None or cv is None else ([x, carry], [xv, cv])
    check_nan_rule(dt, out.results[0], signalling_in(operands, values), what)
    if pos is not None and not reverse:
        assert_bits(D.int64, out.results[1], _unrows(pos, axis, reverse), f"{what}: positions")


@law("scan")
def test_scan_prefix(subject: Subject, data: Data) -> None:
    """The scan of a prefix of the axis (in scan order: a suffix where the scan
    is reversed) is the prefix of the scan, bit for bit, for every reduction
    and dtype, floats included. Contract: 'The result at an index is a
    function of the terms up to it alone, in the sense that the scan of a
    prefix of the axis is the prefix of the scan, bit for bit'."""
    dt = data.draw(G.dtypes(), label="dtype")
    shape, axis = _loop(data)
    r = draw_reduction(data, dt, True, scan=True)
    rdt = result_dtype(data, r, dt)
    reverse = data.draw(st.booleans(), label="reverse")
    x, _ = operand(data, subject, dt, shape, profiles=("moderate", "mixed", "bits", "ints"), label="x")
    carry = None
    if not isinstance(r, S.Arg) and data.draw(st.booleans(), label="carry?"):
        spec = S.Scan(Prog.identity(dt), (S.PLAIN,), axis, r, 0, rdt, reverse, True)
        cshape = SH.carry(spec, shape)
        assert not isinstance(cshape, SH.Error)
        carry = _moments_carry(data, subject, dt, cshape) if isinstance(r, S.Moments) else \
            operand(data, subject, D.carrier(dt), cshape, profiles=("moderate", "ints"), label="carry")[0]
    whole = scan_call(subject, data, dt, r, rdt, x, axis, reverse, carry)
    if whole.declined:
        return
    d = shape[axis]
    k = data.draw(st.integers(0, d), label="prefix")
    ranges = [Range(0, e, 1) for e in shape]
    ranges[axis] = Range(d - k, k, 1) if reverse else Range(0, k, 1)
    part = scan_call(subject, data, dt, r, rdt, x.view(Slice(tuple(ranges))), axis, reverse, carry)
    if part.declined:
        return
    key = tuple(slice(rg.start, rg.start + rg.count) for rg in ranges)
    for i, res in enumerate(part.results):
        rd = (rdt, D.int64)[i] if isinstance(r, S.Arg) else rdt
        assert_bits(rd, res, whole.results[i][key],
                    f"scan {r} of {dt.name} into {rdt.name}: the scan of the first {k} of {d} terms "
                    f"along axis {axis}{' reversed' if reverse else ''} is not the prefix of the scan "
                    "(contract: 'the scan of a prefix of the axis is the prefix of the scan, bit for "
                    "bit')")


def _moments_carry(data: Data, subject: Subject, dt: Dtype, shape: tuple[int, ...]) -> Array:
    """A Moments carry: count (a small integer), mean and variance (≥ 0)."""
    seed = data.draw(st.integers(0, 2**32 - 1), label="carry seed")
    rng = np.random.default_rng(seed)
    lead = shape[:-1]
    v = np.stack([rng.integers(0, 5, lead).astype(np.float64), rng.uniform(-2, 2, lead),
                  rng.uniform(0, 2, lead)], axis=-1)
    cdt = D.carrier(dt)
    return contiguous(subject, cdt, D.of_float(cdt, v))


@law("scan")
def test_scan_carry_continues(subject: Subject, data: Data) -> None:
    """Scanning a slice from any term on, with the carrier value of the result
    before it as the carry, gives the whole scan's results from that term on,
    bit for bit but for a NaN result (exact scans). Contract: 'scanning a
    slice from any term, with the carrier value of the result before it as the
    carry, gives the whole scan's results from that term on, bit for bit but
    for a NaN result, which may be any NaN'."""
    dt = data.draw(G.dtypes(), label="dtype")
    shape, axis = _loop(data)
    r = draw_reduction(data, dt, True, scan=True)
    if isinstance(r, S.Arg) or not _exact(r, dt):
        return
    if r in (S.Monoid.SUM, S.Monoid.PROD) and D.carrier(dt) is not dt:
        return  # the result does not hold the carrier value (it wraps into the narrower dtype)
    d = shape[axis]
    if d < 2:
        return
    reverse = data.draw(st.booleans(), label="reverse")
    x, _ = operand(data, subject, dt, shape, label="x")
    whole = scan_call(subject, data, dt, r, dt, x, axis, reverse)
    if whole.declined:
        return
    t = data.draw(st.integers(1, d - 1), label="from term")
    res = _rows(whole.results[0], axis, reverse)
    before = res[..., t - 1]
    cdt = D.carrier(dt)
    carry = contiguous(subject, cdt, _to_carrier(dt, cdt, before) if cdt is not dt else before)
    ranges = [Range(0, e, 1) for e in shape]
    ranges[axis] = Range(0, d - t, 1) if reverse else Range(t, d - t, 1)
    rest = scan_call(subject, data, dt, r, dt, x.view(Slice(tuple(ranges))), axis, reverse, carry)
    if rest.declined:
        return
    want = res[..., t:]
    nan = O.is_nan(dt, want)
    assert_bits(dt, rest.results[0], _unrows(want, axis, reverse),
                f"scan {r} of {dt.name}: from term {t} of {d} with the result before as the carry",
                any_nan=_unrows(nan, axis, reverse), truth=True)


def _depths(n: int, carry: bool, network: bool) -> Arr:
    """The combinations each result passes through: D(i) (of i + 1 with a
    carry as state 0) by the odd/even network, else i (i + 1)."""
    idx = np.arange(n) + (1 if carry else 0)
    if network:
        return np.asarray([orders.depth(int(i)) for i in idx], dtype=np.int64)
    return idx


@law("scan")
def test_scan_sum_within_bound(subject: Subject, data: Data) -> None:
    """A float Sum scan's result i (a complex one part by part) is within
    γ(k)·Σ|x| of the exact sum of the terms up to it (the carry counted among
    them), u the carrier's, then rounded once into the destination; k is the
    odd/even network's D where the library states it scans by it, else the
    number of additions, i. Contract: 'A library that scans by it states its
    bounds in D'; 'A scan's bounds are on the result in the carrier, before
    the rounding into the destination'."""
    dt = data.draw(G.dtypes(kinds=(Kind.FLOAT, Kind.COMPLEX)), label="dtype")
    shape, axes = data.draw(G.loop_with_axes(min_rank=1, n_axes=1, max_elements=3000), label="loop")
    axis = axes[0]
    rdt = result_dtype(data, S.Monoid.SUM, dt)
    reverse = data.draw(st.booleans(), label="reverse")
    x, xv = operand(data, subject, dt, shape, profiles=("moderate", "mixed", "ints"), label="x")
    cshape = tuple(d for i, d in enumerate(shape) if i != axis)
    carry, cv = (None, None)
    if data.draw(st.booleans(), label="carry?"):
        carry, cv = operand(data, subject, D.carrier(dt), cshape, profiles=("moderate",), label="carry")
    out = scan_call(subject, data, dt, S.Monoid.SUM, rdt, x, axis, reverse, carry)
    if out.declined:
        return
    rows = O.to_float64(dt, _rows(xv, axis, reverse))
    if cv is not None:
        rows = np.concatenate([O.to_float64(D.carrier(dt), cv)[..., None], rows], axis=-1)
    network = states_order(subject.library.statement, "scan", "odd/even")
    n = shape[axis]
    depth = _depths(n, cv is not None, network)
    got = _rows(out.results[0], axis, reverse)
    parts = [(rows.real, got.real if rdt.is_complex else got), (rows.imag, got.imag)] if dt.is_complex \
        else [(rows, got)]
    part_dst = (D.float64 if rdt is D.complex128 else D.float32) if rdt.is_complex else rdt
    u = carrier_u(dt)
    first = 1 if cv is not None else 0
    for p, g in parts:
        exact, absum = O.exact_prefix_sums(np.asarray(p, dtype=np.float64))
        exact, absum = exact[..., first:], absum[..., first:]
        bound = np.asarray([gamma(int(k), u) for k in depth]) * absum
        bound = np.where(absum > 0, bound, 0.0)
        ok = O.within(part_dst, np.asarray(g), exact, bound) | (absum >= 2.0**100)
        if not ok.all():
            i = tuple(int(t) for t in np.argwhere(~ok)[0])
            raise fail(f"scan Sum of {dt.name} into {rdt.name}{' reversed' if reverse else ''}: result "
                       f"{i[-1]} (scan order) at {list(i)} is {np.asarray(g)[i]!r}; the exact sum of "
                       f"its terms is {exact[i]!r}, bound γ({int(depth[i[-1]])})·Σ|x| = {bound[i]!r} "
                       f"({'odd/even network, as stated' if network else 'no stated network'})")


@law("scan")
def test_scan_sum_from_positive_zero(subject: Subject, data: Data) -> None:
    """A float or complex Sum scan without a carry adds its terms from +0: a
    scan whose terms up to a result are all −0 gives +0 there (each part of a
    complex one), whatever the association, and a first term −0 gives +0 as
    the first result. Contract: 'Monoid Sum adds the terms from +0, as
    Prog.binary.Add does, so a sum of -0 terms is +0'; 'a product from its
    first term' (a sum from +0)."""
    dt = data.draw(G.dtypes(kinds=(Kind.FLOAT, Kind.COMPLEX)), label="dtype")
    shape, axis = _loop(data)
    rdt = result_dtype(data, S.Monoid.SUM, dt)
    reverse = data.draw(st.booleans(), label="reverse")
    zeros = np.zeros(shape, dtype=dt.numpy_dtype)
    part = (D.float64 if dt is D.complex128 else D.float32) if dt.is_complex else dt
    zeros.reshape(-1).view(part.numpy_dtype)[:] = -0.0  # −0, both parts' signs set
    # A −0 prefix of a drawn length (every term's, at the most), then terms
    # of any value but NaN (whose results the law does not judge).
    rest, _ = operand(data, subject, dt, shape, profiles=("moderate", "ints"), label="rest")
    k = data.draw(st.integers(0, shape[axis]), label="zero terms")
    rows = _rows(rest.to_numpy(), axis, reverse).copy()
    rows[..., :k] = _rows(zeros, axis, reverse)[..., :k]
    x = operand_of(data, subject, dt, _unrows(rows, axis, reverse), plans=("contiguous", "strided"),
                   label="x")
    out = scan_call(subject, data, dt, S.Monoid.SUM, rdt, x, axis, reverse)
    if out.declined:
        return
    got = _rows(out.results[0], axis, reverse)[..., :k]
    assert_bits(rdt, got, np.zeros(got.shape, dtype=rdt.numpy_dtype),
                f"scan Sum of {dt.name} into {rdt.name}{' reversed' if reverse else ''} along axis {axis} "
                f"of {list(shape)}: the results over its first {k} terms, all −0 (contract: 'Monoid Sum "
                "adds the terms from +0, ..., so a sum of -0 terms is +0')")


@law("scan")
def test_scan_prod_within_bound(subject: Subject, data: Data) -> None:
    """A float Prod scan's result i is within a relative γ(i) of the exact
    product of the terms up to it (complex: normwise γ(2i)), whatever the
    association, then rounded once into the destination. Contract: 'A float or complex Sum
    or Prod scan combines the terms up to each result by Prog.binary.Add or
    Prog.binary.Mul in the carrier, ... a product from its first term, so that
    its first result is that term'."""
    dt = data.draw(G.dtypes(kinds=(Kind.FLOAT, Kind.COMPLEX)), label="dtype")
    shape, axes = data.draw(G.loop_with_axes(min_rank=1, n_axes=1, max_elements=2000), label="loop")
    axis = axes[0]
    rdt = result_dtype(data, S.Monoid.PROD, dt)
    reverse = data.draw(st.booleans(), label="reverse")
    x = operand_of(data, subject, dt, near_one(data, dt, shape), label="x")
    out = scan_call(subject, data, dt, S.Monoid.PROD, rdt, x, axis, reverse)
    if out.declined:
        return
    rows = O.to_float64(dt, _rows(x.to_numpy(), axis, reverse))
    exact = O.exact_prefix_products(rows)
    got = np.asarray(_rows(out.results[0], axis, reverse))
    # Every multiplication of the tree that gives a product errs on the whole
    # of it: result i of i + 1 terms is within a relative γ(i), whatever the
    # association (a network's depth D bounds sums, not products).
    depth = _depths(shape[axis], False, False)
    u = carrier_u(dt)
    ud = carrier_u(rdt) if rdt.is_complex else 0.0
    # Barring overflow and underflow: a prefix whose partial products may
    # leave the carrier's normal range is not judged.
    part = D.float64 if D.carrier(dt) in (D.float64, D.complex128) else D.float32
    fmt = part.float_format
    assert fmt is not None
    mag = np.abs(rows)
    with np.errstate(all="ignore"):
        logs = np.log2(np.where((mag > 0) & np.isfinite(mag), mag, 1.0))
    up = np.cumsum(np.where(logs > 0, logs, 0.0), axis=-1)
    down = np.cumsum(np.where(logs < 0, logs, 0.0), axis=-1)
    finite = np.isfinite(rows) & (mag > 0)
    judged = (np.cumprod(finite, axis=-1).astype(bool) & (up < math.log2(fmt.max_finite) - 2)
              & (down > fmt.min_exponent + 2))
    for i in np.argwhere(judged):
        idx = tuple(int(t) for t in i)
        k = int(depth[idx[-1]])
        if dt.is_complex:
            g = gamma(2 * k, u)
            err = abs(complex(got[idx]) - complex(exact[idx]))
            ok = err <= (g * (1 + ud) + ud * math.sqrt(2)) * abs(exact[idx]) * (1 + 2.0**-40) + 1e-300
        else:
            ok = bool(O.within(rdt, got[idx], exact[idx], gamma(k, u) * abs(exact[idx])))
        if not ok:
            raise fail(f"scan Prod of {dt.name} into {rdt.name}: result {idx[-1]} at {list(idx)} is "
                       f"{got[idx]!r}; the exact product is {exact[idx]!r}, relative bound γ({k})")


def _lse_special(row: Arr) -> float | None:
    """Logsumexp's special value of a row, or None where it is finite."""
    if np.isnan(row).any():
        return math.nan
    if row.size == 0 or np.isneginf(row).all():
        return -math.inf
    if np.isposinf(row).any():
        return math.inf
    return None


@law("scan")
def test_scan_logsumexp_moments_specials(subject: Subject, data: Data) -> None:
    """A Logsumexp or Moments scan's result at each index has the special
    values of that reduction of the terms up to it (−∞, +∞, NaN; Moments' NaN
    and infinite means, NaN variances), and a variance is never negative.
    Contract: 'A Logsumexp or Moments scan's result has the special values of
    that reduction of the terms up to it'."""
    dt = data.draw(G.dtypes(kinds=(Kind.FLOAT,)), label="dtype")
    pick: list[S.Reduction] = [S.LOGSUMEXP, S.MOMENTS]
    r = data.draw(st.sampled_from(pick), label="reduction")
    rows = data.draw(st.integers(1, 4), label="rows")
    n = data.draw(st.integers(0, 40), label="terms")
    seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
    rng = np.random.default_rng(seed)
    v = np.asarray(G.values(dt, (rows, n), "moderate", seed), dtype=np.float64)
    fmt = dt.float_format
    assert fmt is not None
    specials = [np.nan] * fmt.nans + [np.inf, -np.inf] * fmt.infinities
    if specials and n:
        at = rng.random((rows, n)) < 0.15
        v = np.where(at, np.asarray(specials)[rng.integers(0, len(specials), (rows, n))], v)
    vals = D.of_float(dt, v)
    x = operand_of(data, subject, dt, vals, label="x")
    rdt = result_dtype(data, r, dt)
    out = scan_call(subject, data, dt, r, rdt, x, 1, False)
    if out.declined:
        return
    t = O.to_float64(dt, x.to_numpy())
    res = [O.to_float64(rdt, a) for a in out.results]
    for i in range(rows):
        for j in range(n):
            pre = t[i, : j + 1]
            what = f"scan {r} of {dt.name} into {rdt.name}: result {j} of {pre[-6:].tolist()}"
            if isinstance(r, S.Logsumexp):
                want = _lse_special(pre)
                if want is not None and not _special_ok(rdt, res[0][i, j], want):
                    raise fail(f"{what} is {res[0][i, j]!r}; the special value is {want!r}")
                continue
            mean, var = res[0][i, j], res[1][i, j]
            if var < 0:
                raise fail(f"{what}: the variance {var!r} is negative")
            if np.isnan(pre).any():
                wm: float | None = math.nan
            elif np.isinf(pre).any():
                infs = pre[np.isinf(pre)]
                wm = math.nan if (infs > 0).any() and (infs < 0).any() else float(infs[0])
            else:
                wm = None
            if wm is not None and not (_special_ok(rdt, mean, wm) and _special_ok(rdt, var, math.nan)):
                raise fail(f"{what} is ({mean!r}, {var!r}); the special value is ({wm!r}, NaN)")


@law("scan")
def test_scan_stated_order(subject: Subject, data: Data) -> None:
    """Where a library states that it scans float Sum and Prod by the odd/even
    network (design.md §6), its results have that network's bits in the
    carrier, the carry as state 0, rounded once into the destination (any NaN
    for a NaN). Contract: 'The odd/even network scans a slice by combining
    states, one per term. ... The earlier state comes first in each
    combination'; design.md §5: 'The conformance kit holds each library to its
    own statement'."""
    if not states_order(subject.library.statement, "scan", "odd/even"):
        return
    dt = data.draw(st.sampled_from((D.float32, D.float64, D.float16, D.bfloat16)), label="dtype")
    kind = data.draw(st.sampled_from((S.Monoid.SUM, S.Monoid.PROD)), label="reduction")
    shape, axis = _loop(data)
    reverse = data.draw(st.booleans(), label="reverse")
    if kind is S.Monoid.PROD:
        x = operand_of(data, subject, dt, near_one(data, dt, shape), label="x")
        xv = x.to_numpy()
    else:
        x, xv = operand(data, subject, dt, shape, profiles=("moderate", "ints", "moderate", "mixed"),
                        label="x")
    cdt = D.carrier(dt)
    carry, cv = None, None
    if data.draw(st.booleans(), label="carry?"):
        cshape = tuple(d for i, d in enumerate(shape) if i != axis)
        carry, cv = operand(data, subject, cdt, cshape, profiles=("moderate",), label="carry")
    rdt = result_dtype(data, kind, dt)
    out = scan_call(subject, data, dt, kind, rdt, x, axis, reverse, carry)
    if out.declined:
        return
    states = np.asarray(_rows(xv, axis, reverse)).astype(cdt.numpy_dtype)
    if cv is not None:
        states = np.concatenate([np.asarray(cv, dtype=cdt.numpy_dtype)[..., None], states], axis=-1)
    elif kind is S.Monoid.SUM:
        # A sum starts from +0 (contract, Monoid Sum): state 0 is +0 + term 0,
        # term 0 itself but for −0.
        states[..., :1] += 0
    op = np.add if kind is S.Monoid.SUM else np.multiply
    with np.errstate(all="ignore"):
        (scanned,) = orders.odd_even_scan((states,), lambda a, b: (op(a[0], b[0]),))
    if cv is not None:
        scanned = scanned[..., 1:]
    want = D.of_float(rdt, np.asarray(scanned, dtype=np.float64))
    assert_bits(rdt, out.results[0], _unrows(want, axis, reverse),
                f"scan {kind.value} of {dt.name} into {rdt.name} along axis {axis} of {list(shape)}"
                f"{' reversed' if reverse else ''}{' from a carry' if cv is not None else ''} by the "
                "odd/even network the library states", any_nan=True)


@law("scan")
def test_scan_box(subject: Subject, data: Data) -> None:
    """A box of an exact scan's results, the scanned axis whole, computed alone
    from the operand's part, has the bits of the whole. Contract: 'a box of the
    results' indices ... computed alone from the parts of the operands it
    reads, has the bits of the whole'."""
    dt = data.draw(G.dtypes(), label="dtype")
    shape, (axis,) = data.draw(G.loop_with_axes(min_rank=2, n_axes=1, empty=False, edges=False),
                               label="loop")
    r = draw_reduction(data, dt, True, scan=True)
    if not _exact(r, dt):
        return
    x, _ = operand(data, subject, dt, shape, label="x")
    whole = scan_call(subject, data, dt, r, dt, x, axis, False)
    if whole.declined:
        return
    ranges = []
    for i, d in enumerate(shape):
        if i == axis:
            ranges.append(Range(0, d, 1))
            continue
        start = data.draw(st.integers(0, d - 1), label="box start")
        ranges.append(Range(start, data.draw(st.integers(1, d - start), label="box count"), 1))
    part = scan_call(subject, data, dt, r, dt, x.view(Slice(tuple(ranges))), axis, False)
    if part.declined:
        return
    key = tuple(slice(rg.start, rg.start + rg.count) for rg in ranges)
    for i, res in enumerate(part.results):
        rd = (dt, D.int64)[i]
        assert_bits(rd, res, whole.results[i][key], f"scan {r} box {ranges}")


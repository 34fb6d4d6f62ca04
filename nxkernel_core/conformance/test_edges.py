"""Laws on fixed examples: the edge cases every run of the kit reaches.

Each law here draws nothing, so Hypothesis runs it once per profile: the
cases are a table, not left to chance. Signed zeros at the extremes of Max,
Min and Arg (−0 and +0 both present, either first), NaNs of other payloads
(the first one's position, and its bits where the library states it keeps
them), sums and products of empty and one-element axes, integer sums wrapping
at the narrow widths, Logsumexp of large and of −∞ terms, Moments of constant
rows and of rows of a large mean and a small spread (held to the library's
own stated bound where it states one), Max, Min and Arg scans of the same
rows both ways, sorts with ties in every direction on rows short and long
enough to reach every path a library states, scatters of many duplicates
(Add's stated chain, Max and Min with NaNs and signed zeros), and a
contraction at every dtype pairing of dst, init and a (so declines and
roundings are reached).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any, Final

import numpy as np

from .. import dtype as D
from .. import exact as O
from .. import spec as S
from ..dtype import Dtype
from ..kernel import unit_roundoff
from ..prog import Prog
from . import generators as G
from .harness import Arr, Data, Outcome, Subject, assert_bits, contiguous, fail, invoke, law
from .judge import says
from .test_reduce import _special_ok, check_fixed

#: The float dtypes the edge rows are built in.
_FLOATS: Final = (D.float16, D.bfloat16, D.float32, D.float64, D.float8_e4m3fn, D.float8_e5m2)

#: The two NaN tokens of an edge row: other payloads, other signs.
NAN_A: Final = "nan a"
NAN_B: Final = "nan b"


def _nan_code(dt: Dtype, which: str) -> int:
    """A quiet NaN's bits of float ``dt``: two payloads (and signs) where the
    format has them, its one NaN where it has one."""
    fmt = dt.float_format
    assert fmt is not None and fmt.nans
    fb, eb = fmt.fraction_bits, fmt.exponent_bits
    exp_all = ((1 << eb) - 1) << fb
    if not fmt.infinities:
        return exp_all | ((1 << fb) - 1)
    quiet = 1 << (fb - 1)
    if which == NAN_A or fb < 2:
        return exp_all | quiet | (1 if fb >= 2 else 0)
    return (1 << (dt.bits - 1)) | exp_all | quiet | 2


def elements(dt: Dtype, tokens: Sequence[float | str]) -> Arr:
    """Host elements of float ``dt`` from numbers (stored by the store rule,
    −0.0 kept) and NaN tokens (``NAN_A``, ``NAN_B``); ±inf is the format's
    infinity where it has one (e5m2's too, which no store makes but an
    operand may hold), else ±the largest finite value."""
    fmt = dt.float_format
    assert fmt is not None
    codes = []
    for t in tokens:
        if isinstance(t, str):
            codes.append(_nan_code(dt, t))
            continue
        v = t if fmt.infinities or math.isfinite(t) else math.copysign(fmt.max_finite, t)
        stored = np.asarray([v], dt.numpy_dtype) if math.isinf(v) else np.asarray(D.of_float(dt, [v]))
        raw = int.from_bytes(O.units(stored)[0].tobytes(), "little")
        codes.append(raw & ((1 << dt.bits) - 1))
    return G.from_codes(dt, np.asarray(codes, dtype=np.uint64))


def _call(subject: Subject, spec: Any, dsts: Sequence[tuple[Dtype, tuple[int, ...]]],
          operands: Sequence[Any]) -> Outcome:
    """``invoke`` without drawing (the fixed laws draw nothing)."""
    return invoke(subject, spec, dsts, operands)


def _reduce(subject: Subject, dt: Dtype, v: Arr, r: S.Reduction, rdt: Dtype | None = None
            ) -> Outcome:
    """A reduction of the last axis of ``v`` (contiguous) by ``r`` into ``rdt``."""
    x = contiguous(subject, dt, v)
    axes = (v.ndim - 1,)
    spec = S.Reduce(Prog.identity(dt), (S.PLAIN,), axes, ((r, 0, rdt or dt),))
    kept = v.shape[:-1]
    return _call(subject, spec, [(d, kept) for d in spec.result_dtypes()], [x])



# Rows of four terms: zeros of both signs at the extremes, either first; NaNs
# of other payloads; an infinity beside them.
_EXTREME_ROWS: Final[tuple[tuple[float | str, ...], ...]] = (
    (-1.0, -0.0, 0.0, -2.0),
    (-1.0, 0.0, -0.0, -2.0),
    (1.0, 0.0, -0.0, 2.0),
    (1.0, -0.0, 0.0, 2.0),
    (-0.0, -0.0, 0.0, 0.0),
    (0.0, 0.0, -0.0, -0.0),
    (1.0, NAN_A, 2.0, NAN_B),
    (NAN_B, 3.0, NAN_A, -math.inf),
    (-math.inf, -math.inf, -0.0, math.inf),
)


@law("reduce")
def test_reduce_signed_zeros_and_nans(subject: Subject, data: Data) -> None:
    """Fixed rows at every float dtype with NaNs: Max and Min with −0 and +0
    both at the extreme, either first (Max gives +0, Min −0), Arg's position
    the first term with those bits; with NaNs of other payloads, the first
    NaN's position (and its bits, where the library states that a NaN
    result is the first NaN term's). Contract: 'Monoid Max and Monoid Min are
    Prog.binary.Maximum and Prog.binary.Minimum of the terms' ('−0 below
    +0'); 'Arg e ... its position ..., that of the first term with its bits,
    or of the first NaN term where it is a NaN'."""
    first_nan_bits = says(subject.library.statement, "reduce", "first NaN term's bits")
    for dt in _FLOATS:
        v = np.stack([elements(dt, row) for row in _EXTREME_ROWS])
        for r in (S.Monoid.MAX, S.Monoid.MIN, S.Arg(S.Extreme.MAX), S.Arg(S.Extreme.MIN)):
            out = _reduce(subject, dt, v, r)
            if out.declined:
                continue
            what = f"reduce {r} of {dt.name} rows {[list(row) for row in _EXTREME_ROWS]}"
            check_fixed(dt, r, v, out.results, what, False)
            if first_nan_bits:
                _first_nan_bits(dt, v, out.results[0], what)


@law("scan")
def test_scan_signed_zeros_and_nans(subject: Subject, data: Data) -> None:
    """Fixed rows at every float dtype with NaNs, forward and reverse: Max,
    Min and Arg scans keep −0 below +0 (either first) and a NaN from the
    first NaN on; Arg's positions (forward) those of the first term with the
    extreme's bits or the first NaN; along an empty or a one-element axis,
    the terms themselves. Contract: 'A scan ... a Max or Min scan, is
    exact'."""
    from .test_scan import exact_scan

    for dt in _FLOATS:
        v = np.stack([elements(dt, row) for row in _EXTREME_ROWS])
        for r in (S.Monoid.MAX, S.Monoid.MIN, S.Arg(S.Extreme.MAX), S.Arg(S.Extreme.MIN)):
            for reverse in (False, True):
                spec = S.Scan(Prog.identity(dt), (S.PLAIN,), 1, r, 0, dt, reverse, False)
                out = _call(subject, spec, [(d, v.shape) for d in spec.result_dtypes()],
                            [contiguous(subject, dt, v)])
                if out.declined:
                    continue
                rows = v[:, ::-1] if reverse else v
                want, pos, nan = exact_scan(dt, dt, r, rows, None)
                what = f"scan {r} of {dt.name}{' reversed' if reverse else ''} of rows " \
                    f"{[list(row) for row in _EXTREME_ROWS]}"
                assert_bits(dt, out.results[0], want[:, ::-1] if reverse else want, what,
                            any_nan=nan[:, ::-1] if reverse else nan)
                if pos is not None and not reverse:
                    assert_bits(D.int64, out.results[1], pos, f"{what}: positions")
        for shape in ((3, 0), (17, 1)):
            v1 = elements(dt, [-0.0, 0.0, NAN_A, 1.5] * 5)[: math.prod(shape)].reshape(shape)
            for r in (S.Monoid.MAX, S.Arg(S.Extreme.MIN)):
                spec = S.Scan(Prog.identity(dt), (S.PLAIN,), 1, r, 0, dt, False, False)
                out = _call(subject, spec, [(d, shape) for d in spec.result_dtypes()],
                            [contiguous(subject, dt, v1)])
                if out.declined:
                    continue
                want, pos, nan = exact_scan(dt, dt, r, v1, None)
                what = f"scan {r} of {dt.name} along an axis of {shape[1]}"
                assert_bits(dt, out.results[0], want, what, any_nan=nan)
                if pos is not None:
                    assert_bits(D.int64, out.results[1], pos, f"{what}: positions")


def _first_nan_bits(dt: Dtype, rows: Arr, got: Arr, what: str) -> None:
    """Where a row holds a NaN, the result has the first NaN term's bits."""
    nan = O.is_nan(dt, rows)
    for i in np.flatnonzero(nan.any(axis=-1)):
        j = int(np.argmax(nan[i]))
        assert_bits(dt, got[i:i + 1], rows[i, j:j + 1], f"{what}: row {i}, whose first NaN term is "
                    "at {j} (the library states: 'a NaN ... result is the first NaN term's bits')")


@law("reduce")
def test_reduce_empty_and_single_axes(subject: Subject, data: Data) -> None:
    """Fixed shapes: a Sum of no term is +0 and a Prod 1; a Sum of one or two
    −0 terms is +0 (sixteen and more results of few terms, and one result);
    a Sum or Prod of one term is that term (its bound is 0). Contract:
    'Monoid Sum adds the terms from +0, ..., so a sum of -0 terms is +0, and
    an empty product is 1'; 'a float sum of n terms ... is within
    γ(n - 1) Σ|x|'."""
    for dt in (D.float32, D.float64, D.float16, D.bfloat16, D.complex64):
        for shape in ((3, 0), (17, 1), (17, 2), (1, 1), (1, 2), (40, 16)):
            neg = np.full(shape, -0.0)
            v = (np.asarray(neg, dtype=dt.numpy_dtype) if dt.is_complex
                 else np.asarray(D.of_float(dt, neg)))
            if dt.is_complex:
                v.view(np.float32)[...] = -0.0
            out = _reduce(subject, dt, v, S.Monoid.SUM)
            if not out.declined:
                zero = np.zeros(shape[:-1], dtype=dt.numpy_dtype)
                assert_bits(dt, out.results[0], zero, f"reduce Sum of {dt.name} −0 terms of shape "
                            f"{list(shape)} (contract: 'a sum of -0 terms is +0')")
            out = _reduce(subject, dt, v, S.Monoid.PROD)
            if not out.declined and shape[-1] == 0:
                one = np.ones(shape[:-1], dtype=dt.numpy_dtype)
                assert_bits(dt, out.results[0], one, "reduce Prod of no term (contract: 'an empty "
                            "product is 1')")
        if dt.is_complex:
            continue
        single = elements(dt, [1.5, -2.5, 3.0, -0.25, 65504.0, 2.0**-14] * 3).reshape(18, 1)
        for r in (S.Monoid.SUM, S.Monoid.PROD):
            out = _reduce(subject, dt, single, r)
            if out.declined:
                continue
            assert_bits(dt, out.results[0], single[:, 0], f"reduce {r} of one {dt.name} term: the "
                        "term itself (a sum of one term is within γ(0)·|x| = 0 of it; 1·x is x)")


@law("reduce")
def test_reduce_integer_wrapping_edges(subject: Subject, data: Data) -> None:
    """Fixed rows at the narrow integer widths' range edges: Sum and Prod wrap
    in the carrier and store into the dtype, exactly. Contract: 'Integers
    wrap'."""
    for dt in (D.int4, D.uint4, D.int8, D.uint8, D.int16, D.uint16, D.int32):
        lo, hi = dt.int_range
        rows = np.array([[hi, hi, 1], [lo, -1 if lo < 0 else hi, lo], [hi, 2, hi], [lo, lo, 3]],
                        dtype=np.int64).astype(dt.numpy_dtype)
        for r in (S.Monoid.SUM, S.Monoid.PROD, S.Monoid.MAX, S.Arg(S.Extreme.MIN)):
            out = _reduce(subject, dt, rows, r)
            if not out.declined:
                check_fixed(dt, r, rows, out.results, f"reduce {r} of {dt.name} {rows.tolist()}",
                            False)


@law("reduce")
def test_reduce_logsumexp_edges(subject: Subject, data: Data) -> None:
    """Fixed rows: Logsumexp of large equal terms (whose exponentials
    overflow without the shift by the maximum) is the term plus ln n; of terms
    all −∞, −∞; with +∞ and no NaN, +∞. Contract: 'It is -∞ for no term or
    terms all -∞, +∞ where a term is +∞ and none is NaN'."""
    for dt in (D.float32, D.float64, D.bfloat16):
        v = elements(dt, [1000.0, 1000.0, -math.inf, -math.inf, -math.inf, -math.inf,
                          math.inf, 5.0, 200.0, -200.0]).reshape(5, 2)
        out = _reduce(subject, dt, v, S.LOGSUMEXP)
        if out.declined:
            continue
        got = O.to_float64(dt, out.results[0])
        t = O.to_float64(dt, v)
        u = unit_roundoff(dt)
        wants = [t[0, 0] + math.log(2), -math.inf, -math.inf, math.inf, 200.0]
        for i, want in enumerate(wants):
            if math.isinf(want):
                ok = _special_ok(dt, got[i], want)
            else:
                ok = bool(O.within(dt, got[i], want, 16 * u * (abs(want) + 4))) and \
                    math.isfinite(got[i])
            if not ok:
                raise fail(f"reduce Logsumexp of {dt.name} {t[i].tolist()} is {got[i]!r}, not "
                           f"{want!r} (contract: '-∞ for ... terms all -∞, +∞ where a term is +∞'; "
                           "m + log Σ exp(x − m) within a first-order bound)")


# --------------------------------------------------------------------------
# Moments
# --------------------------------------------------------------------------


def _moment_rows(dt: Dtype) -> Arr:
    """Rows of 1, 2, 17 and 1025 terms: constant ones, and ones of a large
    mean and a spread of a few units in the last place of the mean's scale
    (values exact in ``dt``)."""
    big = 1.0e6 if dt is D.float32 else 1.0e9
    step = 2.0**-4 if dt is D.float32 else 2.0**-10
    rows = []
    for n in (1, 2, 17, 1025):
        k = np.arange(n)
        rows.append(np.full(n, 3.0))
        rows.append(np.full(n, -7.5e5 if dt is D.float32 else -3.25e12))
        rows.append(big + step * (k % 4))
        rows.append(-big + step * ((k * 7) % 5))
    width = max(len(r) for r in rows)
    return np.asarray([np.pad(r, (0, width - len(r)), constant_values=np.nan) for r in rows])


@law("reduce")
def test_reduce_moments_edges(subject: Subject, data: Data) -> None:
    """Fixed rows: Moments of constant rows and of rows of a large mean and a
    small spread is within the library's own stated bound where it states the
    two-pass algorithm (|mean − μ| ≤ δ = γ(n)·Σ|x|/n, |var − σ²| ≤
    γ(n + 3)·σ² + (1 + γ(n + 3))·δ², u = 2⁻⁵³), else the contract's generic
    one; the variance is never negative. Contract: 'The variance is never
    negative'; design §5: 'The conformance kit holds each library to its own
    statement'."""
    two_pass = says(subject.library.statement, "Moments (reduce)", "two passes")
    u = 2.0**-53
    for dt in (D.float32, D.float64):
        table = _moment_rows(dt)
        for row in table:
            terms = row[~np.isnan(row)]
            n = terms.size
            v = np.asarray(terms, dtype=dt.numpy_dtype)[None, :]
            for rdt in (dt, D.float64):
                out = _reduce(subject, dt, v, S.MOMENTS, rdt)
                if out.declined:
                    continue
                mean = float(O.to_float64(rdt, out.results[0])[0])
                var = float(O.to_float64(rdt, out.results[1])[0])
                exact = [Fraction(float(t)) for t in terms]
                mu = sum(exact, Fraction(0)) / n
                sigma2 = sum(((t - mu) ** 2 for t in exact), Fraction(0)) / n
                absum = float(np.abs(terms).sum())
                what = (f"reduce Moments of {n} {dt.name} terms {terms[:4].tolist()}… into "
                        f"{rdt.name}: ({mean!r}, {var!r})")
                if var < 0:
                    raise fail(f"{what}: a negative variance (contract: 'The variance is never "
                               "negative')")
                if two_pass:
                    g = (n + 3) * u / (1 - (n + 3) * u)
                    delta = n * u / (1 - n * u) * absum / n
                    b_mean = delta
                    b_var = g * float(sigma2) + (1 + g) * delta**2
                    source = "the library's stated two-pass bound"
                else:
                    gn = n * u / (1 - n * u)
                    b_mean = 2 * gn * absum / n + u * abs(float(mu))
                    b_var = 4 * (n + 3) * u * float((terms**2).sum()) / n
                    source = "the kit's generic bound"
                if not O.within(rdt, mean, float(mu), b_mean):
                    raise fail(f"{what}: the mean is beyond {b_mean!r} of the exact {float(mu)!r} "
                               f"({source})")
                if not O.within(rdt, var, float(sigma2), b_var):
                    raise fail(f"{what}: the variance is beyond {b_var!r} of the exact "
                               f"{float(sigma2)!r} ({source})")


# --------------------------------------------------------------------------
# Sort
# --------------------------------------------------------------------------


def _tie_row(dt: Dtype, n: int, seed: int) -> Arr:
    """``n`` terms of ``dt`` drawn from three values (at floats: −0, +0 and a
    NaN of either payload among them), so every element has equals."""
    rng = np.random.default_rng(seed)
    if dt.is_float and dt.float_format is not None and dt.float_format.nans:
        pool = elements(dt, [-0.0, 0.0, NAN_A, 1.5, NAN_B, -1.5])
    elif dt.is_complex:
        pool = np.array([complex(0, 1), complex(-0.0, 1), complex(0, -0.0), complex(np.nan, 0)],
                        dtype=dt.numpy_dtype)
    else:
        pool = G.specials(dt)[:3]
    return np.asarray(pool[rng.integers(0, len(pool), n)])


@law("sort")
def test_sort_ties_every_direction(subject: Subject, data: Data) -> None:
    """Fixed rows of many equal elements (−0 beside +0 and NaNs of other
    payloads at floats), short and long (7, 40, 300: past the lengths where a
    library may change algorithm, 256 and more for the host's radix sort),
    ascending and descending, whole and top-k (1, a quarter, half): stable
    both ways, values x's bits. Contract (upstream §8): 'descending reverses
    the order but stays stable: equal elements keep increasing positions';
    design §4 'stable, total order, NaNs last'."""
    for dt in (D.float32, D.float64, D.float16, D.int8, D.uint32, D.bool_, D.complex64):
        for n in (7, 40, 300):
            v = np.stack([_tie_row(dt, n, seed) for seed in (n, n + 1)])
            x = contiguous(subject, dt, v)
            for descending in (False, True):
                for k in (None, 1, n // 4, n // 2):
                    spec = S.Sort(1, descending, k)
                    m = n if k is None else k
                    out = _call(subject, spec, [(dt, (2, m)), (D.int64, (2, m))], [x])
                    if out.declined:
                        continue
                    want_v, want_p = O.sort(v, dt, 1, descending, k)
                    what = (f"sort{' descending' if descending else ''} of {n} {dt.name} with ties, "
                            f"k={k}")
                    assert_bits(D.int64, out.results[1], want_p, f"{what}: positions (equal "
                                "elements keep increasing positions)")
                    assert_bits(dt, out.results[0], want_v, f"{what}: values")


# --------------------------------------------------------------------------
# Scatter Add: the chain order a library states
# --------------------------------------------------------------------------


@law("scatter")
def test_scatter_fixed_chains(subject: Subject, data: Data) -> None:
    """Fixed scatters of many duplicates: Add of moderate float terms, where
    a library states that it chains each position's updates in C order from
    +0 + into (float32 for the narrow floats, one rounding), has the bits of
    that chain, else is within γ(n − 1)·Σ|x| of the exact sum; Max and Min of
    terms with NaNs and zeros of both signs are Prog's Maximum and Minimum
    chained from into (any NaN for a NaN). Contract (upstream §8): 'Add
    computes +0 + x + u1 + …'; design §5: 'The conformance kit holds each
    library to its own statement'."""
    from .test_orders import scatter_chain_check

    rng = np.random.default_rng(23)
    for dt in (D.float32, D.float64, D.float16, D.bfloat16, D.complex64):
        for shape, n in (((3, 2), 40), ((5,), 60)):
            into_v = G.values(dt, shape, "moderate", 1)
            upd_v = G.values(dt, (n, *shape[1:]), "moderate", 2)
            idx = rng.integers(0, shape[0], (n, *shape[1:])).astype(np.int64)
            ops = [contiguous(subject, dt, into_v), contiguous(subject, D.int64, idx),
                   contiguous(subject, dt, upd_v)]
            spec = S.Scatter(0, S.Combine.ADD, False)
            out = _call(subject, spec, [(dt, shape)], ops)
            if not out.declined:
                scatter_chain_check(subject, dt, spec, out.results[0], into_v, idx, upd_v)
    tokens: list[float | str] = [NAN_A, -0.0, 0.0, 1.0, -1.0, NAN_B, 0.0, -0.0]
    for dt in (D.float32, D.float16, D.float64):
        into_v = elements(dt, [0.0, -0.0, 2.0, NAN_A])
        upd_v = elements(dt, tokens * 2)
        idx = np.array([0, 1, 2, 3, 0, 1, 2, 3, 3, 2, 1, 0, 0, 1, 2, 3], dtype=np.int64)
        for combine in (S.Combine.MAX, S.Combine.MIN):
            ops = [contiguous(subject, dt, into_v), contiguous(subject, D.int64, idx),
                   contiguous(subject, dt, upd_v)]
            spec = S.Scatter(0, combine, False)
            out = _call(subject, spec, [(dt, (4,))], ops)
            if out.declined:
                continue
            _, chains = O.scatter(into_v, idx, upd_v, 0, combine)
            r = S.Monoid.MAX if combine is S.Combine.MAX else S.Monoid.MIN
            for i, chain in enumerate(chains):
                want, _, nan = O.reduce_fixed(dt, np.asarray(chain, dtype=dt.numpy_dtype)[None, :], r,
                                                 in_carrier=False)
                assert_bits(dt, out.results[0][i:i + 1], want, f"scatter {combine.value} of {dt.name} "
                            f"at {idx.tolist()}: element {i}, Prog's {r.value} of into and its "
                            "updates (−0 below +0, a NaN where one is)", any_nan=nan)


# --------------------------------------------------------------------------
# Contract: every dtype pairing
# --------------------------------------------------------------------------

#: The accumulators a contraction is held to.
_ACCS: Final = (D.float32, D.float64, D.int32, D.int64, D.complex64, D.complex128)


def _small(dt: Dtype, shape: tuple[int, ...], seed: int) -> Arr:
    """Integers 0 to 3 (0 and 1 for booleans) as host elements of ``dt``:
    exact in every dtype, so every product and sum is."""
    v = np.random.default_rng(seed).integers(0, 2 if dt.is_bool else 4, shape)
    if dt.is_bool:
        return v.astype(np.bool_)
    if dt.is_float:
        return np.asarray(D.of_float(dt, v.astype(np.float64)))
    return v.astype(dt.numpy_dtype)


def _number(dt: Dtype, v: Arr) -> Arr:
    """Host elements as complex128 numbers (booleans as 0 and 1)."""
    if dt.is_bool:
        return np.asarray(O.units(v)[..., 0] != 0, dtype=np.complex128)
    if dt.is_float:
        return np.asarray(O.to_float64(dt, v), dtype=np.complex128)
    return np.asarray(v).astype(np.complex128)


def _stored(dst: Dtype, exact: Arr) -> Arr | None:
    """The exact result stored into ``dst`` (floats by the store rule, integers
    wrapping, complex part by part), or None where the kinds do not match."""
    if dst.is_complex:
        out: Arr = exact.astype(dst.numpy_dtype)
        return out
    if dst.is_float:
        return np.asarray(D.of_float(dst, exact.real))
    if dst.is_int:
        lo, hi = dst.int_range
        ints = [((int(x) - lo) % (hi - lo + 1)) + lo for x in exact.real.reshape(-1)]
        return np.asarray(ints, dtype=object).reshape(exact.shape).astype(dst.numpy_dtype) \
            if dst.bits >= 8 else np.asarray(ints, dtype=np.int64).reshape(exact.shape).astype(
                dst.numpy_dtype)
    return None


def _matches(acc: Dtype, dst: Dtype) -> bool:
    return (acc.is_int and dst.is_int) or (acc.is_complex and dst.is_complex) or \
        (acc.is_float and dst.is_float)


@law("contract")
def test_contract_dtype_pairings(subject: Subject, data: Data) -> None:
    """A fixed contraction (a [2, 3] · b [3, 2] of small integers) at every
    accumulator the kit draws, with every dtype as dst, as init and as a:
    declined exactly where the statement says so and then writing nothing;
    computed, the exact result stored once into dst (floats by the store
    rule, integers wrapping). Contract: 'Its .mli states ... which cases it
    declines'; 'it does so before any write'; 'init + Σ a·b ... rounded once
    into dst'."""
    base = S.Contract((), ((1, 0),), D.float32, False, (None, None), None)
    for acc in _ACCS:
        part = D.int8 if acc.is_int else (D.float32 if acc.is_complex else D.float16)
        for role in ("dst", "init", "a"):
            for dt in D.all:
                a_dt = dt if role == "a" else part
                dst = dt if role == "dst" else acc
                spec = S.Contract(base.batch, base.contracting, acc, role == "init", (None, None),
                                  None)
                av, bv = _small(a_dt, (2, 3), 1), _small(part, (3, 2), 2)
                ops = [contiguous(subject, a_dt, av), contiguous(subject, part, bv)]
                exact = _number(a_dt, av) @ _number(part, bv)
                if role == "init":
                    iv = _small(dt, (2, 2), 3)
                    ops.append(contiguous(subject, dt, iv))
                    exact = exact + _number(dt, iv)
                out = _call(subject, spec, [(dst, (2, 2))], ops)
                if out.declined or not _matches(acc, dst):
                    continue
                want = _stored(dst, exact)
                assert want is not None
                assert_bits(dst, out.results[0], want, f"contract in {acc.name} of a {a_dt.name}, b "
                            f"{part.name}{', init ' + dt.name if role == 'init' else ''} into "
                            f"{dst.name}: the exact result stored once into dst")

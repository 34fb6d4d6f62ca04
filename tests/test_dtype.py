"""The 21 dtypes, the store rule and packed storage (upstream-facts §5, the
contract's carrier, float_carrier, accumulates, same_precision and
full_precision).

The store rule is held to an exact reference written here, independently of
``dtype.py``: each format is described by its bit fields alone, codes are
decoded exactly with ``fractions.Fraction``, and a value rounds by Python's
``round`` of a ``Fraction`` (to nearest, ties to even). For the formats of a
byte or less a second reference rounds to the nearest code of a table of every
code, ties to the even code, and the two references are checked to agree.
"""

from __future__ import annotations

import functools
import itertools
import math
import pickle
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from nxkernel_core import dtype as D

SETTINGS = settings(max_examples=200, deadline=None)
LIGHT = settings(max_examples=100, deadline=None)  # secondary laws

# --------------------------------------------------------------------------
# Independent format descriptions and exact decoding
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Fmt:
    """A binary float format by its fields: ``specials`` is ``ieee`` (the top
    exponent is inf/NaN), ``fn`` (only S.1111.111 is NaN, no inf) or ``none``."""

    ebits: int
    mbits: int
    bias: int
    specials: str
    max_finite: Fraction
    overflow_to_inf: bool

    @property
    def width(self) -> int:
        return 1 + self.ebits + self.mbits


FMT: dict[str, Fmt] = {
    "float64": Fmt(11, 52, 1023, "ieee", (2 - Fraction(1, 2**52)) * 2**1023, True),
    "float32": Fmt(8, 23, 127, "ieee", (2 - Fraction(1, 2**23)) * 2**127, True),
    "float16": Fmt(5, 10, 15, "ieee", Fraction(65504), True),
    "bfloat16": Fmt(8, 7, 127, "ieee", (2 - Fraction(1, 2**7)) * 2**127, True),
    "float8_e4m3fn": Fmt(4, 3, 7, "fn", Fraction(448), False),
    "float8_e5m2": Fmt(5, 2, 15, "ieee", Fraction(57344), False),
    "float4_e2m1fn": Fmt(2, 1, 1, "none", Fraction(6), False),
}


def decode(f: Fmt, code: int) -> Fraction | float:
    """The exact value of ``code``: a Fraction, or a float for ±inf and NaN
    (a negative zero decodes as the float -0.0)."""
    sign = -1 if code >> (f.ebits + f.mbits) & 1 else 1
    e = (code >> f.mbits) & ((1 << f.ebits) - 1)
    m = code & ((1 << f.mbits) - 1)
    top = (1 << f.ebits) - 1
    if f.specials == "ieee" and e == top:
        return sign * math.inf if m == 0 else math.nan
    if f.specials == "fn" and e == top and m == (1 << f.mbits) - 1:
        return math.nan
    if e == 0:
        mag = Fraction(m, 1 << f.mbits) * Fraction(2) ** (1 - f.bias)
    else:
        mag = (1 + Fraction(m, 1 << f.mbits)) * Fraction(2) ** (e - f.bias)
    if mag == 0:
        return -0.0 if sign < 0 else Fraction(0)
    return sign * mag


def ref_store(f: Fmt, x: float | Fraction) -> float:
    """The store rule, exactly: round once to nearest, ties to even, exponent
    unbounded above, subnormals below; then overflow to ±inf or saturation.
    Returns a float64 carrying the result's value and sign."""
    if isinstance(x, float):
        if math.isnan(x):
            return 0.0 if f.specials == "none" else math.nan
        if math.isinf(x):
            if f.overflow_to_inf:
                return x
            return math.copysign(float(f.max_finite), x)
        if x == 0:
            return x
    q = Fraction(x)
    if q == 0:
        return 0.0
    neg = q < 0
    a = -q if neg else q
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if a < Fraction(2) ** e:
        e -= 1
    assert Fraction(2) ** e <= a < Fraction(2) ** (e + 1)
    quantum = Fraction(2) ** (max(e, 1 - f.bias) - f.mbits)
    r = round(a / quantum) * quantum  # Fraction.__round__: ties to even
    overflow = math.inf if f.overflow_to_inf else float(f.max_finite)
    mag = overflow if r > f.max_finite else float(r)
    return -mag if neg else mag


@functools.cache
def code_table(f: Fmt) -> list[tuple[Fraction, int]]:
    """Every finite non-negative value of a small format with its code, ascending."""
    out = []
    for c in range(1 << (f.width - 1)):
        v = decode(f, c)
        if isinstance(v, Fraction):
            out.append((v, c))
    out.sort()
    return out


def table_store(f: Fmt, x: float) -> float:
    """The store rule for a format of a byte or less by its table of codes:
    the nearest code, ties to the even code, saturation above the maximum."""
    if math.isnan(x):
        return 0.0 if f.specials == "none" else math.nan
    if x == 0:
        return x
    a = abs(x)
    if a > f.max_finite:
        return math.copysign(float(f.max_finite), x)
    qa = Fraction(a)
    table = code_table(f)
    below = max((vc for vc in table if vc[0] <= qa), key=lambda vc: vc[0])
    above = min((vc for vc in table if vc[0] >= qa), key=lambda vc: vc[0])
    da, db = qa - below[0], above[0] - qa
    if da < db:
        pick = below[0]
    elif db < da:
        pick = above[0]
    else:
        pick = below[0] if below[1] % 2 == 0 else above[0]
    return math.copysign(float(pick), x)


def same(got: float, want: float) -> bool:
    """Equal values with equal signs (so ±0 differ), or both NaN."""
    if math.isnan(want):
        return math.isnan(got)
    return got == want and math.copysign(1.0, got) == math.copysign(1.0, want)


def check_stores(dt: D.Dtype, xs: Sequence[float], wants: Sequence[float]) -> None:
    out = D.of_float(dt, np.array(xs, dtype=np.float64))
    assert out.dtype == dt.numpy_dtype
    got = out.astype(np.float64).tolist()
    bad = [(x, g, w) for x, g, w in zip(xs, got, wants, strict=True) if not same(g, w)]
    assert not bad, f"{dt.name}: (input, stored, expected) {bad[:10]}"


def nudges(x: float) -> list[float]:
    """``x`` and the float64 values just below and above it."""
    return [x, float(np.nextafter(x, -np.inf)), float(np.nextafter(x, np.inf))]


# --------------------------------------------------------------------------
# The reference itself: decoding agrees with ml_dtypes and NumPy
# --------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2", "float4_e2m1fn"])
def test_decode_matches_host_view(name: str) -> None:
    f = FMT[name]
    host = np.arange(1 << f.width, dtype=np.uint8).view(D.by_name(name).numpy_dtype)
    for c, h in enumerate(host.astype(np.float64).tolist()):
        assert same(h, float(decode(f, c))), (name, c)


def test_decode_of_float16_and_bfloat16_matches_host_view() -> None:
    codes = np.arange(1 << 16, dtype=np.uint16)
    for name in ("float16", "bfloat16"):
        with np.errstate(invalid="ignore"):
            host = codes.view(D.by_name(name).numpy_dtype).astype(np.float64).tolist()
        f = FMT[name]
        for c in range(0, 1 << 16, 97):
            assert same(host[c], float(decode(f, c))), (name, c)


def test_format_maxima() -> None:
    for name, f in FMT.items():
        top = (1 << (f.width - 1)) - 1  # the largest positive code
        maxcode = {"ieee": top - (1 << f.mbits), "fn": top - 1, "none": top}[f.specials]
        assert decode(f, maxcode) == f.max_finite, name
        # Every larger positive code is inf or NaN (sampled for the wide formats).
        for c in range(maxcode + 1, top + 1, max(1, (top - maxcode) // 64)):
            assert not isinstance(decode(f, c), Fraction), (name, c)
    assert FMT["float8_e4m3fn"].max_finite == 448
    assert FMT["float8_e5m2"].max_finite == 57344
    assert FMT["float4_e2m1fn"].max_finite == 6


def test_float_format_records() -> None:
    """dtype.py's own description of each format agrees with the one here
    (upstream's float_format: exponent and fraction bits, infinities, NaNs,
    epsilon, min_normal, max_finite)."""
    for name, f in FMT.items():
        ff = D.by_name(name).float_format
        assert ff is not None
        assert (ff.exponent_bits, ff.fraction_bits, ff.min_exponent) == (f.ebits, f.mbits, 1 - f.bias)
        assert ff.max_finite == float(f.max_finite)
        assert ff.infinities == (f.specials == "ieee"), name  # e5m2 encodes ±inf
        assert ff.nans == (f.specials != "none")
        assert ff.saturates == (not f.overflow_to_inf)
        assert ff.epsilon == 2.0**-f.mbits
        assert ff.min_normal == 2.0 ** (1 - f.bias)
    for dt in D.all:
        assert (dt.float_format is not None) == dt.is_float


def test_e2m1fn_values() -> None:
    vals = sorted({abs(v) for v, _ in code_table(FMT["float4_e2m1fn"])})
    assert vals == [Fraction(v) for v in ("0", "0.5", "1", "1.5", "2", "3", "4", "6")]


# --------------------------------------------------------------------------
# The store rule: every code of the formats of a byte or less
# --------------------------------------------------------------------------

SMALL = ["float8_e4m3fn", "float8_e5m2", "float4_e2m1fn"]


def small_points(f: Fmt) -> list[float]:
    """Every code's value, every midpoint between neighbours, both signs, each
    nudged by one float64 ulp either way, and points past the maximum."""
    mags = [v for v, _ in code_table(f)]
    pts: list[float] = []
    for v in mags:
        pts += nudges(float(v))
    for lo, hi in itertools.pairwise(mags):
        pts += nudges(float((lo + hi) / 2))
    m = f.max_finite
    top_ulp = m - mags[-2]
    for extra in (top_ulp / 4, top_ulp / 2, top_ulp, 2 * top_ulp, m):
        pts += nudges(float(m + extra))
    pts += [1e300, math.inf, float(np.nextafter(0.0, 1.0)), 1e-300]
    return pts + [-p for p in pts]


@pytest.mark.parametrize("name", SMALL)
def test_small_format_every_code_and_midpoint(name: str) -> None:
    f = FMT[name]
    dt = D.by_name(name)
    pts = small_points(f)
    wants = [ref_store(f, x) for x in pts]
    # The two references agree.
    assert all(same(w, table_store(f, x)) for x, w in zip(pts, wants, strict=True))
    check_stores(dt, pts, wants)


@pytest.mark.parametrize("name", SMALL)
def test_small_format_codes_store_to_themselves(name: str) -> None:
    f = FMT[name]
    dt = D.by_name(name)
    codes = np.arange(1 << f.width, dtype=np.uint8)
    vals = codes.view(dt.numpy_dtype).astype(np.float64)
    out = D.of_float(dt, vals)
    keep = np.isfinite(vals)  # e5m2's infinities saturate (tested below)
    got = out.view(np.uint8) & np.uint8((1 << f.width) - 1)
    assert np.array_equal(got[keep], codes[keep])


@pytest.mark.parametrize("name", SMALL)
def test_small_format_ties_go_to_even_code(name: str) -> None:
    f = FMT[name]
    dt = D.by_name(name)
    table = code_table(f)
    for (lo, clo), (hi, chi) in itertools.pairwise(table):
        mid = float((lo + hi) / 2)
        for sign in (1.0, -1.0):
            stored = D.of_float(dt, sign * mid).astype(np.float64)
            want = lo if clo % 2 == 0 else hi
            assert same(float(stored), sign * float(want)), (name, mid)
        assert (clo % 2) != (chi % 2)


def test_saturation_and_nan_in_small_formats() -> None:
    big = [449.0, 464.0, 480.0, 1e6, 1e308, math.inf]
    check_stores(D.float8_e4m3fn, big + [-x for x in big], [448.0] * 6 + [-448.0] * 6)
    big = [57344.0, 61439.0, 61440.0, 65536.0, 1e308, math.inf]
    check_stores(D.float8_e5m2, big + [-x for x in big], [57344.0] * 6 + [-57344.0] * 6)
    big = [6.0, 6.5, 7.0, 8.0, 1e308, math.inf]
    check_stores(D.float4_e2m1fn, big + [-x for x in big], [6.0] * 6 + [-6.0] * 6)
    # NaN stays NaN, but becomes +0 in e2m1fn.
    nan = np.array([math.nan, -math.nan])
    assert np.isnan(D.of_float(D.float8_e4m3fn, nan).astype(np.float64)).all()
    assert np.isnan(D.of_float(D.float8_e5m2, nan).astype(np.float64)).all()
    check_stores(D.float4_e2m1fn, [math.nan, -math.nan], [0.0, 0.0])


@SETTINGS
@given(st.floats(allow_nan=True, allow_infinity=True))
def test_no_store_makes_an_e5m2_infinity(x: float) -> None:
    out = D.of_float(D.float8_e5m2, x).astype(np.float64)
    assert not np.isinf(out)


# --------------------------------------------------------------------------
# float16, bfloat16, float32: around every rounding point
# --------------------------------------------------------------------------


def rounding_points(f: Fmt, code: int) -> list[float]:
    """For a positive finite code: its value and the midpoint to the next code
    up (a virtual one past the maximum), each nudged by one float64 ulp, with
    both signs."""
    v = decode(f, code)
    assert isinstance(v, Fraction)
    nxt = decode(f, code + 1)
    if not isinstance(nxt, Fraction):  # past the maximum: the next binade's value
        nxt = Fraction(2) ** ((1 << f.ebits) - 1 - f.bias)
    pts = nudges(float(v)) + nudges(float((v + nxt) / 2))
    return pts + [-p for p in pts]


def finite_positive_codes(f: Fmt) -> st.SearchStrategy[int]:
    top = (1 << (f.ebits + f.mbits)) - 1
    return st.integers(0, top).filter(lambda c: isinstance(decode(f, c), Fraction))


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
@SETTINGS
@given(data=st.data())
def test_half_formats_around_every_rounding_point(name: str, data: st.DataObject) -> None:
    f = FMT[name]
    code = data.draw(finite_positive_codes(f))
    pts = rounding_points(f, code)
    check_stores(D.by_name(name), pts, [ref_store(f, x) for x in pts])


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_half_formats_edges(name: str) -> None:
    f = FMT[name]
    # Smallest subnormal, largest subnormal, smallest normal, the largest finite.
    top = (1 << (f.ebits + f.mbits)) - 1
    edges = [0, 1, 2, 3, (1 << f.mbits) - 1, 1 << f.mbits, top - (1 << f.mbits) - 1]
    pts = [p for c in edges for p in rounding_points(f, c)]
    check_stores(D.by_name(name), pts, [ref_store(f, x) for x in pts])


@SETTINGS
@given(st.integers(0, 0x7F7F_FFFF))
def test_float32_ties_and_neighbours(code: int) -> None:
    f = FMT["float32"]
    pts = rounding_points(f, code)
    check_stores(D.float32, pts, [ref_store(f, x) for x in pts])


@SETTINGS
@given(name=st.sampled_from(list(FMT)), x=st.floats(allow_nan=True, allow_infinity=True))
def test_store_rule_law_over_any_float64(name: str, x: float) -> None:
    check_stores(D.by_name(name), [x], [ref_store(FMT[name], x)])


def test_float16_overflow_examples() -> None:
    check_stores(
        D.float16,
        [65504.0, 65519.0, 65519.99, 65520.0, 65536.0, -65519.0, -65520.0, 1e300],
        [65504.0, 65504.0, 65504.0, math.inf, math.inf, -65504.0, -math.inf, math.inf],
    )
    bf_max = float(FMT["bfloat16"].max_finite)
    tie = float(FMT["bfloat16"].max_finite + Fraction(2) ** (127 - 8))
    check_stores(D.bfloat16, [bf_max, tie, float(np.nextafter(tie, 0)), -tie],
                 [bf_max, math.inf, bf_max, -math.inf])
    f32_max = float(np.finfo(np.float32).max)
    tie = float(FMT["float32"].max_finite + Fraction(2) ** (127 - 24))
    check_stores(D.float32, [f32_max, tie, float(np.nextafter(tie, 0)), -tie, 1e300],
                 [f32_max, math.inf, f32_max, -math.inf, math.inf])


@pytest.mark.parametrize("name", ["float32", "float16", "bfloat16", *SMALL])
def test_subnormals_and_signed_zeros(name: str) -> None:
    f = FMT[name]
    tiny = Fraction(2) ** (1 - f.bias - f.mbits)  # the smallest subnormal
    pts = [0.0, -0.0, float(tiny), float(tiny / 2), float(tiny / 4), float(3 * tiny / 2),
           float(tiny / 2) * (1 + 2**-40), 5e-324, 1e-300]
    pts += [-p for p in pts]
    wants = [ref_store(f, x) for x in pts]
    assert same(wants[3], 0.0) and same(wants[len(pts) // 2 + 3], -0.0)
    assert same(wants[5], float(2 * tiny))
    check_stores(D.by_name(name), pts, wants)


def test_float64_is_the_identity_bit_for_bit() -> None:
    vals = np.array([0.0, -0.0, 1.5, 5e-324, -1e308, math.inf, -math.inf])
    payload = np.array([0x7FF0_0000_0000_0001, 0xFFF8_0000_0000_1234], dtype=np.uint64)
    x = np.concatenate([vals, payload.view(np.float64)])
    out = D.of_float(D.float64, x)
    assert out.dtype == np.float64
    assert np.array_equal(out.view(np.uint64), x.view(np.uint64))


@SETTINGS
@given(
    name=st.sampled_from(list(FMT)),
    n=st.integers(-(2**80), 2**80),
    d=st.integers(1, 2**80),
    shift=st.integers(-160, 140),
)
def test_of_fraction_is_the_exact_reference(name: str, n: int, d: int, shift: int) -> None:
    q = Fraction(n, d) * Fraction(2) ** shift
    want = ref_store(FMT[name], q)
    got = D.of_fraction(D.by_name(name), q)
    assert same(got, want) or (q == 0 and got == 0.0), (q, got, want)


@pytest.mark.parametrize("name", list(FMT))
def test_of_fraction_of_float_specials(name: str) -> None:
    f = FMT[name]
    for x in (math.inf, -math.inf, math.nan, 0.0, -0.0):
        assert same(D.of_fraction(D.by_name(name), x), ref_store(f, x)), (name, x)


@pytest.mark.filterwarnings("error")
def test_of_float_is_quiet_on_signalling_nans() -> None:
    snan = np.array([0x7FF0_0000_0000_0001, 0xFFF4_0000_0000_0001], dtype=np.uint64)
    x = snan.view(np.float64)
    for dt in D.all:
        out = D.of_float(dt, x)
        if dt.is_float and dt.float_format is not None and dt.float_format.nans:
            assert np.isnan(out.astype(np.float64)).all()


@pytest.mark.parametrize("name", list(FMT))
def test_of_fraction_at_rounding_points(name: str) -> None:
    f = FMT[name]
    table = (
        [v for v, _ in code_table(f)]
        if f.width <= 8
        else [v for c in range(0, 1 << (f.width - 1), ((1 << (f.width - 1)) // 400) | 1)
              if isinstance(v := decode(f, c), Fraction)]
    )
    for v in table:
        for q in (v, v + Fraction(1, 2**200), v / 2 + v / 4, (v + v * Fraction(257, 256)) / 2):
            for s in (q, -q):
                want = ref_store(f, s)
                assert same(D.of_fraction(D.by_name(name), s), want) or s == 0


# --------------------------------------------------------------------------
# The store rule: integers, booleans, complex
# --------------------------------------------------------------------------

INTS = [D.int64, D.uint64, D.int32, D.uint32, D.int16, D.uint16, D.int8, D.uint8, D.int4, D.uint4]

INT_RANGES = {
    "int64": (-(2**63), 2**63 - 1),
    "uint64": (0, 2**64 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int8": (-128, 127),
    "uint8": (0, 255),
    "int4": (-8, 7),
    "uint4": (0, 15),
}


def ref_int(name: str, x: float) -> int:
    lo, hi = INT_RANGES[name]
    if math.isnan(x):
        return 0
    if math.isinf(x):
        return hi if x > 0 else lo
    return min(hi, max(lo, math.trunc(x)))


def int_stored(dt: D.Dtype, xs: Iterable[float]) -> list[int]:
    out = D.of_float(dt, np.array(list(xs), dtype=np.float64))
    assert out.dtype == dt.numpy_dtype
    if dt.bits < 8:
        return [int(v) for v in out.astype(np.int64).tolist()]
    return [int(v) for v in out.tolist()]


def check_ints(dt: D.Dtype, xs: Sequence[float]) -> None:
    got = int_stored(dt, xs)
    want = [ref_int(dt.name, x) for x in xs]
    bad = [(x, g, w) for x, g, w in zip(xs, got, want, strict=True) if g != w]
    assert not bad, f"{dt.name}: (input, stored, expected) {bad[:10]}"


def test_int_ranges_table() -> None:
    for dt in INTS:
        assert dt.int_range == INT_RANGES[dt.name]


@pytest.mark.parametrize("dt", INTS, ids=lambda d: d.name)
def test_integer_edges(dt: D.Dtype) -> None:
    lo, hi = INT_RANGES[dt.name]
    pts: list[float] = [0.0, -0.0, 0.5, -0.5, 0.999, -0.999, 1.0, -1.0, 1.5, -1.5, 2.5, -2.5]
    for e in (lo, hi, lo - 1, hi + 1, lo + 1, hi - 1):
        for x in (float(e), float(e) + 0.5, float(e) - 0.5, float(e) + 0.75, float(e) - 0.75):
            pts += nudges(x)
    pts += [2.0**63, -(2.0**63), 2.0**64, -(2.0**64), 2.0**63 - 1024, 2.0**64 - 2048]
    pts += [-(2.0**63) - 2048, 1e300, -1e300, math.inf, -math.inf, math.nan, -math.nan]
    check_ints(dt, pts)


def test_64_bit_integer_edges_exactly() -> None:
    assert int_stored(D.int64, [2.0**63, 2.0**63 - 1024, -(2.0**63), -(2.0**63) - 2048]) == [
        2**63 - 1, 2**63 - 1024, -(2**63), -(2**63)]
    assert int_stored(D.uint64, [2.0**64, 2.0**64 - 2048, 2.0**63, -1.0, -0.5, math.nan]) == [
        2**64 - 1, 2**64 - 2048, 2**63, 0, 0, 0]


@pytest.mark.parametrize("dt", [D.int4, D.uint4], ids=lambda d: d.name)
def test_nibbles_every_value(dt: D.Dtype) -> None:
    lo, hi = INT_RANGES[dt.name]
    pts: list[float] = []
    for v in range(lo - 3, hi + 4):
        for dx in (0.0, 0.25, -0.25, 0.5, -0.5, 0.75, -0.75, 0.999, -0.999):
            pts += nudges(v + dx)
    check_ints(dt, pts)
    assert int_stored(dt, [float(v) for v in range(lo, hi + 1)]) == list(range(lo, hi + 1))


@SETTINGS
@given(dt=st.sampled_from(INTS), x=st.floats(allow_nan=True, allow_infinity=True))
def test_integer_truncation_law(dt: D.Dtype, x: float) -> None:
    check_ints(dt, [x])


@SETTINGS
@given(data=st.data())
def test_integer_truncation_near_the_range(data: st.DataObject) -> None:
    dt = data.draw(st.sampled_from(INTS))
    lo, hi = INT_RANGES[dt.name]
    v = data.draw(st.integers(lo - 20, hi + 20))
    x = data.draw(st.floats(float(v) - 1.0, float(v) + 1.0))
    check_ints(dt, [x])


@pytest.mark.parametrize("dt", [D.bool_, D.bit], ids=lambda d: d.name)
def test_bool_stores_nonzero(dt: D.Dtype) -> None:
    xs = [0.0, -0.0, 5e-324, -5e-324, 1.0, -1.0, math.inf, -math.inf, math.nan, -math.nan]
    out = D.of_float(dt, np.array(xs))
    assert out.dtype == np.bool_
    assert out.tolist() == [False, False, True, True, True, True, True, True, True, True]


@pytest.mark.parametrize(("dt", "part"), [(D.complex64, D.float32), (D.complex128, D.float64)],
                         ids=["complex64", "complex128"])
@SETTINGS
@given(x=st.floats(allow_nan=True, allow_infinity=True))
def test_complex_stores_the_real_part(dt: D.Dtype, part: D.Dtype, x: float) -> None:
    out = D.of_float(dt, np.array([x]))
    assert out.dtype == dt.numpy_dtype
    re, im = float(out.real[0]), float(out.imag[0])
    if part is D.float32:
        assert same(re, ref_store(FMT["float32"], x))
    else:
        assert same(re, x)
    assert same(im, 0.0)


def test_of_float_keeps_shape() -> None:
    x = np.linspace(-3, 3, 24).reshape(2, 3, 4)
    for dt in D.all:
        out = D.of_float(dt, x)
        assert out.shape == x.shape
        assert out.dtype == dt.numpy_dtype


# --------------------------------------------------------------------------
# Predicates of the contract
# --------------------------------------------------------------------------

F64, F32, F16, BF16 = D.float64, D.float32, D.float16, D.bfloat16
E4M3, E5M2, E2M1 = D.float8_e4m3fn, D.float8_e5m2, D.float4_e2m1fn
C128, C64 = D.complex128, D.complex64

# carrier: float32 for a float narrower than it, int8 and uint8 for int4 and
# uint4, bool for bit, else dt.
CARRIER = {
    "float64": "float64", "float32": "float32", "float16": "float32", "bfloat16": "float32",
    "float8_e4m3fn": "float32", "float8_e5m2": "float32", "float4_e2m1fn": "float32",
    "int64": "int64", "uint64": "uint64", "int32": "int32", "uint32": "uint32",
    "int16": "int16", "uint16": "uint16", "int8": "int8", "uint8": "uint8",
    "int4": "int8", "uint4": "uint8", "complex128": "complex128", "complex64": "complex64",
    "bool": "bool", "bit": "bool",
}

# accumulates: every dtype but booleans and floats narrower than float32.
NOT_ACCUMULATING = {"float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float4_e2m1fn",
                    "bool", "bit"}

# full_precision: float32, float64, complex64, complex128.
FULL = {"float32", "float64", "complex64", "complex128"}

# same_precision (its doc is lost from the contract page; dtype.py states it):
# a full-precision real dtype and its complex counterpart, either order, or the same one.
SAME_PRECISION = {
    ("float32", "float32"), ("float32", "complex64"), ("complex64", "float32"),
    ("complex64", "complex64"), ("float64", "float64"), ("float64", "complex128"),
    ("complex128", "float64"), ("complex128", "complex128"),
}


def test_carrier_table() -> None:
    assert {dt.name: D.carrier(dt).name for dt in D.all} == CARRIER


def test_carrier_holds_every_element() -> None:
    for dt in D.all:
        c = D.carrier(dt)
        assert c.kind is dt.kind or (dt is D.bit and c is D.bool_)
        assert c.bits >= dt.bits
        assert not c.is_sub_byte
        if dt.is_int:
            lo, hi = dt.int_range
            clo, chi = c.int_range
            assert clo <= lo and hi <= chi


def test_float_carrier() -> None:
    for dt in D.all:
        if dt.is_float:
            assert D.float_carrier(dt) is D.by_name(CARRIER[dt.name])
        else:
            with pytest.raises(ValueError, match=r"^dtype\.float_carrier: "):
                D.float_carrier(dt)


def test_accumulates_table() -> None:
    assert {dt.name for dt in D.all if not D.accumulates(dt)} == NOT_ACCUMULATING


def test_full_precision_table() -> None:
    assert {dt.name for dt in D.all if D.full_precision(dt)} == FULL


def test_same_precision_table() -> None:
    got = {(a.name, b.name) for a in D.all for b in D.all if D.same_precision(a, b)}
    assert got == SAME_PRECISION


def test_accepts_reduction_kind_table() -> None:
    for dt in D.all:
        assert D.accepts_reduction_kind("sum", dt) == (not dt.is_bool)
        assert D.accepts_reduction_kind("prod", dt) == (not dt.is_bool)
        for r in ("max", "min", "arg"):
            assert D.accepts_reduction_kind(r, dt)
        for r in ("logsumexp", "moments"):
            assert D.accepts_reduction_kind(r, dt) == dt.is_float
    with pytest.raises(ValueError, match=r"^dtype\.accepts_reduction_kind: "):
        D.accepts_reduction_kind("mean", D.float32)


# --------------------------------------------------------------------------
# The 21 dtypes (upstream-facts §5)
# --------------------------------------------------------------------------

TABLE = [
    ("float64", 64, "float"), ("float32", 32, "float"), ("float16", 16, "float"),
    ("bfloat16", 16, "float"), ("float8_e4m3fn", 8, "float"), ("float8_e5m2", 8, "float"),
    ("float4_e2m1fn", 4, "float"), ("int64", 64, "signed"), ("uint64", 64, "unsigned"),
    ("int32", 32, "signed"), ("uint32", 32, "unsigned"), ("int16", 16, "signed"),
    ("uint16", 16, "unsigned"), ("int8", 8, "signed"), ("uint8", 8, "unsigned"),
    ("int4", 4, "signed"), ("uint4", 4, "unsigned"), ("complex128", 128, "complex"),
    ("complex64", 64, "complex"), ("bool", 8, "boolean"), ("bit", 1, "boolean"),
]

NUMPY = {
    "float64": np.float64, "float32": np.float32, "float16": np.float16,
    "bfloat16": ml_dtypes.bfloat16, "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
    "float8_e5m2": ml_dtypes.float8_e5m2, "float4_e2m1fn": ml_dtypes.float4_e2m1fn,
    "int64": np.int64, "uint64": np.uint64, "int32": np.int32, "uint32": np.uint32,
    "int16": np.int16, "uint16": np.uint16, "int8": np.int8, "uint8": np.uint8,
    "int4": ml_dtypes.int4, "uint4": ml_dtypes.uint4, "complex128": np.complex128,
    "complex64": np.complex64, "bool": np.bool_, "bit": np.bool_,
}


def test_the_21_dtypes_in_code_order() -> None:
    assert len(D.all) == 21
    got = [(dt.name, dt.bits, dt.kind.value) for dt in D.all]
    assert got == TABLE
    for code, dt in enumerate(D.all):
        assert dt.code == code
        assert D.of_code(code) is dt
        assert D.by_name(dt.name) is dt
        assert repr(dt) == dt.name
        assert dt.numpy_dtype == np.dtype(NUMPY[dt.name])
        assert pickle.loads(pickle.dumps(dt)) is dt
    assert D.bool_ is D.by_name("bool")
    assert getattr(D, "bool") is D.bool_  # noqa: B009 - the name is a builtin's


def test_kind_predicates() -> None:
    for dt in D.all:
        k = dt.kind.value
        assert dt.is_float == (k == "float")
        assert dt.is_int == (k in ("signed", "unsigned"))
        assert dt.is_complex == (k == "complex")
        assert dt.is_bool == (k == "boolean")
        assert dt.is_sub_byte == (dt.bits < 8)


def test_alignment() -> None:
    want = {name: (1 if bits < 8 else bits // 16 if kind == "complex" else bits // 8)
            for name, bits, kind in TABLE}
    assert {dt.name: dt.alignment for dt in D.all} == want
    assert D.complex128.alignment == 8 and D.complex64.alignment == 4


def test_lookup_errors() -> None:
    with pytest.raises(ValueError, match=r"^dtype\.by_name: "):
        D.by_name("float128")
    for code in (-1, 21):
        with pytest.raises(ValueError, match=r"^dtype\.of_code: "):
            D.of_code(code)
    with pytest.raises(ValueError, match=r"^dtype\.of_numpy: "):
        D.of_numpy(np.dtype("U3"))
    with pytest.raises(ValueError, match=r"^Dtype\.int_range: "):
        _ = D.float32.int_range


def test_of_numpy() -> None:
    for dt in D.all:
        assert D.of_numpy(dt.numpy_dtype) is (D.bool_ if dt is D.bit else dt)


@LIGHT
@given(st.integers(0, 10_000))
def test_bytes(n: int) -> None:
    for dt in D.all:
        assert D.bytes(dt, n) == -(-n * dt.bits // 8)
    assert D.bytes(D.bit, n) == (n + 7) // 8
    assert D.bytes(D.int4, n) == (n + 1) // 2
    assert D.bytes(D.complex128, n) == 16 * n


def test_bytes_of_negative_count() -> None:
    with pytest.raises(ValueError, match=r"^dtype\.bytes: "):
        D.bytes(D.float32, -1)


# --------------------------------------------------------------------------
# Packed storage of sub-byte dtypes
# --------------------------------------------------------------------------

SUB_BYTE = [D.float4_e2m1fn, D.int4, D.uint4, D.bit]


def test_sub_byte_dtypes() -> None:
    assert [dt for dt in D.all if dt.is_sub_byte] == SUB_BYTE


def elements(dt: D.Dtype) -> st.SearchStrategy[int]:
    """A sub-byte element as its code."""
    return st.integers(0, (1 << dt.bits) - 1)


def host_of_codes(dt: D.Dtype, codes: Sequence[int]) -> np.ndarray:
    """Host elements from codes, decoded here (not through dtype.py)."""
    if dt is D.bit:
        return np.array([c == 1 for c in codes], dtype=np.bool_)
    if dt is D.int4:
        return np.array([c - 16 if c >= 8 else c for c in codes], dtype=np.int64).astype(
            ml_dtypes.int4)
    if dt is D.uint4:
        return np.array(codes, dtype=np.int64).astype(ml_dtypes.uint4)
    vals = [float(decode(FMT["float4_e2m1fn"], c)) for c in codes]
    return np.array(vals, dtype=np.float64).astype(ml_dtypes.float4_e2m1fn)


def ref_pack(dt: D.Dtype, codes: Sequence[int]) -> bytes:
    """Element p at bits p*b .. p*b+b-1, least significant bit first."""
    word = 0
    for p, c in enumerate(codes):
        word |= c << (p * dt.bits)
    return word.to_bytes(D.bytes(dt, len(codes)), "little")


def codes_of_host(dt: D.Dtype, host: np.ndarray) -> list[int]:
    if dt is D.bit:
        return [int(b) for b in host.tolist()]
    raw = np.ascontiguousarray(host).view(np.uint8) & 0xF
    return [int(c) for c in raw.tolist()]


@LIGHT
@given(data=st.data())
def test_pack_is_bit_exact_and_unpack_inverts_it(data: st.DataObject) -> None:
    dt = data.draw(st.sampled_from(SUB_BYTE))
    codes = data.draw(st.lists(elements(dt), max_size=40))
    host = host_of_codes(dt, codes)
    packed = D.pack(dt, host)
    assert packed.dtype == np.uint8
    assert packed.tobytes() == ref_pack(dt, codes)
    back = D.unpack(dt, packed, np.arange(len(codes)))
    assert back.dtype == dt.numpy_dtype
    assert codes_of_host(dt, back) == codes
    # Values, signed zeros included.
    assert same_host(back, host)


def same_host(a: np.ndarray, b: np.ndarray) -> bool:
    if a.dtype == np.bool_ or a.dtype in (np.dtype(ml_dtypes.int4), np.dtype(ml_dtypes.uint4)):
        return bool(np.array_equal(a.astype(np.int64), b.astype(np.int64)))
    fa, fb = a.astype(np.float64), b.astype(np.float64)
    return all(same(x, y) for x, y in zip(fa.tolist(), fb.tolist(), strict=True))


def test_int4_element_2k_is_the_low_nibble_of_byte_k() -> None:
    packed = D.pack(D.int4, np.array([1, -1, -8, 7, 3], dtype=ml_dtypes.int4))
    assert packed.tolist() == [0xF1, 0x78, 0x03]
    assert D.pack(D.uint4, np.array([0xA, 0x5], dtype=ml_dtypes.uint4)).tolist() == [0x5A]
    assert D.pack(D.bit, [True, False, False, True, True, False, False, False, True]).tolist() == [
        0b0001_1001, 0b1]
    # -0.5 in e2m1fn is S=1 E=00 M=1: code 9; 6 is code 7.
    assert D.pack(D.float4_e2m1fn, np.array([-0.5, 6.0], dtype=ml_dtypes.float4_e2m1fn)).tolist() \
        == [0x79]


def test_pack_of_a_multidimensional_array_is_c_order() -> None:
    v = np.arange(14).reshape(2, 7)
    host = v.astype(ml_dtypes.uint4)
    assert D.pack(D.uint4, host).tobytes() == ref_pack(D.uint4, v.reshape(-1).tolist())
    assert D.pack(D.uint4, host.T).tobytes() == ref_pack(D.uint4, v.T.reshape(-1).tolist())


@LIGHT
@given(data=st.data())
def test_unpack_reads_any_position(data: st.DataObject) -> None:
    dt = data.draw(st.sampled_from(SUB_BYTE))
    storage = np.array(data.draw(st.lists(st.integers(0, 255), min_size=1, max_size=12)),
                       dtype=np.uint8)
    n = storage.size * 8 // dt.bits
    pos = data.draw(st.lists(st.integers(0, n - 1), max_size=20))
    word = int.from_bytes(storage.tobytes(), "little")
    want = [(word >> (p * dt.bits)) & ((1 << dt.bits) - 1) for p in pos]
    got = D.unpack(dt, storage, np.array(pos, dtype=np.int64))
    assert codes_of_host(dt, got) == want
    assert same_host(got, host_of_codes(dt, want))


@LIGHT
@given(data=st.data())
def test_store_codes_leaves_other_bits(data: st.DataObject) -> None:
    dt = data.draw(st.sampled_from(SUB_BYTE))
    storage = np.array(data.draw(st.lists(st.integers(0, 255), min_size=1, max_size=12)),
                       dtype=np.uint8)
    n = storage.size * 8 // dt.bits
    pos = data.draw(st.lists(st.integers(0, n - 1), unique=True, max_size=n))
    codes = data.draw(st.lists(elements(dt), min_size=len(pos), max_size=len(pos)))
    word = int.from_bytes(storage.tobytes(), "little")
    mask = (1 << dt.bits) - 1
    for p, c in zip(pos, codes, strict=True):
        word = (word & ~(mask << (p * dt.bits))) | (c << (p * dt.bits))
    D.store_codes(dt, storage, np.array(pos, dtype=np.int64), host_of_codes(dt, codes))
    assert storage.tobytes() == word.to_bytes(storage.size, "little")


def test_store_codes_broadcasts_a_scalar() -> None:
    storage = np.full(3, 0xFF, dtype=np.uint8)
    D.store_codes(D.int4, storage, [0, 3, 4], np.array(0, dtype=ml_dtypes.int4))
    assert storage.tolist() == [0xF0, 0x0F, 0xF0]
    storage = np.zeros(2, dtype=np.uint8)
    D.store_codes(D.bit, storage, [1, 8, 15], True)
    assert storage.tolist() == [0b10, 0b1000_0001]


def test_packing_errors_name_the_function() -> None:
    for fn, args in ((D.pack, ([1.0],)), (D.unpack, (np.zeros(1, np.uint8), [0])),
                     (D.store_codes, (np.zeros(1, np.uint8), [0], [1]))):
        with pytest.raises(ValueError, match=rf"^dtype\.{fn.__name__}: "):
            fn(D.int8, *args)  # type: ignore[operator]


@LIGHT
@given(st.lists(st.integers(-8, 7), max_size=33))
def test_of_float_then_pack_round_trips_int4(vals: list[int]) -> None:
    host = D.of_float(D.int4, np.array(vals, dtype=np.float64))
    back = D.unpack(D.int4, D.pack(D.int4, host), np.arange(len(vals)))
    assert back.astype(np.int64).tolist() == vals
    assume(len(vals) > 0)
    assert D.pack(D.int4, host).size == (len(vals) + 1) // 2

"""``nxkernel_host``'s ``simdfloat32``, ``simdfloat64`` and ``simderf``: Exp,
Tanh and Erf in vectorised loops, against
values correctly rounded from mpmath at 100 bits; C99 Annex F's special
values exactly; each element's bits a function of its argument alone.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import mpmath
import numpy as np
import numpy.typing as npt
import pytest

from nxkernel_core import dtype as D
from nxkernel_core import evaluator as R
from nxkernel_host import program, simderf, simdfloat32, simdfloat64
from tests.host.sweeps import sweep

Arr = npt.NDArray[Any]

_CTX = mpmath.MPContext()
_CTX.prec = 100
_EXACT: dict[str, Callable[[Any], Any]] = {"exp": _CTX.exp, "tanh": _CTX.tanh, "erf": _CTX.erf}
#: Each kind's function per dtype: the float32 path's three (the narrow
#: floats' value), Exp, Tanh and Erf of float32 in float32 arithmetic
#: (``expf``, ``tanhf``, ``erff``: the float32 kinds'), the float64 kinds.
_KERNEL: dict[tuple[str, str], Callable[..., Arr]] = {
    ("exp", "float32"): simdfloat32.exp32, ("tanh", "float32"): simdfloat32.tanh32,
    ("erf", "float32"): simderf.erf32, ("erf", "float64"): simderf.erf,
    ("exp", "float64"): simdfloat64.exp64, ("tanh", "float64"): simdfloat64.tanh64,
    ("expf", "float32"): simdfloat32.expf, ("tanhf", "float32"): simdfloat32.tanhf,
    ("erff", "float32"): simderf.erff}
#: The bound of each float64 function in ulps from the correctly rounded value.
_BOUNDS = {"erf": simderf.ULPS, "exp": simdfloat64.ULPS, "tanh": simdfloat64.ULPS}
#: The kind each function computes.
_BASE = {"expf": "exp", "tanhf": "tanh", "erff": "erf"}
_CASES = sorted(_KERNEL)
_DTYPES = {"float64": D.float64, "float32": D.float32}
_TWO1074 = _CTX.mpf(2) ** 1074


def _nearest(v: Any) -> float:
    """The float64 nearest mpmath's ``v`` (ties to even): mpmath's own
    conversion rounds to 53 bits first, which rounds a subnormal twice."""
    if abs(v) >= _CTX.mpf(2) ** -1022:
        return float(v)
    return math.ldexp(int(_CTX.nint(v * _TWO1074)), -1074)


def _correctly_rounded(kind: str, dt: D.Dtype, x: Arr) -> Arr:
    """``kind`` of each element of ``x`` correctly rounded to ``dt`` (float64
    from mpmath's 100 bits; the narrower types from that float64 once more,
    which a tie of float64 alone could mislead)."""
    exact = np.array([_nearest(_EXACT[kind](_CTX.mpf(float(v)))) for v in x])
    return D.of_float(dt, exact)


def _points(kind: str, dt: np.dtype[Any], rng: np.random.Generator) -> Arr:
    """Random arguments over each kind's ranges and the edges where its
    branches meet, overflow and underflow begin and results round to ±1."""
    f64 = dt == np.float64
    if kind == "exp":
        top, bottom = (709.78, -745.13) if f64 else (88.72, -103.97)
        parts = [rng.uniform(bottom, top, 150), rng.uniform(-1, 1, 50),
                 rng.uniform(top - 0.01, top + 0.01, 20), rng.uniform(bottom - 0.01, bottom + 0.01, 20),
                 np.array([0.34657359027997264, -0.34657359027997264, 1e-300 if f64 else 1e-40])]
    elif kind == "tanh":
        parts = [rng.uniform(-20, 20, 100), rng.uniform(-1, 1, 80), rng.uniform(0.17, 0.18, 20),
                 10.0 ** rng.uniform(-300 if f64 else -40, 0, 40), rng.uniform(18.5, 19.5, 10),
                 rng.uniform(8.9, 9.5, 10)]
    else:
        parts = [rng.uniform(-6.5, 6.5, 100), rng.uniform(-1.1, 1.1, 80), rng.uniform(0.99, 1.01, 20),
                 10.0 ** rng.uniform(-300 if f64 else -40, 0, 40), rng.uniform(3.8, 6.0, 20)]
    x = np.concatenate(parts)
    return np.concatenate([x, -x]).astype(dt)


@pytest.mark.parametrize(("kind", "dtype"), _CASES)
def test_within_the_bound_of_the_correctly_rounded_value(kind: str, dtype: str) -> None:
    """float64 within ``ULPS`` of its module (1 ulp), float32 within 1, of the correctly
    rounded value; both within the library's stated ulps."""
    dt = _DTYPES[dtype]
    rng = np.random.default_rng(18)
    base = _BASE.get(kind, kind)
    x = _points(base, dt.numpy_dtype, rng)
    got = _KERNEL[kind, dtype](x)
    assert got.dtype == dt.numpy_dtype
    want = _correctly_rounded(base, dt, x)
    d = R.ulps(want, got, dt)
    most = _BOUNDS[kind] if dt is D.float64 else 1
    assert most <= program.ULPS[dtype][base]
    assert d.max() <= most, (kind, dtype, x[d.argmax()], got[d.argmax()], want[d.argmax()])


_SPECIAL = {
    "exp": [(0.0, 1.0), (-0.0, 1.0), (np.inf, np.inf), (-np.inf, 0.0), (1e30, np.inf),
            (-1e30, 0.0)],
    "tanh": [(0.0, 0.0), (-0.0, -0.0), (np.inf, 1.0), (-np.inf, -1.0), (30.0, 1.0),
             (-30.0, -1.0)],
    "erf": [(0.0, 0.0), (-0.0, -0.0), (np.inf, 1.0), (-np.inf, -1.0), (7.0, 1.0), (-7.0, -1.0)],
}


@pytest.mark.parametrize(("kind", "dtype"), _CASES)
def test_special_values_are_exact(kind: str, dtype: str) -> None:
    """Annex F's values bit for bit (a zero's sign included); a NaN, quiet or
    signalling, gives a quiet NaN; the smallest subnormal of Tanh and Erf is
    itself and 2/√π times itself, rounded."""
    dt = np.dtype(dtype)
    base = _BASE.get(kind, kind)
    xs, want = (np.array(v, dtype=dt) for v in zip(*_SPECIAL[base], strict=True))
    got = _KERNEL[kind, dtype](xs)
    assert got.tobytes() == want.tobytes(), (kind, dtype, got, want)
    uint = np.uint64 if dt == np.float64 else np.uint32
    nans = np.array([0x7FF8000000000000, 0x7FF0000000000001, 0xFFF4000000000000]
                    if dt == np.float64 else [0x7FC00000, 0x7F800001, 0xFFA00000], dtype=uint)
    out = _KERNEL[kind, dtype](nans.view(dt))
    assert np.isnan(out).all()
    quiet = uint(1 << (51 if dt == np.float64 else 22))
    assert ((out.view(uint) & quiet) != 0).all(), (kind, dtype, out.view(uint))
    tiny = np.array([np.finfo(dt).smallest_subnormal] * 2, dtype=dt) * np.array([1, -1], dtype=dt)
    if base == "tanh":
        assert _KERNEL[kind, dtype](tiny).tobytes() == tiny.tobytes()
    if base == "erf":
        exact = [float(_CTX.erf(_CTX.mpf(float(v)))) for v in tiny]
        assert _KERNEL[kind, dtype](tiny).tobytes() == np.array(exact).astype(dt).tobytes()


@pytest.mark.parametrize(("kind", "dtype"), _CASES)
def test_bits_depend_on_the_argument_alone(kind: str, dtype: str) -> None:
    """Each element's bits are the same computed in one call over the whole
    array, alone (the loop's scalar remainder), or in slices of any length,
    so boxes and threads change nothing."""
    rng = np.random.default_rng(81)
    x = rng.standard_normal(203) * rng.choice([0.1, 1.0, 4.0, 40.0], 203)
    x[::17] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-310, 5.0, -0.5, 19.0, 1.0, -1.0, 700.0][:12]
    x = x.astype(dtype)
    whole = _KERNEL[kind, dtype](x)
    alone = np.concatenate([_KERNEL[kind, dtype](x[i:i + 1]) for i in range(x.size)])
    cuts = [0, 3, 10, 11, 50, 97, 160, 203]
    sliced = np.concatenate([_KERNEL[kind, dtype](x[a:b]) for a, b in itertools.pairwise(cuts)])
    assert whole.tobytes() == alone.tobytes() == sliced.tobytes()
    # A strided view and a fresh output of another float type.
    wide = np.empty(x.shape, np.float64)
    _KERNEL[kind, dtype](x[::-1], out=wide)
    with np.errstate(over="ignore"):
        assert wide[::-1].astype(dtype).tobytes() == whole.tobytes()


def test_exp64_bits_whatever_its_neighbours() -> None:
    """``exp64`` takes a fast loop over runs of arguments whose results are
    normal and finite and ``exp64_one`` over runs holding one that is not: each
    element's bits are the same either way, and in place (where the loop
    tests each run before it writes it)."""
    rng = np.random.default_rng(7)
    plain = rng.uniform(-708.39, 709.0, 1 << 16)
    plain[:64] = rng.uniform(-1, 1, 64)
    # One argument in every chunk whose result is not normal and finite.
    mixed = plain.copy()
    specials = np.array([np.nan, -720.0, 709.5, -np.inf, np.inf, 1e300])
    at = np.arange(100, plain.size, simdfloat64.EXP_CHUNK)
    mixed[at] = specials[np.arange(at.size) % specials.size]
    keep = np.ones(plain.size, bool)
    keep[at] = False
    fast, slow = simdfloat64.exp64(plain), simdfloat64.exp64(mixed)
    assert fast[keep].tobytes() == slow[keep].tobytes()
    for x, want in ((plain, fast), (mixed, slow)):
        inplace = x.copy()
        simdfloat64.exp64(inplace, out=inplace)
        assert inplace.tobytes() == want.tobytes()


def _within_an_ulp(kind: str, x: Arr) -> None:
    """``kind``'s float32 function of every element of ``x`` within 1 ulp of
    the correctly rounded value: the float64 function (NumPy's, or
    ``simderf.erf``, within an ulp) rounded, and mpmath's where the two differ
    by more."""
    base = _BASE[kind]
    ref: Callable[..., Any] = {"exp": np.exp, "tanh": np.tanh, "erf": simderf.erf}[base]
    with np.errstate(all="ignore"):
        got = _KERNEL[kind, "float32"](x)
        near = ref(x.astype(np.float64)).astype(np.float32)
    d = R.ulps(near, got, D.float32)
    for i in np.flatnonzero(d > 1):
        exact = float(_EXACT[base](_CTX.mpf(float(x[i]))))
        want = D.of_float(D.float32, np.array([exact]))
        assert R.ulps(want, got[i:i + 1], D.float32).max() <= 1, (kind, x[i], got[i])


@pytest.mark.parametrize(("kind", "top", "meet", "seed"),
                         [("tanhf", 10.0, 0.75, 183), ("erff", 4.0, 1.0, 184)])
def test_float32_kinds_within_an_ulp_over_many_arguments(kind: str, top: float, meet: float,
                                                          seed: int) -> None:
    """Tanh and Erf of float32 within 1 ulp of the correctly rounded value at
    2^18 float32 drawn evenly by their bits from [-top, top] (subnormals to
    where the function rounds to ±1: 10 for Tanh, 4 for Erf), and 2^16 about
    the meeting of its two branches at |x| = ``meet``."""
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, int(np.float32(top).view(np.uint32)), 1 << 18, dtype=np.uint32)
    near = np.float32(meet).view(np.uint32) + rng.integers(-1 << 15, 1 << 15, 1 << 16)
    x = np.concatenate([bits, near.astype(np.uint32)]).view(np.float32)
    _within_an_ulp(kind, np.concatenate([x, -x]))


@sweep
@pytest.mark.parametrize(("kind", "lo", "hi", "stride"),
                         [("expf", -104.0, 89.0, 5), ("tanhf", -10.0, 10.0, 1),
                          ("erff", -4.0, 4.0, 1)])
def test_float32_kinds_swept(kind: str, lo: float, hi: float, stride: int) -> None:
    """Every ``stride``-th float32 of [lo, hi] (every one beyond rounds to a
    limit the special values cover) within 1 ulp of the correctly rounded
    value (``_within_an_ulp``): Tanh at every float32 of [-10, 10], Erf of
    [-4, 4]."""
    ranges = [(0, int(np.float32(hi).view(np.uint32))),
              (0x80000000, 0x80000000 + int(np.float32(-lo).view(np.uint32)))]
    step = stride << 22
    for a, b in ranges:
        for start in range(a, b, step):
            bits = np.arange(start, min(start + step, b), stride, dtype=np.uint64)
            _within_an_ulp(kind, bits.astype(np.uint32).view(np.float32))


def _float64_arguments(kind: str, n: int, rng: np.random.Generator) -> Arr:
    """About ``n`` float64 arguments of ``kind`` (Exp or Tanh): uniform over
    the range where the result is neither 0 nor ±inf nor ±1, and denser where
    the functions change way (|x| <= 1, subnormal results of Exp, Tanh's
    small and rounding-to-1 arguments), tiny magnitudes and raw bit patterns."""
    m = n // 8
    if kind == "exp":
        parts = [rng.uniform(-745.2, 709.8, 3 * m), rng.uniform(-1, 1, m),
                 rng.uniform(-745.2, -708.3, m), rng.uniform(709.7, 709.8, m // 4),
                 rng.uniform(-745.14, -745.12, m // 4)]
    else:
        parts = [rng.uniform(-20, 20, 2 * m), rng.uniform(-1, 1, 2 * m), rng.uniform(-0.2, 0.2, m),
                 rng.uniform(18, 20, m // 4), rng.uniform(-0.05, 0.05, m // 4)]
    tiny = 10.0 ** rng.uniform(-323, 0, m // 2) * rng.choice([-1.0, 1.0], m // 2)
    bits = rng.integers(0, 0x7FF0000000000000, m // 4, dtype=np.int64).view(np.float64)
    return np.concatenate([*parts, tiny, bits, -bits])


def _worst_ulps(kind: str, x: Arr) -> int:
    """The most ulps ``kind``'s float64 function is from the correctly rounded
    value over ``x``: 80-bit long double's exp and tanh (64 bits, within a few
    of their ulps: 2^-60 of the value) rounded to float64, and mpmath's value
    where ours differs from that or the long double lies within 2^-6 ulp of a
    midpoint between float64s (where its rounding could mislead)."""
    got = _KERNEL[kind, "float64"](x)
    with np.errstate(all="ignore"):
        wide = (np.exp if kind == "exp" else np.tanh)(x.astype(np.longdouble))
        near = wide.astype(np.float64)
        frac = (wide - near.astype(np.longdouble)) / np.spacing(near).astype(np.longdouble)
    doubt = np.isfinite(frac) & (np.abs(np.abs(frac) - 0.5) < 2.0**-6)
    want = near.copy()
    for i in np.flatnonzero(doubt | (got != near)):
        want[i] = _nearest(_EXACT[kind](_CTX.mpf(float(x[i]))))
    return int(R.ulps(want, got, D.float64).max())


@pytest.mark.parametrize("kind", ["exp", "tanh"])
def test_float64_exp_and_tanh_on_many_arguments(kind: str) -> None:
    """Exp and Tanh of float64 within ``simdfloat64.ULPS`` (1 ulp) of the correctly
    rounded value over about 200,000 arguments each, the edges of subnormal and
    infinite Exp and of Tanh's rounding to ±1 included."""
    assert np.finfo(np.longdouble).nmant >= 63, "the reference needs x87's long double"
    x = _float64_arguments(kind, 250_000, np.random.default_rng(64))
    edges = [-745.1332191019411, -745.1332191019412, -708.3964185322641, 709.782712893384,
             -744.4400719213812, 19.061547465398498] if kind == "exp" else [19.061547465398498]
    near = [np.nextafter(e, d) for e in edges for d in (-np.inf, np.inf)]
    assert _worst_ulps(kind, np.concatenate([x, edges, near])) <= _BOUNDS[kind]


@sweep
@pytest.mark.parametrize("kind", ["exp", "tanh"])
def test_float64_exp_and_tanh_swept(kind: str) -> None:
    """As ``test_float64_exp_and_tanh_on_many_arguments`` over about 4·10^7
    other arguments each (minutes)."""
    for seed in range(25):
        x = _float64_arguments(kind, 2_000_000, np.random.default_rng([64, seed]))
        assert _worst_ulps(kind, x) <= _BOUNDS[kind], seed

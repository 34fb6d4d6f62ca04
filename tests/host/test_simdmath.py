"""``nxkernel_host.simdmath``: Exp, Tanh and Erf in vectorised loops, against
values correctly rounded from mpmath at 100 bits; C99 Annex F's special
values exactly; each element's bits a function of its argument alone.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import mpmath
import numpy as np
import numpy.typing as npt
import pytest

from nxkernel_core import dtype as D
from nxkernel_core import evaluator as R
from nxkernel_host import program, simdmath
from tests.host.sweeps import sweep

Arr = npt.NDArray[Any]

_CTX = mpmath.MPContext()
_CTX.prec = 100
_EXACT: dict[str, Callable[[Any], Any]] = {"exp": _CTX.exp, "tanh": _CTX.tanh, "erf": _CTX.erf}
#: Each kind's function per dtype: the float32 path's three (the narrow
#: floats' value), Exp and Tanh of float32 in float32 arithmetic (``expf``,
#: ``tanhf``: the float32 kinds'), Erf of float64.
_KERNEL: dict[tuple[str, str], Callable[..., Arr]] = {
    ("exp", "float32"): simdmath.exp32, ("tanh", "float32"): simdmath.tanh32,
    ("erf", "float32"): simdmath.erf32, ("erf", "float64"): simdmath.erf,
    ("expf", "float32"): simdmath.expf, ("tanhf", "float32"): simdmath.tanhf}
#: The kind each function computes.
_BASE = {"expf": "exp", "tanhf": "tanh"}
_CASES = sorted(_KERNEL)
_DTYPES = {"float64": D.float64, "float32": D.float32}


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
    """float64 within ``BOUNDS`` ulps, float32 within 1, of the correctly
    rounded value; both within the library's stated ulps."""
    dt = _DTYPES[dtype]
    rng = np.random.default_rng(18)
    base = _BASE.get(kind, kind)
    x = _points(base, dt.numpy_dtype, rng)
    got = _KERNEL[kind, dtype](x)
    assert got.dtype == dt.numpy_dtype
    exact = np.array([float(_EXACT[base](_CTX.mpf(float(v)))) for v in x])
    want = D.of_float(dt, exact)
    d = R.ulps(want, got, dt)
    most = simdmath.BOUNDS[kind] if dt is D.float64 else 1
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


def _within_an_ulp(kind: str, x: Arr) -> None:
    """``kind``'s float32 function of every element of ``x`` within 1 ulp of
    the correctly rounded value: NumPy's float64 rounded, and mpmath's where
    the two differ by more."""
    base = _BASE[kind]
    ref = np.exp if base == "exp" else np.tanh
    with np.errstate(all="ignore"):
        got = _KERNEL[kind, "float32"](x)
        near = ref(x.astype(np.float64)).astype(np.float32)
    d = R.ulps(near, got, D.float32)
    for i in np.flatnonzero(d > 1):
        exact = float(_EXACT[base](_CTX.mpf(float(x[i]))))
        want = D.of_float(D.float32, np.array([exact]))
        assert R.ulps(want, got[i:i + 1], D.float32).max() <= 1, (kind, x[i], got[i])


def test_tanhf_within_an_ulp_over_many_arguments() -> None:
    """Tanh of float32 within 1 ulp of the correctly rounded value at 2^18
    float32 drawn evenly by their bits from [-10, 10] (subnormals to where
    tanh rounds to ±1), and 2^16 about the branches' meeting at |x| = 0.75."""
    rng = np.random.default_rng(183)
    top = int(np.float32(10.0).view(np.uint32))
    bits = rng.integers(0, top, 1 << 18, dtype=np.uint32)
    near = np.float32(0.75).view(np.uint32) + rng.integers(-1 << 15, 1 << 15, 1 << 16)
    x = np.concatenate([bits, near.astype(np.uint32)]).view(np.float32)
    _within_an_ulp("tanhf", np.concatenate([x, -x]))


@sweep
@pytest.mark.parametrize(("kind", "lo", "hi", "stride"),
                         [("expf", -104.0, 89.0, 5), ("tanhf", -10.0, 10.0, 1)])
def test_float32_kinds_swept(kind: str, lo: float, hi: float, stride: int) -> None:
    """Every ``stride``-th float32 of [lo, hi] (every one beyond rounds to a
    limit the special values cover) within 1 ulp of the correctly rounded
    value (``_within_an_ulp``): Tanh at every float32 of [-10, 10]."""
    ranges = [(0, int(np.float32(hi).view(np.uint32))),
              (0x80000000, 0x80000000 + int(np.float32(-lo).view(np.uint32)))]
    step = stride << 22
    for a, b in ranges:
        for start in range(a, b, step):
            bits = np.arange(start, min(start + step, b), stride, dtype=np.uint64)
            _within_an_ulp(kind, bits.astype(np.uint32).view(np.float32))

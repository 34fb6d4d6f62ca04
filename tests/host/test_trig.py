"""nxkernel_host.trig: Sin, Cos and Tan of float64 at huge arguments (|x| >= 2^20)
within 1 ulp of the correctly rounded value (mpmath), next to multiples of π/2
included; NumPy's bits below; its constants are 4/π's and π/4's bits."""

from __future__ import annotations

import math
from typing import Any

import mpmath
import numpy as np
import numpy.typing as npt
import pytest

from nxkernel_core import dtype as D
from nxkernel_core import evaluator as R
from nxkernel_host import trig

Arr = npt.NDArray[Any]
KINDS = ("sin", "cos", "tan")


def _exact(kind: str, x: Arr) -> Arr:
    """``kind`` of each float64 of ``x``, correctly rounded (mpmath raises its
    own precision to reduce a huge argument)."""
    ctx = mpmath.MPContext()
    ctx.prec = 120
    f = getattr(ctx, kind)
    return np.array([float(f(ctx.mpf(float(v)))) for v in x])


def _near_multiples(rng: np.random.Generator, n: int) -> Arr:
    """The doubles nearest k·π/2 and their neighbours, k up to 2^60, and
    0x1.6ac5b262ca1ffp+849, the double nearest a multiple of π/2 (2^-60.9)."""
    ctx = mpmath.MPContext()
    ctx.prec = 200
    ks = np.exp2(rng.uniform(21, 60, n)).astype(np.int64)
    near = np.array([float(int(k) * ctx.pi / 2) for k in ks])
    hard = float.fromhex("0x1.6ac5b262ca1ffp+849")
    return np.concatenate([near, np.nextafter(near, np.inf), [hard, -hard]])


def test_the_constants_are_four_over_pi_and_pi_over_four() -> None:
    ctx = mpmath.MPContext()
    ctx.prec = 1400
    v = 4 / ctx.pi
    for w in trig.FOUR_OVER_PI:
        digit = int(ctx.floor(v))
        assert int(w) == digit
        v = (v - digit) * 2**64
    assert float(ctx.pi / 4) == trig.PIO4_HI
    assert float(ctx.pi / 4 - trig.PIO4_HI) == trig.PIO4_LO
    assert trig.SIN_TAYLOR[:2] == (-1 / 6, 1 / 120)
    assert trig.COS_TAYLOR[-1] == 1 / -math.factorial(22)


@pytest.mark.parametrize("kind", KINDS)
def test_huge_arguments_are_within_an_ulp(kind: str) -> None:
    rng = np.random.default_rng(24)
    drawn = np.exp2(rng.uniform(20, 1024, 150)) * rng.choice([-1.0, 1.0], 150)
    x = np.concatenate([drawn[np.isfinite(drawn)], _near_multiples(rng, 40), [trig.HUGE, -trig.HUGE],
                        [np.finfo(np.float64).max, -np.finfo(np.float64).max]])
    got = getattr(trig, kind)(x)
    d = R.ulps(got, _exact(kind, x), D.float64)
    assert d.max() <= 1, (kind, float(x[d.argmax()]).hex(), d.max())


def test_small_arguments_are_numpys_and_specials_stay() -> None:
    x = np.concatenate([np.linspace(-trig.HUGE, trig.HUGE, 1001)[1:-1], [0.0, -0.0, np.nan]])
    for kind in KINDS:
        assert getattr(trig, kind)(x).tobytes() == getattr(np, kind)(x).tobytes()
    specials = np.array([np.inf, -np.inf, np.nan, 1e300])
    with np.errstate(invalid="ignore"):
        got = trig.cos(specials)
    assert np.isnan(got[:3]).all() and got[3] == _exact("cos", specials[3:])[0]


def test_float32_rounds_the_float64_value_once_into_out() -> None:
    # The kinds' float32 path: computed in float64, rounded into a float32 out.
    x = np.array([[3.0e38, -1.0e20], [2.0, 7.5e6]], np.float32)
    out = np.empty(x.shape, np.float32)
    assert trig.tan(x, out=out, dtype=np.float64) is out
    want = np.tan(x.astype(np.float64))
    huge = np.abs(x) >= trig.HUGE
    want[huge] = trig.huge(2, x[huge].astype(np.float64))
    assert out.tobytes() == want.astype(np.float32).tobytes()
    # Broadcast into a larger out.
    row = np.array([1e30, 0.5])
    wide = np.empty((3, 2))
    trig.sin(row, out=wide)
    assert (wide == trig.sin(row)).all()

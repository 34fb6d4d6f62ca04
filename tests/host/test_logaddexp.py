"""``nxkernel_host.logaddexp``: the Logsumexp scan's combination against
mpmath at 120 bits: L = log1p(e^d) within ``L_ULPS``·2⁻⁵³ of the exact value
for the rounded d, each combination within the stated (2B + 3)·2⁻⁵³ of the
exact log(e^a + e^b); its special values; the same bits in either order and
in a vector loop or one element at a time."""

from __future__ import annotations

import math
from typing import Any

import mpmath  # type: ignore[import-untyped]
import numpy as np
import numpy.typing as npt
import pytest

from nxkernel_host import logaddexp as L

Arr = npt.NDArray[Any]

_CTX = mpmath.MPContext()
_CTX.prec = 120
U = 2.0**-53


def _ds(rng: np.random.Generator) -> Arr:
    """Arguments d <= 0 over every range of L: near 0, about the switch at
    1 + e^d = √2 (d ≈ −0.8814), where e^d nears the cut at −708, and spread
    over magnitudes."""
    switch = math.log(math.sqrt(2) - 1)
    return np.concatenate([
        -rng.uniform(0, 1, 400), -rng.uniform(0, 40, 400), switch + rng.uniform(-1e-3, 1e-3, 200),
        -np.exp(rng.uniform(-60, math.log(750), 400)), -rng.uniform(700, 720, 100),
        np.array([0.0, -0.0, -5e-324, -1e-300, -708.0, -707.9999999999999, -745.2, -1e300])])


def _exact_l(d: float) -> Any:
    return _CTX.log1p(_CTX.exp(_CTX.mpf(d)))


def test_l_is_within_its_stated_ulps() -> None:
    d = _ds(np.random.default_rng(1))
    # lse2(d, 0) = 0 + L(d − 0): L itself, with no rounding after it.
    got = L.logaddexp(d, np.zeros_like(d))
    err = [abs(_CTX.mpf(g) - _exact_l(x)) for g, x in zip(got.tolist(), d.tolist(), strict=True)]
    worst = max(range(d.size), key=lambda i: err[i])
    assert float(err[worst]) <= L.L_ULPS * U, (d[worst], got[worst], float(err[worst]) / U)


def test_each_combination_is_within_the_stated_bound() -> None:
    rng = np.random.default_rng(2)
    a = np.concatenate([rng.standard_normal(600) * 30, rng.uniform(-1e4, 1e4, 200),
                        rng.standard_normal(200) * 1e-3])
    b = np.concatenate([a[:300] + rng.standard_normal(300) * 1e-6,  # near-equal pairs
                        rng.standard_normal(300) * 30, rng.uniform(-1e4, 1e4, 200),
                        rng.standard_normal(200) * 1e-3])
    got = L.logaddexp(a, b)
    for x, y, g in zip(a.tolist(), b.tolist(), got.tolist(), strict=True):
        exact = _CTX.log(_CTX.exp(_CTX.mpf(x)) + _CTX.exp(_CTX.mpf(y)))
        bound = (2 * max(abs(x), abs(y)) + 3) * U
        assert abs(_CTX.mpf(g) - exact) <= bound, (x, y, g)


def test_special_values() -> None:
    inf, nan = math.inf, math.nan
    a = np.array([-inf, -inf, inf, inf, -inf, 3.0, nan, 1.0, nan, inf, 0.0, -0.0])
    b = np.array([-inf, 2.0, 1.0, inf, inf, -inf, 1.0, nan, inf, nan, -0.0, -0.0])
    got = L.logaddexp(a, b)
    want = [-inf, 2.0, inf, inf, inf, 3.0]
    assert got[:6].tolist() == want
    assert np.isnan(got[6:10]).all()
    # ±0 with ±0: log 2, the nearest double to it.
    assert got[10] == got[11] == math.log(2)


@pytest.mark.parametrize("n", [1, 7, 8, 9, 100])
def test_the_same_bits_in_either_order_and_at_any_position(n: int) -> None:
    rng = np.random.default_rng(n)
    a, b = rng.standard_normal(n) * 50, rng.standard_normal(n) * 50
    a[::3] = -np.inf
    got = L.logaddexp(a, b)
    assert got.tobytes() == L.logaddexp(b, a).tobytes()
    # One element at a time (the scalar remainder) as in the vector loop.
    one = np.concatenate([L.logaddexp(a[i:i + 1], b[i:i + 1]) for i in range(n)])
    assert one.tobytes() == got.tobytes()


def test_refuses_arrays_of_two_shapes() -> None:
    with pytest.raises(ValueError, match=r"logaddexp: a float64 \[2\] and b float64 \[3\]"):
        L.logaddexp(np.zeros(2), np.zeros(3))

"""The kit's contraction law on cases worked by hand: it judges outputs within
e(K)(|init| + Σ|a||b|) of the exact sum, "barring overflow and underflow" as
the contract says: an output whose finite terms may overflow is not judged,
and a subnormal result may err by half a subnormal per rounding."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from nxkernel_core import dtype as D
from nxkernel_core import spec as S
from nxkernel_core.conformance.harness import LawViolation, Subject
from nxkernel_core.conformance.test_contract import _two_product, check_contract, exact_outputs
from nxkernel_core.rig import host
from nxkernel_host.library import library

SUBJECT = Subject(library, host)  # type: ignore[arg-type]
#: One contracting pair: a [1, k] times b [k, 1].
MATMUL = S.Contract((), ((1, 0),), D.float64)


def test_products_of_huge_factors_are_exact() -> None:
    a = np.array([1.5e300, -3.0e307, 2.0**1000])
    b = np.array([3.0e7, 0.25, 2.0**-10])
    p, e = _two_product(a, b)
    for x, y, pi, ei in zip(a, b, p, e, strict=True):
        assert Fraction(pi) + Fraction(ei) == Fraction(x) * Fraction(y)


def test_a_sum_of_huge_products_is_judged_against_its_exact_value() -> None:
    a = np.array([[1.5e300, -1.5e300]])
    b = np.array([[3.0e7], [2.9e7]])
    _, exact, _, _, finite = exact_outputs(MATMUL, [a, b], D.float64, D.float64)
    assert exact == [1.5e306] and finite[0] < np.finfo(np.float64).max / 2
    check_contract(SUBJECT, MATMUL, D.float64, np.array([[1.5e306]]), [a, b], D.float64, D.float64, "m")
    with pytest.raises(LawViolation):
        check_contract(SUBJECT, MATMUL, D.float64, np.array([[1.6e306]]), [a, b], D.float64, D.float64,
                       "m")


def test_outputs_that_may_overflow_are_not_judged() -> None:
    # Finite factors whose products overflow (the exact sum is finite, the
    # library's partial sums are not), and an infinite term beside finite
    # terms that overflow to an infinity of the other sign.
    big = np.finfo(np.float64).max
    a = np.array([[big, -big]])
    b = np.array([[2.0], [2.0]])
    check_contract(SUBJECT, MATMUL, D.float64, np.array([[math.nan]]), [a, b], D.float64, D.float64, "m")
    c64 = S.Contract((), ((1, 0),), D.complex64)
    a = np.array([[complex(np.inf, 0), complex(3e38, 0)]], np.complex64)
    b = np.array([[complex(1, 0)], [complex(-2, 0)]], np.complex64)
    check_contract(SUBJECT, c64, D.complex64, np.array([[complex(np.nan, np.nan)]], np.complex64), [a, b],
                   D.complex64, D.complex64, "m")
    # An infinite term with small finite ones is judged: the infinity it makes.
    b = np.array([[complex(1, 0)], [complex(-2e-38, 0)]], np.complex64)
    with pytest.raises(LawViolation):
        check_contract(SUBJECT, c64, D.complex64, np.array([[complex(np.nan, np.nan)]], np.complex64),
                       [a, b], D.complex64, D.complex64, "m")


def test_subnormal_results_may_err_by_a_subnormal_per_rounding() -> None:
    c64 = S.Contract((), ((1, 0),), D.complex64)
    tiny = float(np.float32(2.0**-149))
    a = np.array([[complex(1.5e-23, 1e-24)]], np.complex64)
    b = np.array([[complex(-1.5e-22, 0)]], np.complex64)
    (_, exact, _, _, _) = exact_outputs(c64, [a, b], D.complex64, D.complex64)
    got = np.array([[complex(round(exact[0].real / tiny) * tiny, 0.0)]], np.complex64)
    check_contract(SUBJECT, c64, D.complex64, got, [a, b], D.complex64, D.complex64, "m")
    far = np.array([[complex(exact[0].real - 20 * tiny, 0.0)]], np.complex64)
    with pytest.raises(LawViolation):
        check_contract(SUBJECT, c64, D.complex64, far, [a, b], D.complex64, D.complex64, "m")

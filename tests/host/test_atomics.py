"""``atomics``: a compare-and-set takes where the element holds the expected
value and leaves it where it does not; loads and stores read and write the
element named, at any index."""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from nxkernel_host import atomics


@njit
def _steps(a: Any) -> tuple[bool, bool, int, int]:  # pragma: no cover - compiled
    missed = atomics.cas(a, 1, 5, 9)
    took = atomics.cas(a, 1, 2, 9)
    atomics.store(a, 2, -(1 << 40))
    return missed, took, atomics.load(a, 1), atomics.load(a, 2)


def test_cas_load_and_store() -> None:
    a = np.array([1, 2, 3, 4], np.int64)
    missed, took, one, two = _steps(a)
    assert (missed, took, one, two) == (False, True, 9, -(1 << 40))
    assert a.tolist() == [1, 9, -(1 << 40), 4]

"""``lanes``: each block kernel's value is lane order read literally, bit for
bit: lane l of a block chains the block's terms t ≡ l (mod 16) in order of t
(a sum from +0, a product from 1, a sum of squared deviations from +0 in
float64), each operation rounded once in the accumulator's dtype, then the
lanes' halving tree (l + l + 8, then + 4, + 2, + 1). Blocks of whole
vectors and of a remainder, several rows, terms widened from float32 to
float64, and infinities, signed zeros and subnormals among the terms."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from nxkernel_host import lanes

NDArray = np.ndarray[Any, Any]

#: Row lengths: under a vector, a vector, a vector and one, a block less
#: one, a block, a block and one, several blocks with a remainder.
LENGTHS = [1, 15, 16, 17, 1023, 1024, 1025, 5000]
#: float32 terms summed in float32 and in float64 (Moments' mean), float64 in float64.
PAIRS = [(np.float32, np.float32), (np.float32, np.float64), (np.float64, np.float64)]


def terms(rows: int, n: int, dt: type[np.floating[Any]], seed: int) -> NDArray:
    """Normal terms of mixed magnitudes with ±inf, ±0 and subnormals mixed in
    (no NaN: which NaN a sum keeps is the compiled code's choice)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, n)) * rng.choice([1e-3, 1.0, 1e3], size=(rows, n))
    out: NDArray = x.astype(dt)
    specials = np.array([np.inf, -np.inf, 0.0, -0.0, np.finfo(dt).smallest_subnormal], dt)
    flat = out.reshape(-1)
    picked = rng.integers(0, flat.size, max(1, flat.size // 200))
    flat[picked] = rng.choice(specials, picked.size)
    return out


def literal(x: NDArray, acc: type[np.floating[Any]], start: float,
            step: Callable[[Any, Any], Any]) -> NDArray:
    """Lane order read literally: per block of 1024 terms, lane t mod 16 takes
    term t by ``step`` (in ``acc``), then the halving tree by ``combine``."""
    rows, n = x.shape
    blocks = -(-n // lanes.BLOCK)
    out = np.empty((rows, blocks), acc)
    combine = np.multiply if start == 1.0 else np.add
    with np.errstate(all="ignore"):
        for r in range(rows):
            for b in range(blocks):
                seg = x[r, b * lanes.BLOCK:(b + 1) * lanes.BLOCK]
                lane = [acc(start)] * 16
                for t, term in enumerate(seg):
                    lane[t % 16] = acc(step(lane[t % 16], acc(term)))
                for half in (8, 4, 2):
                    for i in range(half):
                        lane[i] = acc(combine(lane[i], lane[i + half]))
                out[r, b] = acc(combine(lane[0], lane[1]))
    return out


def same_bits(got: NDArray, want: NDArray) -> bool:
    return got.dtype == want.dtype and got.tobytes() == want.tobytes()


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize(("dt", "acc"), PAIRS)
def test_sum_blocks_is_lane_order(n: int, dt: type[np.floating[Any]],
                                  acc: type[np.floating[Any]]) -> None:
    x = terms(3, n, dt, n)
    got = np.full((3, -(-n // lanes.BLOCK)), 7, acc)
    lanes.sum_blocks(x, got)
    assert same_bits(got, literal(x, acc, 0.0, np.add))


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_prod_blocks_is_lane_order(n: int, dt: type[np.floating[Any]]) -> None:
    # Terms near 1, so that products of a thousand stay finite and nonzero.
    x = (1 + terms(2, n, dt, n) / dt(4096)).astype(dt)
    got = np.full((2, -(-n // lanes.BLOCK)), 7, dt)
    lanes.prod_blocks(x, got)
    assert same_bits(got, literal(x, dt, 1.0, np.multiply))


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_sqdev_blocks_is_lane_order(n: int, dt: type[np.floating[Any]]) -> None:
    x = terms(2, n, dt, n)
    mean = np.array([0.25, -3.0])
    got = np.full((2, -(-n // lanes.BLOCK)), 7.0)
    lanes.sqdev_blocks(x, mean, got)
    for r in range(2):
        mu = mean[r]

        def square(s: Any, term: Any, mu: float = mu) -> Any:
            d = np.float64(term - mu)
            return s + d * d

        want = literal(x[r:r + 1], np.float64, 0.0, square)
        assert same_bits(got[r:r + 1], want)

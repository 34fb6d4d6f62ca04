"""The host's chunked scan kernels (``network.chunk_scan``, ``moments``) against
the contract's odd/even network, bit for bit, whatever the chunk they cut a
row into and the threads that share the chunks: small chunks here make rows
of many chunks, full and partial, the tree values of earlier chunks carried
across each cut and each thread's first chunk."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from nxkernel_core.orders import odd_even_scan
from nxkernel_host import network as N
from nxkernel_host import pool, threads
from nxkernel_host.logaddexp import logaddexp
from nxkernel_host.moments import moments_scan
from tests.moments_reference import moments_network

#: Row lengths about the chunk sizes below: one state, a partial chunk, whole
#: chunks, one past, and many chunks with a partial one at the end.
LENGTHS = [1, 2, 15, 16, 17, 64, 65, 300, 1025, 4099]
CUTS = [(16, 1), (64, 3), (0, 2)]


@pytest.fixture(autouse=True)
def _small_work_on_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows this short would stay on one thread: spread them over the
    threads, so that ranges of chunks start inside rows."""
    monkeypatch.setattr(pool, "MIN_PARALLEL", 1)
    monkeypatch.setattr(N, "SCAN_PARALLEL_BYTES", 1)


def bits(x: np.ndarray) -> bytes:
    return np.ascontiguousarray(x).tobytes()


def canonical(x: np.ndarray) -> np.ndarray:
    """``x`` with every NaN the positive quiet NaN, as the kernels store them."""
    out = x.copy()
    out[np.isnan(out)] = np.nan
    return out


def spread(rng: np.random.Generator, shape: tuple[int, ...], dt: Any) -> np.ndarray:
    return (rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 5, shape)).astype(dt)


@pytest.mark.parametrize("m", LENGTHS)
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_sum_and_prod_scans_are_the_network_for_any_chunk_and_threads(m: int, dt: Any) -> None:
    rng = np.random.default_rng(m)
    x = spread(rng, (3, m), dt)
    x[1, m // 2] = np.inf
    x[2, m // 3] = -np.inf
    p = (1 + rng.standard_normal((3, m)) * 1e-3).astype(dt)
    with np.errstate(all="ignore"):
        (want_s,) = odd_even_scan((x,), lambda a, b: (a[0] + b[0],))
        (want_p,) = odd_even_scan((p,), lambda a, b: (a[0] * b[0],))
    for chunk, n in CUTS:
        s, q = np.empty_like(x), np.empty_like(p)
        with threads(n):
            N.real_scan(False, x, s, chunk)
            N.real_scan(True, p, q, chunk)
        assert bits(s) == bits(canonical(want_s))
        assert bits(q) == bits(want_p)


@pytest.mark.parametrize("m", [17, 300, 1025])
def test_logsumexp_scans_are_the_network_for_any_chunk_and_threads(m: int) -> None:
    rng = np.random.default_rng(m)
    x = rng.standard_normal((2, m)) * 30
    x[0, ::7] = -np.inf
    x[1, m // 2] = np.inf
    x[0, m // 3] = np.nan
    # The network's order, bit for bit, with the stated combination (whose own
    # bounds against mpmath are tests/host/test_logaddexp.py's).
    (want,) = odd_even_scan((x,), lambda a, b: (logaddexp(a[0], b[0]),))
    for chunk, n in CUTS:
        got = np.empty_like(x)
        with threads(n):
            N.chunk_scan(N.LSE, x, got, chunk)
        assert bits(got) == bits(canonical(want))


@pytest.mark.parametrize("m", LENGTHS)
@pytest.mark.parametrize("with_carry", [False, True])
def test_moments_scans_are_the_network_for_any_chunk_and_threads(m: int, with_carry: bool) -> None:
    rng = np.random.default_rng(m)
    x = spread(rng, (2, m), np.float32)
    x[0, m // 2] = np.inf
    x[1, m // 3] = np.nan
    # A carry of count −(m + 1) cancels the terms' count at the end: the
    # merge divides by +0 there.
    carry = np.array([[3.0, 0.5, 2.0], [-(m + 1.0), 1.0, 0.25]]) if with_carry else None
    mean, var = moments_network(x.astype(np.float64), carry)
    for chunk, t in CUTS:
        got_mean, got_var = np.empty_like(x), np.empty_like(x)
        with threads(t):
            moments_scan(x, carry, got_mean, got_var, chunk or 4096)
        assert bits(got_mean) == bits(canonical(mean.astype(np.float32)))
        assert bits(got_var) == bits(canonical(var.astype(np.float32)))

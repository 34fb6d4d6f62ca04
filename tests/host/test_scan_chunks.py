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


def _claimed(op: int, x: np.ndarray, chunk: int, steps: list[tuple[int, int | None]]) -> np.ndarray:
    """The chunk kernel's results over ``x`` with its threads' turns run one
    after another on this thread: each step ``(me, stop)`` runs slot ``me``
    until its claim's limit, first set to ``stop`` chunks where given (the
    caller's slot 0 then stops there, as if a thread had taken the rest, and
    gets the rest back after the step)."""
    rows, m = x.shape
    nc = -(-m // chunk)
    out = np.full_like(x, 7.0)
    t = np.empty((rows, nc), x.dtype)
    done = np.zeros(rows * nc, np.int64)
    slots = np.zeros(3, np.int64)
    slots[0] = (rows * nc) << 32
    for me, stop in steps:
        limit = int(slots[me]) >> 32
        if stop is not None:
            slots[me] = (stop << 32) | (int(slots[me]) & N._FRONT)
        N._chunk_scans(op, x.reshape(-1), out.reshape(-1), m, t, done, slots, me, chunk,
                       N._SHARE)
        if stop is not None:
            slots[me] = (limit << 32) | (int(slots[me]) & N._FRONT)
    return out


#: Turns of three threads: the caller alone; the others taking all or part
#: before it starts; the caller claiming some chunks (their tree values
#: done) before another takes the end of its claim, and resuming after.
TURNS: list[list[tuple[int, int | None]]] = [
    [(0, None), (1, None)],
    [(1, None), (2, None), (0, None)],
    [(2, None), (0, None), (1, None)],
    [(0, 3), (1, None), (0, None), (2, None)],
    [(0, 5), (2, None), (1, None), (0, None)],
]


@pytest.mark.parametrize("turns", TURNS)
@pytest.mark.parametrize("shape", [(1, 300), (3, 150), (2, 64)])
def test_chunk_claims_taken_in_any_order_are_the_network(
        turns: list[tuple[int, int | None]], shape: tuple[int, int]) -> None:
    rng = np.random.default_rng(shape[1])
    x = spread(rng, shape, np.float32)
    x[0, shape[1] // 3] = np.nan
    x[-1, shape[1] // 2] = -np.inf
    with np.errstate(all="ignore"):
        (want,) = odd_even_scan((x,), lambda a, b: (a[0] + b[0],))
    assert bits(_claimed(N.ADD, x, 16, turns)) == bits(canonical(want))
    w = rng.standard_normal(shape) * 30
    (want_lse,) = odd_even_scan((w,), lambda a, b: (logaddexp(a[0], b[0]),))
    assert bits(_claimed(N.LSE, w, 16, turns)) == bits(canonical(want_lse))


def test_rows_scanned_in_groups_are_the_network(monkeypatch: pytest.MonkeyPatch) -> None:
    # Rows go to the kernel in groups of fewer than 2^31 chunks (_FRONT >> 1):
    # a small _FRONT makes groups of 3 rows of 2 chunks here.
    monkeypatch.setattr(N, "_FRONT", 15)
    rng = np.random.default_rng(11)
    x = spread(rng, (20, 30), np.float32)
    with np.errstate(all="ignore"):
        (want,) = odd_even_scan((x,), lambda a, b: (a[0] + b[0],))
    got = np.empty_like(x)
    with threads(2):
        N.real_scan(False, x, got, 16)
    assert bits(got) == bits(canonical(want))

"""The host library's one pool and one knob: ``NXKERNEL_THREADS`` and
``nxkernel_host.threads(n)``."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

import nxkernel_host
from nxkernel_host import pool


def test_threads_sets_the_count_for_its_context_and_restores_it() -> None:
    outside = pool.count()
    with nxkernel_host.threads(3):
        assert pool.count() == 3
        with nxkernel_host.threads(1):
            assert pool.count() == 1
        assert pool.count() == 3
    assert pool.count() == outside == pool.DEFAULT


@pytest.mark.parametrize("n", [0, -2, True, 1.5, "2"])
def test_threads_refuses_what_is_not_a_count(n: object) -> None:
    with (pytest.raises(ValueError, match=r"nxkernel_host.threads: n = .*at least 1"),
          nxkernel_host.threads(n)):  # type: ignore[arg-type]
        pass


def test_another_threads_count_is_its_own() -> None:
    seen: list[int] = []
    with nxkernel_host.threads(5):
        other = threading.Thread(target=lambda: seen.append(pool.count()))
        other.start()
        other.join()
    assert seen == [pool.DEFAULT]


def test_one_thread_runs_every_job_on_the_caller() -> None:
    ran: list[int] = []
    with nxkernel_host.threads(1):
        pool.parallel([lambda: ran.append(threading.get_ident()) for _ in range(6)])
    assert ran == [threading.get_ident()] * 6


def test_jobs_on_the_pool_see_the_callers_count() -> None:
    gate = threading.Barrier(2, timeout=30)
    seen: list[tuple[int, int]] = []

    def job() -> None:
        # Both jobs wait for each other: one ran on the pool.
        gate.wait()
        seen.append((threading.get_ident(), pool.count()))

    with nxkernel_host.threads(2):
        pool.parallel([job, job])
    assert len({t for t, _ in seen}) == 2
    assert [c for _, c in seen] == [2, 2]


def test_the_default_reads_nxkernel_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NXKERNEL_THREADS", "3")
    assert pool._default() == 3
    monkeypatch.delenv("NXKERNEL_THREADS")
    assert pool._default() == len(os.sched_getaffinity(0))
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv("NXKERNEL_THREADS", bad)
        with pytest.raises(ValueError, match=f"NXKERNEL_THREADS='{bad}': a whole number"):
            pool._default()


def test_a_process_started_with_nxkernel_threads_counts_that_many() -> None:
    env = {**os.environ, "NXKERNEL_THREADS": "3"}
    out = subprocess.run([sys.executable, "-c", "from nxkernel_host import pool; print(pool.count())"],
                         env=env, capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.strip() == "3"

"""The host library's one pool and one knob: ``NXKERNEL_THREADS`` and
``nxkernel_host.threads(n)``."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator

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


_CPUS = frozenset(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else frozenset()
needs_two_cpus = pytest.mark.skipif(
    pool._getcpu is None or len(_CPUS) < 2,
    reason="steering the pool's threads needs Linux thread affinities and two CPUs")


def _started_workers() -> list[int]:
    """The native ids of the pool's threads, after a call that ran a job on
    one of them (so at least one has enlisted)."""
    gate = threading.Barrier(2, timeout=30)
    with nxkernel_host.threads(2):
        pool.parallel([gate.wait, gate.wait])
    assert pool._workers, "a job ran on the pool, so its thread enlisted"
    return list(pool._workers)


@needs_two_cpus
def test_steer_keeps_the_pools_threads_off_the_callers_cpu() -> None:
    workers = _started_workers()
    try:
        for cpu in sorted(_CPUS):
            pool.steer(cpu, _CPUS)
            assert {tid: os.sched_getaffinity(tid) for tid in workers} == {
                tid: _CPUS - {cpu} for tid in workers}
        # A caller kept to one CPU keeps the pool there with it.
        only = min(_CPUS)
        pool.steer(only, frozenset({only}))
        assert all(os.sched_getaffinity(tid) == {only} for tid in workers)
    finally:
        pool.steer(-1, _CPUS)
    assert all(os.sched_getaffinity(tid) == _CPUS for tid in workers)


@contextlib.contextmanager
def _caller_kept_to(cpu: int) -> Iterator[None]:
    """The calling thread kept to ``cpu`` alone in the block; after it, the
    caller and the pool's threads have every CPU again."""
    os.sched_setaffinity(0, {cpu})
    try:
        yield
    finally:
        os.sched_setaffinity(0, _CPUS)
        pool.steer(-1, _CPUS)


@needs_two_cpus
def test_handing_work_to_the_pool_steers_its_threads_from_the_caller() -> None:
    workers = _started_workers()
    only = min(_CPUS)
    with _caller_kept_to(only), pool.lend(2):
        assert all(os.sched_getaffinity(tid) == {only} for tid in workers)


@needs_two_cpus
def test_a_second_call_holding_the_pool_leaves_its_threads_where_they_are() -> None:
    workers = _started_workers()
    pool.steer(-1, _CPUS)
    only = min(_CPUS)
    with _caller_kept_to(only):
        with pool.lend(2), pool.lend(2):  # the inner call is a second holder
            assert all(os.sched_getaffinity(tid) == {only} for tid in workers)
            pool.steer(-1, _CPUS)
            with pool.lend(2):
                assert all(os.sched_getaffinity(tid) == _CPUS for tid in workers)
        assert pool._lenders == 0


@needs_two_cpus
def test_steering_skips_a_thread_the_system_refuses() -> None:
    workers = _started_workers()
    with open("/proc/sys/kernel/pid_max") as f:
        gone = int(f.read()) + 1  # no thread anywhere has this id
    pool._workers[gone] = None
    try:
        pool.steer(min(_CPUS), _CPUS)
        assert pool._workers[gone] is None
        assert all(os.sched_getaffinity(tid) == _CPUS - {min(_CPUS)} for tid in workers)
    finally:
        del pool._workers[gone]
        pool.steer(-1, _CPUS)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_starts_its_own_pool() -> None:
    _started_workers()
    parent_workers = dict(pool._workers)
    assert parent_workers
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child's outcome is read from its pipe
        ok = not pool._workers and pool._pool is None
        ran: list[int] = []
        gate = threading.Barrier(2, timeout=30)
        with nxkernel_host.threads(2):
            pool.parallel([lambda: (gate.wait(), ran.append(1)), lambda: (gate.wait(), ran.append(2))])
        ok = ok and sorted(ran) == [1, 2] and not set(pool._workers) & set(parent_workers)
        os.write(write, b"1" if ok else b"0")
        os._exit(0)
    os.close(write)
    try:
        ready, _, _ = select.select([read], [], [], 120)
        if not ready:
            os.kill(child, signal.SIGKILL)
        answer = os.read(read, 1) if ready else b"(no answer in 120 s)"
    finally:
        os.close(read)
        os.waitpid(child, 0)
    assert answer == b"1"


@needs_two_cpus
def test_a_system_that_hides_affinities_still_lends_the_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(_pid: int) -> set[int]:
        raise PermissionError("affinities hidden")

    monkeypatch.setattr(os, "sched_getaffinity", refuse)
    ran: list[int] = []
    gate = threading.Barrier(2, timeout=30)
    with nxkernel_host.threads(2):
        pool.parallel([lambda: (gate.wait(), ran.append(1)), lambda: (gate.wait(), ran.append(2))])
    assert sorted(ran) == [1, 2]

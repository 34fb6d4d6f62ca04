"""The host library's threads: one pool, one knob.

Every host kernel that spreads its work over threads (programs' boxes, lane
order's blocks, network scans, contraction's tiles, attention's units) takes
them from one pool. How many threads a kernel call may use, the calling one
included, is :func:`count`: ``n`` inside ``threads(n)`` (a context manager,
exported as ``nxkernel_host.threads``), else ``NXKERNEL_THREADS`` where it is
set, else the CPUs this process may use. Results never depend on it: each
kernel cuts its work by the extents alone, and the pool only decides which
thread computes which piece.

No BLAS thread count follows it. The host multiplies on its own OpenBLAS
instances (``blas``), whose thread counts are fixed because their bits depend
on them (one thread for products, ``blas.ROUTINE_THREADS`` for the
routines); the program's own BLAS (NumPy's) is not the library's to set.

Where the pool's threads run. Each time a kernel hands work to the pool
(:func:`lend`) while no other call holds it, the pool's threads are kept off
the CPU the calling thread runs on, which computes a share itself: their
affinity becomes the caller's CPUs but that one (all of them where it has
one). Linux wakes a thread on the CPU it judges least loaded, and after
another library's threads have spun on the other cores (OpenBLAS's and
OpenMP's workers spin for up to ~0.1 s after each call) it judges the
waker's own CPU the place: the two shares then run on one core for
milliseconds until the kernel moves one (measured: a 1024³ float32 product
right after NumPy's threaded one took 18–19 ms against 13 alone; 64 products
of 128³ in a loop took 4.9 ms on two threads as on one, 2.6 steered). Only
the pool's own threads are steered, never the caller or another library's.
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import itertools
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Final

__all__ = ["DEFAULT", "MIN_PARALLEL", "count", "lend", "parallel", "parts_for", "pool", "spans",
           "steer", "threads"]

#: Elements below which work stays on the calling thread: handing it to the
#: pool costs more than it saves.
MIN_PARALLEL: Final = 1 << 17


def _default() -> int:
    """``NXKERNEL_THREADS``, else the CPUs this process may use."""
    text = os.environ.get("NXKERNEL_THREADS", "").strip()
    if not text:
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
            os.cpu_count() or 1)
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"NXKERNEL_THREADS={text!r}: a whole number of threads, at least 1")
    return int(text)


#: The count outside any ``threads(n)``, read once at import.
DEFAULT: Final[int] = _default()
_COUNT: Final[contextvars.ContextVar[int]] = contextvars.ContextVar(
    "nxkernel_host_threads", default=DEFAULT)

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_pool_size = 0
#: The native ids of the current pool's threads, each with the CPUs it was
#: last kept to (None: the ones it inherited).
_workers: dict[int, frozenset[int] | None] = {}
#: How many kernel calls hold the pool now (``lend``).
_lenders = 0


def _forget_the_pool() -> None:
    """In a forked child: the parent's pool threads do not exist here (and
    their ids name the parent's threads), so the child starts its own."""
    global _pool, _pool_size, _workers, _lenders
    _pool, _pool_size, _workers, _lenders = None, 0, {}, 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_the_pool)


def _sched_getcpu() -> Callable[[], int] | None:
    """The C library's ``sched_getcpu`` (the CPU the calling thread runs
    on), None where the platform has none or sets no thread affinities."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    try:
        getcpu = ctypes.CDLL(None).sched_getcpu
    except (OSError, AttributeError):
        return None
    getcpu.restype, getcpu.argtypes = ctypes.c_int, []
    return getcpu


_getcpu: Final = _sched_getcpu()


def count() -> int:
    """How many threads a kernel call started in this context may use (the
    calling one included)."""
    return _COUNT.get()


@contextlib.contextmanager
def threads(n: int) -> Iterator[None]:
    """Run the host kernels called in this context on at most ``n`` threads
    (the calling one included); the results do not depend on it.

    Raises:
        ValueError: ``n`` below 1.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"nxkernel_host.threads: n = {n!r}; a whole number, at least 1")
    token = _COUNT.set(n)
    try:
        yield
    finally:
        _COUNT.reset(token)


def _enlist(workers: dict[int, frozenset[int] | None]) -> None:
    """A new pool thread's first step: its native id into its pool's table."""
    with _lock:
        workers[threading.get_native_id()] = None


def pool(n: int) -> ThreadPoolExecutor:
    """The pool, grown to at least ``n - 1`` threads (the caller is the n-th);
    a replaced pool finishes the jobs it holds. Kernels hand it work through
    ``lend``."""
    global _pool, _pool_size, _workers
    with _lock:
        if _pool is None or _pool_size < n - 1:
            if _pool is not None:
                _pool.shutdown(wait=False)
            _pool_size = max(1, n - 1, _pool_size)
            _workers = {}
            _pool = ThreadPoolExecutor(_pool_size, thread_name_prefix="nxkernel-host",
                                       initializer=_enlist, initargs=(_workers,))
        return _pool


@contextlib.contextmanager
def lend(n: int) -> Iterator[ThreadPoolExecutor]:
    """The pool (``pool(n)``) for the jobs of one kernel call, which the
    block waits for before it ends. Where no other call holds the pool
    meanwhile, its threads are first kept off the calling thread's CPU
    (``steer``); two calls at once would pull them back and forth, so then
    they stay where they are."""
    global _lenders
    executor = pool(n)
    with _lock:
        _lenders += 1
        alone = _lenders == 1
    try:
        if alone and _getcpu is not None:
            with contextlib.suppress(OSError):  # a sandbox that hides affinities: no steering
                steer(_getcpu(), frozenset(os.sched_getaffinity(0)))
        yield executor
    finally:
        with _lock:
            _lenders -= 1


def steer(cpu: int, cpus: frozenset[int]) -> None:
    """Keep the pool's threads to ``cpus`` but ``cpu`` (the calling thread's
    CPU and allowed CPUs; all of ``cpus`` where ``cpu`` is the only one).
    A thread already kept there is not touched; one the system refuses (it
    ended, or a CPU set forbids the mask) is left as it is: steering only
    places threads, it changes no result."""
    away = cpus - {cpu} or cpus
    with _lock:
        for tid, kept in _workers.items():
            if kept == away:
                continue
            try:
                os.sched_setaffinity(tid, away)
            except OSError:
                continue
            _workers[tid] = away


def spans(total: int, parts: int) -> list[tuple[int, int]]:
    """``[0, total)`` cut into at most ``parts`` contiguous, non-empty, nearly
    equal ranges, in order."""
    parts = max(1, min(parts, total))
    cuts = [total * i // parts for i in range(parts + 1)]
    return [(a, b) for a, b in itertools.pairwise(cuts) if b > a]


def parallel(jobs: Sequence[Callable[[], None]]) -> None:
    """Run every job and return when all have finished: the first on the
    calling thread, the others on the pool (each in a copy of the caller's
    context, so ``count`` reads the same there), or on the calling thread
    where the pool has not started them by then. Re-raises a job's
    exception. Jobs must not wait on the pool themselves."""
    n = count()
    if len(jobs) <= 1 or n == 1:
        for job in jobs:
            job()
        return
    with lend(min(n, len(jobs))) as executor:
        futures: list[Future[None]] = [
            executor.submit(contextvars.copy_context().run, job) for job in jobs[1:]]
        try:
            jobs[0]()
        finally:
            for job, f in zip(jobs[1:], futures, strict=True):
                # A job no pool thread has started yet runs here instead: the
                # caller never idles waiting for a busy or descheduled pool.
                if f.cancel():
                    job()
                else:
                    f.result()


def parts_for(units: int, elements: int) -> int:
    """How many threads share ``units`` independent pieces of ``elements``
    elements in all: one below ``MIN_PARALLEL`` elements, else up to
    :func:`count`."""
    if elements < MIN_PARALLEL:
        return 1
    return max(1, min(count(), units))

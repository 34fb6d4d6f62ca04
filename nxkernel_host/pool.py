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
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Final

__all__ = ["DEFAULT", "MIN_PARALLEL", "count", "parallel", "parts_for", "spans", "threads"]

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


def pool(n: int) -> ThreadPoolExecutor:
    """The pool, grown to at least ``n - 1`` threads (the caller is the n-th);
    a replaced pool finishes the jobs it holds."""
    global _pool, _pool_size
    with _lock:
        if _pool is None or _pool_size < n - 1:
            if _pool is not None:
                _pool.shutdown(wait=False)
            _pool_size = max(1, n - 1, _pool_size)
            _pool = ThreadPoolExecutor(_pool_size, thread_name_prefix="nxkernel-host")
        return _pool


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
    executor = pool(min(n, len(jobs)))
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

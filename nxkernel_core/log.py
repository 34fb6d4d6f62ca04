"""nxkernel's logs: the ``nxkernel`` logger hierarchy, and how compiles report.

Every module logs to a child of the ``nxkernel`` logger (:func:`get`:
``nxkernel.plugins``, ``nxkernel.cuda.build``, ``nxkernel.cuda.emulator``),
so ``logging.getLogger("nxkernel").setLevel(logging.DEBUG)`` shows them all.
What is logged, at which level:

* WARNING: a plugin that failed (``nxkernel.plugins``);
* INFO: a kernel compiled (NVRTC or the emulator's g++), with its time; a
  cache entry rebuilt because it was damaged;
* DEBUG: a kernel found in the disk cache.

Nothing is configured by the library: a program's logging setup decides
where records go (without one, Python prints warnings on stderr). Where
``$NXKERNEL_LOG`` names a level (``debug``, ``info``, ``warning``), the
``nxkernel`` logger gets a handler printing to stderr at that level, once.

A compile that runs longer than :data:`NOTE_AFTER` seconds, where stderr is
a terminal, also prints one progress line on stderr
(``nxkernel: compiling lane_sum.cu for sm_90 (NVRTC 13.0)… 1.4 s``), so a
first call that waits on the compiler does not look hung.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
from collections.abc import Iterator
from typing import Final

__all__ = ["NOTE_AFTER", "ROOT", "VARIABLE", "compiling", "get"]

#: The root of the hierarchy.
ROOT: Final = "nxkernel"
#: The variable that attaches a stderr handler at a level.
VARIABLE: Final = "NXKERNEL_LOG"
#: Seconds a compile runs before its progress line is printed.
NOTE_AFTER: Final = 1.0

_configured = False
_configure_lock: Final = threading.Lock()


def get(name: str = "") -> logging.Logger:
    """The logger ``nxkernel.NAME`` (``nxkernel`` for no name), after applying
    ``$NXKERNEL_LOG`` once per process."""
    _configure()
    return logging.getLogger(f"{ROOT}.{name}" if name else ROOT)


def _configure() -> None:
    """Attach the stderr handler ``$NXKERNEL_LOG`` asks for, once."""
    global _configured
    with _configure_lock:
        if _configured:
            return
        _configured = True
        level = os.environ.get(VARIABLE, "").strip().upper()
        if not level:
            return
        if level not in ("DEBUG", "INFO", "WARNING", "ERROR"):
            print(f"nxkernel: {VARIABLE}={level.lower()} is not debug, info, warning or error;"
                  " ignored", file=sys.stderr)
            return
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(name)s %(levelname)s: %(message)s"))
        root = logging.getLogger(ROOT)
        root.addHandler(handler)
        root.setLevel(level)


def _terminal() -> bool:
    """Whether stderr is a terminal (where progress lines go)."""
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed
        return False


@contextlib.contextmanager
def compiling(logger: logging.Logger, what: str, note_after: float = NOTE_AFTER) -> Iterator[None]:
    """Time the compile of ``what`` (``"lane_sum.cu for sm_90 (NVRTC 13.0)"``)
    run in the body: log it at INFO with its time, or its failure; where it
    runs past ``note_after`` seconds and stderr is a terminal, print
    ``nxkernel: compiling WHAT…`` on stderr then, ended by the time (one line)."""
    lock = threading.Lock()
    state = {"done": False, "noted": False}

    def note() -> None:
        with lock:
            if state["done"] or not _terminal():
                return
            state["noted"] = True
            print(f"nxkernel: compiling {what}…", end="", file=sys.stderr, flush=True)

    start = time.perf_counter()
    timer = threading.Timer(note_after, note)
    timer.daemon = True
    timer.start()
    failed = True
    try:
        yield
        failed = False
    finally:
        timer.cancel()
        elapsed = time.perf_counter() - start
        with lock:
            state["done"] = True
            if state["noted"]:
                print(f" {'failed after ' if failed else ''}{elapsed:.1f} s", file=sys.stderr, flush=True)
        if failed:
            logger.info("compiling %s failed after %.2f s", what, elapsed)
        else:
            logger.info("compiled %s in %.2f s", what, elapsed)

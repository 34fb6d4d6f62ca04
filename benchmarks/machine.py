"""What a benchmark run records about the machine it ran on, and whether the
machine was busy with something else while a row was timed.

A ratio measured while other work competes for the cores says little about
either side, so every run records the machine (``record``) and every row is
timed under a ``Watch``: a row is *loaded* when, during its timing, processes
other than the benchmark's used more than ``BUSY_CORES`` of a core on average
(Linux: the machine's busy CPU time from ``/proc/stat`` less this process's
own), or when another benchmark process was running. Where ``/proc/stat`` is
missing, a 1-minute load average above the core count marks the row instead.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Any, Final

__all__ = ["BUSY_CORES", "MIN_WINDOW", "Watch", "other_benchmarks", "record", "threads"]

#: Other processes' average CPU use, in cores, above which a row is loaded.
BUSY_CORES: Final = 0.25

#: The peers and tools whose versions a record names, where installed.
_PACKAGES: Final = ("nxkernel", "numpy", "scipy", "numba", "ml_dtypes", "torch", "cupy")

#: Command-line words that mark a process as another benchmark run.
_BENCH_MARKS: Final = ("benchmarks.run", "benchmarks.bench_")

#: The shortest window a Watch measures over, in seconds: /proc/stat counts in
#: ticks of 10 ms per core, so a shorter window could not tell a quarter of a
#: core from noise. A row timed faster than this waits out the rest, still
#: watching.
MIN_WINDOW: Final = 0.3


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _busy_seconds() -> float | None:
    """The machine's busy CPU seconds since boot, all cores together (user,
    nice, system, irq, softirq, steal), or None without ``/proc/stat``."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def other_benchmarks() -> list[int]:
    """The process ids of other benchmark runs on this machine (Linux; an
    empty list elsewhere). This process and its ancestors do not count."""
    mine = {os.getpid()}
    pid = os.getppid()
    while pid > 1:
        mine.add(pid)
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            words = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if int(entry.name) not in mine and any(mark in words for mark in _BENCH_MARKS):
            found.append(int(entry.name))
    return sorted(found)


def threads() -> dict[str, Any]:
    """How many threads each side may use: ours (``NXKERNEL_THREADS``, else
    Numba's default), NumPy's BLAS (threadpoolctl), PyTorch's intra-op pool
    where PyTorch is already imported."""
    found: dict[str, Any] = {"NXKERNEL_THREADS": os.environ.get("NXKERNEL_THREADS")}
    try:
        import numba

        found["numba"] = int(numba.get_num_threads())
    except ImportError:
        found["numba"] = None
    try:
        from threadpoolctl import threadpool_info  # type: ignore[import-untyped]

        found["blas"] = [{"library": i.get("internal_api"), "threads": i.get("num_threads"),
                          "path": Path(str(i.get("filepath"))).name} for i in threadpool_info()]
    except ImportError:
        found["blas"] = None
    torch = sys.modules.get("torch")
    found["torch"] = int(torch.get_num_threads()) if torch is not None else None
    return found


def record() -> dict[str, Any]:
    """The machine as a run records it: CPU model, cores, 1/5/15-minute load
    averages now, other benchmark processes, thread counts and versions."""
    versions: dict[str, str | None] = {}
    for name in _PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return {
        "cpu": _cpu_model(), "cores": _cores(), "logical_cpus": os.cpu_count(),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "other_benchmarks": other_benchmarks(), "threads": threads(),
        "python": platform.python_version(), "platform": platform.platform(),
        "versions": versions, "time": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }


class Watch:
    """A context that measures how busy the rest of the machine was while it
    was open: ``others_cores`` (other processes' average CPU use, in cores),
    ``rivals`` (other benchmark processes seen at its start or end) and
    ``loaded``."""

    def __init__(self) -> None:
        self.others_cores: float | None = None
        self.rivals: list[int] = []
        self.loaded = False
        self._start = (0.0, 0.0)
        self._busy: float | None = None

    def __enter__(self) -> Watch:
        self.rivals = other_benchmarks()
        self._busy = _busy_seconds()
        self._start = (time.perf_counter(), time.process_time())
        return self

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None,
                 tb: TracebackType | None) -> None:
        wall = time.perf_counter() - self._start[0]
        if wall < MIN_WINDOW:
            time.sleep(MIN_WINDOW - wall)
            wall = time.perf_counter() - self._start[0]
        ours = time.process_time() - self._start[1]
        busy = _busy_seconds()
        self.rivals = sorted({*self.rivals, *other_benchmarks()})
        if busy is not None and self._busy is not None and wall > 0:
            self.others_cores = max(0.0, (busy - self._busy) - ours) / wall
            too_busy = self.others_cores > BUSY_CORES
        else:
            too_busy = hasattr(os, "getloadavg") and os.getloadavg()[0] > _cores()
        self.loaded = too_busy or bool(self.rivals)

"""Benchmarks a reader can trust: a row checks ours against its peer before
timing and is reported as failed, never timed, where they disagree; a row
timed while the machine is busy is marked loaded; ``--plot`` refuses loaded
rows without ``--allow-load``."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The checkout's ``benchmarks`` package (timing, machine, run)."""
    monkeypatch.syspath_prepend(str(ROOT))
    import benchmarks.machine
    import benchmarks.run
    import benchmarks.timing

    return benchmarks


def test_a_row_whose_sides_disagree_is_failed_and_never_timed(bench: Any) -> None:
    calls = {"ours": 0, "theirs": 0}

    def ours() -> np.ndarray[Any, Any]:
        calls["ours"] += 1
        return np.array([1.0, 2.0], np.float32)

    def theirs() -> np.ndarray[Any, Any]:
        calls["theirs"] += 1
        return np.array([1.0, 2.5], np.float32)

    def check() -> None:
        bench.timing.check_bits("planted: ours and theirs", ours(), theirs())

    row = bench.timing.row("planted", 2, "float32", ours, theirs, 50, check=check)
    assert row["failed"] == "planted: ours and theirs disagree (their bits differ)"
    assert row["ours_s"] is None and row["numpy_s"] is None and row["ratio"] is None
    assert calls == {"ours": 1, "theirs": 1}  # the check's one call each, no timing


def test_a_row_within_its_bound_is_timed(bench: Any) -> None:
    x = np.array([1.0, 2.0])
    row = bench.timing.row("agreeing", 2, "float64", lambda: x + 0, lambda: x * 1, 3,
                           check=lambda: bench.timing.check_within("agree", x + 1e-17, x, 1e-16))
    assert row["failed"] is None and row["ours_s"] > 0 and row["ratio"] is not None
    with pytest.raises(AssertionError, match=r"agree disagree \(entry 1: 2.5 and 2.0, 0.1 allowed\)"):
        bench.timing.check_within("agree", np.array([1.0, 2.5]), x, 0.1)
    with pytest.raises(AssertionError, match="NaN at different places"):
        bench.timing.check_within("nan", np.array([np.nan, 2.0]), x, 1.0)


def test_a_busy_machine_marks_the_row_loaded(bench: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # Others keep one whole core busy while the row is timed: the machine's busy
    # seconds grow by the wall time, this process's CPU time does not.
    start = time.perf_counter()
    monkeypatch.setattr(bench.machine, "_busy_seconds", lambda: time.perf_counter() - start)
    monkeypatch.setattr(bench.machine, "other_benchmarks", lambda: [])
    with bench.machine.Watch() as watch:
        time.sleep(0.05)
    assert watch.loaded and watch.others_cores == pytest.approx(1.0, abs=0.2)
    # An idle machine: no busy seconds but ours.
    monkeypatch.setattr(bench.machine, "_busy_seconds", time.process_time)
    with bench.machine.Watch() as watch:
        pass
    assert not watch.loaded and watch.others_cores < bench.machine.BUSY_CORES


def test_another_benchmark_process_marks_the_row_loaded(bench: Any) -> None:
    if not Path("/proc/self/cmdline").exists():
        pytest.skip("finding other processes needs Linux's /proc")
    rival = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "benchmarks.run"])
    try:
        # The child's command line appears once it has started Python.
        deadline = time.monotonic() + 10
        while rival.pid not in bench.machine.other_benchmarks() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert rival.pid in bench.machine.other_benchmarks()
        with bench.machine.Watch() as watch:
            pass
        assert watch.loaded and rival.pid in watch.rivals
    finally:
        rival.kill()
        rival.wait()
    assert rival.pid not in bench.machine.other_benchmarks()


def test_the_machine_record(bench: Any) -> None:
    record = bench.machine.record()
    assert record["cores"] >= 1 and record["cpu"]
    assert record["versions"]["numpy"] == np.__version__
    assert set(record["threads"]) >= {"NXKERNEL_THREADS", "numba", "blas", "torch"}


ROWS: list[dict[str, Any]] = [
    {"name": "quiet", "size": 10, "dtype": "float32", "ours_s": 0.001, "numpy_s": 0.002,
     "ratio": 2.0, "failed": None, "loaded": False, "others_cores": 0.0},
    {"name": "busy", "size": 10, "dtype": "float32", "ours_s": 0.001, "numpy_s": 0.001,
     "ratio": 1.0, "failed": None, "loaded": True, "others_cores": 1.5},
    {"name": "wrong", "size": 10, "dtype": "float32", "ours_s": None, "numpy_s": None,
     "ratio": None, "failed": "bench: wrong: ours and NumPy disagree (their bits differ)",
     "loaded": False, "others_cores": None},
]


@pytest.fixture
def one_suite(bench: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """benchmarks.run over one stand-in suite giving ROWS."""
    class Suite:
        LIBRARY = "host"

        def run(self, quick: bool) -> list[dict[str, Any]]:
            return [dict(r) for r in ROWS]

    monkeypatch.setattr(bench.run, "modules", lambda: ["bench_x"])
    monkeypatch.setattr(bench.run, "_load", lambda name: Suite())
    return bench.run


def test_the_table_marks_loaded_and_failed_rows(one_suite: Any, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    status = one_suite.main(["--json", str(tmp_path / "rows.json")])
    out = capsys.readouterr().out
    assert status == 1  # a failed row fails the run
    lines = {line.split()[0]: line for line in out.splitlines() if line.split()}
    assert lines["quiet"].endswith("2.00x") and lines["busy"].endswith("1.00*")
    assert "FAILED: bench: wrong: ours and NumPy disagree (their bits differ)" in lines["wrong"]
    assert "* timed while the machine was busy" in out


def test_plot_refuses_loaded_rows_without_allow_load(
    one_suite: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib", reason="the plot needs matplotlib: pip install -e '.[dev]'")
    png = tmp_path / "r.png"
    assert one_suite.main(["--plot", str(png)]) == 2
    assert "1 rows were timed while the machine was busy (busy)" in capsys.readouterr().err
    assert not png.exists()
    assert one_suite.main(["--plot", str(png), "--allow-load"]) == 1  # the failed row still fails
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("suite", ["bench_map", "bench_reduce", "bench_moves", "bench_linalg",
                                   "bench_attention", "bench_calls", "bench_array_api"])
def test_every_host_row_passes_its_check(bench: Any, suite: str, monkeypatch: pytest.MonkeyPatch
                                         ) -> None:
    """Each host suite at its --quick sizes, its checks run and the timing
    stubbed out: every row's sides agree on this machine's host library."""
    import importlib

    module = importlib.import_module(f"benchmarks.{suite}")
    monkeypatch.setattr(bench.timing, "medians", lambda ours, other, repeats, **_: (1.0, 1.0))
    monkeypatch.setattr(bench.machine, "MIN_WINDOW", 0.0)
    if suite == "bench_attention":
        monkeypatch.setattr(module, "_best", lambda fns, repeats, clock: [1.0] * len(fns))
    rows = module.run(True)
    assert rows and [r["name"] for r in rows if r["failed"]] == []


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="threads' run times are Linux's")
def test_quiet_returns_once_the_other_threads_stop(bench: Any) -> None:
    """``timing.quiet`` returns only after a busy thread of the process has
    stopped, as a threaded BLAS's workers do some time after their call."""
    done = threading.Event()

    def busy() -> None:
        count = 0
        while count < 2_000_000:  # some tenths of a second of one core
            count += 1
        done.set()

    worker = threading.Thread(target=busy)
    worker.start()
    # A window of 0.1 s: a runnable thread is scheduled well within it.
    bench.timing.quiet(window=0.1, most=60.0)
    assert done.is_set()
    worker.join()


def test_a_settled_row_waits_for_quiet_before_each_timed_call(bench: Any,
                                                              monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    seen: list[str] = []
    monkeypatch.setattr(bench.timing, "quiet", lambda: seen.append("quiet"))
    bench.timing.medians(lambda: seen.append("ours"), lambda: seen.append("theirs"), 2,
                         settle=True)
    assert seen == ["ours", "theirs"] + ["quiet", "ours", "quiet", "theirs"] * 2

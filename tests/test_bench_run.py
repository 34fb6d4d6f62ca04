"""benchmarks/run.py (``python -m benchmarks.run`` in a checkout): its
tables, progress lines and plot."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


ROWS: list[dict[str, Any]] = [
    {"name": "sum", "size": 10, "dtype": "float32", "ours_s": 0.001, "numpy_s": 0.002, "ratio": 2.0},
    {"name": "attention", "size": "T=8", "dtype": "float32", "ours_s": 0.002, "numpy_s": 0.001,
     "ratio": 0.5, "torch_s": 0.004, "ratio_torch": 2.0},
    {"name": "attention, no torch", "size": "T=8", "dtype": "float32", "ours_s": 0.002,
     "numpy_s": 0.001, "ratio": 0.5, "torch_s": None, "ratio_torch": None},
]


@pytest.fixture
def suites(monkeypatch: pytest.MonkeyPatch) -> Any:
    """benchmarks.run of this checkout, over two stand-in suites (one of them
    failing) and one that needs a peer that is not installed."""
    monkeypatch.syspath_prepend(str(ROOT))
    for name in ("benchmarks", "benchmarks.run"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    import benchmarks.run as run_module

    class Suite:
        def __init__(self, rows: list[dict[str, Any]] | None, library: str = "host") -> None:
            self.rows, self.LIBRARY = rows, library

        def run(self, quick: bool) -> list[dict[str, Any]]:
            if self.rows is None:
                raise RuntimeError("broken suite")
            return [dict(r) for r in self.rows]

    fakes = {"bench_a": Suite(ROWS[:1]), "bench_b": Suite(ROWS[1:]), "bench_c": Suite(None),
             "bench_gpu": Suite(ROWS[:1], "nx.cuda")}

    def load(short: str) -> Any:
        if short == "bench_peer":
            err = ModuleNotFoundError("No module named 'cupy'")
            err.name = "cupy"
            raise err
        return fakes[short]

    monkeypatch.setattr(run_module, "modules", lambda: [*sorted(fakes), "bench_peer"])
    monkeypatch.setattr(run_module, "_load", load)
    return run_module


def test_bench_prints_a_table_per_suite_with_progress(
    suites: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib", reason="the plot needs matplotlib: pip install -e '.[dev]'")
    path, png = tmp_path / "rows.json", tmp_path / "ratios.png"
    status = suites.main(["host", "--quick", "--json", str(path), "--plot", str(png)])
    out, err = capsys.readouterr()
    assert status == 1  # bench_c failed; the others still ran
    assert "bench_peer: skipped, it needs cupy (pip install cupy)" in err
    assert "[1/3] bench_a (host) ...\n[1/3] bench_a: 1 rows in" in err
    assert "[3/3] bench_c: failed\nTraceback" in err and "RuntimeError: broken suite" in err
    assert "bench_gpu" not in err + out
    machine, a, b = out.split("\n\n")
    assert machine.startswith("machine: ") and "load average" in machine
    assert a.startswith("== bench_a (host) ==\n") and "torch ms" not in a
    assert b.startswith("== bench_b (host) ==\n") and "torch ms" in b
    assert " 2.00x" in a and "   0.50x      4.000   2.00x" in b
    assert b.splitlines()[-1].endswith("-       -")
    written = json.loads(path.read_text())
    assert written["machine"]["cores"] >= 1 and len(written["load_average_after"]) == 3
    rows = written["rows"]
    assert [(r["module"], r["name"]) for r in rows] == [
        ("bench_a", "sum"), ("bench_b", "attention"), ("bench_b", "attention, no torch")]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_names_the_libraries_it_has(suites: Any, capsys: pytest.CaptureFixture[str]) -> None:
    assert suites.main(["nx.cuda"]) == 0
    assert "== bench_gpu (nx.cuda) ==" in capsys.readouterr().out
    assert suites.main(["metal"]) == 2
    assert "no benchmarks for metal (the suites measure: host, nx.cuda)" in capsys.readouterr().err

"""The nxkernel command: info (text and JSON, in-process and as
``python -m nxkernel_core``), check and bench."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from nxkernel_core import cli
from nxkernel_core.kernel import KERNEL_NAMES
from tests.fake_dist import BROKEN, LIBRARY, Install, stand_in_plugins

ROOT = Path(__file__).resolve().parent.parent
SOURCES = {"good": LIBRARY.format(name="good"), "broken": BROKEN,
           "other": LIBRARY.format(name="other")}


@pytest.fixture
def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Install]:
    with stand_in_plugins(tmp_path, monkeypatch) as install:
        yield install


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = cli.main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


# ---- info ------------------------------------------------------------------------


def test_info_lists_plugins_libraries_devices_and_statements(
    install: Install, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    install(SOURCES)
    monkeypatch.setenv("NXKERNEL_DISABLE", "other")
    status, out, err = run(capsys, "info")
    assert status == 0 and err == ""
    assert "NXKERNEL_DISABLE=other" in out
    assert f"  {'good':<20}loaded\n" in out
    assert (f"  {'broken':<20}failed  load: ImportError: fake plugin needs a missing"
            " component\n") in out
    assert f"  {'other':<20}disabled\n" in out
    assert f"  {'fake.good':<20}plugin good, priority 0, computes on host" in out
    assert "fake.other" not in out
    assert f"  {'host':<20}host, host memory" in out
    assert "\nfake.good: declines every case on every device" in out
    assert f"    {'attention':<18}declines every case" in out


def test_info_json(install: Install, capsys: pytest.CaptureFixture[str]) -> None:
    install(SOURCES)
    status, out, _ = run(capsys, "info", "--json")
    assert status == 0
    data = json.loads(out)
    assert {n: data["plugins"][n] for n in SOURCES} == {
        "good": "loaded", "broken": "failed", "other": "loaded"}
    [failure] = [f for f in data["failures"] if f["plugin"] == "broken"]
    assert failure["dist"] == "fake-dist" and failure["during"] == "load"
    assert failure["error"] == "ImportError: fake plugin needs a missing component"
    assert "Traceback" in failure["traceback"]
    good = next(lib for lib in data["libraries"] if lib["name"] == "fake.good")
    assert good["plugin"] == "good" and good["priority"] == 0
    assert "host" in good["computes_on"]
    assert set(good["statement"]["computes"]) == set(KERNEL_NAMES)
    assert {"name": "host", "model": "host", "shares_host_memory": True,
            "lost": None} in data["devices"]


def test_info_fails_where_a_named_plugin_fails(
    install: Install, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    install(SOURCES)
    monkeypatch.setenv("NXKERNEL_PLUGINS", "broken")
    status, out, err = run(capsys, "info")
    assert status == 2 and out == ""
    assert err.startswith("nxkernel info: plugin 'broken' (from fake-dist) failed at load")


@pytest.mark.parametrize("argv", [["info"], ["info", "--json"]])
def test_python_m_nxkernel_core_info(install: Install, argv: list[str]) -> None:
    root = install(SOURCES)
    env = {k: v for k, v in os.environ.items() if not k.startswith("NXKERNEL_")}
    env["PYTHONPATH"] = os.pathsep.join([str(root), str(ROOT)])
    done = subprocess.run([sys.executable, "-m", "nxkernel_core", *argv], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    if argv[-1] == "--json":
        assert json.loads(done.stdout)["plugins"]["broken"] == "failed"
    else:
        assert f"  {'good':<20}loaded\n" in done.stdout
        assert "fake.other: declines every case" in done.stdout


def test_no_command_prints_the_usage(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(capsys)
    assert status == 2 and out == "" and err.startswith("usage: nxkernel")


# ---- check -----------------------------------------------------------------------


def test_check_runs_the_conformance_kit_under_pytest(
    install: Install, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    install(SOURCES)
    calls: list[list[str]] = []

    def main(args: list[str]) -> int:
        calls.append(args)
        return 3

    monkeypatch.setattr(pytest, "main", main)
    status, _, _ = run(capsys, "check", "fake.good", "-x", "-k", "sum")
    assert status == 3
    assert calls == [["--pyargs", "nxkernel_core.conformance", "--nxkernel-library",
                      "fake.good", "-x", "-k", "sum"]]


def test_check_an_unknown_library(install: Install, capsys: pytest.CaptureFixture[str]) -> None:
    install(SOURCES)
    status, out, err = run(capsys, "check", "fake.godo")
    assert status == 2 and out == ""
    assert err.startswith("nxkernel check: no kernel library 'fake.godo' (did you mean"
                          " 'fake.good'?)")


def test_check_without_pytest(
    install: Install, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    install(SOURCES)
    monkeypatch.setitem(sys.modules, "pytest", None)
    status, _, err = run(capsys, "check", "fake.good")
    assert status == 2
    assert "runs under pytest, which is not installed" in err


# ---- bench -----------------------------------------------------------------------


def test_bench_without_benchmarks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cli, "_checkout", lambda: tmp_path)
    status, out, err = run(capsys, "bench")
    assert status == 2 and out == ""
    assert "the benchmarks come with a source checkout" in err


def test_bench_runs_the_checkouts_benchmarks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    package = tmp_path / "benchmarks"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "run.py").write_text(
        "ARGV = []\n\ndef main(argv):\n    ARGV.append(argv)\n    return 4\n")
    monkeypatch.setattr(cli, "_checkout", lambda: tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    for name in ("benchmarks", "benchmarks.run"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    try:
        status, _, _ = run(capsys, "bench", "nx.host", "--quick", "--json", "out.json")
        assert status == 4
        argv = sys.modules["benchmarks.run"].ARGV
        assert argv == [["nx.host", "--quick", "--json", "out.json"]]
    finally:
        for name in ("benchmarks.run", "benchmarks"):
            sys.modules.pop(name, None)

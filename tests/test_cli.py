"""The nxkernel command: info (text and JSON, in-process and as
``python -m nxkernel_core``), check, and bench (a checkout's benchmarks run
there as a module); demo is not a command."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

import nxkernel_core
from nxkernel_core import cli
from nxkernel_core.kernel import KERNEL_NAMES
from tests.fake_dist import BROKEN, LIBRARY, WRAPPED, Install, stand_in_plugins

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


def test_info_answers_first_with_a_table(
    install: Install, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The fake library computes on every host-addressable device; the emulated
    # CUDA devices are such devices, so the table is read without them.
    monkeypatch.delenv("NXKERNEL_CUDA_EMULATE", raising=False)
    install(SOURCES)
    monkeypatch.setenv("NXKERNEL_DISABLE", "other")
    status, out, err = run(capsys, "info")
    assert status == 0 and err == ""
    assert "NXKERNEL_DISABLE=other" in out
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines)
                  if line.split() == ["plugin", "library", "computes", "on"])
    col = lines[header].index("library")
    rows = {line[2:col].strip(): line[col:] for line in lines[header + 1:] if line.strip()}
    assert rows["broken"].split(None, 1)[1] == ("failed at load: ImportError: fake plugin needs a missing"
                                                " component")
    assert rows["other"].split(None, 1)[1] == "disabled (NXKERNEL_PLUGINS, NXKERNEL_DISABLE)"
    assert rows["good"].split() == ["fake.good", "host"]
    assert f"  {'host':<12}host, host memory" in out
    assert "nxkernel info --statements" in out
    assert "declines every case" not in out  # the statements come with --statements
    status, out, _ = run(capsys, "info", "--statements")
    assert "\nfake.good: declines every case on every device" in out
    assert f"    {'attention':<18}declines every case" in out


def test_info_says_in_one_line_why_a_library_computes_on_no_device(
    install: Install, capsys: pytest.CaptureFixture[str]
) -> None:
    install({"idle": WRAPPED.format(name="idle", priority=0, computes_on=False)
             + "\nLIBRARY.unavailable = 'no such accelerator is installed'\n"
             + "LIBRARY.notes = ('compiles with nothing',)\n"})
    status, out, _ = run(capsys, "info")
    assert status == 0
    [row] = [line for line in out.splitlines() if "fake.idle" in line]
    assert row.split(None, 2) == ["idle", "fake.idle", "no device: no such accelerator is installed"]
    following = out.splitlines()[out.splitlines().index(row) + 1]
    assert following.strip() == "compiles with nothing"
    status, out, _ = run(capsys, "info", "--json")
    [idle] = [lib for lib in json.loads(out)["libraries"] if lib["name"] == "fake.idle"]
    assert idle["unavailable"] == "no such accelerator is installed" and idle["computes_on"] == []
    assert idle["notes"] == ["compiles with nothing"]


def test_version_has_one_source(capsys: pytest.CaptureFixture[str]) -> None:
    import nxkernel_core
    from nxkernel_core import _version

    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"nxkernel {_version.__version__}\n"
    assert nxkernel_core.__version__ == _version.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+", nxkernel_core.__version__)
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" in pyproject["project"]["dynamic"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "nxkernel_core._version.__version__"}


def test_every_package_is_typed() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    data = pyproject["tool"]["setuptools"]["package-data"]
    for package in ("nxkernel_core", "nxkernel_host", "nxkernel_cuda"):
        assert (ROOT / package / "py.typed").is_file(), package
        assert "py.typed" in data[package], package


def test_info_json(install: Install, capsys: pytest.CaptureFixture[str]) -> None:
    install(SOURCES)
    status, out, _ = run(capsys, "info", "--json")
    assert status == 0
    data = json.loads(out)
    assert data["version"] == nxkernel_core.__version__
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
        assert "fake.good" in done.stdout and "failed at load: ImportError" in done.stdout


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
    assert calls == [[*cli._QUIET_REWRITE, "--pyargs", "nxkernel_core.conformance",
                      "--nxkernel-library", "fake.good", "-x", "-k", "sum"]]


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


# ---- what the package does not do ----------------------------------------------


def test_demo_is_not_a_command(capsys: pytest.CaptureFixture[str]) -> None:
    """The examples belong to a checkout: run as modules there."""
    with pytest.raises(SystemExit) as exit_:
        cli.main(["demo"])
    assert exit_.value.code == 2
    assert "invalid choice: 'demo'" in capsys.readouterr().err


def test_bench_outside_a_checkout_says_where_to_run_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli.main(["bench", "--quick"]) == 2
    err = capsys.readouterr().err
    assert "no benchmarks/run.py in" in err and "source checkout" in err


def test_bench_runs_the_checkouts_benchmarks_as_a_module_with_its_arguments(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stand-in checkout whose benchmarks.run writes its argv and exits 3:
    ``nxkernel bench`` runs it as a module there and returns its status."""
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "__init__.py").write_text("")
    (tmp_path / "benchmarks" / "run.py").write_text(
        "import pathlib, sys\n"
        "pathlib.Path('argv.txt').write_text(' '.join([__name__, *sys.argv[1:]]))\n"
        "sys.exit(3)\n")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["bench", "--quick", "host"]) == 3
    assert (tmp_path / "argv.txt").read_text() == "__main__ --quick host"


def test_the_packages_load_nothing_of_a_checkout_by_path() -> None:
    """No installed module loads a file by path or imports the checkout's
    benchmarks or examples."""
    root = Path(__file__).resolve().parent.parent
    for package in ("nxkernel_core", "nxkernel_host", "nxkernel_cuda"):
        for path in sorted((root / package).rglob("*.py")):
            text = path.read_text()
            if not any(w in text for w in ("benchmarks", "examples", "spec_from_file_location")):
                continue  # nothing to look at: parse only the modules that name them
            tree = ast.parse(text, str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.Attribute):
                    assert node.attr != "spec_from_file_location", path
                if isinstance(node, ast.ImportFrom) and node.module:
                    assert node.module.split(".")[0] not in ("benchmarks", "examples"), path
                if isinstance(node, ast.Import):
                    for alias in node.names:
                        assert alias.name.split(".")[0] not in ("benchmarks", "examples"), path

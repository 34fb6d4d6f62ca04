"""docs/writing-a-library.md: its library, installed as its pyproject says
(a stand-in distribution: nothing is installed), is listed by ``nxkernel
info`` before the host, answers the float64 sums the guide routes to it, and
passes the conformance kit's reduction laws through ``nxkernel check``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "writing-a-library.md"


def _blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", GUIDE.read_text(), re.S | re.M)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of a process that has the guide's plugin installed."""
    plugin = _blocks("python")[0]
    module = plugin.splitlines()[0].removeprefix("# ").removesuffix(".py")
    project = tomllib.loads(_blocks("toml")[0])["project"]
    points = project["entry-points"]["nxkernel.libraries"]
    assert points == {"fsum": module}  # the entry point names the guide's module
    root = tmp_path_factory.mktemp("guide")
    info = root / f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n")
    (info / "entry_points.txt").write_text(
        "[nxkernel.libraries]\n" + "".join(f"{k} = {v}\n" for k, v in points.items()))
    (root / f"{module}.py").write_text(plugin)
    env = {k: v for k, v in os.environ.items() if k not in ("NXKERNEL_PLUGINS", "NXKERNEL_DISABLE")}
    env["PYTHONPATH"] = os.pathsep.join([str(root), str(ROOT)])
    return env


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True,
                          timeout=900, cwd=ROOT)


def test_the_guides_library_is_short() -> None:
    plugin = _blocks("python")[0]
    body = plugin[plugin.index("class FsumLibrary"):plugin.index("@hookimpl")]
    assert len([ln for ln in body.splitlines() if ln.strip()]) <= 20


def test_info_lists_it_before_the_host(installed: dict[str, str]) -> None:
    done = _run(installed, "-m", "nxkernel_core", "info", "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    names = [lib["name"] for lib in data["libraries"]]
    assert "fsum" in names and names.index("fsum") < names.index("host")
    fsum = next(lib for lib in data["libraries"] if lib["name"] == "fsum")
    computes = fsum["statement"]["computes"]
    assert computes["reduce"] == "Sum of float64: the exact sum of each result's terms, rounded once."
    assert computes["map"] == "declines every case: fsum computes no map"


def test_the_guides_calls_are_routed_by_priority(installed: dict[str, str]) -> None:
    done = _run(installed, "-c", _blocks("python")[1])
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1.0", "3.0"]  # fsum's exact sum; the host's float32 sum


def test_nxkernel_check_passes_its_reduction_laws(installed: dict[str, str]) -> None:
    done = _run(installed, "-m", "nxkernel_core", "check", "fsum", "-p", "no:cacheprovider",
                "-k", "reduce")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.search(r"\d+ passed", done.stdout)


def test_the_guides_sum_is_exact_where_floats_are_subnormal_or_partials_overflow() -> None:
    """The guide's ``fsum`` against sums done in exact rationals: three of the
    smallest subnormal (a scaled sum would flush them to 0), a row whose
    partial sums overflow while its sum does not, and one whose sum does
    (rounded to ∞ as IEEE rounds it)."""
    from fractions import Fraction

    import numpy as np

    space: dict[str, object] = {}
    exec(_blocks("python")[0].split("class FsumLibrary")[0], space)
    fsum = space["fsum"]
    assert callable(fsum)
    tiny = np.nextafter(0.0, 1.0)
    rows = [np.array([tiny, tiny, tiny]), np.array([1e308, 1e308, -1e308, tiny]),
            np.array([-1.5e308, -1.5e308, 2.0**-1074])]
    expected = [float(3 * Fraction(tiny)), float(Fraction(1e308) + Fraction(tiny)), -np.inf]
    got = [fsum(r) for r in rows]
    assert [g.hex() for g in got] == [float(e).hex() for e in expected]

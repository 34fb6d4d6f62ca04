"""``.ci/array-api`` skips, with the reason, where the standard's suite is absent."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_ci_script_skips_without_the_suite(tmp_path: Path) -> None:
    repo = tmp_path / "checkout"
    (repo / ".ci").mkdir(parents=True)
    shutil.copy(ROOT / ".ci" / "array-api", repo / ".ci" / "array-api")
    r = subprocess.run(["bash", str(repo / ".ci" / "array-api")], capture_output=True, text=True,
                       timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("array-api: skipped: the suite is absent")

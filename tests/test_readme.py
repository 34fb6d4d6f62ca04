"""The README's environment table names every variable the packages read."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_environment_variable_is_in_the_readme_table() -> None:
    read: set[str] = set()
    for package in ("nxkernel_core", "nxkernel_host", "nxkernel_cuda"):
        for path in (ROOT / package).rglob("*"):
            if path.suffix in (".py", ".h", ".cpp", ".cuh", ".cu"):
                read.update(re.findall(r"\"(NXKERNEL_[A-Z_]+)\"", path.read_text()))
    assert {"NXKERNEL_CACHE", "NXKERNEL_THREADS", "NXKERNEL_CXX", "NXKERNEL_PLUGINS"} <= read
    table = set(re.findall(r"^\| `(NXKERNEL_[A-Z_]+)`", (ROOT / "README.md").read_text(), re.M))
    assert read - table == set(), "variables the code reads that the README's table lacks"
    assert table - read == set(), "variables in the README's table that no code reads"

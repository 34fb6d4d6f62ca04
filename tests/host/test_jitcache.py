"""``jitcache``: Numba's cached loops are dropped where any module of the
package, or a Numba setting that shapes compiled code, changed since they
were cached, so a loop never runs code inlined from an old version of a
module it calls, and are kept where nothing did.

The last test shows the hazard itself: a cached caller whose file did not
change keeps its callee's old code under Numba alone, and computes the
new one's value once ``refresh`` runs first."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nxkernel_host
from nxkernel_host import jitcache


def _package(root: Path) -> tuple[Path, Path]:
    """A package folder with two modules and a cache folder holding Numba's
    files of two functions and a ``.pyc`` (not Numba's)."""
    sources = root / "pkg"
    cache = sources / "__pycache__"
    cache.mkdir(parents=True)
    (sources / "a.py").write_text("A = 1\n")
    (sources / "b.py").write_text("B = 2\n")
    for name in ("a.f-3.py311.nbi", "a.f-3.py311.1.nbc", "b.g-7.py311.nbi", "a.cpython-311.pyc"):
        (cache / name).write_bytes(b"x")
    return sources, cache


def _names(cache: Path) -> set[str]:
    return {p.name for p in cache.iterdir()}


def test_first_refresh_drops_numba_files_and_keeps_a_stamp(tmp_path: Path) -> None:
    sources, cache = _package(tmp_path)
    assert jitcache.refresh(sources, cache)
    assert _names(cache) == {"a.cpython-311.pyc", jitcache.STAMP}
    assert (cache / jitcache.STAMP).read_text().strip() == jitcache.stamp(sources)


def test_unchanged_sources_keep_the_cache(tmp_path: Path) -> None:
    sources, cache = _package(tmp_path)
    jitcache.refresh(sources, cache)
    (cache / "b.g-7.py311.nbi").write_bytes(b"fresh")
    (cache / "b.g-7.py311.1.nbc").write_bytes(b"fresh")
    # Touching a module (the same bytes) changes nothing either.
    (sources / "a.py").write_text("A = 1\n")
    assert not jitcache.refresh(sources, cache)
    assert {"b.g-7.py311.nbi", "b.g-7.py311.1.nbc"} <= _names(cache)


def test_a_changed_added_or_removed_module_drops_every_cached_loop(tmp_path: Path) -> None:
    sources, cache = _package(tmp_path)
    for change in (lambda: (sources / "b.py").write_text("B = 3\n"),
                   lambda: (sources / "c.py").write_text("C = 4\n"),
                   lambda: (sources / "a.py").unlink()):
        jitcache.refresh(sources, cache)
        (cache / "a.f-3.py311.nbi").write_bytes(b"cached")
        before = (cache / jitcache.STAMP).read_text()
        change()
        assert jitcache.refresh(sources, cache)
        assert "a.f-3.py311.nbi" not in _names(cache)
        assert (cache / jitcache.STAMP).read_text() != before


def test_other_numba_settings_drop_every_cached_loop(tmp_path: Path) -> None:
    sources, cache = _package(tmp_path)
    plain = jitcache.settings()
    assert "ENABLE_PROFILING=0" in plain
    jitcache.refresh(sources, cache, plain)
    (cache / "a.f-3.py311.nbi").write_bytes(b"cached")
    profiling = plain.replace("ENABLE_PROFILING=0", "ENABLE_PROFILING=1")
    assert jitcache.refresh(sources, cache, profiling)
    assert "a.f-3.py311.nbi" not in _names(cache)
    (cache / "a.f-3.py311.nbi").write_bytes(b"cached")
    assert jitcache.refresh(sources, cache, plain)  # and back
    assert not jitcache.refresh(sources, cache, plain)


def test_no_cache_folder_is_left_alone(tmp_path: Path) -> None:
    sources, _ = _package(tmp_path)
    missing = tmp_path / "nowhere"
    assert not jitcache.refresh(sources, missing)
    assert not missing.exists()


def test_the_package_import_keeps_the_stamp_of_its_sources() -> None:
    # Finding the folder makes it (Numba's locator), so the import's guard
    # always found one and kept its stamp there.
    folder = jitcache._cache_folder()
    kept = (folder / jitcache.STAMP).read_text().strip()
    assert kept == jitcache.stamp(Path(nxkernel_host.__file__).parent, jitcache.settings())


_CALLEE = """
from numba import njit

@njit(inline="always")
def step(x):
    return x + {k}
"""

_CALLER = """
from numba import njit
from .callee import step

@njit(cache=True)
def run(x):
    return step(x)
"""

_MAIN = """
import sys
from pathlib import Path
sys.path.insert(0, {root!r})
if {guarded}:
    from nxkernel_host import jitcache
    jitcache.refresh(Path({root!r}) / "hazard", Path({root!r}) / "hazard" / "__pycache__")
from hazard.caller import run
print(run(1))
"""


def _run(root: Path, guarded: bool) -> int:
    code = _MAIN.format(root=str(root), guarded=guarded)
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}  # the in-tree cache
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, env=env)
    return int(done.stdout.strip())


def test_a_caller_cached_before_its_callee_changed(tmp_path: Path) -> None:
    package = tmp_path / "hazard"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "caller.py").write_text(_CALLER)
    for guarded in (False, True):
        (package / "callee.py").write_text(_CALLEE.format(k=1))
        assert _run(tmp_path, guarded) == 2  # compiled and cached
        (package / "callee.py").write_text(_CALLEE.format(k=10))
        # Numba alone loads the caller's cached code, the old callee inlined;
        # with the guard first, the caller is compiled again.
        got = _run(tmp_path, guarded)
        assert got == (11 if guarded else 2), (
            f"guarded={guarded}: {got}" + ("" if guarded else
                                           " (Numba now tracks callees: the guard may go)"))

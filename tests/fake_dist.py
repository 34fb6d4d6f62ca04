"""Stand-in distributions for discovery tests: a ``*.dist-info`` with entry
points of ``nxkernel.libraries`` and the plugin modules beside it, in a
temporary directory put on ``sys.path``. Nothing is installed.

Each plugin ``NAME`` is the module ``nxkfake_NAME``; :func:`fake_plugins`
removes those modules from ``sys.modules`` and forgets the cached discovery
when the test ends.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import textwrap
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest

from nxkernel_core import plugins, rig

PREFIX = "nxkfake_"

#: A plugin bringing the declining library ``fake.NAME`` (format with name=).
LIBRARY = """
from nxkernel_core.kernel import declining_library
from nxkernel_core.plugins import hookimpl

LIBRARY = declining_library("fake.{name}")

@hookimpl
def nxkernel_libraries():
    return [LIBRARY]
"""

#: A plugin whose import fails.
BROKEN = 'raise ImportError("fake plugin needs a missing component")\n'

#: A library ``fake.NAME`` of priority PRIORITY whose computes_on is
#: COMPUTES_ON(device) (format with name=, priority=, computes_on=).
WRAPPED = """
from nxkernel_core.kernel import declining_library
from nxkernel_core.plugins import hookimpl

class Wrapped:
    priority = {priority}

    def __init__(self, inner):
        self._inner = inner

    def __getattr__(self, member):
        return getattr(self._inner, member)

    def computes_on(self, device):
        return {computes_on}

LIBRARY = Wrapped(declining_library("fake.{name}"))

@hookimpl
def nxkernel_libraries():
    return [LIBRARY]
"""

Install = Callable[..., Path]


def write_dist(root: Path, dist: str, sources: Mapping[str, str]) -> None:
    """Write distribution ``dist`` 1.0 under ``root``: an entry point per plugin
    name of ``sources``, each the module ``nxkfake_NAME`` holding its source."""
    info = root / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    points = "".join(f"{name} = {PREFIX}{name}\n" for name in sources)
    (info / "entry_points.txt").write_text(f"[nxkernel.libraries]\n{points}")
    for name, source in sources.items():
        (root / f"{PREFIX}{name}.py").write_text(textwrap.dedent(source))


@contextlib.contextmanager
def stand_in_plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Install]:
    """Yield ``install(sources, dist="fake-dist")``, which writes a stand-in
    distribution under ``tmp_path``, puts it on ``sys.path`` and returns its
    directory. Inside, no discovery is cached and neither NXKERNEL_PLUGINS nor
    NXKERNEL_DISABLE is set (``monkeypatch`` restores them)."""
    monkeypatch.delenv("NXKERNEL_PLUGINS", raising=False)
    monkeypatch.delenv("NXKERNEL_DISABLE", raising=False)
    monkeypatch.setattr(plugins, "_registry", None)
    before = set(rig.devices())

    def install(sources: Mapping[str, str], dist: str = "fake-dist") -> Path:
        root = tmp_path / dist
        root.mkdir()
        write_dist(root, dist, sources)
        monkeypatch.syspath_prepend(str(root))
        importlib.invalidate_caches()
        return root

    yield install
    for name in [m for m in sys.modules if m.startswith(PREFIX)]:
        del sys.modules[name]
    for device in set(rig.devices()) - before:
        device.close()

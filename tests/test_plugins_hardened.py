"""Plugins cannot take the program down: any exception but KeyboardInterrupt
from a plugin is a recorded failure, warned of once; a kernel that raises or
answers other than an Answer is an error naming the nx function, the library
and the kernel; the built-in names stay the built-in plugins'."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from nxkernel_core import nx, plugins
from nxkernel_core.kernel import KernelError
from nxkernel_core.plugins import PluginWarning, Status, discover
from tests.fake_dist import LIBRARY, Install, stand_in_plugins


@pytest.fixture
def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Install]:
    monkeypatch.setattr(plugins, "_reported", set())
    with stand_in_plugins(tmp_path, monkeypatch) as install:
        yield install
    plugins._registry = None  # the next test discovers the real plugins again


EXITS_ON_IMPORT = "import sys\nsys.exit(3)\n"

EXITS_IN_HOOK = """
from nxkernel_core.plugins import hookimpl

@hookimpl
def nxkernel_libraries():
    raise SystemExit("bye")
"""

OWN_BASE_EXCEPTION = """
class Odd(BaseException):
    pass

raise Odd("not an Exception")
"""

#: A library above the host's priority whose map answers ANSWER (or raises).
BAD_KERNEL = """
from nxkernel_core.kernel import declining_library
from nxkernel_core.plugins import hookimpl

class Bad:
    priority = 100

    def __init__(self, inner):
        self._inner = inner

    def __getattr__(self, member):
        return getattr(self._inner, member)

    def computes_on(self, device):
        return device.name == "host"

    def map(self, spec, dsts, operands):
        {body}

LIBRARY = Bad(declining_library("fake.bad"))

@hookimpl
def nxkernel_libraries():
    return [LIBRARY]
"""

#: A plugin bringing a library that declines everything, named NAME.
NAMED = """
from nxkernel_core.kernel import declining_library
from nxkernel_core.plugins import hookimpl

@hookimpl
def nxkernel_libraries():
    return [declining_library("{name}")]
"""


@pytest.mark.parametrize(("source", "error", "during"), [
    (EXITS_ON_IMPORT, SystemExit, "load"),
    (EXITS_IN_HOOK, SystemExit, "nxkernel_libraries"),
    (OWN_BASE_EXCEPTION, BaseException, "load"),
], ids=["sys.exit-on-import", "sys.exit-in-hook", "own-BaseException"])
def test_a_plugin_that_exits_is_a_failure_not_the_end(
    install: Install, source: str, error: type[BaseException], during: str
) -> None:
    install({"good": LIBRARY.format(name="good"), "quits": source})
    with pytest.warns(PluginWarning, match=r"plugin 'quits' \(from fake-dist\) failed at " + during):
        registry = discover(refresh=True)
    assert registry.plugins["quits"] is Status.FAILED and registry.plugins["good"] is Status.LOADED
    [failure] = [f for f in registry.failures if f.name == "quits"]
    assert isinstance(failure.error, error) and failure.during == during
    assert nx.to_numpy(nx.add(np.float32([1, 2]), np.float32([3, 4]))).tolist() == [4, 6]


def test_keyboard_interrupt_goes_through(install: Install) -> None:
    install({"ctrl_c": "raise KeyboardInterrupt\n"})
    with pytest.raises(KeyboardInterrupt):
        discover(refresh=True)


def test_a_failure_is_warned_of_once_and_logged(install: Install, caplog: pytest.LogCaptureFixture) -> None:
    install({"quits": EXITS_ON_IMPORT})
    with caplog.at_level(logging.WARNING, logger="nxkernel.plugins"), \
            warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        discover(refresh=True)
        discover(refresh=True)
    assert [str(w.message) for w in seen if w.category is PluginWarning] == [
        "nxkernel plugin 'quits' (from fake-dist) failed at load and is left out: SystemExit: 3"]
    assert "plugin 'quits' (from fake-dist) failed at load: SystemExit: 3" in [
        r.getMessage() for r in caplog.records if r.name == "nxkernel.plugins"]


@pytest.mark.parametrize(("body", "what"), [
    ("return None", "answered None, not an Answer"),
    ("return 'done'", "answered 'done', not an Answer"),
    ("raise RuntimeError('half way')", "raised RuntimeError: half way"),
], ids=["None", "str", "raises"])
def test_a_kernel_that_breaks_the_protocol_is_named(install: Install, body: str, what: str) -> None:
    install({"bad": BAD_KERNEL.format(body=body)})
    discover(refresh=True)
    with pytest.raises(KernelError) as info:
        nx.add(np.float32([1, 2]), np.float32([3, 4]))
    e = info.value
    assert str(e) == f"nx.add: kernel 'map' of library 'fake.bad' {what}"
    assert (e.fn, e.library, e.kernel) == ("nx.add", "fake.bad", "map")
    if body.startswith("raise"):
        assert isinstance(e.__cause__, RuntimeError) and str(e.__cause__) == "half way"


@pytest.mark.parametrize("name", ["host", "nx.cuda"])
def test_a_built_in_library_name_cannot_be_taken(install: Install, name: str) -> None:
    install({"aaa": NAMED.format(name=name)})
    with pytest.warns(PluginWarning, match="plugin 'aaa'"):
        registry = discover(refresh=True)
    [failure] = [f for f in registry.failures if f.name == "aaa"]
    builtin = "host" if name == "host" else "cuda"
    assert str(failure.error) == (
        f"library {name!r} is built in (brought by the built-in plugin {builtin!r},"
        f" {plugins.BUILTIN[builtin][0]}): no other plugin may bring it")
    assert registry.plugins[builtin] is Status.LOADED and registry.provider(name) == builtin
    assert nx.to_numpy(nx.add(np.float32([1]), np.float32([2]))).tolist() == [3]


def test_a_built_in_plugin_name_cannot_be_taken(install: Install) -> None:
    install({"host": NAMED.format(name="fake.host")}, dist="squatter")
    with pytest.warns(PluginWarning, match="plugin 'host' .from squatter."):
        registry = discover(refresh=True)
    assert registry.plugins["host"] is Status.LOADED and registry.provider("host") == "host"
    [failure] = [f for f in registry.failures if f.name == "host"]
    assert str(failure.error) == ("plugin name 'host' is declared twice: the built-in plugin"
                                  " (nxkernel_host.plugin) is kept, nxkfake_host (from squatter) is left out")
    assert nx.to_numpy(nx.add(np.float32([1]), np.float32([2]))).tolist() == [3]

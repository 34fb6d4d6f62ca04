"""Discovery: entry points loaded one by one, failures recorded, the
environment's choices, priorities, devices; stand-in distributions only."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pluggy
import pytest

from nxkernel_core import plugins, rig
from nxkernel_core.answer import Answer
from nxkernel_core.kernel import Call, Library
from nxkernel_core.plugins import PluginError, Status, discover
from tests.fake_dist import BROKEN, LIBRARY, WRAPPED, Install, stand_in_plugins


@pytest.fixture
def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Install]:
    with stand_in_plugins(tmp_path, monkeypatch) as install:
        yield install


GOOD_BROKEN_OTHER = {
    "good": LIBRARY.format(name="good"),
    "broken": BROKEN,
    "other": LIBRARY.format(name="other"),
}


def fake_names(registry: plugins.Registry) -> list[str]:
    """The registry's libraries from stand-in plugins, in order."""
    return [lib.name for lib in registry.libraries() if lib.name.startswith("fake.")]


def test_a_broken_plugin_is_recorded_and_stops_no_other(install: Install) -> None:
    install(GOOD_BROKEN_OTHER)
    registry = discover(refresh=True)
    assert {n: registry.plugins[n] for n in GOOD_BROKEN_OTHER} == {
        "good": Status.LOADED, "broken": Status.FAILED, "other": Status.LOADED}
    [failure] = [f for f in registry.failures if f.name == "broken"]
    assert failure.dist == "fake-dist" and failure.during == "load"
    assert isinstance(failure.error, ImportError)
    assert failure.reason == "ImportError: fake plugin needs a missing component"
    assert "nxkfake_broken" in failure.traceback
    assert fake_names(registry) == ["fake.good", "fake.other"]


def test_a_third_party_library_is_found_and_called(install: Install) -> None:
    install({"third": LIBRARY.format(name="third")}, dist="third-party-kernels")
    registry = discover(refresh=True)
    lib = registry.library("fake.third")
    assert lib is sys.modules["nxkfake_third"].LIBRARY
    assert isinstance(lib, Library) and lib in registry.libraries()
    assert registry.provider("fake.third") == "third"
    assert lib.sort(object(), [], []) is Answer.DECLINED
    assert lib.statement.declines(Call("sort", object(), (), ())) == "fake.third declines every case"


def test_an_unknown_library_names_the_closest(install: Install) -> None:
    install(GOOD_BROKEN_OTHER)
    with pytest.raises(LookupError, match=r"no kernel library 'fake.god' \(did you mean 'fake.good'"):
        discover(refresh=True).library("fake.god")


def test_priority_orders_libraries_then_plugin_name(install: Install) -> None:
    install({
        "a_low": WRAPPED.format(name="a_low", priority=0, computes_on=True),
        "b_high": WRAPPED.format(name="b_high", priority=5, computes_on=True),
        "c_low": WRAPPED.format(name="c_low", priority=0, computes_on=True),
        "d_neg": WRAPPED.format(name="d_neg", priority=-1, computes_on=True),
    })
    assert fake_names(discover(refresh=True)) == [
        "fake.b_high", "fake.a_low", "fake.c_low", "fake.d_neg"]


def test_a_priority_that_is_not_an_int_fails_its_plugin(install: Install) -> None:
    install({"odd": WRAPPED.format(name="odd", priority="'high'", computes_on=True)})
    registry = discover(refresh=True)
    assert registry.plugins["odd"] is Status.FAILED
    [failure] = [f for f in registry.failures if f.name == "odd"]
    assert "priority 'high', not an int" in failure.reason


def test_discovery_is_cached_until_refreshed(install: Install) -> None:
    install(GOOD_BROKEN_OTHER)
    first = discover()
    assert discover() is first
    assert discover(refresh=True) is not first


def test_nxkernel_plugins_loads_only_those(
    install: Install, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(GOOD_BROKEN_OTHER)
    monkeypatch.setenv("NXKERNEL_PLUGINS", " good ,")
    registry = discover(refresh=True)
    assert {n: registry.plugins[n] for n in GOOD_BROKEN_OTHER} == {
        "good": Status.LOADED, "broken": Status.DISABLED, "other": Status.DISABLED}
    assert registry.failures == ()
    assert fake_names(registry) == ["fake.good"]


def test_a_named_plugin_that_fails_raises_with_a_remedy(
    install: Install, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(GOOD_BROKEN_OTHER)
    monkeypatch.setenv("NXKERNEL_PLUGINS", "good,broken")
    with pytest.raises(PluginError, match=r"plugin 'broken' \(from fake-dist\) failed at load:"
                       r" ImportError: fake plugin needs a missing component") as raised:
        discover(refresh=True)
    assert "NXKERNEL_DISABLE" in str(raised.value)
    assert isinstance(raised.value.__cause__, ImportError)
    monkeypatch.setenv("NXKERNEL_PLUGINS", "good")
    assert fake_names(discover()) == ["fake.good"]  # the failure was not cached


def test_a_named_plugin_that_does_not_exist_raises_with_the_names(
    install: Install, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(GOOD_BROKEN_OTHER)
    monkeypatch.setenv("NXKERNEL_PLUGINS", "goood")
    with pytest.raises(PluginError,
                       match=r"'goood'.*did you mean 'good'.*the plugins are broken, .*good, .*other"):
        discover(refresh=True)


def test_nxkernel_disable_skips_and_wins(
    install: Install, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(GOOD_BROKEN_OTHER)
    monkeypatch.setenv("NXKERNEL_DISABLE", "other,broken,absent")
    registry = discover(refresh=True)
    assert {n: registry.plugins[n] for n in GOOD_BROKEN_OTHER} == {
        "good": Status.LOADED, "broken": Status.DISABLED, "other": Status.DISABLED}
    assert [f for f in registry.failures if f.name in GOOD_BROKEN_OTHER] == []
    assert fake_names(registry) == ["fake.good"]
    monkeypatch.setenv("NXKERNEL_PLUGINS", "broken")
    assert discover(refresh=True).plugins["broken"] is Status.DISABLED


HOOK_RAISES = """
from nxkernel_core.plugins import hookimpl

@hookimpl
def nxkernel_libraries():
    raise RuntimeError("no driver")
"""
BAD_SIGNATURE = """
from nxkernel_core.plugins import hookimpl

@hookimpl
def nxkernel_libraries(config):
    return []
"""
UNKNOWN_HOOK = """
from nxkernel_core.plugins import hookimpl

@hookimpl
def nxkernel_library():
    return []
"""
NOT_A_LIBRARY = """
from nxkernel_core.plugins import hookimpl

@hookimpl
def nxkernel_libraries():
    return [object()]
"""
NOT_A_LIST = """
from nxkernel_core.kernel import declining_library
from nxkernel_core.plugins import hookimpl

@hookimpl
def nxkernel_libraries():
    return declining_library("fake.bad")
"""
REPEATS_GOOD = """
from nxkernel_core.kernel import declining_library
from nxkernel_core.plugins import hookimpl

@hookimpl
def nxkernel_libraries():
    return [declining_library("fake.zz"), declining_library("fake.good")]
"""
NOT_A_DEVICE = """
from nxkernel_core.kernel import declining_library
from nxkernel_core.plugins import hookimpl

@hookimpl
def nxkernel_libraries():
    return [declining_library("fake.bad")]

@hookimpl
def nxkernel_devices():
    return ["cuda:0"]
"""


@pytest.mark.parametrize(("source", "during", "error", "match"), [
    (HOOK_RAISES, "nxkernel_libraries", RuntimeError, "no driver"),
    (BAD_SIGNATURE, "register", pluggy.PluginValidationError, "config"),
    (UNKNOWN_HOOK, "register", pluggy.PluginValidationError,
     "'nxkernel_library', which is not an nxkernel hook (did you mean 'nxkernel_libraries'?)"),
    (NOT_A_LIBRARY, "libraries", TypeError, "not a kernel library: lacks name"),
    (NOT_A_LIST, "nxkernel_libraries", TypeError, "returned a _DecliningLibrary, not a list"),
    (REPEATS_GOOD, "libraries", TypeError, "'fake.good' is also brought by plugin 'good'"),
    (NOT_A_DEVICE, "nxkernel_devices", TypeError, "returned a str, not a Rig"),
], ids=["hook-raises", "bad-signature", "unknown-hook", "not-a-library", "not-a-list",
        "repeated-name", "not-a-device"])
def test_a_failing_plugin_brings_nothing_and_stops_no_other(
    install: Install, source: str, during: str, error: type[Exception], match: str
) -> None:
    install({"good": LIBRARY.format(name="good"), "zbad": source})
    registry = discover(refresh=True)
    assert registry.plugins["good"] is Status.LOADED
    assert registry.plugins["zbad"] is Status.FAILED
    [failure] = [f for f in registry.failures if f.name == "zbad"]
    assert failure.during == during and isinstance(failure.error, error)
    assert match in str(failure.error)
    assert fake_names(registry) == ["fake.good"]


def test_a_library_whose_computes_on_raises_is_skipped_and_recorded(
    install: Install,
) -> None:
    install({
        "good": LIBRARY.format(name="good"),
        "flaky": WRAPPED.format(name="flaky", priority=0, computes_on="1 / 0"),
        "mem": WRAPPED.format(name="mem", priority=0,
                              computes_on="device.model == 'memory'"),
    })
    registry = discover(refresh=True)
    libs = registry.libraries_for(rig.host)
    assert [lib.name for lib in libs if lib.name.startswith("fake.")] == ["fake.good"]
    assert registry.libraries_for(rig.host) is libs  # resolved once per device
    [failure] = [f for f in registry.failures if f.name == "flaky"]
    assert failure.during == "computes_on(host)"
    assert isinstance(failure.error, ZeroDivisionError)
    assert registry.plugins["flaky"] is Status.LOADED
    device = rig.memory_device("fake-mem")
    assert [lib.name for lib in registry.libraries_for(device)
            if lib.name.startswith("fake.")] == ["fake.good", "fake.mem"]


DEVICES = """
from nxkernel_core import rig
from nxkernel_core.kernel import declining_library
from nxkernel_core.plugins import hookimpl

DEVICE = rig.Rig("fake:0", model="fake", shares_host_memory=False)

@hookimpl
def nxkernel_devices():
    return [DEVICE]

@hookimpl
def nxkernel_libraries():
    return [declining_library("fake.dev")]
"""


def test_plugin_devices_are_registered_once(install: Install) -> None:
    install({"dev": DEVICES})
    registry = discover(refresh=True)
    device = sys.modules["nxkfake_dev"].DEVICE
    assert rig.device("fake:0") is device
    assert device in registry.devices() and rig.host in registry.devices()
    assert discover(refresh=True).plugins["dev"] is Status.LOADED  # not registered twice

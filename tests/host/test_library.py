"""The host library as a whole: it keeps the protocol and states every kernel."""

from __future__ import annotations

from nxkernel_core import rig
from nxkernel_core.kernel import KERNEL_NAMES, check_library
from nxkernel_core.plugins import discover
from nxkernel_host import library


def test_the_host_library_keeps_the_protocol() -> None:
    assert check_library(library) is library
    assert set(library.statement.computes) == set(KERNEL_NAMES)
    assert library.statement.concurrent


def test_it_is_discovered_through_its_entry_point() -> None:
    assert discover().library("host") is library


def test_it_computes_on_host_memory_devices_only() -> None:
    assert library.computes_on(rig.host)
    dev = rig.memory_device("host-lib-memory")
    try:
        assert library.computes_on(dev)
    finally:
        dev.close()
    assert not library.computes_on(rig.Rig("elsewhere", model="gpu", shares_host_memory=False))

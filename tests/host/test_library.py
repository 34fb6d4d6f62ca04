"""The host library as a whole: it keeps the protocol and states every kernel."""

from __future__ import annotations

import numpy as np

from nxkernel_core import rig
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_core.kernel import KERNEL_NAMES, check_library
from nxkernel_core.library import Library
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


def test_it_is_built_on_the_library_base_with_a_hook_per_kernel() -> None:
    assert isinstance(library, Library)
    for k in KERNEL_NAMES:
        assert callable(getattr(type(library), f"_{k}", None)), k
        assert "computes no" not in library.statement.computes[k].prose
    # The host states declines of contract alone.
    assert [k for k in KERNEL_NAMES if hasattr(type(library), f"_declines_{k}")] == ["contract"]


def test_a_misfit_is_refused_by_the_base_before_the_hook_runs() -> None:
    x = Array.from_numpy(np.ones((2, 3), np.float32))
    dst = Array.from_numpy(np.full((2, 2), 7.0, np.float32))
    spec = S.Fold((2, 3), S.Pad((0, 0), (0, 0), (0, 0)))
    assert library.fold(spec, [dst], [x]) is Answer.SHAPE_MISMATCH
    assert np.array_equal(dst.to_numpy(), np.full((2, 2), 7.0, np.float32))

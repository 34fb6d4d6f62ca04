"""Fixtures of the CUDA library's tests: the emulated device and the probe kernels.

Every test here runs without a GPU but those marked ``cuda``, and builds its
emulated kernels with the memory checker (``NXKERNEL_EMU_MEMCHECK=0`` not);
a test taking the ``dev`` fixture runs on ``cuda-emu`` and, marked ``cuda``,
on ``cuda:0``. Built kernels
are cached on disk (``$NXKERNEL_CACHE``, else ``~/.cache/nxkernel``), so only
a first run pays for g++ and NVRTC.
"""

from __future__ import annotations

import functools
import os

import pytest

from nxkernel_cuda import device
from nxkernel_cuda.build import Source
from nxkernel_cuda.device import CudaRig, EmuDevice
from nxkernel_cuda.emulator import driver

from . import probe


@pytest.fixture(autouse=True)
def _memory_checker(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every emulated kernel these tests build carries the emulator's memory
    checker, as a GPU faults (emulator/README.md: its cost, and that every
    test here and the kit pass under it), unless ``NXKERNEL_EMU_MEMCHECK``
    is set (``0`` turns it off)."""
    if os.environ.get(driver.MEMCHECK_VARIABLE) is None:
        monkeypatch.setenv(driver.MEMCHECK_VARIABLE, "1")


@pytest.fixture(scope="session")
def probe_source() -> Source:
    """``kernels/probe.cu`` with every probe kernel."""
    return probe.probe_source()


@pytest.fixture
def emu() -> EmuDevice:
    """A fresh emulated device of its own (not registered), so that a test
    that loses it loses no other test's."""
    return EmuDevice(0)


@functools.cache
def _gpu() -> CudaRig:
    """cuda:0, opened once for the session."""
    ok, why = device.availability()
    if not ok:
        pytest.skip(f"CUDA is not usable: {why}")
    return device.CudaDevice(0)


@pytest.fixture(params=[pytest.param("cuda-emu"), pytest.param("cuda", marks=pytest.mark.cuda)])
def dev(request: pytest.FixtureRequest) -> CudaRig:
    """The device a kernel test runs on: a fresh emulated device, and cuda:0
    where a GPU is present (the ``cuda`` marker skips it elsewhere)."""
    if request.param == "cuda":
        return _gpu()
    return EmuDevice(0)

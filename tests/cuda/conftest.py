"""Fixtures of the CUDA library's tests: the emulated device and the probe kernels.

Every test here runs without a GPU but those marked ``cuda``, and builds its
emulated kernels with the memory checker (``tests/conftest.py``); a test
taking the ``dev`` fixture runs on ``cuda-emu`` and, marked ``cuda``, on
``cuda:0``. Built kernels are cached on disk (``$NXKERNEL_CACHE``, else
``~/.cache/nxkernel``), so only a first run pays for g++ and NVRTC.
"""

from __future__ import annotations

import functools

import pytest

from nxkernel_cuda import device
from nxkernel_cuda.build import Source
from nxkernel_cuda.device import CudaRig, EmuDevice

from . import probe


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

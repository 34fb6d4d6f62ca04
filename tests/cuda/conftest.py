"""Fixtures of the CUDA library's tests: the emulated device and the probe kernels.

Every test here runs without a GPU but those marked ``cuda``. Built kernels
are cached on disk (``$NXKERNEL_CACHE``, else ``~/.cache/nxkernel``), so only
a first run pays for g++ and NVRTC.
"""

from __future__ import annotations

import pytest

from nxkernel_cuda.build import Source
from nxkernel_cuda.device import EmuDevice

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

"""The test session's settings.

Every kernel the emulated CUDA device builds in this session (and in the
processes the tests start) carries the emulator's memory checker, so an access
a GPU would fault on fails the test that makes it (nxkernel_cuda/emulator/
README.md: its cost, and that the suite passes under it); one setting for the
whole session also builds each emulated source once, not once per variant.
``NXKERNEL_EMU_MEMCHECK=0`` in the environment turns it off.
"""

from __future__ import annotations

import os

from nxkernel_cuda.emulator import driver

os.environ.setdefault(driver.MEMCHECK_VARIABLE, "1")

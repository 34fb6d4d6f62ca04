"""The opt-in long sweeps of the host's tests: ``sweep`` marks a test that
runs only with ``NXKERNEL_SWEEP=1`` (minutes; the default run and CI skip it,
saying how to run it)."""

from __future__ import annotations

import os

import pytest

__all__ = ["sweep"]

sweep = pytest.mark.skipif(os.environ.get("NXKERNEL_SWEEP", "") != "1",
                           reason="a sweep of minutes: set NXKERNEL_SWEEP=1")

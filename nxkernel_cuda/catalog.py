"""Every CUDA source the library launches, with every instantiation.

Rule: a kernel family adds its sources here; CI compiles everything
:func:`sources` lists for each of ``build.CI_ARCHES`` (and for the emulator),
and checks that every ``.cu`` file of ``kernels/`` is listed, so no kernel the
library can launch goes uncompiled.
"""

from __future__ import annotations

from . import copy, lane_sum
from .build import Source

__all__ = ["sources"]


def sources() -> tuple[Source, ...]:
    """The sources of every kernel family."""
    return (lane_sum.source(), copy.source())

"""Every CUDA source the library launches, with every instantiation.

Rule: a kernel family adds its sources here; CI compiles everything
:func:`sources` lists for each of ``build.CI_ARCHES`` (and for the emulator),
and checks that every ``.cu`` file of ``kernels/`` is listed, so no kernel the
library can launch goes uncompiled.
"""

from __future__ import annotations

from . import attention, contraction, folds, fourier, matrices, moves, reductions, statistics
from .build import Source

__all__ = ["sources"]


def sources() -> tuple[Source, ...]:
    """The sources of every kernel family that are not generated per program
    (the map, reductions and attention sources are: tests/cuda compiles those the tests
    draw for ``build.CI_ARCHES``)."""
    return (
        moves.source(),
        reductions.arrays_source(),
        statistics.source(),
        *contraction.sources(),
        folds.source(),
        fourier.source(),
        attention.combine_source(),
        matrices.source(),
    )

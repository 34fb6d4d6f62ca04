"""Whether a whole call fits its kernel: each kernel's fit check.

Each library checks that a call fits before it declines or claims anything
(Nx_kernel: "A call fits its kernel when its operands and destinations are as
many as the kernel's doc states, of the dtypes it takes and of the shapes it
and Shape state"). Every kernel's record (:mod:`nxkernel_core.kernels`)
holds its fit check, in the contract's order: counts (``BAD_ARITY``), then
destination layouts (``BAD_LAYOUT``, fft and the routines), dtypes
(``WRONG_DTYPE``), shapes (``SHAPE_MISMATCH``); attention checks its shapes
first, since its program's rule reads the loop's rank.

* ``misfit(spec, dsts, operands)``: any kernel's refusal of a call that does
  not fit, or None where it fits; ``*_misfit`` the same for one family.
* ``fft_dtype`` and ``routine_dtypes`` give the destinations' dtypes from the
  operands' dtype.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .kernels.attention import attention_misfit
from .kernels.elementwise import map_misfit
from .kernels.fourier import fft_dtype, fft_misfit
from .kernels.loads import loop_rank
from .kernels.matrices import ROUTINE_CONVENTIONS, routine_dtypes, routine_misfit
from .kernels.moves import move_misfit
from .kernels.reductions import fold_misfit, reduce_misfit
from .kernels.registry import kernel

if TYPE_CHECKING:
    from .answer import Answer
    from .array import Array

__all__ = ["ROUTINE_CONVENTIONS", "attention_misfit", "fft_dtype", "fft_misfit", "fold_misfit",
           "loop_rank", "map_misfit", "misfit", "move_misfit", "reduce_misfit", "routine_dtypes",
           "routine_misfit"]


def misfit(spec: Any, dsts: Sequence[Array], operands: Sequence[Array]) -> Answer | None:
    """The refusal of a call of ``spec`` that does not fit, by its kernel's
    record, or None where it fits."""
    return kernel(spec.kernel).fit(spec, dsts, operands)

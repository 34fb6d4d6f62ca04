"""The shapes of every kernel's destinations, and the refusal rules of loops.

One function per kernel, named as the kernel, takes the kernel's spec and its
operands' shapes, in the order the spec's class documents, and gives its
destinations' shapes in order, or ``Error(reason)`` where the operands'
shapes or the attributes do not fit (see :mod:`nxkernel_core.kernels.record`).
The refusal rules ``map_refusal``, ``reduce_refusal``, ``scan_refusal``,
``attention_refusal``, ``fold_refusal`` and ``contract_refusal`` read the
dtypes of a call. Each is defined with its kernel in its family module under
:mod:`nxkernel_core.kernels`; this module gathers them.
"""

from __future__ import annotations

from .kernels.attention import attention, attention_refusal
from .kernels.contraction import contract, contract_refusal
from .kernels.elementwise import map, map_refusal
from .kernels.fourier import fft
from .kernels.loads import padded
from .kernels.matrices import cholesky, eig, eigh, lu, qr, solve_triangular, svd
from .kernels.moves import assemble, gather, numbering, range_gather, scatter, sort
from .kernels.record import MAX_NUMEL, Error, Refusal, Shape, Shapes
from .kernels.reductions import (
    carry,
    fold,
    fold_refusal,
    reduce,
    reduce_refusal,
    scan,
    scan_refusal,
)

__all__ = [
    "MAX_NUMEL",
    "Error",
    "Refusal",
    "Shape",
    "Shapes",
    "assemble",
    "attention",
    "attention_refusal",
    "carry",
    "cholesky",
    "contract",
    "contract_refusal",
    "eig",
    "eigh",
    "fft",
    "fold",
    "fold_refusal",
    "gather",
    "lu",
    "map",
    "map_refusal",
    "numbering",
    "padded",
    "qr",
    "range_gather",
    "reduce",
    "reduce_refusal",
    "scan",
    "scan_refusal",
    "scatter",
    "solve_triangular",
    "sort",
    "svd",
]

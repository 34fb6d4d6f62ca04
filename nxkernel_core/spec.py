"""The kernels' specs, one frozen spec per kernel: the namespace users import.

A spec is plain, hashable data: the attributes a kernel of ``S`` takes before
its destinations and operands (``design.md`` §4). Each spec checks its own
attributes when it is made and raises ``ValueError`` starting with the class,
``"spec.Reduce: axes (2, 1) must increase strictly"``; what depends on the
operands' shapes is ``shape``'s to answer, and what depends on their dtypes
is the refusal rules' (``shape.map_refusal`` and its kin). Every spec names
its kernel (``kernel``, the ``S`` method), and says how many operands and
destinations its kernel takes (``n_operands``, ``n_results``), in the order its
class documents.

Each spec is defined with its kernel's rules in its family module under
:mod:`nxkernel_core.kernels`; this module gathers them::

    from nxkernel_core import spec as S
    S.Map(prog, (S.PLAIN, S.PLAIN))
"""

from __future__ import annotations

from typing import Final

from .kernels.attention import Attention, Dense, Paged
from .kernels.attributes import MAX_FILL_BYTES, fill_fits
from .kernels.contraction import Contract, ContractingSegments, Rows, ScaleKind
from .kernels.elementwise import Map
from .kernels.fourier import C2c, C2r, Direction, Fft, R2c
from .kernels.loads import PLAIN, Load, Pad, Padded, Plain
from .kernels.matrices import Cholesky, Eig, Eigh, Factors, Lu, Qr, SolveTriangular, Svd
from .kernels.moves import Assemble, Combine, Gather, Numbering, RangeGather, Scatter, Side, Sort
from .kernels.reductions import (
    LOGSUMEXP,
    MOMENTS,
    Arg,
    Extreme,
    Fold,
    Logsumexp,
    Moments,
    Monoid,
    Reduce,
    Reduction,
    Scan,
    accepts,
    result_dtypes,
    result_fits,
    results,
)
from .kernels.registry import SPECS, Spec

__all__ = [
    "KERNELS",
    "LOGSUMEXP",
    "MAX_FILL_BYTES",
    "MOMENTS",
    "PLAIN",
    "Arg",
    "Assemble",
    "Attention",
    "C2c",
    "C2r",
    "Cholesky",
    "Combine",
    "Contract",
    "ContractingSegments",
    "Dense",
    "Direction",
    "Eig",
    "Eigh",
    "Extreme",
    "Factors",
    "Fft",
    "Fold",
    "Gather",
    "Load",
    "Logsumexp",
    "Lu",
    "Map",
    "Moments",
    "Monoid",
    "Numbering",
    "Pad",
    "Padded",
    "Paged",
    "Plain",
    "Qr",
    "R2c",
    "RangeGather",
    "Reduce",
    "Reduction",
    "Rows",
    "ScaleKind",
    "Scan",
    "Scatter",
    "Side",
    "SolveTriangular",
    "Sort",
    "Spec",
    "Svd",
    "accepts",
    "fill_fits",
    "result_dtypes",
    "result_fits",
    "results",
]

#: Every kernel's spec class, by its ``S`` method name (the records' ``spec``).
KERNELS: Final[dict[str, type]] = SPECS

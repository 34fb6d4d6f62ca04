"""Every kernel of ``S``, one record each, in the contract's order.

The records are defined in their family modules; this module lists them and
is where the rest of the core reads them: ``KERNEL_NAMES`` (a library's
methods, a statement's keys), the spec classes by name (``spec.KERNELS``),
and each kernel's rules by its name (``kernel(name)``). Adding a kernel is
its record in a family module, its line here, and its hook in each library.
"""

from __future__ import annotations

from typing import Any, Final

from .attention import ATTENTION, Attention
from .contraction import CONTRACT, Contract
from .elementwise import MAP, Map
from .fourier import FFT, Fft
from .matrices import (
    CHOLESKY,
    EIG,
    EIGH,
    LU,
    QR,
    SOLVE_TRIANGULAR,
    SVD,
    Cholesky,
    Eig,
    Eigh,
    Lu,
    Qr,
    SolveTriangular,
    Svd,
)
from .moves import (
    ASSEMBLE,
    GATHER,
    NUMBERING,
    RANGE_GATHER,
    SCATTER,
    SORT,
    Assemble,
    Gather,
    Numbering,
    RangeGather,
    Scatter,
    Sort,
)
from .record import Kernel
from .reductions import FOLD, REDUCE, SCAN, Fold, Reduce, Scan

__all__ = ["KERNELS", "KERNEL_NAMES", "SPECS", "Spec", "kernel"]

#: Every kernel's record, in the contract's order.
KERNELS: Final[tuple[Kernel[Any], ...]] = (
    MAP, REDUCE, SCAN, FOLD, GATHER, RANGE_GATHER, SCATTER, SORT, NUMBERING, ASSEMBLE,
    CONTRACT, FFT, CHOLESKY, LU, QR, SVD, EIGH, EIG, SOLVE_TRIANGULAR, ATTENTION,
)

#: The kernels of ``S``, in the contract's order: each is a method of a library,
#: a key of a statement's ``computes`` and the ``kernel`` of its spec class.
KERNEL_NAMES: Final[tuple[str, ...]] = tuple(k.name for k in KERNELS)

_BY_NAME: Final[dict[str, Kernel[Any]]] = {k.name: k for k in KERNELS}

#: Every kernel's spec class, by its ``S`` method name.
SPECS: Final[dict[str, type]] = {k.name: k.spec for k in KERNELS}

#: Any kernel's spec.
Spec = (Map | Reduce | Scan | Fold | Gather | RangeGather | Scatter | Sort | Numbering
        | Assemble | Contract | Fft | Cholesky | Lu | Qr | Svd | Eigh | Eig | SolveTriangular
        | Attention)


def kernel(name: str) -> Kernel[Any]:
    """The record of kernel ``name``; ``KeyError`` naming the kernels for another."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"no kernel {name!r}; the kernels are {', '.join(KERNEL_NAMES)}") from None

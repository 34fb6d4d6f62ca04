"""The caller: check that a call fits, allocate its destinations, ask the libraries.

``call(spec, *operands)`` (``caller``) is the one checked entry to every
kernel: it checks the call fits (an error names the function and lists the
arrays as ``dtype [shape]``), allocates the destinations on the operands'
device, asks the libraries that compute on that device in priority order, and
raises ``refused(...)`` on a refusal, or ``InvalidArgument`` naming each
library and its reason when every one declines. Nothing computes in a
library's place.

On top sit one function per kernel taking friendlier arguments (``map``,
``reduce``, ``gather``, ...) and the conveniences a NumPy user expects
(``add``, ``sum``, ``argmax``, ``sort``, ``matmul``, ``fft``, ``cholesky``,
``softmax``, ``attention``, ...), each a kernel call or two. All accept and
return ``Array``s; ``asarray`` and ``to_numpy`` cross to NumPy.

The functions live in one module per family (``kernel_calls``: one function per
kernel; ``elementwise``, ``reductions``, ``moves``, ``linalg``, ``fourier``,
``attention``; ``arguments``: the checks they share) and are used from here,
as ``nx.sum`` or ``nx.matmul``.
"""

from __future__ import annotations

from typing import Any

from ..array import Array, asarray
from ..caller import call
from .attention import attention
from .elementwise import add, cast, exp, mul, sub, where
from .fourier import fft, ifft, irfft, rfft
from .kernel_calls import assemble, fold, gather, map, numbering, range_gather, reduce, scan, scatter
from .linalg import cholesky, contract, eig, eigh, lu, matmul, qr, solve_triangular, svd
from .moves import searchsorted, sort, take, topk
from .reductions import argmax, argmin, cumsum, logsumexp, max, mean_var, min, prod, softmax, sum

__all__ = ["add", "argmax", "argmin", "asarray", "assemble", "attention", "call",
           "cast", "cholesky", "contract", "cumsum", "eig", "eigh", "exp", "fft",
           "fold", "gather", "ifft", "irfft", "logsumexp", "lu", "map", "matmul", "max",
           "mean_var", "min", "mul", "numbering", "prod", "qr", "range_gather",
           "reduce", "rfft", "scan", "scatter", "searchsorted", "softmax",
           "solve_triangular", "sort", "sub", "sum", "svd", "take", "to_numpy", "topk",
           "where"]


def to_numpy(x: Array) -> Any:
    """A NumPy copy of x's elements."""
    return x.to_numpy()

"""A reduction's or scan's terms, and the rounding of results into
destinations (see ``reductions``).

The terms are one program output over the loop: a copy of an operand is
read through its load with no evaluation (the view itself for a Plain load),
any other output is the program evaluated by ``nxkernel_host.program``. They
are laid out as rows, one per result index, the reduced (or scanned) terms
along each row in C order of those axes. Every float result rounds once
into its destination (``dtype.of_float``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from nxkernel_core import dtype as D
from nxkernel_core import shape as SH
from nxkernel_core import spec as S
from nxkernel_core.array import Array
from nxkernel_core.dtype import Dtype
from nxkernel_core.prog import Convert, In, Op1, Prog

from . import program
from .loads import load

__all__ = ["Outputs", "Terms", "canonical_nans", "copied_input", "float_terms", "loop_shape",
           "nans_made_canonical", "round_complex", "round_float", "wrap_int"]

Arr = npt.NDArray[Any]


# ---------------------------------------------------------------------------
# Terms
# ---------------------------------------------------------------------------


def copied_input(prog: Prog, output: int) -> int | None:
    """The operand that output ``output`` is, unchanged (``In(i)`` or a Copy of
    it), or None."""
    node = prog.nodes[prog.outs[output]]
    if isinstance(node, Op1) and node.kind is Convert.COPY:
        node = prog.nodes[node.x]
    return node.index if isinstance(node, In) else None


def loop_shape(loads: Sequence[S.Load], operands: Sequence[Array]) -> tuple[int, ...] | None:
    """The loop's shape, read from the first load; None where it does not fit."""
    first, op = loads[0], operands[0]
    if isinstance(first, S.Padded):
        got = SH.padded(op.shape, first.pad)
        return None if isinstance(got, SH.Error) else got
    return op.shape


class Outputs:
    """A program's outputs over the loop, each computed once when first asked:
    an operand's copy is its load (a view for a Plain load), any other output
    the program evaluated over the whole loop."""

    def __init__(self, prog: Prog, loads: Sequence[S.Load], operands: Sequence[Array],
                 loop: tuple[int, ...]) -> None:
        self._prog = prog
        self._loads = loads
        self._operands = operands
        self._loop = loop
        self._evaluated: list[Arr] | None = None

    def get(self, output: int) -> Arr:
        """Output ``output`` at every index of the loop."""
        i = copied_input(self._prog, output)
        if i is not None:
            a = self._operands[i]
            if isinstance(self._loads[i], S.Plain) and not a.dtype.is_sub_byte:
                # The operand's own view: no evaluation and no copy. Writeable
                # (the kernels never write it) because NumPy's argmax and
                # argmin copy a read-only array first.
                return a.numpy_view()
            # Any other load of a copy: the load itself, no evaluation.
            return load(a, self._loads[i], self._loop)
        if self._evaluated is None:
            inputs = [load(a, ld, self._loop)
                      for a, ld in zip(self._operands, self._loads, strict=True)]
            outs = [np.empty(self._loop, dt.numpy_dtype) for dt in self._prog.out_dtypes]
            # Box by box over the threads, each box's temporaries in cache.
            program.map_into(program.compile(self._prog), inputs, self._loop, outs, False)
            self._evaluated = outs
        return self._evaluated[output]


class Terms:
    """One output's terms: ``view``, the output with the reduced axes last (no
    copy), and ``rows``, one row per result index with its terms in C order of
    the reduced axes (a view where strides allow, made when first asked)."""

    def __init__(self, y: Arr, axes: Sequence[int]) -> None:
        kept = [a for a in range(y.ndim) if a not in axes]
        self.view = y.transpose(*kept, *axes)
        self.reduced = len(axes)
        self.count = math.prod(y.shape[a] for a in axes)
        self.results = math.prod(y.shape[a] for a in kept)
        self._rows: Arr | None = None

    @property
    def rows(self) -> Arr:
        if self._rows is None:
            self._rows = self.view.reshape(self.results, self.count)
        return self._rows

    def term(self, t: int, lead: slice) -> Arr:
        """Term ``t`` of the results whose first kept index is in ``lead`` (all
        results without kept axes), shaped as those results: a view."""
        red = np.unravel_index(t, self.view.shape[self.view.ndim - self.reduced:])
        keep = self.view.ndim - self.reduced
        index: list[slice | int] = [lead] if keep else []
        index += [slice(None)] * max(keep - 1, 0)
        index += [int(i) for i in red]
        view: Arr = self.view[tuple(index)]
        return view


# ---------------------------------------------------------------------------
# Rounding into destinations
# ---------------------------------------------------------------------------


def round_float(dt: Dtype, v: Arr) -> Arr:
    """Float values ``v`` (float32 or float64) rounded once into float ``dt``."""
    if v.dtype == dt.numpy_dtype:
        return v
    # A signalling NaN quieted and an overflow to ±inf are the store rule's, not
    # faults to warn of (the hardware flags them: "invalid value in cast").
    with np.errstate(invalid="ignore", over="ignore"):
        if dt is D.float32 or dt is D.float64:
            # An IEEE conversion rounds once, to nearest, as the store rule does.
            return v.astype(dt.numpy_dtype)
        return D.of_float(dt, v.astype(np.float64))


def round_complex(dt: Dtype, re: Arr, im: Arr) -> Arr:
    """A complex result of ``dt`` from its parts, each rounded once."""
    part = D.float32 if dt is D.complex64 else D.float64
    out = np.empty(re.shape, dt.numpy_dtype)
    out.real = round_float(part, re)
    out.imag = round_float(part, im)
    return out


def nans_made_canonical(red: S.Reduction, term: Dtype) -> bool:
    """Whether ``red``'s results over terms of ``term`` are stored with
    canonical NaNs (``canonical_nans``): float and complex Sum and Prod,
    Logsumexp and Moments, whose NaN results are the additions' and
    multiplications' choice among the NaNs they meet."""
    if isinstance(red, (S.Logsumexp, S.Moments)):
        return True
    return red in (S.Monoid.SUM, S.Monoid.PROD) and (term.is_float or term.is_complex)


def canonical_nans(v: Arr) -> None:
    """Set every NaN (each NaN part of a complex number) of float results ``v``
    to the positive quiet NaN, in place. A NaN result's bits are otherwise the
    hardware's choice among the NaNs it meets, which differs between a scan and
    the scan of its prefix (the contract's prefix law is bit for bit) and
    between two compilations of one loop (LLVM may swap an addition's
    operands, and x86 keeps the first operand's NaN)."""
    parts = v.view(v.real.dtype) if np.iscomplexobj(v) else v
    if parts.dtype.kind != "f" and parts.dtype.kind != "V":
        return
    # A minimum is NaN where any element is: one read, no mask, for the
    # common case without NaNs.
    if parts.dtype.kind == "f" and (parts.size == 0 or not np.isnan(np.min(parts))):
        return
    nan = np.isnan(parts)
    if nan.any():
        parts[nan] = np.nan


def wrap_int(dt: Dtype, v: Arr) -> Arr:
    """Integers ``v`` of ``dt``'s carrier wrapped into ``dt``: int4 and uint4
    keep their low four bits, other dtypes are their carrier."""
    if dt is D.int4:
        return (((v.astype(np.int16) + 8) & 15) - 8).astype(dt.numpy_dtype)
    if dt is D.uint4:
        return (v.astype(np.uint16) & 15).astype(dt.numpy_dtype)
    return v.astype(dt.numpy_dtype, copy=False)


def float_terms(rows: Arr, term: Dtype) -> Arr:
    """Float terms in their carrier: float32 for the narrow floats (exact)."""
    return rows if term in (D.float32, D.float64) else rows.astype(np.float32)

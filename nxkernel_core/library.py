"""A base class for kernel libraries: the core checks, the library computes.

The :class:`~nxkernel_core.kernel.Library` protocol leaves every check to the
library. A subclass of :class:`Library` writes only hooks instead: ``_reduce``
for ``reduce``, ``_map`` for ``map``, one per kernel it computes, each taking
(spec, destinations, operands) and writing the destinations. The public kernel
method the base class gives each kernel runs, in order:

1. the **fit** check (:func:`misfit`): counts, dtypes, shapes and layouts by
   the contract's rules, worded once, here; a call that does not fit is
   answered with its refusal;
2. the library's **stated declines**: ``_declines_KERNEL(call)`` where the
   subclass defines it, else none; a kernel with no hook declines every
   case, for the reason ``"NAME computes no KERNEL"``;
3. the **door** (:func:`~nxkernel_core.door.door`): the claims, or the
   door's refusal;
4. the **hook**, then ``DONE``.

The statement is assembled from the same parts: each hook's docstring is its
kernel's prose, its declines predicate the one step 2 runs. A library with no
contraction states the contract's ceiling γ(2K + 2) as its e(K). The guide
``docs/writing-a-library.md`` builds one in about twenty lines.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, ClassVar

from . import fits
from . import shape as SH
from . import spec as S
from .answer import Answer, InvalidArgument
from .array import Array
from .caller import result_dtypes
from .door import door
from .dtype import Dtype
from .kernel import KERNEL_NAMES, Call, KernelStatement, Statement, gamma, unit_roundoff
from .rig import Rig

__all__ = ["Library", "misfit"]

#: A hook: computes a call that fits into its destinations, the door passed.
Hook = Callable[[Any, Sequence[Array], Sequence[Array]], None]


# --------------------------------------------------------------------------
# The fit
# --------------------------------------------------------------------------


def _general_misfit(spec: Any, dsts: Sequence[Array], operands: Sequence[Array]
                    ) -> Answer | None:
    """Counts, then the destinations' dtypes the spec fixes (and fold's dtype
    rule), then the shapes the kernel's shape rule gives."""
    if len(operands) != spec.n_operands() or len(dsts) != spec.n_results():
        return Answer.BAD_ARITY
    try:
        fixed = result_dtypes(spec, operands)
    except InvalidArgument:
        fixed = None  # a kernel whose destinations' dtypes the caller chooses
    if fixed is not None and tuple(d.dtype for d in dsts) != tuple(fixed):
        return Answer.WRONG_DTYPE
    if isinstance(spec, S.Fold):
        found = SH.fold_refusal(operands[0].dtype, dsts[0].dtype)
        if found is not None:
            return found[0]
    want = getattr(SH, spec.kernel)(spec, [a.shape for a in operands])
    if isinstance(want, SH.Error) or tuple(d.shape for d in dsts) != tuple(want):
        return Answer.SHAPE_MISMATCH
    return None


def _scan_misfit(spec: S.Scan, dsts: Sequence[Array], operands: Sequence[Array]
                 ) -> Answer | None:
    """Counts (a carry alone is no call), the scans' refusal rule over the
    loop's rank, the first destination's dtype the spec fixes, then the
    results' shapes."""
    if (len(operands) != spec.n_operands() or len(dsts) != spec.n_results()
            or len(operands) == spec.carry):
        return Answer.BAD_ARITY
    loads = operands[spec.carry:]
    found = SH.scan_refusal(spec.prog, fits.loop_rank(spec.loads, loads), spec.reduction,
                            spec.output, [d.dtype for d in dsts],
                            operands[0].dtype if spec.carry else None, [a.dtype for a in loads],
                            spec.loads)
    if found is not None:
        return found[0]
    if dsts[0].dtype is not spec.dtype:
        return Answer.WRONG_DTYPE
    want = SH.scan(spec, [a.shape for a in operands])
    if isinstance(want, SH.Error) or any(d.shape != w for d, w in zip(dsts, want, strict=True)):
        return Answer.SHAPE_MISMATCH
    return None


def _contract_misfit(spec: S.Contract, dsts: Sequence[Array], operands: Sequence[Array]
                     ) -> Answer | None:
    """``shape.contract_refusal``: counts, shapes, then the scales' and ids'
    dtypes (the destination's dtype is the caller's choice)."""
    return SH.contract_refusal(spec, [d.shape for d in dsts], [o.shape for o in operands],
                               [o.dtype for o in operands])


_ROUTINES = ("cholesky", "lu", "qr", "svd", "eigh", "eig", "solve_triangular")

#: The fit check of each kernel whose rule the core states in full; the others
#: take ``_general_misfit``.
_MISFITS: Mapping[str, Callable[[Any, Sequence[Array], Sequence[Array]], Answer | None]] = {
    "map": fits.map_misfit,
    "reduce": fits.reduce_misfit,
    "scan": _scan_misfit,
    "contract": _contract_misfit,
    **{k: fits.move_misfit for k in ("gather", "range_gather", "scatter", "sort", "numbering",
                                     "assemble")},
    "fft": fits.fft_misfit,
    "attention": fits.attention_misfit,
    **{k: fits.routine_misfit for k in _ROUTINES},
}


def misfit(kernel: str, spec: Any, dsts: Sequence[Array], operands: Sequence[Array]
           ) -> Answer | None:
    """The refusal of a ``kernel`` call that does not fit, or None: the rule a
    :class:`Library` subclass's kernels keep before any decline or claim."""
    return _MISFITS.get(kernel, _general_misfit)(spec, dsts, operands)


# --------------------------------------------------------------------------
# The base class
# --------------------------------------------------------------------------


def _kernel(kernel: str) -> Callable[[Library, Any, Sequence[Array], Sequence[Array]], Answer]:
    def method(self: Library, spec: Any, dsts: Sequence[Array],
               operands: Sequence[Array]) -> Answer:
        return self._run(kernel, spec, dsts, operands)

    method.__name__ = kernel
    method.__doc__ = (f"``{kernel}``: the fit, the stated declines, the door, then the "
                      f"``_{kernel}`` hook (see the module's doc).")
    return method


class Library:
    """A kernel library whose kernels are hooks (see the module's doc).

    A subclass sets ``name`` and ``summary``, and may set ``priority``,
    ``concurrent``, ``association``, ``algorithms``, ``open_choices``,
    ``prose``, ``ulps``, ``not_computed`` and ``models`` (the device models
    it computes on), and define ``error_factor``; one whose arrays are not in
    the host's memory defines ``_door`` and ``computes_on``. The statement is
    made on first use (:meth:`_make_statement`), so a subclass whose parts
    cost (a probe of its devices) pays only when it is read.
    """

    #: The library's name, as discovery lists it.
    name: ClassVar[str] = ""
    #: What the library is for and what it computes on, in a sentence.
    summary: ClassVar[str] = ""
    #: Discovery asks libraries of higher priority first.
    priority: ClassVar[int] = 0
    #: Whether several threads may call its kernels at once.
    concurrent: ClassVar[bool] = False
    #: The device models it computes on: the host's memory by default.
    models: ClassVar[tuple[str, ...]] = ("host", "memory")
    association: ClassVar[Mapping[str, str]] = {}
    algorithms: ClassVar[Mapping[str, str]] = {}
    open_choices: ClassVar[Mapping[str, str]] = {}
    #: The statement's prose of a kernel where its hook's docstring is not it.
    prose: ClassVar[Mapping[str, str]] = {}
    #: The ulp bounds of the inexact kinds its programs compute (``Statement.ulps``).
    ulps: ClassVar[Mapping[str, Mapping[str, int]]] = {}
    #: Why a kernel without a hook declines, where more is to be said than
    #: ``"NAME computes no KERNEL"``.
    not_computed: ClassVar[Mapping[str, str]] = {}

    def __init__(self) -> None:
        if not self.name:
            raise TypeError(f"{type(self).__name__}: a Library states its name")
        self._made: Statement | None = None
        self._making = threading.Lock()

    @property
    def statement(self) -> Statement:
        """The statement, made on first use by :meth:`_make_statement`."""
        made = self._made
        if made is None:
            with self._making:
                if self._made is None:
                    self._made = self._make_statement()
                made = self._made
        return made

    def _make_statement(self) -> Statement:
        """The statement of the class's parts and hooks (see the module's doc)."""
        return Statement(
            library=self.name,
            summary=self.summary,
            computes={k: self._kernel_statement(k) for k in KERNEL_NAMES},
            association=self.association,
            error_factor=self.error_factor,
            algorithms=self.algorithms,
            open_choices=self.open_choices,
            concurrent=self.concurrent,
            ulps=self.ulps,
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def computes_on(self, device: Rig) -> bool:
        """Whether the library computes on ``device``: one of ``models``
        whose memory the host addresses."""
        return device.shares_host_memory and device.model in self.models

    def error_factor(self, k: int, dt: Dtype) -> float:
        """e(K): the contract's ceiling γ(2K + 2) unless a subclass states less."""
        return gamma(2 * k + 2, unit_roundoff(dt))

    def _door(self, dsts: Sequence[Array], operands: Sequence[Array]
              ) -> AbstractContextManager[Answer | None]:
        """The door a call that fits and is not declined passes: the core's,
        for arrays in the host's memory (``OFF_HOST`` for others)."""
        return door(dsts, operands, need_host=True)

    def _hook(self, kernel: str) -> Hook | None:
        # On the class: an instance attribute is never taken for a hook.
        hook = getattr(type(self), f"_{kernel}", None)
        return None if hook is None else getattr(self, f"_{kernel}")

    def _kernel_statement(self, kernel: str) -> KernelStatement:
        hook = self._hook(kernel)
        if hook is None:
            reason = self.not_computed.get(kernel, f"{self.name} computes no {kernel}")
            return KernelStatement(f"declines every case: {reason}", lambda call: reason)
        declines: Callable[[Call], str | None] = getattr(
            self, f"_declines_{kernel}", lambda call: None)
        prose = self.prose.get(kernel) or " ".join((hook.__doc__ or f"computes {kernel}").split())
        return KernelStatement(prose, declines)

    def _run(self, kernel: str, spec: Any, dsts: Sequence[Array],
             operands: Sequence[Array]) -> Answer:
        refusal = misfit(kernel, spec, dsts, operands)
        if refusal is not None:
            return refusal
        if self.statement.computes[kernel].declines(
                Call(kernel, spec, tuple(dsts), tuple(operands))) is not None:
            return Answer.DECLINED
        hook = self._hook(kernel)
        assert hook is not None  # a kernel without a hook declines every case
        with self._door(dsts, operands) as refused:
            if refused is not None:
                return refused
            hook(spec, dsts, operands)
        return Answer.DONE

    map = _kernel("map")
    reduce = _kernel("reduce")
    scan = _kernel("scan")
    fold = _kernel("fold")
    gather = _kernel("gather")
    range_gather = _kernel("range_gather")
    scatter = _kernel("scatter")
    sort = _kernel("sort")
    numbering = _kernel("numbering")
    assemble = _kernel("assemble")
    contract = _kernel("contract")
    fft = _kernel("fft")
    cholesky = _kernel("cholesky")
    lu = _kernel("lu")
    qr = _kernel("qr")
    svd = _kernel("svd")
    eigh = _kernel("eigh")
    eig = _kernel("eig")
    solve_triangular = _kernel("solve_triangular")
    attention = _kernel("attention")

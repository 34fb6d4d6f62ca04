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

Everything steps 1 and 2 decide, and which hook runs, depends on the call's
*signature* alone: the spec and each array's dtype and layout (the fit reads
counts, dtypes, shapes and the destinations' contiguity). So ``_run`` decides
them once per signature (``_known``): a warm call of the same signature runs
the remembered fit answer, the declines predicate (none where the library
states none for the kernel), the door, and the signature's hook (``_hook_for``:
the kernel's hook unless a subclass prepares one). The door runs on every
call: whether the arrays live, are held or share bytes is the call's own.

The statement is assembled from the same parts: each hook's docstring is its
kernel's prose, its declines predicate the one step 2 runs. A library with no
contraction states the contract's ceiling γ(2K + 2) as its e(K). The guide
``docs/writing-a-library.md`` builds one in about twenty lines.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, ClassVar, Final

from .answer import Answer
from .array import Array
from .door import door
from .dtype import Dtype
from .kernel import KERNEL_NAMES, Call, KernelStatement, Statement, gamma, unit_roundoff
from .kernels.registry import kernel as record
from .rig import Rig

__all__ = ["Library", "misfit"]

#: A hook: computes a call that fits into its destinations, the door passed.
Hook = Callable[[Any, Sequence[Array], Sequence[Array]], None]
#: What ``_run`` decides once per signature: the fit's refusal (None where the
#: call fits), the declines predicate to ask (None where the library states no
#: decline of the kernel) and the hook.
_Known = tuple[Answer | None, Callable[[Call], str | None] | None, Hook | None]
#: Signatures a library keeps decided; past it the oldest goes.
_KNOWN_MAX: Final = 4096


def _declines_nothing(call: Call) -> str | None:
    """The declines predicate of a kernel whose hook states none."""
    return None


# --------------------------------------------------------------------------
# The fit
# --------------------------------------------------------------------------


def misfit(kernel: str, spec: Any, dsts: Sequence[Array], operands: Sequence[Array]
           ) -> Answer | None:
    """The refusal of a ``kernel`` call that does not fit, or None: the rule a
    :class:`Library` subclass's kernels keep before any decline or claim (the
    kernel's record's fit check)."""
    return record(kernel).fit(spec, dsts, operands)


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
        self._known: dict[tuple[object, ...], _Known] = {}
        self._known_lock = threading.Lock()

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
            self, f"_declines_{kernel}", _declines_nothing)
        prose = self.prose.get(kernel) or " ".join((hook.__doc__ or f"computes {kernel}").split())
        return KernelStatement(prose, declines)

    def _hook_for(self, kernel: str, spec: Any, dsts: Sequence[Array],
                  operands: Sequence[Array]) -> Hook | None:
        """The hook that computes calls of this signature (that of ``spec``,
        ``dsts`` and ``operands``: their dtypes and layouts), asked once per
        signature of a call that fits and is not declined by the statement:
        the kernel's hook; a subclass may prepare one for the signature, which
        must compute any call of it as the kernel's hook does."""
        return self._hook(kernel)

    def _decide(self, kernel: str, spec: Any, dsts: Sequence[Array],
                operands: Sequence[Array]) -> _Known:
        """What ``_run`` decides for this call's signature (see ``_Known``)."""
        refusal = misfit(kernel, spec, dsts, operands)
        if refusal is not None:
            return refusal, None, None
        declines = self.statement.computes[kernel].declines
        return (None, None if declines is _declines_nothing else declines,
                self._hook_for(kernel, spec, dsts, operands))

    def _run(self, kernel: str, spec: Any, dsts: Sequence[Array],
             operands: Sequence[Array]) -> Answer:
        try:
            # The signature, built by extending one list (cheaper than a
            # comprehension of pairs: every call makes it).
            parts: list[object] = [kernel, spec, len(dsts)]
            for a in dsts:
                parts += (a.dtype, a.layout)
            for a in operands:
                parts += (a.dtype, a.layout)
            key: tuple[object, ...] | None = tuple(parts)
            known = self._known.get(key)  # type: ignore[arg-type]
        except (AttributeError, TypeError):
            # Not arrays, or a spec holding something unhashable: decided afresh.
            key = known = None
        if known is None:
            known = self._decide(kernel, spec, dsts, operands)
            if key is not None:
                with self._known_lock:
                    while len(self._known) >= _KNOWN_MAX:
                        del self._known[next(iter(self._known))]
                    self._known[key] = known
        refusal, declines, hook = known
        if refusal is not None:
            return refusal
        if declines is not None and declines(
                Call(kernel, spec, tuple(dsts), tuple(operands))) is not None:
            return Answer.DECLINED
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

"""The kernel record, and the tools the shape and refusal rules share.

A :class:`Kernel` is one kernel of ``S`` defined once: its name, its spec
class (whose ``n_operands()`` and ``n_results()`` state its arity), its shape
rule, its dtype rule, its refusal rule and its fit check. Each family module
(``elementwise``, ``reductions``, ``moves``, ``contraction``, ``fourier``,
``matrices``, ``attention``) defines its kernels' specs, rules and records;
``registry`` lists the records in the contract's order, and everything else
(``KERNEL_NAMES``, ``spec.KERNELS``, the caller's dtypes and refusals,
``fits``) reads them.

Shape rules take a kernel's spec and its operands' shapes, in the order the
spec's class documents, and give its destinations' shapes in order, or
``Error(reason)`` where the operands' shapes or the attributes do not fit. A
shape of rank above ``MAX_RANK`` (32) or of more than ``MAX_NUMEL`` (2**62)
elements, operand or destination, is an Error; so is a wrong number of
operand shapes. nx answers ``SHAPE_MISMATCH`` for an Error.

Refusal rules read the program, the loop's rank and the dtypes of a call and
give ``(answer, why)`` for the first misfit or None, checking counts
(``BAD_ARITY``), then dtypes (``WRONG_DTYPE``), then the rank
(``SHAPE_MISMATCH``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Generic, ParamSpec, TypeVar, final

from ..answer import Answer
from ..dtype import Dtype
from ..layout import MAX_RANK
from ..prog import MAX_OPERANDS

if TYPE_CHECKING:
    from ..array import Array

__all__ = ["MAX_NUMEL", "DtypesFit", "Error", "FitCheck", "Kernel", "Refusal", "Shape", "Shapes",
           "fixed_dtypes", "no_refusal", "rule_fit", "shapes_fit"]

#: The most elements a shape may have.
MAX_NUMEL: Final = 2**62

Shape = tuple[int, ...]
Shapes = tuple[Shape, ...]
#: A refusal rule's answer: the refusal and what does not fit, in words.
Refusal = tuple[Answer, str]

_P = ParamSpec("_P")
_T = TypeVar("_T")


@final
@dataclass(frozen=True, slots=True)
class Error:
    """Shapes or attributes that do not fit a kernel: ``reason`` in words."""

    reason: str


class _Misfit(Exception):
    """Raised inside this module; the public functions answer it as ``Error``."""


def _answers(f: Callable[_P, _T]) -> Callable[_P, _T | Error]:
    @functools.wraps(f)
    def wrapped(*args: _P.args, **kwargs: _P.kwargs) -> _T | Error:
        try:
            return f(*args, **kwargs)
        except _Misfit as e:
            return Error(str(e))

    return wrapped


def _fits(what: str, shape: Shape) -> Shape:
    """``shape`` where its rank is at most ``MAX_RANK`` and it has at most
    ``MAX_NUMEL`` elements."""
    if len(shape) > MAX_RANK:
        raise _Misfit(f"{what} {list(shape)} has rank {len(shape)}, above {MAX_RANK}")
    if math.prod(shape) > MAX_NUMEL:
        raise _Misfit(f"{what} {list(shape)} has more than 2**62 elements")
    return shape


def _operands(names: Sequence[str], shapes: Sequence[Sequence[int]]) -> list[Shape]:
    """The operand shapes as tuples, one per name, each a valid shape."""
    if len(shapes) != len(names):
        raise _Misfit(f"takes {len(names)} operands ({', '.join(names) or 'none'}), "
                      f"got {len(shapes)}")
    out = []
    for name, s in zip(names, shapes, strict=True):
        t = tuple(int(d) for d in s)
        if any(d < 0 for d in t):
            raise _Misfit(f"{name} {list(t)} has a negative extent")
        out.append(_fits(name, t))
    return out


def _results(*shapes: Shape) -> Shapes:
    return tuple(_fits(f"result {i}", s) for i, s in enumerate(shapes))


def _axis(what: str, axis: int, rank: int) -> None:
    if not 0 <= axis < rank:
        raise _Misfit(f"{what} {axis} is not an axis of rank {rank}")


def _set_at(shape: Shape, axis: int, extent: int) -> Shape:
    return (*shape[:axis], extent, *shape[axis + 1:])


def _same_but(what: str, a_name: str, a: Shape, b_name: str, b: Shape, axis: int) -> None:
    """``a`` and ``b`` of one rank, with one extent along every axis but ``axis``."""
    if len(a) != len(b) or any(x != y for i, (x, y) in enumerate(zip(a, b, strict=True))
                                if i != axis):
        raise _Misfit(f"{a_name} {list(a)} must have {b_name}'s rank and extents {list(b)} "
                      f"but along {what} {axis}")


# --------------------------------------------------------------------------
# Refusal rules' parts
# --------------------------------------------------------------------------


def _count(what: str, got: int, want: int) -> Refusal | None:
    if got != want:
        return Answer.BAD_ARITY, f"{got} {what} where the program takes {want}"
    return None


def _too_many(n: int) -> Refusal | None:
    if n > MAX_OPERANDS:
        return Answer.BAD_ARITY, f"{n} operands and destinations, above {MAX_OPERANDS}"
    return None


def _dst_dtypes(dsts: Sequence[Dtype], want: Sequence[Dtype], whose: str) -> Refusal | None:
    for k, (got, w) in enumerate(zip(dsts, want, strict=True)):
        if got != w:
            return (Answer.WRONG_DTYPE,
                    f"destination {k} is {got.name}, the {whose}'s dtype is {w.name}")
    return None


def no_refusal(spec: object, shapes: Sequence[Shape], loads: Sequence[Dtype],
               dsts: Sequence[Dtype]) -> Refusal | None:
    """The refusal rule of a kernel that states none beyond its fit check."""
    return None


def shapes_fit(dsts: Sequence[Array], want: Shapes | Error) -> bool:
    """Whether ``want``, a shape rule's answer, is the destinations' shapes."""
    return not isinstance(want, Error) and len(want) == len(dsts) and all(
        d.shape == w for d, w in zip(dsts, want, strict=True))


# --------------------------------------------------------------------------
# The record
# --------------------------------------------------------------------------


_Spec = TypeVar("_Spec")


@final
@dataclass(frozen=True, slots=True)
class Kernel(Generic[_Spec]):
    """One kernel of ``S``, defined once.

    - ``name``: the ``S`` method, a library's method and a statement's key;
      the spec class's ``kernel``.
    - ``spec``: the spec class; a spec's ``n_operands()`` and ``n_results()``
      are the kernel's arity.
    - ``shapes(spec, operand shapes)``: the destinations' shapes, or ``Error``.
    - ``dtypes(spec, operand dtypes)``: the destinations' dtypes the spec and
      the operands fix, or None where the caller states them (``dtypes=``).
      Read after ``shapes`` answered, so the operands are as many as the spec
      takes.
    - ``refusal(spec, operand shapes, operand dtypes, destination dtypes)``:
      the contract's refusal rule on the dtypes and the loop's rank, as
      ``(answer, why)``, or None; read after ``shapes`` answered.
    - ``fit(spec, dsts, operands)``: the refusal of a whole call that does not
      fit, its checks in the contract's order, or None where it fits. Every
      library keeps it before it declines or claims anything.
    """

    name: str
    spec: type[_Spec]
    shapes: Callable[[_Spec, Sequence[Sequence[int]]], Shapes | Error]
    dtypes: Callable[[_Spec, Sequence[Dtype]], tuple[Dtype, ...] | None]
    refusal: Callable[[_Spec, Sequence[Shape], Sequence[Dtype], Sequence[Dtype]], Refusal | None]
    fit: Callable[[_Spec, Sequence[Array], Sequence[Array]], Answer | None]

    def __post_init__(self) -> None:
        if getattr(self.spec, "kernel", None) != self.name:
            raise ValueError(f"Kernel {self.name!r}: its spec class {self.spec.__name__} names "
                             f"kernel {getattr(self.spec, 'kernel', None)!r}")


#: A fit check: the refusal of a call (spec, destinations, operands) that does
#: not fit its kernel, or None.
FitCheck = Callable[[Any, Sequence["Array"], Sequence["Array"]], "Answer | None"]
#: A kernel's dtype rule in a fit check: whether the destinations' and the
#: operands' dtypes are ones it takes.
DtypesFit = Callable[[Any, Sequence["Array"], Sequence["Array"]], bool]


def rule_fit(shapes: Callable[[Any, Sequence[Sequence[int]]], Shapes | Error],
             dtypes_fit: DtypesFit, contiguous: bool = False) -> FitCheck:
    """The fit check of a kernel stated by its shape rule ``shapes`` and
    ``dtypes_fit``, in the contract's order: counts (``BAD_ARITY``), then,
    where ``contiguous``, contiguous destinations (``BAD_LAYOUT``), then the
    dtypes (``WRONG_DTYPE``), then the shapes (``SHAPE_MISMATCH``)."""

    def fit(spec: Any, dsts: Sequence[Array], operands: Sequence[Array]) -> Answer | None:
        if len(dsts) != spec.n_results() or len(operands) != spec.n_operands():
            return Answer.BAD_ARITY
        if contiguous and not all(d.layout.is_contiguous() for d in dsts):
            return Answer.BAD_LAYOUT
        if not dtypes_fit(spec, dsts, operands):
            return Answer.WRONG_DTYPE
        if not shapes_fit(dsts, shapes(spec, [o.shape for o in operands])):
            return Answer.SHAPE_MISMATCH
        return None

    return fit


def fixed_dtypes(dtypes: Callable[[Any, Sequence[Dtype]], tuple[Dtype, ...] | None]
                 ) -> DtypesFit:
    """The dtypes a kernel takes where its dtype rule ``dtypes`` says it all:
    the destinations' are the ones it fixes (any, where it leaves them to the
    caller)."""

    def fit(spec: Any, dsts: Sequence[Array], operands: Sequence[Array]) -> bool:
        fixed = dtypes(spec, [a.dtype for a in operands])
        return fixed is None or tuple(d.dtype for d in dsts) == tuple(fixed)

    return fit

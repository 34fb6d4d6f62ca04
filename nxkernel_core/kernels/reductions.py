"""Reduce, scan and fold (``S.reduce``, ``S.scan``, ``S.fold``), defined once,
with the reductions they compute (Monoid, Logsumexp, Moments, Arg)."""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Final, final

from .. import dtype as D
from ..answer import Answer
from ..dtype import Dtype
from ..prog import MAX_OPERANDS, Binary
from ..prog import accepts as kind_accepts
from .attributes import _axes, _bool, _fail, _int, _int_field, _of, _set, _shape, _tuples
from .loads import (
    Load,
    Pad,
    _load_dtypes,
    _load_names,
    _loads,
    _loop,
    _loop_arity,
    _padded,
    _rank,
    loop_rank,
)
from .record import (
    Kernel,
    Refusal,
    Shape,
    Shapes,
    _answers,
    _axis,
    _count,
    _dst_dtypes,
    _Misfit,
    _operands,
    _results,
    _too_many,
    shapes_fit,
)

if TYPE_CHECKING:
    from ..array import Array
    from ..prog import Prog

__all__ = [
    "FOLD",
    "LOGSUMEXP",
    "MOMENTS",
    "REDUCE",
    "SCAN",
    "Arg",
    "Extreme",
    "Fold",
    "Logsumexp",
    "Moments",
    "Monoid",
    "Reduce",
    "Reduction",
    "Scan",
    "accepts",
    "carry",
    "fold",
    "fold_misfit",
    "fold_refusal",
    "reduce",
    "reduce_misfit",
    "reduce_refusal",
    "result_dtypes",
    "result_fits",
    "results",
    "scan",
    "scan_misfit",
    "scan_refusal",
]


# --------------------------------------------------------------------------
# Reductions
# --------------------------------------------------------------------------


class Monoid(enum.Enum):
    """Sum (from +0; integers wrap), Prod (from the first term; empty is 1),
    Max and Min (``Prog`` Maximum and Minimum: −0 below +0, any/all on
    booleans). A member is itself a reduction."""

    SUM = "sum"
    PROD = "prod"
    MAX = "max"
    MIN = "min"


@final
@dataclass(frozen=True, slots=True)
class Logsumexp:
    """``m + log Σ exp(x − m)``, m the terms' maximum; ``LOGSUMEXP`` is the one."""


@final
@dataclass(frozen=True, slots=True)
class Moments:
    """The terms' population mean, then their variance; ``MOMENTS`` is the one."""


LOGSUMEXP: Final = Logsumexp()
MOMENTS: Final = Moments()


class Extreme(enum.Enum):
    """Which extreme an ``Arg`` finds."""

    MAX = "max"
    MIN = "min"


@final
@dataclass(frozen=True, slots=True)
class Arg:
    """The extreme of the terms, as Monoid Max or Min finds it, then its int64
    position: the first term with its bits, or the first NaN term."""

    extreme: Extreme

    def __post_init__(self) -> None:
        _of(self, "extreme", self.extreme, Extreme)


Reduction = Monoid | Logsumexp | Moments | Arg

_REDUCTIONS: Final = (Monoid, Logsumexp, Moments, Arg)


def _reduction_name(r: Reduction) -> str:
    if isinstance(r, Monoid):
        return r.value
    if isinstance(r, Logsumexp):
        return "logsumexp"
    if isinstance(r, Moments):
        return "moments"
    return "arg"


def accepts(reduction: Reduction, dt: Dtype) -> bool:
    """Whether ``reduction`` reduces terms of ``dt``: Sum and Prod every dtype but
    booleans, Max, Min and Arg every dtype, Logsumexp and Moments floats."""
    return D.accepts_reduction_kind(_reduction_name(reduction), dt)


def results(reduction: Reduction) -> int:
    """How many results ``reduction`` gives: two for Moments (mean, variance)
    and Arg (extreme, position), else one."""
    return 2 if isinstance(reduction, Moments | Arg) else 1


def result_dtypes(reduction: Reduction, dt: Dtype) -> tuple[Dtype, ...]:
    """The dtypes of ``reduction``'s results stated in ``dt``: ``(dt, dt)`` for
    Moments, ``(dt, int64)`` for Arg (the extreme, then its position), else
    ``(dt,)``."""
    if isinstance(reduction, Moments):
        return (dt, dt)
    if isinstance(reduction, Arg):
        return (dt, D.int64)
    return (dt,)


def result_fits(reduction: Reduction, term: Dtype, result: Dtype) -> bool:
    """Whether ``reduction`` of terms of ``term`` may round into a result of
    ``result`` (the first result, for Moments and Arg): the terms' own dtype
    always; a float Sum, Prod, Logsumexp or Moments into any float dtype and a
    complex Sum or Prod into any complex dtype, each result rounding once into
    it. Max, Min and Arg pick a term, and integers wrap, so theirs is the
    terms' dtype alone. Assumes ``accepts(reduction, term)``."""
    if result is term:
        return True
    if isinstance(reduction, Arg) or reduction in (Monoid.MAX, Monoid.MIN):
        return False
    if term.is_float:
        return result.is_float
    return term.is_complex and result.is_complex and reduction in (Monoid.SUM, Monoid.PROD)


# --------------------------------------------------------------------------
# Specs
# --------------------------------------------------------------------------


@final
@dataclass(frozen=True, slots=True)
class Reduce:
    """``S.reduce``: each ``(reduction, output, dtype)`` of ``reductions``
    reduces program output ``output`` over ``axes`` (strictly increasing) into
    results of ``result_dtypes(reduction, dtype)``. Operands: one per load.
    Destinations: every reduction's results, in the order listed (Moments: mean
    then variance; Arg: the extreme then its int64 positions). At least one
    reduction; loads plus results at most ``MAX_OPERANDS`` (16)."""

    kernel: ClassVar[str] = "reduce"
    prog: Prog
    loads: tuple[Load, ...]
    axes: tuple[int, ...]
    reductions: tuple[tuple[Reduction, int, Dtype], ...]

    def __post_init__(self) -> None:
        _set(self, "loads", _loads(self, self.loads, self.prog.n_ins, "program inputs"))
        _set(self, "axes", _axes(self, "axes", self.axes))
        rs = []
        for r in _tuples(self, "reductions", self.reductions):
            if len(r) != 3:
                raise _fail(self, f"reduction {r} is not (reduction, output, dtype)")
            _of(self, "a reduction", r[0], _REDUCTIONS)
            k = _int(self, "output", r[1])
            if k >= self.prog.n_outs:
                raise _fail(self, f"output {k} is past the program's {self.prog.n_outs}")
            _of(self, "a result dtype", r[2], Dtype)
            rs.append((r[0], k, r[2]))
        if not rs:
            raise _fail(self, "takes at least one reduction")
        _set(self, "reductions", tuple(rs))
        if len(self.loads) + self.n_results() > MAX_OPERANDS:
            raise _fail(
                self,
                f"{len(self.loads)} loads and {self.n_results()} results are more than "
                f"{MAX_OPERANDS}",
            )

    def n_operands(self) -> int:
        return len(self.loads)

    def n_results(self) -> int:
        return sum(results(r) for r, _, _ in self.reductions)

    def result_dtypes(self) -> tuple[Dtype, ...]:
        """The destinations' dtypes, in order."""
        return tuple(d for r, _, dt in self.reductions for d in result_dtypes(r, dt))


@final
@dataclass(frozen=True, slots=True)
class Scan:
    """``S.scan``: the inclusive scan by ``reduction`` of program output
    ``output`` along ``axis`` (from the end where ``reverse``), into results of
    ``result_dtypes(reduction, dtype)``.

    Operands: where ``carry``, first the carry, the state before the first term,
    of dtype ``carrier`` of the output's dtype and of the shape ``shape.carry``
    gives (the loop's shape without ``axis``): for a Monoid the carrier value
    of the result before; for Logsumexp the log-sum-exp of the earlier terms
    (−∞ for none); for Moments an extra last axis of 3, the earlier terms'
    count, mean and population variance. An Arg scan takes no carry. Then one
    operand per load. Destinations: the results (Moments: mean then variance;
    Arg: the extreme then its int64 positions)."""

    kernel: ClassVar[str] = "scan"
    prog: Prog
    loads: tuple[Load, ...]
    axis: int
    reduction: Reduction
    output: int
    dtype: Dtype
    reverse: bool = False
    carry: bool = False

    def __post_init__(self) -> None:
        _set(self, "loads", _loads(self, self.loads, self.prog.n_ins, "program inputs"))
        _int_field(self, "axis")
        _of(self, "reduction", self.reduction, _REDUCTIONS)
        if _int_field(self, "output") >= self.prog.n_outs:
            raise _fail(self, f"output {self.output} is past the program's {self.prog.n_outs}")
        _of(self, "dtype", self.dtype, Dtype)
        _bool(self, "reverse", self.reverse)
        _bool(self, "carry", self.carry)
        if self.carry and isinstance(self.reduction, Arg):
            raise _fail(self, "an Arg scan takes no carry")

    def n_operands(self) -> int:
        return len(self.loads) + self.carry

    def n_results(self) -> int:
        return results(self.reduction)

    def result_dtypes(self) -> tuple[Dtype, ...]:
        """The destinations' dtypes, in order."""
        return result_dtypes(self.reduction, self.dtype)


@final
@dataclass(frozen=True, slots=True)
class Fold:
    """``S.fold``: the adjoint of a Padded load by ``pad`` of an operand of
    ``shape``: each element of dst (of ``shape``) is +0 plus every element of x
    (of ``shape.padded(shape, pad)``) the load reads from it, in C order of the
    taps. Operands: x. Destinations: dst."""

    kernel: ClassVar[str] = "fold"
    shape: tuple[int, ...]
    pad: Pad

    def __post_init__(self) -> None:
        _set(self, "shape", _shape(self, self.shape))
        _of(self, "pad", self.pad, Pad)
        if self.pad.rank != len(self.shape):
            raise _fail(self, f"pad of rank {self.pad.rank} for shape {list(self.shape)}")

    def n_operands(self) -> int:
        return 1

    def n_results(self) -> int:
        return 1


# --------------------------------------------------------------------------
# Shapes
# --------------------------------------------------------------------------


@_answers
def reduce(spec: Reduce, shapes: Sequence[Sequence[int]]) -> Shapes:
    """Reduce's destinations, each the loop's shape without ``axes`` (every axis
    below the loop's rank), one per result (two for Moments and Arg). A Max,
    Min or Arg with a result and no term (a reduced axis of extent 0) is an
    Error."""
    ops = _operands(_load_names(len(spec.loads)), shapes)
    loop = _loop(spec.loads, ops)
    for a in spec.axes:
        _axis("reduced axis", a, len(loop))
    out = tuple(d for i, d in enumerate(loop) if i not in spec.axes)
    terms = math.prod(loop[a] for a in spec.axes)
    for r, _, _ in spec.reductions:
        if terms == 0 and math.prod(out) > 0 and (isinstance(r, Arg)
                                                 or r in (Monoid.MAX, Monoid.MIN)):
            raise _Misfit(f"{r} over axes {list(spec.axes)} of {list(loop)} has no term")
    return _results(*(out for _ in range(spec.n_results())))


def _carry(spec: Scan, loop: Shape) -> Shape:
    _axis("the scanned axis", spec.axis, len(loop))
    if isinstance(spec.reduction, Arg):
        raise _Misfit("an Arg scan takes no carry")
    rest = loop[:spec.axis] + loop[spec.axis + 1:]
    return (*rest, 3) if isinstance(spec.reduction, Moments) else rest


@_answers
def carry(spec: Scan, loop: Sequence[int]) -> Shape:
    """The shape of a scan's carry on a loop of shape ``loop``: the loop's
    without the scanned axis, with a last axis of 3 for Moments (count, mean,
    variance); an Arg scan takes none (Error)."""
    (s,) = _operands(["the loop"], [loop])
    return _carry(spec, s)


@_answers
def scan(spec: Scan, shapes: Sequence[Sequence[int]]) -> Shapes:
    """Scan's destinations, each the loop's shape, one per result (two for
    Moments and Arg). Operands: the carry where ``spec.carry``, of the shape
    ``carry`` gives, then one per load. The scanned axis is below the loop's
    rank."""
    names = ["the carry"] * spec.carry + _load_names(len(spec.loads))
    ops = _operands(names, shapes)
    loop = _loop(spec.loads, ops[spec.carry:])
    _axis("the scanned axis", spec.axis, len(loop))
    if spec.carry:
        want = _carry(spec, loop)
        if ops[0] != want:
            raise _Misfit(f"the carry {list(ops[0])} must be {list(want)} for a loop of "
                          f"{list(loop)}")
    return _results(*(loop for _ in range(spec.n_results())))


@_answers
def fold(spec: Fold, shapes: Sequence[Sequence[int]]) -> Shapes:
    """Fold's destination: ``spec.shape``; x must have the shape a load by
    ``spec.pad`` reads from it (``padded``)."""
    (x,) = _operands(["x"], shapes)
    want = _padded(spec.shape, spec.pad)
    if x != want:
        raise _Misfit(f"x {list(x)} must be {list(want)}, the padded {list(spec.shape)}")
    return _results(spec.shape)


def fold_refusal(x: Dtype, dst: Dtype) -> Refusal | None:
    """Whether a fold of x into dst does not fit its dtypes: WRONG_DTYPE for a
    dst not of x's dtype, or a dtype Prog's Add does not take (bool, bit),
    since fold adds (upstream §2: 'A dtype Prog.Add does not take answers
    Wrong_dtype'); else None."""
    if dst is not x:
        return Answer.WRONG_DTYPE, f"dst is {dst.name}, x {x.name}: fold keeps x's dtype"
    if not kind_accepts(Binary.ADD, x):
        return Answer.WRONG_DTYPE, f"fold adds by Prog's Add, which does not take {x.name}"
    return None


# --------------------------------------------------------------------------
# Refusal rules and fit checks
# --------------------------------------------------------------------------


def _reduction(prog: Prog, r: Reduction, output: int, result: Dtype) -> Refusal | None:
    """Output ``output`` of ``prog`` accepted by ``r``, and ``result`` a dtype
    its results may round into (``spec.result_fits``)."""
    term = prog.out_dtypes[output]
    if not accepts(r, term):
        return Answer.WRONG_DTYPE, f"{r} does not reduce output {output}'s {term.name}"
    if not result_fits(r, term, result):
        return (Answer.WRONG_DTYPE,
                f"{r} of output {output}'s {term.name} does not round into {result.name}")
    return None


def _output(prog: Prog, output: int) -> Refusal | None:
    if not 0 <= output < prog.n_outs:
        return (Answer.BAD_ARITY,
                f"output {output} is not one of the program's {prog.n_outs} outputs")
    return None


def reduce_refusal(prog: Prog, rank: int,
                   reductions: Sequence[tuple[Reduction, int, Dtype]],
                   dsts: Sequence[Dtype], loads: Sequence[Dtype],
                   load_specs: Sequence[Load]) -> Refusal | None:
    """As ``map_refusal`` for ``reduce``'s ``reductions`` ``(reduction, output,
    dtype)`` of ``prog``; the reduced axes are ``shape.reduce``'s to check.

    - BAD_ARITY: no load; loads not one per program input; load specs not one
      per load; no reduction; an output the program lacks; destinations not one
      per result (two for Moments and Arg); loads and destinations above 16.
    - WRONG_DTYPE: a load's dtype or fill as for map; a reduction that does not
      accept its output's dtype (``spec.accepts``); a stated dtype the output's
      terms may not round into (``spec.result_fits``); a destination not of
      its result's dtype (``spec.result_dtypes``: Arg's positions int64).
    - SHAPE_MISMATCH: as for map.
    """
    want = [d for r, _, dt in reductions for d in result_dtypes(r, dt)]
    found = (_loop_arity(prog, loads, load_specs)
             or (None if reductions else (Answer.BAD_ARITY, "no reduction")))
    for _, output, _ in reductions:
        found = found or _output(prog, output)
    found = (found
             or _count("destinations", len(dsts), len(want))
             or _too_many(len(loads) + len(dsts))
             or _load_dtypes(prog, loads, load_specs, 0))
    for r, output, dt in reductions:
        found = found or _reduction(prog, r, output, dt)
    return (found
            or _dst_dtypes(dsts, want, "reduction's result")
            or _rank(prog, rank, load_specs))


def scan_refusal(prog: Prog, rank: int, reduction: Reduction, output: int,
                 dsts: Sequence[Dtype], carry: Dtype | None, loads: Sequence[Dtype],
                 load_specs: Sequence[Load]) -> Refusal | None:
    """As ``map_refusal`` for ``scan``'s scan by ``reduction`` of output
    ``output`` of ``prog``, from a carry of dtype ``carry`` (None for none);
    the scanned axis is ``shape.scan``'s to check.

    - BAD_ARITY: no load; loads not one per program input; load specs not one
      per load; an output the program lacks; destinations not one per result
      (two for Moments and Arg); a carry for Arg; a carry, loads and
      destinations above 16.
    - WRONG_DTYPE: a load's dtype or fill as for map; a reduction that does not
      accept the output's dtype; a first destination the terms may not round
      into (``spec.result_fits``); Moments' second destination not the first's
      dtype, Arg's not int64; a carry not of ``carrier`` of the output's dtype.
    - SHAPE_MISMATCH: a rank below 1 (a scan needs an axis), else as for map.
    """
    found = (_loop_arity(prog, loads, load_specs)
             or _output(prog, output)
             or _count("destinations", len(dsts), results(reduction))
             or (None if carry is None or not isinstance(reduction, Arg) else
                 (Answer.BAD_ARITY, "an Arg scan takes no carry"))
             or _too_many(len(loads) + len(dsts) + (carry is not None))
             or _load_dtypes(prog, loads, load_specs, 0))
    if found:
        return found
    term = prog.out_dtypes[output]
    found = (_reduction(prog, reduction, output, dsts[0])
             or _dst_dtypes(dsts, result_dtypes(reduction, dsts[0]), "scan's result"))
    if not found and carry is not None and carry != D.carrier(term):
        found = (Answer.WRONG_DTYPE,
                 f"the carry is {carry.name}, the carrier of {term.name} is "
                 f"{D.carrier(term).name}")
    return found or _rank(prog, rank, load_specs, least=1)


def reduce_misfit(spec: Reduce, dsts: Sequence[Array], operands: Sequence[Array]
                  ) -> Answer | None:
    """The refusal of a reduce call that does not fit: counts, the reductions'
    refusal rule over the loop's rank, then the results' shapes."""
    if len(operands) != len(spec.loads) or len(dsts) != spec.n_results() or not operands:
        return Answer.BAD_ARITY
    shapes = [a.shape for a in operands]
    found = reduce_refusal(spec.prog, loop_rank(spec.loads, shapes), spec.reductions,
                           [d.dtype for d in dsts], [a.dtype for a in operands], spec.loads)
    if found is not None:
        return found[0]
    return None if shapes_fit(dsts, reduce(spec, shapes)) else Answer.SHAPE_MISMATCH


def fold_misfit(spec: Fold, dsts: Sequence[Array], operands: Sequence[Array]) -> Answer | None:
    """The refusal of a fold call that does not fit: counts, ``fold_refusal``
    on the dtypes, then the destination's shape."""
    if len(operands) != 1 or len(dsts) != 1:
        return Answer.BAD_ARITY
    found = fold_refusal(operands[0].dtype, dsts[0].dtype)
    if found is not None:
        return found[0]
    return None if shapes_fit(dsts, fold(spec, [operands[0].shape])) else Answer.SHAPE_MISMATCH


def scan_misfit(spec: Scan, dsts: Sequence[Array], operands: Sequence[Array]) -> Answer | None:
    """The refusal of a scan call that does not fit: counts (a carry alone is no
    call), the scans' refusal rule over the loop's rank, the first
    destination's dtype the spec fixes, then the results' shapes."""
    if (len(operands) != spec.n_operands() or len(dsts) != spec.n_results()
            or len(operands) == spec.carry):
        return Answer.BAD_ARITY
    loads = operands[spec.carry:]
    found = scan_refusal(spec.prog, loop_rank(spec.loads, [a.shape for a in loads]),
                         spec.reduction, spec.output, [d.dtype for d in dsts],
                         operands[0].dtype if spec.carry else None, [a.dtype for a in loads],
                         spec.loads)
    if found is not None:
        return found[0]
    if dsts[0].dtype is not spec.dtype:
        return Answer.WRONG_DTYPE
    return None if shapes_fit(dsts, scan(spec, [a.shape for a in operands])) else \
        Answer.SHAPE_MISMATCH


def _reduce_rule(spec: Reduce, shapes: Sequence[Shape], loads: Sequence[Dtype],
                 dsts: Sequence[Dtype]) -> Refusal | None:
    return reduce_refusal(spec.prog, loop_rank(spec.loads, shapes), spec.reductions, dsts, loads,
                          spec.loads)


def _scan_rule(spec: Scan, shapes: Sequence[Shape], loads: Sequence[Dtype],
               dsts: Sequence[Dtype]) -> Refusal | None:
    first = 1 if spec.carry else 0
    return scan_refusal(spec.prog, loop_rank(spec.loads, shapes[first:]), spec.reduction,
                        spec.output, dsts, loads[0] if spec.carry else None, loads[first:],
                        spec.loads)


def _fold_rule(spec: Fold, shapes: Sequence[Shape], loads: Sequence[Dtype],
               dsts: Sequence[Dtype]) -> Refusal | None:
    return fold_refusal(loads[0], dsts[0])


def _scan_dtypes(spec: Scan, loads: Sequence[Dtype]) -> tuple[Dtype, ...]:
    return spec.result_dtypes()


# --------------------------------------------------------------------------
# The records
# --------------------------------------------------------------------------


#: ``S.reduce``.
REDUCE: Final = Kernel("reduce", Reduce, reduce, lambda spec, loads: spec.result_dtypes(),
                       _reduce_rule, reduce_misfit)
#: ``S.scan``.
SCAN: Final = Kernel("scan", Scan, scan, _scan_dtypes, _scan_rule, scan_misfit)
#: ``S.fold``: dst keeps x's dtype.
FOLD: Final = Kernel("fold", Fold, fold, lambda spec, loads: (loads[0],), _fold_rule,
                     fold_misfit)

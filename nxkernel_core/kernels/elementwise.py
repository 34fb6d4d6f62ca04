"""Map: a program at every index of a loop (``S.map``), defined once."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Final, final

from ..answer import Answer
from ..dtype import Dtype
from .attributes import _set
from .loads import Load, _load_dtypes, _load_names, _loads, _loop, _loop_arity, _rank, loop_rank
from .record import (
    Kernel,
    Refusal,
    Shape,
    Shapes,
    _answers,
    _count,
    _dst_dtypes,
    _operands,
    _results,
    shapes_fit,
)

if TYPE_CHECKING:
    from ..array import Array
    from ..prog import Prog

__all__ = ["MAP", "Map", "map", "map_misfit", "map_refusal"]


@final
@dataclass(frozen=True, slots=True)
class Map:
    """``S.map``: ``prog`` at every index of the loop, operand ``i`` read by
    ``loads[i]`` (one load per program input). Operands: one per load.
    Destinations: one per program output, output ``k`` into the ``k``-th."""

    kernel: ClassVar[str] = "map"
    prog: Prog
    loads: tuple[Load, ...]

    def __post_init__(self) -> None:
        _set(self, "loads", _loads(self, self.loads, self.prog.n_ins, "program inputs"))

    def n_operands(self) -> int:
        return len(self.loads)

    def n_results(self) -> int:
        return self.prog.n_outs


# --------------------------------------------------------------------------
# Rules
# --------------------------------------------------------------------------


@_answers
def map(spec: Map, shapes: Sequence[Sequence[int]]) -> Shapes:
    """Map's destinations, one per program output: the loop's shape, that every
    load reads (``padded`` for a Padded one) alike. Operands: one per load; a
    map with no load is an Error."""
    ops = _operands(_load_names(len(spec.loads)), shapes)
    loop = _loop(spec.loads, ops)
    return _results(*(loop for _ in range(spec.prog.n_outs)))


def map_refusal(prog: Prog, rank: int, dsts: Sequence[Dtype], loads: Sequence[Dtype],
                load_specs: Sequence[Load]) -> Refusal | None:
    """Whether ``map``'s program ``prog`` over loads of dtypes ``loads`` read by
    ``load_specs`` into destinations of dtypes ``dsts``, on a loop of rank
    ``rank``, does not fit: ``(answer, why)`` for the first misfit, else None.

    - BAD_ARITY: no load; loads not one per program input; load specs not one
      per load; destinations not one per program output.
    - WRONG_DTYPE: load ``i`` not of ``prog.ins[i]``; a Padded load's fill not
      one element of its dtype (``dtype.bytes(dt, 1)`` bytes); destination
      ``k`` not of program output ``k``'s dtype.
    - SHAPE_MISMATCH: a rank outside [0, 32]; a Padded load whose pad's rank
      plus its windows is not the loop's; a Coord axis at or past the rank.
    """
    return (_loop_arity(prog, loads, load_specs)
            or _count("destinations", len(dsts), prog.n_outs)
            or _load_dtypes(prog, loads, load_specs, 0)
            or _dst_dtypes(dsts, prog.out_dtypes, "program output")
            or _rank(prog, rank, load_specs))


def map_misfit(spec: Map, dsts: Sequence[Array], operands: Sequence[Array]) -> Answer | None:
    """The refusal of a map call that does not fit: counts, the program's
    refusal rule over the loop's rank, then the loaded shapes."""
    if len(operands) != len(spec.loads) or len(dsts) != spec.prog.n_outs or not operands:
        return Answer.BAD_ARITY
    shapes = [a.shape for a in operands]
    found = map_refusal(spec.prog, loop_rank(spec.loads, shapes), [d.dtype for d in dsts],
                        [a.dtype for a in operands], spec.loads)
    if found is not None:
        return found[0]
    return None if shapes_fit(dsts, map(spec, shapes)) else Answer.SHAPE_MISMATCH


def _refusal(spec: Map, shapes: Sequence[Shape], loads: Sequence[Dtype], dsts: Sequence[Dtype]
             ) -> Refusal | None:
    return map_refusal(spec.prog, loop_rank(spec.loads, shapes), dsts, loads, spec.loads)


#: ``S.map``.
MAP: Final = Kernel("map", Map, map, lambda spec, loads: spec.prog.out_dtypes, _refusal,
                    map_misfit)

"""Attention (``S.attention``): softmax-weighted values per query row, defined once."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Final, final

from .. import dtype as D
from ..answer import Answer
from ..dtype import Dtype
from .attributes import _bool, _fail, _int_field, _of, _set
from .loads import Load, _load_dtypes, _load_names, _loaded, _loads, _loads_arity, _rank
from .record import Error, Kernel, Refusal, Shape, Shapes, _answers, _fits, _Misfit, _operands, _results

if TYPE_CHECKING:
    from ..array import Array
    from ..prog import Prog

__all__ = ["ATTENTION", "Attention", "Dense", "Paged", "attention", "attention_misfit",
           "attention_refusal"]

@final
@dataclass(frozen=True, slots=True)
class Dense:
    """Keys k ``[lead…; hk; tk; dk]`` and values v ``[lead…; hk; tk; dv]``."""


@final
@dataclass(frozen=True, slots=True)
class Paged:
    """Pools k ``[pages; hk; page; dk]`` and v ``[pages; hk; page; dv]`` read
    through table ``[lead…; max_pages]``: key t of lead index b is the pools'
    entry ``table[b; t // page]`` at ``t % page``; tk = max_pages·page."""

    page: int

    def __post_init__(self) -> None:
        _int_field(self, "page", 1)


@final
@dataclass(frozen=True, slots=True)
class Attention:
    """``S.attention``: per query row, the log-sum-exp of program output 1 over
    its visible pairs and the values weighted by ``exp(x − lse)``.

    ``prog`` reads operand 0, the score (``scale`` × q·k in ``acc``, float32 or
    float64), and operand ``1 + i`` by ``loads[i]``; output 0 (bool, reading no
    score) says which pairs are visible, output 1 (in ``acc``) is the logit.
    Operands: q, k, v (Dense) or q, k_pool, v_pool, table (Paged), then lengths
    (int64) where ``lengths``, then one per load. Destinations: o, lse."""

    kernel: ClassVar[str] = "attention"
    prog: Prog
    loads: tuple[Load, ...]
    scale: float
    acc: Dtype
    kv: Dense | Paged
    lengths: bool = False

    def __post_init__(self) -> None:
        if self.prog.n_ins < 1:
            raise _fail(self, "the program takes no score (operand 0)")
        _set(self, "loads", _loads(self, self.loads, self.prog.n_ins - 1,
                                   "program inputs after the score"))
        if isinstance(self.scale, bool) or not isinstance(self.scale, int | float):
            raise _fail(self, f"scale must be a float, got {self.scale!r}")
        _set(self, "scale", float(self.scale))
        if math.isnan(self.scale):
            raise _fail(self, "scale is a NaN")
        if self.acc not in (D.float32, D.float64):
            raise _fail(self, f"acc must be float32 or float64, got {self.acc!r}")
        _of(self, "kv", self.kv, (Dense, Paged))
        _bool(self, "lengths", self.lengths)

    def n_operands(self) -> int:
        return (3 if isinstance(self.kv, Dense) else 4) + self.lengths + len(self.loads)

    def n_results(self) -> int:
        return 2


# --------------------------------------------------------------------------
# Rules
# --------------------------------------------------------------------------


@_answers
def attention(spec: Attention, shapes: Sequence[Sequence[int]]) -> Shapes:
    """Attention's o ``[lead…; hq; tq; dv]`` and lse ``[lead…; hq; tq]``.

    Operands: q ``[lead…; hq; tq; dk]``; Dense: k ``[lead…; hk; tk; dk]``, v
    ``[lead…; hk; tk; dv]``; Paged: k ``[pages; hk; page; dk]``, v ``[pages;
    hk; page; dv]`` (``page`` the spec's), table ``[lead…; max_pages]``, tk =
    max_pages·page; then lengths ``[lead…]`` where ``spec.lengths``; then one
    per load, each reading the loop's shape ``[lead…; hq; tq; tk]``. hk
    divides hq (0 divides only 0)."""
    paged = isinstance(spec.kv, Paged)
    kv_names = ["q", "k", "v"] + ["table"] * paged
    names = kv_names + ["lengths"] * spec.lengths + _load_names(len(spec.loads))
    ops = _operands(names, shapes)
    q, k, v = ops[0], ops[1], ops[2]
    if len(q) < 3:
        raise _Misfit(f"q {list(q)} must be [lead…; hq; tq; dk]")
    lead, (hq, tq, dk) = q[:-3], q[-3:]
    if isinstance(spec.kv, Paged):
        table = ops[3]
        if len(k) != 4 or k[2] != spec.kv.page or k[3] != dk:
            raise _Misfit(f"k {list(k)} must be [pages; hk; {spec.kv.page}; {dk}]")
        if len(v) != 4 or v[:3] != k[:3]:
            raise _Misfit(f"v {list(v)} must be [{k[0]}; {k[1]}; {k[2]}; dv]")
        if len(table) != len(lead) + 1 or table[:-1] != lead:
            raise _Misfit(f"table {list(table)} must be the lead extents {list(lead)} "
                          "then max_pages")
        hk, tk = k[1], table[-1] * spec.kv.page
    else:
        if len(k) != len(q) or k[:-3] != lead or k[-1] != dk:
            raise _Misfit(f"k {list(k)} must be [lead…; hk; tk; {dk}], lead {list(lead)}")
        if len(v) != len(k) or v[:-1] != k[:-1]:
            raise _Misfit(f"v {list(v)} must be k's {list(k[:-1])} then dv")
        hk, tk = k[-3], k[-2]
    if not (hq % hk == 0 if hk else hq == 0):
        raise _Misfit(f"{hk} key heads do not divide {hq} query heads")
    rest = ops[len(kv_names):]
    if spec.lengths:
        if rest[0] != lead:
            raise _Misfit(f"lengths {list(rest[0])} must be the lead extents {list(lead)}")
        rest = rest[1:]
    loop = _fits("the loop", (*lead, hq, tq, tk))
    for i, (s, load) in enumerate(zip(rest, spec.loads, strict=True)):
        got = _loaded(s, load)
        if got != loop:
            raise _Misfit(f"load {i} reads {list(got)}, the loop is {list(loop)}")
    return _results((*lead, hq, tq, v[-1]), (*lead, hq, tq))


def attention_refusal(prog: Prog, q: Dtype, rank: int, o: Dtype, acc: Dtype,
                      loads: Sequence[Dtype], load_specs: Sequence[Load]) -> Refusal | None:
    """As ``map_refusal`` for ``attention``'s program ``prog`` over loads of
    dtypes ``loads``, a query of dtype ``q`` and rank ``rank`` (the loop's), o
    of dtype ``o`` and lse of dtype ``acc``.

    - BAD_ARITY: program inputs not the score then one per load; load specs not
      one per load; program outputs not two; output 0 reading the score.
    - WRONG_DTYPE: ``acc`` not float32 or float64; q or o not a float; the
      score (program input 0) not of ``acc``; load ``i`` not of program input
      ``1 + i`` or its fill not one element; output 0 not bool; output 1 not of
      ``acc``.
    - SHAPE_MISMATCH: a rank outside [3, 32]; a Padded load not reading the
      rank; a Coord axis at or past it.
    """
    if prog.n_ins < 1:
        return Answer.BAD_ARITY, "the program reads no score (input 0)"
    if prog.n_outs != 2:
        return Answer.BAD_ARITY, f"the program has {prog.n_outs} outputs, not 2"
    found = (_loads_arity(prog, loads, load_specs, 1)
             or (None if not prog.reads(0, 0) else
                 (Answer.BAD_ARITY, "output 0 (visibility) reads the score")))
    if found:
        return found
    if acc not in (D.float32, D.float64):
        return Answer.WRONG_DTYPE, f"the accumulator is {acc.name}, not float32 or float64"
    for name, dt in (("q", q), ("o", o)):
        if not dt.is_float:
            return Answer.WRONG_DTYPE, f"{name} is {dt.name}, not a float"
    if prog.ins[0] != acc:
        return Answer.WRONG_DTYPE, f"the score is {prog.ins[0].name}, the accumulator {acc.name}"
    found = _load_dtypes(prog, loads, load_specs, 1)
    if not found and prog.out_dtypes[0] != D.bool_:
        found = Answer.WRONG_DTYPE, f"output 0 is {prog.out_dtypes[0].name}, not bool"
    if not found and prog.out_dtypes[1] != acc:
        found = (Answer.WRONG_DTYPE,
                 f"output 1 is {prog.out_dtypes[1].name}, the accumulator {acc.name}")
    return found or _rank(prog, rank, load_specs, least=3)


def attention_misfit(spec: Attention, dsts: Sequence[Array], operands: Sequence[Array]
                     ) -> Answer | None:
    """The refusal of an attention call that does not fit: the spec's counts
    and two destinations, ``Shape.attention``'s shapes, the program's rule
    (``shape.attention_refusal`` over a loop of q's rank), k and v floats, o
    of v's dtype, lse of the accumulator, table and lengths int64, and o and
    lse of the result's shapes."""
    if len(operands) != spec.n_operands() or len(dsts) != 2:
        return Answer.BAD_ARITY
    shapes = attention(spec, [a.shape for a in operands])
    if isinstance(shapes, Error):
        return Answer.SHAPE_MISMATCH
    n_kv = 3 if isinstance(spec.kv, Dense) else 4
    first = n_kv + spec.lengths
    refusal = attention_refusal(spec.prog, operands[0].dtype, operands[0].rank, dsts[0].dtype,
                                spec.acc, [a.dtype for a in operands[first:]], spec.loads)
    if refusal is not None:
        return refusal[0]
    k, v = operands[1], operands[2]
    if not (k.dtype.is_float and v.dtype.is_float) or dsts[0].dtype is not v.dtype:
        return Answer.WRONG_DTYPE
    if dsts[1].dtype is not spec.acc:
        return Answer.WRONG_DTYPE
    if n_kv == 4 and operands[3].dtype is not D.int64:
        return Answer.WRONG_DTYPE
    if spec.lengths and operands[n_kv].dtype is not D.int64:
        return Answer.WRONG_DTYPE
    if any(tuple(d.shape) != tuple(s) for d, s in zip(dsts, shapes, strict=True)):
        return Answer.SHAPE_MISMATCH
    return None


# --------------------------------------------------------------------------
# The record
# --------------------------------------------------------------------------


def _attention_rule(spec: Attention, shapes: Sequence[Shape], loads: Sequence[Dtype],
                    dsts: Sequence[Dtype]) -> Refusal | None:
    first = (4 if isinstance(spec.kv, Paged) else 3) + spec.lengths
    return attention_refusal(spec.prog, loads[0], len(shapes[0]), dsts[0], spec.acc,
                             loads[first:], spec.loads)


#: ``S.attention``: o of v's dtype, lse of the accumulator.
ATTENTION: Final = Kernel("attention", Attention, attention,
                          lambda spec, loads: (loads[2], spec.acc), _attention_rule,
                          attention_misfit)

"""``Prog``: an immutable, validated program (see the package's doc)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import final

from .. import dtype as D
from ..dtype import Dtype
from .builder import Builder
from .byteform import _decode, _encode
from .elements import element, short_name
from .kinds import Convert, Nullary, Op2Kind, Ternary, Unary, accepts
from .nodes import MAX_OPERANDS, Const, Coord, In, Node, Op1, Op2, Op3, _check_node, _fail

__all__ = ["Prog"]


@final
@dataclass(frozen=True, slots=True, eq=False)
class Prog:
    """An immutable, validated program (see the module's doc).

    Valid means: at least one output; ``n_ins + n_outs <= MAX_OPERANDS``;
    every node refers to earlier nodes only, ``In`` to an operand, ``Coord``
    to an axis below ``MAX_RANK``; a ``Const`` has its dtype's number of
    bytes (a sub-byte one no bit above its width, a bool one the byte 0 or
    1); each kind takes its
    operands' dtypes (``accepts``); ``Op1``'s dtype is its operand's for Copy
    and Unary; ``Op2``'s and Fma's operands share one dtype, Where's ``x`` and
    ``y`` one dtype and its condition a boolean one. Violations raise
    ``ValueError`` starting ``"Prog: "``.
    """

    ins: tuple[Dtype, ...]
    nodes: tuple[Node, ...]
    outs: tuple[int, ...]
    _dtypes: tuple[Dtype, ...] = field(init=False, repr=False)
    _deps: tuple[int, ...] = field(init=False, repr=False)
    _bytes: bytes = field(init=False, repr=False)

    def __init__(self, ins: Sequence[Dtype], nodes: Sequence[Node], outs: Sequence[int]) -> None:
        ins_t, nodes_t, outs_t = tuple(ins), tuple(nodes), tuple(int(o) for o in outs)
        for dt in ins_t:
            if not isinstance(dt, Dtype):
                raise _fail(f"an input dtype is {dt!r}, not a Dtype")
        if not outs_t:
            raise _fail("a program needs at least one output")
        if len(ins_t) + len(outs_t) > MAX_OPERANDS:
            raise _fail(f"{len(ins_t)} operands and {len(outs_t)} outputs exceed "
                        f"MAX_OPERANDS = {MAX_OPERANDS}")
        dtypes: list[Dtype] = []
        deps: list[int] = []
        for i, node in enumerate(nodes_t):
            dt, dep = _check_node(i, node, ins_t, dtypes, deps)
            dtypes.append(dt)
            deps.append(dep)
        for o in outs_t:
            if not 0 <= o < len(nodes_t):
                raise _fail(f"output %{o} is not a node (there are {len(nodes_t)})")
        object.__setattr__(self, "ins", ins_t)
        object.__setattr__(self, "nodes", nodes_t)
        object.__setattr__(self, "outs", outs_t)
        object.__setattr__(self, "_dtypes", tuple(dtypes))
        object.__setattr__(self, "_deps", tuple(deps))
        object.__setattr__(self, "_bytes", _encode(ins_t, nodes_t, outs_t, dtypes))

    # -- reading ----------------------------------------------------------

    @property
    def n_ins(self) -> int:
        """The number of operands."""
        return len(self.ins)

    @property
    def n_outs(self) -> int:
        """The number of outputs."""
        return len(self.outs)

    def dtype(self, node: int) -> Dtype:
        """The dtype of node ``node``'s value."""
        if not 0 <= node < len(self.nodes):
            raise ValueError(f"Prog.dtype: %{node} is not a node (there are {len(self.nodes)})")
        return self._dtypes[node]

    @property
    def out_dtypes(self) -> tuple[Dtype, ...]:
        """The outputs' dtypes, in output order."""
        return tuple(self._dtypes[o] for o in self.outs)

    @property
    def coord_axes(self) -> frozenset[int]:
        """The axes (counted from the last) that the program's Coord nodes read."""
        return frozenset(n.axis for n in self.nodes if isinstance(n, Coord))

    def reads(self, output: int, operand: int) -> bool:
        """Whether output ``output`` depends on ``In(operand)``."""
        if not 0 <= output < len(self.outs):
            raise ValueError(f"Prog.reads: output {output} is not in [0, {len(self.outs)})")
        if not 0 <= operand < len(self.ins):
            raise ValueError(f"Prog.reads: operand {operand} is not in [0, {len(self.ins)})")
        return bool(self._deps[self.outs[output]] >> operand & 1)

    # -- bytes ------------------------------------------------------------

    def to_bytes(self) -> bytes:
        """The program's bytes (little-endian): int32 counts of operands,
        nodes and outputs and a zero word; the operands' dtype codes (int32);
        one 40-byte record per node (int32 tag, kind, dtype, three operand
        indices, 16 bytes of constant bits); the outputs (int32)."""
        return self._bytes

    @staticmethod
    def from_bytes(b: bytes) -> Prog:
        """The program whose bytes are ``b``; ``ValueError`` unless ``b`` is
        exactly the bytes of a valid program."""
        b = bytes(b)
        p = Prog(*_decode(b))
        if p.to_bytes() != b:
            raise _fail("the bytes are not in canonical form (a stray field or dtype)")
        return p

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Prog) and self._bytes == other._bytes

    def __hash__(self) -> int:
        return hash(self._bytes)

    def __str__(self) -> str:
        ins = ", ".join(short_name(dt) for dt in self.ins)
        lines = [f"prog ({ins})"]
        lines += [f"  %{i} = {_show(n, self._dtypes[i])}" for i, n in enumerate(self.nodes)]
        lines.append("  out " + ", ".join(f"%{o}" for o in self.outs))
        return "\n".join(lines)

    # -- making -----------------------------------------------------------

    @staticmethod
    def build(ins: Sequence[Dtype]) -> Builder:
        """A builder over operands of dtypes ``ins``; its ``ins`` are their values."""
        return Builder(ins, Prog)

    @staticmethod
    def unary(kind: Unary, dt: Dtype) -> Prog:
        """``kind`` of one operand of ``dt`` (made once per kind and dtype)."""
        return _unary(kind, dt)

    @staticmethod
    def binary(kind: Op2Kind, dt: Dtype) -> Prog:
        """``kind`` (Binary or Compare) of two operands of ``dt`` (made once
        per kind and dtype)."""
        return _binary(kind, dt)

    @staticmethod
    def identity(dt: Dtype) -> Prog:
        """Copy of one operand of ``dt`` (made once per dtype)."""
        return _op1(Convert.COPY, dt, dt)

    @staticmethod
    def cast(src: Dtype, dst: Dtype) -> Prog:
        """Cast of one operand of ``src`` into ``dst`` (made once per pair)."""
        return _op1(Convert.CAST, src, dst)

    @staticmethod
    def bitcast(src: Dtype, dst: Dtype) -> Prog:
        """Bitcast of one operand of ``src`` into ``dst`` of the same width."""
        return Prog((src,), (In(0), Op1(Convert.BITCAST, dst, 0)), (1,))

    @staticmethod
    def where(dt: Dtype) -> Prog:
        """Where over a bool and two operands of ``dt`` (made once per dtype)."""
        return _where(dt)

    @staticmethod
    def fma(dt: Dtype) -> Prog:
        """``a * x + y`` rounded once, over three operands of ``dt``."""
        return Prog((dt, dt, dt), (In(0), In(1), In(2), Op3(Ternary.FMA, 0, 1, 2)), (3,))

    @staticmethod
    def fill(dt: Dtype, b: bytes) -> Prog:
        """Fill: the element of ``dt`` whose bits are ``b`` at every index."""
        return Prog((), (Const(dt, b),), (0,))

    @staticmethod
    def iota(dt: Dtype, axis: int) -> Prog:
        """Iota: each index along ``axis`` (from the last), cast into ``dt``
        (floats and integers)."""
        if not accepts(Nullary.IOTA, dt):
            raise _fail(f"iota takes floats and integers, not {dt.name}")
        return Prog((), (Coord(axis), Op1(Convert.CAST, dt, 0)), (1,))


def _show(n: Node, dt: Dtype) -> str:
    """One node as ``kind dtype operands``."""
    name = short_name(dt)
    if isinstance(n, In):
        return f"in {n.index} {name}"
    if isinstance(n, Coord):
        return f"coord {n.axis} {name}"
    if isinstance(n, Const):
        v = element(dt, n.bits)
        return f"const {name} 0x{n.bits[::-1].hex()} ({v.item()!r})"
    if isinstance(n, Op1):
        return f"{n.kind.name.lower()} {name} %{n.x}"
    if isinstance(n, Op2):
        return f"{n.kind.name.lower()} {name} %{n.x} %{n.y}"
    return f"{n.kind.name.lower()} {name} %{n.c} %{n.x} %{n.y}"


# --------------------------------------------------------------------------
# The programs the conveniences build at every call
# --------------------------------------------------------------------------


# The programs the conveniences build at every call, each made once (a
# program is immutable; building and encoding one costs microseconds).


@functools.lru_cache(maxsize=256)
def _unary(kind: Unary, dt: Dtype) -> Prog:
    return Prog((dt,), (In(0), Op1(kind, dt, 0)), (1,))


@functools.lru_cache(maxsize=256)
def _binary(kind: Op2Kind, dt: Dtype) -> Prog:
    return Prog((dt, dt), (In(0), In(1), Op2(kind, 0, 1)), (2,))


@functools.lru_cache(maxsize=512)
def _op1(kind: Convert, src: Dtype, dst: Dtype) -> Prog:
    return Prog((src,), (In(0), Op1(kind, dst, 0)), (1,))


@functools.lru_cache(maxsize=64)
def _where(dt: Dtype) -> Prog:
    return Prog((D.bool_, dt, dt), (In(0), In(1), In(2), Op3(Ternary.WHERE, 0, 1, 2)), (3,))

"""A program's nodes, and the check each node passes when it is added."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, TypeAlias, final

from .. import dtype as D
from ..dtype import Dtype
from ..layout import MAX_RANK
from .elements import Scalar, _elem_bytes, bits
from .kinds import AnyKind, Binary, Compare, Convert, Op1Kind, Op2Kind, Ternary, Unary, accepts

__all__ = ["MAX_OPERANDS", "Const", "Coord", "In", "Node", "Op1", "Op2", "Op3", "operands_of"]

#: The most operands plus outputs a program has.
MAX_OPERANDS: Final = 16


@final
@dataclass(frozen=True, slots=True)
class In:
    """Operand ``index`` at the loop's index."""

    index: int


@final
@dataclass(frozen=True, slots=True)
class Coord:
    """The loop's index along ``axis``, counted from the last axis, as int64."""

    axis: int


@final
@dataclass(frozen=True, slots=True)
class Const:
    """One element of ``dtype`` whose bits are ``bits`` (``prog.bits``)."""

    dtype: Dtype
    bits: bytes

    @staticmethod
    def of(dt: Dtype, value: Scalar) -> Const:
        """The constant ``value`` stored into ``dt`` by the store rule."""
        return Const(dt, bits(dt, value))


@final
@dataclass(frozen=True, slots=True)
class Op1:
    """``kind`` of node ``x``, of dtype ``dtype``: x's for Copy and Unary."""

    kind: Op1Kind
    dtype: Dtype
    x: int


@final
@dataclass(frozen=True, slots=True)
class Op2:
    """``kind`` of nodes ``x`` and ``y`` of one dtype."""

    kind: Op2Kind
    x: int
    y: int


@final
@dataclass(frozen=True, slots=True)
class Op3:
    """Where (``x`` if bool ``c`` else ``y``) or Fma (``c * x + y``)."""

    kind: Ternary
    c: int
    x: int
    y: int


Node: TypeAlias = In | Coord | Const | Op1 | Op2 | Op3


def operands_of(node: Node) -> tuple[int, ...]:
    """The nodes ``node`` reads, in its operation's order: none for In, Coord
    and Const."""
    if isinstance(node, Op1):
        return (node.x,)
    if isinstance(node, Op2):
        return (node.x, node.y)
    if isinstance(node, Op3):
        return (node.c, node.x, node.y)
    return ()


def _fail(msg: str) -> ValueError:
    """The ValueError of an invalid program, its message starting ``Prog: ``."""
    return ValueError(f"Prog: {msg}")


def _check_node(i: int, node: Node, ins: tuple[Dtype, ...], dtypes: list[Dtype],
                deps: list[int]) -> tuple[Dtype, int]:
    """Node ``i``'s dtype and the mask of operands it depends on, or raise."""

    def ref(j: int) -> int:
        if not isinstance(j, int) or not 0 <= j < i:
            raise _fail(f"node %{i} refers to %{j}, not an earlier node")
        return j

    def kind_name(k: AnyKind) -> str:
        return k.name.lower()

    if isinstance(node, In):
        if not 0 <= node.index < len(ins):
            raise _fail(f"node %{i} reads operand {node.index}, not in [0, {len(ins)})")
        return ins[node.index], 1 << node.index
    if isinstance(node, Coord):
        if not 0 <= node.axis < MAX_RANK:
            raise _fail(f"node %{i} reads axis {node.axis}, not in [0, {MAX_RANK})")
        return D.int64, 0
    if isinstance(node, Const):
        dt = node.dtype
        if not isinstance(dt, Dtype):
            raise _fail(f"node %{i} is a constant of {dt!r}, not a Dtype")
        if not isinstance(node.bits, bytes) or len(node.bits) != _elem_bytes(dt):
            raise _fail(f"node %{i}: a {dt.name} constant takes {_elem_bytes(dt)} bytes")
        if dt.is_sub_byte and node.bits[0] >> dt.bits:
            raise _fail(f"node %{i}: a {dt.name} constant has bits above its {dt.bits}")
        if dt.is_bool and node.bits[0] > 1:
            # Upstream refuses it: a computed bool is 0 or 1, and a map
            # storing this constant would write another byte.
            raise _fail(f"node %{i}: a {dt.name} constant is byte 0 or 1, not {node.bits[0]:#04x}")
        return dt, 0
    if isinstance(node, Op1):
        x = ref(node.x)
        src, dst = dtypes[x], node.dtype
        if isinstance(node.kind, Unary) or node.kind is Convert.COPY:
            if dst is not src:
                raise _fail(f"node %{i}: {kind_name(node.kind)} of {src.name} has dtype "
                            f"{src.name}, not {getattr(dst, 'name', dst)}")
            if isinstance(node.kind, Unary) and not accepts(node.kind, src):
                raise _fail(f"node %{i}: {kind_name(node.kind)} does not take {src.name}")
        elif isinstance(node.kind, Convert):
            if not isinstance(dst, Dtype):
                raise _fail(f"node %{i}: {dst!r} is not a Dtype")
            if not accepts(node.kind, src, dst):
                raise _fail(f"node %{i}: bitcast of {src.name} ({src.bits} bits) into "
                            f"{dst.name} ({dst.bits} bits) changes the width")
        else:
            raise _fail(f"node %{i}: {node.kind!r} is not an Op1 kind")
        return dst, deps[x]
    if isinstance(node, Op2):
        x, y = ref(node.x), ref(node.y)
        dx, dy = dtypes[x], dtypes[y]
        if not isinstance(node.kind, Binary | Compare):
            raise _fail(f"node %{i}: {node.kind!r} is not an Op2 kind")
        if dx is not dy:
            raise _fail(f"node %{i}: {kind_name(node.kind)} of {dx.name} and {dy.name}; "
                        "the operands must share a dtype")
        if not accepts(node.kind, dx):
            raise _fail(f"node %{i}: {kind_name(node.kind)} does not take {dx.name}")
        return (D.bool_ if isinstance(node.kind, Compare) else dx), deps[x] | deps[y]
    if isinstance(node, Op3):
        c, x, y = ref(node.c), ref(node.x), ref(node.y)
        dc, dx, dy = dtypes[c], dtypes[x], dtypes[y]
        if node.kind is Ternary.WHERE:
            if not dc.is_bool:
                raise _fail(f"node %{i}: where's condition is {dc.name}, not a boolean")
            if dx is not dy:
                raise _fail(f"node %{i}: where of {dx.name} and {dy.name}; "
                            "the operands must share a dtype")
        elif node.kind is Ternary.FMA:
            if not (dc is dx and dx is dy):
                raise _fail(f"node %{i}: fma of {dc.name}, {dx.name} and {dy.name}; "
                            "the operands must share a dtype")
            if not accepts(Ternary.FMA, dx):
                raise _fail(f"node %{i}: fma does not take {dx.name}")
        else:
            raise _fail(f"node %{i}: {node.kind!r} is not an Op3 kind")
        return dx, deps[c] | deps[x] | deps[y]
    raise _fail(f"node %{i} is {node!r}, not a node")

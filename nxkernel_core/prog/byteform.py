"""A program's byte form: ``Prog.to_bytes``'s layout, written and read."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Final

from .. import dtype as D
from ..dtype import Dtype
from .elements import _elem_bytes
from .kinds import AnyKind, Binary, Compare, Convert, Ternary, Unary
from .nodes import Const, Coord, In, Node, Op1, Op2, Op3, _fail

_HEADER: Final = struct.Struct("<4i")
_RECORD: Final = struct.Struct("<6i16s")  # tag, kind, dtype, a, b, c, const bits
_TAG: Final[dict[type, int]] = {In: 0, Coord: 1, Const: 2, Op1: 3, Op2: 4, Op3: 5}
_FAMILY: Final[dict[type, int]] = {Unary: 0, Binary: 32, Compare: 64, Convert: 96, Ternary: 128}
_KIND_OF_CODE: Final[dict[int, AnyKind]] = {
    **{_FAMILY[Unary] + k.value: k for k in Unary},
    **{_FAMILY[Binary] + k.value: k for k in Binary},
    **{_FAMILY[Compare] + k.value: k for k in Compare},
    **{_FAMILY[Convert] + k.value: k for k in Convert},
    **{_FAMILY[Ternary] + k.value: k for k in Ternary},
}


def _kind_code(kind: AnyKind) -> int:
    """A node kind's int32 code in the bytes: its family's base plus its value."""
    return _FAMILY[type(kind)] + int(kind.value)


def _encode(ins: tuple[Dtype, ...], nodes: tuple[Node, ...], outs: tuple[int, ...],
            dtypes: Sequence[Dtype]) -> bytes:
    """The bytes of a valid program, as ``Prog.to_bytes`` lays them out."""
    parts = [_HEADER.pack(len(ins), len(nodes), len(outs), 0)]
    parts.append(struct.pack(f"<{len(ins)}i", *(dt.code for dt in ins)))
    for n, dt in zip(nodes, dtypes, strict=True):
        kind, a, b, c, const = -1, -1, -1, -1, b""
        if isinstance(n, In):
            a = n.index
        elif isinstance(n, Coord):
            a = n.axis
        elif isinstance(n, Const):
            const = n.bits
        elif isinstance(n, Op1):
            kind, a = _kind_code(n.kind), n.x
        elif isinstance(n, Op2):
            kind, a, b = _kind_code(n.kind), n.x, n.y
        else:
            kind, a, b, c = _kind_code(n.kind), n.c, n.x, n.y
        parts.append(_RECORD.pack(_TAG[type(n)], kind, dt.code, a, b, c, const))
    parts.append(struct.pack(f"<{len(outs)}i", *outs))
    return b"".join(parts)


def _decode(b: bytes) -> tuple[list[Dtype], list[Node], tuple[int, ...]]:
    """The operands' dtypes, nodes and outputs that the bytes ``b`` lay out, or
    ``ValueError``; ``Prog.from_bytes`` checks that ``b`` is their canonical form."""
    if len(b) < _HEADER.size:
        raise _fail(f"{len(b)} bytes are too few for a program's header")
    n_ins, n_nodes, n_outs, zero = _HEADER.unpack_from(b, 0)
    if zero != 0 or min(n_ins, n_nodes, n_outs) < 0:
        raise _fail("the header's counts are negative or its fourth word is not zero")
    size = _HEADER.size + 4 * n_ins + _RECORD.size * n_nodes + 4 * n_outs
    if len(b) != size:
        raise _fail(f"{len(b)} bytes, but the header's counts take {size}")
    pos = _HEADER.size
    codes = struct.unpack_from(f"<{n_ins}i", b, pos)
    pos += 4 * n_ins

    def dtype_of(code: int) -> Dtype:
        if not 0 <= code < len(D.all):
            raise _fail(f"dtype code {code} is not in [0, {len(D.all)})")
        return D.all[code]

    def kind_of(code: int, family: tuple[type, ...]) -> AnyKind:
        k = _KIND_OF_CODE.get(code)
        if k is None or not isinstance(k, family):
            raise _fail(f"kind code {code} is not a kind of its node")
        return k

    ins = [dtype_of(c) for c in codes]
    nodes: list[Node] = []
    for _ in range(n_nodes):
        tag, kind, dt, a, b_, c, const = _RECORD.unpack_from(b, pos)
        pos += _RECORD.size
        node_dt = dtype_of(dt)
        node: Node
        if tag == 0:
            node = In(a)
        elif tag == 1:
            node = Coord(a)
        elif tag == 2:
            node = Const(node_dt, const[: _elem_bytes(node_dt)])
        elif tag == 3:
            node = Op1(kind_of(kind, (Unary, Convert)), node_dt, a)  # type: ignore[arg-type]
        elif tag == 4:
            node = Op2(kind_of(kind, (Binary, Compare)), a, b_)  # type: ignore[arg-type]
        elif tag == 5:
            node = Op3(kind_of(kind, (Ternary,)), a, b_, c)  # type: ignore[arg-type]
        else:
            raise _fail(f"node tag {tag} is not in [0, 6)")
        nodes.append(node)
    outs = struct.unpack_from(f"<{n_outs}i", b, pos)
    return ins, nodes, outs

"""Programs: what a loop computes from one element of each of its operands.

A program (``Prog``) is a list of nodes and a tuple of outputs. Node ``i``
refers only to nodes before it, by index:

- ``In(index)``: operand ``index`` at the loop's index, of dtype ``ins[index]``;
- ``Coord(axis)``: the loop's index along ``axis``, counted from the last
  axis (0 is the last), as an int64;
- ``Const(dtype, bits)``: one element, its bits little-endian, a sub-byte
  element in the low bits of one byte;
- ``Op1(kind, dtype, x)``: a unary kind (``Unary``) or a conversion
  (``Convert``: Copy, Cast, Bitcast) of node ``x`` into ``dtype``;
- ``Op2(kind, x, y)``: a ``Binary`` or ``Compare`` kind of two nodes of one
  dtype;
- ``Op3(kind, c, x, y)``: ``Where`` (``x`` where the bool ``c`` holds, else
  ``y``) or ``Fma`` (``c * x + y`` with one rounding).

Each node's value is its exact result rounded once to the node's dtype
(``nxkernel_core.reference`` is the oracle). ``Fill`` and ``Iota``
(``Nullary``) are not nodes: ``Prog.fill`` is a program of one ``Const`` and
``Prog.iota`` a ``Coord`` cast to the dtype; they keep their domains.

A program is immutable and validated when made; it serialises to bytes
(``to_bytes``), and two programs are equal, and hash alike, iff their bytes
are equal. Build one with ``Prog.build`` and arithmetic on its values::

    b = Prog.build([D.float32, D.float32])
    x, y = b.ins
    p = b.finish(b.exp(x) * y + 1.0)
"""

from __future__ import annotations

import enum
import functools
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final, TypeAlias, final

import numpy as np
import numpy.typing as npt

from . import dtype as D
from .dtype import Dtype, Kind
from .layout import MAX_RANK

__all__ = [
    "MAX_OPERANDS",
    "TRANSCENDENTAL",
    "Binary",
    "Builder",
    "Compare",
    "Const",
    "Convert",
    "Coord",
    "In",
    "Node",
    "Nullary",
    "Op1",
    "Op1Kind",
    "Op2",
    "Op2Kind",
    "Op3",
    "Prog",
    "Scalar",
    "Ternary",
    "Unary",
    "Value",
    "accepts",
    "bits",
    "element",
    "short_name",
]

#: The most operands plus outputs a program has.
MAX_OPERANDS: Final = 16


# --------------------------------------------------------------------------
# Kinds and their domains
# --------------------------------------------------------------------------


class Unary(enum.Enum):
    """Kinds of one operand, keeping its dtype."""

    NEG = 0
    RECIP = 1
    ABS = 2
    SIGN = 3
    SQRT = 4
    EXP = 5
    EXP2 = 6
    LOG = 7
    LOG2 = 8
    LOG1P = 9
    EXPM1 = 10
    SIN = 11
    COS = 12
    TAN = 13
    ASIN = 14
    ACOS = 15
    ATAN = 16
    SINH = 17
    COSH = 18
    TANH = 19
    ERF = 20
    FLOOR = 21
    CEIL = 22
    ROUND = 23
    TRUNC = 24


class Binary(enum.Enum):
    """Kinds of two operands of one dtype, keeping it. Integers wrap."""

    ADD = 0
    SUB = 1
    MUL = 2
    FDIV = 3
    IDIV = 4
    MOD = 5
    POW = 6
    ATAN2 = 7
    MAXIMUM = 8
    MINIMUM = 9
    AND = 10
    OR = 11
    XOR = 12
    THREEFRY = 13


class Compare(enum.Enum):
    """Comparisons of two operands of one dtype; the result is bool."""

    EQUAL = 0
    NOT_EQUAL = 1
    LESS = 2
    LESS_EQUAL = 3


class Convert(enum.Enum):
    """The kinds of ``Op1`` besides ``Unary``: Copy keeps the bits and the
    dtype, Cast converts the value (upstream §3 "Cast"), Bitcast keeps the bits
    in a dtype of the same width."""

    COPY = 0
    CAST = 1
    BITCAST = 2


class Ternary(enum.Enum):
    """Kinds of ``Op3``: Where picks ``x`` where its bool holds, else ``y``;
    Fma is ``c * x + y`` rounded once (wrapping on integers)."""

    WHERE = 0
    FMA = 1


class Nullary(enum.Enum):
    """Kinds of no operand: Fill stores one element, Iota each index along an
    axis (made as programs by ``Prog.fill`` and ``Prog.iota``)."""

    FILL = 0
    IOTA = 1


Op1Kind: TypeAlias = Unary | Convert
Op2Kind: TypeAlias = Binary | Compare
AnyKind: TypeAlias = Unary | Binary | Compare | Convert | Ternary | Nullary

#: The transcendental unary kinds (floats only, bounded in ulps, not exact).
TRANSCENDENTAL: Final[frozenset[Unary]] = frozenset({
    Unary.EXP, Unary.EXP2, Unary.LOG, Unary.LOG2, Unary.LOG1P, Unary.EXPM1,
    Unary.SIN, Unary.COS, Unary.TAN, Unary.ASIN, Unary.ACOS, Unary.ATAN,
    Unary.SINH, Unary.COSH, Unary.TANH, Unary.ERF,
})

_NOT_BOOL: Final = frozenset({Kind.FLOAT, Kind.SIGNED, Kind.UNSIGNED, Kind.COMPLEX})
_REAL: Final = frozenset({Kind.FLOAT, Kind.SIGNED, Kind.UNSIGNED})
_INT: Final = frozenset({Kind.SIGNED, Kind.UNSIGNED})
_FLOAT: Final = frozenset({Kind.FLOAT})
_EVERY: Final = frozenset(Kind)

_DOMAIN: Final[dict[AnyKind, frozenset[Kind]]] = {
    Unary.NEG: _NOT_BOOL, Unary.RECIP: _NOT_BOOL,
    Unary.ABS: _REAL, Unary.SIGN: _REAL, Unary.FLOOR: _REAL, Unary.CEIL: _REAL,
    Unary.ROUND: _REAL, Unary.TRUNC: _REAL, Unary.SQRT: _FLOAT,
    **{u: _FLOAT for u in TRANSCENDENTAL},
    Binary.ADD: _NOT_BOOL, Binary.SUB: _NOT_BOOL, Binary.MUL: _NOT_BOOL,
    Binary.FDIV: frozenset({Kind.FLOAT, Kind.COMPLEX}), Binary.IDIV: _INT,
    Binary.MOD: _REAL, Binary.POW: _REAL, Binary.ATAN2: _FLOAT,
    Binary.MAXIMUM: _EVERY, Binary.MINIMUM: _EVERY,
    Binary.AND: frozenset({Kind.SIGNED, Kind.UNSIGNED, Kind.BOOLEAN}),
    Binary.OR: frozenset({Kind.SIGNED, Kind.UNSIGNED, Kind.BOOLEAN}),
    Binary.XOR: frozenset({Kind.SIGNED, Kind.UNSIGNED, Kind.BOOLEAN}),
    **{c: _EVERY for c in Compare},
    Ternary.WHERE: _EVERY, Ternary.FMA: _REAL,
    Nullary.FILL: _EVERY, Nullary.IOTA: _REAL,
}


def accepts(kind: AnyKind, dt: Dtype, dst: Dtype | None = None) -> bool:
    """Whether ``kind`` takes operands of ``dt`` (upstream §3 "Domains").

    Neg, Recip, Add, Sub, Mul: every dtype but booleans. Fdiv: floats and
    complex. Idiv: integers. Abs, Sign, Floor, Ceil, Round, Trunc, Mod, Pow,
    Fma: floats and integers. Sqrt, Atan2 and the transcendentals: floats.
    And, Or, Xor: integers and booleans. Threefry: uint64. Maximum, Minimum,
    the comparisons, Where (its ``x`` and ``y``; its condition is a boolean)
    and Fill: every dtype. Iota: floats and integers.

    For a conversion ``dst`` is the result's dtype (``dt`` when omitted):
    Copy takes ``dst == dt``, Cast any pair, Bitcast a pair of one width.
    Other kinds take no ``dst``.
    """
    if isinstance(kind, Convert):
        to = dt if dst is None else dst
        if kind is Convert.COPY:
            return to is dt
        if kind is Convert.BITCAST:
            return to.bits == dt.bits
        return True
    if dst is not None:
        raise ValueError(f"prog.accepts: {kind.name.lower()} takes one dtype, not a pair")
    if kind is Binary.THREEFRY:
        return dt is D.uint64
    return dt.kind in _DOMAIN[kind]


# --------------------------------------------------------------------------
# Elements
# --------------------------------------------------------------------------

#: A Python value ``bits`` and ``Builder.const`` store into a dtype.
Scalar: TypeAlias = bool | int | float | complex | np.generic


def _elem_bytes(dt: Dtype) -> int:
    """Bytes of one element's bits: one for a sub-byte dtype."""
    return max(1, dt.bits // 8)


def _real_element(dt: Dtype, v: bool | int | float) -> npt.NDArray[np.generic]:
    """``v`` stored into real (non-complex) ``dt`` as a 1-element array."""
    if dt.kind is Kind.BOOLEAN:
        return np.array([v != 0], dtype=np.bool_)
    if isinstance(v, bool):
        v = int(v)
    if isinstance(v, int):
        if dt.is_int:
            lo, hi = dt.int_range
            return np.array([min(max(v, lo), hi)]).astype(dt.numpy_dtype)
        # An exact integer into a float rounds once (of_fraction), then stores exactly.
        return D.of_float(dt, [D.of_fraction(dt, v)])
    return D.of_float(dt, [v])


def bits(dt: Dtype, value: Scalar) -> bytes:
    """The bits of ``value`` stored into ``dt`` by the store rule (upstream §5),
    little-endian, a sub-byte element in the low bits of one byte.

    Floats round once, ties to even, with the dtype's overflow rule; an exact
    Python int rounds once from its exact value. Integers truncate toward zero
    and saturate (an int value saturates to the range). Bool is ``value != 0``
    (NaN is true). Complex takes a complex value part by part, a real value as
    its real part.
    """
    if isinstance(value, np.generic):
        item = value.item()
        if not isinstance(item, bool | int | float | complex):
            raise ValueError(f"prog.bits: {value!r} is not a number")
        value = item
    if dt.kind is Kind.COMPLEX:
        part = D.float32 if dt is D.complex64 else D.float64
        c = complex(value)
        re = _real_element(part, c.real)
        im = _real_element(part, c.imag)
        return re.tobytes() + im.tobytes()
    if isinstance(value, complex):
        raise ValueError(f"prog.bits: complex {value!r} does not store into {dt.name}")
    elem = _real_element(dt, value)
    if dt.is_sub_byte:
        return D.pack(dt, elem).tobytes()
    return elem.tobytes()


def element(dt: Dtype, b: bytes) -> npt.NDArray[np.generic]:
    """The element whose bits are ``b`` (as ``bits`` lays them out), as a 0-d
    array of ``dt.numpy_dtype``, bits unchanged (a bool keeps its byte)."""
    if len(b) != _elem_bytes(dt):
        raise ValueError(f"prog.element: {dt.name} takes {_elem_bytes(dt)} bytes, got {len(b)}")
    raw = np.frombuffer(b, dtype=np.uint8)
    if dt.is_sub_byte:
        return D.unpack(dt, raw, 0)
    return raw.view(dt.numpy_dtype).reshape(()).copy()


_SHORT: Final[dict[Dtype, str]] = {
    D.float64: "f64", D.float32: "f32", D.float16: "f16", D.bfloat16: "bf16",
    D.float8_e4m3fn: "e4m3fn", D.float8_e5m2: "e5m2", D.float4_e2m1fn: "e2m1fn",
    D.int64: "i64", D.uint64: "u64", D.int32: "i32", D.uint32: "u32",
    D.int16: "i16", D.uint16: "u16", D.int8: "i8", D.uint8: "u8",
    D.int4: "i4", D.uint4: "u4", D.complex128: "c128", D.complex64: "c64",
    D.bool_: "bool", D.bit: "bit",
}


def short_name(dt: Dtype) -> str:
    """The short name programs print for ``dt`` (f32, u8, c64, bool, ...)."""
    return _SHORT[dt]


# --------------------------------------------------------------------------
# Nodes
# --------------------------------------------------------------------------


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


# --------------------------------------------------------------------------
# Serialisation
# --------------------------------------------------------------------------

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


def _fail(msg: str) -> ValueError:
    """The ValueError of an invalid program, its message starting ``Prog: ``."""
    return ValueError(f"Prog: {msg}")


# --------------------------------------------------------------------------
# Programs
# --------------------------------------------------------------------------


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
        return _decode(bytes(b))

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
        return Builder(ins)

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


def _decode(b: bytes) -> Prog:
    """The program whose canonical bytes are ``b``, or ``ValueError``."""
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
    p = Prog(ins, nodes, outs)
    if p.to_bytes() != b:
        raise _fail("the bytes are not in canonical form (a stray field or dtype)")
    return p


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
# The builder
# --------------------------------------------------------------------------

_Operand: TypeAlias = "Value | bool | int | float | complex"


@final
@dataclass(frozen=True, slots=True, eq=False)
class Value:
    """A node of a program being built. ``+ - * /`` are Add, Sub, Mul, Fdiv,
    ``//`` Idiv, ``%`` Mod, ``**`` Pow, ``& | ^`` And, Or, Xor and unary ``-``
    Neg; a Python number on either side becomes a constant of the other
    operand's dtype (the store rule)."""

    builder: Builder
    index: int
    dtype: Dtype

    def __add__(self, o: _Operand) -> Value:
        return self.builder.add(self, o)

    def __radd__(self, o: _Operand) -> Value:
        return self.builder.add(o, self)

    def __sub__(self, o: _Operand) -> Value:
        return self.builder.sub(self, o)

    def __rsub__(self, o: _Operand) -> Value:
        return self.builder.sub(o, self)

    def __mul__(self, o: _Operand) -> Value:
        return self.builder.mul(self, o)

    def __rmul__(self, o: _Operand) -> Value:
        return self.builder.mul(o, self)

    def __truediv__(self, o: _Operand) -> Value:
        return self.builder.fdiv(self, o)

    def __rtruediv__(self, o: _Operand) -> Value:
        return self.builder.fdiv(o, self)

    def __floordiv__(self, o: _Operand) -> Value:
        return self.builder.idiv(self, o)

    def __rfloordiv__(self, o: _Operand) -> Value:
        return self.builder.idiv(o, self)

    def __mod__(self, o: _Operand) -> Value:
        return self.builder.mod(self, o)

    def __rmod__(self, o: _Operand) -> Value:
        return self.builder.mod(o, self)

    def __pow__(self, o: _Operand) -> Value:
        return self.builder.pow(self, o)

    def __rpow__(self, o: _Operand) -> Value:
        return self.builder.pow(o, self)

    def __and__(self, o: _Operand) -> Value:
        return self.builder.and_(self, o)

    def __rand__(self, o: _Operand) -> Value:
        return self.builder.and_(o, self)

    def __or__(self, o: _Operand) -> Value:
        return self.builder.or_(self, o)

    def __ror__(self, o: _Operand) -> Value:
        return self.builder.or_(o, self)

    def __xor__(self, o: _Operand) -> Value:
        return self.builder.xor(self, o)

    def __rxor__(self, o: _Operand) -> Value:
        return self.builder.xor(o, self)

    def __neg__(self) -> Value:
        return self.builder.neg(self)


@final
class Builder:
    """Builds a program node by node; ``finish`` makes it.

    ``ins`` are the operands' values (nodes ``In(0)``, ``In(1)``, ... first).
    Each kind has a method of its lower-case name (``exp``, ``add``,
    ``less_equal``, ...; ``and_``, ``or_`` for And and Or), checked as it is
    added: a kind that does not take its operands' dtypes raises
    ``ValueError``. Where a method takes two or three operands, a Python
    number among them becomes a constant of the first value's dtype.
    """

    __slots__ = ("_dtypes", "_ins", "_nodes", "ins")

    def __init__(self, ins: Sequence[Dtype]) -> None:
        self._ins: tuple[Dtype, ...] = tuple(ins)
        self._nodes: list[Node] = []
        self._dtypes: list[Dtype] = []
        self.ins: tuple[Value, ...] = tuple(self._add(In(i)) for i in range(len(self._ins)))

    def _add(self, node: Node) -> Value:
        i = len(self._nodes)
        dt, _ = _check_node(i, node, self._ins, self._dtypes, [0] * i)
        self._nodes.append(node)
        self._dtypes.append(dt)
        return Value(self, i, dt)

    def _value(self, v: Value) -> int:
        if v.builder is not self:
            raise _fail("a value of another builder")
        return v.index

    def _values(self, *vs: _Operand) -> list[int]:
        """Node indices of ``vs``, Python numbers made constants of the first
        value's dtype."""
        dts = [v.dtype for v in vs if isinstance(v, Value)]
        if not dts:
            raise _fail("an operation needs at least one value, not only Python numbers")
        return [self._value(v) if isinstance(v, Value) else self.const(dts[0], v).index
                for v in vs]

    # -- leaves -----------------------------------------------------------

    def const(self, dt: Dtype, value: Scalar) -> Value:
        """The constant ``value`` stored into ``dt`` (``prog.bits``)."""
        return self._add(Const.of(dt, value))

    def const_bits(self, dt: Dtype, b: bytes) -> Value:
        """The constant of ``dt`` whose bits are ``b``."""
        return self._add(Const(dt, bytes(b)))

    def coord(self, axis: int) -> Value:
        """The loop's index along ``axis``, counted from the last, as int64."""
        return self._add(Coord(axis))

    # -- generic ----------------------------------------------------------

    def unary(self, kind: Unary, x: Value) -> Value:
        """``kind`` of ``x``, in x's dtype."""
        return self._add(Op1(kind, x.dtype, self._value(x)))

    def binary(self, kind: Op2Kind, x: _Operand, y: _Operand) -> Value:
        """``kind`` (Binary or Compare) of ``x`` and ``y``."""
        a, b = self._values(x, y)
        return self._add(Op2(kind, a, b))

    def copy(self, x: Value) -> Value:
        """``x``'s bits, unchanged."""
        return self._add(Op1(Convert.COPY, x.dtype, self._value(x)))

    def cast(self, x: Value, dt: Dtype) -> Value:
        """``x`` converted into ``dt`` (upstream §3 "Cast")."""
        return self._add(Op1(Convert.CAST, dt, self._value(x)))

    def bitcast(self, x: Value, dt: Dtype) -> Value:
        """``x``'s bits read as ``dt``, of the same width."""
        return self._add(Op1(Convert.BITCAST, dt, self._value(x)))

    def where(self, c: Value, x: _Operand, y: _Operand) -> Value:
        """``x`` where the boolean ``c`` holds, else ``y``."""
        a, b = self._values(x, y)
        return self._add(Op3(Ternary.WHERE, self._value(c), a, b))

    def fma(self, a: _Operand, x: _Operand, y: _Operand) -> Value:
        """``a * x + y`` rounded once (wrapping on integers)."""
        i, j, k = self._values(a, x, y)
        return self._add(Op3(Ternary.FMA, i, j, k))

    # -- unary kinds ------------------------------------------------------

    def neg(self, x: Value) -> Value:
        return self.unary(Unary.NEG, x)

    def recip(self, x: Value) -> Value:
        return self.unary(Unary.RECIP, x)

    def abs(self, x: Value) -> Value:
        return self.unary(Unary.ABS, x)

    def sign(self, x: Value) -> Value:
        return self.unary(Unary.SIGN, x)

    def sqrt(self, x: Value) -> Value:
        return self.unary(Unary.SQRT, x)

    def exp(self, x: Value) -> Value:
        return self.unary(Unary.EXP, x)

    def exp2(self, x: Value) -> Value:
        return self.unary(Unary.EXP2, x)

    def log(self, x: Value) -> Value:
        return self.unary(Unary.LOG, x)

    def log2(self, x: Value) -> Value:
        return self.unary(Unary.LOG2, x)

    def log1p(self, x: Value) -> Value:
        return self.unary(Unary.LOG1P, x)

    def expm1(self, x: Value) -> Value:
        return self.unary(Unary.EXPM1, x)

    def sin(self, x: Value) -> Value:
        return self.unary(Unary.SIN, x)

    def cos(self, x: Value) -> Value:
        return self.unary(Unary.COS, x)

    def tan(self, x: Value) -> Value:
        return self.unary(Unary.TAN, x)

    def asin(self, x: Value) -> Value:
        return self.unary(Unary.ASIN, x)

    def acos(self, x: Value) -> Value:
        return self.unary(Unary.ACOS, x)

    def atan(self, x: Value) -> Value:
        return self.unary(Unary.ATAN, x)

    def sinh(self, x: Value) -> Value:
        return self.unary(Unary.SINH, x)

    def cosh(self, x: Value) -> Value:
        return self.unary(Unary.COSH, x)

    def tanh(self, x: Value) -> Value:
        return self.unary(Unary.TANH, x)

    def erf(self, x: Value) -> Value:
        return self.unary(Unary.ERF, x)

    def floor(self, x: Value) -> Value:
        return self.unary(Unary.FLOOR, x)

    def ceil(self, x: Value) -> Value:
        return self.unary(Unary.CEIL, x)

    def round(self, x: Value) -> Value:
        return self.unary(Unary.ROUND, x)

    def trunc(self, x: Value) -> Value:
        return self.unary(Unary.TRUNC, x)

    # -- binary kinds -----------------------------------------------------

    def add(self, x: _Operand, y: _Operand) -> Value:
        return self.binary(Binary.ADD, x, y)

    def sub(self, x: _Operand, y: _Operand) -> Value:
        return self.binary(Binary.SUB, x, y)

    def mul(self, x: _Operand, y: _Operand) -> Value:
        return self.binary(Binary.MUL, x, y)

    def fdiv(self, x: _Operand, y: _Operand) -> Value:
        return self.binary(Binary.FDIV, x, y)

    def idiv(self, x: _Operand, y: _Operand) -> Value:
        return self.binary(Binary.IDIV, x, y)

    def mod(self, x: _Operand, y: _Operand) -> Value:
        return self.binary(Binary.MOD, x, y)

    def pow(self, x: _Operand, y: _Operand) -> Value:
        return self.binary(Binary.POW, x, y)

    def atan2(self, y: _Operand, x: _Operand) -> Value:
        return self.binary(Binary.ATAN2, y, x)

    def maximum(self, x: _Operand, y: _Operand) -> Value:
        return self.binary(Binary.MAXIMUM, x, y)

    def minimum(self, x: _Operand, y: _Operand) -> Value:
        return self.binary(Binary.MINIMUM, x, y)

    def and_(self, x: _Operand, y: _Operand) -> Value:
        return self.binary(Binary.AND, x, y)

    def or_(self, x: _Operand, y: _Operand) -> Value:
        return self.binary(Binary.OR, x, y)

    def xor(self, x: _Operand, y: _Operand) -> Value:
        return self.binary(Binary.XOR, x, y)

    def threefry(self, counter: _Operand, key: _Operand) -> Value:
        return self.binary(Binary.THREEFRY, counter, key)

    # -- comparisons ------------------------------------------------------

    def equal(self, x: _Operand, y: _Operand) -> Value:
        return self.binary(Compare.EQUAL, x, y)

    def not_equal(self, x: _Operand, y: _Operand) -> Value:
        return self.binary(Compare.NOT_EQUAL, x, y)

    def less(self, x: _Operand, y: _Operand) -> Value:
        return self.binary(Compare.LESS, x, y)

    def less_equal(self, x: _Operand, y: _Operand) -> Value:
        return self.binary(Compare.LESS_EQUAL, x, y)

    # -- the program ------------------------------------------------------

    def finish(self, *outputs: Value) -> Prog:
        """The program of the nodes built so far, with ``outputs`` in order."""
        return Prog(self._ins, self._nodes, tuple(self._value(v) for v in outputs))

"""The builder: a program made node by node, with arithmetic on its values.

``Prog.build(ins)`` gives a :class:`Builder` that makes its program with
``Prog`` (handed in, so that this module does not import the one that
imports it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias, final

from ..dtype import Dtype
from .elements import Scalar
from .kinds import Binary, Compare, Convert, Op2Kind, Ternary, Unary
from .nodes import Const, Coord, In, Node, Op1, Op2, Op3, _check_node, _fail

if TYPE_CHECKING:
    from .program import Prog

__all__ = ["Builder", "Value"]

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

    __slots__ = ("_dtypes", "_ins", "_make", "_nodes", "ins")

    def __init__(self, ins: Sequence[Dtype], make: Callable[..., Prog]) -> None:
        self._make = make
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
        return self._make(self._ins, self._nodes, tuple(self._value(v) for v in outputs))

"""The kinds a program's nodes compute, and the dtypes each takes (``accepts``)."""

from __future__ import annotations

import enum
from typing import Final, TypeAlias

from .. import dtype as D
from ..dtype import Dtype, Kind

__all__ = ["TRANSCENDENTAL", "AnyKind", "Binary", "Compare", "Convert", "Nullary", "Op1Kind",
           "Op2Kind", "Ternary", "Unary", "accepts"]

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

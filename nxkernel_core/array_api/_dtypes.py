"""The standard's dtypes, type promotion and Python-scalar rules (2024.12).

The namespace's dtype objects are nxkernel's own (``nxkernel_core.dtype``):
``bool``, the eight integers, ``float32``/``float64`` and
``complex64``/``complex128``. Promotion follows the standard's lattice:
within a kind by width, mixed signedness to the narrowest signed dtype that
holds both (``uint64`` with a signed integer has none), ``float`` with
``complex`` to the complex dtype of the wider precision. Kinds do not mix
(bool, integer and floating arrays refuse to promote), as in the standard.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, final

import numpy as np

from .. import dtype as D
from ..dtype import Dtype, Kind

__all__ = [
    "DTYPES",
    "can_cast",
    "default_float",
    "default_int",
    "finfo",
    "iinfo",
    "isdtype",
    "promote",
    "result_type",
    "scalar_dtype",
]

#: The standard's dtypes, by name.
DTYPES: Final[dict[str, Dtype]] = {
    "bool": D.bool_,
    "int8": D.int8, "int16": D.int16, "int32": D.int32, "int64": D.int64,
    "uint8": D.uint8, "uint16": D.uint16, "uint32": D.uint32, "uint64": D.uint64,
    "float32": D.float32, "float64": D.float64,
    "complex64": D.complex64, "complex128": D.complex128,
}

_SIGNED: Final = (D.int8, D.int16, D.int32, D.int64)


def default_int() -> Dtype:
    return D.int64


def default_float() -> Dtype:
    return D.float64


def _numeric_kind(dt: Dtype) -> str:
    if dt.kind is Kind.BOOLEAN:
        return "bool"
    if dt.is_int:
        return "int"
    return "inexact"  # floats and complex promote together


def promote(a: Dtype, b: Dtype, fn: str = "result_type") -> Dtype:
    """The dtype the standard promotes ``a`` and ``b`` to; ``TypeError`` where
    it defines none."""
    if a is b:
        return a
    ka, kb = _numeric_kind(a), _numeric_kind(b)
    if ka != kb:
        raise TypeError(f"{fn}: {a.name} and {b.name} do not promote (the standard mixes no kinds)")
    if ka == "int":
        if a.kind is b.kind:
            return a if a.bits >= b.bits else b
        signed, unsigned = (a, b) if a.kind is Kind.SIGNED else (b, a)
        for dt in _SIGNED:
            if dt.bits > unsigned.bits and dt.bits >= signed.bits:
                return dt
        raise TypeError(f"{fn}: {a.name} and {b.name} do not promote (no signed integer holds both)")
    if ka == "inexact":
        if a.is_complex or b.is_complex:
            wide = D.float64 in (a, b) or D.complex128 in (a, b)
            return D.complex128 if wide else D.complex64
        return a if a.bits >= b.bits else b
    return a


def scalar_dtype(value: object, like: Dtype, fn: str) -> Dtype:
    """The dtype a Python scalar takes beside an array of ``like``: the array's,
    where the standard allows the pair (bool with bool; int with integers,
    floats and complex; float with floats and complex; complex with complex);
    ``TypeError`` otherwise."""
    kind = like.kind
    if isinstance(value, bool):
        ok = kind is Kind.BOOLEAN
    elif isinstance(value, int):
        ok = kind is not Kind.BOOLEAN
    elif isinstance(value, float):
        ok = kind in (Kind.FLOAT, Kind.COMPLEX)
    elif isinstance(value, complex):
        ok = kind is Kind.COMPLEX
    else:
        raise TypeError(f"{fn}: {type(value).__name__} is not an array or a Python scalar")
    if not ok:
        raise TypeError(f"{fn}: a Python {type(value).__name__} does not combine with a "
                        f"{like.name} array")
    if isinstance(value, int) and not isinstance(value, bool) and like.is_int:
        lo, hi = like.int_range
        if not lo <= value <= hi:
            raise OverflowError(f"{fn}: Python int {value} is out of range for {like.name}")
    return like


def _dtype_of(x: Any) -> Dtype:
    dt = getattr(x, "dtype", x)
    if not isinstance(dt, Dtype):
        raise TypeError(f"result_type: {x!r} is not an array or a dtype")
    return dt


def result_type(*xs: Any) -> Dtype:
    """The promoted dtype of arrays, dtypes and Python scalars (at least one
    array or dtype, or scalars of one kind alone, which take the default)."""
    dts = [_dtype_of(x) for x in xs if not isinstance(x, bool | int | float | complex)]
    scalars = [x for x in xs if isinstance(x, bool | int | float | complex)]
    if not dts:
        if not scalars:
            raise ValueError("result_type: at least one array, dtype or scalar is required")
        dts = [_default_of(scalars[0])]
        scalars = scalars[1:]
    out = dts[0]
    for dt in dts[1:]:
        out = promote(out, dt)
    for s in scalars:
        out = scalar_dtype(s, out, "result_type") if not _widens(s, out) else promote(out, _default_of(s))
    return out


def _widens(s: object, dt: Dtype) -> bool:
    """Whether scalar ``s`` moves ``dt`` to another kind (a complex scalar with
    a float dtype)."""
    return isinstance(s, complex) and dt.is_float


def _default_of(s: object) -> Dtype:
    if isinstance(s, bool):
        return D.bool_
    if isinstance(s, int):
        return D.int64
    if isinstance(s, float):
        return D.float64
    return D.complex128


def can_cast(from_: Any, to: Dtype) -> bool:
    """Whether ``from_`` (an array or a dtype) promotes to ``to`` (the standard's
    casting: within a kind, and integers to inexact dtypes never)."""
    src = _dtype_of(from_)
    if not isinstance(to, Dtype):
        raise TypeError(f"can_cast: {to!r} is not a dtype")
    try:
        return promote(src, to, "can_cast") is to
    except TypeError:
        return False


_KINDS: Final[dict[str, frozenset[Kind]]] = {
    "bool": frozenset({Kind.BOOLEAN}),
    "signed integer": frozenset({Kind.SIGNED}),
    "unsigned integer": frozenset({Kind.UNSIGNED}),
    "integral": frozenset({Kind.SIGNED, Kind.UNSIGNED}),
    "real floating": frozenset({Kind.FLOAT}),
    "complex floating": frozenset({Kind.COMPLEX}),
    "numeric": frozenset({Kind.SIGNED, Kind.UNSIGNED, Kind.FLOAT, Kind.COMPLEX}),
}


def isdtype(dtype: Dtype, kind: Any) -> bool:
    """Whether ``dtype`` is of ``kind``: a dtype, a kind name, or a tuple of them."""
    if not isinstance(dtype, Dtype):
        raise TypeError(f"isdtype: {dtype!r} is not a dtype")
    if isinstance(kind, tuple):
        return any(isdtype(dtype, k) for k in kind)
    if isinstance(kind, Dtype):
        return dtype is kind
    if isinstance(kind, str):
        if kind not in _KINDS:
            raise ValueError(f"isdtype: unknown kind {kind!r}; the kinds are {', '.join(_KINDS)}")
        return dtype.kind in _KINDS[kind]
    raise TypeError(f"isdtype: {kind!r} is not a dtype, a kind name or a tuple of them")


@final
@dataclass(frozen=True, slots=True)
class finfo_object:
    """The standard's ``finfo`` fields."""

    bits: int
    eps: float
    max: float
    min: float
    smallest_normal: float
    dtype: Dtype


@final
@dataclass(frozen=True, slots=True)
class iinfo_object:
    """The standard's ``iinfo`` fields."""

    bits: int
    max: int
    min: int
    dtype: Dtype


def finfo(type: Any) -> finfo_object:
    """Machine limits of a floating dtype (a complex one's parts, whose dtype
    ``dtype`` names)."""
    dt = _dtype_of(type)
    part = {D.complex64: D.float32, D.complex128: D.float64}.get(dt, dt)
    if not part.is_float or part.float_format is None:
        raise TypeError(f"finfo: {dt.name} is not a floating dtype")
    fi = np.finfo(np.dtype(part.numpy_dtype.str))  # host bookkeeping: the format's constants
    return finfo_object(part.bits, float(fi.eps), float(fi.max), float(fi.min),
                        float(fi.smallest_normal), part)


def iinfo(type: Any) -> iinfo_object:
    """Limits of an integer dtype."""
    dt = _dtype_of(type)
    if not dt.is_int:
        raise TypeError(f"iinfo: {dt.name} is not an integer dtype")
    lo, hi = dt.int_range
    return iinfo_object(dt.bits, hi, lo, dt)

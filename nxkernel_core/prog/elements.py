"""One element's bits: a Python value stored into a dtype (``bits``), the
element those bits hold (``element``), and the dtypes' short names."""

from __future__ import annotations

from typing import Final, TypeAlias

import numpy as np
import numpy.typing as npt

from .. import dtype as D
from ..dtype import Dtype, Kind

__all__ = ["Scalar", "bits", "element", "short_name"]

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

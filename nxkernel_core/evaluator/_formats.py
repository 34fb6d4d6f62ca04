"""Float formats and bits: the helpers every kind's evaluation shares."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, TypeAlias

import numpy as np
import numpy.typing as npt

from .. import dtype as D
from ..dtype import Dtype

Arr: TypeAlias = npt.NDArray[Any]


# --------------------------------------------------------------------------
# Float formats and bits
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Fmt:
    """A float format's bits: the unsigned type of its storage, exponent and
    fraction widths, sign mask and canonical quiet NaN (None without NaNs)."""

    uint: type[np.unsignedinteger[Any]]
    exp_bits: int
    frac_bits: int
    sign: int
    qnan: int | None


_FMT: Final[dict[Dtype, _Fmt]] = {
    D.float64: _Fmt(np.uint64, 11, 52, 1 << 63, 0x7FF8000000000000),
    D.float32: _Fmt(np.uint32, 8, 23, 1 << 31, 0x7FC00000),
    D.float16: _Fmt(np.uint16, 5, 10, 0x8000, 0x7E00),
    D.bfloat16: _Fmt(np.uint16, 8, 7, 0x8000, 0x7FC0),
    D.float8_e4m3fn: _Fmt(np.uint8, 4, 3, 0x80, 0x7F),
    D.float8_e5m2: _Fmt(np.uint8, 5, 2, 0x80, 0x7E),
    D.float4_e2m1fn: _Fmt(np.uint8, 2, 1, 0x08, None),
}


def _part(dt: Dtype) -> Dtype:
    """The float dtype of a complex dtype's parts."""
    return D.float32 if dt is D.complex64 else D.float64


def _ubits(a: Arr, dt: Dtype) -> Arr:
    """The bits of float array ``a`` of ``dt`` as unsigned integers."""
    return a.view(_FMT[dt].uint)


def _of_ubits(u: Arr, dt: Dtype) -> Arr:
    """The float array of ``dt`` whose bits are the unsigned integers ``u``."""
    return np.asarray(u).astype(_FMT[dt].uint).view(dt.numpy_dtype)


def _copy_bits(a: Arr) -> Arr:
    """A fresh C-contiguous copy of ``a``, byte for byte (no float conversion)."""
    raw = np.array(a.view(np.dtype((np.void, a.dtype.itemsize))), order="C")
    return raw.view(a.dtype)


def _isnan(a: Arr, dt: Dtype) -> Arr:
    """Where float array ``a`` of ``dt`` is a NaN."""
    if dt is D.float64 or dt is D.float32:
        return np.isnan(a)
    return np.isnan(a.astype(np.float32))


def _truth(a: Arr) -> Arr:
    """A boolean array's values: its byte is not 0."""
    return np.asarray(a.view(np.uint8) != 0)


def _select(c: Arr, x: Arr, y: Arr) -> Arr:
    """Element by element, ``x``'s bytes where ``c`` holds, else ``y``'s."""
    n = x.dtype.itemsize
    xb = np.ascontiguousarray(x).view(np.uint8).reshape((*x.shape, n))
    yb = np.ascontiguousarray(y).view(np.uint8).reshape((*y.shape, n))
    out = np.where(c[..., None], xb, yb)
    return np.ascontiguousarray(out).view(x.dtype).reshape(x.shape)


def _nan_rule(dt: Dtype, result: Arr, *operands: Arr) -> Arr:
    """``result`` where no operand is a NaN and it is none; else the first NaN
    operand's bits, or the canonical NaN where the result made one."""
    fmt = _FMT[dt]
    if fmt.qnan is None:
        return result
    out = np.where(_isnan(result, dt), fmt.uint(fmt.qnan), _ubits(result, dt))
    for op in reversed(operands):
        out = np.where(_isnan(op, dt), _ubits(op, dt), out)
    return _of_ubits(out, dt)


def _canonical(dt: Dtype, a: Arr) -> Arr:
    """``a`` with every NaN made the canonical NaN."""
    return _nan_rule(dt, a)


def _wide_float(a: Arr, dt: Dtype) -> Arr:
    """A float array in its compute dtype: float32 for the narrow floats."""
    if dt is D.float64 or dt is D.float32:
        return a
    return a.astype(np.float32)


def _store(dt: Dtype, v: Arr) -> Arr:
    """Float values ``v`` (float32 or float64) rounded once into ``dt``."""
    if v.dtype == dt.numpy_dtype:
        return v
    return D.of_float(dt, v.astype(np.float64))


def _join(re: Arr, im: Arr, dt: Dtype) -> Arr:
    """The complex array of ``dt`` with parts ``re`` and ``im``, bits kept."""
    part = _part(dt)
    pair = np.stack([_ubits(re, part), _ubits(im, part)], axis=-1)
    return np.ascontiguousarray(pair).view(dt.numpy_dtype).reshape(re.shape)


def _parts(a: Arr) -> tuple[Arr, Arr]:
    """A complex array's real and imaginary parts, bits kept."""
    return _copy_bits(a.real), _copy_bits(a.imag)


def _order_key(a: Arr, dt: Dtype) -> Arr:
    """An int64 key in the float total order: -inf < ... < -0 < +0 < ... < inf."""
    fmt = _FMT[dt]
    u = _ubits(a, dt).astype(np.uint64)
    mag = (u & np.uint64(fmt.sign - 1)).astype(np.int64)
    return np.where((u & np.uint64(fmt.sign)) != 0, -mag - 1, mag)

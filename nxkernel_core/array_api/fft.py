"""The standard's ``fft`` extension: the Fft kernel (through ``nx.fft``,
``nx.rfft``, ``nx.irfft``, ``nx.ifft``) one axis at a time, with the
``n``/``s`` crops and zero pads as views and Assemble calls and the
``norm`` factors as one map."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .. import dtype as D
from .. import nx
from ..answer import describe
from ..array import Array
from ..layout import Broadcast
from ..prog import Builder, Value
from . import _base as B
from . import _complex as C
from . import _dtypes as T
from ._manipulation import concat, roll, take_range

__all__ = [
    "fft", "fftfreq", "fftn", "fftshift", "hfft", "ifft", "ifftn", "ifftshift", "ihfft", "irfft",
    "irfftn", "rfft", "rfftfreq", "rfftn",
]

_NORMS = ("backward", "ortho", "forward")


def _resized(fn: str, x: Array, axis: int, n: int | None) -> Array:
    """x cropped or zero-padded to ``n`` along ``axis``."""
    if n is None or n == x.shape[axis]:
        return x
    if n < 1:
        raise ValueError(f"{fn}: n = {n} is below 1")
    if n < x.shape[axis]:
        return take_range(x, axis, 0, n)
    pad = list(x.shape)
    pad[axis] = n - x.shape[axis]
    return concat([x, B.full(fn, pad, 0, x.dtype, x.device)], axis=axis)


def _times(b: Builder, x: Value, f: Value) -> Value:
    return x * f


def _scaled(fn: str, x: Array, factor: float) -> Array:
    if factor == 1.0:
        return x
    f = B.scalar_array(factor, x.dtype, x.device).view(Broadcast(x.shape))
    return B.elementwise(fn, _times, x, f)


def _complex_input(fn: str, x: Array) -> Array:
    a = B.the_array(fn, x)
    B.check_kind(fn, "floating-point", a)
    if not a.dtype.is_complex:
        a = B.cast(fn, a, C.complex_of(a.dtype))
    return a


def _real_input(fn: str, x: Array) -> Array:
    a = B.the_array(fn, x)
    B.check_kind(fn, "real floating-point", a)
    return a


def _norm(fn: str, norm: str) -> str:
    if norm not in _NORMS:
        raise ValueError(f"{fn}: norm {norm!r} is not one of {', '.join(_NORMS)}")
    return norm


def _c2c(fn: str, a: Array, axis: int, n: int | None, norm: str, inverse: bool) -> Array:
    ax = B.axis_of(fn, a, axis)
    a = _resized(fn, a, ax, n)
    m = a.shape[ax]
    if m == 0:
        raise ValueError(f"{fn}: no points to transform along axis {axis} of {describe([a])}")
    r = nx.ifft(a, axis=ax) if inverse else nx.fft(a, axis=ax)
    # nx.ifft divides by m (the backward norm); the other norms rescale.
    factor = {("backward", False): 1.0, ("ortho", False): 1 / math.sqrt(m), ("forward", False): 1 / m,
              ("backward", True): 1.0, ("ortho", True): m / math.sqrt(m), ("forward", True): float(m)}
    return _scaled(fn, r, factor[(norm, inverse)])


def fft(x: Array, /, *, n: int | None = None, axis: int = -1, norm: str = "backward") -> Array:
    """The one-dimensional discrete Fourier transform."""
    fn = "xp.fft.fft"
    return _c2c(fn, _complex_input(fn, x), axis, n, _norm(fn, norm), False)


def ifft(x: Array, /, *, n: int | None = None, axis: int = -1, norm: str = "backward") -> Array:
    """The one-dimensional inverse discrete Fourier transform."""
    fn = "xp.fft.ifft"
    return _c2c(fn, _complex_input(fn, x), axis, n, _norm(fn, norm), True)


def _axes(fn: str, a: Array, s: Sequence[int] | None,
          axes: Sequence[int] | None) -> list[tuple[int, int | None]]:
    """(axis, size or None) pairs of an n-dimensional transform."""
    if axes is None:
        axes = list(range(a.rank)) if s is None else list(range(a.rank - len(s), a.rank))
    ax = [B.axis_of(fn, a, i) for i in axes]
    sizes: list[int | None] = [None] * len(ax) if s is None else [int(v) if v != -1 else None for v in s]
    if len(sizes) != len(ax):
        raise ValueError(f"{fn}: s and axes differ in length")
    return list(zip(ax, sizes, strict=True))


def fftn(x: Array, /, *, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
         norm: str = "backward") -> Array:
    """The n-dimensional discrete Fourier transform over ``axes``."""
    fn = "xp.fft.fftn"
    a = _complex_input(fn, x)
    for ax, n in _axes(fn, a, s, axes):
        a = _c2c(fn, a, ax, n, _norm(fn, norm), False)
    return a


def ifftn(x: Array, /, *, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: str = "backward") -> Array:
    """The n-dimensional inverse discrete Fourier transform over ``axes``."""
    fn = "xp.fft.ifftn"
    a = _complex_input(fn, x)
    for ax, n in _axes(fn, a, s, axes):
        a = _c2c(fn, a, ax, n, _norm(fn, norm), True)
    return a


def rfft(x: Array, /, *, n: int | None = None, axis: int = -1, norm: str = "backward") -> Array:
    """The transform of real x, bins 0 … n//2."""
    fn = "xp.fft.rfft"
    a = _real_input(fn, x)
    ax = B.axis_of(fn, a, axis)
    a = _resized(fn, a, ax, n)
    m = a.shape[ax]
    if m == 0:
        raise ValueError(f"{fn}: no points to transform along axis {axis} of {describe([a])}")
    r = nx.rfft(a, axis=ax)
    return _scaled(fn, r, {"backward": 1.0, "ortho": 1 / math.sqrt(m), "forward": 1 / m}[_norm(fn, norm)])


def irfft(x: Array, /, *, n: int | None = None, axis: int = -1, norm: str = "backward") -> Array:
    """The real inverse of ``rfft``: ``n`` points (2·(bins − 1) by default)."""
    fn = "xp.fft.irfft"
    a = _complex_input(fn, x)
    ax = B.axis_of(fn, a, axis)
    points = n if n is not None else 2 * (a.shape[ax] - 1)
    if points < 1:
        raise ValueError(f"{fn}: {points} output points along axis {axis} of {describe([a])}")
    a = _resized(fn, a, ax, points // 2 + 1)
    r = nx.irfft(a, n=points, axis=ax)
    factor = {"backward": 1.0, "ortho": math.sqrt(points), "forward": float(points)}[_norm(fn, norm)]
    return _scaled(fn, r, factor)


def rfftn(x: Array, /, *, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: str = "backward") -> Array:
    """The n-dimensional transform of real x (the last axis halved)."""
    fn = "xp.fft.rfftn"
    a = _real_input(fn, x)
    pairs = _axes(fn, a, s, axes)
    if not pairs:
        raise ValueError(f"{fn}: no axis to transform in {describe([a])}")
    last, n = pairs[-1]
    a = rfft(a, n=n, axis=last, norm=norm)
    for ax, m in pairs[:-1]:
        a = _c2c(fn, a, ax, m, _norm(fn, norm), False)
    return a


def irfftn(x: Array, /, *, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
           norm: str = "backward") -> Array:
    """The real inverse of ``rfftn``."""
    fn = "xp.fft.irfftn"
    a = _complex_input(fn, x)
    pairs = _axes(fn, a, s, axes)
    if not pairs:
        raise ValueError(f"{fn}: no axis to transform in {describe([a])}")
    for ax, m in pairs[:-1]:
        a = _c2c(fn, a, ax, m, _norm(fn, norm), True)
    last, n = pairs[-1]
    return irfft(a, n=n, axis=last, norm=norm)


_SWAP = {"backward": "forward", "forward": "backward", "ortho": "ortho"}


def hfft(x: Array, /, *, n: int | None = None, axis: int = -1, norm: str = "backward") -> Array:
    """The transform of a Hermitian-symmetric signal (its half), a real result."""
    fn = "xp.fft.hfft"
    a = _complex_input(fn, x)
    return irfft(C.conj(fn, a), n=n, axis=axis, norm=_SWAP[_norm(fn, norm)])


def ihfft(x: Array, /, *, n: int | None = None, axis: int = -1, norm: str = "backward") -> Array:
    """The inverse of ``hfft``: half of a Hermitian-symmetric spectrum."""
    fn = "xp.fft.ihfft"
    r = rfft(x, n=n, axis=axis, norm=_SWAP[_norm(fn, norm)])
    return C.conj(fn, r)


def _freq(b: Builder, scale: Value, n: Value) -> Value:
    i = b.coord(0)
    half = b.idiv(n + 1, b.const(D.int64, 2))
    k = b.where(b.less(i, half), i, i - n)
    return b.cast(k, scale.dtype) * scale


def _float_dtype(fn: str, dtype: Any) -> D.Dtype:
    """``dtype`` where it is a real floating-point dtype of the namespace (float64 for None)."""
    if dtype is None:
        return D.float64
    dt = T.DTYPES.get(dtype) if isinstance(dtype, str) else dtype
    if not isinstance(dt, D.Dtype) or not dt.is_float:
        raise TypeError(f"{fn}: dtype {dtype!r} is not a real floating-point dtype")
    return dt


def fftfreq(n: int, /, *, d: float = 1.0, dtype: Any = None, device: Any = None) -> Array:
    """The sample frequencies of an n-point transform: [0, 1, …, −1] / (d·n)."""
    fn = "xp.fft.fftfreq"
    dt = _float_dtype(fn, dtype)
    dev = B.device_of(device)
    scale = B.scalar_array(1.0 / (d * n), dt, dev).view(Broadcast((n,)))
    nn = B.scalar_array(n, D.int64, dev).view(Broadcast((n,)))
    return B.elementwise(fn, _freq, scale, nn)


def _rfreq(b: Builder, scale: Value) -> Value:
    return b.cast(b.coord(0), scale.dtype) * scale


def rfftfreq(n: int, /, *, d: float = 1.0, dtype: Any = None, device: Any = None) -> Array:
    """The sample frequencies of rfft's bins: [0, 1, …, n//2] / (d·n)."""
    fn = "xp.fft.rfftfreq"
    dt = _float_dtype(fn, dtype)
    dev = B.device_of(device)
    scale = B.scalar_array(1.0 / (d * n), dt, dev).view(Broadcast((n // 2 + 1,)))
    return B.elementwise(fn, _rfreq, scale)


def fftshift(x: Array, /, *, axes: int | Sequence[int] | None = None) -> Array:
    """x rolled so the zero frequency is at the centre of ``axes``."""
    a = B.the_array("xp.fft.fftshift", x)
    ax = B.axes_of("xp.fft.fftshift", a, axes)
    return roll(a, [a.shape[i] // 2 for i in ax], axis=list(ax)) if ax else B.copy("xp.fft.fftshift", a)


def ifftshift(x: Array, /, *, axes: int | Sequence[int] | None = None) -> Array:
    """The inverse of ``fftshift``."""
    a = B.the_array("xp.fft.ifftshift", x)
    ax = B.axes_of("xp.fft.ifftshift", a, axes)
    return roll(a, [-(a.shape[i] // 2) for i in ax], axis=list(ax)) if ax else B.copy("xp.fft.ifftshift", a)

"""Fourier transforms: fft, ifft, rfft, irfft."""

from __future__ import annotations

from .. import dtype as D
from .. import spec as S
from ..array import Array
from ..caller import call
from ..kernels.fourier import COMPLEX_OF, REAL_OF
from ..prog import Prog
from .arguments import as_arrays, reduced_axes
from .elementwise import cast


def _scale(fn: str, x: Array, factor: float) -> Array:
    """x times a real ``factor`` rounded to x's (part) dtype: one map."""
    b = Prog.build([x.dtype])
    part = REAL_OF[x.dtype]
    c = b.const(part, factor)
    if x.dtype.is_complex:
        c = b.cast(c, x.dtype)
    return call(S.Map(b.finish(b.ins[0] * c), (S.PLAIN,)), x, name=fn)[0]


def _to_complex(fn: str, x: Array) -> Array:
    if x.dtype.is_complex:
        return x
    if x.dtype not in (D.float32, D.float64):
        x = cast(x, D.float32)
    return cast(x, COMPLEX_OF[x.dtype])


def fft(x: object, axis: int = -1) -> Array:
    """The forward DFT along ``axis`` (real input becomes complex), as NumPy's fft."""
    (a,) = as_arrays("nx.fft", [x])
    a = _to_complex("nx.fft", a)
    (ax,) = reduced_axes("nx.fft", a, axis)
    return call(S.Fft((ax,), S.Direction.FORWARD, S.C2c()), a, name="nx.fft")[0]


def ifft(x: object, axis: int = -1) -> Array:
    """The inverse DFT along ``axis``, divided by n as NumPy's ifft (the kernel
    itself is unnormalised; the division is a second, map call)."""
    (a,) = as_arrays("nx.ifft", [x])
    a = _to_complex("nx.ifft", a)
    (ax,) = reduced_axes("nx.ifft", a, axis)
    r = call(S.Fft((ax,), S.Direction.INVERSE, S.C2c()), a, name="nx.ifft")[0]
    n = a.shape[ax]
    return _scale("nx.ifft", r, 1.0 / n) if n > 1 else r


def rfft(x: object, axis: int = -1) -> Array:
    """The forward DFT of real x along ``axis``, bins 0..n//2, as NumPy's rfft."""
    (a,) = as_arrays("nx.rfft", [x])
    (ax,) = reduced_axes("nx.rfft", a, axis)
    return call(S.Fft((ax,), S.Direction.FORWARD, S.R2c()), a, name="nx.rfft")[0]


def irfft(x: object, n: int | None = None, axis: int = -1) -> Array:
    """The real inverse of ``rfft`` along ``axis`` of ``n`` points (default
    2·(bins − 1)), divided by n as NumPy's irfft."""
    (a,) = as_arrays("nx.irfft", [x])
    (ax,) = reduced_axes("nx.irfft", a, axis)
    points = n if n is not None else 2 * (a.shape[ax] - 1)
    r = call(S.Fft((ax,), S.Direction.INVERSE, S.C2r(points)), a, name="nx.irfft")[0]
    return _scale("nx.irfft", r, 1.0 / points) if points > 1 else r

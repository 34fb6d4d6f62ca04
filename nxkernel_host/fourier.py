"""The host library's Fourier transforms: ``fft`` (C2c, R2c, C2r of n points).

Every transform runs SciPy's pocketfft (``scipy.fft``) on one thread, in the
dtype's own precision (float32 and complex64 stay single), unnormalised both
ways. The input is first copied into a C-contiguous array (for C2c, into dst
itself, transformed there in place), so its layout never reaches pocketfft,
whose grouping of lines into SIMD vectors then depends on the shape alone.

Along several axes, R2c transforms the last listed axis real-to-complex, then
the others complex-to-complex; C2r transforms the others first, then the last
complex-to-real, which reads bins 0..n//2 and ignores the imaginary parts of
bin 0 and, for even n, bin n/2 (as NumPy's irfftn). The other directions come
from conjugation, which is exact: an inverse R2c is the conjugate of the
forward one, a forward C2r the inverse C2r of the conjugate. An axis of
extent 0 makes every sum empty: the result is zeros.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import scipy.fft

from nxkernel_core import spec as S
from nxkernel_core.array import Array

from .family import Family
from .views import read, store, target

__all__ = ["FAMILY", "bound"]

NDArray = npt.NDArray[Any]


#: The constant c of the stated bound (see ``bound``).
BOUND_C: Final = 2.0


def bound(points: int, u: float) -> float:
    """The stated bound's factor for a transform of ``points`` points in all (the
    product of the transformed extents), u the dtype's (its parts') unit
    roundoff: barring overflow and underflow,
    ‖ŷ − y‖₂ ≤ c·(⌈log₂ N⌉ + 1)·u·√N·‖x‖₂ with c = 2, y the exact result as the
    module docstring defines it (for C2c ‖y‖₂ = √N·‖x‖₂). pocketfft's radix
    passes (2, 3, 4, 5, 7, 11) each err by a few u and their number grows as
    log N (Higham, Accuracy and Stability, Thm 24.2); Bluestein's algorithm,
    for large prime factors, runs three such transforms of a padded length and
    stays within the same form. Measured worst ratio on random inputs of 1 to
    65537 points: 0.62 of this bound."""
    return BOUND_C * (math.ceil(math.log2(max(points, 1))) + 1) * u * math.sqrt(points)


def fft(spec: S.Fft, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
    """The unnormalised DFT of x along ``spec.axes``: Forward sums
    ``x[j]·e^(−2πi jk/n)``, Inverse ``x[j]·e^(+2πi jk/n)``. Operand: x."""
    (dst,), (x,) = dsts, operands
    with np.errstate(all="ignore"):  # NaN and infinity are values, not errors
        _transform(spec, dst, read(x))


def _transform(spec: S.Fft, dst: Array, x: NDArray) -> None:
    axes = spec.axes
    kind = spec.kind
    forward = spec.direction is S.Direction.FORWARD
    if any(x.shape[a] == 0 for a in axes) or (isinstance(kind, S.C2r) and kind.n == 0):
        store(dst, np.zeros(dst.shape, dtype=dst.dtype.numpy_dtype))
        return
    if isinstance(kind, S.C2c):
        out = target(dst)
        assert out is not None
        # The copy into dst is the canonical input; pocketfft transforms it in place.
        out[...] = x
        f = scipy.fft.fftn if forward else scipy.fft.ifftn
        y = f(out, axes=axes, norm="backward" if forward else "forward", overwrite_x=True,
              workers=1)
        if y.ctypes.data != out.ctypes.data or y.strides != out.strides:
            out[...] = y
        return
    xc = np.ascontiguousarray(x)
    if isinstance(kind, S.R2c):
        y = scipy.fft.rfftn(xc, axes=axes, workers=1)
        store(dst, y if forward else np.conjugate(y, out=y))
        return
    if forward:
        xc = np.conjugate(xc)
    s = [x.shape[a] for a in axes[:-1]] + [kind.n]
    store(dst, scipy.fft.irfftn(xc, s=s, axes=axes, norm="forward", overwrite_x=True, workers=1))


_PROSE: Final = (
    "every fitting case: C2c of complex64/complex128, R2c of float32/float64, C2r(n) into "
    "float32/float64, along any axes, forward or inverse, unnormalised, in the dtype's "
    "precision; an axis of extent 0 gives zeros. Other dtypes answer WRONG_DTYPE."
)

FAMILY: Final = Family(
    prose={"fft": _PROSE},
    association={
        "fft": "pocketfft's mixed-radix Cooley–Tukey passes (radix 2, 3, 4, 5, 7, 11; "
               "Bluestein for large prime factors) on one thread; several axes one after "
               "another (R2c: the last listed first; C2r: the last listed last).",
    },
    algorithms={
        "fft": "SciPy's pocketfft in the dtype's precision (float32/complex64 stay single), "
               "on a C-contiguous copy of x. Barring overflow and underflow, each transform "
               "is within ‖ŷ − y‖₂ ≤ 2·(⌈log₂ N⌉ + 1)·u·√N·‖x‖₂ of the exact one, N the "
               "points transformed in all, u the dtype's (its parts') unit roundoff; C2r's "
               "exact result ignores bin 0's and bin n/2's imaginary parts after the other "
               "axes' transforms, as NumPy's irfftn.",
    },
)

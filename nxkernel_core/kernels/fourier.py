"""Fft (``S.fft``): the unnormalised DFT along listed axes, defined once."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Final, final

from .. import dtype as D
from ..answer import Answer
from ..dtype import Dtype
from .attributes import _axes, _fail, _int_field, _of, _set
from .record import (
    Error,
    Kernel,
    Shapes,
    _answers,
    _axis,
    _Misfit,
    _operands,
    _results,
    _set_at,
    no_refusal,
)

if TYPE_CHECKING:
    from ..array import Array

__all__ = ["COMPLEX_OF", "FFT", "REAL_OF", "C2c", "C2r", "Direction", "Fft", "R2c", "fft",
           "fft_dtype", "fft_misfit"]

class Direction(enum.Enum):
    """FORWARD sums ``x[j]·e^(−2πi jk/n)``, INVERSE ``x[j]·e^(+2πi jk/n)``;
    neither divides by n."""

    FORWARD = "forward"
    INVERSE = "inverse"


@final
@dataclass(frozen=True, slots=True)
class C2c:
    """Complex to complex, of one dtype."""


@final
@dataclass(frozen=True, slots=True)
class R2c:
    """Real to complex: the last listed axis of n points keeps bins 0..n//2."""


@final
@dataclass(frozen=True, slots=True)
class C2r:
    """Complex to real of ``n`` points along the last listed axis, read from
    its n//2 + 1 bins extended by Hermitian symmetry."""

    n: int

    def __post_init__(self) -> None:
        _int_field(self, "n")


@final
@dataclass(frozen=True, slots=True)
class Fft:
    """``S.fft``: the unnormalised DFT along ``axes`` (strictly increasing, at
    least one) in ``direction``, of ``kind``. Operands: x. Destinations: dst."""

    kernel: ClassVar[str] = "fft"
    axes: tuple[int, ...]
    direction: Direction
    kind: C2c | R2c | C2r

    def __post_init__(self) -> None:
        axes = _axes(self, "axes", self.axes)
        if not axes:
            raise _fail(self, "takes at least one axis")
        _set(self, "axes", axes)
        _of(self, "direction", self.direction, Direction)
        _of(self, "kind", self.kind, (C2c, R2c, C2r))

    def n_operands(self) -> int:
        return 1

    def n_results(self) -> int:
        return 1


# --------------------------------------------------------------------------
# Rules
# --------------------------------------------------------------------------


#: The complex dtype of each float or complex precision, and the real one.
COMPLEX_OF: Final = {D.float32: D.complex64, D.float64: D.complex128, D.complex64: D.complex64,
                     D.complex128: D.complex128}
REAL_OF: Final = {D.float32: D.float32, D.float64: D.float64, D.complex64: D.float32,
                  D.complex128: D.float64}


@_answers
def fft(spec: Fft, shapes: Sequence[Sequence[int]]) -> Shapes:
    """Fft's destination: x's shape for C2c; for R2c the last listed axis of n
    points becomes n // 2 + 1 bins; for C2r(n) that axis, of n // 2 + 1 bins,
    becomes n points. Every listed axis is an axis of x."""
    (x,) = _operands(["x"], shapes)
    for a in spec.axes:
        _axis("transformed axis", a, len(x))
    last = spec.axes[-1]
    kind = spec.kind
    if isinstance(kind, R2c):
        return _results(_set_at(x, last, x[last] // 2 + 1))
    if isinstance(kind, C2r):
        if x[last] != kind.n // 2 + 1:
            raise _Misfit(f"C2r of {kind.n} points reads {kind.n // 2 + 1} bins along axis "
                          f"{last}, x has {x[last]}")
        return _results(_set_at(x, last, kind.n))
    return _results(x)


def fft_dtype(kind: C2c | R2c | C2r, x: Dtype) -> Dtype | None:
    """The destination's dtype of a transform of ``x``: C2c complex64/128 to
    itself, R2c float32/64 to complex64/128, C2r the reverse; None where
    ``kind`` does not take ``x``."""
    if isinstance(kind, C2c):
        return x if x.is_complex else None
    if isinstance(kind, R2c):
        return COMPLEX_OF[x] if x in (D.float32, D.float64) else None
    return REAL_OF[x] if x.is_complex else None


def fft_misfit(spec: Fft, dsts: Sequence[Array], operands: Sequence[Array]) -> Answer | None:
    """The refusal of an fft call that does not fit: one operand x and one
    contiguous destination of ``fft_dtype`` and of ``Shape.fft``'s shape."""
    if len(dsts) != 1 or len(operands) != 1:
        return Answer.BAD_ARITY
    (dst,), (x,) = dsts, operands
    if not dst.layout.is_contiguous():
        return Answer.BAD_LAYOUT
    if dst.dtype is not fft_dtype(spec.kind, x.dtype):
        return Answer.WRONG_DTYPE
    shapes = fft(spec, [x.shape])
    if isinstance(shapes, Error) or tuple(shapes[0]) != tuple(dst.shape):
        return Answer.SHAPE_MISMATCH
    return None


# --------------------------------------------------------------------------
# The record
# --------------------------------------------------------------------------


def _fft_dtypes(spec: Fft, loads: Sequence[Dtype]) -> tuple[Dtype, ...]:
    """``fft_dtype``; x's own where the kind does not take x (the fit refuses it)."""
    out = fft_dtype(spec.kind, loads[0])
    return (out,) if out is not None else (loads[0],)


#: ``S.fft``.
FFT: Final = Kernel("fft", Fft, fft, _fft_dtypes, no_refusal, fft_misfit)

"""The matrix routines (``S.cholesky``, ``lu``, ``qr``, ``svd``, ``eigh``,
``eig``, ``solve_triangular``), each on the last two axes, defined once."""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Final, final

from .. import dtype as D
from ..answer import Answer
from ..dtype import Dtype
from .attributes import _bool, _of
from .fourier import COMPLEX_OF, REAL_OF
from .record import (
    Error,
    FitCheck,
    Kernel,
    Shape,
    Shapes,
    _answers,
    _Misfit,
    _operands,
    _results,
    no_refusal,
    rule_fit,
)

if TYPE_CHECKING:
    from ..array import Array

__all__ = [
    "CHOLESKY",
    "EIG",
    "EIGH",
    "LU",
    "QR",
    "ROUTINE_CONVENTIONS",
    "SOLVE_TRIANGULAR",
    "SVD",
    "Cholesky",
    "Eig",
    "Eigh",
    "Factors",
    "Lu",
    "Qr",
    "SolveTriangular",
    "Svd",
    "cholesky",
    "eig",
    "eigh",
    "lu",
    "qr",
    "routine_dtypes",
    "routine_misfit",
    "solve_triangular",
    "svd",
]

class Factors(enum.Enum):
    """How much of the unitary factors qr and svd give: REDUCED, k = min(m, n)
    columns of the left and rows of the right; COMPLETE, the square ones."""

    REDUCED = "reduced"
    COMPLETE = "complete"


@final
@dataclass(frozen=True, slots=True)
class Cholesky:
    """``S.cholesky``: the factor of a Hermitian positive-definite a, lower (or
    ``upper``). Operands: a. Destinations: the factor."""

    kernel: ClassVar[str] = "cholesky"
    upper: bool = False

    def __post_init__(self) -> None:
        _bool(self, "upper", self.upper)

    def n_operands(self) -> int:
        return 1

    def n_results(self) -> int:
        return 1


@final
@dataclass(frozen=True, slots=True)
class Lu:
    """``S.lu``: partial-pivoting LU. Operands: a. Destinations: lu (unit-lower
    L below the diagonal, U on and above), pivots (int64), perm (int64)."""

    kernel: ClassVar[str] = "lu"

    def n_operands(self) -> int:
        return 1

    def n_results(self) -> int:
        return 3


@final
@dataclass(frozen=True, slots=True)
class Qr:
    """``S.qr``: a = q r, reduced or ``complete``. Operands: a. Destinations:
    q, r."""

    kernel: ClassVar[str] = "qr"
    complete: bool = False

    def __post_init__(self) -> None:
        _bool(self, "complete", self.complete)

    def n_operands(self) -> int:
        return 1

    def n_results(self) -> int:
        return 2


@final
@dataclass(frozen=True, slots=True)
class Svd:
    """``S.svd``: singular values, with ``vectors`` of those factors or none.
    Operands: a. Destinations: u, s, vh, or s alone where ``vectors`` is None."""

    kernel: ClassVar[str] = "svd"
    vectors: Factors | None = Factors.REDUCED

    def __post_init__(self) -> None:
        if self.vectors is not None:
            _of(self, "vectors", self.vectors, Factors)

    def n_operands(self) -> int:
        return 1

    def n_results(self) -> int:
        return 1 if self.vectors is None else 3


@final
@dataclass(frozen=True, slots=True)
class Eigh:
    """``S.eigh``: eigenvalues (ascending, real) of a Hermitian a, with its
    ``vectors``. Operands: a. Destinations: w, then v where ``vectors``."""

    kernel: ClassVar[str] = "eigh"
    vectors: bool = True

    def __post_init__(self) -> None:
        _bool(self, "vectors", self.vectors)

    def n_operands(self) -> int:
        return 1

    def n_results(self) -> int:
        return 1 + self.vectors


@final
@dataclass(frozen=True, slots=True)
class Eig:
    """``S.eig``: eigenvalues (complex) of a square a, with its right
    ``vectors``. Operands: a. Destinations: w, then v where ``vectors``."""

    kernel: ClassVar[str] = "eig"
    vectors: bool = True

    def __post_init__(self) -> None:
        _bool(self, "vectors", self.vectors)

    def n_operands(self) -> int:
        return 1

    def n_results(self) -> int:
        return 1 + self.vectors


@final
@dataclass(frozen=True, slots=True)
class SolveTriangular:
    """``S.solve_triangular``: x with ``op(a) x = b``, a's ``lower`` (else upper)
    triangle read, ``op`` transposing where ``transpose``, a's diagonal taken as
    ones where ``unit_diagonal``. Operands: a, b. Destinations: x."""

    kernel: ClassVar[str] = "solve_triangular"
    lower: bool = True
    transpose: bool = False
    unit_diagonal: bool = False

    def __post_init__(self) -> None:
        _bool(self, "lower", self.lower)
        _bool(self, "transpose", self.transpose)
        _bool(self, "unit_diagonal", self.unit_diagonal)

    def n_operands(self) -> int:
        return 2

    def n_results(self) -> int:
        return 1


# --------------------------------------------------------------------------
# Shapes
# --------------------------------------------------------------------------


def _matrices(shapes: Sequence[Sequence[int]], square: bool) -> tuple[Shape, int, int]:
    """a's leading axes, m and n: a has rank 2 or more (and m = n if square)."""
    (a,) = _operands(["a"], shapes)
    if len(a) < 2 or (square and a[-1] != a[-2]):
        raise _Misfit(f"a {list(a)} must be [..., m, n]{' with m = n' if square else ''}")
    return a[:-2], a[-2], a[-1]


@_answers
def cholesky(spec: Cholesky, shapes: Sequence[Sequence[int]]) -> Shapes:
    """Cholesky's factor: a's shape, a ``[..., n, n]``."""
    lead, n, _ = _matrices(shapes, square=True)
    return _results((*lead, n, n))


@_answers
def lu(spec: Lu, shapes: Sequence[Sequence[int]]) -> Shapes:
    """Lu's lu ``[..., m, n]``, pivots ``[..., k]`` and perm ``[..., m]``, a
    ``[..., m, n]`` and k = min(m, n)."""
    lead, m, n = _matrices(shapes, square=False)
    return _results((*lead, m, n), (*lead, min(m, n)), (*lead, m))


@_answers
def qr(spec: Qr, shapes: Sequence[Sequence[int]]) -> Shapes:
    """Qr's q and r for a ``[..., m, n]``, k = min(m, n): reduced q
    ``[..., m, k]``, r ``[..., k, n]``; complete q ``[..., m, m]``, r
    ``[..., m, n]``."""
    lead, m, n = _matrices(shapes, square=False)
    k = m if spec.complete else min(m, n)
    return _results((*lead, m, k), (*lead, k, n))


@_answers
def svd(spec: Svd, shapes: Sequence[Sequence[int]]) -> Shapes:
    """Svd's results for a ``[..., m, n]``, k = min(m, n): s ``[..., k]`` alone
    without vectors; reduced u ``[..., m, k]``, s, vh ``[..., k, n]``; complete
    u ``[..., m, m]``, s, vh ``[..., n, n]``."""
    lead, m, n = _matrices(shapes, square=False)
    k = min(m, n)
    s = (*lead, k)
    if spec.vectors is None:
        return _results(s)
    if spec.vectors is Factors.COMPLETE:
        return _results((*lead, m, m), s, (*lead, n, n))
    return _results((*lead, m, k), s, (*lead, k, n))


@_answers
def eigh(spec: Eigh, shapes: Sequence[Sequence[int]]) -> Shapes:
    """Eigh's w ``[..., n]`` then, with vectors, v ``[..., n, n]``, for a
    ``[..., n, n]``."""
    lead, n, _ = _matrices(shapes, square=True)
    w = (*lead, n)
    return _results(w, (*lead, n, n)) if spec.vectors else _results(w)


@_answers
def eig(spec: Eig, shapes: Sequence[Sequence[int]]) -> Shapes:
    """Eig's w ``[..., n]`` then, with vectors, v ``[..., n, n]`` (both complex),
    for a ``[..., n, n]``."""
    lead, n, _ = _matrices(shapes, square=True)
    w = (*lead, n)
    return _results(w, (*lead, n, n)) if spec.vectors else _results(w)


@_answers
def solve_triangular(spec: SolveTriangular, shapes: Sequence[Sequence[int]]) -> Shapes:
    """Solve_triangular's x: b's shape. Operands: a ``[..., n, n]``, b
    ``[..., n, k]`` of a's rank and leading extents."""
    a, b = _operands(["a", "b"], shapes)
    if len(a) < 2 or a[-1] != a[-2] or len(b) != len(a) or b[:-1] != a[:-1]:
        raise _Misfit(f"a {list(a)} and b {list(b)} must be [..., n, n] and [..., n, k]")
    return _results(b)


# --------------------------------------------------------------------------
# Dtypes and fit checks
# --------------------------------------------------------------------------


#: Two of the routines' open choices this project's libraries both keep, where
#: upstream chose otherwise (the eigenvalues' dtype is ``routine_dtypes``'s):
#: each library's statement states them under these names.
ROUTINE_CONVENTIONS: Final = {
    "cholesky triangle": "upper=False reads a's lower triangle alone and gives L (A = LLᴴ), "
                         "upper=True its upper triangle alone and gives U (A = UᴴU), as LAPACK's "
                         "?potrf and NumPy (upstream reads the lower one in both modes); the "
                         "other triangle is never read and is zero in the factor.",
    "eigh eigenvalues": "real, in the parts' dtype: float32 for complex64 and float32, float64 "
                        "for complex128 and float64 (as NumPy and the Array API; a Hermitian "
                        "matrix's eigenvalues are real; upstream gives complex64 with +0 "
                        "imaginary parts), ascending; eigh reads a's lower triangle alone.",
}


def routine_dtypes(spec: Any, a: Dtype) -> tuple[Dtype, ...]:
    """The destinations' dtypes of routine ``spec`` on matrices of ``a``."""
    real, cplx = REAL_OF[a], COMPLEX_OF[a]
    if isinstance(spec, Lu):
        return (a, D.int64, D.int64)
    if isinstance(spec, Qr):
        return (a, a)
    if isinstance(spec, Svd):
        return (real,) if spec.vectors is None else (a, real, a)
    if isinstance(spec, Eigh):
        return (real, a) if spec.vectors else (real,)
    if isinstance(spec, Eig):
        return (cplx, cplx) if spec.vectors else (cplx,)
    return (a,)  # cholesky, solve_triangular


def _routine_dtypes(spec: Any, dsts: Sequence[Array], operands: Sequence[Array]) -> bool:
    """The dtypes a routine takes: operands all of one full-precision dtype
    (float32, float64, complex64, complex128), destinations of
    ``routine_dtypes``."""
    a = operands[0].dtype
    return (D.full_precision(a) and all(o.dtype is a for o in operands)
            and tuple(d.dtype for d in dsts) == routine_dtypes(spec, a))


def _routine_fit(shapes: Callable[[Any, Sequence[Sequence[int]]], Shapes | Error]) -> FitCheck:
    """A routine's fit check: counts, contiguous destinations, its dtypes, its
    shapes."""
    return rule_fit(shapes, _routine_dtypes, contiguous=True)


def _factor_dtypes(spec: Any, loads: Sequence[Dtype]) -> tuple[Dtype, ...]:
    """``routine_dtypes`` of a's dtype; a's own, one per result, where a is not
    of full precision (the fit refuses it)."""
    a = loads[0]
    return routine_dtypes(spec, a) if D.full_precision(a) else (a,) * spec.n_results()


# --------------------------------------------------------------------------
# The records
# --------------------------------------------------------------------------


#: ``S.cholesky``: the factor of a's dtype.
CHOLESKY: Final = Kernel("cholesky", Cholesky, cholesky, lambda spec, loads: (loads[0],),
                         no_refusal, _routine_fit(cholesky))
#: ``S.lu``: lu of a's dtype, int64 pivots and perm.
LU: Final = Kernel("lu", Lu, lu, _factor_dtypes, no_refusal, _routine_fit(lu))
#: ``S.qr``: q and r of a's dtype.
QR: Final = Kernel("qr", Qr, qr, _factor_dtypes, no_refusal, _routine_fit(qr))
#: ``S.svd``: u and vh of a's dtype, s real.
SVD: Final = Kernel("svd", Svd, svd, _factor_dtypes, no_refusal, _routine_fit(svd))
#: ``S.eigh``: w real, v of a's dtype.
EIGH: Final = Kernel("eigh", Eigh, eigh, _factor_dtypes, no_refusal, _routine_fit(eigh))
#: ``S.eig``: w and v complex.
EIG: Final = Kernel("eig", Eig, eig, _factor_dtypes, no_refusal, _routine_fit(eig))
#: ``S.solve_triangular``: x of b's dtype.
SOLVE_TRIANGULAR: Final = Kernel("solve_triangular", SolveTriangular, solve_triangular,
                                 lambda spec, loads: (loads[1],), no_refusal,
                                 _routine_fit(solve_triangular))

_ROUTINES: Final[dict[str, Kernel[Any]]] = {
    k.name: k for k in (CHOLESKY, LU, QR, SVD, EIGH, EIG, SOLVE_TRIANGULAR)}


def routine_misfit(spec: Any, dsts: Sequence[Array], operands: Sequence[Array]) -> Answer | None:
    """The refusal of a routine call that does not fit: its record's fit check."""
    return _ROUTINES[spec.kernel].fit(spec, dsts, operands)

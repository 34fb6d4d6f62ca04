"""Whether a whole call fits attention, fft or a matrix routine.

Each library checks that a call fits before it declines or claims anything
(Nx_kernel: "A call fits its kernel when its operands and destinations are as
many as the kernel's doc states, of the dtypes it takes and of the shapes it
and Shape state"). For these kernels the fit reads more than the loop rules
of :mod:`nxkernel_core.shape`: the dtypes each spec fixes for its
destinations, and, for fft and the routines, contiguous destinations. One
rule each, here, so that every library and the caller ``nx`` answer alike:

* ``*_misfit(spec, dsts, operands)`` gives the refusal of a call that does not
  fit, checked in this order: counts (``BAD_ARITY``), destination layouts
  (``BAD_LAYOUT``), dtypes (``WRONG_DTYPE``), shapes (``SHAPE_MISMATCH``) —
  attention checks its shapes first, since its program's rule reads the
  loop's rank — or None where the call fits.
* ``fft_dtype`` and ``routine_dtypes`` give the destinations' dtypes from the
  operands' dtype.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

from . import dtype as D
from . import shape as SH
from . import spec as S
from .answer import Answer
from .array import Array
from .dtype import Dtype

__all__ = ["ROUTINE_CONVENTIONS", "attention_misfit", "fft_dtype", "fft_misfit", "loop_rank",
           "map_misfit", "move_misfit", "reduce_misfit", "routine_dtypes", "routine_misfit"]

#: The complex dtype of each float or complex precision, and the real one.
_COMPLEX: Final = {D.float32: D.complex64, D.float64: D.complex128, D.complex64: D.complex64,
                   D.complex128: D.complex128}
_REAL: Final = {D.float32: D.float32, D.float64: D.float64, D.complex64: D.float32,
                D.complex128: D.float64}


def loop_rank(loads: Sequence[S.Load], operands: Sequence[Array]) -> int:
    """The loop's rank as the refusal rules read it: the first load's."""
    first = loads[0] if loads else S.PLAIN
    if isinstance(first, S.Padded):
        return first.pad.loaded_rank
    return operands[0].rank if operands else 0


def map_misfit(spec: S.Map, dsts: Sequence[Array], operands: Sequence[Array]) -> Answer | None:
    """The refusal of a map call that does not fit: counts, the program's
    refusal rule over the loop's rank, then the loaded shapes."""
    if len(operands) != len(spec.loads) or len(dsts) != spec.prog.n_outs or not operands:
        return Answer.BAD_ARITY
    found = SH.map_refusal(spec.prog, loop_rank(spec.loads, operands), [d.dtype for d in dsts],
                           [a.dtype for a in operands], spec.loads)
    if found is not None:
        return found[0]
    want = SH.map(spec, [a.shape for a in operands])
    if isinstance(want, SH.Error) or any(d.shape != w for d, w in zip(dsts, want, strict=True)):
        return Answer.SHAPE_MISMATCH
    return None


def reduce_misfit(spec: S.Reduce, dsts: Sequence[Array], operands: Sequence[Array]
                  ) -> Answer | None:
    """The refusal of a reduce call that does not fit: counts, the reductions'
    refusal rule over the loop's rank, then the results' shapes."""
    if len(operands) != len(spec.loads) or len(dsts) != spec.n_results() or not operands:
        return Answer.BAD_ARITY
    found = SH.reduce_refusal(spec.prog, loop_rank(spec.loads, operands), spec.reductions,
                              [d.dtype for d in dsts], [a.dtype for a in operands], spec.loads)
    if found is not None:
        return found[0]
    want = SH.reduce(spec, [a.shape for a in operands])
    if isinstance(want, SH.Error) or any(d.shape != w for d, w in zip(dsts, want, strict=True)):
        return Answer.SHAPE_MISMATCH
    return None


def _move_dtypes_fit(spec: Any, dsts: Sequence[Array], operands: Sequence[Array]) -> bool:
    """The dtypes each move takes: int64 positions, results of the data's dtype."""
    match spec:
        case S.Gather() | S.RangeGather():
            return operands[0].dtype is D.int64 and dsts[0].dtype is operands[1].dtype
        case S.Scatter():
            into, index, updates = operands
            dt = dsts[0].dtype
            if into.dtype is not dt or updates.dtype is not dt or index.dtype is not D.int64:
                return False
            # Add takes the dtypes Prog's Add takes: every dtype but the booleans.
            return not (spec.combine is S.Combine.ADD and dt.kind is D.Kind.BOOLEAN)
        case S.Sort():
            return dsts[0].dtype is operands[0].dtype and dsts[1].dtype is D.int64
        case S.Numbering():
            return dsts[0].dtype is D.int64 and operands[0].dtype is operands[1].dtype
        case S.Assemble():
            return S.fill_fits(spec.fill, dsts[0].dtype) and all(
                p.dtype is dsts[0].dtype for p in operands)
    raise TypeError(f"move_misfit: {type(spec).__name__} is not a move")


def move_misfit(spec: S.Gather | S.RangeGather | S.Scatter | S.Sort | S.Numbering | S.Assemble,
                dsts: Sequence[Array], operands: Sequence[Array]) -> Answer | None:
    """The refusal of a move call (gather, range_gather, scatter, sort,
    numbering, assemble) that does not fit: counts, then dtypes, then the
    operands' and destinations' shapes as Shape states them."""
    if len(dsts) != spec.n_results() or len(operands) != spec.n_operands():
        return Answer.BAD_ARITY
    if not _move_dtypes_fit(spec, dsts, operands):
        return Answer.WRONG_DTYPE
    shapes = getattr(SH, spec.kernel)(spec, [o.shape for o in operands])
    if isinstance(shapes, SH.Error) or tuple(d.shape for d in dsts) != shapes:
        return Answer.SHAPE_MISMATCH
    return None


def fft_dtype(kind: S.C2c | S.R2c | S.C2r, x: Dtype) -> Dtype | None:
    """The destination's dtype of a transform of ``x``: C2c complex64/128 to
    itself, R2c float32/64 to complex64/128, C2r the reverse; None where
    ``kind`` does not take ``x``."""
    if isinstance(kind, S.C2c):
        return x if x.is_complex else None
    if isinstance(kind, S.R2c):
        return _COMPLEX[x] if x in (D.float32, D.float64) else None
    return _REAL[x] if x.is_complex else None


def fft_misfit(spec: S.Fft, dsts: Sequence[Array], operands: Sequence[Array]) -> Answer | None:
    """The refusal of an fft call that does not fit: one operand x and one
    contiguous destination of ``fft_dtype`` and of ``Shape.fft``'s shape."""
    if len(dsts) != 1 or len(operands) != 1:
        return Answer.BAD_ARITY
    (dst,), (x,) = dsts, operands
    if not dst.layout.is_contiguous():
        return Answer.BAD_LAYOUT
    if dst.dtype is not fft_dtype(spec.kind, x.dtype):
        return Answer.WRONG_DTYPE
    shapes = SH.fft(spec, [x.shape])
    if isinstance(shapes, SH.Error) or tuple(shapes[0]) != tuple(dst.shape):
        return Answer.SHAPE_MISMATCH
    return None


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
    real, cplx = _REAL[a], _COMPLEX[a]
    if isinstance(spec, S.Lu):
        return (a, D.int64, D.int64)
    if isinstance(spec, S.Qr):
        return (a, a)
    if isinstance(spec, S.Svd):
        return (real,) if spec.vectors is None else (a, real, a)
    if isinstance(spec, S.Eigh):
        return (real, a) if spec.vectors else (real,)
    if isinstance(spec, S.Eig):
        return (cplx, cplx) if spec.vectors else (cplx,)
    return (a,)  # cholesky, solve_triangular


_ROUTINE_SHAPES: Final[dict[str, Callable[..., Any]]] = {
    "cholesky": SH.cholesky, "lu": SH.lu, "qr": SH.qr, "svd": SH.svd, "eigh": SH.eigh, "eig": SH.eig,
    "solve_triangular": SH.solve_triangular,
}


def routine_misfit(spec: Any, dsts: Sequence[Array], operands: Sequence[Array]) -> Answer | None:
    """The refusal of a routine call that does not fit: the spec's counts,
    contiguous destinations, operands all of one full-precision dtype
    (float32, float64, complex64, complex128), destinations of
    ``routine_dtypes`` and of the routine's shapes."""
    if len(dsts) != spec.n_results() or len(operands) != spec.n_operands():
        return Answer.BAD_ARITY
    if not all(d.layout.is_contiguous() for d in dsts):
        return Answer.BAD_LAYOUT
    a = operands[0].dtype
    if not D.full_precision(a) or any(o.dtype is not a for o in operands):
        return Answer.WRONG_DTYPE
    if tuple(d.dtype for d in dsts) != routine_dtypes(spec, a):
        return Answer.WRONG_DTYPE
    shapes = _ROUTINE_SHAPES[spec.kernel](spec, [o.shape for o in operands])
    if isinstance(shapes, SH.Error) or tuple(shapes) != tuple(d.shape for d in dsts):
        return Answer.SHAPE_MISMATCH
    return None


def attention_misfit(spec: S.Attention, dsts: Sequence[Array], operands: Sequence[Array]
                     ) -> Answer | None:
    """The refusal of an attention call that does not fit: the spec's counts
    and two destinations, ``Shape.attention``'s shapes, the program's rule
    (``shape.attention_refusal`` over a loop of q's rank), k and v floats, o
    of v's dtype, lse of the accumulator, table and lengths int64, and o and
    lse of the result's shapes."""
    if len(operands) != spec.n_operands() or len(dsts) != 2:
        return Answer.BAD_ARITY
    shapes = SH.attention(spec, [a.shape for a in operands])
    if isinstance(shapes, SH.Error):
        return Answer.SHAPE_MISMATCH
    n_kv = 3 if isinstance(spec.kv, S.Dense) else 4
    first = n_kv + spec.lengths
    refusal = SH.attention_refusal(spec.prog, operands[0].dtype, operands[0].rank, dsts[0].dtype,
                                   spec.acc, [a.dtype for a in operands[first:]], spec.loads)
    if refusal is not None:
        return refusal[0]
    k, v = operands[1], operands[2]
    if not (k.dtype.is_float and v.dtype.is_float) or dsts[0].dtype is not v.dtype:
        return Answer.WRONG_DTYPE
    if dsts[1].dtype is not spec.acc:
        return Answer.WRONG_DTYPE
    if n_kv == 4 and operands[3].dtype is not D.int64:
        return Answer.WRONG_DTYPE
    if spec.lengths and operands[n_kv].dtype is not D.int64:
        return Answer.WRONG_DTYPE
    if any(tuple(d.shape) != tuple(s) for d, s in zip(dsts, shapes, strict=True)):
        return Answer.SHAPE_MISMATCH
    return None

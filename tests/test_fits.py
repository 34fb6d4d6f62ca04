"""nxkernel_core.fits: the fit of fft, routine and attention calls, one
answer per rule, in the stated order (counts, layouts, dtypes, shapes), and
None for a call that fits."""

from __future__ import annotations

import pytest

from nxkernel_core import dtype as D
from nxkernel_core import fits
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_core.dtype import Dtype
from nxkernel_core.layout import Permute
from nxkernel_core.prog import Prog


def _empty(dt: Dtype, shape: tuple[int, ...]) -> Array:
    return Array.empty(dt, shape)


@pytest.mark.parametrize(("kind", "x", "want"), [
    (S.C2c(), D.complex64, D.complex64), (S.C2c(), D.complex128, D.complex128), (S.C2c(), D.float32, None),
    (S.R2c(), D.float32, D.complex64), (S.R2c(), D.float64, D.complex128), (S.R2c(), D.complex64, None),
    (S.R2c(), D.float16, None), (S.C2r(8), D.complex64, D.float32), (S.C2r(8), D.complex128, D.float64),
    (S.C2r(8), D.float32, None)])
def test_fft_dtypes(kind: S.C2c | S.R2c | S.C2r, x: Dtype, want: Dtype | None) -> None:
    assert fits.fft_dtype(kind, x) is want


def test_fft_misfits() -> None:
    spec = S.Fft((1,), S.Direction.FORWARD, S.R2c())
    x = _empty(D.float32, (3, 8))
    assert fits.fft_misfit(spec, [_empty(D.complex64, (3, 5))], [x]) is None
    assert fits.fft_misfit(spec, [_empty(D.complex64, (3, 5))], [x, x]) is Answer.BAD_ARITY
    strided = _empty(D.complex64, (5, 3)).view(Permute((1, 0)))
    assert fits.fft_misfit(spec, [strided], [x]) is Answer.BAD_LAYOUT
    assert fits.fft_misfit(spec, [_empty(D.complex128, (3, 5))], [x]) is Answer.WRONG_DTYPE
    assert fits.fft_misfit(spec, [_empty(D.complex64, (3, 8))], [x]) is Answer.SHAPE_MISMATCH


def test_routine_dtypes() -> None:
    assert fits.routine_dtypes(S.Lu(), D.float32) == (D.float32, D.int64, D.int64)
    assert fits.routine_dtypes(S.Svd(None), D.complex64) == (D.float32,)
    assert fits.routine_dtypes(S.Eigh(True), D.complex128) == (D.float64, D.complex128)
    assert fits.routine_dtypes(S.Eig(False), D.float64) == (D.complex128,)


def test_routine_misfits() -> None:
    a = _empty(D.float64, (2, 4, 4))
    good = [_empty(D.float64, (2, 4, 4)), _empty(D.int64, (2, 4)), _empty(D.int64, (2, 4))]
    assert fits.routine_misfit(S.Lu(), good, [a]) is None
    assert fits.routine_misfit(S.Lu(), good[:2], [a]) is Answer.BAD_ARITY
    flipped = _empty(D.float64, (2, 4, 4)).view(Permute((0, 2, 1)))
    assert fits.routine_misfit(S.Lu(), [flipped, *good[1:]], [a]) is Answer.BAD_LAYOUT
    assert fits.routine_misfit(S.Lu(), good, [_empty(D.float16, (2, 4, 4))]) is Answer.WRONG_DTYPE
    assert fits.routine_misfit(S.Lu(), [_empty(D.float32, (2, 4, 4)), *good[1:]], [a]) is Answer.WRONG_DTYPE
    assert fits.routine_misfit(S.Lu(), [_empty(D.float64, (2, 4, 5)), *good[1:]], [a]) \
        is Answer.SHAPE_MISMATCH


def _attention() -> tuple[S.Attention, list[Array], list[Array]]:
    b = Prog.build([D.float32])
    spec = S.Attention(b.finish(b.const(D.bool_, True), b.copy(b.ins[0])), (), 1.0, D.float32, S.Dense())
    ops = [_empty(D.float32, (2, 3, 4)), _empty(D.float32, (1, 5, 4)), _empty(D.bfloat16, (1, 5, 6))]
    return spec, [_empty(D.bfloat16, (2, 3, 6)), _empty(D.float32, (2, 3))], ops


def test_attention_misfits() -> None:
    spec, dsts, ops = _attention()
    assert fits.attention_misfit(spec, dsts, ops) is None
    assert fits.attention_misfit(spec, dsts[:1], ops) is Answer.BAD_ARITY
    assert fits.attention_misfit(spec, dsts, [ops[0], ops[1], _empty(D.float32, (1, 4, 6))]) \
        is Answer.SHAPE_MISMATCH
    assert fits.attention_misfit(spec, [_empty(D.float32, (2, 3, 6)), dsts[1]], ops) is Answer.WRONG_DTYPE
    assert fits.attention_misfit(spec, [dsts[0], _empty(D.float64, (2, 3))], ops) is Answer.WRONG_DTYPE
    assert fits.attention_misfit(spec, [dsts[0], _empty(D.float32, (2, 4))], ops) is Answer.SHAPE_MISMATCH
    ints = [ops[0], ops[1], _empty(D.int32, (1, 5, 6))]
    assert fits.attention_misfit(spec, [_empty(D.int32, (2, 3, 6)), dsts[1]], ints) is Answer.WRONG_DTYPE

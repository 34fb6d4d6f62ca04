"""nxkernel_cuda.contract_simt's one-thread-an-output kernel: block scales
(Exponent exact, 255 NaN; Value one rounding) applied by the operand's own
index through any layout, Rows and Contracting segments (outputs without
products keep init's bits), complex accumulators (even and odd terms chained
apart), integers wrapping: bit for bit an exact (Fraction) fma chain of the
stated association, and within the stated e(K)."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from nxkernel_core import dtype as D
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.dtype import Dtype
from nxkernel_core.kernel import Call, gamma, unit_roundoff
from nxkernel_core.layout import Permute
from nxkernel_cuda import contraction
from nxkernel_cuda.device import CudaRig
from nxkernel_cuda.library import LIBRARY

from .support import canary, on, run, same_bits, untouched
from .test_contract import fma, round_to

Arr = npt.NDArray[Any]


def _draw(shape: tuple[int, ...], seed: int) -> Arr:
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape) * np.exp2(rng.integers(-6, 7, size=shape))


def _chain(pairs: list[tuple[float, float]], acc: type) -> float:
    """A chain from +0 of fused multiply-adds in ``acc``."""
    s = 0.0
    for x, y in pairs:
        s = fma(x, y, s, acc)
    return s


def _expand(scale: Arr, shape: tuple[int, ...]) -> Arr:
    """Each element's block scale: ``scale`` repeated over its blocks."""
    rep = [n // s for n, s in zip(shape, scale.shape, strict=True)]
    return np.kron(scale, np.ones(rep))


def test_block_scales_by_the_operands_own_index(dev: CudaRig) -> None:
    # a [6, 8] is read transposed (its view [8, 6] contracts axis 0 with b's 0);
    # a's Exponent scale is of the view's shape, blocks 2 x 3; b [8, 4] a Value
    # scale of bfloat16 (not powers of two: each scaled element rounds), blocks 4 x 2.
    base = _draw((6, 8), 1).astype(np.float32)
    hb = _draw((8, 4), 2).astype(np.float32)
    codes = np.random.default_rng(3).integers(118, 138, (4, 2)).astype(np.uint8)
    codes[3, 1] = 255  # NaN: view rows 6-7, columns 3-5 read as NaN
    vals = D.of_float(D.bfloat16, 1.0 + _draw((2, 2), 4) / 64)
    spec = S.Contract((), ((0, 0),), D.float32, scales=(S.ScaleKind.EXPONENT, S.ScaleKind.VALUE))
    a_view = on(dev, base).view(Permute((1, 0)))
    answer, (got,) = run(spec, [a_view, on(dev, hb), on(dev, codes), on(dev, vals, D.bfloat16)], [D.float32])
    assert answer is Answer.DONE
    av = base.T.astype(np.float64)
    sa = _expand(np.where(codes == 255, np.nan, np.ldexp(1.0, codes.astype(int) - 127)), av.shape)
    sb = _expand(vals.astype(np.float64), hb.shape)
    want = np.empty((6, 4), np.float32)
    for r in range(6):
        for c in range(4):
            if any(np.isnan(sa[k, r]) for k in range(8)):
                want[r, c] = np.nan
                continue
            pairs = [(float(av[k, r] * sa[k, r]), round_to(Fraction(float(hb[k, c])) * Fraction(sb[k, c]),
                                                           np.float32)) for k in range(8)]
            want[r, c] = _chain(pairs, np.float32)
    assert np.isnan(got[3:, :]).all() and not np.isnan(got[:3, :]).any()
    assert same_bits(got, want, D.float32, nan_equal=True)


def test_rows_segments_group_rows_in_one_launch(dev: CudaRig) -> None:
    # batch 2; a [2, R=5, K=6], b [2, g=3, K=6, C=4]; a row's id picks b's group.
    ha, hb = _draw((2, 5, 6), 5), _draw((2, 3, 6, 4), 6)
    ids = np.array([[0, 2, -1, 1, 2], [3, 1, 1, 0, 0]], np.int64)
    init = _draw((2, 5, 4), 7)
    init[0, 2, 0] = -0.0
    init.view(np.uint64)[1, 0, 1] = 0xFFF8000000001234  # a NaN with a payload
    spec = S.Contract(((0, 0),), ((2, 2),), D.float64, init=True, segments=S.Rows(1, 1))
    answer, (got,) = run(spec, [on(dev, ha), on(dev, hb), on(dev, init), on(dev, ids)], [D.float64])
    assert answer is Answer.DONE
    want = init.copy()
    for t in range(2):
        for r in range(5):
            e = int(ids[t, r])
            if not 0 <= e < 3:
                continue  # no products: init's bits
            for c in range(4):
                s = _chain([(float(ha[t, r, k]), float(hb[t, e, k, c])) for k in range(6)], np.float64)
                want[t, r, c] = s + init[t, r, c]
    assert same_bits(got, want, D.float64)


def test_contracting_segments_sum_each_groups_indices(dev: CudaRig) -> None:
    ha, hb = _draw((3, 7), 8).astype(np.float32), _draw((7, 2), 9).astype(np.float32)
    ids = np.array([0, 2, 2, 0, -3, 2, 0], np.int64)  # group 1 is empty
    spec = S.Contract((), ((1, 0),), D.float32, segments=S.ContractingSegments(0, 3))
    answer, (got,) = run(spec, [on(dev, ha), on(dev, hb), on(dev, ids)], [D.float32])
    assert answer is Answer.DONE
    want = np.zeros((3, 3, 2), np.float32)
    for e in range(3):
        ks = [k for k in range(7) if ids[k] == e]
        for r in range(3):
            for c in range(2):
                want[e, r, c] = _chain([(float(ha[r, k]), float(hb[k, c])) for k in ks], np.float32)
    assert same_bits(got, want, D.float32)
    assert got[1].view(np.uint32).tolist() == [[0, 0]] * 3  # an empty group without init: +0


def _complex_ref(a: Arr, b: Arr, init: Arr | None, part: type) -> Arr:
    """The stated association: per part, the even terms (ar·br, ar·bi) and the
    odd terms (−ai·bi, ai·br) each a fused chain from +0, summed, init last."""
    rows, k = a.shape
    cols = b.shape[1]
    out = np.empty((rows, cols), np.complex128)
    for r in range(rows):
        for c in range(cols):
            x, y = a[r], b[:, c]
            er = _chain([(float(x[j].real), float(y[j].real)) for j in range(k)], part)
            od = _chain([(float(-x[j].imag), float(y[j].imag)) for j in range(k)], part)
            ei = _chain([(float(x[j].real), float(y[j].imag)) for j in range(k)], part)
            oi = _chain([(float(x[j].imag), float(y[j].real)) for j in range(k)], part)
            re = round_to(Fraction(er) + Fraction(od), part)
            im = round_to(Fraction(ei) + Fraction(oi), part)
            if init is not None:
                re = round_to(Fraction(re) + Fraction(float(init[r, c].real)), part)
                im = round_to(Fraction(im) + Fraction(float(init[r, c].imag)), part)
            out[r, c] = complex(re, im)
    return out


@pytest.mark.parametrize(("acc", "part"), [(D.complex64, np.float32), (D.complex128, np.float64)])
def test_complex_chains_bit_for_bit_and_within_the_bound(dev: CudaRig, acc: Dtype, part: type) -> None:
    ha = (_draw((4, 9), 10) + 1j * _draw((4, 9), 11)).astype(acc.numpy_dtype)
    hb = _draw((9, 3), 12).astype(np.float32)  # a real b: an imaginary +0
    init = (_draw((4, 3), 13) + 1j * _draw((4, 3), 14)).astype(acc.numpy_dtype)
    spec = S.Contract((), ((1, 0),), acc, init=True)
    answer, (got,) = run(spec, [on(dev, ha), on(dev, hb), on(dev, init)], [acc])
    assert answer is Answer.DONE
    want = _complex_ref(ha, hb.astype(np.complex128), init, part)
    assert same_bits(got, want.astype(acc.numpy_dtype), acc)
    e = LIBRARY.statement.error_factor(9, acc)
    assert e == math.sqrt(2) * gamma(11, unit_roundoff(acc)) <= gamma(20, unit_roundoff(acc))
    for r in range(4):
        for c in range(3):
            ex_re = sum((Fraction(float(ha[r, k].real)) * Fraction(float(hb[k, c])) for k in range(9)),
                        Fraction(float(init[r, c].real)))
            ex_im = sum((Fraction(float(ha[r, k].imag)) * Fraction(float(hb[k, c])) for k in range(9)),
                        Fraction(float(init[r, c].imag)))
            err = math.hypot(float(Fraction(float(got[r, c].real)) - ex_re),
                             float(Fraction(float(got[r, c].imag)) - ex_im))
            mag = abs(complex(init[r, c])) + sum(abs(complex(ha[r, k])) * abs(float(hb[k, c]))
                                                 for k in range(9))
            assert err <= e * mag


def test_integer_value_scales_wrap(dev: CudaRig) -> None:
    rng = np.random.default_rng(15)
    ha = rng.integers(-2**15, 2**15, (3, 8)).astype(np.int16)
    hb = rng.integers(-2**15, 2**15, (8, 2)).astype(np.int16)
    sa = rng.integers(-2**15, 2**15, (3, 2)).astype(np.int16)  # blocks 1 x 4
    spec = S.Contract((), ((1, 0),), D.int32, scales=(S.ScaleKind.VALUE, None))
    answer, (got,) = run(spec, [on(dev, ha), on(dev, hb), on(dev, sa)], [D.int32])
    assert answer is Answer.DONE
    full = _expand(sa.astype(np.float64), ha.shape).astype(np.int64).astype(object)
    exact = (ha.astype(object) * full) @ hb.astype(object)
    assert got.ravel().tolist() == [(int(x) + 2**31) % 2**32 - 2**31 for x in exact.ravel()]


def test_stated_declines_write_nothing(dev: CudaRig) -> None:
    f32 = np.ones((2, 4), np.float32)
    ids = np.zeros(2, np.int64)
    pair = ((1, 0),)
    cases = [
        (S.Contract((), pair, D.complex128, scales=(None, S.ScaleKind.VALUE)),
         [on(dev, f32), on(dev, f32.T.copy()), on(dev, f32.T.copy())], D.complex128),
        (S.Contract((), pair, D.complex64, segments=S.Rows(0, 1)),
         [on(dev, f32), on(dev, np.ones((4, 3), np.float64)), on(dev, ids)], D.complex64),
        (S.Contract((), pair, D.float64, segments=S.Rows(0, 1)),
         [on(dev, f32), on(dev, np.ones((4, 3), np.float32)), on(dev, ids)], D.int64),
    ]
    for spec, ops, dt in cases:
        shape = (2, 2) if spec.segments is None else (2,)
        dst = canary(dev, dt, shape)
        call = Call("contract", spec, (dst,), tuple(ops))
        assert contraction.declines(call) is not None
        assert LIBRARY.contract(spec, [dst], ops) is Answer.DECLINED
        assert untouched(dst)
    # ids identical to dst: declined (the kernel would read what it writes).
    spec = S.Contract((), pair, D.int64, segments=S.Rows(0, 1))
    a, b = on(dev, np.ones((2, 4), np.int64)), on(dev, np.ones((4, 3), np.int64))
    dst = on(dev, np.zeros(2, np.int64))
    assert contraction.declines(Call("contract", spec, (dst,), (a, b, dst))) is not None
    assert LIBRARY.contract(spec, [dst], [a, b, dst]) is Answer.DECLINED

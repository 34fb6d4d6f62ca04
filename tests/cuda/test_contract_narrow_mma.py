"""nxkernel_cuda.contract_mma with narrow operands and Exponent block scales.

float8_e4m3fn, float8_e5m2 and float4_e2m1fn operands are widened exactly
into float16 or bfloat16 codes at staging, int4/uint4 into int8/uint8: every
code's value is one of the wide format's (checked over all codes, on the host
and through the kernel), and a call's bits are those of the same call on
operands widened on the host. Exponent (e8m0) scales whose blocks hold every
aligned run of 8 products (MXFP8, MXFP4: blocks of 32 along K) scale each
instruction's result by 2^(ea + eb - 254): within the stated e(K) of the
exact sum, bit for bit the unscaled call on host-scaled operands where those
are exact, and exactly rounded at the extremes (a product of scales beyond
float32's range, subnormal and overflowing results, code 255 NaN). A scale
layout that fails the condition computes on the SIMT kernel (float4 too).
Which calls take the tensor cores reads dtypes,
attributes, scale extents and the device model only."""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from types import SimpleNamespace
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from nxkernel_core import dtype as D
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_core.dtype import Dtype
from nxkernel_core.kernel import Call, gamma, unit_roundoff
from nxkernel_core.layout import Permute
from nxkernel_cuda import contract_mma, contraction
from nxkernel_cuda.device import CudaRig
from nxkernel_cuda.library import LIBRARY

from .support import on, run, same_bits

Arr = npt.NDArray[Any]
U32 = unit_roundoff(D.float32)
E4, E5, F4 = D.float8_e4m3fn, D.float8_e5m2, D.float4_e2m1fn
NARROW = (E4, E5, F4)
EXP = S.ScaleKind.EXPONENT
F32 = S.Contract((), ((1, 0),), D.float32)
F32_INIT = S.Contract((), ((1, 0),), D.float32, init=True)
SCALED = S.Contract((), ((1, 0),), D.float32, scales=(EXP, EXP))


def _all_codes(dt: Dtype) -> Arr:
    """Every code of a narrow float, as host elements."""
    return np.arange(1 << dt.bits, dtype=np.uint8).view(dt.numpy_dtype)


def _wide(dt: Dtype) -> Dtype:
    """The staged format of a call whose other operand is ``dt``'s partner: float16 but for bfloat16."""
    return D.bfloat16 if dt is D.bfloat16 else D.float16


def _draw(dt: Dtype, shape: tuple[int, ...], seed: int) -> Arr:
    """Host elements of ``dt``: narrow floats over their range (every e2m1
    code), 16-bit floats over 2^±6, 4-bit integers over theirs."""
    rng = np.random.default_rng(seed)
    if dt is F4:
        return rng.integers(0, 16, size=shape).astype(np.uint8).view(dt.numpy_dtype)
    if dt in (D.int4, D.uint4):
        lo, hi = dt.int_range
        return rng.integers(lo, hi + 1, size=shape).astype(dt.numpy_dtype)
    return D.of_float(dt, rng.standard_normal(shape) * np.exp2(rng.integers(-6, 7, size=shape)))


def _as(dt: Dtype, x: Arr) -> Arr:
    """Host elements ``x`` (exactly representable) converted into ``dt``."""
    return D.of_float(dt, x.astype(np.float64))


def _ops(dev: CudaRig, spec: S.Contract, *pairs: tuple[Arr, Dtype]) -> list[Array]:
    ops = [on(dev, x, dt) for x, dt in pairs]
    assert contract_mma.takes(dev, spec, [o.dtype for o in ops], [o.shape for o in ops])
    return ops


def _expand(codes: Arr, shape: tuple[int, ...]) -> Arr:
    """Each element's factor 2^(code - 127) (NaN for 255), over its block."""
    f = np.where(codes == 255, np.nan, np.ldexp(1.0, codes.astype(np.int64) - 127))
    rep = [n // s for n, s in zip(shape, codes.shape, strict=True)]
    return np.kron(f, np.ones(rep))


def _check_bound(got: Arr, a: Arr, b: Arr, k: int, e: float) -> None:
    """|got - exact| <= e · Σ|a||b| for a [rows, K] times b [K, cols] of
    float64 elements whose products are exact (fsum: the exact sum correctly
    rounded, its own error 2^-53 |x| allowed)."""
    for r in range(a.shape[0]):
        for c in range(b.shape[1]):
            p = a[r] * b[:, c]
            if np.isnan(p).any():
                assert np.isnan(got[r, c])
                continue
            x = math.fsum(p.tolist())
            s = math.fsum(np.abs(p).tolist())
            slack = Fraction(e * s) + Fraction(abs(x)) * 2**-53
            assert abs(Fraction(float(got[r, c])) - Fraction(x)) <= slack


# ---------------------------------------------------------------------------
# Narrow operands
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dt", NARROW)
def test_every_narrow_code_is_a_float16_and_a_bfloat16_value(dt: Dtype) -> None:
    v = _all_codes(dt).astype(np.float64)
    for wide in (D.float16, D.bfloat16):
        back = D.of_float(wide, v).astype(np.float64)
        nan = np.isnan(v)
        assert np.array_equal(np.isnan(back), nan)
        assert np.array_equal(back[~nan], v[~nan])
        assert np.array_equal(np.signbit(back[~nan]), np.signbit(v[~nan]))


@pytest.mark.parametrize("dt", NARROW)
def test_the_kernel_widens_every_code_exactly(dev: CudaRig, dt: Dtype) -> None:
    # a [n, 8]: row r holds code r at k = 0, zeros after; b [8, 1] = (1, 0, ...):
    # out[r] is code r's value alone (a NaN a NaN), through both staged formats.
    codes = _all_codes(dt)
    n = codes.size
    a = np.zeros((n, 8), np.uint8).view(dt.numpy_dtype)
    a[:, 0] = codes
    want = codes.astype(np.float64)
    for wide in (D.float16, D.bfloat16):
        b = D.of_float(wide, np.eye(8)[:, :1])
        ops = _ops(dev, F32, (a, dt), (b, wide))
        assert contract_mma.kind(F32, [o.dtype for o in ops]) == (1 if wide is D.float16 else 0)
        answer, (got,) = run(F32, ops, [D.float32])
        assert answer is Answer.DONE
        got = got.ravel().astype(np.float64)
        assert np.array_equal(np.isnan(got), np.isnan(want))
        assert np.array_equal(got[~np.isnan(want)], want[~np.isnan(want)])


@pytest.mark.parametrize(("da", "db"), [(E4, E4), (E5, E4), (F4, F4), (E4, D.bfloat16), (D.float16, E5)])
def test_narrow_operands_give_the_bits_of_host_widened_ones(dev: CudaRig, da: Dtype, db: Dtype) -> None:
    # a read transposed, 70 x 20 outputs (partial tiles), K = 40 (a partial K step), init.
    ha, hb = _draw(da, (40, 70), 1), _draw(db, (40, 20), 2)
    if db is E5:
        hb[3, 4], hb[5, 6] = np.inf, np.nan   # e5m2 keeps infinities and NaNs
    init = np.random.default_rng(3).standard_normal((70, 20)).astype(np.float32)
    wide = D.bfloat16 if D.bfloat16 in (da, db) else D.float16
    ops = [on(dev, ha, da).view(Permute((1, 0))), on(dev, hb, db), on(dev, init)]
    assert contract_mma.takes(dev, F32_INIT, [o.dtype for o in ops])
    answer, (got,) = run(F32_INIT, ops, [D.float32])
    assert answer is Answer.DONE
    wops = [on(dev, _as(wide, ha), wide).view(Permute((1, 0))), on(dev, _as(wide, hb), wide), on(dev, init)]
    answer, (want,) = run(F32_INIT, wops, [D.float32])
    assert answer is Answer.DONE
    assert same_bits(got, want, D.float32, nan_equal=True)
    if db is E5:
        assert np.isnan(got[:, 6]).all() and not np.isnan(got[:, 0]).any()


@pytest.mark.parametrize(("da", "db", "acc", "wa", "wb"),
                         [(D.int4, D.int4, D.int32, D.int8, D.int8),
                          (D.int4, D.int8, D.int32, D.int8, D.int8),
                          (D.uint4, D.uint4, D.uint32, D.uint8, D.uint8)])
def test_4_bit_integers_give_the_bits_of_host_widened_ones(dev: CudaRig, da: Dtype, db: Dtype, acc: Dtype,
                                                           wa: Dtype, wb: Dtype) -> None:
    ha, hb = _draw(da, (37, 70), 4), _draw(db, (70, 9), 5)
    spec = S.Contract((), ((1, 0),), acc)
    ops = [on(dev, ha, da), on(dev, hb, db)]
    assert contract_mma.takes(dev, spec, [o.dtype for o in ops])
    answer, (got,) = run(spec, ops, [acc])
    assert answer is Answer.DONE
    wide = [on(dev, ha.astype(np.int64).astype(wa.numpy_dtype)),
            on(dev, hb.astype(np.int64).astype(wb.numpy_dtype))]
    answer, (want,) = run(spec, wide, [acc])
    assert answer is Answer.DONE and same_bits(got, want, acc)
    exact = ha.astype(np.int64).astype(object) @ hb.astype(np.int64).astype(object)
    assert got.astype(np.int64).ravel().tolist() == [int(x) for x in exact.ravel()]  # no wrap at these sizes


# ---------------------------------------------------------------------------
# Exponent block scales
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dt", [E4, F4])
def test_mx_block_scales_are_within_the_bound_and_scale_each_instruction(dev: CudaRig, dt: Dtype) -> None:
    # MXFP8 / MXFP4: a [70, 64], b [64, 20] (stored transposed, its scale too),
    # blocks of 32 along K; codes where the host-scaled operands are float16 normals.
    rows, k, cols = 70, 64, 20
    rng = np.random.default_rng(6)
    ha, hbt = _draw(dt, (rows, k), 7), _draw(dt, (cols, k), 8)
    sa = rng.integers(122, 134, (rows, 2)).astype(np.uint8)
    sbt = rng.integers(122, 134, (cols, 2)).astype(np.uint8)
    sa[3, 1] = 255  # a NaN block: row 3 is NaN
    ops = [on(dev, ha, dt), on(dev, hbt, dt).view(Permute((1, 0))), on(dev, sa),
           on(dev, sbt).view(Permute((1, 0)))]
    assert contract_mma.takes(dev, SCALED, [o.dtype for o in ops], [o.shape for o in ops])
    answer, (got,) = run(SCALED, ops, [D.float32])
    assert answer is Answer.DONE
    fa = ha.astype(np.float64) * _expand(sa, (rows, k))
    fb = hbt.T.astype(np.float64) * _expand(sbt.T, (k, cols))
    e = LIBRARY.statement.error_factor(k, D.float32)
    assert contract_mma.error_factor(k) <= e <= gamma(2 * k + 2, U32)
    _check_bound(got, fa, fb, k, contract_mma.error_factor(k))
    assert np.isnan(got[3]).all() and np.isnan(got).sum() == cols
    # Bit for bit the unscaled tensor-core call on the host-scaled operands (float16, exact).
    wa, wb = _as(D.float16, fa), _as(D.float16, fb)
    assert np.array_equal(wa.astype(np.float64), fa, equal_nan=True)
    assert np.array_equal(wb.astype(np.float64), fb, equal_nan=True)
    answer, (want,) = run(F32, _ops(dev, F32, (wa, D.float16), (wb, D.float16)), [D.float32])
    assert answer is Answer.DONE
    assert same_bits(got, want, D.float32, nan_equal=True)
    # Into bfloat16 (an MX GEMM's output): the float32 result rounded once.
    answer, (bf,) = run(SCALED, ops, [D.bfloat16])
    assert answer is Answer.DONE
    assert same_bits(bf, D.of_float(D.bfloat16, got.astype(np.float64)), D.bfloat16, nan_equal=True)


def test_scale_extremes_round_once(dev: CudaRig) -> None:
    # K = 8: one instruction an output, so each output is d · 2^(ea + eb - 254)
    # rounded once, d the unscaled call's. Codes give scale products past
    # float32's range (254 + 254, 0 + 0), subnormal and overflowing results,
    # exact ones whose factors alone overflow (254 + 0), and NaN (255).
    rows, cols = 16, 8
    ha = _draw(E4, (rows, 8), 9)
    hb = _draw(E4, (8, cols), 10)
    ra = np.array([255, 254, 0, 1, 127, 200, 60, 254, 3, 127, 250, 100, 0, 180, 90, 127], np.uint8)
    cb = np.array([127, 0, 254, 100, 1, 254, 0, 60], np.uint8)
    sa, sb = ra.reshape(rows, 1), cb.reshape(1, cols)
    ops = _ops(dev, SCALED, (ha, E4), (hb, E4), (sa, D.uint8), (sb, D.uint8))
    answer, (got,) = run(SCALED, ops, [D.float32])
    assert answer is Answer.DONE
    answer, (d,) = run(F32, _ops(dev, F32, (ha, E4), (hb, E4)), [D.float32])
    assert answer is Answer.DONE
    s = ra.astype(np.int64)[:, None] + cb.astype(np.int64)[None, :] - 254
    with np.errstate(over="ignore", invalid="ignore"):
        want = (d.astype(np.float64) * np.ldexp(1.0, s)).astype(np.float32)  # exact, then one rounding
    want = np.float32(0) + want  # the chain from +0: an underflow to -0 is +0
    want[ra == 255, :] = np.nan
    assert same_bits(got, want, D.float32, nan_equal=True)
    fin = np.isfinite(want)
    sub = fin & (want != 0) & (np.abs(want) < np.finfo(np.float32).tiny)
    assert sub.any() and np.isinf(want).any() and (fin & (s == 0)).any()  # the extremes are met


def test_a_scale_layout_that_fails_the_condition_computes_on_simt(dev: CudaRig) -> None:
    # Blocks of 4 along K: a run of 8 spans two blocks, so the SIMT kernel computes it.
    rows, k, cols = 5, 24, 3
    rng = np.random.default_rng(11)
    ha, hb = _draw(E4, (rows, k), 12), _draw(E5, (k, cols), 13)
    sa = rng.integers(118, 136, (rows, k // 4)).astype(np.uint8)
    sb = rng.integers(118, 136, (1, cols)).astype(np.uint8)
    ops = [on(dev, ha, E4), on(dev, hb, E5), on(dev, sa), on(dev, sb)]
    assert not contract_mma.takes(dev, SCALED, [o.dtype for o in ops], [o.shape for o in ops])
    answer, (got,) = run(SCALED, ops, [D.float32])
    assert answer is Answer.DONE
    fa = ha.astype(np.float64) * _expand(sa, (rows, k))
    fb = hb.astype(np.float64) * _expand(sb, (k, cols))
    e = LIBRARY.statement.error_factor(k, D.float32)
    assert e == contraction.error_factor(k, D.float32) >= gamma(k + 3, U32)
    _check_bound(got, fa, fb, k, gamma(k + 3, U32))
    # float4 operands compute on the SIMT kernel too, within the same bound.
    hf4 = _draw(F4, (rows, k), 14)
    f4 = [on(dev, hf4, F4), ops[1], ops[2], ops[3]]
    assert contraction.declines(Call("contract", SCALED, (Array.empty(D.float32, (rows, cols), dev),),
                                     tuple(f4))) is None
    answer, (got4,) = run(SCALED, f4, [D.float32])
    assert answer is Answer.DONE
    _check_bound(got4, hf4.astype(np.float64) * _expand(sa, (rows, k)), fb, k, gamma(k + 3, U32))


def test_which_narrow_and_scaled_calls_take_the_tensor_cores() -> None:
    sm90, sm75 = SimpleNamespace(arch_number=90), SimpleNamespace(arch_number=75)

    def takes(dev: Any, spec: S.Contract, dts: Sequence[Dtype],
              shapes: Sequence[Sequence[int]] | None = None) -> bool:
        return contract_mma.takes(dev, spec, dts, shapes)

    for da, db, knd in [(E4, E4, 1), (E5, E4, 1), (F4, F4, 1), (D.float16, F4, 1), (E4, D.bfloat16, 0),
                        (D.bfloat16, F4, 0), (D.bfloat16, D.bfloat16, 0)]:
        assert contract_mma.kind(F32, [da, db]) == knd
        assert takes(sm90, F32, [da, db]) and not takes(sm75, F32, [da, db])
    for da, db in [(D.float16, D.bfloat16), (E4, D.float32), (E4, D.int8), (D.float32, D.float32)]:
        assert not takes(sm90, F32, [da, db])
    i32, u32 = S.Contract((), ((1, 0),), D.int32), S.Contract((), ((1, 0),), D.uint32)
    assert contract_mma.kind(i32, [D.int4, D.int4]) == contract_mma.kind(i32, [D.int8, D.int4]) == 2
    assert contract_mma.kind(u32, [D.uint4, D.uint8]) == 3
    assert not takes(sm90, i32, [D.uint4, D.int4]) and not takes(sm90, u32, [D.int4, D.int4])
    assert not takes(sm90, S.Contract((), ((1, 0),), D.float64), [E4, E4])
    # Exponent scales: blocks along the innermost contracting pair of 8's multiples, or none along K.
    mx = [(70, 64), (64, 20), (70, 2), (2, 20)]
    assert takes(sm90, SCALED, [E4, E4, D.uint8, D.uint8], mx)
    assert not takes(sm90, SCALED, [E4, E4, D.uint8, D.uint8])  # no shapes: not taken
    assert not takes(sm75, SCALED, [E4, E4, D.uint8, D.uint8], mx)
    per_row = [(70, 36), (36, 20), (70, 1), (1, 20)]
    assert takes(sm90, SCALED, [F4, F4, D.uint8, D.uint8], per_row)  # K = 36: no block along K
    assert not takes(sm90, SCALED, [E4, E4, D.uint8, D.uint8], [(70, 36), (36, 20), (70, 2), (1, 20)])
    assert not takes(sm90, SCALED, [E4, E4, D.uint8, D.uint8], [(70, 64), (64, 20), (70, 16), (2, 20)])
    # Two contracting pairs: the innermost's extent and blocks decide.
    two = S.Contract((), ((1, 0), (2, 1)), D.float32, scales=(EXP, None))
    assert takes(sm90, two, [E4, E4, D.uint8], [(4, 3, 16), (3, 16, 5), (4, 3, 2)])
    assert not takes(sm90, two, [E4, E4, D.uint8], [(4, 16, 3), (16, 3, 5), (4, 2, 1)])
    # Value scales, integer accumulators and Contracting segments with scales stay on SIMT; Rows take them.
    value = S.Contract((), ((1, 0),), D.float32, scales=(S.ScaleKind.VALUE, None))
    assert not takes(sm90, value, [E4, E4, D.float32], [(70, 64), (64, 20), (70, 2)])
    rows = S.Contract((), ((1, 1),), D.float32, scales=(EXP, None), segments=S.Rows(0, 0))
    assert takes(sm90, rows, [E4, E4, D.uint8, D.int64], [(70, 64), (2, 64, 20), (70, 2), (70,)])
    con = S.Contract((), ((1, 0),), D.float32, scales=(EXP, None), segments=S.ContractingSegments(0, 2))
    assert not takes(sm90, con, [E4, E4, D.uint8, D.int64], [(70, 64), (64, 20), (70, 2), (64,)])
    assert contract_mma.scales_fit(SCALED, mx) and not contract_mma.scales_fit(
        SCALED, [(70, 64), (64, 20), (70, 16), (2, 20)])


def test_an_mxfp8_grouped_gemm_takes_the_tensor_cores_with_each_rows_scales(dev: CudaRig) -> None:
    """Rows segments with Exponent scales (an MXFP8 mixture of experts): a's
    rows are gathered by group and read their own scale codes, b's group its
    own slice of b's scales; each group's rows get the bits of the unsegmented
    scaled call on that group's rows, rows in no group +0."""
    rows, k, cols, groups = 70, 64, 20, 3
    rng = np.random.default_rng(41)
    ha, hb = _draw(E4, (rows, k), 42), _draw(E4, (groups, k, cols), 43)
    sa = rng.integers(118, 136, (rows, k // 32)).astype(np.uint8)
    sb = rng.integers(118, 136, (groups, k // 32, cols)).astype(np.uint8)
    ids = rng.integers(-1, groups + 1, rows).astype(np.int64)
    spec = S.Contract((), ((1, 1),), D.float32, scales=(EXP, EXP), segments=S.Rows(0, 0))
    ops = [on(dev, ha, E4), on(dev, hb, E4), on(dev, sa), on(dev, sb), on(dev, ids)]
    assert contract_mma.takes(dev, spec, [o.dtype for o in ops], [o.shape for o in ops])
    answer, (got,) = run(spec, ops, [D.float32])
    assert answer is Answer.DONE
    for e in range(groups):
        mine = np.flatnonzero(ids == e)
        part = _ops(dev, SCALED, (ha[mine], E4), (hb[e], E4), (sa[mine], D.uint8), (sb[e], D.uint8))
        answer, (want,) = run(SCALED, part, [D.float32])
        assert answer is Answer.DONE
        assert same_bits(got[mine], want, D.float32), e
    none = (ids < 0) | (ids >= groups)
    assert none.any() and same_bits(got[none], np.zeros((int(none.sum()), cols), np.float32), D.float32)

"""nxkernel_cuda.contract_mma: the tensor-core path. Which calls take it reads
dtypes, attributes and the device model only; float results are within the
stated e(K) of the exact sum (an adversarial truncation case included) on
every device; on cuda-emu the bits are the stated instruction model's
(8 exact products aligned to the largest and truncated, the sum truncated to
float32, each result added to a float32 chain rounded to nearest); integers
are exact and wrap."""

from __future__ import annotations

import math
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
from nxkernel_core.kernel import gamma, unit_roundoff
from nxkernel_core.layout import Permute, Range, Slice
from nxkernel_cuda import contract_mma, contraction
from nxkernel_cuda.contract_simt import problem
from nxkernel_cuda.device import CudaRig, EmuDevice
from nxkernel_cuda.library import LIBRARY

from .support import on, run, same_bits

Arr = npt.NDArray[Any]
U32 = unit_roundoff(D.float32)


def _narrow(dt: Dtype, shape: tuple[int, ...], seed: int) -> Arr:
    """Host elements of a 16-bit float over magnitudes 2^±6 of both signs."""
    rng = np.random.default_rng(seed)
    return D.of_float(dt, rng.standard_normal(shape) * np.exp2(rng.integers(-6, 7, size=shape)))


def _fused8(products: list[Fraction]) -> float:
    """The stated model of one instruction from C = 0: the exact products
    aligned to the largest one's float32 ulp, each truncated toward zero, summed
    exactly, the sum truncated toward zero to float32."""
    amax = max(abs(p) for p in products)
    if amax == 0:
        return 0.0
    _, e = math.frexp(float(amax))  # amax in [2^(e-1), 2^e): exact, a product of two 16-bit floats
    ulp = Fraction(2) ** (e - 24)
    total = sum(int(p / ulp) for p in products) * ulp   # int() truncates toward zero
    f = np.float32(float(total))
    if abs(Fraction(float(f))) > abs(total):
        f = np.nextafter(f, np.float32(0))
    return float(f)


def _model(a: Arr, b: Arr, init: Arr | None) -> Arr:
    """The model's result of a [rows, K] times b [K, cols]: instruction results
    of 8 consecutive k added to a float32 chain from +0, init added last."""
    fa, fb = a.astype(np.float64), b.astype(np.float64)
    rows, k = fa.shape
    out = np.zeros((rows, fb.shape[1]), np.float32)
    for r in range(rows):
        for c in range(fb.shape[1]):
            acc = np.float32(0)
            for k0 in range(0, k, contract_mma.K_STEP):
                ps = [Fraction(float(fa[r, j])) * Fraction(float(fb[j, c]))
                      for j in range(k0, min(k, k0 + contract_mma.K_STEP))]
                acc = np.float32(acc + np.float32(_fused8(ps)))
            out[r, c] = acc
    return out if init is None else (out + init.astype(np.float32)).astype(np.float32)


def _exact(a: Arr, b: Arr, init: Arr | None) -> tuple[Arr, Arr]:
    """Each output's exact sum (Fractions) and |init| + Σ|a||b|."""
    fa, fb = a.astype(np.float64), b.astype(np.float64)
    rows, k = fa.shape
    cols = fb.shape[1]
    exact = np.empty((rows, cols), object)
    scale = np.empty((rows, cols), np.float64)
    for r in range(rows):
        for c in range(cols):
            terms = [Fraction(float(fa[r, j])) * Fraction(float(fb[j, c])) for j in range(k)]
            i0 = 0.0 if init is None else float(init[r, c])
            exact[r, c] = sum(terms, Fraction(i0))
            scale[r, c] = abs(i0) + float(sum(abs(x) for x in terms))
    return exact, scale


def _adversarial(dt: Dtype) -> tuple[Arr, Arr]:
    """a [2, 16], b [16, 3]: row 0 of a block of one product 1 and seven of
    1.9921875·2^-24 (each under the float32 ulp of 1, so truncated away), row 1
    random."""
    a = np.zeros((2, 16), np.float64)
    b = np.ones((16, 3), np.float64)
    a[0, 0] = 1.0
    a[0, 1:8] = 1.9921875 * 2.0**-12
    b[1:8, :] = 2.0**-12
    a[1] = np.random.default_rng(3).standard_normal(16)
    return D.of_float(dt, a), D.of_float(dt, b)


@pytest.mark.parametrize("dt", [D.bfloat16, D.float16])
def test_results_are_within_the_stated_bound(dev: CudaRig, dt: Dtype) -> None:
    ha, hb = _narrow(dt, (5, 41), 1), _narrow(dt, (41, 9), 2)
    init = np.random.default_rng(4).standard_normal((5, 9)).astype(np.float32)
    spec = S.Contract((), ((1, 0),), D.float32, init=True)
    answer, (got,) = run(spec, [on(dev, ha, dt), on(dev, hb, dt), on(dev, init)], [D.float32])
    assert answer is Answer.DONE
    exact, scale = _exact(ha, hb, init)
    e = LIBRARY.statement.error_factor(41, D.float32)
    assert contract_mma.error_factor(41) <= e <= gamma(2 * 41 + 2, U32)
    for g, x, s in zip(got.ravel(), exact.ravel(), scale.ravel(), strict=True):
        assert abs(Fraction(float(g)) - x) <= Fraction(e * s)
    # Truncation's worst case: seven products under the ulp of the first.
    aa, ab = _adversarial(dt)
    bare = S.Contract((), ((1, 0),), D.float32)
    answer, (adv,) = run(bare, [on(dev, aa, dt), on(dev, ab, dt)], [D.float32])
    assert answer is Answer.DONE
    exact, scale = _exact(aa, ab, None)
    for g, x, s, k in zip(adv.ravel(), exact.ravel(), scale.ravel(), [16] * adv.size, strict=True):
        assert abs(Fraction(float(g)) - x) <= Fraction(contract_mma.error_factor(k) * s)


@pytest.mark.parametrize("dt", [D.bfloat16, D.float16])
def test_emulated_bits_are_the_stated_model(emu: EmuDevice, dt: Dtype) -> None:
    # a read transposed, K = 21 (a partial last instruction), 70 x 66 outputs (partial tiles).
    ha, hb = _narrow(dt, (21, 70), 5), _narrow(dt, (21, 66), 6)
    init = np.random.default_rng(7).standard_normal((70, 66)).astype(np.float32)
    spec = S.Contract((), ((1, 0),), D.float32, init=True)
    a_view = on(emu, ha, dt).view(Permute((1, 0)))
    answer, (got,) = run(spec, [a_view, on(emu, hb, dt), on(emu, init)], [D.float32])
    assert answer is Answer.DONE
    assert same_bits(got, _model(ha.T, hb, init), D.float32)
    aa, ab = _adversarial(dt)
    bare = S.Contract((), ((1, 0),), D.float32)
    answer, (adv,) = run(bare, [on(emu, aa, dt), on(emu, ab, dt)], [D.float32])
    assert same_bits(adv, _model(aa, ab, None), D.float32)
    assert adv[0].tolist() == [1.0, 1.0, 1.0]  # truncated: a rounded chain would give 1 + 2^-23


@pytest.mark.parametrize(("acc", "op", "lo", "hi"),
                         [(D.int32, np.int8, -128, 128), (D.uint32, np.uint8, 0, 256)])
def test_integers_are_exact_and_wrap(dev: CudaRig, acc: Dtype, op: type, lo: int, hi: int) -> None:
    rng = np.random.default_rng(11)
    a: Arr = rng.integers(lo, hi, size=(2, 37, 70)).astype(op)
    b: Arr = rng.integers(lo, hi, size=(2, 70, 9)).astype(op)
    a[0, 0, :] = lo if lo else hi - 1
    b[0, :, 0] = lo if lo else hi - 1
    bits = 32
    init = rng.integers(0, 2**bits, size=(2, 37, 9)).astype(np.uint32).view(acc.numpy_dtype)
    spec = S.Contract(((0, 0),), ((2, 1),), acc, init=True)
    answer, (got,) = run(spec, [on(dev, a), on(dev, b), on(dev, init)], [acc])
    assert answer is Answer.DONE
    exact = np.einsum("trk,tkc->trc", a.astype(object), b.astype(object)) + init.astype(object)
    want = np.array([int(x) % 2**bits for x in exact.ravel()], np.uint64).astype(np.uint32)
    assert got.view(np.uint32).ravel().tolist() == want.tolist()


def test_which_calls_take_the_tensor_cores() -> None:
    sm90, sm75 = SimpleNamespace(arch_number=90), SimpleNamespace(arch_number=75)
    f32 = S.Contract((), ((1, 0),), D.float32)
    assert contract_mma.takes(sm90, f32, [D.bfloat16, D.bfloat16])  # type: ignore[arg-type]
    assert contract_mma.takes(sm90, f32, [D.float16, D.float16, D.float32])  # type: ignore[arg-type]
    assert not contract_mma.takes(sm75, f32, [D.bfloat16, D.bfloat16])  # type: ignore[arg-type]
    assert contract_mma.takes(sm90, f32, [D.float8_e4m3fn, D.float8_e4m3fn])  # type: ignore[arg-type]
    for dts in ([D.bfloat16, D.float16], [D.float8_e4m3fn, D.float32], [D.float32, D.float32]):
        assert not contract_mma.takes(sm90, f32, dts)  # type: ignore[arg-type]
    scaled = S.Contract((), ((1, 0),), D.float32, scales=(S.ScaleKind.EXPONENT, None))
    assert not contract_mma.takes(sm90, scaled, [D.bfloat16, D.bfloat16, D.uint8])  # type: ignore[arg-type]
    i32 = S.Contract((), ((1, 0),), D.int32)
    assert contract_mma.takes(sm90, i32, [D.int8, D.int8])  # type: ignore[arg-type]
    assert not contract_mma.takes(sm90, i32, [D.int16, D.int8])  # type: ignore[arg-type]


def test_the_stated_bound_is_within_the_contracts_ceiling() -> None:
    for k in range(0, 300):
        e = contraction.error_factor(k, D.float32)
        assert contract_mma.error_factor(k) <= e <= gamma(2 * k + 2, U32)
    assert contract_mma.error_factor(1) == gamma(3, U32)
    assert contract_mma.error_factor(17) == gamma(16 + 3, U32)


def test_no_products_keep_inits_bits(dev: CudaRig) -> None:
    init = np.array([[-0.0, np.nan]], np.float32)
    init.view(np.uint32)[0, 1] = 0xFFC01234
    spec = S.Contract((), ((1, 0),), D.float32, init=True)
    z, zb = D.of_float(D.bfloat16, np.zeros((1, 0))), D.of_float(D.bfloat16, np.zeros((0, 2)))
    answer, (got,) = run(spec, [on(dev, z, D.bfloat16), on(dev, zb, D.bfloat16), on(dev, init)], [D.float32])
    assert answer is Answer.DONE and same_bits(got, init, D.float32)


def _through(dev: CudaRig, values: Arr, dt: Dtype, buffer: tuple[int, int], transposed: bool,
             offset: int = 0) -> Array:
    """``values`` [m, n] on ``dev`` in a row-major buffer of ``buffer`` (its
    [m, n] corner, from element ``offset`` of its first row), or of the
    transpose's shape, viewed transposed."""
    m, n = values.shape
    rows, cols = (n, m) if transposed else (m, n)
    view = Array.empty(dt, buffer, dev).view(Slice((Range(0, rows, 1), Range(offset, cols, 1))))
    if transposed:
        view = view.view(Permute((1, 0)))
    view.write_numpy(values)
    return view


def test_staging_by_runs_gives_the_code_by_code_bits(emu: EmuDevice) -> None:
    """a and b read by 16-byte runs along K (mode 1) or along rows and columns
    (mode 2), with partial runs at K's, the rows' and the columns' ends, give
    the bits of the stated model, as code-by-code staging (a misaligned view)
    does."""
    dt, m, k, n = D.bfloat16, 70, 43, 70
    ha, hb = _narrow(dt, (m, k), 31), _narrow(dt, (k, n), 32)
    spec = S.Contract((), ((1, 0),), D.float32)
    want = _model(ha, hb, None)
    layouts = {  # name: (a, b, a's mode, b's mode)
        "K runs": (_through(emu, ha, dt, (m, 48), False), _through(emu, hb, dt, (n, 48), True), 1, 1),
        "line runs": (_through(emu, ha, dt, (k, 72), True), _through(emu, hb, dt, (k, 72), False), 2, 2),
        "code by code": (_through(emu, ha, dt, (m, 48), False, offset=1),
                         _through(emu, hb, dt, (n, 48), True, offset=3), 0, 0),
    }
    pr = problem(spec, layouts["K runs"][0], layouts["K runs"][1])
    for name, (a, b, mode_a, mode_b) in layouts.items():
        assert contract_mma.run_mode(a, 0, pr.con_a, pr.free_a, pr.batch_a, True) == mode_a, name
        assert contract_mma.run_mode(b, 0, pr.con_b, pr.free_b, pr.batch_b, True) == mode_b, name
        answer, (got,) = run(spec, [a, b], [D.float32])
        assert answer is Answer.DONE
        assert same_bits(got, want, D.float32), name

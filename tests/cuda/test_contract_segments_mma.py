"""nxkernel_cuda.contract_mma with segments: Rows (grouped GEMM) and
Contracting segments take the tensor cores in one launch for all groups.

Each output is bit for bit what the unsegmented tensor-core path gives on
the gathered operands (a group's rows and its slice of b; a Contracting
group's indices in their order), and within the stated e(K) of the exact sum
(K the group's count); outputs without products (ids outside [0, g), an
empty group) keep init's bits, or are +0; integers are exact and wrap; two
launches give the same bits. Which calls take the tensor cores still reads
dtypes, attributes and the device model only."""

from __future__ import annotations

from fractions import Fraction
from types import SimpleNamespace
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from nxkernel_core import dtype as D
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.dtype import Dtype
from nxkernel_core.layout import Permute
from nxkernel_cuda import contract_mma
from nxkernel_cuda.device import CudaRig
from nxkernel_cuda.library import LIBRARY

from .support import on, run, same_bits

Arr = npt.NDArray[Any]

#: (operand dtype, accumulator): a float kind and an integer kind.
KINDS = [(D.bfloat16, D.float32), (D.int8, D.int32)]


def _draw(dt: Dtype, shape: tuple[int, ...], seed: int) -> Arr:
    """Host elements: bfloat16 over magnitudes 2^±6 of both signs, or int8's
    whole range (its ends included)."""
    rng = np.random.default_rng(seed)
    if dt is D.int8:
        x: Arr = rng.integers(-128, 128, size=shape).astype(np.int8)
        x.reshape(-1)[:2] = [-128, 127]
        return x
    return D.of_float(dt, rng.standard_normal(shape) * np.exp2(rng.integers(-6, 7, size=shape)))


def _init(acc: Dtype, shape: tuple[int, ...], seed: int) -> Arr:
    """An init of ``acc``: float32 with -0 and a NaN of a payload first, or
    int32 bits of the whole range."""
    rng = np.random.default_rng(seed)
    if acc is D.int32:
        return rng.integers(0, 2**32, size=shape).astype(np.uint32).view(np.int32)
    x = rng.standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1)
    flat[0] = -0.0
    flat.view(np.uint32)[1] = 0xFFC01234
    return x


def _scaled(x: Arr) -> tuple[Arr, int]:
    """(n, s): integers n (objects) with x = n / 2^s exactly."""
    f = x.astype(np.float64)
    nz = f[f != 0]
    s = int(np.max(53 - np.frexp(nz)[1])) if nz.size else 0
    return np.array([int(v) for v in (f * 2.0**s).ravel()], object).reshape(f.shape), s


def _check_bound(got: Arr, a: Arr, b: Arr, init: Arr, k: int) -> None:
    """|got - (init + a @ b)| <= e(k) (|init| + |a| @ |b|), exactly."""
    na, sa = _scaled(a)
    nb, sb = _scaled(b)
    den = 2 ** (sa + sb)
    exact, mag = na @ nb, abs(na) @ abs(nb)
    e = Fraction(LIBRARY.statement.error_factor(k, D.float32))
    for g, x, m, i in zip(got.ravel(), exact.ravel(), mag.ravel(), init.ravel(), strict=True):
        if np.isnan(i):
            assert np.isnan(g)  # a NaN init: a NaN result
            continue
        fi = Fraction(float(i))
        assert abs(Fraction(float(g)) - Fraction(int(x), den) - fi) <= e * (Fraction(int(m), den) + abs(fi))


def _wrapped(a: Arr, b: Arr, init: Arr) -> list[int]:
    """init + a @ b exactly, as int32 (wrapping)."""
    exact = a.astype(object) @ b.astype(object) + init.astype(object)
    return [(int(x) + 2**31) % 2**32 - 2**31 for x in exact.ravel()]


def _unsegmented(dev: CudaRig, dt: Dtype, acc: Dtype, a: Arr, b: Arr, init: Arr) -> Arr:
    """The unsegmented tensor-core path's init + a @ b (a [rows, K], b [K, cols])."""
    spec = S.Contract((), ((1, 0),), acc, init=True)
    assert contract_mma.takes(dev, spec, [dt, dt, acc])
    answer, (got,) = run(spec, [on(dev, a, dt), on(dev, b, dt), on(dev, init)], [acc])
    assert answer is Answer.DONE
    return got


@pytest.mark.parametrize(("dt", "acc"), KINDS)
def test_rows_are_a_grouped_gemm_on_the_tensor_cores(dev: CudaRig, dt: Dtype, acc: Dtype) -> None:
    # batch 2, a [2, 150, 40], b [2, g=4, 40, 9] read transposed (stored [2, 4, 9, 40]);
    # ids unsorted: batch 0 group 1 of 80 rows (over a tile of 64), group 2 empty,
    # ids out of range (-1, 4, 2^40); batch 1 group 3 empty.
    t_, rows, k, cols, g = 2, 150, 40, 9, 4
    ha, hbt = _draw(dt, (t_, rows, k), 1), _draw(dt, (t_, g, cols, k), 2)
    hb = hbt.transpose(0, 1, 3, 2)
    rng = np.random.default_rng(3)
    ids = np.empty((t_, rows), np.int64)
    ids[0] = rng.permutation(np.array([1] * 80 + [0] * 50 + [3] * 10 + [-1, 4, 2**40] * 3 + [-5], np.int64))
    ids[1] = rng.permutation(np.array([0] * 30 + [1] * 60 + [2] * 55 + [-1] * 5, np.int64))
    init = _init(acc, (t_, rows, cols), 4)
    spec = S.Contract(((0, 0),), ((2, 2),), acc, init=True, segments=S.Rows(1, 1))
    ops = [on(dev, ha, dt), on(dev, hbt, dt).view(Permute((0, 1, 3, 2))), on(dev, init), on(dev, ids)]
    assert contract_mma.takes(dev, spec, [o.dtype for o in ops])
    answer, (got,) = run(spec, ops, [acc])
    assert answer is Answer.DONE
    again = run(spec, ops, [acc])[1][0]
    assert same_bits(again, got, acc)  # deterministic
    for t in range(t_):
        for e in range(g):
            rs = np.flatnonzero(ids[t] == e)
            want = _unsegmented(dev, dt, acc, ha[t, rs], hb[t, e], init[t, rs])
            assert same_bits(got[t, rs], want, acc), (t, e)
            if dt is D.int8:
                assert got[t, rs].ravel().tolist() == _wrapped(ha[t, rs], hb[t, e], init[t, rs])
            else:
                _check_bound(got[t, rs], ha[t, rs], hb[t, e], init[t, rs], k)
        none = (ids[t] < 0) | (ids[t] >= g)
        assert same_bits(got[t, none], init[t, none], acc)  # no products: init's bits
    # Without init, rows in no group are +0.
    bare = S.Contract(((0, 0),), ((2, 2),), acc, segments=S.Rows(1, 1))
    answer, (zero,) = run(bare, [ops[0], ops[1], ops[3]], [acc])
    assert answer is Answer.DONE
    assert not zero[(ids < 0) | (ids >= g)].view(np.uint32).any()


@pytest.mark.parametrize(("dt", "acc"), KINDS)
def test_contracting_segments_sum_each_group_on_the_tensor_cores(dev: CudaRig, dt: Dtype, acc: Dtype) -> None:
    # batch 2, a [2, 70, 3, 17], b [2, 3, 17, 9]: two contracting pairs, the second (17)
    # cut into 4 interleaved groups (ids out of range too); batch 0 group 3 is empty,
    # batch 1 group 1. Group e's products: k = 17·k1 + k2 with ids[t, k2] = e, in C order.
    t_, rows, k1, k2, cols, g = 2, 70, 3, 17, 9, 4
    ha, hb = _draw(dt, (t_, rows, k1, k2), 5), _draw(dt, (t_, k1, k2, cols), 6)
    ids = np.array([[0, 2, 1, 0, 2, -1, 1, 0, 2, 2, 0, 1, 7, 0, 2, 1, 0],
                    [2, 0, 0, 3, 2, 0, 3, 3, 2, 0, -2, 0, 2, 3, 0, 2, 3]], np.int64)
    init = _init(acc, (g, t_, rows, cols), 7)
    spec = S.Contract(((0, 0),), ((2, 1), (3, 2)), acc, init=True, segments=S.ContractingSegments(1, g))
    ops = [on(dev, ha, dt), on(dev, hb, dt), on(dev, init), on(dev, ids)]
    assert contract_mma.takes(dev, spec, [o.dtype for o in ops])
    answer, (got,) = run(spec, ops, [acc])
    assert answer is Answer.DONE
    fa, fb = ha.reshape(t_, rows, k1 * k2), hb.reshape(t_, k1 * k2, cols)
    for t in range(t_):
        for e in range(g):
            ks = [k for k in range(k1 * k2) if ids[t, k % k2] == e]
            want = _unsegmented(dev, dt, acc, fa[t][:, ks], fb[t][ks], init[e, t])
            assert same_bits(got[e, t], want, acc), (t, e)
            if not ks:
                assert same_bits(got[e, t], init[e, t], acc)  # an empty group: init's bits
            elif dt is D.int8:
                assert got[e, t].ravel().tolist() == _wrapped(fa[t][:, ks], fb[t][ks], init[e, t])
            else:
                _check_bound(got[e, t], fa[t][:, ks], fb[t][ks], init[e, t], len(ks))
    bare = S.Contract(((0, 0),), ((2, 1), (3, 2)), acc, segments=S.ContractingSegments(1, g))
    answer, (zero,) = run(bare, [ops[0], ops[1], ops[3]], [acc])
    assert answer is Answer.DONE
    assert not zero[3, 0].view(np.uint32).any() and not zero[1, 1].view(np.uint32).any()  # empty: +0


def test_which_segmented_calls_take_the_tensor_cores() -> None:
    sm90, sm75 = SimpleNamespace(arch_number=90), SimpleNamespace(arch_number=75)
    rows = S.Contract((), ((1, 1),), D.float32, segments=S.Rows(0, 0))
    con = S.Contract((), ((1, 0),), D.int32, segments=S.ContractingSegments(0, 3))
    for spec, dts in ((rows, [D.bfloat16, D.bfloat16, D.int64]), (rows, [D.float16, D.float16, D.int64]),
                      (con, [D.int8, D.int8, D.int64])):
        assert contract_mma.takes(sm90, spec, dts)  # type: ignore[arg-type]
        assert not contract_mma.takes(sm75, spec, dts)  # type: ignore[arg-type]
    # Other dtypes and block scales stay on the SIMT kernels.
    assert contract_mma.takes(sm90, rows, [D.float8_e4m3fn, D.float8_e4m3fn, D.int64])  # type: ignore[arg-type]
    for dts in ([D.float32, D.float32, D.int64], [D.float8_e4m3fn, D.float32, D.int64],
                [D.bfloat16, D.float16, D.int64]):
        assert not contract_mma.takes(sm90, rows, dts)  # type: ignore[arg-type]
    scaled = S.Contract((), ((1, 1),), D.float32, scales=(S.ScaleKind.EXPONENT, None), segments=S.Rows(0, 0))
    dts = [D.bfloat16, D.bfloat16, D.uint8, D.int64]
    assert contract_mma.takes(sm90, scaled, dts, [(70, 64), (3, 64, 20), (70, 2), (70,)])  # type: ignore[arg-type]
    assert not contract_mma.takes(sm90, scaled, dts)  # type: ignore[arg-type]  # no shapes: not taken
    cscaled = S.Contract((), ((1, 0),), D.float32, scales=(S.ScaleKind.EXPONENT, None),
                         segments=S.ContractingSegments(0, 3))
    assert not contract_mma.takes(sm90, cscaled, dts, [(70, 64), (64, 20), (70, 2), (64,)])  # type: ignore[arg-type]

"""nxkernel_cuda.contraction (tiled SIMT): each output a chain from +0 in K
order, each product fused into its addition, init added last, bit for bit an
exact (Fraction) fma chain; within the stated e(K) of the exact sum; any
layout (transposed, strided, reversed, broadcast batch); init identical to
dst; K = 0 keeps init's bits; integers wrap; declines write nothing; the
sources compile for sm_80 and sm_90."""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
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
from nxkernel_core.layout import Broadcast, Permute
from nxkernel_cuda import contraction
from nxkernel_cuda.device import CudaRig
from nxkernel_cuda.library import LIBRARY

from .support import canary, on, run, same_bits, untouched

Arr = npt.NDArray[Any]


def _draw(shape: Sequence[int], dt: type, seed: int) -> Arr:
    """Values over magnitudes 2^±8 of both signs, so sums round often."""
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * np.exp2(rng.integers(-8, 9, size=shape))).astype(dt)


def _canonical(a: Arr, b: Arr, spec: S.Contract) -> tuple[Arr, Arr, tuple[int, ...]]:
    """Host a and b as [batch, rows, K] and [batch, K, cols], and the result's shape."""
    ba, bb = [i for i, _ in spec.batch], [j for _, j in spec.batch]
    ca, cb = [i for i, _ in spec.contracting], [j for _, j in spec.contracting]
    fa = [i for i in range(a.ndim) if i not in ba + ca]
    fb = [j for j in range(b.ndim) if j not in bb + cb]
    nb = math.prod(a.shape[i] for i in ba)
    k = math.prod(a.shape[i] for i in ca)
    rows, cols = math.prod(a.shape[i] for i in fa), math.prod(b.shape[j] for j in fb)
    out = (*(a.shape[i] for i in ba), *(a.shape[i] for i in fa), *(b.shape[j] for j in fb))
    return (a.transpose(ba + fa + ca).reshape(nb, rows, k), b.transpose(bb + cb + fb).reshape(nb, k, cols),
            out)


def round_to(q: Fraction, acc: type) -> float:
    """``q`` rounded to nearest, ties to even, into float64 or float32 (finite
    results: Python's Fraction to float rounds correctly; float32 picks the
    nearest of the float32 neighbours of that float64 exactly)."""
    x = float(q)
    if acc is np.float64 or x == 0.0:
        return x
    f = np.float32(x)
    cands = [c for c in (np.nextafter(f, np.float32(-np.inf)), f, np.nextafter(f, np.float32(np.inf)))
             if np.isfinite(c)]
    return float(min(cands, key=lambda c: (abs(Fraction(float(c)) - q),
                                           int(np.asarray(c).view(np.uint32)) & 1)))


def fma(x: float, y: float, s: float, acc: type) -> float:
    """x·y + s rounded once into ``acc`` (finite operands)."""
    return round_to(Fraction(x) * Fraction(y) + Fraction(s), acc)


def _chain(a: Arr, b: Arr, spec: S.Contract, acc: type, init: Arr | None = None) -> Arr:
    """The chain from +0 in K order in ``acc``, each product fused into its
    addition (one rounding a step, computed exactly with Fractions), then init
    added last (NumPy's rounded addition)."""
    ca, cb, out = _canonical(a.astype(np.float64), b.astype(np.float64), spec)
    nb, rows, k = ca.shape
    cols = cb.shape[2]
    s = np.zeros((nb, rows, cols), np.float64)
    for t in range(nb):
        for r in range(rows):
            for c in range(cols):
                v = 0.0
                for j in range(k):
                    v = fma(float(ca[t, r, j]), float(cb[t, j, c]), v, acc)
                s[t, r, c] = v
    res: Arr = s.astype(acc).reshape(out)
    return res if init is None else res + init.astype(acc)


def _fsum_ref(a: Arr, b: Arr, spec: S.Contract, init: Arr | None) -> tuple[Arr, Arr]:
    """The exact sums (as Fractions) and the bound's scale |init| + Σ|a||b|."""
    ca, cb, out = _canonical(a.astype(np.float64), b.astype(np.float64), spec)
    nb, rows, k = ca.shape
    cols = cb.shape[2]
    exact = np.empty((nb, rows, cols), object)
    scale = np.empty((nb, rows, cols), np.float64)
    flat_init = None if init is None else init.astype(np.float64).reshape(nb, rows, cols)
    for t in range(nb):
        for r in range(rows):
            for c in range(cols):
                terms = [Fraction(float(ca[t, r, j])) * Fraction(float(cb[t, j, c])) for j in range(k)]
                i0 = 0.0 if flat_init is None else float(flat_init[t, r, c])
                exact[t, r, c] = sum(terms, Fraction(i0))
                scale[t, r, c] = abs(i0) + math.fsum(abs(float(x)) for x in terms)
    return exact.reshape(out), scale.reshape(out)


def _go(spec: S.Contract, ops: Sequence[Array], dst_dt: Dtype) -> Arr:
    answer, (got,) = run(spec, ops, [dst_dt])
    assert answer is Answer.DONE
    return got


@pytest.mark.parametrize(("acc", "np_acc"), [(D.float32, np.float32), (D.float64, np.float64)])
def test_the_chain_is_bit_for_bit_over_layouts(dev: CudaRig, acc: Dtype, np_acc: type) -> None:
    # a [K=37, batch=2, rows=70] read as [batch, rows, K] through the pairs;
    # b [cols=5, K=37] broadcast over the batch, columns reversed; init strided.
    a = _draw((37, 2, 70), np_acc, 1)
    b_base = _draw((5, 37), np_acc, 2)
    b_host = np.broadcast_to(b_base[::-1].T[None], (2, 37, 5))  # [batch, K, cols]
    init_base = _draw((2, 140, 5), np_acc, 3)
    init_host = init_base[:, ::2, :]
    spec = S.Contract(((1, 0),), ((0, 1),), acc, init=True)
    ops = [on(dev, a), on(dev, b_base)[::-1].view(Permute((1, 0))).view(Broadcast((2, 37, 5))),
           on(dev, init_base)[:, ::2, :]]
    want = _chain(a, b_host, spec, np_acc, init_host)
    got = _go(spec, ops, acc)
    assert same_bits(got, want, acc, nan_equal=True)
    # The same bits on a second launch, and without init the bare chain.
    assert same_bits(_go(spec, ops, acc), got, acc)
    bare = S.Contract(((1, 0),), ((0, 1),), acc)
    assert same_bits(_go(bare, ops[:2], acc), _chain(a, b_host, bare, np_acc), acc)


def test_narrow_operands_widen_exactly_and_narrow_dst_rounds_once(dev: CudaRig) -> None:
    rng = np.random.default_rng(5)
    a16 = _draw((3, 20), np.float32, 6).astype(np.float16)
    b8 = rng.integers(-128, 128, size=(20, 66)).astype(np.int8)
    spec = S.Contract((), ((1, 0),), D.float32)
    want = _chain(a16.astype(np.float32), b8.astype(np.float32), spec, np.float32)
    assert same_bits(_go(spec, [on(dev, a16), on(dev, b8)], D.float32), want, D.float32)
    assert same_bits(_go(spec, [on(dev, a16), on(dev, b8)], D.float16), want.astype(np.float16), D.float16)
    bf = D.of_float(D.bfloat16, _draw((3, 20), np.float64, 7))
    e4 = D.of_float(D.float8_e4m3fn, _draw((20, 4), np.float64, 8) / 64)
    fa = bf.astype(np.float64)
    fb = e4.astype(np.float64)
    spec64 = S.Contract((), ((1, 0),), D.float64)
    want64 = _chain(fa, fb, spec64, np.float64)
    got = _go(spec64, [on(dev, bf, D.bfloat16), on(dev, e4, D.float8_e4m3fn)], D.float64)
    assert same_bits(got, want64, D.float64)


@pytest.mark.parametrize(("acc", "np_acc"), [(D.float32, np.float32), (D.float64, np.float64)])
def test_results_are_within_the_stated_bound(dev: CudaRig, acc: Dtype, np_acc: type) -> None:
    a = _draw((4, 33), np_acc, 11)
    b = _draw((33, 3), np_acc, 12)
    b[:, 0] = -a[0] * 3  # cancellation
    init = _draw((4, 3), np_acc, 13)
    spec = S.Contract((), ((1, 0),), acc, init=True)
    got = _go(spec, [on(dev, a), on(dev, b), on(dev, init)], acc).astype(np.float64)
    exact, scale = _fsum_ref(a, b, spec, init)
    e = LIBRARY.statement.error_factor(33, acc)
    u = unit_roundoff(acc)
    assert e == contraction.error_factor(33, acc) == gamma(36, u) <= gamma(2 * 33 + 2, u)
    for g, x, s in zip(got.ravel(), exact.ravel(), scale.ravel(), strict=True):
        assert abs(Fraction(float(g)) - x) <= Fraction(e * s)


def test_init_may_be_dst(dev: CudaRig) -> None:
    a = _draw((6, 9), np.float32, 21)
    b = _draw((9, 7), np.float32, 22)
    init = _draw((6, 7), np.float32, 23)
    spec = S.Contract((), ((1, 0),), D.float32, init=True)
    dst = on(dev, init)
    assert LIBRARY.contract(spec, [dst], [on(dev, a), on(dev, b), dst]) is Answer.DONE
    assert same_bits(dst.to_numpy(), _chain(a, b, spec, np.float32, init), D.float32)


def test_k_zero_keeps_inits_bits_or_gives_plus_zero(dev: CudaRig) -> None:
    init = np.array([[-0.0, 1.5], [np.nan, -np.inf]], np.float32)
    init.view(np.uint32)[1, 0] = 0xFFC01234  # a negative quiet NaN with a payload
    a = np.zeros((2, 0), np.float32)
    b = np.zeros((0, 2), np.float32)
    spec = S.Contract((), ((1, 0),), D.float32, init=True)
    got = _go(spec, [on(dev, a), on(dev, b), on(dev, init)], D.float32)
    assert same_bits(got, init, D.float32)
    bare = _go(S.Contract((), ((1, 0),), D.float32), [on(dev, a), on(dev, b)], D.float32)
    assert bare.view(np.uint32).tolist() == [[0, 0], [0, 0]]


def test_integers_wrap_in_the_accumulator(dev: CudaRig) -> None:
    rng = np.random.default_rng(31)
    a = rng.integers(-32768, 32768, size=(2, 3, 40)).astype(np.int16)
    a[0, 0, :] = -32768
    b = rng.integers(-128, 128, size=(2, 40, 4)).astype(np.int8)
    b[0, :, 0] = -128
    init = rng.integers(-2**31, 2**31, size=(2, 3, 4)).astype(np.int32)
    spec = S.Contract(((0, 0),), ((2, 1),), D.int32, init=True)
    got = _go(spec, [on(dev, a), on(dev, b), on(dev, init)], D.int32)
    exact = np.einsum("trk,tkc->trc", a.astype(object), b.astype(object)) + init.astype(object)
    want = np.array([(int(x) + 2**31) % 2**32 - 2**31 for x in exact.ravel()], np.int64)
    assert got.astype(np.int64).ravel().tolist() == want.tolist()
    ua = rng.integers(0, 256, size=(5, 70)).astype(np.uint8)
    ub = rng.integers(0, 256, size=(70, 3)).astype(np.uint8)
    uspec = S.Contract((), ((1, 0),), D.uint8)
    ugot = _go(uspec, [on(dev, ua), on(dev, ub)], D.uint8)
    uwant = [int(x) % 256 for x in (ua.astype(object) @ ub.astype(object)).ravel()]
    assert ugot.ravel().tolist() == uwant


def test_declines_are_stated_and_write_nothing(dev: CudaRig) -> None:
    f32, f64 = np.ones((2, 3), np.float32), np.ones((2, 3), np.float64)
    pair = ((1, 0),)
    u8 = np.ones((2, 3), np.uint8)
    cases: list[tuple[S.Contract, list[Array], Dtype]] = [
        (S.Contract((), pair, D.complex64, scales=(S.ScaleKind.VALUE, None)),
         [on(dev, f32), on(dev, f32.T.copy()), on(dev, f32)], D.complex64),
        (S.Contract((), pair, D.int32, scales=(S.ScaleKind.EXPONENT, None)),
         [on(dev, u8.astype(np.int8)), on(dev, u8.T.astype(np.int8)), on(dev, u8)], D.int32),
        (S.Contract((), pair, D.float32, scales=(None, S.ScaleKind.VALUE)),
         [on(dev, f32), on(dev, f32.T.copy()), on(dev, f64.T.copy())], D.float32),
        (S.Contract((), pair, D.float32), [on(dev, u8.astype(np.bool_)), on(dev, f32.T.copy())], D.float32),
        (S.Contract((), pair, D.complex64), [on(dev, f32), on(dev, f32.T.copy())], D.float32),
        (S.Contract((), pair, D.complex64), [on(dev, f64), on(dev, f32.T.copy())], D.complex64),
        (S.Contract((), pair, D.float32), [on(dev, f64), on(dev, f32.T.copy())], D.float32),
        (S.Contract((), pair, D.float32), [on(dev, f32), on(dev, f32.T.copy())], D.int32),
        (S.Contract((), pair, D.float32), [on(dev, f32), on(dev, f32.T.copy())], D.float64),
        (S.Contract((), pair, D.int32), [on(dev, f32.astype(np.uint8)), on(dev, f32.T.astype(np.int8))],
         D.int32),
    ]
    for spec, ops, dt in cases:
        dst = canary(dev, dt, (2, 2))
        assert contraction.declines(Call("contract", spec, (dst,), tuple(ops))) is not None
        assert LIBRARY.statement.declines(Call("contract", spec, (dst,), tuple(ops))) is not None
        assert LIBRARY.contract(spec, [dst], ops) is Answer.DECLINED
        assert untouched(dst)
    # a identical to dst: declined, nothing written.
    sq = canary(dev, D.float32, (2, 2))
    spec = S.Contract((), pair, D.float32)
    assert contraction.declines(Call("contract", spec, (sq,), (sq, sq))) is not None
    assert LIBRARY.contract(spec, [sq], [sq, sq]) is Answer.DECLINED and untouched(sq)
    ok = (on(dev, f32), on(dev, f32.T.copy()))
    assert contraction.declines(Call("contract", spec, (canary(dev, D.float32, (2, 2)),), ok)) is None

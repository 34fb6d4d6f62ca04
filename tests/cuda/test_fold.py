"""nxkernel_cuda.folds: each element of dst is +0 plus the x elements a Padded
load reads from it, added in C order of the taps in the carrier (an exact
chain reference), the host library's bits at every dtype fold takes (NaN bits
aside), within γ(t − 1) Σ|x| of the exact sum; any layout; bool and bit
(which Add does not take) and other misfits refused, writing nothing."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from nxkernel_core import dtype as D
from nxkernel_core import exact
from nxkernel_core import shape as SH
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_core.dtype import Dtype
from nxkernel_core.kernel import Call, gamma, unit_roundoff
from nxkernel_core.layout import Permute, Window
from nxkernel_core.rig import host
from nxkernel_cuda import folds
from nxkernel_cuda.device import CudaRig
from nxkernel_cuda.library import LIBRARY
from nxkernel_host.library import library as HOST

from .support import REAL, canary, on, run, same_bits, untouched, values

Arr = npt.NDArray[Any]

#: (dst shape, pad): plain pads and crops, interior, overlapping windows with
#: steps and dilations, a window axis that reads past the operand.
CASES: tuple[tuple[tuple[int, ...], S.Pad], ...] = (
    ((7,), S.Pad((1,), (1,), (0,), (Window(0, 3, 1, 1),))),
    ((4, 5), S.Pad((1, -1), (2, 1), (1, 0), (Window(1, 2, 1, 2),))),
    ((6, 7), S.Pad((2, 1), (1, 2), (0, 1), (Window(0, 3, 2, 1), Window(1, 2, 3, 2)))),
    ((3, 4), S.Pad((0, 0), (0, 0), (0, 0))),
    ((2, 3, 4), S.Pad((0, 1, -1), (1, 0, 2), (1, 0, 0), (Window(0, 2, 1, 1), Window(2, 3, 1, 1)))),
)

FOLDED: tuple[Dtype, ...] = tuple(folds.ELEMENTS)


def _x(shape: tuple[int, ...], pad: S.Pad) -> tuple[int, ...]:
    xs = SH.padded(shape, pad)
    assert not isinstance(xs, SH.Error), xs
    return xs


def _host_fold(spec: S.Fold, x: Arr, dt: Dtype) -> Arr:
    dst = Array.empty(dt, spec.shape, host)
    kernel = getattr(HOST, spec.kernel)  # the host library's kernels are set per family
    assert kernel(spec, [dst], [Array.from_numpy(np.ascontiguousarray(x), host, dt)]) is Answer.DONE
    return dst.to_numpy()


def _chains(shape: tuple[int, ...], pad: S.Pad) -> list[list[tuple[int, ...]]]:
    """Per dst element (C order), the x indices read from it, in C order of the
    taps (the trailing window axes of x's index)."""
    src = exact.fold_sources(shape, pad)
    rank = len(shape)
    out: list[list[tuple[int, ...]]] = [[] for _ in range(int(np.prod(shape)))]
    for idx in np.argwhere(src >= 0):
        out[int(src[tuple(idx)])].append(tuple(int(i) for i in idx))
    return [sorted(c, key=lambda ix: ix[rank:]) for c in out]


def _complex_values(dt: Dtype, n: int, seed: int) -> Arr:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dt.numpy_dtype)


# --------------------------------------------------------------------------
# The order and the bits
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dt", [D.float32, D.float64, D.float16])
def test_each_element_is_a_chain_from_plus_zero_in_c_order_of_the_taps(dev: CudaRig, dt: Dtype) -> None:
    """Terms of magnitudes 2^±30 (2^±6 for float16) make every order round
    differently: the result is the carrier's chain in tap order, computed
    here element by element."""
    carrier = np.float64 if dt is D.float64 else np.float32
    spread = 6 if dt is D.float16 else 30
    for shape, pad in CASES:
        xs = _x(shape, pad)
        rng = np.random.default_rng(len(xs))
        x = D.of_float(dt, rng.standard_normal(xs) * np.exp2(rng.integers(-spread, spread + 1, size=xs)))
        answer, (got,) = run(S.Fold(shape, pad), [on(dev, x, dt)], [dt])
        assert answer is Answer.DONE
        want = np.empty(int(np.prod(shape)), np.float64)
        for i, chain in enumerate(_chains(shape, pad)):
            acc = carrier(0.0)
            for ix in chain:
                acc = carrier(acc + carrier(x[ix]))
            want[i] = acc
        assert same_bits(got.reshape(-1), D.of_float(dt, want), dt), (shape, pad)


@pytest.mark.parametrize("dt", [*REAL, D.complex64, D.complex128], ids=lambda d: d.name)
def test_every_dtype_is_the_host_librarys_bits(dev: CudaRig, dt: Dtype) -> None:
    for k, (shape, pad) in enumerate(CASES):
        xs = _x(shape, pad)
        n = int(np.prod(xs))
        x = (_complex_values(dt, n, k) if dt.is_complex else values(dt, n, seed=k)).reshape(xs)
        spec = S.Fold(shape, pad)
        answer, (got,) = run(spec, [on(dev, x, dt)], [dt])
        if dt not in folds.ELEMENTS:  # bool and bit: Add takes neither
            assert answer is Answer.WRONG_DTYPE
            return
        assert answer is Answer.DONE
        assert same_bits(got, _host_fold(spec, x, dt), dt, nan_equal=True), (dt.name, shape, pad)


def test_integers_wrap_exactly(dev: CudaRig) -> None:
    dt = D.int8
    shape, pad = CASES[2]
    xs = _x(shape, pad)
    x = np.full(xs, 127, np.int8)
    answer, (got,) = run(S.Fold(shape, pad), [on(dev, x)], [dt])
    assert answer is Answer.DONE
    counts = np.array([len(c) for c in _chains(shape, pad)]).reshape(shape)
    assert np.array_equal(got, ((counts * 127 + 128) % 256 - 128).astype(np.int8))


def test_the_sum_is_within_the_stated_bound(dev: CudaRig) -> None:
    dt = D.float32
    u = unit_roundoff(dt)
    shape, pad = CASES[4]
    xs = _x(shape, pad)
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(xs) * np.exp2(rng.integers(-12, 13, size=xs))).astype(np.float32)
    answer, (got,) = run(S.Fold(shape, pad), [on(dev, x)], [dt])
    assert answer is Answer.DONE
    flat = got.reshape(-1)
    for i, chain in enumerate(_chains(shape, pad)):
        exact = sum((Fraction(float(x[ix])) for ix in chain), Fraction(0))
        mag = sum((abs(Fraction(float(x[ix]))) for ix in chain), Fraction(0))
        bound = Fraction(gamma(max(len(chain) - 1, 0), u)) * mag
        assert abs(Fraction(float(flat[i])) - exact) <= bound, i
        if not chain:
            assert flat[i].view(np.uint32) == 0  # +0


def test_x_and_dst_of_any_layout(dev: CudaRig) -> None:
    """x transposed and reversed, dst transposed: the host library's bits."""
    dt = D.float32
    shape, pad = (5, 4), S.Pad((1, 0), (0, 1), (0, 1), (Window(0, 2, 1, 2),))
    xs = _x(shape, pad)  # [3, 8, 2]
    raw = values(dt, int(np.prod(xs)), seed=8).reshape(xs[1], xs[0], xs[2])
    x = on(dev, raw)[::-1].view(Permute((1, 0, 2)))
    host_x = raw[::-1].transpose(1, 0, 2)
    dst = Array.empty(dt, (shape[1], shape[0]), dev).view(Permute((1, 0)))
    spec = S.Fold(shape, pad)
    assert LIBRARY.fold(spec, [dst], [x]) is Answer.DONE
    assert same_bits(dst.to_numpy(), _host_fold(spec, host_x, dt), dt, nan_equal=True)


def test_an_empty_fold_and_one_no_tap_reads(dev: CudaRig) -> None:
    dt = D.float64
    pad = S.Pad((-3,), (0,), (0,))
    answer, (got,) = run(S.Fold((3,), pad), [on(dev, np.zeros(0))], [dt])
    assert answer is Answer.DONE and got.view(np.uint64).tolist() == [0, 0, 0]
    answer, (empty,) = run(S.Fold((0, 2), S.Pad((0, 0), (0, 0), (0, 0))), [on(dev, np.zeros((0, 2)))], [dt])
    assert answer is Answer.DONE and empty.shape == (0, 2)


# --------------------------------------------------------------------------
# Statements, declines, refusals
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dt", [D.bool_, D.bit])
def test_bool_and_bit_do_not_fit_writing_nothing(dev: CudaRig, dt: Dtype) -> None:
    shape, pad = CASES[1]
    x = on(dev, np.ones(_x(shape, pad), np.bool_), dt)
    dst = canary(dev, dt, shape)
    spec = S.Fold(shape, pad)
    # Add takes no boolean, so the call does not fit (upstream §2).
    assert LIBRARY.fold(spec, [dst], [x]) is Answer.WRONG_DTYPE
    assert untouched(dst)


def test_folds_are_stated_and_not_declined(dev: CudaRig) -> None:
    shape, pad = CASES[2]
    x = on(dev, np.zeros(_x(shape, pad), np.float32))
    call = Call("fold", S.Fold(shape, pad), (), (x,))
    assert LIBRARY.statement.declines(call) is None
    assert "C order of the taps" in LIBRARY.statement.association["fold"]
    assert "γ(t − 1)" in LIBRARY.statement.association["fold"]


def test_misfits_are_refused_writing_nothing(dev: CudaRig) -> None:
    shape, pad = CASES[1]
    x = on(dev, np.ones(_x(shape, pad), np.float32))
    spec = S.Fold(shape, pad)
    wrong_dtype = canary(dev, D.float64, shape)
    assert LIBRARY.fold(spec, [wrong_dtype], [x]) is Answer.WRONG_DTYPE
    wrong_shape = canary(dev, D.float32, (shape[0] + 1, shape[1]))
    assert LIBRARY.fold(spec, [wrong_shape], [x]) is Answer.SHAPE_MISMATCH
    short = canary(dev, D.float32, shape)
    assert LIBRARY.fold(spec, [short], []) is Answer.BAD_ARITY
    assert LIBRARY.fold(spec, [short], [Array.from_numpy(np.ones(_x(shape, pad), np.float32))]) \
        is Answer.WRONG_DEVICE
    for d in (wrong_dtype, wrong_shape, short):
        assert untouched(d)

"""The host ``fold`` kernel: the adjoint of a padded load, each output +0 plus
the x elements read from it added in C order of the taps, at every dtype Add
takes."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nxkernel_core import dtype as D
from nxkernel_core import shape as SH
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_core.kernel import Call, Library, check_library
from nxkernel_core.layout import Window
from nxkernel_host.library import library
from nxkernel_host.loads import pad_array

lib: Library = check_library(library)


def fold(x: np.ndarray, dt: D.Dtype, shape: tuple[int, ...], pad: S.Pad) -> np.ndarray:
    dst = Array.empty(dt, shape)
    assert lib.fold(S.Fold(shape, pad), [dst], [Array.from_numpy(x, dtype=dt)]) is Answer.DONE
    return dst.to_numpy()


def brute(x: np.ndarray, shape: tuple[int, ...], pad: S.Pad, add: Any, zero: Any) -> np.ndarray:
    """The fold read literally: each x element finds the operand index it was
    read from; each output adds its elements from ``zero`` in C order of the
    taps."""
    rank = len(shape)
    window = {w.axis: (k, w) for k, w in enumerate(pad.windows)}
    found: dict[tuple[int, ...], list[tuple[tuple[int, ...], Any]]] = {}
    for idx in itertools.product(*(range(d) for d in x.shape)):
        taps = idx[rank:]
        at: list[int] = []
        for ax in range(rank):
            if ax in window:
                k, w = window[ax]
                pos = idx[ax] * w.step + taps[k] * w.dilation
            else:
                pos = idx[ax]
            off = pos - pad.lo[ax]
            g = pad.interior[ax] + 1
            if off < 0 or off % g or off // g >= shape[ax]:
                break
            at.append(off // g)
        else:
            found.setdefault(tuple(at), []).append((taps, x[idx]))
    out = np.full(shape, zero, dtype=object)
    for target, items in found.items():
        acc = zero
        for _, v in sorted(items, key=lambda item: item[0]):
            acc = add(acc, v)
        out[target] = acc
    return out if isinstance(zero, int) else out.astype(np.asarray(zero).dtype)


PADS = [
    ((5, 6), S.Pad((1, 1), (1, 1), (0, 0), (Window(0, 3), Window(1, 3)))),
    ((7,), S.Pad((2,), (-1,), (1,), (Window(0, 3, 2, 2),))),
    ((4, 5), S.Pad((-1, 0), (2, -2), (0, 2), (Window(1, 2, 1, 3),))),
    ((3, 4), S.Pad((0, 1), (0, 1), (0, 0), ())),
    ((6, 3), S.Pad((2, 0), (1, 0), (1, 0), (Window(0, 4, 3, 1), Window(1, 3, 1, 1)))),
]


@pytest.mark.parametrize(("shape", "pad"), PADS)
def test_float32_fold_adds_taps_in_c_order_from_positive_zero(
        shape: tuple[int, ...], pad: S.Pad) -> None:
    xs = SH.padded(shape, pad)
    assert not isinstance(xs, SH.Error)
    rng = np.random.default_rng(len(xs))
    x = (rng.standard_normal(xs) * 10.0 ** rng.integers(-3, 4, xs)).astype(np.float32)
    x.reshape(-1)[::5] = -0.0
    got = fold(x, D.float32, shape, pad)
    want = brute(x, shape, pad, lambda a, b: np.float32(a + b), np.float32(0.0))
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize(("shape", "pad"), PADS[:3])
@pytest.mark.parametrize("dt", [D.float16, D.bfloat16, D.float8_e5m2])
def test_narrow_floats_fold_in_float32_and_round_once(dt: D.Dtype, shape: tuple[int, ...],
                                                      pad: S.Pad) -> None:
    xs = SH.padded(shape, pad)
    assert not isinstance(xs, SH.Error)
    x = D.of_float(dt, np.random.default_rng(3).standard_normal(xs) * 4)
    got = fold(x, dt, shape, pad)
    wide = brute(x.astype(np.float32), shape, pad, lambda a, b: np.float32(a + b), np.float32(0))
    assert got.tobytes() == D.of_float(dt, wide.astype(np.float64)).tobytes()


@pytest.mark.parametrize("dt", [D.int8, D.uint32, D.int64, D.int4, D.complex64])
def test_integers_wrap_and_complex_adds_per_part(dt: D.Dtype) -> None:
    shape, pad = PADS[0]
    xs = SH.padded(shape, pad)
    assert not isinstance(xs, SH.Error)
    rng = np.random.default_rng(4)
    if dt.is_complex:
        x = (rng.standard_normal(xs) + 1j * rng.standard_normal(xs)).astype(dt.numpy_dtype)
        want = brute(x, shape, pad, lambda a, b: np.complex64(a + b), np.complex64(0))
    else:
        lo, hi = dt.int_range
        x = rng.integers(lo, hi, xs, endpoint=True).astype(dt.numpy_dtype)
        width = 1 << dt.bits
        total = brute(x.astype(object), shape, pad, lambda a, b: int(a) + int(b), 0)
        wrapped = [(int(v) - lo) % width + lo for v in total.reshape(-1)]
        want = np.array(wrapped).reshape(shape).astype(dt.numpy_dtype)
    got = fold(x, dt, shape, pad)
    assert got.tobytes() == np.asarray(want, dt.numpy_dtype).tobytes()


@settings(max_examples=30, deadline=None)
@given(data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_fold_is_the_adjoint_of_the_padded_load(data: st.DataObject, seed: int) -> None:
    rank = data.draw(st.integers(1, 3))
    shape = tuple(data.draw(st.lists(st.integers(1, 5), min_size=rank, max_size=rank)))
    lo = tuple(data.draw(st.integers(-1, 2)) for _ in range(rank))
    hi = tuple(data.draw(st.integers(-1, 2)) for _ in range(rank))
    interior = tuple(data.draw(st.integers(0, 2)) for _ in range(rank))
    axes = sorted(data.draw(st.sets(st.integers(0, rank - 1))))
    windows = tuple(Window(a, data.draw(st.integers(1, 3)), data.draw(st.integers(1, 2)),
                           data.draw(st.integers(1, 2))) for a in axes)
    try:
        pad = S.Pad(lo, hi, interior, windows)
    except ValueError:
        return
    xs = SH.padded(shape, pad)
    if isinstance(xs, SH.Error):
        return
    rng = np.random.default_rng(seed)
    x = rng.integers(-50, 50, xs).astype(np.int64)
    u = rng.integers(-50, 50, shape).astype(np.int64)
    loaded = pad_array(u, D.int64, np.int64(0).tobytes(), pad)
    got = fold(x, D.int64, shape, pad)
    # <load(u), x> = <u, fold(x)>, exactly in integers.
    assert int((loaded.astype(object) * x.astype(object)).sum()) == \
        int((u.astype(object) * got.astype(object)).sum())


def test_booleans_and_misfits_are_refused_before_any_write() -> None:
    shape, pad = PADS[3]
    xs = SH.padded(shape, pad)
    assert not isinstance(xs, SH.Error)
    spec = S.Fold(shape, pad)
    for dt in (D.bool_, D.bit):
        dst = Array.empty(dt, shape)
        dst.write_numpy(np.ones(shape, np.bool_))
        x = Array.from_numpy(np.ones(xs, np.bool_), dtype=dt)
        # Add takes no boolean, so the call does not fit (upstream §2).
        assert lib.fold(spec, [dst], [x]) is Answer.WRONG_DTYPE
        assert np.all(dst.to_numpy())
    x = Array.from_numpy(np.ones(xs, np.float32))
    wrong = Array.empty(D.float64, shape)
    wrong.write_numpy(np.full(shape, 7.0))
    assert lib.fold(spec, [wrong], [x]) is Answer.WRONG_DTYPE
    small = Array.empty(D.float32, (1, 1))
    small.write_numpy(np.full((1, 1), 7.0, np.float32))
    assert lib.fold(spec, [small], [x]) is Answer.SHAPE_MISMATCH
    assert np.all(wrong.to_numpy() == 7) and np.all(small.to_numpy() == 7)
    dst = Array.empty(D.float32, shape)
    assert lib.statement.declines(Call("fold", spec, (dst,), (x,))) is None

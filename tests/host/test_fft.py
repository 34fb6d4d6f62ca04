"""The host library's Fourier transforms against a long-double DFT (NumPy's
pocketfft at clongdouble, 64-bit significands: 2^11 times float64's
precision): C2c, R2c and C2r(n) along any axes, both directions, within the
stated bound; exact identities (conjugation, ignored imaginary parts),
empty axes, layouts, and refusals."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nxkernel_core import dtype as D
from nxkernel_core import shape as Shape
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_core.dtype import Dtype
from nxkernel_core.kernel import Call, unit_roundoff
from nxkernel_host.fourier import bound
from nxkernel_host.library import library

from .layouts import LAYOUTS, placed

NDArray = np.ndarray[Any, Any]
fft = library.fft
FORWARD, INVERSE = S.Direction.FORWARD, S.Direction.INVERSE


def transform(spec: S.Fft, x: Array, dst_dt: Dtype) -> NDArray:
    shapes = Shape.fft(spec, [x.shape])
    assert not isinstance(shapes, Shape.Error)
    dst = Array.empty(dst_dt, shapes[0])
    assert fft(spec, [dst], [x]) is Answer.DONE
    return dst.to_numpy()


def reference(spec: S.Fft, x: NDArray) -> NDArray:
    """The transform in long double: NumPy's fftn/rfftn/irfftn, unnormalised."""
    axes = spec.axes
    kind = spec.kind
    forward = spec.direction is FORWARD
    if isinstance(kind, S.C2c):
        xl = x.astype(np.clongdouble)
        return np.fft.fftn(xl, axes=axes) if forward else np.fft.ifftn(xl, axes=axes,
                                                                       norm="forward")
    if isinstance(kind, S.R2c):
        y = np.fft.rfftn(x.astype(np.longdouble), axes=axes)
        return y if forward else np.conj(y)
    xl = x.astype(np.clongdouble)
    s = [x.shape[a] for a in axes[:-1]] + [kind.n]
    return np.fft.irfftn(np.conj(xl) if forward else xl, s=s, axes=axes, norm="forward")


def random(rng: np.random.Generator, dt: Dtype, shape: tuple[int, ...]) -> NDArray:
    parts = [rng.standard_normal(shape) * np.exp2(rng.integers(-3, 4, shape)) for _ in range(2)]
    v = parts[0] + 1j * parts[1] if dt.is_complex else parts[0]
    return v.astype(dt.numpy_dtype)


@st.composite
def cases(draw: st.DrawFn) -> tuple[S.Fft, tuple[int, ...], Dtype, Dtype]:
    rank = draw(st.integers(1, 3))
    shape = tuple(draw(st.sampled_from([1, 2, 3, 4, 5, 7, 8, 12, 16, 17, 31])) for _ in range(rank))
    axes = tuple(sorted(draw(st.sets(st.integers(0, rank - 1), min_size=1))))
    direction = draw(st.sampled_from([FORWARD, INVERSE]))
    real = draw(st.sampled_from([D.float32, D.float64]))
    cplx = D.complex64 if real is D.float32 else D.complex128
    kind_name = draw(st.sampled_from(["c2c", "r2c", "c2r"]))
    if kind_name == "c2c":
        return S.Fft(axes, direction, S.C2c()), shape, cplx, cplx
    if kind_name == "r2c":
        return S.Fft(axes, direction, S.R2c()), shape, real, cplx
    n = shape[axes[-1]]
    bins = list(shape)
    bins[axes[-1]] = n // 2 + 1
    return S.Fft(axes, direction, S.C2r(n)), tuple(bins), cplx, real


@settings(max_examples=60, deadline=None)
@given(case=cases(), seed=st.integers(0, 2**32 - 1), layout=st.sampled_from(LAYOUTS))
def test_transforms_are_within_the_stated_bound(case: tuple[S.Fft, tuple[int, ...], Dtype, Dtype],
                                                seed: int, layout: str) -> None:
    spec, shape, x_dt, dst_dt = case
    x = random(np.random.default_rng(seed), x_dt, shape)
    got = transform(spec, placed(x, x_dt, layout), dst_dt)
    assert got.dtype == dst_dt.numpy_dtype
    want = reference(spec, x)
    assert got.shape == want.shape
    n = math.prod(shape[a] for a in spec.axes[:-1])
    n *= spec.kind.n if isinstance(spec.kind, S.C2r) else shape[spec.axes[-1]]
    u = unit_roundoff(dst_dt)
    # Each transform is one line of the non-transformed axes: the bound holds line by line.
    lines_axes = tuple(i for i in range(len(shape)) if i not in spec.axes)
    err = np.abs(got.astype(want.dtype) - want).astype(np.float64) ** 2
    size = np.abs(x.astype(np.complex128)) ** 2
    err_lines = np.sqrt(err.sum(axis=spec.axes)) if lines_axes else np.sqrt(err.sum())
    x_lines = np.sqrt(size.sum(axis=spec.axes)) if lines_axes else np.sqrt(size.sum())
    assert np.all(err_lines <= bound(n, u) * x_lines * 1.0000001 + 1e-300)
    # The same values through a C-contiguous array give the same bits.
    again = transform(spec, Array.from_numpy(x, dtype=x_dt), dst_dt)
    assert again.tobytes() == got.tobytes()


@pytest.mark.parametrize("n", [1, 2, 7, 64, 97, 1000, 4099, 2**16])
@pytest.mark.parametrize("dt", [D.complex64, D.complex128], ids=lambda d: d.name)
def test_long_transforms_and_bluestein_sizes(n: int, dt: Dtype) -> None:
    x = random(np.random.default_rng(n), dt, (n,))
    spec = S.Fft((0,), FORWARD, S.C2c())
    got = transform(spec, Array.from_numpy(x), dt)
    err = np.linalg.norm((got.astype(np.clongdouble) - reference(spec, x)).astype(np.complex128))
    assert err <= bound(n, unit_roundoff(dt)) * np.linalg.norm(x.astype(np.complex128))


def test_an_empty_axis_gives_zeros() -> None:
    x = np.zeros((3, 0, 2), np.complex64)
    got = transform(S.Fft((1, 2), FORWARD, S.C2c()), Array.from_numpy(x), D.complex64)
    assert got.shape == (3, 0, 2)
    r = np.zeros((0, 4), np.float32)
    got = transform(S.Fft((0,), FORWARD, S.R2c()), Array.from_numpy(r), D.complex64)
    assert got.shape == (1, 4) and np.array_equal(got, np.zeros((1, 4), np.complex64))
    c = np.ones((4, 1), np.complex128)
    got = transform(S.Fft((0, 1), INVERSE, S.C2r(0)), Array.from_numpy(np.ones((0, 1),
                                                                                np.complex128)),
                    D.float64)
    assert got.shape == (0, 0)
    got = transform(S.Fft((0, 1), INVERSE, S.C2r(1)), Array.from_numpy(c), D.float64)
    assert np.array_equal(got, [[4.0], [0.0], [0.0], [0.0]])  # axis 0's sum lands in bin 0


@pytest.mark.parametrize("n", [6, 7])
def test_c2r_ignores_the_imaginary_parts_of_bin_0_and_n_over_2(n: int) -> None:
    rng = np.random.default_rng(n)
    x = random(rng, D.complex128, (3, n // 2 + 1))
    y = x.copy()
    y[:, 0] += 5j
    if n % 2 == 0:
        y[:, -1] -= 3j
    spec = S.Fft((1,), INVERSE, S.C2r(n))
    a = transform(spec, Array.from_numpy(x), D.float64)
    b = transform(spec, Array.from_numpy(y), D.float64)
    assert a.tobytes() == b.tobytes()


def test_other_directions_are_exact_conjugations() -> None:
    rng = np.random.default_rng(1)
    r = random(rng, D.float32, (5, 8))
    fwd = transform(S.Fft((0, 1), FORWARD, S.R2c()), Array.from_numpy(r), D.complex64)
    inv = transform(S.Fft((0, 1), INVERSE, S.R2c()), Array.from_numpy(r), D.complex64)
    assert inv.tobytes() == np.conj(fwd).tobytes()
    c = random(rng, D.complex64, (5, 5))
    fwd_r = transform(S.Fft((0, 1), FORWARD, S.C2r(8)), Array.from_numpy(c), D.float32)
    inv_r = transform(S.Fft((0, 1), INVERSE, S.C2r(8)), Array.from_numpy(np.conj(c)), D.float32)
    assert fwd_r.tobytes() == inv_r.tobytes()


def test_misfits_are_refused_and_nothing_is_declined() -> None:
    spec = S.Fft((0,), FORWARD, S.C2c())
    x = Array.from_numpy(np.ones(4, np.complex64))
    dst = Array.from_numpy(np.full(4, 3 + 0j, np.complex64))
    assert fft(spec, [dst], []) is Answer.BAD_ARITY
    assert fft(spec, [Array.empty(D.complex128, (4,))], [x]) is Answer.WRONG_DTYPE
    assert fft(spec, [Array.empty(D.float16, (4,))], [Array.empty(D.float16, (4,))]) \
        is Answer.WRONG_DTYPE
    assert fft(S.Fft((0,), FORWARD, S.R2c()), [dst], [Array.empty(D.float32, (4,))]) \
        is Answer.SHAPE_MISMATCH
    assert fft(S.Fft((1,), FORWARD, S.C2c()), [dst], [x]) is Answer.SHAPE_MISMATCH
    assert np.array_equal(dst.to_numpy(), np.full(4, 3 + 0j, np.complex64))
    assert library.statement.computes["fft"].declines(Call("fft", spec, (dst,), (x,))) is None

"""nxkernel_cuda.fourier's packed real transforms (R2c and C2r along a real
axis of even n, by a complex transform of n/2 points): lengths 2, a power of
two, 2·3·5·7 and 2·37 (a Bluestein half), float32 and float64, both
directions, within the stated bound (ε(n/2) + 24u for the real axis) of the
exact long double DFT; strided, reversed and offset operands and the real
axis first in memory (the gather and scatter paths) within the bound and
bit-identical to contiguous ones; C2r(R2c(x)) = n·x within the bound the
statement implies; the same bits on every run.

One compiled program (``kernels/fft.cu``) serves every case: the tests
parametrize over data, not over kernels."""

from __future__ import annotations

import math

import numpy as np
import pytest

from nxkernel_core import dtype as D
from nxkernel_core import spec as S
from nxkernel_core.dtype import Dtype
from nxkernel_cuda import fourier
from nxkernel_cuda.device import CudaRig

from .support import on
from .test_fft import _FWD, _INV, Arr, _check, _draw, _exact, _go, _ref_error, _stated_real

#: The even lengths of the packed path: n/2 = 1 (one point), a power of two,
#: a mixed radix 3·5·7, and 37 (Bluestein's algorithm).
_LENGTHS = (2, 16, 210, 74)
_COMPLEX = {D.float32: D.complex64, D.float64: D.complex128}


@pytest.mark.parametrize("dt", [D.float32, D.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("n", _LENGTHS)
def test_r2c_and_c2r_of_even_n_are_within_the_stated_bound(dev: CudaRig, dt: Dtype, n: int) -> None:
    cdt = _COMPLEX[dt]
    x = _draw((3, n), dt, 100 + n)
    bins = _draw((3, n // 2 + 1), cdt, 200 + n)
    worst = 0.0
    for direction in (_FWD, _INV):
        r2c = S.Fft((1,), direction, S.R2c())
        got = _go(r2c, on(dev, x), cdt)
        worst = max(worst, _check(got, _exact(x, (1,), direction, r2c.kind), x, r2c, dt, _ref_error([n])))
        c2r = S.Fft((1,), direction, S.C2r(n))
        got = _go(c2r, on(dev, bins), dt)
        worst = max(worst, _check(got, _exact(bins, (1,), direction, c2r.kind), bins, c2r, cdt,
                                  _ref_error([n])))
    assert worst > 0 or n == 2  # n = 2 may round nothing on these values


def test_the_stated_bound_of_the_packed_axis() -> None:
    # ε(n/2) + 24u: ε(n) itself where n = 2^a 3^b 5^c 7^d, n >= 4; 24u at n = 2.
    for dt in (D.float32, D.float64):
        u = float(np.finfo(np.float32 if dt is D.float32 else np.float64).eps) / 2
        assert math.isclose(fourier.real_axis_error(2, dt), 24 * u)
        for n in (16, 210):
            assert math.isclose(fourier.real_axis_error(n, dt), fourier.stockham_error(n, u))
        assert math.isclose(fourier.real_axis_error(74, dt), fourier.axis_error(37, dt) + 24 * u)
        assert fourier.real_axis_error(7, dt) == fourier.axis_error(7, dt)


@pytest.mark.parametrize(("dt", "n"), [(D.float32, 210), (D.float64, 74)], ids=["f32-210", "f64-74"])
def test_any_layout_gives_the_contiguous_bits(dev: CudaRig, dt: Dtype, n: int) -> None:
    # R2c of x read as [::-1, 1::2] of a [3, 2n + 1] array (offset, reversed,
    # strided: the gather of real pairs) against the same values contiguous.
    cdt = _COMPLEX[dt]
    base = _draw((3, 2 * n + 1), dt, 300 + n)
    host = np.ascontiguousarray(base[::-1, 1::2])
    for direction in (_FWD, _INV):
        spec = S.Fft((1,), direction, S.R2c())
        got = _go(spec, on(dev, base)[::-1, 1::2], cdt)
        _check(got, _exact(host, (1,), direction, spec.kind), host, spec, dt, _ref_error([n]))
        assert np.array_equal(got.view(np.uint8), _go(spec, on(dev, host), cdt).view(np.uint8))
    # C2r along axis 0 (the destination's real lines n/2 + 1 elements apart:
    # the scatter of pairs) from strided bins, against axis 1 of the transpose.
    bins = _draw((n // 2 + 1, 8), cdt, 400 + n)
    for direction in (_FWD, _INV):
        spec = S.Fft((0,), direction, S.C2r(n))
        got = _go(spec, on(dev, np.repeat(bins, 2, axis=1))[:, ::2], dt)
        _check(got, _exact(bins, (0,), direction, spec.kind), bins, spec, cdt, _ref_error([n]))
        flat = _go(S.Fft((1,), direction, S.C2r(n)), on(dev, np.ascontiguousarray(bins.T)), dt)
        assert np.array_equal(got.view(np.uint8), np.ascontiguousarray(flat.T).view(np.uint8))


@pytest.mark.parametrize(("name", "xdt", "ddt"), [("r2c", D.float32, D.complex64),
                                                  ("c2r", D.complex128, D.float64)])
def test_the_packed_axis_among_others(dev: CudaRig, name: str, xdt: Dtype, ddt: Dtype) -> None:
    # x [4, 6, 20] read as [::-1, :, 2:] ([4, 6, 18], offset and reversed),
    # the real axis listed last: in memory the last (n = 18, 34) or the middle
    # (n = 6, 10; lines not contiguous, gathered and scattered).
    base = _draw((4, 6, 20), xdt, 500)
    host = base[::-1, :, 2:]
    for axes in [(1, 2), (0, 1), (0, 1, 2)]:
        for direction in (_FWD, _INV):
            m = host.shape[axes[-1]]
            kind: S.R2c | S.C2r = S.R2c() if name == "r2c" else S.C2r(2 * m - 2)
            spec = S.Fft(axes, direction, kind)
            got = _go(spec, on(dev, base)[::-1, :, 2:], ddt)
            ns = [host.shape[a] for a in axes[:-1]] + [kind.n if isinstance(kind, S.C2r) else m]
            _check(got, _exact(host, axes, direction, kind), host, spec, xdt, _ref_error(ns))


@pytest.mark.parametrize("dt", [D.float32, D.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("n", _LENGTHS)
def test_c2r_of_r2c_is_n_times_x(dev: CudaRig, dt: Dtype, n: int) -> None:
    # R2c errs by ‖D‖ ≤ ε·√n·‖x‖ (ε the real axis's stated bound); C2r carries
    # D through its exact map, of norm √n·√2 on n/2 + 1 bins, and errs by
    # ε·√n·‖X‖ itself, ‖X‖ (the full spectrum) = √n·‖x‖: n·x within
    # (1 + √2)·ε·n·‖x‖ to first order.
    cdt = _COMPLEX[dt]
    x = _draw((4, n), dt, 600 + n)
    eps = _stated_real(n, dt)
    norm = np.sqrt(np.sum(x.astype(np.float64) ** 2, axis=1))
    for there, back in ((_FWD, _INV), (_INV, _FWD)):
        bins = _go(S.Fft((1,), there, S.R2c()), on(dev, x), cdt)
        got = _go(S.Fft((1,), back, S.C2r(n)), on(dev, bins), dt)
        err = np.sqrt(np.sum((got.astype(np.float64) - n * x.astype(np.float64)) ** 2, axis=1))
        assert np.all(err <= (1 + math.sqrt(2)) * eps * n * norm), (n, there, err / (eps * n * norm))


@pytest.mark.parametrize("dt", [D.float32, D.float64], ids=["f32", "f64"])
def test_the_packed_path_gives_the_same_bits_on_every_run(dev: CudaRig, dt: Dtype) -> None:
    cdt = _COMPLEX[dt]
    x = _draw((3, 74), dt, 700)  # a Bluestein half, its kernel's transform kept after the first run
    bins = _draw((3, 38), cdt, 701)
    r2c, c2r = S.Fft((1,), _FWD, S.R2c()), S.Fft((1,), _INV, S.C2r(74))
    runs: list[tuple[Arr, Arr]] = [(_go(r2c, on(dev, x), cdt), _go(c2r, on(dev, bins), dt)) for _ in range(2)]
    for a, b in zip(runs[0], runs[1], strict=True):
        assert np.array_equal(a.view(np.uint8), b.view(np.uint8))

"""nxkernel_cuda.fourier: every transform (C2c, R2c, C2r; forward and inverse;
one to three axes; strided, reversed, offset and broadcast operands; lengths
1, primes, radix 2/3/4/5/7/8 products, multi-pass and Bluestein) within the
stated bound of an exact reference; the same bits on every run; an axis of
extent 0 gives zeros; x identical to dst; declines and refusals write
nothing; the source compiles for sm_80 and sm_90."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from nxkernel_core import dtype as D
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_core.dtype import Dtype
from nxkernel_core.kernel import Call, unit_roundoff
from nxkernel_core.layout import Broadcast
from nxkernel_cuda import fourier
from nxkernel_cuda.device import CudaRig
from nxkernel_cuda.library import LIBRARY

from .support import canary, on, run, untouched

Arr = npt.NDArray[Any]

#: π and the unit roundoff of the x87 long double the exact reference runs in.
_PI = np.longdouble("3.14159265358979323846264338327950288")
_U_LD = float(np.finfo(np.longdouble).epsneg)
_FWD, _INV = S.Direction.FORWARD, S.Direction.INVERSE
_NP = {D.complex64: np.complex64, D.complex128: np.complex128, D.float32: np.float32, D.float64: np.float64}


def _long_dft(v: Arr, axis: int, sign: int) -> Arr:
    """The DFT along ``axis`` of a complex long double array, summed directly
    with roots computed in long double: within √n·(n + 4)·u_ld relative
    (normwise) of the exact one."""
    n = v.shape[axis]
    if n == 0:
        return v.copy()
    m = np.arange(n, dtype=np.int64)
    ang = (np.asarray(2 * m, dtype=np.longdouble) / np.longdouble(n)) * _PI
    w = np.cos(ang) + 1j * np.sin(ang) * sign
    moved = np.moveaxis(v, axis, -1)
    out = np.empty(moved.shape, np.clongdouble)
    for k0 in range(0, n, 256):  # 256 outputs at a time, to keep the matrix small
        out[..., k0:k0 + 256] = moved @ w[np.outer(m, m[k0:k0 + 256]) % n]
    return np.moveaxis(out, -1, axis)


def _exact(x: Arr, axes: Sequence[int], direction: S.Direction, kind: S.C2c | S.R2c | S.C2r) -> Arr:
    """The contract's transform (exact.dft's rules) in long double."""
    sign = -1 if direction is _FWD else 1
    v = np.asarray(x).astype(np.clongdouble)
    if isinstance(kind, S.C2r):
        for a in axes[:-1]:
            v = _long_dft(v, a, sign)
        last, n = axes[-1], kind.n
        v = np.moveaxis(v, last, -1)
        full = np.zeros((*v.shape[:-1], n), np.clongdouble)
        if n:
            full[..., : n // 2 + 1] = v[..., : n // 2 + 1]
            full[..., 0] = full[..., 0].real
            if n % 2 == 0:
                full[..., n // 2] = full[..., n // 2].real
            for k in range(1, (n + 1) // 2):
                full[..., n - k] = np.conj(full[..., k])
        return np.moveaxis(_long_dft(full, full.ndim - 1, sign).real, -1, last)
    for a in axes:
        v = _long_dft(v, a, sign)
    if isinstance(kind, S.R2c):
        v = np.take(v, np.arange(x.shape[axes[-1]] // 2 + 1), axis=axes[-1])
    return v


def _primes_small(n: int) -> bool:
    for p in (2, 3, 5, 7):
        while n % p == 0:
            n //= p
    return n == 1


def _eps(n: int, u: float) -> float:
    """The statement's ε(n) = 24·(⌈log₂ n⌉ + 1)·u (0 for one point)."""
    return 0.0 if n <= 1 else 24 * (math.ceil(math.log2(n)) + 1) * u


def _stated(n: int, dt: Dtype) -> float:
    """The statement's relative bound of one axis of n points, recomputed here:
    ε(n), or Bluestein's ρ(n)·(2ε(m) + 25u + δ)."""
    u = unit_roundoff(dt)
    if _primes_small(n):
        return _eps(n, u)
    m = 1 << (2 * n - 2).bit_length()
    j = np.arange(n)
    b = np.zeros(m, np.complex128)
    c = np.exp(1j * np.pi * ((j * j) % (2 * n)) / n)
    b[:n] = c
    b[m - n + 1:] = c[1:][::-1]
    rho = float(np.abs(np.fft.fft(b)).max() / math.sqrt(n))
    delta = 2 * u if dt in (D.complex64, D.float32) else _eps(m, u) * math.sqrt(2 * m)
    return rho * (2 * _eps(m, u) + 25 * u + delta)


def _stated_real(n: int, dt: Dtype) -> float:
    """The statement's relative bound of R2c's or C2r's real axis of n points:
    packed for even n, ε(n/2) + 24u; ``_stated(n)`` for odd n."""
    return _stated(n, dt) if n % 2 else _stated(n // 2, dt) + 24 * unit_roundoff(dt)


def _check(got: Arr, want: Arr, x: Arr, spec: S.Fft, dt: Dtype, ref_rel: float) -> float:
    """Assert each transformed slice is within the stated bound (plus the
    reference's own error ``ref_rel``·√N·‖x‖) of ``want``; the worst ratio."""
    axes = spec.axes
    rank = x.ndim
    lead = [i for i in range(rank) if i not in axes]
    ends = range(rank - len(axes), rank)

    def slices(a: Arr) -> Arr:
        moved = np.moveaxis(np.asarray(a).astype(np.clongdouble), axes, ends)
        return moved.reshape((*(moved.shape[: len(lead)]), -1))

    ns = [x.shape[a] for a in axes]
    if isinstance(spec.kind, S.C2r):
        ns[-1] = spec.kind.n
    big_n = math.prod(ns)
    norm = np.sqrt(np.sum(np.abs(slices(x)) ** 2, axis=-1)).astype(np.float64)
    if isinstance(spec.kind, S.C2r):
        norm = norm * math.sqrt(2)
    rel = sum(_stated(n, dt) for n in ns[:-1]) + ref_rel
    rel += _stated(ns[-1], dt) if isinstance(spec.kind, S.C2c) else _stated_real(ns[-1], dt)
    allowed = rel * math.sqrt(big_n) * norm
    err = np.sqrt(np.sum(np.abs(slices(got) - slices(want)) ** 2, axis=-1)).astype(np.float64)
    assert np.all(err <= allowed), (spec, float(np.max(err - allowed)))
    return float(np.max(err / np.maximum(allowed, 1e-300)))


def _ref_error(ns: Sequence[int]) -> float:
    return sum(math.sqrt(n) * (n + 4) * _U_LD for n in ns)


def _draw(shape: Sequence[int], dt: Dtype, seed: int) -> Arr:
    """Values of magnitudes 2^±6 of both signs (complex: both parts)."""
    rng = np.random.default_rng(seed)

    def part() -> Arr:
        return rng.standard_normal(shape) * np.exp2(rng.integers(-6, 7, size=shape))

    v = part() + 1j * part() if dt.is_complex else part()
    return np.asarray(v).astype(_NP[dt])


def _go(spec: S.Fft, x: Array, dt: Dtype) -> Arr:
    answer, (got,) = run(spec, [x], [dt])
    assert answer is Answer.DONE
    return got


@pytest.mark.parametrize("dt", [D.complex64, D.complex128], ids=["c64", "c128"])
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6, 7, 8, 11, 13, 16, 17, 25, 32, 49, 60, 64, 97, 128, 243, 256])
def test_c2c_of_every_length_is_within_the_stated_bound(dev: CudaRig, dt: Dtype, n: int) -> None:
    x = _draw((3, n), dt, n)
    for direction in (_FWD, _INV):
        spec = S.Fft((1,), direction, S.C2c())
        got = _go(spec, on(dev, x), dt)
        _check(got, _exact(x, (1,), direction, spec.kind), x, spec, dt, _ref_error([n]))


@pytest.mark.parametrize(("n", "dt"), [(2250, D.complex128), (4096, D.complex128), (1009, D.complex128),
                                       (4099, D.complex64), (8192, D.complex64),
                                       (3 * 5 * 7 * 64, D.complex64)])
def test_multi_pass_and_bluestein_lines_are_within_the_stated_bound(dev: CudaRig, n: int, dt: Dtype) -> None:
    # complex128: against the long double reference; complex64: against float64
    # NumPy, its error taken as 24·(⌈log₂ n⌉ + 1)·2^-53 relative.
    x = _draw((1, n), dt, 3 * n)
    spec = S.Fft((1,), _FWD, S.C2c())
    got = _go(spec, on(dev, x), dt)
    if dt is D.complex128:
        _check(got, _exact(x, (1,), _FWD, spec.kind), x, spec, dt, _ref_error([n]))
    else:
        want = np.fft.fft(x.astype(np.complex128), axis=1)
        _check(got, want, x, spec, dt, _eps(n, 2.0**-53))


_KINDS: list[tuple[str, Dtype, Dtype]] = [
    ("c2c", D.complex64, D.complex64), ("c2c", D.complex128, D.complex128),
    ("r2c", D.float32, D.complex64), ("r2c", D.float64, D.complex128),
    ("c2r", D.complex64, D.float32), ("c2r", D.complex128, D.float64)]


@pytest.mark.parametrize(("name", "xdt", "ddt"), _KINDS)
def test_every_kind_along_any_axes_of_any_layout(dev: CudaRig, name: str, xdt: Dtype, ddt: Dtype) -> None:
    # x [6, 11, 14] read as [::2, ::-1, 1::2] (offset, reversed, strided): [3, 11, 7].
    base = _draw((6, 11, 14), xdt, 7)
    host = base[::2, ::-1, 1::2]
    worst = 0.0
    for axes in [(0,), (1,), (2,), (0, 1), (0, 2), (1, 2), (0, 1, 2)]:
        for direction in (_FWD, _INV):
            m = host.shape[axes[-1]]
            kinds: list[S.C2c | S.R2c | S.C2r] = (
                [S.C2c()] if name == "c2c" else [S.R2c()] if name == "r2c"
                else [S.C2r(2 * m - 2), S.C2r(2 * m - 1)])
            for kind in kinds:
                spec = S.Fft(axes, direction, kind)
                x = on(dev, base)[::2, ::-1, 1::2]
                got = _go(spec, x, ddt)
                ns = [host.shape[a] for a in axes[:-1]] + [kind.n if isinstance(kind, S.C2r) else m]
                want = _exact(host, axes, direction, kind)
                worst = max(worst, _check(got, want, host, spec, xdt, _ref_error(ns)))
    assert worst > 0  # the transforms round: a bound of 0 would hide a copy


def test_broadcast_operands_and_c2r_of_one_and_two_points(dev: CudaRig) -> None:
    row = _draw((5,), D.complex128, 41)
    x = on(dev, row).view(Broadcast((4, 5)))
    host = np.broadcast_to(row, (4, 5))
    spec = S.Fft((0, 1), _FWD, S.C2c())
    _check(_go(spec, x, D.complex128), _exact(host, (0, 1), _FWD, spec.kind), host, spec, D.complex128,
           _ref_error([4, 5]))
    for n in (1, 2):
        bins = _draw((3, 1 + n // 2), D.complex64, 42 + n)
        c2r = S.Fft((1,), _INV, S.C2r(n))
        got = _go(c2r, on(dev, bins), D.float32)
        _check(got, _exact(bins, (1,), _INV, c2r.kind), bins, c2r, D.complex64, _ref_error([n]))


@pytest.mark.parametrize("dt", [D.complex64, D.complex128], ids=["c64", "c128"])
def test_the_same_bits_on_every_run(dev: CudaRig, dt: Dtype) -> None:
    x = _draw((4, 37), dt, 51)  # Bluestein, its kernel's transform kept after the first run
    spec = S.Fft((0, 1), _FWD, S.C2c())
    first = _go(spec, on(dev, x), dt)
    assert np.array_equal(first.view(np.uint8), _go(spec, on(dev, x), dt).view(np.uint8))


def test_an_axis_of_extent_zero_gives_zeros(dev: CudaRig) -> None:
    # R2c of 0 points keeps one bin, an empty sum: +0.
    x = on(dev, np.zeros((3, 0), np.float32))
    spec = S.Fft((1,), _FWD, S.R2c())
    dst = canary(dev, D.complex64, (3, 1))
    assert LIBRARY.fft(spec, [dst], [x]) is Answer.DONE
    assert dst.to_numpy().view(np.uint32).tolist() == [[0, 0]] * 3
    # C2c with an empty axis and C2r of 0 points: empty destinations.
    empty = on(dev, np.zeros((0, 4), np.complex64))
    assert _go(S.Fft((0,), _INV, S.C2c()), empty, D.complex64).shape == (0, 4)
    got = _go(S.Fft((0, 1), _FWD, S.C2r(0)), on(dev, np.ones((2, 1), np.complex128)), D.float64)
    assert got.shape == (2, 0)
    # R2c along two axes, one of them empty: zeros of the destination's shape.
    dst2 = canary(dev, D.complex128, (2, 3))
    assert LIBRARY.fft(S.Fft((0, 1), _FWD, S.R2c()), [dst2], [on(dev, np.ones((2, 4), np.float64))[:, :0]]) \
        is Answer.SHAPE_MISMATCH
    zero = on(dev, np.ones((0, 4), np.float64))
    assert LIBRARY.fft(S.Fft((0, 1), _FWD, S.R2c()), [Array.empty(D.complex128, (0, 3), dev)], [zero]) \
        is Answer.DONE


def test_x_identical_to_dst_gives_the_fresh_result(dev: CudaRig) -> None:
    x = _draw((6, 10), D.complex64, 61)
    spec = S.Fft((0, 1), _FWD, S.C2c())
    fresh = _go(spec, on(dev, x), D.complex64)
    both = on(dev, x)
    assert LIBRARY.fft(spec, [both], [both]) is Answer.DONE
    assert np.array_equal(both.to_numpy().view(np.uint8), fresh.view(np.uint8))


def test_misfits_are_refused_and_write_nothing(dev: CudaRig) -> None:
    c64 = on(dev, np.ones((4, 6), np.complex64))
    fwd = S.Fft((1,), _FWD, S.C2c())
    cases: list[tuple[S.Fft, Array, list[Array], Answer]] = [
        (fwd, canary(dev, D.complex64, (4, 6)), [c64, c64], Answer.BAD_ARITY),
        (fwd, canary(dev, D.complex128, (4, 6)), [c64], Answer.WRONG_DTYPE),
        (S.Fft((1,), _FWD, S.R2c()), canary(dev, D.complex128, (4, 4)),
         [on(dev, np.ones((4, 6), np.float32))], Answer.WRONG_DTYPE),
        (S.Fft((1,), _FWD, S.R2c()), canary(dev, D.complex64, (4, 6)),
         [on(dev, np.ones((4, 6), np.float32))], Answer.SHAPE_MISMATCH),
        (S.Fft((1,), _INV, S.C2r(8)), canary(dev, D.float32, (4, 8)), [c64], Answer.SHAPE_MISMATCH),
        (fwd, canary(dev, D.complex64, (4, 6)), [Array.from_numpy(np.ones((4, 6), np.complex64))],
         Answer.WRONG_DEVICE),
    ]
    for spec, dst, ops, want in cases:
        assert LIBRARY.fft(spec, [dst], ops) is want, (spec, want)
        assert untouched(dst)
    strided = canary(dev, D.complex64, (4, 12))
    assert LIBRARY.fft(fwd, [strided[:, ::2]], [c64]) is Answer.BAD_LAYOUT
    assert untouched(strided)


def test_more_than_2_to_the_27_points_is_declined_and_writes_nothing(dev: CudaRig) -> None:
    # x broadcast from one element; dst zeroed host memory that nothing touches
    # but its first and last bytes, marked here.
    n = (1 << 27) + 2
    x = on(dev, np.ones((1,), np.complex64)).view(Broadcast((n // 2 + 1,)))
    spec = S.Fft((0,), _INV, S.C2r(n))
    dst = Array.empty(D.float32, (n,), dev)
    mem, off, length = dst.buffer.memory, dst.buffer.offset, dst.buffer.length
    mark = np.full(64, 0xA5, np.uint8)
    dev.write_bytes(mem, off, mark)
    dev.write_bytes(mem, off + length - 64, mark)
    call = Call("fft", spec, (dst,), (x,))
    assert fourier.declines(call) is not None and LIBRARY.statement.declines(call) is not None
    assert LIBRARY.fft(spec, [dst], [x]) is Answer.DECLINED
    assert np.all(dev.read_bytes(mem, off, 64) == 0xA5)
    assert np.all(dev.read_bytes(mem, off + length - 64, 64) == 0xA5)
    small = Call("fft", S.Fft((0,), _INV, S.C2r(8)), (Array.empty(D.float32, (8,), dev),),
                 (on(dev, np.ones((5,), np.complex64)),))
    assert fourier.declines(small) is None and LIBRARY.statement.declines(small) is None


def test_plans_cover_the_length_within_a_block() -> None:
    for n in (1, 7, 4096, 8192, 2**24, 3**9, 2 * 3 * 5 * 7 * 2**10, 2048 * 7):
        for ct, one, most in (("float", 4096, 256), ("double", 2048, 128)):
            passes = fourier.plan(n, ct)
            assert passes is not None
            assert math.prod(math.prod(p) for p in passes) == n
            assert all(r in (2, 3, 4, 5, 7, 8) for p in passes for r in p)
            assert len(passes) == 1 if n <= one else all(math.prod(p) <= most for p in passes)
    assert fourier.plan(11, "float") is None and fourier.plan(2 * 13, "double") is None
    assert len(fourier.plan(2**24, "float") or []) == 3
    for n in (1, 8, 60, 11, 97, 1009):  # the module's bound helper is the statement's
        for dt in (D.complex64, D.complex128):
            assert math.isclose(fourier.axis_error(n, dt), _stated(n, dt), rel_tol=1e-12)
    for n in (1, 2, 7, 16, 74, 210):  # the real axis: packed for even n
        for dt in (D.float32, D.float64):
            assert math.isclose(fourier.real_axis_error(n, dt), _stated_real(n, dt), rel_tol=1e-12)
            if n >= 4 and _primes_small(n):  # packing keeps ε(n) itself
                assert math.isclose(_stated_real(n, dt), _eps(n, unit_roundoff(dt)), rel_tol=1e-12)

"""The host library's contraction against exact references: every float and
complex output within the stated e(K) (|init| + Σ|a||b|) of the exact sum
(Fractions), integers exact and wrapping, outputs without products keeping
init's bits, block scales applied by the operand's own index, Rows and
Contracting segments, declines and refusals before any write, and bits that
depend neither on the operands' layouts nor on BLAS's thread count."""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Sequence
from fractions import Fraction
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
from nxkernel_core.kernel import Call, check_error_factor, gamma, unit_roundoff
from nxkernel_core.layout import Range, Slice
from nxkernel_host import blas
from nxkernel_host.contraction import error_factor
from nxkernel_host.library import library

from .layouts import LAYOUTS, placed

NDArray = np.ndarray[Any, Any]
EXAMPLES = settings(max_examples=25, deadline=None)
FLOAT_ACCS = (D.float32, D.float64, D.complex64, D.complex128)
contract = library.contract


def bits(a: NDArray) -> bytes:
    return np.ascontiguousarray(a).tobytes()


# --------------------------------------------------------------------------
# The exact reference
# --------------------------------------------------------------------------


def fractions(x: NDArray) -> tuple[NDArray, NDArray]:
    """Real and imaginary parts of float or complex ``x`` as object arrays of Fractions."""
    c = np.asarray(x)
    c = c.astype(np.complex128) if c.dtype.kind == "c" else c.astype(np.float64) + 0j
    to = np.vectorize(lambda v: Fraction(float(v)), otypes=[object])
    if c.size == 0:
        return np.zeros(c.shape, dtype=object), np.zeros(c.shape, dtype=object)
    return to(c.real), to(c.imag)


def subscripts(spec: S.Contract, ra: int, rb: int) -> str:
    """An einsum string for the contraction's result order."""
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    sa, sb = [""] * ra, [""] * rb
    for i, j in spec.batch + spec.contracting:
        sa[i] = sb[j] = next(letters)
    for i in range(ra):
        sa[i] = sa[i] or next(letters)
    for j in range(rb):
        sb[j] = sb[j] or next(letters)
    out = [sa[i] for i, _ in spec.batch]
    out += [sa[i] for i in range(ra) if sa[i] not in sb]
    out += [sb[j] for j in range(rb) if sb[j] not in sa]
    return f"{''.join(sa)},{''.join(sb)}->{''.join(out)}"


def exact(spec: S.Contract, a: NDArray, b: NDArray) -> tuple[NDArray, NDArray, NDArray]:
    """The exact products' sums (real and imaginary Fractions) and Σ|a||b| (float)."""
    sub = subscripts(spec, a.ndim, b.ndim)
    ar, ai = fractions(a)
    br, bi = fractions(b)
    re = np.einsum(sub, ar, br) - np.einsum(sub, ai, bi)
    im = np.einsum(sub, ar, bi) + np.einsum(sub, ai, br)
    size = np.einsum(sub, np.abs(a.astype(np.complex128)), np.abs(b.astype(np.complex128)))
    return np.asarray(re, dtype=object), np.asarray(im, dtype=object), np.asarray(size)


def assert_within(got: NDArray, re: NDArray, im: NDArray, size: NDArray, init: NDArray | None,
                  k: int, acc: Dtype) -> None:
    """|got − (init + exact)| ≤ e(K) (|init| + Σ|a||b|), in modulus."""
    e = error_factor(k, acc)
    ir, ii = fractions(init) if init is not None else (np.zeros(got.shape, object),) * 2
    g = got.astype(np.complex128)
    for idx in np.ndindex(*got.shape):
        want_re, want_im = re[idx] + ir[idx], im[idx] + ii[idx]
        err = math.hypot(float(Fraction(float(g[idx].real)) - want_re),
                         float(Fraction(float(g[idx].imag)) - want_im))
        scale = float(size[idx]) + (abs(complex(init[idx])) if init is not None else 0.0)
        assert err <= e * scale * (1 + 1e-9), (idx, g[idx], err, e * scale)


# --------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------


@st.composite
def cases(draw: st.DrawFn) -> tuple[S.Contract, tuple[int, ...], tuple[int, ...]]:
    """A contraction spec without segments and its operands' shapes: up to one
    batch pair, two contracting pairs and two free axes a side, in any order."""
    ext = st.sampled_from([0, 1, 1, 2, 3, 4, 5])
    roles_a: list[tuple[str, int]] = []
    roles_b: list[tuple[str, int]] = []
    extents: dict[tuple[str, int], int] = {}
    for kind, lo, hi in (("batch", 0, 1), ("con", 0, 2)):
        for i in range(draw(st.integers(lo, hi))):
            extents[(kind, i)] = draw(ext)
            roles_a.append((kind, i))
            roles_b.append((kind, i))
    for side, roles in (("fa", roles_a), ("fb", roles_b)):
        for i in range(draw(st.integers(0, 2))):
            extents[(side, i)] = draw(ext)
            roles.append((side, i))
    roles_a = list(draw(st.permutations(roles_a)))
    roles_b = list(draw(st.permutations(roles_b)))
    pairs = {kind: tuple((roles_a.index(r), roles_b.index(r)) for r in roles_a if r[0] == kind)
             for kind in ("batch", "con")}
    acc = draw(st.sampled_from(FLOAT_ACCS))
    spec = S.Contract(pairs["batch"], pairs["con"], acc, init=draw(st.booleans()))
    return spec, tuple(extents[r] for r in roles_a), tuple(extents[r] for r in roles_b)


def values(rng: np.random.Generator, dt: Dtype, shape: Sequence[int]) -> NDArray:
    """Random elements with a spread of exponents, so products cancel and round."""
    def part() -> NDArray:
        return rng.standard_normal(shape) * np.exp2(rng.integers(-6, 7, shape))
    if dt.is_complex:
        return (part() + 1j * part()).astype(dt.numpy_dtype)
    return part().astype(dt.numpy_dtype)


def operands_of(spec: S.Contract, sa: tuple[int, ...], sb: tuple[int, ...],
                rng: np.random.Generator, dts: tuple[Dtype, Dtype]
                ) -> tuple[NDArray, NDArray, NDArray | None, tuple[int, ...]]:
    out = Shape.contract(S.Contract(spec.batch, spec.contracting, spec.acc), [sa, sb])
    assert not isinstance(out, Shape.Error)
    init = values(rng, spec.acc, out[0]) if spec.init else None
    return values(rng, dts[0], sa), values(rng, dts[1], sb), init, out[0]


def run(spec: S.Contract, dst: Array, ops: Sequence[Array]) -> None:
    assert contract(spec, [dst], list(ops)) is Answer.DONE


# --------------------------------------------------------------------------
# Error factor and bounds
# --------------------------------------------------------------------------


def test_error_factor_is_within_the_ceiling() -> None:
    class Stated:
        library = "host"
        error_factor = staticmethod(error_factor)

    ks = [*range(0, 200), 1000, 4096, 65536, 2**20, 2**24, 2**30]
    check_error_factor(Stated, FLOAT_ACCS, ks)  # type: ignore[arg-type]
    assert error_factor(5, D.int32) == 0.0
    assert error_factor(0, D.float32) == 0.0
    u = unit_roundoff(D.float32)
    assert error_factor(3, D.float32) == gamma(6, u)
    assert error_factor(1, D.complex64) == gamma(4, u)


@EXAMPLES
@given(case=cases(), seed=st.integers(0, 2**32 - 1), data=st.data())
def test_float_outputs_are_within_e_of_the_exact_sum(
        case: tuple[S.Contract, tuple[int, ...], tuple[int, ...]], seed: int,
        data: st.DataObject) -> None:
    spec, sa, sb = case
    rng = np.random.default_rng(seed)
    acc = spec.acc
    a, b, init, out = operands_of(spec, sa, sb, rng, (acc, acc))
    lay = st.sampled_from(LAYOUTS)
    ops = [placed(a, acc, data.draw(lay)), placed(b, acc, data.draw(lay))]
    if init is not None:
        ops.append(placed(init, acc, data.draw(lay)))
    dst = Array.empty(acc, out)
    run(spec, dst, ops)
    k = math.prod(sa[i] for i, _ in spec.contracting)
    re, im, size = exact(spec, a, b)
    assert_within(dst.to_numpy(), re, im, size, init, k, acc)
    # Layout independence: the same values through C-contiguous arrays, same bits.
    fresh = Array.empty(acc, out)
    run(spec, fresh, [Array.from_numpy(o.to_numpy(), dtype=acc) for o in ops])
    assert bits(fresh.to_numpy()) == bits(dst.to_numpy())


@pytest.mark.parametrize("acc", FLOAT_ACCS, ids=lambda d: d.name)
def test_cancellation_and_long_sums_stay_within_e(acc: Dtype) -> None:
    rng = np.random.default_rng(7)
    k = 700
    a = values(rng, acc, (5, k))
    b = values(rng, acc, (k, 3))
    a[:, k // 2:] = a[:, :k - k // 2]  # products that cancel pairwise, up to rounding
    b[k // 2:] = -b[:k - k // 2]
    a[:, -1] *= 1.0 + 2.0**-20
    init = values(rng, acc, (5, 3))
    spec = S.Contract((), ((1, 0),), acc, init=True)
    dst = Array.empty(acc, (5, 3))
    run(spec, dst, [Array.from_numpy(a), Array.from_numpy(b), Array.from_numpy(init)])
    re, im, size = exact(spec, a, b)
    assert_within(dst.to_numpy(), re, im, size, init, k, acc)


@pytest.mark.parametrize("acc", FLOAT_ACCS, ids=lambda d: d.name)
@pytest.mark.parametrize("shape", [(1, 9, 1), (1, 9, 6), (6, 9, 1), (6, 1, 6), (260, 12, 3)])
def test_rows_and_columns_of_one_and_many_chunks(acc: Dtype, shape: tuple[int, int, int]) -> None:
    rows, k, cols = shape
    rng = np.random.default_rng(3)
    a, b = values(rng, acc, (rows, k)), values(rng, acc, (k, cols))
    spec = S.Contract((), ((1, 0),), acc)
    dst = Array.empty(acc, (rows, cols))
    run(spec, dst, [Array.from_numpy(a), Array.from_numpy(b)])
    re, im, size = exact(spec, a, b)
    assert_within(dst.to_numpy(), re, im, size, None, k, acc)


# --------------------------------------------------------------------------
# init, outputs without products, destinations
# --------------------------------------------------------------------------


@pytest.mark.parametrize("acc", FLOAT_ACCS, ids=lambda d: d.name)
def test_outputs_without_products_keep_init_bits_or_plus_zero(acc: Dtype) -> None:
    part = np.float32 if acc in (D.float32, D.complex64) else np.float64
    ubits = np.uint32 if part is np.float32 else np.uint64
    specials = np.array([0x80000000, 0x7FC00123, 0xFFC00001, 0x3F800000], np.uint32)
    if part is np.float64:
        specials = np.array([1 << 63, 0x7FF8000000000123, 0xFFF8000000000001,
                             0x3FF0000000000000], np.uint64)
    init = specials.astype(ubits).view(part).reshape(2, 2)
    if acc.is_complex:
        init = init.astype(acc.numpy_dtype)
        init.imag = specials[::-1].astype(ubits).view(part).reshape(2, 2)
    a = np.zeros((2, 0), acc.numpy_dtype)
    b = np.zeros((0, 2), acc.numpy_dtype)
    with_init = Array.empty(acc, (2, 2))
    run(S.Contract((), ((1, 0),), acc, init=True), with_init,
        [Array.from_numpy(a), Array.from_numpy(b), Array.from_numpy(init)])
    assert bits(with_init.to_numpy()) == bits(init)
    without = Array.from_numpy(np.full((2, 2), -1.0, acc.numpy_dtype))
    run(S.Contract((), ((1, 0),), acc), without, [Array.from_numpy(a), Array.from_numpy(b)])
    assert bits(without.to_numpy()) == bits(np.zeros((2, 2), acc.numpy_dtype))


@pytest.mark.parametrize("acc", FLOAT_ACCS, ids=lambda d: d.name)
def test_init_may_be_the_destination(acc: Dtype) -> None:
    rng = np.random.default_rng(11)
    a, b, init = values(rng, acc, (2, 7, 5)), values(rng, acc, (2, 5, 3)), values(rng, acc,
                                                                                 (2, 7, 3))
    spec = S.Contract(((0, 0),), ((2, 1),), acc, init=True)
    fresh = Array.empty(acc, (2, 7, 3))
    run(spec, fresh, [Array.from_numpy(a), Array.from_numpy(b), Array.from_numpy(init)])
    both = Array.from_numpy(init)
    run(spec, both, [Array.from_numpy(a), Array.from_numpy(b), both])
    assert bits(both.to_numpy()) == bits(fresh.to_numpy())


@pytest.mark.parametrize(("acc", "dst"), [(D.float32, D.float16), (D.float32, D.bfloat16),
                                          (D.float32, D.float8_e4m3fn), (D.float64, D.float32),
                                          (D.float32, D.float64), (D.complex128, D.complex64)],
                         ids=str)
def test_the_result_rounds_once_into_the_destination(acc: Dtype, dst: Dtype) -> None:
    rng = np.random.default_rng(5)
    a, b = values(rng, acc, (4, 33)), values(rng, acc, (33, 6))
    a[0, 0] = 1e30 if acc.is_float else a[0, 0]
    spec = S.Contract((), ((1, 0),), acc)
    wide, narrow = Array.empty(acc, (4, 6)), Array.empty(dst, (4, 6))
    run(spec, wide, [Array.from_numpy(a), Array.from_numpy(b)])
    run(spec, narrow, [Array.from_numpy(a), Array.from_numpy(b)])
    w = wide.to_numpy()
    want = w.astype(dst.numpy_dtype) if dst.is_complex else D.of_float(dst, w.astype(np.float64))
    assert bits(narrow.to_numpy()) == bits(want)


@pytest.mark.parametrize("dt", [D.float16, D.bfloat16, D.float8_e4m3fn, D.float8_e5m2,
                                D.float4_e2m1fn, D.int8, D.uint16, D.int4, D.bool_, D.bit],
                         ids=lambda d: d.name)
def test_narrow_operands_convert_exactly(dt: Dtype) -> None:
    rng = np.random.default_rng(2)
    if dt.is_float:
        src = D.of_float(dt, rng.standard_normal((3, 5, 6)) * 4)
    elif dt.is_bool:
        src = rng.integers(0, 2, (3, 5, 6)).astype(np.bool_)
    else:
        lo, hi = dt.int_range
        src = rng.integers(lo, hi + 1, (3, 5, 6)).astype(dt.numpy_dtype)
    other = rng.standard_normal((3, 6, 4)).astype(np.float32)
    spec = S.Contract(((0, 0),), ((2, 1),), D.float32)
    narrow, wide = Array.empty(D.float32, (3, 5, 4)), Array.empty(D.float32, (3, 5, 4))
    run(spec, narrow, [placed(src, dt, "permuted"), Array.from_numpy(other)])
    run(spec, wide, [Array.from_numpy(src.astype(np.float32)), Array.from_numpy(other)])
    assert bits(narrow.to_numpy()) == bits(wide.to_numpy())


def test_a_boolean_reads_its_byte_as_nonzero() -> None:
    raw = np.array([[0, 1, 2, 255]], np.uint8).view(np.bool_)
    b = np.ones((4, 1), np.float32)
    dst = Array.empty(D.float32, (1, 1))
    run(S.Contract((), ((1, 0),), D.float32), dst, [Array.from_numpy(raw), Array.from_numpy(b)])
    assert dst.to_numpy()[0, 0] == 3.0


# --------------------------------------------------------------------------
# Integers
# --------------------------------------------------------------------------

INTS = (D.int8, D.uint8, D.int16, D.uint16, D.int32, D.uint32, D.int64, D.uint64, D.int4,
        D.uint4, D.bool_)


def wrapped(v: int, dt: Dtype) -> int:
    w = v % (1 << dt.bits)
    return w - (1 << dt.bits) if dt.kind is D.Kind.SIGNED and w >= 1 << (dt.bits - 1) else w


def random_ints(rng: np.random.Generator, dt: Dtype, shape: Sequence[int], small: bool) -> NDArray:
    if dt.is_bool:
        return rng.integers(0, 2, shape).astype(np.bool_)
    lo, hi = dt.int_range
    if small:
        lo, hi = max(lo, -3), min(hi, 3)
    return np.array([int(v) for v in rng.integers(0, 2**63, math.prod(shape))],
                    dtype=object).reshape(shape) % (hi - lo + 1) + lo


@settings(max_examples=40, deadline=None)
@given(a_dt=st.sampled_from(INTS), b_dt=st.sampled_from(INTS), acc=st.sampled_from(INTS[:-1]),
       dst=st.sampled_from(INTS[:-1]), small=st.booleans(), init=st.booleans(),
       k=st.sampled_from([0, 1, 3, 17]), seed=st.integers(0, 2**32 - 1))
def test_integers_are_exact_and_wrap(a_dt: Dtype, b_dt: Dtype, acc: Dtype, dst: Dtype,
                                     small: bool, init: bool, k: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = random_ints(rng, a_dt, (3, k), small)
    b = random_ints(rng, b_dt, (k, 4), small)
    ini = random_ints(rng, D.int64, (3, 4), small) if init else None
    spec = S.Contract((), ((1, 0),), acc, init=init)
    ops = [Array.from_numpy(np.asarray(a).astype(a_dt.numpy_dtype), dtype=a_dt),
           placed(np.asarray(b).astype(b_dt.numpy_dtype), b_dt, "reversed")]
    if ini is not None:
        ops.append(Array.from_numpy(ini.astype(np.int64)))
    out = Array.empty(dst, (3, 4))
    run(spec, out, ops)
    got = out.to_numpy()
    for i, j in np.ndindex(3, 4):
        total = sum(int(a[i, t]) * int(b[t, j]) for t in range(k))
        total += int(ini[i, j]) if ini is not None else 0
        assert int(got[i, j]) == wrapped(wrapped(total, acc), dst)


def test_wide_integers_take_the_wrapping_path() -> None:
    a = np.array([[2**62, 3, -(2**63)]], np.int64)
    b = np.array([[4], [2**61], [-1]], np.int64)
    out = Array.empty(D.int64, (1, 1))
    run(S.Contract((), ((1, 0),), D.int64), out, [Array.from_numpy(a), Array.from_numpy(b)])
    want = wrapped(2**64 + 3 * 2**61 + 2**63, D.int64)
    assert int(out.to_numpy()[0, 0]) == want


# --------------------------------------------------------------------------
# Block scales
# --------------------------------------------------------------------------


def test_mxfp8_exponent_scales_apply_by_the_operands_own_index() -> None:
    rng = np.random.default_rng(13)
    r, k, c = 6, 64, 5
    a = D.of_float(D.float8_e4m3fn, rng.standard_normal((r, k)) * 8)
    b = D.of_float(D.float8_e4m3fn, rng.standard_normal((k, c)) * 8)
    sa = rng.integers(120, 135, (r, k // 32)).astype(np.uint8)
    sb = rng.integers(120, 135, (k // 32, c)).astype(np.uint8)
    spec = S.Contract((), ((1, 0),), D.float32,
                      scales=(S.ScaleKind.EXPONENT, S.ScaleKind.EXPONENT))
    dst = Array.empty(D.float32, (r, c))
    run(spec, dst, [placed(a, D.float8_e4m3fn, "permuted"), placed(b, D.float8_e4m3fn, "strided"),
                    placed(sa, D.uint8, "reversed"), Array.from_numpy(sb)])
    ea = a.astype(np.float64) * np.exp2(np.repeat(sa.astype(np.float64) - 127, 32, axis=1))
    eb = b.astype(np.float64) * np.exp2(np.repeat(sb.astype(np.float64) - 127, 32, axis=0))
    sp = S.Contract((), ((1, 0),), D.float32)
    re, im, size = exact(sp, ea, eb)
    assert_within(dst.to_numpy(), re, im, size, None, k, D.float32)


def test_exponent_code_255_is_nan_for_its_block_alone() -> None:
    a = np.ones((2, 4), np.float32)
    b = np.ones((4, 2), np.float32)
    sa = np.array([[127, 127], [127, 255]], np.uint8)
    spec = S.Contract((), ((1, 0),), D.float32, scales=(S.ScaleKind.EXPONENT, None))
    dst = Array.empty(D.float32, (2, 2))
    run(spec, dst, [Array.from_numpy(a), Array.from_numpy(b), Array.from_numpy(sa)])
    got = dst.to_numpy()
    assert np.array_equal(got[0], [4.0, 4.0]) and np.isnan(got[1]).all()


def test_per_channel_value_scales_on_int8() -> None:
    rng = np.random.default_rng(17)
    a = rng.integers(-128, 128, (5, 40)).astype(np.int8)
    b = rng.integers(-128, 128, (40, 3)).astype(np.int8)
    sa = rng.standard_normal((5, 1)).astype(np.float32)
    sb = rng.standard_normal((1, 3)).astype(np.float16)
    spec = S.Contract((), ((1, 0),), D.float32, scales=(S.ScaleKind.VALUE, S.ScaleKind.VALUE))
    dst = Array.empty(D.float32, (5, 3))
    run(spec, dst, [Array.from_numpy(a), placed(b, D.int8, "permuted"), Array.from_numpy(sa),
                    Array.from_numpy(sb)])
    ea = a.astype(np.float64) * sa.astype(np.float64)
    eb = b.astype(np.float64) * sb.astype(np.float64)
    re, im, size = exact(S.Contract((), ((1, 0),), D.float32), ea, eb)
    assert_within(dst.to_numpy(), re, im, size, None, 40, D.float32)
    # Integer Value scales into an integer accumulator are exact and wrap.
    si = np.array([[3], [-2], [1], [0], [7]], np.int32)
    out = Array.empty(D.int32, (5, 3))
    run(S.Contract((), ((1, 0),), D.int32, scales=(S.ScaleKind.VALUE, None)), out,
        [Array.from_numpy(a), Array.from_numpy(b), Array.from_numpy(si)])
    want = (a.astype(np.int64) * si) @ b.astype(np.int64)
    assert np.array_equal(out.to_numpy(), want.astype(np.int32))


# --------------------------------------------------------------------------
# Segments
# --------------------------------------------------------------------------


@pytest.mark.parametrize("acc", [D.float32, D.complex128, D.int32], ids=lambda d: d.name)
def test_rows_segments_are_a_grouped_product(acc: Dtype) -> None:
    rng = np.random.default_rng(19)
    # a [batch 2, free 3, tokens 7, K 5]: a_axis = 2 is the segmented free axis.
    # b [batch 2, K 5, experts 4, free 2]: b_axis = 2 leaves the result.
    if acc.is_int:
        a = rng.integers(-50, 50, (2, 3, 7, 5)).astype(np.int32)
        b = rng.integers(-50, 50, (2, 5, 4, 2)).astype(np.int32)
        init = rng.integers(-50, 50, (2, 3, 7, 2)).astype(np.int32)
    else:
        a, b = values(rng, acc, (2, 3, 7, 5)), values(rng, acc, (2, 5, 4, 2))
        init = values(rng, acc, (2, 3, 7, 2))
    ids = rng.integers(-1, 5, (2, 7)).astype(np.int64)  # -1 and 4 are in no group
    spec = S.Contract(((0, 0),), ((3, 1),), acc, init=True, segments=S.Rows(2, 2))
    dst = Array.empty(acc, (2, 3, 7, 2))
    run(spec, dst, [placed(a, acc, "permuted"), Array.from_numpy(b), Array.from_numpy(init),
                    Array.from_numpy(ids)])
    got = dst.to_numpy()
    for t, r in np.ndindex(2, 7):
        e = int(ids[t, r])
        if not 0 <= e < 4:
            assert bits(got[t, :, r]) == bits(init[t, :, r])
            continue
        if acc.is_int:
            want = a[t, :, r].astype(np.int64) @ b[t, :, e].astype(np.int64) + init[t, :, r]
            assert np.array_equal(got[t, :, r], want.astype(np.int32))
            continue
        sp = S.Contract((), ((1, 0),), acc)
        re, im, size = exact(sp, a[t, :, r], b[t, :, e])
        assert_within(got[t, :, r], re, im, size, init[t, :, r], 5, acc)


@pytest.mark.parametrize("acc", [D.float64, D.complex64, D.int64], ids=lambda d: d.name)
def test_contracting_segments_sum_each_group_alone(acc: Dtype) -> None:
    rng = np.random.default_rng(23)
    # a [K 6, rows 3, K2 2], b [K2 2, cols 4, K 6]: pair 1 (the K of extent 6) is cut.
    if acc.is_int:
        a = rng.integers(-9, 9, (6, 3, 2)).astype(np.int64)
        b = rng.integers(-9, 9, (2, 4, 6)).astype(np.int64)
    else:
        a, b = values(rng, acc, (6, 3, 2)), values(rng, acc, (2, 4, 6))
    ids = np.array([2, 0, 2, 7, -3, 0], np.int64)  # group 1 is empty
    spec = S.Contract((), ((2, 0), (0, 2)), acc, segments=S.ContractingSegments(1, 3))
    dst = Array.empty(acc, (3, 3, 4))
    run(spec, dst, [Array.from_numpy(a), placed(b, acc, "reversed"), Array.from_numpy(ids)])
    got = dst.to_numpy()
    assert bits(got[1]) == bits(np.zeros((3, 4), acc.numpy_dtype))
    for e in (0, 2):
        sel = np.flatnonzero(ids == e)
        sa, sb = a[sel], b[:, :, sel]
        if acc.is_int:
            want = np.einsum("kri,ick->rc", sa, sb)
            assert np.array_equal(got[e], want)
            continue
        sp = S.Contract((), ((2, 0), (0, 2)), acc)
        re, im, size = exact(sp, sa, sb)
        assert_within(got[e], re, im, size, None, 2 * sel.size, acc)


# --------------------------------------------------------------------------
# Declines and refusals
# --------------------------------------------------------------------------

DECLINED = [
    ("f64 into f32", S.Contract((), ((1, 0),), D.float32), [D.float64, D.float32], D.float32),
    ("int32 into f32", S.Contract((), ((1, 0),), D.float32), [D.int32, D.float32], D.float32),
    ("complex into real", S.Contract((), ((1, 0),), D.float64), [D.complex64, D.float64],
     D.float64),
    ("float into int", S.Contract((), ((1, 0),), D.int32), [D.float32, D.int8], D.int32),
    ("int dst of float", S.Contract((), ((1, 0),), D.float32), [D.float32, D.float32], D.int32),
    ("real dst of complex", S.Contract((), ((1, 0),), D.complex64), [D.complex64] * 2,
     D.float32),
    ("value scale into complex",
     S.Contract((), ((1, 0),), D.complex64, scales=(S.ScaleKind.VALUE, None)),
     [D.complex64, D.complex64, D.float32], D.complex64),
    ("exponent scale into int",
     S.Contract((), ((1, 0),), D.int32, scales=(None, S.ScaleKind.EXPONENT)),
     [D.int8, D.int8, D.uint8], D.int32),
    ("int init into f32", S.Contract((), ((1, 0),), D.float32, init=True),
     [D.float32, D.float32, D.int64], D.float32),
]


@pytest.mark.parametrize(("name", "spec", "dts", "dst_dt"), DECLINED, ids=[d[0] for d in DECLINED])
def test_declines_are_stated_and_come_before_any_write(name: str, spec: S.Contract,
                                                        dts: list[Dtype], dst_dt: Dtype) -> None:
    op_shapes = [(2, 3), (3, 2)] + [(2, 2)] * spec.init
    op_shapes += [(2, 3) if i == 0 else (3, 2) for i, s in enumerate(spec.scales) if s is not None]
    ops = [Array.from_numpy(np.ones(sh, dt.numpy_dtype), dtype=dt) for sh, dt in
           zip(op_shapes, dts, strict=True)]
    dst = Array.from_numpy(np.full((2, 2), 7).astype(dst_dt.numpy_dtype), dtype=dst_dt)
    before = bits(dst.to_numpy())
    assert library.statement.computes["contract"].declines(Call("contract", spec, (dst,), tuple(ops)))
    assert contract(spec, [dst], ops) is Answer.DECLINED
    assert bits(dst.to_numpy()) == before


def test_fitting_cases_are_not_declined() -> None:
    spec = S.Contract((), ((1, 0),), D.float32, init=True)
    ops = (Array.empty(D.bfloat16, (2, 3)), Array.empty(D.int16, (3, 2)),
           Array.empty(D.float64, (2, 2)))
    assert library.statement.computes["contract"].declines(
        Call("contract", spec, (Array.empty(D.float16, (2, 2)),), ops)) is None


def test_misfits_are_refused_before_any_write() -> None:
    spec = S.Contract((), ((1, 0),), D.float32)
    a, b = Array.empty(D.float32, (2, 3)), Array.empty(D.float32, (3, 2))
    dst = Array.from_numpy(np.full((2, 2), 9.0, np.float32))
    assert contract(spec, [dst], [a]) is Answer.BAD_ARITY
    assert contract(spec, [dst], [a, Array.empty(D.float32, (4, 2))]) is Answer.SHAPE_MISMATCH
    assert contract(spec, [Array.empty(D.float32, (2, 3))], [a, b]) is Answer.SHAPE_MISMATCH
    scaled = S.Contract((), ((1, 0),), D.float32, scales=(S.ScaleKind.EXPONENT, None))
    assert contract(scaled, [dst], [a, b, Array.empty(D.int8, (2, 3))]) is Answer.WRONG_DTYPE
    seg = S.Contract((), ((1, 0),), D.float32, segments=S.ContractingSegments(0, 2))
    assert contract(seg, [Array.empty(D.float32, (2, 2, 2))],
                    [a, b, Array.empty(D.int32, (3,))]) is Answer.WRONG_DTYPE
    assert np.array_equal(dst.to_numpy(), np.full((2, 2), 9.0, np.float32))


# --------------------------------------------------------------------------
# Determinism across runs and BLAS thread counts
# --------------------------------------------------------------------------

_THREADS_SCRIPT = textwrap.dedent("""
    import hashlib, json, sys
    import numpy as np
    from nxkernel_core import dtype as D, spec as S
    from nxkernel_core.array import Array
    from nxkernel_host.library import library
    rng = np.random.default_rng(0)
    out = {}
    for dt, (m, k, n) in [(np.float32, (130, 777, 300)), (np.float64, (70, 3001, 90)),
                          (np.complex64, (60, 900, 70)), (np.float32, (1, 5000, 300)),
                          (np.float32, (300, 5000, 1))]:
        a = rng.standard_normal((m, k)).astype(dt)
        b = rng.standard_normal((k, n)).astype(dt)
        d = D.of_numpy(dt)
        dst = Array.empty(d, (m, n))
        library.contract(S.Contract((), ((1, 0),), d), [dst],
                         [Array.from_numpy(a), Array.from_numpy(b)])
        key = f"{np.dtype(dt).name} {m}x{k}x{n}"
        out["ours " + key] = hashlib.sha1(dst.to_numpy().tobytes()).hexdigest()
        out["numpy " + key] = hashlib.sha1((a @ b).tobytes()).hexdigest()
    from nxkernel_host import blas
    import os
    out["corename"] = blas.corename()
    out["environment"] = [os.environ.get(name) for name in blas.SETTINGS]
    json.dump(out, sys.stdout)
""")


def test_bits_do_not_depend_on_blas_threads_or_the_environments_openblas_settings() -> None:
    """A process on one BLAS thread, one on two, and one on two whose
    environment names another OpenBLAS core type and block sizes (which
    NumPy's OpenBLAS obeys): our products have the same bits in all three,
    the library's instance runs the CPU's own core type, and the settings
    are still in the environment after it loaded."""
    # On a machine of two or more cores NumPy's own matmul gives other bits at
    # one thread than at two for these shapes (its "numpy" keys); ours may not.
    # Prescott's kernels (SSE3) run on any x86-64 CPU and are no modern CPU's own.
    settings = {"OPENBLAS_CORETYPE": "Prescott", "OPENBLAS_L2_SIZE": "256",
                "OPENBLAS_BLOCK_FACTOR": "50"}
    assert set(settings) == set(blas.SETTINGS)
    base = {"PATH": "/usr/bin:/bin"}
    if "PYTHONPATH" in os.environ:  # a checkout that is not the installed one
        base["PYTHONPATH"] = os.environ["PYTHONPATH"]
    envs = [{**base, "OPENBLAS_NUM_THREADS": "1"}, {**base, "OPENBLAS_NUM_THREADS": "2"},
            {**base, "OPENBLAS_NUM_THREADS": "2", **settings}]
    procs = [subprocess.Popen([sys.executable, "-c", _THREADS_SCRIPT], text=True,
                              stdout=subprocess.PIPE, env=env) for env in envs]
    runs = [json.loads(p.communicate(timeout=180)[0]) for p in procs]
    for key in runs[0]:
        if key.startswith("ours") or key == "corename":
            assert runs[1][key] == runs[0][key] and runs[2][key] == runs[0][key], key
    assert runs[0]["corename"] == blas.corename()
    assert runs[0]["environment"] == [None] * len(blas.SETTINGS)
    assert runs[2]["environment"] == [settings[name] for name in blas.SETTINGS]


def test_the_library_blas_is_its_own_and_the_programs_is_never_touched() -> None:
    threadpoolctl = pytest.importorskip("threadpoolctl", reason="pip install threadpoolctl")
    rng = np.random.default_rng(3)
    a = rng.standard_normal((300, 200)).astype(np.float32)
    b = rng.standard_normal((200, 100)).astype(np.float32)
    dst = Array.empty(D.float32, (300, 100))
    spec = S.Contract((), ((1, 0),), D.float32)
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        before = [(i["filepath"], i["num_threads"]) for i in threadpoolctl.threadpool_info()]
        assert contract(spec, [dst], [Array.from_numpy(a), Array.from_numpy(b)]) is Answer.DONE
        after = [(i["filepath"], i["num_threads"]) for i in threadpoolctl.threadpool_info()]
    assert before == after  # the program's BLAS thread counts, read and left alone
    assert not any("nxkernel" in path for path, _ in after)  # ours is invisible to it
    assert blas.library().scipy_openblas_get_num_threads() == 1
    assert blas.corename()


def test_another_thread_changing_blas_threads_changes_no_bit() -> None:
    """nx.matmul-sized contractions in one thread while another keeps changing
    the program's BLAS threads and multiplying with NumPy: every result has
    the first one's bits, and the other thread's settings hold."""
    threadpoolctl = pytest.importorskip("threadpoolctl", reason="pip install threadpoolctl")
    rng = np.random.default_rng(5)
    a = rng.standard_normal((384, 384)).astype(np.float32)
    spec = S.Contract((), ((1, 0),), D.float32)
    xa = Array.from_numpy(a)

    def ours() -> bytes:
        dst = Array.empty(D.float32, (384, 384))
        assert contract(spec, [dst], [xa, xa]) is Answer.DONE
        return dst.to_numpy().tobytes()

    first = ours()
    stop = threading.Event()
    seen: list[tuple[int, int]] = []

    def meddle() -> None:
        while not stop.is_set():
            for n in (1, 2):
                with threadpoolctl.threadpool_limits(n, user_api="blas"):
                    a @ a
                    seen.append((n, min(i["num_threads"] for i in threadpoolctl.threadpool_info()
                                        if i["user_api"] == "blas")))

    other = threading.Thread(target=meddle)
    other.start()
    try:
        mismatches = sum(ours() != first for _ in range(40))
    finally:
        stop.set()
        other.join()
    assert mismatches == 0
    assert seen and all(want == got for want, got in seen)


def test_two_runs_give_the_same_bits() -> None:
    rng = np.random.default_rng(29)
    a = rng.standard_normal((4, 300, 200)).astype(np.float32)
    b = rng.standard_normal((4, 200, 130)).astype(np.float32)
    spec = S.Contract(((0, 0),), ((2, 1),), D.float32)
    digests = set()
    for _ in range(3):
        dst = Array.empty(D.float32, (4, 300, 130))
        run(spec, dst, [Array.from_numpy(a), Array.from_numpy(b)])
        digests.add(hashlib.sha1(dst.to_numpy().tobytes()).hexdigest())
    assert len(digests) == 1


def test_a_strided_destination_gets_the_contiguous_ones_bits() -> None:
    rng = np.random.default_rng(5)
    a = Array.from_numpy(rng.standard_normal((4, 5)).astype(np.float32))
    b = Array.from_numpy(rng.standard_normal((5, 3)).astype(np.float32))
    spec = S.Contract((), ((1, 0),), D.float32)
    whole = Array.empty(D.float32, (4, 3))
    assert contract(spec, [whole], [a, b]) is Answer.DONE
    # Every other column of a wider buffer: BLAS cannot write it in place.
    wide = Array.from_numpy(np.zeros((4, 6), np.float32))
    strided = wide.view(Slice((Range(0, 4), Range(0, 3, 2))))
    assert not strided.layout.is_contiguous()
    assert contract(spec, [strided], [a, b]) is Answer.DONE
    assert bits(strided.to_numpy()) == bits(whole.to_numpy())

"""The host library's moves against per-element references written from the
contract: gather, range gather, scatter, sort, numbering and assemble at every
dtype, over strided, reversed, permuted, offset and broadcast operands, with
special values (NaN payloads, signalling NaNs, −0, infinities, integer edges)
and ties. Results are compared byte for byte, never as float values; where
the contract leaves bits open (an Add's NaN), the test says so and checks that
it is a NaN."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nxkernel_core import dtype as D
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_core.dtype import Dtype, Kind
from nxkernel_core.kernel import Call
from nxkernel_core.layout import Broadcast, Range
from nxkernel_core.prog import bits
from nxkernel_host import moves, threads
from nxkernel_host.library import library

from . import layouts

NDArray = np.ndarray[Any, Any]
LAYOUTS = ("c", "reversed", "strided", "permuted", "broadcast")
EXAMPLES = settings(max_examples=10, deadline=None)


def kernel(name: str) -> Callable[[Any, Sequence[Array], Sequence[Array]], Answer]:
    kernel: Callable[..., Answer] = getattr(library, name)
    return kernel


# --------------------------------------------------------------------------
# Elements with special bits
# --------------------------------------------------------------------------


def _float_specials(dt: Dtype) -> list[int]:
    """Bit patterns of ±0, ±inf, quiet NaNs of both signs, a signalling NaN, NaN
    payloads, the least subnormal and the greatest finite number of ``dt``."""
    fmt = dt.float_format
    assert fmt is not None
    w, f = dt.bits, fmt.fraction_bits
    sign = 1 << (w - 1)
    exp_ones = ((1 << (w - 1 - f)) - 1) << f
    out = [0, sign, 1, sign | 1]
    if fmt.infinities:
        qnan = exp_ones | (1 << (f - 1))
        out += [exp_ones, sign | exp_ones, qnan, sign | qnan, exp_ones | 1,
                exp_ones | (1 << (f - 1)) | 3, sign | exp_ones | 2, exp_ones - 1]
    elif fmt.nans:
        out += [exp_ones | (sign - 1 - exp_ones), sign - 1, sign - 2, (sign - 2) | sign]
    return out


UINTS: dict[int, type[np.unsignedinteger[Any]]] = {1: np.uint8, 2: np.uint16, 4: np.uint32,
                                                    8: np.uint64}


def _uint(itemsize: int) -> type[np.unsignedinteger[Any]]:
    return UINTS[itemsize]


def pool(rng: np.random.Generator, dt: Dtype, randoms: int = 4) -> NDArray:
    """A few host elements of ``dt``: special bit patterns and random bits."""
    if dt.is_sub_byte:
        return np.arange(1 << dt.bits, dtype=np.uint8).view(dt.numpy_dtype)
    if dt is D.bool_:
        return np.array([0, 1, 2, 255, 0, 1], np.uint8).view(np.bool_)
    if dt.kind is Kind.COMPLEX:
        part = D.float32 if dt is D.complex64 else D.float64
        parts = pool(rng, part, randoms)
        re = rng.choice(parts, 12)
        im = rng.choice(parts, 12)
        out = np.empty(12, dt.numpy_dtype)
        out.real, out.imag = re, im
        pair = np.stack([re.view(_uint(part.bits // 8)), im.view(_uint(part.bits // 8))], -1)
        return np.ascontiguousarray(pair).view(dt.numpy_dtype).reshape(12)
    u = _uint(dt.itemsize)
    info = np.iinfo(u)
    randoms_bits = rng.integers(0, int(info.max), randoms, dtype=u, endpoint=True)
    if dt.kind is Kind.FLOAT:
        specials = np.array(_float_specials(dt), dtype=u)
    else:
        top = 1 << (dt.bits - 1)
        specials = np.array([0, 1, top, top - 1, int(info.max), 2], dtype=u)
    return np.concatenate([specials, randoms_bits]).view(dt.numpy_dtype)


def elements(rng: np.random.Generator, dt: Dtype, shape: tuple[int, ...]) -> NDArray:
    """Host elements of ``dt`` of ``shape`` drawn from a small pool, so ties occur."""
    p = pool(rng, dt)
    picks = rng.integers(0, p.size, shape)
    return p.view(_uint(p.itemsize))[picks].view(dt.numpy_dtype) if p.itemsize in (1, 2, 4, 8) \
        else p[picks]


def raw(a: NDArray) -> NDArray:
    """Each element's bytes: ``a.shape + (itemsize,)``."""
    c = np.ascontiguousarray(a)
    return c.view(np.uint8).reshape((*a.shape, a.dtype.itemsize))


def placed(values: NDArray, dt: Dtype, layout: str) -> Array:
    """An array of ``dt`` holding ``values`` (a broadcast layout holds values'
    first slice along axis 0, repeated) through the named layout."""
    if layout == "broadcast" and values.shape:
        return Array.from_numpy(np.ascontiguousarray(values[:1]), dtype=dt).view(Broadcast(values.shape))
    return layouts.placed(values, dt, layout)


# --------------------------------------------------------------------------
# The total order, element by element
# --------------------------------------------------------------------------


def _float_key(f: float) -> tuple[int, float, int]:
    if math.isnan(f):
        return (1, 0.0, 0)
    return (0, f, 0 if math.copysign(1.0, f) < 0 else 1)


def key_of(dt: Dtype, a: NDArray, i: tuple[int, ...]) -> tuple[Any, ...]:
    """Element ``i`` of host array ``a`` of ``dt`` in sort's total order: NaN
    above everything and all NaNs equal, −0 below +0, complex by real then
    imaginary part (a NaN part a NaN), integers by value, false < true."""
    if dt.kind is Kind.BOOLEAN:
        return (0, int(raw(a)[i][0] != 0))
    if dt.kind is Kind.COMPLEX:
        z = complex(a[i])
        if math.isnan(z.real) or math.isnan(z.imag):
            return (1,)
        return (0, _float_key(z.real), _float_key(z.imag))
    if dt.kind is Kind.FLOAT:
        return _float_key(float(a[i]))
    return (0, int(a[i]))


def is_nan(dt: Dtype, a: NDArray, i: tuple[int, ...]) -> bool:
    return key_of(dt, a, i)[0] == 1 if dt.kind in (Kind.FLOAT, Kind.COMPLEX) else False


# --------------------------------------------------------------------------
# Gathers
# --------------------------------------------------------------------------


def gather_ref(x: NDArray, index: NDArray, axis: int) -> NDArray:
    xb = raw(x)
    out = np.zeros((*index.shape, xb.shape[-1]), np.uint8)
    d = x.shape[axis]
    for i in np.ndindex(*index.shape):
        p = int(index[i])
        if 0 <= p < d:
            out[i] = xb[(*i[:axis], p, *i[axis + 1:])]
    return out


def shape_and_axis(data: st.DataObject, least_rank: int = 1) -> tuple[tuple[int, ...], int]:
    shape = tuple(data.draw(st.lists(st.integers(0, 4), min_size=least_rank, max_size=3)))
    return shape, data.draw(st.integers(0, len(shape) - 1))


@pytest.mark.parametrize("dt", D.all, ids=lambda d: d.name)
@EXAMPLES
@given(data=st.data())
def test_gather_reads_positions_and_zero_bits_outside(dt: Dtype, data: st.DataObject) -> None:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    shape, axis = shape_and_axis(data)
    d = shape[axis]
    n = data.draw(st.integers(0, 5))
    x = placed(elements(rng, dt, shape), dt, data.draw(st.sampled_from(LAYOUTS)))
    ishape = (*shape[:axis], n, *shape[axis + 1:])
    index = placed(rng.integers(-2, d + 3, ishape), D.int64, data.draw(st.sampled_from(LAYOUTS)))
    dst = Array.empty(dt, index.shape)
    assert kernel("gather")(S.Gather(axis), [dst], [index, x]) is Answer.DONE
    want = gather_ref(x.to_numpy(), index.to_numpy(), axis)
    assert np.array_equal(raw(dst.to_numpy()), want)


@pytest.mark.parametrize("rows", [1, 3], ids=["one row", "rows"])
def test_gather_split_over_threads_reads_the_same_bits(rows: int) -> None:
    # Enough positions for the pool (MIN_PARALLEL): one row is split by ranges
    # of positions, several by rows. Positions outside [0, d), as far as the
    # int64 ends, read zero bits.
    rng = np.random.default_rng(18)
    d, n = 5000, 150_000 // rows
    # Any bits, NaN payloads among them.
    x = rng.integers(0, 2**64 - 1, (rows, d), dtype=np.uint64, endpoint=True).view(np.float64)
    index = rng.integers(-3, d + 3, (rows, n))
    index[:, :2] = [-(2**63), 2**63 - 1]
    kept = (index >= 0) & (index < d)
    bits = np.take_along_axis(x.view(np.uint64), np.where(kept, index, 0), 1)
    want = np.where(kept, bits, np.uint64(0))
    for n_threads in (1, 2, 3):
        dst = Array.empty(D.float64, (rows, n))
        with threads(n_threads):
            answer = kernel("gather")(S.Gather(1), [dst],
                                      [Array.from_numpy(index), Array.from_numpy(x)])
        assert answer is Answer.DONE
        assert np.array_equal(dst.to_numpy().view(np.uint64), want), n_threads


def take_index(positions: NDArray, shape: tuple[int, ...]) -> Array:
    """``positions [outer…, n]`` broadcast over the inner axes of ``shape`` (as
    ``nx.take`` makes its index): every element of a block reads one position."""
    lifted = positions.reshape(positions.shape + (1,) * (len(shape) - positions.ndim))
    return Array.from_numpy(lifted).view(Broadcast(shape))


@pytest.mark.parametrize("dt", D.all, ids=lambda d: d.name)
def test_gather_of_whole_blocks_reads_positions_and_zero_bits_outside(dt: Dtype) -> None:
    # An index the same along the inner axes gathers whole blocks; positions
    # outside [0, d), as far as the int64 ends, read zero bits.
    rng = np.random.default_rng(7)
    x = placed(elements(rng, dt, (2, 6, 3, 5)), dt, "c")
    positions = rng.integers(-2, 9, (2, 11))
    positions[:, :2] = [-(2**63), 2**63 - 1]
    index = take_index(positions, (2, 11, 3, 5))
    dst = Array.empty(dt, index.shape)
    assert kernel("gather")(S.Gather(1), [dst], [index, x]) is Answer.DONE
    assert np.array_equal(raw(dst.to_numpy()), gather_ref(x.to_numpy(), index.to_numpy(), 1))


def test_gather_of_whole_blocks_split_over_threads_reads_the_same_bits() -> None:
    # 24 MiB of 4 KiB blocks: past the size from which the blocks are split.
    rng = np.random.default_rng(19)
    d, n, inner = 3000, 6000, 512
    x = rng.integers(0, 2**64 - 1, (d, inner), dtype=np.uint64, endpoint=True).view(np.float64)
    positions = rng.integers(-3, d + 3, n)
    kept = (positions >= 0) & (positions < d)
    want = np.where(kept[:, None], x.view(np.uint64)[np.where(kept, positions, 0)], np.uint64(0))
    for n_threads in (1, 2, 3):
        dst = Array.empty(D.float64, (n, inner))
        with threads(n_threads):
            answer = kernel("gather")(S.Gather(0), [dst],
                                      [take_index(positions, (n, inner)), Array.from_numpy(x)])
        assert answer is Answer.DONE
        assert np.array_equal(dst.to_numpy().view(np.uint64), want), n_threads


@pytest.mark.parametrize("dt", D.all, ids=lambda d: d.name)
@EXAMPLES
@given(data=st.data())
def test_range_gather_reads_runs_and_zero_bits_outside(dt: Dtype, data: st.DataObject) -> None:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    shape, axis = shape_and_axis(data)
    d = shape[axis]
    n, run = data.draw(st.integers(0, 3)), data.draw(st.integers(0, 4))
    x = placed(elements(rng, dt, shape), dt, data.draw(st.sampled_from(LAYOUTS)))
    sshape = (*shape[:axis], n, *shape[axis + 1:])
    starts = placed(rng.integers(-run - 1, d + 2, sshape), D.int64,
                    data.draw(st.sampled_from(LAYOUTS)))
    dst = Array.empty(dt, (*sshape[:axis + 1], run, *sshape[axis + 1:]))
    assert kernel("range_gather")(S.RangeGather(axis, run), [dst], [starts, x]) is Answer.DONE
    xs, ss = x.to_numpy(), starts.to_numpy()
    xb = raw(xs)
    want = np.zeros((*dst.shape, xb.shape[-1]), np.uint8)
    for i in np.ndindex(*dst.shape):
        j = i[axis + 1]
        at = (*i[:axis + 1], *i[axis + 2:])
        p = int(ss[at]) + j
        if 0 <= p < d:
            want[i] = xb[(*at[:axis], p, *at[axis + 1:])]
    assert np.array_equal(raw(dst.to_numpy()), want)


def test_range_gather_start_near_int64_max_reads_zero_bits() -> None:
    x = Array.from_numpy(np.arange(4, dtype=np.int32))
    starts = Array.from_numpy(np.array([2**63 - 2, -(2**63), -1], np.int64))
    dst = Array.empty(D.int32, (3, 3))
    assert kernel("range_gather")(S.RangeGather(0, 3), [dst], [starts, x]) is Answer.DONE
    assert dst.to_numpy().tolist() == [[0, 0, 0], [0, 0, 0], [0, 0, 1]]


# --------------------------------------------------------------------------
# Scatter
# --------------------------------------------------------------------------


def _add_state(dt: Dtype, v: NDArray, i: tuple[int, ...]) -> Any:
    """An element as the Add chain holds it: integers as their unsigned bits, floats
    in their compute dtype (float32 for the narrow ones), complex as two parts."""
    if dt.kind is Kind.COMPLEX:
        part = np.float32 if dt is D.complex64 else np.float64
        z = v[i]
        return [part(z.real), part(z.imag)]
    if dt.kind is Kind.FLOAT:
        return [np.float64(v[i]) if dt is D.float64 else np.float32(v[i])]
    return [int(raw(v)[i].view(_uint(v.itemsize))[0]) if not dt.is_sub_byte else int(raw(v)[i][0])]


def _add_bytes(dt: Dtype, state: list[Any]) -> NDArray:
    """The bytes of a finished Add chain: one rounding into dt."""
    if dt.kind is Kind.COMPLEX:
        z = np.zeros(1, dt.numpy_dtype)
        z.real, z.imag = state
        return raw(z).reshape(-1)
    if dt.kind is Kind.FLOAT:
        return raw(np.asarray(D.of_float(dt, np.float64(state[0])), dt.numpy_dtype)).reshape(-1)
    mod = 1 << (dt.bits if dt.is_sub_byte else 8 * dt.itemsize)
    value = state[0] % mod
    return np.frombuffer(value.to_bytes(dt.itemsize, "little"), np.uint8).copy()


def scatter_ref(dt: Dtype, combine: S.Combine, into: NDArray, index: NDArray, updates: NDArray,
                axis: int) -> tuple[NDArray, NDArray]:
    """The expected bytes, and where the contract leaves a NaN's bits open (Add)."""
    out = raw(into).copy()
    free = np.zeros(into.shape, np.bool_)
    d = into.shape[axis]
    state: dict[tuple[int, ...], Any] = {}
    for i in np.ndindex(*index.shape):
        p = int(index[i])
        if not 0 <= p < d:
            continue
        at = (*i[:axis], p, *i[axis + 1:])
        if combine is S.Combine.SET:
            out[at] = raw(updates)[i]
        elif combine is S.Combine.ADD:
            with np.errstate(all="ignore"):
                if at not in state:
                    state[at] = [type(s)(0) + s for s in _add_state(dt, into, at)]
                state[at] = [s + u for s, u in zip(state[at], _add_state(dt, updates, i),
                                                   strict=True)]
        else:
            cur_bytes, cur_key = state.get(at, (raw(into)[at], key_of(dt, into, at)))
            u_key = key_of(dt, updates, i)
            cur_nan = cur_key[0] == 1 and dt.kind in (Kind.FLOAT, Kind.COMPLEX)
            u_nan = u_key[0] == 1 and dt.kind in (Kind.FLOAT, Kind.COMPLEX)
            if combine is S.Combine.MAX:
                take = not cur_nan and (u_nan or u_key > cur_key)
            else:
                take = not cur_nan and (u_nan or u_key < cur_key)
            state[at] = (raw(updates)[i], u_key) if take else (cur_bytes, cur_key)
    for at, s in state.items():
        if combine is S.Combine.ADD:
            out[at] = _add_bytes(dt, s)
            free[at] = True
        elif dt is D.bool_:
            out[at] = s[1][1]  # Or / And: the truth, 0 or 1
        else:
            out[at] = s[0]
    return out, free


def assert_bits(dt: Dtype, got: NDArray, want: NDArray, nan_free: NDArray) -> None:
    """``got`` has ``want``'s bytes, but where ``nan_free`` holds and ``want`` is a
    NaN (part), where it need only be a NaN (part) itself."""
    gb = raw(got)
    for i in np.ndindex(*got.shape):
        if nan_free[i] and dt.kind in (Kind.FLOAT, Kind.COMPLEX):
            w = want[i].view(dt.numpy_dtype)
            if dt.kind is Kind.COMPLEX:
                gz, wz = complex(got[i]), complex(w[0])
                pairs = [(gz.real, wz.real), (gz.imag, wz.imag)]
                if any(math.isnan(b) for _, b in pairs):
                    h = gb[i].reshape(2, -1)
                    for (a, b), half, whalf in zip(pairs, h, want[i].reshape(2, -1), strict=True):
                        assert math.isnan(a) if math.isnan(b) else np.array_equal(half, whalf), i
                    continue
            elif math.isnan(float(w[0])):
                assert math.isnan(float(got[i])), i
                continue
        assert np.array_equal(gb[i], want[i]), (i, gb[i], want[i])


def _scatter_case(data: st.DataObject, dt: Dtype, combine: S.Combine
                  ) -> tuple[int, Array, Array, Array]:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    shape, axis = shape_and_axis(data)
    d = shape[axis]
    n = data.draw(st.integers(0, 6))
    into = placed(elements(rng, dt, shape), dt, data.draw(st.sampled_from(LAYOUTS)))
    ushape = (*shape[:axis], n, *shape[axis + 1:])
    # A narrow range of positions makes duplicates; some fall outside [0, d).
    index = placed(rng.integers(-2, d + 2, ushape), D.int64, data.draw(st.sampled_from(LAYOUTS)))
    updates = placed(elements(rng, dt, ushape), dt, data.draw(st.sampled_from(LAYOUTS)))
    return axis, into, index, updates


def _takes(combine: S.Combine, dt: Dtype) -> bool:
    return not (combine is S.Combine.ADD and dt.kind is Kind.BOOLEAN)


@pytest.mark.parametrize("combine", list(S.Combine), ids=lambda c: c.name)
@pytest.mark.parametrize("dt", D.all, ids=lambda d: d.name)
@EXAMPLES
@given(data=st.data())
def test_scatter_combines_updates_in_c_order(dt: Dtype, combine: S.Combine,
                                             data: st.DataObject) -> None:
    if not _takes(combine, dt):
        return
    axis, into, index, updates = _scatter_case(data, dt, combine)
    dst = Array.empty(dt, into.shape)
    answer = kernel("scatter")(S.Scatter(axis, combine), [dst], [into, index, updates])
    assert answer is Answer.DONE
    want, free = scatter_ref(dt, combine, into.to_numpy(), index.to_numpy(), updates.to_numpy(),
                             axis)
    assert_bits(dt, dst.to_numpy(), want, free)


@pytest.mark.parametrize("combine", list(S.Combine), ids=lambda c: c.name)
@pytest.mark.parametrize("dt", [D.float32, D.bfloat16, D.int4, D.complex128, D.bit, D.bool_],
                         ids=lambda d: d.name)
@settings(max_examples=5, deadline=None)
@given(data=st.data())
def test_scatter_into_identical_to_dst_gives_a_fresh_dsts_result(
        dt: Dtype, combine: S.Combine, data: st.DataObject) -> None:
    if not _takes(combine, dt):
        return
    axis, into, index, updates = _scatter_case(data, dt, combine)
    fresh = Array.empty(dt, into.shape)
    sp = S.Scatter(axis, combine)
    assert kernel("scatter")(sp, [fresh], [into, index, updates]) is Answer.DONE
    same = Array.from_numpy(into.to_numpy(), dtype=dt)
    assert kernel("scatter")(sp, [same], [same, index, updates]) is Answer.DONE
    assert np.array_equal(raw(same.to_numpy()), raw(fresh.to_numpy()))


@pytest.mark.parametrize("dt", [D.bool_, D.bit])
def test_scatter_add_of_booleans_is_wrong_dtype(dt: Dtype) -> None:
    into = Array.from_numpy(np.array([True, False]), dtype=dt)
    dst = Array.empty(dt, (2,))
    index = Array.from_numpy(np.array([0], np.int64))
    answer = kernel("scatter")(S.Scatter(0, S.Combine.ADD), [dst], [into, index, into[:1]])
    assert answer is Answer.WRONG_DTYPE


def _f32(*values: float) -> Array:
    return Array.from_numpy(np.array(values, np.float32))


def test_scatter_add_starts_from_plus_zero_only_where_an_update_lands() -> None:
    into = _f32(-0.0, -0.0)
    index = Array.from_numpy(np.array([0], np.int64))
    dst = Array.empty(D.float32, (2,))
    answer = kernel("scatter")(S.Scatter(0, S.Combine.ADD), [dst], [into, index, _f32(-0.0)])
    assert answer is Answer.DONE
    assert dst.to_numpy().view(np.uint32).tolist() == [0, 0x80000000]


def test_scatter_add_of_a_narrow_float_sums_in_float32_then_rounds_once() -> None:
    # 2048 + 1 + 1 in float16 chained would stay 2048; in float32 it is 2050.
    into = Array.from_numpy(np.array([2048.0], np.float16))
    index = Array.from_numpy(np.array([0, 0], np.int64))
    ups = Array.from_numpy(np.array([1.0, 1.0], np.float16))
    dst = Array.empty(D.float16, (1,))
    assert kernel("scatter")(S.Scatter(0, S.Combine.ADD), [dst], [into, index, ups]) is Answer.DONE
    assert dst.to_numpy().tolist() == [2050.0]



@pytest.mark.parametrize("dt", [D.float32, D.float64], ids=lambda d: d.name)
def test_scatter_add_split_over_threads_by_rows_keeps_each_rows_chain(dt: Dtype) -> None:
    # Enough updates for the pool (MIN_PARALLEL) over 4 rows; 1000 positions
    # make each position's chain about 40 updates long, some out of range.
    rng = np.random.default_rng(18)
    rows, d, n = 4, 1000, 40_000
    into = rng.standard_normal((rows, d)).astype(dt.numpy_dtype)
    index = rng.integers(-3, d + 3, (rows, n))
    ups = rng.standard_normal((rows, n)).astype(dt.numpy_dtype)
    want = into.copy()
    for r in range(rows):
        # NumPy's add.at chains each position's updates in index order, as the
        # contract's Add does from an into without -0 (as normal draws are).
        kept = (index[r] >= 0) & (index[r] < d)
        np.add.at(want[r], index[r][kept], ups[r][kept])
    _assert_scatter_add_at_threads(into, index, ups, want)


def _assert_scatter_add_at_threads(into: np.ndarray[Any, Any], index: np.ndarray[Any, Any],
                                   ups: np.ndarray[Any, Any], want: np.ndarray[Any, Any]) -> None:
    """Scatter-Add of ``ups`` at ``index`` along axis 1 from ``into`` gives
    ``want``'s bits on 1, 2 and 3 threads."""
    args = [Array.from_numpy(into), Array.from_numpy(index), Array.from_numpy(ups)]
    for n_threads in (1, 2, 3):
        dst = Array.empty(D.by_name(into.dtype.name), into.shape)
        with threads(n_threads):
            answer = kernel("scatter")(S.Scatter(1, S.Combine.ADD), [dst], args)
        assert answer is Answer.DONE
        assert np.array_equal(raw(dst.to_numpy()), raw(want)), n_threads


@pytest.mark.parametrize("skewed", [False, True], ids=["uniform", "skewed"])
@pytest.mark.parametrize("rows", [1, 2], ids=["one row", "two rows"])
@pytest.mark.parametrize("dt", [D.float32, D.float64], ids=lambda d: d.name)
def test_scatter_add_split_over_threads_by_positions_keeps_each_positions_chain(
        dt: Dtype, rows: int, skewed: bool) -> None:
    # Rows of 160 KB (past the host's 128 KiB) and enough updates for the
    # pool: fewer rows than threads split each row's positions into ranges
    # (two rows under two threads split by rows). Skewed positions (a few
    # frequent ones) are cut where a sample of them falls; n is no multiple
    # of 64 (a thread reads 64 positions at a time); some positions lie
    # outside [0, d), as far as the int64 ends.
    rng = np.random.default_rng(186)
    d, n = 160_000 // dt.itemsize, 140_003 // rows
    into = rng.standard_normal((rows, d)).astype(dt.numpy_dtype)
    into[:, ::7] = -0.0  # a reached -0 starts its chain from +0; one no update reaches stays -0
    if skewed:
        index = np.minimum(rng.zipf(1.5, (rows, n)) - 1, d + 2)
        index[:, ::5] = rng.integers(-3, d, (rows, len(range(0, n, 5))))
    else:
        index = rng.integers(-3, d + 3, (rows, n))
    index[:, :2] = [-(2**63), 2**63 - 1]
    ups = rng.standard_normal((rows, n)).astype(dt.numpy_dtype)
    want = into.copy()
    for r in range(rows):
        kept = (index[r] >= 0) & (index[r] < d)
        # The contract's chain +0 + into + u1 + u2 + …: NumPy's add.at chains
        # each position's updates in index order, from into + 0 where one lands.
        reached = np.unique(index[r][kept])
        want[r, reached] += 0
        np.add.at(want[r], index[r][kept], ups[r][kept])
    assert (raw(want) != raw(into)).any(axis=-1).sum() > d // 2  # most positions reached
    _assert_scatter_add_at_threads(into, index, ups, want)


@pytest.mark.parametrize("combine", [S.Combine.MAX, S.Combine.MIN], ids=lambda c: c.name)
def test_scatter_extremes_keep_the_first_nan_with_its_bits(combine: S.Combine) -> None:
    nan1, nan2 = 0x7FC00001, 0xFFA00002  # a quiet NaN, then a signalling one
    ups = np.array([1.0, 0, 0, 5.0], np.float32)
    ups.view(np.uint32)[1:3] = [nan1, nan2]
    index = Array.from_numpy(np.zeros(4, np.int64))
    dst = Array.empty(D.float32, (1,))
    answer = kernel("scatter")(S.Scatter(0, combine), [dst],
                               [_f32(2.0), index, Array.from_numpy(ups)])
    assert answer is Answer.DONE
    assert dst.to_numpy().view(np.uint32).tolist() == [nan1]


# --------------------------------------------------------------------------
# Sort
# --------------------------------------------------------------------------


def sort_ref(dt: Dtype, x: NDArray, axis: int, descending: bool, k: int
             ) -> tuple[NDArray, NDArray]:
    xb = raw(x)
    shape = (*x.shape[:axis], k, *x.shape[axis + 1:])
    values = np.zeros((*shape, xb.shape[-1]), np.uint8)
    positions = np.zeros(shape, np.int64)
    others = [range(e) for i, e in enumerate(x.shape) if i != axis]
    for rest in itertools.product(*others):
        at = [(*rest[:axis], j, *rest[axis:]) for j in range(x.shape[axis])]
        order = sorted(range(len(at)), key=lambda j: key_of(dt, x, at[j]), reverse=descending)
        for slot, j in enumerate(order[:k]):
            values[(*rest[:axis], slot, *rest[axis:])] = xb[at[j]]
            positions[(*rest[:axis], slot, *rest[axis:])] = j
    return values, positions


def check_sort(dt: Dtype, x: Array, axis: int, descending: bool, k: int | None) -> None:
    n = x.shape[axis]
    kk = n if k is None else k
    shape = (*x.shape[:axis], kk, *x.shape[axis + 1:])
    values, positions = Array.empty(dt, shape), Array.empty(D.int64, shape)
    answer = kernel("sort")(S.Sort(axis, descending, k), [values, positions], [x])
    assert answer is Answer.DONE
    want_v, want_p = sort_ref(dt, x.to_numpy(), axis, descending, kk)
    assert np.array_equal(positions.to_numpy(), want_p)
    assert np.array_equal(raw(values.to_numpy()), want_v)


@pytest.mark.parametrize("dt", D.all, ids=lambda d: d.name)
@EXAMPLES
@given(data=st.data())
def test_sort_is_stable_in_the_total_order(dt: Dtype, data: st.DataObject) -> None:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    shape, axis = shape_and_axis(data)
    x = placed(elements(rng, dt, shape), dt, data.draw(st.sampled_from(LAYOUTS)))
    n = shape[axis]
    k = data.draw(st.one_of(st.none(), st.integers(0, n)))
    check_sort(dt, x, axis, data.draw(st.booleans()), k)


@pytest.mark.parametrize("dt", [D.float32, D.float64, D.int64, D.uint32, D.complex64,
                                D.complex128, D.float16], ids=lambda d: d.name)
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("k", [None, 1, 7, 1500])
def test_sort_of_long_rows_and_top_k(dt: Dtype, descending: bool, k: int | None) -> None:
    # Rows of 3000 reach the radix sort; k of 1 and 7 the partition top-k.
    rng = np.random.default_rng(7)
    x = placed(elements(rng, dt, (2, 3000)), dt, "reversed")
    check_sort(dt, x, 1, descending, k)


@pytest.mark.parametrize("dt", [D.float64, D.int32, D.bool_, D.complex128], ids=lambda d: d.name)
@pytest.mark.parametrize("descending", [False, True])
def test_sort_of_long_rows_along_a_leading_axis(dt: Dtype, descending: bool) -> None:
    rng = np.random.default_rng(11)
    x = placed(elements(rng, dt, (300, 3)), dt, "strided")
    check_sort(dt, x, 0, descending, None)
    check_sort(dt, x, 0, descending, 2)


def test_sort_places_minus_zero_below_plus_zero_and_nans_last_all_equal() -> None:
    v = np.array([np.nan, 0.0, -0.0, -np.inf, 0.0, -0.0, np.inf, np.nan], np.float32)
    v.view(np.uint32)[0] = 0xFFC00001
    v.view(np.uint32)[7] = 0x7F800001
    x = Array.from_numpy(v)
    values, positions = Array.empty(D.float32, (8,)), Array.empty(D.int64, (8,))
    assert kernel("sort")(S.Sort(0), [values, positions], [x]) is Answer.DONE
    assert positions.to_numpy().tolist() == [3, 2, 5, 1, 4, 6, 0, 7]
    assert kernel("sort")(S.Sort(0, True), [values, positions], [x]) is Answer.DONE
    assert positions.to_numpy().tolist() == [0, 7, 6, 1, 4, 2, 5, 3]
    assert values.to_numpy().view(np.uint32)[:2].tolist() == [0xFFC00001, 0x7F800001]


# --------------------------------------------------------------------------
# Numbering
# --------------------------------------------------------------------------


@pytest.mark.parametrize("side", list(S.Side), ids=lambda s: s.name)
@pytest.mark.parametrize("dt", D.all, ids=lambda d: d.name)
@EXAMPLES
@given(data=st.data())
def test_numbering_counts_keys_below_or_not_above(dt: Dtype, side: S.Side,
                                                  data: st.DataObject) -> None:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    batch = tuple(data.draw(st.lists(st.integers(0, 3), max_size=2)))
    m, n = data.draw(st.integers(0, 6)), data.draw(st.integers(0, 5))
    keys = elements(rng, dt, (*batch, m))
    for b in np.ndindex(*batch):
        row = keys[b]
        keys[b] = row[sorted(range(m), key=lambda j: key_of(dt, row, (j,)))]
    x = elements(rng, dt, (*batch, n))
    ka = placed(keys, dt, data.draw(st.sampled_from(LAYOUTS[:4])))
    xa = placed(x, dt, data.draw(st.sampled_from(LAYOUTS)))
    dst = Array.empty(D.int64, xa.shape)
    assert kernel("numbering")(S.Numbering(side), [dst], [ka, xa]) is Answer.DONE
    kn, xn = ka.to_numpy(), xa.to_numpy()
    want = np.zeros(xa.shape, np.int64)
    for i in np.ndindex(*xa.shape):
        b, xk = i[:-1], key_of(dt, xn, i)
        ks = [key_of(dt, kn, (*b, j)) for j in range(m)]
        want[i] = sum(1 for kk in ks if (kk < xk if side is S.Side.LEFT else kk <= xk))
    assert np.array_equal(dst.to_numpy(), want)


# --------------------------------------------------------------------------
# Assemble
# --------------------------------------------------------------------------


def _fill(rng: np.random.Generator, dt: Dtype) -> bytes:
    if dt.is_sub_byte:
        return bytes([int(rng.integers(0, 1 << dt.bits))])
    return bytes(raw(pool(rng, dt)[[int(rng.integers(0, 6))]]).tobytes())


def _fill_bytes(dt: Dtype, fill: bytes) -> NDArray:
    return np.frombuffer(fill, np.uint8) if not dt.is_sub_byte else np.array([fill[0]], np.uint8)


@st.composite
def regions(draw: st.DrawFn, shape: tuple[int, ...]) -> tuple[Range, ...]:
    out = []
    for d in shape:
        if d == 0:
            out.append(Range(0, 0, 1))
            continue
        step = draw(st.sampled_from([1, -1, 2, -2]))
        start = draw(st.integers(0, d - 1))
        room = (d - 1 - start) // step + 1 if step > 0 else start // -step + 1
        out.append(Range(start, draw(st.integers(0, room)), step))
    return tuple(out)


@pytest.mark.parametrize("dt", D.all, ids=lambda d: d.name)
@EXAMPLES
@given(data=st.data())
def test_assemble_last_piece_wins_and_fill_elsewhere(dt: Dtype, data: st.DataObject) -> None:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    shape: tuple[int, ...] = tuple(data.draw(st.lists(st.integers(0, 4), max_size=3)))
    regs: list[tuple[Range, ...]] = data.draw(st.lists(regions(shape), max_size=4))
    whole: bool = data.draw(st.booleans())
    if shape and whole:
        regs.append(tuple(Range(0, d) for d in shape))  # a whole region
        regs.reverse()
    pieces = [placed(elements(rng, dt, tuple(r.count for r in reg)), dt,
                     data.draw(st.sampled_from(LAYOUTS))) for reg in regs]
    fill = _fill(rng, dt)
    dst = Array.empty(dt, shape)
    answer = kernel("assemble")(S.Assemble(shape, fill, tuple(regs)), [dst], pieces)
    assert answer is Answer.DONE
    want = np.empty((*shape, dt.itemsize), np.uint8)
    want[...] = _fill_bytes(dt, fill)
    for reg, piece in zip(regs, pieces, strict=True):
        pb = raw(piece.to_numpy())
        for j in np.ndindex(*piece.shape):
            want[tuple(r.start + jj * r.step for r, jj in zip(reg, j, strict=True))] = pb[j]
    assert np.array_equal(raw(dst.to_numpy()), want)


@pytest.mark.parametrize("dt", [D.float64, D.complex128, D.int4, D.bit, D.bool_],
                         ids=lambda d: d.name)
def test_assemble_first_piece_identical_to_dst(dt: Dtype) -> None:
    rng = np.random.default_rng(3)
    start = elements(rng, dt, (3, 4))
    dst = Array.from_numpy(start, dtype=dt)
    patch = Array.from_numpy(elements(rng, dt, (2, 2)), dtype=dt)
    regs = ((Range(0, 3), Range(0, 4)), (Range(2, 2, -1), Range(1, 2, 2)))
    answer = kernel("assemble")(S.Assemble((3, 4), bits(dt, 0), regs), [dst], [dst, patch])
    assert answer is Answer.DONE
    want = raw(start).copy()
    want[2:0:-1, 1:4:2] = raw(patch.to_numpy())
    assert np.array_equal(raw(dst.to_numpy()), want)


# --------------------------------------------------------------------------
# Calls that do not fit write nothing
# --------------------------------------------------------------------------


def _canary(dt: Dtype, shape: tuple[int, ...]) -> Array:
    a = Array.empty(dt, shape)
    a.write_numpy(elements(np.random.default_rng(0), dt, shape))
    return a


def _misfits() -> list[tuple[str, Any, Callable[[], tuple[list[Array], list[Array]]]]]:
    f32, i64 = D.float32, D.int64
    x = Array.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))
    idx = Array.from_numpy(np.zeros((2, 2), np.int64))
    idx32 = Array.from_numpy(np.zeros((2, 2), np.int32))
    pieces = [Array.from_numpy(np.ones((2, 2), np.float32))]
    reg = ((Range(0, 2), Range(0, 2)),)
    return [
        ("gather", S.Gather(1), lambda: ([_canary(f32, (2, 2))], [idx32, x])),
        ("gather", S.Gather(1), lambda: ([_canary(f32, (2, 3))], [idx, x])),
        ("gather", S.Gather(1), lambda: ([_canary(f32, (2, 2))], [idx])),
        ("gather", S.Gather(2), lambda: ([_canary(f32, (2, 2))], [idx, x])),
        ("gather", S.Gather(1), lambda: ([_canary(D.float64, (2, 2))], [idx, x])),
        ("range_gather", S.RangeGather(1, 2), lambda: ([_canary(f32, (2, 2, 3))], [idx, x])),
        ("scatter", S.Scatter(1, S.Combine.ADD), lambda: ([_canary(f32, (2, 3))], [x, idx, x])),
        ("scatter", S.Scatter(1, S.Combine.SET), lambda: ([_canary(f32, (2, 3))], [x, idx32, x])),
        ("sort", S.Sort(1, k=4), lambda: ([_canary(f32, (2, 4)), _canary(i64, (2, 4))], [x])),
        ("sort", S.Sort(1), lambda: ([_canary(f32, (2, 3)), _canary(f32, (2, 3))], [x])),
        ("sort", S.Sort(1), lambda: ([_canary(f32, (2, 3))], [x])),
        ("numbering", S.Numbering(), lambda: ([_canary(i64, (2, 3))], [idx, x])),
        ("numbering", S.Numbering(), lambda: ([_canary(i64, (3, 3))], [x, x])),
        ("assemble", S.Assemble((3, 3), b"\0\0\0\0", reg),
         lambda: ([_canary(f32, (3, 3))], [*pieces, *pieces])),
        ("assemble", S.Assemble((3, 3), b"\0\0", reg), lambda: ([_canary(f32, (3, 3))], pieces)),
        ("assemble", S.Assemble((3, 3), b"\0\0\0\0", reg),
         lambda: ([_canary(f32, (3, 3))], [Array.from_numpy(np.ones((2, 2), np.int32))])),
        ("assemble", S.Assemble((3, 3), b"\0\0\0\0", reg), lambda: ([_canary(f32, (3, 2))], pieces)),
    ]


@pytest.mark.parametrize("case", _misfits(), ids=lambda c: c[0] if isinstance(c, str) else "")
def test_a_call_that_does_not_fit_is_refused_and_writes_nothing(
        case: tuple[str, Any, Callable[[], tuple[list[Array], list[Array]]]]) -> None:
    name, sp, make = case
    dsts, operands = make()
    before = [raw(d.to_numpy()).copy() for d in dsts]
    answer = kernel(name)(sp, dsts, operands)
    assert answer.is_refusal
    for d, b in zip(dsts, before, strict=True):
        assert np.array_equal(raw(d.to_numpy()), b)


def test_the_moves_decline_nothing_and_state_every_kernel() -> None:
    names = {"gather", "range_gather", "scatter", "sort", "numbering", "assemble"}
    assert set(moves.FAMILY.prose) == names
    x = Array.from_numpy(np.zeros(3, np.float32))
    call = Call("sort", S.Sort(0), (x, Array.empty(D.int64, (3,))), (x,))
    assert all(library.statement.computes[n].declines(call) is None for n in names)

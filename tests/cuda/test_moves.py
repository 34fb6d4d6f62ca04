"""nxkernel_cuda.moves against NumPy brute force, bits exact: gathers, scatters
(every combine, both schedules, C order of the updates), stable sorts and
top-k (through the merges), numbering, assemble; declines write nothing."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from nxkernel_core import dtype as D
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_core.dtype import Dtype
from nxkernel_core.kernel import Call
from nxkernel_core.layout import Permute, Range
from nxkernel_cuda import moves
from nxkernel_cuda.device import CudaRig
from nxkernel_cuda.library import LIBRARY

from .support import bits, canary, on, run, same_bits, untouched, values

Arr = npt.NDArray[Any]

MOVED = (D.float32, D.float16, D.int8, D.uint64, D.bool_, D.bit, D.int4, D.complex128)


def _zero(dt: Dtype) -> Arr:
    return np.zeros((), dt.numpy_dtype)


def _x(dt: Dtype, shape: tuple[int, ...], seed: int) -> Arr:
    if dt.is_complex:
        rng = np.random.default_rng(seed)
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt.numpy_dtype)
    return values(dt, int(np.prod(shape)), seed).reshape(shape)


@pytest.mark.parametrize("dt", MOVED, ids=lambda d: d.name)
def test_gathers_copy_bits_and_read_zero_outside(dev: CudaRig, dt: Dtype) -> None:
    x = _x(dt, (3, 5, 4), 1)
    xs = on(dev, x, dt).view(Permute((1, 0, 2)))  # [5, 3, 4]
    xv = x.transpose(1, 0, 2)
    rng = np.random.default_rng(2)
    for axis in range(3):
        shape = list(xv.shape)
        shape[axis] = 6
        idx = rng.integers(-2, xv.shape[axis] + 2, size=shape).astype(np.int64)
        inside = (idx >= 0) & (idx < xv.shape[axis])
        want = np.where(inside, np.take_along_axis(xv, np.where(inside, idx, 0), axis), _zero(dt))
        answer, (got,) = run(S.Gather(axis), [on(dev, idx), xs], [dt])
        assert answer is Answer.DONE and same_bits(got, want, dt), axis
        answer, (got,) = run(S.RangeGather(axis, 3), [on(dev, idx), xs], [dt])
        assert answer is Answer.DONE
        for j in range(3):
            at = idx + j
            ok = (at >= 0) & (at < xv.shape[axis])
            want_j = np.where(ok, np.take_along_axis(xv, np.where(ok, at, 0), axis), _zero(dt))
            assert same_bits(np.take(got, j, axis=axis + 1), want_j, dt), (axis, j)


# --------------------------------------------------------------------------
# Scatter
# --------------------------------------------------------------------------


def _key(v: Any, dt: Dtype) -> tuple[int, int]:
    """(NaN, order key) of one element: floats in the total order, -0 below +0."""
    if dt.is_bool:
        return 0, int(bool(v))
    if dt.is_int:
        return 0, int(v)
    f = float(v)
    if f != f:
        return 1, 0
    i = int(np.float64(f).view(np.int64))
    return 0, ~(i & (2**63 - 1)) if i < 0 else i


def _extreme(a: Any, b: Any, dt: Dtype, is_max: bool) -> Any:
    """Prog's Maximum or Minimum of two elements (the first NaN; any/all)."""
    if dt.is_bool:
        return np.bool_(bool(a) or bool(b)) if is_max else np.bool_(bool(a) and bool(b))
    (na, ka), (nb, kb) = _key(a, dt), _key(b, dt)
    if na:
        return a
    if nb:
        return b
    return a if (ka >= kb if is_max else ka <= kb) else b


def _scatter(into: Arr, idx: Arr, upd: Arr, axis: int, combine: S.Combine, dt: Dtype) -> Arr:
    """The scatter, update by update in C order."""
    out = into.copy()
    acc: dict[tuple[int, ...], Any] = {}
    carrier = np.float64 if dt is D.float64 else np.float32
    for u_at in np.ndindex(*idx.shape):
        p = int(idx[u_at])
        if not 0 <= p < into.shape[axis]:
            continue
        at = (*u_at[:axis], p, *u_at[axis + 1:])
        u = upd[u_at]
        if combine is S.Combine.SET and dt is D.bool_:
            out.view(np.uint8)[at] = upd.view(np.uint8)[u_at]  # a bool's byte moves as it is
        elif combine is S.Combine.SET:
            out[at] = u
        elif combine is S.Combine.ADD and dt.is_float:
            with np.errstate(all="ignore"):
                start = acc.get(at, carrier(0.0) + carrier(into[at]))
                acc[at] = carrier(start + carrier(u))
        elif combine is S.Combine.ADD:
            out[at] = (out[at].astype(np.int64) + np.int64(u)).astype(dt.numpy_dtype)
        else:
            out[at] = _extreme(out[at], u, dt, combine is S.Combine.MAX)
    for at, v in acc.items():
        out[at] = D.of_float(dt, [float(v)])[0]
    return out


SCATTERED = (D.float32, D.float16, D.int8, D.bool_, D.bit, D.complex64)


@pytest.mark.parametrize("owner", [True, False], ids=["by-element", "by-slice"])
@pytest.mark.parametrize("dt", SCATTERED, ids=lambda d: d.name)
def test_scatter_applies_updates_in_c_order(dev: CudaRig, dt: Dtype, owner: bool,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    if not owner:
        monkeypatch.setattr(moves, "OWNER_MAX", 0)  # every axis by slice (narrow Add stays by element)
    into = _x(dt, (4, 6), 3)
    rng = np.random.default_rng(4)
    for axis in (0, 1):
        shape = [4, 6]
        shape[axis] = 9
        idx = rng.integers(-1, into.shape[axis] + 1, size=shape).astype(np.int64)
        upd = _x(dt, tuple(shape), 5 + axis)
        for combine in S.Combine:
            if (dt.is_complex and combine is not S.Combine.SET) or (dt.is_bool and combine is S.Combine.ADD):
                continue
            spec = S.Scatter(axis, combine)
            answer, (got,) = run(spec, [on(dev, into, dt), on(dev, idx), on(dev, upd, dt)], [dt])
            assert answer is Answer.DONE
            want = _scatter(into, idx, upd, axis, combine, dt)
            assert same_bits(got, want, dt, nan_equal=combine is S.Combine.ADD), (axis, combine)


def test_scatter_into_itself_equals_a_fresh_destination(dev: CudaRig) -> None:
    into = _x(D.float32, (300,), 6)
    idx = np.random.default_rng(7).integers(0, 300, size=(500,)).astype(np.int64)
    upd = _x(D.float32, (500,), 8)
    spec = S.Scatter(0, S.Combine.ADD)
    answer, (fresh,) = run(spec, [on(dev, into), on(dev, idx), on(dev, upd)], [D.float32])
    dst = on(dev, into)
    assert LIBRARY.scatter(spec, [dst], [dst, on(dev, idx), on(dev, upd)]) is Answer.DONE
    assert answer is Answer.DONE and same_bits(dst.to_numpy(), fresh, D.float32, nan_equal=True)


# --------------------------------------------------------------------------
# Sort and numbering
# --------------------------------------------------------------------------


def _keys(x: Arr, dt: Dtype) -> Arr:
    """Order keys of every element (NaN above all numbers, all NaNs equal)."""
    flat = [_key(v, dt) for v in x.reshape(-1)]
    top = max((k for nan, k in flat if not nan), default=0) + 1
    return np.array([top if nan else k for nan, k in flat], dtype=object).reshape(x.shape)


SORTED = (D.float32, D.float16, D.int64, D.uint4, D.bool_)


@pytest.mark.parametrize("dt", SORTED, ids=lambda d: d.name)
def test_sort_is_stable_in_the_total_order(dev: CudaRig, dt: Dtype) -> None:
    x = values(dt, 3 * 37, seed=9).reshape(3, 37)
    x = np.concatenate([x, x[:, :13]], axis=1)  # ties with both signs of zero and NaNs
    keys = _keys(x, dt)
    xs = on(dev, x, dt).view(Permute((1, 0)))  # sort along axis 0 of [50, 3]
    for descending, k, tile in itertools.product((False, True), (None, 7), (2, 8, None)):
        order = np.array([sorted(range(x.shape[1]), key=lambda j, r=r: (
            -keys[r, j] if descending else keys[r, j], j)) for r in range(x.shape[0])])
        order = order[:, :k]
        dsts = [Array.empty(dt, (order.shape[1], 3), dev), Array.empty(D.int64, (order.shape[1], 3), dev)]
        if tile is None:
            assert LIBRARY.sort(S.Sort(0, descending, k), dsts, [xs]) is Answer.DONE
        else:
            moves.sort(S.Sort(0, descending, k), dsts, [xs], tile=tile)
        assert dsts[1].to_numpy().T.tolist() == order.tolist(), (descending, k, tile)
        assert same_bits(dsts[0].to_numpy().T, np.take_along_axis(x, order, 1), dt)


@pytest.mark.parametrize("dt", (D.float32, D.int8, D.bit), ids=lambda d: d.name)
def test_numbering_counts_keys_below_and_not_above(dev: CudaRig, dt: Dtype) -> None:
    raw = values(dt, 2 * 15, seed=10).reshape(2, 15)
    kraw = _keys(raw, dt)
    keys = np.take_along_axis(raw, np.array([sorted(range(15), key=lambda j, r=r: kraw[r, j])
                                             for r in range(2)]), 1)
    x = values(dt, 2 * 20, seed=11).reshape(2, 20)
    both = _keys(np.concatenate([keys, x], axis=1), dt)  # one scale of keys for keys and x
    kk, kx = both[:, :15], both[:, 15:]
    for side in S.Side:
        answer, (got,) = run(S.Numbering(side), [on(dev, keys, dt), on(dev, x, dt)], [D.int64])
        want = [[sum(1 for k in kk[r] if (k <= v if side is S.Side.RIGHT else k < v)) for v in kx[r]]
                for r in range(2)]
        assert answer is Answer.DONE and got.tolist() == want, side


# --------------------------------------------------------------------------
# Assemble
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dt", (D.float32, D.int4, D.complex128), ids=lambda d: d.name)
def test_assemble_pastes_pieces_in_order_over_the_fill(dev: CudaRig, dt: Dtype) -> None:
    regions = ((Range(1, 2, 2), Range(0, 3, 1)), (Range(4, 3, -1), Range(1, 2, 3)))
    pieces = [_x(dt, (2, 3), 12), _x(dt, (3, 2), 13)]
    fill = bytes([0x01] * D.bytes(dt, 1))
    want = np.full((5, 6), D.unpack(dt, np.frombuffer(fill, np.uint8), [0])[0] if dt.is_sub_byte
                   else np.frombuffer(fill, dt.numpy_dtype)[0])
    for piece, region in zip(pieces, regions, strict=True):
        rows, cols = ([r.start + i * r.step for i in range(r.count)] for r in region)
        want[np.ix_(rows, cols)] = piece
    answer, (got,) = run(S.Assemble((5, 6), fill, regions), [on(dev, p, dt) for p in pieces], [dt])
    assert answer is Answer.DONE and same_bits(got, want, dt)


# --------------------------------------------------------------------------
# Declines and refusals
# --------------------------------------------------------------------------


def test_declined_moves_write_nothing(dev: CudaRig) -> None:
    z = on(dev, np.ones(4, np.complex64))
    idx = on(dev, np.zeros(4, np.int64))
    add = S.Scatter(0, S.Combine.ADD)
    dst = canary(dev, D.complex64, (4,))
    assert LIBRARY.statement.declines(Call("scatter", add, (dst,), (z, idx, z))) is not None
    assert LIBRARY.scatter(add, [dst], [z, idx, z]) is Answer.DECLINED and untouched(dst)
    dsts = [canary(dev, D.complex64, (4,)), canary(dev, D.int64, (4,))]
    assert LIBRARY.statement.declines(Call("sort", S.Sort(0), tuple(dsts), (z,))) is not None
    assert LIBRARY.sort(S.Sort(0), dsts, [z]) is Answer.DECLINED and all(untouched(d) for d in dsts)
    setter = S.Scatter(0, S.Combine.SET)
    assert LIBRARY.statement.declines(Call("scatter", setter, (dst,), (z, idx, z))) is None
    b = on(dev, np.ones(4, np.bool_))
    assert LIBRARY.scatter(add, [canary(dev, D.bool_, (4,))], [b, idx, b]) is Answer.WRONG_DTYPE
    assert LIBRARY.gather(S.Gather(0), [dst], [on(dev, np.zeros(4, np.int32)), z]) is Answer.WRONG_DTYPE
    assert untouched(dst)


def test_moves_sources_list_every_kernel() -> None:
    assert moves.source().kernels == moves.KERNELS
    assert bits(np.array([1.0], np.float32), D.float32).tolist() == [0x3F800000]

"""Loads of the host library: Plain reads the operand, Padded pads, crops,
spreads and windows it (upstream-facts §8), every element keeping its bits."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nxkernel_core import dtype as D
from nxkernel_core import shape as SH
from nxkernel_core.array import Array
from nxkernel_core.layout import Window
from nxkernel_core.prog import bits, element
from nxkernel_core.spec import PLAIN, Pad, Padded
from nxkernel_host.loads import load

Arr = npt.NDArray[Any]


def naive_padded(x: Arr, fill: Arr, pad: Pad) -> Arr:
    """The padded and windowed operand, index by index from the rule: padded
    position ``p`` along an axis holds element ``k`` where ``p = lo + k·(interior
    + 1)``, else the fill; window element ``(…, w, …, j)`` is padded
    ``(…, w·step + j·dilation, …)``."""
    # Elements as their bytes, so no assignment converts a value.
    item = x.dtype.itemsize
    raw = np.ascontiguousarray(x).view(np.uint8).reshape(-1, item)
    x_bytes = np.empty(x.shape, dtype=object)
    for k, idx in enumerate(itertools.product(*(range(d) for d in x.shape))):
        x_bytes[idx] = raw[k].tobytes()
    fill_bytes = np.ascontiguousarray(fill).view(np.uint8).tobytes()
    ext = [lo + d + hi + i * max(d - 1, 0)
           for d, lo, hi, i in zip(x.shape, pad.lo, pad.hi, pad.interior, strict=True)]
    padded = np.empty(ext, dtype=object)
    for p in itertools.product(*(range(e) for e in ext)):
        src = []
        for pos, d, lo, i in zip(p, x.shape, pad.lo, pad.interior, strict=True):
            q, r = divmod(pos - lo, i + 1)
            src.append(q if r == 0 and 0 <= q < d else None)
        padded[p] = fill_bytes if None in src else x_bytes[tuple(src)]
    shape = list(ext)
    for w in pad.windows:
        shape[w.axis] = (ext[w.axis] - 1 - w.dilation * (w.size - 1)) // w.step + 1
    shape += [w.size for w in pad.windows]
    rank = x.ndim
    chunks = []
    for idx in itertools.product(*(range(e) for e in shape)):
        src = list(idx[:rank])
        for k, w in enumerate(pad.windows):
            src[w.axis] = idx[w.axis] * w.step + idx[rank + k] * w.dilation
        chunks.append(padded[tuple(src)])
    return np.frombuffer(b"".join(chunks), dtype=x.dtype).reshape(shape)


def same_bits(a: Arr, b: Arr) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return bool(np.array_equal(np.ascontiguousarray(a).view(np.uint8),
                               np.ascontiguousarray(b).view(np.uint8)))


@st.composite
def pads(draw: st.DrawFn) -> tuple[tuple[int, ...], Pad]:
    rank = draw(st.integers(0, 3))
    shape = tuple(draw(st.integers(0, 4)) for _ in range(rank))
    lo = tuple(draw(st.integers(-3, 3)) for _ in range(rank))
    hi = tuple(draw(st.integers(-3, 3)) for _ in range(rank))
    interior = tuple(draw(st.integers(0, 2)) for _ in range(rank))
    windows = []
    for ax in range(rank):
        if draw(st.booleans()):
            windows.append(Window(ax, draw(st.integers(1, 3)), draw(st.integers(1, 3)),
                                  draw(st.integers(1, 2))))
    return shape, Pad(lo, hi, interior, tuple(windows))


@settings(max_examples=150, deadline=None)
@given(pads(), st.sampled_from([D.float32, D.int4, D.bool_, D.complex128, D.bfloat16]),
       st.integers(0, 2**32))
def test_padded_load_matches_the_rule(case: tuple[tuple[int, ...], Pad], dt: D.Dtype,
                                      seed: int) -> None:
    """A Padded load equals the padded, cropped, spread and windowed operand
    built index by index, with the fill's bits elsewhere."""
    shape, pad = case
    loop = SH.padded(shape, pad)
    if isinstance(loop, SH.Error):
        return
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    raw = rng.integers(0, 256, n * dt.numpy_dtype.itemsize, dtype=np.uint8)
    if dt.is_sub_byte:
        x = D.unpack(dt, raw, np.arange(n)).reshape(shape)
    else:
        x = raw.view(dt.numpy_dtype).reshape(shape)
    fill = bytes(rng.integers(0, 256, D.bytes(dt, 1), dtype=np.uint8))
    if dt.is_sub_byte:
        fill = bytes([fill[0] & ((1 << dt.bits) - 1)])
    spec = Padded(fill, pad)
    got = load(Array.from_numpy(x, dtype=dt), spec, loop)
    want = naive_padded(x, element(dt, fill), pad)
    assert same_bits(got, want)


def test_nan_payloads_and_bool_bytes_survive() -> None:
    """Operand and fill elements keep their bits: signalling NaN payloads and a
    bool's byte 2."""
    snan = np.array([0x7F800001, 0xFFA00002, 0x3F800000], dtype=np.uint32).view(np.float32)
    fill = np.uint32(0x7F800005).tobytes()
    got = load(Array.from_numpy(snan), Padded(fill, Pad((1,), (2,), (1,))), (8,))
    assert list(got.view(np.uint32)) == [0x7F800005, 0x7F800001, 0x7F800005, 0xFFA00002,
                                         0x7F800005, 0x3F800000, 0x7F800005, 0x7F800005]
    b = np.array([2, 0, 255], dtype=np.uint8).view(np.bool_)
    got = load(Array.from_numpy(b, dtype=D.bool_), Padded(b"\x07", Pad((1,), (0,), (0,))), (4,))
    assert list(got.view(np.uint8)) == [7, 2, 0, 255]


def test_plain_load_is_the_operand() -> None:
    """Plain reads the operand as it is: a strided, offset view's elements."""
    base = Array.from_numpy(np.arange(24, dtype=np.int16).reshape(4, 6))
    view = base[1:4, ::-2]
    got = load(view, PLAIN, (3, 3))
    assert np.array_equal(got, np.arange(24, dtype=np.int16).reshape(4, 6)[1:4, ::-2])


def test_sub_byte_operands_load_unpacked() -> None:
    x = np.array([-8, 7, -1, 3, 0], dtype=D.int4.numpy_dtype)
    got = load(Array.from_numpy(x, dtype=D.int4), Padded(bits(D.int4, -2), Pad((-1,), (1,), (0,))),
               (5,))
    assert got.astype(np.int8).tolist() == [7, -1, 3, 0, -2]


def test_misfits_raise() -> None:
    a = Array.from_numpy(np.zeros((2, 3), dtype=np.float32))
    with pytest.raises(ValueError, match="Plain operand of shape"):
        load(a, PLAIN, (3, 2))
    with pytest.raises(ValueError, match="fill of 2 bytes"):
        load(a, Padded(b"\x00\x00", Pad((0, 0), (0, 0), (0, 0))), (2, 3))
    with pytest.raises(ValueError, match="reads"):
        load(a, Padded(bytes(4), Pad((1, 0), (0, 0), (0, 0))), (2, 3))

"""Loads: how a host loop reads each operand (contract "Loops", upstream §8).

``load(array, spec, loop_shape)`` gives the elements a loop reads from one
operand, as a NumPy array of the loop's shape and the operand's host element
type (``Dtype.numpy_dtype``; sub-byte dtypes unpacked):

- ``Plain``: the operand itself, which has the loop's shape (a zero-copy view
  for a byte-wide dtype, an unpacked copy for a sub-byte one);
- ``Padded(fill, Pad(lo, hi, interior, windows))``: a fresh copy of the
  operand with ``lo[i]`` fill elements before it along axis ``i``, ``hi[i]``
  after and ``interior[i]`` between neighbours (a negative ``lo`` or ``hi``
  crops instead), then a strided view of the windows of that copy exactly as
  ``Layout.move(Windows(windows))`` takes them.

Every element keeps its bits: fill elements are the fill's bits
(``prog.element``) and copies never pass through float arithmetic, so NaN
payloads, signalling NaNs and a bool's byte survive.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from nxkernel_core.array import Array
from nxkernel_core.dtype import Dtype
from nxkernel_core.layout import Layout, Windows
from nxkernel_core.prog import element
from nxkernel_core.spec import Load, Pad, Padded, Plain, fill_fits

from . import views

__all__ = ["load", "pad_array", "strided"]

Arr = npt.NDArray[Any]


def load(array: Array, spec: Load, loop_shape: Sequence[int]) -> Arr:
    """The elements a loop of ``loop_shape`` reads from operand ``array`` by
    ``spec``, shaped as the loop (read-only where it is a view).

    Raises ``ValueError`` where the operand does not fit the load: a Plain
    operand not of the loop's shape, a Padded one whose fill is not one
    element of its dtype or whose padded and windowed shape is not the loop's.
    """
    shape = loop_shape if type(loop_shape) is tuple else tuple(map(int, loop_shape))
    if isinstance(spec, Plain):
        if array.shape != shape:
            raise ValueError(f"loads.load: a Plain operand of shape {list(array.shape)} "
                             f"in a loop of shape {list(shape)}")
        return views.read(array)
    if not isinstance(spec, Padded):
        raise ValueError(f"loads.load: {spec!r} is not a load")
    if not fill_fits(spec.fill, array.dtype):
        raise ValueError(f"loads.load: a fill of {len(spec.fill)} bytes for {array.dtype.name}")
    out = pad_array(views.read(array), array.dtype, spec.fill, spec.pad)
    if out.shape != shape:
        raise ValueError(f"loads.load: the padded operand reads {list(out.shape)} "
                         f"in a loop of shape {list(shape)}")
    return out


def _extent(d: int, lo: int, hi: int, interior: int) -> int:
    """An axis's padded extent: ``lo + d + hi + interior·max(d − 1, 0)``."""
    return lo + d + hi + interior * max(d - 1, 0)


def pad_array(x: Arr, dt: Dtype, fill: bytes, pad: Pad) -> Arr:
    """``x`` (host elements of ``dt``) padded by ``pad`` and windowed, a
    read-only view of a fresh C-contiguous padded copy; an index outside ``x``
    reads the element whose bits are ``fill``. Raises ``ValueError`` where
    ``x``'s rank is not the pad's or an axis pads to a negative extent or a
    window does not fit (``shape.padded``'s errors)."""
    if x.ndim != pad.rank:
        raise ValueError(f"loads.pad_array: a pad of rank {pad.rank} for an operand of "
                         f"shape {list(x.shape)}")
    ext = tuple(_extent(d, lo, hi, i)
                for d, lo, hi, i in zip(x.shape, pad.lo, pad.hi, pad.interior, strict=True))
    if min(ext, default=0) < 0:
        raise ValueError(f"loads.pad_array: shape {list(x.shape)} pads to {list(ext)}")
    padded = np.empty(ext, dtype=x.dtype)
    # Along each axis, operand element k lands at lo + k·(interior + 1); keep
    # the k whose position lies in [0, extent).
    src: list[slice] = []
    dst: list[slice] = []
    for d, lo, e, interior in zip(x.shape, pad.lo, ext, pad.interior, strict=True):
        step = interior + 1
        k0 = max(0, (-lo + step - 1) // step)
        k1 = min(d, (e - 1 - lo) // step + 1) if e > 0 else 0
        k1 = max(k1, k0)
        src.append(slice(k0, k1))
        dst.append(slice(lo + k0 * step, lo + k0 * step + (k1 - k0 - 1) * step + 1, step)
                   if k1 > k0 else slice(0, 0))
    fill_value = element(dt, fill)
    if all(i == 0 for i in pad.interior):
        # The operand's elements form one box: fill only the slabs around it,
        # which saves a full pass of fill writes over the padded copy.
        _fill_around(padded, dst, fill_value)
    else:
        padded[...] = fill_value
    # The Ellipsis keeps a rank-0 read an array, so its bits are copied as they are.
    dst_key: tuple[Any, ...] = (*dst, Ellipsis)
    src_key: tuple[Any, ...] = (*src, Ellipsis)
    padded[dst_key] = x[src_key]
    if not pad.windows:
        padded.flags.writeable = False
        return padded
    lay = Layout.c_contiguous(ext).move(Windows(pad.windows))
    assert lay is not None  # windows always have strides
    return strided(padded, lay)


def _fill_around(out: Arr, box: Sequence[slice], value: Arr) -> None:
    """Write ``value`` at every index of ``out`` outside ``box`` (unit-step
    slices): for each axis, the slabs before and after the box along it,
    within the box along the axes before it."""
    lead: list[slice] = []
    for ax, s in enumerate(box):
        start, stop = s.start, max(s.start, s.stop)
        if start >= stop:
            # An empty box: everything is fill.
            out[...] = value
            return
        rest = [slice(None)] * (out.ndim - ax - 1)
        out[(*lead, slice(0, start), *rest)] = value
        out[(*lead, slice(stop, None), *rest)] = value
        lead.append(slice(start, stop))


def strided(base: Arr, lay: Layout) -> Arr:
    """A read-only view of C-contiguous ``base`` at ``lay``'s positions (element
    strides and offset into ``base``'s elements). The view is made over an
    unsigned (or void) type of the same itemsize, since ``as_strided`` does
    not take ml_dtypes' types, then viewed as ``base``'s type."""
    item = base.dtype.itemsize
    if lay.numel == 0:
        return np.empty(lay.shape, dtype=base.dtype)
    carrier = np.dtype(f"u{item}") if item in (1, 2, 4, 8) else np.dtype(f"V{item}")
    flat = base.reshape(-1).view(carrier)[lay.offset:]
    view = np.lib.stride_tricks.as_strided(
        flat, shape=lay.shape, strides=tuple(s * item for s in lay.strides), writeable=False)
    return view.view(base.dtype)

"""Host views of arrays: how the host kernels read operands and write results.

Byte-wide dtypes are read and written through zero-copy NumPy views of the
buffer's bytes (any layout: strided, broadcast, offset). Sub-byte dtypes are
packed, so they are read as unpacked copies and written by packing.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from nxkernel_core.array import Array
from nxkernel_core.dtype import Dtype
from nxkernel_core.layout import Layout
from nxkernel_core.rig import Memory


def read(a: Array) -> npt.NDArray[Any]:
    """``a``'s elements as a NumPy array of its host type: a read-only view for a
    byte-wide dtype, an unpacked copy for a sub-byte one."""
    if a.dtype.is_sub_byte:
        return a.to_numpy()
    view = a.numpy_view()
    view.setflags(write=False)
    return view


def target(a: Array) -> npt.NDArray[Any] | None:
    """A writable view of destination ``a``'s elements, or ``None`` for a
    sub-byte dtype (write it with ``store``)."""
    return None if a.dtype.is_sub_byte else a.numpy_view()


def store(a: Array, values: npt.ArrayLike) -> None:
    """Write ``values`` (host elements of ``a``'s dtype, broadcast to its shape)
    at every element of ``a``."""
    view = target(a)
    if view is None:
        a.write_numpy(np.asarray(values))
    else:
        view[...] = values


def reader(dt: Dtype, layout: Layout) -> Callable[[Array], npt.NDArray[Any]]:
    """How a prepared kernel reads a byte-wide operand of ``dt`` and ``layout``
    whose buffer the caller found live, on host memory: a contiguous one as
    one NumPy array over its bytes (its start and length worked out once here,
    saving ``numpy_view``'s checks), any other as ``views.read`` does."""
    if not layout.is_contiguous() or layout.numel == 0:
        return read
    item = dt.numpy_dtype.itemsize
    first, count, shape, t = layout.offset * item, layout.numel, layout.shape, dt.numpy_dtype

    if len(shape) == 1:
        def read_flat(a: Array) -> npt.NDArray[Any]:
            buf = a.buffer
            return _frombuffer(buf.memory.host_bytes, t, count, buf.offset + first)  # type: ignore[arg-type]

        return read_flat

    def read_contiguous(a: Array) -> npt.NDArray[Any]:
        buf = a.buffer
        return _ndarray(shape, t, buf.memory.host_bytes, buf.offset + first)

    return read_contiguous


def flat(dt: Dtype, layout: Layout) -> tuple[np.dtype[Any], int, int] | None:
    """Where a prepared kernel reads an operand of ``dt`` and a 1-D contiguous
    ``layout`` as ``np.frombuffer(host_bytes, type, count, buffer offset +
    first)``: ``(type, count, first)``; None for any other layout."""
    if len(layout.shape) != 1 or not layout.is_contiguous() or layout.numel == 0:
        return None
    t = dt.numpy_dtype
    return t, layout.numel, layout.offset * t.itemsize


def fresh(dt: Dtype, layout: Layout) -> Callable[[Array], npt.NDArray[Any]]:
    """How a prepared kernel writes a fresh byte-wide destination of ``dt`` and
    ``layout`` (C-contiguous, its buffer spanning its memory, as the caller
    allocates it): one NumPy array over its bytes."""
    t, shape = dt.numpy_dtype, layout.shape
    if len(shape) == 1:
        def write_flat(a: Array) -> npt.NDArray[Any]:
            return a.buffer.memory.host_bytes.view(t)  # type: ignore[union-attr]

        return write_flat

    def write(a: Array) -> npt.NDArray[Any]:
        return _ndarray(shape, t, a.buffer.memory.host_bytes)

    return write


def address(mem: Memory) -> int:
    """The address of host memory ``mem``'s first byte, found once and kept
    in ``mem.address`` (through ctypes' ``from_buffer``: ``ctypes.data``
    costs microseconds a call)."""
    found = mem.address
    if found is None:
        hb = mem.host_bytes
        if hb is None:
            raise ValueError(f"views.address: {mem.device.name}'s memory is not host memory")
        try:
            found = ctypes.addressof(ctypes.c_char.from_buffer(hb))  # type: ignore[arg-type]
        except TypeError:  # read-only memory: from_buffer needs a writable one
            found = int(hb.ctypes.data)
        mem.address = found
    return found


#: One C call each: cheaper than a slice, a view and a reshape.
_frombuffer = np.frombuffer
_ndarray = np.ndarray

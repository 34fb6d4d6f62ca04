"""Host views of arrays: how the host kernels read operands and write results.

Byte-wide dtypes are read and written through zero-copy NumPy views of the
buffer's bytes (any layout: strided, broadcast, offset). Sub-byte dtypes are
packed, so they are read as unpacked copies and written by packing.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from nxkernel_core.array import Array


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

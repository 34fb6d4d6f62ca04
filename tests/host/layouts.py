"""Host arrays holding given values through the layouts a kernel must read in
place: C order, reversed along every axis, strided (every other element, an
offset of one), and permuted (axes reversed)."""

from __future__ import annotations

from typing import Any

import numpy.typing as npt

from nxkernel_core.array import Array
from nxkernel_core.dtype import Dtype
from nxkernel_core.layout import Permute, Range, Slice
from nxkernel_core.rig import Rig, host

NDArray = npt.NDArray[Any]

#: The layouts ``placed`` makes.
LAYOUTS = ("c", "reversed", "strided", "permuted")


def placed(values: NDArray, dt: Dtype, layout: str, dev: Rig | str = host) -> Array:
    """An array of ``dt`` on ``dev`` holding ``values`` through the named layout."""
    shape = values.shape
    if layout == "c" or not shape:
        return Array.from_numpy(values, dev, dt)
    if layout == "reversed":
        base = Array.empty(dt, shape, dev)
        view = base.view(Slice(tuple(Range(d - 1, d, -1) if d else Range(0, 0) for d in shape)))
    elif layout == "strided":
        base = Array.empty(dt, tuple(2 * d + 1 for d in shape), dev)
        view = base.view(Slice(tuple(Range(1, d, 2) for d in shape)))
    else:
        base = Array.empty(dt, shape[::-1], dev)
        view = base.view(Permute(tuple(reversed(range(len(shape))))))
    view.write_numpy(values)
    return view

"""Elementwise copy of bytes, the tests' example generated family.

Rule: :func:`copy` makes ``dst``'s bytes those of ``src`` (two contiguous
arrays of one size on one CUDA device), moving the widest units of 8, 4, 2 or
1 bytes that the size and both addresses allow, with a grid-stride loop.

The source is rendered by :func:`copy_code`, a pure function of the unit's
width, from :data:`TEMPLATE`: the pattern every generated source follows.
"""

from __future__ import annotations

import functools
import string
from typing import Final

import numpy as np

from nxkernel_core.array import Array
from nxkernel_cuda.build import Source, render
from nxkernel_cuda.launch import CudaRig, first_element

__all__ = ["TEMPLATE", "UNITS", "copy", "copy_code", "kernel_name", "source"]

#: Unit width in bytes -> the C type moved.
UNITS: Final[dict[int, str]] = {8: "nxk_u64", 4: "nxk_u32", 2: "nxk_u16", 1: "nxk_u8"}

# Slots: name, the kernel's (extern "C") name; unit, the C type of one unit.
# Internal variables: i, the unit's index, striding by the grid's thread
# count; invariant: 0 <= i < n, so every unit is copied once.
TEMPLATE: Final = string.Template("""\
extern "C" __global__ void ${name}(${unit}* __restrict__ dst, const ${unit}* __restrict__ src, nxk_i64 n)
{
    const nxk_i64 step = (nxk_i64)gridDim.x * blockDim.x;
    for (nxk_i64 i = (nxk_i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        dst[i] = src[i];
    }
}
""")

_THREADS: Final = 256
_MAX_BLOCKS: Final = 1024


def kernel_name(width: int) -> str:
    """The kernel copying units of ``width`` bytes."""
    return f"nxk_copy_u{8 * width}"


def copy_code(width: int) -> str:
    """The CUDA source of the copy of ``width``-byte units (pure)."""
    return render(TEMPLATE, name=kernel_name(width), unit=UNITS[width])


@functools.cache
def source() -> Source:
    """One generated source with the copy of every unit width."""
    text = '#include "nxk_common.cuh"\n\n' + "\n".join(copy_code(w) for w in UNITS)
    return Source("copy.cu", text, tuple(kernel_name(w) for w in UNITS))


def copy(dst: Array, src: Array) -> None:
    """Copy ``src``'s bytes over ``dst``'s, queued on the device's stream.

    Raises:
        ValueError: the arrays are not contiguous, of one byte size, on one
            CUDA device.
    """
    dev = src.device
    if not isinstance(dev, CudaRig) or dst.device is not dev:
        raise ValueError(
            f"copy: both arrays must be on one CUDA device, not {src.device.name} and {dst.device.name}"
        )
    if not (src.layout.is_contiguous() and dst.layout.is_contiguous()):
        raise ValueError("copy: both arrays must be contiguous")
    nbytes = src.numel * src.dtype.bits // 8
    if src.dtype.bits % 8 or dst.dtype.bits % 8 or dst.numel * dst.dtype.bits // 8 != nbytes:
        raise ValueError(f"copy: {dst!r} and {src!r} do not hold the same whole number of bytes")
    if nbytes == 0:
        return  # nothing to launch
    d = dev.pointer(dst.buffer) + first_element(dst)
    s = dev.pointer(src.buffer) + first_element(src)
    width = next(w for w in UNITS if nbytes % w == 0 and d.address % w == 0 and s.address % w == 0)
    units = nbytes // width
    blocks = min(-(-units // _THREADS), _MAX_BLOCKS)
    dev.load(source()).function(kernel_name(width))((blocks,), (_THREADS,), [d, s, np.int64(units)])

"""Lane-order float32 Sum of rows (``kernels/lane_sum.cu`` beside this file),
the tests' example reduction family: a small hand-written kernel of shared
memory, warp shuffles and template instantiations that the device, build and
emulator tests launch.

Rule: :func:`sum_rows` writes to ``dst[r]`` the float32 sum of ``src[r, :]``
in lane order (design.md §6), bit for bit
``nxkernel_core.orders.lane_reduce(src, np.add, np.float32(0))``, whatever
block size it runs with: one block per row, 16 threads per 1024-term chunk,
lanes combined by warp shuffles, chunks by a tree in shared memory and a
binary counter (the source's header comment tells the whole scheme).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Final

import numpy as np

from nxkernel_core import dtype as D
from nxkernel_core.array import Array
from nxkernel_cuda.build import Source
from nxkernel_cuda.launch import CudaRig, first_element

__all__ = ["DEFAULT_THREADS", "THREADS", "kernel_name", "source", "sum_rows"]

#: The kernel's file.
FILE: Final = Path(__file__).parent / "kernels" / "lane_sum.cu"
#: The block sizes the source is instantiated for.
THREADS: Final[tuple[int, ...]] = (32, 128, 256, 1024)
#: The block size sum_rows uses unless told.
DEFAULT_THREADS: Final = 256


def kernel_name(threads: int) -> str:
    """The name expression of the instantiation for ``threads`` threads a block."""
    return f"nxk_lane_sum_f32<{threads}>"


@functools.cache
def source() -> Source:
    """``lane_sum.cu`` with every instantiation of :data:`THREADS`."""
    return Source("lane_sum.cu", FILE.read_text(), tuple(kernel_name(t) for t in THREADS))


def sum_rows(dst: Array, src: Array, *, threads: int = DEFAULT_THREADS) -> None:
    """``dst[r]`` = the lane-order float32 sum of ``src[r, :]``, queued on the
    device's stream.

    Args:
        dst: float32 ``[rows]``, on the same CUDA device as ``src``.
        src: float32 ``[rows, n]`` whose terms are adjacent along ``n`` (any
            row stride, broadcast rows included).
        threads: the block size, one of :data:`THREADS`.

    Raises:
        ValueError: the arrays do not fit the kernel.
    """
    dev = src.device
    if not isinstance(dev, CudaRig) or dst.device is not dev:
        raise ValueError(f"sum_rows: both arrays must be on one CUDA device, not {src.device.name}"
                         f" and {dst.device.name}")
    if src.dtype is not D.float32 or dst.dtype is not D.float32:
        raise ValueError(f"sum_rows: float32 arrays only, not {dst.dtype.name} and {src.dtype.name}")
    if threads not in THREADS:
        raise ValueError(f"sum_rows: threads = {threads} is not one of {THREADS}")
    if src.rank != 2 or dst.shape != src.shape[:1]:
        raise ValueError(
            f"sum_rows: shapes {list(dst.shape)} and {list(src.shape)} are not [rows] and [rows, n]"
        )
    rows, n = src.shape
    row_stride, term_stride = src.layout.strides
    if n > 1 and term_stride != 1:
        raise ValueError(f"sum_rows: the terms of a row must be adjacent (stride 1, not {term_stride})")
    if rows > 1 and dst.layout.strides[0] != 1:
        raise ValueError("sum_rows: dst must be contiguous")
    if rows == 0:
        return  # nothing to launch
    fn = dev.load(source()).function(kernel_name(threads))
    fn((rows,), (threads,), [
        dev.pointer(dst.buffer) + first_element(dst),
        dev.pointer(src.buffer) + first_element(src),
        np.int64(n),
        np.int64(row_stride),
    ])

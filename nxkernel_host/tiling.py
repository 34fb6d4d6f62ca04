"""The host's products over fixed tiles of the output, on the library's threads.

A product ``a [m, k] @ b [k, n]`` (or a batch of them, ``[B, m, k] @ [B, k,
n]``) is cut into tiles of its output by :func:`tiles`, a function of
``(m, n, k)`` and the batch's count alone: the rows, then the columns,
halved into whole panels of ``PANEL`` while the tiles are too many
multiply-adds for one, never K. Each tile of each batch element is one
product: a small tile (``by_lanes``: fewer than ``LANE_WORK`` multiply-adds,
at least ``LANE_MIN_OUTPUTS`` outputs) by the library's own kernel
(``lanedots.product_at``: each output element a chain of fused
multiply-adds over K in order), any other by the library's own
single-threaded OpenBLAS (``blas.gemm_strided``), each output element then
in the order OpenBLAS's routine for the tile's extents ``(m_t, n_t, k)``
and its core type takes (``blas.corename()``). Which thread computes a
tile, and how many batch elements one call takes (``groups``), change no
bit: the calls take as many elements as keep the threads busy.

Few, large tiles: each tile packs its own rows of ``a`` and columns of
``b`` again, so a 1024³ product is two tiles of 512 rows (one per thread on
two cores, as OpenBLAS's own threads would split it), not four chunks of
256 rows that pack all of ``b`` four times.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from . import blas, lanedots, pool

__all__ = ["LANE_MIN_OUTPUTS", "LANE_WORK", "PANEL", "POOL_MIN_WORK", "SPLIT_WORK", "by_lanes",
           "float_tasks", "groups", "products", "run", "tile_count",
           "tiles"]

NDArray = npt.NDArray[Any]
Task = Callable[[], None]

#: A product of fewer multiply-adds is one tile.
SPLIT_WORK: Final = 1 << 22
#: Tiles are cut at multiples of this many rows or columns.
PANEL: Final = 64
#: Below this many multiply-adds in all, a call's tiles run on the calling thread.
POOL_MIN_WORK: Final = 1 << 21
#: Tiles of fewer multiply-adds than this (and at least ``LANE_MIN_OUTPUTS``
#: outputs) take the library's own kernel: at such sizes OpenBLAS's packing
#: and call cost more than they save (measured 1.2–1.6× slower at 64³ to
#: 128³ and 128 × 64 × 1024, float32 and float64).
LANE_WORK: Final = 1 << 24
#: Fewer outputs than this leave too few independent chains for the kernel.
LANE_MIN_OUTPUTS: Final = 64
#: Batch calls per thread: more than one, so a thread the machine delays
#: leaves its share to the others.
_CALLS_PER_THREAD: Final = 4


def tile_count(m: int, n: int, k: int, batch: int = 1) -> int:
    """How many tiles each product ``[m, k] @ [k, n]`` of a batch aims at: 1
    below ``SPLIT_WORK`` multiply-adds, else 2 up to 2^31, then twice as many
    for every fourfold work (each tile then at least 2^29 multiply-adds), at
    most 32; divided by the batch's elements (a batch of as many elements as
    that is already parallel work), at least 1."""
    work = m * n * k
    if work < SPLIT_WORK:
        return 1
    return max(1, (1 << min(5, max(1, 1 + (work.bit_length() - 1 - 29) // 2))) // batch)


def _cuts(total: int, parts: int) -> list[tuple[int, int]]:
    """``[0, total)`` in ``parts`` ranges of whole panels (the last takes the
    remainder), nearly equal."""
    panels = -(-total // PANEL)
    return [(lo * PANEL, min(hi * PANEL, total)) for lo, hi in pool.spans(panels, parts)]


@functools.lru_cache(maxsize=256)
def tiles(m: int, n: int, k: int, batch: int = 1) -> tuple[tuple[int, int, int, int], ...]:
    """The tiles ``(r0, r1, c0, c1)`` of the output of each product ``[m, k]
    @ [k, n]`` of a batch (1 <= m, n): ``tile_count`` of them where the sides allow, by
    halving the longer side of a tile (rows on ties) while its halves keep
    at least ``PANEL`` rows or columns. A function of the extents alone."""
    want = tile_count(m, n, k, batch)
    parts_m = parts_n = 1
    while parts_m * parts_n < want:
        rows_ok = m // (2 * parts_m) >= PANEL
        cols_ok = n // (2 * parts_n) >= PANEL
        if rows_ok and (m * parts_n >= n * parts_m or not cols_ok):
            parts_m *= 2
        elif cols_ok:
            parts_n *= 2
        else:
            break
    return tuple((r0, r1, c0, c1) for r0, r1 in _cuts(m, parts_m) for c0, c1 in _cuts(n, parts_n))


def groups(batch: int, tile_total: int, threads: int, stride: int) -> list[tuple[int, int]]:
    """The batch ranges one BLAS call each computes (per tile): one range on
    one thread, else about ``_CALLS_PER_THREAD`` calls per thread in all,
    and never so many elements that ``(count − 1) · stride`` leaves a 32-bit
    BLAS integer. Changes no bit: each element is computed alone."""
    parts = 1 if threads == 1 else -(-_CALLS_PER_THREAD * threads // tile_total)
    most = blas.INT_MAX // stride + 1 if stride else batch
    return pool.spans(batch, max(parts, -(-batch // most)))


def by_lanes(m: int, n: int, k: int) -> bool:
    """Whether a tile of these extents runs on ``lanedots.product_at`` (else
    OpenBLAS): fewer than ``LANE_WORK`` multiply-adds and at least
    ``LANE_MIN_OUTPUTS`` outputs. A function of the extents alone."""
    return m * n * k < LANE_WORK and m * n >= LANE_MIN_OUTPUTS


def _check(m: int, n: int, k: int) -> None:
    if max(m, n, k) > blas.INT_MAX:
        raise ValueError(f"contract: extents {m}, {n}, {k} exceed a 32-bit BLAS's")


def float_tasks(dtype: npt.DTypeLike, batch: int, m: int, n: int, k: int, a: int, b: int,
                out: int, threads: int) -> list[Task]:
    """The calls of ``out = a @ b`` for C-contiguous float32 or float64
    ``a [batch, m, k]``, ``b [batch, k, n]`` and ``out [batch, m, n]`` at
    these addresses (1 <= batch, m, n, k): every tile of ``tiles(m, n, k,
    batch)`` for every range of ``groups``, by ``lanedots.product_at`` where
    ``by_lanes`` holds for the tile, else by BLAS.

    Raises:
        ValueError: extents a 32-bit BLAS integer does not hold.
    """
    _check(m, n, k)
    product = blas.gemm_strided(dtype)
    item = np.dtype(dtype).itemsize
    like = np.dtype(dtype).type(0)
    cut = tiles(m, n, k, batch)
    sa, sb, sc = m * k, k * n, m * n
    tasks: list[Task] = []
    for lo, hi in groups(batch, len(cut), threads, max(sa, sb, sc) if batch > 1 else 0):
        count = hi - lo
        # A stride is read only from the second element on.
        sa_, sb_, sc_ = (sa, sb, sc) if count > 1 else (0, 0, 0)
        for r0, r1, c0, c1 in cut:
            at_a, at_b = a + (lo * sa + r0 * k) * item, b + (lo * sb + c0) * item
            at_out = out + (lo * sc + r0 * n + c0) * item
            if by_lanes(r1 - r0, c1 - c0, k):
                tasks.append(functools.partial(
                    lanedots.product_at, count, r1 - r0, c1 - c0, k, at_a, sa, k, 1, at_b, sb,
                    n, at_out, sc, n, like))
                continue
            tasks.append(functools.partial(
                product, r1 - r0, c1 - c0, k, at_a, k, sa_, at_b, n, sb_, at_out, n, sc_, count))
    return tasks


def _matmul(a: NDArray, b: NDArray, out: NDArray) -> None:
    np.matmul(a, b, out=out)


def products(jobs: Sequence[tuple[NDArray, NDArray, NDArray]]) -> None:
    """``out[...] = a @ b`` for each job of C-contiguous 3-D arrays ``a [B, m,
    k]``, ``b [B, k, n]``, ``out [B, m, n]``: float32 and float64 by the
    library's own kernels over fixed tiles (``float_tasks``), other dtypes
    (the integer paths' uint64) by NumPy's loop over the same tiles, on the
    library's threads (``run``).

    Raises:
        ValueError: extents a 32-bit BLAS integer does not hold (before any
            product is computed).
    """
    work = sum(math.prod(a.shape) * b.shape[2] for a, b, _ in jobs)
    # Work that stays on the calling thread takes one BLAS call per tile.
    threads = pool.count() if work >= POOL_MIN_WORK else 1
    tasks: list[Task] = []
    for a, b, out in jobs:
        batch, m, k = a.shape
        n = b.shape[2]
        if batch == 0 or m == 0 or n == 0:
            continue
        if k == 0:
            out[...] = 0
            continue
        assert a.flags.c_contiguous and b.flags.c_contiguous and out.flags.c_contiguous
        if out.dtype in (np.float32, np.float64):
            tasks += float_tasks(out.dtype, batch, m, n, k, a.ctypes.data, b.ctypes.data,
                                 out.ctypes.data, threads)
            continue
        cut = tiles(m, n, k, batch)
        for lo, hi in groups(batch, len(cut), threads, 0):
            tasks += [functools.partial(_matmul, a[lo:hi, r0:r1], b[lo:hi, :, c0:c1],
                                        out[lo:hi, r0:r1, c0:c1]) for r0, r1, c0, c1 in cut]
    run(tasks, work)


def run(tasks: Sequence[Task], work: int) -> None:
    """Run every task once: on the calling thread where there is one task,
    one thread or less than ``POOL_MIN_WORK`` multiply-adds, else on up to
    ``pool.count()`` threads, each taking the next task not yet taken (a
    delayed thread leaves its share to the others; who computes a task
    changes no bit of it)."""
    threads = min(pool.count(), len(tasks))
    if threads <= 1 or work < POOL_MIN_WORK:
        with np.errstate(all="ignore"):  # NaN and infinity are values here, not errors
            for task in tasks:
                task()
        return
    # One iterator shared by the workers: next() on a list iterator is one
    # step under the GIL, so each task is taken by one worker exactly once.
    queue = iter(tasks)

    def worker() -> None:
        with np.errstate(all="ignore"):  # per thread
            for task in queue:
                task()

    pool.parallel([worker] * threads)

"""The host's tile rule for products (``nxkernel_host.tiling``): tiles that
cover each output once in whole panels, counts as the statement gives them,
and bits that depend neither on the library's thread count nor on how the
batch elements are grouped into BLAS calls."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

import nxkernel_host
from nxkernel_core import dtype as D
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_host import tiling
from nxkernel_host.library import library

NDArray = np.ndarray[Any, Any]


@pytest.mark.parametrize("extents", [(1, 1, 1, 1), (1024, 1024, 1024, 1), (1000, 999, 1000, 1),
                                     (700, 97, 130, 1), (64, 4096, 4096, 1), (300, 5, 2**22, 1),
                                     (4096, 4096, 4096, 1), (2**20, 2**20, 2**20, 1),
                                     (128, 128, 128, 64), (2048, 2048, 2048, 3)])
def test_the_tiles_cover_each_output_once_in_whole_panels(extents: tuple[int, int, int, int]
                                                          ) -> None:
    m, n, k, batch = extents
    cut = tiling.tiles(m, n, k, batch)
    rows = sorted({(r0, r1) for r0, r1, _, _ in cut})
    cols = sorted({(c0, c1) for _, _, c0, c1 in cut})
    # A grid: consecutive row ranges and column ranges, every pair once.
    assert len(cut) == len(set(cut)) == len(rows) * len(cols)
    for ranges, total in ((rows, m), (cols, n)):
        assert ranges[0][0] == 0 and ranges[-1][1] == total
        assert all(hi == lo for (_, hi), (lo, _) in itertools.pairwise(ranges))
        assert all(lo % tiling.PANEL == 0 and hi > lo for lo, hi in ranges)
    assert len(cut) <= tiling.tile_count(m, n, k, batch)


def test_the_tile_counts_the_statement_gives() -> None:
    # 1 below 2^22 multiply-adds, 2 up to 2^31, twice as many per fourfold work, at most 32.
    assert tiling.tiles(100, 100, 100) == ((0, 100, 0, 100),)
    assert tiling.tiles(1024, 1024, 1024) == ((0, 512, 0, 1024), (512, 1024, 0, 1024))
    assert tiling.tile_count(1024, 1024, 1024) == 2
    assert tiling.tile_count(1024, 1024, 2047) == 2
    assert tiling.tile_count(1024, 1024, 2048) == 4
    assert tiling.tile_count(2048, 2048, 2048) == 8
    assert tiling.tile_count(2**20, 2**20, 2**20) == 32
    assert len(tiling.tiles(2048, 2048, 2048)) == 8
    # Rows first; columns where the rows are too few to halve into whole panels.
    assert tiling.tiles(64, 4096, 4096) == ((0, 64, 0, 2048), (0, 64, 2048, 4096))
    assert len(tiling.tiles(32, 32, 2**30)) == 1
    # A batch of as many elements as the tiles is parallel work already.
    assert tiling.tile_count(1024, 1024, 1024, 2) == 1
    assert tiling.tiles(128, 128, 128, 64) == ((0, 128, 0, 128),)


def _contract(spec: S.Contract, shape: tuple[int, ...], a: NDArray, b: NDArray) -> bytes:
    dst = Array.empty(D.by_name(a.dtype.name), shape)
    assert library.contract(spec, [dst], [Array.from_numpy(a), Array.from_numpy(b)]) is Answer.DONE
    return dst.to_numpy().tobytes()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_bits_do_not_depend_on_the_thread_count(dtype: str) -> None:
    """A product of two tiles, a batch of one-tile products (one BLAS call on
    one thread, several on more) and a batch of small ones give the same
    bits at 1, 2 and 3 threads (``nxkernel_host.threads``)."""
    rng = np.random.default_rng(17)
    acc = D.by_name(dtype)
    a = rng.standard_normal((700, 130)).astype(dtype)
    b = rng.standard_normal((130, 97)).astype(dtype)
    ba = rng.standard_normal((24, 128, 144)).astype(dtype)
    bb = rng.standard_normal((24, 144, 96)).astype(dtype)
    sa = rng.standard_normal((10, 3, 5)).astype(dtype)
    sb = rng.standard_normal((10, 5, 7)).astype(dtype)
    assert len(tiling.tiles(700, 97, 130)) == 2
    plain = S.Contract((), ((1, 0),), acc)
    batched = S.Contract(((0, 0),), ((2, 1),), acc)
    runs = []
    for n in (1, 2, 3):
        with nxkernel_host.threads(n):
            runs.append((_contract(plain, (700, 97), a, b),
                         _contract(batched, (24, 128, 96), ba, bb),
                         _contract(batched, (10, 3, 7), sa, sb)))
    assert runs[1] == runs[0] and runs[2] == runs[0]


def test_a_batch_element_has_the_bits_of_its_product_alone() -> None:
    """OpenBLAS's strided batch computes each element alone: the elements of
    a batch of one-tile products, whatever the calls that take them, have
    the bits of the same products as batches of one."""
    rng = np.random.default_rng(19)
    a = rng.standard_normal((12, 64, 300)).astype(np.float32)
    b = rng.standard_normal((12, 300, 48)).astype(np.float32)
    spec = S.Contract(((0, 0),), ((2, 1),), D.float32)
    with nxkernel_host.threads(2):
        whole = np.frombuffer(_contract(spec, (12, 64, 48), a, b), np.float32).reshape(12, 64, 48)
    for i in range(12):
        alone = _contract(spec, (1, 64, 48), a[i:i + 1], b[i:i + 1])
        assert whole[i].tobytes() == alone, i


def test_extents_past_a_32_bit_blas_are_refused_before_any_product() -> None:
    with pytest.raises(ValueError, match="exceed a 32-bit BLAS"):
        tiling.float_tasks(np.float32, 1, 2**31, 1, 1, 0, 0, 0, 1)

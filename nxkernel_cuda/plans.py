"""Launch plans of the reduce and scan kernels (and the statistics kinds'):
how many threads, chunks and blocks a row's terms are cut into. Every plan
gives the same bits (the lane order and the odd/even network do not depend
on it), so tests pass their own to cover several.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from . import loops
from .launch import CudaRig, Module, Pointer

__all__ = ["MAX_GRID", "MAX_GROUP", "MAX_SCAN_CHUNK", "grid", "lane_plan", "scan_chunk", "scan_states"]


#: Blocks a reduction aims at, over all rows.
_TARGET_BLOCKS: Final = 2048
#: The largest chunk of a scan, in states (a power of two).
MAX_SCAN_CHUNK: Final = 1024


def _pow2_at_least(v: int) -> int:
    return 1 << max(0, (v - 1).bit_length())


#: The most chunks a block combines (its chunk values wait in shared memory).
MAX_GROUP: Final = 1024


def lane_plan(rows: int, n: int, threads: int | None = None, group_chunks: int | None = None
              ) -> tuple[int, int, int]:
    """(threads, chunks a group, groups a row) of a lane-order reduction of
    ``rows`` rows of ``n`` terms: groups of a power of two of chunks, at most
    :data:`MAX_GROUP`, about :data:`_TARGET_BLOCKS` blocks in all. Any choice
    gives the same bits (tests pass their own)."""
    chunks = -(-n // 1024)
    if group_chunks is None:
        want = max(1, -(-_TARGET_BLOCKS // max(rows, 1)))
        group_chunks = min(MAX_GROUP, _pow2_at_least(max(1, -(-chunks // want))))
    if group_chunks < 1 or group_chunks & (group_chunks - 1) or group_chunks > MAX_GROUP:
        raise ValueError(f"lane_plan: {group_chunks} chunks a group is not a power of two in"
                         f" [1, {MAX_GROUP}]")
    if threads is None:
        threads = max(32, min(256, 16 * _pow2_at_least(max(1, min(group_chunks, chunks)))))
    if threads < 32 or threads & (threads - 1) or threads > 256:  # the kernels' launch bounds
        raise ValueError(f"lane_plan: {threads} threads is not a power of two in [32, 256]")
    return threads, group_chunks, max(1, -(-chunks // group_chunks))


def scan_chunk(m: int, chunk: int | None = None) -> int:
    """The chunk size (a power of two, twice the block size) of a scan of rows
    of ``m`` states; any choice gives the same bits (tests pass their own)."""
    if chunk is not None:
        if chunk < 2 or chunk & (chunk - 1) or chunk > 2048:
            raise ValueError(f"scan_chunk: {chunk} is not a power of two in [2, 2048]")
        return chunk
    return min(MAX_SCAN_CHUNK, max(64, _pow2_at_least(m)))


#: Blocks of a launch whose blocks stride over their work, at most (CUDA's
#: grid limit is 2^31 - 1).
MAX_GRID: Final = 1 << 20


def grid(blocks: int) -> int:
    """The grid of a block-striding launch over ``blocks`` block indices."""
    return max(1, min(blocks, MAX_GRID))


def scan_states(dev: CudaRig, module: Module, kernels: tuple[str, str], param: int, state_bytes: int,
                rows: int, m: int, chunk: int, src: Pointer, keep: list[object]) -> Pointer:
    """Scan ``rows`` rows of ``m`` states at ``src`` (row-major) by the
    network into a fresh buffer, chunk by chunk, the chunks' totals scanned
    the same way first; its address (buffers kept in ``keep``). ``kernels``:
    the module's totals and chunks kernels over state arrays, each taking
    ``param`` (the reductions' op, the statistics kinds' parameter)."""
    totals_fn, chunks_fn = kernels
    out_buf, out = loops.scratch(dev, rows * m * state_bytes)
    keep.append(out_buf)
    q, nfull = -(-m // chunk), m // chunk
    scanned = out
    if q > 1:
        tot_buf, totals = loops.scratch(dev, rows * nfull * state_bytes)
        keep.append(tot_buf)
        module.function(totals_fn)((grid(rows * nfull),), (chunk // 2,), [
            np.int64(m), np.int64(nfull), np.int32(chunk), np.int32(param), src, totals,
            np.int64(rows * nfull)], shared_bytes=chunk * state_bytes)
        scanned = scan_states(dev, module, kernels, param, state_bytes, rows, nfull, chunk, totals, keep)
    module.function(chunks_fn)((grid(rows * q),), (chunk // 2,), [
        np.int64(m), np.int64(q), np.int64(nfull), np.int32(chunk), np.int32(param), src, scanned, out,
        np.int64(rows * q)], shared_bytes=chunk * state_bytes)
    return out

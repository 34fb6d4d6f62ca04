"""The orders that make float reductions and scans reproducible (design.md §6).

Both are stated here once, as NumPy code vectorised over leading axes (terms
run along the last axis), so that libraries can share them and the
conformance kit can hold a library to its stated order bit for bit.

**Lane order** (reductions): blocks of 1024 terms; in a block, 16 lanes, term
``t`` into lane ``t mod 16``, each lane chained from its start (+0 for a sum,
1 for a product); lanes combined ``i ⊕= i+8`` (i < 8), ``i ⊕= i+4``,
``i ⊕= i+2``, then ``0 ⊕= 1``; blocks combined in a binary tree whose left part
is the largest power of two below the count.

**The odd/even network** (scans): neighbours ``2j`` and ``2j+1`` combine into
pairs, the pairs scan by the same network, result ``2j+1`` is the pairs'
result ``j``, result ``2j`` (j > 0) is the pairs' result ``j−1`` combined with
state ``2j``, the earlier state first. Result ``i`` passes through at most
``D(i) = max(0, 2⌈log₂(i+1)⌉ − 1)`` combinations.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Final

import numpy as np
import numpy.typing as npt

__all__ = ["BLOCK", "LANES", "depth", "lane_reduce", "odd_even_scan"]

BLOCK: Final = 1024
LANES: Final = 16

Combine = Callable[[npt.NDArray[Any], npt.NDArray[Any]], npt.NDArray[Any]]
States = tuple[npt.NDArray[Any], ...]
CombineStates = Callable[[States, States], States]


def _block_tree(blocks: npt.NDArray[Any], combine: Combine) -> npt.NDArray[Any]:
    """Combine ``blocks[..., k]`` in a tree whose left part is the largest power
    of two below the count."""
    n = blocks.shape[-1]
    if n == 1:
        return blocks[..., 0]
    left = 1 << ((n - 1).bit_length() - 1)
    return combine(_block_tree(blocks[..., :left], combine), _block_tree(blocks[..., left:], combine))


def lane_reduce(x: npt.NDArray[Any], combine: Combine, start: object) -> npt.NDArray[Any]:
    """Reduce ``x`` along its last axis in lane order, each lane chained from
    ``start`` (the value every padding term also takes, so it must leave a
    lane's value unchanged: +0 for a float sum, 1 for a real product). Computes
    in ``x``'s dtype; no term gives ``start``."""
    *lead, n = x.shape
    if n == 0:
        return np.full(lead, start, dtype=x.dtype)
    blocks = -(-n // BLOCK)
    padded = np.full((*lead, blocks * BLOCK), start, dtype=x.dtype)
    padded[..., :n] = x
    rows = padded.reshape(*lead, blocks, BLOCK // LANES, LANES)
    lanes = np.full((*lead, blocks, LANES), start, dtype=x.dtype)
    for t in range(BLOCK // LANES):
        lanes = combine(lanes, rows[..., t, :])
    for half in (8, 4, 2, 1):
        lanes = combine(lanes[..., :half], lanes[..., half : 2 * half])
    return _block_tree(lanes[..., 0], combine)


def odd_even_scan(states: States, combine: CombineStates) -> States:
    """Inclusive scan of ``states`` (a tuple of arrays, one state per index of
    their last axis) by the odd/even network."""
    n = states[0].shape[-1]
    if n <= 1:
        return tuple(s.copy() for s in states)
    even = tuple(s[..., 0 : n - n % 2 : 2] for s in states)
    odd = tuple(s[..., 1::2] for s in states)
    pairs = odd_even_scan(combine(even, odd), combine)
    out = tuple(np.empty_like(s) for s in states)
    for o, s, p in zip(out, states, pairs, strict=True):
        o[..., 0] = s[..., 0]
        o[..., 1::2] = p
    later_even = tuple(s[..., 2::2] for s in states)
    if later_even[0].shape[-1]:
        m = later_even[0].shape[-1]
        combined = combine(tuple(p[..., :m] for p in pairs), later_even)
        for o, c in zip(out, combined, strict=True):
            o[..., 2::2] = c
    return out


def depth(i: int) -> int:
    """The most combinations result ``i`` of the odd/even network passes through:
    ``max(0, 2⌈log₂(i+1)⌉ − 1)``."""
    return max(0, 2 * math.ceil(math.log2(i + 1)) - 1) if i > 0 else 0

"""Loads and moves, each copying bits."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from .. import dtype as D
from .. import spec as S
from ..dtype import Dtype
from ..layout import Range
from ..prog import element
from ._bits import Arr, _from_units, _lex_less, order_keys, units

# --------------------------------------------------------------------------
# Loads
# --------------------------------------------------------------------------


def pad(x: npt.ArrayLike, dt: Dtype, fill: bytes, p: S.Pad) -> Arr:
    """``x`` padded by ``p`` and windowed: along axis ``i``, element ``k`` lands
    at ``lo[i] + k·(interior[i] + 1)`` of an axis of ``lo + d + hi +
    interior·max(d − 1, 0)`` elements (positions outside it are cropped),
    every other position holds the element whose bits are ``fill``; then each
    window ``(axis, size, step, dilation)`` replaces its axis by the window
    count and appends an axis of its taps: ``(…, w, …, j) ↦ (…, w·step +
    j·dilation, …)``."""
    arr = np.asarray(x)
    ext = [lo + d + hi + i * max(d - 1, 0)
           for d, lo, hi, i in zip(arr.shape, p.lo, p.hi, p.interior, strict=True)]
    out = np.empty((*ext, dt.itemsize), dtype=np.uint8)
    out[...] = units(np.asarray(element(dt, fill)).reshape(()))
    src = units(arr)
    for index in itertools.product(*(range(d) for d in arr.shape)):
        at = [lo + k * (i + 1) for k, lo, i in zip(index, p.lo, p.interior, strict=True)]
        if all(0 <= q < e for q, e in zip(at, ext, strict=True)):
            out[tuple(at)] = src[index]
    padded = _from_units(out, dt)
    for w in p.windows:
        count = (padded.shape[w.axis] - 1 - w.dilation * (w.size - 1)) // w.step + 1
        idx = (np.arange(count)[:, None] * w.step + np.arange(w.size)[None, :] * w.dilation)
        taken = np.take(padded, idx.reshape(-1), axis=w.axis)
        shape = (*padded.shape[:w.axis], count, w.size, *padded.shape[w.axis + 1:])
        taken = taken.reshape(shape)
        padded = np.moveaxis(taken, w.axis + 1, -1)
    return np.asarray(padded, order="C")


def fold_sources(shape: Sequence[int], p: S.Pad) -> npt.NDArray[np.int64]:
    """For each element of a fold's x (the padded, windowed ``shape``), the C
    order index into ``shape`` of the element a Padded load by ``p`` reads
    there, or −1 where it reads the fill."""
    n = math.prod(shape)
    index = np.arange(n, dtype=np.int64).reshape(tuple(shape))
    fill = np.array([-1], dtype=np.int64).tobytes()
    return pad(index, D.int64, fill, p).astype(np.int64)


# --------------------------------------------------------------------------
# Moves
# --------------------------------------------------------------------------


def gather(x: npt.ArrayLike, index: npt.ArrayLike, axis: int) -> Arr:
    """``x``'s elements at the positions ``index`` holds along ``axis``; a
    position outside [0, d) reads zero bits. Bits are copied."""
    xa, ia = np.asarray(x), np.asarray(index, dtype=np.int64)
    d = xa.shape[axis]
    inside = (ia >= 0) & (ia < d)
    safe = np.where(inside, ia, 0)
    if d == 0:
        return _from_units(np.zeros((*ia.shape, xa.dtype.itemsize), np.uint8), _dt_of(xa))
    u = np.take_along_axis(units(xa), safe[..., None], axis=axis)
    u = np.where(inside[..., None], u, 0).astype(np.uint8)
    return _from_units(u, _dt_of(xa))


def _dt_of(a: Arr) -> Dtype:
    """A dtype whose host element is ``a``'s type (bool for booleans)."""
    return D.of_numpy(a.dtype)


def range_gather(x: npt.ArrayLike, starts: npt.ArrayLike, axis: int, run: int) -> Arr:
    """``dst[…, i, j, …] = x[…, starts[…, i, …] + j, …]`` with the run's axis
    inserted after ``axis``; a position outside [0, d) reads zero bits."""
    xa, sa = np.asarray(x), np.asarray(starts, dtype=np.int64)
    pos = np.expand_dims(sa, axis + 1) + np.arange(run, dtype=np.int64).reshape(
        (run,) + (1,) * (sa.ndim - axis - 1))
    # Take along axis with positions of shape starts[:axis+1] + (run,) + rest.
    flat = pos.reshape((*sa.shape[:axis], sa.shape[axis] * run, *sa.shape[axis + 1:]))
    out = gather(xa, flat, axis)
    return out.reshape((*sa.shape[:axis + 1], run, *sa.shape[axis + 1:]))


def scatter(into: npt.ArrayLike, index: npt.ArrayLike, updates: npt.ArrayLike, axis: int,
            combine: S.Combine) -> tuple[Arr, list[list[Any]]]:
    """Scatter's reference: ``into`` with the updates of a Set applied in C
    order (the last wins, bits copied), an update outside [0, d) dropped.

    Returns the Set result (into's bits where no Set update reaches) and, for
    every element of into (C order), the list of what combines there: into's
    element first, then each update in C order. Add, Max and Min results are
    judged from that list (``exact_sums``, ``reduce_fixed``)."""
    ia = np.asarray(into)
    idx = np.asarray(index, dtype=np.int64)
    up = np.asarray(updates)
    d = ia.shape[axis]
    out = units(ia).copy()
    flat_into = ia.reshape(-1)
    chains: list[list[Any]] = [[flat_into[i]] for i in range(ia.size)]
    up_units = units(up)
    for pos in itertools.product(*(range(n) for n in idx.shape)):
        p = int(idx[pos])
        if not 0 <= p < d:
            continue
        target = (*pos[:axis], p, *pos[axis + 1:])
        if combine is S.Combine.SET:
            out[target] = up_units[pos]
        chains[int(np.ravel_multi_index(target, ia.shape))].append(up[pos])
    return _from_units(out, _dt_of(ia)), chains


def sort(x: npt.ArrayLike, dt: Dtype, axis: int, descending: bool, k: int | None
         ) -> tuple[Arr, npt.NDArray[np.int64]]:
    """A stable sort of ``x`` along ``axis`` in the total order (every NaN one
    key, last; ``descending`` reverses the order, equal elements keeping
    increasing positions), the first ``k`` kept: values (bits copied) and
    int64 positions."""
    xa = np.moveaxis(np.asarray(x), axis, -1)
    keys = order_keys(dt, xa)
    n = xa.shape[-1]
    take = n if k is None else k
    lead = xa.shape[:-1]
    positions = np.empty((*lead, take), dtype=np.int64)
    for row in itertools.product(*(range(m) for m in lead)):
        row_keys = [kk[row] for kk in keys]
        if descending:
            # Stable descending: sort by the negated rank, ties by position.
            ranks = _dense_ranks(row_keys)
            order = np.lexsort((np.arange(n), -ranks))
        else:
            order = np.lexsort(tuple(reversed(row_keys))) if n else np.zeros(0, np.int64)
        positions[row] = order[:take]
    values = np.take_along_axis(units(xa), positions[..., None], axis=-2)
    vals = _from_units(values.astype(np.uint8), dt)
    return np.moveaxis(vals, -1, axis), np.moveaxis(positions, -1, axis)


def _dense_ranks(keys: list[Arr]) -> npt.NDArray[np.int64]:
    """Each element's rank among the distinct keys (equal keys, one rank)."""
    n = keys[0].shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.lexsort(tuple(reversed(keys)))
    ranks = np.empty(n, dtype=np.int64)
    r = 0
    for j, i in enumerate(order):
        if j and any(kk[i] != kk[order[j - 1]] for kk in keys):
            r += 1
        ranks[i] = r
    return ranks


def numbering(keys: npt.ArrayLike, x: npt.ArrayLike, dt: Dtype, right: bool) -> npt.NDArray[np.int64]:
    """For each element of x ``[b…; n]``, the number of keys ``[b…; m]`` of its
    row below it (left) or not above it (right) in the total order."""
    ka, xa = np.asarray(keys), np.asarray(x)
    kk, xk = order_keys(dt, ka), order_keys(dt, xa)
    out = np.zeros(xa.shape, dtype=np.int64)
    m = ka.shape[-1]
    for j in range(m):
        key_j = [k[..., j:j + 1] for k in kk]
        if right:
            counted = ~_lex_less(xk, [np.broadcast_to(k, xa.shape) for k in key_j])
        else:
            counted = _lex_less([np.broadcast_to(k, xa.shape) for k in key_j], xk)
        out += counted
    return out


def assemble(shape: Sequence[int], dt: Dtype, fill: bytes, regions: Sequence[Sequence[Range]],
             pieces: Sequence[npt.ArrayLike]) -> Arr:
    """An array of ``shape``: the fill's bits, then each piece's bits pasted
    into its region in order (the last piece holding an index wins)."""
    out = np.empty((*shape, dt.itemsize), dtype=np.uint8)
    out[...] = units(np.asarray(element(dt, fill)).reshape(()))
    for region, piece in zip(regions, pieces, strict=True):
        pu = units(np.asarray(piece))
        for index in itertools.product(*(range(r.count) for r in region)):
            at = tuple(r.start + i * r.step for r, i in zip(region, index, strict=True))
            out[at] = pu[index]
    return _from_units(out, dt)

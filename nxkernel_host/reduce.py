"""The host library's ``reduce`` hook: rows of terms (``rowterms``) reduced
row by row. Float Sum and Prod in lane order (``lanes``), Max, Min and Arg
by positions (the first with the extreme's bits, the first NaN), integers
and booleans exactly by NumPy, Logsumexp and Moments by the algorithms the
statement gives (``reductions.ALGORITHMS``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from nxkernel_core import dtype as D
from nxkernel_core import spec as S
from nxkernel_core.array import Array
from nxkernel_core.dtype import Dtype
from nxkernel_core.layout import Layout

from . import bytekernels as B
from . import lanes as L
from . import pool, smallrows, views
from .family import Hook
from .rowterms import (
    Outputs,
    Terms,
    canonical_nans,
    copied_input,
    float_terms,
    loop_shape,
    nans_made_canonical,
    round_complex,
    round_float,
    wrap_int,
)

__all__ = ["CHUNK", "extremum_keys", "lane_sum", "prepare_reduce", "reduce"]

Arr = npt.NDArray[Any]


#: Elements of one piece of a lane-order reduction that converts or
#: transforms its terms first: the piece's temporaries stay in L2.
CHUNK: Final = 1 << 15

_I64_MAX: Final = np.iinfo(np.int64).max
_I64_MIN: Final = np.iinfo(np.int64).min


# ---------------------------------------------------------------------------
# Lane-order reductions of rows
# ---------------------------------------------------------------------------

#: A block kernel: (terms piece, its block values out, first row, end row).
_BlockKernel = Callable[[Arr, Arr, int, int], None]


def _pieces(rows: int, n: int, size: int) -> list[tuple[int, int, int, int]]:
    """Pieces ``(r0, r1, b0, b1)`` of about ``size`` terms: rows r0..r1, blocks
    b0..b1 of 1024 terms, covering every block of every row once."""
    nb = -(-n // L.BLOCK)
    if n >= size:
        per = max(1, size // L.BLOCK)
        return [(r, r + 1, b, min(b + per, nb)) for r in range(rows) for b in range(0, nb, per)]
    per = max(1, size // max(n, 1))
    return [(r, min(r + per, rows), 0, nb) for r in range(0, rows, per)]


def _lane_blocks(rows: Arr, carrier: npt.DTypeLike, acc: npt.DTypeLike, kernel: _BlockKernel,
                 prep: Callable[[Arr, int, int], Arr] | None = None) -> Arr:
    """Each row's block values ``(rows, blocks)`` in ``acc``: ``kernel`` over
    the terms in ``carrier`` (after ``prep(piece, r0, r1)`` where given),
    piece by piece over the threads. A block's value depends on its terms
    alone, so neither the pieces nor the threads change any bit."""
    r, n = rows.shape
    nb = -(-n // L.BLOCK)
    blocks = np.empty((r, nb), acc)
    direct = prep is None and rows.dtype == carrier and rows.flags.c_contiguous
    if direct and pool.parts_for(2, r * n) == 1:
        # Few terms, already in place: one kernel call over every block, on
        # this thread (a block's value depends on its terms alone).
        kernel(rows, blocks, 0, r)
        return blocks
    # Terms already in place need no staging: one piece per thread saves the
    # per-piece calls. Others convert piece by piece, in cache.
    size = -(-r * n // pool.count()) if direct else CHUNK
    pieces = _pieces(r, n, max(size, 1))

    def work(chunk: Sequence[tuple[int, int, int, int]]) -> None:
        for r0, r1, b0, b1 in chunk:
            x = np.ascontiguousarray(rows[r0:r1, b0 * L.BLOCK:min(b1 * L.BLOCK, n)],
                                     dtype=carrier)
            if prep is not None:
                x = prep(x, r0, r1)
            out = np.empty((r1 - r0, b1 - b0), acc)
            kernel(x, out, r0, r1)
            blocks[r0:r1, b0:b1] = out

    spans = pool.spans(len(pieces), pool.parts_for(len(pieces), r * n))
    pool.parallel([functools.partial(work, pieces[a:b]) for a, b in spans])
    return blocks


def _sum_kernel(x: Arr, out: Arr, r0: int, r1: int) -> None:
    L.sum_blocks(x, out)


def _prod_kernel(x: Arr, out: Arr, r0: int, r1: int) -> None:
    L.prod_blocks(x, out)


def _few_terms(terms: Terms, carrier: npt.DTypeLike, mul: bool) -> Arr:
    """Lane order for at most 16 terms, column by column over the results: each
    present lane holds one term, absent lanes drop out of the lane
    combination (x + 0 is x, and x·1 is x, for every lane a sum from +0 or a
    product from 1 can hold), and a sum ends with + 0, which is the +0 start's
    only trace: a lane tree from the terms alone is −0 exactly where every
    term is. Reads the terms where they lie: no copy into rows."""
    n = terms.count
    keep = terms.view.ndim - terms.reduced
    out = np.empty(terms.view.shape[:keep], carrier)
    lead = terms.view.shape[0] if keep else 1
    inner = terms.results // max(lead, 1)
    # Slabs of the first kept axis of about CHUNK results, spread over threads:
    # the lanes of a slab stay in cache between the column operations.
    per = max(1, CHUNK // max(inner, 1))
    slabs = [slice(a, min(a + per, lead)) for a in range(0, lead, per)]

    def work(part: Sequence[slice]) -> None:
        op = np.multiply if mul else np.add
        for sl in part:
            lanes = [np.asarray(terms.term(t, sl), dtype=carrier) for t in range(n)]
            present = n
            for half in (8, 4, 2, 1):
                for i in range(half):
                    if i + half < present:
                        lanes[i] = op(lanes[i], lanes[i + half])
                present = min(present, half)
            res = lanes[0] if mul else np.add(lanes[0], 0, dtype=carrier)
            if keep:
                out[sl] = res
            else:
                out[...] = res

    spans = pool.spans(len(slabs), pool.parts_for(len(slabs), terms.results * n))
    with np.errstate(all="ignore"):
        pool.parallel([functools.partial(work, slabs[a:b]) for a, b in spans])
    return out.reshape(-1)


def lane_sum(rows: Arr, carrier: npt.DTypeLike, acc: npt.DTypeLike | None = None,
             prep: Callable[[Arr, int, int], Arr] | None = None) -> Arr:
    """Each row's lane-order sum of its terms in ``carrier`` (after ``prep``),
    accumulated in ``acc`` (the carrier by default); +0 for no term."""
    acc = carrier if acc is None else acc
    if rows.shape[1] == 0:
        return np.zeros(rows.shape[0], acc)
    blocks = _lane_blocks(rows, carrier, acc, _sum_kernel, prep)
    if blocks.shape[1] > 1:
        L.tree_add(blocks)
    return blocks[:, 0].copy()


def _lane_prod(rows: Arr, carrier: npt.DTypeLike) -> Arr:
    """Each row's lane-order product in ``carrier``; 1 for no term."""
    if rows.shape[1] == 0:
        return np.ones(rows.shape[0], carrier)
    blocks = _lane_blocks(rows, carrier, carrier, _prod_kernel)
    if blocks.shape[1] > 1:
        L.tree_mul(blocks)
    return blocks[:, 0].copy()


def _lane_cprod(rows: Arr, dt: Dtype) -> Arr:
    """Each row's lane-order complex product by Prog's Mul, lanes chained from
    their first terms; 1 for no term."""
    r, n = rows.shape
    if n == 0:
        return np.ones(r, dt.numpy_dtype)
    part = np.float32 if dt is D.complex64 else np.float64
    nb = -(-n // L.BLOCK)
    bre = np.empty((r, nb), part)
    bim = np.empty((r, nb), part)
    L.cprod_blocks(np.ascontiguousarray(rows.real, dtype=part),
                   np.ascontiguousarray(rows.imag, dtype=part), bre, bim)
    L.tree_cmul(bre, bim)
    out = np.empty(r, dt.numpy_dtype)
    out.real = bre[:, 0]
    out.imag = bim[:, 0]
    return out


# ---------------------------------------------------------------------------
# Extremes and positions
# ---------------------------------------------------------------------------


def _order_key(c: Arr) -> Arr:
    """int64 keys of float32/float64 values in the total order (−0 below +0),
    equal exactly where the bits are."""
    signed = c.view(np.int32 if c.dtype == np.float32 else np.int64).astype(np.int64)
    mask = np.int64(0x7FFFFFFF if c.dtype == np.float32 else _I64_MAX)
    return np.where(signed < 0, ~(signed & mask), signed)


def _complex_keys(rows: Arr, is_max: bool) -> Arr:
    """Dense int64 ranks of complex values in Maximum's order (real part, then
    imaginary part, −0 below +0), every NaN above all for Max and below all
    for Min."""
    part = rows.real.dtype
    kr = _order_key(np.ascontiguousarray(rows.real, dtype=part)).ravel()
    ki = _order_key(np.ascontiguousarray(rows.imag, dtype=part)).ravel()
    order = np.lexsort((ki, kr))
    change = np.ones(order.size, bool)
    change[1:] = (np.diff(kr[order]) != 0) | (np.diff(ki[order]) != 0)
    rank = np.empty(order.size, np.int64)
    rank[order] = np.cumsum(change)
    nan = (np.isnan(rows.real) | np.isnan(rows.imag)).ravel()
    rank[nan] = _I64_MAX if is_max else _I64_MIN
    return rank.reshape(rows.shape)


def extremum_keys(rows: Arr, term: Dtype, is_max: bool) -> Arr:
    """Keys ordering the terms as Maximum and Minimum do, equal exactly where
    Arg's "same bits" holds: values for integers, truth for booleans, total
    order keys for floats with every NaN above all (Max) or below all (Min)."""
    if term.is_bool:
        return (rows.view(np.uint8) != 0) if rows.dtype == np.bool_ else rows
    if term.is_int:
        return rows.astype(D.carrier(term).numpy_dtype, copy=False)
    if term.is_complex:
        return _complex_keys(rows, is_max)
    c = float_terms(rows, term)
    return np.where(np.isnan(c), _I64_MAX if is_max else _I64_MIN, _order_key(c))


def _float_positions(c: Arr, is_max: bool) -> Arr:
    """Per row of float32/float64 ``c``, the first position of Maximum's (or
    Minimum's) extreme with its bits, or of the first NaN."""
    pos: Arr = np.argmax(c, axis=1) if is_max else np.argmin(c, axis=1)
    # NumPy's argmax gives the first NaN, or the first term equal to the
    # extreme; only a zero extreme may have the other sign's bits first.
    vals = c[np.arange(c.shape[0]), pos]
    zero = np.flatnonzero(vals == 0)
    if zero.size:
        sub = c[zero]
        hit = (sub == 0) & (np.signbit(sub) != is_max)
        has = hit.any(axis=1)
        pos[zero[has]] = hit.argmax(axis=1)[has]
    return pos


def _positions(rows: Arr, term: Dtype, is_max: bool) -> Arr:
    """Per row, the position of the first term with the extreme's bits (the
    first NaN where there is one), as Arg states it."""
    r, n = rows.shape
    if r == 0 or n == 0:
        return np.zeros(r, np.int64)
    if term.is_float:
        c = float_terms(rows, term)
        if r == 1 and pool.parts_for(2, n) > 1:
            return _split_positions(c, is_max)
        return _float_positions(c, is_max)
    keys = extremum_keys(rows, term, is_max)
    found: Arr = np.argmax(keys, axis=1) if is_max else np.argmin(keys, axis=1)
    return found


def _split_positions(c: Arr, is_max: bool) -> Arr:
    """``_float_positions`` of one long row, its spans on the threads, then the
    spans' winners in order: a later one wins only where it is beyond the
    earlier (a NaN beyond every number), so the first one stays."""
    n = c.shape[1]
    spans = pool.spans(n, pool.parts_for(n, n))
    found = [0] * len(spans)

    def work(i: int) -> None:
        a, b = spans[i]
        found[i] = a + int(_float_positions(c[:, a:b], is_max)[0])

    pool.parallel([functools.partial(work, i) for i in range(len(spans))])
    cand = np.array(found)
    keys = extremum_keys(c[:, cand], D.float32 if c.dtype == np.float32 else D.float64, is_max)[0]
    return np.array([cand[np.argmax(keys) if is_max else np.argmin(keys)]])


# ---------------------------------------------------------------------------
# The reductions of rows
# ---------------------------------------------------------------------------


def _logsumexp(rows: Arr, term: Dtype) -> Arr:
    """Per row, float64: m the terms' maximum; m + log Σ exp(x − m), x − m and
    exp in the carrier, the sum in float64 in lane order; the special values
    of the contract where m is not finite or there is no term."""
    r, n = rows.shape
    if n == 0:
        return np.full(r, -np.inf)
    c = float_terms(rows, term)
    m = np.max(c, axis=1)
    finite = np.isfinite(m)
    safe = np.where(finite, m, 0).astype(c.dtype)

    def shifted(x: Arr, r0: int, r1: int) -> Arr:
        y: Arr = np.subtract(x, safe[r0:r1, None], dtype=c.dtype)
        np.exp(y, out=y)
        return y

    with np.errstate(all="ignore"):
        s = lane_sum(c, c.dtype, np.float64, shifted)
        out = m.astype(np.float64) + np.log(s)
    result: Arr = np.where(finite, out, m.astype(np.float64))
    return result


def _sqdev_kernel(mean: Arr) -> _BlockKernel:
    def kernel(x: Arr, out: Arr, r0: int, r1: int) -> None:
        L.sqdev_blocks(x, mean[r0:r1], out)
    return kernel


def _moments(rows: Arr, term: Dtype) -> tuple[Arr, Arr]:
    """Per row, float64: the mean, the lane-order float64 sum of the terms over
    n, then the variance, the lane-order float64 sum of (x − mean)² over n;
    NaN for no term."""
    r, n = rows.shape
    if n == 0:
        return np.full(r, np.nan), np.full(r, np.nan)
    c = float_terms(rows, term)
    with np.errstate(all="ignore"):
        mean = lane_sum(c, c.dtype, np.float64) / n
        blocks = _lane_blocks(c, c.dtype, np.float64, _sqdev_kernel(mean))
        if blocks.shape[1] > 1:
            L.tree_add(blocks)
        var = blocks[:, 0] / n
    return mean, var


def _reduce_rows(red: S.Reduction, term: Dtype, dt: Dtype, terms: Terms) -> list[Arr]:
    """The results of ``red`` over each result's terms of ``term``, in the host
    elements of the destinations (``dt``, and int64 for Arg's positions); a
    float or complex Sum's, Prod's, Logsumexp's or Moments' NaN (each NaN
    part) the positive quiet NaN (``canonical_nans``): which NaN an addition
    keeps is the compiled code's choice, which may differ between two
    compilations of one loop."""
    results = _results(red, term, dt, terms)
    if nans_made_canonical(red, term):
        for v in results:
            canonical_nans(v)
    return results


def _results(red: S.Reduction, term: Dtype, dt: Dtype, terms: Terms) -> list[Arr]:
    """``_reduce_rows``' results as the reductions compute them."""
    carrier = D.carrier(term).numpy_dtype
    if red is S.Monoid.SUM or red is S.Monoid.PROD:
        add = red is S.Monoid.SUM
        if term.is_float and 1 <= terms.count <= 16 and terms.results >= 16:
            # A few terms per result, as in a window: columns of the terms
            # where they lie save the copy into rows.
            return [round_float(dt, _few_terms(terms, carrier, not add))]
        rows = terms.rows
        if term.is_float:
            c = float_terms(rows, term)
            v = lane_sum(c, c.dtype) if add else _lane_prod(c, c.dtype)
            return [round_float(dt, v)]
        if term.is_complex:
            part = np.float32 if term is D.complex64 else np.float64
            if add:
                return [round_complex(dt, lane_sum(rows.real, part), lane_sum(rows.imag, part))]
            v = _lane_cprod(rows, term)
            return [round_complex(dt, v.real.copy(), v.imag.copy())]
        wide = rows.astype(carrier, copy=False)
        # Integers wrap in their carrier: every order gives the same bits.
        v = wide.sum(axis=1, dtype=carrier) if add else wide.prod(axis=1, dtype=carrier)
        return [wrap_int(dt, v)]
    rows = terms.rows
    if isinstance(red, S.Logsumexp):
        return [round_float(dt, _logsumexp(rows, term))]
    if isinstance(red, S.Moments):
        mean, var = _moments(rows, term)
        return [round_float(dt, mean), round_float(dt, var)]
    is_max = red is S.Monoid.MAX or (isinstance(red, S.Arg) and red.extreme is S.Extreme.MAX)
    pos = _positions(rows, term, is_max)
    value: Arr
    if term.is_bool:
        truth = extremum_keys(rows, term, is_max)
        value = np.asarray(truth.any(axis=1) if is_max else truth.all(axis=1))
    else:
        value = rows[np.arange(rows.shape[0]), pos]
        if term is D.float8_e5m2:
            # The extreme (in the carrier) rounds once into the destination,
            # as a scan's does: no store makes an infinity of e5m2.
            value = np.where(np.isinf(value), round_float(dt, float_terms(value, term)), value)
    return [value, pos.astype(np.int64)] if isinstance(red, S.Arg) else [value]


# ---------------------------------------------------------------------------
# The reduce kernel
# ---------------------------------------------------------------------------


def reduce(spec: S.Reduce, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
    """``S.reduce`` of a call that fits, the door passed: each reduction of
    ``spec.reductions`` over ``spec.axes`` of its program output, into the
    destinations in order."""
    loop = loop_shape(spec.loads, operands)
    assert loop is not None  # the call fits
    outs = Outputs(spec.prog, spec.loads, operands, loop)
    results: list[Arr] = []
    for red, k, dt in spec.reductions:
        terms = Terms(outs.get(k), spec.axes)
        results += _reduce_rows(red, spec.prog.out_dtypes[k], dt, terms)
    for dst, v in zip(dsts, results, strict=True):
        views.store(dst, v.reshape(dst.shape))


def prepare_reduce(spec: S.Reduce, dsts: tuple[tuple[Dtype, Layout], ...],
                   operands: tuple[tuple[Dtype, Layout], ...]) -> Hook | None:
    """``reduce`` prepared for one signature of a call that fits (the
    caller's warm path)."""
    (x_dt, x_layout), *rest = operands
    if (rest or not isinstance(spec.loads[0], S.Plain) or x_dt.is_sub_byte
            or not x_layout.is_contiguous() or x_layout.numel == 0
            or any(copied_input(spec.prog, k) != 0 for _, k, _ in spec.reductions)):
        return reduce
    # One contiguous Plain operand whose every reduced output is the operand
    # itself (nx.sum, nx.max, ...): its view read straight, as Outputs.get
    # would give it, without Outputs' and the loop's steps.
    lane = _prepared_sum(spec, x_dt, x_layout) or _prepared_extreme(spec, x_dt, x_layout)
    if lane is not None:
        return lane
    read = views.reader(x_dt, x_layout)
    terms = [(red, spec.prog.out_dtypes[k], dt) for red, k, dt in spec.reductions]
    axes = spec.axes

    def small(sp: S.Reduce, ds: Sequence[Array], ops: Sequence[Array]) -> None:
        y = read(ops[0])
        results: list[Arr] = []
        for red, term, dt in terms:
            results += _reduce_rows(red, term, dt, Terms(y, axes))
        for dst, v in zip(ds, results, strict=True):
            views.store(dst, v.reshape(dst.shape))

    return small


def _prepared_sum(spec: S.Reduce, dt: Dtype, layout: Layout) -> Hook | None:
    """The small sum of a float32 or float64 operand (contiguous, its
    reduced axes last) into its own dtype, every row one block of at most
    ``BLOCK`` terms on this thread: ``sum_blocks`` straight from the
    operand's bytes into the destination's, the step ``lane_sum`` takes for
    such rows (one block: no tree; below ``MIN_PARALLEL``: no threads), so
    the same bits (``bytekernels.sum_rows``, from the memories' bytes).
    None for any other reduction."""
    rank = len(layout.shape)
    k = len(spec.axes)
    if len(spec.reductions) != 1:
        return None
    (red, _, result), = spec.reductions
    if (red is not S.Monoid.SUM or result is not dt or dt not in (D.float32, D.float64)
            or spec.axes != tuple(range(rank - k, rank))):
        return None
    n = math.prod(layout.shape[rank - k:])
    rows = math.prod(layout.shape[:rank - k])
    # _reduce_rows takes the columns' path for a few terms per result of many
    # results; and rows of no term are +0 without a kernel.
    if not 1 <= n <= L.BLOCK or rows * n >= pool.MIN_PARALLEL or (n <= 16 and rows >= 16):
        return None
    first = layout.offset * dt.numpy_dtype.itemsize
    wide = dt is D.float64
    kernel = B.sum_rows

    def lane_sum(sp: S.Reduce, ds: Sequence[Array], ops: Sequence[Array]) -> None:
        buf = ops[0].buffer
        kernel(wide, buf.memory.host_bytes, buf.offset + first, rows, n,  # type: ignore[arg-type]
               ds[0].buffer.memory.host_bytes)  # type: ignore[arg-type]

    return lane_sum


#: Terms up to which a prepared Max, Min or Arg reduction finds its rows'
#: extremes in one compiled call (``smallrows.extremes``: about 0.3 ns a
#: term), not by NumPy's argmax and the steps around it (about 20 µs a
#: call, then 0.1 ns a term; measured, float32 and float64: 32768 terms
#: 10 µs against 21, 65536 terms 18–20 µs against 22–28).
EXTREME_TERMS: Final = 1 << 15

#: ``smallrows.extremes``' terms: width in bytes, and a float's magnitude
#: bits and infinity's bits (0 and 0 for an integer). A narrow float's
#: extreme is that of its float32 values (exact): its bits order it alike.
_EXTREME_TERMS_OF: Final = {
    D.float64: (8, 0x7FFFFFFFFFFFFFFF, 0x7FF0000000000000), D.float32: (4, 0x7FFFFFFF, 0x7F800000),
    D.float16: (2, 0x7FFF, 0x7C00), D.bfloat16: (2, 0x7FFF, 0x7F80),
    D.int64: (8, 0, 0), D.int32: (4, 0, 0), D.int16: (2, 0, 0)}

_NO_DESTINATION: Final = np.empty(0, np.uint8)


def _prepared_extreme(spec: S.Reduce, dt: Dtype, layout: Layout) -> Hook | None:
    """The small Max, Min or Arg reduction of a float64, float32, float16,
    bfloat16, int64, int32 or int16 operand (contiguous, its reduced axes
    last, at most ``EXTREME_TERMS`` terms) into its own dtype:
    ``smallrows.extremes`` from the operand's bytes into the destinations',
    by the rule ``_positions`` keeps (the first term with the extreme's bits,
    or the first NaN; the value that term), so the same bits. None for any
    other reduction."""
    rank = len(layout.shape)
    k = len(spec.axes)
    if len(spec.reductions) != 1:
        return None
    (red, _, result), = spec.reductions
    is_arg = isinstance(red, S.Arg)
    if (not (is_arg or red is S.Monoid.MAX or red is S.Monoid.MIN) or result is not dt
            or dt not in _EXTREME_TERMS_OF or spec.axes != tuple(range(rank - k, rank))
            or layout.numel > EXTREME_TERMS):
        return None
    n = math.prod(layout.shape[rank - k:])
    rows = math.prod(layout.shape[:rank - k])
    first = layout.offset * dt.numpy_dtype.itemsize
    width, fmask, inf = _EXTREME_TERMS_OF[dt]
    is_max = red is S.Monoid.MAX or (isinstance(red, S.Arg) and red.extreme is S.Extreme.MAX)
    kernel = smallrows.extremes
    none = _NO_DESTINATION

    def extreme(sp: S.Reduce, ds: Sequence[Array], ops: Sequence[Array]) -> None:
        buf = ops[0].buffer
        kernel(width, fmask, inf, is_max, buf.memory.host_bytes,  # type: ignore[arg-type]
               buf.offset + first, rows, n,
               ds[0].buffer.memory.host_bytes,  # type: ignore[arg-type]
               ds[1].buffer.memory.host_bytes if is_arg else none)  # type: ignore[arg-type]

    return extreme

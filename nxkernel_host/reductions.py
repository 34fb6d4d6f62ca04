"""The host library's ``reduce``, ``scan`` and ``fold`` kernels.

A reduction's or scan's terms are one program output over the loop: a copy
of an operand is read through its load with no evaluation (the view itself
for a Plain load), any other output is the program evaluated by
``nxkernel_host.program``. The terms are laid out as rows, one per result
index, the reduced (or scanned) terms along each row in C order of those
axes, and reduced row by row:

- float Sum and Prod in lane order (``lanes``), Max, Min and Arg by
  positions (the first with the extreme's bits, the first NaN), integers
  and booleans exactly by NumPy, Logsumexp and Moments by the algorithms the
  statement gives (``ALGORITHMS``);
- float Sum and Prod scans, and Logsumexp and Moments scans, by the odd/even
  network; integer, boolean, Max, Min and Arg scans exactly by NumPy.

Every float result rounds once into its destination (``dtype.of_float``).
A fold adds, at each element of its destination, the x elements a padded
load reads from it, tap by tap in C order, from +0.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from nxkernel_core import dtype as D
from nxkernel_core import shape as SH
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_core.door import door
from nxkernel_core.dtype import Dtype
from nxkernel_core.kernel import Call, KernelStatement
from nxkernel_core.layout import Layout
from nxkernel_core.prog import Convert, In, Op1, Prog

from . import lanes as L
from . import program, views
from .family import Family, Hook
from .loads import load

__all__ = ["ALGORITHMS", "ASSOCIATION", "FAMILY", "fold", "reduce", "scan"]

Arr = npt.NDArray[Any]

#: Elements of one piece of a lane-order reduction that converts or
#: transforms its terms first: the piece's temporaries stay in L2.
CHUNK: Final = 1 << 15

_I64_MAX: Final = np.iinfo(np.int64).max
_I64_MIN: Final = np.iinfo(np.int64).min


# ---------------------------------------------------------------------------
# Terms
# ---------------------------------------------------------------------------


def _copied_input(prog: Prog, output: int) -> int | None:
    """The operand that output ``output`` is, unchanged (``In(i)`` or a Copy of
    it), or None."""
    node = prog.nodes[prog.outs[output]]
    if isinstance(node, Op1) and node.kind is Convert.COPY:
        node = prog.nodes[node.x]
    return node.index if isinstance(node, In) else None


def _loop(loads: Sequence[S.Load], operands: Sequence[Array]) -> tuple[int, ...] | None:
    """The loop's shape, read from the first load; None where it does not fit."""
    first, op = loads[0], operands[0]
    if isinstance(first, S.Padded):
        got = SH.padded(op.shape, first.pad)
        return None if isinstance(got, SH.Error) else got
    return op.shape


class _Outputs:
    """A program's outputs over the loop, each computed once when first asked:
    an operand's copy is its load (a view for a Plain load), any other output
    the program evaluated over the whole loop."""

    def __init__(self, prog: Prog, loads: Sequence[S.Load], operands: Sequence[Array],
                 loop: tuple[int, ...]) -> None:
        self._prog = prog
        self._loads = loads
        self._operands = operands
        self._loop = loop
        self._evaluated: list[Arr] | None = None

    def get(self, output: int) -> Arr:
        """Output ``output`` at every index of the loop."""
        i = _copied_input(self._prog, output)
        if i is not None:
            a = self._operands[i]
            if isinstance(self._loads[i], S.Plain) and not a.dtype.is_sub_byte:
                # The operand's own view: no evaluation and no copy. Writeable
                # (the kernels never write it) because NumPy's argmax and
                # argmin copy a read-only array first.
                return a.numpy_view()
            # Any other load of a copy: the load itself, no evaluation.
            return load(a, self._loads[i], self._loop)
        if self._evaluated is None:
            inputs = [load(a, ld, self._loop)
                      for a, ld in zip(self._operands, self._loads, strict=True)]
            outs = [np.empty(self._loop, dt.numpy_dtype) for dt in self._prog.out_dtypes]
            # Box by box over the threads, each box's temporaries in cache.
            program.map_into(program.compile(self._prog), inputs, self._loop, outs, False)
            self._evaluated = outs
        return self._evaluated[output]


class _Terms:
    """One output's terms: ``view``, the output with the reduced axes last (no
    copy), and ``rows``, one row per result index with its terms in C order of
    the reduced axes (a view where strides allow, made when first asked)."""

    def __init__(self, y: Arr, axes: Sequence[int]) -> None:
        kept = [a for a in range(y.ndim) if a not in axes]
        self.view = y.transpose(*kept, *axes)
        self.reduced = len(axes)
        self.count = math.prod(y.shape[a] for a in axes)
        self.results = math.prod(y.shape[a] for a in kept)
        self._rows: Arr | None = None

    @property
    def rows(self) -> Arr:
        if self._rows is None:
            self._rows = self.view.reshape(self.results, self.count)
        return self._rows

    def term(self, t: int, lead: slice) -> Arr:
        """Term ``t`` of the results whose first kept index is in ``lead`` (all
        results without kept axes), shaped as those results: a view."""
        red = np.unravel_index(t, self.view.shape[self.view.ndim - self.reduced:])
        keep = self.view.ndim - self.reduced
        index: list[slice | int] = [lead] if keep else []
        index += [slice(None)] * max(keep - 1, 0)
        index += [int(i) for i in red]
        view: Arr = self.view[tuple(index)]
        return view


# ---------------------------------------------------------------------------
# Rounding into destinations
# ---------------------------------------------------------------------------


def _round(dt: Dtype, v: Arr) -> Arr:
    """Float values ``v`` (float32 or float64) rounded once into float ``dt``."""
    if v.dtype == dt.numpy_dtype:
        return v
    # A signalling NaN quieted and an overflow to ±inf are the store rule's, not
    # faults to warn of (the hardware flags them: "invalid value in cast").
    with np.errstate(invalid="ignore", over="ignore"):
        if dt is D.float32 or dt is D.float64:
            # An IEEE conversion rounds once, to nearest, as the store rule does.
            return v.astype(dt.numpy_dtype)
        return D.of_float(dt, v.astype(np.float64))


def _round_complex(dt: Dtype, re: Arr, im: Arr) -> Arr:
    """A complex result of ``dt`` from its parts, each rounded once."""
    part = D.float32 if dt is D.complex64 else D.float64
    out = np.empty(re.shape, dt.numpy_dtype)
    out.real = _round(part, re)
    out.imag = _round(part, im)
    return out


def _wrap(dt: Dtype, v: Arr) -> Arr:
    """Integers ``v`` of ``dt``'s carrier wrapped into ``dt``: int4 and uint4
    keep their low four bits, other dtypes are their carrier."""
    if dt is D.int4:
        return (((v.astype(np.int16) + 8) & 15) - 8).astype(dt.numpy_dtype)
    if dt is D.uint4:
        return (v.astype(np.uint16) & 15).astype(dt.numpy_dtype)
    return v.astype(dt.numpy_dtype, copy=False)


def _float_terms(rows: Arr, term: Dtype) -> Arr:
    """Float terms in their carrier: float32 for the narrow floats (exact)."""
    return rows if term in (D.float32, D.float64) else rows.astype(np.float32)


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
    if direct and L.parts_for(2, r * n) == 1:
        # Few terms, already in place: one kernel call over every block, on
        # this thread (a block's value depends on its terms alone).
        kernel(rows, blocks, 0, r)
        return blocks
    # Terms already in place need no staging: one piece per thread saves the
    # per-piece calls. Others convert piece by piece, in cache.
    size = -(-r * n // L.workers()) if direct else CHUNK
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

    spans = L.spans(len(pieces), L.parts_for(len(pieces), r * n))
    L.parallel([functools.partial(work, pieces[a:b]) for a, b in spans])
    return blocks


def _sum_kernel(x: Arr, out: Arr, r0: int, r1: int) -> None:
    L.sum_blocks(x, out)


def _prod_kernel(x: Arr, out: Arr, r0: int, r1: int) -> None:
    L.prod_blocks(x, out)


def _few_terms(terms: _Terms, carrier: npt.DTypeLike, mul: bool) -> Arr:
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

    spans = L.spans(len(slabs), L.parts_for(len(slabs), terms.results * n))
    with np.errstate(all="ignore"):
        L.parallel([functools.partial(work, slabs[a:b]) for a, b in spans])
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


def _keys(rows: Arr, term: Dtype, is_max: bool) -> Arr:
    """Keys ordering the terms as Maximum and Minimum do, equal exactly where
    Arg's "same bits" holds: values for integers, truth for booleans, total
    order keys for floats with every NaN above all (Max) or below all (Min)."""
    if term.is_bool:
        return (rows.view(np.uint8) != 0) if rows.dtype == np.bool_ else rows
    if term.is_int:
        return rows.astype(D.carrier(term).numpy_dtype, copy=False)
    if term.is_complex:
        return _complex_keys(rows, is_max)
    c = _float_terms(rows, term)
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
        c = _float_terms(rows, term)
        if r == 1 and L.parts_for(2, n) > 1:
            return _split_positions(c, is_max)
        return _float_positions(c, is_max)
    keys = _keys(rows, term, is_max)
    found: Arr = np.argmax(keys, axis=1) if is_max else np.argmin(keys, axis=1)
    return found


def _split_positions(c: Arr, is_max: bool) -> Arr:
    """``_float_positions`` of one long row, its spans on the threads, then the
    spans' winners in order: a later one wins only where it is beyond the
    earlier (a NaN beyond every number), so the first one stays."""
    n = c.shape[1]
    spans = L.spans(n, L.parts_for(n, n))
    found = [0] * len(spans)

    def work(i: int) -> None:
        a, b = spans[i]
        found[i] = a + int(_float_positions(c[:, a:b], is_max)[0])

    L.parallel([functools.partial(work, i) for i in range(len(spans))])
    cand = np.array(found)
    keys = _keys(c[:, cand], D.float32 if c.dtype == np.float32 else D.float64, is_max)[0]
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
    c = _float_terms(rows, term)
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
    c = _float_terms(rows, term)
    with np.errstate(all="ignore"):
        mean = lane_sum(c, c.dtype, np.float64) / n
        blocks = _lane_blocks(c, c.dtype, np.float64, _sqdev_kernel(mean))
        if blocks.shape[1] > 1:
            L.tree_add(blocks)
        var = blocks[:, 0] / n
    return mean, var


def _reduce_rows(red: S.Reduction, term: Dtype, dt: Dtype, terms: _Terms) -> list[Arr]:
    """The results of ``red`` over each result's terms of ``term``, in the host
    elements of the destinations (``dt``, and int64 for Arg's positions)."""
    carrier = D.carrier(term).numpy_dtype
    if red is S.Monoid.SUM or red is S.Monoid.PROD:
        add = red is S.Monoid.SUM
        if term.is_float and 1 <= terms.count <= 16 and terms.results >= 16:
            # A few terms per result, as in a window: columns of the terms
            # where they lie save the copy into rows.
            return [_round(dt, _few_terms(terms, carrier, not add))]
        rows = terms.rows
        if term.is_float:
            c = _float_terms(rows, term)
            v = lane_sum(c, c.dtype) if add else _lane_prod(c, c.dtype)
            return [_round(dt, v)]
        if term.is_complex:
            part = np.float32 if term is D.complex64 else np.float64
            if add:
                return [_round_complex(dt, lane_sum(rows.real, part), lane_sum(rows.imag, part))]
            v = _lane_cprod(rows, term)
            return [_round_complex(dt, v.real.copy(), v.imag.copy())]
        wide = rows.astype(carrier, copy=False)
        # Integers wrap in their carrier: every order gives the same bits.
        v = wide.sum(axis=1, dtype=carrier) if add else wide.prod(axis=1, dtype=carrier)
        return [_wrap(dt, v)]
    rows = terms.rows
    if isinstance(red, S.Logsumexp):
        return [_round(dt, _logsumexp(rows, term))]
    if isinstance(red, S.Moments):
        mean, var = _moments(rows, term)
        return [_round(dt, mean), _round(dt, var)]
    is_max = red is S.Monoid.MAX or (isinstance(red, S.Arg) and red.extreme is S.Extreme.MAX)
    pos = _positions(rows, term, is_max)
    value: Arr
    if term.is_bool:
        truth = _keys(rows, term, is_max)
        value = np.asarray(truth.any(axis=1) if is_max else truth.all(axis=1))
    else:
        value = rows[np.arange(rows.shape[0]), pos]
        if term is D.float8_e5m2:
            # The extreme (in the carrier) rounds once into the destination,
            # as a scan's does: no store makes an infinity of e5m2.
            value = np.where(np.isinf(value), _round(dt, _float_terms(value, term)), value)
    return [value, pos.astype(np.int64)] if isinstance(red, S.Arg) else [value]


# ---------------------------------------------------------------------------
# The reduce kernel
# ---------------------------------------------------------------------------


def _reduce_misfit(spec: S.Reduce, dsts: Sequence[Array], operands: Sequence[Array]
                   ) -> Answer | None:
    """The refusal for a call that does not fit, checked before any work."""
    return _reduce_misfit_of(spec, tuple((d.dtype, d.shape) for d in dsts),
                             tuple((a.dtype, a.shape) for a in operands))


@functools.lru_cache(maxsize=256)
def _reduce_misfit_of(spec: S.Reduce, dsts: tuple[tuple[Dtype, tuple[int, ...]], ...],
                      operands: tuple[tuple[Dtype, tuple[int, ...]], ...]) -> Answer | None:
    # Cached on the dtypes and shapes it reads: a repeated call skips the
    # refusal rules and Shape (most of a small call's time).
    if len(operands) != len(spec.loads) or len(dsts) != spec.n_results() or not operands:
        return Answer.BAD_ARITY
    first = spec.loads[0]
    rank = first.pad.loaded_rank if isinstance(first, S.Padded) else len(operands[0][1])
    found = SH.reduce_refusal(spec.prog, rank, spec.reductions, [d for d, _ in dsts],
                              [a for a, _ in operands], spec.loads)
    if found is not None:
        return found[0]
    want = SH.reduce(spec, [s for _, s in operands])
    if isinstance(want, SH.Error) or any(d[1] != w for d, w in zip(dsts, want, strict=True)):
        return Answer.SHAPE_MISMATCH
    return None


def reduce(spec: S.Reduce, dsts: Sequence[Array], operands: Sequence[Array]) -> Answer:
    """``S.reduce``: each reduction of ``spec.reductions`` over ``spec.axes`` of
    its program output, into the destinations in order."""
    misfit = _reduce_misfit(spec, dsts, operands)
    if misfit is not None:
        return misfit
    with door(dsts, operands, need_host=True) as refusal:
        if refusal is not None:
            return refusal
        _reduce_into(spec, dsts, operands)
    return Answer.DONE


def _reduce_into(spec: S.Reduce, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
    """``reduce``'s body, for a call that fits, the door passed."""
    loop = _loop(spec.loads, operands)
    assert loop is not None  # the fit check read the shapes
    outs = _Outputs(spec.prog, spec.loads, operands, loop)
    results: list[Arr] = []
    for red, k, dt in spec.reductions:
        terms = _Terms(outs.get(k), spec.axes)
        results += _reduce_rows(red, spec.prog.out_dtypes[k], dt, terms)
    for dst, v in zip(dsts, results, strict=True):
        views.store(dst, v.reshape(dst.shape))


def prepare_reduce(spec: S.Reduce, dsts: tuple[tuple[Dtype, Layout], ...],
                   operands: tuple[tuple[Dtype, Layout], ...]) -> Hook | None:
    """``reduce`` prepared for one signature (the caller's warm path): the
    fit checked once."""
    if _reduce_misfit_of(spec, tuple([(dt, lay.shape) for dt, lay in dsts]),
                         tuple([(dt, lay.shape) for dt, lay in operands])) is not None:
        return None
    (x_dt, x_layout), *rest = operands
    if (rest or not isinstance(spec.loads[0], S.Plain) or x_dt.is_sub_byte
            or not x_layout.is_contiguous() or x_layout.numel == 0
            or any(_copied_input(spec.prog, k) != 0 for _, k, _ in spec.reductions)):
        return _reduce_into
    # One contiguous Plain operand whose every reduced output is the operand
    # itself (nx.sum, nx.max, ...): its view read straight, as _Outputs.get
    # would give it, without _Outputs' and the loop's steps.
    read = views.reader(x_dt, x_layout)
    terms = [(red, spec.prog.out_dtypes[k], dt) for red, k, dt in spec.reductions]
    axes = spec.axes

    def small(sp: S.Reduce, ds: Sequence[Array], ops: Sequence[Array]) -> None:
        y = read(ops[0])
        results: list[Arr] = []
        for red, term, dt in terms:
            results += _reduce_rows(red, term, dt, _Terms(y, axes))
        for dst, v in zip(ds, results, strict=True):
            views.store(dst, v.reshape(dst.shape))

    return small


# ---------------------------------------------------------------------------
# Scans of rows
# ---------------------------------------------------------------------------


def _with_carry(carry: Arr | None, rows: Arr, dtype: npt.DTypeLike) -> Arr:
    """Rows of states in ``dtype``, C-contiguous, the carry (where given) as
    state 0 before each row's terms."""
    if carry is None:
        return np.ascontiguousarray(rows, dtype=dtype)
    out = np.empty((rows.shape[0], rows.shape[1] + 1), dtype)
    out[:, 0] = carry
    out[:, 1:] = rows
    return out


def _from_positive_zero(states: Arr, rows: Arr) -> Arr:
    """A Sum scan's float states without a carry, from +0 (Monoid Sum adds
    its terms from +0): state 0 is +0 + term 0, which is term 0 but for −0,
    +0. Copies ``states`` before the change where they may be ``rows``'."""
    first = states[:, :1]
    if not ((first == 0) & np.signbit(first)).any():
        return states
    if np.may_share_memory(states, rows):
        states = states.copy()
    states[:, :1] += 0
    return states


def _running_positions(keys: Arr, is_max: bool) -> Arr:
    """Per row and index, the first position up to it with the greatest (or
    least) key so far."""
    r, m = keys.shape
    acc = np.maximum.accumulate(keys, axis=1) if is_max else np.minimum.accumulate(keys, axis=1)
    new = np.ones((r, m), bool)
    new[:, 1:] = keys[:, 1:] > acc[:, :-1] if is_max else keys[:, 1:] < acc[:, :-1]
    return np.maximum.accumulate(np.where(new, np.arange(m), 0), axis=1)


def _network(kind: int, states: Arr) -> Arr:
    """The odd/even network's scan of ``(components, rows, m)`` states."""
    out = np.empty_like(states)
    L.network_scan(kind, np.ascontiguousarray(states), out)
    return out


def _network_scan(red: S.Reduction, term: Dtype) -> bool:
    """Whether the scan combines states by the odd/even network (float and
    complex Sum and Prod, Logsumexp, Moments), so that which NaN operand an
    addition meets first depends on the extent scanned."""
    if isinstance(red, (S.Logsumexp, S.Moments)):
        return True
    return red in (S.Monoid.SUM, S.Monoid.PROD) and (term.is_float or term.is_complex)


def _canonical_nans(v: Arr) -> None:
    """Set every NaN (each NaN part of a complex number) of float results ``v``
    to the positive quiet NaN, in place. A NaN result's bits are otherwise the
    hardware's choice among the NaNs it meets, which differs between a scan and
    the scan of its prefix; the contract's prefix law is bit for bit."""
    parts = v.view(v.real.dtype) if np.iscomplexobj(v) else v
    if parts.dtype.kind != "f" and parts.dtype.kind != "V":
        return
    nan = np.isnan(parts)
    if nan.any():
        parts[nan] = np.nan


def _scan_rows(red: S.Reduction, term: Dtype, dt: Dtype, rows: Arr, carry: Arr | None,
               out: Arr | None) -> list[Arr]:
    """The inclusive scans of each row of ``rows`` (in scan order) after
    ``carry`` (state 0), in the destinations' host elements. ``out``, where
    given, is a C-contiguous ``(rows, m)`` view of the first destination a
    float Sum or Prod scan may write into directly."""
    r, m = rows.shape
    drop = slice(1, None) if carry is not None else slice(None)
    ccar = D.carrier(term)
    if red is S.Monoid.SUM or red is S.Monoid.PROD:
        mul = red is S.Monoid.PROD
        if term.is_float:
            states = _with_carry(carry, rows, ccar.numpy_dtype)
            if carry is None and not mul:
                states = _from_positive_zero(states, rows)
            if out is not None and carry is None and dt is ccar:
                # The destination holds the carrier: the network writes there.
                L.real_scan(mul, states, out)
                return [out]
            res = np.empty_like(states)
            L.real_scan(mul, states, res)
            return [_round(dt, res[:, drop])]
        if term.is_complex:
            part = np.float32 if term is D.complex64 else np.float64
            re = _with_carry(None if carry is None else carry.real, rows.real, part)
            im = _with_carry(None if carry is None else carry.imag, rows.imag, part)
            if carry is None and not mul:
                re, im = _from_positive_zero(re, rows), _from_positive_zero(im, rows)
            if mul:
                res = _network(L.CMUL, np.stack([re, im]))
                ore, oim = res[0], res[1]
            else:
                ore, oim = np.empty_like(re), np.empty_like(im)
                L.real_scan(False, re, ore)
                L.real_scan(False, im, oim)
            return [_round_complex(dt, ore[:, drop], oim[:, drop])]
        wide = _with_carry(carry, rows, ccar.numpy_dtype)
        # Integers wrap in their carrier: every order gives the same bits.
        acc = np.cumsum(wide, axis=1, dtype=wide.dtype) if not mul else \
            np.cumprod(wide, axis=1, dtype=wide.dtype)
        return [_wrap(dt, acc[:, drop])]
    if isinstance(red, S.Logsumexp):
        states = _with_carry(carry, _float_terms(rows, term), np.float64)
        res = _network(L.LSE, states[None])
        return [_round(dt, res[0][:, drop])]
    if isinstance(red, S.Moments):
        x = _float_terms(rows, term).astype(np.float64)
        states = np.empty((3, r, m + (carry is not None)), np.float64)
        tail = states[:, :, 1:] if carry is not None else states
        tail[0] = 1.0
        tail[1] = x
        # A term's M2 is 0, but NaN for an infinite or NaN term: its variance is.
        tail[2] = np.where(np.isfinite(x), 0.0, np.nan)
        if carry is not None:
            c = carry.astype(np.float64)
            states[0, :, 0] = c[:, 0]
            states[1, :, 0] = c[:, 1]
            states[2, :, 0] = c[:, 2] * c[:, 0]
        res = _network(L.MOMENTS, states)[:, :, drop]
        with np.errstate(all="ignore"):
            var = res[2] / res[0]
        return [_round(dt, res[1]), _round(dt, var)]
    is_max = red is S.Monoid.MAX or (isinstance(red, S.Arg) and red.extreme is S.Extreme.MAX)
    if carry is None:
        pos = _running_positions(_keys(rows, term, is_max), is_max)
        if term.is_bool:
            truth = _keys(rows, term, is_max)
            value = (np.logical_or.accumulate(truth, axis=1) if is_max
                     else np.logical_and.accumulate(truth, axis=1))
        else:
            value = np.take_along_axis(rows, pos, axis=1)
            if term is D.float8_e5m2:
                # The extreme rounds once into the destination, as after a
                # carry: no store makes an infinity of e5m2, which saturates.
                value = np.where(np.isinf(value), _round(dt, _float_terms(value, term)), value)
        return [value, pos.astype(np.int64)] if isinstance(red, S.Arg) else [value]
    # A Max or Min scan after a carry: the carry (in the carrier) is state 0.
    src = _with_carry(carry, _float_terms(rows, term) if term.is_float else rows,
                      ccar.numpy_dtype)
    pos = _running_positions(_keys(src, ccar, is_max), is_max)
    if term.is_bool:
        truth = _keys(src, ccar, is_max)
        value = (np.logical_or.accumulate(truth, axis=1) if is_max
                 else np.logical_and.accumulate(truth, axis=1))
        return [value[:, 1:]]
    value = np.take_along_axis(src, pos, axis=1)[:, 1:]
    if term.is_float:
        return [_round(dt, value)]
    return [_wrap(dt, value)]


# ---------------------------------------------------------------------------
# The scan kernel
# ---------------------------------------------------------------------------


def _scan_misfit(spec: S.Scan, dsts: Sequence[Array], operands: Sequence[Array]
                 ) -> Answer | None:
    """The refusal for a call that does not fit, checked before any work."""
    return _scan_misfit_of(spec, tuple((d.dtype, d.shape) for d in dsts),
                           tuple((a.dtype, a.shape) for a in operands))


@functools.lru_cache(maxsize=256)
def _scan_misfit_of(spec: S.Scan, dsts: tuple[tuple[Dtype, tuple[int, ...]], ...],
                    operands: tuple[tuple[Dtype, tuple[int, ...]], ...]) -> Answer | None:
    # Cached on the dtypes and shapes it reads, as _reduce_misfit_of is.
    if (len(operands) != spec.n_operands() or len(dsts) != spec.n_results()
            or len(operands) == spec.carry):
        return Answer.BAD_ARITY
    loads_ops = operands[spec.carry:]
    first = spec.loads[0]
    rank = first.pad.loaded_rank if isinstance(first, S.Padded) else len(loads_ops[0][1])
    found = SH.scan_refusal(spec.prog, rank, spec.reduction, spec.output,
                            [d for d, _ in dsts], operands[0][0] if spec.carry else None,
                            [a for a, _ in loads_ops], spec.loads)
    if found is not None:
        return found[0]
    if dsts[0][0] is not spec.dtype:
        return Answer.WRONG_DTYPE
    want = SH.scan(spec, [s for _, s in operands])
    if isinstance(want, SH.Error) or any(d[1] != w for d, w in zip(dsts, want, strict=True)):
        return Answer.SHAPE_MISMATCH
    return None


def scan(spec: S.Scan, dsts: Sequence[Array], operands: Sequence[Array]) -> Answer:
    """``S.scan``: the inclusive scan of ``spec.output`` along ``spec.axis``
    (from its end where ``reverse``), after the carry where given."""
    misfit = _scan_misfit(spec, dsts, operands)
    if misfit is not None:
        return misfit
    with door(dsts, operands, need_host=True) as refusal:
        if refusal is not None:
            return refusal
        loads_ops = operands[spec.carry:]
        loop = _loop(spec.loads, loads_ops)
        assert loop is not None  # _scan_misfit checked the shapes
        term = spec.prog.out_dtypes[spec.output]
        y = _last(_Outputs(spec.prog, spec.loads, loads_ops, loop).get(spec.output), spec.axis)
        lead = y.shape[:-1]
        rows = y.reshape(math.prod(lead), loop[spec.axis])
        carry = None
        if spec.carry:
            c = views.read(operands[0])
            carry = c.reshape(rows.shape[0], 3) if isinstance(spec.reduction, S.Moments) \
                else c.reshape(rows.shape[0])
        if spec.reverse:
            rows = rows[:, ::-1]
        first = views.target(dsts[0])
        # The first destination itself, as rows, where the scanned axis is
        # its last and the scan runs forward: a float scan writes there.
        direct = (first.reshape(rows.shape) if first is not None and not spec.reverse
                  and spec.axis == len(loop) - 1 else None)
        results = _scan_rows(spec.reduction, term, spec.dtype, rows, carry, direct)
        if _network_scan(spec.reduction, term):
            for v in results:
                _canonical_nans(v)
        for dst, v in zip(dsts, results, strict=True):
            if direct is not None and v is direct:
                continue
            if spec.reverse:
                v = v[:, ::-1]
            v = v.reshape(*lead, v.shape[1])
            views.store(dst, v if spec.axis == v.ndim - 1 else np.moveaxis(v, -1, spec.axis))
    return Answer.DONE


def _last(y: Arr, axis: int) -> Arr:
    """``y`` with ``axis`` moved last (``y`` itself where it is the last)."""
    return y if axis == y.ndim - 1 else np.moveaxis(y, axis, -1)


# ---------------------------------------------------------------------------
# The fold kernel
# ---------------------------------------------------------------------------


def _taps(d: int, lo: int, interior: int, count: int, step: int, tap: int,
          dilation: int) -> tuple[slice, slice] | None:
    """Along one axis, for one tap: the operand indices a load reads at that
    tap and the window positions reading them, as slices; None for none.
    Window w reads padded position w·step + tap·dilation, operand index p
    lies at lo + p·(interior + 1)."""
    w = np.arange(count)
    pos = w * step + tap * dilation - lo
    ok = (pos >= 0) & (pos % (interior + 1) == 0) & (pos // (interior + 1) < d)
    w = w[ok]
    if w.size == 0:
        return None
    p = pos[ok] // (interior + 1)
    # The solutions of a congruence in a range: both progressions are arithmetic.
    ws = int(w[1] - w[0]) if w.size > 1 else 1
    ps = int(p[1] - p[0]) if p.size > 1 else 1
    return (slice(int(p[0]), int(p[-1]) + 1, ps), slice(int(w[0]), int(w[-1]) + 1, ws))


def fold(spec: S.Fold, dsts: Sequence[Array], operands: Sequence[Array]) -> Answer:
    """``S.fold``: each element of dst is +0 plus every element of x the padded
    load by ``spec.pad`` reads from it, added in C order of the taps, in the
    dtype Add computes in (float32 for the narrow floats), rounded once."""
    if len(operands) != 1 or len(dsts) != 1:
        return Answer.BAD_ARITY
    (x,), (dst,) = operands, dsts
    misfit = SH.fold_refusal(x.dtype, dst.dtype)  # bool and bit too: Add takes neither
    if misfit is not None:
        return misfit[0]
    want = SH.fold(spec, [x.shape])
    if isinstance(want, SH.Error) or dst.shape != want[0]:
        return Answer.SHAPE_MISMATCH
    with door(dsts, operands, need_host=True) as refusal:
        if refusal is not None:
            return refusal
        views.store(dst, _fold_values(spec, x.dtype, views.read(x)))
    return Answer.DONE


def _fold_values(spec: S.Fold, dt: Dtype, xv: Arr) -> Arr:
    """The fold of host elements ``xv`` into ``spec.shape``, in ``dt``'s host
    elements."""
    acc_dt = D.carrier(dt).numpy_dtype
    acc = np.zeros(spec.shape, acc_dt)
    pad = spec.pad
    rank = len(spec.shape)
    window = {w.axis: (k, w) for k, w in enumerate(pad.windows)}
    sizes = [w.size for w in pad.windows]
    for taps in np.ndindex(*sizes):
        dst_index: list[slice] = []
        src_index: list[slice | int] = []
        for ax in range(rank):
            d, lo, interior = spec.shape[ax], pad.lo[ax], pad.interior[ax]
            if ax in window:
                k, w = window[ax]
                cut = _taps(d, lo, interior, xv.shape[ax], w.step, taps[k], w.dilation)
            else:
                cut = _taps(d, lo, interior, xv.shape[ax], 1, 0, 0)
            if cut is None:
                break
            dst_index.append(cut[0])
            src_index.append(cut[1])
        else:
            part = xv[(*src_index, *taps)]
            # One tap reads each operand index at most once, so a strided
            # in-place add is the C-order addition of this tap.
            with np.errstate(all="ignore"):
                acc[tuple(dst_index)] += part.astype(acc_dt, copy=False)
    if dt.is_float:
        return _round(dt, acc)
    if dt.is_int:
        return _wrap(dt, acc)
    return acc


# ---------------------------------------------------------------------------
# The family's statements
# ---------------------------------------------------------------------------

_REDUCE_PROSE: Final = (
    "every reduction at every dtype it accepts, over Plain and Padded loads of any program: "
    "Monoid Sum and Prod (integers wrap in their carrier, float Sum and Prod in lane order), "
    "Max and Min (booleans any and all), Arg (the first position with the extreme's bits, "
    "the first NaN), Logsumexp and Moments (see algorithms); a NaN Max, Min or Arg result is "
    "the first NaN term's bits. It declines nothing.")

_SCAN_PROSE: Final = (
    "every scan at every dtype its reduction accepts, forward and reverse, with or without a "
    "carry (the carrier state before term 0): float Sum and Prod and the Logsumexp and "
    "Moments states by the odd/even network with the carry as state 0 (a Sum without one "
    "from +0: its state 0 is +0 + term 0), integer, boolean, "
    "Max, Min and Arg scans exactly. An Arg scan's position is the term's number in scan "
    "order (from the end of the axis where reverse), so a reverse scan's prefix law holds "
    "for positions too. It declines nothing.")

_FOLD_PROSE: Final = (
    "every fold at every dtype Add takes: each element is +0 plus the x elements the padded "
    "load reads from it, added in C order of the taps, narrow floats in float32 and rounded "
    "once, integers wrapping. Declines nothing; bool and bit, which Add does not take, do not "
    "fit (WRONG_DTYPE, shape.fold_refusal).")


def _declines_nothing(call: Call) -> str | None:
    """Host reductions and scans compute every call that fits."""
    return None


#: The order and grouping of each float sum, product and scan.
ASSOCIATION: Final = {
    "reduce Sum": (
        "lane order (design.md §6): blocks of 1024 terms; in a block, 16 lanes, term t into "
        "lane t mod 16, each lane chained from +0; lanes combined i += i+8 (i < 8), "
        "i += i+4, i += i+2, then 0 += 1; blocks combined in a binary tree whose left part "
        "is the largest power of two below the count. In the carrier (float32 for the narrow "
        "floats); a complex Sum is two such sums, one per part. Terms are numbered in C order "
        "of the reduced axes. Barring overflow and underflow, within γ(n − 1) Σ|x| of the "
        "exact sum, then rounded once into the destination."),
    "reduce Prod": (
        "lane order as for Sum, each lane chained from 1 (for real floats the same bits as "
        "from its first term, since 1·x is x); a complex Prod by Prog's Mul with each lane "
        "chained from its first term and a lane without terms left out of the lane "
        "combinations. Within a relative γ(n − 1) (complex: normwise γ(2n − 2)); an empty "
        "product is 1."),
    "scan": (
        "float and complex Sum and Prod scans (complex Sum part by part, complex Prod by "
        "Prog's Mul), and the Logsumexp and Moments states, by the contract's odd/even "
        "network along the axis in scan order, with the carry, where given, as state 0 "
        "(result i is then the network's result i + 1). Result i passes through at most "
        "D = max(0, 2⌈log₂(k + 1)⌉ − 1) combinations, k = i (i + 1 with a carry): a Sum "
        "within γ(D) Σ|x| (the carry counted among the x); a Prod, each of whose "
        "multiplications reaches the whole product, within a relative γ(k) (complex: "
        "normwise γ(2k)), in the carrier, then rounded once into the destination. "
        "Integer, boolean, Max, Min and Arg scans are exact."),
    "fold": (
        "each output is +0 plus the x elements its index is read from, added left to right "
        "in C order of the taps (the window axes), in the dtype Add computes in: within "
        "γ(t − 1) Σ|x| for t taps, then rounded once into the destination."),
}

#: Logsumexp's and Moments' algorithms and bounds.
ALGORITHMS: Final = {
    "Logsumexp (reduce)": (
        "m = the terms' maximum (exact; NaN where a term is); where m is finite, "
        "lse = m + log s with s = Σ exp(x − m): x − m rounded once in the carrier c (float32 "
        "for float32 and narrower, float64 for float64), exp in c by NumPy (within 4 ulps of "
        "c), the sum in float64 in lane order, log and m + log s in float64; then rounded "
        "once into the destination. Special values: −∞ for no term or terms all −∞, +∞ "
        "where m is +∞ (a term is, none NaN), NaN where a term is. Bound, barring overflow "
        "and underflow, b the largest |x|, n the terms: |lse − L| ≤ (2b + 9)·u_c + "
        "(n + 2b + 3 ln n + 3)·u₆₄ before the rounding into the destination."),
    "Moments (reduce)": (
        "two passes in float64 (terms widen exactly): mean = (lane-order sum of x)/n, "
        "variance = (lane-order sum of (x − mean)²)/n. NaN for no term or where a term is; "
        "with an infinite term and no NaN the mean is the sum of the infinities (NaN with "
        "both signs) and the variance NaN; the variance is never negative. Bounds, barring "
        "overflow and underflow, u = 2⁻⁵³, μ and σ² the exact mean and variance: "
        "|mean − μ| ≤ δ = γ(n)·Σ|x|/n, |var − σ²| ≤ γ(n + 3)·σ² + (1 + γ(n + 3))·δ², "
        "before the rounding into the destination."),
    "Logsumexp (scan)": (
        "the states are log-sum-exps in float64 (a term's is the term, the carry's is "
        "itself), combined by the odd/even network with lse(a, b) = h + log1p(exp(l − h)), "
        "h and l the larger and smaller (NaN where either is, ±∞ where h is). lse is "
        "1-Lipschitz and each combination errs by at most (2B + 3)·u, u = 2⁻⁵³, B the "
        "largest |state| (at most b + ln(k + 1), b the largest |x|, the carry counted), so "
        "|result i − L| ≤ D·(2B + 3)·u, D the network's combinations (see scan), to first "
        "order, before the rounding into the destination."),
    "Moments (scan)": (
        "the states are (count, mean, M2) in float64: a term's is (1, x, 0), with M2 NaN "
        "for an infinite or NaN x; the carry's is (count, mean, variance·count). They "
        "combine by the odd/even network with Chan's merge: n = na + nb, d = mb − ma, "
        "mean = ma + d·(nb/n), M2 = M2a + M2b + d²·(na·(nb/n)); a state of count 0 leaves "
        "the other; an infinite or NaN mean gives mean ma + mb (the sum of the infinities) "
        "and M2 NaN. The variance is M2/n, never negative. Bounds to first order, u = 2⁻⁵³, "
        "D the network's combinations, M the largest |x| (and |carry mean|), μ and σ² the "
        "exact moments of the terms up to i: |mean − μ| ≤ 7·D·u·M and |var − σ²| ≤ "
        "D·u·(6σ² + 10·√D·M·σ), before the rounding into the destination."),
}

#: The ``reductions`` family: reduce, scan and fold.
FAMILY: Final = Family(
    kernels={"reduce": reduce, "scan": scan, "fold": fold},
    prepared={"reduce": prepare_reduce},
    statements={
        "reduce": KernelStatement(_REDUCE_PROSE, _declines_nothing),
        "scan": KernelStatement(_SCAN_PROSE, _declines_nothing),
        "fold": KernelStatement(_FOLD_PROSE, _declines_nothing),
    },
    association=ASSOCIATION,
    algorithms=ALGORITHMS,
)

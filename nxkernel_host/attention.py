"""The attention family of the host library: ``attention``.

Each query row of q ``[lead…; hq; tq; dk]`` reads the keys and values of key
head ``h // (hq / hk)``, Dense (``[lead…; hk; tk; d]``) or Paged (pools
``[pages; hk; page; d]`` through ``table [lead…; max_pages]``). A pair (row,
key) is visible where the key is below its lead index's length, where a paged
key's table entry is in ``[0, pages)`` and where program output 0 holds; lse is
the log-sum-exp of program output 1 over the visible pairs and o the visible
values weighted by ``exp(x − lse)``, a row of no visible pair or only −∞
outputs giving o = +0 and lse = −∞ (the contract's "Attention").

The algorithm, per (lead index, query head, tile of ``ROWS`` query rows), in
one pass over tiles of ``KEYS · ⌊ROWS / r⌋`` keys, r the tile's rows (so a
tile of outputs holds at most ``ROWS × KEYS``), so that memory stays O(tile)
and no ``[tq, tk]`` array is made (flash-style). Where query heads share a key
head (hk < hq) and the rows of the heads of one key head fit one row tile
(decoding: one row or a few per head), those heads are one row tile, so their
keys and values are read once and the products are ``K·Qᵀ`` of all their rows:

* The tile's key range comes first: keys at or past the length are never read;
  the common masks (no mask, causal, sliding window, prefix, any And/Or of
  comparisons between affine functions of the query row and the key, Coord 1
  and Coord 0) are recognised in the program and turned into an interval of
  keys per row (``masks.Band``), so key tiles no row sees are skipped and no
  program runs per pair; other masks run the program per block.
* Scores ``s × q·k`` (``K·Qᵀ``, keys by rows, in the accumulator) by the
  library's own kernels (``lanedots``): FMA chains over dk, or, for a row
  tile of at most ``LANE_ROWS`` rows (decoding), 16- or 8-lane dot products
  and a halving tree; a score transform other than the identity runs
  program output 1 per block.
* Per key tile: the rows' maximum m so far, ``e = exp(x − m)`` (the
  library's own Exp, ``simdfloat32``/``simdfloat64``, in the accumulator),
  ``Σ e`` in key order and ``eᵀ·V`` (FMA chains in key order, ``lanedots``).
  One key tile: ``o = (eᵀ·V) / Σ e`` and ``lse = m + ln Σ e``. Several: the tiles fold
  into float64 running sums rescaled by ``exp(m_old − m_new)``, then ``o = O /
  L`` and ``lse = M + ln L``. The weights so applied, ``e · exp(m − M) / L``,
  keep the contract's δ with the ε stated (``ALGORITHMS``).

Work is cut into units of (lead index, query head or group of heads, row
tile), the tiles a function of the extents alone, and units run on the host threads (``pool``);
every unit does the same operations whatever thread runs it, its products
on the calling thread in ``lanedots``' stated orders, so the bits do not
depend on the thread count (nor on any BLAS).
The layout (the visibility, the compiled path's table, the other units and
the threads' shares) is a function of the spec, the dtypes, the shapes and
strides and the threads alone where no lengths are given, so it is kept per
such key (``_LAYOUTS``): a decoding loop, which repeats one geometry, lays
its call out once.

Row tiles of one key tile, a mask of one key interval per row, dense keys
and operands in the accumulator's dtype (sentence encoders' many small heads,
decoding) run in chunks of two compiled calls and one exp each
(``attnunits``, which also holds the tile kernels): the same operations in
the same order as one by one, without Python per row tile.

The call's plan (tiling, programs, operands, visibility, heads) is
``attnplan``'s; this module runs the row tiles and states the kernel.
"""

from __future__ import annotations

import itertools
import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, final

import numpy as np
import numpy.typing as npt

from nxkernel_core import dtype as D
from nxkernel_core.array import Array
from nxkernel_core.spec import Attention

from . import attnunits, lanedots, pool, views
from .attnplan import LANE_ROWS, MIN_PARALLEL_PAIRS, Head, Plan, Rows, plan_call, row_tile
from .attnunits import finish_rows, fold_tile, tile_exponentials, tile_maxima, tile_sums
from .family import Family

__all__ = ["FAMILY", "attention"]

Arr = npt.NDArray[Any]


# --------------------------------------------------------------------------
# One row tile
# --------------------------------------------------------------------------


@final
class _Scratch:
    """A thread's buffers: the tile of outputs (keys by rows) and per-row stats."""

    def __init__(self, plan: Plan) -> None:
        rows, keys = plan.tiling.rows, plan.tiling.keys
        self.flat = np.empty(rows * keys, plan.acc)
        self.m = np.empty(rows, plan.acc)
        self.total = np.empty(rows, plan.acc)
        self.m_out = np.empty(rows, plan.acc)
        self.o = np.empty((rows, plan.v.shape[-1]), plan.value_dt)
        self.part = np.empty((rows, plan.v.shape[-1]), plan.value_dt)
        self.big_m = np.empty(rows)
        self.big_l = np.empty(rows)
        self.big_o = np.empty((rows, plan.v.shape[-1]))
        self.ones = np.ones(rows * keys, np.uint8)
        self.head: Head | None = None

    def tile(self, n: int, r: int) -> Arr:
        return self.flat[:n * r].reshape(n, r)

    def head_of(self, plan: Plan, b: tuple[int, ...], g: int, kmax: int) -> Head:
        h = self.head
        if h is None or h.b != b or h.g != g:
            h = self.head = Head(plan, b, g, kmax)
        return h


def _key_products(kt: Arr, qt: Arr, out: Arr) -> None:
    """``out = K·Qᵀ``, keys by rows, by ``lanedots``: lanes and a halving tree
    for a tile of at most ``LANE_ROWS`` rows, else FMA chains over dk
    (``product`` of K and the rows' transpose, copied)."""
    if qt.shape[0] <= LANE_ROWS:
        lanedots.scores(kt, qt, out)
    else:
        lanedots.product(kt, np.ascontiguousarray(qt.T), out)


def _weighted_values(w: Arr, vt: Arr, out: Arr) -> None:
    """``out = wᵀ·V`` for weights w (keys by rows), by ``lanedots``: FMA chains
    in key order (``weighted`` for a tile of at most ``LANE_ROWS`` rows, else
    ``product`` reading w through its transpose)."""
    if w.shape[1] <= LANE_ROWS:
        lanedots.weighted(w, vt, out)
    else:
        lanedots.product(w.T, vt, out)


def _raw(plan: Plan, sc: _Scratch, rows: Rows, b: tuple[int, ...], h: int, r0: int,
         qt: Arr, kt: Arr, j0: int, j1: int) -> tuple[Arr, Any]:
    """The tile of rows ``[r0, r0 + R)`` and keys ``[j0, j1)``, keys by rows,
    for ``tile_maxima`` and ``tile_exponentials``, and the factor s they apply: q·k (s the
    scale) on the fast path; where output 1 is not the score or the mask is
    not one interval per row, the outputs x themselves with −∞ at pairs the
    mask hides (s = 1, which changes no bit). The same operations, so the
    same bits, every time it runs for one block."""
    acc = plan.acc
    r, n = qt.shape[0], j1 - j0
    st = sc.tile(n, r)
    if not plan.reads_score:
        st[...] = 0  # output 1 reads no score: q·k is never needed
    elif plan.score_dt == acc:
        _key_products(kt, qt, st)
    else:
        wide = np.empty(st.shape, np.float64)
        _key_products(kt, qt, wide)
        np.copyto(st, wide)  # a float64 q·k, rounded once into acc
    s = plan.scale
    if plan.ev_logit is None and not rows.general and rows.multi is None:
        return st, s
    block = (*(1,) * len(plan.lead), 1, r, n)
    offset = (*b, h, r0, j0)
    cut = (*(slice(i, i + 1) for i in b), slice(h, h + 1), slice(r0, r0 + r), slice(j0, j1))
    np.multiply(st, s, out=st)  # the score, s × q·k
    if plan.ev_logit is not None:
        ins = [st.T.reshape(block), *(a[cut] for a in plan.loads)]
        st[...] = plan.ev_logit(ins, block, offset)[0].reshape(r, n).T
    if rows.general:
        assert plan.ev_vis is not None
        ins = [st.T.reshape(block), *(a[cut] for a in plan.loads)]
        seen = plan.ev_vis(ins, block, offset)[0].reshape(r, n).T.view(np.uint8) != 0
        np.copyto(st, -np.inf, where=~seen)
    elif rows.multi is not None:
        keys = np.arange(j0, j1, dtype=np.int64)[:, None]
        seen = np.zeros((n, r), np.bool_)
        for lo, hi in rows.multi:
            seen |= (lo[None, :] <= keys) & (keys < hi[None, :])
        np.copyto(st, -np.inf, where=~seen)
    return st, acc.type(1)


def _maxima_of(plan: Plan, sc: _Scratch, rows: Rows, st: Arr, s: Any, ok: Arr | None,
               j0: int) -> Arr:
    """The rows' maxima of their visible outputs in the tile (``sc.m``)."""
    r = st.shape[1]
    keyok = sc.ones[:st.shape[0]] if ok is None else ok
    m = sc.m[:r]
    tile_maxima(st, s, plan.acc.type(-np.inf), rows.lo, rows.hi, rows.lo_max, rows.hi_min, j0,
                keyok, m)
    return m


def _exp_shifted(plan: Plan, sc: _Scratch, rows: Rows, st: Arr, s: Any, ok: Arr | None,
                 j0: int, shift: Arr) -> None:
    """``st[j, i] = exp(x − shift[i])`` in place (the library's own Exp): 0 at
    hidden pairs."""
    keyok = sc.ones[:st.shape[0]] if ok is None else ok
    tile_exponentials(st, s, plan.acc.type(-np.inf), rows.lo, rows.hi, rows.lo_max, rows.hi_min,
                      j0, keyok, shift)


def _visible(plan: Plan, rows: Rows, b: tuple[int, ...], h: int, r0: int, r: int,
             key: int) -> Arr:
    """Which rows of the tile see ``key`` (for a value holding a NaN or an
    infinity): its interval, its page and the mask."""
    seen = (rows.lo <= key) & (key < rows.hi)
    if rows.multi is not None:
        seen = np.zeros(r, np.bool_)
        for lo, hi in rows.multi:
            seen |= (lo <= key) & (key < hi)
    if rows.general:
        assert plan.ev_vis is not None
        block = (*(1,) * len(plan.lead), 1, r, 1)
        cut = (*(slice(i, i + 1) for i in b), slice(h, h + 1), slice(r0, r0 + r),
               slice(key, key + 1))
        score = np.zeros(block, plan.acc)
        vis = plan.ev_vis([score, *(a[cut] for a in plan.loads)], block, (*b, h, r0, key))[0]
        seen &= vis.reshape(r).view(np.uint8) != 0
    return seen


def _weighted(plan: Plan, rows: Rows, b: tuple[int, ...], h: int, r0: int, w: Arr,
              vt: Arr, ok: Arr | None, j0: int, out: Arr) -> None:
    """``out[i] = Σ_j w[j, i] v[j]`` for the tile's rows (``lanedots``, in the values'
    work dtype). A value holding a NaN or an infinity (rare) is left out of the
    product and added afterwards at the rows that see its key alone, so such a
    value at a hidden pair never reaches o; the non-finite result it gives is
    the same in any order of the sum. Such a value makes its column of the
    product non-finite at every row (its weight 0 gives a NaN), so the values
    are searched for one only where the product is not finite."""
    ww = w if plan.value_dt == plan.acc else w.astype(plan.value_dt)
    _weighted_values(ww, vt, out)
    if np.isfinite(out).all():
        return
    bad = np.flatnonzero(~np.isfinite(vt).all(axis=1))
    if ok is not None:
        bad = bad[ok[bad] != 0]  # hidden pages read as zeros
    if not bad.size:
        return  # the weights or an overflow made the product non-finite
    held = vt[bad]
    finite = np.isfinite(held)
    clean = np.array(vt, copy=True)
    clean[bad] = np.where(finite, held, 0)
    _weighted_values(ww, clean, out)
    r = w.shape[1]
    for key, extra in zip((bad + j0).tolist(), np.where(finite, 0, held), strict=True):
        seen = _visible(plan, rows, b, h, r0, r, key)
        out[seen] += ww[key - j0, seen][:, None] * extra[None, :]


def _unit(plan: Plan, sc: _Scratch, b: tuple[int, ...], h: int, heads: int, r0: int,
          r1: int, rows: Rows) -> None:
    """o and lse of rows ``[r0, r1)`` of query heads ``[h, h + heads)`` at lead
    index b, written into the destinations (through buffers where o's dtype is
    not the values' work dtype, or where several heads are one row tile). The
    caller sets NumPy's error state."""
    r = r1 - r0
    if heads == 1:
        target = plan.o_target[(*b, h)][r0:r1]
        lse_target = plan.lse_target[(*b, h)][r0:r1]
    else:
        target = plan.o_target[b][h:h + heads, r0:r1]
        lse_target = plan.lse_target[b][h:h + heads, r0:r1]
    direct = heads == 1 and target.dtype == plan.value_dt
    o = target if direct else sc.o[:heads * r]
    lse = lse_target if heads == 1 else sc.m_out[:heads * r]
    if rows.jlo >= rows.jhi:
        o[...] = 0
        lse[...] = -np.inf
    else:
        head = sc.head_of(plan, b, h // plan.group, plan.kmax(b))
        qh = plan.q[b][h:h + heads, r0:r1]
        qt = qh.reshape(heads * r, qh.shape[-1]).astype(plan.score_dt, copy=False)
        _attend(plan, sc, rows, b, h, r0, qt, head, o, lse)
    if heads > 1:
        lse_target[...] = lse.reshape(heads, r)
    if not direct:
        got = o.reshape(target.shape)
        if plan.o_dtype in (D.float32, D.float64):
            target[...] = got  # NumPy's cast: round to nearest, ties to even, once
        else:
            target[...] = D.of_float(plan.o_dtype, got.astype(np.float64))


def _attend(plan: Plan, sc: _Scratch, rows: Rows, b: tuple[int, ...], h: int, r0: int,
            qt: Arr, head: Head, o: Arr, lse: Arr) -> None:
    """One pass over the row tile's key tiles. Each tile: its outputs x, the
    rows' maximum m over it and the tiles before, e = exp(x − m) (acc), the
    sums Σ e (acc, key order) and the products eᵀ·V. One key tile: o =
    (eᵀ·V) / Σ e and lse = m + ln Σ e. Several: each tile folded into float64
    running sums, rescaled by exp(m_old − m_new) (``fold_tile``), then o = O / L
    and lse = M + ln L."""
    acc = plan.acc
    r = qt.shape[0]
    # A tile of few rows takes more keys, so that every tile of outputs holds
    # up to ROWS × KEYS of them (decoding reads its keys in one tile).
    keys = plan.tiling.keys * max(1, plan.tiling.rows // r)
    spans = [(j, min(rows.jhi, j + keys)) for j in range(rows.jlo, rows.jhi, keys)]
    total = sc.total[:r]
    if len(spans) == 1:
        j0, j1 = spans[0]
        kt, vt, ok = head.tile(j0, j1)
        st, s = _raw(plan, sc, rows, b, h, r0, qt, kt, j0, j1)
        m = _maxima_of(plan, sc, rows, st, s, ok, j0)
        _exp_shifted(plan, sc, rows, st, s, ok, j0, m)
        tile_sums(st, acc.type(0), total)
        _weighted(plan, rows, b, h, r0, st, vt, ok, j0, o)
        finish_rows(m, total, o, o, lse)
        return
    big_m = sc.big_m[:r]
    big_l = sc.big_l[:r]
    big_o = sc.big_o[:r]
    big_m[...] = -np.inf
    big_l[...] = 0
    big_o[...] = 0
    part = sc.part[:r]
    for j0, j1 in spans:
        kt, vt, ok = head.tile(j0, j1)
        st, s = _raw(plan, sc, rows, b, h, r0, qt, kt, j0, j1)
        m = np.maximum(big_m, _maxima_of(plan, sc, rows, st, s, ok, j0)).astype(acc)
        _exp_shifted(plan, sc, rows, st, s, ok, j0, m)
        tile_sums(st, acc.type(0), total)
        _weighted(plan, rows, b, h, r0, st, vt, ok, j0, part)
        fold_tile(big_m, big_l, big_o, m, total, part)
    finish_rows(big_m, big_l, big_o, o, lse)


_Unit = tuple[tuple[int, ...], int, int, int, int, Rows, int]


def _stacked(plan: Plan) -> int:
    """Query heads per row tile: the group of heads that read one key head
    where all their rows fit one row tile (decoding: a few rows per head) and
    the mask is one band of the pair's coordinates alone, so the group's keys
    and values are read once for all of them; else 1."""
    g = plan.group
    fits = g > 1 and plan.tq * g <= plan.tiling.rows
    return g if fits and plan.band_all is not None and plan.ev_logit is None else 1


def _visibility(plan: Plan, heads: int) -> list[tuple[tuple[int, ...], list[Rows]]]:
    """Per lead index (in order), the visibility of each of its row tiles,
    ``heads`` heads stacked as rows; found once per length and row tile and
    shared by the heads and the lead indices of that length."""
    step = plan.tiling.rows
    found: dict[tuple[int, int], Rows] = {}
    out = []
    for b in np.ndindex(*plan.lead):
        kmax = plan.kmax(b)
        tiles = []
        for r0 in range(0, plan.tq, step):
            if (kmax, r0) not in found:
                found[kmax, r0] = row_tile(plan.spec.prog, plan.tq, plan.tk, r0,
                                           min(plan.tq, r0 + step), kmax, heads)
            tiles.append(found[kmax, r0])
        out.append((b, tiles))
    return out


def _units(plan: Plan, heads: int, b: tuple[int, ...], tiles: Sequence[Rows]) -> list[_Unit]:
    """The row tiles of lead index b, rows ``tiles`` (``_visibility``): every
    (lead index, first head, heads, r0, r1, visibility, cost) in order; the
    cost estimates the pairs the unit reads."""
    step = plan.tiling.rows
    out: list[_Unit] = []
    for h in range(0, plan.hq, heads):
        for r0, rows in zip(range(0, plan.tq, step), tiles, strict=True):
            r1 = min(plan.tq, r0 + step)
            cost = heads * (r1 - r0) * (max(0, rows.jhi - rows.jlo) + 16)
            out.append((b, h, heads, r0, r1, rows, cost))
    return out


def _balanced(costs: Sequence[int], parts: int) -> list[tuple[int, int]]:
    """Contiguous ranges of units with nearly equal total cost, at most ``parts``."""
    total = sum(costs)
    bounds = [0]
    run = 0
    for i, c in enumerate(costs):
        run += c
        if len(bounds) < parts and run * parts >= total * len(bounds) and i + 1 < len(costs):
            bounds.append(i + 1)
    bounds.append(len(costs))
    return [(a, z) for a, z in itertools.pairwise(bounds) if z > a]


@final
@dataclass(frozen=True, slots=True)
class _Layout:
    """How a call of one geometry is cut: each lead index's row tiles'
    visibility, the compiled path's table (read only) and its per-row key
    intervals, the other units, and each thread's share of both. A function
    of the key (``_layout_key``) alone."""

    vis: list[tuple[tuple[int, ...], list[Rows]]]
    table: Arr
    lo: Arr
    hi: Arr
    units: list[_Unit]
    cuts: list[tuple[int, int]]
    ranges: list[tuple[int, int]]
    #: Its memory, estimated: the arrays' bytes and ``_OBJECT_BYTES`` for
    #: each lead index's and each unit's Python objects.
    nbytes: int


#: Layouts by key, the oldest dropped first while more than
#: ``_LAYOUTS_KEPT`` or more than ``_LAYOUTS_BYTES`` (estimated) would be
#: kept, and none of more than a quarter of that: a decoding loop repeats one
#: geometry, whose layout took a sixth to a quarter of a short call (T 4096,
#: heads 32/8, caches cold) before it was kept, and an encoder's layers one
#: batch's lengths (a sixth of a call of 16 sentences of 45 tokens, 12
#: heads); a call whose layout is megabytes (thousands of lead indices)
#: takes far longer than its layout, and a loop of new lengths would fill
#: the memory with them.
_LAYOUTS: dict[tuple[Any, ...], _Layout] = {}
_LAYOUTS_KEPT: Final = 64
_LAYOUTS_BYTES: Final = 64 << 20
#: A generous estimate of the Python objects of one lead index's row tiles
#: or of one unit in a layout (a tuple, its list entry, its integers).
_OBJECT_BYTES: Final = 256
_layouts_lock = threading.Lock()


def _layout_key(plan: Plan, compiled: bool, operands: Sequence[Array], dsts: Sequence[Array],
                parts: int) -> tuple[Any, ...]:
    """What decides a call's layout: the spec, whether the compiled path
    takes the call, the operands' and destinations' dtypes, the host views'
    shapes, strides and dtypes, the threads, and the lengths' values where
    the call has lengths (an encoder's layers repeat one batch's lengths)."""
    arrays = (plan.q, plan.k, plan.v, plan.o_target, plan.lse_target)
    lengths = None if plan.lengths is None else plan.lengths.tobytes()
    return (plan.spec, compiled, parts, tuple(a.dtype for a in operands), tuple(d.dtype for d in dsts),
            tuple((x.shape, x.strides, x.dtype.str) for x in arrays), lengths)


def _layout_of(plan: Plan, fast: attnunits.Chunked | None, parts: int) -> _Layout:
    """The layout of this call (``_Layout``); ``fast`` is the compiled path."""
    heads = _stacked(plan)
    vis = _visibility(plan, heads)
    # The row tiles the compiled path takes (attnunits) as one table; the
    # others one by one.
    if fast is None:
        table = np.zeros((0, attnunits.FIELDS), np.int64)
        lo = hi = np.zeros(0, np.int64)
        units = [u for b, tiles in vis for u in _units(plan, heads, b, tiles)]
    else:
        table, units = fast.table(vis, heads, lambda b, tiles: _units(plan, heads, b, tiles))
        lo, hi = fast.lo, fast.hi
    for x in (table, lo, hi):
        x.flags.writeable = False
    # Each thread a share of the table and of the other units, by cost.
    cuts = attnunits.spread(table, parts)
    ranges = _balanced([u[6] for u in units], parts)
    ranges += [(len(units), len(units))] * (len(cuts) - len(ranges))
    cuts += [(len(table), len(table))] * (len(ranges) - len(cuts))
    nbytes = table.nbytes + lo.nbytes + hi.nbytes + _OBJECT_BYTES * (len(vis) + len(units))
    return _Layout(vis, table, lo, hi, units, cuts, ranges, nbytes)


def _layout(plan: Plan, fast: attnunits.Chunked | None, operands: Sequence[Array],
            dsts: Sequence[Array], parts: int) -> _Layout:
    """The call's layout, from ``_LAYOUTS`` where a call of its key made it."""
    key = _layout_key(plan, fast is not None, operands, dsts, parts)
    found = _LAYOUTS.get(key)
    if found is not None:
        if fast is not None:
            fast.lo, fast.hi = found.lo, found.hi
        return found
    made = _layout_of(plan, fast, parts)
    if made.nbytes <= _LAYOUTS_BYTES // 4:
        with _layouts_lock:
            kept = sum(layout.nbytes for layout in _LAYOUTS.values())
            while _LAYOUTS and (len(_LAYOUTS) >= _LAYOUTS_KEPT
                                or kept + made.nbytes > _LAYOUTS_BYTES):
                kept -= _LAYOUTS.pop(next(iter(_LAYOUTS))).nbytes
            _LAYOUTS[key] = made
    return made


def attention(spec: Attention, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
    """o and lse of every query row (the contract's "Attention"; module doc),
    for a call that fits, the door passed."""
    o_dst = dsts[0]
    packed = views.target(o_dst)
    o_target = np.empty(o_dst.shape, o_dst.dtype.numpy_dtype) if packed is None else packed
    plan = plan_call(spec, dsts, operands, o_target)
    fast = attnunits.chunked(plan)
    pairs = math.prod((*plan.lead, plan.hq, plan.tq, max(plan.tk, 1)))
    parts = pool.count() if pairs >= MIN_PARALLEL_PAIRS else 1
    layout = _layout(plan, fast, operands, dsts, parts)
    table, units, vis, cuts, ranges = layout.table, layout.units, layout.vis, layout.cuts, layout.ranges

    def job(p: int) -> Callable[[], None]:
        (ta, tz), (a, z) = cuts[p], ranges[p]

        def run() -> None:
            slow = units[a:z]
            with np.errstate(all="ignore"):
                if fast is not None and tz > ta:
                    redo = fast.run(table[ta:tz])
                    slow += fast.units_of(table[ta:tz][redo != 0], vis)
                if not slow:
                    return
                sc = _Scratch(plan)
                for b, h, hs, r0, r1, rows, _ in slow:
                    _unit(plan, sc, b, h, hs, r0, r1, rows)
        return run

    pool.parallel([job(p) for p in range(len(cuts))] or [lambda: None])
    if packed is None:
        views.store(o_dst, o_target)


# --------------------------------------------------------------------------
# The statement
# --------------------------------------------------------------------------


PROSE: Final = (
    "every case: Dense keys and values or Paged pools through a table (entries outside "
    "[0, pages) hidden and never read), hk dividing hq (grouped and multi-query heads), "
    "lengths per lead index (keys past the length never read), any program over the pair "
    "and its loads (Plain or Padded), float32 or float64 accumulators, q, k and v of any "
    "float dtype (narrower ones widened exactly to the accumulator; a float64 q, k or v with "
    "a float32 accumulator computes its q·k or o's sum in float64, then rounds into the "
    "accumulator or into o), o in the values' dtype rounded once, lse in the accumulator. "
    "Declines nothing."
)

ASSOCIATION: Final = {
    "attention q·k": "per pair, in the accumulator: the dk products as a chain of fused "
                     "multiply-adds in order of dk from −0; for a tile of at most "
                     f"{LANE_ROWS} query "
                     "rows, the dk products of a pair in W lanes (16 float32, 8 float64; "
                     "product m in lane m mod W), each lane a chain of fused multiply-adds from "
                     "−0 in order of m, the lanes added as a halving tree (lane l + lane "
                     "l + W/2, then l + l + W/4, … down to lane 0; dk = 0 gives +0); then "
                     "s × q·k, one rounding.",
    "attention weights": "per query row and tile of keys (1024·⌊128/r⌋ keys for a tile of r "
                         "rows), the exponentials exp(x − m) "
                         "(0 at hidden pairs) added from +0 in key order, one addition per "
                         "key, in the accumulator; the tiles' sums then rescaled by "
                         "exp(m_old − m_new) and added in key order in float64.",
    "attention o": "per query row and value element, Σ e·v over a tile of keys as a chain of "
                   "fused multiply-adds over the keys in their order (from −0; from +0 for a "
                   f"tile of at most {LANE_ROWS} query rows) "
                   "in the accumulator (float64 for float64 values); one tile: divided by Σ e "
                   "once; several: the tiles' products rescaled and added in key order in "
                   "float64 from +0, then divided by L once; + 0 last, so a sum of zeros is +0. "
                   "A value holding a NaN or an infinity is left out of the product and added "
                   "after it, at the rows that see its key.",
}

ALGORITHMS: Final = {
    "attention": (
        "Per tile of 128 query rows (where hk < hq and the rows of the query heads of one key "
        "head fit 128, those heads' rows as one tile), one pass over tiles of 1024·⌊128/r⌋ "
        "keys, r the tile's rows (flash-style; memory per "
        "thread one tile of outputs, plus one (lead, key head)'s converted or gathered keys "
        "and values up to 16 MiB; no [tq, tk] array). Keys past the length and on pages "
        "outside [0, pages) are never read (hidden pages read as zeros); masks that are "
        "And/Or of comparisons of affine int64 functions of the row (Coord 1) and the key "
        "(Coord 0) become key intervals per row, so key tiles no row sees are skipped; other "
        "masks run output 0 per block. Hidden pairs' outputs are −∞. Per key tile: m the "
        "rows' running maximum, e = exp(x − m) in the accumulator (the library's own Exp of "
        "float32 or float64, within 1 ulp of the correctly rounded value, so relative error "
        "ρ ≤ 2u ≤ 4u), Σ e, eᵀ·V. "
        "One key tile: o = (eᵀ·V)/Σ e, lse = m + ln Σ e (float64, rounded once). Several: "
        "L = L·exp(M − m) + Σ e and O = O·exp(M − m) + eᵀ·V in float64, then o = O/L and "
        "lse = M + ln L. ε: |lse − L| ≤ ε = (3b + ln tk + 8)·u + γ(tk), u the accumulator's "
        "unit roundoff, b a bound on the visible outputs' magnitudes, barring overflow and "
        "underflow. The weights applied are w = e·exp(m − M)/L; rounded into the accumulator "
        "they are exp(x − L + δ) with |δ| ≤ 4bu + 9u′ + γ(n) ≤ (1 + u)ε + (2b + ln tk)u + "
        "5u′, n ≤ tk the keys of a tile, and o is within γ(tk + 2)·Σ|w||v| of Σ w v before its "
        "rounding into its dtype. "
        "q·k is within γ(dk)·Σ|qᵢkᵢ|; both within e(K) = γ(K + 3), the library's error factor. "
        "Weights are never rounded to float16 or bfloat16 (the r(cw)/c option is not used). "
        "Special rows: no visible pair or only −∞ outputs: o = +0, lse = −∞; a +∞ output and "
        "no NaN: lse = +∞, o a NaN; a NaN output: NaNs. A NaN or an infinity at a hidden "
        "pair, in k, v, a load or output 1, never reaches o or lse: keys and values past the "
        "length or on hidden pages are never read, hidden pairs' outputs are −∞ before the "
        "maximum, and a non-finite value is added only at the rows that see its key (so a NaN "
        "value at a visible pair of weight 0 makes o a NaN). Threads: units of (lead index, "
        "head or heads, row tile) spread over the host threads by estimated cost, each computed by the "
        "same operations whatever thread runs it, its products in the library's own kernels "
        "on that thread (the statement's association; no BLAS): the bits do not depend on the "
        f"thread count. Row tiles of at most {LANE_ROWS} query rows take the lane kernels, "
        "which read each key and value once."
    ),
}

FAMILY: Final = Family(
    prose={"attention": PROSE},
    association=ASSOCIATION,
    algorithms=ALGORITHMS,
)

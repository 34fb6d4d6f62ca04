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
one pass over tiles of ``KEYS`` keys, so that memory stays O(tile) and no
``[tq, tk]`` array is made (flash-style):

* The tile's key range comes first: keys at or past the length are never read;
  the common masks (no mask, causal, sliding window, prefix, any And/Or of
  comparisons between affine functions of the query row and the key, Coord 1
  and Coord 0) are recognised in the program and turned into an interval of
  keys per row (``masks.Band``), so key tiles no row sees are skipped and no
  program runs per pair; other masks run the program per block.
* Scores ``s × q·k`` by BLAS (``K·Qᵀ``, keys by rows, in the accumulator); a
  score transform other than the identity runs program output 1 per block.
* Per key tile: the rows' maximum m so far, ``e = exp(x − m)`` (NumPy's SIMD
  exp, in the accumulator), ``Σ e`` in key order and ``eᵀ·V`` by BLAS. One key
  tile: ``o = (eᵀ·V) / Σ e`` and ``lse = m + ln Σ e``. Several: the tiles fold
  into float64 running sums rescaled by ``exp(m_old − m_new)``, then ``o = O /
  L`` and ``lse = M + ln L``. The weights so applied, ``e · exp(m − M) / L``,
  keep the contract's δ with the ε stated (``ALGORITHMS``).

Work is cut into units of (lead index, query head, row tile), the tiles a
function of the extents alone, and units run on the host threads (``pool``);
every unit does the same operations whatever thread runs it, and its products
run on the library's own single-threaded OpenBLAS (``blas.gemm``), so the bits
do not depend on the thread count.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, final

import numpy as np
import numpy.typing as npt
from numba import njit

from nxkernel_core import dtype as D
from nxkernel_core import masks
from nxkernel_core.array import Array
from nxkernel_core.dtype import Dtype
from nxkernel_core.prog import Const, Convert, Coord, In, Op1, Op2, Prog
from nxkernel_core.spec import Attention, Paged

from . import blas, pool, program, views
from .family import Family
from .loads import load

__all__ = ["FAMILY", "attention"]

Arr = npt.NDArray[Any]
_F32: Final = np.dtype(np.float32)
_F64: Final = np.dtype(np.float64)

# --------------------------------------------------------------------------
# Tiling: a function of the extents alone
# --------------------------------------------------------------------------

#: Query rows per row tile: the rows one BLAS product and one pass of the
#: kernels take at once.
ROWS: Final = 128
#: Keys per key tile: a tile of ``ROWS × KEYS`` outputs (512 KiB of float32)
#: stays in a core's L2 cache with the keys and values it reads.
KEYS: Final = 1024
#: Bytes of one (lead index, key head)'s keys and values that a thread keeps
#: converted or gathered (float16 keys, paged pools) for all its row tiles.
HEAD_CACHE_BYTES: Final = 16 << 20
#: Pairs below which a call stays on the calling thread.
MIN_PARALLEL_PAIRS: Final = 1 << 16


@final
@dataclass(frozen=True, slots=True)
class _Tiling:
    """Rows per row tile and keys per key tile: constants, so that every
    row's operations are a function of the extents alone."""

    rows: int = ROWS
    keys: int = KEYS


# --------------------------------------------------------------------------
# Numba kernels over a tile of outputs, keys by rows ([n, R], C-contiguous)
# --------------------------------------------------------------------------


# Each kernel reads a tile ``st`` of raw outputs, keys by rows ([n, R],
# C-contiguous), key ``k0 + j`` at row j of it. A pair is visible where
# ``lo[i] <= key < hi[i]`` and ``keyok[j] != 0``; keys in ``[lo_max, hi_min)``
# are visible to every row, so they skip the per-row compare (what makes the
# loops over rows vectorise fully for most keys). The output of a visible
# pair is ``x = s × st[j, i]`` rounded once (no FMA: Numba does not contract).


@njit(cache=True, nogil=True, boundscheck=False, error_model="numpy")
def _maxima(st: Arr, s: Any, ninf: Any, lo: Arr, hi: Arr, lo_max: int, hi_min: int, k0: int,
            keyok: Arr, m: Arr) -> None:  # pragma: no cover - compiled
    """``m[i]``: the maximum of row i's visible outputs x, −∞ for none, a NaN
    where one is a NaN. Reads the tile, writes nothing to it."""
    n, r = st.shape
    for i in range(r):
        m[i] = ninf
    for j in range(n):
        key = k0 + j
        if keyok[j] == 0:
            continue
        if lo_max <= key and key < hi_min:
            for i in range(r):
                x = s * st[j, i]
                mi = m[i]
                m[i] = x if ((x > mi) | (x != x)) else mi
        else:
            for i in range(r):
                x = s * st[j, i]
                x = ninf if ((lo[i] > key) | (key >= hi[i])) else x
                mi = m[i]
                m[i] = x if ((x > mi) | (x != x)) else mi


@njit(cache=True, nogil=True, boundscheck=False, error_model="numpy")
def _shifted(st: Arr, s: Any, ninf: Any, lo: Arr, hi: Arr, lo_max: int, hi_min: int, k0: int,
             keyok: Arr, shift: Arr) -> None:  # pragma: no cover - compiled
    """``st[j, i] = x − shift[i]`` (x as ``_maxima`` reads it, one rounding
    each), −∞ − shift[i] at hidden pairs."""
    n, r = st.shape
    for j in range(n):
        key = k0 + j
        if keyok[j] == 0:
            for i in range(r):
                st[j, i] = ninf - shift[i]
        elif lo_max <= key and key < hi_min:
            for i in range(r):
                st[j, i] = s * st[j, i] - shift[i]
        else:
            for i in range(r):
                x = s * st[j, i]
                x = ninf if ((lo[i] > key) | (key >= hi[i])) else x
                st[j, i] = x - shift[i]


@njit(cache=True, nogil=True, boundscheck=False, error_model="numpy")
def _sums(e: Arr, zero: Any, total: Arr) -> None:  # pragma: no cover - compiled
    """``total[i] = Σ_j e[j, i]``: from +0, adding the keys in their order."""
    n, r = e.shape
    for i in range(r):
        total[i] = zero
    for j in range(n):
        for i in range(r):
            total[i] += e[j, i]


# --------------------------------------------------------------------------
# Programs
# --------------------------------------------------------------------------


def _output_program(prog: Prog, k: int) -> Prog:
    """A program of the same operands computing only output ``k``: the nodes
    it reads, renumbered, so that evaluating it runs nothing else."""
    keep: set[int] = set()
    stack = [prog.outs[k]]
    while stack:
        i = stack.pop()
        if i in keep:
            continue
        keep.add(i)
        node = prog.nodes[i]
        if isinstance(node, Op1):
            stack.append(node.x)
        elif isinstance(node, Op2):
            stack += [node.x, node.y]
        elif not isinstance(node, In | Coord | Const):
            stack += [node.c, node.x, node.y]
    order = sorted(keep)
    new = {old: n for n, old in enumerate(order)}
    nodes: list[Any] = []
    for old in order:
        node = prog.nodes[old]
        if isinstance(node, Op1):
            node = Op1(node.kind, node.dtype, new[node.x])
        elif isinstance(node, Op2):
            node = Op2(node.kind, new[node.x], new[node.y])
        elif not isinstance(node, In | Coord | Const):
            node = type(node)(node.kind, new[node.c], new[node.x], new[node.y])
        nodes.append(node)
    return Prog(prog.ins, nodes, (new[prog.outs[k]],))


def _is_score(prog: Prog) -> bool:
    """Whether output 1 is the score itself (operand 0, through Copy or a Cast
    into its own dtype)."""
    i = prog.outs[1]
    while True:
        node = prog.nodes[i]
        if isinstance(node, In):
            return node.index == 0
        if isinstance(node, Op1) and (node.kind is Convert.COPY or (
                node.kind is Convert.CAST and node.dtype is prog.dtype(node.x))):
            i = node.x
            continue
        return False


# --------------------------------------------------------------------------
# Checking the call
# --------------------------------------------------------------------------


# --------------------------------------------------------------------------
# One call: its operands as NumPy, its visibility and its units
# --------------------------------------------------------------------------


def _work(*dts: Dtype) -> np.dtype[Any]:
    """float64 where the accumulator or an operand is float64, else float32:
    every narrower float widens exactly into it."""
    return _F64 if any(dt is D.float64 for dt in dts) else _F32


@final
@dataclass(slots=True)
class _Plan:
    """What every unit of one call reads: operands as host arrays, the
    visibility, the tiling and the destinations."""

    spec: Attention
    acc: np.dtype[Any]
    score_dt: np.dtype[Any]  # q·k's dtype: acc, or float64 for a float64 q or k
    value_dt: np.dtype[Any]  # o's sum's dtype: acc, or float64 for float64 values
    q: Arr
    k: Arr
    v: Arr
    table: Arr | None
    page: int
    pages: int
    lengths: Arr | None
    loads: list[Arr]
    lead: tuple[int, ...]
    hq: int
    tq: int
    tk: int
    group: int
    tiling: _Tiling
    band: masks.Band | None
    band_all: masks.Intervals | None  # the band's intervals over every row, unclipped
    ev_vis: program.Evaluator | None  # output 0 alone, where it is no band
    ev_logit: program.Evaluator | None  # output 1 alone, where it is not the score
    reads_score: bool
    o_dtype: Dtype
    o_target: Arr
    lse_target: Arr
    scale: Any  # s rounded to the accumulator

    def kmax(self, b: tuple[int, ...]) -> int:
        """Keys of lead index b before its length: ``[0, kmax)``."""
        if self.lengths is None:
            return self.tk
        return int(min(max(int(self.lengths[b]), 0), self.tk))


def _plan(spec: Attention, dsts: Sequence[Array], operands: Sequence[Array],
          o_target: Arr) -> _Plan:
    """The call's plan: host views of the operands (sub-byte ones unpacked),
    the loads as the loop reads them, the mask's band where output 0 is one
    (exact for these extents), else the programs of output 0 and output 1
    alone, compiled once."""
    paged = isinstance(spec.kv, Paged)
    n_kv = 4 if paged else 3
    q, k, v = (views.read(a) for a in operands[:3])
    table = views.read(operands[3]) if paged else None
    lengths = views.read(operands[n_kv]) if spec.lengths else None
    first = n_kv + spec.lengths
    lead = tuple(q.shape[:-3])
    hq, tq = q.shape[-3], q.shape[-2]
    if isinstance(spec.kv, Paged):
        assert table is not None
        hk, page, pages = k.shape[1], spec.kv.page, k.shape[0]
        tk = table.shape[-1] * page
    else:
        hk, page, pages, tk = k.shape[-3], 0, 0, k.shape[-2]
    loop = (*lead, hq, tq, tk)
    loads = [load(a, ld, loop) for a, ld in zip(operands[first:], spec.loads, strict=True)]
    prog = spec.prog
    band = masks.band(prog)
    if band is not None and not band.exact_for(tq, tk):
        band = None
    band_all = band.intervals(np.arange(tq, dtype=np.int64)) if band is not None else None
    lse_target = views.target(dsts[1])
    assert lse_target is not None  # the accumulator is float32 or float64
    acc_dt = spec.acc
    qd, kd, vd = operands[0].dtype, operands[1].dtype, operands[2].dtype
    return _Plan(
        spec=spec, acc=acc_dt.numpy_dtype, score_dt=_work(acc_dt, qd, kd),
        value_dt=_work(acc_dt, vd), q=q, k=k, v=v, table=table, page=page, pages=pages,
        lengths=lengths, loads=loads, lead=lead, hq=hq, tq=tq, tk=tk,
        group=hq // hk if hk else 1, tiling=_Tiling(), band=band, band_all=band_all,
        ev_vis=None if band is not None else program.compile(_output_program(prog, 0)),
        ev_logit=None if _is_score(prog) else program.compile(_output_program(prog, 1)),
        reads_score=prog.reads(1, 0), o_dtype=dsts[0].dtype, o_target=o_target,
        lse_target=lse_target,
        scale=acc_dt.numpy_dtype.type(spec.scale))


@final
@dataclass(frozen=True, slots=True)
class _Rows:
    """One row tile's visibility: a key interval per row, ``[lo, hi)``, keys in
    ``[lo_max, hi_min)`` seen by every row; where the band gives several
    intervals (``multi``) or the mask is no band (``general``), ``lo``/``hi``
    are only the key range and the mask is applied per block. No row sees a
    key outside ``[jlo, jhi)``."""

    lo: Arr
    hi: Arr
    lo_max: int
    hi_min: int
    multi: masks.Intervals | None
    general: bool
    jlo: int
    jhi: int


def _rows(plan: _Plan, r0: int, r1: int, kmax: int) -> _Rows:
    """The visibility of rows ``[r0, r1)`` over keys below ``kmax``."""
    n = r1 - r0
    if plan.band_all is None:
        return _Rows(masks.per_row(n, 0), masks.per_row(n, kmax), 0, kmax, None, True, 0, kmax)
    ivs = masks.merged([(lo[r0:r1], hi[r0:r1]) for lo, hi in plan.band_all], kmax)
    if not ivs:
        return _Rows(masks.per_row(n, 0), masks.per_row(n, 0), 0, 0, None, False, 0, 0)
    jlo = min(int(lo[lo < hi].min()) for lo, hi in ivs)
    jhi = max(int(hi[lo < hi].max()) for lo, hi in ivs)
    if len(ivs) == 1:
        lo, hi = ivs[0]
        return _Rows(lo, hi, int(lo.max()), int(hi.min()), None, False, jlo, jhi)
    return _Rows(masks.per_row(n, jlo), masks.per_row(n, jhi), jlo, jlo, ivs, False, jlo, jhi)


# --------------------------------------------------------------------------
# Keys and values of one (lead index, key head)
# --------------------------------------------------------------------------


@final
@dataclass(slots=True)
class _Head:
    """Keys and values of one (lead index, key head) below ``kmax``, as the
    tiles read them: views where they already are in the work dtypes and dense,
    else converted or gathered (all at once where it fits ``HEAD_CACHE_BYTES``,
    else per tile). ``bad`` are the keys whose value holds a NaN or an
    infinity; hidden pages are never read and read as zeros."""

    plan: _Plan
    b: tuple[int, ...]
    g: int
    kmax: int
    k_all: Arr | None = None
    v_all: Arr | None = None
    ok_all: Arr | None = None
    bad: Arr = field(default_factory=lambda: np.empty(0, np.int64))

    def __post_init__(self) -> None:
        plan = self.plan
        size = self.kmax * (plan.k.shape[-1] * plan.score_dt.itemsize
                            + plan.v.shape[-1] * plan.value_dt.itemsize)
        direct = (plan.table is None and plan.k.dtype == plan.score_dt
                  and plan.v.dtype == plan.value_dt)
        if not direct and size <= HEAD_CACHE_BYTES:
            self.k_all, self.v_all, self.ok_all = self._fetch(0, self.kmax)
        bad = []
        step = max(1, (ROWS * KEYS) // max(1, plan.v.shape[-1]))
        for j0 in range(0, self.kmax, step):
            j1 = min(self.kmax, j0 + step)
            _, vals, ok = self.tile(j0, j1, keys=False)
            if np.isfinite(vals.sum()):
                continue  # every value finite (the common case, one fast sum)
            finite = np.isfinite(vals).all(axis=1)
            if ok is not None:
                finite |= ok == 0
            bad.append(np.flatnonzero(~finite) + j0)
        self.bad = np.concatenate(bad) if bad else self.bad

    def _fetch(self, j0: int, j1: int, keys: bool = True
               ) -> tuple[Arr, Arr, Arr | None]:
        """Keys (unless not ``keys``), values and the page mask of ``[j0, j1)``,
        read from the operands and widened into the work dtypes."""
        plan = self.plan
        if plan.table is None:
            kh, vh = plan.k[(*self.b, self.g)], plan.v[(*self.b, self.g)]
            kk = kh[j0:j1].astype(plan.score_dt, copy=False) if keys else kh[:0]
            return kk, vh[j0:j1].astype(plan.value_dt, copy=False), None
        # Key t is entry table[b, t // page] at t % page. Pages are copied
        # whole (a fast gather of contiguous rows) but for a last one that
        # [j0, j1) ends inside, of which only the keys before j1 are read, so
        # no key past the length is; keys on hidden pages are never read: they
        # stay zero, and the page mask hides them.
        page = plan.page
        p0, whole, p1 = j0 // page, j1 // page, -(-j1 // page)
        entries = plan.table[self.b][p0:p1]
        valid = (entries >= 0) & (entries < plan.pages)
        cut = slice(j0 - p0 * page, j1 - p0 * page)
        ok = np.repeat(valid.astype(np.uint8), page)[cut]
        kk = self._pages(plan.k, plan.score_dt, entries, valid, whole - p0, j1 - whole * page,
                         keys)
        vv = self._pages(plan.v, plan.value_dt, entries, valid, whole - p0,
                         j1 - whole * page, True)
        return kk[cut], vv[cut], None if valid.all() else ok

    def _pages(self, pool: Arr, dt: np.dtype[Any], entries: Arr, valid: Arr, whole: int,
               tail: int, wanted: bool) -> Arr:
        """Key head g of pages ``entries`` of ``pool`` as rows ``[n·page, d]`` of
        ``dt``: the first ``whole`` pages whole, of the last (where there is
        another) its first ``tail`` keys alone; zeros on hidden pages."""
        page, d = pool.shape[2], pool.shape[3] if wanted else 0
        n = entries.shape[0]
        if not wanted or d == 0:
            # Nothing to read: an empty head dimension has no element to gather.
            return np.zeros((n * page, d if wanted else 0), dt)
        if n == whole and valid.all():
            # Every page valid and whole: one gather, no zeros to write first
            # (a fresh buffer's pages are faulted in once, by the gather).
            rows: Arr = pool[entries, self.g].astype(dt, copy=False)
            return rows.reshape(n * page, d)
        out = np.zeros((n, page, d), dt)
        at = np.flatnonzero(valid[:whole])
        out[at] = pool[entries[at], self.g]
        if n > whole and valid[-1]:
            out[-1, :tail] = pool[entries[-1], self.g, :tail]
        return out.reshape(n * page, d)

    def tile(self, j0: int, j1: int, keys: bool = True) -> tuple[Arr, Arr, Arr | None]:
        """Keys, values and page mask (None: every key's page is valid) of ``[j0, j1)``."""
        if self.v_all is not None:
            assert self.k_all is not None
            ok = None if self.ok_all is None else self.ok_all[j0:j1]
            return self.k_all[j0:j1], self.v_all[j0:j1], ok
        return self._fetch(j0, j1, keys)


# --------------------------------------------------------------------------
# One row tile
# --------------------------------------------------------------------------


@final
class _Scratch:
    """A thread's buffers: the tile of outputs (keys by rows) and per-row stats."""

    def __init__(self, plan: _Plan) -> None:
        rows, keys = plan.tiling.rows, plan.tiling.keys
        self.flat = np.empty(rows * keys, plan.acc)
        self.m = np.empty(rows, plan.acc)
        self.total = np.empty(rows, plan.acc)
        self.o = np.empty((rows, plan.v.shape[-1]), plan.value_dt)
        self.part = np.empty((rows, plan.v.shape[-1]), plan.value_dt)
        self.big_m = np.empty(rows)
        self.big_l = np.empty(rows)
        self.big_o = np.empty((rows, plan.v.shape[-1]))
        self.ones = np.ones(keys, np.uint8)
        self.head: _Head | None = None

    def tile(self, n: int, r: int) -> Arr:
        return self.flat[:n * r].reshape(n, r)

    def head_of(self, plan: _Plan, b: tuple[int, ...], g: int, kmax: int) -> _Head:
        h = self.head
        if h is None or h.b != b or h.g != g:
            h = self.head = _Head(plan, b, g, kmax)
        return h


def _raw(plan: _Plan, sc: _Scratch, rows: _Rows, b: tuple[int, ...], h: int, r0: int,
         qt: Arr, kt: Arr, j0: int, j1: int) -> tuple[Arr, Any]:
    """The tile of rows ``[r0, r0 + R)`` and keys ``[j0, j1)``, keys by rows,
    for ``_maxima`` and ``_shifted``, and the factor s they apply: q·k (s the
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
        blas.gemm(kt, qt.T, st)
    else:
        wide = np.empty(st.shape, np.float64)
        blas.gemm(kt, qt.T, wide)
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


def _maxima_of(plan: _Plan, sc: _Scratch, rows: _Rows, st: Arr, s: Any, ok: Arr | None,
               j0: int) -> Arr:
    """The rows' maxima of their visible outputs in the tile (``sc.m``)."""
    r = st.shape[1]
    keyok = sc.ones[:st.shape[0]] if ok is None else ok
    m = sc.m[:r]
    _maxima(st, s, plan.acc.type(-np.inf), rows.lo, rows.hi, rows.lo_max, rows.hi_min, j0,
            keyok, m)
    return m


def _exp_shifted(plan: _Plan, sc: _Scratch, rows: _Rows, st: Arr, s: Any, ok: Arr | None,
                 j0: int, shift: Arr) -> None:
    """``st[j, i] = exp(x − shift[i])`` in place: 0 at hidden pairs."""
    keyok = sc.ones[:st.shape[0]] if ok is None else ok
    _shifted(st, s, plan.acc.type(-np.inf), rows.lo, rows.hi, rows.lo_max, rows.hi_min, j0,
             keyok, shift)
    np.exp(st, out=st)  # NumPy's SIMD exp, over the whole tile at once


def _visible(plan: _Plan, rows: _Rows, b: tuple[int, ...], h: int, r0: int, r: int,
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


def _weighted(plan: _Plan, rows: _Rows, b: tuple[int, ...], h: int, r0: int, w: Arr,
              vt: Arr, head: _Head, ok: Arr | None, j0: int, j1: int, out: Arr) -> None:
    """``out[i] = Σ_j w[j, i] v[j]`` for the tile's rows (BLAS, in the values'
    work dtype). A value holding a NaN or an infinity (rare) is left out of the
    product and added afterwards at the rows that see its key alone, so such a
    value at a hidden pair never reaches o; the non-finite result it gives is
    the same in any order of the sum."""
    ww = w if plan.value_dt == plan.acc else w.astype(plan.value_dt)
    bad = head.bad
    if bad.size:
        bad = bad[(bad >= j0) & (bad < j1)]
        if ok is not None:
            bad = bad[ok[bad - j0] != 0]  # hidden pages read as zeros
    if not bad.size:
        blas.gemm(ww.T, vt, out)
        return
    held = vt[bad - j0]
    finite = np.isfinite(held)
    clean = np.array(vt, copy=True)
    clean[bad - j0] = np.where(finite, held, 0)
    blas.gemm(ww.T, clean, out)
    r = w.shape[1]
    for key, extra in zip(bad.tolist(), np.where(finite, 0, held), strict=True):
        seen = _visible(plan, rows, b, h, r0, r, key)
        out[seen] += ww[key - j0, seen][:, None] * extra[None, :]


@njit(cache=True, nogil=True, boundscheck=False, error_model="numpy")
def _rescale(big_m: Arr, big_l: Arr, big_o: Arr, m: Arr, total: Arr, part: Arr
             ) -> None:  # pragma: no cover - compiled
    """Fold one key tile into a row's running state (float64): maximum
    ``big_m``, sum ``big_l`` and weighted values ``big_o``, given the tile's
    maximum-shifted sums ``total`` and products ``part`` (taken against the new
    maximum ``m``): ``L = L·exp(M − m) + total``, ``O = O·exp(M − m) + part``.
    A row whose maximum is still −∞ keeps L = 0 and O = 0 (its tile values
    are NaNs); a NaN maximum makes both NaNs."""
    r, dv = big_o.shape
    for i in range(r):
        mi = np.float64(m[i])
        if mi == -np.inf:
            big_l[i] = 0.0
            for c in range(dv):
                big_o[i, c] = 0.0
        else:
            alpha = np.exp(big_m[i] - mi)  # 0 where the old maximum is −∞
            big_l[i] = big_l[i] * alpha + np.float64(total[i])
            for c in range(dv):
                big_o[i, c] = big_o[i, c] * alpha + np.float64(part[i, c])
        big_m[i] = mi


@njit(cache=True, nogil=True, boundscheck=False, error_model="numpy")
def _finish(m: Arr, total: Arr, acc_o: Arr, o: Arr, lse: Arr) -> None:  # pragma: no cover
    """Row i's ``lse = m + ln total`` (in float64, rounded once into lse's
    dtype) and ``o = acc_o / total + 0`` (one division, rounded once into o's
    dtype; + 0 makes −0 +0, as a sum from +0 gives, and changes nothing
    else); o = +0 and lse = −∞ where m is −∞ (no visible pair, or only −∞
    outputs), lse = +∞ where m is +∞. ``acc_o`` may be ``o`` itself."""
    r, dv = o.shape
    for i in range(r):
        mi = np.float64(m[i])
        if mi == -np.inf:
            lse[i] = -np.inf
            for c in range(dv):
                o[i, c] = 0
            continue
        lse[i] = np.inf if mi == np.inf else mi + np.log(np.float64(total[i]))
        t = total[i]
        for c in range(dv):
            o[i, c] = acc_o[i, c] / t + 0


def _unit(plan: _Plan, sc: _Scratch, b: tuple[int, ...], h: int, r0: int, r1: int,
          rows: _Rows) -> None:
    """o and lse of rows ``[r0, r1)`` of query head h at lead index b, written
    into the destinations (o through a buffer where its dtype is not the
    values' work dtype). The caller sets NumPy's error state."""
    r = r1 - r0
    target = plan.o_target[(*b, h)][r0:r1]
    direct = target.dtype == plan.value_dt
    o = target if direct else sc.o[:r]
    lse = plan.lse_target[(*b, h)][r0:r1]
    if rows.jlo >= rows.jhi:
        o[...] = 0
        lse[...] = -np.inf
    else:
        head = sc.head_of(plan, b, h // plan.group, plan.kmax(b))
        qt = plan.q[(*b, h)][r0:r1].astype(plan.score_dt, copy=False)
        _attend(plan, sc, rows, b, h, r0, qt, head, o, lse)
    if not direct:
        if plan.o_dtype in (D.float32, D.float64):
            target[...] = o  # NumPy's cast: round to nearest, ties to even, once
        else:
            target[...] = D.of_float(plan.o_dtype, o.astype(np.float64))


def _attend(plan: _Plan, sc: _Scratch, rows: _Rows, b: tuple[int, ...], h: int, r0: int,
            qt: Arr, head: _Head, o: Arr, lse: Arr) -> None:
    """One pass over the row tile's key tiles. Each tile: its outputs x, the
    rows' maximum m over it and the tiles before, e = exp(x − m) (acc), the
    sums Σ e (acc, key order) and the products eᵀ·V (BLAS). One key tile: o =
    (eᵀ·V) / Σ e and lse = m + ln Σ e. Several: each tile folded into float64
    running sums, rescaled by exp(m_old − m_new) (``_rescale``), then o = O / L
    and lse = M + ln L."""
    acc = plan.acc
    r = qt.shape[0]
    keys = plan.tiling.keys
    spans = [(j, min(rows.jhi, j + keys)) for j in range(rows.jlo, rows.jhi, keys)]
    total = sc.total[:r]
    if len(spans) == 1:
        j0, j1 = spans[0]
        kt, vt, ok = head.tile(j0, j1)
        st, s = _raw(plan, sc, rows, b, h, r0, qt, kt, j0, j1)
        m = _maxima_of(plan, sc, rows, st, s, ok, j0)
        _exp_shifted(plan, sc, rows, st, s, ok, j0, m)
        _sums(st, acc.type(0), total)
        _weighted(plan, rows, b, h, r0, st, vt, head, ok, j0, j1, o)
        _finish(m, total, o, o, lse)
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
        _sums(st, acc.type(0), total)
        _weighted(plan, rows, b, h, r0, st, vt, head, ok, j0, j1, part)
        _rescale(big_m, big_l, big_o, m, total, part)
    _finish(big_m, big_l, big_o, o, lse)


_Unit = tuple[tuple[int, ...], int, int, int, _Rows, int]


def _units(plan: _Plan) -> list[_Unit]:
    """Every (lead index, head, r0, r1, visibility, cost) in order; the cost
    estimates the pairs the unit reads. A row tile's visibility is found once
    per length and shared by the heads."""
    step = plan.tiling.rows
    found: dict[tuple[int, int], _Rows] = {}
    out: list[_Unit] = []
    for b in np.ndindex(*plan.lead):
        kmax = plan.kmax(b)
        for r0 in range(0, plan.tq, step):
            if (kmax, r0) not in found:
                found[kmax, r0] = _rows(plan, r0, min(plan.tq, r0 + step), kmax)
        for h in range(plan.hq):
            for r0 in range(0, plan.tq, step):
                r1 = min(plan.tq, r0 + step)
                rows = found[kmax, r0]
                cost = (r1 - r0) * (max(0, rows.jhi - rows.jlo) + 16)
                out.append((b, h, r0, r1, rows, cost))
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


def attention(spec: Attention, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
    """o and lse of every query row (the contract's "Attention"; module doc),
    for a call that fits, the door passed."""
    o_dst = dsts[0]
    packed = views.target(o_dst)
    o_target = np.empty(o_dst.shape, o_dst.dtype.numpy_dtype) if packed is None else packed
    plan = _plan(spec, dsts, operands, o_target)
    units = _units(plan)
    pairs = math.prod((*plan.lead, plan.hq, plan.tq, max(plan.tk, 1)))
    parts = pool.count() if pairs >= MIN_PARALLEL_PAIRS else 1
    ranges = _balanced([u[5] for u in units], parts)

    def job(a: int, z: int) -> Callable[[], None]:
        def run() -> None:
            sc = _Scratch(plan)
            with np.errstate(all="ignore"):
                for b, h, r0, r1, rows, _ in units[a:z]:
                    _unit(plan, sc, b, h, r0, r1, rows)
        return run

    pool.parallel([job(a, z) for a, z in ranges] or [lambda: None])
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
    "attention q·k": "one BLAS product (sgemm/dgemm of the library's own OpenBLAS, on one "
                     "thread) per tile of keys by query rows, K·Qᵀ, in the accumulator: the dk "
                     "products of a pair summed in OpenBLAS's blocked order of dk, a function of "
                     "the extents alone, by fused multiply-adds; then s × q·k, one rounding.",
    "attention weights": "per query row and tile of 1024 keys, the exponentials exp(x − m) "
                         "(0 at hidden pairs) added from +0 in key order, one addition per "
                         "key, in the accumulator; the tiles' sums then rescaled by "
                         "exp(m_old − m_new) and added in key order in float64.",
    "attention o": "per query row and value element, Σ e·v over a tile of 1024 keys by one BLAS "
                   "product (eᵀ·V, OpenBLAS's blocked order of the keys, fused multiply-adds) "
                   "in the accumulator (float64 for float64 values); one tile: divided by Σ e "
                   "once; several: the tiles' products rescaled and added in key order in "
                   "float64 from +0, then divided by L once; + 0 last, so a sum of zeros is +0. "
                   "A value holding a NaN or an infinity is left out of the product and added "
                   "after it, at the rows that see its key.",
}

ALGORITHMS: Final = {
    "attention": (
        "Per tile of 128 query rows, one pass over tiles of 1024 keys (flash-style; memory per "
        "thread one tile of outputs, plus one (lead, key head)'s converted or gathered keys "
        "and values up to 16 MiB; no [tq, tk] array). Keys past the length and on pages "
        "outside [0, pages) are never read (hidden pages read as zeros); masks that are "
        "And/Or of comparisons of affine int64 functions of the row (Coord 1) and the key "
        "(Coord 0) become key intervals per row, so key tiles no row sees are skipped; other "
        "masks run output 0 per block. Hidden pairs' outputs are −∞. Per key tile: m the "
        "rows' running maximum, e = exp(x − m) in the accumulator (NumPy's SIMD exp, relative "
        "error ρ ≤ 4u: measured 3.6u for float32 and 1.2u for float64 on x ≤ 0), Σ e, eᵀ·V. "
        "One key tile: o = (eᵀ·V)/Σ e, lse = m + ln Σ e (float64, rounded once). Several: "
        "L = L·exp(M − m) + Σ e and O = O·exp(M − m) + eᵀ·V in float64, then o = O/L and "
        "lse = M + ln L. ε: |lse − L| ≤ ε = (3b + ln tk + 8)·u + γ(tk), u the accumulator's "
        "unit roundoff, b a bound on the visible outputs' magnitudes, barring overflow and "
        "underflow. The weights applied are w = e·exp(m − M)/L; rounded into the accumulator "
        "they are exp(x − L + δ) with |δ| ≤ 4bu + 9u′ + γ(1024) ≤ (1 + u)ε + (2b + ln tk)u + "
        "5u′, and o is within γ(tk + 2)·Σ|w||v| of Σ w v before its rounding into its dtype. "
        "q·k is within γ(dk)·Σ|qᵢkᵢ|; both within e(K) = γ(K + 3), the library's error factor. "
        "Weights are never rounded to float16 or bfloat16 (the r(cw)/c option is not used). "
        "Special rows: no visible pair or only −∞ outputs: o = +0, lse = −∞; a +∞ output and "
        "no NaN: lse = +∞, o a NaN; a NaN output: NaNs. A NaN or an infinity at a hidden "
        "pair, in k, v, a load or output 1, never reaches o or lse: keys and values past the "
        "length or on hidden pages are never read, hidden pairs' outputs are −∞ before the "
        "maximum, and a non-finite value is added only at the rows that see its key (so a NaN "
        "value at a visible pair of weight 0 makes o a NaN). Threads: units of (lead index, "
        "head, row tile) spread over the host threads by estimated cost, each computed by the "
        "same operations whatever thread runs it, BLAS pinned to one thread: the bits do not "
        "depend on the thread count."
    ),
}

FAMILY: Final = Family(
    prose={"attention": PROSE},
    association=ASSOCIATION,
    algorithms=ALGORITHMS,
)

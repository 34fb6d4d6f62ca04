"""One attention call's plan on the host (see ``attention``): the tiling, a
function of the extents alone; the program of the pair's outputs; the
operands as NumPy arrays, each query row's visible keys, and the keys and
values of one (lead index, key head), converted or gathered once.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, final

import numpy as np
import numpy.typing as npt

from nxkernel_core import dtype as D
from nxkernel_core import masks
from nxkernel_core.array import Array
from nxkernel_core.dtype import Dtype
from nxkernel_core.prog import Const, Convert, Coord, In, Op1, Op2, Prog, operands_of
from nxkernel_core.spec import Attention, Paged

from . import program, views
from .loads import load

__all__ = ["HEAD_CACHE_BYTES", "KEYS", "LANE_ROWS", "MIN_PARALLEL_PAIRS", "ROWS", "Head", "Plan", "Rows",
           "plan_call", "row_tile"]

Arr = npt.NDArray[Any]
_F32: Final = np.dtype(np.float32)
_F64: Final = np.dtype(np.float64)


# --------------------------------------------------------------------------
# Tiling: a function of the extents alone
# --------------------------------------------------------------------------

#: Query rows per row tile: the rows one product and one pass of the
#: kernels take at once.
ROWS: Final = 128
#: Keys per key tile: a tile of ``ROWS × KEYS`` outputs (512 KiB of float32)
#: stays in a core's L2 cache with the keys and values it reads.
KEYS: Final = 1024
#: Bytes of one (lead index, key head)'s keys and values that a thread keeps
#: converted or gathered (float16 keys, paged pools) for all its row tiles.
HEAD_CACHE_BYTES: Final = 16 << 20
#: Row tiles of at most this many rows (decoding: the few rows of one key
#: head's query heads) take both products from ``lanedots``' lane kernels,
#: which read each key and value once (measured 1.6–5× OpenBLAS at 1–4 rows),
#: the others from its register-blocked product (faster from 8 rows).
LANE_ROWS: Final = 4
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
        stack += operands_of(prog.nodes[i])
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
# One call: its operands as NumPy, its visibility and its units
# --------------------------------------------------------------------------


def _work(*dts: Dtype) -> np.dtype[Any]:
    """float64 where the accumulator or an operand is float64, else float32:
    every narrower float widens exactly into it."""
    return _F64 if any(dt is D.float64 for dt in dts) else _F32


@final
@dataclass(slots=True)
class Plan:
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


def plan_call(spec: Attention, dsts: Sequence[Array], operands: Sequence[Array],
              o_target: Arr) -> Plan:
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
    band, band_all = _band(prog, tq, tk)
    lse_target = views.target(dsts[1])
    assert lse_target is not None  # the accumulator is float32 or float64
    acc_dt = spec.acc
    qd, kd, vd = operands[0].dtype, operands[1].dtype, operands[2].dtype
    return Plan(
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
class Rows:
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


@functools.lru_cache(maxsize=64)
def _band(prog: Prog, tq: int, tk: int) -> tuple[masks.Band | None, masks.Intervals | None]:
    """The mask's band where output 0 is one exact for ``tq`` rows and ``tk``
    keys, and its intervals over every row (read-only): a function of the
    program and the extents, found once for them."""
    band = masks.band(prog)
    if band is None or not band.exact_for(tq, tk):
        return None, None
    intervals = band.intervals(np.arange(tq, dtype=np.int64))
    for lo, hi in intervals:
        lo.flags.writeable = hi.flags.writeable = False
    return band, intervals


@functools.lru_cache(maxsize=256)
def row_tile(prog: Prog, tq: int, tk: int, r0: int, r1: int, kmax: int, heads: int) -> Rows:
    """The visibility of rows ``[r0, r1)`` over keys below ``kmax`` (``_rows``),
    repeated for ``heads`` heads stacked as rows: a function of the program
    and these extents, found once for them (its arrays read-only)."""
    rows = _rows(_band(prog, tq, tk)[1], r0, r1, kmax)
    if heads > 1:
        multi = None if rows.multi is None else [(np.tile(lo, heads), np.tile(hi, heads))
                                                 for lo, hi in rows.multi]
        rows = Rows(np.tile(rows.lo, heads), np.tile(rows.hi, heads), rows.lo_max, rows.hi_min,
                    multi, rows.general, rows.jlo, rows.jhi)
    for x in (rows.lo, rows.hi, *(y for pair in rows.multi or [] for y in pair)):
        x.flags.writeable = False
    return rows


def _rows(band_all: masks.Intervals | None, r0: int, r1: int, kmax: int) -> Rows:
    """The visibility of rows ``[r0, r1)`` over keys below ``kmax``, from the
    band's intervals over every row (None: no band)."""
    n = r1 - r0
    if band_all is None:
        return Rows(masks.per_row(n, 0), masks.per_row(n, kmax), 0, kmax, None, True, 0, kmax)
    ivs = masks.merged([(lo[r0:r1], hi[r0:r1]) for lo, hi in band_all], kmax)
    if not ivs:
        return Rows(masks.per_row(n, 0), masks.per_row(n, 0), 0, 0, None, False, 0, 0)
    jlo = min(int(lo[lo < hi].min()) for lo, hi in ivs)
    jhi = max(int(hi[lo < hi].max()) for lo, hi in ivs)
    if len(ivs) == 1:
        lo, hi = ivs[0]
        return Rows(lo, hi, int(lo.max()), int(hi.min()), None, False, jlo, jhi)
    return Rows(masks.per_row(n, jlo), masks.per_row(n, jhi), jlo, jlo, ivs, False, jlo, jhi)


# --------------------------------------------------------------------------
# Keys and values of one (lead index, key head)
# --------------------------------------------------------------------------


@final
@dataclass(slots=True)
class Head:
    """Keys and values of one (lead index, key head) below ``kmax``, as the
    tiles read them: views where they already are in the work dtypes and dense,
    else converted or gathered (all at once where it fits ``HEAD_CACHE_BYTES``,
    else per tile). Hidden pages are never read and read as zeros."""

    plan: Plan
    b: tuple[int, ...]
    g: int
    kmax: int
    k_all: Arr | None = None
    v_all: Arr | None = None
    ok_all: Arr | None = None

    def __post_init__(self) -> None:
        plan = self.plan
        size = self.kmax * (plan.k.shape[-1] * plan.score_dt.itemsize
                            + plan.v.shape[-1] * plan.value_dt.itemsize)
        direct = (plan.table is None and plan.k.dtype == plan.score_dt
                  and plan.v.dtype == plan.value_dt)
        if not direct and size <= HEAD_CACHE_BYTES:
            self.k_all, self.v_all, self.ok_all = self._fetch(0, self.kmax)

    def _fetch(self, j0: int, j1: int) -> tuple[Arr, Arr, Arr | None]:
        """Keys, values and the page mask of ``[j0, j1)``,
        read from the operands and widened into the work dtypes."""
        plan = self.plan
        if plan.table is None:
            kh, vh = plan.k[(*self.b, self.g)], plan.v[(*self.b, self.g)]
            kk = kh[j0:j1].astype(plan.score_dt, copy=False)
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
        kk = self._pages(plan.k, plan.score_dt, entries, valid, whole - p0, j1 - whole * page)
        vv = self._pages(plan.v, plan.value_dt, entries, valid, whole - p0, j1 - whole * page)
        return kk[cut], vv[cut], None if valid.all() else ok

    def _pages(self, pool: Arr, dt: np.dtype[Any], entries: Arr, valid: Arr, whole: int,
               tail: int) -> Arr:
        """Key head g of pages ``entries`` of ``pool`` as rows ``[n·page, d]`` of
        ``dt``: the first ``whole`` pages whole, of the last (where there is
        another) its first ``tail`` keys alone; zeros on hidden pages."""
        page, d = pool.shape[2], pool.shape[3]
        n = entries.shape[0]
        if d == 0:
            # Nothing to read: an empty head dimension has no element to gather.
            return np.zeros((n * page, d), dt)
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

    def tile(self, j0: int, j1: int) -> tuple[Arr, Arr, Arr | None]:
        """Keys, values and page mask (None: every key's page is valid) of ``[j0, j1)``."""
        if self.v_all is not None:
            assert self.k_all is not None
            ok = None if self.ok_all is None else self.ok_all[j0:j1]
            return self.k_all[j0:j1], self.v_all[j0:j1], ok
        return self._fetch(j0, j1)

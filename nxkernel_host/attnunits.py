"""Attention's tile kernels, and many row tiles in two compiled calls.

The kernels over a tile of outputs (keys by rows) are ``attention``'s; this
module holds them with the path that runs most row tiles without Python per
tile: a row tile of one key tile (every row sees at most ``KEYS·⌊ROWS/r⌋``
keys), no mask but one key interval per row and the score as output 1, dense
keys and values and every operand already in the accumulator's dtype.
Sentence encoders (many heads of a few dozen tokens) and decoding (the heads
of a key head as one row tile) are such calls. Row tiles are taken in
chunks whose tiles of outputs fit one tile of ``ROWS × KEYS``; per chunk
two calls:

1. one compiled call: per row tile, ``K·Qᵀ`` by ``lanedots`` (the kernel
   ``attention._key_products`` takes for the row tile alone, on the same
   values: ``scores_at`` for at most ``LANE_ROWS`` rows, else
   ``product_at`` over the rows' transpose), the rows' maxima and the
   exponentials of the shifted outputs (``tile_maxima``, ``tile_exponentials``);
2. one compiled call: per row tile, ``Σ e`` (``tile_sums``), ``eᵀ·V`` by
   ``lanedots`` (``weighted_at`` or ``product_at``, as
   ``attention._weighted_values``), ``o`` and ``lse`` (``finish_rows``),
   written into the destinations.

Every row tile thus runs the operations ``attention._attend`` runs for it,
in the same order on the same values: the bits are those of the per-tile
path. A row tile whose product is not finite (a NaN or an infinity in a
value, which that path handles apart) or whose operands the kernels would
read through a copy is left to the per-tile path, which recomputes it from
the start.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt
from numba import njit, types
from numba.extending import overload

from . import blas, lanedots
from .attnplan import KEYS, LANE_ROWS, ROWS, Plan, Rows
from .blas import TRANS
from .simdbase import wide_vectors
from .simdfloat32 import expf_one
from .simdfloat64 import exp64_one

__all__ = ["CHUNK", "FIELDS", "Chunked", "chunked", "finish_rows", "fold_tile", "spread",
           "tile_exponentials", "tile_maxima", "tile_sums"]

Arr = npt.NDArray[Any]

#: Tiles of fewer rows than this take ``tile_exponentials``'s Exp in a pass of its own
#: over the flat tile (an Exp per row in the key loop would run on 4 lanes).
_FLAT_ROWS: Final = 16
#: Keys per step of the flat passes over such a tile: r·16 elements, whole
#: vectors for any r.
_FLAT_KEYS: Final = 16
#: Elements of one chunk's tiles of outputs: one tile of ``ROWS × KEYS``.
CHUNK: Final = ROWS * KEYS
#: Fields of a row tile: lead index (flat), first query head, heads, first
#: row, rows per head, keys [jlo, jhi), keys every row sees [lo_max,
#: hi_min), offset of its rows' intervals, q's transposition flag and
#: leading dimension, offset of its tile of outputs, offset of its rows'
#: statistics.
FIELDS: Final = 14


# --------------------------------------------------------------------------
# The kernels over one tile of outputs, keys by rows ([n, R], C-contiguous)
# --------------------------------------------------------------------------


# Each kernel reads a tile ``st`` of raw outputs, keys by rows ([n, R],
# C-contiguous), key ``k0 + j`` at row j of it. A pair is visible where
# ``lo[i] <= key < hi[i]`` and ``keyok[j] != 0``; keys in ``[lo_max, hi_min)``
# are visible to every row, so they skip the per-row compare (what makes the
# loops over rows vectorise fully for most keys). The output of a visible
# pair is ``x = s × st[j, i]`` rounded once (no FMA: Numba does not contract).


@njit(inline="always")
def _flat_span(st: Arr, lo_max: int, hi_min: int, k0: int, keyok: Arr) -> tuple[int, int]:
    """The tile rows [a, b) that ``tile_maxima`` and ``tile_exponentials`` take in flat
    passes: keys every row sees (``[lo_max, hi_min)``, each key's page
    valid), in a C-contiguous tile of fewer than ``_FLAT_ROWS`` rows, at
    least ``_FLAT_KEYS`` of them; (0, 0) where there are none. Row by row,
    such a tile's loops over its few rows would not vectorise."""
    n, r = st.shape
    a, b = max(0, lo_max - k0), min(n, hi_min - k0)
    if r >= _FLAT_ROWS or b - a < _FLAT_KEYS or not st.flags.c_contiguous:
        return 0, 0
    hidden = 0
    for j in range(a, b):
        hidden += keyok[j] == 0
    return (0, 0) if hidden else (a, b)


@njit(inline="always")
def _flat_maxima(st: Arr, s: Any, ninf: Any, a: int, b: int, m: Arr) -> bool:
    """``m[i]`` the maximum of the outputs x of tile rows [a, b) of row i (every
    pair visible), as ``tile_maxima``'s loop finds it but over lanes of
    ``_FLAT_KEYS`` keys: the flat tile in steps of ``r·_FLAT_KEYS``
    elements, one running maximum per element of a step, then the lanes of
    each row. False, m unset, where an output is a NaN or an infinity (``x −
    x`` is then a NaN): which NaN ``tile_maxima`` keeps depends on the order, so
    the row loop decides. Without NaNs the maximum is the same value in any
    order (of +0 and −0 a lane may keep the other, which no Exp, sum or lse
    tells apart)."""
    r = st.shape[1]
    flat = st.ravel()[a * r:b * r]
    width = r * _FLAT_KEYS
    lanes = np.full(width, ninf)
    check = np.zeros(width, st.dtype)
    whole = flat.shape[0] - flat.shape[0] % width
    for f0 in range(0, whole, width):
        step = flat[f0:f0 + width]
        for lane in range(width):
            x = s * step[lane]
            mx = lanes[lane]
            lanes[lane] = x if not x <= mx else mx
            check[lane] += x - x
    tail = flat[whole:]
    for lane in range(tail.shape[0]):
        x = s * tail[lane]
        mx = lanes[lane]
        lanes[lane] = x if not x <= mx else mx
        check[lane] += x - x
    for lane in range(width):
        if check[lane] != 0:
            return False
        x, i = lanes[lane], lane % r
        m[i] = x if x > m[i] else m[i]
    return True


@njit(inline="always")
def _row_maxima(st: Arr, s: Any, ninf: Any, lo: Arr, hi: Arr, lo_max: int, hi_min: int, k0: int,
                keyok: Arr, j0: int, j1: int, m: Arr) -> None:
    """``tile_maxima``'s loop over tile rows [j0, j1), in key order, row by row."""
    r = st.shape[1]
    for j in range(j0, j1):
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
def tile_maxima(st: Arr, s: Any, ninf: Any, lo: Arr, hi: Arr, lo_max: int, hi_min: int, k0: int,
                keyok: Arr, m: Arr) -> None:  # pragma: no cover - compiled
    """``m[i]``: the maximum of row i's visible outputs x, −∞ for none, a NaN
    where one is a NaN (the last in key order). Reads the tile, writes
    nothing to it. A tile of few rows takes its keys that every row sees in
    flat passes (``_flat_maxima``), the others row by row."""
    n, r = st.shape
    for i in range(r):
        m[i] = ninf
    a, b = _flat_span(st, lo_max, hi_min, k0, keyok)
    if b > a and not _flat_maxima(st, s, ninf, a, b, m):
        a = b = 0
        for i in range(r):
            m[i] = ninf
    _row_maxima(st, s, ninf, lo, hi, lo_max, hi_min, k0, keyok, 0, a, m)
    _row_maxima(st, s, ninf, lo, hi, lo_max, hi_min, k0, keyok, b, n, m)


def _exp(x: Any) -> Any:
    """e^x by the library's own Exp of x's dtype: ``simdfloat32.expf_one`` for
    a float32, ``simdfloat64.exp64_one`` else (in compiled code the overload
    below chooses by the type)."""
    return expf_one(x) if isinstance(x, np.float32) else exp64_one(x)


@overload(_exp)
def _exp_of(x: Any) -> Any:
    """float32: ``simdfloat32.expf_one``; float64: ``simdfloat64.exp64_one``
    (each within 1 ulp of the correctly rounded value, Annex F's special
    values exact)."""
    if x == types.float32:
        def single(x: Any) -> Any:  # pragma: no cover - compiled
            return expf_one(x)
        return single
    if x == types.float64:
        def double(x: Any) -> Any:  # pragma: no cover - compiled
            return exp64_one(x)
        return double
    return None


@njit(inline="always")
def _shift_rows(st: Arr, s: Any, ninf: Any, lo: Arr, hi: Arr, lo_max: int, hi_min: int, k0: int,
                keyok: Arr, shift: Arr, exp: bool) -> None:  # pragma: no cover - compiled
    """``st[j, i] = x − shift[i]`` (x as ``tile_maxima`` reads it, one rounding
    each; −∞ − shift[i] at hidden pairs), and its Exp (``_exp``) where
    ``exp``, a constant at each call, so that each caller's loops are
    compiled for one of the two."""
    n, r = st.shape
    for j in range(n):
        key = k0 + j
        if keyok[j] == 0:
            for i in range(r):
                x = ninf - shift[i]
                st[j, i] = _exp(x) if exp else x
        elif lo_max <= key and key < hi_min:
            for i in range(r):
                x = s * st[j, i] - shift[i]
                st[j, i] = _exp(x) if exp else x
        else:
            for i in range(r):
                x = s * st[j, i]
                x = (ninf if ((lo[i] > key) | (key >= hi[i])) else x) - shift[i]
                st[j, i] = _exp(x) if exp else x


@njit(cache=True, nogil=True, boundscheck=False, error_model="numpy")
def tile_exponentials(st: Arr, s: Any, ninf: Any, lo: Arr, hi: Arr, lo_max: int, hi_min: int,
                      k0: int, keyok: Arr, shift: Arr) -> None:  # pragma: no cover - compiled
    """``st[j, i] = exp(x − shift[i])``: x as ``tile_maxima`` reads it, x −
    shift[i] rounded once, then the library's own Exp of the accumulator's
    dtype (``_exp``); 0 at hidden pairs (e^(−∞ − shift[i]), a NaN where the
    shift is a NaN). A C-contiguous tile of fewer rows than ``_FLAT_ROWS``
    (decoding's) takes the Exp in a pass of its own over the flat tile, and
    its keys that every row sees in a flat pass of lanes of ``_FLAT_KEYS``
    keys (``_flat_span``), so that both run on whole vectors; any other tile
    takes both row by row. The values are the same."""
    wide_vectors()
    r = st.shape[1]
    if r >= _FLAT_ROWS or not st.flags.c_contiguous:
        _shift_rows(st, s, ninf, lo, hi, lo_max, hi_min, k0, keyok, shift, True)
        return
    a, b = _flat_span(st, lo_max, hi_min, k0, keyok)
    _shift_rows(st[:a], s, ninf, lo, hi, lo_max, hi_min, k0, keyok, shift, False)
    _shift_rows(st[b:], s, ninf, lo, hi, lo_max, hi_min, k0 + b, keyok[b:], shift, False)
    width = r * _FLAT_KEYS
    lanes = np.empty(width, st.dtype)
    for lane in range(width):
        lanes[lane] = shift[lane % r]
    flat = st.ravel()
    shifted = flat[a * r:b * r]
    whole = shifted.shape[0] - shifted.shape[0] % width
    for f0 in range(0, whole, width):
        step = shifted[f0:f0 + width]
        for lane in range(width):
            step[lane] = s * step[lane] - lanes[lane]
    tail = shifted[whole:]
    for lane in range(tail.shape[0]):
        tail[lane] = s * tail[lane] - lanes[lane]
    for f in range(flat.shape[0]):
        flat[f] = _exp(flat[f])


@njit(cache=True, nogil=True, boundscheck=False, error_model="numpy")
def tile_sums(e: Arr, zero: Any, total: Arr) -> None:  # pragma: no cover - compiled
    """``total[i] = Σ_j e[j, i]``: from +0, adding the keys in their order."""
    n, r = e.shape
    for i in range(r):
        total[i] = zero
    for j in range(n):
        for i in range(r):
            total[i] += e[j, i]


@njit(cache=True, nogil=True, boundscheck=False, error_model="numpy")
def fold_tile(big_m: Arr, big_l: Arr, big_o: Arr, m: Arr, total: Arr, part: Arr
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
def finish_rows(m: Arr, total: Arr, acc_o: Arr, o: Arr, lse: Arr) -> None:  # pragma: no cover
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


# --------------------------------------------------------------------------
# Many row tiles: the two compiled calls of a chunk
# --------------------------------------------------------------------------


@njit(cache=True, nogil=True, boundscheck=False, error_model="numpy")
def _scores(q4: Arr, k4: Arr, group: int, units: Arr, lo: Arr, hi: Arr, flat: Arr, m_all: Arr,
            keyok: Arr, s: Any, ninf: Any, lane_rows: int, qbuf: Arr,
            redo: Arr) -> None:  # pragma: no cover - compiled
    """Step 1 of a chunk (module doc): per row tile u, its tile of outputs
    ``K·Qᵀ`` at ``flat[units[u, 12]:]`` (``lanedots.scores_at`` for at most
    ``lane_rows`` rows, else ``lanedots.product_at`` over the rows' transpose,
    copied into ``qbuf``), its rows' maxima at ``m_all[units[u, 13]:]`` and
    the shifted outputs in place; ``redo[u]`` set where the kernels would
    read K or Q through a copy."""
    size = k4.itemsize
    dk = k4.shape[3]
    ks, qs = k4.strides, q4.strides
    aligned = (ks[0] | ks[1] | ks[2] | ks[3] | qs[0] | qs[1] | qs[2]) % size == 0
    for u in range(units.shape[0]):
        b, h, heads, r0, r = units[u, 0], units[u, 1], units[u, 2], units[u, 3], units[u, 4]
        jlo, jhi, lo_max, hi_min, ro = units[u, 5], units[u, 6], units[u, 7], units[u, 8], units[u, 9]
        tq, ldq, off, so = units[u, 10], units[u, 11], units[u, 12], units[u, 13]
        rr, n = heads * r, jhi - jlo
        st = flat[off:off + n * rr].reshape((n, rr))
        if not aligned or (rr <= lane_rows and (tq != TRANS or (dk > 1 and ks[3] != size))):
            redo[u] = 1  # K or Q not in rows of unit stride
            continue
        ko = (b * ks[0] + (h // group) * ks[1] + jlo * ks[2]) // size
        if rr <= lane_rows:
            qo = (b * qs[0] + h * qs[1] + r0 * qs[2]) // size
            lanedots.scores_at(k4, ko, ks[2] // size, n, q4, qo, ldq, rr, dk, st)
        else:
            qt = qbuf[:dk * rr].reshape((dk, rr))
            for j in range(rr):
                for t in range(dk):
                    qt[t, j] = q4[b, h + j // r, r0 + j % r, t]
            lanedots.product_at(1, n, rr, dk, k4.ctypes.data + ko * size, 0, ks[2] // size,
                                ks[3] // size, qt.ctypes.data, 0, rr, st.ctypes.data, 0, rr, ninf)
        m = m_all[so:so + rr]
        tile_maxima(st, s, ninf, lo[ro:ro + rr], hi[ro:ro + rr], lo_max, hi_min, jlo, keyok[:n], m)
        tile_exponentials(st, s, ninf, lo[ro:ro + rr], hi[ro:ro + rr], lo_max, hi_min, jlo,
                          keyok[:n], m)


@njit(cache=True, nogil=True, boundscheck=False, error_model="numpy")
def _values(v4: Arr, o4: Arr, lse3: Arr, group: int, units: Arr, flat: Arr, m_all: Arr,
            t_all: Arr, obuf: Arr, lbuf: Arr, zero: Any, lane_rows: int,
            redo: Arr) -> None:  # pragma: no cover - compiled
    """Step 3 of a chunk (module doc): per row tile u not to redo, ``Σ e``,
    ``eᵀ·V`` (``lanedots.weighted_at`` for at most ``lane_rows`` rows, else
    ``lanedots.product_at`` reading e through its transpose), then o and lse
    into ``o4`` and ``lse3`` (directly for one head, through ``obuf`` and
    ``lbuf`` for several); ``redo[u]`` set where the product is not finite or
    the kernels would read V through a copy."""
    size = v4.itemsize
    dv = v4.shape[3]
    vs = v4.strides
    unit_rows = (dv <= 1 or vs[3] == size) and (vs[0] | vs[1] | vs[2]) % size == 0
    for u in range(units.shape[0]):
        if redo[u]:
            continue
        if not unit_rows:
            redo[u] = 1  # V not in rows of unit stride
            continue
        b, h, heads, r0, r = units[u, 0], units[u, 1], units[u, 2], units[u, 3], units[u, 4]
        jlo, jhi, off, so = units[u, 5], units[u, 6], units[u, 12], units[u, 13]
        rr, n = heads * r, jhi - jlo
        st = flat[off:off + n * rr].reshape((n, rr))
        total = t_all[so:so + rr]
        tile_sums(st, zero, total)
        if heads == 1:
            o = o4[b, h, r0:r0 + r]
            ldc = o4.strides[2] // size
        else:
            o = obuf[:rr * dv].reshape((rr, dv))
            ldc = dv
        vo = (b * vs[0] + (h // group) * vs[1] + jlo * vs[2]) // size
        if rr <= lane_rows:
            lanedots.weighted_at(flat, off, rr, rr, v4, vo, vs[2] // size, n, dv, o, 0, ldc)
        else:
            lanedots.product_at(1, rr, dv, n, st.ctypes.data, 0, 1, rr, v4.ctypes.data + vo * size,
                                0, vs[2] // size, o.ctypes.data, 0, ldc, zero)
        finite = True
        for i in range(rr):
            for c in range(dv):
                finite &= np.isfinite(o[i, c])
        if not finite:
            redo[u] = 1
            continue
        m = m_all[so:so + rr]
        if heads == 1:
            finish_rows(m, total, o, o, lse3[b, h, r0:r0 + r])
            continue
        lse = lbuf[:rr]
        finish_rows(m, total, o, o, lse)
        for i in range(rr):
            hh, row = h + i // r, r0 + i % r
            lse3[b, hh, row] = lse[i]
            for c in range(dv):
                o4[b, hh, row, c] = o[i, c]


# --------------------------------------------------------------------------
# The call's side: which row tiles, their fields, the chunks
# --------------------------------------------------------------------------


#: A row tile as ``attention._units`` lists it: (lead index, first head,
#: heads, r0, r1, visibility, cost).
Unit = tuple[tuple[int, ...], int, int, int, int, Rows, int]


def _view(x: Arr, shape: tuple[int, ...]) -> Arr | None:
    """x reshaped to ``shape`` without a copy, or None where that needs one."""
    try:
        return np.reshape(x, shape, copy=False)
    except ValueError:
        return None


class Chunked:
    """One call's row tiles that the compiled path takes (module doc) and the
    arrays it reads: 4-D views ``[lead, heads, rows, d]`` of q, k, v and o, and
    a 3-D view of lse."""

    def __init__(self, plan: Plan, q4: Arr, k4: Arr, v4: Arr, o4: Arr, lse3: Arr) -> None:
        self.plan = plan
        self.q4, self.k4, self.v4, self.o4, self.lse3 = q4, k4, v4, o4, lse3
        self._qt: dict[tuple[int, int, int], tuple[int, int]] = {}
        self._rows: dict[int, int] = {}
        self._lo: list[Arr] = []
        self._hi: list[Arr] = []
        self._at = 0
        #: Every listed visibility's per-row key intervals, concatenated
        #: (``_rows_at`` gives each one's offset), once ``table`` has listed them.
        self.lo = self.hi = np.zeros(0, np.int64)

    def _q_operand(self, heads: int, r0: int, r1: int) -> tuple[int, int]:
        """How the row tiles of these heads and rows read q's rows in place
        (``attention._unit``'s view ``qt``), in BLAS's terms for ``qt.T``:
        ``TRANS`` and the leading dimension where each row has unit stride and
        the rows lie ``ld`` apart (what the lane kernels read), flag 0 where
        the view is a copy (the row tile then takes the per-tile path)."""
        key = (heads, r0, r1)
        if key not in self._qt:
            plan = self.plan
            qh = plan.q[(0,) * len(plan.lead)][0:heads, r0:r1]
            qt = qh.reshape(heads * (r1 - r0), qh.shape[-1])
            flag, ld = 0, 0
            if np.may_share_memory(qt, plan.q):
                t = qt.T
                x, flag, ld = blas.blas_operand(t)
                if x is not t:
                    flag, ld = 0, 0
            self._qt[key] = (flag, ld)
        return self._qt[key]

    def _rows_at(self, rows: Rows) -> int:
        """The offset of a visibility's per-row intervals in ``lo``/``hi``."""
        at = self._rows.get(id(rows))
        if at is None:
            at = self._rows[id(rows)] = self._at
            self._lo.append(rows.lo.astype(np.int64, copy=False))
            self._hi.append(rows.hi.astype(np.int64, copy=False))
            self._at += rows.lo.shape[0]
        return at

    def fields(self, flat: int, heads: int, r0: int, r1: int, rows: Rows) -> list[int] | None:
        """The fields (``FIELDS``; first head 0, offsets into the chunk 0) of
        the row tiles of lead index ``flat`` (C order), ``heads`` heads, rows
        ``[r0, r1)`` and visibility ``rows``, or None where the per-tile path
        runs them."""
        rr = heads * (r1 - r0)
        keys = KEYS * max(1, ROWS // rr)
        if (rows.multi is not None or rows.general or rows.jlo >= rows.jhi
                or rows.jhi - rows.jlo > keys):
            return None
        flag, ld = self._q_operand(heads, r0, r1)
        if flag == 0:
            return None
        return [flat, 0, heads, r0, r1 - r0, rows.jlo, rows.jhi, rows.lo_max, rows.hi_min,
                self._rows_at(rows), flag, ld, 0, 0]

    def table(self, vis: Sequence[tuple[tuple[int, ...], list[Rows]]], heads: int,
              units: Callable[[tuple[int, ...], list[Rows]], list[Unit]]
              ) -> tuple[Arr, list[Unit]]:
        """The fields of every row tile this path takes, one row each, and the
        others as ``units(b, tiles)`` lists them (``attention``'s units), from
        each lead index's row tiles' visibility ``vis``: a lead index whose
        row tiles all fit gives one block, its rows for every first head."""
        plan = self.plan
        step = plan.tiling.rows
        first = np.arange(0, plan.hq, heads, dtype=np.int64)
        blocks: list[Arr] = []
        others: list[Unit] = []
        if not first.shape[0]:
            return np.zeros((0, FIELDS), np.int64), others  # no head: nothing to compute
        for flat, (b, tiles) in enumerate(vis):
            rows = [self.fields(flat, heads, r0, min(plan.tq, r0 + step), t)
                    for r0, t in zip(range(0, plan.tq, step), tiles, strict=True)]
            if any(f is None for f in rows):
                others += units(b, tiles)
                continue
            if not rows:
                continue  # no row: nothing to compute
            block = np.tile(np.array(rows, np.int64), (first.shape[0], 1))
            block[:, 1] = np.repeat(first, len(rows))
            blocks.append(block)
        table = np.concatenate(blocks) if blocks else np.zeros((0, FIELDS), np.int64)
        if self._lo:
            self.lo, self.hi = np.concatenate(self._lo), np.concatenate(self._hi)
        return table, others

    def units_of(self, table: Arr, vis: Sequence[tuple[tuple[int, ...], list[Rows]]]
                 ) -> list[Unit]:
        """The row tiles of these rows of the table as ``attention``'s units."""
        step = self.plan.tiling.rows
        out: list[Unit] = []
        for flat, h, heads, r0, r in table[:, :5].tolist():
            b, tiles = vis[flat]
            out.append((b, h, heads, r0, r0 + r, tiles[r0 // step], 0))
        return out

    def run(self, table: Arr) -> Arr:
        """Compute the row tiles of ``table`` (rows of fields) chunk by chunk;
        returns which of them the per-tile path must redo. The caller sets
        NumPy's error state."""
        plan = self.plan
        acc = plan.acc
        n_rows = table[:, 2] * table[:, 4]
        sizes = (table[:, 6] - table[:, 5]) * n_rows
        redo = np.zeros(table.shape[0], np.uint8)
        flat = np.empty(CHUNK, acc)
        m_all = t_all = np.empty(0, acc)
        obuf = np.empty(ROWS * self.v4.shape[3], acc)
        qbuf = np.empty(ROWS * self.q4.shape[3], acc)
        lbuf = np.empty(ROWS, acc)
        keyok = _ones()
        ninf, zero = acc.type(-np.inf), acc.type(0)
        start = 0
        while start < table.shape[0]:
            # A chunk: row tiles whose tiles of outputs fit CHUNK elements.
            ends = np.cumsum(sizes[start:])
            stop = start + max(1, int(np.searchsorted(ends, CHUNK, side="right")))
            part = table[start:stop].copy()  # the table may be a cached layout's (read only)
            part[:, 12] = np.concatenate(([0], ends[:stop - start - 1]))
            rows_end = np.cumsum(n_rows[start:stop])
            part[:, 13] = rows_end - n_rows[start:stop]
            used = int(ends[stop - start - 1])
            if used > flat.shape[0]:
                flat = np.empty(used, acc)
            if int(rows_end[-1]) > m_all.shape[0]:
                m_all = np.empty(int(rows_end[-1]), acc)
                t_all = np.empty(int(rows_end[-1]), acc)
            flags = redo[start:stop]
            _scores(self.q4, self.k4, plan.group, part, self.lo, self.hi, flat, m_all, keyok,
                    plan.scale, ninf, LANE_ROWS, qbuf, flags)
            _values(self.v4, self.o4, self.lse3, plan.group, part, flat, m_all, t_all, obuf, lbuf,
                    zero, LANE_ROWS, flags)
            start = stop
        return redo


def spread(table: Arr, parts: int) -> list[tuple[int, int]]:
    """Contiguous ranges of the table's rows of nearly equal cost (the pairs
    a row tile reads), at most ``parts``, none empty."""
    if table.shape[0] == 0:
        return []
    cost = np.cumsum(table[:, 2] * table[:, 4] * (table[:, 6] - table[:, 5] + 16))
    bounds = np.searchsorted(cost, cost[-1] * np.arange(1, parts) / parts, side="right")
    edges = [0, *sorted({int(x) for x in bounds if 0 < x < table.shape[0]}), table.shape[0]]
    return list(itertools.pairwise(edges))


@functools.cache
def _ones() -> Arr:
    """Every key's page valid (dense keys), for the longest tile; read only."""
    ones = np.ones(ROWS * KEYS, np.uint8)
    ones.flags.writeable = False
    return ones


def chunked(plan: Plan) -> Chunked | None:
    """The compiled path for this call (module doc), or None where every row
    tile takes the per-tile path: a program with a transform or a mask that is
    no band, paged keys, an operand or a destination not in the accumulator's
    dtype, an empty head dimension, or an operand that is no 4-D view."""
    acc = plan.acc
    if (plan.ev_logit is not None or not plan.reads_score or plan.band_all is None
            or plan.table is not None or plan.score_dt != acc or plan.value_dt != acc
            or any(x.dtype != acc for x in (plan.q, plan.k, plan.v, plan.o_target))
            or plan.lse_target.dtype != acc or plan.q.shape[-1] == 0 or plan.v.shape[-1] == 0):
        return None
    lead = int(np.prod(plan.lead, dtype=np.int64))
    views: Sequence[Arr | None] = [
        _view(x, (lead, *x.shape[-3:])) for x in (plan.q, plan.k, plan.v, plan.o_target)]
    lse3 = _view(plan.lse_target, (lead, *plan.lse_target.shape[-2:]))
    q4, k4, v4, o4 = views
    if q4 is None or k4 is None or v4 is None or o4 is None or lse3 is None:
        return None
    size = acc.itemsize
    dv = o4.shape[3]
    # The kernels' demands on o (one head's rows written in place).
    if o4.strides[3] != size or o4.strides[2] % size or o4.strides[2] < dv * size:
        return None
    return Chunked(plan, q4, k4, v4, o4, lse3)

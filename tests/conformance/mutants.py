"""Realistic mutants of the real host library: bugs a library author might
write, each planted by patching one function of the host (or the door it
calls) for the length of a test, the real code untouched.

``MUTANTS`` maps each mutant to the law of the conformance kit that kills
it under the default profile, what it breaks, and how it is planted
(``plant(monkeypatch)``). ``test_mutants`` runs them; the table in its
docstring is this one.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

import numpy as np
import pytest

import nxkernel_core.door as DOOR
import nxkernel_core.library as LIB
import nxkernel_host.attention as A
import nxkernel_host.contraction as C
import nxkernel_host.fold as FO
import nxkernel_host.gathers as G
import nxkernel_host.lanes as L
import nxkernel_host.movebits as MB
import nxkernel_host.network as N
import nxkernel_host.pool as P
import nxkernel_host.reduce as R
import nxkernel_host.rowterms as RT
import nxkernel_host.scan as SC
import nxkernel_host.sorts as SO
import nxkernel_host.tiling as T
from nxkernel_core import dtype as D
from nxkernel_core import fits
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_core.door import door
from nxkernel_host import views
from nxkernel_host.library import library as HOST

__all__ = ["MUTANTS", "Mutant"]

Arr = np.ndarray[Any, Any]
Plant = Callable[[pytest.MonkeyPatch], None]


@dataclass(frozen=True)
class Mutant:
    """A planted bug: the law that kills it, what it breaks, how to plant it."""

    law: str
    breaks: str
    plant: Plant


# --------------------------------------------------------------------------
# reduce
# --------------------------------------------------------------------------


def _sum_pairwise_long(mp: pytest.MonkeyPatch) -> None:
    real = R.lane_sum

    def lane_sum(rows: Arr, carrier: Any, acc: Any = None, prep: Any = None) -> Arr:
        if rows.shape[1] > 100_000 and prep is None:
            out: Arr = np.sum(np.asarray(rows, dtype=carrier), axis=1, dtype=acc or carrier)
            return out
        return real(rows, carrier, acc, prep)

    mp.setattr(R, "lane_sum", lane_sum)


def _signed_zero_fixup_off(mp: pytest.MonkeyPatch) -> None:
    def positions(c: Arr, is_max: bool) -> Arr:
        out: Arr = np.argmax(c, axis=1) if is_max else np.argmin(c, axis=1)
        return out

    mp.setattr(R, "_float_positions", positions)


def _split_later_wins(mp: pytest.MonkeyPatch) -> None:
    # The split runs where a kernel call may use two threads or more.
    threads = max(2, P.count())
    mp.setattr(P, "count", lambda: threads)

    def split(c: Arr, is_max: bool) -> Arr:
        n = c.shape[1]
        spans = P.spans(n, max(2, P.parts_for(n, n)))
        cand = np.array([a + int(R._float_positions(c[:, a:b], is_max)[0]) for a, b in spans])
        keys = R.extremum_keys(c[:, cand], D.float32 if c.dtype == np.float32 else D.float64, is_max)[0]
        # The later span's winner kept on a tie.
        best = keys.max() if is_max else keys.min()
        return np.array([cand[np.flatnonzero(keys == best)[-1]]])

    mp.setattr(R, "_split_positions", split)


def _moments_one_pass(mp: pytest.MonkeyPatch) -> None:
    def moments(rows: Arr, term: D.Dtype) -> tuple[Arr, Arr]:
        r, n = rows.shape
        if n == 0:
            return np.full(r, np.nan), np.full(r, np.nan)
        c = RT.float_terms(rows, term).astype(np.float64)
        with np.errstate(all="ignore"):
            mean = R.lane_sum(c, np.float64) / n
            square = R.lane_sum(c * c, np.float64) / n
            var = np.where(np.isfinite(mean), np.maximum(square - mean * mean, 0.0), np.nan)
        return mean, var

    mp.setattr(R, "_moments", moments)


def _few_terms_without_plus_zero(mp: pytest.MonkeyPatch) -> None:
    def few(terms: Any, carrier: Any, mul: bool) -> Arr:
        n = terms.count
        lanes = [np.asarray(terms.term(t, slice(None)), dtype=carrier) for t in range(n)]
        op = np.multiply if mul else np.add
        present = n
        with np.errstate(all="ignore"):
            for half in (8, 4, 2, 1):
                for i in range(half):
                    if i + half < present:
                        lanes[i] = op(lanes[i], lanes[i + half])
                present = min(present, half)
        out: Arr = np.asarray(lanes[0]).reshape(-1)  # no "+ 0": a sum of −0 terms stays −0
        return out

    mp.setattr(R, "_few_terms", few)


def _block_tree_halves(mp: pytest.MonkeyPatch) -> None:
    def tree(v: Arr) -> Any:
        if v.size == 1:
            return v[0]
        half = v.size // 2
        return tree(v[:half]) + tree(v[half:])

    def tree_add(blocks: Arr) -> None:
        for r in range(blocks.shape[0]):
            blocks[r, 0] = tree(blocks[r].copy())

    mp.setattr(L, "tree_add", tree_add)


def _prod_by_numpy(mp: pytest.MonkeyPatch) -> None:
    def lane_prod(rows: Arr, carrier: Any) -> Arr:
        out: Arr = np.prod(np.asarray(rows, dtype=carrier), axis=1, dtype=carrier)
        return out

    mp.setattr(R, "_lane_prod", lane_prod)


def _max_ignores_nan(mp: pytest.MonkeyPatch) -> None:
    real = R._float_positions

    def positions(c: Arr, is_max: bool) -> Arr:
        nan = np.isnan(c)
        if not nan.any():
            return real(c, is_max)
        fill = -np.inf if is_max else np.inf
        return real(np.where(nan, fill, c).astype(c.dtype), is_max)

    mp.setattr(R, "_float_positions", positions)


def _int4_saturates(mp: pytest.MonkeyPatch) -> None:
    real = RT.wrap_int

    def wrap(dt: D.Dtype, v: Arr) -> Arr:
        if dt is D.int4:
            return np.clip(v, -8, 7).astype(dt.numpy_dtype)
        return real(dt, v)

    mp.setattr(R, "wrap_int", wrap)


def _empty_prod_zero(mp: pytest.MonkeyPatch) -> None:
    real = R._lane_prod

    def lane_prod(rows: Arr, carrier: Any) -> Arr:
        if rows.shape[1] == 0:
            return np.zeros(rows.shape[0], carrier)
        return real(rows, carrier)

    mp.setattr(R, "_lane_prod", lane_prod)


def _logsumexp_unshifted(mp: pytest.MonkeyPatch) -> None:
    def logsumexp(rows: Arr, term: D.Dtype) -> Arr:
        r, n = rows.shape
        if n == 0:
            return np.full(r, -np.inf)
        c = RT.float_terms(rows, term)
        with np.errstate(all="ignore"):
            out: Arr = np.log(R.lane_sum(np.exp(c), c.dtype, np.float64))
        return out

    mp.setattr(R, "_logsumexp", logsumexp)


def _logsumexp_shift_by_infinity(mp: pytest.MonkeyPatch) -> None:
    def logsumexp(rows: Arr, term: D.Dtype) -> Arr:
        r, n = rows.shape
        if n == 0:
            return np.full(r, -np.inf)
        c = RT.float_terms(rows, term)
        m = np.max(c, axis=1)
        with np.errstate(all="ignore"):
            s = R.lane_sum(np.exp(c - m[:, None]), c.dtype, np.float64)
            out: Arr = m.astype(np.float64) + np.log(s)
        return out

    mp.setattr(R, "_logsumexp", logsumexp)


# --------------------------------------------------------------------------
# scan
# --------------------------------------------------------------------------


def _scan_by_cumsum(mp: pytest.MonkeyPatch) -> None:
    def real_scan(mul: bool, states: Arr, out: Arr) -> None:
        if states.size:
            (np.cumprod if mul else np.cumsum)(states, axis=1, out=out)

    mp.setattr(N, "real_scan", real_scan)


def _scan_arg_later_equal(mp: pytest.MonkeyPatch) -> None:
    def running(keys: Arr, is_max: bool) -> Arr:
        r, m = keys.shape
        acc = np.maximum.accumulate(keys, axis=1) if is_max else np.minimum.accumulate(keys, axis=1)
        new = np.ones((r, m), bool)
        # An equal key taken as a new extreme: the last of equals wins.
        new[:, 1:] = keys[:, 1:] >= acc[:, :-1] if is_max else keys[:, 1:] <= acc[:, :-1]
        out: Arr = np.maximum.accumulate(np.where(new, np.arange(m), 0), axis=1)
        return out

    mp.setattr(SC, "_running_positions", running)


def _kernel_wrapper(mp: pytest.MonkeyPatch, kernel: str,
                    change: Callable[[Callable[..., Answer], Any, Sequence[Array], Sequence[Array]],
                                     Answer]) -> None:
    real = getattr(HOST, kernel)
    mp.setattr(HOST, kernel, functools.partial(change, real))


def _scan_reverse_ignored(mp: pytest.MonkeyPatch) -> None:
    def scan(real: Callable[..., Answer], spec: S.Scan, dsts: Sequence[Array],
             operands: Sequence[Array]) -> Answer:
        return real(replace(spec, reverse=False), dsts, operands)

    _kernel_wrapper(mp, "scan", scan)


def _scan_carry_dropped(mp: pytest.MonkeyPatch) -> None:
    def scan(real: Callable[..., Answer], spec: S.Scan, dsts: Sequence[Array],
             operands: Sequence[Array]) -> Answer:
        if spec.carry and len(operands) == spec.n_operands():
            return real(replace(spec, carry=False), dsts, operands[1:])
        return real(spec, dsts, operands)

    _kernel_wrapper(mp, "scan", scan)


def _scan_sum_from_first_term(mp: pytest.MonkeyPatch) -> None:
    def from_first(states: Arr, rows: Arr) -> Arr:
        return states  # state 0 is term 0 itself: a −0 first term stays −0

    mp.setattr(SC, "_from_positive_zero", from_first)


# --------------------------------------------------------------------------
# fold
# --------------------------------------------------------------------------


def _fold_values_mutant(narrow_in_own: bool, reverse_taps: bool) -> Callable[..., Arr]:
    def fold_values(spec: S.Fold, dt: D.Dtype, xv: Arr) -> Arr:
        acc_dt = dt.numpy_dtype if narrow_in_own and dt.is_float else D.carrier(dt).numpy_dtype
        acc = np.zeros(spec.shape, acc_dt)
        pad = spec.pad
        window = {w.axis: (k, w) for k, w in enumerate(pad.windows)}
        taps_all = list(np.ndindex(*[w.size for w in pad.windows]))
        for taps in (reversed(taps_all) if reverse_taps else taps_all):
            dst_index: list[slice] = []
            src_index: list[slice | int] = []
            for ax in range(len(spec.shape)):
                d, lo, interior = spec.shape[ax], pad.lo[ax], pad.interior[ax]
                if ax in window:
                    k, w = window[ax]
                    cut = FO._taps(d, lo, interior, xv.shape[ax], w.step, taps[k], w.dilation)
                else:
                    cut = FO._taps(d, lo, interior, xv.shape[ax], 1, 0, 0)
                if cut is None:
                    break
                dst_index.append(cut[0])
                src_index.append(cut[1])
            else:
                with np.errstate(all="ignore"):
                    acc[tuple(dst_index)] += xv[(*src_index, *taps)].astype(acc_dt, copy=False)
        if dt.is_float:
            wide = acc if acc.dtype in (np.float32, np.float64) else acc.astype(np.float32)
            return RT.round_float(dt, wide)
        if dt.is_int:
            return RT.wrap_int(dt, acc)
        return acc

    return fold_values


def _fold_narrow_in_own(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(FO, "_fold_values", _fold_values_mutant(True, False))


def _fold_taps_reversed(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(FO, "_fold_values", _fold_values_mutant(False, True))


# --------------------------------------------------------------------------
# moves
# --------------------------------------------------------------------------


def _scatter_add_reversed(mp: pytest.MonkeyPatch) -> None:
    def loop(dst: Arr, index: Arr, updates: Arr, zero: Any) -> None:
        outer, n, inner = index.shape
        d = dst.shape[1]
        for o in range(outer):
            for k in range(inner):
                # Duplicates added last to first.
                for i in range(n - 1, -1, -1):
                    p = index[o, i, k]
                    if 0 <= p < d:
                        dst[o, p, k] = (zero + dst[o, p, k]) + updates[o, i, k]

    mp.setattr(G, "_scatter_add_loop", loop)


def _scatter_set_first_wins(mp: pytest.MonkeyPatch) -> None:
    def loop(dst: Arr, index: Arr, updates: Arr) -> None:
        outer, n, inner = index.shape
        d = dst.shape[1]
        for o in range(outer):
            for k in range(inner):
                for i in range(n - 1, -1, -1):
                    p = index[o, i, k]
                    if 0 <= p < d:
                        dst[o, p, k] = updates[o, i, k]

    mp.setattr(G, "scatter_set_loop", loop)


def _scatter_min_loses_nan(mp: pytest.MonkeyPatch) -> None:
    real = G.scatter_extreme_loop

    def loop(cur1: Arr, cur2: Arr, index: Arr, upd1: Arr, upd2: Arr, winner: Arr, maximum: bool,
             has_nan: bool, nan_key: Any) -> None:
        real(cur1, cur2, index, upd1, upd2, winner, maximum, False, nan_key)

    mp.setattr(G, "scatter_extreme_loop", loop)


def _gather_clamps(mp: pytest.MonkeyPatch) -> None:
    def loop(x: Arr, index: Arr, out: Arr) -> None:
        d = x.shape[1]
        if d == 0:
            out[...] = 0
            return
        p = np.clip(index, 0, d - 1)
        out[...] = np.take_along_axis(x, p, axis=1)

    mp.setattr(G, "gather_loop", loop)


def _range_gather_clamps(mp: pytest.MonkeyPatch) -> None:
    def loop(x: Arr, starts: Arr, out: Arr) -> None:
        run, d = out.shape[2], x.shape[1]
        for j in range(run):
            if d == 0:
                out[:, :, j, :] = 0
                continue
            p = np.clip(starts + j, 0, d - 1)
            out[:, :, j, :] = np.take_along_axis(x, p, axis=1)

    mp.setattr(G, "range_gather_loop", loop)


def _sort_descending_reversed(mp: pytest.MonkeyPatch) -> None:
    def sort(real: Callable[..., Answer], spec: S.Sort, dsts: Sequence[Array],
             operands: Sequence[Array]) -> Answer:
        if not spec.descending:
            return real(spec, dsts, operands)
        misfit = fits.move_misfit(spec, dsts, operands)
        refused = misfit if misfit is not None else DOOR.refusal(dsts, operands, need_host=True)
        if refused is not None:
            return refused
        (x,) = operands
        values = Array.empty(x.dtype, x.shape)
        positions = Array.empty(D.int64, x.shape)
        answer = real(replace(spec, descending=False, k=None), [values, positions], operands)
        if answer is not Answer.DONE:
            return answer
        n = x.shape[spec.axis]
        k = n if spec.k is None else spec.k
        # Ascending reversed: the ties come out in decreasing position.
        take = np.arange(n - 1, n - 1 - k, -1)
        dsts[0].write_numpy(np.take(values.to_numpy(), take, axis=spec.axis))
        dsts[1].write_numpy(np.take(positions.to_numpy(), take, axis=spec.axis))
        return Answer.DONE

    _kernel_wrapper(mp, "sort", sort)


def _sort_nan_first(mp: pytest.MonkeyPatch) -> None:
    real = MB._float_keys

    def keys(u: Arr, dt: D.Dtype) -> Arr:
        key = real(u, dt)
        ones = key.dtype.type((1 << dt.bits) - 1)
        return np.where(key == ones, key.dtype.type(0), key)

    mp.setattr(MB, "_float_keys", keys)


def _sort_zeros_equal(mp: pytest.MonkeyPatch) -> None:
    real = MB._float_keys

    def keys(u: Arr, dt: D.Dtype) -> Arr:
        neg_zero = u.dtype.type(1 << (dt.bits - 1))
        return real(np.where(u == neg_zero, u.dtype.type(0), u), dt)

    mp.setattr(MB, "_float_keys", keys)


def _sort_unstable(mp: pytest.MonkeyPatch) -> None:
    real = SO._argsort

    def argsort(key: Arr, take: int) -> Arr:
        if key.shape[1] >= SO.RADIX_MIN:
            return real(key, take)
        out: Arr = np.argsort(key, axis=1, kind="quicksort")[:, :take]
        return out

    mp.setattr(SO, "_argsort", argsort)


def _radix_unstable(mp: pytest.MonkeyPatch) -> None:
    def radix(keys: Arr, out: Arr) -> None:
        order = np.argsort(keys, axis=1, kind="quicksort")
        out[...] = order[:, :out.shape[1]]

    mp.setattr(SO, "_radix32_loop", radix)
    mp.setattr(SO, "_radix64_loop", radix)


def _top_k_later_equals(mp: pytest.MonkeyPatch) -> None:
    def choose(keys: Arr, kth: Arr, out: Arr) -> None:
        k = out.shape[1]
        for r in range(keys.shape[0]):
            row, t = keys[r], kth[r]
            below = np.flatnonzero(row < t)
            equal = np.flatnonzero(row == t)
            # The last of the k-th key's equals, not the first.
            out[r] = np.sort(np.concatenate([below, equal[len(equal) - (k - len(below)):]]))

    mp.setattr(SO, "_choose_loop", choose)


def _numbering_side_swapped(mp: pytest.MonkeyPatch) -> None:
    real = SO._numbering_loop

    def loop(k1: Arr, k2: Arr, x1: Arr, x2: Arr, right: bool, out: Arr) -> None:
        real(k1, k2, x1, x2, not right, out)

    mp.setattr(SO, "_numbering_loop", loop)


def _assemble_first_wins(mp: pytest.MonkeyPatch) -> None:
    def assemble(real: Callable[..., Answer], spec: S.Assemble, dsts: Sequence[Array],
                 operands: Sequence[Array]) -> Answer:
        if len(operands) != len(spec.regions) or any(o.identical(d) for o in operands for d in dsts):
            return real(spec, dsts, operands)
        return real(replace(spec, regions=spec.regions[::-1]), dsts, list(operands)[::-1])

    _kernel_wrapper(mp, "assemble", assemble)


# --------------------------------------------------------------------------
# contract
# --------------------------------------------------------------------------


def _contract_zeroes_before_decline(mp: pytest.MonkeyPatch) -> None:
    def contract(real: Callable[..., Answer], spec: S.Contract, dsts: Sequence[Array],
                 operands: Sequence[Array]) -> Answer:
        misfit = LIB.misfit("contract", spec, dsts, operands)
        if misfit is not None:
            return misfit
        with door(dsts, operands, need_host=True) as refusal:
            if refusal is not None:
                return refusal
            # dst cleared for the sums first (unless init is dst), the decline
            # checked after.
            if not any(o.identical(dsts[0]) for o in operands):
                views.store(dsts[0], np.zeros((), dsts[0].dtype.numpy_dtype))
            if C.declines(spec, dsts[0].dtype, [o.dtype for o in operands]) is not None:
                return Answer.DECLINED
        return real(spec, dsts, operands)

    _kernel_wrapper(mp, "contract", contract)


def _contract_tiles_floored(mp: pytest.MonkeyPatch) -> None:
    real = T.tiles

    def tiles(m: int, n: int, k: int, batch: int = 1) -> tuple[tuple[int, int, int, int], ...]:
        # The tiles' rows floored to whole panels: rows past the last whole
        # panel never computed.
        whole = m // T.PANEL * T.PANEL or m
        return tuple((r0, min(r1, whole), c0, c1) for r0, r1, c0, c1 in real(m, n, k, batch)
                     if r0 < whole)

    mp.setattr(T, "tiles", tiles)


def _attention_o_not_rescaled(mp: pytest.MonkeyPatch) -> None:
    def rescale(big_m: Arr, big_l: Arr, big_o: Arr, m: Arr, total: Arr, part: Arr) -> None:
        with np.errstate(all="ignore"):
            alpha = np.where(m == -np.inf, 0.0, np.exp(big_m - m.astype(np.float64)))
        big_l[...] = np.where(m == -np.inf, 0.0, big_l * alpha + total)
        # O folded without its rescaling by exp(M − m).
        big_o[...] = np.where((m == -np.inf)[:, None], 0.0, big_o + part)
        big_m[...] = m

    mp.setattr(A, "fold_tile", rescale)


# --------------------------------------------------------------------------
# The door the host calls
# --------------------------------------------------------------------------


def _spans(a: Array, b: Array) -> tuple[int, int, int, int] | None:
    if a.buffer.memory is not b.buffer.memory or a.numel == 0 or b.numel == 0:
        return None
    return (*a.byte_span(), *b.byte_span())


def _door_shares(test: Callable[[int, int, int, int], bool]) -> Plant:
    def plant(mp: pytest.MonkeyPatch) -> None:
        def shares(a: Array, b: Array) -> bool:
            spans = _spans(a, b)
            return spans is not None and test(*spans)

        mp.setattr(DOOR, "shares_bytes", shares)

    return plant


def _door_bit_spans(mp: pytest.MonkeyPatch) -> None:
    def shares(a: Array, b: Array) -> bool:
        if a.buffer.memory is not b.buffer.memory or a.numel == 0 or b.numel == 0:
            return False
        # Decided on the elements' bits, not on the bytes they lie in.
        (alo, ahi), (blo, bhi) = a.layout.span(), b.layout.span()
        a0, a1 = a.buffer.offset * 8 + alo * a.dtype.bits, a.buffer.offset * 8 + ahi * a.dtype.bits
        b0, b1 = b.buffer.offset * 8 + blo * b.dtype.bits, b.buffer.offset * 8 + bhi * b.dtype.bits
        return a0 < b1 and b0 < a1

    mp.setattr(DOOR, "shares_bytes", shares)


def _door_same_start_is_identical(mp: pytest.MonkeyPatch) -> None:
    real = DOOR.refusal

    def refusal(written: Sequence[Array], read: Sequence[Array], device: Any = None,
                need_host: bool = False) -> Answer | None:
        answer = real(written, read, device, need_host)
        if answer is not Answer.OVERLAPPING:
            return answer
        # A read array starting where a written one starts taken for the same.
        clash = any(DOOR.shares_bytes(w, r) and w.byte_span()[0] != r.byte_span()[0]
                    for w in written for r in read)
        clash = clash or any(DOOR.shares_bytes(w, v) for i, w in enumerate(written)
                             for j, v in enumerate(written) if i != j)
        return answer if clash else None

    mp.setattr(DOOR, "refusal", refusal)


_DOOR_LAW: Final = "map_door_every_sharing"

#: Every mutant, by name.
MUTANTS: Final[dict[str, Mutant]] = {
    # The eight of issue 23.
    "sum_pairwise_long": Mutant("reduce_long_rows_in_stated_order",
                                "float Sum of more than 10⁵ terms by np.sum (pairwise), not lane "
                                "order", _sum_pairwise_long),
    "signed_zero_fixup_off": Mutant("reduce_signed_zeros_and_nans",
                                    "Max, Min and Arg take the first of −0 and +0",
                                    _signed_zero_fixup_off),
    "threaded_arg_later_span": Mutant("reduce_long_row_extremes",
                                      "a long row's Arg split over threads: a later span wins a tie",
                                      _split_later_wins),
    "scatter_add_reversed": Mutant("scatter_fixed_chains",
                                   "scatter Add chains duplicates last to first",
                                   _scatter_add_reversed),
    "sort_descending_reversed": Mutant("sort_ties_every_direction",
                                       "descending sort = ascending reversed (ties reversed)",
                                       _sort_descending_reversed),
    "moments_one_pass": Mutant("reduce_moments_edges",
                               "variance by one pass, E[x²] − mean²", _moments_one_pass),
    "door_misses_containing_operand": Mutant(
        _DOOR_LAW, "the door misses an operand containing the destination",
        _door_shares(lambda alo, ahi, blo, bhi: alo <= blo < ahi or alo < bhi <= ahi)),
    "contract_zeroes_before_decline": Mutant("contract_dtype_pairings",
                                             "contract clears dst inside the door before its "
                                             "decline check", _contract_zeroes_before_decline),
    # reduce
    "few_terms_without_plus_zero": Mutant("reduce_empty_and_single_axes",
                                          "few-term sums skip the + 0: a sum of −0 terms is −0",
                                          _few_terms_without_plus_zero),
    "block_tree_halves": Mutant("reduce_long_rows_in_stated_order",
                                "lane-order blocks combined by halves, not the largest power of two",
                                _block_tree_halves),
    "prod_by_numpy": Mutant("reduce_long_rows_in_stated_order",
                            "float Prod by np.prod, not lane order", _prod_by_numpy),
    "max_ignores_nan": Mutant("reduce_signed_zeros_and_nans",
                              "Max, Min and Arg skip NaNs", _max_ignores_nan),
    "int4_sum_saturates": Mutant("reduce_integer_wrapping_edges",
                                 "int4 results saturate instead of wrapping", _int4_saturates),
    "empty_prod_zero": Mutant("reduce_empty_and_single_axes",
                              "a float Prod of no term is 0", _empty_prod_zero),
    "logsumexp_unshifted": Mutant("reduce_logsumexp_edges",
                                  "Logsumexp without the shift by the maximum (overflows)",
                                  _logsumexp_unshifted),
    "logsumexp_shift_by_infinity": Mutant("reduce_logsumexp_edges",
                                          "Logsumexp shifts by an infinite maximum (NaN for −∞ and "
                                          "+∞ rows)", _logsumexp_shift_by_infinity),
    # scan
    "scan_by_cumsum": Mutant("scan_long_rows_in_stated_order",
                             "float Sum and Prod scans chained (np.cumsum), not the odd/even network",
                             _scan_by_cumsum),
    "scan_reverse_ignored": Mutant("scan_long_rows_in_stated_order",
                                   "a reverse scan computed forward", _scan_reverse_ignored),
    "scan_arg_later_equal": Mutant("scan_signed_zeros_and_nans",
                                   "Max, Min and Arg scans: the last of equal extremes wins",
                                   _scan_arg_later_equal),
    "scan_carry_dropped": Mutant("scan_long_rows_in_stated_order",
                                 "a scan ignoring its carry", _scan_carry_dropped),
    "scan_sum_from_first_term": Mutant("scan_sum_from_positive_zero",
                                       "a Sum scan from its first term, not from +0",
                                       _scan_sum_from_first_term),
    # fold
    "fold_narrow_in_own_dtype": Mutant("fold_taps_in_stated_order",
                                       "a narrow float fold adding in its own dtype, not float32",
                                       _fold_narrow_in_own),
    "fold_taps_reversed": Mutant("fold_taps_in_stated_order",
                                 "a fold adding its taps last to first", _fold_taps_reversed),
    # moves
    "scatter_set_first_wins": Mutant("scatter_set", "a Set scatter keeps the first update",
                                     _scatter_set_first_wins),
    "scatter_min_loses_nan": Mutant("scatter_fixed_chains",
                                    "a Min scatter lets a number win over a NaN",
                                    _scatter_min_loses_nan),
    "gather_clamps": Mutant("gather_bits", "a gather clamps positions outside [0, d)",
                            _gather_clamps),
    "range_gather_clamps": Mutant("range_gather_bits",
                                  "a range gather clamps positions outside [0, d)",
                                  _range_gather_clamps),
    "sort_nan_first": Mutant("sort_ties_every_direction", "sort puts NaNs first",
                             _sort_nan_first),
    "sort_zeros_equal": Mutant("sort_ties_every_direction", "sort takes −0 and +0 as equal",
                               _sort_zeros_equal),
    "sort_unstable": Mutant("sort_ties_every_direction",
                            "short rows sorted by an unstable quicksort", _sort_unstable),
    "radix_unstable": Mutant("sort_ties_every_direction",
                             "long rows (the radix path) sorted unstably", _radix_unstable),
    "top_k_later_equals": Mutant("sort_ties_every_direction",
                                 "a top-k choosing the last of the k-th key's equals",
                                 _top_k_later_equals),
    "numbering_side_swapped": Mutant("numbering_counts", "numbering counts right as left",
                                     _numbering_side_swapped),
    "assemble_first_wins": Mutant("assemble_bits", "an assembly whose first piece wins",
                                  _assemble_first_wins),
    "contract_tiles_floored": Mutant("contract_past_row_chunks",
                                     "contract rows past the last whole panel of 64 rows never "
                                     "computed", _contract_tiles_floored),
    "attention_o_not_rescaled": Mutant("attention_past_tiles",
                                       "attention's o not rescaled when a later key tile raises "
                                       "the maximum", _attention_o_not_rescaled),
    # the door
    "door_misses_containing_dst": Mutant(
        _DOOR_LAW, "the door misses a destination containing an operand",
        _door_shares(lambda alo, ahi, blo, bhi: blo <= alo < bhi or blo < ahi <= bhi)),
    "door_misses_dst_before": Mutant(
        _DOOR_LAW, "the door sees only a destination starting inside an operand",
        _door_shares(lambda alo, ahi, blo, bhi: blo <= alo < bhi)),
    "door_bit_spans": Mutant(_DOOR_LAW, "the door decides on elements' bits, not bytes "
                             "(sub-byte codes sharing a byte pass)", _door_bit_spans),
    "door_same_start_identical": Mutant(_DOOR_LAW, "the door takes arrays starting at the same "
                                        "byte as identical", _door_same_start_is_identical),
}

"""Exact sums, products and the bounds of rounded ones; reductions and scans."""

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
from ._bits import Arr, _from_units, _lex_less, is_nan, order_keys, to_float64, units, zeros

# --------------------------------------------------------------------------
# Exact sums and bounds
# --------------------------------------------------------------------------


def exact_sums(rows: Arr) -> tuple[Arr, Arr]:
    """For float64 ``rows`` ``[..., n]``: each row's exact sum rounded once to
    float64 (``math.fsum``: NaN where a term is NaN or infinities of both signs
    meet, ±inf where only one sign's infinities occur, ±inf where the finite
    sum overflows), and Σ|x|."""
    r = np.asarray(rows, dtype=np.float64)
    lead = r.shape[:-1]
    flat = r.reshape((math.prod(lead), r.shape[-1]))
    sums = np.empty(flat.shape[0], dtype=np.float64)
    for i in range(flat.shape[0]):
        sums[i] = _fsum(flat[i])
    with np.errstate(all="ignore"):
        absum = np.abs(r).sum(axis=-1) if r.shape[-1] else np.zeros(lead)
    return sums.reshape(lead), np.asarray(absum, dtype=np.float64)


def _fsum(row: Arr) -> float:
    """``math.fsum`` with the IEEE special values: NaN for a NaN term or both
    infinities, the infinity where only one sign occurs, ±inf on overflow."""
    if np.isnan(row).any():
        return math.nan
    pos, neg = bool(np.isposinf(row).any()), bool(np.isneginf(row).any())
    if pos and neg:
        return math.nan
    if pos:
        return math.inf
    if neg:
        return -math.inf
    try:
        return math.fsum(row.tolist())
    except OverflowError:
        return math.copysign(math.inf, float(np.sum(np.sign(row) * np.abs(row) / 2**1000)))


def two_product(a: Arr, b: Arr) -> tuple[Arr, Arr]:
    """``(p, e)`` with ``p = fl(a·b)`` and ``a·b = p + e`` exactly, barring
    overflow and underflow (Veltkamp splitting, Dekker's product)."""
    with np.errstate(all="ignore"):
        a = np.asarray(a, dtype=np.float64)
        b = np.asarray(b, dtype=np.float64)
        p = a * b
        split = 134217729.0  # 2**27 + 1
        ca, cb = split * a, split * b
        ah = ca - (ca - a)
        al = a - ah
        bh = cb - (cb - b)
        bl = b - bh
        e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
        e = np.where(np.isfinite(p), e, 0.0)
    return p, e


def exact_prefix_sums(rows: Arr) -> tuple[Arr, Arr]:
    """For float64 ``rows`` ``[..., n]``: the exact sum of each prefix rounded
    once to float64 (Shewchuk's partials, kept as ``math.fsum`` keeps them;
    IEEE special values as ``exact_sums``), and each prefix's Σ|x|. Barring
    overflow: where finite terms' partials overflow (Σ|x| past 2^1023), the
    sum is an infinity or a NaN."""
    r = np.asarray(rows, dtype=np.float64)
    lead, n = r.shape[:-1], r.shape[-1]
    flat = r.reshape((math.prod(lead), n))
    out = np.empty(flat.shape, dtype=np.float64)
    for i in range(flat.shape[0]):
        partials: list[float] = []
        special = 0.0  # the sum of the non-finite terms so far (inf, -inf or NaN)
        for j, x in enumerate(flat[i].tolist()):
            if not math.isfinite(x):
                special += x
            else:
                k = 0
                for y in partials:
                    if abs(x) < abs(y):
                        x, y = y, x
                    hi = x + y
                    lo = y - (hi - x)
                    if lo:
                        partials[k] = lo
                        k += 1
                    x = hi
                partials[k:] = [x]
            if special != 0.0 or math.isnan(special):
                out[i, j] = special
            else:
                try:
                    out[i, j] = math.fsum(partials)
                except OverflowError:
                    out[i, j] = math.copysign(math.inf, partials[-1])
                except ValueError:
                    # Partials that overflowed to both infinities: finite terms
                    # of Σ|x| past 2^1023, beyond any bound's reach.
                    out[i, j] = math.nan
    with np.errstate(all="ignore"):
        absum = np.cumsum(np.abs(r), axis=-1)
    return out.reshape(r.shape), absum


def exact_prefix_products(rows: Arr) -> Arr:
    """Each prefix's exact product of ``rows [..., n]`` (float64 or complex128)
    rounded to float64 (complex128), by mpmath at 160 bits."""
    import mpmath  # type: ignore[import-untyped]

    r = np.asarray(rows)
    cplx = np.iscomplexobj(r)
    out = np.empty(r.shape, dtype=np.complex128 if cplx else np.float64)
    ctx = mpmath.MPContext()
    ctx.prec = 160
    for row in itertools.product(*(range(m) for m in r.shape[:-1])):
        acc: Any = ctx.mpc(1) if cplx else ctx.mpf(1)
        special = False
        for j, x in enumerate(r[row].tolist()):
            if special or not np.isfinite(x):
                special = True
                with np.errstate(all="ignore"):
                    out[(*row, j)] = np.prod(r[row][: j + 1])
                continue
            acc *= ctx.mpc(x) if cplx else ctx.mpf(x)
            out[(*row, j)] = complex(acc) if cplx else float(acc)
    return out


def exact_products(rows: Arr) -> Arr:
    """Each row's exact product (``[..., n]``, float64 or complex128) rounded to
    float64 (complex128), by mpmath at 160 bits (exact but for that rounding);
    an empty product is 1. IEEE special values where a term is not finite."""
    import mpmath

    r = np.asarray(rows)
    cplx = np.iscomplexobj(r)
    lead = r.shape[:-1]
    out = np.empty(lead, dtype=np.complex128 if cplx else np.float64)
    ctx = mpmath.MPContext()
    ctx.prec = 160
    for row in itertools.product(*(range(m) for m in lead)):
        v = r[row]
        if not np.isfinite(v).all():
            with np.errstate(all="ignore"):
                out[row] = np.prod(v.astype(np.complex128 if cplx else np.float64))
            continue
        acc: Any = ctx.mpc(1) if cplx else ctx.mpf(1)
        for x in v.tolist():
            acc *= ctx.mpc(x) if cplx else ctx.mpf(x)
        out[row] = complex(acc) if cplx else float(acc)
    return out


def sum_bound(k: int, u: float, absum: float) -> float:
    """γ(k)·Σ|x|, with γ(k) = k·u/(1 − k·u) (inf where k·u ≥ 1)."""
    ku = k * u
    return math.inf if ku >= 1 else ku / (1 - ku) * absum


def within(dst: Dtype, result: npt.ArrayLike, exact: npt.ArrayLike, bound: npt.ArrayLike
           ) -> npt.NDArray[np.bool_]:
    """Elementwise: whether float ``result`` (stored in float dtype ``dst``) may
    come from a value within ``bound`` of ``exact`` rounded once into ``dst``.
    The store rule is monotone, so such a result lies between the stores of
    ``exact ∓ bound``; a NaN ``exact`` wants a NaN, and a NaN result needs one.
    Slack for the reference's own float64 rounding is included."""
    r = to_float64(dst, np.asarray(result))
    e = np.asarray(exact, dtype=np.float64)
    b = np.asarray(bound, dtype=np.float64)
    with np.errstate(all="ignore"):
        stored = D.of_float(dst, e).astype(np.float64)
        slack = np.abs(e) * 2.0**-50 + b * 2.0**-40 + 5e-324
        lo = D.of_float(dst, e - b - slack).astype(np.float64)
        hi = D.of_float(dst, e + b + slack).astype(np.float64)
        inside = (lo <= r) & (r <= hi) & ~np.isnan(r)
        inside = np.where(np.isinf(e), r == stored, inside)
        nan_ok = np.where(np.isnan(stored), np.isnan(r), r == stored)
    return np.asarray(np.where(np.isnan(e), nan_ok, inside))


def terms(out: Arr, axes: Sequence[int]) -> Arr:
    """A program output's terms along a last axis: the kept axes first (in
    order), the reduced ones last, numbered in C order of their indices."""
    arr = np.asarray(out)
    kept = [i for i in range(arr.ndim) if i not in axes]
    moved = np.transpose(arr, (*kept, *axes))
    n = math.prod(arr.shape[i] for i in axes)
    return moved.reshape((*(arr.shape[i] for i in kept), n))


def _wrap_int(dt: Dtype, v: Sequence[int] | Arr) -> Arr:
    """Python ints wrapped into integer ``dt`` (the carrier's width)."""
    lo, hi = dt.int_range
    width = hi - lo + 1
    vals = [((int(x) - lo) % width) + lo for x in np.asarray(v, dtype=object).reshape(-1)]
    return np.asarray(vals, dtype=object).reshape(np.shape(v)).astype(dt.numpy_dtype)


def _extreme_positions(dt: Dtype, rows: Arr, want_max: bool
                       ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """For each prefix of each row (last axis), the position of its extreme in
    the total order, the first of equal keys, or of its first NaN; and where
    the prefix holds a NaN. Vectorised over rows, one pass along the axis."""
    r = np.asarray(rows)
    n = r.shape[-1]
    m = math.prod(r.shape[:-1])
    keys = [k.reshape(m, n) for k in order_keys(dt, r)]
    nan = is_nan(dt, r).reshape(m, n)
    best = np.zeros(m, dtype=np.int64)
    seen_nan = np.zeros(m, dtype=np.bool_)
    pos = np.zeros((m, n), dtype=np.int64)
    had = np.zeros((m, n), dtype=np.bool_)
    rows_i = np.arange(m)
    for j in range(n):
        if j:
            kj = [k[:, j] for k in keys]
            kb = [k[rows_i, best] for k in keys]
            better = _lex_less(kb, kj) if want_max else _lex_less(kj, kb)
            best = np.where(~seen_nan & (better | nan[:, j]), j, best)
        else:
            best = np.zeros(m, dtype=np.int64)
        seen_nan |= nan[:, j]
        pos[:, j] = best
        had[:, j] = seen_nan
    return pos.reshape(r.shape), had.reshape(r.shape)


def reduce_fixed(dt: Dtype, rows: Arr, reduction: S.Reduction, *, in_carrier: bool = True
                 ) -> tuple[Arr, npt.NDArray[np.int64] | None, npt.NDArray[np.bool_]]:
    """The results whose bits the contract fixes, of terms ``rows [..., n]`` of
    ``dt``: an integer Sum or Prod (wrapping in the carrier, stored in ``dt``),
    a boolean Max (any) or Min (all), a Max, Min or Arg's extreme by Prog's
    Maximum and Minimum (−0 below +0) and Arg's position: the first term with
    the extreme's bits, or the first NaN term. Returns the results (host
    elements of ``dt``), the positions (Arg only) and where a result is a NaN
    (any NaN, whose bits the contract does not fix).

    A reduction combines its terms in their carrier and each result rounds
    once into its destination (contract "Reductions and scans"; upstream §5:
    "No store produces e5m2 infinities"), so with ``in_carrier`` an infinite
    extreme of float8_e5m2 is ±57344, as a Max scan's is. A scatter's Max and
    Min combine into and its updates in their own dtype: ``in_carrier=False``
    keeps the winning term's bits."""
    r = np.asarray(rows)
    lead, n = r.shape[:-1], r.shape[-1]
    if reduction in (S.Monoid.SUM, S.Monoid.PROD):
        out = np.empty(lead, dtype=object)
        for row in itertools.product(*(range(m) for m in lead)):
            seq = [int(v) for v in r[row]]
            out[row] = sum(seq) if reduction is S.Monoid.SUM else math.prod(seq)
        wrapped = _wrap_int(D.carrier(dt), out)
        return _wrap_int(dt, wrapped.astype(object)), None, np.zeros(lead, dtype=np.bool_)
    if n == 0:
        return zeros(dt, lead), (np.zeros(lead, np.int64) if isinstance(reduction, S.Arg) else None), \
            np.zeros(lead, dtype=np.bool_)
    vals, pos, nan = extreme_scan(dt, r, reduction)
    last, last_nan = vals[..., -1], nan[..., -1]
    if in_carrier and dt.is_float and D.carrier(dt) is not dt:
        # Widening into the carrier is exact; the store back keeps every
        # finite value and saturates an infinity where the format does.
        last = np.where(last_nan, last, D.of_float(dt, to_float64(dt, last)))
    return last, (pos[..., -1] if pos is not None else None), last_nan


def int_scan(dt: Dtype, rows: Arr, reduction: S.Monoid, carry: Arr | None) -> Arr:
    """An integer Sum or Prod scan along the last axis, wrapping in the
    carrier, from ``carry`` (carrier values, one per row) where given; the
    results are carrier values stored into ``dt`` (wrapping)."""
    r = np.asarray(rows)
    lo, hi = D.carrier(dt).int_range
    width = hi - lo + 1
    out = np.empty(r.shape, dtype=object)
    for row in itertools.product(*(range(m) for m in r.shape[:-1])):
        acc: int | None = int(carry[row]) if carry is not None else None
        for j, v in enumerate(r[row].tolist()):
            if acc is None:
                nxt = int(v)
            elif reduction is S.Monoid.SUM:
                nxt = acc + int(v)
            else:
                nxt = acc * int(v)
            acc = (nxt - lo) % width + lo
            out[(*row, j)] = acc
    return _wrap_int(dt, out) if r.size else r.astype(dt.numpy_dtype)


def extreme_scan(dt: Dtype, rows: Arr, reduction: S.Reduction
                 ) -> tuple[Arr, npt.NDArray[np.int64] | None, npt.NDArray[np.bool_]]:
    """A Max, Min or Arg scan (or a boolean one) along the last axis: at each
    index the extreme of the terms up to it (Prog's Maximum and Minimum: −0
    below +0; the first NaN; any and all on booleans), its position (Arg: the
    first term with the extreme's bits, or the first NaN) and where it is a NaN."""
    r = np.asarray(rows)
    want_max = reduction is S.Monoid.MAX or (isinstance(reduction, S.Arg)
                                             and reduction.extreme is S.Extreme.MAX)
    pos, nan = _extreme_positions(dt, r, want_max)
    vals = np.take_along_axis(units(r), pos[..., None], axis=-2) if r.size else units(r)
    out = _from_units(vals.astype(np.uint8), dt)
    if dt.is_bool:
        truth = units(r)[..., 0] != 0
        acc = np.logical_or.accumulate(truth, axis=-1) if want_max else \
            np.logical_and.accumulate(truth, axis=-1)
        out = acc.astype(np.bool_)
    return out, (pos if isinstance(reduction, S.Arg) else None), nan

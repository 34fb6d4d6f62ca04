"""Exact references for every kernel: what the conformance kit holds results to.

``reference.evaluate`` is the oracle of programs; this module is the oracle of
the kernels around them. Everything here works on host elements (NumPy
arrays of ``Dtype.numpy_dtype``, sub-byte dtypes unpacked) and never passes
bits through float arithmetic where the contract fixes them:

- **Bits and order.** ``units`` views elements as their bytes; ``same_bits``,
  ``is_nan`` and ``is_signalling`` read bits; ``order_keys`` gives sort keys in
  the contract's total order (−inf < … < −0 < +0 < … < +inf < NaN, every NaN
  one key; complex by real then imaginary part, a NaN part making a NaN;
  integers by value; false < true).
- **Loads and moves.** ``pad`` (a Padded load: lo, hi, crops, interior,
  windows), ``gather``, ``range_gather``, ``scatter``, ``sort``, ``numbering``,
  ``assemble`` and ``fold_sources`` (which operand index each element of a
  fold's x reads), each copying bits.
- **Sums.** ``exact_sums`` rounds the exact sum of each row once to float64
  with ``math.fsum`` and gives Σ|x| beside it; ``two_product`` splits a product
  of float64s exactly (Veltkamp/Dekker), so ``contract_terms`` gives every
  output of a contraction as exact terms. ``sum_bound`` and ``within`` turn the
  contract's bounds into the interval a result stored into its destination
  must lie in (the store rule is monotone).
- **Reductions and scans.** ``terms`` lays a program output's terms along a
  last axis in C order of the reduced axes; ``reduce_fixed`` computes the
  results whose bits the contract fixes (integer and boolean Sum and Prod,
  Max, Min, Arg); ``extreme_scan`` and ``int_scan`` their scans.
- **Transforms, attention, routines.** ``dft`` (complex128 NumPy FFTs, far
  inside any bound the kit states), ``attention`` in float64, and residuals of
  the matrix routines (``residual``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

from . import dtype as D
from . import spec as S
from .dtype import Dtype
from .layout import Range
from .prog import element

__all__ = [
    "abs_values",
    "assemble",
    "attention",
    "contract_terms",
    "dft",
    "exact_prefix_products",
    "exact_prefix_sums",
    "exact_products",
    "exact_sums",
    "extreme_scan",
    "fold_sources",
    "gather",
    "int_scan",
    "is_nan",
    "is_signalling",
    "numbering",
    "order_keys",
    "pad",
    "range_gather",
    "reduce_fixed",
    "scatter",
    "sort",
    "sum_bound",
    "terms",
    "to_float64",
    "two_product",
    "units",
    "within",
    "zeros",
]

Arr: TypeAlias = npt.NDArray[Any]


# --------------------------------------------------------------------------
# Bits
# --------------------------------------------------------------------------


def units(a: npt.ArrayLike) -> npt.NDArray[np.uint8]:
    """The bytes of each element of ``a``: shape ``a.shape + (itemsize,)``."""
    arr = np.asarray(a, order="C")
    return arr.reshape(-1).view(np.uint8).reshape((*arr.shape, arr.dtype.itemsize))


def _from_units(u: npt.NDArray[np.uint8], dt: Dtype) -> Arr:
    """The elements of ``dt`` whose bytes are ``u`` (shape + itemsize)."""
    c = np.asarray(u, dtype=np.uint8, order="C")
    return c.reshape(-1, c.shape[-1]).view(dt.numpy_dtype).reshape(c.shape[:-1])


def zeros(dt: Dtype, shape: Sequence[int]) -> Arr:
    """Elements of ``dt`` of zero bits."""
    return _from_units(np.zeros((*shape, dt.itemsize), dtype=np.uint8), dt)


def _part_uint(a: Arr, dt: Dtype) -> tuple[Arr, Dtype]:
    """A float array's bits as unsigned integers (low ``dt.bits`` bits kept)."""
    item = a.dtype.itemsize
    c = np.asarray(a, order="C")
    u = c.reshape(-1).view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[item]).reshape(c.shape)
    if dt.bits < 8:
        u = u & np.uint8((1 << dt.bits) - 1)
    return u, dt


def _parts(dt: Dtype, a: Arr) -> list[tuple[Arr, Dtype]]:
    """A float array as itself; a complex one as its real and imaginary parts."""
    arr = np.asarray(a)
    if dt.is_complex:
        part = D.float64 if dt is D.complex128 else D.float32
        return [(np.asarray(arr.real, order="C"), part), (np.asarray(arr.imag, order="C"), part)]
    return [(arr, dt)]


def _nan_bits(u: Arr, dt: Dtype) -> tuple[Arr, Arr]:
    """Where float bits ``u`` of ``dt`` are a NaN, and where a signalling one."""
    fmt = dt.float_format
    assert fmt is not None
    u64 = u.astype(np.uint64)
    if not fmt.nans:
        none = np.zeros(u.shape, dtype=np.bool_)
        return none, none
    frac_mask = np.uint64((1 << fmt.fraction_bits) - 1)
    exp_mask = np.uint64(((1 << fmt.exponent_bits) - 1) << fmt.fraction_bits)
    if not fmt.infinities:  # e4m3fn: S.1111.111 alone is a NaN, and a quiet one
        nan = (u64 & (exp_mask | frac_mask)) == (exp_mask | frac_mask)
        return nan, np.zeros(u.shape, dtype=np.bool_)
    nan = ((u64 & exp_mask) == exp_mask) & ((u64 & frac_mask) != 0)
    quiet = (u64 & np.uint64(1 << (fmt.fraction_bits - 1))) != 0
    return nan, nan & ~quiet


def is_nan(dt: Dtype, a: npt.ArrayLike) -> npt.NDArray[np.bool_]:
    """Where elements of float or complex ``dt`` are NaNs (a complex number
    with a NaN part is one); all False for other dtypes."""
    arr = np.asarray(a)
    if not (dt.is_float or dt.is_complex):
        return np.zeros(arr.shape, dtype=np.bool_)
    out = np.zeros(arr.shape, dtype=np.bool_)
    for p, pdt in _parts(dt, arr):
        out |= _nan_bits(_part_uint(p, pdt)[0], pdt)[0]
    return out


def is_signalling(dt: Dtype, a: npt.ArrayLike) -> npt.NDArray[np.bool_]:
    """Where elements of float or complex ``dt`` are (or hold) signalling NaNs."""
    arr = np.asarray(a)
    out = np.zeros(arr.shape, dtype=np.bool_)
    if not (dt.is_float or dt.is_complex):
        return out
    for p, pdt in _parts(dt, arr):
        out |= _nan_bits(_part_uint(p, pdt)[0], pdt)[1]
    return out


def to_float64(dt: Dtype, a: npt.ArrayLike) -> Arr:
    """Elements of a real dtype as float64 values (exact but for integers above
    2**53; booleans as 0 and 1 by ``byte != 0``); complex as complex128."""
    arr = np.asarray(a)
    out: Arr
    if dt.is_complex:
        with np.errstate(all="ignore"):
            out = arr.astype(np.complex128)
        return out
    if dt.is_bool:
        out = (units(arr)[..., 0] != 0).astype(np.float64)
        return out
    with np.errstate(all="ignore"):
        return arr.astype(np.float64)


def abs_values(dt: Dtype, a: npt.ArrayLike) -> Arr:
    """|x| as float64 (the modulus of a complex number)."""
    return np.abs(to_float64(dt, a)).astype(np.float64)


# --------------------------------------------------------------------------
# The total order
# --------------------------------------------------------------------------


def _float_key(p: Arr, dt: Dtype) -> Arr:
    """An int64 key of float elements in the total order, NaNs one key above +inf."""
    u, _ = _part_uint(p, dt)
    bits = dt.bits
    u64 = u.astype(np.uint64)
    sign = (u64 >> np.uint64(bits - 1)) & np.uint64(1)
    mag = (u64 & np.uint64((1 << (bits - 1)) - 1)).astype(np.int64)
    key = np.where(sign == 1, -mag - 1, mag)
    return np.where(_nan_bits(u, dt)[0], np.iinfo(np.int64).max, key)


def order_keys(dt: Dtype, a: npt.ArrayLike) -> list[Arr]:
    """Keys of elements of ``dt``, most significant first, whose lexicographic
    order is the contract's total order: −inf < … < −0 < +0 < … < +inf < NaN
    with every NaN equal; complex by real part, then imaginary part, a number
    with a NaN part a NaN; integers by value; false < true."""
    arr = np.asarray(a)
    if dt.is_float:
        return [_float_key(arr, dt)]
    if dt.is_complex:
        (re, part), (im, _) = _parts(dt, arr)
        nan = is_nan(dt, arr)
        return [nan.astype(np.int64),
                np.where(nan, 0, _float_key(re, part)),
                np.where(nan, 0, _float_key(im, part))]
    if dt.is_bool:
        return [(units(arr)[..., 0] != 0).astype(np.int64)]
    if dt is D.uint64:
        return [arr.astype(np.uint64)]
    return [arr.astype(np.int64)]


def _lex_less(ka: list[Arr], kb: list[Arr]) -> Arr:
    """Elementwise: keys ``ka`` strictly before keys ``kb``."""
    less = np.zeros(np.shape(ka[0]), dtype=np.bool_)
    equal = np.ones(np.shape(ka[0]), dtype=np.bool_)
    for x, y in zip(ka, kb, strict=True):
        less |= equal & (x < y)
        equal &= x == y
    return less


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


# --------------------------------------------------------------------------
# Contractions
# --------------------------------------------------------------------------


def contract_terms(spec: S.Contract, a: Arr, b: Arr, a_dt: Dtype, b_dt: Dtype,
                   ids: npt.NDArray[np.int64] | None = None,
                   a_scale: Arr | None = None, b_scale: Arr | None = None
                   ) -> tuple[tuple[int, ...], list[list[tuple[Any, Any]]]]:
    """Each output's products of a contraction, as (a element, b element)
    pairs in their numbering (C order of the contracting pairs' indices; a
    segmented pair's group by the order of its indices), with the elements'
    block scales applied (``a_scale``/``b_scale``: the scale of each element,
    already expanded to the operand's shape, as float64 or complex128).

    Returns the result's shape and, for each output in C order, its products.
    The operands are host elements; values are float64 (complex128) or Python
    ints for integer accumulators."""
    seg = spec.segments
    batch_a = [i for i, _ in spec.batch]
    batch_b = [j for _, j in spec.batch]
    con_a = [i for i, _ in spec.contracting]
    con_b = [j for _, j in spec.contracting]
    a_free = [i for i in range(a.ndim) if i not in batch_a + con_a]
    b_free = [j for j in range(b.ndim) if j not in batch_b + con_b]
    out_b_free = [j for j in b_free if not (isinstance(seg, S.Rows) and j == seg.b_axis)]
    batch_ext = [a.shape[i] for i in batch_a]
    con_ext = [a.shape[i] for i in con_a]
    shape = (*batch_ext, *(a.shape[i] for i in a_free), *(b.shape[j] for j in out_b_free))
    groups = 1
    if isinstance(seg, S.ContractingSegments):
        groups = seg.groups
        shape = (groups, *shape)

    def value(arr: Arr, dt: Dtype, scale: Arr | None, index: tuple[int, ...]) -> Any:
        v = arr[index]
        if dt.is_int or dt.is_bool:
            x: Any = int(v) if dt.is_int else int(units(np.asarray(v))[..., 0] != 0)
        else:
            x = complex(v) if dt.is_complex else float(v)
        if scale is not None:
            x = x * scale[index]
        return x

    outputs: list[list[tuple[Any, Any]]] = []
    for out_index in itertools.product(*(range(n) for n in shape)):
        rest = out_index[1:] if isinstance(seg, S.ContractingSegments) else out_index
        group = out_index[0] if isinstance(seg, S.ContractingSegments) else None
        bi = rest[: len(batch_a)]
        ai_free = rest[len(batch_a): len(batch_a) + len(a_free)]
        bj_free = rest[len(batch_a) + len(a_free):]
        b_free_index = dict(zip(out_b_free, bj_free, strict=True))
        if isinstance(seg, S.Rows):
            r = dict(zip(a_free, ai_free, strict=True))[seg.a_axis]
            assert ids is not None
            target = int(ids[(*bi, r)])
            if not 0 <= target < b.shape[seg.b_axis]:
                outputs.append([])
                continue
            b_free_index[seg.b_axis] = target
        products = []
        for ci in itertools.product(*(range(n) for n in con_ext)):
            if isinstance(seg, S.ContractingSegments):
                assert ids is not None
                if int(ids[(*bi, ci[seg.pair])]) != group:
                    continue
            a_idx = [0] * a.ndim
            b_idx = [0] * b.ndim
            for k, (i, j) in enumerate(spec.batch):
                a_idx[i], b_idx[j] = bi[k], bi[k]
            for k, (i, j) in enumerate(spec.contracting):
                a_idx[i], b_idx[j] = ci[k], ci[k]
            for i, v in zip(a_free, ai_free, strict=True):
                a_idx[i] = v
            for j, v in b_free_index.items():
                b_idx[j] = v
            products.append((value(a, a_dt, a_scale, tuple(a_idx)),
                             value(b, b_dt, b_scale, tuple(b_idx))))
        outputs.append(products)
    return shape, outputs


# --------------------------------------------------------------------------
# Fourier transforms
# --------------------------------------------------------------------------


def dft(x: Arr, axes: Sequence[int], direction: S.Direction, kind: S.C2c | S.R2c | S.C2r
        ) -> Arr:
    """The unnormalised DFT of ``x`` along ``axes`` in complex128 (float64 for
    C2r): Forward ``Σ x[j] e^(−2πi jk/n)``, Inverse with ``+``. R2c keeps bins
    0..n//2 of the last axis; C2r(n) reads n//2 + 1 bins of the last axis,
    extends them by Hermitian symmetry (ignoring the imaginary parts of bin 0
    and, for even n, bin n/2), after transforming the other axes."""
    v = np.asarray(x).astype(np.complex128)
    sign = -1 if direction is S.Direction.FORWARD else 1

    def c2c(arr: Arr, axis: int) -> Arr:
        n = arr.shape[axis]
        if n == 0:
            return arr.copy()
        out: Arr = np.fft.fft(arr, axis=axis) if sign < 0 else np.fft.ifft(arr, axis=axis) * n
        return out

    if isinstance(kind, S.C2r):
        for a in axes[:-1]:
            v = c2c(v, a)
        last = axes[-1]
        n = kind.n
        v = np.moveaxis(v, last, -1)
        full = np.zeros((*v.shape[:-1], n), dtype=np.complex128)
        half = n // 2 + 1
        if n:
            full[..., :half] = v[..., :half]
            full[..., 0] = full[..., 0].real
            if n % 2 == 0:
                full[..., n // 2] = full[..., n // 2].real
            for k in range(1, (n + 1) // 2):
                full[..., n - k] = np.conj(full[..., k])
        out = c2c(full, full.ndim - 1).real
        return np.moveaxis(out, -1, last)
    for a in axes:
        v = c2c(v, a)
    if isinstance(kind, S.R2c):
        last = axes[-1]
        n = v.shape[last]
        if n == 0:  # one bin, an empty sum
            shape = list(v.shape)
            shape[last] = 1
            return np.zeros(shape, dtype=np.complex128)
        v = np.take(v, np.arange(n // 2 + 1), axis=last)
    return v


# --------------------------------------------------------------------------
# Attention
# --------------------------------------------------------------------------


def attention(visible: npt.NDArray[np.bool_], logits: Arr, v: Arr) -> tuple[Arr, Arr, Arr]:
    """Attention in float64 from the program's outputs per pair, ``visible``
    and ``logits`` ``[R; tq; tk]`` (the scores already in the logits), and the
    values each row reads, ``v [R; tk; dv]``.

    Returns (o ``[R; tq; dv]``, lse ``[R; tq]``, weights ``[R; tq; tk]``) with
    lse the log-sum-exp of the visible logits (−inf for none or all −inf), o
    the visible values weighted by exp(x − lse) summed from +0 (+0 for a row
    of no visible pair or only −inf logits)."""
    x = np.where(visible, logits, -np.inf)
    with np.errstate(all="ignore"):
        m = np.max(x, axis=-1, initial=-np.inf)
        finite_m = np.where(np.isfinite(m), m, 0.0)
        s = np.sum(np.where(visible, np.exp(x - finite_m[..., None]), 0.0), axis=-1)
        lse = np.where(np.isneginf(m), -np.inf,
                       np.where(np.isposinf(m), np.inf, finite_m + np.log(s)))
        lse = np.where(np.isnan(m), np.nan, lse)
        w = np.where(visible & np.isfinite(lse)[..., None], np.exp(x - lse[..., None]), 0.0)
        o = np.einsum("rqt,rtd->rqd", w, v.astype(np.float64))
    return o, lse, w


# --------------------------------------------------------------------------
# Matrix routines
# --------------------------------------------------------------------------


def residual(lhs: Arr, rhs: Arr) -> Arr:
    """The largest |lhs − rhs| of each matrix (the last two axes), in float64."""
    diff = np.abs(np.asarray(lhs, dtype=np.complex128) - np.asarray(rhs, dtype=np.complex128))
    if diff.size == 0:
        return np.zeros(diff.shape[:-2])
    return np.asarray(diff.max(axis=(-2, -1)), dtype=np.float64)


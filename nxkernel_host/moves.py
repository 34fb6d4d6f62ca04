"""The host library's moves: gather, range gather, scatter, sort, numbering, assemble.

Every move copies bits. Operands are read through unsigned-integer views of
their elements (``_bits``: a complex number as its two parts, a sub-byte
dtype as unpacked codes, one byte per element), so NaN payloads, signalling
NaNs and −0 pass unchanged. Sort, numbering and scatter's Max and Min compare
elements through *order keys* (``_keys``): unsigned integers whose order, most
significant key first, is the contract's total order (−inf < … < −0 < +0 < …
< +inf < NaN, all NaNs one key; complex by real then imaginary part, a NaN
part making the whole a NaN; integers by value; false < true).

Each kernel first checks cheaply what it relies on (counts, dtypes, shapes)
and answers ``BAD_ARITY``, ``WRONG_DTYPE`` or ``SHAPE_MISMATCH`` for a call
that does not fit, then claims its arrays through the door; nothing is
written before both. The loops are Numba kernels over arrays split around the
kernel's axis as ``[outer, axis, inner]``; they run serially, in C order of
the updates where order matters, so results do not depend on threads.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Final, TypeVar, cast, final

import numba as nb
import numpy as np
import numpy.typing as npt

from nxkernel_core import dtype as D
from nxkernel_core import spec as S
from nxkernel_core.array import Array
from nxkernel_core.dtype import Dtype, Kind
from nxkernel_core.layout import Range
from nxkernel_core.prog import element

from .family import Family
from .views import read, store, target

__all__ = ["FAMILY"]

NDArray = npt.NDArray[Any]

#: The unsigned integer of each element width in bytes: the bits views.
_UINT: Final[dict[int, type[np.unsignedinteger[Any]]]] = {
    1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64,
}

#: Rows at least this long with 32- or 64-bit keys sort by the radix kernel;
#: shorter rows (and 8- and 16-bit keys, which NumPy radix-sorts itself) by
#: NumPy's stable sort.
_RADIX_MIN: Final = 256

#: A top-k with k at most this fraction of the row selects by partition before
#: sorting only the k chosen elements.
_TOP_K_FRACTION: Final = 0.25


# --------------------------------------------------------------------------
# Bits, keys and axes
# --------------------------------------------------------------------------


def _parts(v: NDArray) -> list[NDArray]:
    """Host elements ``v`` as separately moved parts: a complex array's real and
    imaginary parts (float views), else ``v`` itself."""
    if v.dtype.kind == "c":
        return [v.real, v.imag]
    return [v]


def _bits(v: NDArray) -> list[NDArray]:
    """The bits of host elements ``v`` as unsigned integers, one array per part
    (views of ``v``'s memory): a sub-byte dtype's unpacked elements are its codes."""
    return [p.view(_UINT[p.dtype.itemsize]) for p in _parts(v)]


@contextmanager
def _written(dst: Array) -> Iterator[list[NDArray]]:
    """The bits of destination ``dst`` to write, one array per part: views of its
    elements, or for a sub-byte dtype fresh codes that are packed into it when
    the block ends."""
    view = target(dst)
    if view is not None:
        parts = _bits(view)
        flat = [p if _reshapes(p) else np.ascontiguousarray(p) for p in parts]
        yield flat
        for part, done in zip(parts, flat, strict=True):
            if done is not part:  # a scratch: its bits go into dst
                part[...] = done
        return
    codes = np.zeros(dst.shape, np.uint8)
    yield [codes]
    store(dst, codes.view(dst.dtype.numpy_dtype))


def _reshapes(a: NDArray) -> bool:
    """Whether ``a`` reshapes to any shape of its size without a copy (it flattens
    so): a destination that does not is written through a C-ordered scratch."""
    try:
        np.reshape(a, (a.size,), copy=False)
    except ValueError:
        return False
    return True


@contextmanager
def _c_ordered(a: NDArray) -> Iterator[NDArray]:
    """Destination ``a`` itself where it reshapes without a copy, else a
    C-ordered copy of it whose bits go into ``a`` when the block ends (not
    where it raises)."""
    if _reshapes(a):
        yield a
        return
    scratch = np.ascontiguousarray(a)
    yield scratch
    a[...] = scratch


def _frozen(a: NDArray) -> NDArray:
    """A read-only view of ``a``. Numba compiles a loop once per type of its
    arguments, read-only or not among them: operands are always read-only."""
    view = a.view()
    view.flags.writeable = False
    return view


def _shape3(shape: tuple[int, ...], axis: int) -> tuple[int, int, int]:
    return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])


def _split(a: NDArray, axis: int) -> NDArray:
    """Operand ``a`` as ``[outer, a.shape[axis], inner]``: the axes before ``axis``
    merged, then ``axis``, then the axes after it merged; read-only, a view
    where the strides allow, else a copy."""
    return _frozen(np.reshape(a, _shape3(a.shape, axis)))


def _split_out(a: NDArray, axis: int) -> NDArray:
    """Destination ``a`` (C-ordered) as ``_split`` shapes it: a writable view."""
    return np.reshape(a, _shape3(a.shape, axis), copy=False)


def _float_keys(u: NDArray, dt: Dtype) -> NDArray:
    """Order keys of float bits ``u`` of ``dt``: a negative number's bits
    complemented, a positive one's with the sign bit set, so −0 sorts just
    below +0; every NaN is the greatest key."""
    fmt = dt.float_format
    assert fmt is not None
    width = dt.bits
    t = u.dtype.type
    sign, ones = t(1 << (width - 1)), t((1 << width) - 1)
    # key = u ^ sign for a positive number, u ^ ones for a negative one; in place,
    # as the sign bit (0 or 1) times the bits that differ.
    key: NDArray = u >> t(width - 1)
    key *= ones ^ sign
    key ^= sign
    key ^= u
    magnitude = u & t(sign - 1)
    if fmt.infinities:
        np.putmask(key, magnitude > (1 << (width - 1)) - (1 << fmt.fraction_bits), ones)
    elif fmt.nans:
        # The formats of a byte without infinities have one NaN: all exponent and
        # fraction bits set.
        np.putmask(key, magnitude == sign - 1, ones)
    return key


def _keys(dt: Dtype, v: NDArray) -> list[NDArray]:
    """Order keys of host elements ``v`` of ``dt``, most significant first: one
    array, or a complex array's real and imaginary keys (both the greatest where
    either part is a NaN). Where ``_has_nan(dt)``, a NaN's first key is the
    greatest of its width and nothing else's is."""
    if dt.kind is Kind.COMPLEX:
        part = D.float32 if dt is D.complex64 else D.float64
        re, im = (_float_keys(b, part) for b in _bits(v))
        ones = np.iinfo(re.dtype).max
        nan = (re == ones) | (im == ones)
        re[nan] = ones
        im[nan] = ones
        return [re, im]
    (u,) = _bits(v)
    if dt.kind is Kind.FLOAT:
        return [_float_keys(u, dt)]
    if dt.kind is Kind.SIGNED:
        return [u ^ u.dtype.type(1 << (dt.bits - 1))]
    if dt.kind is Kind.BOOLEAN:
        return [(u != 0).view(np.uint8)]
    return [u]


def _has_nan(dt: Dtype) -> bool:
    """Whether ``dt`` has NaNs (and ``_keys`` marks them)."""
    if dt.kind is Kind.COMPLEX:
        return True
    return dt.float_format is not None and dt.float_format.nans


def _nan_width(dt: Dtype) -> int:
    """The bits of ``dt``'s first order key: a NaN's is all ones."""
    return dt.bits // 2 if dt.kind is Kind.COMPLEX else dt.bits


def _key_pair(dt: Dtype, v: NDArray, axis: int) -> tuple[NDArray, NDArray]:
    """Two key arrays of ``v``, split around ``axis``: the second is zeros where
    ``dt`` has one key."""
    keys = [_split(k, axis) for k in _keys(dt, v)]
    if len(keys) == 1:
        # A broadcast zero: no memory to fill or read.
        keys.append(np.broadcast_to(keys[0].dtype.type(0), keys[0].shape))
    return keys[0], keys[1]


# --------------------------------------------------------------------------
# Numba loops. Arrays are split around the kernel's axis: [outer, axis, inner].
# Where inner is 1, a loop hands each row along the axis to a 1-D loop: indexing
# 1-D views runs about twice as fast as indexing the 3-D arrays.
# --------------------------------------------------------------------------

_F = TypeVar("_F", bound=Callable[..., None])


def _compiled(f: _F) -> _F:
    """``f`` compiled by Numba: nopython, cached on disk, releasing the GIL."""
    return cast(_F, nb.njit(cache=True, nogil=True)(f))


def _numba_type(a: Any) -> Any:
    """Numba's type for a loop's argument: any array as one of 'A' layout,
    read-only where it is; a flag as a boolean; a NumPy scalar as its dtype."""
    if isinstance(a, np.ndarray):
        return nb.types.Array(nb.from_dtype(a.dtype), a.ndim, "A", readonly=not a.flags.writeable)
    if isinstance(a, bool):
        return nb.types.boolean
    return nb.from_dtype(a.dtype)


@final
class _Loop:
    """A loop compiled as ``_compiled`` does, once per signature of ``_numba_type``:
    once per dtype, where Numba's own dispatch would compile again for each
    contiguity (C, F or neither) of each array."""

    __slots__ = ("_by_signature", "_f")

    def __init__(self, f: Callable[..., None]) -> None:
        self._f = f
        self._by_signature: dict[tuple[Any, ...], Callable[..., None]] = {}

    def __call__(self, *args: Any) -> None:
        # Numba's types are slow to build: look up by what decides them.
        key = tuple((a.dtype, a.ndim, a.flags.writeable) if isinstance(a, np.ndarray) else type(a)
                    for a in args)
        loop = self._by_signature.get(key)
        if loop is None:
            signature = nb.types.void(*(_numba_type(a) for a in args))
            loop = nb.njit(signature, cache=True, nogil=True)(self._f)
            self._by_signature[key] = loop
        loop(*args)


@_compiled
def _gather_row(x: NDArray, index: NDArray, out: NDArray) -> None:
    d = x.shape[0]
    for i in range(index.shape[0]):
        p = index[i]
        if 0 <= p < d:
            out[i] = x[p]
        else:
            out[i] = 0


@_Loop
def _gather_loop(x: NDArray, index: NDArray, out: NDArray) -> None:
    outer, n, inner = index.shape
    d = x.shape[1]
    for o in range(outer):
        if inner == 1:
            _gather_row(x[o, :, 0], index[o, :, 0], out[o, :, 0])
            continue
        for i in range(n):
            for k in range(inner):
                p = index[o, i, k]
                if 0 <= p < d:
                    out[o, i, k] = x[o, p, k]
                else:
                    out[o, i, k] = 0


@_Loop
def _range_gather_loop(x: NDArray, starts: NDArray, out: NDArray) -> None:
    outer, n, inner = starts.shape
    run = out.shape[2]
    d = x.shape[1]
    for o in range(outer):
        for i in range(n):
            for j in range(run):
                for k in range(inner):
                    s = starts[o, i, k]
                    # s + j lies in [0, d), compared without overflowing int64.
                    if -j <= s < d - j:
                        out[o, i, j, k] = x[o, s + j, k]
                    else:
                        out[o, i, j, k] = 0


@_compiled
def _scatter_set_row(dst: NDArray, index: NDArray, updates: NDArray) -> None:
    d = dst.shape[0]
    for i in range(index.shape[0]):
        p = index[i]
        if 0 <= p < d:
            dst[p] = updates[i]


@_Loop
def _scatter_set_loop(dst: NDArray, index: NDArray, updates: NDArray) -> None:
    outer, n, inner = index.shape
    d = dst.shape[1]
    for o in range(outer):
        if inner == 1:
            _scatter_set_row(dst[o, :, 0], index[o, :, 0], updates[o, :, 0])
            continue
        for i in range(n):
            for k in range(inner):
                p = index[o, i, k]
                if 0 <= p < d:
                    dst[o, p, k] = updates[o, i, k]


# An Add chains s = (+0 + s) + u from s = into's element. The +0 makes the first
# term +0 + x, as the contract states; at later terms it changes nothing, as a
# chain from +0 is never -0 (a sum is -0 only where both terms are).


@_compiled
def _scatter_add_row(dst: NDArray, index: NDArray, updates: NDArray, zero: Any) -> None:
    d = dst.shape[0]
    for i in range(index.shape[0]):
        p = index[i]
        if 0 <= p < d:
            dst[p] = (zero + dst[p]) + updates[i]


@_Loop
def _scatter_add_loop(dst: NDArray, index: NDArray, updates: NDArray, zero: Any) -> None:
    outer, n, inner = index.shape
    d = dst.shape[1]
    for o in range(outer):
        if inner == 1:
            _scatter_add_row(dst[o, :, 0], index[o, :, 0], updates[o, :, 0], zero)
            continue
        for i in range(n):
            for k in range(inner):
                p = index[o, i, k]
                if 0 <= p < d:
                    dst[o, p, k] = (zero + dst[o, p, k]) + updates[o, i, k]


@_Loop
def _scatter_extreme_loop(cur1: NDArray, cur2: NDArray, index: NDArray, upd1: NDArray,
                          upd2: NDArray, winner: NDArray, maximum: bool, has_nan: bool,
                          nan_key: Any) -> None:
    outer, n, inner = index.shape
    d = cur1.shape[1]
    for o in range(outer):
        for i in range(n):
            for k in range(inner):
                p = index[o, i, k]
                if p < 0 or p >= d:
                    continue
                if winner[o, p, k] == -2:
                    winner[o, p, k] = -1
                a1 = cur1[o, p, k]
                a2 = cur2[o, p, k]
                b1 = upd1[o, i, k]
                b2 = upd2[o, i, k]
                if maximum:
                    # A NaN's key is the greatest: it wins over numbers and keeps
                    # its place against later NaNs.
                    take = b1 > a1 or (b1 == a1 and b2 > a2)
                elif has_nan and a1 == nan_key:
                    take = False
                elif has_nan and b1 == nan_key:
                    take = True
                else:
                    take = b1 < a1 or (b1 == a1 and b2 < a2)
                if take:
                    cur1[o, p, k] = b1
                    cur2[o, p, k] = b2
                    winner[o, p, k] = i


@_Loop
def _take_winners_loop(dst: NDArray, updates: NDArray, winner: NDArray) -> None:
    outer, d, inner = dst.shape
    for o in range(outer):
        for p in range(d):
            for k in range(inner):
                w = winner[o, p, k]
                if w >= 0:
                    dst[o, p, k] = updates[o, w, k]


# The radix sorts are stable LSD sorts by bytes, one counting pass for every
# byte first; a pass whose byte all keys share is skipped. out[r] receives the
# first out.shape[1] positions of row r in sorted order.


@_Loop
def _radix32_loop(keys: NDArray, out: NDArray) -> None:
    """Rows of 32-bit keys, each key packed above its position in one uint64 so a
    pass moves 8 bytes an element."""
    rows, n = keys.shape
    a = np.empty(n, np.uint64)
    b = np.empty(n, np.uint64)
    count = np.empty((4, 256), np.int64)
    mask = np.uint64(255)
    low = np.uint64(0xFFFFFFFF)
    for r in range(rows):
        count[:, :] = 0
        for i in range(n):
            v = (np.uint64(keys[r, i]) << np.uint64(32)) | np.uint64(i)
            a[i] = v
            for p in range(4):
                count[p, (v >> np.uint64(32 + 8 * p)) & mask] += 1
        for p in range(4):
            c = count[p]
            shift = np.uint64(32 + 8 * p)
            if c[(a[0] >> shift) & mask] == n:
                continue
            total = 0
            for digit in range(256):
                t = c[digit]
                c[digit] = total
                total += t
            for i in range(n):
                v = a[i]
                digit = (v >> shift) & mask
                j = c[digit]
                c[digit] = j + 1
                b[j] = v
            a, b = b, a
        for i in range(out.shape[1]):
            out[r, i] = np.int64(a[i] & low)


@_Loop
def _radix64_loop(keys: NDArray, out: NDArray) -> None:
    """Rows of 64-bit keys, moved beside their positions."""
    rows, n = keys.shape
    ka = np.empty(n, np.uint64)
    kb = np.empty(n, np.uint64)
    pa = np.empty(n, np.int64)
    pb = np.empty(n, np.int64)
    count = np.empty((8, 256), np.int64)
    mask = np.uint64(255)
    for r in range(rows):
        count[:, :] = 0
        for i in range(n):
            v = np.uint64(keys[r, i])
            ka[i] = v
            pa[i] = i
            for p in range(8):
                count[p, (v >> np.uint64(8 * p)) & mask] += 1
        for p in range(8):
            c = count[p]
            shift = np.uint64(8 * p)
            if c[(ka[0] >> shift) & mask] == n:
                continue
            total = 0
            for digit in range(256):
                t = c[digit]
                c[digit] = total
                total += t
            for i in range(n):
                v = ka[i]
                digit = (v >> shift) & mask
                j = c[digit]
                c[digit] = j + 1
                kb[j] = v
                pb[j] = pa[i]
            ka, kb = kb, ka
            pa, pb = pb, pa
        for i in range(out.shape[1]):
            out[r, i] = pa[i]


@_Loop
def _choose_loop(keys: NDArray, kth: NDArray, out: NDArray) -> None:
    """In increasing position, the positions of each row's keys below its kth
    key, then of as many of its equals as fill the row of out."""
    rows, n = keys.shape
    k = out.shape[1]
    for r in range(rows):
        t = kth[r]
        below = 0
        for i in range(n):
            if keys[r, i] < t:
                below += 1
        ties = k - below
        j = 0
        for i in range(n):
            v = keys[r, i]
            if v < t or (v == t and ties > 0):
                if v == t:
                    ties -= 1
                out[r, j] = i
                j += 1


@_Loop
def _numbering_loop(keys1: NDArray, keys2: NDArray, x1: NDArray, x2: NDArray, right: bool,
                    out: NDArray) -> None:
    rows, m = keys1.shape
    n = x1.shape[1]
    for r in range(rows):
        for j in range(n):
            a1 = x1[r, j]
            a2 = x2[r, j]
            lo = 0
            hi = m
            while lo < hi:
                mid = (lo + hi) // 2
                b1 = keys1[r, mid]
                b2 = keys2[r, mid]
                # Left counts keys below x; right also counts its equals.
                if b1 < a1 or (b1 == a1 and (b2 < a2 or (right and b2 == a2))):
                    lo = mid + 1
                else:
                    hi = mid
            out[r, j] = lo


# --------------------------------------------------------------------------
# Fit checks
# --------------------------------------------------------------------------


# --------------------------------------------------------------------------
# Gathers
# --------------------------------------------------------------------------


def gather(spec: S.Gather, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
    """``dst[i] = x[i with index[i] along axis]``; a position outside [0, d) reads
    zero bits. Operands: index (int64), x."""
    (dst,), (index, x) = dsts, operands
    axis = spec.axis
    idx = _split(read(index), axis)
    with _written(dst) as outs:
        for out, src in zip(outs, _bits(read(x)), strict=True):
            _gather_loop(_split(src, axis), idx, _split_out(out, axis))


def range_gather(spec: S.RangeGather, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
    """``dst[…, i, j, …] = x[…, starts[…, i, …] + j, …]`` with j in [0, run) on the
    axis inserted after ``axis``; a position outside [0, d) reads zero bits.
    Operands: starts (int64), x."""
    (dst,), (starts, x) = dsts, operands
    axis = spec.axis
    st = _split(read(starts), axis)
    outer, n, inner = st.shape
    with _written(dst) as outs:
        for out, src in zip(outs, _bits(read(x)), strict=True):
            dst4 = np.reshape(out, (outer, n, spec.run, inner), copy=False)
            _range_gather_loop(_split(src, axis), st, dst4)


# --------------------------------------------------------------------------
# Scatter
# --------------------------------------------------------------------------


def scatter(spec: S.Scatter, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
    """``dst`` is ``into`` with each update combined, in C order of the updates, at
    the position ``index`` holds along ``axis``; an update outside [0, d) is
    dropped and an element no update reaches keeps into's bits.

    Set takes the last update's bits. Add computes ``+0 + into + u1 + u2 + …``
    left to right in the dtype (integers wrap; complex part by part; floats
    narrower than float32 in float32, rounded once into the dtype). Max and Min
    are Prog's Maximum and Minimum chained from into: −0 below +0, the first NaN
    kept with its bits (on booleans Or and And). ``unique`` is only a promise:
    duplicates still combine in C order. Operands: into, index (int64), updates;
    into may be identical to dst.
    """
    (dst,), (into, index, updates) = dsts, operands
    dt = dst.dtype
    idx = _split(read(index), spec.axis)
    if spec.combine is S.Combine.ADD and dt.kind is Kind.FLOAT and dt.bits < 32:
        _scatter_add_narrow(spec.axis, dst, into, idx, updates)
        return
    with _written(dst) as outs:
        # Fast path: an into identical to a byte-wide dst already holds its
        # bits, which saves a pass (a sub-byte dst's codes are fresh).
        if not (into.identical(dst) and not dt.is_sub_byte):
            for out, src in zip(outs, _bits(read(into)), strict=True):
                out[...] = src
        if spec.combine is S.Combine.SET:
            for out, upd in zip(outs, _bits(read(updates)), strict=True):
                _scatter_set_loop(_split_out(out, spec.axis), idx, _split(upd, spec.axis))
        elif spec.combine is S.Combine.ADD:
            _scatter_add(spec.axis, dt, dst, outs, idx, updates)
        else:
            _scatter_extreme(spec, dt, outs, into, idx, updates)


def _scatter_add(axis: int, dt: Dtype, dst: Array, outs: list[NDArray], idx: NDArray,
                 updates: Array) -> None:
    """Add at a dtype of its own compute width: integers on their bits (the same
    wrapping sum signed or not), floats and complex parts in their dtype."""
    if dt.kind is Kind.FLOAT or dt.kind is Kind.COMPLEX:
        view = target(dst)
        assert view is not None
        # The parts' values over the bits being written (a scratch's, where dst
        # does not reshape without a copy).
        sums = [o.view(p.dtype) for o, p in zip(outs, _parts(view), strict=True)]
        terms = _parts(read(updates))
    else:
        sums, terms = outs, _bits(read(updates))
    for out, upd in zip(sums, terms, strict=True):
        _scatter_add_loop(_split_out(out, axis), idx, _split(upd, axis), out.dtype.type(0))
    if dt.is_sub_byte:
        # int4 and uint4 codes wrapped modulo 256 in a byte; keep them modulo 16.
        outs[0] &= np.uint8(0xF)


def _scatter_add_narrow(axis: int, dst: Array, into: Array, idx: NDArray, updates: Array) -> None:
    """Add at a float narrower than float32: the sums in float32, each rounded
    once into the dtype by the store rule (which turns an e5m2 infinity into
    ±57344); into's bits where no update lands."""
    dt = dst.dtype
    start = read(into)
    acc = start.astype(np.float32, order="C")
    acc3 = _split_out(acc, axis)
    _scatter_add_loop(acc3, idx, _split(read(updates).astype(np.float32), axis), np.float32(0))
    reached = np.zeros(acc3.shape, np.bool_)
    o, i, k = np.nonzero((idx >= 0) & (idx < acc3.shape[1]))
    reached[o, idx[o, i, k], k] = True
    with np.errstate(invalid="ignore"):
        # A NaN sum stores as a NaN of the dtype (its bits are not a move's).
        (summed,) = _bits(D.of_float(dt, acc.astype(np.float64)))
    (kept,) = _bits(start)
    result = np.where(reached.reshape(acc.shape), summed, kept)
    with _written(dst) as (out,):
        out[...] = result


def _scatter_extreme(spec: S.Scatter, dt: Dtype, outs: list[NDArray], into: Array, idx: NDArray,
                     updates: Array) -> None:
    """Max and Min: the winner at each position by order keys, then its bits."""
    axis = spec.axis
    # The running extremes' keys, written in place (so never a broadcast).
    cur1, cur2 = (np.array(key) for key in _key_pair(dt, read(into), axis))
    upd_v = read(updates)
    upd1, upd2 = _key_pair(dt, upd_v, axis)
    # -2: no update reached the position; -1: into's element stands; else the
    # winning update's index along the axis.
    winner = np.full(cur1.shape, -2, np.int64)
    nan_key = upd1.dtype.type((1 << _nan_width(dt)) - 1)
    _scatter_extreme_loop(cur1, cur2, idx, upd1, upd2, winner, spec.combine is S.Combine.MAX,
                          _has_nan(dt), nan_key)
    if dt.kind is Kind.BOOLEAN:
        # Maximum and Minimum of booleans are Or and And: a reached position
        # holds the truth (0 or 1), which is its winner's key.
        out = _split_out(outs[0], axis)
        reached = winner >= -1
        out[reached] = cur1[reached].astype(np.uint8)
        return
    for out, upd in zip(outs, _bits(upd_v), strict=True):
        _take_winners_loop(_split_out(out, axis), _split(upd, axis), winner)


# --------------------------------------------------------------------------
# Sort
# --------------------------------------------------------------------------


def _argsort(key: NDArray, take: int) -> NDArray:
    """The first ``take`` positions of each row of ``key`` (unsigned) in a stable
    ascending sort."""
    rows, n = key.shape
    if key.dtype.itemsize >= 4 and _RADIX_MIN <= n < 2**32:
        # Fast path: a radix sort of long rows, linear in n where NumPy's stable
        # sort of 32- and 64-bit integers is a merge sort (8- and 16-bit ones
        # NumPy radix-sorts itself).
        out = np.empty((rows, take), np.int64)
        if key.dtype.itemsize == 4:
            _radix32_loop(key, out)
        else:
            _radix64_loop(key, out)
        return out
    return np.argsort(key, axis=1, kind="stable")[:, :take]


def _take_rows(a: NDArray, order: NDArray) -> NDArray:
    """``a[r, order[r, j]]`` at each ``[r, j]``: positions in range, rows along axis 1."""
    out = np.empty(order.shape, a.dtype)
    _gather_loop(_frozen(a[..., None]), _frozen(order[..., None]), out[..., None])
    return out


def _top_k(key: NDArray, k: int) -> NDArray:
    """The first ``k`` positions of each row of ``key`` in a stable sort, choosing
    them by partition: every key below the k-th smallest, then its equals in
    increasing position, then sorting the k chosen alone."""
    kth = np.partition(key, k - 1, axis=1)[:, k - 1]
    cand = np.empty((key.shape[0], k), np.int64)
    _choose_loop(key, kth, cand)
    step = _argsort(_take_rows(key, cand), k)
    return _take_rows(cand, step)


def _stable_order(keys: list[NDArray], k: int) -> NDArray:
    """The first ``k`` positions of each row in a stable sort by ``keys`` (most
    significant first), rows along axis 1."""
    n = keys[0].shape[1]
    if len(keys) == 1 and 0 < k <= _TOP_K_FRACTION * n:
        # Fast path: a top-k sorts k chosen elements per row, not the row.
        return _top_k(keys[0], k)
    order: NDArray | None = None
    # Least significant key first: each later stable sort keeps the earlier order
    # among its equals.
    for key in reversed(keys):
        if order is None:
            order = _argsort(key, n)
        else:
            step = _argsort(_take_rows(key, order), n)
            order = _take_rows(order, step)
    assert order is not None
    return order[:, :k]


def sort(spec: S.Sort, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
    """A stable sort along ``axis`` in the total order −inf < … < −0 < +0 < … <
    +inf < NaN (all NaNs equal; complex by real, then imaginary part, a NaN part
    a NaN; integers by value; false < true). ``descending`` reverses the order,
    equal elements keeping increasing positions; ``k`` keeps the first k.
    Destinations: values (x's bits) and positions (int64). Operand: x."""
    (values, positions), (x,) = dsts, operands
    axis = spec.axis
    n = x.shape[axis]
    k = n if spec.k is None else spec.k
    lead = x.shape[:axis] + x.shape[axis + 1:]
    rows = math.prod(lead)
    v = read(x)
    keys = [np.moveaxis(key, axis, -1).reshape(rows, n) for key in _keys(x.dtype, v)]
    if x.dtype is D.complex64:
        # One 64-bit key sorts in one pass: real key high, imaginary low.
        re, im = keys
        keys = [(re.astype(np.uint64) << np.uint64(32)) | im.astype(np.uint64)]
    if spec.descending:
        # Complemented keys reverse the order, and a stable sort of them keeps
        # equal elements in increasing position.
        keys = [~key for key in keys]
    order = _stable_order(keys, k)

    def back(a: NDArray) -> NDArray:
        return np.moveaxis(a.reshape(*lead, k), -1, axis)

    pos = target(positions)
    assert pos is not None
    pos[...] = back(order)
    with _written(values) as outs:
        for out, src in zip(outs, _bits(v), strict=True):
            rows_src = np.moveaxis(src, axis, -1).reshape(rows, n)
            out[...] = back(_take_rows(rows_src, order))


# --------------------------------------------------------------------------
# Numbering
# --------------------------------------------------------------------------


def numbering(spec: S.Numbering, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
    """For each element of x ``[b…; n]``, the number of keys ``[b…; m]`` of its
    batch row below it (LEFT) or not above it (RIGHT) in sort's total order (−0
    below +0, NaN above all, NaNs equal), by binary search: the keys are
    promised ascending in that order. Destination: int64."""
    (dst,), (keys, x) = dsts, operands
    last = x.rank - 1
    k1, k2 = _key_pair(keys.dtype, read(keys), last)
    x1, x2 = _key_pair(x.dtype, read(x), last)
    view = target(dst)
    assert view is not None
    with _c_ordered(view) as out:
        _numbering_loop(k1[..., 0], k2[..., 0], x1[..., 0], x2[..., 0],
                        spec.side is S.Side.RIGHT, _split_out(out, last)[..., 0])


# --------------------------------------------------------------------------
# Assemble
# --------------------------------------------------------------------------


def _slices(region: tuple[Range, ...]) -> tuple[slice, ...]:
    """NumPy slices selecting a region's ranges (each non-empty)."""
    out = []
    for r in region:
        stop = r.start + (r.count - 1) * r.step + (1 if r.step > 0 else -1)
        # A reversed range through index 0 stops before the start of the axis.
        out.append(slice(r.start, stop if stop >= 0 else None, r.step))
    return tuple(out)


def _is_whole(region: tuple[Range, ...], shape: tuple[int, ...]) -> bool:
    """Whether ``region`` holds every index of ``shape``."""
    return all(r.count == d for r, d in zip(region, shape, strict=True))


def assemble(spec: S.Assemble, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
    """``dst`` of ``shape`` holds, at each index, the bits of the last piece whose
    region holds it, and the fill's bits where none does. Operands: one piece
    per region; the first may be identical to dst where its region is the
    whole result."""
    (dst,) = dsts
    whole = [i for i, region in enumerate(spec.regions) if _is_whole(region, spec.shape)]
    # Pieces before the last whole one are overwritten everywhere, and so is the fill.
    first = whole[-1] if whole else 0
    with _written(dst) as outs:
        if not whole:
            fill = _bits(np.asarray(element(dst.dtype, spec.fill)))
            for out, bits in zip(outs, fill, strict=True):
                out[...] = bits
        for piece, region in zip(operands[first:], spec.regions[first:], strict=True):
            if piece.numel == 0:
                continue
            # Fast path: a byte-wide piece identical to dst over the whole
            # result in order already holds its bits.
            if (piece.identical(dst) and not dst.dtype.is_sub_byte
                    and all(r.start == 0 and r.step == 1 for r in region)):
                continue
            sl = _slices(region)
            for out, src in zip(outs, _bits(read(piece)), strict=True):
                out[sl] = src


# --------------------------------------------------------------------------
# The family
# --------------------------------------------------------------------------

_PROSE: Final = {
    "gather": "every dtype, axis and layout: x's bits at index's positions along the axis, "
              "zero bits outside [0, d).",
    "range_gather": "every dtype, axis, run and layout: runs of x's bits from starts along the "
                    "axis, zero bits outside [0, d).",
    "scatter": "every combine at every dtype it takes (Add: all but bool and bit): updates in C "
               "order; Set keeps the last update's bits; Add chains +0 + into + u1 + … in the "
               "dtype (integers wrap, complex per part, narrow floats in float32 rounded once); "
               "Max and Min chain Prog's Maximum and Minimum from into (first NaN kept); "
               "unique is not relied on; into may be dst.",
    "sort": "every dtype, axis, k and direction: stable, in the total order with NaNs last "
            "(first when descending), positions int64.",
    "numbering": "every dtype: per batch row, keys below (left) or not above (right) each "
                 "element in sort's total order, by binary search.",
    "assemble": "every dtype, shape, fill and set of regions: the last piece holding an index "
                "wins, the fill's bits elsewhere; the first piece may be dst.",
}

FAMILY: Final = Family(
    prose=_PROSE,
    association={
        "scatter Add": "each position's updates chained left to right in C order of the "
                       "updates, from +0 + into's element: float32 for floats narrower than "
                       "it (one rounding into the dtype), each part of a complex number apart.",
    },
    algorithms={
        "sort": f"order keys (bits mapped so that unsigned order is the total order, every "
                f"NaN one key; complex64 one 64-bit key, complex128 two, sorted least "
                f"significant first); rows of {_RADIX_MIN} or more 32- or 64-bit keys by a "
                f"stable byte-wise LSD radix sort (a 32-bit key packed above its position), "
                f"others by NumPy's stable sort; a top-k of at most {_TOP_K_FRACTION:g} of the "
                f"row chooses its k by partition and a scan in position order, then sorts "
                f"the k alone.",
        "numbering": "binary search of each element's order keys among its row's keys.",
    },
)

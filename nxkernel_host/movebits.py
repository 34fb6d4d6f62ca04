"""What the host's moves share: elements' bits, order keys, axis splits and
the Numba loop wrapper.

Every move copies bits. Operands are read through unsigned-integer views of
their elements (``part_bits``: a complex number as its two parts, a sub-byte
dtype as unpacked codes, one byte per element), so NaN payloads, signalling
NaNs and −0 pass unchanged. Sort, numbering and scatter's Max and Min
compare elements through *order keys* (``sort_keys``): unsigned integers
whose order, most significant key first, is the contract's total order (−inf
< … < −0 < +0 < … < +inf < NaN, all NaNs one key; complex by real then
imaginary part, a NaN part making the whole a NaN; integers by value; false
< true).

The loops (``Loop``) are Numba kernels over arrays split around the
kernel's axis as ``[outer, axis, inner]``, compiled once per signature.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Literal, TypeVar, cast, final

import numba as nb
import numpy as np
import numpy.typing as npt

from nxkernel_core import dtype as D
from nxkernel_core.array import Array
from nxkernel_core.dtype import Dtype, Kind

from .kindbase import UINT_BY_SIZE
from .views import store, target

__all__ = ["Loop", "c_ordered", "contiguous_loop", "dtype_has_nan", "element_parts",
           "key_pair", "nan_key_width", "numba_loop", "part_bits", "read_only", "sort_keys",
           "split_destination", "split_operand", "split_shape", "written_bits"]

NDArray = npt.NDArray[Any]


# --------------------------------------------------------------------------
# Bits, keys and axes
# --------------------------------------------------------------------------


def element_parts(v: NDArray) -> list[NDArray]:
    """Host elements ``v`` as separately moved parts: a complex array's real and
    imaginary parts (float views), else ``v`` itself."""
    if v.dtype.kind == "c":
        return [v.real, v.imag]
    return [v]


def part_bits(v: NDArray) -> list[NDArray]:
    """The bits of host elements ``v`` as unsigned integers, one array per part
    (views of ``v``'s memory): a sub-byte dtype's unpacked elements are its codes."""
    return [p.view(UINT_BY_SIZE[p.dtype.itemsize]) for p in element_parts(v)]


@contextmanager
def written_bits(dst: Array) -> Iterator[list[NDArray]]:
    """The bits of destination ``dst`` to write, one array per part: views of its
    elements, or for a sub-byte dtype fresh codes that are packed into it when
    the block ends."""
    view = target(dst)
    if view is not None:
        parts = part_bits(view)
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
def c_ordered(a: NDArray) -> Iterator[NDArray]:
    """Destination ``a`` itself where it reshapes without a copy, else a
    C-ordered copy of it whose bits go into ``a`` when the block ends (not
    where it raises)."""
    if _reshapes(a):
        yield a
        return
    scratch = np.ascontiguousarray(a)
    yield scratch
    a[...] = scratch


def read_only(a: NDArray) -> NDArray:
    """A read-only view of ``a``. Numba compiles a loop once per type of its
    arguments, read-only or not among them: operands are always read-only."""
    view = a.view()
    view.flags.writeable = False
    return view


def split_shape(shape: tuple[int, ...], axis: int) -> tuple[int, int, int]:
    return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])


def split_operand(a: NDArray, axis: int) -> NDArray:
    """Operand ``a`` as ``[outer, a.shape[axis], inner]``: the axes before ``axis``
    merged, then ``axis``, then the axes after it merged; read-only, a view
    where the strides allow, else a copy."""
    return read_only(np.reshape(a, split_shape(a.shape, axis)))


def split_destination(a: NDArray, axis: int) -> NDArray:
    """Destination ``a`` (C-ordered) as ``split_operand`` shapes it: a writable view."""
    return np.reshape(a, split_shape(a.shape, axis), copy=False)


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


def sort_keys(dt: Dtype, v: NDArray) -> list[NDArray]:
    """Order keys of host elements ``v`` of ``dt``, most significant first: one
    array, or a complex array's real and imaginary keys (both the greatest where
    either part is a NaN). Where ``dtype_has_nan(dt)``, a NaN's first key is the
    greatest of its width and nothing else's is."""
    if dt.kind is Kind.COMPLEX:
        part = D.float32 if dt is D.complex64 else D.float64
        re, im = (_float_keys(b, part) for b in part_bits(v))
        ones = np.iinfo(re.dtype).max
        nan = (re == ones) | (im == ones)
        re[nan] = ones
        im[nan] = ones
        return [re, im]
    (u,) = part_bits(v)
    if dt.kind is Kind.FLOAT:
        return [_float_keys(u, dt)]
    if dt.kind is Kind.SIGNED:
        return [u ^ u.dtype.type(1 << (dt.bits - 1))]
    if dt.kind is Kind.BOOLEAN:
        return [(u != 0).view(np.uint8)]
    return [u]


def dtype_has_nan(dt: Dtype) -> bool:
    """Whether ``dt`` has NaNs (and ``sort_keys`` marks them)."""
    if dt.kind is Kind.COMPLEX:
        return True
    return dt.float_format is not None and dt.float_format.nans


def nan_key_width(dt: Dtype) -> int:
    """The bits of ``dt``'s first order key: a NaN's is all ones."""
    return dt.bits // 2 if dt.kind is Kind.COMPLEX else dt.bits


def key_pair(dt: Dtype, v: NDArray, axis: int) -> tuple[NDArray, NDArray]:
    """Two key arrays of ``v``, split around ``axis``: the second is zeros where
    ``dt`` has one key."""
    keys = [split_operand(k, axis) for k in sort_keys(dt, v)]
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


def numba_loop(f: _F) -> _F:
    """``f`` compiled by Numba: nopython, cached on disk, releasing the GIL."""
    return cast(_F, nb.njit(cache=True, nogil=True)(f))


def _numba_type(a: Any, layout: Literal["A", "C"] = "A") -> Any:
    """Numba's type for a loop's argument: an array as one of ``layout`` ('A',
    any strides, or 'C'), read-only where it is; a flag as a boolean; a NumPy
    scalar as its dtype."""
    if isinstance(a, np.ndarray):
        return nb.types.Array(nb.from_dtype(a.dtype), a.ndim, layout, readonly=not a.flags.writeable)
    if isinstance(a, bool):
        return nb.types.boolean
    return nb.from_dtype(a.dtype)


@final
class Loop:
    """A loop compiled as ``numba_loop`` does, once per signature of ``_numba_type``:
    once per dtype, where Numba's own dispatch would compile again for each
    contiguity (C, F or neither) of each array. A loop made ``contiguous``
    compiles once more per dtype, for calls whose arrays are all C-contiguous:
    its element addresses then need no multiplication by a stride."""

    __slots__ = ("_by_signature", "_contiguous", "_f")

    def __init__(self, f: Callable[..., None], *, contiguous: bool = False) -> None:
        self._f = f
        self._contiguous = contiguous
        self._by_signature: dict[tuple[Any, ...], Callable[..., None]] = {}

    def __call__(self, *args: Any) -> None:
        # Numba's types are slow to build: look up by what decides them, in
        # one pass over the arguments (a small move's call pays it each time).
        contiguous = self._contiguous
        key: list[object] = []
        for a in args:
            if isinstance(a, np.ndarray):
                flags = a.flags
                key.append((a.dtype, a.ndim, flags.writeable))
                contiguous = contiguous and flags.c_contiguous
            else:
                key.append(type(a))
        layout: Literal["A", "C"] = "C" if contiguous else "A"
        key.append(layout)
        loop = self._by_signature.get(tuple(key))
        if loop is None:
            signature = nb.types.void(*(_numba_type(a, layout) for a in args))
            loop = nb.njit(signature, cache=True, nogil=True)(self._f)
            self._by_signature[tuple(key)] = loop
        loop(*args)


def contiguous_loop(f: Callable[..., None]) -> Loop:
    """``f`` as a ``Loop`` made ``contiguous``."""
    return Loop(f, contiguous=True)

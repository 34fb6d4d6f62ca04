"""What the host's node kinds share: host values and the rounding store, and
the Numba kernels NumPy has no ufunc for (Fma of float64, Threefry).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from nxkernel_core import dtype as D
from nxkernel_core.dtype import Dtype

__all__ = ["C128", "F64", "UINT_BY_SIZE", "Arr", "Impl", "bits_of", "c_contiguous", "finish_node",
           "float_values", "int_values", "numba_binary", "store_float", "truth", "where",
           "wrap_ints"]

Arr = npt.NDArray[Any]
#: A node's implementation: ``impl(out, *args)`` returns the node's value,
#: written into ``out`` where ``out`` is not None (a C-contiguous array of the
#: value's shape and host type that aliases no argument).
Impl = Callable[..., Arr]


_F32: Final = np.dtype(np.float32)
F64: Final = np.dtype(np.float64)
C128: Final = np.dtype(np.complex128)
#: The unsigned integer of each element width in bytes: the bits views
#: (``bits_of`` here, ``movebits``' too).
UINT_BY_SIZE: Final[dict[int, type[np.unsignedinteger[Any]]]] = {
    1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}

# --------------------------------------------------------------------------
# Values and stores
# --------------------------------------------------------------------------


def finish_node(out: Arr | None, r: Any) -> Arr:
    """``r`` as the node's value: written into ``out`` where given (``r`` has
    out's type, so its bits are copied as they are, broadcast), else ``r``
    itself as an array."""
    if out is None:
        return np.asarray(r)
    if r is not out:
        np.copyto(out, r, casting="no")
    return out


def bits_of(x: Arr) -> Arr:
    """A byte-wide array's bits as unsigned integers of its width."""
    return np.asarray(x).view(UINT_BY_SIZE[x.dtype.itemsize])


def truth(x: Arr) -> Arr:
    """A bool array's values: its byte is not 0."""
    return np.asarray(np.asarray(x).view(np.uint8) != 0)


def c_contiguous(x: Arr) -> Arr:
    """``x`` C-contiguous (a copy only where it is not). NumPy's transcendental
    loops take another code path, with other bits, for some strides (a
    reversed operand); on contiguous operands every element gets the same
    SIMD code wherever it lies, so a result does not depend on the layout."""
    return x if x.flags.c_contiguous else np.ascontiguousarray(x)


def float_values(x: Arr) -> Arr:
    """Float values in their compute type: float32 and float64 as they are,
    narrower floats widened (exactly) to float32."""
    if x.dtype == _F32 or x.dtype == F64:
        return x
    return np.asarray(x).astype(np.float32)


def _odd_f32(x: Arr) -> Arr:
    """float64 values rounded to float32 by round-to-odd: an inexact result
    takes the neighbour whose last bit is 1. Rounding that once more, to
    nearest, into a format of 22 bits or fewer rounds ``x`` exactly once."""
    x = np.asarray(x)
    y = x.astype(np.float32)
    back = y.astype(np.float64)
    yb = y.view(np.uint32)
    nudge = (back != x) & np.isfinite(back) & ((yb & np.uint32(1)) == 0)
    if not nudge.any():
        # Nothing to move (every value exact, or odd already): saves three passes.
        return y
    up = np.abs(x) > np.abs(back)
    step = np.where(up, np.uint32(1), np.uint32(0xFFFFFFFF))
    return np.where(nudge, yb + step, yb).astype(np.uint32).view(np.float32)


def store_float(dt: Dtype, r: Arr, out: Arr | None) -> Arr:
    """Float values ``r`` (float32 or float64) stored once into float ``dt`` by
    the store rule: round to nearest, ties to even; overflow to ±inf, or
    saturating to ±max_finite in the formats of a byte or less; NaN to +0 in
    float4_e2m1fn."""
    r = np.asarray(r)
    if dt is D.float64 or dt is D.float32:
        return finish_node(out, r if r.dtype == dt.numpy_dtype else r.astype(dt.numpy_dtype))
    if r.dtype == F64:
        r = _odd_f32(r)
    fmt = dt.float_format
    assert fmt is not None
    if fmt.saturates:
        # Clipping before the rounding saturates as rounding then saturating
        # does: every value past max_finite rounds to at least max_finite.
        r = np.clip(r, np.float32(-fmt.max_finite), np.float32(fmt.max_finite))
        if not fmt.nans:
            r = np.where(np.isnan(r), np.float32(0), r)
    return finish_node(out, r.astype(dt.numpy_dtype))


def int_values(x: Arr) -> Arr:
    """Integer values in their compute type: int4 and uint4 as int8 and uint8."""
    if x.dtype.itemsize == 1 and x.dtype.kind not in "iub":
        return np.asarray(x).astype(np.int8 if x.dtype == D.int4.numpy_dtype else np.uint8)
    return x


def wrap_ints(dt: Dtype, r: Arr, out: Arr | None) -> Arr:
    """Integer values ``r`` modulo ``dt``'s width, as ``dt``."""
    r = np.asarray(r)
    if dt.bits >= 8:
        return finish_node(out, r if r.dtype == dt.numpy_dtype else r.astype(dt.numpy_dtype))
    code = r.astype(np.uint8) & np.uint8(15)
    if dt is D.int4:
        signed = (code ^ np.uint8(8)).astype(np.int8) - np.int8(8)
        return finish_node(out, signed.astype(dt.numpy_dtype))
    return finish_node(out, code.astype(dt.numpy_dtype))


# --------------------------------------------------------------------------
# Numba kernels (compiled on first use: Fma of float64, Threefry)
# --------------------------------------------------------------------------


@functools.cache
def _numba_kernels() -> dict[str, Any]:
    """The loops NumPy has no ufunc for, compiled once per process: a float64
    Fma by LLVM's fused multiply-add (one rounding) and Threefry-2x32-20."""
    import numba

    from .simdbase import fma

    @numba.njit(nogil=True)
    def fma_loop(a: Arr, b: Arr, c: Arr, out: Arr) -> None:
        for i in range(out.size):
            out[i] = fma(a[i], b[i], c[i])

    rotations = np.array([13, 15, 26, 6, 17, 29, 16, 24], dtype=np.uint64)
    mask = np.uint64(0xFFFFFFFF)
    parity = np.uint64(0x1BD11BDA)
    w32 = np.uint64(32)

    @numba.njit(nogil=True)
    def threefry_loop(counter: Arr, key: Arr, out: Arr) -> None:
        # 32-bit words held in uint64 and masked after each addition: Numba
        # widens mixed integer arithmetic, so no step relies on a uint32 wrap.
        ks = np.empty(3, dtype=np.uint64)
        for i in range(out.size):
            c, k = counter[i], key[i]
            ks[0] = k & mask
            ks[1] = k >> w32
            ks[2] = ks[0] ^ ks[1] ^ parity
            x0 = ((c & mask) + ks[0]) & mask
            x1 = ((c >> w32) + ks[1]) & mask
            for r in range(20):
                rot = rotations[r % 8]
                x0 = (x0 + x1) & mask
                x1 = ((x1 << rot) | (x1 >> (w32 - rot))) & mask
                x1 = x1 ^ x0
                if r % 4 == 3:
                    j = r // 4 + 1
                    x0 = (x0 + ks[j % 3]) & mask
                    x1 = (x1 + ks[(j + 1) % 3] + np.uint64(j)) & mask
            out[i] = x0 | (x1 << w32)

    return {"fma": fma_loop, "threefry": threefry_loop}


def _flat(x: Arr, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Arr:
    """``x`` broadcast to ``shape`` as a C-contiguous 1-D array (a copy only
    where it is not contiguous already)."""
    return np.ascontiguousarray(np.broadcast_to(x, shape), dtype=dtype).reshape(-1)


def numba_binary(name: str, dtype: np.dtype[Any], out: Arr | None, *args: Arr) -> Arr:
    """Numba loop ``name`` over ``args`` broadcast together, into ``out``."""
    shape = np.broadcast_shapes(*(a.shape for a in args))
    res = out if out is not None and out.flags.c_contiguous else np.empty(shape, dtype=dtype)
    _numba_kernels()[name](*(_flat(a, shape, dtype) for a in args), res.reshape(-1))
    return finish_node(out, res)


def where(out: Arr | None, c: Arr, x: Arr, y: Arr) -> Arr:
    """``x``'s element where ``c`` holds, else ``y``'s, bits copied."""
    if out is None:
        return np.where(c, x, y)
    np.copyto(out, y)
    np.copyto(out, x, where=c)
    return out

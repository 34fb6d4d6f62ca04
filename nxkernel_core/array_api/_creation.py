"""The standard's creation functions, with ``device=`` everywhere.

Values cross into memory from Python and NumPy (``asarray``, ``from_dlpack``
where the producer is not already one of ours); every computed array
(``arange``, ``linspace``, ``eye``, ``full``, ``tril``, ...) is a map call,
its program made once per dtype. ``device=None`` is the default device
(``rig.default_device``: ``using(...)``, then ``NXKERNEL_DEFAULT_DEVICE``,
then the host).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import dtype as D
from ..answer import describe
from ..array import Array
from ..array import asarray as _core_asarray
from ..dtype import Dtype
from ..layout import Broadcast, Layout
from ..prog import Builder, Value
from ..rig import Buffer, Rig
from . import _base as B
from . import _dlpack as I
from . import _dtypes as T

__all__ = [
    "arange", "asarray", "empty", "empty_like", "eye", "from_dlpack", "full", "full_like",
    "linspace", "meshgrid", "ones", "ones_like", "tril", "triu", "zeros", "zeros_like",
]

Scalar = bool | int | float | complex


def _dtype(fn: str, dtype: object) -> Dtype | None:
    if dtype is None or isinstance(dtype, Dtype):
        return dtype
    if isinstance(dtype, str) and dtype in T.DTYPES:
        return T.DTYPES[dtype]
    raise TypeError(f"{fn}: {dtype!r} is not a dtype of the namespace")


def _shape(fn: str, shape: int | Sequence[int]) -> tuple[int, ...]:
    dims = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
    out = tuple(operator.index(d) for d in dims)
    if any(d < 0 for d in out):
        raise ValueError(f"{fn}: negative extent in shape {list(out)}")
    return out


def _default_of(value: Scalar) -> Dtype:
    if isinstance(value, bool):
        return D.bool_
    if isinstance(value, int):
        return D.int64
    if isinstance(value, float):
        return D.float64
    if isinstance(value, complex):
        return D.complex128
    raise TypeError(f"{type(value).__name__} is not a Python scalar")


def to_device(fn: str, x: Array, dev: Rig) -> Array:
    """``x`` on ``dev``: itself where it is there already. Otherwise a fresh
    C-contiguous array, by one copy of a contiguous byte-wide array: from
    memory the host addresses, ``dev`` writes the bytes where they lie; into
    the host (or a memory device) from memory it does not address, the
    source's device reads them into host memory the result adopts; between
    two devices of one library, by its device copy (``Interchange.copy``: a
    peer copy between GPUs). A strided array is made contiguous on its own
    device first; sub-byte dtypes, and devices no rule covers, cross through
    a host copy."""
    if x.device is dev:
        return x
    if x.dtype.is_sub_byte or x.numel == 0:
        return Array.from_numpy(x.to_numpy(), dev, x.dtype)
    if not x.layout.is_contiguous():
        x = B.copy(fn, x)
    src = x.buffer
    src.check_live(fn)
    start = src.offset + x.layout.offset * x.dtype.itemsize
    nbytes = x.numel * x.dtype.itemsize
    layout = Layout.c_contiguous(x.shape)
    hb = src.memory.host_bytes
    if hb is not None:
        out = Array.empty(x.dtype, x.shape, dev)
        dev.write_bytes(out.buffer.memory, out.buffer.offset, hb[start : start + nbytes])
        return out
    if type(dev) is Rig:  # the host, a memory device: plain host memory
        data = x.device.read_bytes(src.memory, start, nbytes)
        return Array(x.dtype, layout, Buffer.adopt(data, dev))
    ic = I.interchange_of(x.device)
    if ic is not None and ic is I.interchange_of(dev):
        moved = ic.copy(x, dev)
        if moved is not None:
            return moved
    return Array.from_numpy(x.to_numpy(), dev, x.dtype)


def wrap_numpy(arr: np.ndarray[Any, Any], dt: Dtype) -> Array | None:
    """A host Array over C-contiguous NumPy memory, without a copy; None where
    it cannot be (not contiguous, misaligned)."""
    if not arr.flags.c_contiguous or arr.ctypes.data % max(dt.alignment, 1):
        return None
    data = arr.reshape(-1).view(np.uint8) if arr.size else np.zeros(0, np.uint8)
    buf = Buffer.adopt(data, writable=bool(arr.flags.writeable))
    return Array(dt, Layout.c_contiguous(arr.shape), buf)


def asarray(obj: Any, /, *, dtype: Any = None, device: Any = None, copy: bool | None = None) -> Array:
    """An array of ``obj``: an Array, a NumPy or DLPack array, a Python scalar or
    nested sequences. Python scalars take the default dtypes (bool, int64,
    float64, complex128); an int beyond int64 raises ``OverflowError``.
    ``copy=True`` always copies, ``False`` never (``ValueError`` where it must),
    None where needed."""
    fn = "xp.asarray"
    dt = _dtype(fn, dtype)
    dev = B.device_of(device) if device is not None else None
    if isinstance(obj, Array):
        target = dev or obj.device
        out = obj
        if dt is not None and dt is not obj.dtype:
            if copy is False:
                raise ValueError(f"{fn}: converting {obj.dtype.name} to {dt.name} needs a copy")
            out = B.cast(fn, obj, dt)
        if target is not out.device:
            if copy is False:
                raise ValueError(f"{fn}: moving to {target.name} needs a copy")
            return to_device(fn, out, target)
        if copy and out is obj:
            return B.copy(fn, obj)
        return out
    target = dev or B.device_of(None)
    if isinstance(obj, bool | int | float | complex):
        if copy is False:
            raise ValueError(f"{fn}: a Python scalar needs a copy")
        sdt = dt or _default_of(obj)
        if isinstance(obj, int) and not isinstance(obj, bool) and sdt.is_int:
            lo, hi = sdt.int_range
            if not lo <= obj <= hi:
                raise OverflowError(f"{fn}: {obj} is out of range for {sdt.name}")
        return _core_asarray(np.asarray(obj), sdt, target)
    if hasattr(obj, "__cuda_array_interface__") or (
            not isinstance(obj, np.ndarray) and hasattr(obj, "__dlpack__")):
        out = from_dlpack(obj, device=dev, copy=copy)  # PyTorch, CuPy, ...
        if dt is not None and dt is not out.dtype:
            if copy is False:
                raise ValueError(f"{fn}: converting {out.dtype.name} to {dt.name} needs a copy")
            return B.cast(fn, out, dt)
        return out
    if isinstance(obj, np.ndarray) or hasattr(obj, "__array__"):
        arr = np.asarray(obj)
        src = D.of_numpy(arr.dtype)
        if copy is not True and (dt is None or dt is src) and target.name == "host":
            wrapped = wrap_numpy(arr, src)
            if wrapped is not None:
                return wrapped
        if copy is False:
            raise ValueError(f"{fn}: this {arr.dtype} array needs a copy")
        return _core_asarray(arr, dt, target)
    if copy is False:
        raise ValueError(f"{fn}: a {type(obj).__name__} needs a copy")
    arr = np.asarray(obj)
    if arr.dtype == object:
        raise TypeError(f"{fn}: {type(obj).__name__} holds values of no dtype")
    if dt is None and arr.dtype.kind in "iu" and arr.dtype != np.int64:
        arr = arr.astype(np.int64)
    if dt is None and arr.dtype.kind == "f" and arr.dtype != np.float64:
        arr = arr.astype(np.float64)
    return _core_asarray(arr, dt, target)


def from_dlpack(x: Any, /, *, device: Any = None, copy: bool | None = None) -> Array:
    """An array sharing the memory of a DLPack producer where ``copy`` is not
    True: host memory (NumPy, PyTorch, ...) on the host, by our own reading
    of its capsule (``_dlpack.adopt_host``); CUDA memory (CuPy,
    PyTorch, anything with ``__cuda_array_interface__``) on its ``cuda:N``,
    through the CUDA library's interchange, the producer kept alive. A copy
    otherwise (``device=`` elsewhere, ``copy=True``); ``BufferError`` where
    ``copy=False`` forbids the one needed."""
    fn = "xp.from_dlpack"
    if isinstance(x, Array):
        return asarray(x, device=device, copy=copy)
    dev = B.device_of(device) if device is not None else None
    where = x.__dlpack_device__() if hasattr(x, "__dlpack_device__") else None
    if (where is not None and where[0] == I.DL_CUDA) or (
            not hasattr(x, "__dlpack__") and hasattr(x, "__cuda_array_interface__")):
        out = _adopt_cuda(fn, x, where)
        if dev is not None and dev is not out.device:
            if copy is False:
                raise BufferError(f"{fn}: moving {describe([out])} from {out.device.name} to "
                                  f"{dev.name} needs a copy")
            return to_device(fn, out, dev)
        return B.copy(fn, out) if copy else out
    if not hasattr(x, "__dlpack__"):
        raise TypeError(f"{fn}: a {type(x).__name__} has no __dlpack__")
    shared = I.adopt_host(fn, x)
    if shared is None:  # misaligned: NumPy's copy
        if copy is False:
            raise BufferError(f"{fn}: a {type(x).__name__} whose first element is not aligned "
                              "cannot be shared without a copy")
        arr = np.from_dlpack(x)
        return _core_asarray(arr, D.of_numpy(arr.dtype), dev or B.device_of(None))
    if dev is not None and dev is not shared.device:
        if copy is False:
            raise BufferError(f"{fn}: moving {describe([shared])} from the host to {dev.name} "
                              "needs a copy")
        return to_device(fn, shared, dev)
    return B.copy(fn, shared) if copy else shared


def _adopt_cuda(fn: str, x: Any, where: tuple[int, int] | None) -> Array:
    """``x``'s CUDA memory as an array on its GPU, by the CUDA library's interchange."""
    name = f"cuda:{where[1]}" if where is not None else "cuda"
    try:
        dev = B.device_of(name)
    except ValueError as e:
        raise BufferError(f"{fn}: a {type(x).__name__} in CUDA memory needs {name}: {e}") from None
    ic = I.interchange_of(dev)
    if ic is None:
        raise BufferError(f"{fn}: {name} has no interchange for a {type(x).__name__}")
    return ic.adopt(fn, x, dev if where is not None else None)


def empty(shape: int | Sequence[int], *, dtype: Any = None, device: Any = None) -> Array:
    """A fresh array (of zero bits)."""
    return Array.empty(_dtype("xp.empty", dtype) or D.float64, _shape("xp.empty", shape),
                       B.device_of(device))


def zeros(shape: int | Sequence[int], *, dtype: Any = None, device: Any = None) -> Array:
    """Zeros: fresh memory, whose zero bits are every dtype's zero."""
    return Array.empty(_dtype("xp.zeros", dtype) or D.float64, _shape("xp.zeros", shape),
                       B.device_of(device))


def full(shape: int | Sequence[int], fill_value: Any, *, dtype: Any = None,
         device: Any = None) -> Array:
    """``fill_value`` everywhere (its default dtype where ``dtype`` is None)."""
    fn = "xp.full"
    if isinstance(fill_value, Array):
        if fill_value.size != 1:
            raise ValueError(f"{fn}: fill_value must be a scalar, not {describe([fill_value])}")
        fill_value = fill_value.to_numpy().item()
    dt = _dtype(fn, dtype) or _default_of(fill_value)
    if isinstance(fill_value, int) and not isinstance(fill_value, bool) and dt.is_int:
        lo, hi = dt.int_range
        if not lo <= fill_value <= hi:
            raise OverflowError(f"{fn}: {fill_value} is out of range for {dt.name}")
    return B.full(fn, _shape(fn, shape), fill_value, dt, B.device_of(device))


def ones(shape: int | Sequence[int], *, dtype: Any = None, device: Any = None) -> Array:
    """Ones (``True`` for bool)."""
    dt = _dtype("xp.ones", dtype) or D.float64
    return B.full("xp.ones", _shape("xp.ones", shape), True if dt is D.bool_ else 1, dt,
                  B.device_of(device))


def _like(x: Array, dtype: Any, device: Any, fn: str) -> tuple[Dtype, Rig]:
    B.the_array(fn, x)
    return _dtype(fn, dtype) or x.dtype, B.device_of(device) if device is not None else x.device


def empty_like(x: Array, /, *, dtype: Any = None, device: Any = None) -> Array:
    dt, dev = _like(x, dtype, device, "xp.empty_like")
    return Array.empty(dt, x.shape, dev)


def zeros_like(x: Array, /, *, dtype: Any = None, device: Any = None) -> Array:
    dt, dev = _like(x, dtype, device, "xp.zeros_like")
    return Array.empty(dt, x.shape, dev)


def ones_like(x: Array, /, *, dtype: Any = None, device: Any = None) -> Array:
    dt, dev = _like(x, dtype, device, "xp.ones_like")
    return B.full("xp.ones_like", x.shape, True if dt is D.bool_ else 1, dt, dev)


def full_like(x: Array, /, fill_value: Scalar, *, dtype: Any = None, device: Any = None) -> Array:
    dt, dev = _like(x, dtype, device, "xp.full_like")
    return full(x.shape, fill_value, dtype=dt, device=dev)


# ---- computed ------------------------------------------------------------------


def _ramp(b: Builder, start: Value, step: Value) -> Value:
    """start + i·step at index i of the last axis, rounded once (fma)."""
    i = b.cast(b.coord(0), start.dtype)
    if start.dtype.is_complex:
        return i * step + start
    return b.fma(i, step, start)


def arange(start: int | float, /, stop: int | float | None = None, step: int | float = 1, *,
           dtype: Any = None, device: Any = None) -> Array:
    """start, start + step, … below stop (above, for a negative step)."""
    fn = "xp.arange"
    if stop is None:
        start, stop = 0, start
    if step == 0:
        raise ValueError(f"{fn}: step is 0")
    dt = _dtype(fn, dtype) or (D.float64 if any(isinstance(v, float) for v in (start, stop, step))
                               else D.int64)
    n = max(0, math.ceil((stop - start) / step))
    if dt.is_int and any(isinstance(v, float) for v in (start, stop, step)):
        raise TypeError(f"{fn}: float bounds for an integer dtype")
    dev = B.device_of(device)
    a = B.scalar_array(start, dt, dev).view(Broadcast((n,)))
    s = B.scalar_array(step, dt, dev).view(Broadcast((n,)))
    return B.elementwise(fn, _ramp, a, s)


def _line(b: Builder, start: Value, step: Value, stop: Value, last: Value) -> Value:
    """start + i·step, exactly stop at the index ``last``."""
    i = b.coord(0)
    v = _ramp(b, start, step)
    return b.where(b.equal(i, b.cast(last, D.int64)), stop, v)


def linspace(start: int | float | complex, stop: int | float | complex, /, num: int, *,
             dtype: Any = None, device: Any = None, endpoint: bool = True) -> Array:
    """``num`` evenly spaced values from start to stop (stop included where ``endpoint``)."""
    fn = "xp.linspace"
    complex_ = isinstance(start, complex) or isinstance(stop, complex)
    dt = _dtype(fn, dtype) or (D.complex128 if complex_ else D.float64)
    if num < 0:
        raise ValueError(f"{fn}: num = {num} is negative")
    div = (num - 1) if endpoint else num
    step = (stop - start) / div if div > 0 else 0.0
    dev = B.device_of(device)
    ops = [B.scalar_array(v, dt, dev).view(Broadcast((num,))) for v in (start, step, stop)]
    last = B.scalar_array(num - 1 if endpoint else -1, dt, dev).view(Broadcast((num,)))
    return B.elementwise(fn, _line, *ops, last)


def _eye(b: Builder, one: Value, k: Value) -> Value:
    diag = b.equal(b.coord(0) - b.coord(1), k)
    return b.where(diag, one, b.const(one.dtype, 0))


def eye(n_rows: int, n_cols: int | None = None, /, *, k: int = 0, dtype: Any = None,
        device: Any = None) -> Array:
    """Ones on diagonal ``k`` (column − row = k), zeros elsewhere."""
    fn = "xp.eye"
    dt = _dtype(fn, dtype) or D.float64
    if not isinstance(k, int | np.integer):
        raise TypeError(f"{fn}: k = {k!r} is not an int")
    shape = (n_rows, n_rows if n_cols is None else n_cols)
    k = max(-shape[0] - 1, min(k, shape[1] + 1))  # past every diagonal: all zeros either way
    dev = B.device_of(device)
    one = B.scalar_array(True if dt is D.bool_ else 1, dt, dev).view(Broadcast(shape))
    kk = B.scalar_array(k, D.int64, dev).view(Broadcast(shape))
    return B.elementwise(fn, _eye, one, kk)


def _tril(b: Builder, x: Value, k: Value) -> Value:
    keep = b.less_equal(b.coord(0) - b.coord(1), k)
    return b.where(keep, x, b.const(x.dtype, 0))


def _triu(b: Builder, x: Value, k: Value) -> Value:
    keep = b.less_equal(k, b.coord(0) - b.coord(1))
    return b.where(keep, x, b.const(x.dtype, 0))


def _triangle(fn: str, body: B.Body, x: Array, k: int) -> Array:
    a = B.the_array(fn, x)
    if a.rank < 2:
        raise ValueError(f"{fn}: needs a matrix or a stack of them, not {a.dtype.name} {list(a.shape)}")
    kk = B.scalar_array(k, D.int64, a.device).view(Broadcast(a.shape))
    return B.elementwise(fn, body, a, kk)


def tril(x: Array, /, *, k: int = 0) -> Array:
    """x on and below diagonal ``k``, zeros above."""
    return _triangle("xp.tril", _tril, x, k)


def triu(x: Array, /, *, k: int = 0) -> Array:
    """x on and above diagonal ``k``, zeros below."""
    return _triangle("xp.triu", _triu, x, k)


def meshgrid(*arrays: Array, indexing: str = "xy") -> list[Array]:
    """Coordinate matrices of 1-D arrays (Cartesian ``xy`` or matrix ``ij`` indexing)."""
    fn = "xp.meshgrid"
    if indexing not in ("xy", "ij"):
        raise ValueError(f"{fn}: indexing {indexing!r} is not 'xy' or 'ij'")
    xs = [B.the_array(fn, a) for a in arrays]
    if not xs:
        return []
    if len({x.dtype for x in xs}) > 1:
        raise ValueError(f"{fn}: arrays of different dtypes")
    shape = [x.numel for x in xs]
    if indexing == "xy" and len(xs) > 1:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, x in enumerate(xs):
        ax = i
        if indexing == "xy" and len(xs) > 1 and i < 2:
            ax = 1 - i
        lifted = B.flat(fn, x).reshape([x.numel if j == ax else 1 for j in range(len(xs))])
        out.append(B.copy(fn, lifted.view(Broadcast(tuple(shape)))))
    return out


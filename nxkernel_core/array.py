"""Arrays: a dtype, a layout and a buffer, validated once at construction.

An ``Array`` is a view: ``Array(dtype, layout, buffer)`` raises ``ValueError``
unless every element lies inside the buffer, the first element is aligned to
the dtype and the buffer lives. Views come from moves (``view``) and from
``bitcast``; ``from_numpy``/``to_numpy`` cross to and from NumPy for every
dtype, sub-byte and ``bit`` included (packed, least significant bit first).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, final

import numpy as np
import numpy.typing as npt

from . import dtype as D
from .dtype import Dtype
from .layout import Layout, Move, Permute, Range, Reshape, Slice
from .rig import Buffer, Rig, default_device, device, host

__all__ = ["Array", "asarray", "positions"]


def positions(layout: Layout) -> npt.NDArray[np.int64]:
    """Every element's position, in C order of the indices, shaped as the layout."""
    pos = np.full(layout.shape, layout.offset, dtype=np.int64)
    for ax, (d, s) in enumerate(zip(layout.shape, layout.strides, strict=True)):
        if s != 0 and d > 1:
            shape = [1] * layout.rank
            shape[ax] = d
            pos = pos + (np.arange(d, dtype=np.int64) * s).reshape(shape)
    return pos


@final
class Array:
    """``dtype`` elements of ``buffer`` at the positions of ``layout``."""

    __slots__ = ("buffer", "dtype", "layout")

    def __init__(self, dtype: Dtype, layout: Layout, buffer: Buffer) -> None:
        fn = "Array"
        mem = buffer.memory
        dev = mem.device
        if dev.lost is not None or buffer.epoch < mem.epoch or dev.closed:
            buffer.check_live(fn)  # raises
        if layout.numel > 0:
            _, hi = layout.span()
            end = D.bytes(dtype, hi)
            if end > buffer.length:
                raise ValueError(
                    f"{fn}: a {dtype.name} {list(layout.shape)} layout reaches byte {end}, "
                    f"past its buffer's {buffer.length}"
                )
            if buffer.offset % dtype.alignment != 0:
                raise ValueError(
                    f"{fn}: a {dtype.name} array's buffer starts at byte {buffer.offset}, "
                    f"not aligned to {dtype.alignment}"
                )
        self.dtype = dtype
        self.layout = layout
        self.buffer = buffer

    # ---- facts -------------------------------------------------------------------

    @property
    def shape(self) -> tuple[int, ...]:
        return self.layout.shape

    @property
    def rank(self) -> int:
        return self.layout.rank

    @property
    def numel(self) -> int:
        return self.layout.numel

    @property
    def device(self) -> Rig:
        return self.buffer.device

    def __repr__(self) -> str:
        return f"Array({self.dtype.name} {list(self.shape)} on {self.device.name})"

    def byte_span(self) -> tuple[int, int]:
        """The half-open byte range of the buffer's memory the elements touch:
        ``base + lo·bits/8`` to ``base + ⌈hi·bits/8⌉``; ``(0, 0)`` when empty."""
        if self.numel == 0:
            return (0, 0)
        lo, hi = self.layout.span()
        base = self.buffer.offset
        return (base + lo * self.dtype.bits // 8, base + D.bytes(self.dtype, hi))

    def identical(self, other: Array) -> bool:
        """Same memory, same byte offset, same dtype and same layout."""
        return (
            self.buffer.memory is other.buffer.memory
            and self.buffer.offset == other.buffer.offset
            and self.dtype is other.dtype
            and self.layout == other.layout
        )

    # ---- constructors ----------------------------------------------------------

    @staticmethod
    def empty(dtype: Dtype, shape: Sequence[int], dev: Rig | str = host) -> Array:
        """A fresh C-contiguous array of zero bits on ``dev``."""
        layout = Layout.c_contiguous(shape)
        out = object.__new__(Array)
        # A fresh buffer of exactly the layout's bytes, first byte aligned: what
        # __init__ checks holds by construction.
        out.buffer = Buffer.create(dev, (layout.numel * dtype.bits + 7) // 8)  # D.bytes
        out.dtype = dtype
        out.layout = layout
        return out

    @staticmethod
    def from_numpy(a: npt.ArrayLike, dev: Rig | str = host, dtype: Dtype | None = None) -> Array:
        """A C-contiguous copy of NumPy array ``a`` on ``dev``. ``dtype`` defaults
        to the one NumPy's dtype names; with ``bit`` the values are booleans.
        The values must already be of ``dtype``'s host element type."""
        arr = np.asarray(a)
        dt = dtype if dtype is not None else D.of_numpy(arr.dtype)
        if arr.dtype != dt.numpy_dtype:
            raise ValueError(
                f"Array.from_numpy: a {arr.dtype} array is not of {dt.name}'s host type "
                f"{dt.numpy_dtype}; use asarray to convert"
            )
        out = Array.empty(dt, arr.shape, dev)
        out.write_numpy(arr)
        return out

    def write_numpy(self, a: npt.NDArray[Any]) -> None:
        """Store NumPy values of this array's host type at every element (in place)."""
        arr = np.broadcast_to(np.asarray(a, dtype=self.dtype.numpy_dtype), self.shape)
        mem = self.buffer.memory
        self.buffer.check_live("Array.write_numpy")
        if self.dtype.is_sub_byte:
            storage = self._storage()
            D.store_codes(self.dtype, storage, positions(self.layout), arr)
            self.device.write_bytes(mem, self.buffer.offset, storage)
            return
        if self.layout.is_contiguous():
            data = np.ascontiguousarray(arr).view(np.uint8).reshape(-1)
            start = self.buffer.offset + self.layout.offset * self.dtype.itemsize
            self.device.write_bytes(mem, start, data)
            return
        storage = self._storage()
        view = self._numpy_view(storage)
        view[...] = arr
        self.device.write_bytes(mem, self.buffer.offset, storage)

    def _storage(self) -> npt.NDArray[np.uint8]:
        """The buffer's bytes: a live view on host memory, else a host copy."""
        self.buffer.check_live("Array")
        mem = self.buffer.memory
        if mem.host_bytes is not None:
            return self.buffer.host_view()
        return self.device.read_bytes(mem, self.buffer.offset, self.buffer.length)

    def _numpy_view(self, storage: npt.NDArray[np.uint8]) -> npt.NDArray[Any]:
        """A NumPy view of a byte-wide array over ``storage`` (its buffer's bytes).

        The strided view is made over an unsigned (or void) dtype of the same
        itemsize, then viewed as the host type: ``as_strided`` does not take
        ml_dtypes' types."""
        item = self.dtype.itemsize
        base = storage[self.layout.offset * item :]
        base = base[: base.size - base.size % item]
        carrier = np.dtype(f"u{item}") if item in (1, 2, 4, 8) else np.dtype(f"V{item}")
        strided = np.lib.stride_tricks.as_strided(
            base.view(carrier),
            shape=self.shape,
            strides=tuple(s * item for s in self.layout.strides),
        )
        return strided.view(self.dtype.numpy_dtype)

    def numpy_view(self) -> npt.NDArray[Any]:
        """A zero-copy, writable NumPy view of the elements, for a byte-wide dtype
        in memory the host addresses; ``ValueError`` otherwise."""
        dt = self.dtype
        if dt.bits < 8:
            raise ValueError(f"Array.numpy_view: {dt.name} elements are packed; "
                             "use to_numpy and write_numpy")
        buf = self.buffer
        hb = buf.memory.host_bytes
        if hb is None:
            raise ValueError(f"Array.numpy_view: {self.device.name}'s memory is not host memory")
        lay = self.layout
        n = lay.numel
        if n == 0:
            return np.zeros(lay.shape, dtype=dt.numpy_dtype)
        mem = buf.memory
        dev = mem.device
        if dev.lost is not None or buf.epoch < mem.epoch or dev.closed:
            buf.check_live("Buffer.host_view")  # raises
        item = dt.numpy_dtype.itemsize
        start = buf.offset + lay.offset * item
        if lay.is_contiguous():
            # A plain slice and view: no as_strided, which costs tens of µs a call.
            flat = hb[start : start + n * item].view(dt.numpy_dtype)
            return flat if lay.rank == 1 else flat.reshape(lay.shape)
        # One ndarray over the memory's bytes with the layout's strides (its
        # positions lie in the buffer): 3 µs where as_strided took 18.
        return np.ndarray(lay.shape, dt.numpy_dtype, hb, start,
                          tuple([s * item for s in lay.strides]))

    def to_numpy(self) -> npt.NDArray[Any]:
        """A C-contiguous NumPy copy of the elements (``bool`` for ``bit``)."""
        storage = self._storage()
        if self.numel == 0:
            return np.zeros(self.shape, dtype=self.dtype.numpy_dtype)
        if self.dtype.is_sub_byte:
            return D.unpack(self.dtype, storage, positions(self.layout))
        return np.array(self._numpy_view(storage), copy=True, order="C")

    def __array__(self, dtype: npt.DTypeLike | None = None, copy: bool | None = None) -> npt.NDArray[Any]:
        """The elements for NumPy: a view of host memory with ``copy=False``
        (``ValueError`` where there is none), else a copy."""
        if copy is False:
            a = self.numpy_view()
            if dtype is not None and np.dtype(dtype) != a.dtype:
                raise ValueError("Array.__array__: a dtype change needs a copy")
            return a
        a = self.to_numpy()
        return a if dtype is None else a.astype(dtype)

    # ---- the Array API's array object -------------------------------------------

    __hash__ = object.__hash__  # identity, as before ``==`` compared elements

    @property
    def ndim(self) -> int:
        """The number of axes."""
        return self.layout.rank

    @property
    def size(self) -> int:
        """The number of elements."""
        return self.layout.numel

    @property
    def T(self) -> Array:
        """The transpose of a matrix (2-D only, as the standard says)."""
        if self.rank != 2:
            raise ValueError(f"Array.T: a {self.dtype.name} {list(self.shape)} array is not a matrix; "
                             "use .mT or permute_dims")
        return self.view(Permute((1, 0)))

    @property
    def mT(self) -> Array:
        """The last two axes swapped (a stack of matrices transposed)."""
        if self.rank < 2:
            raise ValueError(f"Array.mT: a {self.dtype.name} {list(self.shape)} array has fewer than 2 axes")
        return self.view(Permute((*range(self.rank - 2), self.rank - 1, self.rank - 2)))

    def __array_namespace__(self, /, *, api_version: str | None = None) -> Any:
        """The Array API namespace, ``nxkernel_core.array_api``."""
        if api_version not in (None, "2021.12", "2022.12", "2023.12", "2024.12"):
            raise ValueError(f"Array.__array_namespace__: API version {api_version!r} is not supported")
        return _ns()

    def to_device(self, device: Rig | str, /, *, stream: object = None) -> Array:
        """This array on ``device`` (itself where it is there already)."""
        ns = _ns()
        out: Array = ns._creation.to_device("Array.to_device", self, ns._base.device_of(device))
        return out

    def __dlpack_device__(self) -> tuple[int, int]:
        """DLPack's (device type, id): (1, 0), CPU, for memory the host addresses
        (``cuda-emu:N``'s too); (2, N), CUDA, for ``cuda:N``."""
        out: tuple[int, int] = _ns()._dlpack.dlpack_device(self)
        return out

    def __dlpack__(self, *, stream: object = None, max_version: tuple[int, int] | None = None,
                   dl_device: tuple[int, int] | None = None, copy: bool | None = None) -> Any:
        """A DLPack capsule sharing this array's memory, which stays alive until
        the consumer is done (``array_api._dlpack.export``); ``BufferError``
        where it cannot be."""
        return _ns()._dlpack.export(self, stream=stream, max_version=max_version,
                                    dl_device=dl_device, copy=copy)

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """CUDA's array interface (version 3, with the stream the data is made
        on) for arrays on ``cuda:N``; ``AttributeError`` with the reason for
        every other device, so that ``hasattr`` is False there."""
        ic = _ns()._dlpack.interchange_of(self.device)
        if ic is None:
            raise AttributeError(f"Array.__cuda_array_interface__: {self.device.name}'s memory is not "
                                 "CUDA device memory")
        out: dict[str, Any] = ic.cuda_array_interface(self)
        return out

    def _scalar(self, fn: str) -> Any:
        if self.rank != 0:
            raise TypeError(f"Array.{fn}: a {self.dtype.name} {list(self.shape)} array is not 0-d")
        return self.to_numpy().item()

    def __bool__(self) -> bool:
        return bool(self._scalar("__bool__"))

    def __int__(self) -> int:
        if self.dtype.is_complex:
            raise TypeError("Array.__int__: a complex array")
        return int(self._scalar("__int__"))

    def __float__(self) -> float:
        if self.dtype.is_complex:
            raise TypeError("Array.__float__: a complex array")
        return float(self._scalar("__float__"))

    def __complex__(self) -> complex:
        return complex(self._scalar("__complex__"))

    def __index__(self) -> int:
        if not self.dtype.is_int:
            raise TypeError(f"Array.__index__: a {self.dtype.name} array is not an integer")
        return int(self._scalar("__index__"))

    def __setitem__(self, key: Any, value: Any, /) -> None:
        """Store ``value`` (an array or a Python scalar, broadcast) at the indexed
        elements in place, through a kernel that claims this array's memory."""
        _ns()._indexing.setitem(self, key, value)

    def __pos__(self) -> Array:
        return _unary("positive", self)

    def __neg__(self) -> Array:
        return _unary("negative", self)

    def __abs__(self) -> Array:
        return _unary("abs", self)

    def __invert__(self) -> Array:
        return _unary("bitwise_invert", self)

    def __add__(self, other: Any, /) -> Array:
        return _binary("add", self, other)

    def __radd__(self, other: Any, /) -> Array:
        return _binary("add", other, self)

    def __iadd__(self, other: Any, /) -> Array:
        return _inplace("add", self, other)

    def __sub__(self, other: Any, /) -> Array:
        return _binary("subtract", self, other)

    def __rsub__(self, other: Any, /) -> Array:
        return _binary("subtract", other, self)

    def __isub__(self, other: Any, /) -> Array:
        return _inplace("subtract", self, other)

    def __mul__(self, other: Any, /) -> Array:
        return _binary("multiply", self, other)

    def __rmul__(self, other: Any, /) -> Array:
        return _binary("multiply", other, self)

    def __imul__(self, other: Any, /) -> Array:
        return _inplace("multiply", self, other)

    def __truediv__(self, other: Any, /) -> Array:
        return _binary("divide", self, other)

    def __rtruediv__(self, other: Any, /) -> Array:
        return _binary("divide", other, self)

    def __itruediv__(self, other: Any, /) -> Array:
        return _inplace("divide", self, other)

    def __floordiv__(self, other: Any, /) -> Array:
        return _binary("floor_divide", self, other)

    def __rfloordiv__(self, other: Any, /) -> Array:
        return _binary("floor_divide", other, self)

    def __ifloordiv__(self, other: Any, /) -> Array:
        return _inplace("floor_divide", self, other)

    def __mod__(self, other: Any, /) -> Array:
        return _binary("remainder", self, other)

    def __rmod__(self, other: Any, /) -> Array:
        return _binary("remainder", other, self)

    def __imod__(self, other: Any, /) -> Array:
        return _inplace("remainder", self, other)

    def __pow__(self, other: Any, /) -> Array:
        return _binary("pow", self, other)

    def __rpow__(self, other: Any, /) -> Array:
        return _binary("pow", other, self)

    def __ipow__(self, other: Any, /) -> Array:
        return _inplace("pow", self, other)

    def __matmul__(self, other: Any, /) -> Array:
        return _binary("matmul", self, other)

    def __rmatmul__(self, other: Any, /) -> Array:
        return _binary("matmul", other, self)

    def __imatmul__(self, other: Any, /) -> Array:
        return _inplace("matmul", self, other)

    def __and__(self, other: Any, /) -> Array:
        return _binary("bitwise_and", self, other)

    def __rand__(self, other: Any, /) -> Array:
        return _binary("bitwise_and", other, self)

    def __iand__(self, other: Any, /) -> Array:
        return _inplace("bitwise_and", self, other)

    def __or__(self, other: Any, /) -> Array:
        return _binary("bitwise_or", self, other)

    def __ror__(self, other: Any, /) -> Array:
        return _binary("bitwise_or", other, self)

    def __ior__(self, other: Any, /) -> Array:
        return _inplace("bitwise_or", self, other)

    def __xor__(self, other: Any, /) -> Array:
        return _binary("bitwise_xor", self, other)

    def __rxor__(self, other: Any, /) -> Array:
        return _binary("bitwise_xor", other, self)

    def __ixor__(self, other: Any, /) -> Array:
        return _inplace("bitwise_xor", self, other)

    def __lshift__(self, other: Any, /) -> Array:
        return _binary("bitwise_left_shift", self, other)

    def __rlshift__(self, other: Any, /) -> Array:
        return _binary("bitwise_left_shift", other, self)

    def __ilshift__(self, other: Any, /) -> Array:
        return _inplace("bitwise_left_shift", self, other)

    def __rshift__(self, other: Any, /) -> Array:
        return _binary("bitwise_right_shift", self, other)

    def __rrshift__(self, other: Any, /) -> Array:
        return _binary("bitwise_right_shift", other, self)

    def __irshift__(self, other: Any, /) -> Array:
        return _inplace("bitwise_right_shift", self, other)

    def __eq__(self, other: Any, /) -> Array:  # type: ignore[override]
        return _binary("equal", self, other)

    def __ne__(self, other: Any, /) -> Array:  # type: ignore[override]
        return _binary("not_equal", self, other)

    def __lt__(self, other: Any, /) -> Array:
        return _binary("less", self, other)

    def __le__(self, other: Any, /) -> Array:
        return _binary("less_equal", self, other)

    def __gt__(self, other: Any, /) -> Array:
        return _binary("greater", self, other)

    def __ge__(self, other: Any, /) -> Array:
        return _binary("greater_equal", self, other)

    # ---- views -------------------------------------------------------------------

    def view(self, move: Move) -> Array:
        """The array ``move`` makes of this one, over the same buffer."""
        lay = self.layout.move(move)
        if lay is None:
            raise ValueError(
                f"Array.view: no strides express {move} of a {self.dtype.name} "
                f"{list(self.shape)} array with strides {list(self.layout.strides)}"
            )
        return Array(self.dtype, lay, self.buffer)

    def reshape(self, shape: Sequence[int]) -> Array:
        return self.view(Reshape(tuple(shape)))

    def __getitem__(self, key: Any) -> Array:
        """Indexing as the Array API's (and NumPy's): ints, slices, ``...`` and
        ``None`` give a view; integer and boolean arrays gather (a copy)."""
        if not isinstance(key, tuple):
            key = (key,)
        if not all((isinstance(k, slice | int | np.integer) and not isinstance(k, bool)) or k is Ellipsis
                   for k in key):
            out: Array = _ns()._indexing.getitem(self, key)
            return out
        if sum(k is Ellipsis for k in key) > 1:
            raise IndexError("Array: an index can only have a single ellipsis ('...')")
        if any(k is Ellipsis for k in key):
            i = key.index(Ellipsis)
            key = key[:i] + (slice(None),) * (self.rank - len(key) + 1) + key[i + 1 :]
        if len(key) > self.rank:
            raise IndexError(f"Array: {len(key)} indices for an array of rank {self.rank}")
        key = key + (slice(None),) * (self.rank - len(key))
        ranges, drop = [], []
        for ax, (k, d) in enumerate(zip(key, self.shape, strict=True)):
            if isinstance(k, slice):
                start, stop, step = k.indices(d)
                ranges.append(Range(start, len(range(start, stop, step)), step))
            elif isinstance(k, (int, np.integer)):
                i = int(k) + d if k < 0 else int(k)
                if not 0 <= i < d:
                    raise IndexError(f"Array: index {k} is out of bounds for axis {ax} of {d}")
                ranges.append(Range(i, 1, 1))
                drop.append(ax)
            else:
                raise TypeError(f"Array: unsupported index {k!r}")
        sliced = self.view(Slice(tuple(ranges)))
        lay = sliced.layout
        keep = [ax for ax in range(self.rank) if ax not in drop]
        return Array(
            self.dtype,
            Layout(tuple(lay.shape[a] for a in keep), tuple(lay.strides[a] for a in keep), lay.offset),
            self.buffer,
        )

    def bitcast(self, dt: Dtype) -> Array:
        """The same bits read as ``dt``. Equal widths keep the layout. Otherwise the
        last axis must have stride 1 (or extent 1): narrowing multiplies its
        extent by the width ratio; widening divides it, which needs an extent
        and an offset that are multiples of the ratio."""
        fn = "Array.bitcast"
        a, b = self.dtype.bits, dt.bits
        if a == b:
            return Array(dt, self.layout, self.buffer)
        if self.rank == 0:
            raise ValueError(f"{fn}: a rank-0 {self.dtype.name} array cannot change width to {dt.name}")
        shape, strides = list(self.shape), list(self.layout.strides)
        if shape[-1] != 1 and strides[-1] != 1:
            raise ValueError(
                f"{fn}: the last axis of a {self.dtype.name} {shape} array has stride "
                f"{strides[-1]}, not 1"
            )
        if a > b:
            r = a // b
            shape[-1] *= r
            strides = [s * r for s in strides[:-1]] + [1]
            return Array(dt, Layout(tuple(shape), tuple(strides), self.layout.offset * r), self.buffer)
        r = b // a
        if shape[-1] % r != 0 or self.layout.offset % r != 0 or any(s % r for s in strides[:-1]):
            raise ValueError(
                f"{fn}: a {self.dtype.name} {shape} array's last axis, offset or strides "
                f"are not multiples of {r}, as {dt.name} needs"
            )
        shape[-1] //= r
        strides = [s // r for s in strides[:-1]] + [1]
        return Array(dt, Layout(tuple(shape), tuple(strides), self.layout.offset // r), self.buffer)


def _ns() -> Any:
    """The Array API namespace, imported on first use (it imports this module)."""
    global _NAMESPACE
    if _NAMESPACE is None:
        import importlib

        _NAMESPACE = importlib.import_module("nxkernel_core.array_api")
    return _NAMESPACE


_NAMESPACE: Any = None


def _binary(fn: str, x: Any, y: Any) -> Array:
    """The namespace's ``fn`` of x and y; NotImplemented for an operand that is
    neither an array nor a Python scalar (so Python tries the other side)."""
    for v in (x, y):
        if not isinstance(v, Array | bool | int | float | complex):
            return NotImplemented  # type: ignore[no-any-return]
    out: Array = getattr(_ns(), fn)(x, y)
    return out


def _unary(fn: str, x: Array) -> Array:
    out: Array = getattr(_ns(), fn)(x)
    return out


def _inplace(fn: str, x: Array, y: Any) -> Array:
    """x ``fn``= y: the result, of x's dtype and shape, written into x's memory."""
    r: Any = _binary(fn, x, y)
    if r is NotImplemented:
        return r  # type: ignore[no-any-return]
    if r.dtype is not x.dtype or r.shape != x.shape:
        raise TypeError(f"Array: in-place {fn} would make a {r.dtype.name} {list(r.shape)} array "
                        f"of a {x.dtype.name} {list(x.shape)} one")
    _ns()._base.write_into(f"Array.__i{fn}__", x, r)
    return x


def asarray(obj: object, dtype: D.DtypeLike | None = None,
            device: Rig | str | None = None) -> Array:
    """An ``Array`` of ``obj`` (an Array, a NumPy array, a scalar or nested
    sequences) on ``device`` (the default device, ``rig.default_device()``,
    where None). Floats convert to ``dtype`` by the store rule (one rounding),
    everything else as NumPy's ``astype`` does; an Array already of that dtype
    on that device is returned as it is."""
    dev = _device(device) if device is not None else default_device()
    dt = None if dtype is None else D.resolve(dtype, "asarray")
    if isinstance(obj, Array):
        if (dt is None or dt is obj.dtype) and obj.device is dev:
            return obj
        src = obj.to_numpy()
        if dt is None:
            return Array.from_numpy(src, dev, obj.dtype)
        return Array.from_numpy(_convert(src, dt), dev, dt)
    arr = np.asarray(obj)
    if not arr.dtype.isnative:  # big-endian input: the same values in host order
        arr = arr.astype(arr.dtype.newbyteorder("="))
    if dt is None:
        dt = D.of_numpy(arr.dtype)
    return Array.from_numpy(_convert(arr, dt), dev, dt)


def _device(dev: Rig | str) -> Rig:
    return dev if isinstance(dev, Rig) else device(dev)


def _convert(arr: npt.NDArray[Any], dt: Dtype) -> npt.NDArray[Any]:
    """``arr`` as ``dt``'s host elements: from floats (and into floats) by the
    store rule, integers into integers modulo the width, as NumPy's astype."""
    if arr.dtype == dt.numpy_dtype:
        return arr
    src = D.of_numpy(arr.dtype)
    if dt.is_complex or src.is_complex:
        return arr.astype(dt.numpy_dtype)
    if src.is_float or dt.is_float:
        # Floats widen to float64 exactly, and integers of up to 53 bits do, so
        # the store rule rounds once; wider integers may round twice (use the
        # Cast kernel for those).
        return D.of_float(dt, arr.astype(np.float64))
    return arr.astype(dt.numpy_dtype)

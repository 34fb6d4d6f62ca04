"""DLPack both ways, and the device side of interchange.

Export (``Array.__dlpack__``): a capsule of our own making, on every device,
named ``dltensor_versioned`` (DLPack 1.0's ``DLManagedTensorVersioned``)
where the consumer's ``max_version`` is 1 or more, else the legacy
``dltensor``. Its ``data`` is the address of the array's first element as
the consumer addresses it, ``byte_offset`` 0 (as NumPy, PyTorch and CuPy
export, since some consumers ignore ``byte_offset``); strides are always
given, in elements; the array (so its memory) stays
alive until the consumer calls the deleter, or, unconsumed, until the capsule
is freed, which then calls it: once either way. Memory the host addresses is
``kDLCPU`` (1, 0). Negative strides go out as a copy (PyTorch aborts on
them). Read-only memory sets the versioned flag and is refused
in a legacy capsule, as NumPy does. Sub-byte dtypes have no export.

Import of host memory (``adopt_host``, for ``xp.from_dlpack``): the
producer's capsule read the same way, so every byte-wide dtype DLPack and
this library share comes in without a copy (bfloat16 and the float8s, which
NumPy lacks, included), with any strides.

A device of a library (a ``Rig`` subclass defined in package ``P``) says how
its memory is described through ``P.interchange.INTERCHANGE``, imported on
first need (:class:`Interchange`): the device pair, the address of a
buffer's first byte, the stream rule, ``__cuda_array_interface__``, imports
of its foreign arrays and copies between its devices. A device without one
interchanges only where the host addresses its memory.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import math
import threading
from typing import Any, Final, Protocol

import numpy as np

from .. import dtype as D
from ..array import Array
from ..dtype import Dtype, Kind
from ..layout import Layout
from ..rig import Access, Buffer, Rig, host

__all__ = [
    "DL_CPU", "DL_CUDA", "DLManagedTensor", "DLManagedTensorVersioned", "DLTensor", "Interchange",
    "adopt_host", "dlpack_device", "export", "interchange_of", "type_code",
]

#: DLPack's device types (``DLDeviceType``) used here.
DL_CPU: Final = 1
DL_CUDA: Final = 2
#: The DLPack version of the capsules made here.
VERSION: Final = (1, 0)
READ_ONLY: Final = 1 << 0  # DLPACK_FLAG_BITMASK_READ_ONLY
IS_COPIED: Final = 1 << 1  # DLPACK_FLAG_BITMASK_IS_COPIED


class DLDevice(ctypes.Structure):
    _fields_ = (("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32))


class DLDataType(ctypes.Structure):
    _fields_ = (("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16))


class DLTensor(ctypes.Structure):
    _fields_ = (("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64))


#: ``void (*deleter)(self)``, one callback for both managed-tensor layouts.
DELETER: Final = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = (("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER))


class DLPackVersion(ctypes.Structure):
    _fields_ = (("major", ctypes.c_uint32), ("minor", ctypes.c_uint32))


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = (("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER),
                ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor))


# Python's capsule API through prototypes of our own (ctypes.pythonapi's
# shared function objects may carry another module's argtypes).
_DESTRUCTOR: Final = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_capsule_new: Final = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, _DESTRUCTOR)(
    ("PyCapsule_New", ctypes.pythonapi))
_capsule_name: Final = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.c_void_p)(
    ("PyCapsule_GetName", ctypes.pythonapi))
_capsule_pointer: Final = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))
# The names stay referenced for ever: a capsule keeps the pointer, not a copy.
_VERSIONED: Final = ctypes.create_string_buffer(b"dltensor_versioned")
_LEGACY: Final = ctypes.create_string_buffer(b"dltensor")
_USED: Final = {_VERSIONED.value: ctypes.create_string_buffer(b"used_dltensor_versioned"),
                _LEGACY.value: ctypes.create_string_buffer(b"used_dltensor")}
# The same functions on a live capsule object, for imports.
_name_of: Final = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(
    ("PyCapsule_GetName", ctypes.pythonapi))
_pointer_of: Final = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))
_rename: Final = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_SetName", ctypes.pythonapi))


class Export:
    """One exported capsule's keep-alive record: the array, the managed tensor
    and its shape and strides; ``deleted`` counts the deleter's calls."""

    __slots__ = ("array", "deleted", "managed", "shape", "strides")

    def __init__(self, array: Array, managed: ctypes.Structure, shape: ctypes.Array[ctypes.c_int64],
                 strides: ctypes.Array[ctypes.c_int64]) -> None:
        self.array: Array | None = array
        self.managed = managed
        self.shape = shape
        self.strides = strides
        self.deleted = 0


#: Live exports by the managed tensor's address; the deleter takes them out.
LIVE: Final[dict[int, Export]] = {}
_live_lock: Final = threading.Lock()


def _delete(address: int | None) -> None:
    """The deleter: release the export at ``address`` (its array with it)."""
    if address is None:
        return
    with _live_lock:
        rec = LIVE.pop(address, None)
    if rec is not None:
        rec.deleted += 1
        rec.array = None


@DELETER  # type: ignore[untyped-decorator]
def _deleter(address: int | None) -> None:
    # A C caller cannot take an exception; at shutdown the module may be gone.
    with contextlib.suppress(Exception):
        _delete(address)


@_DESTRUCTOR  # type: ignore[untyped-decorator]
def _destructor(capsule: int | None) -> None:
    """A capsule freed unconsumed (still named as made) deletes its tensor;
    a consumer renames it to ``used_...`` and calls the deleter itself."""
    with contextlib.suppress(Exception):
        name = _capsule_name(capsule)
        if name in (_VERSIONED.value, _LEGACY.value):
            _delete(_capsule_pointer(capsule, name))


def type_code(fn: str, dt: Dtype) -> tuple[int, int]:
    """DLPack's (type code, bits) of ``dt``; ``BufferError`` for sub-byte dtypes."""
    if dt.is_sub_byte:
        raise BufferError(f"{fn}: DLPack has no {dt.name} (sub-byte) export")
    special = {"bfloat16": 4, "float8_e4m3fn": 10, "float8_e5m2": 12}
    if dt.name in special:
        return special[dt.name], dt.bits
    code = {Kind.SIGNED: 0, Kind.UNSIGNED: 1, Kind.FLOAT: 2, Kind.COMPLEX: 5, Kind.BOOLEAN: 6}[dt.kind]
    return code, dt.bits


#: Our dtype of each DLPack (type code, bits).
_OF_CODE: Final = {type_code("", d): d for d in D.all if not d.is_sub_byte}


class _Held:
    """A consumed foreign managed tensor, deleted (its deleter called) once,
    when the memory over it is freed."""

    __slots__ = ("address", "deleter")

    def __init__(self, address: int, deleter: Any) -> None:
        self.address = address
        self.deleter = deleter

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            if self.deleter:
                self.deleter(self.address)


def adopt_host(fn: str, x: Any) -> Array | None:
    """An array over the host memory of DLPack producer ``x`` (NumPy, PyTorch,
    ...: DLPack's CPU), without a copy: the capsule is consumed (renamed
    ``used_...``) and the producer's deleter runs once, when the array's
    memory is freed. Every byte-wide dtype of DLPack's that is ours (bfloat16
    and the float8s too) and any strides; a version 1.0 read-only flag makes
    read-only memory. None where the first element is not aligned to the
    dtype (the caller copies); ``BufferError`` naming ``fn`` for what no
    array here is."""
    try:
        capsule = x.__dlpack__(max_version=VERSION)
    except TypeError:  # a producer older than DLPack 1.0's keywords
        capsule = x.__dlpack__()
    name = _name_of(capsule)
    if name not in _USED:
        raise BufferError(f"{fn}: a {type(x).__name__}'s capsule is named {name!r}, not a DLPack tensor")
    address = _pointer_of(capsule, name)
    versioned = name == _VERSIONED.value
    managed: Any = (DLManagedTensorVersioned if versioned else DLManagedTensor).from_address(address)
    if versioned and managed.version.major != 1:
        raise BufferError(f"{fn}: a {type(x).__name__} gave DLPack {managed.version.major}."
                          f"{managed.version.minor}, not 1.x")
    held = _Held(address, managed.deleter)  # from here on, ours to delete
    _rename(capsule, _USED[name])
    t = managed.dl_tensor
    where = (t.device.device_type, t.device.device_id)
    dt = _OF_CODE.get((t.dtype.code, t.dtype.bits)) if t.dtype.lanes == 1 else None
    if where != (DL_CPU, 0) or dt is None:
        raise BufferError(f"{fn}: a {type(x).__name__} on DLPack device {where} of type "
                          f"(code {t.dtype.code}, {t.dtype.bits} bits, {t.dtype.lanes} lanes) "
                          "is not host memory of a dtype here")
    shape = tuple(int(t.shape[i]) for i in range(t.ndim))
    strides = (tuple(int(t.strides[i]) for i in range(t.ndim)) if t.strides
               else Layout.c_contiguous(shape).strides)
    numel = math.prod(shape)
    lo = sum(min(0, (d - 1) * s) for d, s in zip(shape, strides, strict=True)) if numel else 0
    hi = sum(max(0, (d - 1) * s) for d, s in zip(shape, strides, strict=True)) + 1 if numel else 0
    item = dt.itemsize
    base = (t.data or 0) + t.byte_offset + lo * item
    if base % dt.alignment:
        return None
    nbytes = (hi - lo) * item
    if nbytes:
        raw = (ctypes.c_uint8 * nbytes).from_address(base)
        raw._held = held  # type: ignore[attr-defined]  # the NumPy view keeps raw, raw keeps held
        data = np.frombuffer(memoryview(raw), dtype=np.uint8)
    else:
        data = np.zeros(0, dtype=np.uint8)
    readonly = versioned and bool(managed.flags & READ_ONLY)
    return Array(dt, Layout(shape, strides, -lo), Buffer.adopt(data, host, writable=not readonly))


class Interchange(Protocol):
    """What a library says of its devices' memory for interchange."""

    def dlpack_device(self, dev: Rig) -> tuple[int, int]:
        """DLPack's (device type, id) of memory on ``dev``."""

    def address(self, buf: Buffer) -> int:
        """The address of ``buf``'s first byte, as a consumer of ``dlpack_device`` addresses it."""

    def ready(self, fn: str, dev: Rig, stream: object) -> None:
        """Make the consumer's ``stream`` wait for the work queued on ``dev``
        (the standard's stream rule); ``BufferError`` for a stream it cannot take."""

    def cuda_array_interface(self, x: Array) -> dict[str, Any]:
        """``x.__cuda_array_interface__``; ``AttributeError`` with the reason where there is none."""

    def adopt(self, fn: str, x: object, dev: Rig | None) -> Array:
        """An array over a foreign producer's memory on one of the library's
        devices (``__dlpack__`` of that device, else ``__cuda_array_interface__``),
        without a copy, keeping the producer alive; ``dev`` is the device its
        ``__dlpack_device__`` names, None where it has none."""

    def copy(self, x: Array, dev: Rig) -> Array | None:
        """A C-contiguous copy of the contiguous array ``x`` on ``dev`` by one
        device copy, both devices the library's; None where there is none."""


_interchanges: dict[type, Interchange | None] = {}


def interchange_of(dev: Rig) -> Interchange | None:
    """The interchange of ``dev``'s library (``<package>.interchange.INTERCHANGE``),
    None for core's own devices and libraries without one."""
    kind = type(dev)
    if kind not in _interchanges:
        found: Interchange | None = None
        package = kind.__module__.partition(".")[0]
        if kind is not Rig and package != "nxkernel_core":
            module = f"{package}.interchange"
            try:
                found = getattr(importlib.import_module(module), "INTERCHANGE", None)
            except ModuleNotFoundError as e:
                if e.name != module:  # the module is there and broken: say so
                    raise
        _interchanges[kind] = found
    return _interchanges[kind]


def dlpack_device(x: Array) -> tuple[int, int]:
    """(1, 0) for memory the host addresses without a library's say; else its
    library's pair; ``BufferError`` where neither describes it."""
    dev = x.device
    ic = interchange_of(dev)
    if ic is not None:
        return ic.dlpack_device(dev)
    if x.buffer.memory.host_bytes is not None:
        return (DL_CPU, 0)
    raise BufferError(f"Array.__dlpack_device__: {dev.name}'s memory has no DLPack description")


def _address(x: Array) -> int:
    ic = interchange_of(x.device)
    if ic is not None:
        return ic.address(x.buffer)
    hb = x.buffer.memory.host_bytes
    assert hb is not None  # dlpack_device refused it otherwise
    x.buffer.check_live("Array.__dlpack__")
    return int(hb.ctypes.data) + x.buffer.offset


def _ready(fn: str, x: Array, stream: object) -> None:
    ic = interchange_of(x.device)
    if ic is not None:
        ic.ready(fn, x.device, stream)
    elif stream is not None and stream != -1:
        raise BufferError(f"{fn}: {x.device.name}'s memory is host memory, so stream must be None, "
                          f"not {stream!r}")


def export(x: Array, *, stream: object = None, max_version: tuple[int, int] | None = None,
           dl_device: tuple[int, int] | None = None, copy: bool | None = None) -> Any:
    """``x.__dlpack__(...)``: the standard's rules. A ``dl_device`` other than
    ``x``'s is taken only for the host, (1, 0), by one copy (unless ``copy``
    is False); ``copy=True`` exports a fresh copy; the copied flag says so."""
    fn = "Array.__dlpack__"
    own = dlpack_device(x)
    copied = False
    if dl_device is not None and tuple(dl_device) != own:
        if tuple(dl_device) != (DL_CPU, 0) or copy is False:
            raise BufferError(f"{fn}: a {x.dtype.name} {list(x.shape)} array on {x.device.name} "
                              f"{own} cannot be exported to DLPack device {tuple(dl_device)}"
                              + (" without a copy" if copy is False else ""))
        x, copied, stream = _ns_to_device(fn, x, host), True, None
    elif copy or any(s < 0 and d > 1 for d, s in zip(x.shape, x.layout.strides, strict=True)):
        # Negative strides are DLPack's, yet PyTorch aborts the process on
        # them (NumPy's exports too): such an array goes out as a copy.
        if copy is False:
            raise BufferError(f"{fn}: a {x.dtype.name} {list(x.shape)} array with negative strides "
                              f"{list(x.layout.strides)} is exported only as a copy")
        x, copied = _ns_copy(fn, x), True
    code, bits = type_code(fn, x.dtype)
    versioned = max_version is not None and max_version[0] >= 1
    readonly = x.buffer.memory.access is Access.READ
    if readonly and not versioned:
        raise BufferError(f"{fn}: a read-only {x.dtype.name} {list(x.shape)} array needs DLPack 1.0 "
                          "(max_version) to say so")
    _ready(fn, x, stream)
    address = _address(x)
    dev_type, dev_id = dlpack_device(x)
    ndim = x.rank
    shape = (ctypes.c_int64 * max(ndim, 1))(*x.shape)
    strides = (ctypes.c_int64 * max(ndim, 1))(*x.layout.strides)
    first = address + x.layout.offset * x.dtype.itemsize if x.numel else address
    tensor = DLTensor(first, DLDevice(dev_type, dev_id), ndim, DLDataType(code, bits, 1),
                      shape, strides, 0)
    managed: ctypes.Structure
    if versioned:
        flags = (READ_ONLY if readonly else 0) | (IS_COPIED if copied else 0)
        managed = DLManagedTensorVersioned(DLPackVersion(*VERSION), None, _deleter, flags, tensor)
    else:
        managed = DLManagedTensor(tensor, None, _deleter)
    key = ctypes.addressof(managed)
    with _live_lock:
        LIVE[key] = Export(x, managed, shape, strides)
    return _capsule_new(key, _VERSIONED if versioned else _LEGACY, _destructor)


def _ns_to_device(fn: str, x: Array, dev: Rig) -> Array:
    from . import _creation

    return _creation.to_device(fn, x, dev)


def _ns_copy(fn: str, x: Array) -> Array:
    from . import _base

    return _base.copy(fn, x)


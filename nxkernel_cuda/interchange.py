"""How the CUDA library's devices trade memory with other libraries.

``nxkernel_core.array_api._dlpack`` imports :data:`INTERCHANGE` the first
time an array of a :class:`~nxkernel_cuda.device.CudaRig` is exported,
imported or moved. Addresses come from the devices' own ``pointer``.

* ``cuda:N``: DLPack's device (2, N), CUDA. ``__dlpack__(stream=S)`` keeps
  the standard's stream rule: S (None meaning the legacy default stream, 1)
  waits, by an event, for the work queued on the device's stream; -1 waits
  for nothing; 0 and non-integers are refused. ``__cuda_array_interface__``
  is version 3, its ``stream`` the device's stream, where the data is made.
  Imports (``xp.from_dlpack``) of CuPy, PyTorch and other CUDA producers go
  through CuPy (``cupy.from_dlpack``, the device's stream current, so the
  producer orders its work before ours), then, as for any object with only
  ``__cuda_array_interface__``, the memory is adopted without a copy: a
  ``cupy.cuda.UnownedMemory`` that holds the producer, after the producer's
  stream (version 3) is waited for. Copies between GPUs are CuPy's device
  copy (a peer copy where the GPUs differ), ordered after the source's work.
* ``cuda-emu:N``: its memory is host memory, so a consumer is told so:
  DLPack's (1, 0), CPU, at the address the emulator's kernels use
  (``EmuDevice.pointer``); NumPy and PyTorch take it without a copy, and
  ``stream`` must be None (or -1). It has no ``__cuda_array_interface__``
  (``AttributeError`` saying why: a CUDA consumer would read a host address
  as device memory), and CUDA memory does not come onto it without a copy.
  :func:`cuda_interface` (the dictionary a device array gives) and
  :func:`interface_layout` (what an adopted one is read as) take any
  address, so both are tested on the emulated device too.
"""

from __future__ import annotations

import math
from typing import Any, Final, cast

import numpy as np

from nxkernel_core import dtype as D
from nxkernel_core import rig
from nxkernel_core.array import Array
from nxkernel_core.layout import Layout
from nxkernel_core.rig import Access, Buffer, Memory, Rig

from .device import CudaDevice, CudaRig
from .runtime import guard

__all__ = ["INTERCHANGE", "cuda_interface", "interface_layout"]

_DL_CPU: Final = 1
_DL_CUDA: Final = 2
_LEGACY_STREAM: Final = 1


def cuda_interface(fn: str, x: Array, address: int, stream: int | None) -> dict[str, Any]:
    """CUDA's array interface, version 3, of ``x`` whose buffer starts at
    ``address``: strides in bytes, None where C-contiguous; ``data`` 0 for no
    elements; ``AttributeError`` for dtypes it has no type string for."""
    dt = x.dtype
    if dt.is_sub_byte or dt.numpy_dtype.kind == "V":
        raise AttributeError(f"{fn}: the CUDA array interface has no type string for {dt.name}")
    item = dt.itemsize
    lay = x.layout
    data = address + lay.offset * item if x.numel else 0
    typestr = dt.numpy_dtype.str
    return {
        "version": 3,
        "shape": x.shape,
        "typestr": typestr,
        "descr": [("", typestr)],
        "data": (data, x.buffer.memory.access is Access.READ),
        "strides": None if lay.is_contiguous() else tuple(s * item for s in lay.strides),
        "stream": stream,
    }


def _wait(fn: str, dev: CudaDevice, stream: object) -> None:
    """The consumer's ``stream`` waits for the work queued on ``dev``."""
    if stream is None:
        stream = _LEGACY_STREAM
    if stream == -1:
        return
    if isinstance(stream, bool) or not isinstance(stream, int) or stream <= 0:
        raise BufferError(f"{fn}: stream {stream!r} is not a CUDA stream (an integer above 0, "
                          "or -1 for none; 0 is ambiguous)")
    import cupy

    with guard(dev), cupy.cuda.Device(dev.index):
        event = cupy.cuda.Event(disable_timing=True)
        event.record(dev.stream)
        cupy.cuda.ExternalStream(stream).wait_event(event)


def interface_layout(fn: str, cai: dict[str, Any], owner: str) -> tuple[D.Dtype, Layout, int, int]:
    """What ``cai`` (a CUDA array interface) describes, as (dtype, layout,
    address of the lowest byte reached, bytes from there to the highest): the
    layout's offset and strides in elements from that address. ``BufferError``
    naming ``fn`` and ``owner`` (the producer's type) for what no array here
    is: an unknown or foreign-order type, a mask, strides that are not whole
    elements, a misaligned address."""
    try:
        npdt = np.dtype(cai["typestr"])
        dt = D.of_numpy(npdt)
    except (TypeError, ValueError, KeyError) as e:
        raise BufferError(f"{fn}: a {owner}'s type {cai.get('typestr')!r} is not a dtype here "
                          f"({e})") from None
    if not npdt.isnative or cai.get("mask") is not None:
        raise BufferError(f"{fn}: a {owner} with a foreign byte order or a mask is not adopted")
    shape = tuple(int(d) for d in cai["shape"])
    item = dt.itemsize
    byte_strides = cai.get("strides")
    if byte_strides is None:
        strides = Layout.c_contiguous(shape).strides
    elif any(int(s) % item for s in byte_strides):
        raise BufferError(f"{fn}: a {owner}'s strides {list(byte_strides)} (bytes) are not multiples "
                          f"of {dt.name}'s {item} bytes")
    else:
        strides = tuple(int(s) // item for s in byte_strides)
    numel = math.prod(shape)
    lo = sum(min(0, (d - 1) * s) for d, s in zip(shape, strides, strict=True)) if numel else 0
    hi = sum(max(0, (d - 1) * s) for d, s in zip(shape, strides, strict=True)) + 1 if numel else 0
    base = int(cai["data"][0]) + lo * item
    if base % dt.alignment:
        raise BufferError(f"{fn}: a {owner}'s {dt.name} {list(shape)} array at {base:#x} is not "
                          f"aligned to {dt.alignment} bytes")
    return dt, Layout(shape, strides, -lo), base, (hi - lo) * item


def _adopt_interface(fn: str, cai: dict[str, Any], owner: object, dev: CudaDevice) -> Array:
    """An array over the device memory ``cai`` describes, without a copy; the
    memory (a ``cupy.cuda.UnownedMemory``) holds ``owner`` until it is freed."""
    import cupy

    dt, layout, base, nbytes = interface_layout(fn, cai, type(owner).__name__)
    stream = cai.get("stream") if int(cai.get("version", 0)) >= 3 else None
    with guard(dev), cupy.cuda.Device(dev.index):
        if stream is not None and int(stream) != int(dev.stream.ptr):
            event = cupy.cuda.Event(disable_timing=True)
            event.record(cupy.cuda.ExternalStream(int(stream)))
            dev.stream.wait_event(event)
        handle = cupy.cuda.MemoryPointer(cupy.cuda.UnownedMemory(base, nbytes, owner, dev.index), 0)
    with dev._lock:  # counted as an allocation is, and released by Memory.__del__ as one
        dev._in_use += nbytes
    readonly = bool(cai["data"][1])
    memory = Memory(dev, nbytes, Access.READ if readonly else Access.READ_WRITE, None, handle=handle)
    return Array(dt, layout, Buffer(memory, 0, nbytes, memory.epoch))


class _Interchange:
    """The CUDA library's :class:`nxkernel_core.array_api._dlpack.Interchange`."""

    def dlpack_device(self, dev: Rig) -> tuple[int, int]:
        return (_DL_CUDA, dev.index) if isinstance(dev, CudaDevice) else (_DL_CPU, 0)

    def address(self, buf: Buffer) -> int:
        dev = buf.device
        assert isinstance(dev, CudaRig)
        return dev.pointer(buf).address

    def ready(self, fn: str, dev: Rig, stream: object) -> None:
        if isinstance(dev, CudaDevice):
            _wait(fn, dev, stream)
        elif stream is not None and stream != -1:
            raise BufferError(f"{fn}: {dev.name}'s memory is host memory (DLPack's CPU), so "
                              f"stream must be None, not {stream!r}")

    def cuda_array_interface(self, x: Array) -> dict[str, Any]:
        fn = "Array.__cuda_array_interface__"
        dev = x.device
        if not isinstance(dev, CudaDevice):
            raise AttributeError(f"{fn}: {dev.name}'s memory is host memory: a CUDA consumer would "
                                 "read its host address as device memory (use __dlpack__, CPU memory)")
        return cuda_interface(fn, x, dev.pointer(x.buffer).address, int(dev.stream.ptr))

    def adopt(self, fn: str, x: object, dev: Rig | None) -> Array:
        import cupy

        if dev is not None:
            if not isinstance(dev, CudaDevice):
                raise BufferError(f"{fn}: {dev.name} holds no CUDA memory")
            with guard(dev), cupy.cuda.Device(dev.index), dev.stream:
                theirs = cupy.from_dlpack(x)  # CuPy passes our stream: the producer's work first
                cai = theirs.__cuda_array_interface__
            return _adopt_interface(fn, cai, theirs, dev)
        cai = cast(Any, x).__cuda_array_interface__
        ptr = int(cai["data"][0])
        index = int(cupy.cuda.runtime.pointerGetAttributes(ptr).device) if ptr else 0
        found = rig.device(f"cuda:{index}")
        if not isinstance(found, CudaDevice):
            raise BufferError(f"{fn}: cuda:{index} is not a GPU here")
        return _adopt_interface(fn, cai, x, found)

    def copy(self, x: Array, dev: Rig) -> Array | None:
        src = x.device
        if not (isinstance(src, CudaDevice) and isinstance(dev, CudaDevice)):
            return None
        import cupy

        out = Array.empty(x.dtype, x.shape, dev)
        item = x.dtype.itemsize
        with guard(src), cupy.cuda.Device(src.index):
            event = cupy.cuda.Event(disable_timing=True)
            event.record(src.stream)
        with guard(dev), cupy.cuda.Device(dev.index):
            dev.stream.wait_event(event)
            target = cast(Any, out.buffer.memory.handle) + out.buffer.offset
            source = cast(Any, x.buffer.memory.handle) + x.buffer.offset + x.layout.offset * item
            target.copy_from_device_async(source, x.numel * item, dev.stream)
            dev.stream.synchronize()  # x may be freed once this returns
        return out


#: What ``nxkernel_core.array_api._dlpack`` asks of this library's devices.
INTERCHANGE: Final = _Interchange()

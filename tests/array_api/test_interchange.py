"""DLPack and the CUDA array interface, both ways, and ``to_device``.

On the host and on the emulated device, the capsules are read back through
ctypes, field by field, against values known without the exporter (the
NumPy memory an array adopted, DLPack's own type table), and consumed by
NumPy and PyTorch. What ``cuda-emu:N`` exports, by decision
(``nxkernel_cuda.interchange``): DLPack's CPU (1, 0) at the emulator's own
address for the memory, and no ``__cuda_array_interface__``; the interface a
GPU array gives is checked on it through ``cuda_interface`` and
``interface_layout``. Tests marked ``cuda`` trade with CuPy and PyTorch on a
GPU and skip, with the reason, without one.
"""

from __future__ import annotations

import ctypes
import gc
import weakref
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import pytest

from nxkernel_core import array_api as xp
from nxkernel_core import dtype as D
from nxkernel_core import rig
from nxkernel_core.array import Array
from nxkernel_core.array_api import _dlpack as I
from nxkernel_core.rig import Memory, Rig

_get_name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(("PyCapsule_GetName", ctypes.pythonapi))
_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))
_set_name = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_SetName", ctypes.pythonapi))


def _open(capsule: Any) -> tuple[int, Any]:
    """The managed tensor a capsule holds: (its address, the structure)."""
    name = _get_name(capsule)
    address = _get_pointer(capsule, name)
    kind = I.DLManagedTensorVersioned if name == b"dltensor_versioned" else I.DLManagedTensor
    return address, kind.from_address(address)


def _fields(tensor: Any) -> dict[str, Any]:
    t = tensor.dl_tensor
    return {"device": (t.device.device_type, t.device.device_id), "ndim": t.ndim,
            "dtype": (t.dtype.code, t.dtype.bits, t.dtype.lanes),
            "shape": [t.shape[i] for i in range(t.ndim)],
            "strides": [t.strides[i] for i in range(t.ndim)], "byte_offset": t.byte_offset,
            "data": t.data}


class _Producer:
    """Hands a consumer one capsule made beforehand."""

    def __init__(self, capsule: Any, device: tuple[int, int]) -> None:
        self.capsule, self.device = capsule, device

    def __dlpack__(self, **_: object) -> Any:
        return self.capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.device


@pytest.fixture
def emu() -> Rig:
    cuda = pytest.importorskip("nxkernel_cuda.device", reason="nxkernel_cuda is not importable")
    return cuda.EmuDevice(0)  # type: ignore[no-any-return]


def test_a_versioned_capsule_describes_a_host_view_field_by_field() -> None:
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = xp.asarray(a)[1:, ::2]  # shares a's memory: its first element is 16 bytes in
    capsule = x.__dlpack__(max_version=(1, 2))
    address, m = _open(capsule)
    assert (m.version.major, m.version.minor) == (1, 0) and m.flags == 0
    assert _fields(m) == {"device": (1, 0), "ndim": 2, "dtype": (2, 32, 1), "shape": [2, 2],
                          "strides": [4, 2], "byte_offset": 0, "data": a.ctypes.data + 16}
    assert address in I.LIVE


def test_a_legacy_capsule_describes_the_same_and_a_0d_array_has_no_axes() -> None:
    a = np.arange(6, dtype=np.int16)
    capsule = xp.asarray(a)[2:].__dlpack__()
    assert _get_name(capsule) == b"dltensor"
    _, m = _open(capsule)
    assert _fields(m) == {"device": (1, 0), "ndim": 1, "dtype": (0, 16, 1), "shape": [4],
                          "strides": [1], "byte_offset": 0, "data": a.ctypes.data + 4}
    capsule = xp.asarray(np.float64(2.5)).__dlpack__(max_version=(1, 0))
    _, m = _open(capsule)
    assert _fields(m)["ndim"] == 0 and _fields(m)["dtype"] == (2, 64, 1)


# DLPack's DLDataTypeCode (dlpack.h, v1.1): kDLInt 0, kDLUInt 1, kDLFloat 2,
# kDLBfloat 4, kDLComplex 5, kDLBool 6, kDLFloat8_e4m3fn 10, kDLFloat8_e5m2 12.
_CODES = {"int8": (0, 8), "int16": (0, 16), "int32": (0, 32), "int64": (0, 64), "uint8": (1, 8),
          "uint16": (1, 16), "uint32": (1, 32), "uint64": (1, 64), "float16": (2, 16),
          "float32": (2, 32), "float64": (2, 64), "bfloat16": (4, 16), "complex64": (5, 64),
          "complex128": (5, 128), "bool": (6, 8), "float8_e4m3fn": (10, 8), "float8_e5m2": (12, 8)}


@pytest.mark.parametrize("name", sorted(_CODES))
def test_every_byte_wide_dtype_has_dlpacks_code(name: str) -> None:
    dt = next(d for d in D.all if d.name == name)
    capsule = Array.empty(dt, (3,)).__dlpack__(max_version=(1, 0))
    _, m = _open(capsule)
    assert _fields(m)["dtype"] == (*_CODES[name], 1)


def test_sub_byte_dtypes_are_refused_by_name() -> None:
    for dt in (D.int4, D.uint4, D.float4_e2m1fn, D.bit):
        with pytest.raises(BufferError, match=f"Array.__dlpack__: DLPack has no {dt.name}"):
            Array.empty(dt, (8,)).__dlpack__()


def test_an_unconsumed_capsule_deletes_once_when_freed() -> None:
    capsule = xp.asarray(np.arange(3.0)).__dlpack__(max_version=(1, 0))
    address, _ = _open(capsule)
    record = I.LIVE[address]
    del capsule
    gc.collect()
    assert record.deleted == 1 and address not in I.LIVE and record.array is None


def _memory_ref(x: Array) -> weakref.ref[Memory]:
    return weakref.ref(x.buffer.memory)


def test_numpy_keeps_the_producer_alive_and_the_deleter_runs_once() -> None:
    # Memory of its own, not NumPy's, and not a call's pooled destination
    # (the pool keeps those for later calls, so they outlive their arrays).
    x = xp.asarray([0, 1, 2, 3, 4], dtype=xp.int32)
    alive = _memory_ref(x)
    capsule = x.__dlpack__(max_version=(1, 0))
    address, _ = _open(capsule)
    record = I.LIVE[address]
    n = np.from_dlpack(_Producer(capsule, (1, 0)))
    assert _get_name(capsule) == b"used_dltensor_versioned"
    del x
    gc.collect()
    assert alive() is not None and record.deleted == 0
    assert n.tolist() == [0, 1, 2, 3, 4]
    del n
    gc.collect()
    assert record.deleted == 1 and record.array is None and alive() is None
    del capsule
    gc.collect()
    assert record.deleted == 1


def test_a_consumer_calling_the_deleter_itself_releases_once() -> None:
    x = xp.asarray([1.0, 2.0])
    capsule = x.__dlpack__()
    address, m = _open(capsule)
    record = I.LIVE[address]
    assert _set_name(capsule, b"used_dltensor") == 0
    deleter = m.deleter
    deleter(address)
    assert record.deleted == 1 and address not in I.LIVE
    del capsule, deleter, m
    gc.collect()
    assert record.deleted == 1


def test_an_import_consumes_the_capsule_and_deletes_it_once_when_freed() -> None:
    x = xp.arange(4, dtype=xp.int16)
    capsule = x.__dlpack__(max_version=(1, 0))
    address, _ = _open(capsule)
    record = I.LIVE[address]
    y = xp.from_dlpack(_Producer(capsule, (1, 0)))
    assert _get_name(capsule) == b"used_dltensor_versioned" and record.deleted == 0
    assert y.buffer.memory is not x.buffer.memory and y.to_numpy().tolist() == [0, 1, 2, 3]
    x[0] = 9  # one memory under both
    assert int(y[0]) == 9
    del y
    gc.collect()
    assert record.deleted == 1
    del capsule
    gc.collect()
    assert record.deleted == 1


def test_an_import_of_what_no_array_here_is_refuses_and_still_deletes_once() -> None:
    capsule = xp.ones(2).__dlpack__(max_version=(1, 0))
    address, m = _open(capsule)
    record = I.LIVE[address]
    m.dl_tensor.dtype.lanes = 2
    with pytest.raises(BufferError, match=r"xp\.from_dlpack: a _Producer on DLPack device \(1, 0\) of type "
                                          r"\(code 2, 64 bits, 2 lanes\) is not host memory"):
        xp.from_dlpack(_Producer(capsule, (1, 0)))
    gc.collect()
    assert record.deleted == 1


def test_a_misaligned_import_is_a_copy_unless_copy_is_false() -> None:
    a = np.zeros(17, np.uint8)[1:].view(np.float64)  # 8-byte elements one byte off
    a[:] = [1.5, 2.5]
    x = xp.from_dlpack(a)
    a[0] = 7.0
    assert x.to_numpy().tolist() == [1.5, 2.5]
    with pytest.raises(BufferError, match="not aligned cannot be shared without a copy"):
        xp.from_dlpack(a, copy=False)


def test_read_only_memory_says_so_and_a_legacy_capsule_refuses_it() -> None:
    a = np.arange(4.0)
    a.flags.writeable = False
    x = xp.from_dlpack(a)
    capsule = x.__dlpack__(max_version=(1, 0))
    _, m = _open(capsule)
    assert m.flags == I.READ_ONLY
    assert not np.from_dlpack(x).flags.writeable
    with pytest.raises(BufferError, match=r"Array.__dlpack__: a read-only float64 \[4\] array"):
        x.__dlpack__()


def test_copies_negative_strides_and_devices_follow_the_standard() -> None:
    a = np.arange(6.0)
    x = xp.asarray(a)
    capsule = x.__dlpack__(max_version=(1, 0), copy=True)
    _, m = _open(capsule)
    assert m.flags == I.IS_COPIED and m.dl_tensor.data != a.ctypes.data
    backwards = x[::-2]
    capsule = backwards.__dlpack__(max_version=(1, 0))
    _, m = _open(capsule)
    assert m.flags == I.IS_COPIED and _fields(m)["strides"] == [1]
    assert np.from_dlpack(backwards).tolist() == [5.0, 3.0, 1.0]
    with pytest.raises(BufferError, match="negative strides"):
        backwards.__dlpack__(copy=False)
    capsule = x.__dlpack__(max_version=(1, 0), dl_device=(1, 0), copy=False)
    _, m = _open(capsule)
    assert m.dl_tensor.data == a.ctypes.data
    with pytest.raises(BufferError, match=r"float64 \[6\] array on host \(1, 0\) cannot be exported "
                                          r"to DLPack device \(2, 0\)"):
        x.__dlpack__(dl_device=(2, 0))
    with pytest.raises(BufferError, match="stream must be None, not 7"):
        x.__dlpack__(stream=7)


def test_torch_shares_host_memory_both_ways() -> None:
    torch = pytest.importorskip("torch")
    x = xp.asarray(np.arange(8, dtype=np.float32).reshape(2, 4))[:, 1:3]
    t = torch.from_dlpack(x)
    t[1, 0] = -1.0
    assert float(x[1, 0]) == -1.0 and t.stride() == (4, 1)
    b = torch.from_dlpack(xp.astype(xp.asarray([1.5, -2.25]), D.bfloat16))
    assert b.dtype == torch.bfloat16 and b.tolist() == [1.5, -2.25]
    back = xp.from_dlpack(b)  # our own import: NumPy has no bfloat16
    b[0] = 4.0
    assert back.dtype is D.bfloat16 and back.to_numpy().tolist() == [4.0, -2.25]
    assert xp.asarray(b).dtype is D.bfloat16  # asarray takes DLPack producers the same way
    u = torch.arange(6, dtype=torch.float32).reshape(2, 3).T
    assert xp.from_dlpack(u).to_numpy().tolist() == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]


def test_the_emulated_device_exports_cpu_memory_at_its_own_address(emu: Rig) -> None:
    x = xp.asarray(np.arange(12.0).reshape(3, 4), device=emu)
    view = x[1:, 1:]
    assert view.__dlpack_device__() == (1, 0)
    capsule = view.__dlpack__(max_version=(1, 0))
    _, m = _open(capsule)
    host = x.buffer.memory.host_bytes
    assert host is not None
    assert _fields(m) == {"device": (1, 0), "ndim": 2, "dtype": (2, 64, 1), "shape": [2, 3],
                          "strides": [4, 1], "byte_offset": 0,
                          "data": emu.pointer(x.buffer).address + 40}  # type: ignore[attr-defined]
    assert m.dl_tensor.data == host.ctypes.data + x.buffer.offset + 40
    n = np.from_dlpack(view)
    n[0, 0] = 50.0
    torch = pytest.importorskip("torch")
    t = torch.from_dlpack(view)
    t[1, 2] = 60.0
    assert x.to_numpy()[1, 1] == 50.0 and x.to_numpy()[2, 3] == 60.0
    with pytest.raises(BufferError, match=r"cuda-emu:0's memory is host memory \(DLPack's CPU\), so stream"):
        x.__dlpack__(stream=1)


def test_the_emulated_device_has_no_cuda_array_interface(emu: Rig) -> None:
    x = xp.zeros(3, device=emu)
    assert not hasattr(x, "__cuda_array_interface__")
    with pytest.raises(AttributeError, match="cuda-emu:0's memory is host memory: a CUDA consumer"):
        _ = x.__cuda_array_interface__
    assert not hasattr(xp.zeros(3), "__cuda_array_interface__")


def test_the_cuda_array_interface_of_an_emulated_array_reads_back(emu: Rig) -> None:
    from nxkernel_cuda.interchange import cuda_interface, interface_layout

    x = xp.asarray(np.arange(24, dtype=np.int32).reshape(4, 6), device=emu)
    base = emu.pointer(x.buffer).address  # type: ignore[attr-defined]
    view = x[1:3, 4:1:-2]
    cai = cuda_interface("t", view, base, 99)
    assert cai == {"version": 3, "shape": (2, 2), "typestr": "<i4", "descr": [("", "<i4")],
                   "data": (base + (6 + 4) * 4, False), "strides": (24, -8), "stream": 99}
    assert cuda_interface("t", x, base, None)["strides"] is None
    assert cuda_interface("t", x[:0], base, None)["data"] == (0, False)
    dt, layout, low, nbytes = interface_layout("t", cai, "probe")
    assert dt is D.int32 and layout.shape == (2, 2) and layout.strides == (6, -2)
    assert low == base + (6 + 2) * 4 and nbytes == (6 + 2 + 1) * 4
    seen = np.ctypeslib.as_array((ctypes.c_int32 * (nbytes // 4)).from_address(low))
    got = np.lib.stride_tricks.as_strided(seen[layout.offset:], layout.shape,
                                          tuple(4 * s for s in layout.strides))
    np.testing.assert_array_equal(got, [[10, 8], [16, 14]])
    with pytest.raises(BufferError, match=r"t: a probe's strides \[6\] \(bytes\) are not multiples"):
        interface_layout("t", {**cai, "shape": (2,), "strides": (6,)}, "probe")
    with pytest.raises(BufferError, match="not aligned to 4 bytes"):
        interface_layout("t", {**cai, "data": (base + 2, False)}, "probe")
    with pytest.raises(BufferError, match="foreign byte order"):
        interface_layout("t", {**cai, "typestr": ">i4"}, "probe")
    with pytest.raises(AttributeError, match="no type string for bfloat16"):
        cuda_interface("t", xp.astype(x, D.bfloat16), base, None)


class _Far(Rig):
    """A device whose memory the host does not address (bytes kept aside)."""

    def __init__(self) -> None:
        super().__init__("far-test", shares_host_memory=False)
        self.store: dict[int, npt.NDArray[np.uint8]] = {}
        self.reads = 0

    def _allocate(self, nbytes: int) -> None:
        return None

    def read_bytes(self, memory: Memory, offset: int, length: int) -> npt.NDArray[np.uint8]:
        self.reads += 1
        return self.store.setdefault(id(memory), np.zeros(memory.nbytes, np.uint8))[
            offset : offset + length].copy()

    def write_bytes(self, memory: Memory, offset: int, data: npt.NDArray[np.uint8]) -> None:
        self.store.setdefault(id(memory), np.zeros(memory.nbytes, np.uint8))[
            offset : offset + data.size] = data


def _count_writes(dev: Rig, monkeypatch: pytest.MonkeyPatch, source: Array) -> list[bool]:
    """Each write_bytes call on ``dev``: whether its data lies in ``source``'s memory."""
    calls: list[bool] = []
    write = dev.write_bytes
    host = source.buffer.memory.host_bytes

    def counted(memory: Memory, offset: int, data: npt.NDArray[np.uint8]) -> None:
        calls.append(host is not None and np.shares_memory(data, host))
        write(memory, offset, data)

    monkeypatch.setattr(dev, "write_bytes", counted)
    return calls


def test_to_device_copies_once_from_where_the_bytes_lie(emu: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    from nxkernel_cuda.device import EmuDevice

    other = EmuDevice(1)
    x = xp.asarray(np.arange(10, dtype=np.int64), device=emu)[2:8]
    assert x.to_device(emu) is x
    calls = _count_writes(other, monkeypatch, x)
    y = x.to_device(other)
    assert calls == [True] and y.device is other and y.buffer.memory is not x.buffer.memory
    assert y.to_numpy().tolist() == [2, 3, 4, 5, 6, 7]
    calls = _count_writes(rig.host, monkeypatch, y)
    h = y.to_device("cpu")
    assert calls == [True] and h.device is rig.host and h.to_numpy().tolist() == [2, 3, 4, 5, 6, 7]
    calls = _count_writes(emu, monkeypatch, h)
    assert h.to_device(emu).to_numpy().tolist() == [2, 3, 4, 5, 6, 7] and calls == [True]
    packed = xp.asarray(np.array([1, 0, 1, 1]), dtype=D.bit).to_device(other)
    assert packed.to_numpy().tolist() == [True, False, True, True]


def test_to_device_from_memory_the_host_does_not_address_reads_once_into_the_result() -> None:
    far = _Far()
    x = xp.asarray(np.arange(6.0).reshape(2, 3))
    f = x.to_device(far)
    assert f.buffer.memory.host_bytes is None
    h = f.to_device("cpu")
    assert far.reads == 1 and h.device is rig.host
    np.testing.assert_array_equal(h.to_numpy(), np.arange(6.0).reshape(2, 3))


def test_from_dlpack_onto_a_device_copies_once_and_cuda_producers_need_a_gpu(emu: Rig) -> None:
    a = np.arange(4.0)
    x = xp.from_dlpack(a, device=emu)
    a[0] = 9.0
    assert x.device is emu and x.to_numpy().tolist() == [0.0, 1.0, 2.0, 3.0]

    class OnlyCai:
        __cuda_array_interface__: ClassVar[dict[str, Any]] = {
            "shape": (1,), "typestr": "<f4", "version": 3, "data": (256, False)}

    class CudaDlpack:
        def __dlpack_device__(self) -> tuple[int, int]:
            return (2, 7)

        def __dlpack__(self, **_: object) -> Any:
            raise AssertionError("not reached without cuda:7")

    with pytest.raises(BufferError, match=r"xp\.from_dlpack: a OnlyCai in CUDA memory needs cuda: "):
        xp.from_dlpack(OnlyCai())
    with pytest.raises(BufferError, match=r"xp\.from_dlpack: a CudaDlpack in CUDA memory needs cuda:7: "):
        xp.asarray(CudaDlpack())


# ---- on a GPU ------------------------------------------------------------------------


def _gpu() -> tuple[Any, Rig]:
    cupy = pytest.importorskip("cupy")
    return cupy, rig.device("cuda:0")


@pytest.mark.cuda
def test_cupy_and_our_gpu_arrays_share_memory_both_ways() -> None:
    cupy, gpu = _gpu()
    x = xp.asarray(np.arange(12.0).reshape(3, 4), device=gpu)
    assert x.__dlpack_device__() == (2, 0)
    c = cupy.from_dlpack(x[1:, ::2])
    c[0, 0] = -1.0
    cupy.cuda.Device(0).synchronize()  # CuPy wrote on its stream; we read on ours
    assert x.to_numpy()[1, 0] == -1.0
    cai = x.__cuda_array_interface__
    assert cai["version"] == 3 and cai["stream"] == int(gpu.stream.ptr)  # type: ignore[attr-defined]
    assert cupy.asarray(x).data.ptr == cai["data"][0]  # CuPy reads the interface
    theirs = cupy.arange(6, dtype=cupy.float32).reshape(2, 3)
    y = xp.from_dlpack(theirs)
    assert y.device is gpu and y.__cuda_array_interface__["data"][0] == theirs.data.ptr
    theirs[1, 2] = 50.0
    cupy.cuda.Device(0).synchronize()
    assert y.to_numpy()[1, 2] == 50.0
    pool = cupy.get_default_memory_pool()
    used = pool.used_bytes()
    del theirs
    gc.collect()
    assert pool.used_bytes() == used and y.to_numpy()[1, 2] == 50.0  # the producer is held
    del y
    gc.collect()
    assert pool.used_bytes() < used  # and let go with the array
    z = xp.from_dlpack(cupy.arange(4, dtype=cupy.int32)[::2])
    assert z.to_numpy().tolist() == [0, 2]


@pytest.mark.cuda
def test_torch_trades_gpu_memory_both_ways() -> None:
    _, gpu = _gpu()
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("this PyTorch has no CUDA")
    x = xp.asarray(np.arange(6.0), device=gpu)
    t = torch.from_dlpack(x)
    t[0] = 7.0
    torch.cuda.synchronize()
    assert t.device.type == "cuda" and x.to_numpy()[0] == 7.0
    u = torch.arange(5, device="cuda", dtype=torch.float32)
    y = xp.from_dlpack(u)
    assert y.__cuda_array_interface__["data"][0] == u.data_ptr()
    assert y.to_numpy().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]


@pytest.mark.cuda
def test_gpu_to_device_and_the_stream_rule() -> None:
    _, gpu = _gpu()
    x = xp.asarray(np.arange(8.0), device=gpu)
    assert x.to_device(gpu) is x
    assert x.to_device("cpu").to_numpy().tolist() == list(np.arange(8.0))
    x.__dlpack__(stream=-1)
    x.__dlpack__(stream=2)
    with pytest.raises(BufferError, match="stream 0 is not a CUDA stream"):
        x.__dlpack__(stream=0)
    if len([d for d in rig.devices() if d.name.startswith("cuda:")]) > 1:
        y = x.to_device("cuda:1")
        assert y.device == "cuda:1" and y.to_numpy().tolist() == list(np.arange(8.0))

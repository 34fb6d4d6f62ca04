"""nxkernel_cuda.device and .plugin: availability says why, discovery never
fails for want of CUDA, cuda-emu:0 opens on request, and the library states
what it does (declines everything, for now)."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from nxkernel_core import dtype as D
from nxkernel_core import plugins, rig
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_core.door import refusal
from nxkernel_core.kernel import KERNEL_NAMES, check_library
from nxkernel_core.rig import Lost, OutOfMemory
from nxkernel_cuda import device, nvrtc, plugin
from nxkernel_cuda.device import EmuDevice
from nxkernel_cuda.library import LIBRARY


@pytest.fixture
def fresh_probe() -> Iterator[None]:
    """Forget the cached availability before and after the test."""
    device._probe.cache_clear()
    yield
    device._probe.cache_clear()


def _fake_cupy(monkeypatch: pytest.MonkeyPatch, *, driver: Any = 13000, count: Any = 1,
               runtime_version: Any = 13000) -> None:
    """Install a stand-in ``cupy`` whose runtime reports ``driver``, ``count``
    and the CUDA it is built for (an exception instance is raised instead)."""

    def answer(v: Any) -> Any:
        if isinstance(v, Exception):
            raise v
        return v

    runtime = types.SimpleNamespace(
        driverGetVersion=lambda: answer(driver),
        runtimeGetVersion=lambda: answer(runtime_version),
        getDeviceCount=lambda: answer(count),
        getDeviceProperties=lambda i: {"name": b"Stand-in GPU", "major": 9, "minor": 0},
    )
    module = types.ModuleType("cupy")
    module.cuda = types.SimpleNamespace(runtime=runtime)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cupy", module)


def test_availability_here_gives_a_reason() -> None:
    ok, why = device.availability()
    if ok:
        pytest.skip(f"this machine has a usable GPU: {why}")
    assert why
    assert any(w in why for w in ("CuPy", "driver", "device", "NVRTC")), why


@pytest.mark.parametrize(("driver", "count", "runtime_version", "expected"), [
    (OSError("libcuda.so.1: cannot open"), 1, 13000, "no CUDA driver could be loaded (OSError: libcuda.so.1"),
    (0, 1, 13000, "no CUDA driver is installed"),
    (11080, 1, 11080, "too old: it runs CUDA 11.8, and the kernels need CUDA 12.0"),
    (12040, 1, 13000, "CuPy is built for CUDA 13.0, newer than the driver's CUDA 12.4: pip install"
                      " 'nxkernel[cuda12]'"),
    (12040, 1, OSError("libcudart"), "CuPy's CUDA runtime could not be loaded (OSError: libcudart)"),
    (13000, 0, 13000, "no CUDA device is present"),
    (13000, RuntimeError("cudaErrorNoDevice"), 13000,
     "no CUDA device is usable (RuntimeError: cudaErrorNoDevice)"),
])
def test_availability_names_what_is_missing(monkeypatch: pytest.MonkeyPatch, fresh_probe: None,
                                            driver: Any, count: Any, runtime_version: Any,
                                            expected: str) -> None:
    _fake_cupy(monkeypatch, driver=driver, count=count, runtime_version=runtime_version)
    ok, why = device.availability()
    assert not ok and expected in why


def test_availability_without_cupy(monkeypatch: pytest.MonkeyPatch, fresh_probe: None) -> None:
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy raises ImportError
    ok, why = device.availability()
    assert not ok and why.startswith("CuPy is not importable") and "nxkernel[cuda]" in why


def _stand_in_nvrtc(*versions: tuple[int, int]) -> tuple[nvrtc.Nvrtc, ...]:
    """NVRTCs of ``versions`` that are never called (no library behind them)."""
    return tuple(nvrtc.Nvrtc(f"/nv{a}.{b}/libnvrtc.so.{a}", (a, b), ("sm_80", "sm_90"), None)  # type: ignore[arg-type]
                 for a, b in versions)


def test_availability_with_a_device_names_the_chosen_nvrtc(
    monkeypatch: pytest.MonkeyPatch, fresh_probe: None
) -> None:
    monkeypatch.delenv(nvrtc.VARIABLE, raising=False)
    monkeypatch.setattr(nvrtc, "found", lambda: _stand_in_nvrtc((13, 0), (12, 9)))
    _fake_cupy(monkeypatch, driver=12040, runtime_version=12090)
    assert device.availability() == (True, "1 device(s): cuda:0 Stand-in GPU (sm_90); driver CUDA 12.4;"
                                           " NVRTC 12.9 (/nv12.9/libnvrtc.so.12)")
    _fake_cupy(monkeypatch, driver=13010, runtime_version=13000)
    assert device.availability(refresh=True)[1].endswith("NVRTC 13.0 (/nv13.0/libnvrtc.so.13)")
    monkeypatch.setattr(nvrtc, "found", lambda: _stand_in_nvrtc((13, 0)))
    _fake_cupy(monkeypatch, driver=12040, runtime_version=12090)
    ok, why = device.availability(refresh=True)
    assert not ok
    assert why == ("no NVRTC whose cubins the driver (CUDA 12.4) can run: found NVRTC 13.0"
                   " (/nv13.0/libnvrtc.so.13); pip install 'nxkernel[cuda12]'")


def test_select_takes_the_newest_nvrtc_the_driver_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(nvrtc.VARIABLE, raising=False)
    both = _stand_in_nvrtc((13, 0), (12, 9))
    assert nvrtc.select(None, both).version == (13, 0)  # no driver: compiling only
    assert nvrtc.select(13000, both).version == (13, 0)
    assert nvrtc.select(12020, both).version == (12, 9)  # minor version compatibility: cubins
    with pytest.raises(nvrtc.NvrtcUnavailable, match=r"driver \(CUDA 11.8\).*a driver for CUDA 12 or newer"):
        nvrtc.select(11080, both)
    with pytest.raises(nvrtc.NvrtcUnavailable, match=r"no NVRTC can be loaded .*nxkernel\[cuda13\]"):
        nvrtc.select(13000, ())
    monkeypatch.setenv(nvrtc.VARIABLE, "12")
    assert nvrtc.select(13000, both).version == (12, 9)
    monkeypatch.setenv(nvrtc.VARIABLE, "13")
    with pytest.raises(nvrtc.NvrtcUnavailable, match=r"NXKERNEL_NVRTC=13, but no NVRTC 13 is found"):
        nvrtc.select(13000, both[1:])


def test_the_library_keeps_the_protocol_and_declines_what_it_does_not_compute() -> None:
    assert plugin.nxkernel_libraries() == [LIBRARY]
    check_library(LIBRARY)
    assert LIBRARY.name == "nx.cuda" and LIBRARY.statement.library == "nx.cuda"
    assert device.availability()[1] in LIBRARY.statement.summary
    emu = EmuDevice(0)
    assert LIBRARY.computes_on(emu) and not LIBRARY.computes_on(rig.host)
    x = Array.from_numpy(np.arange(4, dtype=np.float32).reshape(2, 2), emu)
    # Every kernel but eig computes; eig declines every case, touching nothing.
    computed = set(KERNEL_NAMES) - {"eig"}
    for k in KERNEL_NAMES:
        prose = LIBRARY.statement.computes[k].prose
        if k in computed:
            assert "declines every case" not in prose, k
            continue
        w, v = Array.empty(D.complex64, (2,), emu), Array.empty(D.complex64, (2, 2), emu)
        assert getattr(LIBRARY, k)(S.Eig(True), [w, v], [x]) is Answer.DECLINED
        assert "declines every case" in prose
    assert x.to_numpy().tolist() == [[0, 1], [2, 3]]


@pytest.fixture
def no_devices_after() -> Iterator[None]:
    """Reopen the plugin's devices, without emulation, after the test."""
    yield
    for d in device.open_devices():
        d.close()
    device.open_devices(refresh=True)


def test_emulation_opens_cuda_emu(monkeypatch: pytest.MonkeyPatch, no_devices_after: None) -> None:
    monkeypatch.delenv(device.EMULATE_VARIABLE, raising=False)
    assert not any(isinstance(d, EmuDevice) for d in device.open_devices(refresh=True))
    for value in ("0", "false", "no", ""):
        monkeypatch.setenv(device.EMULATE_VARIABLE, value)
        assert not device.emulation_requested()
    monkeypatch.setenv(device.EMULATE_VARIABLE, "1")
    opened = device.open_devices(refresh=True)
    emus = [d for d in opened if isinstance(d, EmuDevice)]
    assert [d.name for d in emus] == ["cuda-emu:0"]
    assert plugin.nxkernel_devices() == list(opened)  # the same objects every time
    assert emus[0].shares_host_memory and emus[0].arch == "sm_90"


def test_discovery_loads_the_plugin_and_registers_the_emulator(
        monkeypatch: pytest.MonkeyPatch, no_devices_after: None) -> None:
    monkeypatch.setenv(device.EMULATE_VARIABLE, "1")
    device.open_devices(refresh=True)
    try:
        registry = plugins.discover(refresh=True)
        if "cuda" not in registry.plugins:
            pytest.skip("the cuda entry point is not installed (pip install -e .)")
        assert registry.plugins["cuda"] is plugins.Status.LOADED
        assert not [f for f in registry.failures if f.name == "cuda"]
        assert registry.library("nx.cuda") is LIBRARY
        emu = rig.device("cuda-emu:0")
        assert isinstance(emu, EmuDevice)
        assert LIBRARY in registry.libraries_for(emu)
    finally:
        monkeypatch.delenv(device.EMULATE_VARIABLE)
        for d in device.open_devices():
            d.close()
        device.open_devices(refresh=True)
        plugins.discover(refresh=True)


def test_emulated_memory_is_host_memory_of_its_own_device() -> None:
    emu = EmuDevice(3)
    assert emu.name == "cuda-emu:3"
    a = Array.from_numpy(np.arange(10, dtype=np.int64), emu)
    assert a.to_numpy().tolist() == list(range(10))
    host_bytes = a.buffer.memory.host_bytes
    assert host_bytes is not None
    assert emu.pointer(a.buffer).address == host_bytes.ctypes.data
    assert emu.pointer(a[2:].buffer).address == host_bytes.ctypes.data  # a view keeps its buffer
    h = Array.from_numpy(np.arange(10, dtype=np.int64))
    assert refusal([a], [h]) is Answer.WRONG_DEVICE


def test_emulated_devices_run_out_of_memory_and_get_lost() -> None:
    small = EmuDevice(0, budget=1024)
    Array.empty(rig_dtype(), (100,), small)
    with pytest.raises(OutOfMemory):
        Array.empty(rig_dtype(), (1000,), small)
    small.lose("a test")
    with pytest.raises(Lost, match="a test"):
        Array.empty(rig_dtype(), (1,), small)


def rig_dtype() -> Any:
    from nxkernel_core import dtype

    return dtype.float32

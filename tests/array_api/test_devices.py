"""Devices as the standard's users name them: ``cpu``, ``cuda``, ``cuda:N``,
``cuda-emu:N``; equality with names; ``to_device``; the default device by
``NXKERNEL_DEFAULT_DEVICE`` and by a context manager; discovery run by naming
a device; an absent device refused with each library's reason."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from nxkernel_core import array_api as xp
from nxkernel_core import rig


def _run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, **env}
    for k in ("NXKERNEL_CUDA_EMULATE", "NXKERNEL_DEFAULT_DEVICE"):
        if k not in env:
            full.pop(k, None)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=full, timeout=120, check=False)


def test_cpu_names_the_host_and_devices_compare_equal_to_their_names() -> None:
    assert rig.device("cpu") is rig.host
    x = xp.asarray([1.0], device="cpu")
    assert x.device == "cpu" and x.device == "host" and x.device == rig.host
    assert x.device != "cuda" and x.device != "cuda:0"
    assert hash(x.device) == hash(rig.host)


def test_every_creation_function_takes_device() -> None:
    for make in (lambda d: xp.zeros(2, device=d), lambda d: xp.ones(2, device=d),
                 lambda d: xp.empty(2, device=d), lambda d: xp.full(2, 3.0, device=d),
                 lambda d: xp.arange(3, device=d), lambda d: xp.linspace(0, 1, 3, device=d),
                 lambda d: xp.eye(2, device=d), lambda d: xp.asarray([1], device=d),
                 lambda d: xp.zeros_like(xp.ones(1), device=d),
                 lambda d: xp.full_like(xp.ones(1), 2.0, device=d),
                 lambda d: xp.fft.fftfreq(4, device=d)):
        assert make("cpu").device is rig.host


def test_to_device_moves_between_devices() -> None:
    other = rig.memory_device("aapi-test-mem")
    try:
        x = xp.asarray(np.arange(4.0))
        y = x.to_device(other)
        assert y.device is other
        np.testing.assert_array_equal(y.to_numpy(), np.arange(4.0))
        assert y.to_device("cpu").device is rig.host
        with pytest.raises(ValueError, match="different devices"):
            _ = x + y
    finally:
        other.close()


def test_the_context_manager_sets_the_default_device() -> None:
    other = rig.memory_device("aapi-test-ctx")
    try:
        with xp.default_device(other) as dev:
            assert dev is other
            assert xp.zeros(3).device is other
            assert xp.asarray([1.0]).device is other
            assert xp.__array_namespace_info__().default_device() is other
        assert xp.zeros(3).device is rig.host
    finally:
        other.close()


def test_an_absent_device_is_refused_with_each_librarys_reason() -> None:
    r = _run("from nxkernel_core import array_api as xp\n"
             "for name in ('cuda-emu:0', 'cuda'):\n"
             "    try:\n        xp.zeros(1, device=name)\n"
             "    except ValueError as e:\n        print(e)\n")
    assert r.returncode == 0, r.stderr
    emu, cuda = r.stdout.splitlines()
    assert "cuda-emu:0: emulation is off (set NXKERNEL_CUDA_EMULATE=1) (library nx.cuda)" in emu
    assert "cuda:0: " in cuda and "(library nx.cuda)" in cuda


def test_naming_cuda_emu_in_the_first_statement_runs_discovery() -> None:
    r = _run("from nxkernel_core import nx; import numpy as np\n"
             "x = nx.asarray(np.arange(3, dtype=np.float32), device='cuda-emu:0')\n"
             "print(x.device.name, x.device == 'cuda-emu:0', x.to_numpy().tolist())\n",
             NXKERNEL_CUDA_EMULATE="1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["cuda-emu:0", "True", "[0.0,", "1.0,", "2.0]"]


def test_the_environment_variable_sets_the_default_device() -> None:
    r = _run("from nxkernel_core import array_api as xp\n"
             "print(xp.zeros(2).device.name, xp.asarray([1.5]).device.name)\n",
             NXKERNEL_CUDA_EMULATE="1", NXKERNEL_DEFAULT_DEVICE="cuda-emu:0")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["cuda-emu:0", "cuda-emu:0"]


def test_info_lists_devices_and_dtypes() -> None:
    info = xp.__array_namespace_info__()
    assert rig.host in info.devices()
    assert info.default_dtypes()["real floating"] is xp.float64
    assert set(info.dtypes(kind="integral")) == {"int8", "int16", "int32", "int64",
                                                 "uint8", "uint16", "uint32", "uint64"}
    assert info.capabilities()["boolean indexing"] is True

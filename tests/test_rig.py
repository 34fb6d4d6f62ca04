"""Devices, buffers, claims: Lost, OutOfMemory, consumption and exclusivity."""

from __future__ import annotations

import numpy as np
import pytest

from nxkernel_core import dtype as D
from nxkernel_core import rig
from nxkernel_core.array import Array


def test_host_is_registered_and_shares_host_memory() -> None:
    assert rig.device("host") is rig.host
    assert rig.host.shares_host_memory
    assert rig.host in rig.devices()


def test_unknown_device_names_a_close_match() -> None:
    with pytest.raises(ValueError, match=r"rig.device: no device named 'hots'.*'host'"):
        rig.device("hots")


def test_memory_device_is_its_own_device() -> None:
    d = rig.memory_device("mem-own")
    try:
        assert d is not rig.host and d.shares_host_memory
        assert rig.device("mem-own") is d
        with pytest.raises(ValueError, match="already open"):
            rig.memory_device("mem-own")
    finally:
        d.close()
    assert d not in rig.devices()


def test_out_of_memory_at_once_past_the_budget() -> None:
    d = rig.memory_device("mem-budget", budget=100)
    try:
        a = rig.Buffer.create(d, 60)
        with pytest.raises(rig.OutOfMemory) as err:
            rig.Buffer.create(d, 41)
        assert err.value.device is d and err.value.nbytes == 41
        assert isinstance(err.value, MemoryError)
        b = rig.Buffer.create(d, 40)  # exactly the budget
        assert d.in_use == 100
        del a, b
    finally:
        d.close()


def test_lost_device_raises_on_every_later_use() -> None:
    d = rig.memory_device("mem-lost")
    buf = rig.Buffer.create(d, 16)
    arr = Array.from_numpy(np.arange(4, dtype=np.int32), d)
    d.lose("illegal address")
    d.lose("a second fault does not replace the first")
    assert d.lost == "illegal address"
    for use in (
        lambda: rig.Buffer.create(d, 8),
        buf.host_view,
        arr.to_numpy,
        lambda: buf.view(0, 4),
        lambda: rig.consume(buf, "x"),
    ):
        with pytest.raises(rig.Lost, match="mem-lost lost: illegal address"):
            use()
    # Reopening the name makes a new, unequal device.
    d2 = rig.memory_device("mem-lost")
    try:
        assert d2 is not d and d2.lost is None
    finally:
        d2.close()


def test_consume_kills_every_earlier_buffer() -> None:
    buf = rig.Buffer.create(rig.host, 32)
    view = buf.view(8, 8)
    fresh = rig.consume(buf, "donated (nx.donate)")
    assert buf.dead == "donated (nx.donate)" and view.dead == "donated (nx.donate)"
    assert fresh.dead is None
    with pytest.raises(ValueError, match="consumed, donated"):
        buf.host_view()
    with pytest.raises(ValueError, match="consumed"):
        Array(D.uint8, Array.empty(D.uint8, [4]).layout, view)
    later = fresh.view(0, 4)
    again = rig.consume(later, "second")
    assert fresh.dead == "second" and later.dead == "second" and again.dead is None
    assert buf.dead == "donated (nx.donate)"


def test_overlaps_and_spans() -> None:
    buf = rig.Buffer.create(rig.host, 32)
    assert buf.spans() and not buf.view(0, 31).spans()
    assert buf.view(0, 8).overlaps(buf.view(7, 8))
    assert not buf.view(0, 8).overlaps(buf.view(8, 8))
    assert not buf.view(4, 0).overlaps(buf.view(0, 32))
    assert not buf.overlaps(rig.Buffer.create(rig.host, 32))


def test_donation_is_exclusive_and_released() -> None:
    buf = rig.Buffer.create(rig.host, 16)
    other = rig.Buffer.create(rig.host, 16)
    with rig.with_claims(donate=[buf, other.view(0, 8)]) as claims:
        assert claims.exclusive(buf)
        assert not claims.exclusive(other)  # a partial view is never exclusive
        with pytest.raises(ValueError, match="held exclusive"), rig.with_claims(read=[buf]):
            pass
    assert not buf.memory.exclusive and buf.memory.readers == 0
    with rig.with_claims(read=[buf]), rig.with_claims(donate=[buf]) as claims:
        assert not claims.exclusive(buf)  # another claim holds it


class _Absent:
    """A library that knows why a device of its kind is absent."""

    def __init__(self, name: str, why: str) -> None:
        self.name, self.why = name, why

    def absent(self, device: str) -> str | None:
        return self.why if device.startswith("cuda:") else None


class _Registry:
    def __init__(self, *libraries: _Absent) -> None:
        self._libraries = libraries

    def libraries(self) -> tuple[_Absent, ...]:
        return self._libraries


def test_an_absent_device_is_refused_with_each_plugins_reason_in_one_line(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from nxkernel_core import nx, plugins

    monkeypatch.setattr(plugins, "_registry", _Registry(
        _Absent("nx.cuda", "no CUDA driver is installed"), _Absent("other", "no card"),
        _Absent("quiet", "")))
    for name in ("cuda", "cuda:0"):
        with pytest.raises(ValueError) as refusal:
            nx.asarray([1.0], device=name)
        message = str(refusal.value)
        assert "\n" not in message
        assert message.startswith("rig.device: cuda:0: no CUDA driver is installed (library "
                                  "nx.cuda); cuda:0: no card (library other) (open: host")
    assert nx.asarray([1.0], device="cpu").device is rig.host


def test_devices_are_named_from_the_first_statement() -> None:
    """In fresh processes: rig.device and nx.asarray name a plugin's device in
    their first statement (discovery runs), and an absent one is refused in
    one line with the CUDA plugin's reason."""
    import os
    import subprocess
    import sys

    code = ("from nxkernel_core import rig\n"
            "print(rig.device('cuda-emu:0').name)\n"
            "from nxkernel_core import nx\n"
            "for name in ('cuda', 'cuda:0'):\n"
            "    try:\n        nx.asarray([1.0], device=name)\n"
            "    except ValueError as e:\n        print(e)\n")
    env = {k: v for k, v in os.environ.items() if k != "NXKERNEL_DEFAULT_DEVICE"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**env, "NXKERNEL_CUDA_EMULATE": "1"}, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()  # each refusal in one line
    assert len(lines) == 3 and lines[0] == "cuda-emu:0" and lines[1] == lines[2]
    assert lines[1].startswith("rig.device: cuda:0: ") and "(library nx.cuda)" in lines[1]


def test_fresh_buffers_come_from_a_devices_own_allocator() -> None:
    """``Rig.fresh`` (a warm call's destinations, ``Buffer.create``) inlines the
    host allocator only for a device that keeps it: one overriding
    ``allocate`` gets every fresh buffer from its own."""

    class Counting(rig.Rig):
        made = 0

        def allocate(self, nbytes: int, access: rig.Access = rig.Access.READ_WRITE) -> rig.Memory:
            Counting.made += 1
            return super().allocate(nbytes, access)

    dev = Counting("counting-rig")
    rig.register(dev)
    try:
        x = Array.from_numpy(np.arange(4, dtype=np.float32), dev)
        y = Array.empty(D.float32, [4], dev)
        b = dev.fresh(8)
        assert Counting.made == 3 and dev.in_use == 40
        assert x.device is dev and y.device is dev and b.memory.device is dev
    finally:
        dev.close()

"""Devices, buffers, claims: Lost, OutOfMemory, consumption and exclusivity."""

from __future__ import annotations

import ctypes
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import cast

import numpy as np
import pytest

from nxkernel_core import dtype as D
from nxkernel_core import rig
from nxkernel_core.array import Array
from nxkernel_core.layout import Layout
from nxkernel_host import views


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


@pytest.mark.parametrize("budget", [None, 1 << 20], ids=["plain", "budgeted"])
def test_a_finalizer_on_a_thread_holding_the_devices_lock_waits_for_nothing(
        budget: int | None) -> None:
    """The garbage collector may run a memory's finalizer at any allocation,
    also inside a block that holds its device's lock (``in_use``'s loop): the
    finalizer takes the lock again at once (a plain lock waited on itself
    forever), on the inlined release of a plain device and on ``_release``,
    and the count is right after."""
    d = rig.memory_device("mem-finalizer", budget=budget)
    try:
        held = [rig.Buffer.create(d, 64)]
        before = d.in_use
        finished = threading.Event()

        def drop_inside_the_lock() -> None:
            with d._lock:
                held.clear()  # the memory's finalizer runs here, as the collector's would
            finished.set()

        thread = threading.Thread(target=drop_inside_the_lock, daemon=True)
        thread.start()
        thread.join(10)
        assert finished.is_set(), "a memory's finalizer waited on its device's lock"
        assert d.in_use == before - 64
    finally:
        d.close()


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
    """``Rig.fresh`` (``Buffer.create``) and ``Rig.pooled`` (a warm call's
    destinations) inline the host allocator, and pool, only for a device that
    keeps it: one overriding ``allocate`` gets every fresh buffer from its own."""

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
        c = dev.pooled(8)
        assert Counting.made == 4 and dev.in_use == 48 and not dev._rings
        assert x.device is dev and y.device is dev and b.memory.device is dev is c.memory.device
    finally:
        dev.close()


# --------------------------------------------------------------------------
# The pool of calls' destinations
# --------------------------------------------------------------------------


@pytest.fixture
def pooling() -> Iterator[rig.Rig]:
    dev = rig.memory_device("mem-pooled")
    yield dev
    dev.close()


def _address(buf: rig.Buffer) -> int:
    hb = buf.memory.host_bytes
    assert hb is not None
    return int(hb.ctypes.data)


def test_a_buffer_nothing_reaches_is_handed_out_again_zeroed_aligned_and_live(
        pooling: rig.Rig) -> None:
    a = pooling.pooled(24)
    a.host_view()[:] = 0xAB
    where = _address(a)
    assert pooling.in_use == 24
    del a
    assert pooling.in_use == 0  # a pooled buffer nothing else reaches is released
    b = pooling.pooled(24)
    assert _address(b) == where, "the buffer came back from the pool"
    assert b.host_view().tobytes() == bytes(24)
    assert where % rig.ALIGNMENT == 0 and b.spans() and b.length == 24
    assert pooling.in_use == 24
    # A consumed memory comes back as new: its pooled buffer lives again.
    rig.consume(b, "moved")
    assert b.dead == "moved"
    del b
    c = pooling.pooled(24)
    assert _address(c) == where and c.dead is None and c.memory.epoch == 0
    c.check_live()


def test_a_buffer_is_never_handed_out_while_anything_reaches_it(pooling: rig.Rig) -> None:
    """An array, the buffer, its memory, a view of the buffer, a consumed
    buffer's successor, a claim, a NumPy view of its bytes (or of a view), an
    exported buffer or ctypes' hold keeps a pooled buffer out of every later
    fresh one, and its bytes as they were."""
    holds: list[Callable[[rig.Buffer], object]] = [
        lambda b: Array(D.uint8, Layout.c_contiguous((16,)), b), lambda b: b,
        lambda b: b.memory, lambda b: b.view(4, 4), lambda b: rig.consume(b, "moved"),
        lambda b: rig.claim(read=[b]), lambda b: b.host_view()[2:5],
        lambda b: b.host_view().view(np.float32)[1:],
        lambda b: memoryview(b.host_view()),  # type: ignore[arg-type]
        lambda b: np.frombuffer(b.host_view(), np.uint8), lambda b: b.host_view().reshape(2, 8).T,
        lambda b: ctypes.c_char.from_buffer(b.host_view()),  # type: ignore[arg-type]
        lambda b: b.memory.host_bytes, lambda b: cast(np.ndarray, b.host_view().base)[:0]]
    for hold in holds:
        a = pooling.pooled(16)
        a.host_view()[:] = 7
        held, where = hold(a), _address(a)
        del a
        fresh = [pooling.pooled(16) for _ in range(12)]
        assert all(_address(f) != where for f in fresh), hold
        for f in fresh:
            f.host_view()[:] = 1
        if isinstance(held, np.ndarray) and held.size:
            assert (held.view(np.uint8) == 7).all()
        if isinstance(held, rig.Claims):
            held.release()
        del held, fresh


def test_a_watched_memory_leaves_the_pool_and_dies(pooling: rig.Rig) -> None:
    a = pooling.pooled(16)
    died: list[bool] = []
    watch = weakref.ref(a.memory, lambda _: died.append(True))
    del a
    b = pooling.pooled(16)
    assert died == [True] and watch() is None and b.memory.epoch == 0
    assert list(pooling._rings[16]) == [b] and pooling._ring_bytes == 16  # a's bytes left


def test_two_threads_never_get_one_buffer(pooling: rig.Rig) -> None:
    """Threads taking and dropping small buffers of one size at once: every
    buffer alive at one time is its own, and writes to one never reach
    another."""
    errors: list[str] = []

    def work(k: int) -> None:
        mine: list[rig.Buffer] = []
        for r in range(400):
            b = pooling.pooled(32)
            view = b.host_view()
            if view.any():
                errors.append("a fresh buffer was not zeroed")
            view[:] = k
            del view
            mine.append(b)
            if len(mine) > 3:
                old = mine.pop(0)
                if (old.host_view() != k).any():
                    errors.append(f"thread {k}: a buffer it held was written by another")
            if r % 50 == 0 and len({id(x.memory) for x in mine}) != len(mine):
                errors.append("two live buffers share a memory")

    threads = [threading.Thread(target=work, args=(k,)) for k in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert pooling.in_use == 0


def test_closing_or_losing_a_device_empties_its_pool() -> None:
    for end in ("close", "lose"):
        dev = rig.memory_device(f"mem-pool-{end}")
        try:
            kept = dev.pooled(8)
            bufs = [dev.pooled(n) for n in (8, 100)]
            del bufs
            assert sum(len(ring) for ring in dev._rings.values()) == 3
            dev.close() if end == "close" else dev.lose("a test pulled it")
            assert sum(len(ring) for ring in dev._rings.values()) == 0
            if end == "close":
                assert dev.in_use == 8
                del kept
                assert dev.in_use == 0
        finally:
            dev.close()


def test_the_rings_hold_at_most_their_budget(pooling: rig.Rig,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A buffer made while the rings hold ``POOL_BYTES`` is not pooled: at most
    that much idle memory stays with the device; a buffer leaving the pool
    gives its bytes back to the budget."""
    monkeypatch.setattr(rig, "POOL_BYTES", 3000)
    kept = [pooling.pooled(1000) for _ in range(4)]
    assert len(pooling._rings[1000]) == 3 and pooling._ring_bytes == 3000
    outside = kept.pop()
    del kept
    assert pooling.in_use == 1000  # the three pooled ones idle, the fourth held
    again = [pooling.pooled(1000) for _ in range(3)]
    assert len(pooling._rings[1000]) == 3 and pooling._ring_bytes == 3000
    over = pooling.pooled(2000)  # past the budget: not pooled
    assert not pooling._rings[2000]
    del again, outside, over
    pooling.close()
    assert pooling._ring_bytes == 0 and pooling.in_use == 0


def test_a_large_destination_comes_back_zeroed(pooling: rig.Rig) -> None:
    a = pooling.pooled(rig.POOLED_BYTES)
    a.host_view()[::4096] = 0xCD
    where = _address(a)
    del a
    b = pooling.pooled(rig.POOLED_BYTES)
    assert _address(b) == where and not b.host_view().any()


def test_only_destinations_of_a_plain_device_up_to_the_size_are_pooled(pooling: rig.Rig) -> None:
    big = pooling.pooled(rig.POOLED_BYTES + 1)
    empty = pooling.pooled(0)
    made = [pooling.fresh(16), rig.Buffer.create(pooling, 16), Array.empty(D.float32, (4,), pooling)]
    read_only = rig.Buffer.create(pooling, 16, rig.Access.READ)
    budgeted = rig.memory_device("mem-pool-budget", budget=1000)
    try:
        capped = budgeted.pooled(16)
        del big, empty, made, read_only, capped
        assert list(pooling._rings) == [] and list(budgeted._rings) == []
        assert pooling.in_use == 0 and budgeted.in_use == 0
    finally:
        budgeted.close()


def test_a_memorys_address_is_its_first_bytes_kept_once_found() -> None:
    buf = rig.Buffer.create(rig.host, 24)
    read_only = rig.Buffer.create(rig.host, 24, rig.Access.READ)
    for b in (buf, read_only):
        mem = b.memory
        assert mem.address is None
        hb = mem.host_bytes
        assert hb is not None
        assert views.address(mem) == int(hb.ctypes.data) == mem.address
    off_host = rig.Memory(rig.host, 0, rig.Access.READ_WRITE, None)  # 0: its release counts none
    with pytest.raises(ValueError, match="not host memory"):
        views.address(off_host)

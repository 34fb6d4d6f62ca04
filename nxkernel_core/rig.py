"""Devices, their memory, buffers over it, and claims.

A ``Rig`` is a device. ``host`` is the host; ``memory_device(name)`` opens a
device whose memory is the host's, on its own (for multi-device tests);
libraries add their own devices with ``register``. A ``Memory`` is one
allocation on a device; a ``Buffer`` is a byte range of one memory.

Device errors: ``OutOfMemory(device, nbytes)`` where an allocation fails, at
once where it exceeds the device's budget; ``Lost(device, why)`` once a device
is lost, for every later use of it or of its memory.

Claims (upstream-facts §4): every buffer over one memory shares that
memory's claim count. ``consume(buffer, why, claims)`` makes every buffer
made over the memory earlier *dead* and returns a fresh live one, unless a
claim other than the caller's ``claims`` holds the memory (then it raises
``ValueError``, ``HELD_EXCLUSIVE``, and consumes nothing); reaching a dead
buffer's bytes raises ``ValueError`` with the reason, and a kernel answers
``DEAD_BUFFER`` instead. A buffer held ``exclusive`` (a donation) refuses every
other claim. Claims change under ``CLAIMS_LOCK``, but for the caller's warm
read claims (``caller._run``), which under a GIL take no lock: such a claim
counts itself a reader first and tests the memory after; a consume or a
donation, under the lock, marks the memory ``pending`` first and tests the
counts after. A GIL runs one thread at a time, each in its program's order,
so of two such claims at least one sees the other: the reader that sees
``pending`` (or the memory exclusive, or a later epoch) counts itself out
and takes the locked path; the consume that sees the reader refuses, and
the donation holds nothing. Each count changes by one read-modify-write on
one line, inside which CPython switches no thread (it switches at calls,
backward jumps and tracers' line events), so no change is lost without the
lock. A free-threaded build claims under the lock.

Calls' destinations (``pooled``, up to ``POOLED_BYTES``) on a plain host
device are pooled: each size keeps a ring of the last buffers it made, and
hands one out again once nothing else reaches it (no array, buffer, claim,
NumPy view or export holds it, its memory or its bytes: their reference
counts say so; no weak reference watches the memory), its memory made as
new. A ring is taken from and given to by one C call on a deque, which no
other thread interleaves, so two threads never get one buffer. The rings
hold at most ``POOL_BYTES`` in all (a buffer made past it is not pooled),
so at most that much idle memory stays with the device. A large
destination reused is zeroed in cache, where a fresh one faults in its pages
one by one as the kernel first writes them. A free-threaded build (whose
reference counts are not exact while other threads run) pools nothing.
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import difflib
import enum
import itertools
import os
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from sys import getrefcount
from typing import Any, Final, final
from weakref import getweakrefcount

import numpy as np
import numpy.typing as npt

__all__ = ["CLAIMS_LOCK", "HAS_GIL", "Access", "Buffer", "Claims", "Lost", "Memory", "OutOfMemory",
           "Rig", "claim", "consume", "default_device", "device", "devices", "host", "memory_device",
           "register", "using", "with_claims"]

#: Every allocation's first byte is aligned to this many bytes.
ALIGNMENT: Final = 64
#: The most bytes an allocation may ask for (an address space of 63 bits, less the alignment).
_MAX_BYTES: Final = (1 << 63) - 1 - ALIGNMENT
#: Fresh buffers of 1 to this many bytes are pooled (see the module's doc).
POOLED_BYTES: Final = 16 << 20
#: The most bytes a device's rings hold, their buffers in use or idle.
POOL_BYTES: Final = 64 << 20
#: The most buffers a ring keeps, and the most sizes a device pools.
_POOL_DEPTH: Final = 8
_POOL_SIZES: Final = 64
#: ``Rig.pooled`` tests at most this many buffers of a ring.
_TRIES: Final = (0, 1)
#: Whether this interpreter has a GIL (``sys._is_gil_enabled`` is 3.13's).
HAS_GIL: Final[bool] = getattr(sys, "_is_gil_enabled", lambda: True)()


class OutOfMemory(MemoryError):
    """``device`` could not allocate ``nbytes``."""

    def __init__(self, device: Rig, nbytes: int) -> None:
        super().__init__(f"{device.name}: out of memory allocating {nbytes} bytes")
        self.device = device
        self.nbytes = nbytes


class Lost(RuntimeError):
    """``device`` is lost, for good: every later use of it or its memory raises."""

    def __init__(self, device: Rig, why: str) -> None:
        super().__init__(f"{device.name} lost: {why}")
        self.device = device
        self.why = why


class Access(enum.Enum):
    READ = "read"
    READ_WRITE = "read-write"


_serial = itertools.count()
_zeros: Final = np.zeros
_uint8: Final = np.dtype(np.uint8)
_addressof: Final = ctypes.addressof
_from_buffer: Final[Callable[[Any], ctypes.c_char]] = ctypes.c_char.from_buffer


def _aligned(nbytes: int) -> npt.NDArray[np.uint8]:
    """``nbytes`` fresh zero bytes of host memory, the first aligned to ``ALIGNMENT``."""
    raw = _zeros(nbytes + ALIGNMENT, _uint8)
    # The address through ctypes' from_buffer: ``raw.ctypes.data`` costs
    # microseconds a call.
    start = (-_addressof(_from_buffer(raw))) % ALIGNMENT
    return raw[start : start + nbytes]


class Rig:
    """A device: a name, a model, its memory, and whether the host addresses it.

    Devices compare by identity: reopening a lost device's name makes a new,
    unequal device. A library subclasses ``Rig`` for memory the host does not
    address and overrides ``_allocate``/``_release``.
    """

    def __init__(self, name: str, *, model: str = "", shares_host_memory: bool = True,
                 budget: int | None = None) -> None:
        self.name: Final = name
        self.model: Final = model or name
        self.shares_host_memory: Final = shares_host_memory
        self.budget: Final = budget
        self.serial: Final = next(_serial)
        self._lost: str | None = None
        self._closed = False
        self._in_use = 0
        #: Re-entrant: ``Memory.__del__`` takes it, and the garbage collector
        #: may run that on a thread already holding it (in ``in_use``'s loop).
        self._lock = threading.RLock()
        #: The rings of pooled buffers, by size (see the module's doc); a
        #: size's ring, once made, stays.
        self._rings: Final[dict[int, deque[Buffer]]] = {}
        self._ring_bytes = 0  # the bytes of the buffers in the rings, under _lock
        #: Whether ``fresh`` and a memory's release may inline ``allocate``'s
        #: and ``_release``'s steps: no budget, and this class's allocator.
        cls = type(self)
        self._plain: Final = (budget is None and cls.allocate is Rig.allocate
                              and cls._allocate is Rig._allocate and cls._release is Rig._release)

    def __repr__(self) -> str:
        return f"Rig({self.name!r})"

    def __eq__(self, other: object) -> bool:
        """Identity, and a device name that resolves to this device (``"cpu"``
        for the host, ``"cuda"`` for ``cuda:0``), as the Array API's users compare."""
        if isinstance(other, str):
            return _alias(other) == self.name
        return self is other

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = object.__hash__

    # ---- loss -------------------------------------------------------------------

    @property
    def lost(self) -> str | None:
        """Why the device was lost, or ``None``; never raises."""
        return self._lost

    def lose(self, why: str) -> None:
        """Mark the device lost, once and for good (a driver fault, a failed hand-over)."""
        if self._lost is None:
            self._lost = why
        self._drain()

    def check(self) -> None:
        """Raise ``Lost`` if the device is lost, ``ValueError`` if closed."""
        if self._lost is not None:
            raise Lost(self, self._lost)
        if self._closed:
            raise ValueError(f"{self.name}: the device is closed")

    @property
    def closed(self) -> bool:
        """Whether the device was closed."""
        return self._closed

    def close(self) -> None:
        """Close the device: it leaves the registry and refuses new allocations."""
        self._closed = True
        _unregister(self)
        self._drain()

    # ---- memory -----------------------------------------------------------------

    @property
    def in_use(self) -> int:
        """Bytes allocated on this device and not yet released (a pooled
        buffer nothing else reaches is released)."""
        with self._lock:
            idle = 0
            for n, ring in list(self._rings.items()):
                for buf in list(ring):
                    # Held by the ring, the list and the name.
                    if _idle(buf, 3):
                        idle += n
            return self._in_use - idle

    def allocate(self, nbytes: int, access: Access = Access.READ_WRITE) -> Memory:
        """A fresh zeroed memory of ``nbytes``; ``OutOfMemory`` past the budget or
        where the allocation fails."""
        if nbytes < 0:
            raise ValueError(f"{self.name}: allocate: nbytes = {nbytes} is negative")
        if self._lost is not None or self._closed:
            self.check()  # raises
        if nbytes > _MAX_BYTES:  # past any address space: no allocator is even asked
            raise OutOfMemory(self, nbytes)
        with self._lock:
            if self.budget is not None and self._in_use + nbytes > self.budget:
                raise OutOfMemory(self, nbytes)
            self._in_use += nbytes
        try:
            host_bytes = self._allocate(nbytes)
        except MemoryError:
            with self._lock:
                self._in_use -= nbytes
            raise OutOfMemory(self, nbytes) from None
        return Memory(self, nbytes, access, host_bytes)

    def fresh(self, nbytes: int) -> Buffer:
        """A buffer spanning a fresh zeroed read-write memory of ``nbytes``
        (``allocate``'s, and its errors), made without ``Buffer``'s frozen
        constructor. On an open device of host memory, without a budget,
        ``allocate``'s steps are inlined."""
        if self._plain and self._lost is None and not self._closed and 0 <= nbytes <= _MAX_BYTES:
            return self._made(nbytes)
        mem = self.allocate(nbytes)
        b = _new_buffer(Buffer)
        _set_memory(b, mem)
        _set_offset(b, 0)
        _set_length(b, nbytes)
        _set_epoch(b, 0)
        return b

    def pooled(self, nbytes: int) -> Buffer:
        """``fresh``'s buffer, for a call's destinations (every warm call
        allocates them): one of the pool's buffers of ``nbytes`` that nothing
        else reaches, its memory made as new, where the device pools them
        (see the module's doc); else ``fresh``'s, kept in the pool while
        the rings hold under ``POOL_BYTES``."""
        if not (self._plain and self._lost is None and not self._closed
                and 0 < nbytes <= POOLED_BYTES and HAS_GIL):
            return self.fresh(nbytes)
        ring = self._rings.get(nbytes)
        if ring is None:
            if len(self._rings) >= _POOL_SIZES:
                return self._made(nbytes)
            ring = self._rings.setdefault(nbytes, deque())
        for _ in _TRIES:
            try:
                buf = ring.popleft()
            except IndexError:  # the ring is empty, or out with other threads
                break
            mem = buf.memory
            hb = mem.host_bytes
            # ``_idle(buf, 1)``, inlined: held by the name ``buf`` alone.
            if (getrefcount(buf) == 2 and getrefcount(mem) == 3 and getrefcount(hb) == 3
                    and getrefcount(hb.base) == 2):  # type: ignore[union-attr]
                if not getweakrefcount(mem):
                    if mem.epoch:
                        mem.consumed = ()
                        mem.epoch = 0
                    hb.fill(0)  # type: ignore[union-attr]
                    ring.append(buf)
                    return buf
                # Watched: it leaves the pool, so that its watchers see it die.
                with self._lock:
                    self._ring_bytes -= nbytes
            else:
                ring.append(buf)  # busy: to the back of the ring
        buf = self._made(nbytes)
        with self._lock:
            if len(ring) >= _POOL_DEPTH:
                with contextlib.suppress(IndexError):  # out with other threads
                    ring.popleft()  # the oldest leaves the pool
                    self._ring_bytes -= nbytes
            if self._ring_bytes + nbytes <= POOL_BYTES:
                ring.append(buf)
                self._ring_bytes += nbytes
        return buf

    def _made(self, nbytes: int) -> Buffer:
        """A buffer over a new zeroed read-write memory of ``nbytes`` on an
        open plain device (``allocate``'s steps, inlined)."""
        try:
            hb = _aligned(nbytes)
        except MemoryError:
            raise OutOfMemory(self, nbytes) from None
        with self._lock:
            self._in_use += nbytes
        b = _new_buffer(Buffer)
        _set_memory(b, Memory(self, nbytes, Access.READ_WRITE, hb))
        _set_offset(b, 0)
        _set_length(b, nbytes)
        _set_epoch(b, 0)
        return b

    def _drain(self) -> None:
        """Empty the pool (the device is closed or lost): each buffer goes
        when nothing else holds it."""
        with self._lock:
            for ring in list(self._rings.values()):
                ring.clear()
            self._ring_bytes = 0

    def _allocate(self, nbytes: int) -> npt.NDArray[np.uint8] | None:
        """The bytes of a new memory, or ``None`` where the host does not address
        them (a subclass keeps its own handle)."""
        return _aligned(nbytes)

    def _release(self, memory: Memory) -> None:
        with self._lock:
            self._in_use -= memory.nbytes

    def read_bytes(self, memory: Memory, offset: int, length: int) -> npt.NDArray[np.uint8]:
        """A host copy of ``length`` bytes of ``memory`` from ``offset``."""
        assert memory.host_bytes is not None
        return memory.host_bytes[offset : offset + length].copy()

    def write_bytes(self, memory: Memory, offset: int, data: npt.NDArray[np.uint8]) -> None:
        """Copy host bytes ``data`` into ``memory`` at ``offset``."""
        assert memory.host_bytes is not None
        memory.host_bytes[offset : offset + data.size] = data


# --------------------------------------------------------------------------
# The registry
# --------------------------------------------------------------------------

_registry: dict[str, Rig] = {}
_registry_lock = threading.Lock()

host: Final = Rig("host", model="host", shares_host_memory=True)


def register(dev: Rig) -> None:
    """Add a device to the registry; a live device of the same name is an error."""
    with _registry_lock:
        old = _registry.get(dev.name)
        if old is not None and old is not dev and old.lost is None and not old._closed:
            raise ValueError(f"rig.register: a device named {dev.name!r} is already open")
        _registry[dev.name] = dev


def _unregister(dev: Rig) -> None:
    with _registry_lock:
        if _registry.get(dev.name) is dev:
            del _registry[dev.name]


def devices() -> tuple[Rig, ...]:
    """Every open device, the host first."""
    with _registry_lock:
        return tuple(_registry.values())


#: Names as PyTorch and JAX spell them: ``cpu`` is the host, ``cuda`` the first CUDA device.
_ALIASES: Final = {"cpu": "host", "cuda": "cuda:0"}


def _alias(name: str) -> str:
    return _ALIASES.get(name, name)


def device(name: str | Rig) -> Rig:
    """The open device called ``name`` (a ``Rig`` is returned as it is);
    ``"cpu"`` names the host and ``"cuda"`` ``cuda:0``. A name not yet open
    runs plugin discovery once; a device still absent is refused with each
    library's reason (``ValueError``)."""
    if isinstance(name, Rig):
        return name
    key = _alias(name)
    dev = _registry.get(key)
    if dev is not None:
        return dev
    from . import plugins  # discovery imports the libraries, which import this module

    reasons = plugins.absent_reasons(key)
    with _registry_lock:
        dev = _registry.get(key)
        names = list(_registry)
    if dev is None:
        close = difflib.get_close_matches(key, names, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        why = "; ".join(reasons) if reasons else f"no device named {key!r}"
        raise ValueError(f"rig.device: {why} (open: {', '.join(names)}){hint}")
    return dev


_default: contextvars.ContextVar[Rig | None] = contextvars.ContextVar("nxkernel_default_device",
                                                                      default=None)


def default_device() -> Rig:
    """The device creation functions use where none is named: the innermost
    ``using(...)``'s, else ``NXKERNEL_DEFAULT_DEVICE``'s (read at each call),
    else the host."""
    dev = _default.get()
    if dev is not None:
        return dev
    name = os.environ.get("NXKERNEL_DEFAULT_DEVICE")
    return device(name) if name else host


@contextlib.contextmanager
def using(dev: str | Rig) -> Iterator[Rig]:
    """Make ``dev`` the default device inside the ``with`` block (this thread
    and task only), as ``jax.default_device`` and ``torch.device`` do."""
    token = _default.set(device(dev))
    try:
        yield _default.get() or host
    finally:
        _default.reset(token)


def memory_device(name: str, budget: int | None = None) -> Rig:
    """Open a device whose memory is the host's and whose work this process runs;
    its own device for multi-device tests. Reopening a lost name makes a new device."""
    dev = Rig(name, model="memory", shares_host_memory=True, budget=budget)
    register(dev)
    return dev


register(host)


# --------------------------------------------------------------------------
# Memory, buffers and claims
# --------------------------------------------------------------------------


class Memory:
    """One allocation on a device, with the claim count every buffer over it shares.

    ``host_bytes`` are its bytes where the host addresses them. ``epoch`` counts
    consumptions: a buffer made at an earlier epoch is dead, for the reason
    ``consumed[epoch]``.
    """

    # Slots, and the lock made on first use: every call allocates its
    # destinations, so a memory's making is on the caller's warm path. A
    # weak reference is kept (a DLPack consumer's capsule watches its memory).
    __slots__ = ("__weakref__", "_store_lock", "access", "address", "consumed", "device", "epoch",
                 "exclusive", "handle", "host_bytes", "nbytes", "pending", "readers", "writers")

    def __init__(self, dev: Rig, nbytes: int, access: Access,
                 host_bytes: npt.NDArray[np.uint8] | None, handle: object = None) -> None:
        self.device: Final = dev
        self.nbytes: Final = nbytes
        self.access: Final = access
        self.host_bytes: Final = host_bytes
        self.handle: Final = handle
        self.epoch = 0
        self.consumed: tuple[str, ...] = ()
        self.readers = 0
        self.writers = 0
        self.exclusive = False
        #: Set while a consume or a donation tests the counts (see the module's doc).
        self.pending = False
        self._store_lock: threading.RLock | None = None
        #: The first host byte's address, kept once found (``views.address``
        #: of the host library): a memory's bytes never move.
        self.address: int | None = None

    @property
    def store_lock(self) -> threading.RLock:
        """Held by every call that writes sub-byte codes here (the door takes
        it): such a store rewrites whole bytes, which calls share. One per
        memory, made on first use."""
        lock = self._store_lock
        if lock is None:
            with _claims_lock:
                if self._store_lock is None:
                    self._store_lock = threading.RLock()
                lock = self._store_lock
        return lock

    def __del__(self) -> None:
        try:
            dev = self.device
            if dev._lost is None:
                if dev._plain:  # ``Rig._release``, inlined
                    with dev._lock:
                        dev._in_use -= self.nbytes
                else:
                    dev._release(self)
        except Exception:  # interpreter shutdown: the device may be gone
            pass


@final
@dataclass(frozen=True, slots=True, eq=False)
class Buffer:
    """A byte range ``[offset, offset + length)`` of one memory, made at ``epoch``."""

    memory: Memory
    offset: int
    length: int
    epoch: int

    @staticmethod
    def create(dev: Rig | str, nbytes: int, access: Access = Access.READ_WRITE) -> Buffer:
        """A fresh zeroed buffer of ``nbytes`` on ``dev``, spanning its memory."""
        if access is Access.READ_WRITE:
            return (dev if isinstance(dev, Rig) else device(dev)).fresh(nbytes)
        mem = (dev if isinstance(dev, Rig) else device(dev)).allocate(nbytes, access)
        return Buffer(mem, 0, nbytes, mem.epoch)

    @staticmethod
    def of_bytes(data: npt.NDArray[np.uint8], dev: Rig | str = host) -> Buffer:
        """A buffer over a copy of ``data`` on a device sharing host memory."""
        buf = Buffer.create(dev, int(data.size))
        buf.host_view()[:] = data.reshape(-1)
        return buf

    @staticmethod
    def adopt(data: npt.NDArray[np.uint8], dev: Rig = host, writable: bool = True) -> Buffer:
        """A buffer over host bytes another library owns, without a copy (DLPack
        imports): ``data`` stays referenced as long as the memory lives."""
        n = int(data.size)
        with dev._lock:
            dev._in_use += n  # released by Memory.__del__, as an allocation is
        mem = Memory(dev, n, Access.READ_WRITE if writable else Access.READ, data.reshape(-1))
        return Buffer(mem, 0, n, mem.epoch)

    @property
    def device(self) -> Rig:
        return self.memory.device

    @property
    def dead(self) -> str | None:
        """Why this buffer is dead (consumed), or ``None`` where it lives."""
        mem = self.memory
        return mem.consumed[self.epoch] if self.epoch < mem.epoch else None

    def check_live(self, fn: str = "Buffer") -> None:
        """Raise ``Lost`` for a lost device, ``ValueError`` for a dead buffer."""
        self.device.check()
        why = self.dead
        if why is not None:
            raise ValueError(f"{fn}: the buffer was consumed, {why}")

    def view(self, offset: int, length: int) -> Buffer:
        """The sub-range ``[offset, offset + length)`` of this buffer."""
        if offset < 0 or length < 0 or offset + length > self.length:
            raise ValueError(
                f"Buffer.view: [{offset}, {offset + length}) is outside [0, {self.length})"
            )
        self.check_live("Buffer.view")
        return Buffer(self.memory, self.offset + offset, length, self.epoch)

    def overlaps(self, other: Buffer) -> bool:
        """Whether the two are views of one memory sharing a byte; empty buffers
        overlap nothing."""
        if self.memory is not other.memory or self.length == 0 or other.length == 0:
            return False
        return self.offset < other.offset + other.length and other.offset < self.offset + self.length

    def spans(self) -> bool:
        """Whether this buffer spans its whole memory."""
        return self.offset == 0 and self.length == self.memory.nbytes

    def host_view(self) -> npt.NDArray[np.uint8]:
        """The buffer's bytes as a writable uint8 array; ``ValueError`` off host,
        for a dead buffer, or ``Lost``."""
        self.check_live("Buffer.host_view")
        hb = self.memory.host_bytes
        if hb is None:
            raise ValueError(f"Buffer.host_view: {self.device.name}'s memory is not host memory")
        return hb[self.offset : self.offset + self.length]


def _idle(buf: Buffer, held: int) -> bool:
    """Whether nothing but ``held`` references to pooled ``buf`` reaches it:
    no other reference to the buffer, its memory (the buffer's alone), its
    bytes (the memory's alone) or the allocation under them (the bytes'
    alone); every NumPy view holds the allocation, every buffer export the
    bytes, every claim the memory. The counts include this function's names
    and getrefcount's argument."""
    mem = buf.memory
    hb = mem.host_bytes
    return (getrefcount(buf) == held + 2 and getrefcount(mem) == 3 and hb is not None
            and getrefcount(hb) == 3 and getrefcount(hb.base) == 2 and not getweakrefcount(mem))


#: A Buffer's fields set through their slots: what its frozen constructor
#: does, at half the cost.
_new_buffer: Final = object.__new__
_set_memory: Final[Callable[[Buffer, Memory], None]] = Buffer.__dict__["memory"].__set__
_set_offset: Final[Callable[[Buffer, int], None]] = Buffer.__dict__["offset"].__set__
_set_length: Final[Callable[[Buffer, int], None]] = Buffer.__dict__["length"].__set__
_set_epoch: Final[Callable[[Buffer, int], None]] = Buffer.__dict__["epoch"].__set__


def consume(buf: Buffer, why: str, claims: Claims | None = None) -> Buffer:
    """Consume ``buf``'s memory: every buffer made over it earlier is dead, for
    ``why``; returns a fresh live buffer over the same bytes.

    The caller's ``claims`` (upstream's ``Claim.consume c``) are the only ones
    that may hold the memory: while any other claim holds it (a reader, a
    writer, or an exclusive holder such as a donation running in another
    thread), ``consume`` raises ``ValueError`` naming the contract's refusal,
    ``HELD_EXCLUSIVE``, and consumes nothing."""
    buf.check_live("consume")
    mem = buf.memory
    with _claims_lock:
        mem.pending = True  # first: a reader claiming without the lock sees it
        try:
            ours = claims._counts(mem) if claims is not None else (0, 0, False)
            readers, writers = mem.readers - ours[0], mem.writers - ours[1]
            if mem.exclusive and not ours[2]:
                held = "held exclusive by another claim"
            elif readers or writers:
                held = f"claimed by another call ({readers} read, {writers} write claims)"
            else:
                held = ""
            if held:
                raise ValueError(f"consume: HELD_EXCLUSIVE: the memory is {held}; not consumed ({why})")
            if buf.epoch < mem.epoch:
                buf.check_live("consume")  # consumed meanwhile: raises
            mem.consumed += (why,)
            mem.epoch += 1
            return Buffer(mem, buf.offset, buf.length, mem.epoch)
        finally:
            mem.pending = False


#: Guards every memory's claim counts (readers, writers, exclusive) and
#: epochs; the caller's warm read claims take it only in a free-threaded
#: build (see the module's doc).
CLAIMS_LOCK: Final = threading.Lock()
_claims_lock: Final = CLAIMS_LOCK


class Claims:
    """Claims held for one call: read claims on some buffers, exclusive ones on
    donated buffers. Released on leaving ``with_claims``."""

    def __init__(self) -> None:
        self._read: list[Memory] = []
        self._write: list[Memory] = []
        self._exclusive: list[Memory] = []

    def _counts(self, mem: Memory) -> tuple[int, int, bool]:
        """The read and write claims these hold on ``mem``, and whether they hold it exclusive."""
        return (sum(m is mem for m in self._read), sum(m is mem for m in self._write),
                any(m is mem for m in self._exclusive))

    def exclusive(self, buf: Buffer) -> bool:
        """Whether ``buf`` is held exclusive by these claims (the caller may
        write it in place)."""
        return any(buf.memory is m for m in self._exclusive)

    def release(self) -> None:
        with _claims_lock:
            for m in self._read:
                m.readers -= 1
            for m in self._write:
                m.writers -= 1
            for m in self._exclusive:
                m.exclusive = False
        self._read.clear()
        self._write.clear()
        self._exclusive.clear()


def claim(read: Sequence[Buffer] = (), write: Sequence[Buffer] = (),
          donate: Sequence[Buffer] = ()) -> Claims:
    """Claim ``read`` for reading and ``write`` for writing, then each donated
    buffer exclusive where it spans its memory and no other claim holds it;
    the caller releases the claims (``Claims.release``). Raises ``ValueError``
    (claiming nothing) for a dead buffer or memory held exclusive, ``Lost``
    for a lost device."""
    claims = Claims()
    try:
        for group in (read, write, donate):
            for b in group:
                mem = b.memory
                dev = mem.device
                # ``check_live``'s tests inline; it raises for the one that fails.
                if dev._lost is not None or dev._closed or b.epoch < mem.epoch:
                    b.check_live("with_claims")
        # One lock for every claim count: a call takes and leaves it once.
        with _claims_lock:
            for group in (read, write, donate):
                for b in group:
                    if b.epoch < b.memory.epoch:  # consumed since the test above
                        b.check_live("with_claims")
            for b in read:
                mem = b.memory
                if mem.exclusive:
                    raise ValueError("claim: the memory is held exclusive")
                mem.readers += 1
                claims._read.append(mem)
            for b in write:
                mem = b.memory
                if mem.exclusive:
                    raise ValueError("claim: the memory is held exclusive")
                mem.writers += 1
                claims._write.append(mem)
            for b in donate:
                mem = b.memory
                mem.pending = True  # first: a reader claiming without the lock sees it
                try:
                    if b.spans() and not mem.exclusive and mem.readers == 0 and mem.writers == 0:
                        mem.exclusive = True
                        claims._exclusive.append(mem)
                finally:
                    mem.pending = False
    except BaseException:
        claims.release()
        raise
    return claims


@contextlib.contextmanager
def with_claims(read: Sequence[Buffer] = (), write: Sequence[Buffer] = (),
                donate: Sequence[Buffer] = ()) -> Iterator[Claims]:
    """Claim ``read`` for reading and ``write`` for writing, then each donated
    buffer exclusive where it spans its memory and no other claim holds it;
    release everything on leaving. Raises ``ValueError`` (claiming nothing) for
    a dead buffer or memory held exclusive, ``Lost`` for a lost device."""
    claims = claim(read, write, donate)
    try:
        yield claims
    finally:
        claims.release()

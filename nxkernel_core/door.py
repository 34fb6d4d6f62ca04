"""The door: how a kernel claims its arrays for one call.

``door(written, read)`` claims every array or none. It answers the first
refusal before any work, in this order: ``Lost`` is raised for an array of a
lost device; then ``DEAD_BUFFER``, ``WRONG_DEVICE`` (arrays on more than one
device, or not on the kernel's), ``OFF_HOST`` (where the kernel needs host
memory), ``HELD_EXCLUSIVE``, ``READ_ONLY`` (a written array on read-only
memory), ``REPEATED_ELEMENTS`` (a written array reaching an element twice)
and ``OVERLAPPING`` (a written array sharing a byte with another array, decided
on byte spans, unless the two are identical: same memory, byte offset, dtype
and layout, and the other one is read).

Sub-byte stores across threads: two calls whose written arrays share no
element may still share a byte (``full[0::2]`` and ``full[1::2]`` of an int4
buffer), and storing a code rewrites its whole byte. The door does not refuse
such calls (each alone is sound, and whether they meet is a matter of timing);
it makes them safe: a call that writes a sub-byte array holds its memory's
``store_lock`` from entry to exit, so such calls on one memory run one at a
time. The locks of one call are taken in one global order, and all at entry,
so no two calls wait on each other in a cycle.

A kernel uses it as::

    with door(dsts, operands) as refusal:
        if refusal is not None:
            return refusal
        ...compute...
    return Answer.DONE
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import final

from .answer import Answer
from .array import Array
from .rig import Access, Claims, Lost, Memory, Rig, claim

__all__ = ["door", "refusal", "shares_bytes"]


def shares_bytes(a: Array, b: Array) -> bool:
    """Whether two arrays' byte spans, in one memory, intersect; an empty array
    shares nothing."""
    if a.buffer.memory is not b.buffer.memory or a.numel == 0 or b.numel == 0:
        return False
    alo, ahi = a.byte_span()
    blo, bhi = b.byte_span()
    return alo < bhi and blo < ahi


def refusal(written: Sequence[Array], read: Sequence[Array], device: Rig | None = None,
            need_host: bool = False) -> Answer | None:
    """The door's first refusal for these arrays, or ``None``; raises ``Lost``
    for an array on a lost device. Claims nothing."""
    arrays = (*written, *read)
    if not arrays:
        return None
    # One pass gathers what the first five refusals need; they are answered
    # after it, in the door's order (a Lost anywhere raises before any answer).
    dev = device if device is not None else arrays[0].buffer.memory.device
    dead = wrong = off_host = exclusive = False
    for a in arrays:
        buf = a.buffer
        mem = buf.memory
        d = mem.device
        why = d._lost  # ``Rig.lost`` without the property's call: every kernel call reads it
        if why is not None:
            raise Lost(d, why)
        dead = dead or buf.epoch < mem.epoch
        wrong = wrong or d is not dev
        off_host = off_host or mem.host_bytes is None
        exclusive = exclusive or mem.exclusive
    if dead:
        return Answer.DEAD_BUFFER
    if wrong:
        return Answer.WRONG_DEVICE
    if need_host and off_host:
        return Answer.OFF_HOST
    if exclusive:
        return Answer.HELD_EXCLUSIVE
    for w in written:
        if w.buffer.memory.access is Access.READ:
            return Answer.READ_ONLY
    for w in written:
        if not w.layout.is_distinct():
            return Answer.REPEATED_ELEMENTS
    for i, w in enumerate(written):
        mem = w.buffer.memory
        for j, other in enumerate(written):
            if i != j and other.buffer.memory is mem and shares_bytes(w, other):
                return Answer.OVERLAPPING
        for r in read:
            if r.buffer.memory is mem and shares_bytes(w, r) and not w.identical(r):
                return Answer.OVERLAPPING
    return None


@final
class _Door:
    """The context ``door`` returns: a plain object, not a generator, since
    every kernel call enters one."""

    __slots__ = ("_claims", "_device", "_locks", "_need_host", "_read", "_written")

    def __init__(self, written: Sequence[Array], read: Sequence[Array], device: Rig | None,
                 need_host: bool) -> None:
        self._written = written
        self._read = read
        self._device = device
        self._need_host = need_host
        self._claims: Claims | None = None
        self._locks: list[Memory] = []

    def __enter__(self) -> Answer | None:
        answer = refusal(self._written, self._read, self._device, self._need_host)
        if answer is not None:
            return answer
        try:
            self._claims = claim(read=[a.buffer for a in self._read],
                                 write=[a.buffer for a in self._written])
        except ValueError:
            # Another thread consumed or donated an array since the test above:
            # the door's answer for the state now.
            answer = refusal(self._written, self._read, self._device, self._need_host)
            if answer is None:
                raise
            return answer
        for a in self._written:
            if a.dtype.bits < 8:
                self._lock_sub_byte()
                break
        return None

    def _lock_sub_byte(self) -> None:
        """Take the store locks of the memories of the sub-byte arrays written."""
        sub_byte = {id(a.buffer.memory): a.buffer.memory for a in self._written if a.dtype.bits < 8}
        self._locks = [sub_byte[k] for k in sorted(sub_byte)]  # one global order
        for mem in self._locks:
            mem.store_lock.acquire()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        claims, self._claims = self._claims, None
        locks, self._locks = self._locks, []
        for mem in reversed(locks):
            mem.store_lock.release()
        if claims is not None:
            claims.release()


def door(written: Sequence[Array], read: Sequence[Array], device: Rig | None = None,
         need_host: bool = False) -> _Door:
    """Claim ``written`` for writing and ``read`` for reading for the body of a
    ``with``, and give ``None``; or claim nothing and give the first refusal."""
    return _Door(written, read, device, need_host)

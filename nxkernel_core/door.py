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

A kernel uses it as::

    with door(dsts, operands) as refusal:
        if refusal is not None:
            return refusal
        ...compute...
    return Answer.DONE
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from .answer import Answer
from .array import Array
from .rig import Access, Lost, Rig, with_claims

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
    arrays = [*written, *read]
    for a in arrays:
        why = a.device.lost
        if why is not None:
            raise Lost(a.device, why)
    if any(a.buffer.dead is not None for a in arrays):
        return Answer.DEAD_BUFFER
    if arrays:
        dev = device if device is not None else arrays[0].device
        if any(a.device is not dev for a in arrays):
            return Answer.WRONG_DEVICE
    if need_host and any(a.buffer.memory.host_bytes is None for a in arrays):
        return Answer.OFF_HOST
    if any(a.buffer.memory.exclusive for a in arrays):
        return Answer.HELD_EXCLUSIVE
    if any(w.buffer.memory.access is Access.READ for w in written):
        return Answer.READ_ONLY
    if any(not w.layout.is_distinct() for w in written):
        return Answer.REPEATED_ELEMENTS
    for i, w in enumerate(written):
        for j, other in enumerate(written):
            if i != j and shares_bytes(w, other):
                return Answer.OVERLAPPING
        for r in read:
            if shares_bytes(w, r) and not w.identical(r):
                return Answer.OVERLAPPING
    return None


@contextmanager
def door(written: Sequence[Array], read: Sequence[Array], device: Rig | None = None,
         need_host: bool = False) -> Iterator[Answer | None]:
    """Claim ``written`` for writing and ``read`` for reading for the body, and
    yield ``None``; or claim nothing and yield the first refusal."""
    answer = refusal(written, read, device, need_host)
    if answer is not None:
        yield answer
        return
    with with_claims(read=[a.buffer for a in read], write=[a.buffer for a in written]):
        yield None

"""What a kernel answers, and how the caller raises a refusal.

A kernel answers ``DONE`` (work finished on the host, or queued in order on
its device), ``DECLINED`` (a case the library does not compute; nothing was
written or queued), or a refusal naming what is wrong with an operand. A
refusal and a decline both come before any write.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .array import Array

__all__ = ["Answer", "InvalidArgument", "describe", "refused"]


class Answer(enum.Enum):
    """A kernel's answer, in upstream's constructor order."""

    DONE = "done"
    DECLINED = "declined"
    WRONG_DTYPE = "wrong dtype"
    DEAD_BUFFER = "dead buffer"
    OFF_HOST = "off host"
    HELD_EXCLUSIVE = "held exclusive"
    READ_ONLY = "read only"
    REPEATED_ELEMENTS = "repeated elements"
    OVERLAPPING = "overlapping"
    BAD_LAYOUT = "bad layout"
    SHAPE_MISMATCH = "shape mismatch"
    BAD_ARITY = "bad arity"
    WRONG_DEVICE = "wrong device"

    @property
    def is_refusal(self) -> bool:
        return self not in (Answer.DONE, Answer.DECLINED)


_REASONS: dict[Answer, str] = {
    Answer.WRONG_DTYPE: "an operand's dtype is not one the kernel takes",
    Answer.DEAD_BUFFER: "an operand's buffer is dead (consumed)",
    Answer.OFF_HOST: "the host does not address an operand's memory",
    Answer.HELD_EXCLUSIVE: "an operand's memory is held exclusive by another claim",
    Answer.READ_ONLY: "a written operand's memory is read-only",
    Answer.REPEATED_ELEMENTS: "a written operand reaches an element twice",
    Answer.OVERLAPPING: "a written operand shares bytes with another operand",
    Answer.BAD_LAYOUT: "an operand's layout is not one the kernel takes",
    Answer.SHAPE_MISMATCH: "the operands' shapes do not fit the kernel",
    Answer.BAD_ARITY: "the kernel got the wrong number of operands",
    Answer.WRONG_DEVICE: "an operand is not on the kernel's device",
}


class InvalidArgument(ValueError):
    """A call the kernels refused or declined; the message names the function,
    says what is wrong in words, and lists the arrays."""


def describe(arrays: Sequence[Array]) -> str:
    """The arrays as ``dtype [shape]``, comma separated."""
    return ", ".join(f"{a.dtype.name} {list(a.shape)}" for a in arrays)


def refused(name: str, answer: Answer, arrays: Sequence[Array], why: str | None = None) -> None:
    """Raise ``InvalidArgument`` for a refusal: ``"name: reason (dtype [shape], …)"``.

    For ``DEAD_BUFFER`` the reason lists each dead operand, numbered from 1,
    with its consumer's reason.
    """
    if not answer.is_refusal:
        raise ValueError(f"refused: {answer.name} is not a refusal")
    reason = why or _REASONS[answer]
    if answer is Answer.DEAD_BUFFER:
        dead = [
            f"operand {i} was consumed, {a.buffer.dead}"
            for i, a in enumerate(arrays, start=1)
            if a.buffer.dead is not None
        ]
        if dead:
            reason = "; ".join(dead)
    raise InvalidArgument(f"{name}: {reason} ({describe(arrays)})")

"""The checks specs make of their attributes when they are made.

Each spec class calls these in ``__post_init__``; a misfit raises
``ValueError`` starting with the class, ``"spec.Reduce: axes (2, 1) must
increase strictly"``. What depends on the operands' shapes is the shape
rules' to answer, and what depends on their dtypes the refusal rules'.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterable
from typing import Final, SupportsIndex

from .. import dtype as D
from ..dtype import Dtype
from ..layout import MAX_RANK

__all__ = ["MAX_FILL_BYTES", "fill_fits"]

#: The most bytes a fill (one element's bits) takes: a complex128.
MAX_FILL_BYTES: Final = 16


def _fail(owner: object, msg: str) -> ValueError:
    return ValueError(f"spec.{type(owner).__name__}: {msg}")


def _set(owner: object, name: str, value: object) -> None:
    object.__setattr__(owner, name, value)


def _int(owner: object, what: str, value: object, least: int | None = 0) -> int:
    """``value`` as an int (bools refused), at least ``least`` unless None."""
    if type(value) is int:
        out = value  # the common case, without the slow Protocol check
    elif isinstance(value, bool) or not isinstance(value, SupportsIndex):
        raise _fail(owner, f"{what} must be an int, got {value!r}")
    else:
        out = operator.index(value)
    if least is not None and out < least:
        raise _fail(owner, f"{what} must be at least {least}, got {out}")
    return int(out)


def _int_field(owner: object, name: str, least: int = 0) -> int:
    """Field ``name`` of ``owner`` checked as by ``_int`` and stored as an int."""
    out = _int(owner, name, getattr(owner, name), least)
    _set(owner, name, out)
    return out


def _ints(owner: object, what: str, values: object, least: int | None = 0) -> tuple[int, ...]:
    if not isinstance(values, Iterable):
        raise _fail(owner, f"{what} must be a sequence of ints, got {values!r}")
    items = tuple(values)
    return tuple(_int(owner, f"{what} {items}", v, least) for v in items)


def _tuples(owner: object, what: str, values: object) -> tuple[tuple[object, ...], ...]:
    """``values``, a sequence of sequences, as a tuple of tuples."""
    if isinstance(values, Iterable):
        items = tuple(values)
        if all(isinstance(v, Iterable) for v in items):
            return tuple(tuple(v) for v in items)
    raise _fail(owner, f"{what} must be a sequence of sequences, got {values!r}")


def _bool(owner: object, what: str, value: object) -> None:
    if not isinstance(value, bool):
        raise _fail(owner, f"{what} must be a bool, got {value!r}")


def _of(owner: object, what: str, value: object, kind: type | tuple[type, ...]) -> None:
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        article = "an" if names[0] in "AEIOU" else "a"
        raise _fail(owner, f"{what} must be {article} {names}, got {value!r}")


def _axes(owner: object, what: str, values: object) -> tuple[int, ...]:
    """Strictly increasing, non-negative axes, at most ``MAX_RANK`` of them."""
    axes = _ints(owner, what, values)
    if any(b <= a for a, b in itertools.pairwise(axes)):
        raise _fail(owner, f"{what} {axes} must increase strictly")
    if len(axes) > MAX_RANK:
        raise _fail(owner, f"{what} {axes} are more than {MAX_RANK}")
    return axes


def _shape(owner: object, values: object) -> tuple[int, ...]:
    shape = _ints(owner, "shape", values)
    if len(shape) > MAX_RANK:
        raise _fail(owner, f"shape {list(shape)} has rank {len(shape)}, above {MAX_RANK}")
    return shape


def _fill(owner: object, fill: object) -> bytes:
    if not isinstance(fill, bytes | bytearray | memoryview):
        raise _fail(owner, f"fill must be bytes, got {fill!r}")
    out = bytes(fill)
    if not 1 <= len(out) <= MAX_FILL_BYTES:
        raise _fail(owner, f"fill has {len(out)} bytes, not 1 to {MAX_FILL_BYTES}")
    return out


def fill_fits(fill: bytes, dt: Dtype) -> bool:
    """Whether ``fill`` is one element's bits of ``dt``: ``dtype.bytes(dt, 1)``
    bytes (a sub-byte element in the low bits of one byte)."""
    return len(fill) == D.bytes(dt, 1)

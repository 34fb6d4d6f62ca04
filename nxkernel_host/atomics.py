"""Atomic operations on int64 array elements, for compiled code that threads
share: the claims of the chunked scans (``network``).

Rule: ``load(a, i)`` reads ``a[i]`` with acquire order (no later read or
write of the calling thread moves before it), ``store(a, i, v)`` writes it
with release order (no earlier one moves after it), and ``cas(a, i, old,
new)`` sets ``a[i]`` to ``new`` where it holds ``old``, as one step, and says
whether it did (sequentially consistent). ``a`` is a C-contiguous 1-D int64
array; the index is not checked.

Why: Numba has no atomic operations on array elements, and a plain load in a
loop that waits for another thread may be read once and kept in a register.
These are LLVM's atomic instructions, emitted by intrinsics.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, cast

from numba import types
from numba.extending import intrinsic

__all__ = ["cas", "load", "store"]


def _element(context: Any, builder: Any, aryty: Any, ary: Any, idxty: Any, idx: Any) -> Any:
    """A pointer to element ``idx`` of C-contiguous 1-D array ``ary``, in
    generated code."""
    arr = context.make_array(aryty)(context, builder, ary)
    return builder.gep(arr.data, [context.cast(builder, idx, idxty, types.intp)])


def _int64_array(a: Any) -> bool:
    """Whether Numba type ``a`` is a C-contiguous 1-D int64 array."""
    return (isinstance(a, types.Array) and a.dtype == types.int64 and a.ndim == 1
            and a.layout == "C")


@intrinsic
def _load_intrinsic(typingctx: Any, a: Any, i: Any) -> Any:
    if not _int64_array(a) or not isinstance(i, types.Integer):
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        ptr = _element(context, builder, signature.args[0], args[0], signature.args[1], args[1])
        return builder.load_atomic(ptr, "acquire", 8)

    return types.int64(a, i), codegen


@intrinsic
def _store_intrinsic(typingctx: Any, a: Any, i: Any, v: Any) -> Any:
    if not _int64_array(a) or not isinstance(i, types.Integer) or not isinstance(
            v, types.Integer):
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        ptr = _element(context, builder, signature.args[0], args[0], signature.args[1], args[1])
        value = context.cast(builder, args[2], signature.args[2], types.int64)
        builder.store_atomic(value, ptr, "release", 8)
        return context.get_dummy_value()

    return types.none(a, i, v), codegen


@intrinsic
def _cas_intrinsic(typingctx: Any, a: Any, i: Any, old: Any, new: Any) -> Any:
    if not _int64_array(a) or not all(isinstance(x, types.Integer) for x in (i, old, new)):
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        ptr = _element(context, builder, signature.args[0], args[0], signature.args[1], args[1])
        expected = context.cast(builder, args[2], signature.args[2], types.int64)
        value = context.cast(builder, args[3], signature.args[3], types.int64)
        pair = builder.cmpxchg(ptr, expected, value, "seq_cst", "seq_cst")
        return builder.extract_value(pair, 1)

    return types.boolean(a, i, old, new), codegen


#: The intrinsics as compiled code calls them, typed for the checker.
load: Final = cast("Callable[[Any, int], int]", _load_intrinsic)
store: Final = cast("Callable[[Any, int, int], None]", _store_intrinsic)
cas: Final = cast("Callable[[Any, int, int, int], bool]", _cas_intrinsic)

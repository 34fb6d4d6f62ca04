"""What every chapter of the namespace shares: operands, devices, broadcasting,
programs made once per dtype, and writes into existing arrays.

Every result is a kernel call through the caller (``nx.call``). NumPy only
crosses values into and out of device memory (``asarray`` of Python scalars
and nested lists, reading a count back) and does host bookkeeping (shapes,
index normalisation).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Final

import numpy as np

from .. import nx, plugins, rig
from .. import spec as S
from ..answer import Answer, describe, refused
from ..array import Array
from ..dtype import Dtype, Kind
from ..layout import Broadcast, Reshape
from ..prog import Prog, Value
from . import _dtypes as T

__all__ = [
    "KINDS", "axes_of", "axis_of", "broadcast", "cast", "check_kind", "copy", "device_of",
    "elementwise", "flat", "full", "map_spec", "operands", "reshaped", "scalar_array", "the_array",
    "write_into",
]

#: Names of the dtype sets functions take, as the standard writes them.
KINDS: Final[dict[str, frozenset[Kind]]] = {
    "any": frozenset(Kind),
    "bool": frozenset({Kind.BOOLEAN}),
    "integer": frozenset({Kind.SIGNED, Kind.UNSIGNED}),
    "integer or boolean": frozenset({Kind.SIGNED, Kind.UNSIGNED, Kind.BOOLEAN}),
    "real floating-point": frozenset({Kind.FLOAT}),
    "floating-point": frozenset({Kind.FLOAT, Kind.COMPLEX}),
    "real-valued": frozenset({Kind.SIGNED, Kind.UNSIGNED, Kind.FLOAT}),
    "numeric": frozenset({Kind.SIGNED, Kind.UNSIGNED, Kind.FLOAT, Kind.COMPLEX}),
    "complex": frozenset({Kind.COMPLEX}),
}


def device_of(device: object) -> rig.Rig:
    """The device ``device`` names; the default device (``rig.default_device``) for None."""
    if device is None:
        return rig.default_device()
    if isinstance(device, rig.Rig):
        return device
    if isinstance(device, str):
        return rig.device(device)
    raise ValueError(f"device: {device!r} is not a device or a device name")


def the_array(fn: str, x: object) -> Array:
    """``x`` where it is an Array; ``TypeError`` naming ``fn`` otherwise."""
    if isinstance(x, Array):
        return x
    raise TypeError(f"{fn}: expected an array, got {type(x).__name__}")


def check_kind(fn: str, kind: str, *xs: Array) -> None:
    """``TypeError`` naming ``fn`` and the arrays unless each has a dtype of ``kind``."""
    allowed = KINDS[kind]
    for x in xs:
        if x.dtype.kind not in allowed or x.dtype.is_sub_byte:
            raise TypeError(f"{fn}: takes {kind} arrays, not {describe(list(xs))}")


def scalar_array(value: bool | int | float | complex, dt: Dtype, dev: rig.Rig) -> Array:
    """A 0-d array of ``dt`` holding the Python scalar ``value`` (a crossing into memory)."""
    return Array.from_numpy(np.asarray(value, dtype=dt.numpy_dtype), dev, dt)


def cast(fn: str, x: Array, dt: Dtype) -> Array:
    """``x`` as ``dt`` by the Cast kernel (``x`` itself for its own dtype)."""
    if x.dtype is dt:
        return x
    return nx.call(_cast_spec(x.dtype, dt), x, name=fn)[0]


@functools.lru_cache(maxsize=512)
def _cast_spec(src: Dtype, dst: Dtype) -> S.Map:
    return S.Map(Prog.cast(src, dst), (S.PLAIN,))


def broadcast(fn: str, xs: Sequence[Array]) -> list[Array]:
    """The arrays broadcast (views) to their common shape; ``ValueError`` naming
    ``fn`` and the arrays where the shapes do not broadcast."""
    first = xs[0].shape
    if all(x.shape == first for x in xs):
        return list(xs)
    try:
        common = tuple(np.broadcast_shapes(*(x.shape for x in xs)))
    except ValueError:
        raise ValueError(f"{fn}: shapes do not broadcast ({describe(list(xs))})") from None
    return [x if x.shape == common else x.view(Broadcast(common)) for x in xs]


def operands(fn: str, *xs: object, kind: str = "any") -> list[Array]:
    """Arrays and Python scalars of one call as Arrays of one promoted dtype,
    broadcast, on one device. Scalars take the arrays' dtype where the standard
    allows (an int out of an integer dtype's range raises ``OverflowError``)."""
    arrays = [x for x in xs if isinstance(x, Array)]
    if not arrays:
        raise TypeError(f"{fn}: needs at least one array, got {', '.join(type(x).__name__ for x in xs)}")
    dt = arrays[0].dtype
    for a in arrays[1:]:
        if a.dtype is not dt:
            try:
                dt = T.promote(dt, a.dtype, fn)
            except TypeError:
                raise TypeError(f"{fn}: {describe(arrays)} do not promote to one dtype") from None
    dev = arrays[0].buffer.memory.device
    for a in arrays[1:]:
        if a.buffer.memory.device is not dev:
            raise ValueError(f"{fn}: arrays on different devices ({describe(arrays)} on "
                             f"{', '.join(a.device.name for a in arrays)})")
    out: list[Array] = []
    for x in xs:
        if isinstance(x, Array):
            out.append(cast(fn, x, dt))
        else:
            sdt = T.scalar_dtype(x, dt, fn)
            out.append(scalar_array(x, sdt, dev))  # type: ignore[arg-type]
    check_kind(fn, kind, *out)
    return broadcast(fn, out)


#: A program's body: its builder and the operands' values, to its outputs' values.
Body = Callable[..., Value]


@functools.lru_cache(maxsize=2048)
def map_spec(body: Body, dts: tuple[Dtype, ...]) -> S.Map:
    """The map spec of ``body`` over operands of ``dts``, built once per body and
    dtypes (a warm call builds nothing)."""
    b = Prog.build(list(dts))
    out = body(b, *b.ins)
    return S.Map(b.finish(out), (S.PLAIN,) * len(dts))


def elementwise(fn: str, body: Body, *xs: Array) -> Array:
    """``body`` at every index of the (broadcast, one-dtype) arrays: one map
    call. A program the dtypes do not admit raises ``TypeError`` naming
    ``fn`` and the arrays (not the program's node)."""
    try:
        sp = map_spec(body, tuple(x.dtype for x in xs))
    except ValueError as e:
        raise TypeError(f"{fn}: does not take {describe(list(xs))} "
                        f"({str(e).removeprefix('Prog: ')})") from None
    return nx.call(sp, *xs, name=fn)[0]


def flat(fn: str, x: Array) -> Array:
    """``x`` as one axis: a view where its strides allow, else a copy."""
    if x.rank == 1:
        return x
    lay = x.layout.move(Reshape((x.numel,)))
    if lay is not None:
        return Array(x.dtype, lay, x.buffer)
    return copy(fn, x).reshape([x.numel])


def copy(fn: str, x: Array) -> Array:
    """A fresh C-contiguous copy of ``x`` (the Copy kernel's map)."""
    return nx.call(S.Map(Prog.identity(x.dtype), (S.PLAIN,)), x, name=fn)[0]


def reshaped(fn: str, x: Array, shape: Sequence[int]) -> Array:
    """``x`` in ``shape``: a view where strides allow, else a copy."""
    lay = x.layout.move(Reshape(tuple(shape)))
    if lay is not None:
        return Array(x.dtype, lay, x.buffer)
    return copy(fn, x).reshape(list(shape))


def write_into(fn: str, dst: Array, src: Array) -> None:
    """Store ``src`` (of dst's shape, cast to dst's dtype) at dst's elements in
    place: a Map whose destination is ``dst`` itself, claimed exclusively
    through the door by the library that computes it. A source sharing dst's
    memory is copied first."""
    if src.shape != dst.shape:
        src = broadcast(fn, [src, dst])[0]
        if src.shape != dst.shape:
            raise ValueError(f"{fn}: {describe([src])} does not broadcast to {describe([dst])}")
    if src.buffer.memory is dst.buffer.memory:
        src = copy(fn, src)
    if dst.device is not src.device:
        raise ValueError(f"{fn}: {describe([src])} is on {src.device.name}, "
                         f"the destination on {dst.device.name}")
    sp = _cast_spec(src.dtype, dst.dtype) if src.dtype is not dst.dtype else S.Map(
        Prog.identity(dst.dtype), (S.PLAIN,))
    declines = []
    for lib in plugins.discover().libraries_for(dst.device):
        answer = lib.map(sp, (dst,), (src,))
        if answer is Answer.DONE:
            return
        if answer is not Answer.DECLINED:
            refused(fn, answer, [dst, src])
        declines.append(lib.name)
    raise ValueError(f"{fn}: no library writes into {describe([dst])} on {dst.device.name}"
                     f"{' (' + ', '.join(declines) + ' decline)' if declines else ''}")


def axis_of(fn: str, x: Array, axis: int) -> int:
    """``axis`` in [0, rank); ``IndexError`` naming ``fn`` otherwise."""
    if not isinstance(axis, int | np.integer) or not -x.rank <= axis < max(x.rank, 1):
        raise IndexError(f"{fn}: axis {axis} is out of range for {describe([x])}")
    return int(axis) % max(x.rank, 1)


def axes_of(fn: str, x: Array, axis: int | Sequence[int] | None) -> tuple[int, ...]:
    """Distinct axes in increasing order; all of x's for None."""
    if axis is None:
        return tuple(range(x.rank))
    if isinstance(axis, int | np.integer):
        raw: tuple[int, ...] = (int(axis),)
    elif isinstance(axis, tuple | list) and all(isinstance(a, int | np.integer) for a in axis):
        raw = tuple(axis)
    else:
        raise TypeError(f"{fn}: axis {axis!r} of {describe([x])} is not an int or a tuple of ints")
    out = sorted({axis_of(fn, x, a) for a in raw}) if x.rank else []
    if len(out) != len(raw) and x.rank:
        raise ValueError(f"{fn}: repeated axis in {raw}")
    return tuple(out)


def full(fn: str, shape: Sequence[int], value: bool | int | float | complex, dt: Dtype,
         dev: rig.Rig) -> Array:
    """An array of ``shape`` filled with ``value`` (a 0-d array broadcast and copied)."""
    one = scalar_array(value, dt, dev)
    return copy(fn, one.view(Broadcast(tuple(shape)))) if shape else copy(fn, one)

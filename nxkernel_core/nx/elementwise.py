"""Elementwise conveniences: add, sub, mul, exp, where, cast; each one map."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Final

from .. import dtype as D
from .. import spec as S
from ..answer import InvalidArgument, describe
from ..array import Array
from ..caller import call, call2
from ..dtype import Dtype
from ..prog import Binary, Prog, Unary
from .arguments import as_arrays, broadcast_arrays


@functools.cache
def _map_spec(kind: Binary | Unary, dt: Dtype) -> S.Map:
    """The map spec of one kind at ``dt``, made once: building a program costs
    more than a small map computes."""
    if isinstance(kind, Unary):
        return S.Map(Prog.unary(kind, dt), (S.PLAIN,))
    return S.Map(Prog.binary(kind, dt), (S.PLAIN, S.PLAIN))


def _kind_spec(fn: str, kind: Binary | Unary, arrays: Sequence[Array]) -> S.Map:
    """``_map_spec``, a kind that does not take the dtype refused naming ``fn``
    and the arrays (not the program's node)."""
    try:
        return _map_spec(kind, arrays[0].dtype)
    except ValueError:
        raise InvalidArgument(f"{fn}: {kind.name.lower()} does not take {arrays[0].dtype.name} "
                              f"({describe(arrays)})") from None


def _binary(fn: str, kind: Binary, x: object, y: object, specs: dict[Dtype, S.Map]) -> Array:
    """``kind`` of x and y; ``specs``: its map specs by dtype, made once (a
    dict keyed by the dtype alone: the warm call's look-up)."""
    if type(x) is Array and type(y) is Array and x.layout.shape == y.layout.shape:
        a, b = x, y  # what as_arrays and broadcast_arrays give two Arrays of one shape
    else:
        a, b = broadcast_arrays(fn, as_arrays(fn, [x, y]))
    if a.dtype is not b.dtype:
        raise InvalidArgument(f"{fn}: operands of dtypes {a.dtype.name} and {b.dtype.name} differ; "
                              f"cast one first ({describe([a, b])})")
    sp = specs.get(a.dtype)
    if sp is None:
        sp = specs[a.dtype] = _kind_spec(fn, kind, [a, b])
    return call2(sp, a, b, None, None, fn)[0]


_add_specs: Final[dict[Dtype, S.Map]] = {}
_sub_specs: Final[dict[Dtype, S.Map]] = {}
_mul_specs: Final[dict[Dtype, S.Map]] = {}


def add(x: object, y: object) -> Array:
    """x + y elementwise, NumPy broadcasting; one dtype, integers wrap."""
    return _binary("nx.add", Binary.ADD, x, y, _add_specs)


def sub(x: object, y: object) -> Array:
    """x − y elementwise, NumPy broadcasting; one dtype, integers wrap."""
    return _binary("nx.sub", Binary.SUB, x, y, _sub_specs)


def mul(x: object, y: object) -> Array:
    """x · y elementwise, NumPy broadcasting; one dtype, integers wrap."""
    return _binary("nx.mul", Binary.MUL, x, y, _mul_specs)


def exp(x: object) -> Array:
    """e^x elementwise, for float x."""
    (a,) = as_arrays("nx.exp", [x])
    return call(_kind_spec("nx.exp", Unary.EXP, [a]), a, name="nx.exp")[0]


def where(c: object, x: object, y: object) -> Array:
    """x where the bool c holds, else y; NumPy broadcasting."""
    cc, a, b = broadcast_arrays("nx.where", as_arrays("nx.where", [c, x, y]))
    if a.dtype is not b.dtype:
        raise InvalidArgument(f"nx.where: x and y have dtypes {a.dtype.name} and {b.dtype.name}")
    return call(_where_spec(a.dtype), cc, a, b, name="nx.where")[0]


@functools.lru_cache(maxsize=64)
def _where_spec(dt: Dtype) -> S.Map:
    return S.Map(Prog.where(dt), (S.PLAIN,) * 3)


def cast(x: object, dtype: D.DtypeLike) -> Array:
    """x converted to ``dtype`` by the Cast rules (floats by the store rule)."""
    (a,) = as_arrays("nx.cast", [x])
    dt = D.resolve(dtype, "nx.cast")
    return call(_cast_spec(a.dtype, dt), a, name="nx.cast")[0]


@functools.lru_cache(maxsize=512)
def _cast_spec(src: Dtype, dst: Dtype) -> S.Map:
    """The map spec of a cast of ``src`` into ``dst`` (a copy for one dtype), made once."""
    prog = Prog.identity(src) if dst is src else Prog.cast(src, dst)
    return S.Map(prog, (S.PLAIN,))

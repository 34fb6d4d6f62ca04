"""``evaluate``: a program at every index of a shape, node by node; ``ulps``."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ..dtype import Dtype
from ..prog import (
    Binary,
    Compare,
    Const,
    Convert,
    Coord,
    In,
    Node,
    Op1,
    Op2,
    Prog,
    Ternary,
    Unary,
    element,
)
from ._complex import _binary_complex, _unary_complex
from ._conversions import _bitcast, _cast, _compare
from ._floats import _binary_float, _fma_float, _unary_float
from ._formats import Arr, _copy_bits, _isnan, _order_key, _part, _parts, _select, _truth
from ._integers import _binary_bool, _binary_int, _unary_int, _wide_int, _wrap

# --------------------------------------------------------------------------
# Dispatch
# --------------------------------------------------------------------------


def _unary(kind: Unary, dt: Dtype, x: Arr) -> Arr:
    """A unary kind at any dtype it takes."""
    if dt.is_float:
        return _unary_float(kind, dt, x)
    if dt.is_complex:
        return _unary_complex(kind, dt, x)
    return _unary_int(kind, dt, x)


def _binary(kind: Binary, dt: Dtype, x: Arr, y: Arr) -> Arr:
    """A binary kind at any dtype it takes."""
    if dt.is_float:
        return _binary_float(kind, dt, x, y)
    if dt.is_complex:
        return _binary_complex(kind, dt, x, y)
    if dt.is_bool:
        return _binary_bool(kind, x, y)
    return _binary_int(kind, dt, x, y)


def _fma(dt: Dtype, a: Arr, b: Arr, c: Arr) -> Arr:
    """``a * b + c`` rounded once (floats) or wrapped (integers)."""
    if dt.is_float:
        return _fma_float(dt, a, b, c)
    return _wrap(dt, _wide_int(a, dt) * _wide_int(b, dt) + _wide_int(c, dt))


def _coord(shape: tuple[int, ...], axis: int) -> Arr:
    """Each index of ``shape`` along ``axis`` counted from the last, as int64."""
    rank = len(shape)
    if axis >= rank:
        raise ValueError(f"evaluator.evaluate: Coord axis {axis} is outside a loop of rank {rank}")
    along = rank - 1 - axis
    idx = np.arange(shape[along], dtype=np.int64).reshape(
        tuple(-1 if i == along else 1 for i in range(rank)))
    return np.ascontiguousarray(np.broadcast_to(idx, shape))


def evaluate(prog: Prog, operands: Sequence[Arr], shape: Sequence[int]) -> list[Arr]:
    """``prog`` at every index of ``shape``: one fresh C-contiguous array of
    ``shape`` per output, of its dtype's ``numpy_dtype``.

    ``operands[i]`` is an array of ``prog.ins[i].numpy_dtype`` that broadcasts
    to ``shape`` (sub-byte dtypes unpacked, one element per host element).
    ``Coord(axis)`` reads the index along array axis ``rank - 1 - axis``. Every
    node follows the module's rules.
    """
    shp = tuple(int(d) for d in shape)
    if len(operands) != prog.n_ins:
        raise ValueError(f"evaluator.evaluate: the program takes {prog.n_ins} operands, "
                         f"got {len(operands)}")
    ops: list[Arr] = []
    for i, (op, dt) in enumerate(zip(operands, prog.ins, strict=True)):
        a = np.asarray(op)
        if a.dtype != dt.numpy_dtype:
            raise ValueError(f"evaluator.evaluate: operand {i} is {a.dtype}, not {dt.name} "
                             f"({dt.numpy_dtype})")
        ops.append(_copy_bits(np.broadcast_to(a, shp)))
    vals: list[Arr] = []
    # IEEE exceptions are values here (NaNs, infinities, zeros), never warnings.
    with np.errstate(all="ignore"):
        for i, node in enumerate(prog.nodes):
            vals.append(_node(prog, i, node, ops, vals, shp))
    return [_copy_bits(vals[o]) for o in prog.outs]


def _node(prog: Prog, i: int, node: Node, ops: list[Arr], vals: list[Arr],
          shp: tuple[int, ...]) -> Arr:
    """Node ``i``'s value at every index of ``shp``, C-contiguous."""
    dt = prog.dtype(i)
    if isinstance(node, In):
        v = ops[node.index]
    elif isinstance(node, Coord):
        v = _coord(shp, node.axis)
    elif isinstance(node, Const):
        v = _copy_bits(np.broadcast_to(element(dt, node.bits), shp))
    elif isinstance(node, Op1):
        x, src = vals[node.x], prog.dtype(node.x)
        if node.kind is Convert.COPY:
            v = _copy_bits(x)
        elif node.kind is Convert.CAST:
            v = _cast(x, src, dt)
        elif node.kind is Convert.BITCAST:
            v = _bitcast(x, src, dt)
        else:
            v = _unary(node.kind, dt, x)
    elif isinstance(node, Op2):
        x, y, src = vals[node.x], vals[node.y], prog.dtype(node.x)
        if isinstance(node.kind, Compare):
            v = _compare(node.kind, src, x, y)
        else:
            v = _binary(node.kind, src, x, y)
    elif node.kind is Ternary.WHERE:
        v = _select(_truth(vals[node.c]), vals[node.x], vals[node.y])
    else:
        v = _fma(dt, vals[node.c], vals[node.x], vals[node.y])
    return np.ascontiguousarray(v).reshape(shp)


# --------------------------------------------------------------------------
# Distances
# --------------------------------------------------------------------------


def ulps(a: npt.ArrayLike, b: npt.ArrayLike, dt: Dtype) -> npt.NDArray[np.float64]:
    """The distance in ulps between float arrays ``a`` and ``b`` of ``dt``:
    the number of values of ``dt`` between them, stepping from one to the
    other (±0 count as one value, so they are 0 apart; the largest finite
    value is 1 from infinity). Two NaNs are 0 apart, a NaN and a number
    infinitely far. Of complex arrays, the larger of the parts' distances."""
    if dt.is_complex:
        x = np.asarray(a, dtype=dt.numpy_dtype)
        y = np.asarray(b, dtype=dt.numpy_dtype)
        (xr, xi), (yr, yi) = _parts(x), _parts(y)
        return np.maximum(ulps(xr, yr, _part(dt)), ulps(xi, yi, _part(dt)))
    if not dt.is_float:
        raise ValueError(f"evaluator.ulps: {dt.name} is not a float or complex dtype")
    x, y = np.broadcast_arrays(np.asarray(a, dtype=dt.numpy_dtype),
                               np.asarray(b, dtype=dt.numpy_dtype))
    kx, ky = _order_key(x, dt), _order_key(y, dt)
    # Merge -0 (key -1) with +0 (key 0): shift every negative key up by one.
    kx = np.where(kx < 0, kx + 1, kx)
    ky = np.where(ky < 0, ky + 1, ky)
    same_side = (kx >= 0) == (ky >= 0)
    with np.errstate(all="ignore"):
        near = np.abs(kx - ky).astype(np.float64)
    far = np.abs(kx).astype(np.float64) + np.abs(ky).astype(np.float64)
    d = np.where(same_side, near, far)
    nx, ny = _isnan(x, dt), _isnan(y, dt)
    d = np.where(nx | ny, np.inf, d)
    return np.where(nx & ny, 0.0, d)

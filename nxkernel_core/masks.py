"""Masks as intervals of keys per query row: the attention fast path.

A mask program (output 0 of attention's pair program) that is an And/Or of
comparisons between affine int64 functions of the query row (Coord 1) and the
key (Coord 0), or a constant, is a union of key intervals per row: no mask,
causal, sliding windows, prefixes. ``band(prog)`` finds that form (a
``Band``), ``Band.intervals(rows)`` gives each row's intervals and
``merged`` clips them to the keys and joins those that touch, so a kernel
skips the key tiles no row sees and runs no program per pair. The analysis is
exact where no value the program computes wraps (``Band.exact_for``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, final

import numpy as np
import numpy.typing as npt

from nxkernel_core import dtype as D
from nxkernel_core.prog import Binary, Compare, Const, Convert, Coord, Op1, Op2, Prog, Unary

__all__ = ["BIG", "Band", "Intervals", "band", "merged", "per_row"]

Arr = npt.NDArray[Any]


#: Beyond any key or row index: an interval bound meaning "no bound".
BIG: Final = 1 << 62
#: Affine values whose magnitude stays below this over the loop are computed
#: exactly by the analysis (the program's int64 arithmetic cannot wrap).
_SAFE: Final = 1 << 60


@final
@dataclass(frozen=True, slots=True)
class _Half:
    """``alpha·row + beta·key + gamma`` compared with 0 by ``op``, beta in {−1, 0, 1}."""

    alpha: int
    beta: int
    gamma: int
    op: Compare


#: A mask over (row, key): a constant, a half-plane, or an And / Or of two.
_Tree = bool | _Half | tuple[str, "_Tree", "_Tree"]
#: A list of key intervals per row: ``(lo, hi)``, key ∈ [lo, hi), arrays over rows.
Intervals = list[tuple[Arr, Arr]]


@final
@dataclass(frozen=True, slots=True)
class Band:
    """Output 0 as a union of key intervals per row, found in the program.

    ``affines`` are the (row, key, constant) coefficients of every integer
    value the program computes on the way; the analysis is exact for a loop
    whose values all stay below ``_SAFE`` in magnitude (``exact_for``)."""

    tree: _Tree
    affines: tuple[tuple[int, int, int], ...]

    def exact_for(self, tq: int, tk: int) -> bool:
        """Whether no value of the program wraps over rows below tq, keys below tk."""
        return all(abs(a) * tq + abs(b) * tk + abs(c) < _SAFE for a, b, c in self.affines)

    def intervals(self, rows: Arr) -> Intervals:
        """The visible key intervals of each row of ``rows`` (int64)."""
        return _intervals(self.tree, rows)


def _affine(prog: Prog, i: int, seen: list[tuple[int, int, int]]
            ) -> tuple[int, int, int] | None:
    """Node ``i`` as ``(a, b, c)``, the int64 value ``a·row + b·key + c``, or
    None where it is not one (another Coord, dtype or kind)."""
    node = prog.nodes[i]
    if prog.dtype(i) is not D.int64:
        return None
    out: tuple[int, int, int] | None = None
    if isinstance(node, Coord):
        out = {0: (0, 1, 0), 1: (1, 0, 0)}.get(node.axis)
    elif isinstance(node, Const):
        out = (0, 0, int(np.frombuffer(node.bits, dtype="<i8")[0]))
    elif isinstance(node, Op1) and node.kind in (Convert.COPY, Unary.NEG, Convert.CAST):
        x = _affine(prog, node.x, seen)
        if x is not None:
            out = x if node.kind is not Unary.NEG else (-x[0], -x[1], -x[2])
    elif isinstance(node, Op2) and node.kind in (Binary.ADD, Binary.SUB, Binary.MUL):
        x, y = _affine(prog, node.x, seen), _affine(prog, node.y, seen)
        if x is not None and y is not None:
            if node.kind is Binary.ADD:
                out = (x[0] + y[0], x[1] + y[1], x[2] + y[2])
            elif node.kind is Binary.SUB:
                out = (x[0] - y[0], x[1] - y[1], x[2] - y[2])
            elif x[:2] == (0, 0):
                out = (x[2] * y[0], x[2] * y[1], x[2] * y[2])
            elif y[:2] == (0, 0):
                out = (y[2] * x[0], y[2] * x[1], y[2] * x[2])
    if out is not None:
        seen.append(out)
    return out


def _tree(prog: Prog, i: int, seen: list[tuple[int, int, int]]) -> _Tree | None:
    """Bool node ``i`` as a mask tree, or None where it is not one."""
    node = prog.nodes[i]
    if prog.dtype(i) is not D.bool_:
        return None
    if isinstance(node, Const):
        return node.bits[0] != 0
    if isinstance(node, Op1) and node.kind is Convert.COPY:
        return _tree(prog, node.x, seen)
    if not isinstance(node, Op2):
        return None
    if isinstance(node.kind, Compare):
        x, y = _affine(prog, node.x, seen), _affine(prog, node.y, seen)
        if x is None or y is None:
            return None
        a, b, c = x[0] - y[0], x[1] - y[1], x[2] - y[2]
        seen.append((a, b, c))
        return _Half(a, b, c, node.kind) if b in (-1, 0, 1) else None
    if node.kind in (Binary.AND, Binary.OR):
        x_tree, y_tree = _tree(prog, node.x, seen), _tree(prog, node.y, seen)
        if x_tree is None or y_tree is None:
            return None
        return ("and" if node.kind is Binary.AND else "or", x_tree, y_tree)
    return None


def band(prog: Prog) -> Band | None:
    """Output 0 as a ``Band`` where it is an And/Or of comparisons of affine
    int64 functions of the row (Coord 1) and the key (Coord 0), or a constant."""
    seen: list[tuple[int, int, int]] = []
    tree = _tree(prog, prog.outs[0], seen)
    return None if tree is None else Band(tree, tuple(seen))


def _full(rows: Arr, value: int) -> Arr:
    """An int64 array of ``rows``'s shape holding ``value``."""
    return np.full(rows.shape, value, dtype=np.int64)


def per_row(n: int, value: int) -> Arr:
    """``n`` int64 copies of ``value``: one bound per row."""
    return np.full(n, value, dtype=np.int64)


def _intervals(tree: _Tree, rows: Arr) -> Intervals:
    """The key intervals where ``tree`` holds, for each row of ``rows``."""
    if isinstance(tree, bool):
        return [(_full(rows, -BIG), _full(rows, BIG))] if tree else []
    if isinstance(tree, _Half):
        v = tree.alpha * rows + tree.gamma  # the half-plane is beta·key + v (op) 0
        op = tree.op
        if tree.beta == 0:
            holds = {Compare.LESS: v < 0, Compare.LESS_EQUAL: v <= 0, Compare.EQUAL: v == 0,
                     Compare.NOT_EQUAL: v != 0}[op]
            return [(np.where(holds, -BIG, BIG), np.where(holds, BIG, -BIG))]
        # beta = 1: key (op) −v; beta = −1: v (op) key, i.e. key (op reversed) v.
        bound = -v if tree.beta == 1 else v
        if op is Compare.EQUAL:
            return [(bound, bound + 1)]
        if op is Compare.NOT_EQUAL:
            return [(_full(rows, -BIG), bound), (bound + 1, _full(rows, BIG))]
        strict = op is Compare.LESS
        if tree.beta == 1:  # key < bound, or key <= bound
            return [(_full(rows, -BIG), bound if strict else bound + 1)]
        return [(bound + 1 if strict else bound, _full(rows, BIG))]  # key > v, or key >= v
    kind, x, y = tree
    xs, ys = _intervals(x, rows), _intervals(y, rows)
    if kind == "or":
        return xs + ys
    return [(np.maximum(a_lo, b_lo), np.minimum(a_hi, b_hi)) for a_lo, a_hi in xs
            for b_lo, b_hi in ys]


def merged(ivs: Intervals, kmax: int) -> Intervals:
    """``ivs`` clipped to [0, kmax), empty ones dropped, and any two whose
    union is one interval at every row merged into it."""
    out: Intervals = []
    for lo, hi in ivs:
        lo, hi = np.clip(lo, 0, kmax), np.clip(hi, 0, kmax)
        if np.any(lo < hi):
            out.append((lo, hi))
    merged = True
    while merged and len(out) > 1:
        merged = False
        for a in range(len(out)):
            for b in range(a + 1, len(out)):
                (alo, ahi), (blo, bhi) = out[a], out[b]
                a_empty, b_empty = alo >= ahi, blo >= bhi
                if np.all(a_empty | b_empty | (np.maximum(alo, blo) <= np.minimum(ahi, bhi))):
                    lo = np.where(a_empty, blo, np.where(b_empty, alo, np.minimum(alo, blo)))
                    hi = np.where(a_empty, bhi, np.where(b_empty, ahi, np.maximum(ahi, bhi)))
                    out = [*out[:a], (lo, hi), *out[a + 1:b], *out[b + 1:]]
                    merged = True
                    break
            if merged:
                break
    return out

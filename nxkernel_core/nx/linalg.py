"""Contraction (contract, matmul) and the matrix routines (cholesky, lu,
qr, svd, eigh, eig, solve_triangular)."""

from __future__ import annotations

import functools
from typing import Final

import numpy as np

from .. import dtype as D
from .. import spec as S
from ..answer import Answer, InvalidArgument, describe, refused
from ..array import Array
from ..caller import call, call2
from ..dtype import Dtype
from ..layout import Broadcast, Permute
from .arguments import as_arrays


def _acc_for(dt: Dtype) -> Dtype:
    """The accumulator a contraction of ``dt`` operands uses by default."""
    if D.accumulates(dt):
        return dt
    if dt.is_float:
        return D.float32
    raise InvalidArgument(f"nx.matmul: {dt.name} operands have no accumulator; cast them first")


def contract(subscripts: str, a: object, b: object, init: object | None = None,
             acc: D.DtypeLike | None = None, dtype: D.DtypeLike | None = None) -> Array:
    """An einsum-style contraction of two operands, e.g. ``"bij,bjk->bik"``:
    letters in both inputs and the output are batch axes, in both inputs only
    contracted, in one input and the output free. Computed in ``acc`` (the
    operands' dtype, float32 for narrow floats), rounded into ``dtype``; plus
    ``init`` where given."""
    fn = "nx.contract"
    x, y = as_arrays(fn, [a, b])
    try:
        ins, out = subscripts.replace(" ", "").split("->")
        sa, sb = ins.split(",")
    except ValueError:
        raise InvalidArgument(f"{fn}: subscripts {subscripts!r} are not of the form 'ab,bc->ac'") from None
    for s, arr in ((sa, x), (sb, y)):
        if len(s) != arr.rank or len(set(s)) != len(s):
            raise InvalidArgument(f"{fn}: subscripts {s!r} do not name each of the {arr.rank} "
                                  f"axes of {describe([arr])} once")
    if len(set(out)) != len(out) or not set(out) <= set(sa) | set(sb):
        raise InvalidArgument(f"{fn}: output subscripts {out!r} are not distinct input letters")
    only_one = [c for c in sa + sb if (c in sa) != (c in sb) and c not in out]
    if only_one:
        raise InvalidArgument(f"{fn}: letters {only_one} appear in one input and not the output; "
                              "reduce them with nx.sum first")
    batch = [c for c in out if c in sa and c in sb]
    contracted = [c for c in sa if c in sb and c not in out]
    free_a = [c for c in sa if c not in sb]
    free_b = [c for c in sb if c not in sa]
    acc_dt = _acc_for(x.dtype) if acc is None else D.resolve(acc, fn)
    sp = S.Contract(tuple((sa.index(c), sb.index(c)) for c in batch),
                    tuple((sa.index(c), sb.index(c)) for c in contracted), acc_dt,
                    init=init is not None)
    ops = [x, y] + ([as_arrays(fn, [init], like=x)[0]] if init is not None else [])
    (r,) = call(sp, *ops, dtypes=(x.dtype if dtype is None else D.resolve(dtype, fn),), name=fn)
    natural = batch + free_a + free_b
    if natural == list(out):
        return r
    return r.view(Permute(tuple(natural.index(c) for c in out)))


def matmul(a: object, b: object) -> Array:
    """NumPy's matmul: ``[…, m, k] @ […, k, n]`` with broadcast batch axes; a 1-D
    operand is a vector. Computed in the operands' dtype (float32 for narrow
    floats) and rounded into it."""
    fn = "nx.matmul"
    x, y = (a, b) if type(a) is Array and type(b) is Array else as_arrays(fn, [a, b])
    xs, ys = x.layout.shape, y.layout.shape
    if not xs or not ys:
        raise InvalidArgument(f"{fn}: operands must have at least one axis ({describe([x, y])})")
    dt = x.dtype
    if dt is not y.dtype:
        raise InvalidArgument(f"{fn}: operands of dtypes {dt.name} and {y.dtype.name} differ")
    vec_a, vec_b = len(xs) == 1, len(ys) == 1
    xa = x.reshape([1, xs[0]]) if vec_a else x
    yb = y.reshape([ys[0], 1]) if vec_b else y
    xs, ys = xa.layout.shape, yb.layout.shape
    if xs[-1] != ys[-2]:
        refused(fn, Answer.SHAPE_MISMATCH, [x, y],
                f"contracted extents {xs[-1]} and {ys[-2]} differ")
    lead = xs[:-2]
    if ys[:-2] != lead:
        try:
            lead = tuple(np.broadcast_shapes(xs[:-2], ys[:-2]))
        except ValueError:
            raise InvalidArgument(f"{fn}: batch shapes do not broadcast ({describe([x, y])})") from None
        if xs[:-2] != lead:
            xa = xa.view(Broadcast((*lead, *xs[-2:])))
        if ys[:-2] != lead:
            yb = yb.view(Broadcast((*lead, *ys[-2:])))
    made = _matmul_specs.get((len(lead), dt))
    if made is None:
        made = _matmul_specs[(len(lead), dt)] = (_matmul_spec(len(lead), _acc_for(dt)), (dt,))
    (r,) = call2(made[0], xa, yb, made[1], None, fn)
    if not vec_a and not vec_b:
        return r
    shape = list(r.shape)
    if vec_b:
        shape.pop(-1)
    if vec_a:
        shape.pop(-2 if not vec_b else -1)
    return r.reshape(shape) if shape != list(r.shape) else r


#: matmul's spec and destination dtypes by the batch axes' count and the
#: operands' dtype (a dict: the warm call's look-up).
_matmul_specs: Final[dict[tuple[int, Dtype], tuple[S.Contract, tuple[Dtype]]]] = {}


@functools.lru_cache(maxsize=256)
def _matmul_spec(nb: int, acc: Dtype) -> S.Contract:
    """The contraction of matmul with ``nb`` batch axes in ``acc``, made once."""
    return S.Contract(tuple((i, i) for i in range(nb)), ((nb + 1, nb),), acc)


def cholesky(a: object, upper: bool = False) -> Array:
    """The Cholesky factor of each matrix (lower, as NumPy's, unless ``upper``);
    NaN for a matrix that is not positive definite."""
    (x,) = as_arrays("nx.cholesky", [a])
    return call(S.Cholesky(upper), x, name="nx.cholesky")[0]


def lu(a: object) -> tuple[Array, Array, Array]:
    """``(lu, pivots, perm)``: partial-pivoting LU of each matrix."""
    (x,) = as_arrays("nx.lu", [a])
    r = call(S.Lu(), x, name="nx.lu")
    return r[0], r[1], r[2]


def qr(a: object, mode: str = "reduced") -> tuple[Array, Array]:
    """``(q, r)`` of each matrix; ``mode`` 'reduced' or 'complete' as NumPy's."""
    (x,) = as_arrays("nx.qr", [a])
    if mode not in ("reduced", "complete"):
        raise InvalidArgument(f"nx.qr: mode {mode!r} is not 'reduced' or 'complete'")
    q, r = call(S.Qr(mode == "complete"), x, name="nx.qr")
    return q, r


def svd(a: object, full_matrices: bool = True,
        compute_uv: bool = True) -> tuple[Array, Array, Array] | Array:
    """NumPy's svd: ``(u, s, vh)``, or ``s`` alone without ``compute_uv``."""
    (x,) = as_arrays("nx.svd", [a])
    vectors = None if not compute_uv else (S.Factors.COMPLETE if full_matrices else S.Factors.REDUCED)
    r = call(S.Svd(vectors), x, name="nx.svd")
    return (r[0], r[1], r[2]) if compute_uv else r[0]


def eigh(a: object) -> tuple[Array, Array]:
    """``(w, v)``: ascending eigenvalues and eigenvectors of each Hermitian matrix."""
    (x,) = as_arrays("nx.eigh", [a])
    w, v = call(S.Eigh(True), x, name="nx.eigh")
    return w, v


def eig(a: object) -> tuple[Array, Array]:
    """``(w, v)``: complex eigenvalues and right eigenvectors of each matrix."""
    (x,) = as_arrays("nx.eig", [a])
    w, v = call(S.Eig(True), x, name="nx.eig")
    return w, v


def solve_triangular(a: object, b: object, lower: bool = True, trans: bool = False,
                     unit_diagonal: bool = False) -> Array:
    """x with ``op(a) x = b`` for triangular a (SciPy's names)."""
    x, y = as_arrays("nx.solve_triangular", [a, b])
    sp = S.SolveTriangular(lower, trans, unit_diagonal)
    return call(sp, x, y, name="nx.solve_triangular")[0]

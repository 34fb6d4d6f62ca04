"""The standard's ``linalg`` extension, and the namespace's ``matmul``,
``matrix_transpose``, ``tensordot`` and ``vecdot``: contractions (the Contract
kernel) and the matrix routines (Cholesky, Lu, Qr, Svd, Eigh,
SolveTriangular kernels), with elementwise maps and reductions between them."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

from .. import dtype as D
from .. import nx
from ..answer import describe
from ..array import Array
from ..layout import Broadcast, Layout, Permute
from ..prog import Builder, Value
from . import _base as B
from . import _elementwise as E
from . import _reductions as R

__all__ = [
    "cholesky", "cross", "det", "diagonal", "eigh", "eigvalsh", "inv", "matmul", "matrix_norm",
    "matrix_power", "matrix_rank", "matrix_transpose", "outer", "pinv", "qr", "slogdet", "solve",
    "svd", "svdvals", "tensordot", "trace", "vecdot", "vector_norm",
]

_ew: Any = E  # the generated elementwise functions (add, multiply, ...)


def _matrices(fn: str, x: Array) -> Array:
    a = B.the_array(fn, x)
    if a.rank < 2:
        raise ValueError(f"{fn}: needs a matrix or a stack of them, not {describe([a])}")
    return a


def _square(fn: str, x: Array) -> Array:
    """``x`` where it is a square matrix or a stack of them; ``ValueError`` naming ``fn`` otherwise."""
    a = _matrices(fn, x)
    if a.shape[-1] != a.shape[-2]:
        raise ValueError(f"{fn}: needs square matrices, not {describe([a])}")
    return a


def matmul(x1: Array, x2: Array, /) -> Array:
    """The matrix product with broadcast batch axes; a 1-D operand is a vector."""
    fn = "xp.matmul"
    a, b = (B.the_array(fn, x1), B.the_array(fn, x2))
    a, b = B.operands(fn, a, b, kind="numeric") if a.shape == b.shape else _promoted(fn, a, b)
    if a.rank == 0 or b.rank == 0:
        raise ValueError(f"{fn}: 0-d operands ({describe([a, b])})")
    k_a, k_b = a.shape[-1], b.shape[0] if b.rank == 1 else b.shape[-2]
    if k_a != k_b:
        raise ValueError(f"{fn}: contracted extents {k_a} and {k_b} differ ({describe([a, b])})")
    if k_a == 0:
        shape = _product_shape(fn, a, b)
        return B.full(fn, shape, 0, a.dtype, a.device)
    return nx.matmul(a, b)


def _product_shape(fn: str, a: Array, b: Array) -> tuple[int, ...]:
    import numpy as np

    lead = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    m = () if a.rank == 1 else (a.shape[-2],)
    n = () if b.rank == 1 else (b.shape[-1],)
    return lead + m + n


def _promoted(fn: str, a: Array, b: Array) -> tuple[Array, Array]:
    """Two arrays of one promoted dtype, not broadcast (matmul broadcasts its own way)."""
    from ._dtypes import promote

    dt = promote(a.dtype, b.dtype, fn)
    B.check_kind(fn, "numeric", a, b)
    if a.device is not b.device:
        raise ValueError(f"{fn}: arrays on different devices ({describe([a, b])})")
    return B.cast(fn, a, dt), B.cast(fn, b, dt)


def matrix_transpose(x: Array, /) -> Array:
    """The view with the last two axes swapped."""
    a = _matrices("xp.matrix_transpose", x)
    perm = (*range(a.rank - 2), a.rank - 1, a.rank - 2)
    return a.view(Permute(perm))


_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def tensordot(x1: Array, x2: Array, /, *, axes: int | tuple[Sequence[int], Sequence[int]] = 2) -> Array:
    """The sum of products over ``axes`` of x1 and x2 (the last n of x1 with the first n of x2)."""
    fn = "xp.tensordot"
    a, b = _promoted(fn, B.the_array(fn, x1), B.the_array(fn, x2))
    if isinstance(axes, int):
        if axes < 0 or axes > min(a.rank, b.rank):
            raise ValueError(f"{fn}: axes = {axes} for {describe([a, b])}")
        ia, ib = list(range(a.rank - axes, a.rank)), list(range(axes))
    elif isinstance(axes, tuple | list) and len(axes) == 2 and all(
            isinstance(side, tuple | list) for side in axes):
        ia = [B.axis_of(fn, a, i) for i in axes[0]]
        ib = [B.axis_of(fn, b, i) for i in axes[1]]
    else:
        raise TypeError(f"{fn}: axes {axes!r} is not an int or two sequences of axes")
    sa = list(_LETTERS[: a.rank])
    sb = list(_LETTERS[a.rank : a.rank + b.rank])
    for i, j in zip(ia, ib, strict=True):
        if a.shape[i] != b.shape[j]:
            raise ValueError(f"{fn}: contracted extents differ ({describe([a, b])})")
        sb[j] = sa[i]
    out = [c for i, c in enumerate(sa) if i not in ia] + [c for j, c in enumerate(sb) if j not in ib]
    shape = tuple([d for i, d in enumerate(a.shape) if i not in ia]
                  + [d for j, d in enumerate(b.shape) if j not in ib])
    if a.numel == 0 or b.numel == 0 or math.prod(a.shape[i] for i in ia) == 0:
        return B.full(fn, shape, 0, a.dtype, a.device)
    return nx.contract(f"{''.join(sa)},{''.join(sb)}->{''.join(out)}", a, b)


def vecdot(x1: Array, x2: Array, /, *, axis: int = -1) -> Array:
    """Σ conj(x1)·x2 along ``axis``, the other axes broadcast."""
    fn = "xp.vecdot"
    u, v = B.the_array(fn, x1), B.the_array(fn, x2)
    if u.rank == 0 or v.rank == 0:
        raise ValueError(f"{fn}: 0-d operands ({describe([u, v])})")
    if u.shape[B.axis_of(fn, u, axis)] != v.shape[B.axis_of(fn, v, axis)]:
        raise ValueError(f"{fn}: the contracted axes differ ({describe([u, v])})")
    a, b = B.operands(fn, u, v, kind="numeric")
    ax = B.axis_of(fn, a, axis)
    if a.dtype.is_complex:
        a = _ew.conj(a)
    return R.sum(_ew.multiply(a, b), axis=ax, dtype=a.dtype)


def diagonal(x: Array, /, *, offset: int = 0) -> Array:
    """The view of each matrix's diagonal ``offset`` (column − row)."""
    return _diagonal("xp.linalg.diagonal", x, offset)


def _diagonal(fn: str, x: Array, offset: int) -> Array:
    a = _matrices(fn, x)
    m, n = a.shape[-2:]
    sr, sc = a.layout.strides[-2:]
    start_r, start_c = (0, offset) if offset >= 0 else (-offset, 0)
    count = max(0, min(m - start_r, n - start_c))
    off = a.layout.offset + (start_r * sr + start_c * sc if count else 0)
    lay = Layout((*a.shape[:-2], count), (*a.layout.strides[:-2], sr + sc), off)
    return Array(a.dtype, lay, a.buffer)


def trace(x: Array, /, *, offset: int = 0, dtype: Any = None) -> Array:
    """The sum of each matrix's diagonal ``offset``."""
    return R.sum(_diagonal("xp.linalg.trace", x, offset), axis=-1, dtype=dtype)


def outer(x1: Array, x2: Array, /) -> Array:
    """x1[i]·x2[j] of two vectors."""
    fn = "xp.linalg.outer"
    a, b = B.the_array(fn, x1), B.the_array(fn, x2)
    if a.rank != 1 or b.rank != 1:
        raise ValueError(f"{fn}: needs vectors, not {describe([a, b])}")
    out: Array = _ew.multiply(a.reshape([a.shape[0], 1]), b.reshape([1, b.shape[0]]))
    return out


def cross(x1: Array, x2: Array, /, *, axis: int = -1) -> Array:
    """The cross product of 3-vectors along ``axis``."""
    fn = "xp.linalg.cross"
    a, b = B.operands(fn, x1, x2, kind="numeric")
    ax = B.axis_of(fn, a, axis)
    if a.shape[ax] != 3:
        raise ValueError(f"{fn}: axis {axis} has extent {a.shape[ax]}, not 3")
    from ._manipulation import concat, take_range

    def c(v: Array, i: int) -> Array:
        return take_range(v, ax, i, i + 1)

    parts = [_ew.subtract(_ew.multiply(c(a, i), c(b, j)), _ew.multiply(c(a, j), c(b, i)))
             for i, j in ((1, 2), (2, 0), (0, 1))]
    return concat(parts, axis=ax)


def cholesky(x: Array, /, *, upper: bool = False) -> Array:
    """The Cholesky factor of each Hermitian positive-definite matrix."""
    a = _square("xp.linalg.cholesky", x)
    B.check_kind("xp.linalg.cholesky", "floating-point", a)
    return nx.cholesky(a, upper=upper)


class EighResult(NamedTuple):
    eigenvalues: Array
    eigenvectors: Array


class QRResult(NamedTuple):
    Q: Array
    R: Array


class SVDResult(NamedTuple):
    U: Array
    S: Array
    Vh: Array


class SlogdetResult(NamedTuple):
    sign: Array
    logabsdet: Array


def eigh(x: Array, /) -> EighResult:
    """Ascending eigenvalues and eigenvectors of each Hermitian matrix."""
    return _eigh("xp.linalg.eigh", x)


def _eigh(fn: str, x: Array) -> EighResult:
    a = _square(fn, x)
    B.check_kind(fn, "floating-point", a)
    w, v = nx.eigh(a)
    return EighResult(w, v)


def eigvalsh(x: Array, /) -> Array:
    """Ascending eigenvalues of each Hermitian matrix."""
    return _eigh("xp.linalg.eigvalsh", x).eigenvalues


def qr(x: Array, /, *, mode: str = "reduced") -> QRResult:
    """Q and R of each matrix."""
    a = _matrices("xp.linalg.qr", x)
    B.check_kind("xp.linalg.qr", "floating-point", a)
    if mode not in ("reduced", "complete"):
        raise ValueError(f"xp.linalg.qr: mode {mode!r} is not 'reduced' or 'complete'")
    q, r = nx.qr(a, mode=mode)
    return QRResult(q, r)


def svd(x: Array, /, *, full_matrices: bool = True) -> SVDResult:
    """U, the singular values descending, and Vᴴ of each matrix."""
    a = _matrices("xp.linalg.svd", x)
    B.check_kind("xp.linalg.svd", "floating-point", a)
    u, s, vh = nx.svd(a, full_matrices=full_matrices)  # type: ignore[misc]
    return SVDResult(u, s, vh)


def svdvals(x: Array, /) -> Array:
    """The singular values of each matrix, descending."""
    a = _matrices("xp.linalg.svdvals", x)
    B.check_kind("xp.linalg.svdvals", "floating-point", a)
    r = nx.svd(a, compute_uv=False)
    assert isinstance(r, Array)
    return r


def _parity(b: Builder, p: Value) -> Value:
    """1 where row i was swapped with another (pivot p at Coord 0 = i), else 0."""
    return b.cast(b.not_equal(p, b.coord(0)), D.int64)


def _lu_parts(fn: str, a: Array) -> tuple[Array, Array, Array]:
    """The LU factors, the diagonal of U and the permutation's sign (−1 or 1)."""
    lu, pivots, _ = nx.lu(a)
    d = diagonal(lu)
    swaps = R.sum(B.elementwise(fn, _parity, pivots), axis=-1)
    sign = B.elementwise(fn, _sign_of_swaps, swaps)
    return lu, d, B.cast(fn, sign, a.dtype)


def _sign_of_swaps(b: Builder, n: Value) -> Value:
    odd = b.not_equal(b.mod(n, b.const(D.int64, 2)), b.const(D.int64, 0))
    return b.where(odd, b.const(D.int64, -1), b.const(D.int64, 1))


def det(x: Array, /) -> Array:
    """The determinant of each square matrix, from its LU factors."""
    fn = "xp.linalg.det"
    a = _square(fn, x)
    B.check_kind(fn, "floating-point", a)
    if a.shape[-1] == 0:
        return B.full(fn, a.shape[:-2], 1, a.dtype, a.device)
    _, d, sign = _lu_parts(fn, a)
    out: Array = _ew.multiply(R.prod(d, axis=-1), sign)
    return out


def slogdet(x: Array, /) -> SlogdetResult:
    """The sign and log |det| of each square matrix."""
    fn = "xp.linalg.slogdet"
    a = _square(fn, x)
    B.check_kind(fn, "floating-point", a)
    if a.shape[-1] == 0:
        return SlogdetResult(B.full(fn, a.shape[:-2], 1, a.dtype, a.device),
                             B.full(fn, a.shape[:-2], 0, a.dtype, a.device))
    _, d, sign = _lu_parts(fn, a)
    s = _ew.multiply(R.prod(_ew.sign(d), axis=-1), sign)
    logabs = R.sum(_ew.log(_ew.abs(d)), axis=-1)
    return SlogdetResult(s, logabs)


def solve(x1: Array, x2: Array, /) -> Array:
    """X with x1·X = x2 (x2 a vector where it is 1-D), from x1's LU factors."""
    fn = "xp.linalg.solve"
    a, b = _promoted(fn, _square(fn, x1), B.the_array(fn, x2))
    vector = b.rank == 1
    rhs = b.reshape([b.shape[0], 1]) if vector else b
    if rhs.rank < 2 or rhs.shape[-2] != a.shape[-1]:
        raise ValueError(f"{fn}: the right-hand side does not fit the matrices ({describe([a, b])})")
    import numpy as np

    try:
        lead = tuple(np.broadcast_shapes(a.shape[:-2], rhs.shape[:-2]))
    except ValueError:
        raise ValueError(f"{fn}: the stacks do not broadcast ({describe([a, b])})") from None
    a = a if a.shape[:-2] == lead else a.view(Broadcast((*lead, *a.shape[-2:])))
    rhs = rhs if rhs.shape[:-2] == lead else rhs.view(Broadcast((*lead, *rhs.shape[-2:])))
    lu, _, perm = nx.lu(B.copy(fn, a))
    idx = perm.reshape([*perm.shape, 1]).view(Broadcast(rhs.shape))
    pb = nx.gather(B.copy(fn, rhs), B.copy(fn, idx), rhs.rank - 2)
    y = nx.solve_triangular(lu, pb, lower=True, unit_diagonal=True)
    out = nx.solve_triangular(lu, y, lower=False)
    return out.reshape([*out.shape[:-2], out.shape[-2]]) if vector else out


def inv(x: Array, /) -> Array:
    """The inverse of each square matrix."""
    fn = "xp.linalg.inv"
    a = _square(fn, x)
    B.check_kind(fn, "floating-point", a)
    from ._creation import eye

    e = eye(a.shape[-1], dtype=a.dtype, device=a.device)
    return solve(a, e.view(Broadcast(a.shape)) if a.rank > 2 else e)


def matrix_power(x: Array, n: int, /) -> Array:
    """x multiplied by itself n times (the inverse's for negative n; I for 0)."""
    fn = "xp.linalg.matrix_power"
    a = _square(fn, x)
    if n == 0:
        from ._creation import eye

        e = eye(a.shape[-1], dtype=a.dtype, device=a.device)
        return B.copy(fn, e.view(Broadcast(a.shape)))
    if n < 0:
        a, n = inv(a), -n
    result: Array | None = None
    base = a
    while n:
        if n & 1:
            result = base if result is None else matmul(result, base)
        n >>= 1
        if n:
            base = matmul(base, base)
    assert result is not None
    return result if result is not a else B.copy(fn, a)


def vector_norm(x: Array, /, *, axis: int | Sequence[int] | None = None, keepdims: bool = False,
                ord: int | float = 2) -> Array:
    """The p-norm of the elements along ``axis`` (inf: max |x|, 0: the count of non-zeros)."""
    fn = "xp.linalg.vector_norm"
    a = B.the_array(fn, x)
    B.check_kind(fn, "floating-point", a)
    if isinstance(ord, bool) or not isinstance(ord, int | float) or math.isnan(ord):
        raise ValueError(f"{fn}: ord {ord!r} of {describe([a])} is not a number")
    m = _ew.abs(a)
    if ord == math.inf:
        return R.max(m, axis=axis, keepdims=keepdims) if m.numel else B.full(fn, (), 0.0, m.dtype, m.device)
    if ord == -math.inf:
        return R.min(m, axis=axis, keepdims=keepdims)
    if ord == 0:
        return B.cast(fn, R.count_nonzero(m, axis=axis, keepdims=keepdims), m.dtype)
    if ord == 1:
        return R.sum(m, axis=axis, keepdims=keepdims)
    if ord == 2:
        out: Array = _ew.sqrt(R.sum(_ew.multiply(m, m), axis=axis, keepdims=keepdims))
        return out
    p = float(ord)
    out = _ew.pow(R.sum(_ew.pow(m, p), axis=axis, keepdims=keepdims), 1.0 / p)
    return out


def matrix_norm(x: Array, /, *, keepdims: bool = False, ord: Any = "fro") -> Array:
    """The matrix norm of each matrix: Frobenius, nuclear, 1, 2, inf and their negatives."""
    fn = "xp.linalg.matrix_norm"
    a = _matrices(fn, x)
    B.check_kind(fn, "floating-point", a)
    r = a.rank
    if ord == "fro":
        out = vector_norm(a, axis=(r - 2, r - 1), keepdims=keepdims)
    elif ord in ("nuc", 2, -2):
        s = svdvals(a)
        out = R.sum(s, axis=-1) if ord == "nuc" else (R.max(s, axis=-1) if ord == 2 else R.min(s, axis=-1))
        if keepdims:
            out = out.reshape([*out.shape, 1, 1])
    elif ord in (1, -1, math.inf, -math.inf):
        sum_axis = r - 2 if ord in (1, -1) else r - 1
        sums = R.sum(_ew.abs(a), axis=sum_axis, keepdims=True)
        pick = R.max if ord in (1, math.inf) else R.min
        out = pick(sums, axis=(r - 2, r - 1), keepdims=keepdims)
    else:
        raise ValueError(f"{fn}: ord {ord!r} is not 'fro', 'nuc', ±1, ±2 or ±inf")
    return out


def _tolerance(fn: str, s: Array, rtol: Any, shape: tuple[int, ...]) -> Array:
    """rtol·max(s) per matrix, rtol defaulting to max(M, N)·eps."""
    from ._dtypes import finfo

    if rtol is None:
        rtol = max(shape[-2:]) * finfo(s.dtype).eps
    top = R.max(s, axis=-1, keepdims=True)
    t = rtol if not isinstance(rtol, Array) else B.cast(fn, rtol, s.dtype).reshape([*rtol.shape, 1])
    out: Array = _ew.multiply(top, t)
    return out


def matrix_rank(x: Array, /, *, rtol: Any = None) -> Array:
    """The number of singular values above rtol·max(s)."""
    fn = "xp.linalg.matrix_rank"
    a = _matrices(fn, x)
    s = svdvals(a)
    if s.shape[-1] == 0:
        return B.full(fn, a.shape[:-2], 0, D.int64, a.device)
    return R.count_nonzero(_ew.greater(s, _tolerance(fn, s, rtol, a.shape)), axis=-1)


def pinv(x: Array, /, *, rtol: Any = None) -> Array:
    """The Moore–Penrose pseudo-inverse, singular values at or below rtol·max(s) dropped."""
    fn = "xp.linalg.pinv"
    a = _matrices(fn, x)
    u, s, vh = svd(a, full_matrices=False)
    if s.shape[-1] == 0:
        return B.full(fn, (*a.shape[:-2], a.shape[-1], a.shape[-2]), 0, a.dtype, a.device)
    keep = _ew.greater(s, _tolerance(fn, s, rtol, a.shape))
    from ._reductions import where

    inv_s = where(keep, _ew.divide(1.0, s), 0.0)
    if inv_s.dtype is not a.dtype:
        inv_s = B.cast(fn, inv_s, a.dtype)
    v = _ew.conj(matrix_transpose(vh)) if a.dtype.is_complex else matrix_transpose(vh)
    uh = _ew.conj(matrix_transpose(u)) if a.dtype.is_complex else matrix_transpose(u)
    scaled = _ew.multiply(v, inv_s.reshape([*inv_s.shape[:-1], 1, inv_s.shape[-1]]))
    return matmul(scaled, uh)

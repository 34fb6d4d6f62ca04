"""Numba kernels of lane order (design.md §6), the host's float Sum and Prod.

A reduction's terms are cut into blocks of ``BLOCK`` terms whose values lane
order fixes: 16 lanes per block, then the blocks combined in a binary tree
(``tree_add``, ``tree_mul``, ``tree_cmul``). Every kernel computes a function
of its input alone, whatever the split of the work: the pool (``pool``) only
decides which thread computes which block, so results are the same bits on
any number of threads.

A block's 16 lane chains run as one vector of 16 lanes, written out in LLVM
IR (``_lane_chains``): Numba left the 16 scalar chains it was given scalar,
at 2 additions a cycle (float32 sums 6.6·10^9 terms a second in cache,
where the vector loop takes 20.7·10^9; Moments of 10^7 float32 5.1 ms → 3.0
ms), and each lane's operations are the same, so the same bits; only a NaN
result's payload may be another of the NaNs met, which ``reduce`` makes
canonical.

Kernels take C-contiguous arrays; none uses fastmath (it would reassociate)
or calls a recursive helper (``cache=True`` breaks on recursion, numba #6061).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, cast

import numpy as np
import numpy.typing as npt
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from .irvectors import I64, Vectors, cgutils

__all__ = ["BLOCK", "cmul", "cprod_blocks", "prod_blocks", "sqdev_blocks", "sum_blocks", "tree_add",
           "tree_cmul", "tree_mul"]

Arr = npt.NDArray[Any]

#: Terms per lane-order block, and lanes per block (design.md §6).
BLOCK: Final = 1024


# ---------------------------------------------------------------------------
# Lane order (design.md §6): blocks of 1024 terms, 16 lanes each
# ---------------------------------------------------------------------------


#: The lanes of a block, and the three chains ``_lane_chains`` computes.
_LANES: Final = 16
_SUM: Final = 0
_SQDEV: Final = 1
_PROD: Final = 2


@intrinsic
def _lane_chains_intrinsic(typingctx: Any, x: Any, at: Any, count: Any, mean: Any, lanes: Any,
                           kind: Any) -> Any:
    """``lanes[l]`` = lane l's chain over the terms ``x.flat[at + t]``, t <
    ``count``, t ≡ l (mod 16), in order of t, in ``lanes``' dtype (each term
    widened exactly first): from +0 adding the terms (``_SUM``) or the
    squares ``(term − mean)·(term − mean)`` (``_SQDEV``, the difference and
    the square each rounded), or from 1 multiplying by the terms (``_PROD``).
    The 16 chains are one vector of 16 lanes: whole vectors of terms, then
    the last ``count mod 16`` by a masked load, the lanes past them kept as
    they were. Each lane's operations are the scalar chain's, the same bits."""
    if not (isinstance(x, types.Array) and x.layout == "C" and isinstance(lanes, types.Array)
            and isinstance(kind, types.IntegerLiteral) and isinstance(x.dtype, types.Float)
            and isinstance(lanes.dtype, types.Float) and x.dtype.bitwidth <= lanes.dtype.bitwidth
            and isinstance(at, types.Integer) and isinstance(count, types.Integer)
            and isinstance(mean, types.Float)):
        return None
    op = kind.literal_value

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        xa, at_, count_, mean_, la = args[:5]
        x_ty, _, _, mean_ty, lanes_ty = sig.args[:5]
        terms_of = Vectors(context, builder, x_ty.dtype, _LANES * x_ty.dtype.bitwidth // 8)
        chains = Vectors(context, builder, lanes_ty.dtype, _LANES * lanes_ty.dtype.bitwidth // 8)
        xp = builder.gep(context.make_array(x_ty)(context, builder, xa).data, [at_])
        acc = cgutils.alloca_once(builder, chains.vty)
        builder.store(chains.splat(1.0 if op == _PROD else 0.0), acc)
        centre = (chains.splat(context.cast(builder, mean_, mean_ty, lanes_ty.dtype))
                  if op == _SQDEV else None)

        def step(where: Any, mask: Any | None) -> None:
            terms = terms_of.load(where, mask)
            if terms_of.fty != chains.fty:
                terms = builder.fpext(terms, chains.vty)
            old = builder.load(acc)
            if op == _SUM:
                new = builder.fadd(old, terms)
            elif op == _PROD:
                new = builder.fmul(old, terms)
            else:
                d = builder.fsub(terms, centre)
                new = builder.fadd(old, builder.fmul(d, d))
            builder.store(new if mask is None else builder.select(mask, new, old), acc)

        sixteen = ir.Constant(I64, _LANES)
        steps = builder.udiv(count_, sixteen)
        with cgutils.for_range(builder, steps) as loop:
            step(builder.gep(xp, [builder.mul(loop.index, sixteen)]), None)
        step(builder.gep(xp, [builder.mul(steps, sixteen)]),
             terms_of.mask(builder.urem(count_, sixteen)))
        lp = context.make_array(lanes_ty)(context, builder, la).data
        chains.store(builder.load(acc), lp, None)
        return context.get_dummy_value()

    return types.none(x, at, count, mean, lanes, kind), codegen


_lane_chains = cast("Callable[..., None]", _lane_chains_intrinsic)


@njit(inline="always")
def _halving_tree(lanes: Arr, multiply: bool) -> Any:  # pragma: no cover - compiled
    """The block's value from its 16 lanes: lane l combined with lane l + 8
    for l < 8, then with l + 4, + 2, + 1 (each a sum, or a product where
    ``multiply``, rounded in the lanes' dtype); overwrites ``lanes``."""
    half = _LANES // 2
    while half >= 1:
        for i in range(half):
            lanes[i] = lanes[i] * lanes[i + half] if multiply else lanes[i] + lanes[i + half]
        half //= 2
    return lanes[0]


@njit(nogil=True, cache=True)
def sum_blocks(x: Arr, out: Arr) -> None:  # pragma: no cover - compiled
    """``out[r, b]`` = the lane-order sum of block ``b`` of row ``r`` of ``x``,
    each lane chained from +0 in ``out``'s dtype (terms widen exactly)."""
    n = x.shape[1]
    lanes = np.empty(_LANES, out.dtype)
    for r in range(x.shape[0]):
        for b in range(out.shape[1]):
            lo = b * BLOCK
            _lane_chains(x, r * n + lo, min(lo + BLOCK, n) - lo, 0.0, lanes, _SUM)
            out[r, b] = _halving_tree(lanes, False)


@njit(nogil=True, cache=True)
def sqdev_blocks(x: Arr, mean: Arr, out: Arr) -> None:  # pragma: no cover - compiled
    """``out[r, b]`` = the lane-order sum over block ``b`` of row ``r`` of
    ``(x − mean[r])²``, computed in float64 (``mean`` and ``out`` float64)."""
    n = x.shape[1]
    lanes = np.empty(_LANES, np.float64)
    for r in range(x.shape[0]):
        for b in range(out.shape[1]):
            lo = b * BLOCK
            _lane_chains(x, r * n + lo, min(lo + BLOCK, n) - lo, mean[r], lanes, _SQDEV)
            out[r, b] = _halving_tree(lanes, False)


@njit(nogil=True, cache=True)
def prod_blocks(x: Arr, out: Arr) -> None:  # pragma: no cover - compiled
    """``out[r, b]`` = the lane-order product of block ``b`` of row ``r`` of
    real ``x``, each lane chained from 1 (the same bits as from its first
    term: 1·x is x)."""
    n = x.shape[1]
    lanes = np.empty(_LANES, out.dtype)
    for r in range(x.shape[0]):
        for b in range(out.shape[1]):
            lo = b * BLOCK
            _lane_chains(x, r * n + lo, min(lo + BLOCK, n) - lo, 0.0, lanes, _PROD)
            out[r, b] = _halving_tree(lanes, True)


@njit(inline="always")
def cmul(ar: Any, ai: Any, br: Any, bi: Any) -> tuple[Any, Any]:  # pragma: no cover
    """Prog's complex Mul: ``(ar·br − ai·bi) + i(ar·bi + ai·br)``, each product
    and sum rounded to the parts' dtype, unfused."""
    return ar * br - ai * bi, ar * bi + ai * br


@njit(nogil=True, cache=True)
def cprod_blocks(re: Arr, im: Arr, out_re: Arr, out_im: Arr) -> None:  # pragma: no cover
    """The lane-order complex product of each block of each row, the terms'
    parts in ``re`` and ``im``: each lane chained from its first term (never
    from 1), a lane without terms left out of the lane combination."""
    n = re.shape[1]
    lr = np.zeros(16, re.dtype)
    li = np.zeros(16, re.dtype)
    for r in range(re.shape[0]):
        for b in range(out_re.shape[1]):
            lo = b * 1024
            m = min(lo + 1024, n) - lo
            for t in range(m):
                lane = t % 16
                xr = re[r, lo + t]
                xi = im[r, lo + t]
                if t < 16:
                    lr[lane] = xr
                    li[lane] = xi
                else:
                    lr[lane], li[lane] = cmul(lr[lane], li[lane], xr, xi)
            present = min(m, 16)
            half = 8
            while half >= 1:
                for i in range(half):
                    if i + half < present:
                        lr[i], li[i] = cmul(lr[i], li[i], lr[i + half], li[i + half])
                present = min(present, half)
                half //= 2
            out_re[r, b] = lr[0]
            out_im[r, b] = li[0]


@njit(inline="always")
def _segments(nb: int, starts: Arr) -> int:  # pragma: no cover - compiled
    """Fill ``starts`` with the starts of the perfect subtrees a block tree of
    ``nb`` leaves splits into (the binary digits of ``nb``, largest first),
    and ``starts[k]`` with the end; returns k, their count."""
    k = 0
    s = 0
    p = 1
    while p * 2 <= nb:
        p *= 2
    while p >= 1:
        if nb & p:
            starts[k] = s
            s += p
            k += 1
        p //= 2
    starts[k] = s
    return k


@njit(nogil=True, cache=True)
def tree_add(blocks: Arr) -> None:  # pragma: no cover - compiled
    """Sum each row of ``blocks`` into its column 0 by the block tree: a
    binary tree whose left part is the largest power of two below the count.
    That tree is the binary digits' perfect subtrees, largest first,
    combined from the right."""
    starts = np.zeros(65, np.int64)
    for r in range(blocks.shape[0]):
        v = blocks[r]
        k = _segments(v.size, starts)
        for g in range(k):
            s = starts[g]
            size = starts[g + 1] - s
            step = 1
            while step < size:
                for i in range(s, s + size, 2 * step):
                    v[i] = v[i] + v[i + step]
                step *= 2
        for g in range(k - 2, -1, -1):
            v[starts[g]] = v[starts[g]] + v[starts[g + 1]]


@njit(nogil=True, cache=True)
def tree_mul(blocks: Arr) -> None:  # pragma: no cover - compiled
    """As ``tree_add`` with multiplication."""
    starts = np.zeros(65, np.int64)
    for r in range(blocks.shape[0]):
        v = blocks[r]
        k = _segments(v.size, starts)
        for g in range(k):
            s = starts[g]
            size = starts[g + 1] - s
            step = 1
            while step < size:
                for i in range(s, s + size, 2 * step):
                    v[i] = v[i] * v[i + step]
                step *= 2
        for g in range(k - 2, -1, -1):
            v[starts[g]] = v[starts[g]] * v[starts[g + 1]]


@njit(nogil=True, cache=True)
def tree_cmul(re: Arr, im: Arr) -> None:  # pragma: no cover - compiled
    """As ``tree_mul`` with Prog's complex Mul on parts ``re`` and ``im``."""
    starts = np.zeros(65, np.int64)
    for r in range(re.shape[0]):
        vr = re[r]
        vi = im[r]
        k = _segments(vr.size, starts)
        for g in range(k):
            s = starts[g]
            size = starts[g + 1] - s
            step = 1
            while step < size:
                for i in range(s, s + size, 2 * step):
                    vr[i], vi[i] = cmul(vr[i], vi[i], vr[i + step], vi[i + step])
                step *= 2
        for g in range(k - 2, -1, -1):
            a, c = starts[g], starts[g + 1]
            vr[a], vi[a] = cmul(vr[a], vi[a], vr[c], vi[c])

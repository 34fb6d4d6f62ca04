"""The host library's ``fold`` hook: at each element of its destination, the
x elements a padded load reads from it, added tap by tap in C order, from
+0, in the dtype Add computes in, rounded once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from nxkernel_core import dtype as D
from nxkernel_core import spec as S
from nxkernel_core.array import Array
from nxkernel_core.dtype import Dtype

from . import views
from .rowterms import round_float, wrap_int

__all__ = ["fold"]

Arr = npt.NDArray[Any]


# ---------------------------------------------------------------------------
# The fold kernel
# ---------------------------------------------------------------------------


def _taps(d: int, lo: int, interior: int, count: int, step: int, tap: int,
          dilation: int) -> tuple[slice, slice] | None:
    """Along one axis, for one tap: the operand indices a load reads at that
    tap and the window positions reading them, as slices; None for none.
    Window w reads padded position w·step + tap·dilation, operand index p
    lies at lo + p·(interior + 1)."""
    w = np.arange(count)
    pos = w * step + tap * dilation - lo
    ok = (pos >= 0) & (pos % (interior + 1) == 0) & (pos // (interior + 1) < d)
    w = w[ok]
    if w.size == 0:
        return None
    p = pos[ok] // (interior + 1)
    # The solutions of a congruence in a range: both progressions are arithmetic.
    ws = int(w[1] - w[0]) if w.size > 1 else 1
    ps = int(p[1] - p[0]) if p.size > 1 else 1
    return (slice(int(p[0]), int(p[-1]) + 1, ps), slice(int(w[0]), int(w[-1]) + 1, ws))


def fold(spec: S.Fold, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
    """``S.fold`` of a call that fits, the door passed: each element of dst is
    +0 plus every element of x the padded load by ``spec.pad`` reads from it,
    added in C order of the taps, in the dtype Add computes in (float32 for
    the narrow floats), rounded once."""
    (x,), (dst,) = operands, dsts
    views.store(dst, _fold_values(spec, x.dtype, views.read(x)))


def _fold_values(spec: S.Fold, dt: Dtype, xv: Arr) -> Arr:
    """The fold of host elements ``xv`` into ``spec.shape``, in ``dt``'s host
    elements."""
    acc_dt = D.carrier(dt).numpy_dtype
    acc = np.zeros(spec.shape, acc_dt)
    pad = spec.pad
    rank = len(spec.shape)
    window = {w.axis: (k, w) for k, w in enumerate(pad.windows)}
    sizes = [w.size for w in pad.windows]
    for taps in np.ndindex(*sizes):
        dst_index: list[slice] = []
        src_index: list[slice | int] = []
        for ax in range(rank):
            d, lo, interior = spec.shape[ax], pad.lo[ax], pad.interior[ax]
            if ax in window:
                k, w = window[ax]
                cut = _taps(d, lo, interior, xv.shape[ax], w.step, taps[k], w.dilation)
            else:
                cut = _taps(d, lo, interior, xv.shape[ax], 1, 0, 0)
            if cut is None:
                break
            dst_index.append(cut[0])
            src_index.append(cut[1])
        else:
            part = xv[(*src_index, *taps)]
            # One tap reads each operand index at most once, so a strided
            # in-place add is the C-order addition of this tap.
            with np.errstate(all="ignore"):
                acc[tuple(dst_index)] += part.astype(acc_dt, copy=False)
    if dt.is_float:
        return round_float(dt, acc)
    if dt.is_int:
        return wrap_int(dt, acc)
    return acc

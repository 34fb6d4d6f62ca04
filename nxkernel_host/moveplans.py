"""The host's moves prepared per signature: gather, range gather, scatter and
assemble, for the library's own entry (``DIRECT``) and the caller's warm
path (``PREPARED``).

A small move's call spent most of its time making views: each array's NumPy
view, its bits view, its split around the axis, its read-only copy, then
the pool's hand-out. For arrays of one byte-wide, non-complex dtype, each
contiguous and non-empty, a prepared move views each array's bytes once, as
the unsigned bits (or values) of the split shape the loop takes, and calls
the loop ``gathers``' hook would call on the same views: the same loop (looked
up in ``gathers`` at each call), the same order, so the same bits. Calls the
pool would share (``pool.MIN_PARALLEL`` elements or more), and every other
signature, take the hook itself.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, cast, final

import numpy as np
import numpy.typing as npt

from nxkernel_core import spec as S
from nxkernel_core.array import Array
from nxkernel_core.dtype import Dtype, Kind
from nxkernel_core.fits import move_misfit
from nxkernel_core.layout import Layout
from nxkernel_core.prog import element

from . import gathers as G
from . import pool
from .family import Hook, Prepare
from .gathers import assemble, gather, is_whole, range_gather, region_slices, scatter
from .kindbase import UINT_BY_SIZE
from .movebits import dtype_has_nan, nan_key_width, part_bits, read_only, sort_keys, split_shape
from .views import read

__all__ = ["DIRECT", "PREPARED"]

NDArray = npt.NDArray[Any]

#: A signature's arrays: (dtype, layout) of each destination or operand.
Signature = tuple[tuple[Dtype, Layout], ...]


def _plain(*arrays: tuple[Dtype, Layout]) -> bool:
    """Whether every array is of a byte-wide, non-complex dtype, contiguous
    and non-empty: one view of its bytes, of one part, reaches its elements."""
    return all(not dt.is_sub_byte and dt.kind is not Kind.COMPLEX and lay.is_contiguous()
               and lay.numel > 0 for dt, lay in arrays)


def _start(dt: Dtype, layout: Layout) -> int:
    """The byte where a contiguous array's first element lies in its buffer."""
    return layout.offset * dt.itemsize


def _frozen_view(shape: tuple[int, ...], t: np.dtype[Any], a: Array, start: int) -> NDArray:
    """A read-only view of ``a``'s bytes from ``start`` (in its buffer) as
    ``shape`` of ``t``: what ``split_operand`` gives a contiguous operand."""
    buf = a.buffer
    view = _ndarray(shape, t, buf.memory.host_bytes, buf.offset + start)
    view.flags.writeable = False
    return view


def _view(shape: tuple[int, ...], t: np.dtype[Any], a: Array, start: int) -> NDArray:
    """A writable view of destination ``a``'s bytes, as ``_frozen_view``."""
    buf = a.buffer
    return _ndarray(shape, t, buf.memory.host_bytes, buf.offset + start)


_ndarray: Final = np.ndarray
_INT64: Final = np.dtype(np.int64)


def prepare_gather(spec: S.Gather, dsts: Signature, operands: Signature) -> Hook:
    """``gather`` prepared for one signature (see the module's doc): the same bits."""
    (dt, d_lay), = dsts
    (i_dt, i_lay), (_, x_lay) = operands
    if not _plain(*dsts, *operands):
        return gather
    outer, n, inner = split_shape(i_lay.shape, spec.axis)
    d = x_lay.shape[spec.axis]
    t = np.dtype(UINT_BY_SIZE[dt.itemsize])
    i0, x0, d0 = _start(i_dt, i_lay), _start(dt, x_lay), _start(dt, d_lay)
    if inner != 1:
        shapes = (outer, n, inner), (outer, d, inner)

        def rows3(sp: S.Gather, ds: Sequence[Array], ops: Sequence[Array]) -> None:
            G.gather_loop(_frozen_view(shapes[1], t, ops[1], x0),
                          _frozen_view(shapes[0], _INT64, ops[0], i0),
                          _view(shapes[0], t, ds[0], d0))

        return rows3
    at, of = (outer, n), (outer, d)
    elements = outer * n

    def rows(sp: S.Gather, ds: Sequence[Array], ops: Sequence[Array]) -> None:
        if elements >= pool.MIN_PARALLEL:
            gather(sp, ds, ops)
            return
        G.gather_rows(_frozen_view(of, t, ops[1], x0), _frozen_view(at, _INT64, ops[0], i0),
                      _view(at, t, ds[0], d0))

    return rows


def prepare_range_gather(spec: S.RangeGather, dsts: Signature, operands: Signature) -> Hook:
    """``range_gather`` prepared for one signature (see the module's doc): the same bits."""
    (dt, d_lay), = dsts
    (s_dt, s_lay), (_, x_lay) = operands
    if not _plain(*dsts, *operands):
        return range_gather
    outer, n, inner = split_shape(s_lay.shape, spec.axis)
    at, of = (outer, n, inner), (outer, x_lay.shape[spec.axis], inner)
    into = (outer, n, spec.run, inner)
    t = np.dtype(UINT_BY_SIZE[dt.itemsize])
    s0, x0, d0 = _start(s_dt, s_lay), _start(dt, x_lay), _start(dt, d_lay)

    def runs(sp: S.RangeGather, ds: Sequence[Array], ops: Sequence[Array]) -> None:
        G.range_gather_loop(_frozen_view(of, t, ops[1], x0),
                            _frozen_view(at, _INT64, ops[0], s0), _view(into, t, ds[0], d0))

    return runs


def prepare_scatter(spec: S.Scatter, dsts: Signature, operands: Signature) -> Hook:
    """``scatter`` prepared for one signature (see the module's doc): Set,
    Max, Min, and Add at a dtype of its own compute width (integers,
    float32, float64) of rows of an inner extent 1; the same bits."""
    (dt, d_lay), = dsts
    (_, into_lay), (i_dt, i_lay), (_, u_lay) = operands
    add = spec.combine is S.Combine.ADD
    if not _plain(*dsts, *operands) or (add and dt.kind is Kind.FLOAT and dt.bits < 32):
        return scatter
    outer, n, inner = split_shape(i_lay.shape, spec.axis)
    d = d_lay.shape[spec.axis]
    if add and inner != 1:
        return scatter
    bits = np.dtype(UINT_BY_SIZE[dt.itemsize])
    # Add sums floats as their values, integers on their bits (``_scatter_add``).
    t = dt.numpy_dtype if add and dt.kind is Kind.FLOAT else bits
    zero, whole = t.type(0), (np.int64(0), np.int64(d))
    everything = (math.prod(d_lay.shape),)
    into0, i0, u0, d0 = (_start(dt, into_lay), _start(i_dt, i_lay), _start(dt, u_lay),
                         _start(dt, d_lay))
    # into identical to dst (its bits already there) is the same memory and
    # byte there, the layouts being equal.
    same_layout = into_lay == d_lay
    at, of = (outer, n, inner), (outer, d, inner)
    elements = outer * n

    def start(ds: Sequence[Array], ops: Sequence[Array]) -> None:
        """dst holds into's bits (``scatter``'s first step)."""
        dst, into = ds[0], ops[0]
        if not (same_layout and into.buffer.memory is dst.buffer.memory
                and into.buffer.offset + into0 == dst.buffer.offset + d0):
            _view(everything, bits, dst, d0)[...] = _frozen_view(everything, bits, into, into0)

    if spec.combine is S.Combine.MAX or spec.combine is S.Combine.MIN:
        return _prepared_extreme(spec, dt, start, (into_lay.shape, into0), (u_lay.shape, u0),
                                 (at, i0), (of, d0))
    if not add:
        def set_rows(sp: S.Scatter, ds: Sequence[Array], ops: Sequence[Array]) -> None:
            start(ds, ops)
            G.scatter_set_loop(_view(of, bits, ds[0], d0), _frozen_view(at, _INT64, ops[1], i0),
                               _frozen_view(at, bits, ops[2], u0))

        return set_rows
    at2, of2 = (outer, n), (outer, d)

    def add_rows(sp: S.Scatter, ds: Sequence[Array], ops: Sequence[Array]) -> None:
        if elements >= pool.MIN_PARALLEL:
            scatter(sp, ds, ops)
            return
        start(ds, ops)
        G.scatter_add_rows(_view(of2, t, ds[0], d0), _frozen_view(at2, _INT64, ops[1], i0),
                           _frozen_view(at2, t, ops[2], u0), zero, *whole)

    return add_rows


def _prepared_extreme(spec: S.Scatter, dt: Dtype,
                      start: Callable[[Sequence[Array], Sequence[Array]], None],
                      into: tuple[tuple[int, ...], int], updates: tuple[tuple[int, ...], int],
                      index: tuple[tuple[int, int, int], int], dst: tuple[tuple[int, int, int], int]
                      ) -> Hook:
    """``prepare_scatter``'s Max and Min (``_scatter_extreme`` on views made
    straight): each array's (shape, first byte), index and dst split as
    ``[outer, ·, inner]``."""
    values, bits = dt.numpy_dtype, np.dtype(UINT_BY_SIZE[dt.itemsize])
    axis, maximum, has_nan = spec.axis, spec.combine is S.Combine.MAX, dtype_has_nan(dt)
    nan_width, boolean = nan_key_width(dt), dt.kind is Kind.BOOLEAN
    (into_shape, into0), (u_shape, u0), (at, i0), (of, d0) = into, updates, index, dst
    u_split = split_shape(u_shape, axis)
    # One order key per element (no complex dtype here), of the bits' type:
    # the second keys ``key_pair`` gives are zeros, the updates' a read-only
    # broadcast (made once), the running extremes' fresh zeros.
    nan_key, upd2 = bits.type((1 << nan_width) - 1), np.broadcast_to(bits.type(0), u_split)

    def extreme(sp: S.Scatter, ds: Sequence[Array], ops: Sequence[Array]) -> None:
        start(ds, ops)
        (into_keys,) = sort_keys(dt, _frozen_view(into_shape, values, ops[0], into0))
        cur1, cur2 = np.array(np.reshape(into_keys, of)), np.zeros(of, bits)
        (upd_keys,) = sort_keys(dt, _frozen_view(u_shape, values, ops[2], u0))
        upd1 = read_only(np.reshape(upd_keys, u_split))
        winner = np.full(of, -2, np.int64)
        G.scatter_extreme_loop(cur1, cur2, _frozen_view(at, _INT64, ops[1], i0), upd1, upd2,
                               winner, maximum, has_nan, nan_key)
        out = _view(of, bits, ds[0], d0)
        if boolean:
            # Or and And: a reached position holds its winner's key (0 or 1).
            reached = winner >= -1
            out[reached] = cur1[reached].astype(np.uint8)
            return
        G.take_winners_loop(out, _frozen_view(u_split, bits, ops[2], u0), winner)

    return extreme


def prepare_assemble(spec: S.Assemble, dsts: Signature, operands: Signature) -> Hook:
    """``assemble`` prepared for one signature (see the module's doc): the same bits."""
    (dt, d_lay), = dsts
    if not _plain(*dsts) or dt.kind is Kind.COMPLEX or any(p.is_sub_byte for p, _ in operands):
        return assemble
    t = np.dtype(UINT_BY_SIZE[dt.itemsize])
    whole = [i for i, region in enumerate(spec.regions) if is_whole(region, spec.shape)]
    first = whole[-1] if whole else 0
    fill = None if whole else part_bits(np.asarray(element(dt, spec.fill)))[0]
    d0 = _start(dt, d_lay)
    # Each piece from ``first`` that holds an element: its place in the
    # operands, its slices, and whether it may be dst itself over the whole
    # result in order (then, where it is, its bits are there already).
    pieces = [(k, region_slices(region), lay == d_lay and all(r.start == 0 and r.step == 1
                                                              for r in region))
              for k, ((_, lay), region) in enumerate(zip(operands, spec.regions, strict=True))
              if k >= first and lay.numel > 0]
    shape = spec.shape

    def pasted(sp: S.Assemble, ds: Sequence[Array], ops: Sequence[Array]) -> None:
        dst = ds[0]
        out = _view(shape, t, dst, d0)
        if fill is not None:
            out[...] = fill
        for k, sl, maybe_dst in pieces:
            piece = ops[k]
            if maybe_dst and piece.identical(dst):
                continue
            out[sl] = read(piece).view(t)

    return pasted


@final
@dataclass(frozen=True, slots=True)
class _Pair:
    """An array of a signature as a fit check reads it: its dtype and layout."""

    dtype: Dtype
    layout: Layout

    @property
    def shape(self) -> tuple[int, ...]:
        return self.layout.shape


def _fitting(prepare: Prepare) -> Prepare:
    """``prepare`` for the caller's warm path, where the plan checked the shape
    rules but not the moves' dtype rules: no prepared form (the library's
    entry answers the refusal) for a signature that does not fit."""

    def prepared(spec: Any, dsts: Signature, operands: Signature) -> Hook | None:
        # The fit check reads what a pair holds (counts, dtypes, shapes, layouts).
        pairs = cast("tuple[list[Array], list[Array]]", ([_Pair(*p) for p in dsts],
                                                         [_Pair(*p) for p in operands]))
        if move_misfit(spec, *pairs) is not None:
            return None
        return prepare(spec, dsts, operands)

    return prepared


#: The moves prepared per signature, for the library's own entry (after its
#: fit check): each computes any call of its signature.
DIRECT: Final[dict[str, Prepare]] = {"gather": prepare_gather, "range_gather": prepare_range_gather,
                 "scatter": prepare_scatter, "assemble": prepare_assemble}
#: The same for the caller's warm path, each declining a signature that
#: does not fit.
PREPARED: Final[dict[str, Prepare]] = {k: _fitting(prep) for k, prep in DIRECT.items()}

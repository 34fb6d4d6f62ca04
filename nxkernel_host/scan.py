"""The host library's ``scan`` hook: rows of terms (``rowterms``) scanned row
by row. Float Sum and Prod scans, and Logsumexp and Moments scans, by the
odd/even network (``network``); integer, boolean, Max, Min and Arg scans
exactly by NumPy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from nxkernel_core import dtype as D
from nxkernel_core import spec as S
from nxkernel_core.array import Array
from nxkernel_core.dtype import Dtype
from nxkernel_core.layout import Layout

from . import network as N
from . import smallrows, views
from .family import Hook
from .moments import moments_scan
from .reduce import extremum_keys
from .rowterms import (
    Outputs,
    canonical_nans,
    copied_input,
    float_terms,
    loop_shape,
    nans_made_canonical,
    round_complex,
    round_float,
    wrap_int,
)

__all__ = ["SMALL_SCAN", "prepare_scan", "scan"]

Arr = npt.NDArray[Any]

#: Terms up to which a prepared float Sum or Prod scan takes one compiled
#: call (``smallrows.sum_scans``: about 1.5 ns a term), not the steps before
#: the chunked kernel (about 15 µs a call, then 0.5 to 1 ns a term; measured,
#: float32 and float64: 4096 terms 6–8 µs against 18–20, 16384 terms 23–32
#: µs against 23–31).
SMALL_SCAN: Final = 1 << 13


# ---------------------------------------------------------------------------
# Scans of rows
# ---------------------------------------------------------------------------


def _with_carry(carry: Arr | None, rows: Arr, dtype: npt.DTypeLike) -> Arr:
    """Rows of states in ``dtype``, C-contiguous, the carry (where given) as
    state 0 before each row's terms."""
    if carry is None:
        return np.ascontiguousarray(rows, dtype=dtype)
    out = np.empty((rows.shape[0], rows.shape[1] + 1), dtype)
    out[:, 0] = carry
    out[:, 1:] = rows
    return out


def _from_positive_zero(states: Arr, rows: Arr) -> Arr:
    """A Sum scan's float states without a carry, from +0 (Monoid Sum adds
    its terms from +0): state 0 is +0 + term 0, which is term 0 but for −0,
    +0. Copies ``states`` before the change where they may be ``rows``'."""
    if states.shape[0] == 1 and states.shape[1] > 0:
        # One row (a cumsum's): a Python float's test costs a tenth of
        # NumPy's four calls on a cache the scan has just flushed.
        v = float(states[0, 0])
        if v != 0 or math.copysign(1.0, v) > 0:
            return states
    first = states[:, :1]
    if not ((first == 0) & np.signbit(first)).any():
        return states
    if np.may_share_memory(states, rows):
        states = states.copy()
    states[:, :1] += 0
    return states


def _running_positions(keys: Arr, is_max: bool) -> Arr:
    """Per row and index, the first position up to it with the greatest (or
    least) key so far."""
    r, m = keys.shape
    acc = np.maximum.accumulate(keys, axis=1) if is_max else np.minimum.accumulate(keys, axis=1)
    new = np.ones((r, m), bool)
    new[:, 1:] = keys[:, 1:] > acc[:, :-1] if is_max else keys[:, 1:] < acc[:, :-1]
    return np.maximum.accumulate(np.where(new, np.arange(m), 0), axis=1)


def _network(kind: int, states: Arr) -> Arr:
    """The odd/even network's scan of ``(components, rows, m)`` states."""
    out = np.empty_like(states)
    N.network_scan(kind, np.ascontiguousarray(states), out)
    return out


def _scan_rows(red: S.Reduction, term: Dtype, dt: Dtype, rows: Arr, carry: Arr | None,
               out: Arr | None) -> list[Arr]:
    """The inclusive scans of each row of ``rows`` (in scan order) after
    ``carry`` (state 0), in the destinations' host elements. ``out``, where
    given, is a C-contiguous ``(rows, m)`` view of the first destination a
    float Sum, Prod or Logsumexp scan may write into directly."""
    r, m = rows.shape
    drop = slice(1, None) if carry is not None else slice(None)
    ccar = D.carrier(term)
    if red is S.Monoid.SUM or red is S.Monoid.PROD:
        mul = red is S.Monoid.PROD
        if term.is_float:
            states = _with_carry(carry, rows, ccar.numpy_dtype)
            if carry is None and not mul:
                states = _from_positive_zero(states, rows)
            if out is not None and carry is None and dt is ccar:
                # The destination holds the carrier: the network writes there.
                N.real_scan(mul, states, out)
                return [out]
            res = np.empty_like(states)
            N.real_scan(mul, states, res)
            return [round_float(dt, res[:, drop])]
        if term.is_complex:
            part = np.float32 if term is D.complex64 else np.float64
            re = _with_carry(None if carry is None else carry.real, rows.real, part)
            im = _with_carry(None if carry is None else carry.imag, rows.imag, part)
            if carry is None and not mul:
                re, im = _from_positive_zero(re, rows), _from_positive_zero(im, rows)
            if mul:
                res = _network(N.CMUL, np.stack([re, im]))
                ore, oim = res[0], res[1]
            else:
                ore, oim = np.empty_like(re), np.empty_like(im)
                N.real_scan(False, re, ore)
                N.real_scan(False, im, oim)
            return [round_complex(dt, ore[:, drop], oim[:, drop])]
        wide = _with_carry(carry, rows, ccar.numpy_dtype)
        # Integers wrap in their carrier: every order gives the same bits.
        acc = np.cumsum(wide, axis=1, dtype=wide.dtype) if not mul else \
            np.cumprod(wide, axis=1, dtype=wide.dtype)
        return [wrap_int(dt, acc[:, drop])]
    if isinstance(red, S.Logsumexp):
        states = _with_carry(carry, float_terms(rows, term), np.float64)
        if out is not None and carry is None and (dt is D.float32 or dt is D.float64):
            # The network writes the destination, each float64 result rounded
            # once as it is stored (an IEEE conversion, as ``round_float`` makes).
            N.chunk_scan(N.LSE, states, out)
            return [out]
        res = np.empty_like(states)
        N.chunk_scan(N.LSE, states, res)
        return [round_float(dt, res[:, drop])]
    if isinstance(red, S.Moments):
        # The mean and variance straight into float32 or float64 (one IEEE
        # rounding each), else in float64 and rounded by ``round_float``.
        into = dt if dt is D.float32 or dt is D.float64 else D.float64
        mean = np.empty((r, m), into.numpy_dtype)
        var = np.empty((r, m), into.numpy_dtype)
        moments_scan(np.ascontiguousarray(float_terms(rows, term)),
                     None if carry is None else carry.astype(np.float64), mean, var)
        return [round_float(dt, mean), round_float(dt, var)]
    is_max = red is S.Monoid.MAX or (isinstance(red, S.Arg) and red.extreme is S.Extreme.MAX)
    if carry is None:
        pos = _running_positions(extremum_keys(rows, term, is_max), is_max)
        if term.is_bool:
            truth = extremum_keys(rows, term, is_max)
            value = (np.logical_or.accumulate(truth, axis=1) if is_max
                     else np.logical_and.accumulate(truth, axis=1))
        else:
            value = np.take_along_axis(rows, pos, axis=1)
            if term is D.float8_e5m2:
                # The extreme rounds once into the destination, as after a
                # carry: no store makes an infinity of e5m2, which saturates.
                value = np.where(np.isinf(value), round_float(dt, float_terms(value, term)), value)
        return [value, pos.astype(np.int64)] if isinstance(red, S.Arg) else [value]
    # A Max or Min scan after a carry: the carry (in the carrier) is state 0.
    src = _with_carry(carry, float_terms(rows, term) if term.is_float else rows,
                      ccar.numpy_dtype)
    pos = _running_positions(extremum_keys(src, ccar, is_max), is_max)
    if term.is_bool:
        truth = extremum_keys(src, ccar, is_max)
        value = (np.logical_or.accumulate(truth, axis=1) if is_max
                 else np.logical_and.accumulate(truth, axis=1))
        return [value[:, 1:]]
    value = np.take_along_axis(src, pos, axis=1)[:, 1:]
    if term.is_float:
        return [round_float(dt, value)]
    return [wrap_int(dt, value)]


# ---------------------------------------------------------------------------
# The scan kernel
# ---------------------------------------------------------------------------


def prepare_scan(spec: S.Scan, dsts: tuple[tuple[Dtype, Layout], ...],
                 operands: tuple[tuple[Dtype, Layout], ...]) -> Hook:
    """``scan`` prepared for one signature of a call that fits (the caller's
    warm path): the caller's plan has checked the fit once for the
    signature, its destinations are fresh (the door's claims hold nothing
    back) and the host declines no scan, so the steps a call takes before
    the kernel (``nx.cumsum`` of 8 elements: about 100 µs) are not taken
    again. A small float Sum or Prod scan takes one compiled call
    (``_prepared_rows``), an integer one NumPy's (``_prepared_exact``); any
    other, the kernel itself. Each computes what the kernel computes behind
    those steps, the same bits."""
    return _prepared_rows(spec, operands) or _prepared_exact(spec, dsts, operands) or scan


def _prepared_rows(spec: S.Scan, operands: tuple[tuple[Dtype, Layout], ...]) -> Hook | None:
    """The Sum or Prod scan of a float32 or float64 operand into its own dtype,
    contiguous, along its last axis, forward or reverse, without a carry,
    of at most ``SMALL_SCAN`` terms: ``smallrows.sum_scans`` from the
    operand's bytes into the destination's, the states ``_scan_rows`` makes
    and the network's results of them, so the same bits. None for any other
    scan."""
    if spec.carry or len(operands) != 1:
        return None
    (dt, layout), = operands
    if (spec.reduction not in (S.Monoid.SUM, S.Monoid.PROD)
            or dt not in (D.float32, D.float64) or spec.dtype is not dt
            or not isinstance(spec.loads[0], S.Plain) or copied_input(spec.prog, spec.output) != 0
            or not layout.is_contiguous() or not 0 < layout.numel <= SMALL_SCAN
            or spec.axis != len(layout.shape) - 1):
        return None
    m = layout.shape[-1]
    rows = layout.numel // m
    mul = spec.reduction is S.Monoid.PROD
    wide = dt is D.float64
    reverse = spec.reverse
    first = layout.offset * dt.numpy_dtype.itemsize
    kernel = smallrows.sum_scans

    def rows_scan(sp: S.Scan, ds: Sequence[Array], ops: Sequence[Array]) -> None:
        buf = ops[0].buffer
        kernel(mul, wide, reverse, buf.memory.host_bytes, buf.offset + first, rows, m,  # type: ignore[arg-type]
               ds[0].buffer.memory.host_bytes)  # type: ignore[arg-type]

    return rows_scan


def _prepared_exact(spec: S.Scan, dsts: tuple[tuple[Dtype, Layout], ...],
                    operands: tuple[tuple[Dtype, Layout], ...]) -> Hook | None:
    """The Sum or Prod scan of a byte-wide integer operand into its own dtype
    (its carrier), without a carry: NumPy's scan in the carrier, read from
    the operand's view and written into the destination's, as ``_scan_rows``
    scans integers (they wrap: every order gives the same bits). None for
    any other scan."""
    if spec.carry or len(operands) != 1:
        return None
    (dt, layout), = operands
    if (spec.reduction not in (S.Monoid.SUM, S.Monoid.PROD) or not dt.is_int or dt.is_sub_byte
            or spec.dtype is not dt or not isinstance(spec.loads[0], S.Plain)
            or copied_input(spec.prog, spec.output) != 0 or layout.numel == 0):
        return None
    read = views.reader(dt, layout)
    write = views.fresh(dt, dsts[0][1])
    axis, reverse, t = spec.axis, spec.reverse, dt.numpy_dtype
    accumulate = np.cumsum if spec.reduction is S.Monoid.SUM else np.cumprod

    def exact_scan(sp: S.Scan, ds: Sequence[Array], ops: Sequence[Array]) -> None:
        y, out = read(ops[0]), write(ds[0])
        if reverse:
            y, out = np.flip(y, axis), np.flip(out, axis)
        accumulate(y, axis, t, out)

    return exact_scan


def scan(spec: S.Scan, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
    """``S.scan`` of a call that fits, the door passed: the inclusive scan of
    ``spec.output`` along ``spec.axis`` (from its end where ``reverse``), after
    the carry where given."""
    loads_ops = operands[spec.carry:]
    loop = loop_shape(spec.loads, loads_ops)
    assert loop is not None  # the call fits
    term = spec.prog.out_dtypes[spec.output]
    y = _last(Outputs(spec.prog, spec.loads, loads_ops, loop).get(spec.output), spec.axis)
    lead = y.shape[:-1]
    rows = y.reshape(math.prod(lead), loop[spec.axis])
    carry = None
    if spec.carry:
        c = views.read(operands[0])
        carry = c.reshape(rows.shape[0], 3) if isinstance(spec.reduction, S.Moments) \
            else c.reshape(rows.shape[0])
    if spec.reverse:
        rows = rows[:, ::-1]
    first = views.target(dsts[0])
    # The first destination itself, as rows, where the scanned axis is
    # its last and the scan runs forward: a float scan writes there.
    direct = (first.reshape(rows.shape) if first is not None and not spec.reverse
              and spec.axis == len(loop) - 1 else None)
    results = _scan_rows(spec.reduction, term, spec.dtype, rows, carry, direct)
    if nans_made_canonical(spec.reduction, term):
        for v in results:
            # The network wrote ``direct`` with its NaNs canonical already.
            if v is not direct:
                canonical_nans(v)
    for dst, v in zip(dsts, results, strict=True):
        if direct is not None and v is direct:
            continue
        if spec.reverse:
            v = v[:, ::-1]
        v = v.reshape(*lead, v.shape[1])
        views.store(dst, v if spec.axis == v.ndim - 1 else np.moveaxis(v, -1, spec.axis))


def _last(y: Arr, axis: int) -> Arr:
    """``y`` with ``axis`` moved last (``y`` itself where it is the last)."""
    return y if axis == y.ndim - 1 else np.moveaxis(y, axis, -1)

"""Laws every kernel keeps, whatever it computes: declines as stated, misfits
refused, determinism. One law per kernel each, on the calls ``cases`` draws."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

from .. import dtype as D
from ..array import Array
from ..dtype import Dtype, Kind
from ..layout import Layout
from . import harness as H
from .cases import KERNELS, Case, draw_case
from .harness import Data, Subject, fail, invoke, invoke_misfit, law


def _other_kind(dt: Dtype) -> Dtype:
    """A dtype no rule takes where ``dt`` is wanted: of another kind."""
    if dt is D.int64:
        return D.int32
    if dt.kind is Kind.FLOAT:
        return D.int32
    if dt.kind in (Kind.SIGNED, Kind.UNSIGNED):
        return D.float32
    if dt.kind is Kind.COMPLEX:
        return D.int16
    return D.float32


def _recontiguous(subject: Subject, a: Array) -> Array:
    return H.contiguous(subject, a.dtype, a.to_numpy())


def _declines_law(kernel: str) -> H.LawFn:
    def rule(subject: Subject, data: Data) -> None:
        case = draw_case(data, subject, kernel)
        first = invoke(subject, case.spec, case.dsts, case.operands, data)
        copies = [_recontiguous(subject, a) for a in case.operands]
        second = invoke(subject, case.spec, case.dsts, copies)
        if first.declined != second.declined:
            raise fail(f"{subject} {'declined' if first.declined else 'computed'} a {kernel} call and "
                       f"{'declined' if second.declined else 'computed'} it with the operands copied "
                       "contiguous (contract: 'Whether one declines depends only on the dtypes, the "
                       "attributes, the device model and the extents')")

    rule.__doc__ = (
        f"{kernel}: a library declines a call exactly where its statement's ``declines`` says so, "
        "in both directions, and a decline writes nothing; the same call with other layouts is "
        "declined alike. Contract: 'Its .mli states ... which cases it declines'; 'Whether one "
        "declines depends only on the dtypes, the attributes, the device model and the extents of "
        "the axes along which one result element reads every index'.")
    return rule


def _misfits(case: Case, kernel: str) -> list[str]:
    """The ways to make ``case`` not fit that are sure to (see ``_misfit``)."""
    out = ["dst shape", "arity"]
    dtype_ok = kernel not in ("contract",) and not (kernel == "assemble" and not case.operands)
    if dtype_ok:
        out.append("dst dtype")
    if case.operands and kernel != "contract":
        out.append("operand dtype")
    if kernel == "contract" and case.spec.segments is not None:
        out.append("operand dtype")
    if any(a.numel for a in case.operands) and any(math.prod(s) for _, s in case.dsts):
        out.append("overlapping")
    if any(_repeatable(s) for _, s in case.dsts):
        out.append("repeated")
    return out


def _misfit_law(kernel: str) -> H.LawFn:
    def rule(subject: Subject, data: Data) -> None:
        case = draw_case(data, subject, kernel)
        how = data.draw(st.sampled_from(_misfits(case, kernel)), label="misfit")
        dsts = [H.slot(subject, dt, s).array for dt, s in case.dsts]
        ops = list(case.operands)
        door = False
        if how == "dst shape":
            i = data.draw(st.integers(0, len(dsts) - 1), label="which dst")
            dt, s = case.dsts[i]
            bad = (s[0] + 1, *s[1:]) if s else (1,)
            dsts[i] = H.slot(subject, dt, bad).array
        elif how == "dst dtype":
            i = data.draw(st.integers(0, len(dsts) - 1), label="which dst")
            dt, s = case.dsts[i]
            dsts[i] = H.slot(subject, _other_kind(dt), s).array
        elif how == "operand dtype":
            i = _operand_to_change(case, kernel, data)
            a = ops[i]
            other = _other_kind(a.dtype)
            ops[i] = H.contiguous(subject, other, np.zeros(a.shape, dtype=other.numpy_dtype))
        elif how == "arity":
            choice = data.draw(st.sampled_from(["drop dst", "drop operand", "extra operand"]),
                               label="arity")
            if choice == "drop dst" or not ops:
                dsts = dsts[:-1] if choice == "drop dst" else [*dsts, dsts[0]]
                if choice != "drop dst":
                    dsts[-1] = H.slot(subject, case.dsts[0][0], case.dsts[0][1]).array
            elif choice == "drop operand":
                ops = ops[:-1]
            else:
                ops = [*ops, ops[-1]]
        elif how == "overlapping":
            door = True
            i = data.draw(st.sampled_from([k for k, a in enumerate(ops) if a.numel]), label="operand")
            j = data.draw(st.sampled_from([k for k, (_, s) in enumerate(case.dsts) if math.prod(s)]),
                          label="dst")
            made = _overlapping(subject, ops[i], case.dsts[j][0], case.dsts[j][1])
            assume(made is not None)
            assert made is not None
            ops[i], dsts[j] = made
        else:
            door = True
            j = data.draw(st.sampled_from([k for k, (_, s) in enumerate(case.dsts) if _repeatable(s)]),
                          label="dst")
            dt, s = case.dsts[j]
            axis = next(a for a, d in enumerate(s) if d >= 2)
            strides = list(Layout.c_contiguous(s).strides)
            strides[axis] = 0
            base = H.slot(subject, dt, s).array
            dsts[j] = Array(dt, Layout(s, tuple(strides), base.layout.offset), base.buffer)
        invoke_misfit(subject, case.spec, dsts, ops, how, door=door)

    rule.__doc__ = (
        f"{kernel}: a call that does not fit (a destination of the wrong shape or dtype, an operand "
        "of the wrong dtype, too few or too many arrays) is never answered DONE and writes "
        "nothing outside its arrays; a destination that overlaps an operand without being "
        "identical to it, or reaches an element twice, is refused or declined before any write. "
        "Contract: 'For one that does not, it answers a refusal or Declined, never Done, and "
        "reads and writes nothing outside its arrays'; 'The door refuses other sharing as "
        "Overlapping'.")
    return rule


def _repeatable(shape: tuple[int, ...]) -> bool:
    """Whether a destination of ``shape`` can reach an element twice."""
    return math.prod(shape) > 0 and any(d >= 2 for d in shape)


def _operand_to_change(case: Case, kernel: str, data: Data) -> int:
    if kernel == "contract":
        return len(case.operands) - 1  # the ids
    return int(data.draw(st.integers(0, len(case.operands) - 1), label="which operand"))


def _overlapping(subject: Subject, op: Array, dt: Dtype, shape: tuple[int, ...]
                 ) -> tuple[Array, Array] | None:
    """The operand copied contiguous into a buffer it shares with a fresh
    destination of ``dt`` and ``shape`` that starts within its last byte (so
    they share bytes without being identical); None where the two could only
    be identical."""
    vals = op.to_numpy()
    base = 16  # bytes before the operand: every dtype's alignment divides it
    op_off = base * 8 // op.dtype.bits
    op_bytes = D.bytes(op.dtype, op.numel)
    dst_off = (base + op_bytes - 1) * 8 // dt.bits
    if dst_off == op_off and dt is op.dtype and tuple(shape) == op.shape:
        return None
    total = base + op_bytes + D.bytes(dt, math.prod(shape)) + 16
    buf = H.canary_buffer(subject, total)
    new_op = Array(op.dtype, Layout.c_contiguous(op.shape, op_off), buf)
    new_op.write_numpy(vals)
    return new_op, Array(dt, Layout.c_contiguous(shape, dst_off), buf)


def _determinism_law(kernel: str) -> H.LawFn:
    def rule(subject: Subject, data: Data) -> None:
        case = draw_case(data, subject, kernel)
        first = invoke(subject, case.spec, case.dsts, case.operands, data)
        if first.declined:
            return
        H.same_on_threads(subject, case.spec, case.dsts, case.operands, first)

    rule.__doc__ = (
        f"{kernel}: the same call gives the same bits on a second run and when run from four "
        "threads at once (one after another where the statement says calls may not be "
        "concurrent). Contract: 'A kernel is deterministic. For the same operand values, shapes, "
        "layouts and dtypes and the same attributes, it gives the same bits on every run, on any "
        "number of threads'.")
    return rule


def _define(kernel: str, rule_name: str, fn: H.LawFn) -> Any:
    fn.__name__ = f"test_{kernel}_{rule_name}"
    fn.__qualname__ = fn.__name__
    fn.__module__ = __name__
    return law(kernel)(fn)


for _kernel in KERNELS:
    globals()[f"test_{_kernel}_declines_as_stated"] = _define(
        _kernel, "declines_as_stated", _declines_law(_kernel))
    globals()[f"test_{_kernel}_refuses_misfits"] = _define(
        _kernel, "refuses_misfits", _misfit_law(_kernel))
    globals()[f"test_{_kernel}_deterministic"] = _define(
        _kernel, "deterministic", _determinism_law(_kernel))

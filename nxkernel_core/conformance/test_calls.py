"""Laws every kernel keeps, whatever it computes: declines as stated, misfits
refused, determinism. One law per kernel each, on the calls ``cases`` draws;
a misfit by sharing tries every kind ``sharings`` builds (partial overlap at
either end, containment both ways, other layouts over the same bytes,
sub-byte codes sharing a byte), and ``test_map_door_every_sharing`` runs them
all on a fixed table of maps in every profile."""

from __future__ import annotations

import math
from typing import Any, Final

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

from .. import dtype as D
from .. import spec as S
from ..array import Array
from ..dtype import Dtype, Kind
from ..layout import Layout
from ..prog import Prog
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
            # Every kind of sharing, each on its own call, on one operand and
            # destination: the door must refuse them all.
            i = data.draw(st.sampled_from([k for k, a in enumerate(ops) if a.numel]), label="operand")
            j = data.draw(st.sampled_from([k for k, (_, s) in enumerate(case.dsts) if math.prod(s)]),
                          label="dst")
            made = sharings(subject, ops[i], case.dsts[j][0], case.dsts[j][1])
            assume(made)
            for kind, op, dst in made:
                shared_ops, shared_dsts = list(ops), list(dsts)
                shared_ops[i], shared_dsts[j] = op, dst
                invoke_misfit(subject, case.spec, shared_dsts, shared_ops, f"overlapping: {kind}",
                              door=True)
            return
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


#: The kinds of sharing ``sharings`` builds: partial overlap at either end,
#: containment both ways, views of other layouts over the same bytes, and
#: sub-byte codes sharing a byte.
SHARINGS: Final = ("dst in the operand's last byte", "dst ending in the operand's first byte",
                   "operand containing dst", "dst containing the operand",
                   "same start, other layout", "reversed over the same bytes",
                   "column-major over the same bytes", "sub-byte codes sharing a byte")

_BASE: Final = 16  # bytes before the first array: every dtype's alignment divides it


def _bit_offset(byte: int, dt: Dtype) -> int:
    """The first element offset of ``dt`` at or after ``byte``."""
    return -(-byte * 8 // dt.bits)


def _spread(shape: tuple[int, ...], factor: int, offset: int) -> Layout:
    """C order with every stride ``factor`` times the contiguous one."""
    c = Layout.c_contiguous(shape)
    return Layout(shape, tuple(st * factor for st in c.strides), offset)


def _share(subject: Subject, op: Array, vals: Any, op_layout: Layout, dt: Dtype, dst_layout: Layout,
           nbytes: int) -> tuple[Array, Array]:
    buf = H.canary_buffer(subject, nbytes + 2 * _BASE)
    new_op = Array(op.dtype, op_layout, buf)
    new_op.write_numpy(vals)
    return new_op, Array(dt, dst_layout, buf)


def sharings(subject: Subject, op: Array, dt: Dtype, shape: tuple[int, ...]
             ) -> list[tuple[str, Array, Array]]:
    """Every kind of ``SHARINGS`` that fits: an operand holding ``op``'s values
    and a destination of ``dt`` and ``shape`` in one fresh canary buffer,
    sharing a byte without being identical."""
    vals = op.to_numpy()
    n_op, n_dst = op.numel, math.prod(shape)
    odt = op.dtype
    b_op, b_dst = D.bytes(odt, n_op), D.bytes(dt, n_dst)
    c_op = Layout.c_contiguous(op.shape, _bit_offset(_BASE, odt))
    total = _BASE + 4 * (b_op + b_dst) + 64
    out: list[tuple[str, Array, Array]] = []

    def add(kind: str, op_layout: Layout, dst_layout: Layout, nbytes: int = total) -> None:
        new_op, dst = _share(subject, op, vals, op_layout, dt, dst_layout, nbytes)
        if H.shares(new_op, dst) and not new_op.identical(dst):
            out.append((kind, new_op, dst))

    add(SHARINGS[0], c_op, Layout.c_contiguous(shape, (_BASE + b_op - 1) * 8 // dt.bits))
    start = _BASE + b_dst + 8
    last_bit = (start + 1) * 8
    add(SHARINGS[1], Layout.c_contiguous(op.shape, _bit_offset(start, odt)),
        Layout.c_contiguous(shape, max(0, -(-(last_bit - n_dst * dt.bits) // dt.bits))))
    if n_op >= 2:
        factor = -(-(b_dst + 32) * 8 // odt.bits // (n_op - 1)) + 1
        add(SHARINGS[2], _spread(op.shape, factor, _bit_offset(_BASE, odt)),
            Layout.c_contiguous(shape, _bit_offset(_BASE + 8, dt)), total + factor * b_op)
    if n_dst >= 2:
        factor = -(-(b_op + 32) * 8 // dt.bits // (n_dst - 1)) + 1
        add(SHARINGS[3], Layout.c_contiguous(op.shape, _bit_offset(_BASE + 8, odt)),
            _spread(shape, factor, _bit_offset(_BASE, dt)), total + factor * b_dst)
    add(SHARINGS[4], c_op, Layout.c_contiguous(shape, _bit_offset(_BASE, dt)))
    if n_dst >= 2 and dt.bits == odt.bits and n_dst == n_op:
        c = Layout.c_contiguous(shape)
        first = _bit_offset(_BASE, dt)
        add(SHARINGS[5], c_op, Layout(shape, tuple(-st for st in c.strides), first + n_dst - 1))
        f_strides = [1] * len(shape)
        for i in range(1, len(shape)):
            f_strides[i] = f_strides[i - 1] * shape[i - 1]
        add(SHARINGS[6], c_op, Layout(shape, tuple(f_strides), first))
    if odt.is_sub_byte and dt.is_sub_byte:
        first = _bit_offset(_BASE, odt)
        if ((first + n_op) * odt.bits) % 8 == 0:
            first += 1
        end_bit = (first + n_op) * odt.bits
        if end_bit % dt.bits == 0:
            add(SHARINGS[7], Layout.c_contiguous(op.shape, first),
                Layout.c_contiguous(shape, end_bit // dt.bits))
    return out


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


#: (operand dtype, destination dtype, shape) of the fixed door cases: wide
#: and sub-byte codes, casts, one element.
_DOOR_CASES: Final = ((D.float32, D.float32, (3, 4)), (D.int4, D.int4, (5,)), (D.bit, D.bit, (9,)),
                      (D.int8, D.float64, (6,)), (D.uint4, D.bit, (4,)), (D.float64, D.int8, (1,)))


@law("map")
def test_map_door_every_sharing(subject: Subject, data: Data) -> None:
    """Fixed maps (a copy or a cast) whose destination shares bytes with the
    operand in every way ``SHARINGS`` names (partial overlap at either end,
    containment both ways, other layouts over the same bytes, sub-byte codes
    sharing a byte) are refused or declined and write nothing. Contract: 'The
    door refuses other sharing as Overlapping', decided on bytes."""
    for odt, dt, shape in _DOOR_CASES:
        vals = (np.arange(math.prod(shape)).reshape(shape) % 2).astype(odt.numpy_dtype)
        op = H.contiguous(subject, odt, vals)
        spec = S.Map(Prog.identity(odt) if odt is dt else Prog.cast(odt, dt), (S.PLAIN,))
        for kind, shared_op, dst in sharings(subject, op, dt, shape):
            invoke_misfit(subject, spec, [dst], [shared_op], f"overlapping: {kind}", door=True)

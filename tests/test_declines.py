"""The decline rules the libraries share (``nxkernel_core.declines``) and the
fits the ``Library`` base class runs for scan and contract."""

from __future__ import annotations

import numpy as np

from nxkernel_core import dtype as D
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_core.declines import contract_call_declines, contract_declines, scale_reason
from nxkernel_core.dtype import Dtype
from nxkernel_core.kernel import Call
from nxkernel_core.library import misfit
from nxkernel_core.prog import Prog

EXP, VAL = S.ScaleKind.EXPONENT, S.ScaleKind.VALUE


def _walk(spec: S.Contract, dst: Dtype, operands: list[Dtype], refuse: str) -> tuple[list[str], str | None]:
    """The operands the walk asks about, in order, and its answer, with every
    rule declining the one named ``refuse`` alone."""
    asked: list[str] = []

    def rule(what: str, dt: Dtype, acc: Dtype) -> str | None:
        asked.append(what)
        return f"no {what}" if what == refuse else None

    def result(acc: Dtype, d: Dtype) -> str | None:
        asked.append("dst")
        return "no dst" if refuse == "dst" else None

    return asked, contract_declines(spec, dst, operands, operand=rule, init=rule, result=result)


def test_the_walk_asks_a_b_init_value_scales_then_dst_and_stops_at_the_first_reason() -> None:
    spec = S.Contract((), ((1, 0),), D.float32, init=True, scales=(VAL, EXP))
    ops = [D.float16, D.bfloat16, D.float32, D.float32, D.uint8]
    assert _walk(spec, D.float32, ops, "") == (
        ["a", "b", "init", "a's Value scale", "dst"], None)
    assert _walk(spec, D.float32, ops, "b") == (["a", "b"], "no b")
    assert _walk(spec, D.float32, ops, "a's Value scale") == (
        ["a", "b", "init", "a's Value scale"], "no a's Value scale")
    assert _walk(spec, D.float32, ops, "dst")[1] == "no dst"


def test_the_shared_scale_rules_come_before_the_library_rules() -> None:
    assert scale_reason("a", EXP, D.int32) == \
        "a's Exponent scale into the int32 accumulator is not an integer"
    assert scale_reason("b", VAL, D.complex64) == "b's Value scale into the complex complex64 accumulator"
    assert scale_reason("a", EXP, D.float32) is None
    assert scale_reason("a", VAL, D.float64) is None
    spec = S.Contract((), ((1, 0),), D.complex64, scales=(None, VAL))
    asked, why = _walk(spec, D.complex64, [D.complex64, D.complex64, D.float32], "")
    assert (asked, why) == (["a", "b"], "b's Value scale into the complex complex64 accumulator")


def test_a_call_whose_counts_do_not_fit_is_not_declined() -> None:
    spec = S.Contract((), ((1, 0),), D.float32)
    a = Array.empty(D.int8, (2, 2))

    def every(sp: S.Contract, dst: Dtype, ops: object) -> str | None:
        return "declined"

    assert contract_call_declines(Call("contract", spec, (a,), (a,)), every) is None
    assert contract_call_declines(Call("contract", spec, (a,), (a, a)), every) == "declined"


def test_the_base_class_runs_the_scan_refusal_rule_and_counts() -> None:
    x = Array.from_numpy(np.ones((2, 3), np.int32))
    spec = S.Scan(Prog.identity(D.int32), (S.PLAIN,), 1, S.Logsumexp(), 0, D.int32)
    # Logsumexp takes no integer terms: the scans' refusal rule, before the shapes.
    assert misfit("scan", spec, [Array.empty(D.int32, (9,))], [x]) is Answer.WRONG_DTYPE
    carried = S.Scan(Prog.identity(D.float32), (S.PLAIN,), 1, S.Monoid.SUM, 0, D.float32, carry=True)
    c = Array.empty(D.float32, (2,))
    assert misfit("scan", carried, [Array.empty(D.float32, (2, 3))], [c]) is Answer.BAD_ARITY


def test_the_base_class_runs_the_contract_refusal_rule() -> None:
    a, b = Array.empty(D.float32, (2, 3)), Array.empty(D.float32, (3, 2))
    dst = Array.empty(D.float32, (2, 2))
    scaled = S.Contract((), ((1, 0),), D.float32, scales=(EXP, None))
    assert misfit("contract", scaled, [dst], [a, b, Array.empty(D.int8, (2, 3))]) \
        is Answer.WRONG_DTYPE
    assert misfit("contract", scaled, [dst], [a, b, Array.empty(D.uint8, (2, 3))]) is None
    plain = S.Contract((), ((1, 0),), D.float32)
    assert misfit("contract", plain, [Array.empty(D.float32, (2, 3))], [a, b]) \
        is Answer.SHAPE_MISMATCH

"""Decline rules the kernel libraries share, written once.

Which cases a library declines is its own choice (the contract lets any case
be Declined), but where libraries decline by one walk over a call, the walk
is here and each library gives only the rules that differ:

* :func:`contract_declines`: a contraction's operands in the spec's order (a,
  b, init, the scales), then its destination, each by the library's rule;
  the scale rules every library keeps (:func:`scale_reason`) in between.
* :func:`contract_call_declines`: the same for a whole ``Call``, None for a
  call that does not fit (the kernel refuses it, it declines nothing).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from . import spec as S
from .dtype import Dtype
from .kernel import Call

__all__ = ["contract_call_declines", "contract_declines", "scale_reason"]

#: Why an operand (``what``: "a", "b", "init", "a's Value scale", ...) of a
#: dtype is declined into an accumulator, or None.
OperandRule = Callable[[str, Dtype, Dtype], str | None]
#: Why a result in an accumulator (first) is declined into a destination's
#: dtype (second), or None.
ResultRule = Callable[[Dtype, Dtype], str | None]


def scale_reason(side: str, kind: S.ScaleKind, acc: Dtype) -> str | None:
    """Why ``side``'s scale of ``kind`` is declined into ``acc`` by a rule every
    library keeps: an Exponent scale into an integer accumulator, a Value
    scale into a complex one."""
    if kind is S.ScaleKind.EXPONENT and acc.is_int:
        return f"{side}'s Exponent scale into the {acc.name} accumulator is not an integer"
    if kind is S.ScaleKind.VALUE and acc.is_complex:
        return f"{side}'s Value scale into the complex {acc.name} accumulator"
    return None


def contract_declines(spec: S.Contract, dst: Dtype, operands: Sequence[Dtype], *,
                      operand: OperandRule, init: OperandRule, result: ResultRule
                      ) -> str | None:
    """The first reason to decline a fitting contraction of these dtypes, or
    None: a and b by ``operand``, init by ``init``, each scale by
    :func:`scale_reason` then, a Value scale, by ``operand``; last the
    destination by ``result``."""
    acc = spec.acc
    rest = iter(operands[2:])
    for what, dt in (("a", operands[0]), ("b", operands[1])):
        why = operand(what, dt, acc)
        if why is not None:
            return why
    if spec.init:
        why = init("init", next(rest), acc)
        if why is not None:
            return why
    for side, kind in zip("ab", spec.scales, strict=True):
        if kind is None:
            continue
        scale = next(rest)
        why = scale_reason(side, kind, acc)
        if why is None and kind is S.ScaleKind.VALUE:
            why = operand(f"{side}'s Value scale", scale, acc)
        if why is not None:
            return why
    return result(acc, dst)


def contract_call_declines(call: Call, rule: Callable[[S.Contract, Dtype, Sequence[Dtype]],
                                                      str | None]) -> str | None:
    """``rule`` (a library's :func:`contract_declines`) of a contract call's
    dtypes; None where the call's counts do not fit, since the kernel refuses
    such a call rather than declining it."""
    spec = call.spec
    assert isinstance(spec, S.Contract)
    if len(call.dsts) != 1 or len(call.operands) != spec.n_operands():
        return None
    return rule(spec, call.dsts[0].dtype, [o.dtype for o in call.operands])

"""Judging float results against exact references: the contract's bounds.

Shared by the laws of reductions, scans, folds, scatters and contractions:
``loop_outputs`` evaluates a program over its loaded operands (the terms),
``check_sums`` holds float and complex sums to γ(n − 1)·Σ|x| in the carrier
plus the rounding into the destination, ``check_products`` products to a
relative γ(n − 1) (complex: normwise γ(2n − 2)), and ``states_order`` reads
whether a library's statement names an order the kit can reproduce bit for
bit, and ``says`` whether any part of it states a phrase (an algorithm, a
bound, a kept NaN).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .. import dtype as D
from .. import evaluator
from .. import exact as O
from .. import spec as S
from ..array import Array
from ..dtype import Dtype
from ..kernel import Statement, gamma, unit_roundoff
from ..prog import Const, Convert, Coord, In, Op1, Op3, Prog, Ternary, element, operands_of
from .harness import Arr, fail

__all__ = [
    "carrier_u",
    "check_products",
    "check_sums",
    "loop_outputs",
    "program_signalling",
    "says",
    "signalling_in",
    "states_order",
]


def loop_outputs(prog: Prog, loads: Sequence[S.Load], arrays: Sequence[Array], vals: Sequence[Arr],
                 loop: tuple[int, ...]) -> list[Arr]:
    """The program's outputs at every index of the loop, its operands read by
    their loads (``evaluator.evaluate`` of ``exact.pad``-ded elements)."""
    loaded = [O.pad(v, a.dtype, ld.fill, ld.pad) if isinstance(ld, S.Padded) else v
              for v, a, ld in zip(vals, arrays, loads, strict=True)]
    return evaluator.evaluate(prog, loaded, loop)


def signalling_in(arrays: Sequence[Array], vals: Sequence[Arr], loads: Sequence[S.Load] = ()) -> bool:
    """Whether any operand element (or a Padded load's fill) is a signalling NaN."""
    if any(O.is_signalling(a.dtype, v).any() for a, v in zip(arrays, vals, strict=True)):
        return True
    return any(isinstance(ld, S.Padded) and O.is_signalling(a.dtype, element(a.dtype, ld.fill)).any()
               for a, ld in zip(arrays, loads, strict=False))


def program_signalling(prog: Prog, loaded: Sequence[Arr], shape: tuple[int, ...]) -> bool:
    """Whether a value the NaN rule counts as a source is a signalling NaN at
    some index of the loop: a loaded operand element (a Padded load's fill
    included), a program constant, or a Bitcast's result (bits made into a
    float). Every other node passes on or makes its NaNs by the rule, so a
    signalling NaN result needs one of these (contract: 'it is signalling
    only where an operand is a signalling NaN', an operand of a node)."""
    if any(O.is_signalling(dt, v).any() for dt, v in zip(prog.ins, loaded, strict=True)):
        return True
    for i, node in enumerate(prog.nodes):
        if isinstance(node, Const) and O.is_signalling(node.dtype, element(node.dtype, node.bits)).any():
            return True
        if isinstance(node, Op1) and node.kind is Convert.BITCAST:
            (made,) = evaluator.evaluate(Prog(prog.ins, prog.nodes[:i + 1], (i,)), loaded, shape)
            if O.is_signalling(prog.dtype(i), made).any():
                return True
    return False


def payload_exposed(prog: Prog, loaded: Sequence[Arr], shape: tuple[int, ...]) -> list[Arr]:
    """For each output, where its bits hang on a NaN's sign and payload that
    the contract leaves to the library: a Bitcast of a computed float NaN
    (not an operand's, a constant's or their Copy, Bitcast or Where, whose
    bits are fixed) makes them bits of another dtype, and every node that
    reads such an index passes that on. There a result's bits are the
    library's (contract: 'Only a move specifies a NaN result's bits'; a NaN
    result's 'sign and payload are unspecified')."""
    fixed: list[bool] = []
    exposed: list[Arr] = []
    for node in prog.nodes:
        mask = np.zeros(shape, np.bool_)
        if isinstance(node, In | Const | Coord):
            fixed.append(True)
            exposed.append(mask)
            continue
        for x in operands_of(node):
            mask |= exposed[x]
        if isinstance(node, Op1) and node.kind in (Convert.COPY, Convert.BITCAST):
            fixed.append(fixed[node.x])
            src = prog.dtype(node.x)
            if node.kind is Convert.BITCAST and not fixed[node.x] and (src.is_float or src.is_complex):
                (value,) = evaluator.evaluate(Prog(prog.ins, prog.nodes[:node.x + 1], (node.x,)),
                                              loaded, shape)
                mask |= O.is_nan(src, value)
        else:
            fixed.append(isinstance(node, Op3) and node.kind is Ternary.WHERE
                         and fixed[node.x] and fixed[node.y])
        exposed.append(mask)
    return [exposed[o] for o in prog.outs]


def carrier_u(term: Dtype) -> float:
    """The unit roundoff of the carrier a float or complex term is summed in."""
    return unit_roundoff(D.carrier(term))


def _carrier_max(term: Dtype) -> float:
    part = D.carrier(term)
    if part.is_complex:
        part = D.float64 if part is D.complex128 else D.float32
    fmt = part.float_format
    assert fmt is not None
    return fmt.max_finite


def check_sums(term: Dtype, dst: Dtype, got: Arr, rows: Arr, what: str,
               depth: Arr | int | None = None) -> None:
    """A float or complex sum of each row ``[..., n]`` of terms of ``term``
    (float64 or complex128 values) lies within γ(k)·Σ|x| of the exact sum,
    k = n − 1 (or ``depth``: the combinations each result passes through), u
    the carrier's, then rounds once into ``dst``; a NaN exactly where a term
    is one or infinities of both signs meet. Rows whose Σ|x| overflows the
    carrier are judged only on NaN terms (the contract bars overflow)."""
    u = carrier_u(term)
    parts = [(rows.real, got.real if dst.is_complex else got), (rows.imag, got.imag)] \
        if term.is_complex else [(rows, got)]
    part_dst = (D.float64 if dst is D.complex128 else D.float32) if dst.is_complex else dst
    n = rows.shape[-1]
    k = np.broadcast_to(np.asarray(max(n - 1, 0) if depth is None else depth), rows.shape[:-1])
    top = _carrier_max(term)
    for p, (x, r) in enumerate(parts):
        exact, absum = O.exact_sums(np.asarray(x, dtype=np.float64))
        with np.errstate(all="ignore"):
            ku = k * u
            g = np.where(ku < 1, ku / (1 - ku), np.inf)
            bound = np.where(absum > 0, g * absum, 0.0)
        nan_term = np.isnan(np.asarray(x, dtype=np.float64)).any(axis=-1)
        judged = (absum < top) | nan_term | np.isinf(exact)
        ok = O.within(part_dst, np.asarray(r), exact, bound) | ~judged
        if not ok.all():
            i = tuple(int(t) for t in np.argwhere(~ok)[0])
            side = ["", "real part of "][p] if term.is_complex and p == 0 else (
                "imaginary part of " if term.is_complex else "")
            raise fail(f"{what}: the {side}sum at {list(i)} is {np.asarray(r)[i]!r} ({dst.name}); the "
                       f"exact sum of its {n} terms is {exact[i]!r}, Σ|x| = {absum[i]!r}, bound "
                       f"γ({int(k[i])})·Σ|x| = {bound[i]!r} in u = {u!r} (contract: 'a float sum of n "
                       "terms ... is within γ(n - 1) Σ|x| of the exact sum')")


def check_products(term: Dtype, dst: Dtype, got: Arr, rows: Arr, what: str) -> None:
    """A float product of each row lies within a relative γ(n − 1) of the exact
    product (a complex one within a normwise relative γ(2n − 2)), then rounds
    once into ``dst``; rows whose partial products may leave the carrier's
    normal range are not judged (the contract bars overflow and underflow)."""
    u = carrier_u(term)
    n = rows.shape[-1]
    exact = O.exact_products(rows)
    mag = np.abs(rows)
    fmt_part = D.carrier(term)
    part = (D.float64 if fmt_part is D.complex128 else D.float32) if fmt_part.is_complex else fmt_part
    fmt = part.float_format
    assert fmt is not None
    with np.errstate(all="ignore"):
        logs = np.log2(np.where(mag > 0, mag, 1.0))
        up = np.where(logs > 0, logs, 0).sum(axis=-1)
        down = np.where(logs < 0, logs, 0).sum(axis=-1)
    safe = ((up < math.log2(fmt.max_finite) - 2) & (down > fmt.min_exponent + 2)
            & np.isfinite(mag).all(axis=-1))
    if term.is_complex:
        g = gamma(max(2 * n - 2, 0), u)
        ud = unit_roundoff(dst)
        err = np.abs(np.asarray(got, dtype=np.complex128) - exact)
        bound = (g * (1 + ud) + ud * math.sqrt(2)) * np.abs(exact) * (1 + 2.0**-40) + 5e-324
        ok = (err <= bound) | ~safe
    else:
        g = gamma(max(n - 1, 0), u)
        bound = g * np.abs(exact)
        ok = O.within(dst, got, exact, bound) | ~safe
    if not ok.all():
        i = tuple(int(t) for t in np.argwhere(~ok)[0])
        raise fail(f"{what}: the product at {list(i)} is {np.asarray(got)[i]!r} ({dst.name}); the exact "
                   f"product of its {n} terms is {exact[i]!r} (contract: 'a float product within a "
                   "relative γ(n - 1)'; 'A complex product is within a normwise relative γ(2n - 2)')")


def states_order(statement: Statement, topic: str, order: str) -> bool:
    """Whether the statement's association for ``topic`` (a key containing it,
    e.g. "reduce Sum", "scan") names ``order`` ("lane order", "odd/even")."""
    return any(topic.lower() in key.lower() and order.lower() in text.lower()
               for key, text in statement.association.items())


def says(statement: Statement, topic: str, phrase: str) -> bool:
    """Whether the statement states ``phrase`` under ``topic``: in an
    association or an algorithm whose key contains ``topic``, or in the prose
    of kernel ``topic`` ("Moments (reduce)" and "two passes", "reduce" and
    "first NaN term's bits")."""
    texts = [text for key, text in (*statement.association.items(), *statement.algorithms.items())
             if topic.lower() in key.lower()]
    kernel = statement.computes.get(topic)
    if kernel is not None:
        texts.append(kernel.prose)
    return any(phrase.lower() in text.lower() for text in texts)

"""Laws of ``attention``: lse and o against a float64 reference, empty rows,
hidden keys never read."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import strategies as st

from .. import dtype as D
from .. import evaluator
from .. import exact as O
from .. import spec as S
from ..dtype import Dtype
from ..kernel import gamma, unit_roundoff
from ..prog import Prog
from . import generators as G
from .cases import Case, draw_case, visibility_program
from .harness import Arr, Data, Subject, assert_bits, contiguous, fail, invoke, law, operand


def expand(case: Case) -> dict[str, Any]:
    """The reference's view of an attention call: per (lead…, hq) the keys and
    values ``[R; tk; d]`` each query head reads, which pairs are visible
    (program output 0, lengths, pages) and the exact logits (score ``s·q·k``
    in float64, plus the bias load where the program adds one)."""
    spec: S.Attention = case.spec
    vals = case.values
    q = np.asarray(vals[0], dtype=np.float64)
    *lead, hq, tq, dk = q.shape
    if isinstance(spec.kv, S.Paged):
        kp, vp, table = (np.asarray(v) for v in vals[1:4])
        pages, hk, page, _ = kp.shape
        dv = vp.shape[-1]
        tk = table.shape[-1] * page
        k = np.zeros((*lead, hk, tk, dk))
        v = np.zeros((*lead, hk, tk, dv))
        hidden = np.zeros((*lead, tk), dtype=bool)
        for b in np.ndindex(*lead):
            for t in range(tk):
                p = int(table[b][t // page])
                if 0 <= p < pages:
                    k[b][:, t] = kp[p, :, t % page].astype(np.float64)
                    v[b][:, t] = vp[p, :, t % page].astype(np.float64)
                else:
                    hidden[b][t] = True
        rest = vals[4:]
    else:
        k = np.asarray(vals[1], dtype=np.float64)
        v = np.asarray(vals[2], dtype=np.float64)
        hk, tk = k.shape[-3], k.shape[-2]
        hidden = np.zeros((*lead, tk), dtype=bool)
        rest = vals[3:]
    if spec.lengths:
        ln = np.asarray(rest[0])
        hidden = hidden | (np.arange(tk) >= ln[..., None])
        rest = rest[1:]
    # Hidden keys are never read: the reference holds zeros there.
    k = np.where(hidden[..., None, :, None], 0.0, k)
    v = np.where(hidden[..., None, :, None], 0.0, v)
    group = hq // hk if hk else 1
    heads = np.arange(hq) // max(group, 1)
    ke = np.take(k, heads, axis=-3)
    ve = np.take(v, heads, axis=-3)
    with np.errstate(all="ignore"):
        prods = q[..., :, None, :] * ke[..., None, :, :]
        score = spec.scale * prods.sum(axis=-1)
        absqk = np.abs(prods).sum(axis=-1)
    loop = (*lead, hq, tq, tk)
    loads = [np.asarray(r) for r in rest]
    outs = evaluator.evaluate(spec.prog, [np.zeros(loop, dtype=spec.acc.numpy_dtype), *loads], loop)
    visible = (O.units(outs[0])[..., 0] != 0) & ~hidden[..., None, None, :]
    logits = score + (loads[1].astype(np.float64) if spec.prog.n_ins == 3 else 0.0)
    return {"visible": visible, "logits": logits, "v": ve, "absqk": absqk, "tk": tk, "dk": dk,
            "score": score}


def check_attention(subject: Subject, case: Case, o: Arr, lse: Arr, what: str) -> None:
    """o and lse against the float64 reference: a row with no visible pair (or
    only −∞ logits) has o = +0 and lse = −∞; otherwise lse within ε and o within
    the weights' bound (see ``test_attention_within_bound``)."""
    spec: S.Attention = case.spec
    ref = expand(case)
    vis, x, v = ref["visible"], ref["logits"], ref["v"]
    rows = int(np.prod(vis.shape[:-2]))
    o_ref, lse_ref, w = O.attention(vis.reshape(rows, *vis.shape[-2:]), x.reshape(rows, *x.shape[-2:]),
                                    v.reshape(rows, *v.shape[-2:]))
    o_ref = o_ref.reshape(o.shape)
    lse_ref = lse_ref.reshape(lse.shape)
    w = w.reshape(vis.shape)
    acc = spec.acc
    u = unit_roundoff(acc)
    u1 = u / (1 - u)
    o_dt = case.dsts[0][0]
    vdt = case.operands[2].dtype
    uv = unit_roundoff(vdt) if vdt in (D.float16, D.bfloat16) else 0.0
    tk, dk = ref["tk"], ref["dk"]
    og = O.to_float64(o_dt, o)
    lg = O.to_float64(acc, lse)
    err_score = abs(spec.scale) * gamma(2 * dk + 2, u) * ref["absqk"] + u * np.abs(ref["score"])
    err_x = err_score + u * np.abs(x)
    for idx in np.ndindex(*lse.shape):
        row_vis = vis[idx]
        xs = x[idx][row_vis]
        if xs.size == 0 or np.isneginf(xs).all():
            assert_bits(acc, lse[idx], np.asarray(-np.inf, dtype=acc.numpy_dtype), f"{what}: lse of row "
                        f"{list(idx)} with no visible pair (contract: 'A row of no visible pair, or of "
                        "only -∞ outputs, has o = +0 and lse = -∞')")
            assert_bits(o_dt, o[idx], np.zeros(o[idx].shape, dtype=o_dt.numpy_dtype), f"{what}: o of "
                        f"row {list(idx)} with no visible pair")
            continue
        if not np.isfinite(xs).all():
            continue  # an infinite logit: outside the bounds' reach
        b = float(np.abs(xs).max())
        dx = float(err_x[idx][row_vis].max())
        eps = dx + 8 * u * (2 * b + math.log(tk + 1) + 5)
        if not O.within(acc, lg[idx], float(lse_ref[idx]), eps):
            raise fail(f"{what}: row {list(idx)}: lse {lg[idx]!r}, the exact log-sum-exp of its visible "
                       f"outputs is {lse_ref[idx]!r}, beyond the kit's ε = {eps!r}")
        delta = (1 + u) * eps + (2 * b + math.log(max(tk, 1))) * u + 5 * u1 + dx
        wv = w[idx][row_vis][:, None] * np.abs(v[idx[:-1]][row_vis])
        grow = math.exp(delta) * (1 + uv) * (1 + gamma(2 * tk + 2, u)) - 1
        bound = wv.sum(axis=0) * grow
        ok = O.within(o_dt, og[idx], o_ref[idx], bound)
        if not ok.all():
            j = int(np.argmin(ok))
            raise fail(f"{what}: row {list(idx)}: o[{j}] = {og[idx][j]!r}, the weighted sum of the "
                       f"visible values is {o_ref[idx][j]!r}, beyond {bound[j]!r} (contract: 'an element "
                       "of o sums the values vⱼ of the row's visible pairs times the weights wⱼ ... "
                       "within e(tk) Σ|wⱼ||vⱼ| of Σ wⱼ vⱼ')")


@law("attention")
def test_attention_within_bound(subject: Subject, data: Data) -> None:
    """Each query row's lse is within ε of the exact log-sum-exp L of its
    visible outputs 1 (ε = the scores' and logits' own error, the contract's
    ceiling γ(2dk + 2) on q·k, plus 8u(2b + ln(tk + 1) + 5): a generous
    first-order bound), and each element of o within Σ|vⱼ|wⱼ·(e^δ(1 +
    u_v)(1 + γ(2tk + 2)) − 1) of Σ wⱼ vⱼ, wⱼ = exp(xⱼ − L), δ the contract's
    (1 + u)ε + (2b + ln tk)u + 5u'; rows with no visible pair have o = +0 and
    lse = −∞. Dense and Paged keys, lengths, grouped heads, causal and masked
    programs. Contract (Attention): 'Each weight w it computes in the
    accumulator is exp (x - L + δ), with |δ| ≤ (1 + u) ε + (2b + ln tk) u +
    5u''; 'A row of no visible pair, or of only -∞ outputs, has o = +0 and lse
    = -∞'."""
    case = draw_case(data, subject, "attention")
    out = invoke(subject, case.spec, case.dsts, case.operands, data)
    if out.declined:
        return
    check_attention(subject, case, out.results[0], out.results[1], f"attention {case.spec.kv}")


@law("attention")
def test_attention_empty_rows(subject: Subject, data: Data) -> None:
    """Rows whose mask hides every key, whose length is 0, or that have no key
    at all get o = +0 (bits) and lse = −∞. Contract: 'A row of no visible pair,
    or of only -∞ outputs, has o = +0 and lse = -∞'."""
    acc = data.draw(st.sampled_from((D.float32, D.float64)), label="acc")
    vdt = data.draw(st.sampled_from((D.float32, D.float16, D.float64)), label="dtype")
    hq, tq = data.draw(st.integers(1, 2), label="heads"), data.draw(st.integers(1, 3), label="tq")
    tk, dk, dv = (data.draw(st.integers(0, 3), label=n) for n in ("tk", "dk", "dv"))
    b = 2
    mask = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed")).random(
        (b, hq, tq, tk)) < 0.5
    mask[0, 0] = False  # a whole row hidden
    prog = visibility_program(data, acc, 1)
    if prog.n_ins != 3:
        return
    prog = _mask_program(acc)
    ops = [operand(data, subject, vdt, (b, hq, tq, dk), profiles=("moderate",), label="q")[0],
           operand(data, subject, vdt, (b, hq, tk, dk), profiles=("moderate",), label="k")[0],
           operand(data, subject, vdt, (b, hq, tk, dv), profiles=("moderate",), label="v")[0]]
    lengths = np.asarray([0, tk], dtype=np.int64)
    ops.append(contiguous(subject, D.int64, lengths))
    ops.append(contiguous(subject, D.bool_, mask))
    ops.append(contiguous(subject, acc, np.zeros((b, hq, tq, tk), dtype=acc.numpy_dtype)))
    spec = S.Attention(prog, (S.PLAIN, S.PLAIN), 1.0, acc, S.Dense(), True)
    out = invoke(subject, spec, [(vdt, (b, hq, tq, dv)), (acc, (b, hq, tq))], ops, data)
    if out.declined:
        return
    case = Case(spec, [(vdt, (b, hq, tq, dv)), (acc, (b, hq, tq))], ops, [a.to_numpy() for a in ops])
    check_attention(subject, case, out.results[0], out.results[1], "attention with hidden rows")


def _mask_program(acc: Dtype) -> Prog:
    b = Prog.build([acc, D.bool_, acc])
    return b.finish(b.copy(b.ins[1]), b.ins[0] + b.ins[2])


@law("attention")
def test_attention_hidden_never_read(subject: Subject, data: Data) -> None:
    """Keys and values past a row's length are never read: NaNs and
    infinities there change nothing. Contract: 'A value whose key is past the
    row's length, or whose table entry is outside [0, pages), is never read'."""
    acc = data.draw(st.sampled_from((D.float32, D.float64)), label="acc")
    vdt = data.draw(st.sampled_from((D.float32, D.bfloat16, D.float64)), label="dtype")
    hq, tq, tk, dk, dv = (data.draw(st.integers(1, 3), label=n) for n in ("hq", "tq", "tk", "dk", "dv"))
    b = 2
    seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, tk + 1, b).astype(np.int64)
    q = G.values(vdt, (b, hq, tq, dk), "moderate", seed)
    k = np.asarray(G.values(vdt, (b, hq, tk, dk), "moderate", seed + 1)).copy()
    v = np.asarray(G.values(vdt, (b, hq, tk, dv), "moderate", seed + 2)).copy()
    poison = D.of_float(vdt, np.asarray([np.nan, np.inf, -np.inf]))
    for i in range(b):
        k[i, :, lengths[i]:] = poison[rng.integers(0, 3)]
        v[i, :, lengths[i]:] = poison[rng.integers(0, 3)]
    b_ = Prog.build([acc])
    prog = b_.finish(b_.equal(b_.coord(0), b_.coord(0)), b_.copy(b_.ins[0]))
    ops = [contiguous(subject, vdt, q), contiguous(subject, vdt, k), contiguous(subject, vdt, v),
           contiguous(subject, D.int64, lengths)]
    spec = S.Attention(prog, (), 0.5, acc, S.Dense(), True)
    dsts = [(vdt, (b, hq, tq, dv)), (acc, (b, hq, tq))]
    out = invoke(subject, spec, dsts, ops, data)
    if out.declined:
        return
    case = Case(spec, dsts, ops, [a.to_numpy() for a in ops])
    check_attention(subject, case, out.results[0], out.results[1],
                    f"attention with NaN and ∞ keys and values past lengths {lengths.tolist()}")

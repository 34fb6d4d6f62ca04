"""nxkernel_cuda.attention (fused flash attention): lse within the stated ε
and o within the contract's bound of a float64 reference (Dense and Paged
keys, grouped heads, lengths, causal and masked programs with a bias load,
split decode shapes, narrow inputs); empty rows' bits; hidden keys never read
and hidden NaNs never reaching o; a NaN value at a visible pair of weight 0;
the same bits on every launch; declines write nothing and agree with the
statement; misfits get their refusal; the generated sources compile for
sm_80 and sm_90."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from nxkernel_core import dtype as D
from nxkernel_core import exact as O
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_core.dtype import Dtype
from nxkernel_core.kernel import Call, unit_roundoff
from nxkernel_core.prog import Prog
from nxkernel_cuda import attention, attention_mma, build
from nxkernel_cuda.contraction import error_factor
from nxkernel_cuda.device import CudaRig
from nxkernel_cuda.library import LIBRARY

from ..host.layouts import placed
from . import programs
from .support import CI_NVRTC, canary, nvrtc_of, on, same_bits, untouched

Arr = npt.NDArray[Any]


@dataclass
class _Case:
    """One attention call and the float64 view of it the reference reads."""

    spec: S.Attention
    host: list[Arr]  # the operands as host arrays
    dtypes: list[Dtype]  # the operands' dtypes
    visible: Arr  # [lead…, hq, tq, tk]
    score: Arr  # exact s·q·k (float64)
    absqk: Arr  # Σ|q_d k_d|
    logits: Arr  # exact output 1 where visible
    v: Arr  # [lead…, hq, tk, dv] the values each head reads (0 where unread)


def _values(dt: Dtype, shape: Sequence[int], rng: np.random.Generator) -> Arr:
    return D.of_float(dt, rng.standard_normal(shape) * 2.0)


def _case(rng: np.random.Generator, *, acc: Dtype, dt: Dtype, lead: tuple[int, ...], hq: int, hk: int,
          tq: int, tk: int, dk: int, dv: int, prog: str = "causal", paged: int = 0, lengths: bool = False,
          scale: float = 0.5) -> _Case:
    """A drawn call: Dense keys, or Paged pools of ``paged`` keys a page (tk a
    multiple), with lengths, and the program ``prog`` (causal, all, masked)."""
    q = _values(dt, (*lead, hq, tq, dk), rng)
    host = [q]
    hidden = np.zeros((*lead, tk), dtype=bool)
    if paged:
        pages, max_pages = 3, tk // paged
        kp = _values(dt, (pages, hk, paged, dk), rng)
        vp = _values(dt, (pages, hk, paged, dv), rng)
        table = rng.integers(-1, pages + 1, (*lead, max_pages)).astype(np.int64)
        host += [kp, vp, table]
        k = np.zeros((*lead, hk, tk, dk))
        v = np.zeros((*lead, hk, tk, dv))
        for b in np.ndindex(*lead):
            for t in range(tk):
                p = int(table[b][t // paged])
                if 0 <= p < pages:
                    k[b][:, t] = kp[p, :, t % paged].astype(np.float64)
                    v[b][:, t] = vp[p, :, t % paged].astype(np.float64)
                else:
                    hidden[b][t] = True
        kv: S.Dense | S.Paged = S.Paged(paged)
    else:
        kh = _values(dt, (*lead, hk, tk, dk), rng)
        vh = _values(dt, (*lead, hk, tk, dv), rng)
        host += [kh, vh]
        k, v = kh.astype(np.float64), vh.astype(np.float64)
        kv = S.Dense()
    dtypes = [dt] * 3 + ([D.int64] if paged else [])
    if lengths:
        ln = rng.integers(0, tk + 2, lead).astype(np.int64)
        host.append(ln)
        dtypes.append(D.int64)
        hidden |= np.arange(tk) >= ln[..., None]
    k = np.where(hidden[..., None, :, None], 0.0, k)
    v = np.where(hidden[..., None, :, None], 0.0, v)
    heads = np.arange(hq) // (hq // hk)
    ke, ve = np.take(k, heads, axis=-3), np.take(v, heads, axis=-3)
    prods = q.astype(np.float64)[..., :, None, :] * ke[..., None, :, :]
    score = scale * prods.sum(-1)
    loop = (*lead, hq, tq, tk)
    rows, keys = np.arange(tq)[:, None], np.arange(tk)[None, :]
    loads: tuple[S.Load, ...] = ()
    if prog == "masked":
        mask = rng.random(loop) < 0.7
        bias = D.of_float(acc, rng.standard_normal(loop))
        host += [mask, bias]
        dtypes += [D.bool_, acc]
        loads = (S.PLAIN, S.PLAIN)
        program, seen, logits = programs.masked(acc), mask, score + bias.astype(np.float64)
    else:
        program = programs.causal(acc) if prog == "causal" else programs.attend_all(acc)
        seen = np.broadcast_to(keys <= rows if prog == "causal" else np.ones((tq, tk), bool), loop)
        logits = score
    visible = seen & ~hidden[..., None, None, :]
    spec = S.Attention(program, loads, scale, acc, kv, lengths)
    return _Case(spec, host, dtypes, visible, score, np.abs(prods).sum(-1), logits, ve)


def _call(dev: CudaRig, case: _Case, o_dtype: Dtype | None = None) -> tuple[Answer, Arr, Arr]:
    ops = [on(dev, a, dt) for a, dt in zip(case.host, case.dtypes, strict=True)]
    q, v = case.host[0], case.host[2]
    o_dt = case.dtypes[2] if o_dtype is None else o_dtype
    o = Array.empty(o_dt, (*q.shape[:-1], v.shape[-1]), dev)
    lse = Array.empty(case.spec.acc, q.shape[:-1], dev)
    answer = LIBRARY.attention(case.spec, [o, lse], ops)
    return answer, o.to_numpy(), lse.to_numpy()


def _check(case: _Case, o: Arr, lse: Arr) -> None:
    """lse within the stated ε (plus the outputs' own error against the exact
    scores, q·k within the library's e(dk)) of the exact log-sum-exp; o
    within Σ|w||v|·(e^δ(1 + u_v)(1 + e(tk)) − 1) of Σ w v, δ the contract's
    (1 + u)ε + (2b + ln tk)u + 5u' (plus the outputs' error), u_v the unit
    roundoff of float16 or bfloat16 values (the contract's r(c·w)/c) and 0
    otherwise, e the library's error factor; empty rows o = +0, lse = −∞
    (bits)."""
    spec = case.spec
    acc = spec.acc
    u = unit_roundoff(acc)
    u1 = u / (1 - u)
    vis, x, v = case.visible, case.logits, case.v
    lead_h = vis.shape[:-2]
    tq, tk = vis.shape[-2:]
    dk = case.host[0].shape[-1]
    dv = v.shape[-1]
    rows = int(np.prod(lead_h))
    o_ref, lse_ref, w = O.attention(vis.reshape(rows, tq, tk), x.reshape(rows, tq, tk),
                                    v.reshape(rows, tk, dv))
    o_ref, lse_ref, w = o_ref.reshape(o.shape), lse_ref.reshape(lse.shape), w.reshape(vis.shape)
    o_dt = case.dtypes[2]
    uv = unit_roundoff(o_dt) if o_dt in (D.float16, D.bfloat16) else 0.0
    err_x = abs(spec.scale) * error_factor(dk, acc) * case.absqk + u * np.abs(case.score) + u * np.abs(x)
    for idx in np.ndindex(*lse.shape):
        xs = x[idx][vis[idx]]
        if xs.size == 0:
            assert same_bits(lse[idx], np.asarray(-np.inf, acc.numpy_dtype), acc), (idx, lse[idx])
            assert same_bits(o[idx], np.zeros(dv, o_dt.numpy_dtype), o_dt), (idx, o[idx])
            continue
        b = float(np.abs(xs).max())
        dx = float(err_x[idx][vis[idx]].max())
        eps = attention.epsilon(acc, b, tk) + dx
        assert O.within(acc, lse[idx], float(lse_ref[idx]), eps), (idx, lse[idx], lse_ref[idx], eps)
        delta = (1 + u) * eps + (2 * b + math.log(tk)) * u + 5 * u1 + dx
        wv = (w[idx][vis[idx]][:, None] * np.abs(v[idx[:-1]][vis[idx]])).sum(0)
        bound = wv * (math.exp(delta) * (1 + uv) * (1 + error_factor(tk, acc)) - 1)
        ok = O.within(o_dt, o[idx], o_ref[idx], bound)
        assert ok.all(), (idx, o[idx], o_ref[idx], bound)


_SHAPES = {
    "grouped causal": {"lead": (2,), "hq": 4, "hk": 2, "tq": 5, "tk": 70, "dk": 8, "dv": 6},
    "mqa all, odd dims": {"lead": (), "hq": 3, "hk": 1, "tq": 3, "tk": 33, "dk": 3, "dv": 35},
    "masked with bias": {"lead": (2,), "hq": 2, "hk": 1, "tq": 4, "tk": 9, "dk": 4, "dv": 3,
                         "prog": "masked"},
    "paged with lengths": {"lead": (2,), "hq": 2, "hk": 2, "tq": 3, "tk": 12, "dk": 4, "dv": 4, "paged": 3,
                           "lengths": True, "prog": "all"},
    "decode, split keys": {"lead": (1,), "hq": 2, "hk": 1, "tq": 1, "tk": 600, "dk": 4, "dv": 3,
                           "prog": "all", "lengths": True},
}


@pytest.mark.parametrize("acc, dt", [(D.float32, D.float32), (D.float32, D.bfloat16), (D.float64, D.float64),
                                     (D.float64, D.float16)], ids=lambda x: x.name)
@pytest.mark.parametrize("shape", list(_SHAPES), ids=str)
def test_lse_and_o_within_the_bounds(dev: CudaRig, shape: str, acc: Dtype, dt: Dtype) -> None:
    case = _case(np.random.default_rng(len(shape)), acc=acc, dt=dt, **_SHAPES[shape])  # type: ignore[arg-type]
    answer, o, lse = _call(dev, case)
    assert answer is Answer.DONE
    _check(case, o, lse)


def test_decode_shapes_split_the_keys_by_the_extents_alone() -> None:
    tiles = attention.tiles_for(4, 3, D.float32)
    assert tiles is not None
    nsplit, per = attention.splits(2, 1, 600, tiles)
    assert nsplit > 1 and per % tiles.keys == 0 and (nsplit - 1) * per < 600 <= nsplit * per
    assert attention.splits(2 * attention.TARGET_BLOCKS, 1, 600, tiles)[0] == 1


def test_the_same_bits_on_every_launch(dev: CudaRig) -> None:
    case = _case(np.random.default_rng(3), acc=D.float32, dt=D.float32, **_SHAPES["decode, split keys"])  # type: ignore[arg-type]
    first = _call(dev, case)
    again = _call(dev, case)
    assert same_bits(first[1], again[1], D.float32) and same_bits(first[2], again[2], D.float32)


def test_rows_without_a_visible_pair_get_plus_zero_and_minus_infinity(dev: CudaRig) -> None:
    """Length 0, a mask hiding a whole row, no keys at all, only −∞ outputs:
    o = +0 and lse = −∞, bit for bit. Contract: 'A row of no visible pair, or
    of only -∞ outputs, has o = +0 and lse = -∞'."""
    rng = np.random.default_rng(5)
    case = _case(rng, acc=D.float32, dt=D.float32, lead=(2,), hq=1, hk=1, tq=3, tk=5, dk=2, dv=2,
                 prog="masked")
    case.host[-2][0, 0, 1] = False  # row 1 of lead 0: hidden by the mask
    case.host[-1][1, 0, 2] = -np.inf  # row 2 of lead 1: only −∞ outputs, NaN values
    case.host[-2][1, 0, 2] = True
    case.host[2][1, 0] = np.nan
    case.visible[0, 0, 1] = False
    case.logits[1, 0, 2] = -np.inf
    answer, o, lse = _call(dev, case)
    assert answer is Answer.DONE
    for b, r in ((0, 1), (1, 2)):
        assert same_bits(lse[b, 0, r], np.asarray(-np.inf, np.float32), D.float32)
        assert same_bits(o[b, 0, r], np.zeros(2, np.float32), D.float32)
    empty = _case(rng, acc=D.float64, dt=D.float32, lead=(), hq=1, hk=1, tq=2, tk=0, dk=3, dv=2, prog="all")
    answer, o, lse = _call(dev, empty)
    assert answer is Answer.DONE and same_bits(o, np.zeros((1, 2, 2), np.float32), D.float32)
    assert same_bits(lse, np.full((1, 2), -np.inf), D.float64)


def test_hidden_keys_are_never_read_and_hidden_nans_never_reach_o(dev: CudaRig) -> None:
    """NaN and ∞ in keys and values past the length, on pages outside [0,
    pages) and at pairs the mask hides change nothing. Contract: 'A value whose
    key is past the row's length, or whose table entry is outside [0, pages),
    is never read'; the library states that hidden NaNs never reach o."""
    rng = np.random.default_rng(7)
    case = _case(rng, acc=D.float32, dt=D.float32, lead=(2,), hq=2, hk=1, tq=3, tk=40, dk=3, dv=2,
                 lengths=True, prog="causal")
    ln = case.host[3]
    for b in range(2):
        case.host[1][b, :, ln[b]:] = np.nan
        case.host[2][b, :, ln[b]:] = np.inf
    case.host[2][:, :, 3] = np.nan  # key 3: hidden from rows 0-2 by the causal mask
    answer, o, lse = _call(dev, case)
    assert answer is Answer.DONE and np.isfinite(o).all()
    _check(case, o, lse)
    paged = _case(rng, acc=D.float64, dt=D.float64, lead=(2,), hq=1, hk=1, tq=2, tk=6, dk=2, dv=2, paged=2,
                  prog="all")
    table = paged.host[3]
    used = {int(p) for p in table.ravel() if 0 <= p < 3}
    for p in set(range(3)) - used:  # pages no entry reaches
        paged.host[1][p] = np.nan
        paged.host[2][p] = np.nan
    table[0, 0] = 7  # an entry outside [0, pages): hidden, never read
    paged.visible[0, ..., 0:2] = False
    answer, o, lse = _call(dev, paged)
    assert answer is Answer.DONE
    _check(paged, o, lse)


def test_a_nan_value_of_weight_zero_at_a_visible_pair_makes_o_a_nan(dev: CudaRig) -> None:
    """Contract: 'A visible pair's value counts where its weight underflows to
    0: a NaN there makes the row's o a NaN'."""
    case = _case(np.random.default_rng(9), acc=D.float32, dt=D.float32, lead=(), hq=1, hk=1, tq=2, tk=4, dk=2,
                 dv=2, prog="masked")
    case.host[-2][...] = True
    case.host[-1][0, 0, 3] = -1e30  # weight exp(-1e30 - lse) = 0
    case.host[2][0, 3] = np.nan
    case.host[-2][0, 1, 3] = False  # row 1 does not see key 3: its o stays finite
    answer, o, _ = _call(dev, case)
    assert answer is Answer.DONE
    assert np.isnan(o[0, 0]).all() and np.isfinite(o[0, 1]).all()


def test_causal_tiles_past_the_diagonal_are_skipped_and_recognised() -> None:
    acc = D.float32
    assert attention.key_limit(programs.causal(acc)) == 0
    b = Prog.build([acc])
    strict = b.finish(b.less(b.coord(0), b.coord(1) + 2) & b.equal(b.coord(0), b.coord(0)), b.copy(b.ins[0]))
    assert attention.key_limit(strict) == 1
    assert attention.key_limit(programs.attend_all(acc)) is None
    assert attention.key_limit(programs.masked(acc)) is None


def _decline_case(rng: np.random.Generator, what: str) -> _Case:
    if what == "float64 into float32":
        return _case(rng, acc=D.float32, dt=D.float64, lead=(), hq=1, hk=1, tq=2, tk=3, dk=2, dv=2)
    return _case(rng, acc=D.float64, dt=D.float32, lead=(), hq=1, hk=1, tq=1, tk=2, dk=200, dv=2)


@pytest.mark.parametrize("what", ["float64 into float32", "head dimension"])
def test_declines_write_nothing_and_agree_with_the_statement(dev: CudaRig, what: str) -> None:
    case = _decline_case(np.random.default_rng(11), what)
    ops = [on(dev, a, dt) for a, dt in zip(case.host, case.dtypes, strict=True)]
    q, v = case.host[0], case.host[2]
    o = canary(dev, case.dtypes[2], (*q.shape[:-1], v.shape[-1]))
    lse = canary(dev, case.spec.acc, q.shape[:-1])
    assert LIBRARY.statement.declines(Call("attention", case.spec, (o, lse), tuple(ops))) is not None
    assert LIBRARY.attention(case.spec, [o, lse], ops) is Answer.DECLINED
    assert untouched(o) and untouched(lse)


def test_the_statement_declines_padded_loads(dev: CudaRig) -> None:
    case = _case(np.random.default_rng(14), acc=D.float32, dt=D.float32, lead=(), hq=1, hk=1, tq=2, tk=3,
                 dk=2, dv=2, prog="masked")
    pad = S.Padded(bytes(4), S.Pad((0, 0, 0), (0, 0, 0), (0, 0, 0)))
    spec = S.Attention(case.spec.prog, (S.PLAIN, pad), 0.5, D.float32, S.Dense())
    ops = tuple(on(dev, a, dt) for a, dt in zip(case.host, case.dtypes, strict=True))
    o, lse = Array.empty(D.float32, (1, 2, 2), dev), Array.empty(D.float32, (1, 2), dev)
    assert "Padded" in (LIBRARY.statement.declines(Call("attention", spec, (o, lse), ops)) or "")


def test_a_computed_call_is_one_the_statement_computes(dev: CudaRig) -> None:
    case = _case(np.random.default_rng(12), acc=D.float32, dt=D.bfloat16, lead=(), hq=1, hk=1, tq=2, tk=3,
                 dk=174, dv=174)
    ops = [on(dev, a, dt) for a, dt in zip(case.host, case.dtypes, strict=True)]
    o = Array.empty(D.bfloat16, (1, 2, 174), dev)
    lse = Array.empty(D.float32, (1, 2), dev)
    assert LIBRARY.statement.declines(Call("attention", case.spec, (o, lse), tuple(ops))) is None
    assert attention.tiles_for(175, 175, D.float32) is None


def test_misfits_get_their_refusal(dev: CudaRig) -> None:
    case = _case(np.random.default_rng(13), acc=D.float32, dt=D.float32, lead=(), hq=2, hk=1, tq=2, tk=3,
                 dk=2, dv=2)
    ops = [on(dev, a, dt) for a, dt in zip(case.host, case.dtypes, strict=True)]
    good_o, lse = Array.empty(D.float32, (2, 2, 2), dev), Array.empty(D.float32, (2, 2), dev)
    wrong_o = canary(dev, D.float16, (2, 2, 2))
    assert LIBRARY.attention(case.spec, [wrong_o, lse], ops) is Answer.WRONG_DTYPE and untouched(wrong_o)
    short_o = canary(dev, D.float32, (2, 2, 3))
    assert LIBRARY.attention(case.spec, [short_o, lse], ops) is Answer.SHAPE_MISMATCH and untouched(short_o)
    assert LIBRARY.attention(case.spec, [good_o, lse], ops[:2]) is Answer.BAD_ARITY
    k3 = on(dev, np.zeros((3, 3, 2), np.float32))  # 3 key heads do not divide 2 query heads
    v3 = on(dev, np.zeros((3, 3, 2), np.float32))
    assert LIBRARY.attention(case.spec, [good_o, lse], [ops[0], k3, v3]) is Answer.SHAPE_MISMATCH




def _drawn_sources() -> list[build.Source]:
    """The generated sources the tests above draw (one per program, dtypes,
    head dimensions and key layout; bfloat16 into float32 takes the tensor
    cores), and the tensor-core source of the largest head dimensions."""
    out = []
    for acc, dt in ((D.float32, D.float32), (D.float32, D.bfloat16), (D.float64, D.float64),
                    (D.float64, D.float16)):
        for shape in _SHAPES.values():
            dk, dv = int(shape["dk"]), int(shape["dv"])  # type: ignore[call-overload]
            named = {"causal": programs.causal, "all": programs.attend_all, "masked": programs.masked}
            prog = named[str(shape.get("prog", "causal"))](acc)
            loads = (D.bool_, acc) if prog.n_ins == 3 else ()
            paged = bool(shape.get("paged", 0))
            keys = attention_mma.tile_keys(dk, dv)
            if dt is D.bfloat16 and keys is not None:
                out.append(attention_mma.attention_mma_source(prog, loads, dt, dk, dv, keys, paged))
                continue
            tiles = attention.tiles_for(dk, dv, acc)
            assert tiles is not None
            out.append(attention.attention_source(prog, loads, dt, dt, dt, acc, dk, dv, tiles, paged))
    out.append(attention_mma.attention_mma_source(programs.causal(D.float32), (), D.float16, 128, 128, 64,
                                                  False))
    return out


@pytest.mark.parametrize("major", CI_NVRTC)
@pytest.mark.parametrize("arch", build.CI_ARCHES)
def test_generated_sources_compile_for_the_ci_arches(arch: str, major: int) -> None:
    """Every drawn source with the newest NVRTC for the newest CI arch; with an
    older NVRTC or for an older arch, each template once (a SIMT kernel, the
    tensor-core kernel of the largest head dimensions, the combine): the drawn
    variants differ in constants alone (no arch-dependent code follows from
    them), and a cold compile of them all costs minutes of CI per pair."""
    drawn = _drawn_sources()
    if major != max(CI_NVRTC) or arch != build.CI_ARCHES[-1]:
        drawn = [drawn[0], drawn[-1]]
    for source in [*drawn, attention.combine_source()]:
        cubin = build.compile(source, arch, nvrtc_of(major))
        assert cubin.path.read_bytes()[:4] == b"\x7fELF" and set(cubin.lowered) == set(source.kernels)


def test_an_o_identical_to_v_is_declined_and_one_identical_to_q_computed(dev: CudaRig) -> None:
    """o identical to v: other blocks would read what it writes, so it is
    declined (v untouched); o identical to q: each block reads its own rows
    before writing them, so the result is the separate call's, bit for bit."""
    case = _case(np.random.default_rng(15), acc=D.float32, dt=D.float32, lead=(), hq=1, hk=1, tq=70, tk=70,
                 dk=3, dv=3, prog="causal")
    ops = [on(dev, a, dt) for a, dt in zip(case.host, case.dtypes, strict=True)]
    lse = Array.empty(D.float32, (1, 70), dev)
    assert LIBRARY.attention(case.spec, [ops[2], lse], ops) is Answer.DECLINED
    assert LIBRARY.statement.declines(Call("attention", case.spec, (ops[2], lse), tuple(ops))) is not None
    assert same_bits(ops[2].to_numpy(), case.host[2], D.float32)
    _, o, lse_apart = _call(dev, case)
    assert LIBRARY.attention(case.spec, [ops[0], lse], ops) is Answer.DONE
    assert same_bits(ops[0].to_numpy(), o, D.float32) and same_bits(lse.to_numpy(), lse_apart, D.float32)


def test_bfloat16_and_float16_into_float32_take_the_tensor_cores(dev: CudaRig) -> None:
    """The kernel is chosen by dtypes, head dimensions and device model alone:
    q, k, v all bfloat16 or all float16 into float32 on sm_80 and later (the
    emulated device is sm_90) with dk, dv ≤ 256; SIMT otherwise."""
    def chosen(dt: Dtype, acc: Dtype, dk: int, dv: int, k_dt: Dtype | None = None) -> str:
        spec = S.Attention(programs.attend_all(acc), (), 1.0, acc, S.Dense())
        ops = [Array.empty(dt, (1, 1, dk), dev), Array.empty(k_dt or dt, (1, 1, dk), dev),
               Array.empty(dt, (1, 1, dv), dev)]
        return attention.kernel_for(dev, spec, ops, []).name

    assert chosen(D.bfloat16, D.float32, 128, 128) == attention_mma.KERNEL
    assert chosen(D.float16, D.float32, 64, 96) == attention_mma.KERNEL
    assert chosen(D.float16, D.float32, 174, 174) == attention_mma.KERNEL
    assert chosen(D.float32, D.float32, 128, 128) == attention.KERNEL
    assert chosen(D.bfloat16, D.float64, 64, 64) == attention.KERNEL
    assert chosen(D.bfloat16, D.float32, 64, 64, k_dt=D.float16) == attention.KERNEL
    assert attention_mma.tile_keys(257, 8) is None and attention_mma.tile_keys(256, 256) == 32
    assert attention_mma.tile_keys(128, 128) == 64
    sm75 = SimpleNamespace(arch_number=75)
    assert not attention_mma.takes(sm75, D.float32, D.bfloat16, D.bfloat16, D.bfloat16, 64, 64)  # type: ignore[arg-type]


def test_tensor_cores_hold_the_bounds_at_real_head_dimensions(dev: CudaRig) -> None:
    """float16 q, k, v into float32 at dk = dv = 128 (2 row tiles, 3 key tiles
    of 64, the last partial; grouped heads, causal): lse within ε and o
    within the contract's bound, weights rounded into float16 included."""
    case = _case(np.random.default_rng(21), acc=D.float32, dt=D.float16, lead=(), hq=2, hk=1, tq=70,
                 tk=150, dk=128, dv=128)
    answer, o, lse = _call(dev, case)
    assert answer is Answer.DONE
    _check(case, o, lse)


def test_tensor_cores_let_a_hidden_nan_value_of_a_read_tile_reach_o_as_stated(dev: CudaRig) -> None:
    """The tensor-core kernel's stated NaN rule: a NaN value at a pair the
    mask hides, in a key tile the block reads, makes o a NaN at that row and
    element (weight +0 times NaN); rows that see the key anyway are NaN
    there too, lse stays finite, other elements stay finite."""
    case = _case(np.random.default_rng(len("masked with bias")), acc=D.float32, dt=D.bfloat16,
                 **_SHAPES["masked with bias"])  # type: ignore[arg-type]
    case.host[-2][...] = True
    case.host[-2][0, 0, 1, 2] = False  # row 1 of lead 0, head 0 does not see key 2
    case.host[2][0, 0, 2, 1] = D.of_float(D.bfloat16, np.asarray(np.nan))  # its value's element 1
    answer, o, lse = _call(dev, case)
    assert answer is Answer.DONE
    assert np.isnan(o[0, 0, :, 1].astype(np.float32)).all()
    assert np.isfinite(o[0, 0, :, [0, 2]].astype(np.float32)).all() and np.isfinite(lse).all()
    assert "hides, in a key tile the block reads, makes o a NaN" in attention.ALGORITHM


@pytest.mark.parametrize("layout", ["permuted", "strided"])
def test_tensor_cores_read_any_layout_in_place_with_the_same_bits(dev: CudaRig, layout: str) -> None:
    """q, k and v through layouts whose rows are not consecutive (staged code
    by code, not by 16-byte loads) give the contiguous call's bits."""
    case = _case(np.random.default_rng(len("grouped causal")), acc=D.float32, dt=D.bfloat16,
                 **_SHAPES["grouped causal"])  # type: ignore[arg-type]
    _, o_c, lse_c = _call(dev, case)
    ops = [placed(a, dt, layout, dev) if i < 3 else on(dev, a, dt)
           for i, (a, dt) in enumerate(zip(case.host, case.dtypes, strict=True))]
    q, v = case.host[0], case.host[2]
    o = Array.empty(D.bfloat16, (*q.shape[:-1], v.shape[-1]), dev)
    lse = Array.empty(D.float32, q.shape[:-1], dev)
    assert LIBRARY.attention(case.spec, [o, lse], ops) is Answer.DONE
    assert same_bits(o.to_numpy(), o_c, D.bfloat16) and same_bits(lse.to_numpy(), lse_c, D.float32)


def test_tensor_cores_pack_the_query_heads_of_a_key_head(dev: CudaRig) -> None:
    """Grouped heads whose rows fit one row tile (decode shapes) share a unit:
    each key tile is read once for the group. A program reading the query
    row, the key and the head (Coord 1, 0, 2) sees each row's own head and
    query row: key ≤ row + 1 visible, logit score + head."""
    acc, dt = D.float32, D.bfloat16
    case = _case(np.random.default_rng(23), acc=acc, dt=dt, lead=(2,), hq=4, hk=1, tq=3, tk=40, dk=16, dv=8,
                 prog="all", lengths=True)
    b = Prog.build([acc])
    visible = b.less_equal(b.coord(0), b.coord(1) + b.const(D.int64, 1))
    prog = b.finish(visible, b.ins[0] + b.cast(b.coord(2), acc))
    case.spec = S.Attention(prog, (), case.spec.scale, acc, S.Dense(), True)
    rows, keys = np.arange(3)[:, None], np.arange(40)[None, :]
    case.visible = case.visible & (keys <= rows + 1)
    case.logits = case.score + np.arange(4)[:, None, None]
    ops = [on(dev, a, t) for a, t in zip(case.host, case.dtypes, strict=True)]
    assert attention.kernel_for(dev, case.spec, ops, []).pack(4, 3) == 4
    answer, o, lse = _call(dev, case)
    assert answer is Answer.DONE
    _check(case, o, lse)

"""The host library's attention against a reference written from the contract's
"Attention" section, in extended precision, within the bounds the family states:
lse within ε (plus what q·k's error moves the outputs by), o within the stated
weights' δ and e(tk) = γ(tk + 3) of Σ w v. Each rule has its own test:
visibility by lengths, table and mask (hidden keys and values never read, NaN
and infinity at hidden pairs never reaching o), empty and −∞-only rows, a NaN
value at a visible pair of weight 0, grouped and multi-query heads, paged equal
to dense, masks and score transforms as programs, narrow dtypes, bits that do
not depend on the thread count, and refusals before any write."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

from nxkernel_core import dtype as D
from nxkernel_core import masks, nx
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_core.dtype import Dtype
from nxkernel_core.kernel import Call, gamma, unit_roundoff
from nxkernel_core.layout import Broadcast, Permute
from nxkernel_core.prog import Builder, Prog, Value
from nxkernel_host import attention as attention_module
from nxkernel_host import attnplan as A
from nxkernel_host import threads
from nxkernel_host.attention import FAMILY
from nxkernel_host.library import library

NDArray = np.ndarray[Any, Any]
LD = np.longdouble
attention = library.attention

# --------------------------------------------------------------------------
# Programs
# --------------------------------------------------------------------------

def program(acc: Dtype, mask: Callable[[Builder, Value, Value], Value] | None = None,
            logit: Callable[[Builder, Value], Value] | None = None,
            loads: Sequence[Dtype] = ()) -> Prog:
    """Output 0 ``mask(b, row, key)`` (all keys where None), output 1
    ``logit(b, score)`` (the score where None); Coord 1 is the row, Coord 0 the key."""
    b = Prog.build([acc, *loads])
    row, key = b.coord(1), b.coord(0)
    vis = b.const(D.bool_, True) if mask is None else mask(b, row, key)
    out = b.copy(b.ins[0]) if logit is None else logit(b, b.ins[0])
    return b.finish(vis, out)


def causal(off: int) -> Callable[[Builder, Value, Value], Value]:
    return lambda b, row, key: b.less_equal(key, row + b.const(D.int64, off))


def window(off: int, width: int) -> Callable[[Builder, Value, Value], Value]:
    return lambda b, row, key: b.and_(
        b.less_equal(key, row + b.const(D.int64, off)),
        b.less(row + b.const(D.int64, off - width), key))


def prefix(size: int, off: int) -> Callable[[Builder, Value, Value], Value]:
    return lambda b, row, key: b.or_(b.less(key, b.const(D.int64, size)),
                                     b.less_equal(key, row + b.const(D.int64, off)))


def every_third(b: Builder, row: Value, key: Value) -> Value:
    """(row + key) mod 3 != 0: not a band, so the mask runs per block."""
    return b.not_equal((row + key) % b.const(D.int64, 3), b.const(D.int64, 0))


def causal_int32(off: int) -> Callable[[Builder, Value, Value], Value]:
    """Causal through int32 casts: the same mask, which the band analysis leaves
    to the general path."""
    return lambda b, row, key: b.less_equal(b.cast(key, D.int32),
                                            b.cast(row, D.int32) + b.const(D.int32, off))


# The same masks in NumPy, over rows i and keys j.
def causal_np(off: int) -> Callable[[NDArray, NDArray], NDArray]:
    return lambda i, j: j <= i + off


def window_np(off: int, width: int) -> Callable[[NDArray, NDArray], NDArray]:
    return lambda i, j: (j <= i + off) & (i + off - width < j)


def prefix_np(size: int, off: int) -> Callable[[NDArray, NDArray], NDArray]:
    return lambda i, j: (j < size) | (j <= i + off)


def every_third_np(i: NDArray, j: NDArray) -> NDArray:
    return np.asarray((i + j) % 3 != 0)


# --------------------------------------------------------------------------
# The reference and the bounds
# --------------------------------------------------------------------------


def reference(q: NDArray, k: NDArray, v: NDArray, s: float, visible: NDArray,
              logits: Callable[[NDArray], NDArray] = lambda x: x) -> dict[str, NDArray]:
    """The contract's attention in extended precision for dense keys ``k``/``v``
    ``[lead…; hk; tk; d]`` (hidden keys may hold anything): per query row, L the
    log-sum-exp of the visible outputs, o = Σ exp(x − L) v over the visible
    pairs from +0; o = +0 and L = −∞ for a row of no visible pair or only −∞
    outputs. Also Σ|qᵢkᵢ| per pair and the weights, for the bounds."""
    hq, hk = q.shape[-3], k.shape[-3]
    k = np.repeat(k, hq // hk, axis=-3) if hk else k
    v = np.repeat(v, hq // hk, axis=-3) if hk else v
    qq, kk, vv = (np.asarray(a, dtype=np.float64).astype(LD) for a in (q, k, v))
    with np.errstate(all="ignore"):
        score = LD(s) * np.einsum("...qd,...kd->...qk", qq, kk)
        absqk = np.einsum("...qd,...kd->...qk", np.abs(qq), np.abs(kk))
        x = np.where(visible, logits(score), -np.inf)
        m = np.max(x, axis=-1, initial=-np.inf) if x.shape[-1] else np.full(x.shape[:-1], -np.inf)
        finite = np.isfinite(m)
        shift = np.where(finite, m, 0)
        total = np.sum(np.where(visible, np.exp(x - shift[..., None]), 0), axis=-1)
        lse = np.where(finite, shift + np.log(total), m)
        w = np.where(visible & np.isfinite(lse)[..., None], np.exp(x - lse[..., None]), 0)
        vz = np.where(np.isfinite(vv), vv, 0)
        o = np.einsum("...qk,...kd->...qd", w, vz)
        o[~np.isfinite(lse)] = 0
    return {"o": o, "lse": lse, "w": w, "x": x, "absqk": np.where(visible, absqk, 0),
            "v": vz, "visible": visible}


def check(o: NDArray, lse: NDArray, ref: dict[str, NDArray], acc: Dtype, odt: Dtype,
          s: float, dk: int, extra: float = 0.0) -> None:
    """o and lse within the stated bounds of the reference, where the reference
    has a finite lse: |lse − L| ≤ ε + Δ, Δ what q·k's error and the score's
    rounding (and ``extra``·u·|x| for a transform) move an output by; each
    weight then within a factor e^{2Δ + δ} of the reference's, and o within
    that and γ(tk + 3) of Σ w |v|, plus its rounding into its dtype (half a
    subnormal step below its normal range)."""
    u = unit_roundoff(acc)
    tk = ref["x"].shape[-1]
    x, w, vis = ref["x"], ref["w"], ref["visible"]
    xf = np.where(np.isfinite(x), np.abs(x), 0).astype(np.float64)
    delta_x = abs(s) * gamma(dk, u) * ref["absqk"].astype(np.float64) + (1 + extra) * u * xf
    dmax = np.max(np.where(vis, delta_x, 0), axis=-1, initial=0.0)
    b = np.max(np.where(vis, xf, 0), axis=-1, initial=0.0) + dmax
    ln_tk = math.log(max(tk, 1))
    eps = (3 * b + ln_tk + 8) * u + gamma(max(tk, 1), u)
    lse_ref = ref["lse"].astype(np.float64)
    ok = np.isfinite(lse_ref)
    np.testing.assert_array_equal(np.isfinite(lse), ok)
    with np.errstate(invalid="ignore"):
        err = np.abs(lse.astype(np.float64) - lse_ref)
    assert np.all(err[ok] <= (eps + dmax)[ok]), (err[ok] - (eps + dmax)[ok]).max()
    delta = (1 + u) * eps + (2 * b + ln_tk) * u + 5 * u / (1 - u)
    eta = np.expm1(2 * dmax + delta)
    mass = np.einsum("...qk,...kd->...qd", w.astype(np.float64),
                     np.abs(ref["v"]).astype(np.float64))
    uo = unit_roundoff(odt)
    fmt = odt.float_format
    assert fmt is not None
    tiny = fmt.min_normal * uo  # o's rounding below its normal range: half a subnormal step
    o_ref = ref["o"].astype(np.float64)
    bound = ((eta + gamma(tk + 3, u) * (1 + eta))[..., None] * mass
             + uo * (np.abs(o_ref) + (eta[..., None] + gamma(tk + 3, u)) * mass) + tiny)
    err_o = np.abs(o.astype(np.float64) - o_ref)
    rows = ok[..., None] & np.ones(o.shape, bool)
    assert np.all(err_o[rows] <= bound[rows]), (err_o[rows] / bound[rows]).max()


# --------------------------------------------------------------------------
# Calling the kernel
# --------------------------------------------------------------------------


def run(spec: S.Attention, operands: Sequence[NDArray | Array], odt: Dtype,
        dtypes: Sequence[Dtype | None] | None = None) -> tuple[NDArray, NDArray]:
    """The kernel's o and lse for NumPy (or Array) operands."""
    arrays = [x if isinstance(x, Array) else
              Array.from_numpy(x, dtype=(dtypes[i] if dtypes and dtypes[i] else None))
              for i, x in enumerate(operands)]
    q = arrays[0]
    o_shape = (*q.shape[:-1], arrays[2].shape[-1])
    o = Array.empty(odt, o_shape)
    lse = Array.empty(spec.acc, q.shape[:-1])
    assert attention(spec, [o, lse], arrays) is Answer.DONE
    return o.to_numpy(), lse.to_numpy()


def data(shape: Sequence[int], dt: Any = np.float32, seed: int = 0, scale: float = 1.0) -> NDArray:
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(dt)


def mask_of(fn: Callable[[NDArray, NDArray], NDArray] | None, lead: Sequence[int], hq: int,
            tq: int, tk: int) -> NDArray:
    i = np.arange(tq)[:, None]
    j = np.arange(tk)[None, :]
    m = np.ones((tq, tk), bool) if fn is None else np.broadcast_to(fn(i, j), (tq, tk))
    return np.broadcast_to(m, (*lead, hq, tq, tk)).copy()


def with_lengths(vis: NDArray, lengths: NDArray) -> NDArray:
    tk = vis.shape[-1]
    keep = np.arange(tk) < lengths.reshape(*lengths.shape, 1, 1, 1)
    return vis & keep


# --------------------------------------------------------------------------
# Against the reference
# --------------------------------------------------------------------------


@pytest.mark.parametrize("acc", [D.float32, D.float64])
@pytest.mark.parametrize("case", ["all", "causal", "window", "prefix", "every_third",
                                  "causal_int32"])
def test_masks_against_the_reference(acc: Dtype, case: str) -> None:
    lead, hq, hk, tq, tk, dk, dv = (2,), 4, 2, 37, 53, 8, 5
    off = tk - tq
    mask, fn = {
        "all": (None, None), "causal": (causal(off), causal_np(off)),
        "window": (window(off, 9), window_np(off, 9)), "prefix": (prefix(7, off), prefix_np(7, off)),
        "every_third": (every_third, every_third_np),
        "causal_int32": (causal_int32(off), causal_np(off)),
    }[case]
    npdt = acc.numpy_dtype
    q, k, v = data((*lead, hq, tq, dk), npdt, 1), data((*lead, hk, tk, dk), npdt, 2), \
        data((*lead, hk, tk, dv), npdt, 3)
    s = 1 / math.sqrt(dk)
    spec = S.Attention(program(acc, mask), (), s, acc, S.Dense())
    o, lse = run(spec, [q, k, v], acc)
    ref = reference(q, k, v, float(npdt.type(s)), mask_of(fn, lead, hq, tq, tk))
    check(o, lse, ref, acc, acc, s, dk)


def test_fast_and_general_paths_give_the_same_bits() -> None:
    """Causal as a band and causal through int32 casts (the per-block path)."""
    q, k, v = data((3, 70, 16), seed=4), data((3, 90, 16), seed=5), data((3, 90, 8), seed=6)
    outs = []
    for mask in (causal(20), causal_int32(20)):
        spec = S.Attention(program(D.float32, mask), (), 0.3, D.float32, S.Dense())
        outs.append(run(spec, [q, k, v], D.float32))
    np.testing.assert_array_equal(outs[0][0], outs[1][0])
    np.testing.assert_array_equal(outs[0][1], outs[1][1])


def test_the_band_analysis() -> None:
    acc = D.float32
    assert masks.band(program(acc)) is not None
    for mask in (causal(3), window(0, 4), prefix(2, 0)):
        assert masks.band(program(acc, mask)) is not None
    assert masks.band(program(acc, every_third)) is None
    assert masks.band(program(acc, causal_int32(0))) is None
    # A constant so large that the program's int64 arithmetic could wrap is
    # left to the general path.
    band = masks.band(program(acc, causal(1 << 61)))
    assert band is not None and not band.exact_for(4, 4)
    q, k, v = data((1, 4, 3)), data((1, 6, 3)), data((1, 6, 2))
    for off in (1 << 61, (1 << 63) - 1):
        spec = S.Attention(program(acc, causal(off)), (), 1.0, acc, S.Dense())
        o, lse = run(spec, [q, k, v], acc)
        i, j = np.arange(4)[:, None], np.arange(6)[None, :]
        with np.errstate(over="ignore"):
            wrapped = j <= (i + np.int64(off))
        check(o, lse, reference(q, k, v, 1.0, wrapped[None]), acc, acc, 1.0, 3)


def test_one_row_tile_of_several_and_the_streaming_path() -> None:
    """Rows over several row tiles, and keys over several key tiles (the
    running float64 maximum, sum and values), causal and not."""
    tk = 2 * A.KEYS + 700
    tq = A.ROWS + 3
    q, k, v = data((1, tq, 4), seed=7), data((1, tk, 4), seed=8), data((1, tk, 3), seed=9)
    for mask, fn in ((None, None), (causal(tk - tq), causal_np(tk - tq))):
        spec = S.Attention(program(D.float32, mask), (), 0.5, D.float32, S.Dense())
        o, lse = run(spec, [q, k, v], D.float32)
        check(o, lse, reference(q, k, v, 0.5, mask_of(fn, (), 1, tq, tk)), D.float32,
              D.float32, 0.5, 4)
    q, k, v = data((2, 130, 8), seed=1), data((2, 150, 8), seed=2), data((2, 150, 4), seed=3)
    spec = S.Attention(program(D.float32, causal(20)), (), 0.5, D.float32, S.Dense())
    o, lse = run(spec, [q, k, v], D.float32)
    check(o, lse, reference(q, k, v, 0.5, mask_of(causal_np(20), (), 2, 130, 150)), D.float32,
          D.float32, 0.5, 8)


# --------------------------------------------------------------------------
# Visibility: lengths, table, hidden values
# --------------------------------------------------------------------------


def test_lengths_hide_keys_that_are_never_read() -> None:
    lead, hq, tq, tk, dk, dv = (5,), 2, 6, 9, 4, 3
    q, k, v = data((*lead, hq, tq, dk), seed=1), data((*lead, hq, tk, dk), seed=2), \
        data((*lead, hq, tk, dv), seed=3)
    lengths = np.array([0, 3, 9, 20, -2], np.int64)
    k2, v2 = k.copy(), v.copy()
    for b, n in enumerate(lengths):
        k2[b, :, n:] = np.nan
        v2[b, :, n:] = np.inf
    spec = S.Attention(program(D.float32), (), 0.5, D.float32, S.Dense(), lengths=True)
    o, lse = run(spec, [q, k2, v2, lengths], D.float32)
    assert np.isfinite(o).all()
    vis = with_lengths(mask_of(None, lead, hq, tq, tk), lengths)
    check(o, lse, reference(q, k, v, 0.5, vis), D.float32, D.float32, 0.5, dk)
    # Lengths 0 and −2: no visible pair, o = +0 and lse = −∞.
    assert np.all(lse[[0, 4]] == -np.inf)
    assert np.all((o[[0, 4]] == 0) & ~np.signbit(o[[0, 4]]))


def paged(k: NDArray, v: NDArray, page: int, seed: int = 0
          ) -> tuple[NDArray, NDArray, NDArray]:
    """Pools and a table holding dense ``k``, ``v`` [B; hk; tk; d] (tk a multiple
    of page), pages shuffled, with one spare page of NaNs no entry names."""
    bsz, hk, tk, dk = k.shape
    dv = v.shape[-1]
    per = tk // page
    n = bsz * per + 1
    order = np.random.default_rng(seed).permutation(n - 1)
    kp = np.full((n, hk, page, dk), np.nan, k.dtype)
    vp = np.full((n, hk, page, dv), np.nan, v.dtype)
    table = order.reshape(bsz, per).astype(np.int64)
    for b in range(bsz):
        for p in range(per):
            kp[table[b, p]] = k[b, :, p * page:(p + 1) * page]
            vp[table[b, p]] = v[b, :, p * page:(p + 1) * page]
    return kp, vp, table


@pytest.mark.parametrize("mask", ["all", "causal"])
def test_paged_equals_dense_on_the_same_keys(mask: str) -> None:
    bsz, hq, hk, tq, tk, dk, dv, page = 3, 4, 2, 20, 48, 8, 6, 16
    q, k, v = data((bsz, hq, tq, dk), seed=1), data((bsz, hk, tk, dk), seed=2), \
        data((bsz, hk, tk, dv), seed=3)
    kp, vp, table = paged(k, v, page)
    prog = program(D.float32, None if mask == "all" else causal(tk - tq))
    lengths = np.array([48, 30, 5], np.int64)
    dense = run(S.Attention(prog, (), 0.25, D.float32, S.Dense(), True), [q, k, v, lengths],
                D.float32)
    pages = run(S.Attention(prog, (), 0.25, D.float32, S.Paged(page), True),
                [q, kp, vp, table, lengths], D.float32)
    np.testing.assert_array_equal(dense[0], pages[0])
    np.testing.assert_array_equal(dense[1], pages[1])


def test_table_entries_outside_the_pool_are_hidden() -> None:
    hq, tq, dk, dv, page = 2, 5, 4, 3, 4
    k, v = data((1, hq, 16, dk), seed=2), data((1, hq, 16, dv), seed=3)
    kp, vp, table = paged(k, v, page)
    pages = kp.shape[0]
    table[0, 1] = -1
    table[0, 3] = pages + 5
    q = data((1, hq, tq, dk), seed=1)
    o, lse = run(S.Attention(program(D.float32), (), 0.5, D.float32, S.Paged(page)),
                 [q, kp, vp, table], D.float32)
    vis = mask_of(None, (1,), hq, tq, 16)
    vis[..., 4:8] = False
    vis[..., 12:16] = False
    assert np.isfinite(o).all()
    check(o, lse, reference(q, k, v, 0.5, vis), D.float32, D.float32, 0.5, dk)
    # Every entry hidden: no visible pair.
    table[...] = -3
    o, lse = run(S.Attention(program(D.float32), (), 0.5, D.float32, S.Paged(page)),
                 [q, kp, vp, table], D.float32)
    assert np.all(lse == -np.inf) and np.all((o == 0) & ~np.signbit(o))


def test_nan_and_infinity_at_hidden_pairs_never_reach_o() -> None:
    """NaN and ±∞ in keys, values and a bias load at pairs the causal mask
    hides; and a bias of NaN where the pair is hidden."""
    hq, tq, tk, dk, dv = 2, 12, 12, 4, 3
    q, k, v = data((hq, tq, dk), seed=1), data((hq, tk, dk), seed=2), data((hq, tk, dv), seed=3)
    bias = data((hq, tq, tk), seed=4, scale=0.1)
    k2, v2, bias2 = k.copy(), v.copy(), bias.copy()
    # Key 11 is seen by the last row alone: poison it except there.
    k2[:, 11] = np.nan
    v2[:, 11] = [np.inf, np.nan, -np.inf]
    hidden = ~causal_np(0)(np.arange(tq)[:, None], np.arange(tk)[None, :])
    bias2[:, hidden] = np.nan
    prog = program(D.float32, causal(0), lambda b, sc: sc + b.ins[1], [D.float32])
    o, lse = run(S.Attention(prog, (S.PLAIN,), 0.5, D.float32, S.Dense()), [q, k2, v2, bias2],
                 D.float32)
    # Only the last row sees key 11, whose key is a NaN: its output is a NaN.
    assert np.all(np.isnan(lse[:, -1])) and np.all(np.isnan(o[:, -1]))
    assert np.isfinite(o[:, :-1]).all() and np.isfinite(lse[:, :-1]).all()
    vis = mask_of(causal_np(0), (), hq, tq, tk)
    vis[:, -1] = False
    b_ld = bias.astype(np.float64).astype(LD)
    ref = reference(q, k, v, 0.5, vis, lambda x: x + b_ld)
    o[:, -1] = 0
    lse[:, -1] = -np.inf
    check(o, lse, ref, D.float32, D.float32, 0.5, dk, extra=1)


# --------------------------------------------------------------------------
# Special rows
# --------------------------------------------------------------------------


def test_rows_of_no_visible_pair() -> None:
    """Causal with tq > tk: the first rows see no key; and tk = 0."""
    q, k, v = data((2, 9, 4), seed=1), data((2, 5, 4), seed=2), -np.abs(data((2, 5, 3), seed=3))
    o, lse = run(S.Attention(program(D.float32, causal(5 - 9)), (), 1.0, D.float32, S.Dense()),
                 [q, k, v], D.float32)
    assert np.all(lse[:, :4] == -np.inf)
    assert np.all((o[:, :4] == 0) & ~np.signbit(o[:, :4]))
    check(o, lse, reference(q, k, v, 1.0, mask_of(causal_np(-4), (), 2, 9, 5)), D.float32,
          D.float32, 1.0, 4)
    o, lse = run(S.Attention(program(D.float32), (), 1.0, D.float32, S.Dense()),
                 [q, k[:, :0], v[:, :0]], D.float32)
    assert np.all(lse == -np.inf) and np.all((o == 0) & ~np.signbit(o))


def test_rows_of_only_minus_infinity_outputs() -> None:
    """Outputs all −∞ (from a bias) give o = +0 and lse = −∞, even where the
    visible values are NaNs."""
    q, k, v = data((1, 4, 3), seed=1), data((1, 6, 3), seed=2), data((1, 6, 2), seed=3)
    v[0, 2] = np.nan
    bias = np.zeros((1, 4, 6), np.float32)
    bias[0, 1] = -np.inf
    bias[0, 3, :] = -np.inf
    bias[0, 3, 2] = 0  # row 3 sees key 2 (a NaN value) with weight 1
    prog = program(D.float32, None, lambda b, sc: sc + b.ins[1], [D.float32])
    o, lse = run(S.Attention(prog, (S.PLAIN,), 1.0, D.float32, S.Dense()), [q, k, v, bias],
                 D.float32)
    assert lse[0, 1] == -np.inf and np.all((o[0, 1] == 0) & ~np.signbit(o[0, 1]))
    assert np.isnan(o[0, 0]).all() and np.isnan(o[0, 2]).all()  # weight > 0 on a NaN value
    assert np.isnan(o[0, 3]).all() and np.isfinite(lse[0, 3])


def test_a_nan_value_of_weight_zero_makes_o_a_nan() -> None:
    """A visible pair whose weight underflows to 0 still counts its value."""
    q, k, v = data((1, 3, 2), seed=1), data((1, 4, 2), seed=2), data((1, 4, 2), seed=3)
    v[0, 3] = [np.nan, 1.0]
    bias = np.zeros((1, 3, 4), np.float32)
    bias[0, 0, 3] = -1e30  # exp(x − lse) underflows to 0
    bias[0, 1, 3] = -np.inf  # weight exactly 0
    prog = program(D.float32, None, lambda b, sc: sc + b.ins[1], [D.float32])
    o, lse = run(S.Attention(prog, (S.PLAIN,), 1.0, D.float32, S.Dense()), [q, k, v, bias],
                 D.float32)
    assert np.isnan(o[0, 0, 0]) and np.isnan(o[0, 1, 0]) and np.isnan(o[0, 2, 0])
    assert np.isfinite(o[0, :, 1]).all() and np.isfinite(lse).all()
    # Hidden by a mask instead, the same NaN value never reaches o.
    prog = program(D.float32, lambda b, row, key: b.less(key, b.const(D.int64, 3)),
                   lambda b, sc: sc + b.ins[1], [D.float32])
    o, _ = run(S.Attention(prog, (S.PLAIN,), 1.0, D.float32, S.Dense()), [q, k, v, bias],
               D.float32)
    assert np.isfinite(o).all()


def test_infinite_and_nan_outputs() -> None:
    """A +∞ output (no NaN) gives lse = +∞ and o a NaN; a NaN output a NaN."""
    q, k, v = data((1, 2, 3), seed=1), data((1, 4, 3), seed=2), data((1, 4, 2), seed=3)
    bias = np.zeros((1, 2, 4), np.float32)
    bias[0, 0, 1] = np.inf
    bias[0, 1, 2] = np.nan
    prog = program(D.float32, None, lambda b, sc: sc + b.ins[1], [D.float32])
    o, lse = run(S.Attention(prog, (S.PLAIN,), 1.0, D.float32, S.Dense()), [q, k, v, bias],
                 D.float32)
    assert lse[0, 0] == np.inf and np.isnan(o[0, 0]).all()
    assert np.isnan(lse[0, 1]) and np.isnan(o[0, 1]).all()


# --------------------------------------------------------------------------
# Heads, programs, dtypes, scale
# --------------------------------------------------------------------------


@pytest.mark.parametrize("hk", [1, 2, 6])
def test_grouped_and_multi_query_heads(hk: int) -> None:
    hq, tq, tk, dk, dv = 6, 7, 11, 5, 4
    q, k, v = data((2, hq, tq, dk), seed=1), data((2, hk, tk, dk), seed=2), \
        data((2, hk, tk, dv), seed=3)
    o, lse = run(S.Attention(program(D.float32, causal(4)), (), 0.7, D.float32, S.Dense()),
                 [q, k, v], D.float32)
    check(o, lse, reference(q, k, v, float(np.float32(0.7)), mask_of(causal_np(4), (2,), hq,
                                                                     tq, tk)),
          D.float32, D.float32, 0.7, dk)
    # Head h reads key head h // (hq / hk): each query head alone gives the same.
    for h in range(hq):
        g = h // (hq // hk)
        alone = run(S.Attention(program(D.float32, causal(4)), (), 0.7, D.float32, S.Dense()),
                    [q[:, h:h + 1], k[:, g:g + 1], v[:, g:g + 1]], D.float32)
        np.testing.assert_allclose(alone[0][:, 0], o[:, h], rtol=1e-6, atol=1e-7)


def test_decoding_rows_of_grouped_heads_as_one_tile() -> None:
    """A few query rows per head, hk < hq (decoding): the heads of a key head
    are one row tile, its keys over several of KEYS; within the bounds, one
    and two threads giving the same bits, each head alone (its own row tile)
    within rounding; with lengths, a NaN value past one length and an infinite
    one on a visible key."""
    lead, hq, hk, tq, tk, dk, dv = (2,), 8, 2, 2, 2 * A.KEYS + 300, 16, 8
    q, k, v = data((*lead, hq, tq, dk), seed=1), data((*lead, hk, tk, dk), seed=2), \
        data((*lead, hk, tk, dv), seed=3)
    lengths = np.array([tk, tk - 700], np.int64)
    v[1, :, tk - 10] = np.nan  # past lead index 1's length: never read
    spec = S.Attention(program(D.float32), (), 0.25, D.float32, S.Dense(), lengths=True)
    outs = []
    for n in (1, 2):
        with threads(n):
            outs.append(run(spec, [q, k, v, lengths], D.float32))
    np.testing.assert_array_equal(outs[0][0], outs[1][0])
    np.testing.assert_array_equal(outs[0][1], outs[1][1])
    o, lse = outs[0]
    vis = with_lengths(mask_of(None, lead, hq, tq, tk), lengths)
    check(o, lse, reference(q, k, v, 0.25, vis), D.float32, D.float32, 0.25, dk)
    alone = run(spec, [q[:, :1], k[:, :1], v[:, :1], lengths], D.float32)
    np.testing.assert_allclose(alone[0][:, 0], o[:, 0], rtol=1e-5, atol=1e-6)
    v[0, 1, 5] = np.inf  # seen by every row of key head 1 at lead index 0
    o, lse = run(spec, [q, k, v, lengths], D.float32)
    assert np.isposinf(o[0, 4:]).all() and np.isfinite(o[0, :4]).all() and np.isfinite(o[1]).all()


def test_soft_capping_transform() -> None:
    """Output 1 = c·tanh(score / c), run per block."""
    c = 5.0
    q, k, v = data((2, 9, 8), seed=1, scale=2), data((2, 13, 8), seed=2, scale=2), \
        data((2, 13, 4), seed=3)
    prog = program(D.float32, causal(4), lambda b, sc: b.tanh(sc / c) * c)
    o, lse = run(S.Attention(prog, (), 0.5, D.float32, S.Dense()), [q, k, v], D.float32)
    ref = reference(q, k, v, 0.5, mask_of(causal_np(4), (), 2, 9, 13),
                    lambda x: np.tanh(x / LD(c)) * LD(c))
    check(o, lse, ref, D.float32, D.float32, 0.5, 8, extra=8)


def test_alibi_like_bias_from_a_broadcast_load() -> None:
    """Output 1 = score − slope[h]·(row − key), the bias a load broadcast over lead."""
    hq, tq, tk, dk, dv = 4, 10, 10, 6, 3
    q, k, v = data((3, hq, tq, dk), seed=1), data((3, hq, tk, dk), seed=2), \
        data((3, hq, tk, dv), seed=3)
    slopes = np.array([0.5, 0.25, 0.125, 0.0625], np.float32)
    dist = (np.arange(tq)[:, None] - np.arange(tk)[None, :]).astype(np.float32)
    bias = (-slopes[:, None, None] * dist).astype(np.float32)
    base = Array.from_numpy(bias)
    load = base.reshape((1, hq, tq, tk)).view(Broadcast((3, hq, tq, tk)))
    prog = program(D.float32, causal(0), lambda b, sc: sc + b.ins[1], [D.float32])
    o, lse = run(S.Attention(prog, (S.PLAIN,), 0.4, D.float32, S.Dense()),
                 [q, k, v, load], D.float32)
    b_ld = np.broadcast_to(bias, (3, hq, tq, tk)).astype(np.float64).astype(LD)
    ref = reference(q, k, v, float(np.float32(0.4)), mask_of(causal_np(0), (3,), hq, tq, tk),
                    lambda x: x + b_ld)
    check(o, lse, ref, D.float32, D.float32, 0.4, dk, extra=1)


def test_a_mask_from_a_load_and_coords_of_lead_axes() -> None:
    """Output 0 read from a bool load, and a mask on the head (Coord 2)."""
    hq, tq, tk = 3, 5, 7
    q, k, v = data((2, hq, tq, 4), seed=1), data((2, hq, tk, 4), seed=2), data((2, hq, tk, 2), seed=3)
    vis = np.random.default_rng(5).random((2, hq, tq, tk)) < 0.6
    b = Prog.build([D.float32, D.bool_])
    prog = b.finish(b.copy(b.ins[1]), b.copy(b.ins[0]))
    o, lse = run(S.Attention(prog, (S.PLAIN,), 0.5, D.float32, S.Dense()), [q, k, v, vis],
                 D.float32)
    check(o, lse, reference(q, k, v, 0.5, vis), D.float32, D.float32, 0.5, 4)
    b = Prog.build([D.float32])
    prog = b.finish(b.less_equal(b.coord(0), b.coord(2)), b.copy(b.ins[0]))  # key <= head
    o, lse = run(S.Attention(prog, (), 0.5, D.float32, S.Dense()), [q, k, v], D.float32)
    heads = np.arange(hq)[:, None, None] >= np.arange(tk)[None, None, :]
    check(o, lse, reference(q, k, v, 0.5, np.broadcast_to(heads, (2, hq, tq, tk))), D.float32,
          D.float32, 0.5, 4)


@pytest.mark.parametrize("dt", [D.float16, D.bfloat16, D.float8_e4m3fn])
def test_narrow_operands_widen_to_the_accumulator(dt: Dtype) -> None:
    npdt = dt.numpy_dtype
    q, k, v = (data(shape, seed=i, scale=0.5).astype(npdt)
               for i, shape in enumerate([(2, 6, 8), (2, 9, 8), (2, 9, 4)]))
    spec = S.Attention(program(D.float32, causal(3)), (), 0.5, D.float32, S.Dense())
    o, lse = run(spec, [q, k, v], dt, [dt, dt, dt])
    assert o.dtype == npdt
    ref = reference(q.astype(np.float32), k.astype(np.float32), v.astype(np.float32), 0.5,
                    mask_of(causal_np(3), (), 2, 6, 9))
    check(o, lse, ref, D.float32, dt, 0.5, 8)


def test_float64_operands_with_a_float32_accumulator() -> None:
    q, k, v = data((1, 5, 6), np.float64, 1), data((1, 8, 6), np.float64, 2), \
        data((1, 8, 3), np.float64, 3)
    o, lse = run(S.Attention(program(D.float32), (), 0.5, D.float32, S.Dense()), [q, k, v],
                 D.float64)
    assert o.dtype == np.float64 and lse.dtype == np.float32
    check(o, lse, reference(q, k, v, 0.5, mask_of(None, (), 1, 5, 8)), D.float32, D.float32,
          0.5, 6, extra=1)


def test_the_scale_rounds_to_the_accumulator_and_may_be_negative() -> None:
    q, k, v = data((1, 4, 5), seed=1), data((1, 6, 5), seed=2), data((1, 6, 2), seed=3)
    for s in (0.1, -0.3):
        o, lse = run(S.Attention(program(D.float32, causal(2)), (), s, D.float32, S.Dense()),
                     [q, k, v], D.float32)
        check(o, lse, reference(q, k, v, float(np.float32(s)), mask_of(causal_np(2), (), 1, 4, 6)),
              D.float32, D.float32, s, 5)


def test_edge_extents() -> None:
    """dk = 0 (every score 0: o the mean of the values), dv = 0, tq = 0, hq = 0."""
    v = data((1, 4, 3), seed=3)
    o, lse = run(S.Attention(program(D.float32), (), 1.0, D.float32, S.Dense()),
                 [np.zeros((1, 2, 0), np.float32), np.zeros((1, 4, 0), np.float32), v], D.float32)
    np.testing.assert_allclose(o, np.broadcast_to(v.mean(axis=1, keepdims=True), (1, 2, 3)),
                               rtol=1e-6)
    np.testing.assert_allclose(lse, math.log(4), rtol=1e-6)
    o, lse = run(S.Attention(program(D.float32), (), 1.0, D.float32, S.Dense()),
                 [data((1, 2, 3)), data((1, 4, 3)), np.zeros((1, 4, 0), np.float32)], D.float32)
    assert o.shape == (1, 2, 0) and np.isfinite(lse).all()
    for shape in [(1, 0, 3), (0, 2, 3)]:
        o, lse = run(S.Attention(program(D.float32), (), 1.0, D.float32, S.Dense()),
                     [np.zeros(shape, np.float32), data((shape[0], 4, 3)),
                      data((shape[0], 4, 2))], D.float32)
        assert o.size == 0 and lse.size == 0


def test_strided_and_permuted_operands() -> None:
    q, k, v = data((2, 6, 4), seed=1), data((2, 8, 4), seed=2), data((2, 8, 3), seed=3)
    qt = Array.from_numpy(np.ascontiguousarray(np.transpose(q, (2, 1, 0))))
    q_view = qt.view(Permute((2, 1, 0)))
    spec = S.Attention(program(D.float32, causal(2)), (), 0.5, D.float32, S.Dense())
    strided = run(spec, [q_view, k[:, ::1], v], D.float32)
    plain = run(spec, [q, k, v], D.float32)
    np.testing.assert_allclose(strided[0], plain[0], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(strided[1], plain[1], rtol=1e-6, atol=1e-7)


# --------------------------------------------------------------------------
# Threads, refusals, the library and nx
# --------------------------------------------------------------------------


def test_one_and_two_threads_give_the_same_bits() -> None:
    hq, tq, tk = 4, 300, A.KEYS + 340
    q, k, v = data((1, hq, tq, 16), seed=1), data((1, 2, tk, 16), seed=2), \
        data((1, 2, tk, 8), seed=3)
    spec = S.Attention(program(D.float32, causal(tk - tq)), (), 0.25, D.float32, S.Dense())
    outs = []
    for n in (1, 2):
        with threads(n):
            outs.append(run(spec, [q, k, v], D.float32))
    np.testing.assert_array_equal(outs[0][0], outs[1][0])
    np.testing.assert_array_equal(outs[0][1], outs[1][1])


@pytest.mark.parametrize("mask", [None, every_third], ids=["compiled path", "per-tile path"])
def test_a_repeated_geometry_reuses_its_layout_with_the_bits_of_a_first_call(
        mask: Callable[[Builder, Value, Value], Value] | None) -> None:
    """A call of a geometry seen before takes the layout the first made (the
    compiled path's table, the units, the threads' shares) and gives the bits
    a first call of its values gives; other strides of q, or other threads,
    are another layout, and so are other lengths' values."""
    hq, hk, tq, tk, dk, dv = 8, 2, 1, 8 * A.KEYS + 300, 16, 8
    assert hq * tq * tk >= A.MIN_PARALLEL_PAIRS  # so that the threads are part of the key
    spec = S.Attention(program(D.float32, mask), (), 0.25, D.float32, S.Dense())
    first = [data((1, hq, tq, dk), seed=1), data((1, hk, tk, dk), seed=2), data((1, hk, tk, dv), seed=3)]
    again = [data((1, hq, tq, dk), seed=4), data((1, hk, tk, dk), seed=5), data((1, hk, tk, dv), seed=6)]
    qt = Array.from_numpy(np.ascontiguousarray(np.transpose(again[0], (3, 2, 1, 0))))
    permuted = [qt.view(Permute((3, 2, 1, 0))), *again[1:]]
    layouts = attention_module._LAYOUTS
    for operands in (again, permuted):
        layouts.clear()
        fresh = run(spec, operands, D.float32)
        layouts.clear()
        run(spec, first, D.float32)
        assert len(layouts) == 1
        reused = run(spec, operands, D.float32)
        assert (len(layouts) == 1) == (operands is again)  # a permuted q is another key
        np.testing.assert_array_equal(reused[0], fresh[0])
        np.testing.assert_array_equal(reused[1], fresh[1])
    with threads(2):
        run(spec, again, D.float32)
    kept = len(layouts)
    with threads(1):
        run(spec, again, D.float32)
    assert len(layouts) == kept + 1
    # With lengths, their values are part of the key: other lengths of the
    # same shapes are another layout, and each gives a first call's bits.
    spec_lengths = S.Attention(program(D.float32, mask), (), 0.25, D.float32, S.Dense(), lengths=True)
    short, long_ = np.array([A.KEYS + 7], np.int64), np.array([tk - 5], np.int64)
    layouts.clear()
    fresh_long = run(spec_lengths, [*again, long_], D.float32)
    layouts.clear()
    first_short = run(spec_lengths, [*again, short], D.float32)
    assert len(layouts) == 1
    after_short = run(spec_lengths, [*again, long_], D.float32)
    assert len(layouts) == 2
    short_again = run(spec_lengths, [*again, short], D.float32)
    assert len(layouts) == 2
    for got, want in ((after_short, fresh_long), (short_again, first_short)):
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
    assert not np.array_equal(first_short[0], fresh_long[0])


def test_the_layouts_kept_stay_within_their_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """Calls of new lengths keep their layouts, the oldest dropped first, only
    while all kept fit ``_LAYOUTS_BYTES`` (estimated); a layout of more than a
    quarter of it is not kept at all. The results do not change."""
    hq, tq, tk, d = 4, 16, 40, 8
    spec = S.Attention(program(D.float32), (), 0.25, D.float32, S.Dense(), lengths=True)
    operands = [data((6, hq, tq, d), seed=1), data((6, hq, tk, d), seed=2),
                data((6, hq, tk, d), seed=3)]
    layouts = attention_module._LAYOUTS
    # Lengths of six different values each: layouts of one size.
    layouts.clear()
    run(spec, [*operands, np.arange(0, 6, dtype=np.int64)], D.float32)
    (one,) = layouts.values()
    monkeypatch.setattr(attention_module, "_LAYOUTS_BYTES", 5 * one.nbytes)
    for n in range(1, 11):
        lengths = np.arange(n, n + 6, dtype=np.int64)
        got = run(spec, [*operands, lengths], D.float32)
        assert sum(x.nbytes for x in layouts.values()) <= 5 * one.nbytes
        assert list(layouts)[-1][-1] == lengths.tobytes()  # the newest is kept
    assert len(layouts) == 5
    layouts.clear()
    assert [x.tobytes() for x in run(spec, [*operands, lengths], D.float32)] == \
        [x.tobytes() for x in got]
    monkeypatch.setattr(attention_module, "_LAYOUTS_BYTES", 3 * one.nbytes)
    layouts.clear()
    run(spec, [*operands, lengths], D.float32)
    assert not layouts


def test_a_misfit_call_answers_a_refusal_and_writes_nothing() -> None:
    q, k, v = (Array.from_numpy(data(s)) for s in [(1, 3, 4), (1, 5, 4), (1, 5, 2)])
    spec = S.Attention(program(D.float32), (), 1.0, D.float32, S.Dense())

    def dsts(odt: Dtype = D.float32, o_shape: tuple[int, ...] = (1, 3, 2),
             ldt: Dtype = D.float32) -> list[Array]:
        out = [Array.from_numpy(np.full(o_shape, 7, odt.numpy_dtype)),
               Array.from_numpy(np.full((1, 3), 7, ldt.numpy_dtype))]
        return out

    cases: list[tuple[Answer, list[Array], list[Array], S.Attention]] = [
        (Answer.WRONG_DTYPE, dsts(D.float64), [q, k, v], spec),
        (Answer.WRONG_DTYPE, dsts(ldt=D.float64), [q, k, v], spec),
        (Answer.SHAPE_MISMATCH, dsts(o_shape=(1, 3, 3)), [q, k, v], spec),
        (Answer.SHAPE_MISMATCH, dsts(), [q, Array.from_numpy(data((1, 5, 3))), v], spec),
        (Answer.BAD_ARITY, dsts(), [q, k], spec),
        (Answer.WRONG_DTYPE, dsts(), [Array.from_numpy(np.ones((1, 3, 4), np.int32)), k, v],
         spec),
        (Answer.WRONG_DTYPE, dsts(), [q, k, v, Array.from_numpy(np.array(3, np.int32))],
         S.Attention(program(D.float32), (), 1.0, D.float32, S.Dense(), lengths=True)),
    ]
    for answer, ds, ops, sp in cases:
        assert attention(sp, ds, ops) is answer
        for d in ds:
            assert np.all(d.to_numpy() == 7)


def test_the_statement() -> None:
    st = library.statement.computes["attention"]
    q, k, v = (Array.from_numpy(data(s)) for s in [(1, 3, 4), (1, 5, 4), (1, 5, 2)])
    call = Call("attention", S.Attention(program(D.float32), (), 1.0, D.float32, S.Dense()),
                (Array.empty(D.float32, (1, 3, 2)), Array.empty(D.float32, (1, 3))), (q, k, v))
    assert st.declines(call) is None and "Declines nothing" in st.prose
    assert {"attention q·k", "attention weights", "attention o"} <= set(FAMILY.association)
    text = FAMILY.algorithms["attention"]
    for phrase in ("ε", "δ", "never reaches o", "r(cw)/c"):
        assert phrase in text
    assert library.statement.declines(call) is None


def test_nx_attention_is_causal_from_the_last_key() -> None:
    """nx.attention's causal mask: key ≤ query row + (tk − tq)."""
    q, k, v = data((1, 2, 5, 4), seed=1), data((1, 2, 8, 4), seed=2), data((1, 2, 8, 3), seed=3)
    o, lse = nx.attention(q, k, v, causal=True)
    ref = reference(q, k, v, float(np.float32(0.5)), mask_of(causal_np(3), (1,), 2, 5, 8))
    check(o.to_numpy(), lse.to_numpy(), ref, D.float32, D.float32, 0.5, 4)


def test_the_loop_has_the_query_s_rank() -> None:
    """The loop is [lead…; hq; tq; tk], of q's rank: a Padded load over that
    rank reads the loop (here a bias padded by −∞ past its last key, the same
    as the padded bias read Plain), and a Coord axis at the rank is refused."""
    q, k, v = data((2, 4, 3), seed=1), data((2, 6, 3), seed=2), data((2, 6, 2), seed=3)
    bias = data((2, 4, 4), seed=4)
    prog = program(D.float32, None, lambda b, sc: sc + b.ins[1], [D.float32])
    fill = np.float32(-np.inf).tobytes()
    padded = S.Padded(fill, S.Pad((0, 0, 0), (0, 0, 2), (0, 0, 0)))
    o, lse = run(S.Attention(prog, (padded,), 1.0, D.float32, S.Dense()), [q, k, v, bias], D.float32)
    wide = np.concatenate([bias, np.full((2, 4, 2), -np.inf, np.float32)], axis=-1)
    o2, lse2 = run(S.Attention(prog, (S.PLAIN,), 1.0, D.float32, S.Dense()), [q, k, v, wide], D.float32)
    np.testing.assert_array_equal(o, o2)
    np.testing.assert_array_equal(lse, lse2)
    b = Prog.build([D.float32])
    past = b.less(b.coord(3), b.const(D.int64, 1))
    spec = S.Attention(b.finish(past, b.copy(b.ins[0])), (), 1.0, D.float32, S.Dense())
    arrays = [Array.from_numpy(x) for x in (q, k, v)]
    outs = [Array.empty(D.float32, (2, 4, 2)), Array.empty(D.float32, (2, 4))]
    assert attention(spec, outs, arrays) is Answer.SHAPE_MISMATCH
    with pytest.raises(ValueError, match="Coord"):
        nx.call(spec, *arrays)

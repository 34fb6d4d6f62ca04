"""Laws of stated orders on rows long enough to reach every path, and of the
chain orders a library states for scatter's Add and fold.

The rows here are fixed (the laws draw nothing, so each runs once): past
2¹⁷ terms (where a library may split a row over threads; the host's
threshold), over many blocks of its lane order, for reduce's Sum and Prod in
the order the library states, Max, Min and Arg on one long row whose
extreme repeats in every part of it, and the odd/even scan. Where a library
states no order, a sum is held to the contract's bound instead.
"""

from __future__ import annotations

import math
from typing import Any, Final

import numpy as np

from .. import dtype as D
from .. import exact as O
from .. import orders
from .. import spec as S
from ..dtype import Dtype
from ..layout import Window
from ..prog import Prog
from .harness import Arr, Data, Outcome, Subject, assert_bits, contiguous, fail, invoke, law
from .judge import check_products, check_sums, says, states_order

#: Terms of a long row: past 2¹⁷, and not a whole number of blocks or lanes.
LONG: Final = (1 << 17) + 1029


def _reduce(subject: Subject, dt: Dtype, v: Arr, r: S.Reduction, rdt: Dtype | None = None
            ) -> Outcome:
    x = contiguous(subject, dt, v)
    spec = S.Reduce(Prog.identity(dt), (S.PLAIN,), (v.ndim - 1,), ((r, 0, rdt or dt),))
    return invoke(subject, spec, [(d, v.shape[:-1]) for d in spec.result_dtypes()], [x])


def _moderate(dt: Dtype, shape: tuple[int, ...], seed: int) -> Arr:
    """Values of magnitude 2⁻⁶ to 2⁶, both signs, exact in ``dt``."""
    rng = np.random.default_rng(seed)
    n = math.prod(shape)
    mag = np.ldexp(rng.uniform(1.0, 2.0, n), rng.integers(-6, 6, n))
    return np.asarray(D.of_float(dt, np.where(rng.random(n) < 0.5, -mag, mag))).reshape(shape)


def _near_one(dt: Dtype, shape: tuple[int, ...], seed: int) -> Arr:
    rng = np.random.default_rng(seed)
    v = 1 + rng.uniform(-(2.0**-8), 2.0**-8, math.prod(shape))
    return np.asarray(D.of_float(dt, np.where(rng.random(v.size) < 0.5, -v, v))).reshape(shape)


@law("reduce")
def test_reduce_long_rows_in_stated_order(subject: Subject, data: Data) -> None:
    """Fixed long rows: one row of 2¹⁷ + 1029 terms and three of 2¹⁶ + 7 (a
    library's threaded paths), float32, float64 and float16: a Sum and a Prod
    have the bits of the lane order where the library states it (in the
    carrier, rounded once into the destination), else a Sum is within
    γ(n − 1)·Σ|x| and a Prod within a relative γ(n − 1). Contract: 'A float
    Sum or Prod reduction adds or multiplies each output's terms in the
    association its library states'."""
    statement = subject.library.statement
    for dt in (D.float32, D.float64, D.float16):
        for shape in ((1, LONG), (3, (1 << 16) + 7)):
            for r, values in ((S.Monoid.SUM, _moderate), (S.Monoid.PROD, _near_one)):
                v = values(dt, shape, shape[1] + dt.bits)
                out = _reduce(subject, dt, v, r)
                if out.declined:
                    continue
                what = f"reduce {r} of {dt.name} rows of {shape[1]} terms"
                carrier = D.carrier(dt).numpy_dtype
                if states_order(statement, f"reduce {r.value}", "lane order"):
                    op = np.add if r is S.Monoid.SUM else np.multiply
                    with np.errstate(all="ignore"):
                        lanes = orders.lane_reduce(np.asarray(v).astype(carrier), op,
                                                   carrier.type(0.0 if r is S.Monoid.SUM else 1.0))
                    want = D.of_float(dt, np.asarray(lanes, dtype=np.float64))
                    assert_bits(dt, out.results[0], want, f"{what}, in the lane order the library "
                                "states", any_nan=True)
                elif r is S.Monoid.SUM:
                    check_sums(dt, dt, out.results[0], O.to_float64(dt, v), what)
                else:
                    check_products(dt, dt, out.results[0], O.to_float64(dt, v), what)


def _arg_reference(dt: Dtype, row: Arr, is_max: bool) -> int:
    """Arg's position in one row: the first NaN, else the first term with the
    extreme's bits (−0 below +0)."""
    nan = O.is_nan(dt, row)
    if nan.any():
        return int(np.argmax(nan))
    (key,) = O.order_keys(dt, row)
    best = key.max() if is_max else key.min()
    return int(np.argmax(key == best))


def _long_extreme_rows(dt: Dtype) -> list[Arr]:
    """Rows of ``LONG`` terms whose extreme repeats in every part of the row:
    zeros of both signs (the other sign first) at the maximum and at the
    minimum, and NaNs of other payloads from a third of the way on."""
    n = LONG
    pos = np.arange(n)
    below = np.asarray(D.of_float(dt, -1.0 - (pos % 97)))
    at = pos[(pos % 9973) == 17]
    rows = []
    r = below.copy()
    r[at] = D.of_float(dt, [0.0])[0]
    r[at - 3] = D.of_float(dt, [-0.0])[0]
    rows.append(r)
    above = np.asarray(D.of_float(dt, 1.0 + (pos % 89)))
    r = above.copy()
    r[at] = D.of_float(dt, [-0.0])[0]
    r[at - 5] = D.of_float(dt, [0.0])[0]
    rows.append(r)
    r = below.copy()
    nans = np.asarray(D.of_float(dt, [np.nan, -np.nan]))
    far = at[at > n // 3]
    r[far] = nans[np.arange(far.size) % 2]
    rows.append(r)
    return rows


@law("reduce")
def test_reduce_long_row_extremes(subject: Subject, data: Data) -> None:
    """Fixed rows of 2¹⁷ + 1029 terms whose extreme repeats all along the row
    (zeros of both signs, NaNs of both signs): Max and Min give the extreme
    (−0 below +0; a NaN where a term is), Arg the first term with its bits,
    or the first NaN. Contract: 'Arg e ... its position as an int64, that of
    the first term with its bits, or of the first NaN term where it is a
    NaN'."""
    for dt in (D.float32, D.float64, D.float16):
        for row in _long_extreme_rows(dt):
            v = row[None, :]
            for extreme in S.Extreme:
                is_max = extreme is S.Extreme.MAX
                out = _reduce(subject, dt, v, S.Arg(extreme))
                if out.declined:
                    continue
                p = _arg_reference(dt, row, is_max)
                what = f"reduce Arg {extreme.value} of one row of {LONG} {dt.name} terms"
                assert_bits(D.int64, out.results[1], np.array([p]), f"{what}: the position (the "
                            "first term with the extreme's bits, or the first NaN)")
                assert_bits(dt, out.results[0], row[p:p + 1], f"{what}: the extreme", any_nan=True)
                out = _reduce(subject, dt, v, S.Monoid.MAX if is_max else S.Monoid.MIN)
                if not out.declined:
                    assert_bits(dt, out.results[0], row[p:p + 1], f"reduce {extreme.value} of one "
                                f"row of {LONG} {dt.name} terms", any_nan=True)


def _combine(r: S.Monoid) -> Any:
    """The odd/even network's combination of one-array states by Sum or Prod."""
    op = np.add if r is S.Monoid.SUM else np.multiply
    return lambda a, b: (op(a[0], b[0]),)


@law("scan")
def test_scan_long_rows_in_stated_order(subject: Subject, data: Data) -> None:
    """Fixed long rows (2¹⁷ + 1029 terms, float32 and float16; forward, and
    reverse from a carry): where a library states the odd/even
    network, a Sum and a Prod scan have its bits in the carrier, the carry
    as state 0, rounded once into the destination. Contract: 'The odd/even
    network scans a slice by combining states, one per term'."""
    if not states_order(subject.library.statement, "scan", "odd/even"):
        return
    for dt in (D.float32, D.float16):
        cdt = D.carrier(dt)
        for r, values in ((S.Monoid.SUM, _moderate), (S.Monoid.PROD, _near_one)):
            v = values(dt, (1, LONG), 7 + dt.bits)
            # Forward alone, and reverse from a carry: both paths, half the calls.
            for reverse, carry in ((False, None), (True, np.asarray([0.75], dtype=cdt.numpy_dtype))):
                spec = S.Scan(Prog.identity(dt), (S.PLAIN,), 1, r, 0, dt, reverse,
                              carry is not None)
                ops = ([contiguous(subject, cdt, carry)] if carry is not None else []) + \
                    [contiguous(subject, dt, v)]
                out = invoke(subject, spec, [(dt, v.shape)], ops)
                if out.declined:
                    continue
                states = np.asarray(v[:, ::-1] if reverse else v).astype(cdt.numpy_dtype)
                if carry is not None:
                    states = np.concatenate([carry[:, None], states], axis=-1)
                with np.errstate(all="ignore"):
                    (scanned,) = orders.odd_even_scan((states,), _combine(r))
                if carry is not None:
                    scanned = scanned[:, 1:]
                want = D.of_float(dt, np.asarray(scanned, dtype=np.float64))
                how = (" reversed" if reverse else "") + (" from a carry" if carry is not None else "")
                assert_bits(dt, out.results[0], want[:, ::-1] if reverse else want,
                            f"scan {r.value} of {LONG} {dt.name} terms{how} by the odd/even "
                            "network the library states", any_nan=True)


# --------------------------------------------------------------------------
# Chains: scatter's Add and fold
# --------------------------------------------------------------------------


def _chain(dt: Dtype, terms: list[Any]) -> Arr:
    """``+0 + t0 + t1 + …`` left to right in the dtype Add computes in
    (float32 for the narrow floats; complex part by part), rounded once into
    ``dt``: one element."""
    if dt.is_complex:
        part = np.float32 if dt is D.complex64 else np.float64
        re, im = part(0.0), part(0.0)
        with np.errstate(all="ignore"):
            for t in terms:
                c = complex(t)
                re, im = part(re + part(c.real)), part(im + part(c.imag))
        out = np.empty(1, dtype=dt.numpy_dtype)
        out.real, out.imag = re, im
        return out
    carrier: Any = D.carrier(dt).numpy_dtype.type
    s = carrier(0.0)
    with np.errstate(all="ignore"):
        for t in terms:
            s = carrier(s + carrier(np.float64(O.to_float64(dt, np.asarray([t]))[0])))
    return np.asarray(D.of_float(dt, [float(s)]))


def scatter_chain_check(subject: Subject, dt: Dtype, spec: S.Scatter, got: Arr, into: Arr,
                        idx: Arr, upd: Arr) -> None:
    """A float Add scatter's result: each element the chain ``+0 + into + u1 +
    …`` in C order where the library states that order (bits; any NaN for a
    NaN), else within γ(n − 1)·Σ|x| of the exact sum."""
    _, chains = O.scatter(into, idx, upd, spec.axis, S.Combine.ADD)
    flat = np.asarray(got).reshape(-1)
    stated = states_order(subject.library.statement, "scatter Add", "left to right in C order")
    what = f"scatter Add of {dt.name} along axis {spec.axis} at {np.asarray(idx).tolist()}"
    for i, chain in enumerate(chains):
        if len(chain) == 1:
            continue
        if stated:
            assert_bits(dt, flat[i:i + 1], _chain(dt, chain), f"{what}: element {i}, chained in the "
                        "C order of the updates from +0 + into, as the library states", any_nan=True)
        else:
            terms = np.asarray(chain, dtype=dt.numpy_dtype)[None, :]
            check_sums(dt, dt, flat[i:i + 1], O.to_float64(dt, terms), f"{what}: element {i}")


def _fold_case(shape: tuple[int, ...]) -> S.Pad:
    """A pad whose windows of three taps read every element up to nine times."""
    rank = len(shape)
    return S.Pad((2,) * rank, (2,) * rank, (0,) * rank,
                 tuple(Window(a, 3, 1, 1) for a in range(rank)))


@law("fold")
def test_fold_taps_in_stated_order(subject: Subject, data: Data) -> None:
    """Fixed folds whose elements gather three and nine taps, float32,
    float16, bfloat16 and float64: where a library states that it adds an
    element's x elements left to right in C order of the taps from +0, the
    bits of that chain (float32 for the narrow floats, rounded once), else
    within γ(n − 1)·Σ|x|. Contract: upstream §8 'Fold: ... Each output is +0
    plus every x element that the load reads from that index'."""
    stated = states_order(subject.library.statement, "fold", "left to right in C order of the taps")
    for dt in (D.float32, D.float16, D.bfloat16, D.float64):
        for shape in ((8,), (4, 5)):
            pad = _fold_case(shape)
            spec = S.Fold(shape, pad)
            src_index = O.fold_sources(shape, pad)
            xv = _moderate(dt, src_index.shape, 11 + len(shape))
            out = invoke(subject, spec, [(dt, shape)], [contiguous(subject, dt, xv)])
            if out.declined:
                continue
            got = out.results[0].reshape(-1)
            taps = len(pad.windows)
            flat_src = src_index.reshape(-1)
            tap_of = np.stack(np.unravel_index(np.arange(flat_src.size), src_index.shape)[-taps:],
                              axis=-1)
            xs = np.asarray(xv).reshape(-1)
            for i in range(got.size):
                js = np.flatnonzero(flat_src == i)
                js = js[np.lexsort(tap_of[js].T[::-1])]
                chain = [xs[j] for j in js]
                what = f"fold of {dt.name} to {list(shape)} by {pad}: element {i}"
                if stated:
                    assert_bits(dt, got[i:i + 1], _chain(dt, chain), f"{what}, added in C order of "
                                "the taps from +0, as the library states", any_nan=True)
                else:
                    terms = np.asarray(chain, dtype=dt.numpy_dtype)[None, :]
                    check_sums(dt, dt, got[i:i + 1], O.to_float64(dt, terms), what)


# --------------------------------------------------------------------------
# Contractions past a library's row chunks
# --------------------------------------------------------------------------


def _check_rows_of_products(subject: Subject, acc: Dtype, got: Arr, a: Arr, b: Arr,
                            init: Arr | None, what: str) -> None:
    """A float or complex contraction ``a [R, K] · b [K, C] (+ init)`` of
    float32 parts: each output (each part of a complex one) within
    e(K)·(|init| + Σ|a||b|) of the exact sum of its products (exact in
    float64), e the library's error factor, then rounded into ``acc``."""
    k = a.shape[1]
    e = subject.library.statement.error_factor(k, acc)
    a64, b64 = a.astype(np.complex128), b.astype(np.complex128)
    i0 = np.zeros((a.shape[0], b.shape[1])) if init is None else init.astype(np.complex128)
    mag = np.abs(i0) + np.abs(a64) @ np.abs(b64)
    pr, pi = a64.real[:, :, None] * b64.real[None], a64.imag[:, :, None] * b64.imag[None]
    qr, qi = a64.real[:, :, None] * b64.imag[None], a64.imag[:, :, None] * b64.real[None]
    parts = [("real", got.real if acc.is_complex else got, np.concatenate(
        [i0.real[:, None, :], pr, -pi], axis=1)), ("imaginary", got.imag, np.concatenate(
            [i0.imag[:, None, :], qr, qi], axis=1))]
    part_dt = D.float32 if acc in (D.float32, D.complex64) else D.float64
    for name, g, terms in parts[:2 if acc.is_complex else 1]:
        rows = np.moveaxis(terms, 1, -1).reshape(-1, terms.shape[1])
        exact, _ = O.exact_sums(rows)
        ok = O.within(part_dt, np.asarray(g).reshape(-1), exact, e * mag.reshape(-1))
        if not ok.all():
            i = int(np.argmin(ok))
            raise fail(f"{what}: the {name} part of output {i} is {np.asarray(g).reshape(-1)[i]!r}; the "
                       f"exact sum of its {k} products and init is {exact[i]!r}, bound e({k})·(|init| "
                       f"+ Σ|a||b|) = {e * mag.reshape(-1)[i]!r} (contract: 'within e(K) (|init| + "
                       "Σ|a||b|) of the exact sum')")


@law("contract")
def test_contract_past_row_chunks(subject: Subject, data: Data) -> None:
    """Fixed contractions of 300 rows (past the host's whole panels of 64 rows)
    and 20 products each, with init or not, in float32, complex64 and int32
    accumulators: every output within e(K)(|init| + Σ|a||b|) of the exact
    sum, e the library's error factor (integers exact, wrapping). Contract:
    'an output of a float or complex contraction (S.contract) with K
    products a·b is within e(K) (|init| + Σ|a||b|) of the exact sum of its
    products and init'."""
    rng = np.random.default_rng(300)
    shapes = ((300, 20), (20, 3))
    for acc, op_dt in ((D.float32, D.float32), (D.complex64, D.complex64), (D.int32, D.int8)):
        for init in (False, True):
            spec = S.Contract((), ((1, 0),), acc, init, (None, None), None)
            if acc.is_int:
                vals = [rng.integers(-8, 8, sh).astype(op_dt.numpy_dtype) for sh in shapes]
            elif acc.is_complex:
                vals = [(_moderate(D.float32, sh, i) + 1j * _moderate(D.float32, sh, i + 7)).astype(
                    op_dt.numpy_dtype) for i, sh in enumerate(shapes)]
            else:
                vals = [_moderate(op_dt, sh, i) for i, sh in enumerate(shapes)]
            ops = [contiguous(subject, op_dt, v) for v in vals]
            iv = rng.integers(-4, 4, (300, 3)).astype(acc.numpy_dtype) if init else None
            if iv is not None:
                ops.append(contiguous(subject, acc, iv))
            out = invoke(subject, spec, [(acc, (300, 3))], ops)
            if out.declined:
                continue
            what = f"contract of [300, 20]·[20, 3] in {acc.name}{' with init' if init else ''}"
            if acc.is_int:
                exact = vals[0].astype(np.int64) @ vals[1].astype(np.int64)
                if iv is not None:
                    exact = exact + iv
                assert_bits(acc, out.results[0], exact.astype(acc.numpy_dtype), what)
            else:
                _check_rows_of_products(subject, acc, out.results[0], vals[0], vals[1], iv, what)


@law("contract")
def test_contract_init_added_last(subject: Subject, data: Data) -> None:
    """Where a library states that it adds init last, a contraction with init
    (dst the accumulator) has the bits of the same contraction without init
    plus init, one addition in the accumulator (each part of a complex one):
    fixed cases of 5 and 300 rows, 37 products each, float32, float64 and
    complex64. Contract: 'an output of a float or complex contraction ... the
    exact sum of its products and init'; design §5: 'The conformance kit
    holds each library to its own statement'."""
    if not says(subject.library.statement, "contract", "init added last"):
        return
    for acc in (D.float32, D.float64, D.complex64):
        part = D.float64 if acc is D.float64 else D.float32
        for rows in (5, 300):
            shapes = ((rows, 37), (37, 4), (rows, 4))
            vals = [_moderate(part, sh, i) for i, sh in enumerate(shapes)]
            if acc.is_complex:
                vals = [(v + 1j * _moderate(part, v.shape, 9 + i)).astype(acc.numpy_dtype)
                        for i, v in enumerate(vals)]
            a, b, init = (contiguous(subject, acc, v) for v in vals)
            bare = invoke(subject, S.Contract((), ((1, 0),), acc, False, (None, None), None),
                          [(acc, shapes[2])], [a, b])
            full = invoke(subject, S.Contract((), ((1, 0),), acc, True, (None, None), None),
                          [(acc, shapes[2])], [a, b, init])
            if bare.declined or full.declined:
                continue
            with np.errstate(all="ignore"):
                want = np.asarray(bare.results[0] + vals[2], dtype=acc.numpy_dtype)
            assert_bits(acc, full.results[0], want, f"contract of [{rows}, 37]·[37, 4] in {acc.name} "
                        "with init: the products without init, then + init in the accumulator, as "
                        "the library states ('init added last')", any_nan=True)


# --------------------------------------------------------------------------
# Attention past a library's row and key tiles
# --------------------------------------------------------------------------


@law("attention")
def test_attention_past_tiles(subject: Subject, data: Data) -> None:
    """A fixed attention of 130 query rows and 1100 keys (past the host's
    tiles of 128 rows and 1024 keys), every pair visible, the largest score
    in the second key tile (so a running maximum changes between tiles): each
    row's lse and o within the bounds of ``test_attention_within_bound``.
    Contract (Attention): 'Each weight w it computes in the accumulator is
    exp (x - L + δ)'."""
    from .cases import Case
    from .test_attention import check_attention

    b = Prog.build([D.float32])
    (score,) = b.ins
    prog = b.finish(b.equal(b.coord(0), b.coord(0)), b.copy(score))
    tq, tk = 130, 1100
    q = np.abs(_moderate(D.float32, (1, tq, 2), 1)) / 64 + 0.5
    k = np.clip(_moderate(D.float32, (1, tk, 2), 2), -1, 1)
    k[0, 1050] = 3.0
    v = _moderate(D.float32, (1, tk, 2), 3)
    vals = [np.asarray(q, dtype=np.float32), np.asarray(k, dtype=np.float32),
            np.asarray(v, dtype=np.float32)]
    spec = S.Attention(prog, (), 1.0, D.float32, S.Dense(), False)
    ops = [contiguous(subject, D.float32, x) for x in vals]
    dsts = [(D.float32, (1, tq, 2)), (D.float32, (1, tq))]
    out = invoke(subject, spec, dsts, ops)
    if out.declined:
        return
    check_attention(subject, Case(spec, dsts, ops, vals), out.results[0], out.results[1],
                    f"attention of {tq} rows and {tk} keys")

"""Laws of ``reduce``: each reduction's terms, bits and bounds, one rule each."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import strategies as st

from .. import dtype as D
from .. import oracle as O
from .. import orders
from .. import shape as SH
from .. import spec as S
from ..array import Array
from ..dtype import Dtype, Kind
from ..layout import Range, Slice
from ..prog import Prog
from . import generators as G
from .cases import draw_reduction, fill_bits, pads, reduction_terms_program, result_dtype
from .harness import (
    Arr,
    Data,
    Outcome,
    Subject,
    assert_bits,
    check_nan_rule,
    fail,
    invoke,
    law,
    operand,
    operand_of,
)
from .judge import carrier_u, check_products, check_sums, loop_outputs, signalling_in, states_order

_FIXED = (S.Monoid.MAX, S.Monoid.MIN, S.Arg(S.Extreme.MAX), S.Arg(S.Extreme.MIN))


def _fixed(r: S.Reduction, term: Dtype) -> bool:
    """Whether the contract fixes the bits of ``r``'s results on ``term``."""
    return r in _FIXED or (r in (S.Monoid.SUM, S.Monoid.PROD) and (term.is_int))


def ties(data: Data, dt: Dtype, shape: tuple[int, ...], label: str) -> Arr:
    """Values of ``dt`` drawn from a pool of three (specials or random), so
    extremes repeat: −0 beside +0, NaNs with other payloads, equal bits."""
    seed = data.draw(st.integers(0, 2**32 - 1), label=f"{label} seed")
    profile = data.draw(G.profiles(("specials", "bits", "ints")), label=f"{label} pool")
    pool = G.values(dt, (3,), profile, seed)
    pick = np.random.default_rng(seed + 1).integers(0, 3, size=shape)
    return np.asarray(pool[pick]).reshape(shape)


def reduce_call(subject: Subject, data: Data, prog: Prog, load: S.Load, x: Array, xv: Arr,
                loop: tuple[int, ...], axes: tuple[int, ...],
                reductions: tuple[tuple[S.Reduction, int, Dtype], ...]
                ) -> tuple[Outcome, list[Arr], S.Reduce]:
    """Run a reduce and give its outcome and each reduction's terms ``[kept…, n]``."""
    spec = S.Reduce(prog, (load,), axes, reductions)
    kept = tuple(d for i, d in enumerate(loop) if i not in axes)
    dsts = [(dt, kept) for dt in spec.result_dtypes()]
    out = invoke(subject, spec, dsts, [x], data)
    outputs = loop_outputs(prog, (load,), [x], [xv], loop)
    return out, [O.terms(outputs[k], axes) for _, k, _ in reductions], spec


def _loop_operand(data: Data, subject: Subject, dt: Dtype, padded: bool, profiles: tuple[str, ...]
                  ) -> tuple[S.Load, Array, Arr, tuple[int, ...], tuple[int, ...]]:
    """A Plain operand of a drawn loop with reduced axes, or a Padded one
    (pooling: windows reduced)."""
    if padded:
        src = data.draw(G.shapes(min_rank=1, max_rank=3, max_side=4), label="operand shape")
        p = data.draw(pads(src), label="pad")
        loop = SH.padded(src, p)
        if not isinstance(loop, SH.Error) and loop:
            sp = G.specials(dt)
            load = S.Padded(fill_bits(dt, sp[data.draw(st.integers(0, len(sp) - 1), label="fill")]), p)
            axes = tuple(sorted(data.draw(st.permutations(range(len(loop))), label="axes")[
                : data.draw(st.integers(1, len(loop)), label="n axes")]))
            x, v = operand(data, subject, dt, src, profiles=profiles, label="x")
            return load, x, v, tuple(loop), axes
    loop, axes = data.draw(G.loop_with_axes(min_rank=1), label="loop")
    if data.draw(st.booleans(), label="ties?"):
        v = ties(data, dt, loop, "x")
        x = operand_of(data, subject, dt, v, label="x")
        return S.PLAIN, x, x.to_numpy(), loop, axes
    x, v = operand(data, subject, dt, loop, profiles=profiles, label="x")
    return S.PLAIN, x, v, loop, axes


def check_fixed(dt: Dtype, r: S.Reduction, rows: Arr, results: list[Arr], what: str,
                signalling: bool) -> None:
    """Results the contract fixes against ``oracle.reduce_fixed``."""
    want, pos, nan = O.reduce_fixed(dt, rows, r)
    assert_bits(dt, results[0], want, f"{what}: {r} of {dt.name}", any_nan=nan,
                truth=True)
    check_nan_rule(dt, results[0], signalling, f"{what}: {r}")
    if pos is not None:
        assert_bits(D.int64, results[1], pos, f"{what}: {r}'s positions (the first term with the "
                    "extreme's bits, or the first NaN: contract 'Arg e is the extreme e of the terms "
                    "... then its position as an int64, that of the first term with its bits, or of "
                    "the first NaN term where it is a NaN')")


def _split(results: list[Arr], spec: S.Reduce) -> list[list[Arr]]:
    out, i = [], 0
    for r, _, _ in spec.reductions:
        k = S.results(r)
        out.append(results[i:i + k])
        i += k
    return out


@law("reduce")
def test_reduce_fixed_bits(subject: Subject, data: Data) -> None:
    """Integer and boolean Sum and Prod (wrapping in the carrier), Max, Min
    (−0 below +0; any and all on booleans) and Arg give the exact reference's
    bits (any NaN for a NaN extreme), over Plain and Padded (pooling) loads,
    one or two reductions per call. Contract: 'A result whose bits this
    contract fixes, an integer, a boolean, an extreme, a position, ...';
    'Integers wrap'; 'Monoid Max and Monoid Min are Prog.binary.Maximum and
    Prog.binary.Minimum of the terms'."""
    dt = data.draw(G.dtypes(), label="dtype")
    padded = data.draw(st.integers(0, 3), label="padded?") == 3
    load, x, xv, loop, axes = _loop_operand(data, subject, dt, padded, G.PROFILES)
    prog = reduction_terms_program(data, dt)
    term = prog.out_dtypes[0]
    n = math.prod(loop[a] for a in axes)
    kept = math.prod(d for i, d in enumerate(loop) if i not in axes)
    pool = [r for r in (S.Monoid.SUM, S.Monoid.PROD, *_FIXED) if S.accepts(r, term) and _fixed(r, term)
            and (n > 0 or kept == 0 or r in (S.Monoid.SUM, S.Monoid.PROD))]
    if not pool:
        return
    reductions = tuple((data.draw(st.sampled_from(pool), label="reduction"), 0, term)
                       for _ in range(data.draw(st.integers(1, 2), label="reductions")))
    out, rows, spec = reduce_call(subject, data, prog, load, x, xv, loop, axes, reductions)
    if out.declined:
        return
    sig = signalling_in([x], [xv], (load,))
    for (r, _, _), res, t in zip(reductions, _split(out.results, spec), rows, strict=True):
        check_fixed(term, r, t, res, f"reduce over axes {list(axes)} of {list(loop)}", sig)


@law("reduce")
def test_reduce_arg_first_position(subject: Subject, data: Data) -> None:
    """Arg's position is that of the first term with the extreme's bits (of
    −0 and +0, Max takes +0 and Min −0), or of the first NaN term where a term
    is a NaN. Contract: 'Arg e is the extreme e of the terms, as Monoid Max or
    Monoid Min finds it, then its position as an int64, that of the first term
    with its bits, or of the first NaN term where it is a NaN'."""
    dt = data.draw(G.dtypes(), label="dtype")
    rows = data.draw(st.integers(1, 4), label="rows")
    n = data.draw(st.sampled_from((1, 2, 3, 5, 16, 17, 1025)), label="terms")
    v = ties(data, dt, (rows, n), "x")
    x = operand_of(data, subject, dt, v, label="x")
    r = S.Arg(data.draw(st.sampled_from(tuple(S.Extreme)), label="extreme"))
    prog = Prog.identity(dt)
    out, terms, _ = reduce_call(subject, data, prog, S.PLAIN, x, x.to_numpy(), (rows, n), (1,),
                                ((r, 0, dt),))
    if out.declined:
        return
    check_fixed(dt, r, terms[0], out.results, "reduce Arg", signalling_in([x], [x.to_numpy()]))


def _float_or_complex(data: Data) -> Dtype:
    return data.draw(G.dtypes(kinds=(Kind.FLOAT, Kind.COMPLEX)), label="dtype")


@law("reduce")
def test_reduce_sum_within_bound(subject: Subject, data: Data) -> None:
    """A float Sum (a complex one part by part) is within γ(n − 1)·Σ|x| of the
    exact sum in its carrier's unit roundoff, then rounded once into its
    destination; NaN exactly where a term is NaN or infinities of both signs
    meet. Contract: 'Barring overflow and underflow, and before the rounding
    into the destination, which adds its own, a float sum of n terms, a
    reduction's, ... is within γ(n - 1) Σ|x| of the exact sum'; 'A complex Sum
    adds each part as a float sum'."""
    dt = _float_or_complex(data)
    load, x, xv, loop, axes = _loop_operand(data, subject, dt, data.draw(st.integers(0, 4),
                                            label="padded?") == 4,
                                            ("moderate", "ints", "mixed", "specials", "moderate"))
    prog = reduction_terms_program(data, dt)
    term = prog.out_dtypes[0]
    if not (term.is_float or term.is_complex):
        return
    rdt = result_dtype(data, S.Monoid.SUM, term)
    out, rows, _ = reduce_call(subject, data, prog, load, x, xv, loop, axes, ((S.Monoid.SUM, 0, rdt),))
    if out.declined:
        return
    check_sums(term, rdt, out.results[0], O.to_float64(term, rows[0]),
               f"reduce Sum over axes {list(axes)} of {list(loop)}")
    check_nan_rule(rdt, out.results[0], signalling_in([x], [xv], (load,)), "reduce Sum")


def near_one(data: Data, dt: Dtype, shape: tuple[int, ...]) -> Arr:
    """Values of magnitude within 2⁻⁸ of 1 (complex: of modulus so, any
    phase), some specials among them: products that stay in range."""
    seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
    rng = np.random.default_rng(seed)
    n = math.prod(shape)
    mag = 1 + rng.uniform(-(2.0**-8), 2.0**-8, n)
    if dt.is_complex:
        v: Arr = mag * np.exp(1j * rng.uniform(-np.pi, np.pi, n))
        v = v.astype(dt.numpy_dtype)
    else:
        v = D.of_float(dt, np.where(rng.random(n) < 0.5, -mag, mag))
    if n and data.draw(st.booleans(), label="specials?"):
        sp = G.specials(dt)
        at = rng.integers(0, n, size=max(1, n // 64))
        v = np.asarray(v).copy()
        v[at] = sp[rng.integers(0, len(sp), size=at.size)]
    return np.asarray(v).reshape(shape)


@law("reduce")
def test_reduce_prod_within_bound(subject: Subject, data: Data) -> None:
    """A float Prod is within a relative γ(n − 1) of the exact product (a
    complex one within a normwise relative γ(2n − 2)), in the carrier, then
    rounded once into its destination. Contract: 'a float product within a
    relative γ(n - 1). A complex product is within a normwise relative
    γ(2n - 2), where each Prog.binary.Mul errs by at most 2u'."""
    dt = _float_or_complex(data)
    loop, axes = data.draw(G.loop_with_axes(min_rank=1, max_elements=5000), label="loop")
    v = near_one(data, dt, loop)
    x = operand_of(data, subject, dt, v, label="x")
    rdt = result_dtype(data, S.Monoid.PROD, dt)
    out, rows, _ = reduce_call(subject, data, Prog.identity(dt), S.PLAIN, x, x.to_numpy(), loop, axes,
                               ((S.Monoid.PROD, 0, rdt),))
    if out.declined:
        return
    check_products(dt, rdt, out.results[0], O.to_float64(dt, rows[0]),
                   f"reduce Prod over axes {list(axes)} of {list(loop)}")


@law("reduce")
def test_reduce_sum_of_negative_zeros(subject: Subject, data: Data) -> None:
    """A float or complex Sum of −0 terms, or of no term, is +0 (each part of
    a complex one). Contract: 'Monoid Sum adds the terms from +0, as
    Prog.binary.Add does, so a sum of -0 terms is +0'."""
    dt = _float_or_complex(data)
    loop, axes = data.draw(G.loop_with_axes(min_rank=1), label="loop")
    neg = np.zeros(loop, dtype=dt.numpy_dtype)
    neg = np.asarray(-neg)  # −0 (both parts' signs set for complex)
    if dt.is_complex:
        part = D.float64 if dt is D.complex128 else D.float32
        pair = neg.reshape(-1).view(part.numpy_dtype)
        pair[:] = -0.0
    x = operand_of(data, subject, dt, neg, plans=("contiguous", "strided"), label="x")
    rdt = result_dtype(data, S.Monoid.SUM, dt)
    out, _, _ = reduce_call(subject, data, Prog.identity(dt), S.PLAIN, x, x.to_numpy(), loop, axes,
                            ((S.Monoid.SUM, 0, rdt),))
    if out.declined:
        return
    assert_bits(rdt, out.results[0], np.zeros(out.results[0].shape, dtype=rdt.numpy_dtype),
                f"reduce Sum of −0 terms over axes {list(axes)} of {list(loop)} (contract: 'a sum of "
                "-0 terms is +0')")


@law("reduce")
def test_reduce_empty_product(subject: Subject, data: Data) -> None:
    """A Prod of no term is 1 (1 + 0i for complex) at every dtype Prod takes.
    Contract: 'an empty product is 1'."""
    dt = data.draw(G.dtypes(exclude=(D.bool_, D.bit)), label="dtype")
    rank = data.draw(st.integers(1, 3), label="rank")
    loop = list(data.draw(G.shapes(min_rank=rank, max_rank=rank, max_side=3), label="loop"))
    axis = data.draw(st.integers(0, rank - 1), label="axis")
    loop[axis] = 0
    x, v = operand(data, subject, dt, tuple(loop), label="x")
    out, _, _ = reduce_call(subject, data, Prog.identity(dt), S.PLAIN, x, v, tuple(loop), (axis,),
                            ((S.Monoid.PROD, 0, dt),))
    if out.declined:
        return
    kept = out.results[0].shape
    one = np.ones(kept, dtype=dt.numpy_dtype) if dt.bits >= 8 or dt.is_float else \
        np.asarray(np.ones(kept, dtype=np.int8)).astype(dt.numpy_dtype)
    assert_bits(dt, out.results[0], one, "reduce Prod of no term (contract: 'an empty product is 1')")


def _special_rows(data: Data, dt: Dtype, rows: int, n: int, kinds: tuple[str, ...]) -> tuple[Arr, list[str]]:
    """Rows of ``n`` terms, each of a drawn kind: finite, all −inf, with +inf,
    with −inf, with a NaN, with infinities of both signs."""
    seed = data.draw(st.integers(0, 2**32 - 1), label="rows seed")
    rng = np.random.default_rng(seed)
    fmt = dt.float_format
    assert fmt is not None
    ninf = -np.inf if fmt.infinities else -fmt.max_finite
    out = np.asarray(G.values(dt, (rows, n), "moderate", seed), dtype=np.float64).copy()
    chosen = []
    for i in range(rows):
        kind = kinds[int(rng.integers(0, len(kinds)))] if n else "finite"
        if kind == "all -inf":
            out[i] = ninf
        elif n and kind in ("+inf", "-inf", "nan", "both"):
            j = int(rng.integers(0, n))
            if kind == "both" and n >= 2 and fmt.infinities:
                out[i, j] = np.inf
                out[i, (j + 1) % n] = -np.inf
            elif kind == "nan" and fmt.nans:
                out[i, j] = np.nan
            elif kind in ("+inf", "-inf") and fmt.infinities:
                out[i, j] = np.inf if kind == "+inf" else -np.inf
            else:
                kind = "finite"
        chosen.append(kind)
    return D.of_float(dt, out), chosen


def _special_ok(dt: Dtype, got: float, want: float) -> bool:
    """Whether ``got`` is the special value ``want`` as stored into ``dt`` (the
    store rule saturates the narrowest formats and makes float4's NaN +0)."""
    stored = float(D.of_float(dt, [want]).astype(np.float64)[0])
    return (math.isnan(stored) and math.isnan(got)) or got == stored


@law("reduce")
def test_reduce_logsumexp(subject: Subject, data: Data) -> None:
    """Logsumexp is −∞ for no term or terms all −∞, +∞ where a term is +∞ and
    none is NaN, a NaN where a term is; otherwise within a generous
    first-order bound 4u(2b + n + 3 ln(n + 1) + 9) of the exact
    m + log Σ exp(x − m) (b the largest |x|, u the carrier's), then rounded
    into its destination. Contract: 'It is -∞ for no term or terms all -∞, +∞
    where a term is +∞ and none is NaN, and a NaN where a term is'."""
    dt = data.draw(G.dtypes(kinds=(Kind.FLOAT,)), label="dtype")
    rows = data.draw(st.integers(1, 5), label="rows")
    n = data.draw(st.sampled_from((0, 1, 2, 5, 16, 17, 1025)), label="terms")
    v, _ = _special_rows(data, dt, rows, n, ("finite", "all -inf", "+inf", "-inf", "nan"))
    x = operand_of(data, subject, dt, v, label="x")
    rdt = result_dtype(data, S.LOGSUMEXP, dt)
    out, terms, _ = reduce_call(subject, data, Prog.identity(dt), S.PLAIN, x, x.to_numpy(), (rows, n),
                                (1,), ((S.LOGSUMEXP, 0, rdt),))
    if out.declined:
        return
    got = O.to_float64(rdt, out.results[0])
    t = O.to_float64(dt, terms[0])
    u = carrier_u(dt)
    for i in range(rows):
        row = t[i]
        what = f"reduce Logsumexp of {row[:8].tolist()}{'…' if n > 8 else ''} ({dt.name} into {rdt.name})"
        if np.isnan(row).any():
            want = math.nan
        elif n == 0 or (np.isneginf(row).all()):
            want = -math.inf
        elif np.isposinf(row).any():
            want = math.inf
        else:
            want = math.nan
        if not (n and np.isfinite(row).any() and not np.isnan(row).any() and not np.isposinf(row).any()):
            if not _special_ok(rdt, got[i], want):
                raise fail(f"{what} is {got[i]!r}, the contract's special value is {want!r}")
            continue
        fin = row[np.isfinite(row)]
        m = float(fin.max())
        exact = m + math.log(math.fsum(np.exp(fin - m).tolist()))
        b = float(np.abs(fin).max())
        bound = 4 * u * (2 * b + n + 3 * math.log(n + 1) + 9)
        if not O.within(rdt, got[i], exact, bound):
            raise fail(f"{what} is {got[i]!r}; the exact value is {exact!r}, beyond the kit's generous "
                       f"first-order bound {bound!r}")


@law("reduce")
def test_reduce_moments(subject: Subject, data: Data) -> None:
    """Moments gives the population mean, then variance: NaN for no term or
    where a term is NaN; with infinities and no NaN, the mean is their sum (NaN
    for both signs) and the variance NaN; the variance is never negative;
    finite terms within generous first-order bounds of the exact moments
    (mean: 2γ(n)Σ|x|/n, variance: 4(n + 3)u·Σx²/n). Contract: 'Moments is the
    terms' population mean, then their variance; NaN for no term or where a
    term is a NaN. With an infinite term and no NaN term, the mean is the sum
    of the infinities, a NaN where both signs occur, and the variance a NaN.
    The variance is never negative'."""
    dt = data.draw(G.dtypes(kinds=(Kind.FLOAT,)), label="dtype")
    rows = data.draw(st.integers(1, 5), label="rows")
    n = data.draw(st.sampled_from((0, 1, 2, 5, 16, 17, 1025)), label="terms")
    v, _ = _special_rows(data, dt, rows, n, ("finite", "finite", "+inf", "-inf", "nan", "both"))
    x = operand_of(data, subject, dt, v, label="x")
    rdt = result_dtype(data, S.MOMENTS, dt)
    out, terms, _ = reduce_call(subject, data, Prog.identity(dt), S.PLAIN, x, x.to_numpy(), (rows, n),
                                (1,), ((S.MOMENTS, 0, rdt),))
    if out.declined:
        return
    mean, var = (O.to_float64(rdt, r) for r in out.results)
    t = O.to_float64(dt, terms[0])
    u = carrier_u(dt)
    for i in range(rows):
        row = t[i]
        what = f"reduce Moments of {row[:8].tolist()}{'…' if n > 8 else ''} ({dt.name} into {rdt.name})"
        if var[i] < 0:
            raise fail(f"{what}: the variance {var[i]!r} is negative (contract: 'The variance is never "
                       "negative')")
        if n == 0 or np.isnan(row).any():
            if not (_special_ok(rdt, mean[i], math.nan) and _special_ok(rdt, var[i], math.nan)):
                raise fail(f"{what} is ({mean[i]!r}, {var[i]!r}); the contract's special value is "
                           "(NaN, NaN): 'NaN for no term or where a term is a NaN'")
            continue
        if np.isinf(row).any():
            infs = row[np.isinf(row)]
            want = math.nan if (infs > 0).any() and (infs < 0).any() else float(infs[0])
            if not (_special_ok(rdt, mean[i], want) and _special_ok(rdt, var[i], math.nan)):
                raise fail(f"{what} is ({mean[i]!r}, {var[i]!r}); the contract's special value is "
                           f"({want!r}, NaN): 'the mean is the sum of the infinities, a NaN where both "
                           "signs occur, and the variance a NaN'")
            continue
        mu = math.fsum(row.tolist()) / n
        sigma2 = math.fsum(((row - mu) ** 2).tolist()) / n
        g = (n * u) / (1 - n * u)
        b_mean = 2 * g * float(np.abs(row).sum()) / n + u * abs(mu)
        b_var = 4 * (n + 3) * u * float((row**2).sum()) / n
        if not O.within(rdt, mean[i], mu, b_mean):
            raise fail(f"{what}: the mean {mean[i]!r} is beyond {b_mean!r} of the exact {mu!r}")
        if not O.within(rdt, var[i], sigma2, b_var):
            raise fail(f"{what}: the variance {var[i]!r} is beyond {b_var!r} of the exact {sigma2!r}")


@law("reduce")
def test_reduce_stated_order(subject: Subject, data: Data) -> None:
    """Where a library states that its float Sum and Prod reductions follow
    lane order (design.md §6), their results have the bits of that order in
    the carrier, rounded once into the destination (any NaN for a NaN).
    Contract: 'A float Sum or Prod reduction adds or multiplies each output's
    terms in the association its library states'; 'The conformance kit holds
    each library to its own statement' (design.md §5)."""
    kind = data.draw(st.sampled_from((S.Monoid.SUM, S.Monoid.PROD, S.Monoid.SUM)), label="reduction")
    topic = "reduce Sum" if kind is S.Monoid.SUM else "reduce Prod"
    if not states_order(subject.library.statement, topic, "lane order"):
        return
    # float32 and float64 first: the narrow floats' sums are often exact in
    # their float32 carrier, where every order gives the same bits.
    dt = data.draw(st.sampled_from((D.float32, D.float64, D.float16, D.bfloat16, D.float32,
                                    D.float64, D.float8_e5m2)), label="dtype")
    # A long row half the time: with a few terms most orders agree in bits,
    # beyond 16 (one lane each) and 1024 (one block) they seldom do.
    loop, axes = data.draw(st.one_of(G.loop_with_axes(min_rank=1),
                                     st.integers(17, 2100).map(lambda n: ((n,), (0,)))),
                           label="loop")
    if kind is S.Monoid.PROD:
        x = operand_of(data, subject, dt, near_one(data, dt, loop), label="x")
        xv = x.to_numpy()
    else:
        x, xv = operand(data, subject, dt, loop, profiles=("moderate", "ints", "moderate", "mixed"),
                        label="x")
    rdt = result_dtype(data, kind, dt)
    out, rows, _ = reduce_call(subject, data, Prog.identity(dt), S.PLAIN, x, xv, loop, axes,
                               ((kind, 0, rdt),))
    if out.declined:
        return
    carrier = D.carrier(dt).numpy_dtype
    terms = np.asarray(rows[0]).astype(carrier)
    with np.errstate(all="ignore"):
        lanes = orders.lane_reduce(terms, np.add if kind is S.Monoid.SUM else np.multiply,
                                   carrier.type(0.0 if kind is S.Monoid.SUM else 1.0))
    want = D.of_float(rdt, np.asarray(lanes, dtype=np.float64))
    assert_bits(rdt, out.results[0], want, f"reduce {kind.value} over axes {list(axes)} of {list(loop)} "
                "in the lane order the library states", any_nan=True)


@law("reduce")
def test_reduce_box(subject: Subject, data: Data) -> None:
    """A box of a reduction's exact results (integers, booleans, extremes,
    positions), computed alone from the operand's part it reads (the kept
    axes' ranges, the reduced axes whole), has the bits of the whole.
    Contract: 'a box of the results' indices ... computed alone from the parts
    of the operands it reads, has the bits of the whole'."""
    dt = data.draw(G.dtypes(), label="dtype")
    loop, axes = data.draw(G.loop_with_axes(min_rank=2, empty=False, edges=False), label="loop")
    if len(axes) == len(loop):
        return
    r = draw_reduction(data, dt, True)
    if not _fixed(r, dt):
        return
    x, xv = operand(data, subject, dt, loop, label="x")
    prog = Prog.identity(dt)
    whole, _, spec = reduce_call(subject, data, prog, S.PLAIN, x, xv, loop, axes, ((r, 0, dt),))
    if whole.declined:
        return
    ranges = []
    for i, d in enumerate(loop):
        if i in axes:
            ranges.append(Range(0, d, 1))
            continue
        start = data.draw(st.integers(0, d - 1), label="box start")
        ranges.append(Range(start, data.draw(st.integers(1, d - start), label="box count"), 1))
    part = x.view(Slice(tuple(ranges)))
    sub, _, _ = reduce_call(subject, data, prog, S.PLAIN, part, part.to_numpy(),
                            tuple(rg.count for rg in ranges), axes, ((r, 0, dt),))
    if sub.declined:
        return
    key: tuple[Any, ...] = tuple(slice(rg.start, rg.start + rg.count) for i, rg in enumerate(ranges)
                                 if i not in axes)
    for k, res in enumerate(sub.results):
        dtk = spec.result_dtypes()[k]
        assert_bits(dtk, res, whole.results[k][key], f"reduce {r} box {ranges}")

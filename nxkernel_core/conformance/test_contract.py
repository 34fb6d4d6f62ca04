"""Laws of ``contract``: the library's own error factor, empty contractions,
in-place init, block scales, boxes of exact results."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import strategies as st

from .. import dtype as D
from .. import exact as O
from .. import shape as SH
from .. import spec as S
from ..array import Array
from ..dtype import Dtype
from ..kernel import unit_roundoff
from ..layout import Range, Slice
from . import generators as G
from .cases import Case, contract_operand_dtype, contraction, draw_case
from .harness import (
    Arr,
    Data,
    Subject,
    assert_bits,
    contiguous,
    fail,
    invoke,
    law,
    operand,
)


def _part(dt: Dtype) -> Dtype:
    return (D.float64 if dt is D.complex128 else D.float32) if dt.is_complex else dt


def _two_product(a: Arr, b: Arr) -> tuple[Arr, Arr]:
    """``O.two_product`` of factors of any finite size: a factor past 2^995,
    whose splitting would overflow, trades 2^28 with the other (exact, as the
    product is unchanged; where the other then overflows, so does the product)."""
    with np.errstate(all="ignore"):
        a = np.asarray(a, dtype=np.float64)
        b = np.asarray(b, dtype=np.float64)
        big_a = np.abs(a) > 2.0**995
        a, b = np.where(big_a, a * 2.0**-28, a), np.where(big_a, b * 2.0**28, b)
        big_b = np.abs(b) > 2.0**995
        a, b = np.where(big_b, a * 2.0**28, a), np.where(big_b, b * 2.0**-28, b)
    return O.two_product(a, b)


def exact_outputs(spec: S.Contract, case_ops: list[Arr], a_dt: Dtype, b_dt: Dtype,
                  a_scale: Arr | None = None, b_scale: Arr | None = None
                  ) -> tuple[tuple[int, ...], list[Any], list[float], list[int], list[float]]:
    """Each output's exact value (float64, complex128 or a Python int), its
    |init| + Σ|a||b|, its number of products K, and that magnitude over its
    finite init and its products of finite factors alone."""
    a, b = case_ops[0], case_ops[1]
    init = case_ops[2] if spec.init else None
    ids = case_ops[-1] if spec.segments is not None else None
    shape, outputs = O.contract_terms(spec, a, b, a_dt, b_dt, ids, a_scale, b_scale)
    acc = spec.acc
    init_flat = np.asarray(init).reshape(-1) if init is not None else None
    exact: list[Any] = []
    mags: list[float] = []
    ks: list[int] = []
    finite: list[float] = []
    for i, products in enumerate(outputs):
        ks.append(len(products))
        if acc.is_int:
            finite.append(0.0)
            lo, hi = acc.int_range
            total = sum(int(x) * int(y) for x, y in products)
            if init_flat is not None:
                total += int(init_flat[i])
            exact.append(((total - lo) % (hi - lo + 1)) + lo)
            mags.append(0.0)
            continue
        av = np.asarray([x for x, _ in products], dtype=np.complex128 if acc.is_complex else np.float64)
        bv = np.asarray([y for _, y in products], dtype=av.dtype)
        init_v = complex(init_flat[i]) if (init_flat is not None and acc.is_complex) else (
            float(init_flat[i]) if init_flat is not None else 0.0)
        with np.errstate(all="ignore"):
            both = np.isfinite(av) & np.isfinite(bv)
            finite.append(float((abs(init_v) if np.isfinite(init_v) else 0.0)
                                + np.sum(np.abs(av[both]) * np.abs(bv[both]))))
        if acc.is_complex:
            parts = []
            for sign_re, (x1, y1), (x2, y2) in ((1, (av.real, bv.real), (av.imag, bv.imag)),
                                                 (0, (av.real, bv.imag), (av.imag, bv.real))):
                p1, e1 = _two_product(x1, y1)
                p2, e2 = _two_product(x2, y2)
                sgn = -1.0 if sign_re else 1.0
                base = init_v.real if sign_re else init_v.imag
                row = np.concatenate([[base], p1, e1, sgn * p2, sgn * e2])
                parts.append(O.exact_sums(row[None, :])[0][0])
            exact.append(complex(parts[0], parts[1]))
            with np.errstate(all="ignore"):
                mags.append(float(abs(init_v) + np.sum(np.abs(av) * np.abs(bv))))
        else:
            p, e = _two_product(av, bv)
            row = np.concatenate([[init_v], p, e])
            exact.append(float(O.exact_sums(row[None, :])[0][0]))
            with np.errstate(all="ignore"):
                mags.append(float(abs(init_v) + np.sum(np.abs(av) * np.abs(bv))))
    return shape, exact, mags, ks, finite


def _tiny(dt: Dtype) -> float:
    """The smallest positive value of a float dtype (a complex one's parts)."""
    fmt = _part(dt).float_format
    assert fmt is not None
    return float(fmt.min_normal) * 2.0 ** -fmt.fraction_bits


def _largest(dt: Dtype) -> float:
    """The largest finite value of a float dtype (a complex one's parts)."""
    fmt = _part(dt).float_format
    assert fmt is not None
    return float(fmt.max_finite)


def check_contract(subject: Subject, spec: S.Contract, dst: Dtype, got: Arr, ops: list[Arr],
                   a_dt: Dtype, b_dt: Dtype, what: str, a_scale: Arr | None = None,
                   b_scale: Arr | None = None) -> None:
    """Every output against the exact sum of its products and init: integers
    exactly (wrapping in the accumulator), floats within e(K)(|init| +
    Σ|a||b|) with e the library's own error factor, then rounded into dst.
    The bound holds "barring overflow and underflow": an output whose finite
    terms' |init| + Σ|a||b| reaches half the accumulator's largest value is
    not judged (a product or a partial sum of them may overflow, to an
    infinity that may meet an infinite term's of the other sign), and each
    part's 4K + 4 roundings may each err by half the accumulator's smallest
    subnormal more (and the destination's rounding by half its own)."""
    shape, exact, mags, ks, finite = exact_outputs(spec, ops, a_dt, b_dt, a_scale, b_scale)
    flat = np.asarray(got).reshape(-1)
    acc = spec.acc
    for i, (want, m, k) in enumerate(zip(exact, mags, ks, strict=True)):
        if acc.is_int:
            wi = np.asarray([want], dtype=object).astype(dst.numpy_dtype)
            assert_bits(dst, flat[i:i + 1], wi, f"{what}: output {i} ({k} products)")
            continue
        if not finite[i] < _largest(acc) / 2:
            continue  # barring overflow
        ok: bool
        e = subject.library.statement.error_factor(k, acc)
        bound = e * m + (2 * k + 2) * _tiny(acc) * (math.sqrt(2) if acc.is_complex else 1.0)
        if acc.is_complex:
            r = complex(flat[i]) if dst.is_complex else complex(float(flat[i]))
            w = complex(want)
            if not (math.isfinite(w.real) and math.isfinite(w.imag) and math.isfinite(m)):
                ok = _nan_match(r, w)
            else:
                ud = unit_roundoff(dst) if (dst.is_complex or dst.is_float) else 0.0
                tiny = _tiny(dst) * math.sqrt(2) if (dst.is_complex or dst.is_float) else 0.0
                ok = bool(abs(r - w) <= bound * (1 + 2 * ud) + ud * math.sqrt(2) * (abs(w) + bound)
                          + abs(w) * 2.0**-50 + tiny + 1e-300)
        else:
            ok = bool(O.within(dst, np.asarray([flat[i]]), want, bound)[0]) if math.isfinite(m) \
                else _nan_match(complex(float(flat[i])), complex(want))
        if not ok:
            raise fail(f"{what}: output {i} (of shape {list(shape)}) is {flat[i]!r}; the exact sum of its "
                       f"{k} products and init is {want!r}, bound e({k})·(|init| + Σ|a||b|) = "
                       f"{e!r}·{m!r} with the library's error factor (contract: 'an output of a float "
                       "or complex contraction ... is within e(K) (|init| + Σ|a||b|) of the exact sum')")


def _nan_match(r: complex, w: complex) -> bool:
    """Outside the bounds' reach (infinite or NaN sums), a NaN part where the
    exact one is NaN, else the same infinity."""
    for x, y in ((r.real, w.real), (r.imag, w.imag)):
        if math.isnan(y) != math.isnan(x):
            return False
        if math.isinf(y) and x != y:
            return False
    return True


def _dtypes(case: Case) -> tuple[Dtype, Dtype]:
    return case.operands[0].dtype, case.operands[1].dtype


@law("contract")
def test_contract_within_bound(subject: Subject, data: Data) -> None:
    """Each output of a contraction (batch and contracting pairs on any axes,
    with init or not, Rows and Contracting segments) is within e(K)(|init| +
    Σ|a||b|) of the exact sum of its products and init, e the library's own
    error factor, a complex one in modulus, then rounded into the destination;
    integer accumulators exactly, wrapping. Contract: 'an output of a float or
    complex contraction (S.contract) with K products a·b is within e(K)
    (|init| + Σ|a||b|) of the exact sum of its products and init as the
    accumulator holds them, a complex one in modulus'; 'e is the library's
    error factor'."""
    case = draw_case(data, subject, "contract")
    out = invoke(subject, case.spec, case.dsts, case.operands, data)
    if out.declined:
        return
    a_dt, b_dt = _dtypes(case)
    check_contract(subject, case.spec, case.dsts[0][0], out.results[0], case.values, a_dt, b_dt,
                   f"contract {case.spec}")


@law("contract")
def test_contract_without_products(subject: Subject, data: Data) -> None:
    """An output without products (a contracted extent of 0, a Rows id outside
    [0, g), an empty Contracting group) is init's element as the accumulator
    holds it, bits unchanged (−0 stays −0, a NaN keeps its payload), or +0
    without init. Contract: 'An output without products, where the contracted
    extent is 0 or its segments give it none, is its init element as the
    accumulator holds it, rounded into the destination, or +0 without init. No
    addition touches it, so an init of -0 stays -0 and a NaN init keeps its
    bits'."""
    acc = data.draw(st.sampled_from((D.float32, D.float64, D.complex64, D.complex128, D.int32)),
                    label="acc")
    rows = data.draw(st.integers(1, 3), label="rows")
    cols = data.draw(st.integers(1, 3), label="cols")
    init = data.draw(st.booleans(), label="init")
    spec = S.Contract((), ((1, 0),), acc, init)
    a_dt, b_dt = contract_operand_dtype(data, acc), contract_operand_dtype(data, acc)
    a = operand(data, subject, a_dt, (rows, 0), label="a")[0]
    b = operand(data, subject, b_dt, (0, cols), label="b")[0]
    ops = [a, b]
    iv = None
    if init:
        ia, iv = operand(data, subject, acc, (rows, cols), profiles=("specials", "bits"), label="init")
        ops.append(ia)
    out = invoke(subject, spec, [(acc, (rows, cols))], ops, data)
    if out.declined:
        return
    want = iv if iv is not None else np.zeros((rows, cols), dtype=acc.numpy_dtype)
    assert_bits(acc, out.results[0], want, f"contract of no products {'with' if init else 'without'} "
                "init (contract: 'No addition touches it, so an init of -0 stays -0 and a NaN init "
                "keeps its bits')")


@law("contract")
def test_contract_init_in_place(subject: Subject, data: Data) -> None:
    """A destination identical to init receives what a fresh destination does.
    Contract: 'A kernel reads such an operand at an index before writing
    there, so the result equals what a fresh destination would receive'
    (contract's init)."""
    spec, a_shape, b_shape = data.draw(contraction(segments=False), label="contraction")
    spec = S.Contract(spec.batch, spec.contracting, spec.acc, True)
    acc = spec.acc
    a_dt, b_dt = contract_operand_dtype(data, acc), contract_operand_dtype(data, acc)
    profiles = ("moderate", "ints")
    a = operand(data, subject, a_dt, a_shape, profiles=profiles, label="a")[0]
    b = operand(data, subject, b_dt, b_shape, profiles=profiles, label="b")[0]
    shapes = SH.contract(S.Contract(spec.batch, spec.contracting, acc), [a_shape, b_shape])
    if isinstance(shapes, SH.Error):
        return
    out_shape = shapes[0]
    init_v = G.values(acc, out_shape, "moderate", data.draw(st.integers(0, 2**32 - 1), label="seed"))
    init = contiguous(subject, acc, init_v)
    fresh = invoke(subject, spec, [(acc, out_shape)], [a, b, init], data)
    if fresh.declined:
        return
    target = contiguous(subject, acc, init_v)
    answer = subject.kernel("contract")(spec, [target], [a, b, target])
    if answer is not fresh.answer:
        raise fail(f"contract in place answered {answer.name}, with a fresh destination "
                   f"{fresh.answer.name}")
    assert_bits(acc, target.to_numpy(), fresh.results[0], f"contract {spec} into its init")


@law("contract")
def test_contract_block_scales(subject: Subject, data: Data) -> None:
    """An operand with a block scale reads each element times its block's
    scale: an Exponent code e scales by 2^(e − 127), 255 making it NaN; a Value
    scale reads in its own dtype. The products of the scaled elements are
    within the library's e(K) bound. Contract: 'Code e scales its scale block
    by 2^(e - 127); 255 makes it NaN'; 'The operand's element at index i is in
    the scale block i divided by the ratio of the extents, axis by axis'."""
    acc = data.draw(st.sampled_from((D.float32, D.float64)), label="acc")
    m = data.draw(st.sampled_from((1, 2, 4)), label="rows")
    k = data.draw(st.sampled_from((0, 2, 4, 8)), label="contracted")
    n = data.draw(st.sampled_from((1, 2, 4)), label="cols")
    choice = st.sampled_from((None, S.ScaleKind.EXPONENT, S.ScaleKind.VALUE))
    kinds = (data.draw(choice, label="a's scale"), data.draw(choice, label="b's scale"))
    spec = S.Contract((), ((1, 0),), acc, False, kinds)
    a_dt, b_dt = contract_operand_dtype(data, acc), contract_operand_dtype(data, acc)
    a, av = operand(data, subject, a_dt, (m, k), profiles=("moderate", "ints"), label="a")
    b, bv = operand(data, subject, b_dt, (k, n), profiles=("moderate", "ints"), label="b")
    ops: list[Array] = [a, b]
    expanded: list[Arr | None] = [None, None]
    for side, (kind, shape) in enumerate(zip(kinds, ((m, k), (k, n)), strict=True)):
        if kind is None:
            continue
        block = tuple(data.draw(st.sampled_from([d for d in (1, 2, 4) if d <= max(e, 1) and
                                                 (e % d == 0)] or [1]), label="block") if e else 0
                      for e in shape)
        sshape = tuple(e // bl if bl else 0 for e, bl in zip(shape, block, strict=True))
        seed = data.draw(st.integers(0, 2**32 - 1), label="scale seed")
        rng = np.random.default_rng(seed)
        codes = rng.integers(120, 135, sshape)
        if kind is S.ScaleKind.EXPONENT:
            if codes.size and data.draw(st.booleans(), label="nan code?"):
                codes.reshape(-1)[0] = 255
            ops.append(contiguous(subject, D.uint8, codes.astype(np.uint8)))
            factors = np.where(codes == 255, np.nan, np.ldexp(1.0, codes - 127))
        else:
            sdt = data.draw(st.sampled_from((D.float32, D.bfloat16)), label="scale dtype")
            sv: Arr = D.of_float(sdt, np.ldexp(1.0, codes - 127))
            ops.append(contiguous(subject, sdt, sv))
            factors = sv.astype(np.float64)
        rep = [e // s if s else 1 for e, s in zip(shape, sshape, strict=True)]
        expanded[side] = np.kron(factors, np.ones(rep)) if factors.size else np.zeros(shape)
    out = invoke(subject, spec, [(acc, (m, n))], ops, data)
    if out.declined:
        return
    check_contract(subject, spec, acc, out.results[0], [av, bv], a_dt, b_dt,
                   f"contract with scales {kinds}", expanded[0], expanded[1])


@law("contract")
def test_contract_box(subject: Subject, data: Data) -> None:
    """A box of an integer contraction's outputs, computed alone from the
    operands' parts it reads (batch and free axes cut to the box, contracted
    axes whole), has the bits of the whole. Contract: 'A result whose bits this
    contract fixes, an integer, ... So a box of the results' indices ...
    computed alone from the parts of the operands it reads, has the bits of
    the whole'."""
    spec, a_shape, b_shape = data.draw(contraction(segments=False), label="contraction")
    acc = data.draw(st.sampled_from((D.int32, D.int64)), label="acc")
    spec = S.Contract(spec.batch, spec.contracting, acc, spec.init)
    a_dt, b_dt = contract_operand_dtype(data, acc), contract_operand_dtype(data, acc)
    a, _ = operand(data, subject, a_dt, a_shape, label="a")
    b, _ = operand(data, subject, b_dt, b_shape, label="b")
    shapes = SH.contract(S.Contract(spec.batch, spec.contracting, acc), [a_shape, b_shape])
    if isinstance(shapes, SH.Error) or 0 in shapes[0]:
        return
    out_shape = shapes[0]
    ops = [a, b]
    if spec.init:
        ops.append(operand(data, subject, acc, out_shape, label="init")[0])
    whole = invoke(subject, spec, [(acc, out_shape)], ops, data)
    if whole.declined:
        return
    ranges = []
    for d in out_shape:
        start = data.draw(st.integers(0, d - 1), label="box start")
        ranges.append(Range(start, data.draw(st.integers(1, d - start), label="box count"), 1))
    nb = len(spec.batch)
    a_free = [i for i in range(len(a_shape)) if i not in {p for p, _ in spec.batch + spec.contracting}]
    b_free = [j for j in range(len(b_shape)) if j not in {q for _, q in spec.batch + spec.contracting}]
    a_r = [Range(0, d, 1) for d in a_shape]
    b_r = [Range(0, d, 1) for d in b_shape]
    for t, (i, j) in enumerate(spec.batch):
        a_r[i] = b_r[j] = ranges[t]
    for t, i in enumerate(a_free):
        a_r[i] = ranges[nb + t]
    for t, j in enumerate(b_free):
        b_r[j] = ranges[nb + len(a_free) + t]
    sub = [a.view(Slice(tuple(a_r))), b.view(Slice(tuple(b_r)))]
    if spec.init:
        sub.append(ops[2].view(Slice(tuple(ranges))))
    part = invoke(subject, spec, [(acc, tuple(r.count for r in ranges))], sub)
    if part.declined:
        return
    key = tuple(slice(r.start, r.start + r.count) for r in ranges)
    assert_bits(acc, part.results[0], whole.results[0][key], f"contract {spec} box {ranges}")




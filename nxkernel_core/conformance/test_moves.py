"""Laws of the moves: gather, range gather, scatter, sort, numbering, assemble."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from .. import dtype as D
from .. import exact as O
from .. import spec as S
from ..layout import Range, Slice
from . import generators as G
from .cases import draw_case, index_values, region
from .harness import (
    Data,
    Subject,
    assert_bits,
    check_nan_rule,
    contiguous,
    fail,
    invoke,
    law,
    operand,
    operand_of,
)
from .judge import check_sums, signalling_in

# --------------------------------------------------------------------------
# Gathers
# --------------------------------------------------------------------------


@law("gather")
def test_gather_bits(subject: Subject, data: Data) -> None:
    """A gather copies x's bits at the positions index holds along the axis
    (NaN payloads, signalling NaNs, a bool's byte, sub-byte codes), and zero
    bits for a position outside [0, d); nothing outside its destination
    changes. Contract: 'A move copies bits: a gather, ...'; design §4 'elements
    of x at positions; outside [0, d) reads zero bits'."""
    case = draw_case(data, subject, "gather")
    out = invoke(subject, case.spec, case.dsts, case.operands, data)
    if out.declined:
        return
    index, x = case.values
    dt = case.dsts[0][0]
    assert_bits(dt, out.results[0], O.gather(x, index, case.spec.axis),
                f"gather along axis {case.spec.axis} of positions {index.tolist()}")


@law("gather")
def test_gather_box(subject: Subject, data: Data) -> None:
    """A box of a gather's results, computed from index's box and x's part
    (the axis whole, the other axes the box's ranges), has the bits of the
    whole. Contract: 'a box of the results' indices ... computed alone from
    the parts of the operands it reads, has the bits of the whole'."""
    case = draw_case(data, subject, "gather")
    index, x = case.operands
    if index.numel == 0:
        return
    whole = invoke(subject, case.spec, case.dsts, case.operands, data)
    if whole.declined:
        return
    axis = case.spec.axis
    ranges = []
    for d in index.shape:
        start = data.draw(st.integers(0, d - 1), label="box start")
        ranges.append(Range(start, data.draw(st.integers(1, d - start), label="box count"), 1))
    x_ranges = [Range(0, x.shape[i], 1) if i == axis else r for i, r in enumerate(ranges)]
    sub_index, sub_x = index.view(Slice(tuple(ranges))), x.view(Slice(tuple(x_ranges)))
    part = invoke(subject, case.spec, [(case.dsts[0][0], sub_index.shape)], [sub_index, sub_x])
    if part.declined:
        return
    key = tuple(slice(r.start, r.start + r.count) for r in ranges)
    assert_bits(case.dsts[0][0], part.results[0], whole.results[0][key], f"gather box {ranges}")


@law("range_gather")
def test_range_gather_bits(subject: Subject, data: Data) -> None:
    """A range gather copies runs of x's bits, ``dst[…, i, j, …] = x[…,
    starts[…, i, …] + j, …]``, and zero bits for a position outside [0, d).
    Contract: 'A move copies bits: ..., a range gather'; design §4 'a position
    outside [0, d) reads zero bits'."""
    case = draw_case(data, subject, "range_gather")
    out = invoke(subject, case.spec, case.dsts, case.operands, data)
    if out.declined:
        return
    starts, x = case.values
    assert_bits(case.dsts[0][0], out.results[0],
                O.range_gather(x, starts, case.spec.axis, case.spec.run),
                f"range gather along axis {case.spec.axis}, run {case.spec.run}, starts {starts.tolist()}")


# --------------------------------------------------------------------------
# Scatters
# --------------------------------------------------------------------------


def _scatter_case(data: Data, subject: Subject, combine: S.Combine) -> Any:
    exclude = (D.bool_, D.bit) if combine is S.Combine.ADD else ()
    dt = data.draw(G.dtypes(exclude=exclude), label="dtype")
    shape = data.draw(G.shapes(min_rank=1, max_rank=3, max_side=5), label="into shape")
    axis = data.draw(st.integers(0, len(shape) - 1), label="axis")
    n = data.draw(G.around(0, 7, 3), label="updates")
    ushape = tuple(n if i == axis else d for i, d in enumerate(shape))
    idx = index_values(data, ushape, shape[axis])
    index = operand_of(data, subject, D.int64, idx, label="index")
    profiles = ("moderate", "ints", "mixed") if combine is S.Combine.ADD else G.PROFILES
    into, iv = operand(data, subject, dt, shape, profiles=profiles, label="into")
    updates, uv = operand(data, subject, dt, ushape, profiles=profiles, label="updates")
    spec = S.Scatter(axis, combine, False)
    return spec, dt, shape, [into, index, updates], [iv, index.to_numpy(), uv]


@law("scatter")
def test_scatter_set(subject: Subject, data: Data) -> None:
    """A Set scatter copies, in C order of the updates, each update's bits to
    its position (the last one wins), drops an update outside [0, d), and
    leaves into's bits where no update reaches. Contract: 'A move copies bits:
    ..., a scatter by Set'; upstream §8: 'Set takes the last'; 'elements no
    update reaches keep into's bits'."""
    spec, dt, shape, ops, vals = _scatter_case(data, subject, S.Combine.SET)
    out = invoke(subject, spec, [(dt, shape)], ops, data)
    if out.declined:
        return
    want, _ = O.scatter(vals[0], vals[1], vals[2], spec.axis, S.Combine.SET)
    assert_bits(dt, out.results[0], want, f"scatter Set along axis {spec.axis} at {vals[1].tolist()}")


@law("scatter")
def test_scatter_combine(subject: Subject, data: Data) -> None:
    """An Add scatter gives each position +0 + into + its updates in C order:
    integers wrapping exactly, floats within γ(n − 1)·Σ|x| of the exact sum
    (narrow floats in float32, then rounded once); Max and Min give Prog's
    Maximum and Minimum of into and the updates exactly (any NaN for a NaN);
    a position no update reaches keeps into's bits. Contract: 'A reduction,
    a scan, a scatter's addition, ... combine several values, the result's
    terms'; upstream §8: 'Add computes +0 + x + u1 + …'."""
    combine = data.draw(st.sampled_from((S.Combine.ADD, S.Combine.MAX, S.Combine.MIN)),
                        label="combine")
    spec, dt, shape, ops, vals = _scatter_case(data, subject, combine)
    out = invoke(subject, spec, [(dt, shape)], ops, data)
    if out.declined:
        return
    _, chains = O.scatter(vals[0], vals[1], vals[2], spec.axis, combine)
    got = out.results[0].reshape(-1)
    into = vals[0].reshape(-1)
    what = f"scatter {combine.value} along axis {spec.axis} at {vals[1].tolist()}"
    for i, chain in enumerate(chains):
        if len(chain) == 1:
            assert_bits(dt, got[i:i + 1], into[i:i + 1], f"{what}: element {i}, reached by no update, "
                        "keeps into's bits")
            continue
        terms = np.asarray(chain, dtype=dt.numpy_dtype)[None, :]
        if combine is S.Combine.ADD:
            if dt.is_float or dt.is_complex:
                check_sums(dt, dt, got[i:i + 1], O.to_float64(dt, terms), f"{what}: element {i}")
            else:
                want = O.reduce_fixed(dt, terms, S.Monoid.SUM)[0]
                assert_bits(dt, got[i:i + 1], want, f"{what}: element {i}")
        else:
            r = S.Monoid.MAX if combine is S.Combine.MAX else S.Monoid.MIN
            want, _, nan = O.reduce_fixed(dt, terms, r, in_carrier=False)
            assert_bits(dt, got[i:i + 1], want, f"{what}: element {i}", any_nan=nan, truth=True)
    check_nan_rule(dt, out.results[0], signalling_in(ops, vals), what)


@law("scatter")
def test_scatter_in_place(subject: Subject, data: Data) -> None:
    """A destination identical to into receives what a fresh destination does.
    Contract: 'A kernel reads such an operand at an index before writing
    there, so the result equals what a fresh destination would receive'
    (scatter's into)."""
    combine = data.draw(st.sampled_from(tuple(S.Combine)), label="combine")
    spec, dt, shape, ops, vals = _scatter_case(data, subject, combine)
    fresh = invoke(subject, spec, [(dt, shape)], ops, data)
    if fresh.declined:
        return
    target = contiguous(subject, dt, vals[0])
    answer = subject.kernel("scatter")(spec, [target], [target, ops[1], ops[2]])
    if answer is not fresh.answer:
        raise fail(f"scatter in place answered {answer.name}, with a fresh destination "
                   f"{fresh.answer.name}")
    assert_bits(dt, target.to_numpy(), fresh.results[0], f"scatter {combine.value} into itself")


# --------------------------------------------------------------------------
# Sorting and numbering
# --------------------------------------------------------------------------


@law("sort")
def test_sort_stable_total_order(subject: Subject, data: Data) -> None:
    """A sort is stable in the total order (−0 below +0, NaNs last and equal;
    complex by real then imaginary part), ``descending`` reverses the order
    and stays stable, ``k`` keeps the first k: values are x's bits at the
    positions, positions int64. Contract: 'A move copies bits: ..., a sort';
    design §4 'stable, total order, NaNs last'; upstream §8 'descending
    reverses the order but stays stable: equal elements keep increasing
    positions'."""
    dt = data.draw(G.dtypes(), label="dtype")
    shape = data.draw(G.shapes(min_rank=1, max_rank=3, max_side=7), label="x shape")
    axis = data.draw(st.integers(0, len(shape) - 1), label="axis")
    k = data.draw(st.none() | st.integers(0, shape[axis]), label="k")
    descending = data.draw(st.booleans(), label="descending")
    from .test_reduce import ties

    vals = ties(data, dt, shape, "x") if data.draw(st.booleans(), label="ties?") else \
        G.values(dt, shape, data.draw(G.profiles(), label="profile"), data.draw(
            st.integers(0, 2**32 - 1), label="seed"))
    x = operand_of(data, subject, dt, vals, label="x")
    spec = S.Sort(axis, descending, k)
    out_shape = tuple(k if (i == axis and k is not None) else d for i, d in enumerate(shape))
    out = invoke(subject, spec, [(dt, out_shape), (D.int64, out_shape)], [x], data)
    if out.declined:
        return
    want_v, want_p = O.sort(x.to_numpy(), dt, axis, descending, k)
    what = f"sort{' descending' if descending else ''} of {dt.name} along axis {axis}, k={k}"
    assert_bits(D.int64, out.results[1], want_p, f"{what}: positions of {x.to_numpy().tolist()}")
    assert_bits(dt, out.results[0], want_v, f"{what}: values")


@law("numbering")
def test_numbering_counts(subject: Subject, data: Data) -> None:
    """Numbering counts, per batch row, the keys below each element of x
    (left) or not above it (right) in sort's total order: −0 below +0, NaN
    above all; x often holds the keys' own values, so ties are tested.
    Contract (design §4): 'for each element of x, the number of keys of its
    batch row that are below it (left) or not above it (right), in sort's
    total order (−0 below +0, NaN above all)'."""
    if data.draw(st.integers(0, 2), label="ties?") > 0:
        dt = data.draw(G.dtypes(), label="dtype")
        batch = data.draw(G.shapes(max_rank=2, max_side=3), label="batch")
        m, n = data.draw(st.integers(1, 6), label="keys"), data.draw(st.integers(1, 6), label="x")
        seed = data.draw(st.integers(0, 2**32 - 1), label="pool seed")
        pool = G.values(dt, (3,), data.draw(G.profiles(("specials", "bits")), label="pool"), seed)
        rng = np.random.default_rng(seed)
        sorted_keys, _ = O.sort(pool[rng.integers(0, 3, (*batch, m))], dt, len(batch), False, None)
        keys = operand_of(data, subject, dt, sorted_keys, label="keys")
        x = operand_of(data, subject, dt, pool[rng.integers(0, 3, (*batch, n))], label="x")
        spec = S.Numbering(data.draw(st.sampled_from(tuple(S.Side)), label="side"))
        ops, values = [keys, x], [keys.to_numpy(), x.to_numpy()]
        dsts = [(D.int64, (*batch, n))]
    else:
        case = draw_case(data, subject, "numbering")
        spec, ops, values, dsts = case.spec, case.operands, case.values, case.dsts
    out = invoke(subject, spec, dsts, ops, data)
    if out.declined:
        return
    kv, xv = values
    dt = ops[0].dtype
    right = spec.side is S.Side.RIGHT
    assert_bits(D.int64, out.results[0], O.numbering(kv, xv, dt, right),
                lambda: f"numbering ({spec.side.value}) of {xv.tolist()} among keys {kv.tolist()}")


# --------------------------------------------------------------------------
# Assembly
# --------------------------------------------------------------------------


@law("assemble")
def test_assemble_bits(subject: Subject, data: Data) -> None:
    """An assembly is the fill's bits where no region holds an index, else the
    bits of the last piece whose region holds it. Contract: 'A move copies
    bits: ..., an assembly'; upstream §8 'the last piece whose region holds an
    index wins; elsewhere the fill is used; bits are copied'."""
    case = draw_case(data, subject, "assemble")
    out = invoke(subject, case.spec, case.dsts, case.operands, data)
    if out.declined:
        return
    dt, shape = case.dsts[0]
    want = O.assemble(shape, dt, case.spec.fill, case.spec.regions, case.values)
    assert_bits(dt, out.results[0], want, f"assemble {case.spec}")


@law("assemble")
def test_assemble_in_place(subject: Subject, data: Data) -> None:
    """A destination identical to the first piece, where its region is the
    whole result, receives what a fresh destination does. Contract: 'assemble's
    first piece where its region is the whole result ... the result equals
    what a fresh destination would receive'."""
    dt = data.draw(G.dtypes(), label="dtype")
    shape = data.draw(G.shapes(max_rank=3, max_side=5), label="shape")
    whole = tuple(Range(0, d, 1) for d in shape)
    others = tuple(region(data, shape) for _ in range(data.draw(st.integers(0, 2), label="pieces")))
    regions = (whole, *others)
    from .cases import fill_bits

    fill = fill_bits(dt, G.specials(dt)[0])
    first = G.values(dt, shape, "bits", data.draw(st.integers(0, 2**32 - 1), label="seed"))
    pieces = [contiguous(subject, dt, first)] + [
        operand(data, subject, dt, tuple(r.count for r in reg), label="piece")[0] for reg in others]
    spec = S.Assemble(shape, fill, regions)
    fresh = invoke(subject, spec, [(dt, shape)], pieces, data)
    if fresh.declined:
        return
    target = contiguous(subject, dt, pieces[0].to_numpy())
    answer = subject.kernel("assemble")(spec, [target], [target, *pieces[1:]])
    if answer is not fresh.answer:
        raise fail(f"assemble in place answered {answer.name}, with a fresh destination "
                   f"{fresh.answer.name}")
    assert_bits(dt, target.to_numpy(), fresh.results[0], "assemble into its first piece")


"""Laws of ``map``: a program at every index of its loop, one rule each."""

from __future__ import annotations

import math
from functools import partial

import numpy as np
from hypothesis import strategies as st

from .. import dtype as D
from .. import evaluator
from .. import exact as O
from .. import shape as SH
from .. import spec as S
from ..array import Array
from ..dtype import Dtype, Kind
from ..layout import Range, Slice
from ..prog import TRANSCENDENTAL, Binary, Prog, Unary, element
from . import generators as G
from .cases import exact_program, fill_bits, moved_outputs, pads
from .harness import (
    Arr,
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
from .judge import payload_exposed, program_signalling


def _check_map(subject: Subject, prog: Prog, loads: tuple[S.Load, ...], arrays: list[Array],
               vals: list[Arr], results: list[Arr], what: str) -> None:
    """Every output of an exact program against ``evaluator.evaluate`` of the
    loaded operands: moves bit for bit, others with any NaN, a computed bool
    as the byte 0 or 1 (upstream §3: 'bool → 0 or 1'); and the NaN rule."""
    loaded = [O.pad(v, a.dtype, ld.fill, ld.pad) if isinstance(ld, S.Padded) else v
              for v, a, ld in zip(vals, arrays, loads, strict=True)]
    fills = [(a.dtype, element(a.dtype, ld.fill))
             for a, ld in zip(arrays, loads, strict=True) if isinstance(ld, S.Padded)]
    shape = results[0].shape
    want = evaluator.evaluate(prog, loaded, shape)
    # An operand, a fill (which a padded load may not read), a constant or a
    # Bitcast's bits may be the signalling NaN a result passes on.
    signalling = any(O.is_signalling(a.dtype, v).any() for a, v in zip(arrays, vals, strict=True)) or \
        any(O.is_signalling(dt, f).any() for dt, f in fills) or program_signalling(prog, loaded, shape)
    # Where a computed NaN's bits reach an output through a Bitcast, its bits
    # are the library's: the reference's stand in for them there.
    exposed = payload_exposed(prog, loaded, shape)
    for k, (dt, moved) in enumerate(zip(prog.out_dtypes, moved_outputs(prog), strict=True)):
        got = np.where(exposed[k], want[k], results[k]) if exposed[k].any() else results[k]
        assert_bits(dt, got, want[k], f"{what}: output {k} of\n{prog}", any_nan=not moved)
        if not moved:
            check_nan_rule(dt, np.where(exposed[k], np.zeros_like(got), got), signalling,
                           f"{what}: output {k}")


@law("map")
def test_map_exact_kinds(subject: Subject, data: Data) -> None:
    """A program of the kinds Prog defines exactly gives the reference's bits at
    every index (any NaN for a NaN result but a move's, which keeps its bits),
    whatever the operands' layouts. Contract: 'A result whose bits this
    contract fixes, ..., a move's or a map of kinds Prog defines exactly,
    depends only on the operand elements its own index reads'; 'Only a move
    specifies a NaN result's bits'."""
    shape = data.draw(G.shapes(max_rank=4, max_side=4), label="loop")
    ins = tuple(data.draw(G.dtypes(), label="input dtype") for _ in range(data.draw(
        st.integers(1, 3), label="inputs")))
    prog = data.draw(exact_program(ins, len(shape)), label="program")
    ops = [operand(data, subject, dt, shape, label=f"x{i}") for i, dt in enumerate(ins)]
    loads = (S.PLAIN,) * len(ins)
    out = invoke(subject, S.Map(prog, loads), [(dt, shape) for dt in prog.out_dtypes],
                 [a for a, _ in ops], data)
    if out.declined:
        return
    _check_map(subject, prog, loads, [a for a, _ in ops], [v for _, v in ops], out.results, "map")


def _moved(kind: str, src: Dtype, dst: Dtype, x: Array) -> str:
    return f"map {kind} {src.name} -> {dst.name} of {x.to_numpy()!r}"


def _cast_what(src: Dtype, dst: Dtype, got: Arr) -> str:
    return f"map cast {src.name} -> {dst.name} of {got!r}"


def _chunks(items: list[Dtype], size: int) -> list[list[Dtype]]:
    return [items[i:i + size] for i in range(0, len(items), size)]


@law("map")
def test_map_moves_keep_bits(subject: Subject, data: Data) -> None:
    """A map of Copy, or of Bitcast into any dtype of the same width, keeps
    every bit: NaN payloads and signalling NaNs of both signs, a bool's byte,
    sub-byte codes. Every dtype in each example, its specials and random
    bits, in a drawn layout. Contract: 'A move copies bits: ..., and a map of
    Copy or Bitcast'; 'Only a move specifies a NaN result's bits'."""
    extra = data.draw(st.integers(0, 12), label="random elements")
    seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
    for src in D.all:
        vals = np.concatenate([G.specials(src), G.values(src, (extra,), "bits", seed)])
        x = operand_of(data, subject, src, vals, label=f"{src.name} operand")
        targets = [d for d in D.all if d.bits == src.bits]
        b = Prog.build([src])
        prog = b.finish(b.copy(b.ins[0]), *(b.bitcast(b.ins[0], d) for d in targets))
        outs = [src, *targets]
        out = invoke(subject, S.Map(prog, (S.PLAIN,)), [(d, vals.shape) for d in outs], [x], data)
        if out.declined:
            continue
        want = evaluator.evaluate(prog, [x.to_numpy()], vals.shape)
        for k, d in enumerate(outs):
            kind = "copy" if k == 0 else "bitcast"
            assert_bits(d, out.results[k], want[k], partial(_moved, kind, src, d, x))


@law("map")
def test_map_casts(subject: Subject, data: Data) -> None:
    """A Cast between any two dtypes gives the reference's value on every
    special (float stores rounding once with the store rule's saturation, an
    integer rounding once into a float, integers wrapping, truncation and
    saturation into integers, NaN into integers 0, bool as x ≠ 0, complex
    parts): any NaN for a NaN, never a signalling one made from no signalling
    operand. Every pair of dtypes in each example. Contract: 'Every other
    kernel's NaN result follows the NaN rule (Stores)'; upstream §3 'Cast':
    'integer → float: exact value rounded once'."""
    extra = data.draw(st.integers(0, 12), label="random elements")
    seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
    for src in D.all:
        vals = np.concatenate([G.specials(src), G.values(src, (extra,), "bits", seed)])
        x = operand_of(data, subject, src, vals, label=f"{src.name} operand")
        got = x.to_numpy()
        signalling = bool(O.is_signalling(src, got).any())
        for dsts in _chunks(list(D.all), 15):
            b = Prog.build([src])
            prog = b.finish(*(b.cast(b.ins[0], d) for d in dsts))
            out = invoke(subject, S.Map(prog, (S.PLAIN,)), [(d, vals.shape) for d in dsts], [x], data)
            if out.declined:
                continue
            want = evaluator.evaluate(prog, [got], vals.shape)
            for k, dst in enumerate(dsts):
                what = partial(_cast_what, src, dst, got)
                assert_bits(dst, out.results[k], want[k], what, any_nan=src is not dst, truth=True)
                check_nan_rule(dst, out.results[k], signalling, what)


#: Upstream §3's bounds in ulps of the transcendentals, Pow and Atan2 (f32, f64).
_ULPS: dict[object, tuple[int, int]] = {
    **{k: (2, 2) for k in (Unary.EXP, Unary.EXP2, Unary.SIN, Unary.COS, Unary.ASIN, Unary.ACOS,
                           Unary.ATAN, Unary.COSH, Unary.TANH, Unary.ERF)},
    **{k: (1, 2) for k in (Unary.EXPM1, Unary.LOG, Unary.LOG2, Unary.LOG1P)},
    Binary.ATAN2: (3, 2), Unary.SINH: (3, 2), Unary.TAN: (4, 2), Binary.POW: (4, 2),
}


@law("map")
def test_map_transcendentals(subject: Subject, data: Data) -> None:
    """A transcendental kind, Pow or Atan2 is within upstream's table of ulps of
    the correctly rounded result (float32 and float64; 1 ulp for the narrow
    floats, which compute in float32 and round once), and its C99 special
    values (infinities, NaNs, signed zeros at the poles) are exact. Upstream
    §3: 'Error bounds in ulps'; 'C99 Annex F special values hold exactly'."""
    dt = data.draw(G.dtypes(kinds=(Kind.FLOAT,)), label="dtype")
    kinds: list[Unary | Binary] = [*sorted(TRANSCENDENTAL, key=lambda k: k.value), Binary.POW,
                                   Binary.ATAN2]
    kind = data.draw(st.sampled_from(kinds), label="kind")
    binary = isinstance(kind, Binary)
    prog = Prog.binary(kind, dt) if isinstance(kind, Binary) else Prog.unary(kind, dt)
    shape = (data.draw(st.integers(1, 24), label="n"),)
    profiles = ("moderate", "specials", "mixed")
    ops = [operand(data, subject, dt, shape, profiles=profiles, label=f"x{i}")
           for i in range(2 if binary else 1)]
    out = invoke(subject, S.Map(prog, (S.PLAIN,) * len(ops)), [(dt, shape)], [a for a, _ in ops], data)
    if out.declined:
        return
    want = evaluator.evaluate(prog, [v for _, v in ops], shape)[0]
    got = out.results[0]
    f32, f64 = _ULPS[kind]
    bound = f64 if dt is D.float64 else f32 if dt is D.float32 else 1
    d = evaluator.ulps(got, want, dt)
    if (d > bound).any():
        i = int(np.argmax(d))
        args = ", ".join(repr(v[i]) for _, v in ops)
        raise fail(f"map {kind.name.lower()} {dt.name}({args}) = {got[i]!r}, the correctly rounded "
                   f"value is {want[i]!r}: {d[i]} ulps, above upstream's {bound}")
    check_nan_rule(dt, got, any(O.is_signalling(dt, v).any() for _, v in ops), "map")


@law("map")
def test_map_padded_loads(subject: Subject, data: Data) -> None:
    """A Padded load reads the operand padded by lo and hi (a negative one
    crops), interior elements between neighbours and then windows, the fill's
    bits where it reads no element: a Copy of it keeps every bit. Contract:
    'Along axis i it puts lo.(i) elements before the operand's, hi.(i) after
    and interior.(i) between neighbours, and a negative lo or hi crops
    instead. Then it takes the windows of the padded operand'."""
    dt = data.draw(G.dtypes(), label="dtype")
    src = data.draw(G.shapes(min_rank=1, max_rank=3, max_side=4), label="operand shape")
    p = data.draw(pads(src), label="pad")
    loop = SH.padded(src, p)
    if isinstance(loop, SH.Error):
        return
    sp = G.specials(dt)
    fill = fill_bits(dt, sp[data.draw(st.integers(0, len(sp) - 1), label="fill")])
    x, v = operand(data, subject, dt, src, profiles=("bits", "specials"), label="x")
    load = S.Padded(fill, p)
    out = invoke(subject, S.Map(Prog.identity(dt), (load,)), [(dt, loop)], [x], data)
    if out.declined:
        return
    assert_bits(dt, out.results[0], O.pad(v, dt, fill, p), f"map of a Padded load by {p}")


@law("map")
def test_map_in_place(subject: Subject, data: Data) -> None:
    """A destination identical to a Plain load's operand receives what a fresh
    destination does. Contract: 'A kernel reads such an operand at an index
    before writing there, so the result equals what a fresh destination would
    receive' (a Plain load of map)."""
    shape = data.draw(G.shapes(max_rank=3, max_side=5), label="loop")
    dt = data.draw(G.dtypes(), label="dtype")
    n_ins = data.draw(st.integers(1, 3), label="inputs")
    ins = (dt, *(data.draw(G.dtypes(), label="input dtype") for _ in range(n_ins - 1)))
    prog = data.draw(exact_program(ins, len(shape), max_outs=1), label="program")
    if prog.out_dtypes[0] is not dt:
        b = Prog.build(ins)
        prog = b.finish(b.maximum(b.ins[0], b.ins[0]) if dt.is_bool else b.copy(b.ins[0]))
    ops = [operand(data, subject, t, shape, label=f"x{i}") for i, t in enumerate(ins)]
    arrays = [a for a, _ in ops]
    spec = S.Map(prog, (S.PLAIN,) * len(ins))
    fresh = invoke(subject, spec, [(dt, shape)], arrays, data)
    if fresh.declined:
        return
    target = contiguous(subject, dt, ops[0][1])
    arrays[0] = target
    answer = subject.kernel("map")(spec, [target], arrays)
    if answer is not fresh.answer:
        raise fail(f"map in place answered {answer.name}, with a fresh destination {fresh.answer.name}")
    assert_bits(dt, target.to_numpy(), fresh.results[0], f"map in place of\n{prog}")


@law("map")
def test_map_box(subject: Subject, data: Data) -> None:
    """A box of an exact map's results, computed alone from the parts of the
    operands it reads, has the bits of the whole. Contract: 'So a box of the
    results' indices, a range of them along each axis, computed alone from the
    parts of the operands it reads, has the bits of the whole'."""
    shape = data.draw(G.shapes(min_rank=1, max_rank=3, max_side=5, min_side=1), label="loop")
    ins = tuple(data.draw(G.dtypes(), label="input dtype") for _ in range(data.draw(
        st.integers(1, 2), label="inputs")))
    prog = data.draw(exact_program(ins, len(shape)), label="program")
    ops = [operand(data, subject, dt, shape, label=f"x{i}") for i, dt in enumerate(ins)]
    spec = S.Map(prog, (S.PLAIN,) * len(ins))
    dsts = [(dt, shape) for dt in prog.out_dtypes]
    whole = invoke(subject, spec, dsts, [a for a, _ in ops], data)
    if whole.declined:
        return
    ranges = []
    for d in shape:
        start = data.draw(st.integers(0, d - 1), label="box start")
        ranges.append(Range(start, data.draw(st.integers(1, d - start), label="box count"), 1))
    box = Slice(tuple(ranges))
    sub_shape = tuple(r.count for r in ranges)
    # A Coord reads the loop's index, which the box restarts from 0: only
    # programs without Coord nodes keep the whole's bits.
    if prog.coord_axes:
        return
    part = invoke(subject, spec, [(dt, sub_shape) for dt in prog.out_dtypes],
                  [a.view(box) for a, _ in ops])
    key = tuple(slice(r.start, r.start + r.count) for r in ranges)
    for k, dt in enumerate(prog.out_dtypes):
        if part.declined:
            return
        assert_bits(dt, part.results[k], whole.results[k][key], f"map box {ranges} of\n{prog}")



@law("map")
def test_map_upstream_signed_zeros(subject: Subject, data: Data) -> None:
    """Sign of ±0 is +0 at every float dtype, and complex128 Fdiv of
    (0 + 2⁻⁵⁰i) by (0 − 2⁻¹⁰⁷⁴i) is (−inf, +0), as the exact quotient
    (mpmath) and upstream give, not the (−inf, NaN) of a division by the
    reciprocal. Upstream §3: 'Sign of ±0 is +0'; 'complex Fdiv scales so that
    (0 + 2⁻⁵⁰i) / (0 − 2⁻¹⁰⁷⁴i) is (−inf, +0), not (−inf, NaN)'."""
    dt = data.draw(G.dtypes(kinds=(Kind.FLOAT,)), label="dtype")
    zeros = D.of_float(dt, [0.0, -0.0])
    x = operand_of(data, subject, dt, zeros, label="zeros")
    out = invoke(subject, S.Map(Prog.unary(Unary.SIGN, dt), (S.PLAIN,)), [(dt, (2,))], [x], data)
    if not out.declined:
        assert_bits(dt, out.results[0], D.of_float(dt, [0.0, 0.0]), f"map sign {dt.name} of [+0, -0]")
    c = D.complex128
    num = operand_of(data, subject, c, np.array([complex(0.0, 2.0**-50)]), label="x")
    den = operand_of(data, subject, c, np.array([complex(0.0, -(2.0**-1074))]), label="y")
    out = invoke(subject, S.Map(Prog.binary(Binary.FDIV, c), (S.PLAIN, S.PLAIN)), [(c, (1,))],
                 [num, den], data)
    if not out.declined:
        assert_bits(c, out.results[0], np.array([complex(-math.inf, 0.0)]),
                    "map fdiv complex128 (0 + 2⁻⁵⁰i) / (0 − 2⁻¹⁰⁷⁴i)")

"""Calls that fit, one generator per kernel, and the programs they run.

``draw_case(data, subject, kernel)`` draws a call of ``kernel`` that fits: its
spec, its destinations' dtypes and shapes (as ``shape`` and the spec fix
them), and its operands placed by ``harness.operand``. The generic laws
(declines, misfits, determinism) run every kernel's calls from here; the
kernels' own laws draw narrower calls with the same pieces.

Programs: ``exact_program`` builds programs of the kinds ``Prog`` defines
exactly (arithmetic, Sqrt, Recip, Fma, Mod, rounding kinds, Sign, Neg, Abs,
Maximum, Minimum, comparisons, casts, bitcasts, copies, Where, integer kinds,
Threefry, Const and Coord nodes) over drawn operand dtypes; complex Mul,
Fdiv and Recip, which the contract bounds rather than fixes, are left out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

from .. import dtype as D
from .. import exact as O
from .. import shape as SH
from .. import spec as S
from ..array import Array
from ..dtype import Dtype, Kind
from ..kernels import kernel as record
from ..layout import Range, Window
from ..prog import Binary, Builder, Compare, Convert, Prog, Unary, Value
from . import generators as G
from .harness import Arr, Data, Subject, contiguous, operand, operand_of

__all__ = [
    "KERNELS",
    "Case",
    "draw_case",
    "exact_program",
    "fill_bits",
    "moved_outputs",
    "result_dtypes",
]

#: The kernels of S, in the contract's order.
KERNELS: Final[tuple[str, ...]] = tuple(S.KERNELS)


@dataclass
class Case:
    """A call that fits: the spec, the destinations' (dtype, shape) and the
    operands with their elements."""

    spec: Any
    dsts: list[tuple[Dtype, tuple[int, ...]]]
    operands: list[Array]
    values: list[Arr] = field(default_factory=list)


# --------------------------------------------------------------------------
# Programs
# --------------------------------------------------------------------------

_UNARY: Final[dict[Kind, tuple[Unary, ...]]] = {
    Kind.FLOAT: (Unary.NEG, Unary.ABS, Unary.SIGN, Unary.SQRT, Unary.RECIP, Unary.FLOOR,
                 Unary.CEIL, Unary.ROUND, Unary.TRUNC),
    Kind.SIGNED: (Unary.NEG, Unary.ABS, Unary.SIGN, Unary.RECIP, Unary.FLOOR, Unary.CEIL,
                  Unary.ROUND, Unary.TRUNC),
    Kind.UNSIGNED: (Unary.NEG, Unary.ABS, Unary.SIGN, Unary.RECIP, Unary.TRUNC),
    Kind.COMPLEX: (Unary.NEG,),
    Kind.BOOLEAN: (),
}
_BINARY: Final[dict[Kind, tuple[Binary, ...]]] = {
    Kind.FLOAT: (Binary.ADD, Binary.SUB, Binary.MUL, Binary.FDIV, Binary.MOD, Binary.MAXIMUM,
                 Binary.MINIMUM),
    Kind.SIGNED: (Binary.ADD, Binary.SUB, Binary.MUL, Binary.IDIV, Binary.MOD, Binary.POW,
                  Binary.MAXIMUM, Binary.MINIMUM, Binary.AND, Binary.OR, Binary.XOR),
    Kind.UNSIGNED: (Binary.ADD, Binary.SUB, Binary.MUL, Binary.IDIV, Binary.MOD, Binary.POW,
                    Binary.MAXIMUM, Binary.MINIMUM, Binary.AND, Binary.OR, Binary.XOR),
    Kind.COMPLEX: (Binary.ADD, Binary.SUB, Binary.MAXIMUM, Binary.MINIMUM),
    Kind.BOOLEAN: (Binary.MAXIMUM, Binary.MINIMUM, Binary.AND, Binary.OR, Binary.XOR),
}


def fill_bits(dt: Dtype, value: Any) -> bytes:
    """One element's bits of ``dt`` (a host element), as a fill or a Const
    holds them: a sub-byte element in the low bits of one byte."""
    raw = O.units(np.asarray(value, dtype=dt.numpy_dtype).reshape(())).tobytes()
    if dt.is_sub_byte:
        return bytes([raw[0] & ((1 << dt.bits) - 1)])
    return raw


def _const(draw: st.DrawFn, b: Builder, dt: Dtype) -> Value:
    sp = G.specials(dt)
    if dt.is_bool:
        sp = sp[np.asarray(sp).view(np.uint8) <= 1]  # a bool constant is 0 or 1 (upstream §3)
    v = sp[draw(st.integers(0, len(sp) - 1))]
    return b.const_bits(dt, fill_bits(dt, v))


@st.composite
def exact_program(draw: st.DrawFn, ins: tuple[Dtype, ...], rank: int, max_nodes: int = 4,
                  max_outs: int = 2) -> Prog:
    """A program of exactly defined kinds over operands of ``ins`` (see the
    module's doc) for a loop of rank ``rank``; one or two outputs."""
    b = Prog.build(ins)
    vals: list[Value] = list(b.ins)
    ops = ["unary", "binary", "compare", "cast", "bitcast", "copy", "where", "fma", "const", "coord"]
    for _ in range(draw(st.integers(0 if ins else 1, max_nodes))):
        op = draw(st.sampled_from(ops))
        try:
            v = draw(st.sampled_from(vals)) if vals else None
            if op == "const" or v is None:
                vals.append(_const(draw, b, draw(G.dtypes())))
            elif op == "coord":
                if rank:
                    vals.append(b.coord(draw(st.integers(0, rank - 1))))
            elif op == "unary" and _UNARY[v.dtype.kind]:
                vals.append(b.unary(draw(st.sampled_from(_UNARY[v.dtype.kind])), v))
            elif op in ("binary", "compare"):
                same = [w for w in vals if w.dtype is v.dtype]
                w = draw(st.sampled_from(same)) if draw(st.booleans()) else _const(draw, b, v.dtype)
                if op == "compare":
                    vals.append(b.binary(draw(st.sampled_from(tuple(Compare))), v, w))
                else:
                    kinds = list(_BINARY[v.dtype.kind])
                    if v.dtype is D.uint64:
                        kinds.append(Binary.THREEFRY)
                    if kinds:
                        vals.append(b.binary(draw(st.sampled_from(kinds)), v, w))
            elif op == "cast":
                vals.append(b.cast(v, draw(G.dtypes())))
            elif op == "bitcast":
                same_width = [dt for dt in D.all if dt.bits == v.dtype.bits]
                vals.append(b.bitcast(v, draw(st.sampled_from(same_width))))
            elif op == "copy":
                vals.append(b.copy(v))
            elif op == "where":
                conds = [c for c in vals if c.dtype.is_bool]
                c = draw(st.sampled_from(conds)) if conds else b.less(v, _const(draw, b, v.dtype))
                same = [w for w in vals if w.dtype is v.dtype]
                vals.append(b.where(c, v, draw(st.sampled_from(same))))
            elif op == "fma" and (v.dtype.is_float or v.dtype.is_int):
                same = [w for w in vals if w.dtype is v.dtype]
                vals.append(b.fma(v, draw(st.sampled_from(same)), draw(st.sampled_from(same))))
        except ValueError:
            continue
    if not vals:
        vals.append(_const(draw, b, draw(G.dtypes())))
    outs = [vals[-1]]
    if max_outs > 1 and len(vals) > 1 and draw(st.booleans()):
        outs.append(draw(st.sampled_from(vals[:-1])))
    return b.finish(*outs)


def moved_outputs(prog: Prog) -> list[bool]:
    """For each output, whether it is a move: an operand reached through Copy
    and Bitcast nodes alone, whose bits (NaN payloads, a bool's byte) the
    contract fixes."""
    from ..prog import In, Op1

    def moved(i: int) -> bool:
        node = prog.nodes[i]
        if isinstance(node, In):
            return True
        if isinstance(node, Op1) and node.kind in (Convert.COPY, Convert.BITCAST):
            return moved(node.x)
        return False

    return [moved(o) for o in prog.outs]


# --------------------------------------------------------------------------
# Loads
# --------------------------------------------------------------------------


@st.composite
def pads(draw: st.DrawFn, shape: tuple[int, ...], windows: bool = True) -> S.Pad:
    """A pad of an operand of ``shape`` (lo and hi from −1 to 2, interior 0 to
    2, a window where it fits) whose padded extents are not negative."""
    lo, hi, interior = [], [], []
    for d in shape:
        i = draw(st.integers(0, 2))
        ext_min = d + i * max(d - 1, 0)
        a = draw(st.integers(-min(1, ext_min), 2))
        c = draw(st.integers(-min(1, ext_min + a), 2))
        lo.append(a)
        hi.append(c)
        interior.append(i)
    ext = [a + d + c + i * max(d - 1, 0) for a, d, c, i in zip(lo, shape, hi, interior, strict=True)]
    wins: list[Window] = []
    if windows and shape and draw(st.booleans()):
        axis = draw(st.integers(0, len(shape) - 1))
        if ext[axis] >= 1:
            size = draw(st.integers(1, min(3, ext[axis])))
            dil = 1 if size == 1 else draw(st.integers(1, max(1, (ext[axis] - 1) // (size - 1))))
            wins.append(Window(axis, size, draw(st.integers(1, 2)), min(dil, 2)
                               if (size - 1) * min(dil, 2) <= ext[axis] - 1 else 1))
    return S.Pad(tuple(lo), tuple(hi), tuple(interior), tuple(wins))


def _padded_load(data: Data, dt: Dtype, shape: tuple[int, ...]) -> S.Padded:
    p = data.draw(pads(shape), label="pad")
    sp = G.specials(dt)
    return S.Padded(fill_bits(dt, sp[data.draw(st.integers(0, len(sp) - 1), label="fill")]), p)


# --------------------------------------------------------------------------
# One generator per kernel
# --------------------------------------------------------------------------


def result_dtypes(spec: Any, operands: Sequence[Array]) -> tuple[Dtype, ...]:
    """The destinations' dtypes a spec and its operands fix (its kernel's dtype
    rule, as the caller ``nx`` allocates them)."""
    fixed = record(spec.kernel).dtypes(spec, [o.dtype for o in operands])
    assert fixed is not None, f"{spec.kernel}: the case states its destinations' dtypes"
    return fixed


def _shapes(spec: Any, operands: Sequence[Array]) -> tuple[tuple[int, ...], ...]:
    out = record(spec.kernel).shapes(spec, [o.shape for o in operands])
    assume(not isinstance(out, SH.Error))
    assert not isinstance(out, SH.Error)
    return tuple(tuple(s) for s in out)


def _finish(spec: Any, ops: list[tuple[Array, Arr]], dts: Sequence[Dtype] | None = None) -> Case:
    arrays = [a for a, _ in ops]
    shapes = _shapes(spec, arrays)
    dtypes = tuple(dts) if dts is not None else result_dtypes(spec, arrays)
    return Case(spec, list(zip(dtypes, shapes, strict=True)), arrays, [v for _, v in ops])


def _map(data: Data, subject: Subject) -> Case:
    shape = data.draw(G.shapes(max_rank=3, max_side=4), label="loop")
    n_ins = data.draw(st.integers(1, 3), label="inputs")
    ins = tuple(data.draw(G.dtypes(), label="input dtype") for _ in range(n_ins))
    prog = data.draw(exact_program(ins, len(shape)), label="program")
    loads: list[S.Load] = []
    ops = []
    for i, dt in enumerate(ins):
        if data.draw(st.integers(0, 4), label="padded?") == 4:
            src = data.draw(G.shapes(min_rank=len(shape), max_rank=len(shape), max_side=3))
            load = _padded_load(data, dt, src)
            if SH.padded(src, load.pad) == shape:
                loads.append(load)
                ops.append(operand(data, subject, dt, src, label=f"load {i}"))
                continue
        loads.append(S.PLAIN)
        ops.append(operand(data, subject, dt, shape, label=f"load {i}"))
    return _finish(S.Map(prog, tuple(loads)), ops)


def reduction_terms_program(data: Data, dt: Dtype) -> Prog:
    """A program of one operand of ``dt`` whose output is the operand, or a
    cast, Neg or Abs of it (terms the contract's bounds hold on exactly)."""
    b = Prog.build([dt])
    (x,) = b.ins
    choice = data.draw(st.sampled_from(["copy", "copy", "cast", "neg", "abs"]), label="terms")
    if choice == "cast":
        return b.finish(b.cast(x, data.draw(G.dtypes(), label="term dtype")))
    if choice == "neg" and dt.kind is not Kind.BOOLEAN:
        return b.finish(b.neg(x))
    if choice == "abs" and dt.kind in (Kind.FLOAT, Kind.SIGNED, Kind.UNSIGNED):
        return b.finish(b.abs(x))
    return b.finish(b.copy(x))


def draw_reduction(data: Data, term: Dtype, has_terms: bool, scan: bool = False) -> S.Reduction:
    """A reduction that accepts terms of ``term`` (Max, Min and Arg only where
    there are terms)."""
    pool: list[S.Reduction] = []
    for r in (S.Monoid.SUM, S.Monoid.PROD, S.Monoid.MAX, S.Monoid.MIN, S.Arg(S.Extreme.MAX),
              S.Arg(S.Extreme.MIN), S.LOGSUMEXP, S.MOMENTS):
        if not S.accepts(r, term):
            continue
        if not has_terms and (isinstance(r, S.Arg) or r in (S.Monoid.MAX, S.Monoid.MIN)):
            continue
        pool.append(r)
    assume(pool)
    return data.draw(st.sampled_from(pool), label="reduction")


def result_dtype(data: Data, r: S.Reduction, term: Dtype) -> Dtype:
    """The stated dtype of a reduction's results: the terms' own, or another
    one they may round into."""
    fits = [dt for dt in D.all if S.result_fits(r, term, dt)]
    if data.draw(st.booleans(), label="own dtype?"):
        return term
    return data.draw(st.sampled_from(fits), label="result dtype")


def _reduce(data: Data, subject: Subject) -> Case:
    shape, axes = data.draw(G.loop_with_axes(min_rank=1), label="loop")
    dt = data.draw(G.dtypes(), label="dtype")
    prog = reduction_terms_program(data, dt)
    term = prog.out_dtypes[0]
    terms = math.prod(shape[a] for a in axes)
    kept = math.prod(d for i, d in enumerate(shape) if i not in axes)
    reductions = []
    for _ in range(data.draw(st.integers(1, 2), label="reductions")):
        r = draw_reduction(data, term, terms > 0 or kept == 0)
        reductions.append((r, 0, result_dtype(data, r, term)))
    x = operand(data, subject, dt, shape, label="x")
    spec = S.Reduce(prog, (S.PLAIN,), axes, tuple(reductions))
    return _finish(spec, [x])


def _scan(data: Data, subject: Subject) -> Case:
    shape, (axis,) = data.draw(G.loop_with_axes(min_rank=1, n_axes=1), label="loop")
    dt = data.draw(G.dtypes(), label="dtype")
    prog = reduction_terms_program(data, dt)
    term = prog.out_dtypes[0]
    r = draw_reduction(data, term, True, scan=True)
    rdt = result_dtype(data, r, term)
    carry = not isinstance(r, S.Arg) and data.draw(st.booleans(), label="carry?")
    spec = S.Scan(prog, (S.PLAIN,), axis, r, 0, rdt, data.draw(st.booleans(), label="reverse"), carry)
    ops = []
    if carry:
        cshape = SH.carry(spec, shape)
        assert not isinstance(cshape, SH.Error)
        cdt = D.carrier(term)
        ops.append(operand(data, subject, cdt, cshape, profiles=("moderate", "ints", "specials"),
                           label="carry"))
    ops.append(operand(data, subject, dt, shape, label="x"))
    return _finish(spec, ops)


def _fold(data: Data, subject: Subject) -> Case:
    dt = data.draw(G.dtypes(exclude=(D.bool_, D.bit)), label="dtype")
    shape = data.draw(G.shapes(min_rank=1, max_rank=3, max_side=4), label="shape")
    p = data.draw(pads(shape), label="pad")
    xs = SH.padded(shape, p)
    assume(not isinstance(xs, SH.Error))
    assert not isinstance(xs, SH.Error)
    x = operand(data, subject, dt, xs, label="x")
    return _finish(S.Fold(shape, p), [x])


def index_values(data: Data, shape: tuple[int, ...], d: int, label: str = "index") -> Arr:
    """int64 positions in [−2, d + 2) (some outside [0, d))."""
    seed = data.draw(st.integers(0, 2**32 - 1), label=f"{label} seed")
    rng = np.random.default_rng(seed)
    inside = rng.integers(0, max(d, 1), size=shape)
    outside = rng.integers(-2, d + 2, size=shape)
    return np.where(rng.random(shape) < 0.8, inside, outside).astype(np.int64)


def _gather(data: Data, subject: Subject) -> Case:
    dt = data.draw(G.dtypes(), label="dtype")
    shape = data.draw(G.shapes(min_rank=1, max_rank=3, max_side=5), label="x shape")
    axis = data.draw(st.integers(0, len(shape) - 1), label="axis")
    n = data.draw(G.around(0, 6, 3), label="positions")
    ishape = tuple(n if i == axis else d for i, d in enumerate(shape))
    index = operand_of(data, subject, D.int64, index_values(data, ishape, shape[axis]), label="index")
    x = operand(data, subject, dt, shape, label="x")
    return _finish(S.Gather(axis), [(index, index.to_numpy()), x])


def _range_gather(data: Data, subject: Subject) -> Case:
    dt = data.draw(G.dtypes(), label="dtype")
    shape = data.draw(G.shapes(min_rank=1, max_rank=3, max_side=5), label="x shape")
    axis = data.draw(st.integers(0, len(shape) - 1), label="axis")
    n = data.draw(G.around(0, 4, 2), label="starts")
    run = data.draw(G.around(0, 4, 2), label="run")
    sshape = tuple(n if i == axis else d for i, d in enumerate(shape))
    starts = operand_of(data, subject, D.int64, index_values(data, sshape, shape[axis], "starts"),
                        label="starts")
    x = operand(data, subject, dt, shape, label="x")
    return _finish(S.RangeGather(axis, run), [(starts, starts.to_numpy()), x])


def _scatter(data: Data, subject: Subject) -> Case:
    combine = data.draw(st.sampled_from(tuple(S.Combine)), label="combine")
    exclude = (D.bool_, D.bit) if combine is S.Combine.ADD else ()
    dt = data.draw(G.dtypes(exclude=exclude), label="dtype")
    shape = data.draw(G.shapes(min_rank=1, max_rank=3, max_side=5), label="into shape")
    axis = data.draw(st.integers(0, len(shape) - 1), label="axis")
    n = data.draw(G.around(0, 6, 3), label="updates")
    ushape = tuple(n if i == axis else d for i, d in enumerate(shape))
    unique = data.draw(st.booleans(), label="unique")
    idx = index_values(data, ushape, shape[axis])
    if unique:
        # Unique positions along the axis: a permutation's first n (or out of range).
        rng = np.random.default_rng(int(idx.sum()) & 0xFFFF)
        for pos in np.ndindex(*(d for i, d in enumerate(ushape) if i != axis)):
            perm = np.concatenate([rng.permutation(shape[axis]), shape[axis] + 1 + np.arange(n)])[:n]
            full = list(pos)
            full.insert(axis, slice(None))
            idx[tuple(full)] = perm
    index = operand_of(data, subject, D.int64, idx, label="index")
    into = operand(data, subject, dt, shape, label="into")
    updates = operand(data, subject, dt, ushape, label="updates")
    return _finish(S.Scatter(axis, combine, unique), [into, (index, index.to_numpy()), updates])


def _sort(data: Data, subject: Subject) -> Case:
    dt = data.draw(G.dtypes(), label="dtype")
    shape = data.draw(G.shapes(min_rank=1, max_rank=3, max_side=6), label="x shape")
    axis = data.draw(st.integers(0, len(shape) - 1), label="axis")
    k = data.draw(st.none() | st.integers(0, shape[axis]), label="k")
    x = operand(data, subject, dt, shape, label="x")
    return _finish(S.Sort(axis, data.draw(st.booleans(), label="descending"), k), [x])


def _numbering(data: Data, subject: Subject) -> Case:
    dt = data.draw(G.dtypes(), label="dtype")
    batch = data.draw(G.shapes(max_rank=2, max_side=3), label="batch")
    m = data.draw(G.around(0, 6, 3), label="keys")
    n = data.draw(G.around(0, 6, 3), label="x")
    seed = data.draw(st.integers(0, 2**32 - 1), label="keys seed")
    raw = G.values(dt, (*batch, m), data.draw(G.profiles(), label="keys profile"), seed)
    keys_sorted, _ = O.sort(raw, dt, len(batch), False, None)
    keys = operand_of(data, subject, dt, keys_sorted, label="keys")
    x = operand(data, subject, dt, (*batch, n), label="x")
    side = data.draw(st.sampled_from(tuple(S.Side)), label="side")
    return _finish(S.Numbering(side), [(keys, keys.to_numpy()), x])


def region(data: Data, shape: tuple[int, ...]) -> tuple[Range, ...]:
    """A region of ``shape``: one Range per axis inside it."""
    out = []
    for d in shape:
        if d == 0:
            out.append(Range(0, 0, 1))
            continue
        step = data.draw(st.sampled_from((1, 1, 2, -1)), label="region step")
        start = data.draw(st.integers(0, d - 1), label="region start")
        room = (d - 1 - start) // step + 1 if step > 0 else start // -step + 1
        out.append(Range(start, data.draw(st.integers(0, room), label="region count"), step))
    return tuple(out)


def _assemble(data: Data, subject: Subject) -> Case:
    dt = data.draw(G.dtypes(), label="dtype")
    shape = data.draw(G.shapes(max_rank=3, max_side=5), label="shape")
    regions = tuple(region(data, shape) for _ in range(data.draw(G.around(0, 3, 2), label="pieces")))
    sp = G.specials(dt)
    fill = fill_bits(dt, sp[data.draw(st.integers(0, len(sp) - 1), label="fill")])
    ops = [operand(data, subject, dt, tuple(r.count for r in reg), label=f"piece {i}")
           for i, reg in enumerate(regions)]
    spec = S.Assemble(shape, fill, regions)
    out = _shapes(spec, [a for a, _ in ops])
    return Case(spec, [(dt, out[0])], [a for a, _ in ops], [v for _, v in ops])


# --------------------------------------------------------------------------
# Contractions, transforms, routines, attention
# --------------------------------------------------------------------------

#: (acc, operand dtypes) a contraction is drawn with.
_ACCS: Final[tuple[Dtype, ...]] = (D.float32, D.float64, D.int32, D.int64, D.complex64, D.complex128)


def contract_operand_dtype(data: Data, acc: Dtype) -> Dtype:
    """An operand dtype that converts exactly into ``acc``."""
    if acc.is_int:
        pool = [D.int8, D.uint8, D.int16, acc]
    elif acc.is_complex:
        pool = [acc, D.float32] if acc is D.complex64 else [acc, D.float32, D.float64, D.complex64]
    else:
        pool = [D.float16, D.bfloat16, D.float32] + ([D.float64] if acc is D.float64 else [])
    return data.draw(st.sampled_from(pool), label="operand dtype")


@st.composite
def contraction(draw: st.DrawFn, max_side: int = 4, segments: bool = True
                ) -> tuple[S.Contract, tuple[int, ...], tuple[int, ...]]:
    """A contraction spec with a's and b's shapes: batch and contracting pairs
    on permuted axes, free axes on each side, sometimes segments."""
    nb = draw(st.integers(0, 1))
    nc = draw(G.around(0, 2, 1))
    fa = draw(G.around(0, 2, 1))
    fb = draw(G.around(0, 2, 1))
    batch_ext = [draw(st.integers(0, 3)) for _ in range(nb)]
    con_ext = [draw(G.around(0, max_side, 2)) for _ in range(nc)]
    a_free = [draw(st.integers(1, 3)) for _ in range(fa)]
    b_free = [draw(st.integers(1, 3)) for _ in range(fb)]
    a_roles = [("b", i) for i in range(nb)] + [("c", i) for i in range(nc)] + [("f", i) for i in range(fa)]
    b_roles = [("b", i) for i in range(nb)] + [("c", i) for i in range(nc)] + [("f", i) for i in range(fb)]
    a_roles = draw(st.permutations(a_roles))
    b_roles = draw(st.permutations(b_roles))

    def ext(role: tuple[str, int], free: list[int]) -> int:
        kind, i = role
        return batch_ext[i] if kind == "b" else con_ext[i] if kind == "c" else free[i]

    a_shape = tuple(ext(r, a_free) for r in a_roles)
    b_shape = tuple(ext(r, b_free) for r in b_roles)
    batch = tuple((a_roles.index(("b", i)), b_roles.index(("b", i))) for i in range(nb))
    con = tuple((a_roles.index(("c", i)), b_roles.index(("c", i))) for i in range(nc))
    acc = draw(st.sampled_from(_ACCS))
    seg: S.Rows | S.ContractingSegments | None = None
    if segments and draw(st.integers(0, 3)) == 0:
        if nc and draw(st.booleans()):
            seg = S.ContractingSegments(draw(st.integers(0, nc - 1)), draw(st.integers(0, 3)))
        elif fa and fb:
            seg = S.Rows(a_roles.index(("f", draw(st.integers(0, fa - 1)))),
                         b_roles.index(("f", draw(st.integers(0, fb - 1)))))
    init = draw(st.booleans())
    return S.Contract(batch, con, acc, init, (None, None), seg), a_shape, b_shape


def ids_values(data: Data, shape: tuple[int, ...], groups: int) -> Arr:
    """Segment ids in [−1, groups] (some in no group)."""
    seed = data.draw(st.integers(0, 2**32 - 1), label="ids seed")
    return np.random.default_rng(seed).integers(-1, groups + 1, size=shape).astype(np.int64)


def _contract(data: Data, subject: Subject) -> Case:
    spec, a_shape, b_shape = data.draw(contraction(), label="contraction")
    acc = spec.acc
    a_dt, b_dt = contract_operand_dtype(data, acc), contract_operand_dtype(data, acc)
    profiles = ("moderate", "ints", "mixed") if acc.is_float or acc.is_complex else G.PROFILES
    ops = [operand(data, subject, a_dt, a_shape, profiles=profiles, label="a"),
           operand(data, subject, b_dt, b_shape, profiles=profiles, label="b")]
    shapes = SH.contract(S.Contract(spec.batch, spec.contracting, acc, False, (None, None),
                                    spec.segments),
                         [a_shape, b_shape] + ([_ids_shape(spec, a_shape)] if spec.segments else []))
    assume(not isinstance(shapes, SH.Error))
    assert not isinstance(shapes, SH.Error)
    out = shapes[0]
    dst = acc
    if spec.init:
        ops.append(operand(data, subject, acc, out, profiles=profiles, label="init"))
    if spec.segments is not None:
        g = (spec.segments.groups if isinstance(spec.segments, S.ContractingSegments)
             else b_shape[spec.segments.b_axis])
        ids = ids_values(data, _ids_shape(spec, a_shape), g)
        arr = operand_of(data, subject, D.int64, ids, label="ids")
        ops.append((arr, arr.to_numpy()))
    return _finish(spec, ops, [dst])


def _ids_shape(spec: S.Contract, a_shape: tuple[int, ...]) -> tuple[int, ...]:
    batch = tuple(a_shape[i] for i, _ in spec.batch)
    seg = spec.segments
    if isinstance(seg, S.Rows):
        return (*batch, a_shape[seg.a_axis])
    assert isinstance(seg, S.ContractingSegments)
    return (*batch, a_shape[spec.contracting[seg.pair][0]])


def _fft(data: Data, subject: Subject) -> Case:
    kind_name = data.draw(st.sampled_from(["c2c", "r2c", "c2r"]), label="kind")
    rank = data.draw(st.integers(1, 3), label="rank")
    shape = list(data.draw(G.shapes(min_rank=rank, max_rank=rank, max_side=6), label="shape"))
    axes = tuple(sorted(data.draw(st.permutations(range(rank)), label="axes")[
        : data.draw(st.integers(1, rank), label="n axes")]))
    direction = data.draw(st.sampled_from(tuple(S.Direction)), label="direction")
    kind: S.C2c | S.R2c | S.C2r
    if kind_name == "c2c":
        dt = data.draw(st.sampled_from((D.complex64, D.complex128)), label="dtype")
        kind = S.C2c()
    elif kind_name == "r2c":
        dt = data.draw(st.sampled_from((D.float32, D.float64)), label="dtype")
        kind = S.R2c()
    else:
        dt = data.draw(st.sampled_from((D.complex64, D.complex128)), label="dtype")
        n = data.draw(G.around(0, 7, 4), label="points")
        kind = S.C2r(n)
        shape[axes[-1]] = n // 2 + 1
    x = operand(data, subject, dt, tuple(shape), profiles=("moderate", "ints"), label="x")
    return _finish(S.Fft(axes, direction, kind), [x])


ROUTINES: Final[tuple[str, ...]] = ("cholesky", "lu", "qr", "svd", "eigh", "eig", "solve_triangular")


def routine_spec(data: Data, kernel: str) -> Any:
    """A spec of routine ``kernel`` with drawn options."""
    if kernel == "cholesky":
        return S.Cholesky(data.draw(st.booleans(), label="upper"))
    if kernel == "lu":
        return S.Lu()
    if kernel == "qr":
        return S.Qr(data.draw(st.booleans(), label="complete"))
    if kernel == "svd":
        return S.Svd(data.draw(st.sampled_from((None, S.Factors.REDUCED, S.Factors.COMPLETE)),
                               label="vectors"))
    if kernel == "eigh":
        return S.Eigh(data.draw(st.booleans(), label="vectors"))
    if kernel == "eig":
        return S.Eig(data.draw(st.booleans(), label="vectors"))
    return S.SolveTriangular(data.draw(st.booleans(), label="lower"),
                             data.draw(st.booleans(), label="transpose"),
                             data.draw(st.booleans(), label="unit diagonal"))


def matrices(data: Data, kernel: str, dt: Dtype, lead: tuple[int, ...], m: int, n: int) -> Arr:
    """Well-conditioned matrices for ``kernel``: Hermitian positive definite for
    cholesky, Hermitian for eigh, diagonally dominant triangles for
    solve_triangular, random otherwise; as host elements of ``dt``."""
    seed = data.draw(st.integers(0, 2**32 - 1), label="matrix seed")
    rng = np.random.default_rng(seed)
    shape = (*lead, m, n)
    a = rng.uniform(-1, 1, shape)
    if dt.is_complex:
        a = a + 1j * rng.uniform(-1, 1, shape)
    if kernel == "cholesky":
        a = a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n)
    elif kernel == "eigh":
        a = (a + np.conj(np.swapaxes(a, -1, -2))) / 2
    elif kernel == "solve_triangular":
        a = a + (n + 1) * np.eye(n)
    return a.astype(dt.numpy_dtype)


def _routine(kernel: str) -> Any:
    def draw(data: Data, subject: Subject) -> Case:
        spec = routine_spec(data, kernel)
        dt = data.draw(st.sampled_from((D.float32, D.float64, D.complex64, D.complex128)),
                       label="dtype")
        lead = data.draw(G.shapes(max_rank=1, max_side=2), label="batch")
        m = data.draw(G.around(0, 4, 3), label="m")
        square = kernel in ("cholesky", "eigh", "eig", "solve_triangular")
        n = m if square else data.draw(G.around(0, 4, 2), label="n")
        a = operand_of(data, subject, dt, matrices(data, kernel, dt, lead, m, n), label="a")
        ops = [(a, a.to_numpy())]
        if kernel == "solve_triangular":
            k = data.draw(G.around(0, 3, 2), label="columns")
            bv = operand(data, subject, dt, (*lead, m, k), profiles=("moderate",), label="b")
            ops.append(bv)
        return _finish(spec, ops)

    return draw


def visibility_program(data: Data, acc: Dtype, n_loads: int) -> Prog:
    """An attention program: output 0 (bool) is true, causal (key ≤ query) or
    a load's mask; output 1 is the score, plus a bias load where there is one."""
    ins = [acc] + ([D.bool_, acc] if n_loads else [])
    b = Prog.build(ins)
    score = b.ins[0]
    how = data.draw(st.sampled_from(["all", "causal", "mask"] if n_loads else ["all", "causal"]),
                    label="visibility")
    if how == "causal":
        vis = b.less_equal(b.coord(0), b.coord(1))
    elif how == "mask":
        vis = b.copy(b.ins[1])
    else:
        vis = b.equal(b.coord(0), b.coord(0))
    logit = score + b.ins[2] if n_loads else b.copy(score)
    return b.finish(vis, logit)


def _attention(data: Data, subject: Subject) -> Case:
    acc = data.draw(st.sampled_from((D.float32, D.float64)), label="acc")
    qdt = data.draw(st.sampled_from((D.float32, D.float16, D.bfloat16, D.float64)), label="q dtype")
    lead = data.draw(G.shapes(max_rank=1, max_side=2), label="lead")
    hk = data.draw(st.integers(1, 2), label="key heads")
    hq = hk * data.draw(st.integers(1, 2), label="group")
    tq = data.draw(G.around(0, 4, 2), label="tq")
    dk = data.draw(G.around(0, 4, 2), label="dk")
    dv = data.draw(G.around(0, 3, 2), label="dv")
    paged = data.draw(st.booleans(), label="paged")
    lengths = data.draw(st.booleans(), label="lengths")
    n_loads = data.draw(st.integers(0, 1), label="loads")
    prog = visibility_program(data, acc, n_loads)
    moderate = ("moderate",)
    ops = [operand(data, subject, qdt, (*lead, hq, tq, dk), profiles=moderate, label="q")]
    if paged:
        page = data.draw(st.integers(1, 3), label="page")
        pages = data.draw(st.integers(1, 3), label="pages")
        max_pages = data.draw(G.around(0, 3, 2), label="max pages")
        kv: S.Dense | S.Paged = S.Paged(page)
        ops.append(operand(data, subject, qdt, (pages, hk, page, dk), profiles=moderate, label="k"))
        ops.append(operand(data, subject, qdt, (pages, hk, page, dv), profiles=moderate, label="v"))
        seed = data.draw(st.integers(0, 2**32 - 1), label="table seed")
        table = np.random.default_rng(seed).integers(-1, pages + 1, (*lead, max_pages)).astype(np.int64)
        t = operand_of(data, subject, D.int64, table, label="table")
        ops.append((t, t.to_numpy()))
        tk = max_pages * page
    else:
        kv = S.Dense()
        tk = data.draw(G.around(0, 4, 3), label="tk")
        ops.append(operand(data, subject, qdt, (*lead, hk, tk, dk), profiles=moderate, label="k"))
        ops.append(operand(data, subject, qdt, (*lead, hk, tk, dv), profiles=moderate, label="v"))
    if lengths:
        seed = data.draw(st.integers(0, 2**32 - 1), label="lengths seed")
        ln = np.random.default_rng(seed).integers(0, tk + 2, lead).astype(np.int64)
        arr = contiguous(subject, D.int64, ln)
        ops.append((arr, ln))
    loads: tuple[S.Load, ...] = ()
    if n_loads:
        loop = (*lead, hq, tq, tk)
        ops.append(operand(data, subject, D.bool_, loop, profiles=("ints",), label="mask"))
        ops.append(operand(data, subject, acc, loop, profiles=("moderate",), label="bias"))
        loads = (S.PLAIN, S.PLAIN)
    scale = data.draw(st.sampled_from((1.0, 0.5, 0.125)), label="scale")
    spec = S.Attention(prog, loads, scale, acc, kv, lengths)
    return _finish(spec, ops, [qdt, acc])


_DRAW: Final[dict[str, Any]] = {
    "map": _map, "reduce": _reduce, "scan": _scan, "fold": _fold, "gather": _gather,
    "range_gather": _range_gather, "scatter": _scatter, "sort": _sort, "numbering": _numbering,
    "assemble": _assemble, "contract": _contract, "fft": _fft, "attention": _attention,
    **{k: _routine(k) for k in ROUTINES},
}


def draw_case(data: Data, subject: Subject, kernel: str) -> Case:
    """A call of ``kernel`` that fits (see the module's doc)."""
    case: Case = _DRAW[kernel](data, subject)
    return case

"""The shapes of every kernel's destinations, and the refusal rules of loops.

``Shape``: one function per kernel, named as the kernel, takes the kernel's
spec and its operands' shapes, in the order the spec's class documents, and
gives its destinations' shapes in order, or ``Error(reason)`` where the
operands' shapes or the attributes do not fit. The functions read shapes
alone: dtypes are the refusal rules' and the caller's. A shape of rank above
``MAX_RANK`` (32) or of more than ``MAX_NUMEL`` (2**62) elements, operand or
destination, is an Error; so is a wrong number of operand shapes. nx answers
``SHAPE_MISMATCH`` for an Error.

The refusal rules ``map_refusal``, ``reduce_refusal``, ``scan_refusal`` and
``attention_refusal`` read the program, the loop's rank and the dtypes of a
call (no shape but the rank) and give ``(answer, why)`` for the first misfit
or None. They check in this order: counts (``BAD_ARITY``), then dtypes
(``WRONG_DTYPE``), then the rank (``SHAPE_MISMATCH``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, ParamSpec, TypeVar, final

from . import dtype as D
from . import spec as S
from .answer import Answer
from .dtype import Dtype
from .layout import MAX_RANK
from .prog import MAX_OPERANDS, Binary, accepts

if TYPE_CHECKING:
    from .prog import Prog

__all__ = [
    "MAX_NUMEL",
    "Error",
    "Refusal",
    "assemble",
    "attention",
    "attention_refusal",
    "carry",
    "cholesky",
    "contract",
    "contract_refusal",
    "eig",
    "eigh",
    "fft",
    "fold",
    "fold_refusal",
    "gather",
    "lu",
    "map",
    "map_refusal",
    "numbering",
    "padded",
    "qr",
    "range_gather",
    "reduce",
    "reduce_refusal",
    "scan",
    "scan_refusal",
    "scatter",
    "solve_triangular",
    "sort",
    "svd",
]

#: The most elements a shape may have.
MAX_NUMEL: Final = 2**62

Shape = tuple[int, ...]
Shapes = tuple[Shape, ...]
#: A refusal rule's answer: the refusal and what does not fit, in words.
Refusal = tuple[Answer, str]

_P = ParamSpec("_P")
_T = TypeVar("_T")


@final
@dataclass(frozen=True, slots=True)
class Error:
    """Shapes or attributes that do not fit a kernel: ``reason`` in words."""

    reason: str


class _Misfit(Exception):
    """Raised inside this module; the public functions answer it as ``Error``."""


def _answers(f: Callable[_P, _T]) -> Callable[_P, _T | Error]:
    @functools.wraps(f)
    def wrapped(*args: _P.args, **kwargs: _P.kwargs) -> _T | Error:
        try:
            return f(*args, **kwargs)
        except _Misfit as e:
            return Error(str(e))

    return wrapped


def _fits(what: str, shape: Shape) -> Shape:
    """``shape`` where its rank is at most ``MAX_RANK`` and it has at most
    ``MAX_NUMEL`` elements."""
    if len(shape) > MAX_RANK:
        raise _Misfit(f"{what} {list(shape)} has rank {len(shape)}, above {MAX_RANK}")
    if math.prod(shape) > MAX_NUMEL:
        raise _Misfit(f"{what} {list(shape)} has more than 2**62 elements")
    return shape


def _operands(names: Sequence[str], shapes: Sequence[Sequence[int]]) -> list[Shape]:
    """The operand shapes as tuples, one per name, each a valid shape."""
    if len(shapes) != len(names):
        raise _Misfit(f"takes {len(names)} operands ({', '.join(names) or 'none'}), "
                      f"got {len(shapes)}")
    out = []
    for name, s in zip(names, shapes, strict=True):
        t = tuple(int(d) for d in s)
        if any(d < 0 for d in t):
            raise _Misfit(f"{name} {list(t)} has a negative extent")
        out.append(_fits(name, t))
    return out


def _results(*shapes: Shape) -> Shapes:
    return tuple(_fits(f"result {i}", s) for i, s in enumerate(shapes))


def _axis(what: str, axis: int, rank: int) -> None:
    if not 0 <= axis < rank:
        raise _Misfit(f"{what} {axis} is not an axis of rank {rank}")


def _set_at(shape: Shape, axis: int, extent: int) -> Shape:
    return (*shape[:axis], extent, *shape[axis + 1:])


def _same_but(what: str, a_name: str, a: Shape, b_name: str, b: Shape, axis: int) -> None:
    """``a`` and ``b`` of one rank, with one extent along every axis but ``axis``."""
    if len(a) != len(b) or any(x != y for i, (x, y) in enumerate(zip(a, b, strict=True))
                                if i != axis):
        raise _Misfit(f"{a_name} {list(a)} must have {b_name}'s rank and extents {list(b)} "
                      f"but along {what} {axis}")


# --------------------------------------------------------------------------
# Loads and loops
# --------------------------------------------------------------------------


def _padded(shape: Shape, pad: S.Pad) -> Shape:
    if len(shape) != pad.rank:
        raise _Misfit(f"a pad of rank {pad.rank} for an operand of shape {list(shape)}")
    ext = []
    for i, (d, lo, hi, interior) in enumerate(zip(shape, pad.lo, pad.hi, pad.interior,
                                                  strict=True)):
        e = lo + d + hi + interior * max(d - 1, 0)
        if e < 0:
            raise _Misfit(f"axis {i} of extent {d} padded by lo {lo}, hi {hi}, interior "
                          f"{interior} has {e} elements")
        ext.append(e)
    out, taps = list(ext), []
    for w in pad.windows:
        reach = w.dilation * (w.size - 1)
        if reach > ext[w.axis] - 1:
            raise _Misfit(f"window {w} reaches {reach + 1} elements, past padded axis "
                          f"{w.axis}'s {ext[w.axis]}")
        out[w.axis] = (ext[w.axis] - 1 - reach) // w.step + 1
        taps.append(w.size)
    return _fits("the padded operand", (*out, *taps))


@_answers
def padded(shape: Sequence[int], pad: S.Pad) -> Shape:
    """The shape a load by ``pad`` reads from an operand of ``shape``: along axis
    ``i`` the padded extent ``lo + d + hi + interior·max(d − 1, 0)`` (a
    negative lo or hi crops; below 0 is an Error), then each window's axis
    becomes its count ``(e − 1 − dilation·(size − 1)) // step + 1`` (a window
    reaching past the padded extent is an Error) and one axis of ``size`` per
    window is appended, in order. ``shape`` must have the pad's rank."""
    (s,) = _operands(["the operand"], [shape])
    return _padded(s, pad)


def _loaded(shape: Shape, load: S.Load) -> Shape:
    return _padded(shape, load.pad) if isinstance(load, S.Padded) else shape


def _loop(loads: Sequence[S.Load], shapes: Sequence[Shape]) -> Shape:
    """The loop's shape: every load's loaded shape, all equal; at least one."""
    if not loads:
        raise _Misfit("a loop with no load has no shape")
    loaded = [_loaded(s, load) for s, load in zip(shapes, loads, strict=True)]
    for i, s in enumerate(loaded[1:], start=1):
        if s != loaded[0]:
            raise _Misfit(f"load {i} reads {list(s)}, load 0 reads {list(loaded[0])}")
    return loaded[0]


def _load_names(n: int, first: int = 0) -> list[str]:
    return [f"load {i}" for i in range(first, first + n)]


@_answers
def map(spec: S.Map, shapes: Sequence[Sequence[int]]) -> Shapes:
    """Map's destinations, one per program output: the loop's shape, that every
    load reads (``padded`` for a Padded one) alike. Operands: one per load; a
    map with no load is an Error."""
    ops = _operands(_load_names(len(spec.loads)), shapes)
    loop = _loop(spec.loads, ops)
    return _results(*(loop for _ in range(spec.prog.n_outs)))


@_answers
def reduce(spec: S.Reduce, shapes: Sequence[Sequence[int]]) -> Shapes:
    """Reduce's destinations, each the loop's shape without ``axes`` (every axis
    below the loop's rank), one per result (two for Moments and Arg). A Max,
    Min or Arg with a result and no term (a reduced axis of extent 0) is an
    Error."""
    ops = _operands(_load_names(len(spec.loads)), shapes)
    loop = _loop(spec.loads, ops)
    for a in spec.axes:
        _axis("reduced axis", a, len(loop))
    out = tuple(d for i, d in enumerate(loop) if i not in spec.axes)
    terms = math.prod(loop[a] for a in spec.axes)
    for r, _, _ in spec.reductions:
        if terms == 0 and math.prod(out) > 0 and (isinstance(r, S.Arg)
                                                 or r in (S.Monoid.MAX, S.Monoid.MIN)):
            raise _Misfit(f"{r} over axes {list(spec.axes)} of {list(loop)} has no term")
    return _results(*(out for _ in range(spec.n_results())))


def _carry(spec: S.Scan, loop: Shape) -> Shape:
    _axis("the scanned axis", spec.axis, len(loop))
    if isinstance(spec.reduction, S.Arg):
        raise _Misfit("an Arg scan takes no carry")
    rest = loop[:spec.axis] + loop[spec.axis + 1:]
    return (*rest, 3) if isinstance(spec.reduction, S.Moments) else rest


@_answers
def carry(spec: S.Scan, loop: Sequence[int]) -> Shape:
    """The shape of a scan's carry on a loop of shape ``loop``: the loop's
    without the scanned axis, with a last axis of 3 for Moments (count, mean,
    variance); an Arg scan takes none (Error)."""
    (s,) = _operands(["the loop"], [loop])
    return _carry(spec, s)


@_answers
def scan(spec: S.Scan, shapes: Sequence[Sequence[int]]) -> Shapes:
    """Scan's destinations, each the loop's shape, one per result (two for
    Moments and Arg). Operands: the carry where ``spec.carry``, of the shape
    ``carry`` gives, then one per load. The scanned axis is below the loop's
    rank."""
    names = ["the carry"] * spec.carry + _load_names(len(spec.loads))
    ops = _operands(names, shapes)
    loop = _loop(spec.loads, ops[spec.carry:])
    _axis("the scanned axis", spec.axis, len(loop))
    if spec.carry:
        want = _carry(spec, loop)
        if ops[0] != want:
            raise _Misfit(f"the carry {list(ops[0])} must be {list(want)} for a loop of "
                          f"{list(loop)}")
    return _results(*(loop for _ in range(spec.n_results())))


# --------------------------------------------------------------------------
# Moves and folds
# --------------------------------------------------------------------------


@_answers
def fold(spec: S.Fold, shapes: Sequence[Sequence[int]]) -> Shapes:
    """Fold's destination: ``spec.shape``; x must have the shape a load by
    ``spec.pad`` reads from it (``padded``)."""
    (x,) = _operands(["x"], shapes)
    want = _padded(spec.shape, spec.pad)
    if x != want:
        raise _Misfit(f"x {list(x)} must be {list(want)}, the padded {list(spec.shape)}")
    return _results(spec.shape)


def fold_refusal(x: Dtype, dst: Dtype) -> Refusal | None:
    """Whether a fold of x into dst does not fit its dtypes: WRONG_DTYPE for a
    dst not of x's dtype, or a dtype Prog's Add does not take (bool, bit),
    since fold adds (upstream §2: 'A dtype Prog.Add does not take answers
    Wrong_dtype'); else None."""
    if dst is not x:
        return Answer.WRONG_DTYPE, f"dst is {dst.name}, x {x.name}: fold keeps x's dtype"
    if not accepts(Binary.ADD, x):
        return Answer.WRONG_DTYPE, f"fold adds by Prog's Add, which does not take {x.name}"
    return None


@_answers
def gather(spec: S.Gather, shapes: Sequence[Sequence[int]]) -> Shapes:
    """Gather's destination: index's shape. Operands: index, x; index has x's
    rank and extents but along ``axis``, an axis of both."""
    index, x = _operands(["index", "x"], shapes)
    _axis("axis", spec.axis, len(x))
    _same_but("axis", "index", index, "x", x, spec.axis)
    return _results(index)


@_answers
def range_gather(spec: S.RangeGather, shapes: Sequence[Sequence[int]]) -> Shapes:
    """Range gather's destination: starts' shape with an axis of ``run``
    inserted after ``axis``. Operands: starts, x; starts has x's rank and
    extents but along ``axis``, an axis of both."""
    starts, x = _operands(["starts", "x"], shapes)
    _axis("axis", spec.axis, len(x))
    _same_but("axis", "starts", starts, "x", x, spec.axis)
    return _results((*starts[:spec.axis + 1], spec.run, *starts[spec.axis + 1:]))


@_answers
def scatter(spec: S.Scatter, shapes: Sequence[Sequence[int]]) -> Shapes:
    """Scatter's destination: into's shape. Operands: into, index, updates;
    index and updates have one shape, of into's rank and extents but along
    ``axis``, an axis of into."""
    into, index, updates = _operands(["into", "index", "updates"], shapes)
    _axis("axis", spec.axis, len(into))
    if index != updates:
        raise _Misfit(f"index {list(index)} and updates {list(updates)} differ")
    _same_but("axis", "index", index, "into", into, spec.axis)
    return _results(into)


@_answers
def sort(spec: S.Sort, shapes: Sequence[Sequence[int]]) -> Shapes:
    """Sort's destinations, values and positions: x's shape with ``k`` along
    ``axis`` (x's extent where k is None; a k above it is an Error)."""
    (x,) = _operands(["x"], shapes)
    _axis("axis", spec.axis, len(x))
    k = x[spec.axis] if spec.k is None else spec.k
    if k > x[spec.axis]:
        raise _Misfit(f"k = {k} is above axis {spec.axis}'s extent {x[spec.axis]}")
    out = _set_at(x, spec.axis, k)
    return _results(out, out)


@_answers
def numbering(spec: S.Numbering, shapes: Sequence[Sequence[int]]) -> Shapes:
    """Numbering's destination: x's shape. Operands: keys ``[b…; m]``, x
    ``[b…; n]``, of one rank of at least 1 and the same batch extents."""
    keys, x = _operands(["keys", "x"], shapes)
    if not keys or not x or len(keys) != len(x) or keys[:-1] != x[:-1]:
        raise _Misfit(f"keys {list(keys)} and x {list(x)} must be [b…; m] and [b…; n]")
    return _results(x)


@_answers
def assemble(spec: S.Assemble, shapes: Sequence[Sequence[int]]) -> Shapes:
    """Assemble's destination: ``spec.shape``. Operands: one piece per region,
    of the region's counts."""
    pieces = _operands([f"piece {i}" for i in range(len(spec.regions))], shapes)
    for i, (p, region) in enumerate(zip(pieces, spec.regions, strict=True)):
        want = tuple(r.count for r in region)
        if p != want:
            raise _Misfit(f"piece {i} {list(p)} must be its region's {list(want)}")
    return _results(spec.shape)


# --------------------------------------------------------------------------
# Contractions and transforms
# --------------------------------------------------------------------------


def _scale(name: str, scale: Shape, operand: Shape) -> None:
    """A block scale: the operand's rank, each extent dividing the operand's,
    0 only along an empty axis."""
    if len(scale) != len(operand) or any(
        (s == 0 and d != 0) or (s != 0 and d % s != 0)
        for s, d in zip(scale, operand, strict=True)
    ):
        raise _Misfit(f"{name} {list(scale)} must have the operand's rank and extents "
                      f"dividing {list(operand)}")


@_answers
def contract(spec: S.Contract, shapes: Sequence[Sequence[int]]) -> Shapes:
    """Contract's destination: the batch pairs' extents in order, then a's free
    axes, then b's. With ``Rows(a_axis, b_axis)``, b's free axis ``b_axis``
    leaves the result; with ``ContractingSegments(pair, groups)``, a leading
    axis of ``groups`` comes first.

    Operands: a, b, [init], [a's scale], [b's scale], [ids]. Each pair names an
    axis of each operand, of one extent; init has the result's shape; a scale
    has its operand's rank, each extent dividing the operand's (0 only along an
    empty axis); ids is the batch extents then the segmented axis's (Rows: a's
    ``a_axis``; Contracting: the pair's)."""
    names = ["a", "b"] + ["init"] * spec.init
    names += [f"{n}'s scale" for n, s in zip("ab", spec.scales, strict=True) if s is not None]
    names += ["ids"] * (spec.segments is not None)
    ops = _operands(names, shapes)
    a, b = ops[0], ops[1]
    for kind, pairs in (("batch", spec.batch), ("contracting", spec.contracting)):
        for i, j in pairs:
            if not (i < len(a) and j < len(b) and a[i] == b[j]):
                raise _Misfit(f"{kind} pair ({i}, {j}) must name axes of a {list(a)} and "
                              f"b {list(b)} of one extent")
    paired_a = {i for i, _ in spec.batch + spec.contracting}
    paired_b = {j for _, j in spec.batch + spec.contracting}
    batch = tuple(a[i] for i, _ in spec.batch)
    a_free = tuple(d for i, d in enumerate(a) if i not in paired_a)
    b_free = [j for j in range(len(b)) if j not in paired_b]
    seg = spec.segments
    if isinstance(seg, S.Rows):
        _axis("Rows' a_axis", seg.a_axis, len(a))
        _axis("Rows' b_axis", seg.b_axis, len(b))
        out = (*batch, *a_free, *(b[j] for j in b_free if j != seg.b_axis))
        ids = (*batch, a[seg.a_axis])
    elif isinstance(seg, S.ContractingSegments):
        out = (seg.groups, *batch, *a_free, *(b[j] for j in b_free))
        ids = (*batch, a[spec.contracting[seg.pair][0]])
    else:
        out = (*batch, *a_free, *(b[j] for j in b_free))
    out = _fits("the result", out)
    rest = iter(ops[2:])
    if spec.init:
        init = next(rest)
        if init != out:
            raise _Misfit(f"init {list(init)} must be the result's {list(out)}")
    for side, operand, scale in (("a", a, spec.scales[0]), ("b", b, spec.scales[1])):
        if scale is not None:
            _scale(f"{side}'s scale", next(rest), operand)
    if seg is not None:
        got = next(rest)
        if got != ids:
            raise _Misfit(f"ids {list(got)} must be {list(ids)}")
    return _results(out)


@_answers
def fft(spec: S.Fft, shapes: Sequence[Sequence[int]]) -> Shapes:
    """Fft's destination: x's shape for C2c; for R2c the last listed axis of n
    points becomes n // 2 + 1 bins; for C2r(n) that axis, of n // 2 + 1 bins,
    becomes n points. Every listed axis is an axis of x."""
    (x,) = _operands(["x"], shapes)
    for a in spec.axes:
        _axis("transformed axis", a, len(x))
    last = spec.axes[-1]
    kind = spec.kind
    if isinstance(kind, S.R2c):
        return _results(_set_at(x, last, x[last] // 2 + 1))
    if isinstance(kind, S.C2r):
        if x[last] != kind.n // 2 + 1:
            raise _Misfit(f"C2r of {kind.n} points reads {kind.n // 2 + 1} bins along axis "
                          f"{last}, x has {x[last]}")
        return _results(_set_at(x, last, kind.n))
    return _results(x)


# --------------------------------------------------------------------------
# Matrix routines
# --------------------------------------------------------------------------


def _matrices(shapes: Sequence[Sequence[int]], square: bool) -> tuple[Shape, int, int]:
    """a's leading axes, m and n: a has rank 2 or more (and m = n if square)."""
    (a,) = _operands(["a"], shapes)
    if len(a) < 2 or (square and a[-1] != a[-2]):
        raise _Misfit(f"a {list(a)} must be [..., m, n]{' with m = n' if square else ''}")
    return a[:-2], a[-2], a[-1]


@_answers
def cholesky(spec: S.Cholesky, shapes: Sequence[Sequence[int]]) -> Shapes:
    """Cholesky's factor: a's shape, a ``[..., n, n]``."""
    lead, n, _ = _matrices(shapes, square=True)
    return _results((*lead, n, n))


@_answers
def lu(spec: S.Lu, shapes: Sequence[Sequence[int]]) -> Shapes:
    """Lu's lu ``[..., m, n]``, pivots ``[..., k]`` and perm ``[..., m]``, a
    ``[..., m, n]`` and k = min(m, n)."""
    lead, m, n = _matrices(shapes, square=False)
    return _results((*lead, m, n), (*lead, min(m, n)), (*lead, m))


@_answers
def qr(spec: S.Qr, shapes: Sequence[Sequence[int]]) -> Shapes:
    """Qr's q and r for a ``[..., m, n]``, k = min(m, n): reduced q
    ``[..., m, k]``, r ``[..., k, n]``; complete q ``[..., m, m]``, r
    ``[..., m, n]``."""
    lead, m, n = _matrices(shapes, square=False)
    k = m if spec.complete else min(m, n)
    return _results((*lead, m, k), (*lead, k, n))


@_answers
def svd(spec: S.Svd, shapes: Sequence[Sequence[int]]) -> Shapes:
    """Svd's results for a ``[..., m, n]``, k = min(m, n): s ``[..., k]`` alone
    without vectors; reduced u ``[..., m, k]``, s, vh ``[..., k, n]``; complete
    u ``[..., m, m]``, s, vh ``[..., n, n]``."""
    lead, m, n = _matrices(shapes, square=False)
    k = min(m, n)
    s = (*lead, k)
    if spec.vectors is None:
        return _results(s)
    if spec.vectors is S.Factors.COMPLETE:
        return _results((*lead, m, m), s, (*lead, n, n))
    return _results((*lead, m, k), s, (*lead, k, n))


@_answers
def eigh(spec: S.Eigh, shapes: Sequence[Sequence[int]]) -> Shapes:
    """Eigh's w ``[..., n]`` then, with vectors, v ``[..., n, n]``, for a
    ``[..., n, n]``."""
    lead, n, _ = _matrices(shapes, square=True)
    w = (*lead, n)
    return _results(w, (*lead, n, n)) if spec.vectors else _results(w)


@_answers
def eig(spec: S.Eig, shapes: Sequence[Sequence[int]]) -> Shapes:
    """Eig's w ``[..., n]`` then, with vectors, v ``[..., n, n]`` (both complex),
    for a ``[..., n, n]``."""
    lead, n, _ = _matrices(shapes, square=True)
    w = (*lead, n)
    return _results(w, (*lead, n, n)) if spec.vectors else _results(w)


@_answers
def solve_triangular(spec: S.SolveTriangular, shapes: Sequence[Sequence[int]]) -> Shapes:
    """Solve_triangular's x: b's shape. Operands: a ``[..., n, n]``, b
    ``[..., n, k]`` of a's rank and leading extents."""
    a, b = _operands(["a", "b"], shapes)
    if len(a) < 2 or a[-1] != a[-2] or len(b) != len(a) or b[:-1] != a[:-1]:
        raise _Misfit(f"a {list(a)} and b {list(b)} must be [..., n, n] and [..., n, k]")
    return _results(b)


# --------------------------------------------------------------------------
# Attention
# --------------------------------------------------------------------------


@_answers
def attention(spec: S.Attention, shapes: Sequence[Sequence[int]]) -> Shapes:
    """Attention's o ``[lead…; hq; tq; dv]`` and lse ``[lead…; hq; tq]``.

    Operands: q ``[lead…; hq; tq; dk]``; Dense: k ``[lead…; hk; tk; dk]``, v
    ``[lead…; hk; tk; dv]``; Paged: k ``[pages; hk; page; dk]``, v ``[pages;
    hk; page; dv]`` (``page`` the spec's), table ``[lead…; max_pages]``, tk =
    max_pages·page; then lengths ``[lead…]`` where ``spec.lengths``; then one
    per load, each reading the loop's shape ``[lead…; hq; tq; tk]``. hk
    divides hq (0 divides only 0)."""
    paged = isinstance(spec.kv, S.Paged)
    kv_names = ["q", "k", "v"] + ["table"] * paged
    names = kv_names + ["lengths"] * spec.lengths + _load_names(len(spec.loads))
    ops = _operands(names, shapes)
    q, k, v = ops[0], ops[1], ops[2]
    if len(q) < 3:
        raise _Misfit(f"q {list(q)} must be [lead…; hq; tq; dk]")
    lead, (hq, tq, dk) = q[:-3], q[-3:]
    if isinstance(spec.kv, S.Paged):
        table = ops[3]
        if len(k) != 4 or k[2] != spec.kv.page or k[3] != dk:
            raise _Misfit(f"k {list(k)} must be [pages; hk; {spec.kv.page}; {dk}]")
        if len(v) != 4 or v[:3] != k[:3]:
            raise _Misfit(f"v {list(v)} must be [{k[0]}; {k[1]}; {k[2]}; dv]")
        if len(table) != len(lead) + 1 or table[:-1] != lead:
            raise _Misfit(f"table {list(table)} must be the lead extents {list(lead)} "
                          "then max_pages")
        hk, tk = k[1], table[-1] * spec.kv.page
    else:
        if len(k) != len(q) or k[:-3] != lead or k[-1] != dk:
            raise _Misfit(f"k {list(k)} must be [lead…; hk; tk; {dk}], lead {list(lead)}")
        if len(v) != len(k) or v[:-1] != k[:-1]:
            raise _Misfit(f"v {list(v)} must be k's {list(k[:-1])} then dv")
        hk, tk = k[-3], k[-2]
    if not (hq % hk == 0 if hk else hq == 0):
        raise _Misfit(f"{hk} key heads do not divide {hq} query heads")
    rest = ops[len(kv_names):]
    if spec.lengths:
        if rest[0] != lead:
            raise _Misfit(f"lengths {list(rest[0])} must be the lead extents {list(lead)}")
        rest = rest[1:]
    loop = _fits("the loop", (*lead, hq, tq, tk))
    for i, (s, load) in enumerate(zip(rest, spec.loads, strict=True)):
        got = _loaded(s, load)
        if got != loop:
            raise _Misfit(f"load {i} reads {list(got)}, the loop is {list(loop)}")
    return _results((*lead, hq, tq, v[-1]), (*lead, hq, tq))


# --------------------------------------------------------------------------
# Refusal rules
# --------------------------------------------------------------------------


def _count(what: str, got: int, want: int) -> Refusal | None:
    if got != want:
        return Answer.BAD_ARITY, f"{got} {what} where the program takes {want}"
    return None


def _too_many(n: int) -> Refusal | None:
    if n > MAX_OPERANDS:
        return Answer.BAD_ARITY, f"{n} operands and destinations, above {MAX_OPERANDS}"
    return None


def _loads_arity(prog: Prog, loads: Sequence[Dtype], load_specs: Sequence[S.Load],
                 first: int) -> Refusal | None:
    """Loads one per program input from ``first``, and one spec per load."""
    return (_count("loads", len(loads), prog.n_ins - first)
            or (None if len(load_specs) == len(loads) else
                (Answer.BAD_ARITY, f"{len(load_specs)} load specs for {len(loads)} loads")))


def _loop_arity(prog: Prog, loads: Sequence[Dtype], load_specs: Sequence[S.Load]
                ) -> Refusal | None:
    """A loop's loads: at least one, one per program input."""
    if not loads:
        return Answer.BAD_ARITY, "a loop takes at least one load"
    return _loads_arity(prog, loads, load_specs, 0)


def _load_dtypes(prog: Prog, loads: Sequence[Dtype], load_specs: Sequence[S.Load],
                 first: int) -> Refusal | None:
    """Load ``i`` of program input ``first + i``'s dtype, a Padded one's fill one
    element of it."""
    for i, (dt, load) in enumerate(zip(loads, load_specs, strict=True)):
        want = prog.ins[first + i]
        if dt != want:
            return Answer.WRONG_DTYPE, f"load {i} is {dt.name}, the program reads {want.name}"
        if isinstance(load, S.Padded) and not S.fill_fits(load.fill, dt):
            return (Answer.WRONG_DTYPE,
                    f"load {i}'s fill has {len(load.fill)} bytes, a {dt.name} element "
                    f"{D.bytes(dt, 1)}")
    return None


def _rank(prog: Prog, rank: int, load_specs: Sequence[S.Load], least: int = 0
          ) -> Refusal | None:
    """A rank from ``least`` to ``MAX_RANK``, each Padded load reading it, and
    every Coord axis below it."""
    if not least <= rank <= MAX_RANK:
        return Answer.SHAPE_MISMATCH, f"a loop of rank {rank}, not in [{least}, {MAX_RANK}]"
    for i, load in enumerate(load_specs):
        if isinstance(load, S.Padded) and load.pad.loaded_rank != rank:
            return (Answer.SHAPE_MISMATCH,
                    f"load {i} pads rank {load.pad.rank} with {len(load.pad.windows)} windows, "
                    f"reading rank {load.pad.loaded_rank} in a loop of rank {rank}")
    if prog.coord_axes and max(prog.coord_axes) >= rank:
        return (Answer.SHAPE_MISMATCH,
                f"the program reads Coord axis {max(prog.coord_axes)} of a loop of rank {rank}")
    return None


def map_refusal(prog: Prog, rank: int, dsts: Sequence[Dtype], loads: Sequence[Dtype],
                load_specs: Sequence[S.Load]) -> Refusal | None:
    """Whether ``map``'s program ``prog`` over loads of dtypes ``loads`` read by
    ``load_specs`` into destinations of dtypes ``dsts``, on a loop of rank
    ``rank``, does not fit: ``(answer, why)`` for the first misfit, else None.

    - BAD_ARITY: no load; loads not one per program input; load specs not one
      per load; destinations not one per program output.
    - WRONG_DTYPE: load ``i`` not of ``prog.ins[i]``; a Padded load's fill not
      one element of its dtype (``dtype.bytes(dt, 1)`` bytes); destination
      ``k`` not of program output ``k``'s dtype.
    - SHAPE_MISMATCH: a rank outside [0, 32]; a Padded load whose pad's rank
      plus its windows is not the loop's; a Coord axis at or past the rank.
    """
    return (_loop_arity(prog, loads, load_specs)
            or _count("destinations", len(dsts), prog.n_outs)
            or _load_dtypes(prog, loads, load_specs, 0)
            or _dst_dtypes(dsts, prog.out_dtypes, "program output")
            or _rank(prog, rank, load_specs))


def _dst_dtypes(dsts: Sequence[Dtype], want: Sequence[Dtype], whose: str) -> Refusal | None:
    for k, (got, w) in enumerate(zip(dsts, want, strict=True)):
        if got != w:
            return (Answer.WRONG_DTYPE,
                    f"destination {k} is {got.name}, the {whose}'s dtype is {w.name}")
    return None


def _reduction(prog: Prog, r: S.Reduction, output: int, result: Dtype) -> Refusal | None:
    """Output ``output`` of ``prog`` accepted by ``r``, and ``result`` a dtype
    its results may round into (``spec.result_fits``)."""
    term = prog.out_dtypes[output]
    if not S.accepts(r, term):
        return Answer.WRONG_DTYPE, f"{r} does not reduce output {output}'s {term.name}"
    if not S.result_fits(r, term, result):
        return (Answer.WRONG_DTYPE,
                f"{r} of output {output}'s {term.name} does not round into {result.name}")
    return None


def _output(prog: Prog, output: int) -> Refusal | None:
    if not 0 <= output < prog.n_outs:
        return (Answer.BAD_ARITY,
                f"output {output} is not one of the program's {prog.n_outs} outputs")
    return None


def reduce_refusal(prog: Prog, rank: int,
                   reductions: Sequence[tuple[S.Reduction, int, Dtype]],
                   dsts: Sequence[Dtype], loads: Sequence[Dtype],
                   load_specs: Sequence[S.Load]) -> Refusal | None:
    """As ``map_refusal`` for ``reduce``'s ``reductions`` ``(reduction, output,
    dtype)`` of ``prog``; the reduced axes are ``shape.reduce``'s to check.

    - BAD_ARITY: no load; loads not one per program input; load specs not one
      per load; no reduction; an output the program lacks; destinations not one
      per result (two for Moments and Arg); loads and destinations above 16.
    - WRONG_DTYPE: a load's dtype or fill as for map; a reduction that does not
      accept its output's dtype (``spec.accepts``); a stated dtype the output's
      terms may not round into (``spec.result_fits``); a destination not of
      its result's dtype (``spec.result_dtypes``: Arg's positions int64).
    - SHAPE_MISMATCH: as for map.
    """
    want = [d for r, _, dt in reductions for d in S.result_dtypes(r, dt)]
    found = (_loop_arity(prog, loads, load_specs)
             or (None if reductions else (Answer.BAD_ARITY, "no reduction")))
    for _, output, _ in reductions:
        found = found or _output(prog, output)
    found = (found
             or _count("destinations", len(dsts), len(want))
             or _too_many(len(loads) + len(dsts))
             or _load_dtypes(prog, loads, load_specs, 0))
    for r, output, dt in reductions:
        found = found or _reduction(prog, r, output, dt)
    return (found
            or _dst_dtypes(dsts, want, "reduction's result")
            or _rank(prog, rank, load_specs))


def scan_refusal(prog: Prog, rank: int, reduction: S.Reduction, output: int,
                 dsts: Sequence[Dtype], carry: Dtype | None, loads: Sequence[Dtype],
                 load_specs: Sequence[S.Load]) -> Refusal | None:
    """As ``map_refusal`` for ``scan``'s scan by ``reduction`` of output
    ``output`` of ``prog``, from a carry of dtype ``carry`` (None for none);
    the scanned axis is ``shape.scan``'s to check.

    - BAD_ARITY: no load; loads not one per program input; load specs not one
      per load; an output the program lacks; destinations not one per result
      (two for Moments and Arg); a carry for Arg; a carry, loads and
      destinations above 16.
    - WRONG_DTYPE: a load's dtype or fill as for map; a reduction that does not
      accept the output's dtype; a first destination the terms may not round
      into (``spec.result_fits``); Moments' second destination not the first's
      dtype, Arg's not int64; a carry not of ``carrier`` of the output's dtype.
    - SHAPE_MISMATCH: a rank below 1 (a scan needs an axis), else as for map.
    """
    found = (_loop_arity(prog, loads, load_specs)
             or _output(prog, output)
             or _count("destinations", len(dsts), S.results(reduction))
             or (None if carry is None or not isinstance(reduction, S.Arg) else
                 (Answer.BAD_ARITY, "an Arg scan takes no carry"))
             or _too_many(len(loads) + len(dsts) + (carry is not None))
             or _load_dtypes(prog, loads, load_specs, 0))
    if found:
        return found
    term = prog.out_dtypes[output]
    found = (_reduction(prog, reduction, output, dsts[0])
             or _dst_dtypes(dsts, S.result_dtypes(reduction, dsts[0]), "scan's result"))
    if not found and carry is not None and carry != D.carrier(term):
        found = (Answer.WRONG_DTYPE,
                 f"the carry is {carry.name}, the carrier of {term.name} is "
                 f"{D.carrier(term).name}")
    return found or _rank(prog, rank, load_specs, least=1)


def attention_refusal(prog: Prog, q: Dtype, rank: int, o: Dtype, acc: Dtype,
                      loads: Sequence[Dtype], load_specs: Sequence[S.Load]) -> Refusal | None:
    """As ``map_refusal`` for ``attention``'s program ``prog`` over loads of
    dtypes ``loads``, a query of dtype ``q`` and rank ``rank`` (the loop's), o
    of dtype ``o`` and lse of dtype ``acc``.

    - BAD_ARITY: program inputs not the score then one per load; load specs not
      one per load; program outputs not two; output 0 reading the score.
    - WRONG_DTYPE: ``acc`` not float32 or float64; q or o not a float; the
      score (program input 0) not of ``acc``; load ``i`` not of program input
      ``1 + i`` or its fill not one element; output 0 not bool; output 1 not of
      ``acc``.
    - SHAPE_MISMATCH: a rank outside [3, 32]; a Padded load not reading the
      rank; a Coord axis at or past it.
    """
    if prog.n_ins < 1:
        return Answer.BAD_ARITY, "the program reads no score (input 0)"
    if prog.n_outs != 2:
        return Answer.BAD_ARITY, f"the program has {prog.n_outs} outputs, not 2"
    found = (_loads_arity(prog, loads, load_specs, 1)
             or (None if not prog.reads(0, 0) else
                 (Answer.BAD_ARITY, "output 0 (visibility) reads the score")))
    if found:
        return found
    if acc not in (D.float32, D.float64):
        return Answer.WRONG_DTYPE, f"the accumulator is {acc.name}, not float32 or float64"
    for name, dt in (("q", q), ("o", o)):
        if not dt.is_float:
            return Answer.WRONG_DTYPE, f"{name} is {dt.name}, not a float"
    if prog.ins[0] != acc:
        return Answer.WRONG_DTYPE, f"the score is {prog.ins[0].name}, the accumulator {acc.name}"
    found = _load_dtypes(prog, loads, load_specs, 1)
    if not found and prog.out_dtypes[0] != D.bool_:
        found = Answer.WRONG_DTYPE, f"output 0 is {prog.out_dtypes[0].name}, not bool"
    if not found and prog.out_dtypes[1] != acc:
        found = (Answer.WRONG_DTYPE,
                 f"output 1 is {prog.out_dtypes[1].name}, the accumulator {acc.name}")
    return found or _rank(prog, rank, load_specs, least=3)


def contract_refusal(spec: S.Contract, dsts: Sequence[Sequence[int]],
                     shapes: Sequence[Sequence[int]], dtypes: Sequence[Dtype]) -> Answer | None:
    """The refusal of a ``contract`` call whose destinations have shapes
    ``dsts`` and whose operands have ``shapes`` and ``dtypes``, in this order:

    - BAD_ARITY: not one destination, or not the spec's operand count;
    - SHAPE_MISMATCH: operand shapes ``contract`` answers an Error for, or a
      destination not of the result's shape;
    - WRONG_DTYPE: an Exponent scale that is not uint8, segment ids not int64.
    """
    if len(dsts) != 1 or len(shapes) != spec.n_operands():
        return Answer.BAD_ARITY
    result = contract(spec, shapes)
    if isinstance(result, Error) or result[0] != tuple(dsts[0]):
        return Answer.SHAPE_MISMATCH
    rest = list(dtypes[2 + spec.init:])
    for kind in spec.scales:
        if kind is None:
            continue
        if kind is S.ScaleKind.EXPONENT and rest[0] is not D.uint8:
            return Answer.WRONG_DTYPE
        rest.pop(0)
    if spec.segments is not None and rest[0] is not D.int64:
        return Answer.WRONG_DTYPE
    return None

"""A program of float32 and float64 nodes as one compiled loop: ``kernel``.

Rule: the loop gives every output the bits the node-by-node evaluator
(``program.Evaluator.run``) gives it. Each node is the same operation rounded
once to the node's dtype: ``+ - * /``, Recip, Sqrt, Neg and Abs are IEEE
operations in the node's type (one rounding, no contraction into fused
multiply-adds, no fast-math flags); a Cast between float32 and float64 is
the C conversion NumPy's ``astype`` makes; Fma of float64 is LLVM's fused
multiply-add, as ``kindbase``'s loop; Exp, Tanh and Erf of float32 and
float64 call the very functions the node kinds' loops call (``simdfloat32``,
``simdfloat64``, ``simderf``), a float64 Exp in chunks as ``simdfloat64.exp64``
runs it (``_chunked``: a faster function where every result of the chunk is
normal and finite, the same bits).
A node whose kind has no compiled twin with the same bits (the other
transcendentals, NumPy's SIMD ufuncs, Pow, Atan2; Maximum,
Minimum, Fma of float32, the rounding kinds, comparisons, Where, Coord,
every other dtype) leaves its program to the node-by-node evaluator.

Why: node by node, each node is one pass over a box in cache, and the float32
path of Exp and Tanh converts its operand and result; the loop keeps every
value in registers, one read of each operand and one write of each output per
element (``x·sigmoid(x)`` of float32: four passes become one).

The loop reads each operand as one value per element, or, where the caller
views its loop as ``rows × cols`` (C order), as one value per column (the
same in every row: a bias repeated over tokens) or one per row (the same
along it: a token's mean, repeated over its features), its ``spreads``
(``EACH``, ``PER_COLUMN``, ``PER_ROW``): a broadcast operand is read where
it lies, never repeated into a temporary. Nodes of per-row operands and
constants alone are computed once per row (the same operations on the same
values: the same bits).

Compiling a loop takes most of a second per program and spreads (Numba,
once per process): ``program.map_into`` uses it for loops of
``program.FUSE_MIN`` elements or more once the program has run
``program.FUSE_WORK`` elements in them, where that is small beside the work.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, final

import numpy as np
import numpy.typing as npt

from nxkernel_core.prog import Binary, Convert, In, Op1, Op2, Op3, Prog, Ternary, Unary, operands_of

__all__ = ["EACH", "PER_COLUMN", "PER_ROW", "Fused", "live_nodes", "loop_reads", "plan", "rows"]

Arr = npt.NDArray[Any]

#: Each float32 or float64 operation's source, ``{0}``, ``{1}``, ``{2}`` its
#: arguments' names. Neg and Abs change the sign bit alone, as NumPy's.
_UNARY: Final[dict[Unary, str]] = {
    Unary.NEG: "-{0}", Unary.ABS: "abs({0})", Unary.SQRT: "np.sqrt({0})",
}
_BINARY: Final[dict[Binary, str]] = {
    Binary.ADD: "{0} + {1}", Binary.SUB: "{0} - {1}", Binary.MUL: "{0} * {1}",
    Binary.FDIV: "{0} / {1}",
}
#: The transcendentals with a compiled twin per dtype: the kind's function
#: of one element, computed in float64 and rounded once.
_TWIN: Final[dict[tuple[Unary, str], str]] = {
    (Unary.ERF, "float64"): "simderf.erf_one",
    (Unary.EXP, "float64"): "simdfloat64.exp64_one",
    (Unary.TANH, "float64"): "simdfloat64.tanh64_one",
}
#: Those computed in float32 arithmetic (``simdfloat32.expf``, ``tanhf``,
#: ``simderf.erff``).
_TWIN32: Final[dict[Unary, str]] = {Unary.EXP: "simdfloat32.expf_one",
                                    Unary.TANH: "simdfloat32.tanhf_one",
                                    Unary.ERF: "simderf.erff_one"}
#: Float64 Exp, and its function for arguments whose results are normal and
#: finite (``_chunked``).
_EXP64: Final = _TWIN[Unary.EXP, "float64"]
_EXP64_FAST: Final = "simdfloat64.exp64_normal_one"
_FLOATS: Final = ("float32", "float64")
_NP: Final = {"float32": "np.float32", "float64": "np.float64"}

#: How an operand of a loop of ``rows × cols`` elements holds its values: one
#: per element, one per column (each row the same), one per row.
EACH: Final = 0
PER_COLUMN: Final = 1
PER_ROW: Final = 2


@final
@dataclass(frozen=True, slots=True)
class Fused:
    """A program's loop: ``run(reads, targets, rows)`` over 1-D C-contiguous
    arrays, one per operand the program reads (of its ``in_dtypes``, in
    order) and one per output (of its dtype), the outputs of one length
    ``rows · cols``; a read holds that many values, or, where ``spreads``
    says so, ``cols`` (``PER_COLUMN``) or ``rows`` (``PER_ROW``)."""

    source: str
    kernel: Callable[..., None]
    consts32: Arr
    consts64: Arr
    #: Each operand's host type where the program reads it, else None.
    in_dtypes: tuple[np.dtype[Any] | None, ...]
    #: Each read's spread; None: every read ``EACH`` (a loop of one row).
    spreads: tuple[int, ...] | None = None

    def run(self, reads: Sequence[Arr], targets: Sequence[Arr], rows: int = 1) -> None:
        """Every output at every element, written into ``targets``."""
        if self.spreads is None:
            self.kernel(*reads, *targets, self.consts32, self.consts64)
        else:
            self.kernel(*reads, *targets, rows, self.consts32, self.consts64)


def _source(prog: Prog, consts: Sequence[Any], spreads: Sequence[int] | None = None
            ) -> tuple[str, list[Any], list[Any], list[int]] | None:
    """The loop's source, its float32 and float64 constants and the operands it
    reads (the loop's first arguments, in order), or None where a
    live node has no compiled twin (see the module's doc), or where
    ``spreads`` (one per operand the program reads; None: all ``EACH``) is
    given and a float64 Exp is live. ``consts[i]`` is node ``i``'s value
    where it is of constants alone (signalling NaNs quiet, as the evaluator
    reads them)."""
    live = live_nodes(prog, consts)
    read = sorted({nd.index for i, nd in enumerate(prog.nodes) if live[i] and isinstance(nd, In)})
    spread = dict(zip(read, spreads or [EACH] * len(read), strict=True))
    c32: list[Any] = []
    c64: list[Any] = []
    head: list[str] = []
    #: Lines computed once per row (of per-row operands and constants alone).
    outer: list[str] = []
    body: list[str] = []
    name: dict[int, str] = {}
    number: dict[int, bool] = {}
    per_row: set[int] = set()
    #: Each float64 Exp's argument, by its line in ``body``.
    exps: dict[int, str] = {}
    for i, node in enumerate(prog.nodes):
        if not live[i]:
            continue
        dt = prog.dtype(i).name
        if dt not in _FLOATS:
            return None
        if consts[i] is not None:
            pool = c32 if dt == "float32" else c64
            head.append(f"    k{i} = c{dt[-2:]}[{len(pool)}]")
            pool.append(consts[i])
            number[i] = not np.isnan(consts[i])
            name[i] = f"k{i}"
            continue
        if isinstance(node, In):
            k = node.index
            if spread[k] == PER_ROW:
                outer.append(f"        v{i} = a{k}[r]")
                per_row.add(i)
            else:
                body.append(f"        v{i} = a{k}{'s' if spreads and spread[k] == EACH else ''}[j]")
            name[i] = f"v{i}"
            continue
        expr = _expr(prog, i, node, name, number)
        if expr is None:
            return None
        if expr in name.values():  # Copy, or a Cast into the same dtype: the same value
            name[i] = expr
            if all(a in per_row or consts[a] is not None for a in operands_of(node)):
                per_row.add(i)
            continue
        if isinstance(node, Op1) and _EXP64 in expr:
            if spreads is not None:
                return None
            exps[len(body)] = name[node.x]
        if spreads is not None and all(a in per_row or consts[a] is not None
                                       for a in operands_of(node)):
            outer.append(f"        v{i} = {expr}")
            per_row.add(i)
        else:
            body.append(f"        v{i} = {expr}")
        name[i] = f"v{i}"
    ins = [f"a{k}" for k in read]
    outs = [f"o{k}" for k in range(len(prog.outs))]
    if spreads is not None:
        # One row is a function of its own (``row``), given each row's slice
        # views of the per-element operands and the outputs, read and written
        # at [j] (indexing from ``r · cols`` would keep LLVM's loads scalar),
        # the per-column operands whole and the per-row values: its loop, not
        # nested in the rows', vectorises as a loop over one array does
        # (measured on one thread: GELU of a biased [720, 1536], 3.9 ns an
        # element against 4.7 with the loop nested).
        each = [f"a{k}" for k in read if spread[k] == EACH] + outs
        row_values = [line.split("=")[0].strip() for line in outer]
        args = [*(f"{x}s" for x in each), *(f"a{k}" for k in read if spread[k] == PER_COLUMN),
                *row_values]
        lines = [f"def row({', '.join([*args, 'c32', 'c64'])}):", "    wide_vectors()", *head,
                 "    for j in range(o0s.size):", *body,
                 *(f"        o{k}s[j] = {name[o]}" for k, o in enumerate(prog.outs)),
                 "",
                 f"def kernel({', '.join([*ins, *outs])}, rows, c32, c64):",
                 # the constants the per-row values read
                 *(line for line in head if re.search(rf"\b{line.split()[0]}\b", " ".join(outer))),
                 "    cols = o0.size // rows", "    for r in range(rows):",
                 *(f"        {x}s = {x}[r * cols:(r + 1) * cols]" for x in each), *outer,
                 f"        row({', '.join([*args, 'c32', 'c64'])})"]
        return "\n".join(lines) + "\n", c32, c64, read
    stores = [f"        o{k}[j] = {name[o]}" for k, o in enumerate(prog.outs)]
    lines = [f"def kernel({', '.join([*ins, *outs])}, c32, c64):", "    wide_vectors()", *head]
    if exps:
        lines += _chunked(body + stores, exps, ins, outs)
    else:
        lines += ["    for j in range(o0.size):", *body, *stores]
    return "\n".join(lines) + "\n", c32, c64, read


def _chunked(body: list[str], exps: dict[int, str], ins: list[str], outs: list[str]) -> list[str]:
    """The loop over ``body`` (its lines, stores included, ``exps[n]`` the
    argument of line ``n``'s float64 Exp) in chunks of
    ``simdfloat64.EXP_CHUNK``, as ``simdfloat64.exp64`` runs: where no output
    shares memory with an operand, one pass by ``exp64_normal_one`` that
    records the largest |argument| of every float64 Exp, the chunk run again
    by ``exp64_one`` where one result is not normal and finite; where one
    does (an operand as its destination), ``exp64_one`` alone. Both
    functions give the same bits wherever the fast one runs."""
    fast: list[str] = []
    for n, line in enumerate(body):
        if n in exps:
            fast.append(f"        top = max(top, simdfloat64.abs_bits({exps[n]}))")
            line = line.replace(_EXP64, _EXP64_FAST)
        fast.append(line)
    # Each chunk's slice views, read and written at [j]: indexing from ``lo``
    # would keep LLVM's loads scalar.
    def views(lines: list[str]) -> list[str]:
        return ["        " + re.sub(r"\b([ao])(\d+)\[j\]", r"\1\2s[j]", s) for s in lines]

    step = "simdfloat64.EXP_CHUNK"
    one_pass = " and ".join(f"simdbase.apart({a}, {o})" for a in ins for o in outs) or "True"
    return [f"    one_pass = {one_pass}",
            f"    for lo in range(0, o0.size, {step}):",
            *(f"        {x}s = {x}[lo:lo + {step}]" for x in [*ins, *outs]),
            "        top = np.int64(0)",
            "        if one_pass:",
            "            for j in range(o0s.size):", *views(fast),
            "        if not one_pass or top > simdfloat64.EXP_FAST_BITS:",
            "            for j in range(o0s.size):", *views(body)]


def live_nodes(prog: Prog, known: Sequence[Any] | None = None) -> list[bool]:
    """Which nodes the outputs read, themselves or through other nodes; a node
    whose value is ``known`` (not None there: of constants alone) reads none."""
    live = [False] * len(prog.nodes)
    for o in prog.outs:
        live[o] = True
    for i in range(len(prog.nodes) - 1, -1, -1):
        if live[i] and (known is None or known[i] is None):
            for a in operands_of(prog.nodes[i]):
                live[a] = True
    return live


def _expr(prog: Prog, i: int, node: Any, name: dict[int, str], number: dict[int, bool]
          ) -> str | None:
    """Node ``i``'s value as an expression of its arguments' names, or None;
    ``number[a]`` says whether node ``a``, a constant, is no NaN (absent: no
    constant)."""
    dt = prog.dtype(i).name
    if any(prog.dtype(a).name not in _FLOATS for a in operands_of(node)):
        return None
    if isinstance(node, Op1):
        x = name[node.x]
        src = prog.dtype(node.x).name
        if node.kind is Convert.COPY or (node.kind is Convert.CAST and src == dt):
            return x
        if node.kind is Convert.CAST:
            return f"{_NP[dt]}({x})"
        if node.kind is Unary.RECIP:
            return f"{_NP[dt]}(1.0) / {x}"
        if node.kind in _UNARY:
            return _UNARY[node.kind].format(x)
        if dt == "float32" and node.kind in _TWIN32:
            return f"{_TWIN32[node.kind]}({x})"
        twin = _TWIN.get((node.kind, dt)) if isinstance(node.kind, Unary) else None
        if twin is None:
            return None
        return f"{_NP[dt]}({twin}(np.float64({x})))"
    if isinstance(node, Op2):
        if node.kind not in _BINARY:
            return None
        x, y = name[node.x], name[node.y]
        expr = _BINARY[node.kind].format(x, y)
        # Which NaN a NaN result is, as NumPy's loops choose it: a NaN
        # constant's where one is the first operand, or the second of a
        # commutative kind (NumPy swaps those to put its scalar first); else
        # the first operand's where it is a NaN, then the second's. LLVM may
        # swap a commutative operation's operands, so the rule is written out
        # (v + v is v's NaN, quieted).
        if number.get(node.x) is False:
            return f"{x} + {x}"
        if number.get(node.y) is False and node.kind in (Binary.ADD, Binary.MUL):
            return f"{y} + {y}"
        if x == y or number.get(node.x) or number.get(node.y):
            return expr
        return f"({x} + {x} if {x} != {x} else {expr})"
    if isinstance(node, Op3) and node.kind is Ternary.FMA and dt == "float64":
        return f"fma({name[node.c]}, {name[node.x]}, {name[node.y]})"
    return None


def loop_reads(prog: Prog, consts: Sequence[Any]) -> list[int] | None:
    """The operands ``plan``'s loop of ``EACH`` reads, in order, or None where
    ``plan`` makes no loop (a live node without a compiled twin, or no
    output), found without compiling it."""
    made = _source(prog, consts) if prog.outs else None
    return None if made is None else made[3]


def plan(prog: Prog, consts: Sequence[Any], spreads: Sequence[int] | None = None
         ) -> Fused | None:
    """``prog``'s loop, compiled now, or None where it has a node without a
    compiled twin or no output (``consts`` and ``spreads`` as for ``_source``)."""
    made = _source(prog, consts, spreads) if prog.outs else None
    if made is None:
        return None
    source, c32, c64, read = made
    from numba import njit

    from . import simdbase, simderf, simdfloat32, simdfloat64
    scope: dict[str, Any] = {
        "np": np, "fma": simdbase.fma, "wide_vectors": simdbase.wide_vectors,
        "simdbase": simdbase, "simderf": simderf, "simdfloat32": simdfloat32,
        "simdfloat64": simdfloat64}
    exec(compile(source, f"<nxkernel fused {hash(prog):x}>", "exec"), scope)
    # error_model="numpy": a division by zero is IEEE's, not an exception.
    # ``kernel`` finds ``row`` (a loop over rows calls it) compiled in its scope.
    for function in ("row", "kernel"):
        if function in scope:
            scope[function] = njit(nogil=True, error_model="numpy")(scope[function])
    kernel = scope["kernel"]
    fused = Fused(source, kernel, _pack(c32, np.float32), _pack(c64, np.float64),
                  tuple(prog.ins[k].numpy_dtype if k in read else None
                        for k in range(prog.n_ins)),
                  None if spreads is None else tuple(spreads))
    # Compiled here, for the one signature every call has (1-D C-contiguous
    # float32 and float64 arrays), not in a pool thread during a map.
    fused.run([np.zeros(1, prog.ins[k].numpy_dtype) for k in read],
              [np.zeros(1, prog.dtype(o).numpy_dtype) for o in prog.outs])
    return fused


def rows(reads: Sequence[Arr], shape: tuple[int, ...]
          ) -> tuple[int, tuple[int, ...], list[Arr]] | None:
    """The loop over ``shape`` as rows of its last axes, ``(cols, spreads,
    flats)`` (``_split``), each read as a 1-D view of the values it holds;
    None where no split has every read so."""
    split = _split(shape, tuple([a.strides for a in reads]), tuple([a.itemsize for a in reads]))
    if split is None:
        return None
    k, spreads = split
    per_row: tuple[Any, ...] = (Ellipsis, *(0,) * (len(shape) - k))
    flats = [(a if s == EACH else a[(0,) * k] if s == PER_COLUMN else a[per_row]).reshape(-1)
             for a, s in zip(reads, spreads, strict=True)]
    return math.prod(shape[k:]), spreads, flats


@functools.lru_cache(maxsize=1024)
def _split(shape: tuple[int, ...], strides: tuple[tuple[int, ...], ...], items: tuple[int, ...]
           ) -> tuple[int, tuple[int, ...]] | None:
    """``(k, spreads)``: the fewest leading axes ``k`` (one at least) whose rows
    every read (of ``shape``, byte ``strides`` and ``items`` bytes an
    element) holds as one value per element (C-contiguous), per column (the
    same C-contiguous values in every row) or per row (C-contiguous along the
    leading axes, the same along a row); None where no split has every read
    so (an operand of one value, or one broadcast along a middle axis). Made
    once per shape and strides: it reads nothing else."""
    for k in range(1, len(shape)):
        if math.prod(shape[k:]) < 2 or math.prod(shape[:k]) < 2:
            continue
        spreads: list[int] = []
        for st, item in zip(strides, items, strict=True):
            lead = all(s == 0 or d == 1 for s, d in zip(st[:k], shape[:k], strict=True))
            tail = all(s == 0 or d == 1 for s, d in zip(st[k:], shape[k:], strict=True))
            if lead == tail:
                if lead or not _c_order(shape, st, item):
                    break
                spreads.append(EACH)
            elif lead:
                if not _c_order(shape[k:], st[k:], item):
                    break
                spreads.append(PER_COLUMN)
            else:
                if not _c_order(shape[:k], st[:k], item):
                    break
                spreads.append(PER_ROW)
        else:
            return k, tuple(spreads)
    return None


def _c_order(shape: tuple[int, ...], strides: tuple[int, ...], item: int) -> bool:
    """Whether elements of ``item`` bytes at ``shape`` and byte ``strides`` are
    C-contiguous (NumPy's flag: an extent of 1 has any stride)."""
    want = item
    for d, s in zip(reversed(shape), reversed(strides), strict=True):
        if d != 1 and s != want:
            return False
        want *= d
    return True


def _pack(values: list[Any], dtype: type[np.floating[Any]]) -> Arr:
    """0-d constants as one 1-D array, their bits kept."""
    if not values:
        return np.zeros(1, dtype=dtype)
    return np.concatenate([np.asarray(v, dtype=dtype).reshape(1) for v in values])


"""The walks of a reduction's or a scan's terms, as the generated kernels of
:mod:`nxkernel_cuda.terms` read them (reductions and statistics share them).

Rule: the loop's axes split into kept axes (a row of results each) and the
reduced axes (a row's terms); the kept walk holds, in this order, the term
program's arrays, the destinations that run along the reduced axes (a
scan's), the destinations of one element a row (a reduction's) and any extra
kept parts (a scan's carry); the reduced walk holds the arrays and the
destinations along the reduced axes. Along a reversed axis a walk starts at
its last index and steps back. A Padded operand is read through its
descriptor: its walk slots run nowhere. One descriptor on the device holds
the kept walk, the reduced walk, the Coord entries and the pad descriptors.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import final

from nxkernel_core import spec as S
from nxkernel_core.array import Array
from nxkernel_core.prog import Prog

from . import codegen, loops, terms
from .launch import CudaRig, Pointer

__all__ = ["TermWalks", "coords", "term_walks"]


@final
@dataclass(frozen=True, slots=True)
class TermWalks:
    """A call's terms as the kernels walk them: the term program ``tprog`` and
    its output ``tout``, the arrays its loads read (``arrays``, ``tloads``),
    the kept extents, ``rows`` (their product) and ``n`` terms a row, and the
    descriptor's parts on the device: ``kept_p``, ``red_p`` and ``coords_p``
    (Coord entries, then pad descriptors)."""

    tprog: Prog
    tout: int
    arrays: list[Array]
    tloads: list[S.Load]
    kept_shape: list[int]
    rows: int
    n: int
    kept_p: Pointer
    red_p: Pointer
    coords_p: Pointer


def coords(prog: Prog, rank: int, kept: Sequence[int], kept_shape: Sequence[int],
           reduced: Sequence[int], red_shape: Sequence[int], reverse: bool) -> list[int]:
    """The Coord entries (source, div, ext, reversed) of the program's Coord
    axes: from the row's index along a kept axis, the term's along a reduced
    one (from its end where ``reverse``)."""
    words: list[int] = []
    for axis in codegen.coord_axes(prog):
        along = rank - 1 - axis
        if along in kept:
            j = kept.index(along)
            words += [0, math.prod(kept_shape[j + 1:]), kept_shape[j], 0]
        else:
            j = list(reduced).index(along)
            words += [1, math.prod(red_shape[j + 1:]), red_shape[j], int(reverse)]
    return words


def term_walks(dev: CudaRig, prog: Prog, output: int, loads: Sequence[S.Load], operands: Sequence[Array],
               axes: Sequence[int], *, reverse: bool = False, along: Sequence[Array] = (),
               per_row: Sequence[Array] = (), extra: Sequence[tuple[int, Sequence[int]] | None] = ()
               ) -> TermWalks | None:
    """The walks of output ``output``'s terms over ``axes`` (reversed where
    ``reverse``), the destinations ``along`` the reduced axes and ``per_row``,
    and the ``extra`` kept parts (offset and kept strides; None: nowhere),
    uploaded to ``dev``; None where there is no row."""
    tprog, tout, ins = terms.term_program(prog, output)
    arrays = [operands[i] for i in ins]
    tloads = [loads[i] for i in ins]
    loop = loops.loop_shape(loads, operands)
    rank = len(loop)
    kept = [a for a in range(rank) if a not in axes]
    kept_shape = [loop[a] for a in kept]
    red_shape = [loop[a] for a in axes]
    rows, n = math.prod(kept_shape), math.prod(red_shape)
    if rows == 0:
        return None

    def parts(a: Array | None) -> tuple[tuple[int, list[int]], list[int]]:
        """(kept offset and strides, reduced strides) of a (None: nowhere)."""
        if a is None:
            return (0, [0] * len(kept)), [0] * len(axes)
        off = a.layout.offset
        red = [a.layout.strides[x] for x in axes]
        if reverse:
            off += sum((e - 1) * s for e, s in zip(red_shape, red, strict=True))
            red = [-s for s in red]
        return (off, [a.layout.strides[x] for x in kept]), red

    walked = [parts(a if isinstance(ld, S.Plain) else None) for a, ld in zip(arrays, tloads, strict=True)]
    walked += [parts(d) for d in along]
    kept_parts: list[tuple[int, Sequence[int]]] = [k for k, _ in walked]
    kept_parts += [(d.layout.offset, d.layout.strides) for d in per_row]
    kept_parts += [e if e is not None else (0, [0] * len(kept)) for e in extra]
    wk = loops.walk_words(loops.coalesce(kept_shape, kept_parts))
    wr = loops.walk_words(loops.coalesce(red_shape, [(0, r) for _, r in walked]))
    row_term: list[loops.CoordWalk] = [(kept_shape, kept, False), (red_shape, axes, reverse)]
    pads = [loops.pad_words(a, ld, row_term) for a, ld in zip(arrays, tloads, strict=True)
            if isinstance(ld, S.Padded)]
    words = coords(tprog, rank, kept, kept_shape, axes, red_shape, reverse)
    desc = loops.upload(dev, wk + wr + loops.packed(words, pads))
    red_p = desc + 8 * len(wk)
    return TermWalks(tprog, tout, arrays, tloads, kept_shape, rows, n, desc, red_p, red_p + 8 * len(wr))

"""The map kernel: one CUDA source generated per program.

Rules:

* :func:`map_code` renders the source of a program (pure): the program as
  ``nxk_eval`` (:mod:`nxkernel_cuda.codegen`), then one kernel, ``nxk_map``,
  that walks the loop with a grid-stride loop, thread by index, loads every
  operand's element at the index, evaluates, and stores every output. A
  destination identical to a Plain operand is read at the index before it is
  written there. Sources are cached by program and by which loads are
  Padded, of what rank (and built once per device).
* The loop is walked by a descriptor (:mod:`nxkernel_cuda.loops`): any
  strides, broadcast, negative, offset; the destinations and Plain operands
  coalesced together, so a contiguous map is one flat loop. A Padded
  operand is read through its own descriptor (``loops.pad_words``,
  ``kernels/nxk_pad.cuh``): its element where the loop index falls on one,
  else the fill's bits.
* ``map`` computes every program (every kind over its whole domain, complex
  dtypes included, Coord nodes, several outputs, sub-byte operands and
  destinations) over Plain and Padded loads, and declines nothing (every
  program is generated and every load of every dtype read: a Padded load's
  descriptor holds a fill of up to 16 bytes, a complex128's).
"""

from __future__ import annotations

import functools
import string
from collections.abc import Sequence
from typing import Final

import numpy as np

from nxkernel_core import spec as S
from nxkernel_core.array import Array
from nxkernel_core.prog import Prog

from . import codegen, loops
from .build import Source, render
from .launch import Arg

__all__ = [
    "KERNEL", "PROSE", "TEMPLATE", "map", "map_code", "map_source",
]

#: The kernel's name in every map source.
KERNEL: Final = "nxk_map"

# Slots: eval, the program (codegen.eval_code); params, the array pointers
# (destinations d<k>, then operands a<i>); count, the number of arrays;
# coords, one line per Coord axis; loads, one per operand; outs, one
# declaration per output; args, nxk_eval's arguments; stores, one per output.
# Internal variables: i, the loop's linear index (C order), striding by the
# grid's thread count, 0 <= i < n; pos[a], array a's element position at i
# (destinations first, in the walk's order; a Padded operand's is unused);
# coords, the Coord entries, then one word per Padded operand j (in operand
# order) giving the offset of its descriptor from coords.
TEMPLATE: Final = string.Template("""\
#include "nxk_scalar.cuh"
#include "nxk_loop.cuh"
#include "nxk_pad.cuh"

${eval}
extern "C" __global__ void __launch_bounds__(256)
nxk_map(const nxk_i64* __restrict__ walk, const nxk_i64* __restrict__ coords, nxk_i64 n, ${params})
{
    const nxk_i64 step = (nxk_i64)gridDim.x * blockDim.x;
    for (nxk_i64 i = (nxk_i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        nxk_i64 pos[${count}];
        nxk_walk<${count}>(walk, i, pos);
${coords}
${loads}
${outs}
        nxk_eval(${args});
${stores}
    }
}
""")


def map_code(prog: Prog, pads: tuple[int | None, ...] = ()) -> str:
    """The CUDA source of ``prog``'s map kernel (pure); ``pads`` as
    ``loops.pad_key`` gives it (() where every load is Plain)."""
    n_out, n_in = prog.n_outs, prog.n_ins
    params = [f"char* d{k}" for k in range(n_out)] + [f"const char* a{i}" for i in range(n_in)]
    axes = codegen.coord_axes(prog)
    coords = [f"        const nxk_i64 k{a} = nxk_coord(i, coords[{2 * j}], coords[{2 * j + 1}]);"
              for j, a in enumerate(axes)]
    loads: list[str] = []
    padded = 0
    for i, dt in enumerate(prog.ins):
        rank = pads[i] if pads else None
        if rank is None:
            loads.append(f"        const {codegen.scalar(dt).ctype} in{i} = "
                         f"{codegen.load_expr(dt, f'a{i}', f'pos[{n_out + i}]')};")
        else:
            desc = f"coords + coords[{2 * len(axes) + padded}]"
            loads.append("        " + codegen.padded_load_stmt(dt, f"in{i}", f"a{i}", rank, desc, ["i"]))
            padded += 1
    out_dts = prog.out_dtypes
    outs = [f"        {codegen.scalar(dt).ctype} o{k};" for k, dt in enumerate(out_dts)]
    args = [f"in{i}" for i in range(n_in)] + [f"k{a}" for a in axes] + [f"&o{k}" for k in range(n_out)]
    stores = ["        " + codegen.store_stmt(dt, f"d{k}", f"pos[{k}]", f"o{k}")
              for k, dt in enumerate(out_dts)]
    return render(
        TEMPLATE, eval=codegen.eval_code(prog), params=", ".join(params), count=str(n_out + n_in),
        coords="\n".join(coords), loads="\n".join(loads), outs="\n".join(outs), args=", ".join(args),
        stores="\n".join(stores),
    )


@functools.lru_cache(maxsize=512)
def map_source(prog: Prog, pads: tuple[int | None, ...] = ()) -> Source:
    """The map source of ``prog`` over loads of ``pads`` (``loops.pad_key``;
    cached)."""
    return Source("map.cu", map_code(prog, pads), (KERNEL,))


# --------------------------------------------------------------------------
# The kernel
# --------------------------------------------------------------------------

#: What map computes, in words.
PROSE: Final = (
    "every program (every kind over its whole domain, complex64 and complex128 included, Coord "
    "nodes, several outputs, "
    "strided, broadcast, offset and sub-byte operands and destinations) over Plain and Padded loads "
    "(any padding, crop, interior and windows; outside the operand the fill's bits), by one "
    "CUDA kernel generated per program: results equal the reference evaluator bit for bit but for "
    "the transcendental kinds, Pow and Atan2 (float32 and narrower: computed in double and rounded "
    "once, within 1 ulp; float64: libdevice's, within 2 ulps, the C library's on cuda-emu); complex "
    "Mul is the textbook product unfused and Fdiv and Recip Smith's division in float64 (each part "
    "of the numerator divided by the scaled denominator) rounded once per part, as the reference. "
    "It declines nothing."
)


def map(spec: S.Map, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
    """``S.map`` of a call that fits, its arrays claimed: the program at every
    index of the loop, output k into dsts[k]."""
    dev = loops.device_of(dsts)
    shape = dsts[0].shape  # the loop's: a program has an output, each of the loop's shape
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if n == 0:
        return
    rank = len(shape)
    # A Padded operand is read through its descriptor: its walk slot runs nowhere.
    walk = loops.walk_of(shape, [*dsts, *(a if isinstance(ld, S.Plain) else (0, [0] * rank)
                                          for a, ld in zip(operands, spec.loads, strict=True))])
    words = loops.walk_words(walk)
    coord = loops.coord_words(shape, codegen.coord_axes(spec.prog))
    whole: list[loops.CoordWalk] = [(shape, range(rank), False)]
    pads = [loops.pad_words(a, ld, whole) for a, ld in zip(operands, spec.loads, strict=True)
            if isinstance(ld, S.Padded)]
    desc = loops.upload(dev, words + loops.packed(coord, pads))
    coords = desc + 8 * len(words)
    fn = dev.load(map_source(spec.prog, loops.pad_key(spec.loads))).function(KERNEL)
    args: list[Arg] = [desc, coords, np.int64(n), *(loops.base(dev, a) for a in (*dsts, *operands))]
    fn((loops.blocks_for(n),), (loops.THREADS,), args)

"""The map kernel: one CUDA source generated per program.

Rules:

* :func:`map_code` renders the source of a program (pure): the program as
  ``nxk_eval`` (:mod:`nxkernel_cuda.codegen`), then one kernel, ``nxk_map``,
  that walks the loop with a grid-stride loop, thread by index, loads every
  operand's element at the index, evaluates, and stores every output. A
  destination identical to a Plain operand is read at the index before it is
  written there. Sources are cached by program (and built once per device).
* The loop is walked by a descriptor (:mod:`nxkernel_cuda.loops`): any
  strides, broadcast, negative, offset; the destinations and operands
  coalesced together, so a contiguous map is one flat loop.
* ``map`` computes every program of real dtypes (every kind over its whole
  domain, Coord nodes, several outputs, sub-byte operands and destinations)
  over Plain loads. It declines a program holding a complex dtype and any
  Padded load (:func:`declines`), before touching an array.
"""

from __future__ import annotations

import functools
import string
from collections.abc import Sequence
from typing import Final

import numpy as np

from nxkernel_core import shape as SH
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_core.door import door
from nxkernel_core.kernel import Call
from nxkernel_core.prog import Prog

from . import codegen, loops
from .build import Source, render
from .launch import Arg

__all__ = [
    "KERNEL", "PROSE", "TEMPLATE", "declines", "loop_rank", "map", "map_code", "map_source",
    "program_declines",
]

#: The kernel's name in every map source.
KERNEL: Final = "nxk_map"

# Slots: eval, the program (codegen.eval_code); params, the array pointers
# (destinations d<k>, then operands a<i>); count, the number of arrays;
# coords, one line per Coord axis; loads, one per operand; outs, one
# declaration per output; args, nxk_eval's arguments; stores, one per output.
# Internal variables: i, the loop's linear index (C order), striding by the
# grid's thread count, 0 <= i < n; pos[a], array a's element position at i
# (destinations first, in the walk's order).
TEMPLATE: Final = string.Template("""\
#include "nxk_scalar.cuh"
#include "nxk_loop.cuh"

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


def map_code(prog: Prog) -> str:
    """The CUDA source of ``prog``'s map kernel (pure)."""
    n_out, n_in = prog.n_outs, prog.n_ins
    params = [f"char* d{k}" for k in range(n_out)] + [f"const char* a{i}" for i in range(n_in)]
    axes = codegen.coord_axes(prog)
    coords = [f"        const nxk_i64 k{a} = nxk_coord(i, coords[{2 * j}], coords[{2 * j + 1}]);"
              for j, a in enumerate(axes)]
    loads = [f"        const {codegen.scalar(dt).ctype} in{i} = "
             f"{codegen.load_expr(dt, f'a{i}', f'pos[{n_out + i}]')};" for i, dt in enumerate(prog.ins)]
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
def map_source(prog: Prog) -> Source:
    """The map source of ``prog`` (cached by program)."""
    return Source("map.cu", map_code(prog), (KERNEL,))


# --------------------------------------------------------------------------
# The kernel
# --------------------------------------------------------------------------

#: What map computes, in words.
PROSE: Final = (
    "every program of real dtypes (every kind over its whole domain, Coord nodes, several outputs, "
    "strided, broadcast, offset and sub-byte operands and destinations) over Plain loads, by one "
    "CUDA kernel generated per program: results equal the reference evaluator bit for bit but for "
    "the transcendental kinds, Pow and Atan2 (float32 and narrower: computed in double and rounded "
    "once, within 1 ulp; float64: libdevice's, within 2 ulps, the C library's on cuda-emu). It "
    "declines a program with a complex dtype and any Padded load."
)


def program_declines(prog: Prog, loads: Sequence[S.Load]) -> str | None:
    """Why map (and the reductions) decline a program over these loads, or None."""
    padded = [i for i, ld in enumerate(loads) if isinstance(ld, S.Padded)]
    if padded:
        return f"load {padded[0]} is Padded, and nx.cuda reads Plain loads only"
    return codegen.unsupported(prog)


def declines(call: Call) -> str | None:
    """Why map declines ``call``, or None where it computes it."""
    spec = call.spec
    assert isinstance(spec, S.Map)
    return program_declines(spec.prog, spec.loads)


def loop_rank(loads: Sequence[S.Load], operands: Sequence[Array]) -> int:
    """The loop's rank as the refusal rules read it: the first load's."""
    first = loads[0] if loads else S.PLAIN
    if isinstance(first, S.Padded):
        return first.pad.loaded_rank
    return operands[0].rank if operands else 0


def _misfit(spec: S.Map, dsts: Sequence[Array], operands: Sequence[Array]) -> Answer | None:
    """The refusal of a call that does not fit map, checked before anything."""
    if len(operands) != len(spec.loads) or len(dsts) != spec.prog.n_outs or not operands:
        return Answer.BAD_ARITY
    found = SH.map_refusal(spec.prog, loop_rank(spec.loads, operands), [d.dtype for d in dsts],
                           [a.dtype for a in operands], spec.loads)
    if found is not None:
        return found[0]
    want = SH.map(spec, [a.shape for a in operands])
    if isinstance(want, SH.Error) or any(d.shape != w for d, w in zip(dsts, want, strict=True)):
        return Answer.SHAPE_MISMATCH
    return None


def map(spec: S.Map, dsts: Sequence[Array], operands: Sequence[Array]) -> Answer:
    """``S.map``: the program at every index of the loop, output k into dsts[k]."""
    misfit = _misfit(spec, dsts, operands)
    if misfit is not None:
        return misfit
    dev = loops.cuda_device([*dsts, *operands])
    if dev is None:
        return Answer.WRONG_DEVICE
    if program_declines(spec.prog, spec.loads) is not None:
        return Answer.DECLINED
    with door(dsts, operands, device=dev) as refusal:
        if refusal is not None:
            return refusal
        shape = operands[0].shape
        n = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if n == 0:
            return Answer.DONE
        walk = loops.walk_of(shape, [*dsts, *operands])
        words = loops.walk_words(walk)
        coord = loops.coord_words(shape, codegen.coord_axes(spec.prog))
        desc = loops.upload(dev, words + coord)
        coords = desc + 8 * len(words)
        fn = dev.load(map_source(spec.prog)).function(KERNEL)
        args: list[Arg] = [desc, coords, np.int64(n), *(loops.base(dev, a) for a in (*dsts, *operands))]
        fn((loops.blocks_for(n),), (loops.THREADS,), args)
    return Answer.DONE

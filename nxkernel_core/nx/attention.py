"""Attention: softmax(s·q·kᵀ)·v by one attention kernel call."""

from __future__ import annotations

import builtins
import math

from .. import dtype as D
from .. import spec as S
from ..array import Array
from ..caller import call
from ..dtype import Dtype
from ..prog import Compare, Prog
from .arguments import as_arrays
from .moves import int64_operand


def attention(q: object, k: object, v: object, *, scale: float | None = None,
              causal: bool = False, lengths: object | None = None,
              acc: Dtype | None = None) -> tuple[Array, Array]:
    """``(o, lse)``: softmax(scale·q·kᵀ)·v per query row, over Dense keys
    ``[lead…; hk; tk; d]`` (hk dividing hq); ``causal`` hides keys after the
    query row (aligned to the last key), ``lengths`` ``[lead…]`` hides keys past
    each lead index's length. ``scale`` defaults to 1/√d."""
    fn = "nx.attention"
    qa, ka, va = as_arrays(fn, [q, k, v])
    acc_dt = acc or (D.float64 if qa.dtype is D.float64 else D.float32)
    s = scale if scale is not None else 1.0 / math.sqrt(builtins.max(qa.shape[-1], 1))
    b = Prog.build([acc_dt])
    if causal:
        # Coord counts from the loop's last axis: Coord 0 reads the key (loop
        # axis rank − 1), Coord 1 the query row (loop axis rank − 2).
        tq, tk = qa.shape[-2], ka.shape[-2]
        row = b.coord(1)
        key = b.coord(0)
        visible = b.binary(Compare.LESS_EQUAL, key, row + b.const(D.int64, tk - tq))
    else:
        visible = b.const(D.bool_, True)
    prog = b.finish(visible, b.ins[0])
    ops = [qa, ka, va]
    if lengths is not None:
        ops.append(int64_operand(fn, lengths, qa))
    sp = S.Attention(prog, (), s, acc_dt, S.Dense(), lengths is not None)
    o, lse = call(sp, *ops, name=fn)
    return o, lse

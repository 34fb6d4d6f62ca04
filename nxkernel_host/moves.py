"""The host library's moves: gather, range gather, scatter, sort, numbering,
assemble, and their statement.

The hooks live in ``gathers`` (gather, range gather, scatter, assemble) and
``sorts`` (sort, numbering), over what ``movebits`` shares: every move
copies bits, and sort, numbering and scatter's Max and Min compare elements
by order keys, whose order is the contract's total order.
"""

from __future__ import annotations

from typing import Final

from .family import Family
from .moveplans import DIRECT, PREPARED
from .sorts import RADIX_MIN, TOP_K_FRACTION

__all__ = ["FAMILY"]

_PROSE: Final = {
    "gather": "every dtype, axis and layout: x's bits at index's positions along the axis, "
              "zero bits outside [0, d).",
    "range_gather": "every dtype, axis, run and layout: runs of x's bits from starts along the "
                    "axis, zero bits outside [0, d).",
    "scatter": "every combine at every dtype it takes (Add: all but bool and bit): updates in C "
               "order; Set keeps the last update's bits; Add chains +0 + into + u1 + … in the "
               "dtype (integers wrap, complex per part, narrow floats in float32 rounded once); "
               "Max and Min chain Prog's Maximum and Minimum from into (first NaN kept); "
               "unique is not relied on; into may be dst.",
    "sort": "every dtype, axis, k and direction: stable, in the total order with NaNs last "
            "(first when descending), positions int64.",
    "numbering": "every dtype: per batch row, keys below (left) or not above (right) each "
                 "element in sort's total order, by binary search.",
    "assemble": "every dtype, shape, fill and set of regions: the last piece holding an index "
                "wins, the fill's bits elsewhere; the first piece may be dst.",
}

FAMILY: Final = Family(
    prose=_PROSE,
    association={
        "scatter Add": "each position's updates chained left to right in C order of the "
                       "updates, from +0 + into's element: float32 for floats narrower than "
                       "it (one rounding into the dtype), each part of a complex number apart.",
    },
    algorithms={
        "sort": f"order keys (bits mapped so that unsigned order is the total order, every "
                f"NaN one key; complex64 one 64-bit key, complex128 two, sorted least "
                f"significant first); rows of {RADIX_MIN} or more 32- or 64-bit keys by a "
                f"stable byte-wise LSD radix sort (a 32-bit key packed above its position), "
                f"others by NumPy's stable sort; a top-k of at most {TOP_K_FRACTION:g} of the "
                f"row chooses its k by partition and a scan in position order, then sorts "
                f"the k alone.",
        "numbering": "binary search of each element's order keys among its row's keys.",
    },
    prepared=PREPARED,
    direct=DIRECT,
)

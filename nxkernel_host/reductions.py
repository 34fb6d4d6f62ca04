"""The host library's reduce, scan and fold family: their statement.

The hooks live in ``reduce``, ``scan`` and ``fold``, over the rows of terms
and the rounding ``rowterms`` gives. ``ASSOCIATION`` and ``ALGORITHMS``
state the orders and algorithms they keep.
"""

from __future__ import annotations

from typing import Final

from .family import Family
from .reduce import prepare_reduce
from .scan import prepare_scan

__all__ = ["ALGORITHMS", "ASSOCIATION", "FAMILY"]


# ---------------------------------------------------------------------------
# The family's statements
# ---------------------------------------------------------------------------

_REDUCE_PROSE: Final = (
    "every reduction at every dtype it accepts, over Plain and Padded loads of any program: "
    "Monoid Sum and Prod (integers wrap in their carrier, float Sum and Prod in lane order), "
    "Max and Min (booleans any and all), Arg (the first position with the extreme's bits, "
    "the first NaN), Logsumexp and Moments (see algorithms); a NaN Max, Min or Arg result is "
    "the first NaN term's bits; a NaN float or complex Sum, Prod, Logsumexp or Moments "
    "result (each NaN part of a complex one) is the positive quiet NaN, whatever NaNs it met. "
    "It declines nothing.")

_SCAN_PROSE: Final = (
    "every scan at every dtype its reduction accepts, forward and reverse, with or without a "
    "carry (the carrier state before term 0): float Sum and Prod and the Logsumexp and "
    "Moments states by the odd/even network with the carry as state 0 (a Sum without one "
    "from +0: its state 0 is +0 + term 0), integer, boolean, "
    "Max, Min and Arg scans exactly. An Arg scan's position is the term's number in scan "
    "order (from the end of the axis where reverse), so a reverse scan's prefix law holds "
    "for positions too. It declines nothing.")

_FOLD_PROSE: Final = (
    "every fold at every dtype Add takes: each element is +0 plus the x elements the padded "
    "load reads from it, added in C order of the taps, narrow floats in float32 and rounded "
    "once, integers wrapping. Declines nothing; bool and bit, which Add does not take, do not "
    "fit (WRONG_DTYPE, shape.fold_refusal).")


#: The order and grouping of each float sum, product and scan.
ASSOCIATION: Final = {
    "reduce Sum": (
        "lane order (design.md §6): blocks of 1024 terms; in a block, 16 lanes, term t into "
        "lane t mod 16, each lane chained from +0; lanes combined i += i+8 (i < 8), "
        "i += i+4, i += i+2, then 0 += 1; blocks combined in a binary tree whose left part "
        "is the largest power of two below the count. In the carrier (float32 for the narrow "
        "floats); a complex Sum is two such sums, one per part. Terms are numbered in C order "
        "of the reduced axes. Barring overflow and underflow, within γ(n − 1) Σ|x| of the "
        "exact sum, then rounded once into the destination."),
    "reduce Prod": (
        "lane order as for Sum, each lane chained from 1 (for real floats the same bits as "
        "from its first term, since 1·x is x); a complex Prod by Prog's Mul with each lane "
        "chained from its first term and a lane without terms left out of the lane "
        "combinations. Within a relative γ(n − 1) (complex: normwise γ(2n − 2)); an empty "
        "product is 1."),
    "scan": (
        "float and complex Sum and Prod scans (complex Sum part by part, complex Prod by "
        "Prog's Mul), and the Logsumexp and Moments states, by the contract's odd/even "
        "network along the axis in scan order, with the carry, where given, as state 0 "
        "(result i is then the network's result i + 1). Result i passes through at most "
        "D = max(0, 2⌈log₂(k + 1)⌉ − 1) combinations, k = i (i + 1 with a carry): a Sum "
        "within γ(D) Σ|x| (the carry counted among the x); a Prod, each of whose "
        "multiplications reaches the whole product, within a relative γ(k) (complex: "
        "normwise γ(2k)), in the carrier, then rounded once into the destination. "
        "Integer, boolean, Max, Min and Arg scans are exact."),
    "fold": (
        "each output is +0 plus the x elements its index is read from, added left to right "
        "in C order of the taps (the window axes), in the dtype Add computes in: within "
        "γ(t − 1) Σ|x| for t taps, then rounded once into the destination."),
}

#: Logsumexp's and Moments' algorithms and bounds.
ALGORITHMS: Final = {
    "Logsumexp (reduce)": (
        "m = the terms' maximum (exact; NaN where a term is); where m is finite, "
        "lse = m + log s with s = Σ exp(x − m): x − m rounded once in the carrier c (float32 "
        "for float32 and narrower, float64 for float64), exp in c by NumPy (within 4 ulps of "
        "c), the sum in float64 in lane order, log and m + log s in float64; then rounded "
        "once into the destination. Special values: −∞ for no term or terms all −∞, +∞ "
        "where m is +∞ (a term is, none NaN), NaN where a term is. Bound, barring overflow "
        "and underflow, b the largest |x|, n the terms: |lse − L| ≤ (2b + 9)·u_c + "
        "(n + 2b + 3 ln n + 3)·u₆₄ before the rounding into the destination."),
    "Moments (reduce)": (
        "two passes in float64 (terms widen exactly): mean = (lane-order sum of x)/n, "
        "variance = (lane-order sum of (x − mean)²)/n. NaN for no term or where a term is; "
        "with an infinite term and no NaN the mean is the sum of the infinities (NaN with "
        "both signs) and the variance NaN; the variance is never negative. Bounds, barring "
        "overflow and underflow, u = 2⁻⁵³, μ and σ² the exact mean and variance: "
        "|mean − μ| ≤ δ = γ(n)·Σ|x|/n, |var − σ²| ≤ γ(n + 3)·σ² + (1 + γ(n + 3))·δ², "
        "before the rounding into the destination."),
    "Logsumexp (scan)": (
        "the states are log-sum-exps in float64 (a term's is the term, the carry's is "
        "itself), combined by the odd/even network with lse(a, b) = h + g(l − h), h and l "
        "the larger and smaller (NaN where either is, ±∞ where h is), g(d) = log1p(e^d) "
        "in float64 arithmetic (e^d = 2^k·e^r, k = round(d/ln 2), e^r by the Taylor "
        "series to r¹³/13!, +0 for d ≤ −708; log1p by fdlibm's method, its exponent 0 "
        "or 1), within 1.5·u of log1p(e^d) for the rounded d. lse is "
        "1-Lipschitz and each combination errs by at most (2B + 3)·u, u = 2⁻⁵³, B the "
        "largest |state| (at most b + ln(k + 1), b the largest |x|, the carry counted), so "
        "|result i − L| ≤ D·(2B + 3)·u, D the network's combinations (see scan), to first "
        "order, before the rounding into the destination."),
    "Moments (scan)": (
        "the states are (count, mean, M2) in float64: a term's is (1, x, 0), with M2 NaN "
        "for an infinite or NaN x; the carry's is (count, mean, variance·count). They "
        "combine by the odd/even network with Chan's merge: n = na + nb, d = mb − ma, "
        "mean = ma + d·(nb/n), M2 = M2a + M2b + d²·(na·(nb/n)); a state of count 0 leaves "
        "the other; an infinite or NaN mean gives mean ma + mb (the sum of the infinities) "
        "and M2 NaN. The variance is M2/n, never negative. Bounds to first order, u = 2⁻⁵³, "
        "D the network's combinations, M the largest |x| (and |carry mean|), μ and σ² the "
        "exact moments of the terms up to i: |mean − μ| ≤ 7·D·u·M and |var − σ²| ≤ "
        "D·u·(6σ² + 10·√D·M·σ), before the rounding into the destination."),
}

#: The ``reductions`` family: reduce, scan and fold.
FAMILY: Final = Family(
    prose={"reduce": _REDUCE_PROSE, "scan": _SCAN_PROSE, "fold": _FOLD_PROSE},
    prepared={"reduce": prepare_reduce, "scan": prepare_scan},
    association=ASSOCIATION,
    algorithms=ALGORITHMS,
)

"""Exact references for every kernel: what the conformance kit holds results to.

``evaluator.evaluate`` gives what a program computes; this package gives what
the kernels around programs compute. Everything here works on host elements (NumPy
arrays of ``Dtype.numpy_dtype``, sub-byte dtypes unpacked) and never passes
bits through float arithmetic where the contract fixes them:

- **Bits and order.** ``units`` views elements as their bytes; ``same_bits``,
  ``is_nan`` and ``is_signalling`` read bits; ``order_keys`` gives sort keys in
  the contract's total order (−inf < … < −0 < +0 < … < +inf < NaN, every NaN
  one key; complex by real then imaginary part, a NaN part making a NaN;
  integers by value; false < true).
- **Loads and moves.** ``pad`` (a Padded load: lo, hi, crops, interior,
  windows), ``gather``, ``range_gather``, ``scatter``, ``sort``, ``numbering``,
  ``assemble`` and ``fold_sources`` (which operand index each element of a
  fold's x reads), each copying bits.
- **Sums.** ``exact_sums`` rounds the exact sum of each row once to float64
  with ``math.fsum`` and gives Σ|x| beside it; ``two_product`` splits a product
  of float64s exactly (Veltkamp/Dekker), so ``contract_terms`` gives every
  output of a contraction as exact terms. ``sum_bound`` and ``within`` turn the
  contract's bounds into the interval a result stored into its destination
  must lie in (the store rule is monotone).
- **Reductions and scans.** ``terms`` lays a program output's terms along a
  last axis in C order of the reduced axes; ``reduce_fixed`` computes the
  results whose bits the contract fixes (integer and boolean Sum and Prod,
  Max, Min, Arg); ``extreme_scan`` and ``int_scan`` their scans.
- **Transforms, attention, routines.** ``dft`` (complex128 NumPy FFTs, far
  inside any bound the kit states), ``attention`` in float64, and residuals of
  the matrix routines (``residual``).

Its modules: ``_bits`` (bits and the total order), ``_moves`` (loads and
moves), ``_sums`` (sums, bounds, reductions and scans) and ``_algebra``
(contractions, transforms, attention, routines).
"""

from ._algebra import attention, contract_terms, dft
from ._bits import abs_values, is_nan, is_signalling, order_keys, to_float64, units, zeros
from ._moves import assemble, fold_sources, gather, numbering, pad, range_gather, scatter, sort
from ._sums import (
    exact_prefix_products,
    exact_prefix_sums,
    exact_products,
    exact_sums,
    extreme_scan,
    int_scan,
    reduce_fixed,
    sum_bound,
    terms,
    two_product,
    within,
)

__all__ = [
    "abs_values",
    "assemble",
    "attention",
    "contract_terms",
    "dft",
    "exact_prefix_products",
    "exact_prefix_sums",
    "exact_products",
    "exact_sums",
    "extreme_scan",
    "fold_sources",
    "gather",
    "int_scan",
    "is_nan",
    "is_signalling",
    "numbering",
    "order_keys",
    "pad",
    "range_gather",
    "reduce_fixed",
    "scatter",
    "sort",
    "sum_bound",
    "terms",
    "to_float64",
    "two_product",
    "units",
    "within",
    "zeros",
]

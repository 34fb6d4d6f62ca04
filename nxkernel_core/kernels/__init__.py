"""Every kernel of ``S`` defined once: one record per kernel, one module per family.

- ``record``: the record type :class:`~.record.Kernel` and the shape and
  refusal rules' shared parts;
- ``attributes``: the checks specs make of their attributes;
- ``loads``: load specs, the loop's shape and the loop rules;
- the families: ``elementwise`` (map), ``reductions`` (reduce, scan, fold),
  ``moves`` (gather, range_gather, scatter, sort, numbering, assemble),
  ``contraction`` (contract), ``fourier`` (fft), ``matrices`` (cholesky, lu,
  qr, svd, eigh, eig, solve_triangular), ``attention``; each defines its
  kernels' specs, shape rules, dtype rules, refusal rules, fit checks and
  records;
- ``registry``: the records in the contract's order.

Users import specs from :mod:`nxkernel_core.spec`, shape rules from
:mod:`nxkernel_core.shape` and fit checks from :mod:`nxkernel_core.fits`.
"""

from .record import Kernel
from .registry import KERNEL_NAMES, KERNELS, kernel

__all__ = ["KERNELS", "KERNEL_NAMES", "Kernel", "kernel"]

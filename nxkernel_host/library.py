"""The host library: kernels for host memory, assembled from its families.

It computes on the host and on memory devices (``rig.memory_device``). Each
kernel family lives in its own module and exports a ``FAMILY`` (see
``family``); this module ties them into the object
the ``host`` entry point returns, with one statement for the whole library.
A kernel no family computes declines every case, and the statement says so.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_core.dtype import Dtype
from nxkernel_core.kernel import KERNEL_NAMES, Call, KernelStatement, Statement, gamma, unit_roundoff
from nxkernel_core.layout import Layout
from nxkernel_core.rig import Rig

from .family import Family, Hook, Kernel, Prepare

#: The family modules, in the order their statements are listed.
FAMILIES: Final = ("elementwise", "reductions", "moves", "contraction", "fourier", "matrices",
                   "attention")

NAME: Final = "host"


def _load_families() -> list[Family]:
    families = []
    for name in FAMILIES:
        try:
            module = importlib.import_module(f"{__package__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__package__}.{name}":
                raise
            continue
        families.append(module.FAMILY)
    return families


def _declines_everything(kernel: str) -> tuple[Kernel, KernelStatement]:
    reason = f"host computes no {kernel}"

    def kernel_fn(spec: Any, dsts: Sequence[Array], operands: Sequence[Array]) -> Answer:
        return Answer.DECLINED

    return kernel_fn, KernelStatement(f"declines every case: {reason}", lambda call: reason)


class HostLibrary:
    """The ``host`` kernel library (see the module docstring)."""

    name: Final = NAME
    priority: Final = 0

    def __init__(self) -> None:
        kernels: dict[str, Kernel] = {}
        statements: dict[str, KernelStatement] = {}
        association: dict[str, str] = {}
        algorithms: dict[str, str] = {}
        open_choices: dict[str, str] = {}
        prepared: dict[str, Prepare] = {}
        error_factor: Callable[[int, Dtype], float] = _ceiling
        ulps: dict[str, Mapping[str, int]] = {}
        for fam in _load_families():
            kernels.update(fam.kernels)
            statements.update(fam.statements)
            association.update(fam.association)
            algorithms.update(fam.algorithms)
            open_choices.update(fam.open_choices)
            prepared.update(fam.prepared)
            ulps.update(fam.ulps)
            if fam.error_factor is not None:
                error_factor = fam.error_factor
        for k in KERNEL_NAMES:
            if k not in kernels:
                kernels[k], statements[k] = _declines_everything(k)
        self._prepared: Final = prepared
        self.statement: Final = Statement(
            library=NAME,
            summary="computes on host memory (every device that shares it) with NumPy and "
            "Numba; results do not depend on layouts or thread counts.",
            computes=statements,
            association=association,
            error_factor=error_factor,
            algorithms=algorithms,
            open_choices=open_choices,
            concurrent=True,
            ulps=ulps,
        )
        for k in KERNEL_NAMES:
            setattr(self, k, kernels[k])

    def __repr__(self) -> str:
        return "HostLibrary()"

    def computes_on(self, device: Rig) -> bool:
        """True for the host and the memory devices (``rig.memory_device``): the
        devices whose memory is the host's and whose work this process runs
        directly. A device another library emulates on host memory (the CUDA
        library's ``cuda-emu``) is left to that library."""
        return device.shares_host_memory and device.model in ("host", "memory")

    def prepare(self, spec: Any, dsts: tuple[tuple[Dtype, Layout], ...],
                operands: tuple[tuple[Dtype, Layout], ...], device: Rig) -> Hook | None:
        """The caller's hook for calls of this signature (the spec, the fresh
        destinations' and the operands' dtypes and layouts, on ``device``):
        a kernel body that computes a call that fits, the door passed; None
        where the kernel has no prepared form or the call does not fit."""
        prep = self._prepared.get(spec.kernel)
        return None if prep is None else prep(spec, dsts, operands)

    def declines(self, call: Call) -> str | None:
        """Why this library declines ``call``, or ``None``."""
        return self.statement.declines(call)


def _ceiling(k: int, dt: Dtype) -> float:
    """The contract's ceiling γ(2K + 2): what holds while no family states e(K)."""
    return gamma(2 * k + 2, unit_roundoff(dt))


#: The library object.
library: Final = HostLibrary()

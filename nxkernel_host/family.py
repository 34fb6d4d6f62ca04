"""What a kernel family module of the host library provides.

Each family module (``elementwise``, ``reductions``, ``moves``, ...) exports a
``FAMILY`` of this type: its kernels by name, each kernel's statement, and the
parts of the library's statement the family states (association, algorithms,
open choices, ulps). ``library`` assembles the families into one library.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, final

from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_core.dtype import Dtype
from nxkernel_core.kernel import KernelStatement
from nxkernel_core.layout import Layout

#: A kernel: its spec, then its destinations, then its operands.
Kernel = Callable[[Any, Sequence[Array], Sequence[Array]], Answer]

#: A prepared kernel (the caller's ``Hook``): computes a call that fits into
#: fresh C-contiguous destinations while the caller holds the claims.
Hook = Callable[[Any, Sequence[Array], Sequence[Array]], None]

#: Prepares a kernel for one signature: the spec, the destinations' and the
#: operands' (dtype, layout) pairs; a ``Hook`` where the call fits, else None.
Prepare = Callable[[Any, tuple[tuple[Dtype, Layout], ...], tuple[tuple[Dtype, Layout], ...]],
                   Hook | None]


@final
@dataclass(frozen=True)
class Family:
    """A family's kernels and statements; every kernel has a statement."""

    kernels: Mapping[str, Kernel]
    statements: Mapping[str, KernelStatement]
    association: Mapping[str, str] = field(default_factory=dict)
    algorithms: Mapping[str, str] = field(default_factory=dict)
    open_choices: Mapping[str, str] = field(default_factory=dict)
    #: e(K, accumulator dtype), stated by the family that computes contractions.
    error_factor: Callable[[int, Dtype], float] | None = None
    #: The kernels the caller's warm path may call prepared (see ``Prepare``).
    prepared: Mapping[str, Prepare] = field(default_factory=dict)
    #: The ulps of the inexact kinds (``Statement.ulps``), stated by the family
    #: whose kernels compute programs' kinds.
    ulps: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if set(self.kernels) != set(self.statements):
            raise ValueError(
                f"Family: kernels {sorted(self.kernels)} and statements "
                f"{sorted(self.statements)} differ"
            )
        if not set(self.prepared) <= set(self.kernels):
            raise ValueError(f"Family: prepared kernels {sorted(self.prepared)} are not all kernels")

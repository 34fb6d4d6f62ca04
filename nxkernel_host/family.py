"""What a kernel family module of the host library states.

Each family module (``elementwise``, ``reductions``, ``moves``, ...) computes
its kernels in hooks (``Hook``: a call that fits, the door passed; the
``nxkernel_core.library.Library`` base class runs the fit, the declines and
the door before them) and exports a ``FAMILY`` of this type: the statement's
prose of each kernel and the parts of the library's statement the family
states (association, algorithms, open choices, ulps), and the kernels the
caller's warm path may call prepared. ``library`` ties them together.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, final

from nxkernel_core.array import Array
from nxkernel_core.dtype import Dtype
from nxkernel_core.layout import Layout

#: A hook, and a prepared kernel (the caller's ``Hook``): computes a call that
#: fits into its destinations while the caller or the door holds the claims.
Hook = Callable[[Any, Sequence[Array], Sequence[Array]], None]

#: Prepares a kernel for one signature of a call that fits: the spec, the
#: destinations' and the operands' (dtype, layout) pairs; a ``Hook``, or None
#: where the kernel has no prepared form for it.
Prepare = Callable[[Any, tuple[tuple[Dtype, Layout], ...], tuple[tuple[Dtype, Layout], ...]],
                   Hook | None]


@final
@dataclass(frozen=True)
class Family:
    """A family's statement parts and prepared kernels."""

    #: The statement's prose of each kernel the family computes.
    prose: Mapping[str, str]
    association: Mapping[str, str] = field(default_factory=dict)
    algorithms: Mapping[str, str] = field(default_factory=dict)
    open_choices: Mapping[str, str] = field(default_factory=dict)
    #: The kernels the caller's warm path may call prepared (see ``Prepare``).
    prepared: Mapping[str, Prepare] = field(default_factory=dict)
    #: The kernels prepared for any call of a signature, destinations not
    #: fresh (they may be operands, or views): the library's own entry
    #: computes each signature's calls by the hook these give.
    direct: Mapping[str, Prepare] = field(default_factory=dict)
    #: The ulps of the inexact kinds (``Statement.ulps``), stated by the family
    #: whose kernels compute programs' kinds.
    ulps: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for part in (self.prepared, self.direct):
            if not set(part) <= set(self.prose):
                raise ValueError(f"Family: prepared kernels {sorted(part)} are not all kernels")

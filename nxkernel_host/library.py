"""The host library: kernels for host memory, assembled from its families.

It computes on the host and on memory devices (``rig.memory_device``), the
base class's ``models``: a device another library emulates on host memory
(the CUDA library's ``cuda-emu``) is left to that library.
``HostLibrary`` is a :class:`nxkernel_core.library.Library`: the base class
runs each call's fit, the stated declines (``_declines_contract``, the only
kernel the host declines cases of), the door, then the hook (``_map``,
``_reduce``, ...). Each kernel family lives in its own module, with its hooks
and a ``FAMILY`` (see ``family``) stating its kernels' prose and its parts of
the library's statement; this module ties them into the object the ``host``
entry point returns, with one statement for the whole library.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Final

from nxkernel_core.array import Array
from nxkernel_core.dtype import Dtype
from nxkernel_core.layout import Layout
from nxkernel_core.library import Library
from nxkernel_core.rig import Rig

from . import (
    attention,
    contraction,
    elementwise,
    fold,
    fourier,
    gathers,
    matrices,
    moves,
    reduce,
    reductions,
    scan,
    sorts,
)
from .family import Family, Hook, Prepare

__all__ = ["FAMILIES", "HostLibrary", "library"]

#: The families, in the order their statements are listed.
FAMILIES: Final[tuple[Family, ...]] = (
    elementwise.FAMILY, reductions.FAMILY, moves.FAMILY, contraction.FAMILY, fourier.FAMILY,
    matrices.FAMILY, attention.FAMILY)


def _merged(part: str) -> dict[str, Any]:
    """One part of the families' statements (``prose``, ``association``, ...), merged."""
    out: dict[str, Any] = {}
    for fam in FAMILIES:
        out.update(getattr(fam, part))
    return out


class HostLibrary(Library):
    """The ``host`` kernel library (see the module docstring)."""

    name: ClassVar[str] = "host"
    summary: ClassVar[str] = (
        "computes on host memory (every device that shares it) with NumPy and Numba; results "
        "do not depend on layouts or thread counts.")
    concurrent: ClassVar[bool] = True
    prose: ClassVar[Mapping[str, str]] = _merged("prose")
    association: ClassVar[Mapping[str, str]] = _merged("association")
    algorithms: ClassVar[Mapping[str, str]] = _merged("algorithms")
    open_choices: ClassVar[Mapping[str, str]] = _merged("open_choices")
    ulps: ClassVar[Mapping[str, Mapping[str, int]]] = _merged("ulps")
    _prepared: ClassVar[Mapping[str, Prepare]] = _merged("prepared")
    _direct: ClassVar[Mapping[str, Prepare]] = _merged("direct")

    # The hooks: each computes a call that fits, the door passed.
    _map = staticmethod(elementwise.map_)
    _reduce = staticmethod(reduce.reduce)
    _scan = staticmethod(scan.scan)
    _fold = staticmethod(fold.fold)
    _gather = staticmethod(gathers.gather)
    _range_gather = staticmethod(gathers.range_gather)
    _scatter = staticmethod(gathers.scatter)
    _sort = staticmethod(sorts.sort)
    _numbering = staticmethod(sorts.numbering)
    _assemble = staticmethod(gathers.assemble)
    _contract = staticmethod(contraction.contract)
    _fft = staticmethod(fourier.fft)
    _cholesky = staticmethod(matrices.cholesky)
    _lu = staticmethod(matrices.lu)
    _qr = staticmethod(matrices.qr)
    _svd = staticmethod(matrices.svd)
    _eigh = staticmethod(matrices.eigh)
    _eig = staticmethod(matrices.eig)
    _solve_triangular = staticmethod(matrices.solve_triangular)
    _attention = staticmethod(attention.attention)

    # The stated declines: the host declines cases of contract alone.
    _declines_contract = staticmethod(contraction.declines_call)

    def error_factor(self, k: int, dt: Dtype) -> float:
        """e(K) of the host's contractions (``contraction.error_factor``)."""
        return contraction.error_factor(k, dt)

    def _hook_for(self, kernel: str, spec: Any, dsts: Sequence[Array],
                  operands: Sequence[Array]) -> Hook | None:
        """The hook for every call of this signature through the library's own
        entry: the family's ``direct`` form where it has one, else the
        kernel's hook."""
        prep = self._direct.get(kernel)
        if prep is None:
            return self._hook(kernel)
        return prep(spec, tuple([(a.dtype, a.layout) for a in dsts]),
                    tuple([(a.dtype, a.layout) for a in operands]))

    def prepare(self, spec: Any, dsts: tuple[tuple[Dtype, Layout], ...],
                operands: tuple[tuple[Dtype, Layout], ...], device: Rig) -> Hook | None:
        """The caller's hook for calls of this signature that fit (the spec, the
        fresh destinations' and the operands' dtypes and layouts, on
        ``device``): a hook that computes such a call, the door passed; None
        where the kernel has no prepared form. The caller's plan has checked
        the shape and refusal rules (the whole fit of a map, reduce or scan;
        a move's prepared form checks its dtype rule itself, and has none for
        a signature that does not fit), and the host declines no case of a
        prepared kernel."""
        prep = self._prepared.get(spec.kernel)
        return None if prep is None else prep(spec, dsts, operands)


#: The library object.
library: Final = HostLibrary()

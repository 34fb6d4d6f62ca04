"""The CUDA kernel library ``nx.cuda``: the object the ``cuda`` entry point brings.

It computes on ``cuda:N`` (a GPU's memory) and ``cuda-emu:N`` (the emulated
device, host memory, kernels run on the CPU), and nowhere else.

At this stage it declines every case of every kernel, before touching any
array, and its statement says so: the build, the devices and the launch path
(:mod:`nxkernel_cuda.build`, :mod:`nxkernel_cuda.device`,
:mod:`nxkernel_cuda.launch`) and the emulator are in place, and the kernels
come in a later change. The statement's summary also says whether CUDA GPUs
are usable in this process, and why not (:func:`~nxkernel_cuda.device.availability`),
so ``nxkernel info`` explains the library's state on a machine without a GPU.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final, final

from nxkernel_core.answer import Answer
from nxkernel_core.kernel import KERNEL_NAMES, Call, KernelStatement, Statement, gamma, unit_roundoff

from .device import CudaRig, availability

if TYPE_CHECKING:
    from nxkernel_core.array import Array
    from nxkernel_core.dtype import Dtype
    from nxkernel_core.rig import Rig

__all__ = ["LIBRARY", "NAME", "CudaLibrary"]

#: The library's name.
NAME: Final = "nx.cuda"

_DECLINE: Final = (
    f"{NAME} declines every case for now: its devices, build and emulator are in place, its kernels are not"
)


def _declines(call: Call) -> str:
    return _DECLINE


def _error_factor(k: int, dt: Dtype) -> float:
    # It computes no contraction yet, so the contract's ceiling holds trivially.
    return gamma(2 * k + 2, unit_roundoff(dt))


def _statement() -> Statement:
    ok, why = availability()
    state = f"CUDA GPUs here: {why}" if ok else f"CUDA GPUs here: unavailable: {why}"
    return Statement(
        library=NAME,
        summary=(
            "CUDA C++ kernels (NVRTC cubins, CuPy RawModules) on cuda:N device memory, and the same"
            " kernels on the CPU on cuda-emu:N (NXKERNEL_CUDA_EMULATE=1). It declines every case for"
            f" now. {state}."
        ),
        computes={k: KernelStatement(_DECLINE, _declines) for k in KERNEL_NAMES},
        association={
            "all": "none yet: it computes no sum, product, scan, contraction or attention. Its"
            " reductions will sum in lane order and scan by the odd/even network (design.md §6),"
            " as the host library does, for the same bits.",
        },
        error_factor=_error_factor,
        algorithms={"all": "none yet: it computes nothing"},
        open_choices={"all": "none yet: it computes no routine"},
        concurrent=True,
    )


@final
class CudaLibrary:
    """``nx.cuda``: computes on CUDA devices (for now, declining every case)."""

    __slots__ = ("_lock", "_statement")

    name: Final = NAME
    priority: Final = 0

    def __init__(self) -> None:
        self._statement: Statement | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return "CudaLibrary()"

    @property
    def statement(self) -> Statement:
        """The statement, made on first use (it probes CUDA's availability)."""
        with self._lock:
            if self._statement is None:
                self._statement = _statement()
            return self._statement

    def computes_on(self, device: Rig) -> bool:
        """True for ``cuda:N`` and ``cuda-emu:N``."""
        return isinstance(device, CudaRig)

    def _decline(self, spec: object, dsts: Sequence[Array], operands: Sequence[Array]) -> Answer:
        """Answer DECLINED, reading and writing nothing."""
        return Answer.DECLINED

    map = reduce = scan = fold = gather = range_gather = scatter = sort = _decline
    numbering = assemble = contract = fft = cholesky = lu = qr = svd = _decline
    eigh = eig = solve_triangular = attention = _decline


#: The library the plugin brings.
LIBRARY: Final = CudaLibrary()

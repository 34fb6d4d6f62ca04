"""The CUDA kernel library ``nx.cuda``: the object the ``cuda`` entry point brings.

It computes on ``cuda:N`` (a GPU's memory) and ``cuda-emu:N`` (the emulated
device: host memory, the same kernels run on the CPU), and nowhere else. Its
kernels live one family a module:

* :mod:`~nxkernel_cuda.elementwise`: map, one kernel generated per program;
* :mod:`~nxkernel_cuda.reductions`: reduce and scan, one source per program
  output, in lane order and by the odd/even network (design.md §6), so Sum,
  Prod and scan results are the host library's bits;
* :mod:`~nxkernel_cuda.moves`: gather, range gather, scatter (deterministic),
  sort and top-k (stable), numbering, assemble;
* :mod:`~nxkernel_cuda.contraction`: contract on SIMT cores, each output a
  chain in K order, so its bits are the same on every launch.

Every kernel checks that the call fits (answering ``BAD_ARITY``,
``WRONG_DTYPE`` or ``SHAPE_MISMATCH`` otherwise, and ``WRONG_DEVICE`` for
arrays off its devices), then answers ``DECLINED`` for a case its statement
declines, then claims its arrays through the door (a refusal there), all
before any work; ``DONE`` means the work is queued on the device's stream
(run to its end on ``cuda-emu``). The statement says what each kernel
computes and declines (in words and as the predicate the conformance kit
calls), the association of every sum, product and scan, e(K) (the
contraction's, :mod:`~nxkernel_cuda.contraction`), the ulp bounds of the transcendental
kinds, and that several threads may call the kernels at once. Its summary
also says whether CUDA GPUs are usable in this process, and why not
(:func:`~nxkernel_cuda.device.availability`).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final, final

from nxkernel_core.answer import Answer
from nxkernel_core.kernel import KERNEL_NAMES, Call, KernelStatement, Statement

from . import contraction, elementwise, moves, reductions
from .device import CudaRig, availability

if TYPE_CHECKING:
    from nxkernel_core.array import Array
    from nxkernel_core.dtype import Dtype
    from nxkernel_core.rig import Rig

__all__ = ["ASSOCIATION", "LIBRARY", "NAME", "CudaLibrary"]

#: The library's name.
NAME: Final = "nx.cuda"

_STATEMENTS: Final[dict[str, KernelStatement]] = {
    "map": KernelStatement(elementwise.PROSE, elementwise.declines),
    "reduce": KernelStatement(reductions.REDUCE_PROSE, reductions.declines_reduce),
    "scan": KernelStatement(reductions.SCAN_PROSE, reductions.declines_scan),
    "contract": contraction.STATEMENT,
    **{k: KernelStatement(moves.PROSE[k], moves.declines)
       for k in ("gather", "range_gather", "scatter", "sort", "numbering", "assemble")},
}

#: Why the kernels it does not compute decline.
_NOT_COMPUTED: Final[dict[str, str]] = {
    "fold": "nx.cuda computes no fold yet",
    "fft": "nx.cuda computes no Fourier transform",
    "attention": "nx.cuda computes no attention yet",
    "cholesky": "nx.cuda computes no matrix routine",
    "lu": "nx.cuda computes no matrix routine",
    "qr": "nx.cuda computes no matrix routine",
    "svd": "nx.cuda computes no matrix routine",
    "eigh": "nx.cuda computes no matrix routine",
    "eig": "nx.cuda computes no matrix routine",
    "solve_triangular": "nx.cuda computes no matrix routine",
}


def _declining(reason: str) -> KernelStatement:
    def declines(call: Call) -> str:
        return reason

    return KernelStatement(f"declines every case: {reason}", declines)


def _decline(spec: object, dsts: Sequence[Array], operands: Sequence[Array]) -> Answer:
    """Answer DECLINED, reading and writing nothing."""
    return Answer.DECLINED


#: The order and grouping of each float sum, product and scan.
ASSOCIATION: Final = {
    "reduce Sum": (
        "lane order (design.md §6): blocks of 1024 terms; in a block, 16 lanes, term t into lane t mod 16, "
        "each lane chained from +0; lanes combined i += i+8 (i < 8), i += i+4, i += i+2, then 0 += 1; blocks "
        "combined in a binary tree whose left part is the largest power of two below the count. In the "
        "carrier (float32 for float32 and narrower, float64 for float64), terms numbered in C order of the "
        "reduced axes: the host library's bits, on every block size and grid. Barring overflow and "
        "underflow, within γ(n − 1) Σ|x| of the exact sum, then rounded once into the destination."),
    "reduce Prod": (
        "lane order as for Sum, each lane chained from 1 (the same bits as from its first term, since 1·x "
        "is x): within a relative γ(n − 1); an empty product is 1."),
    "scan": (
        "Sum and Prod scans by the contract's odd/even network along the axis in scan order (from the end "
        "where reversed), in the carrier, with the carry, where given, as state 0 (result i is then the "
        "network's result i + 1): the host library's bits. Result i passes through at most "
        "D = max(0, 2⌈log₂(k + 1)⌉ − 1) combinations, k = i (i + 1 with a carry): a Sum within γ(D) Σ|x| "
        "(the carry counted among the x), a Prod within a relative γ(D), then rounded once into the "
        "destination. Integer, boolean, Max and Min scans are exact."),
    "contract": contraction.ASSOCIATION,
    "attention": "none: nx.cuda computes no attention yet.",
}

_ALGORITHMS: Final = {
    "transcendental kinds": (
        "Exp, Exp2, Log, Log2, Log1p, Expm1, Sin, Cos, Tan, Asin, Acos, Atan, Sinh, Cosh, Tanh, Erf, Pow "
        "and Atan2 of float32 and the narrow floats compute in float64 and round once into the node's "
        "dtype: within 1 ulp (correctly rounded but where the float64 value's own error straddles a "
        "rounding point); of float64 they are libdevice's on a GPU (at most 2 ulps) and the C library's "
        "on cuda-emu (at most 2 ulps), so float64 transcendental bits may differ between the two. C99 "
        "Annex F's special values hold, after the NaN rule (the first NaN operand). Every other kind is "
        "exact: the reference evaluator's bits on both devices."),
    "Logsumexp": "none: nx.cuda declines Logsumexp reductions and scans.",
    "Moments": "none: nx.cuda declines Moments reductions and scans.",
}


def _error_factor(k: int, dt: Dtype) -> float:
    return contraction.error_factor(k, dt)


def _statement() -> Statement:
    ok, why = availability()
    state = f"CUDA GPUs here: {why}" if ok else f"CUDA GPUs here: unavailable: {why}"
    computes = {k: _STATEMENTS[k] if k in _STATEMENTS else _declining(_NOT_COMPUTED[k]) for k in KERNEL_NAMES}
    return Statement(
        library=NAME,
        summary=(
            "CUDA C++ kernels (NVRTC cubins, CuPy RawModules) on cuda:N device memory, and the same kernels "
            "on the CPU on cuda-emu:N (NXKERNEL_CUDA_EMULATE=1): map, reduce, scan, the moves and SIMT "
            f"contractions; its Sum, Prod and scan bits are the host library's. {state}."
        ),
        computes=computes,
        association=ASSOCIATION,
        error_factor=_error_factor,
        algorithms=_ALGORITHMS,
        open_choices={"all": "none: it computes no matrix routine"},
        concurrent=True,
    )


@final
class CudaLibrary:
    """``nx.cuda``: computes on CUDA devices (see the module's doc)."""

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

    def declines(self, call: Call) -> str | None:
        """Why this library declines ``call``, or None."""
        return self.statement.declines(call)

    map = staticmethod(elementwise.map)
    reduce = staticmethod(reductions.reduce)
    scan = staticmethod(reductions.scan)
    gather = staticmethod(moves.gather)
    range_gather = staticmethod(moves.range_gather)
    scatter = staticmethod(moves.scatter)
    sort = staticmethod(moves.sort)
    numbering = staticmethod(moves.numbering)
    assemble = staticmethod(moves.assemble)
    contract = staticmethod(contraction.contract)
    fold = staticmethod(_decline)
    fft = staticmethod(_decline)
    attention = staticmethod(_decline)
    cholesky = staticmethod(_decline)
    lu = staticmethod(_decline)
    qr = staticmethod(_decline)
    svd = staticmethod(_decline)
    eigh = staticmethod(_decline)
    eig = staticmethod(_decline)
    solve_triangular = staticmethod(_decline)


#: The library the plugin brings.
LIBRARY: Final = CudaLibrary()

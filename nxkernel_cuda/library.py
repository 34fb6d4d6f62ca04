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
* :mod:`~nxkernel_cuda.contraction`: contract on SIMT cores (each output an
  fma chain in K order, the same bits on every launch) and on tensor cores
  (mma.sync for bfloat16/float16 and int8 pairs, a fixed K order), with
  block scales, segments and complex accumulators;
* :mod:`~nxkernel_cuda.folds`: fold, each element's taps added in C order by
  one thread, so its bits are the host library's;
* :mod:`~nxkernel_cuda.fourier`: fft (C2c, R2c, C2r) by Stockham autosort
  passes and Bluestein's algorithm, deterministic;
* :mod:`~nxkernel_cuda.matrices`: cholesky, lu, qr, solve_triangular, eigh
  and svd, batched, one block a matrix in shared memory (eig declined);
* :mod:`~nxkernel_cuda.attention`: attention, fused flash attention (online
  softmax over key tiles, the program compiled in), deterministic.

It is a :class:`~nxkernel_core.library.Library`: the base class checks that
a call fits (the contract's fit rules, written once in the core: ``BAD_ARITY``,
``WRONG_DTYPE``, ``SHAPE_MISMATCH`` and scan's and contract's own), answers ``DECLINED`` for a case the
statement declines, then claims the arrays through the door (``WRONG_DEVICE``
for arrays off one CUDA device, or another refusal), all before any work;
then the family's hook queues the work, and ``DONE`` means it is queued on
the device's stream (run to its end on ``cuda-emu``). The statement says what each kernel
computes and declines (in words and as the predicate the conformance kit
calls), the association of every sum, product and scan, e(K) (the
contraction's, :mod:`~nxkernel_cuda.contraction`), the ulp bounds of the transcendental
kinds, and that several threads may call the kernels at once. Its summary
also says whether CUDA GPUs are usable in this process, and why not
(:func:`~nxkernel_cuda.device.availability`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any, ClassVar, Final, final

from nxkernel_core.answer import Answer
from nxkernel_core.door import door
from nxkernel_core.kernel import Statement
from nxkernel_core.library import Library

from . import (
    attention,
    codegen,
    contraction,
    elementwise,
    folds,
    fourier,
    loops,
    matrices,
    moves,
    nvrtc,
    reductions,
    statistics,
)
from .device import EMULATE_VARIABLE, availability, emulation_requested
from .launch import CudaRig

if TYPE_CHECKING:
    from nxkernel_core.array import Array
    from nxkernel_core.dtype import Dtype
    from nxkernel_core.rig import Rig

__all__ = ["ASSOCIATION", "LIBRARY", "NAME", "CudaLibrary"]

#: The library's name.
NAME: Final = "nx.cuda"

#: A family's kernel: computes a call that fits, is not declined and passed the door.
_Family = Callable[[Any, Sequence["Array"], Sequence["Array"]], None]


def _hook(kernel: _Family, prose: str
          ) -> Callable[[CudaLibrary, Any, Sequence[Array], Sequence[Array]], None]:
    """A hook calling ``kernel``, its docstring ``prose``: the statement's words
    for the kernel (the base class reads them there)."""

    def hook(self: CudaLibrary, spec: Any, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
        kernel(spec, dsts, operands)

    hook.__doc__ = prose
    return hook


#: The order and grouping of each float sum, product and scan.
ASSOCIATION: Final = {
    "reduce Sum": (
        "lane order (design.md §6): blocks of 1024 terms; in a block, 16 lanes, term t into lane t mod 16, "
        "each lane chained from +0; lanes combined i += i+8 (i < 8), i += i+4, i += i+2, then 0 += 1; blocks "
        "combined in a binary tree whose left part is the largest power of two below the count. In the "
        "carrier (float32 for float32 and narrower, float64 for float64), terms numbered in C order of the "
        "reduced axes: the host library's bits, on every block size and grid. Barring overflow and "
        "underflow, within γ(n − 1) Σ|x| of the exact sum, then rounded once into the destination. A "
        "complex Sum is two such sums, one per part, u the part's unit roundoff."),
    "reduce Prod": (
        "lane order as for Sum, each lane chained from 1 (the same bits as from its first term, since 1·x "
        "is x): within a relative γ(n − 1); an empty product is 1. A complex Prod multiplies by Prog's Mul "
        "in the same lane order, each lane chained from its first term (a lane without terms left out of "
        "the lane combination, never multiplied by 1): the host library's bits but for NaN parts' bits, "
        "within a normwise relative γ(2n − 2), u the part's unit roundoff."),
    "scan": (
        "Sum and Prod scans, and the Arg, Logsumexp and Moments states (see algorithms), by the contract's "
        "odd/even network along the axis in scan order (from the end "
        "where reversed), in the carrier, with the carry, where given, as state 0 (result i is then the "
        "network's result i + 1): the host library's bits. Result i passes through at most "
        "D = max(0, 2⌈log₂(k + 1)⌉ − 1) combinations, k = i (i + 1 with a carry): a Sum within γ(D) Σ|x| "
        "(the carry counted among the x), a Prod within a relative γ(D), then rounded once into the "
        "destination. Integer, boolean, Max, Min and Arg scans are exact. Complex Sum scans add part by part "
        "(each part within γ(D) Σ|x|) and complex Prod scans multiply by Prog's Mul (within a normwise "
        "relative γ(2D)), by the same network: the host library's bits but for NaN parts' bits."),
    **statistics.ASSOCIATION,
    "contract": contraction.ASSOCIATION,
    "fold": folds.ASSOCIATION,
    "fft": fourier.ASSOCIATION,
    "attention": attention.ASSOCIATION,
}

_ALGORITHMS: Final = {
    "attention": attention.ALGORITHM,
    "contract": contraction.ALGORITHM,
    "transcendental kinds": (
        "Exp, Exp2, Log, Log2, Log1p, Expm1, Sin, Cos, Tan, Asin, Acos, Atan, Sinh, Cosh, Tanh, Erf, Pow "
        "and Atan2 of float32 and the narrow floats compute in float64 and round once into the node's "
        "dtype: within 1 ulp (correctly rounded but where the float64 value's own error straddles a "
        "rounding point); of float64 they are libdevice's on a GPU (at most 2 ulps) and the C library's "
        "on cuda-emu (at most 2 ulps), so float64 transcendental bits may differ between the two, but "
        "Sin, Cos and Tan of 2^20 <= |x|, which reduce x by Payne–Hanek (nxk_trig.cuh, within 1 ulp: the "
        "host library's bits). C99 Annex F's special values hold exactly, and win over the NaN rule (the "
        "first NaN operand) where they fix a result: pow(x, ±0) = pow(1, y) = 1. Every other kind is "
        "exact: the reference evaluator's bits on both devices."),
    "complex kinds": (
        "complex64 and complex128 take no transcendental kind, Sqrt or Abs (Prog's domains), so none "
        "has an ulp bound: every complex kind gives the reference evaluator's bits on both devices. Mul "
        "is the textbook (ar·br − ai·bi) + i(ar·bi + ai·br), each product and sum rounded to the part "
        "dtype, never fused (the host library's and NumPy's formula; each part within 2u normwise); "
        "Fdiv and Recip are Smith's division with NumPy's branches (its branch for a zero divisor "
        "included) in float64, each part of the numerator divided by the scaled denominator, never "
        "multiplied by its reciprocal (so (0 + 2⁻⁵⁰i) / (0 − 2⁻¹⁰⁷⁴i) is (−inf, +0), upstream's, not "
        "NumPy's (−inf, NaN)); barring overflow and underflow each float64 part is within γ(7)·|x/y| of "
        "the exact quotient's, then each part rounds once (complex64 thus divides in float64); a NaN part "
        "they make is the canonical quiet NaN. Add, Sub and Neg are part by part with the float NaN "
        "rule; Maximum, Minimum and the comparisons order by the real part, then the imaginary part."),
    **statistics.ALGORITHMS,
    **matrices.ALGORITHMS,
    "fft": fourier.ALGORITHM,
}


@final
class CudaLibrary(Library):
    """``nx.cuda``: computes on CUDA devices (see the module's doc)."""

    name: ClassVar[str] = NAME
    summary: ClassVar[str] = (
        "CUDA C++ kernels (NVRTC cubins, CuPy RawModules) on cuda:N device memory, and the same kernels "
        "on the CPU on cuda-emu:N (NXKERNEL_CUDA_EMULATE=1): map, reduce, scan, the moves, "
        "contractions (SIMT and tensor cores), fold, fft, fused attention and the matrix routines but "
        "eig; its Sum, Prod, "
        "Moments, scan (but Logsumexp's, whose exp and log are the device's), fold and lu bits are the "
        "host library's."
    )
    concurrent: ClassVar[bool] = True
    association: ClassVar[Mapping[str, str]] = ASSOCIATION
    algorithms: ClassVar[Mapping[str, str]] = _ALGORITHMS
    open_choices: ClassVar[Mapping[str, str]] = matrices.OPEN_CHOICES
    ulps: ClassVar[Mapping[str, Mapping[str, int]]] = codegen.ULPS
    not_computed: ClassVar[Mapping[str, str]] = {
        "eig": "nx.cuda computes no eig (the nonsymmetric eigenproblem)"}

    def _make_statement(self) -> Statement:
        """The base's statement, its summary ending with whether CUDA GPUs are
        usable here (made on first use: the probe imports CuPy)."""
        ok, why = availability()
        state = f"CUDA GPUs here: {why}" if ok else f"CUDA GPUs here: unavailable: {why}"
        made = super()._make_statement()
        return dataclasses.replace(made, summary=f"{self.summary} {state}.")

    @property
    def unavailable(self) -> str | None:
        """Why this process can use no CUDA GPU, in one line (``None`` where it
        can): :func:`~nxkernel_cuda.device.availability`'s reason."""
        ok, why = availability()
        return None if ok else why

    @property
    def notes(self) -> tuple[str, ...]:
        """Lines for ``nxkernel info``: which NVRTC compiles, and why."""
        return (nvrtc.describe(),)

    def computes_on(self, device: Rig) -> bool:
        """True for ``cuda:N`` and ``cuda-emu:N``."""
        return isinstance(device, CudaRig)

    def absent(self, name: str) -> str | None:
        """Why no CUDA device called ``name`` is open, or None for a name not
        of the form ``cuda:N`` or ``cuda-emu:N`` (read by ``rig.device``)."""
        kind, _, index = name.partition(":")
        if kind not in ("cuda", "cuda-emu") or not index.isdigit():
            return None
        if kind == "cuda-emu":
            return None if emulation_requested() else f"emulation is off (set {EMULATE_VARIABLE}=1)"
        ok, why = availability()
        return why if not ok else "no such GPU here"

    def error_factor(self, k: int, dt: Dtype) -> float:
        """e(K): the contraction's (:func:`~nxkernel_cuda.contraction.error_factor`)."""
        return contraction.error_factor(k, dt)

    def _door(self, dsts: Sequence[Array], operands: Sequence[Array]
              ) -> AbstractContextManager[Answer | None]:
        """The core's door on the CUDA device of the first array;
        ``WRONG_DEVICE`` where that is not a CUDA device."""
        dev = loops.cuda_device([*dsts, *operands])
        if dev is None:
            return nullcontext(Answer.WRONG_DEVICE)
        return door(dsts, operands, device=dev)

    _map = _hook(elementwise.map, elementwise.PROSE)
    _reduce = _hook(reductions.reduce, reductions.REDUCE_PROSE)
    _declines_reduce = staticmethod(reductions.declines_reduce)
    _scan = _hook(reductions.scan, reductions.SCAN_PROSE)
    _declines_scan = staticmethod(reductions.declines_scan)
    _gather = _hook(moves.gather, moves.PROSE["gather"])
    _range_gather = _hook(moves.range_gather, moves.PROSE["range_gather"])
    _scatter = _hook(moves.scatter, moves.PROSE["scatter"])
    _declines_scatter = staticmethod(moves.declines)
    _sort = _hook(moves.sort, moves.PROSE["sort"])
    _declines_sort = staticmethod(moves.declines)
    _numbering = _hook(moves.numbering, moves.PROSE["numbering"])
    _declines_numbering = staticmethod(moves.declines)
    _assemble = _hook(moves.assemble, moves.PROSE["assemble"])
    _contract = _hook(contraction.contract, contraction.PROSE)
    _declines_contract = staticmethod(contraction.declines)
    _fold = _hook(folds.fold, folds.PROSE)
    _fft = _hook(fourier.fft, fourier.PROSE)
    _declines_fft = staticmethod(fourier.declines)
    _attention = _hook(attention.attention, attention.PROSE)
    _declines_attention = staticmethod(attention.declines)
    _cholesky = _hook(matrices.cholesky, matrices.PROSE["cholesky"])
    _lu = _hook(matrices.lu, matrices.PROSE["lu"])
    _qr = _hook(matrices.qr, matrices.PROSE["qr"])
    _svd = _hook(matrices.svd, matrices.PROSE["svd"])
    _eigh = _hook(matrices.eigh, matrices.PROSE["eigh"])
    _solve_triangular = _hook(matrices.solve_triangular, matrices.PROSE["solve_triangular"])
    _declines_cholesky = _declines_lu = _declines_qr = staticmethod(matrices.declines)
    _declines_svd = _declines_eigh = _declines_solve_triangular = staticmethod(matrices.declines)


#: The library the plugin brings.
LIBRARY: Final = CudaLibrary()

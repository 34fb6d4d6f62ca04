"""nx.cuda's kernels at the least alignment the core allows (``Dtype.alignment``:
a complex64 at 4 bytes, a complex128 at 8, every other byte-wide dtype at its
width): each array starts ``alignment`` bytes past a ``2 * alignment``
boundary, so a complex64 at an address = 4 (mod 8). A GPU faults on a load or
store misaligned for its width ("misaligned address", CUDA error 716, which
loses the device); so does the emulator's memory checker, so each call here
runs on ``cuda-emu`` as it would on a GPU. Results are held to the host
library's bits, computed from 64-byte-aligned copies of the same values."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from nxkernel_core import dtype as D
from nxkernel_core import shape as SH
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_core.dtype import Dtype
from nxkernel_core.kernels import kernel as record
from nxkernel_core.layout import Layout, Range
from nxkernel_core.prog import Prog
from nxkernel_core.rig import Buffer, Rig, host
from nxkernel_cuda.device import CudaRig
from nxkernel_cuda.emulator import driver
from nxkernel_cuda.library import LIBRARY
from nxkernel_host.library import library as HOST

from .support import Arr, same_bits, values


@pytest.fixture(autouse=True)
def _memory_checker(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kernels these tests build carry the emulator's memory checker (off by
    default: ``driver.memcheck``)."""
    monkeypatch.setenv(driver.MEMCHECK_VARIABLE, "1")


BYTE_WIDE: tuple[Dtype, ...] = tuple(dt for dt in D.all if not dt.is_sub_byte)


def least_aligned(dev: Rig, dt: Dtype, a: Arr) -> Array:
    """Host elements ``a`` as an array of ``dt`` on ``dev`` whose first byte is
    ``dt.alignment`` bytes past a ``2 * dt.alignment`` boundary (memories start
    64-aligned)."""
    shift = dt.alignment
    nbytes = D.bytes(dt, a.size)
    buf = Buffer.create(dev, nbytes + 2 * shift).view(shift, nbytes)
    arr = Array(dt, Layout.c_contiguous(a.shape), buf)
    assert isinstance(dev, CudaRig) and dev.pointer(buf).address % (2 * shift) == shift
    arr.write_numpy(np.ascontiguousarray(a))
    return arr


def _both(spec: Any, operands: Sequence[tuple[Dtype, Arr]], dtypes: Sequence[Dtype],
          dev: CudaRig) -> tuple[list[Arr], list[Arr]]:
    """``spec`` by nx.cuda over least-aligned operands into least-aligned
    destinations, and by the host library over aligned ones: both results."""
    shapes = record(spec.kernel).shapes(spec, [a.shape for _, a in operands])
    assert not isinstance(shapes, SH.Error), shapes
    ops = [least_aligned(dev, dt, a) for dt, a in operands]
    dsts = [least_aligned(dev, dt, np.zeros(sh, dt.numpy_dtype))
            for dt, sh in zip(dtypes, shapes, strict=True)]
    assert getattr(LIBRARY, spec.kernel)(spec, dsts, ops) is Answer.DONE
    hops = [Array.from_numpy(np.ascontiguousarray(a), host, dt) for dt, a in operands]
    hdsts = [Array.empty(dt, sh, host) for dt, sh in zip(dtypes, shapes, strict=True)]
    assert getattr(HOST, spec.kernel)(spec, hdsts, hops) is Answer.DONE
    return [d.to_numpy() for d in dsts], [d.to_numpy() for d in hdsts]


def _placements(spec: Any, operands: Sequence[tuple[Dtype, Arr]], dtypes: Sequence[Dtype],
                dev: CudaRig) -> tuple[list[Arr], list[Arr]]:
    """``spec`` by nx.cuda twice: over least-aligned arrays and over 64-byte-
    aligned ones (where the GPU's wide accesses never fault): both results."""
    shapes = record(spec.kernel).shapes(spec, [a.shape for _, a in operands])
    assert not isinstance(shapes, SH.Error), shapes
    out = []
    for place in (least_aligned, lambda d, t, a: Array.from_numpy(np.ascontiguousarray(a), d, t)):
        ops = [place(dev, dt, a) for dt, a in operands]
        dsts = [place(dev, dt, np.zeros(sh, dt.numpy_dtype)) for dt, sh in zip(dtypes, shapes, strict=True)]
        assert getattr(LIBRARY, spec.kernel)(spec, dsts, ops) is Answer.DONE, spec
        out.append([d.to_numpy() for d in dsts])
    return out[0], out[1]


def _same(ours: list[Arr], theirs: list[Arr], dtypes: Sequence[Dtype]) -> None:
    for i, (o, t, dt) in enumerate(zip(ours, theirs, dtypes, strict=True)):
        assert same_bits(o, t, dt), f"result {i} ({dt.name}) differs from the host library's"


def _x(dt: Dtype, shape: tuple[int, ...], seed: int) -> Arr:
    if dt.is_complex:
        part = D.float32 if dt is D.complex64 else D.float64
        n = int(np.prod(shape))
        pair = np.stack([values(part, n, seed), values(part, n, seed + 1)], axis=-1)
        return np.ascontiguousarray(pair).view(dt.numpy_dtype).reshape(shape)
    return values(dt, int(np.prod(shape)), seed).reshape(shape)


def _ident(dt: Dtype) -> Prog:
    b = Prog.build([dt])
    return b.finish(b.ins[0])


@pytest.mark.parametrize("dt", BYTE_WIDE, ids=lambda d: d.name)
def test_moves_read_and_write_at_the_least_alignment(dev: CudaRig, dt: Dtype) -> None:
    """Gather, range gather, scatter (set; owner and serial schedules) and
    assemble (fill and copy) of every byte-wide dtype, each array at its
    dtype's least alignment."""
    x = _x(dt, (4, 9), 1)
    rng = np.random.default_rng(2)
    idx = rng.integers(-1, 10, size=(4, 5)).astype(np.int64)
    for spec in (S.Gather(1), S.RangeGather(1, 2)):
        ours, theirs = _both(spec, [(D.int64, idx), (dt, x)], [dt], dev)
        _same(ours, theirs, [dt])
    upd = _x(dt, (4, 5), 3)
    uidx = np.stack([rng.permutation(9)[:5] for _ in range(4)]).astype(np.int64)
    for unique in (True, False):
        spec_s = S.Scatter(1, S.Combine.SET, unique=unique)
        ours, theirs = _both(spec_s, [(dt, x), (D.int64, uidx), (dt, upd)], [dt], dev)
        _same(ours, theirs, [dt])
    fill = np.ascontiguousarray(_x(dt, (1,), 4)).tobytes()
    spec_a = S.Assemble((5, 9), fill, ((Range(1, 3), Range(0, 9)),))
    ours, theirs = _both(spec_a, [(dt, _x(dt, (3, 9), 5))], [dt], dev)
    _same(ours, theirs, [dt])


def test_complex64_at_an_address_4_mod_8(dev: CudaRig) -> None:
    """complex64 at an address = 4 (mod 8), where an 8-byte access faults: the
    moves (above), a scatter that adds, the map, and Max, Min and Arg
    reductions (whose last step stores each row's extreme as 64 bits) and a
    Max scan over rows of several groups each."""
    dt = D.complex64
    x = _x(dt, (2, 3000), 7)
    prog = _ident(dt)
    reds = ((S.Monoid.MAX, 0, dt), (S.Monoid.MIN, 0, dt), (S.Arg(S.Extreme.MAX), 0, dt),
            (S.Arg(S.Extreme.MIN), 0, dt))
    spec_r = S.Reduce(prog, (S.PLAIN,), (1,), reds)
    ours, theirs = _both(spec_r, [(dt, x)], spec_r.result_dtypes(), dev)
    _same(ours, theirs, spec_r.result_dtypes())
    spec_m = S.Map(prog, (S.PLAIN,))
    ours, theirs = _both(spec_m, [(dt, x)], [dt], dev)
    _same(ours, theirs, [dt])
    spec_c = S.Scan(prog, (S.PLAIN,), 1, S.Monoid.MAX, 0, dt)
    ours, theirs = _both(spec_c, [(dt, x)], [dt], dev)
    _same(ours, theirs, [dt])


def test_complex64_fft_contract_and_matrices_at_an_address_4_mod_8(dev: CudaRig) -> None:
    """The kernels whose results round (an FFT, a contraction, the matrix
    routines) on complex64 at an address = 4 (mod 8): no fault, and the bits
    they give at a 64-byte-aligned address (their accuracy is their own
    tests')."""
    dt = D.complex64
    rng = np.random.default_rng(11)

    def finite(*shape: int) -> Arr:
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)

    a = finite(4, 4) + 4 * np.eye(4, dtype=np.complex64)
    herm = (a + a.conj().T) / 2
    calls: list[tuple[Any, list[tuple[Dtype, Arr]], list[Dtype]]] = [
        (S.Fft((1,), S.Direction.FORWARD, S.C2c()), [(dt, finite(3, 12))], [dt]),
        (S.Contract((), ((1, 0),), dt), [(dt, finite(5, 7)), (dt, finite(7, 3))], [dt]),
        (S.Lu(), [(dt, a)], [dt, D.int64, D.int64]),
        (S.Qr(False), [(dt, a)], [dt, dt]),
        (S.Eigh(True), [(dt, herm)], [D.float32, dt]),
        (S.SolveTriangular(), [(dt, np.tril(a)), (dt, finite(4, 2))], [dt]),
    ]
    for spec, operands, dtypes in calls:
        ours, aligned = _placements(spec, operands, dtypes, dev)
        for i, (o, w, rdt) in enumerate(zip(ours, aligned, dtypes, strict=True)):
            assert same_bits(o, w, rdt), f"{spec}: result {i} depends on its placement"

"""``nxkernel_host.fused``: a program as one compiled loop gives the bits of the
node-by-node evaluator, for every node kind it accepts, at float32 and
float64, on 1 to 3 threads; programs with another kind are left to the
evaluator. Two programs are compiled in all (about a second each).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from numba import njit

from nxkernel_core import dtype as D
from nxkernel_core.prog import Binary, Prog, Unary
from nxkernel_host import program, simdfloat32, simdfloat64, threads
from tests.host.sweeps import sweep
from tests.host.test_map import rng_for, values

Arr = npt.NDArray[Any]

#: Three boxes of the compiled loop, the last short, and the evaluator's own.
N = 2 * 65536 + 37
_SNAN32 = b"\x01\x00\xa0\x7f"
_SNAN64 = b"\x01\x00\x00\x00\x00\x00\xf4\x7f"


def _program(dt: D.Dtype) -> Prog:
    """Every kind the loop accepts at ``dt``, each an output over the operands
    ``x, y`` of ``dt`` and ``z`` of the other float; constants (a signalling
    NaN among them), a cast each way and two-NaN operations included."""
    other = D.float64 if dt is D.float32 else D.float32
    b = Prog.build([dt, dt, other])
    x, y, z = b.ins
    outs = [-x, b.abs(x), b.sqrt(x), x + y, x - y, x * y, x / y, b.erf(x), b.tanh(y),
            x * b.recip(b.exp(-x) + 1.0)]
    if dt is D.float32:
        outs += [b.exp(x), b.cast(z, dt)]
    else:
        # At most 16 operands and outputs: the cast is Fma's operand.
        snan = b.const_bits(dt, _SNAN64)
        outs += [b.fma(b.cast(z, dt), y, x + 0.5), x, x + snan]
    return b.finish(*outs)


@pytest.fixture
def loops() -> Iterator[None]:
    """Every loop of ``program.FUSE_MIN`` elements or more compiled (no
    ``FUSE_WORK`` to run first) and spread over the threads however small
    (no ``PARALLEL_MIN``), so the tests' small loops run on every thread
    count they ask for; all put back after the test (the evaluators, and
    their compiled loops, stay cached: a test reuses another's)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(program, "FUSE_MIN", program.FUSE_MIN)
        mp.setattr(program, "FUSE_WORK", 0)
        mp.setattr(program, "PARALLEL_MIN", 0)
        yield


def _map(p: Prog, xs: list[Arr], fused: bool, n_threads: int) -> list[Arr]:
    program.FUSE_MIN = 0 if fused else 1 << 62  # type: ignore[misc]
    ev = program.compile(p)
    outs = [np.empty(xs[0].shape, p.dtype(o).numpy_dtype) for o in p.outs]
    with threads(n_threads):
        program.map_into(ev, xs, xs[0].shape, outs, False)
    return outs


@pytest.mark.usefixtures("loops")
@pytest.mark.parametrize("dt", [D.float32, D.float64], ids=lambda d: d.name)
def test_the_loop_has_the_evaluators_bits(dt: D.Dtype) -> None:
    """Every output's bits equal the node-by-node evaluator's where no operand
    is a NaN; where one is, the NaNs are at the same places (which NaN an
    operation of two NaNs gives, NumPy's loops choose by the element's place
    in them, and the contract leaves to the library)."""
    _agree(dt, N, 0)


@sweep
@pytest.mark.usefixtures("loops")
@pytest.mark.parametrize("n", [1, 7, 16, 17, 100, 1000, 65536 + 3, 300001])
@pytest.mark.parametrize("dt", [D.float32, D.float64], ids=lambda d: d.name)
def test_the_loop_has_the_evaluators_bits_swept(dt: D.Dtype, n: int) -> None:
    """As ``test_the_loop_has_the_evaluators_bits``, at many lengths and seeds."""
    for seed in range(1, 9):
        _agree(dt, n, seed)


def _agree(dt: D.Dtype, n: int, seed: int) -> None:
    p = _program(dt)
    assert program.compile(p).fused() is not None
    rng = rng_for("fused", dt.name, n, seed)
    other = D.float64 if dt is D.float32 else D.float32
    xs = [values(dt, n, rng), values(dt, n, rng), values(other, n, rng)]
    xs[1][::5] = xs[0][::5]
    plain = ~(np.isnan(xs[0]) | np.isnan(xs[1]) | np.isnan(xs[2]))
    assert n < 100 or plain.sum() > n // 2
    _loop_has_the_evaluators_bits(p, xs, plain)


@pytest.mark.usefixtures("loops")
def test_an_operand_as_its_destination() -> None:
    """A target that is its operand is read before it is written, element by
    element: the loop's bits in place equal the evaluator's."""
    p = _program(D.float32)
    rng = rng_for("fused alias")
    xs = [values(D.float32, N, rng), values(D.float32, N, rng), values(D.float64, N, rng)]
    want = _map(p, xs, False, 2)
    program.FUSE_MIN = 0  # type: ignore[misc]
    ev = program.compile(p)
    targets = [xs[0] if k == 0 else np.empty(N, p.dtype(o).numpy_dtype)
               for k, o in enumerate(p.outs)]
    with threads(2):
        program.map_into(ev, xs, (N,), targets, True)
    assert targets[0] is xs[0]
    for w, g in zip(want, targets, strict=True):
        assert np.array_equal(np.isnan(w), np.isnan(g))
        assert ((w.view(np.uint32) == g.view(np.uint32)) | np.isnan(w)).all()


@njit(error_model="numpy")
def _exp64_everywhere(x: Arr, out: Arr) -> None:  # pragma: no cover - compiled
    """``simdfloat64.exp64_one`` of every element: no fast chunks."""
    for i in range(out.size):
        out[i] = simdfloat64.exp64_one(x[i])


#: Arguments of float64 Exp whose results are not normal and finite (NaN,
#: ±inf, subnormal, zero, overflow) or whose magnitudes are huge or tiny.
_NOT_NORMAL = np.array([np.nan, -np.inf, np.inf, -720.0, -745.0, -746.0, 709.8, 710.0, 1e300,
                        -1e300, 5e-324, -5e-324, -708.3964185322642, 0.0, -0.0])


@pytest.mark.usefixtures("loops")
def test_float64_exp_in_chunks_has_the_full_functions_bits() -> None:
    """The loop runs a float64 Exp over chunks by ``exp64_normal_one`` where
    every result is normal and finite and by ``exp64_one`` where one is not:
    with an argument from ``_NOT_NORMAL`` in every chunk, and with none, each
    Exp output has ``exp64_one``'s bits element by element, and x·sigmoid(x)
    (its Exp of −x) the evaluator's, apart and with its operand as its
    destination, on 1 to 3 threads."""
    b = Prog.build([D.float64])
    (x,) = b.ins
    p = b.finish(b.exp(x), x / (b.exp(-x) + 1.0))
    n = 3 * 65536 + 333
    rng = rng_for("fused exp64 chunks")
    plain = rng.uniform(-708.39, 708.39, n)
    plain[::7] = rng.uniform(-1, 1, plain[::7].size)
    mixed = plain.copy()
    step = simdfloat64.EXP_CHUNK
    at = np.minimum(np.arange(0, n, step) + rng.integers(0, step, -(-n // step)), n - 1)
    mixed[at] = _NOT_NORMAL[np.arange(at.size) % _NOT_NORMAL.size]
    for xs in (plain, mixed):
        want = np.empty(n)
        _exp64_everywhere(xs, want)
        sig = _map(p, [xs], False, 1)[1]
        for t in (1, 2, 3):
            got = _map(p, [xs], True, t)
            assert got[0].tobytes() == want.tobytes(), t
            assert np.array_equal(np.isnan(got[1]), np.isnan(sig)), t
            assert ((got[1].view(np.uint64) == sig.view(np.uint64)) | np.isnan(sig)).all(), t
        program.FUSE_MIN = 0  # type: ignore[misc]
        ev = program.compile(p)
        for k in (0, 1):
            targets = [np.empty(n), np.empty(n)]
            targets[k] = xs.copy()
            with threads(2):
                program.map_into(ev, [targets[k]], (n,), targets, True)
            assert targets[0].tobytes() == want.tobytes(), k
            assert ((targets[1].view(np.uint64) == sig.view(np.uint64)) | np.isnan(sig)).all(), k


def _layer_norm(dt: D.Dtype) -> Prog:
    """``(x + bias − mean) · (1/√(var + eps)) · gamma + beta`` and the
    statistic ``1/√(var + eps)`` alone (a node of per-row operands)."""
    b = Prog.build([dt] * 6)
    x, bias, mean, var, gamma, beta = b.ins
    rstd = b.recip(b.sqrt(var + 1e-5))
    return b.finish((x + bias - mean) * rstd * gamma + beta, rstd)


@pytest.mark.usefixtures("loops")
@pytest.mark.parametrize("dt", [D.float32, D.float64], ids=lambda d: d.name)
@pytest.mark.parametrize("shape", [(3, 5, 7), (2, 40, 1000), (1, 300, 384), (70, 1, 9)], ids=str)
def test_broadcast_operands_give_the_evaluators_bits(dt: D.Dtype, shape: tuple[int, ...]) -> None:
    """Operands broadcast over rows (a bias, gamma and beta of the last axis)
    and along them (a mean and variance per row) are read where they lie, by
    the loop over rows: every output's bits equal the node-by-node
    evaluator's, on 1 to 3 threads; so do ``_program``'s over such operands,
    and the loop over rows is made."""
    rng = rng_for("fused rows", dt.name, shape)
    n = int(np.prod(shape))
    row, last = shape[:-1], shape[-1]

    def across() -> Arr:  # one value per column, the same in every row
        return np.broadcast_to(values(dt, last, rng), shape)

    def along() -> Arr:  # one value per row, the same along it
        return np.broadcast_to(values(dt, int(np.prod(row)), rng).reshape(*row, 1), shape)

    p = _layer_norm(dt)
    xs = [values(dt, n, rng).reshape(shape), across(), along(), np.abs(along()), across(),
          across()]
    cases = [(p, xs)]
    if dt is D.float32:
        other = values(D.float64, int(np.prod(row)), rng).reshape(*row, 1)
        cases.append((_program(dt), [values(dt, n, rng).reshape(shape), across(),
                                     np.broadcast_to(other, shape)]))
    for prog, ins in cases:
        _loop_has_the_evaluators_bits(prog, ins, ~np.any([np.isnan(a) for a in ins], axis=0))
        if shape[0] * shape[1] > 1:
            assert program.compile(prog)._spread, shape


@pytest.mark.usefixtures("loops")
def test_an_operand_broadcast_along_a_middle_axis_stays_with_the_evaluator() -> None:
    """An operand repeated along a middle axis only (a position table over a
    batch) fits no rows: the evaluator computes the loop, with its bits."""
    rng = rng_for("fused middle")
    shape = (4, 30, 600)
    p = _layer_norm(D.float32)
    mid = np.broadcast_to(values(D.float32, 30 * 600, rng).reshape(30, 600), shape)
    xs = [mid, *[values(D.float32, int(np.prod(shape)), rng).reshape(shape) for _ in range(5)]]
    want = _map(p, xs, False, 1)
    got = _map(p, xs, True, 2)
    for w, g in zip(want, got, strict=True):
        assert np.array_equal(np.isnan(w), np.isnan(g))
        assert ((w.view(np.uint32) == g.view(np.uint32)) | np.isnan(w)).all()


def test_a_compiled_loops_boxes() -> None:
    """Boxes of a multiple of 4096 elements from 2^16 to 2^20, at least four
    per thread where boxes of 2^16 make that many."""
    for size in (1 << 18, 10**6 + 3, 10**7, 10**8):
        for t in (1, 2, 3, 8):
            box = program.fused_box(size, t)
            assert box % 4096 == 0 and 1 << 16 <= box <= 1 << 20, (size, t, box)
            assert -(-size // box) >= min(4 * t, size >> 16), (size, t, box)
            assert box == 1 << 20 or -(-size // box) <= 4 * t + 1 or box == 1 << 16, (size, t, box)


@pytest.mark.usefixtures("loops")
def test_boxes_of_any_size_give_the_kinds_bits() -> None:
    """Tanh of float32 over 10^6 + 3 elements on 1, 2 and 3 threads (boxes of
    249856, 122880, 81920 elements): the bits of the kind's own loop."""
    b = Prog.build([D.float32])
    (x,) = b.ins
    p = b.finish(b.tanh(x))
    xs = [values(D.float32, 10**6 + 3, rng_for("fused boxes"))]
    want = simdfloat32.tanhf(xs[0])
    for t in (1, 2, 3):
        assert _map(p, xs, True, t)[0].tobytes() == want.tobytes(), t


def _lone(dt: D.Dtype, kind: Unary | Binary) -> Prog:
    return Prog.unary(kind, dt) if isinstance(kind, Unary) else Prog.binary(kind, dt)


@pytest.mark.parametrize(("dt", "kind"), [
    (D.float64, Unary.LOG), (D.float64, Unary.SINH), (D.float32, Unary.LOG),
    (D.float32, Binary.MAXIMUM), (D.float32, Unary.ROUND), (D.float16, Binary.ADD),
    (D.int32, Binary.ADD), (D.float32, Binary.POW)], ids=str)
def test_kinds_without_a_twin_stay_with_the_evaluator(dt: D.Dtype, kind: Unary | Binary) -> None:
    """A program with a node the loop has no twin for is not compiled."""
    assert program.Evaluator(_lone(dt, kind)).fused() is None
    b = Prog.build([D.float32])
    (x,) = b.ins
    coord = b.finish(x * b.cast(b.coord(0), D.float32))
    assert program.Evaluator(coord).fused() is None


def _loop_has_the_evaluators_bits(prog: Prog, ins: list[Arr], plain: Arr) -> None:
    """``prog`` over ``ins`` by its compiled loop on 1, 2 and 3 threads gives the
    node-by-node evaluator's bits: the same NaN positions, and every bit where
    no operand is a NaN (``plain``); elsewhere a NaN's payload may differ."""
    want = _map(prog, ins, False, 1)
    for t in (1, 2, 3):
        got = _map(prog, ins, True, t)
        for k, (w, g) in enumerate(zip(want, got, strict=True)):
            u = f"u{w.itemsize}"
            assert np.array_equal(np.isnan(w), np.isnan(g)), (k, t)
            same = w.view(u) == g.view(u)
            assert (same | np.isnan(w)).all(), (k, t, np.flatnonzero(~same)[:4])
            assert same[plain].all(), (k, t)

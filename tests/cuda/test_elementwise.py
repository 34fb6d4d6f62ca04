"""nxkernel_cuda.elementwise: map, generated per program, equals the reference
evaluator bit for bit (the transcendental kinds within 1 ulp) on cuda-emu
(and on cuda:0, marked ``cuda``), at every layout; it declines what its
statement says, writing nothing."""

from __future__ import annotations

import numpy as np
import pytest

from nxkernel_core import dtype as D
from nxkernel_core import evaluator
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_core.kernel import Call
from nxkernel_core.layout import Broadcast, Permute
from nxkernel_core.prog import Prog, Unary
from nxkernel_cuda import elementwise
from nxkernel_cuda.device import CudaRig
from nxkernel_cuda.library import LIBRARY
from nxkernel_host import trig

from . import programs
from .support import canary, on, run, same_bits, untouched, values

N = 300  # more than a block of 256 threads


@pytest.mark.parametrize("name", sorted(set(programs.MAP_PROGRAMS) - {"coords_and_codes"}))
def test_map_equals_the_reference(dev: CudaRig, name: str) -> None:
    prog = programs.MAP_PROGRAMS[name]
    ins = [values(dt, N, seed=i) for i, dt in enumerate(prog.ins)]
    spec = S.Map(prog, (S.PLAIN,) * prog.n_ins)
    answer, got = run(spec, [on(dev, a, dt) for a, dt in zip(ins, prog.ins, strict=True)], prog.out_dtypes)
    assert answer is Answer.DONE
    want = evaluator.evaluate(prog, ins, (N,))
    bounded = programs.TRANSCENDENTAL_OUTPUTS.get(name, ())
    for k, dt in enumerate(prog.out_dtypes):
        if k in bounded:
            assert np.all(evaluator.ulps(got[k], want[k], dt) <= 1), (name, k)
        else:
            assert same_bits(got[k], want[k], dt), (name, k, prog.nodes[prog.outs[k]])


def _coord_operands(dev: CudaRig) -> tuple[list[Array], list[np.ndarray]]:
    """The operands of coords_and_codes over a loop of [5, 4, 6]: float32
    permuted, reversed and offset; uint4 broadcast; bit strided. With their
    host values."""
    a = values(D.float32, 4 * 5 * 7, seed=1).reshape(4, 5, 7)
    u = values(D.uint4, 24, seed=2).reshape(4, 6)
    t = values(D.bit, 5 * 4 * 12, seed=3).reshape(5, 4, 12)
    x_dev = on(dev, a).view(Permute((1, 0, 2)))[:, ::-1, 1:]
    u_dev = on(dev, u, D.uint4).view(Broadcast((5, 4, 6)))
    t_dev = on(dev, t, D.bit)[:, :, ::2]
    host = [a.transpose(1, 0, 2)[:, ::-1, 1:], np.broadcast_to(u, (5, 4, 6)), t[:, :, ::2]]
    return [x_dev, u_dev, t_dev], host


def test_map_reads_any_layout_and_its_coordinates(dev: CudaRig) -> None:
    prog = programs.MAP_PROGRAMS["coords_and_codes"]
    ops, host = _coord_operands(dev)
    answer, got = run(S.Map(prog, (S.PLAIN,) * 3), ops, prog.out_dtypes)
    assert answer is Answer.DONE
    want = evaluator.evaluate(prog, host, (5, 4, 6))
    for k, dt in enumerate(prog.out_dtypes):
        assert same_bits(got[k], want[k], dt), k


def test_map_in_place_equals_a_fresh_destination(dev: CudaRig) -> None:
    prog = programs.MAP_PROGRAMS["coords_and_codes"]
    ops, host = _coord_operands(dev)
    x = on(dev, np.ascontiguousarray(host[0]))
    u = on(dev, np.ascontiguousarray(host[1]), D.uint4)
    spec = S.Map(prog, (S.PLAIN,) * 3)
    answer, fresh = run(spec, [x, u, ops[2]], prog.out_dtypes)
    assert answer is Answer.DONE
    dsts = [Array.empty(dt, (5, 4, 6), dev) for dt in prog.out_dtypes]
    dsts[0], dsts[3] = x, u  # identical to the Plain operands they read at their own index
    assert LIBRARY.map(spec, dsts, [x, u, ops[2]]) is Answer.DONE
    for k, dt in enumerate(prog.out_dtypes):
        assert same_bits(dsts[k].to_numpy(), fresh[k], dt), k


def test_map_of_an_empty_loop_is_done(dev: CudaRig) -> None:
    prog = programs.MAP_PROGRAMS["casts"]
    ops = [Array.empty(dt, (3, 0), dev) for dt in prog.ins]
    answer, got = run(S.Map(prog, (S.PLAIN,) * 2), ops, prog.out_dtypes)
    assert answer is Answer.DONE and all(g.shape == (3, 0) for g in got)


def _declines(spec: S.Map, dsts: list[Array], ops: list[Array]) -> str | None:
    return LIBRARY.statement.declines(Call("map", spec, tuple(dsts), tuple(ops)))


def test_map_declines_no_program_and_no_load(dev: CudaRig) -> None:
    """Complex programs and Padded loads are computed: the statement declines
    neither and the kernel answers DONE (their values: test_complex.py and
    test_padded.py)."""
    b = Prog.build([D.complex64])
    (z,) = b.ins
    cplx = S.Map(b.finish(z + z), (S.PLAIN,))
    ops = [on(dev, np.ones(4, np.complex64))]
    dsts = [canary(dev, D.complex64, (4,))]
    assert _declines(cplx, dsts, ops) is None
    assert LIBRARY.map(cplx, dsts, ops) is Answer.DONE

    padded = S.Map(programs.identity(D.float32), (S.Padded(b"\0\0\0\0", S.Pad((1,), (1,), (0,))),))
    ops = [on(dev, np.arange(4, dtype=np.float32))]
    dsts = [canary(dev, D.float32, (6,))]
    assert _declines(padded, dsts, ops) is None
    assert LIBRARY.map(padded, dsts, ops) is Answer.DONE


def test_map_refuses_before_any_write(dev: CudaRig) -> None:
    prog = programs.MAP_PROGRAMS["casts"]
    spec = S.Map(prog, (S.PLAIN,) * 2)
    good = [on(dev, np.zeros(4, np.float32)), on(dev, np.zeros(4, np.int64))]
    dsts = [canary(dev, dt, (4,)) for dt in prog.out_dtypes]
    wrong = [on(dev, np.zeros(4, np.float64)), good[1]]
    assert LIBRARY.map(spec, dsts, wrong) is Answer.WRONG_DTYPE
    assert LIBRARY.map(spec, dsts, good[:1]) is Answer.BAD_ARITY
    assert LIBRARY.map(spec, dsts, [on(dev, np.zeros(5, np.float32)), on(dev, np.zeros(5, np.int64))]) \
        is Answer.SHAPE_MISMATCH
    assert all(untouched(d) for d in dsts)
    host = [Array.from_numpy(np.zeros(4, np.float32)), Array.from_numpy(np.zeros(4, np.int64))]
    assert LIBRARY.map(spec, [Array.empty(dt, (4,)) for dt in prog.out_dtypes], host) is Answer.WRONG_DEVICE


def test_map_code_is_a_pure_rendering() -> None:
    prog = programs.MAP_PROGRAMS["float32_kinds"]
    code = elementwise.map_code(prog)
    assert code == elementwise.map_code(prog)
    assert 'extern "C" __global__ void __launch_bounds__(256)' in code
    assert "nxk_eval(in0, in1, in2, in3, &o0" in code
    assert elementwise.map_source(prog) is elementwise.map_source(prog)


def test_huge_trig_arguments_give_the_host_bits(dev: CudaRig) -> None:
    """Sin, Cos and Tan of 2^20 <= |x| reduce x by the host's Payne–Hanek
    algorithm (nxk_trig.cuh): the host library's bits, on both devices."""
    rng = np.random.default_rng(24)
    x = np.exp2(rng.uniform(20, 1023.9, 256)) * rng.choice([-1.0, 1.0], 256)
    x[:2] = float.fromhex("0x1.6ac5b262ca1ffp+849"), -np.finfo(np.float64).max
    for k, kind in enumerate((Unary.SIN, Unary.COS, Unary.TAN)):
        answer, (got,) = run(S.Map(Prog.unary(kind, D.float64), (S.PLAIN,)), [on(dev, x)], [D.float64])
        assert answer is Answer.DONE
        assert same_bits(got, trig.huge(k, x), D.float64), kind

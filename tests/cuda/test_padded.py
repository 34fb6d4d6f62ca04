"""Padded loads in nxkernel_cuda's map, reduce and scan: a Padded operand reads
its element where the loop index falls on one and the fill's bits elsewhere
(``exact.pad``, exactly, at every dtype); programs, reductions and scans
over Padded loads are the host library's bits; strided operands; a fill that
is not one element is refused and writes nothing."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from nxkernel_core import dtype as D
from nxkernel_core import exact
from nxkernel_core import shape as SH
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_core.dtype import Dtype
from nxkernel_core.kernel import Call
from nxkernel_core.kernels import kernel as record
from nxkernel_core.layout import Permute, Window
from nxkernel_core.prog import Prog
from nxkernel_core.rig import host
from nxkernel_cuda import build, elementwise, loops, terms
from nxkernel_cuda.device import CudaRig
from nxkernel_cuda.library import LIBRARY
from nxkernel_host.library import library as HOST

from .support import CI_NVRTC, REAL, canary, nvrtc_of, on, run, same_bits, untouched, values

Arr = npt.NDArray[Any]

#: Paddings of a [4, 5] operand: edges, crops, interior, windows with steps
#: and dilations, a pad that reads only fill.
PADS: tuple[S.Pad, ...] = (
    S.Pad((1, 2), (2, 0), (0, 0)),
    S.Pad((-1, 1), (1, -2), (1, 2)),
    S.Pad((1, -1), (2, 1), (1, 0), (Window(1, 2, 1, 2),)),
    S.Pad((0, 2), (1, 1), (0, 1), (Window(0, 3, 2, 1), Window(1, 2, 3, 2))),
    S.Pad((-4, 0), (3, 0), (0, 0)),
)


def _fill(dt: Dtype) -> bytes:
    """A fill no operand element is likely to equal: a NaN with a payload, a
    4-bit code, a bool's byte 2."""
    if dt.is_sub_byte:
        return bytes([5 if dt.bits == 4 else 1])
    if dt.is_bool:
        return bytes([2])
    if dt.is_float:
        fmt = dt.float_format
        assert fmt is not None
        if dt.bits >= 16:
            code = (((1 << fmt.exponent_bits) - 1) << fmt.fraction_bits) | 3 | (1 << (dt.bits - 1))
            return code.to_bytes(dt.bits // 8, "little")
        return bytes(D.of_float(dt, np.array([-3.0])).view(np.uint8))
    return (0x5A5A5A5A5A5A5A5A & ((1 << dt.bits) - 1)).to_bytes(dt.bits // 8, "little")


def _finite(x: Arr) -> Arr:
    """``x`` with its infinities and NaNs replaced by 1.5: how programs make
    NaNs is not what these tests are about (the fill brings a NaN in)."""
    return np.where(np.isfinite(x), x, x.dtype.type(1.5))


def _host_run(spec: Any, operands: list[Arr], dtypes: list[Dtype], op_dtypes: list[Dtype]) -> list[Arr]:
    """The host library's results of ``spec`` on host copies of ``operands``."""
    shapes = record(spec.kernel).shapes(spec, [o.shape for o in operands])
    assert not isinstance(shapes, SH.Error), shapes
    dsts = [Array.empty(dt, sh, host) for dt, sh in zip(dtypes, shapes, strict=True)]
    ops = [Array.from_numpy(np.ascontiguousarray(o), host, dt)
           for o, dt in zip(operands, op_dtypes, strict=True)]
    assert getattr(HOST, spec.kernel)(spec, dsts, ops) is Answer.DONE
    return [d.to_numpy() for d in dsts]


# --------------------------------------------------------------------------
# Map: the padded operand, exactly
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dt", REAL, ids=lambda d: d.name)
def test_a_padded_copy_is_the_padded_operand_bit_for_bit(dev: CudaRig, dt: Dtype) -> None:
    x = values(dt, 20).reshape(4, 5)
    fill = _fill(dt)
    for pad in PADS:
        spec = S.Map(Prog.identity(dt), (S.Padded(fill, pad),))
        answer, (got,) = run(spec, [on(dev, x, dt)], [dt])
        assert answer is Answer.DONE
        want = exact.pad(x, dt, fill, pad)
        assert same_bits(got, want, dt), (dt.name, pad)


@pytest.mark.parametrize("dt", [D.complex64, D.complex128], ids=lambda d: d.name)
def test_a_padded_complex_copy_keeps_its_16_byte_fill(dev: CudaRig, dt: Dtype) -> None:
    x = (np.arange(20) - 1j * np.arange(20, 40)).astype(dt.numpy_dtype).reshape(4, 5)
    x[1, 2] = complex(np.nan, -0.0)
    fill = np.array([complex(-1.5, 2.25)], dt.numpy_dtype).tobytes()
    for pad in PADS:
        spec = S.Map(Prog.identity(dt), (S.Padded(fill, pad),))
        answer, (got,) = run(spec, [on(dev, x, dt)], [dt])
        assert answer is Answer.DONE
        assert same_bits(got, exact.pad(x, dt, fill, pad), dt), (dt.name, pad)
    summed = S.Reduce(Prog.identity(dt), (S.Padded(fill, PADS[3]),), (0, 2), ((S.Monoid.SUM, 0, dt),))
    answer, (total,) = run(summed, [on(dev, x, dt)], [dt])
    assert answer is Answer.DONE
    assert same_bits(total, _host_run(summed, [x], [dt], [dt])[0], dt, nan_equal=True)


def test_a_padded_operand_of_any_layout_and_a_plain_one_together(dev: CudaRig) -> None:
    """x read transposed and reversed through its pad, beside a Plain operand
    of the loop's shape, by a program of both: the host library's bits."""
    dt = D.float32
    base = _finite(values(dt, 30, seed=3).reshape(6, 5))
    pad = S.Pad((1, 0), (0, 2), (1, 0), (Window(1, 3, 2, 1),))
    x = on(dev, base).view(Permute((1, 0)))[::-1, 1:]  # [5, 5], transposed, reversed, offset
    host_x = base.T[::-1, 1:]
    loop = SH.padded(host_x.shape, pad)
    assert not isinstance(loop, SH.Error)
    y = _finite(values(dt, int(np.prod(loop)), seed=4).reshape(loop))
    b = Prog.build([dt, dt])
    p, q = b.ins
    prog = b.finish(p * q + p, b.maximum(p, q))
    fill = np.array([0xFFC00007], np.uint32).tobytes()  # a quiet NaN with a payload
    spec = S.Map(prog, (S.Padded(fill, pad), S.PLAIN))
    answer, got = run(spec, [x, on(dev, y)], [dt, dt])
    assert answer is Answer.DONE
    want = _host_run(spec, [host_x, y], [dt, dt], [dt, dt])
    for g, w in zip(got, want, strict=True):
        assert same_bits(g, w, dt)


def test_a_rank_0_operand_pads_and_windows(dev: CudaRig) -> None:
    dt = D.int16
    x = np.array(7, np.int16)
    pad = S.Pad((), (), ())
    spec = S.Map(Prog.identity(dt), (S.Padded(_fill(dt), pad),))
    answer, (got,) = run(spec, [Array.from_numpy(x, dev)], [dt])
    assert answer is Answer.DONE and got.shape == () and int(got) == 7
    vec = np.array([1, 2, 3], np.int16)
    pad1 = S.Pad((2,), (1,), (0,), (Window(0, 2, 2, 3),))
    spec1 = S.Map(Prog.identity(dt), (S.Padded(_fill(dt), pad1),))
    answer, (got1,) = run(spec1, [on(dev, vec)], [dt])
    assert answer is Answer.DONE
    assert same_bits(got1, exact.pad(vec, dt, _fill(dt), pad1), dt)


# --------------------------------------------------------------------------
# Reduce and scan over Padded loads: the host library's bits
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dt", [D.float32, D.float64, D.bfloat16, D.int32, D.uint4])
def test_reductions_over_a_padded_load_are_the_host_librarys(dev: CudaRig, dt: Dtype) -> None:
    x = values(dt, 40, seed=5).reshape(5, 8)
    pad = S.Pad((2, -1), (1, 3), (1, 0), (Window(1, 3, 2, 2),))
    fill = _fill(dt) if not dt.is_float else bytes(D.of_float(dt, np.array([0.75])).view(np.uint8))
    reds: list[tuple[S.Reduction, int, Dtype]] = [(S.Monoid.SUM, 0, dt), (S.Arg(S.Extreme.MAX), 0, dt),
                                                  (S.Monoid.MIN, 0, dt)]
    if dt.is_float:
        reds.append((S.Monoid.PROD, 0, dt))
    for axes in ((0,), (1, 2), (2,), (0, 1, 2)):
        spec = S.Reduce(Prog.identity(dt), (S.Padded(fill, pad),), axes, tuple(reds))
        answer, got = run(spec, [on(dev, x, dt)], spec.result_dtypes())
        assert answer is Answer.DONE
        want = _host_run(spec, [x], list(spec.result_dtypes()), [dt])
        for g, w, rdt in zip(got, want, spec.result_dtypes(), strict=True):
            assert same_bits(g, w, rdt, nan_equal=True), (axes, rdt.name)


def test_a_long_padded_sum_runs_in_lane_order_over_groups(dev: CudaRig) -> None:
    """3000 terms a row, through an interior pad, cut into groups of chunks:
    the host library's lane-order bits."""
    dt = D.float32
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((3, 1500)) * np.exp2(rng.integers(-20, 21, size=(3, 1500)))).astype(np.float32)
    pad = S.Pad((0, 1), (0, 0), (0, 1))
    b = Prog.build([dt])
    (p,) = b.ins
    spec = S.Reduce(b.finish(p * p - p), (S.Padded(np.float32(0.5).tobytes(), pad),), (1,),
                    ((S.Monoid.SUM, 0, dt),))
    want = _host_run(spec, [x], [dt], [dt])
    for group_chunks in (1, 2):
        answer, got = run(spec, [on(dev, x)], [dt], threads=64, group_chunks=group_chunks)
        assert answer is Answer.DONE
        assert same_bits(got[0], want[0], dt)


@pytest.mark.parametrize("reverse", [False, True])
def test_scans_over_padded_loads_are_the_host_librarys(dev: CudaRig, reverse: bool) -> None:
    dt = D.float32
    x = values(dt, 24, seed=9).reshape(4, 6)
    x[~np.isfinite(x)] = 1.0
    pad = S.Pad((1, 0), (2, 1), (0, 1), (Window(0, 2, 1, 3),))
    loop = SH.padded(x.shape, pad)
    assert not isinstance(loop, SH.Error)
    b = Prog.build([dt, dt])
    p, q = b.ins
    prog = b.finish(p + q)
    y = values(dt, int(np.prod(loop)), seed=10).reshape(loop)
    y[~np.isfinite(y)] = -2.0
    loads = (S.Padded(np.float32(0.25).tobytes(), pad), S.PLAIN)
    for axis in range(len(loop)):
        for red in (S.Monoid.SUM, S.Monoid.MAX):
            spec = S.Scan(prog, loads, axis, red, 0, dt, reverse=reverse)
            want = _host_run(spec, [x, y], [dt], [dt, dt])
            for chunk in (None, 2):
                answer, got = run(spec, [on(dev, x), on(dev, y)], [dt], chunk=chunk)
                assert answer is Answer.DONE
                assert same_bits(got[0], want[0], dt), (axis, red, chunk)


def test_a_scan_of_an_int8_padded_operand_with_a_carry(dev: CudaRig) -> None:
    dt = D.int8
    x = values(dt, 12, seed=11).reshape(3, 4)
    pad = S.Pad((-1, 2), (1, 0), (0, 0))
    fill = bytes([0x7F])
    loop = SH.padded(x.shape, pad)
    assert not isinstance(loop, SH.Error)
    carry = values(dt, loop[0], seed=12)
    spec = S.Scan(Prog.identity(dt), (S.Padded(fill, pad),), 1, S.Monoid.SUM, 0, dt, carry=True)
    answer, (got,) = run(spec, [on(dev, carry), on(dev, x)], [dt])
    assert answer is Answer.DONE
    padded = exact.pad(x, dt, fill, pad).astype(np.int64)
    want = ((carry.astype(np.int64)[:, None] + np.cumsum(padded, axis=1) + 128) % 256 - 128).astype(np.int8)
    assert same_bits(got, want, dt)


# --------------------------------------------------------------------------
# Statements, refusals
# --------------------------------------------------------------------------


def test_padded_loads_are_not_declined(dev: CudaRig) -> None:
    dt = D.float32
    x = on(dev, np.zeros((2, 3), np.float32))
    ld = S.Padded(np.float32(1).tobytes(), PADS[2])
    calls = [
        Call("map", S.Map(Prog.identity(dt), (ld,)), (), (x,)),
        Call("reduce", S.Reduce(Prog.identity(dt), (ld,), (0,), ((S.Monoid.SUM, 0, dt),)), (), (x,)),
        Call("scan", S.Scan(Prog.identity(dt), (ld,), 0, S.Monoid.SUM, 0, dt), (), (x,)),
    ]
    for call in calls:
        assert LIBRARY.statement.declines(call) is None
    assert "Padded" not in LIBRARY.statement.computes["map"].prose.split("declines")[-1]


def test_a_fill_that_is_not_one_element_is_refused_and_writes_nothing(dev: CudaRig) -> None:
    dt = D.float32
    x = on(dev, np.ones((4, 5), np.float32))
    pad = PADS[0]
    loop = SH.padded((4, 5), pad)
    assert not isinstance(loop, SH.Error)
    dst = canary(dev, dt, loop)
    bad = S.Map(Prog.identity(dt), (S.Padded(b"\0\0", pad),))
    assert LIBRARY.map(bad, [dst], [x]) is Answer.WRONG_DTYPE
    assert untouched(dst)
    wrong = canary(dev, dt, (4, 5))
    good = S.Map(Prog.identity(dt), (S.Padded(np.float32(0).tobytes(), pad),))
    assert LIBRARY.map(good, [wrong], [x]) is Answer.SHAPE_MISMATCH
    assert untouched(wrong)


def test_the_pad_descriptor_keeps_the_fills_bytes_and_the_axes() -> None:
    x = Array.from_numpy(np.zeros((3, 4), np.int64), host)
    pad = S.Pad((1, -1), (0, 2), (2, 0), (Window(1, 2, 1, 2),))
    ld = S.Padded((-2).to_bytes(8, "little", signed=True), pad)
    words = loops.pad_words(x, ld, [((8, 3, 2), range(3), False)])
    assert words[:3] == [0, -2, 0] and np.array(words[1:3], np.int64).tobytes()[:8] == ld.fill
    assert words[3:11] == [1, 3, 3, 4, -1, 1, 4, 1]  # lo, interior + 1, extent, stride (elements)
    assert loops.pad_key((S.PLAIN, ld)) == (None, 2) and loops.pad_key((S.PLAIN,)) == ()


@pytest.mark.parametrize("major", CI_NVRTC)
@pytest.mark.parametrize("arch", build.CI_ARCHES)
def test_padded_sources_compile_for_the_ci_arches(arch: str, major: int) -> None:
    """A map and the reductions over a rank-2 Padded load, a rank-0 one and a
    Plain one compile by NVRTC (the emulator runs the same text)."""
    b = Prog.build([D.float32, D.int4, D.bfloat16])
    p, q, r = b.ins
    prog = b.finish(p + b.cast(q, D.float32) * b.cast(r, D.float32))
    pads = (2, 0, None)
    for source in (elementwise.map_source(prog, pads), terms.reductions_source(prog, 0, pads)):
        cubin = build.compile(source, arch, nvrtc_of(major))
        assert cubin.path.read_bytes()[:4] == b"\x7fELF" and set(cubin.lowered) == set(source.kernels)

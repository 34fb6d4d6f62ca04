"""nx.cuda as a whole: every generated source the tests draw compiles for the
CI architectures by NVRTC; the statement holds the library's orders, bounds
and declines; the caller (``nxkernel_core.nx``) reaches it on cuda-emu; several
threads may call it at once."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from nxkernel_core import dtype as D
from nxkernel_core import nx, orders, reference, rig
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_core.kernel import KERNEL_NAMES, check_library, gamma, unit_roundoff
from nxkernel_core.library import Library
from nxkernel_cuda import build, elementwise, terms
from nxkernel_cuda import runtime as cuda_runtime
from nxkernel_cuda.build import Cubin, Source
from nxkernel_cuda.device import CudaDevice, CudaRig, EmuDevice
from nxkernel_cuda.emulator import driver
from nxkernel_cuda.library import LIBRARY, CudaLibrary

from . import programs
from . import test_gpu_plumbing as plumbing
from .support import CI_NVRTC, nvrtc_of, on, run, same_bits, values


def _generated() -> list[Source]:
    return ([elementwise.map_source(p) for p in programs.MAP_PROGRAMS.values()]
            + [terms.reductions_source(p, k) for p, k in programs.REDUCTION_TERMS])


@pytest.mark.parametrize("major", CI_NVRTC)
@pytest.mark.parametrize("arch", build.CI_ARCHES)
def test_generated_sources_compile_for_the_ci_arches(arch: str, major: int) -> None:
    for source in _generated():
        cubin = build.compile(source, arch, nvrtc_of(major))
        assert cubin.path.read_bytes()[:4] == b"\x7fELF" and set(cubin.lowered) == set(source.kernels)


def test_the_statement_keeps_the_protocol_and_states_the_orders() -> None:
    check_library(LIBRARY)
    st = LIBRARY.statement
    assert set(st.computes) == set(KERNEL_NAMES) and st.concurrent
    for key in ("reduce Sum", "reduce Prod", "scan"):
        assert key in st.association
    assert "lane order" in st.association["reduce Sum"] and "odd/even" in st.association["scan"]
    # e(K) within the contract's ceiling γ(2K + 2) at every K, exact at K = 0
    # and for integers.
    for dt in (D.float32, D.float64, D.complex64, D.complex128):
        u = unit_roundoff(dt)
        assert st.error_factor(0, dt) == 0.0
        assert all(0 < st.error_factor(k, dt) <= gamma(2 * k + 2, u) for k in range(1, 300))
    assert st.error_factor(100, D.int32) == 0.0
    assert "1 ulp" in st.algorithms["transcendental kinds"]


def test_its_kernels_are_the_library_bases_over_its_hooks(dev: CudaRig,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The base class's kernel methods run the fit, the declines and the door
    before a hook: a misfit, a declined case and arrays off the device never
    reach the family's code; eig, without a hook, declines with its reason."""
    assert isinstance(LIBRARY, Library)
    assert all(getattr(CudaLibrary, k) is getattr(Library, k) for k in KERNEL_NAMES)
    reached: list[str] = []
    monkeypatch.setattr(CudaLibrary, "_map", lambda self, *args: reached.append("map"))
    ident = programs.identity(D.float32)
    spec = S.Map(ident, (S.PLAIN,))
    x = on(dev, np.arange(6, dtype=np.float32))
    host_x = Array.from_numpy(np.arange(6, dtype=np.float32), rig.host)
    assert LIBRARY.map(spec, [Array.empty(D.float32, (5,), dev)], [x]) is Answer.SHAPE_MISMATCH
    assert LIBRARY.map(spec, [Array.empty(D.float64, (6,), dev)], [x]) is Answer.WRONG_DTYPE
    assert LIBRARY.map(spec, [Array.empty(D.float32, (6,), rig.host)], [host_x]) is Answer.WRONG_DEVICE
    assert LIBRARY.map(spec, [Array.empty(D.float32, (6,), dev)], [host_x]) is Answer.WRONG_DEVICE
    assert reached == []
    assert LIBRARY.map(spec, [Array.empty(D.float32, (6,), dev)], [x]) is Answer.DONE
    assert reached == ["map"]
    assert LIBRARY.statement.computes["eig"].prose == (
        "declines every case: nx.cuda computes no eig (the nonsymmetric eigenproblem)")
    a = on(dev, np.eye(3))
    dsts = [Array.empty(D.complex128, (3,), dev), Array.empty(D.complex128, (3, 3), dev)]
    assert LIBRARY.eig(S.Eig(True), dsts, [a]) is Answer.DECLINED


def test_the_caller_reaches_the_library_on_the_emulated_device(dev: CudaRig) -> None:
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((3, 2000)) * 100).astype(np.float32)
    xs = on(dev, x)
    total = nx.sum(xs, axis=1)
    assert total.device is dev
    assert same_bits(total.to_numpy(), orders.lane_reduce(x, np.add, np.float32(0)), D.float32)
    assert np.array_equal(nx.argmax(xs, axis=1).to_numpy(), np.argmax(x, axis=1))
    values, positions = nx.sort(xs, axis=1)
    assert np.array_equal(positions.to_numpy(), np.argsort(x, axis=1, kind="stable"))
    assert np.array_equal(values.to_numpy(), np.sort(x, axis=1))
    index = on(dev, rng.integers(0, 2000, size=(3, 5)).astype(np.int64))
    assert np.array_equal(nx.gather(xs, index, 1).to_numpy(), np.take_along_axis(x, index.to_numpy(), 1))


def test_several_threads_may_call_the_kernels_at_once(dev: CudaRig) -> None:
    ident = programs.identity(D.float32)
    spec = S.Reduce(ident, (S.PLAIN,), (1,), ((S.Monoid.SUM, 0, D.float32),))
    rng = np.random.default_rng(1)
    xs = [(rng.standard_normal((2, 3000))).astype(np.float32) for _ in range(4)]
    results: list[bool] = []

    def work(x: np.ndarray) -> None:
        dst = Array.empty(D.float32, (2,), dev)
        ok = LIBRARY.reduce(spec, [dst], [on(dev, x)]) is Answer.DONE
        results.append(ok and same_bits(dst.to_numpy(), orders.lane_reduce(x, np.add, np.float32(0)),
                                        D.float32))

    threads = [threading.Thread(target=work, args=(x,)) for x in xs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [True] * 4


@pytest.fixture
def standin_gpu(monkeypatch: pytest.MonkeyPatch) -> Iterator[CudaDevice]:
    """cuda:0 over test_gpu_plumbing's stand-in cupy, whose RawModule runs
    each cubin's kernels in the emulator: the GPU path of the library (NVRTC
    cubins for sm_90, lowered names, pointers as uint64, descriptors and
    scratch in device memory) without a GPU."""
    built: dict[str, tuple[Source, Cubin]] = {}
    compile_for_device = cuda_runtime.compile

    def recording(source: Source, arch: str) -> Cubin:
        cubin = compile_for_device(source, arch)
        built[str(cubin.path)] = (source, cubin)
        return cubin

    class RawModule:
        def __init__(self, path: str) -> None:
            self.path = path

        def get_function(self, lowered: str) -> Any:
            source, cubin = built[self.path]
            expr = next(k for k, v in cubin.lowered.items() if v == lowered)
            return plumbing._Kernel(driver.load(EmuDevice(9), source).function(expr))

    monkeypatch.setattr(cuda_runtime, "compile", recording)
    monkeypatch.setattr(plumbing, "LIMIT", 1 << 28)
    fixture = plumbing.gpu.__wrapped__(monkeypatch)  # type: ignore[attr-defined]
    gpu = next(fixture)
    monkeypatch.setattr(sys.modules["cupy"], "RawModule", RawModule)
    yield gpu


def test_the_gpu_path_runs_every_family(standin_gpu: CudaDevice) -> None:
    gpu = standin_gpu
    prog = programs.MAP_PROGRAMS["casts"]
    ins = [values(dt, 300, seed=i) for i, dt in enumerate(prog.ins)]
    ops = [on(gpu, a, dt) for a, dt in zip(ins, prog.ins, strict=True)]
    answer, got = run(S.Map(prog, (S.PLAIN,) * 2), ops, prog.out_dtypes)
    assert answer is Answer.DONE
    want = reference.evaluate(prog, ins, (300,))
    assert all(same_bits(g, w, dt) for g, w, dt in zip(got, want, prog.out_dtypes, strict=True))
    x = np.random.default_rng(0).standard_normal((3, 5000)).astype(np.float32)
    ident = programs.identity(D.float32)
    spec = S.Reduce(ident, (S.PLAIN,), (1,),
                    ((S.Monoid.SUM, 0, D.float32), (S.Arg(S.Extreme.MAX), 0, D.float32)))
    answer, got = run(spec, [on(gpu, x)], spec.result_dtypes(), group_chunks=1)  # the finishing pass too
    assert answer is Answer.DONE
    assert same_bits(got[0], orders.lane_reduce(x, np.add, np.float32(0)), D.float32)
    assert got[2].tolist() == np.argmax(x, axis=1).tolist()
    scan = S.Scan(ident, (S.PLAIN,), 1, S.Monoid.SUM, 0, D.float32)
    answer, (scanned,) = run(scan, [on(gpu, x)], [D.float32], chunk=64)  # totals scanned in memory
    assert answer is Answer.DONE
    assert same_bits(scanned, orders.odd_even_scan((x,), lambda a, b: (a[0] + b[0],))[0], D.float32)
    answer, (_, positions) = run(S.Sort(1), [on(gpu, x[:, :3000])], [D.float32, D.int64])
    assert answer is Answer.DONE
    assert positions.tolist() == np.argsort(x[:, :3000], axis=1, kind="stable").tolist()

"""The caller: it checks a call fits before any library sees it, names the
arrays in every error, asks libraries in order, and computes nothing itself."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from nxkernel_core import dtype as D
from nxkernel_core import nx, plugins, rig
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer, InvalidArgument
from nxkernel_core.array import Array
from nxkernel_core.kernel import declining_library
from nxkernel_core.prog import Binary, Prog


class Recording:
    """A library answering a fixed answer to every kernel, recording each call."""

    def __init__(self, name: str, answer: Answer) -> None:
        self.name = name
        self.answer = answer
        self.statement = declining_library(name).statement
        self.calls: list[tuple[str, Any, tuple[Array, ...], tuple[Array, ...]]] = []

    def computes_on(self, device: rig.Rig) -> bool:
        return True

    def __getattr__(self, kernel: str) -> Any:
        def run(spec: Any, dsts: Sequence[Array], operands: Sequence[Array]) -> Answer:
            self.calls.append((kernel, spec, tuple(dsts), tuple(operands)))
            return self.answer
        return run


class Registry:
    def __init__(self, libs: list[Any]) -> None:
        self.libs = libs

    def libraries_for(self, device: rig.Rig) -> tuple[Any, ...]:
        return tuple(self.libs)


@pytest.fixture
def libs(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    chosen: list[Any] = []
    monkeypatch.setattr(plugins, "_registry", Registry(chosen))
    return chosen


def f32(shape: tuple[int, ...]) -> Array:
    return nx.asarray(np.zeros(shape, np.float32))


def test_a_misfit_names_the_function_and_the_arrays(libs: list[Any]) -> None:
    spy = Recording("spy", Answer.DONE)
    libs.append(spy)
    with pytest.raises(InvalidArgument,
                       match=r"^nx.add: shapes do not broadcast \(float32 \[2, 3\], float32 \[4\]\)$"):
        nx.add(f32((2, 3)), f32((4,)))
    with pytest.raises(InvalidArgument, match=r"^nx.map: .*\(float32 \[2\], float32 \[3\]\)$"):
        nx.map(Prog.binary(Binary.ADD, D.float32), f32((2,)), f32((3,)))
    with pytest.raises(InvalidArgument, match=r"^nx.map: .*float64.*\(float32 \[2\]\)$"):
        nx.map(Prog.identity(D.float64), f32((2,)))
    with pytest.raises(InvalidArgument, match=r"^nx.sum: axis 2 is out of range for float32 \[2, 3\]$"):
        nx.sum(f32((2, 3)), axis=2)
    with pytest.raises(InvalidArgument, match=r"^nx.add: operands of dtypes float32 and int32 differ"):
        nx.add(f32((2,)), nx.asarray(np.zeros(2, np.int32)))
    assert spy.calls == []  # no library saw a call that does not fit


def test_destinations_are_fresh_contiguous_arrays_on_the_operands_device(libs: list[Any]) -> None:
    spy = Recording("spy", Answer.DONE)
    libs.append(spy)
    x = f32((3, 4))
    total = nx.sum(x, axis=1)
    ((kernel, sp, dsts, ops),) = spy.calls
    assert kernel == "reduce" and isinstance(sp, S.Reduce) and sp.axes == (1,)
    assert dsts == (total,) and ops == (x,)
    assert total.shape == (3,) and total.dtype is D.float32 and total.layout.is_contiguous()
    assert total.device is x.device


def test_libraries_are_asked_in_order_until_one_is_done(libs: list[Any]) -> None:
    first, second, third = (Recording("a", Answer.DECLINED), Recording("b", Answer.DONE),
                            Recording("c", Answer.DONE))
    libs.extend([first, second, third])
    nx.exp(f32((2,)))
    assert len(first.calls) == len(second.calls) == 1 and third.calls == []


def test_every_library_declining_raises_naming_each(libs: list[Any]) -> None:
    libs.extend([declining_library("nx.one"), declining_library("nx.two")])
    with pytest.raises(InvalidArgument, match=r"^nx.exp: no library computes this case: nx.one declines it "
                       r"\(nx.one declines every case\); nx.two declines it .*\(float32 \[2\]\)$"):
        nx.exp(f32((2,)))


def test_a_refusal_is_raised_as_refused_says(libs: list[Any]) -> None:
    libs.append(Recording("r", Answer.OVERLAPPING))
    with pytest.raises(InvalidArgument, match=r"^nx.exp: a written operand shares bytes with another operand "
                       r"\(float32 \[2\]\)$"):
        nx.exp(f32((2,)))


def test_operands_on_two_devices_are_refused(libs: list[Any]) -> None:
    libs.append(Recording("spy", Answer.DONE))
    other = rig.memory_device("nx-other")
    try:
        y = nx.asarray(np.zeros(2, np.float32), device=other)
        with pytest.raises(InvalidArgument, match=r"^nx.add: operands are on host, nx-other"):
            nx.add(f32((2,)), y)
    finally:
        other.close()


def test_no_library_for_the_device(libs: list[Any]) -> None:
    with pytest.raises(InvalidArgument, match=r"^nx.exp: no library computes on host"):
        nx.exp(f32((2,)))


def test_conveniences_build_the_kernel_calls_numpy_users_expect(libs: list[Any]) -> None:
    spy = Recording("spy", Answer.DONE)
    libs.append(spy)
    x = f32((2, 3))
    assert nx.argmax(x).dtype is D.int64 and nx.argmax(x).shape == ()
    assert nx.argmax(x, axis=0).shape == (3,)
    mean, var = nx.mean_var(x, axis=(0, 1))
    assert mean.shape == var.shape == ()
    assert nx.sum(x, axis=1, keepdims=True).shape == (2, 1)
    values, positions = nx.sort(x)
    assert values.dtype is D.float32 and positions.dtype is D.int64
    values, positions = nx.topk(x, 2)
    assert values.shape == (2, 2) and spy.calls[-1][1] == S.Sort(1, True, 2)
    assert nx.take(x, [2, 0, 1, 1], axis=1).shape == (2, 4)
    assert nx.take(x, np.zeros((2, 2), np.int64), axis=0).shape == (2, 2, 3)
    assert nx.matmul(f32((5, 2, 3)), f32((3, 4))).shape == (5, 2, 4)
    assert nx.matmul(f32((3,)), f32((3, 4))).shape == (4,)
    assert nx.matmul(f32((2, 3)), f32((3,))).shape == (2,)
    r = nx.contract("bij,bjk->bki", f32((2, 3, 4)), f32((2, 4, 5)))
    assert r.shape == (2, 5, 3)
    _, sp, _, _ = spy.calls[-1]
    assert sp.batch == ((0, 0),) and sp.contracting == ((2, 1),)
    assert nx.rfft(f32((8,))).dtype is D.complex64 and nx.rfft(f32((8,))).shape == (5,)
    assert nx.cumsum(x).shape == (6,)
    assert nx.searchsorted(f32((4,)), f32((2, 3))).shape == (2, 3)
    o, lse = nx.attention(f32((1, 2, 5, 8)), f32((1, 1, 7, 8)), f32((1, 1, 7, 4)), causal=True)
    assert o.shape == (1, 2, 5, 4) and lse.shape == (1, 2, 5)
    w, v = nx.eigh(f32((3, 3)))
    assert w.dtype is D.float32 and v.shape == (3, 3)
    u, s, vh = nx.svd(nx.asarray(np.zeros((4, 3), np.complex64)))  # type: ignore[misc]
    assert s.dtype is D.float32 and u.shape == (4, 4) and vh.shape == (3, 3)


def test_a_decided_call_is_decided_again_for_other_operands(libs: list[Any]) -> None:
    """The caller's decisions are cached per spec, shapes and dtypes: a call
    that fitted leaves no answer behind for operands that do not."""
    spy = Recording("spy", Answer.DONE)
    libs.append(spy)
    prog = Prog.binary(Binary.ADD, D.float32)
    for _ in range(2):
        (r,) = nx.map(prog, f32((2, 3)), f32((2, 3)))
        assert r.shape == (2, 3) and r.dtype is D.float32
    with pytest.raises(InvalidArgument, match=r"^nx.map: .*\(float32 \[2, 3\], float32 \[3\]\)$"):
        nx.map(prog, f32((2, 3)), f32((3,)))
    f64 = nx.asarray(np.zeros((2, 3), np.float64))
    with pytest.raises(InvalidArgument, match=r"^nx.map: .*float64"):
        nx.map(prog, f32((2, 3)), f64)
    assert len(spy.calls) == 2


class _UnhashableMap:
    """A map spec the caller cannot hash: it is decided without the cache."""

    kernel = "map"
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, prog: Prog) -> None:
        self.prog = prog
        self.loads = (S.PLAIN,) * prog.n_ins

    def n_operands(self) -> int:
        return len(self.loads)


def test_an_unhashable_spec_is_decided_afresh(libs: list[Any]) -> None:
    spy = Recording("spy", Answer.DONE)
    libs.append(spy)
    sp = _UnhashableMap(Prog.binary(Binary.ADD, D.float32))
    (r,) = nx.call(sp, f32((4,)), f32((4,)), dtypes=[D.float32])
    assert r.shape == (4,) and spy.calls[-1][1] is sp
    with pytest.raises(InvalidArgument, match=r"^nx.map: .*\(float32 \[4\], float32 \[5\]\)$"):
        nx.call(sp, f32((4,)), f32((5,)), dtypes=[D.float32])
    assert len(spy.calls) == 1

"""The caller's plans: a warm call reuses its signature's plan, and a plan
never lets through a later call that differs in shapes, dtypes, layouts or
device, nor one with a dead buffer, a lost device or memory held exclusive."""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pytest

from nxkernel_core import caller, nx, plugins, rig
from nxkernel_core import dtype as D
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer, InvalidArgument
from nxkernel_core.array import Array
from nxkernel_core.kernel import KernelError, declining_library
from nxkernel_core.layout import Layout, Range, Slice
from nxkernel_core.prog import Binary, Prog

ADD = Prog.binary(Binary.ADD, D.float32)


def f32(values: Sequence[float] | np.ndarray[Any, Any], dev: rig.Rig | str = "host") -> Array:
    return nx.asarray(np.asarray(values, np.float32), device=dev)


def bits(a: Array) -> bytes:
    return a.to_numpy().tobytes()


@pytest.fixture
def other() -> Iterator[rig.Rig]:
    dev = rig.memory_device("caller-test")
    yield dev
    dev.close()


def test_a_warm_call_is_planned_and_gives_numpys_bits() -> None:
    x, y = f32(np.linspace(-3, 5, 8)), f32(np.linspace(1, 2, 8))
    for _ in range(3):
        r = nx.add(x, y)
        assert bits(r) == (x.to_numpy() + y.to_numpy()).tobytes()
        s = nx.sum(x)
        assert s.to_numpy() == np.float32(np.linspace(-3, 5, 8, dtype=np.float32).sum(dtype=np.float64))
    planned = [p for p in caller._plans.values() if p.hook is not None]
    assert planned, "the host library offers prepared map and reduce hooks"


def test_a_plan_does_not_serve_other_shapes() -> None:
    x8, x3 = f32(range(8)), f32(range(3))
    nx.map(ADD, x8, x8)
    (r,) = nx.map(ADD, x3, x3)
    assert r.shape == (3,) and bits(r) == (2 * np.arange(3, dtype=np.float32)).tobytes()
    with pytest.raises(InvalidArgument, match=r"^nx.map: .*\(float32 \[8\], float32 \[3\]\)$"):
        nx.map(ADD, x8, x3)


def test_a_plan_does_not_serve_other_dtypes() -> None:
    x = f32(range(8))
    nx.map(ADD, x, x)
    f64 = nx.asarray(np.arange(8, dtype=np.float64))
    with pytest.raises(InvalidArgument, match=r"^nx.map: .*float64 \[8\]"):
        nx.map(ADD, f64, f64)
    i32 = nx.asarray(np.arange(8, dtype=np.int32))
    assert nx.add(i32, i32).dtype is D.int32


def test_a_plan_does_not_serve_other_layouts() -> None:
    base = np.arange(16, dtype=np.float32)
    x = f32(base[:8])
    nx.add(x, x)
    whole = f32(base)
    strided = whole.view(Slice((Range(0, 8, 2),)))  # every other element, same shape
    offset = whole.view(Slice((Range(8, 8, 1),)))   # the second half
    assert bits(nx.add(strided, strided)) == (2 * base[::2]).tobytes()
    assert bits(nx.add(offset, offset)) == (2 * base[8:]).tobytes()
    assert bits(nx.sum(strided)) == np.float32(base[::2].sum()).tobytes()


def test_a_plan_does_not_serve_another_device(other: rig.Rig) -> None:
    x = f32(range(8))
    nx.add(x, x)
    y = f32(range(8), other)
    r = nx.add(y, y)
    assert r.device is other and bits(r) == (2 * np.arange(8, dtype=np.float32)).tobytes()
    with pytest.raises(InvalidArgument, match="operands are on host, caller-test"):
        nx.add(x, y)


def test_a_plan_does_not_serve_a_dead_buffer() -> None:
    x = f32(range(8))
    nx.add(x, x)
    nx.sum(x)
    rig.consume(x.buffer, "donated to a test")
    with pytest.raises(InvalidArgument, match="operand 1 was consumed, donated to a test"):
        nx.add(x, x)
    with pytest.raises(InvalidArgument, match="consumed, donated to a test"):
        nx.sum(x)


def test_a_plan_does_not_serve_a_lost_device(other: rig.Rig) -> None:
    x = f32(range(8), other)
    nx.add(x, x)
    other.lose("a test pulled it")
    with pytest.raises(rig.Lost, match="a test pulled it"):
        nx.add(x, x)


def test_a_plan_does_not_serve_memory_held_exclusive() -> None:
    x = f32(range(8))
    nx.add(x, x)
    with rig.with_claims(donate=[x.buffer]) as held:
        assert held.exclusive(x.buffer)
        with pytest.raises(InvalidArgument, match="held exclusive"):
            nx.add(x, x)
    assert x.buffer.memory.readers == 0 and x.buffer.memory.writers == 0
    assert bits(nx.add(x, x)) == (2 * np.arange(8, dtype=np.float32)).tobytes()


def test_a_warm_call_releases_its_claims_even_when_the_hook_fails() -> None:
    # Earlier tests' plans of this spec (under other registries, on other
    # devices) are not this call's: only its own plan may be found below.
    caller._plans.clear()
    x = f32(range(8))
    nx.add(x, x)
    plan = next(p for k, p in caller._plans.items()
                if p.hook is not None and k[0] == nx.elementwise._map_spec(Binary.ADD, D.float32))

    def failing(sp: Any, dsts: Sequence[Array], ops: Sequence[Array]) -> None:
        assert ops[0].buffer.memory.readers == 2  # one read claim per operand
        raise RuntimeError("hook failed")

    # A Plan is write-once: a failing one takes its place in the table.
    failing_plan = caller.Plan(plan.signature, plan.registry, plan.device, None, plan.dsts,
                               plan.libraries, failing)
    keys = [k for k, p in caller._plans.items() if p is plan]
    for k in keys:
        caller._plans[k] = failing_plan
    try:
        with pytest.raises(KernelError, match="raised RuntimeError: hook failed"):
            nx.add(x, x)
    finally:
        for k in keys:
            del caller._plans[k]
    assert x.buffer.memory.readers == 0


class _Spy:
    """A library answering DONE to every kernel, recording each kernel it is asked."""

    def __init__(self) -> None:
        self.name = "spy"
        self.statement = declining_library("spy").statement
        self.calls: list[str] = []

    def computes_on(self, device: rig.Rig) -> bool:
        return True

    def __getattr__(self, kernel: str) -> Any:
        def run(spec: Any, dsts: Sequence[Array], operands: Sequence[Array]) -> Answer:
            self.calls.append(kernel)
            return Answer.DONE
        return run


class _Registry:
    def __init__(self, lib: Any) -> None:
        self.lib = lib

    def libraries_for(self, device: rig.Rig) -> tuple[Any, ...]:
        return (self.lib,)


def test_a_plan_made_under_one_discovery_is_not_used_under_another(
        monkeypatch: pytest.MonkeyPatch) -> None:
    x = f32(range(8))
    nx.add(x, x)  # planned under the real registry, with the host's hook
    spy = _Spy()
    monkeypatch.setattr(plugins, "_registry", _Registry(spy))
    nx.add(x, x)
    nx.add(x, x)
    assert spy.calls == ["map", "map"]


def test_a_call_with_no_operand_plans_by_its_device(other: rig.Rig) -> None:
    sp = S.Assemble((2,), b"\x00\x00\x80\x3f", ())
    a = nx.call(sp, dtypes=(D.float32,), device=rig.host)[0]
    b = nx.call(sp, dtypes=(D.float32,), device=other)[0]
    assert a.device is rig.host and b.device is other
    assert bits(a) == bits(b) == np.ones(2, np.float32).tobytes()


class _Preparing(_Spy):
    """A spy that prepares a hook per signature; each hook checks that every
    call it gets has the signature it was prepared for."""

    def __init__(self) -> None:
        super().__init__()
        self.prepared: list[tuple[tuple[tuple[D.Dtype, Any], ...], rig.Rig]] = []

    def prepare(self, spec: Any, dsts: tuple[tuple[D.Dtype, Any], ...],
                operands: tuple[tuple[D.Dtype, Any], ...], device: rig.Rig) -> Any:
        self.prepared.append((operands, device))

        def hook(sp: Any, ds: Sequence[Array], ops: Sequence[Array]) -> None:
            assert sp == spec
            assert tuple((o.dtype, o.layout) for o in ops) == operands
            assert all(o.device is device for o in ops)
            assert tuple((d.dtype, d.layout) for d in ds) == dsts
            self.calls.append("hook")

        return hook


def test_a_hook_only_gets_calls_of_the_signature_it_was_prepared_for(
        monkeypatch: pytest.MonkeyPatch, other: rig.Rig) -> None:
    lib = _Preparing()
    registry = _Registry(lib)
    monkeypatch.setattr(plugins, "_registry", registry)
    whole = f32(range(16))
    x = f32(range(8))
    strided = whole.view(Slice((Range(0, 8, 2),)))
    y = f32(range(8), other)
    for a in (x, x, strided, strided, y, y, x):
        nx.map(ADD, a, a)
    assert lib.calls == ["hook"] * 7
    assert [dev.name for _, dev in lib.prepared] == ["host", "host", "caller-test"]
    assert [ops[0][1].strides for ops, _ in lib.prepared] == [(1,), (2,), (1,)]



def _specs(dt: D.Dtype, rank: int) -> list[Any]:
    """Map, reduce and scan specs of one ``dt`` operand of ``rank``, as nx's calls make them."""
    specs: list[Any] = [nx.elementwise._cast_spec(dt, D.float64)]
    if dt is not D.bool_:
        specs += [nx.elementwise._map_spec(Binary.ADD, dt), nx.elementwise._map_spec(Binary.MUL, dt)]
    reductions: list[Any] = [S.Monoid.MAX, S.Monoid.MIN]
    if dt is not D.bool_:
        reductions += [S.Monoid.SUM, S.Monoid.PROD]
    if not dt.is_complex:
        reductions += [S.Arg(S.Extreme.MAX), S.Arg(S.Extreme.MIN)]
    if dt.is_float:
        reductions += [S.LOGSUMEXP, S.MOMENTS]
    for axes in {tuple(range(rank)), tuple(range(rank))[1:], tuple(range(rank))[:1]}:
        specs += [nx.reductions._reduce_spec(dt, axes, r, dt) for r in reductions]
    if dt is not D.bool_:
        specs += [nx.reductions._cumsum_spec(dt, axis, dt) for axis in {0, rank - 1} if rank]
    return specs


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int32", "complex64", "bool"])
def test_a_prepared_hook_gives_the_kernel_methods_bits(dtype: str) -> None:
    """A warm call (the plan's prepared hook) gives the bits the host library's
    kernel method (its full path) gives the same spec and operands."""
    host = plugins.discover().library("host")
    rng = np.random.default_rng(7)
    dt = D.by_name(dtype)
    for shape in ((8,), (3, 5), (2, 3, 4), (), (1000,), (3, 300)):
        raw = rng.standard_normal(shape) * 4
        x = nx.asarray(raw.astype(np.bool_) if dt is D.bool_ else raw, dt)
        for spec in _specs(dt, len(shape)):
            ops = [x] * spec.n_operands()
            with np.errstate(all="ignore"):
                nx.call(spec, *ops)
                warm = nx.call(spec, *ops)
            key = (spec, None, None, *[v for o in ops for v in (o.dtype, o.layout, o.device)])
            assert caller._plans[key].hook is not None, spec
            dsts = [Array.empty(w.dtype, w.shape) for w in warm]
            assert getattr(host, spec.kernel)(spec, dsts, ops) is Answer.DONE
            for w, d in zip(warm, dsts, strict=True):
                assert w.to_numpy().tobytes() == d.to_numpy().tobytes(), (spec, shape)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_prepared_matmul_gives_the_kernel_methods_bits(dtype: str) -> None:
    """A warm nx.matmul (the host's prepared gemm) gives the bits the host
    library's contract method gives, on aligned and offset operands, in one
    tile or several (``nxkernel_host.tiling``); a product of a strided
    operand has no hook."""
    host = plugins.discover().library("host")
    rng = np.random.default_rng(11)
    dt = D.by_name(dtype)
    for (m, k, n), hooked in (((2, 4, 2), True), ((1, 1, 1), True), ((256, 33, 5), True),
                              ((300, 3, 2), True), ((700, 130, 97), True)):
        raw = rng.standard_normal(m * k + 1 + k * n).astype(dt.numpy_dtype)
        whole = nx.asarray(raw)
        a = whole.view(Slice((Range(1, m * k, 1),))).reshape([m, k])  # offset by one element
        b = nx.asarray(raw[m * k + 1:].reshape(k, n))
        for x in (a, nx.asarray(raw[1:m * k + 1].reshape(m, k))):
            nx.matmul(x, b)
            warm = nx.matmul(x, b)
            sp = nx.linalg._matmul_spec(0, dt)
            key = (sp, (dt,), None, dt, x.layout, x.device, dt, b.layout, b.device)
            assert (caller._plans[key].hook is not None) is hooked
            dst = Array.empty(dt, (m, n))
            assert host.contract(sp, [dst], [x, b]) is Answer.DONE
            assert warm.to_numpy().tobytes() == dst.to_numpy().tobytes(), (m, k, n)
    strided = f32(range(16)).view(Slice((Range(0, 8, 2),))).reshape([2, 4])
    if dt is D.float32:
        nx.matmul(strided, f32(range(8)).reshape([4, 2]))
        key = (nx.linalg._matmul_spec(0, dt), (dt,), None, dt, strided.layout, rig.host, dt,
               Layout.c_contiguous((4, 2)), rig.host)
        assert caller._plans[key].hook is None


def _outcome(run: Any) -> tuple[str, object]:
    """What a call gives: its result's dtype, shape and bits, or its error's type and message."""
    try:
        r = run()
    except Exception as e:
        return type(e).__name__, str(e)
    return "done", (r.dtype, r.shape, bits(r))


def _dead(prime: bool) -> tuple[str, object]:
    x = f32(range(8))
    if prime:
        nx.add(f32(range(8)), f32(range(8)))
    rig.consume(x.buffer, "donated to a test")
    return _outcome(lambda: nx.add(x, x))


def _lost_or_closed(prime: bool, lose: bool) -> tuple[str, object]:
    dev = rig.memory_device("caller-gone")
    try:
        x = f32(range(8), dev)
        if prime:
            nx.sum(f32(range(8), dev))
        if lose:
            dev.lose("a test pulled it")
        else:
            dev.close()
        return _outcome(lambda: nx.sum(x))
    finally:
        dev.close()


def _exclusive(prime: bool) -> tuple[str, object]:
    x = f32(range(8))
    if prime:
        nx.add(f32(range(8)), f32(range(8)))
    with rig.with_claims(donate=[x.buffer]):
        return _outcome(lambda: nx.add(x, x))


def _shapes(prime: bool) -> tuple[str, object]:
    x8, x3 = f32(range(8)), f32(range(3))
    if prime:
        nx.map(ADD, x8, x8)
    return _outcome(lambda: nx.map(ADD, x8, x3)[0])


def _dtypes(prime: bool) -> tuple[str, object]:
    if prime:
        nx.map(ADD, f32(range(8)), f32(range(8)))
    f64 = nx.asarray(np.arange(8, dtype=np.float64))
    return _outcome(lambda: nx.map(ADD, f64, f64)[0])


def _layouts(prime: bool) -> tuple[str, object]:
    if prime:
        nx.add(f32(range(8)), f32(range(8)))
    whole = f32(np.arange(17))
    strided = whole.view(Slice((Range(0, 8, 2),)))
    offset = whole.view(Slice((Range(9, 8, 1),)))
    return _outcome(lambda: nx.add(nx.add(strided, strided), nx.add(offset, offset)))


def _devices(prime: bool) -> tuple[str, object]:
    dev = rig.memory_device("caller-two")
    try:
        if prime:
            nx.add(f32(range(8)), f32(range(8)))
            nx.add(f32(range(8), dev), f32(range(8), dev))
        return _outcome(lambda: nx.add(f32(range(8)), f32(range(8), dev)))
    finally:
        dev.close()


@pytest.mark.parametrize("scenario", [
    _dead, functools.partial(_lost_or_closed, lose=True),
    functools.partial(_lost_or_closed, lose=False), _exclusive, _shapes, _dtypes, _layouts,
    _devices])
def test_a_warm_call_answers_what_a_cold_call_answers(scenario: Any) -> None:
    """Each call a cached plan must not let through (a dead buffer, a lost or
    closed device, memory held exclusive, other shapes, dtypes, layouts or
    devices) gets, after its signature's or a neighbour's plan was made, the
    very answer it gets with no plan at all."""
    caller._plans.clear()
    cold = scenario(False)
    warm = scenario(True)
    assert warm == cold
    if scenario is not _layouts:
        assert warm[0] != "done", warm


class _ConsumingRig(rig.Rig):
    """A host-memory device that consumes ``victim`` while it allocates a
    call's destinations: another thread's consume landing between the warm
    call's test of the epochs and its claims."""

    victim: rig.Buffer | None = None

    def pooled(self, nbytes: int) -> rig.Buffer:
        buf = super().pooled(nbytes)
        victim, self.victim = self.victim, None
        if victim is not None:
            rig.consume(victim, "consumed meanwhile")
        return buf


def test_a_warm_call_claims_no_buffer_consumed_since_it_was_found_live() -> None:
    dev = _ConsumingRig("caller-consuming", model="memory")
    rig.register(dev)
    try:
        x = f32(range(8), dev)
        nx.add(x, x)
        assert bits(nx.add(x, x)) == (2 * np.arange(8, dtype=np.float32)).tobytes()
        dev.victim = x.buffer
        with pytest.raises(InvalidArgument, match="operand 1 was consumed, consumed meanwhile"):
            nx.add(x, x)
        assert x.buffer.memory.readers == 0
    finally:
        dev.close()


def test_threads_on_one_warm_plan_get_their_own_bits_and_memory() -> None:
    """Threads calling the same warm plans (one nx.add and nx.sum signature,
    each thread its own values) at once: every result has its thread's bits,
    and results a thread keeps are never written by another's call (no two
    live results share a pooled block)."""
    x = f32(np.linspace(-3, 5, 8))
    ys = [f32(np.arange(8) * (k + 1)) for k in range(4)]
    nx.add(x, ys[0])
    nx.sum(ys[0])
    errors: list[str] = []

    def work(k: int) -> None:
        y = ys[k]
        want_add = (x.to_numpy() + y.to_numpy()).tobytes()
        want_sum = bits(nx.sum(y))
        kept: list[Array] = []
        for _ in range(300):
            r = nx.add(x, y)
            if bits(r) != want_add or bits(nx.sum(y)) != want_sum:
                errors.append(f"thread {k}: wrong bits")
            kept.append(r)
            if len(kept) > 4 and bits(kept.pop(0)) != want_add:
                errors.append(f"thread {k}: a kept result was written by another call")

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert x.buffer.memory.readers == 0 and all(y.buffer.memory.readers == 0 for y in ys)


def _spied_plan(x: Array) -> tuple[list[bool], Any]:
    """The warm nx.add(x, x) plan replaced by one whose hook records each run
    (and computes as the plan's); returns the record and the restoring call."""
    nx.add(x, x)
    sp = nx.elementwise._map_spec(Binary.ADD, D.float32)
    plan = next(p for k, p in caller._plans.items()
                if p.hook is not None and k[0] == sp and p.signature[3:6] == (x.dtype, x.layout, x.device))
    ran: list[bool] = []
    hook = plan.hook
    assert hook is not None

    def spy(sp: Any, dsts: Sequence[Array], ops: Sequence[Array]) -> None:
        ran.append(True)
        hook(sp, dsts, ops)

    spied = caller.Plan(plan.signature, plan.registry, plan.device, None, plan.dsts,
                        plan.libraries, spy)
    keys = [k for k, p in caller._plans.items() if p is plan]
    for k in keys:
        caller._plans[k] = spied

    def restore() -> None:
        for k in keys:
            caller._plans[k] = plan

    return ran, restore


def test_a_warm_call_that_meets_a_consume_testing_the_counts_takes_the_locked_path() -> None:
    """A warm read claim (no lock) that finds its memory ``pending`` (a consume
    or a donation testing the counts, under the lock) counts itself out and
    asks the library, whose door claims under the lock."""
    x = f32(range(8))
    ran, restore = _spied_plan(x)
    try:
        x.buffer.memory.pending = True
        r = nx.add(x, x)
        assert ran == [] and bits(r) == (2 * np.arange(8, dtype=np.float32)).tobytes()
        assert x.buffer.memory.readers == 0
        x.buffer.memory.pending = False
        nx.add(x, x)
        assert ran == [True]
    finally:
        x.buffer.memory.pending = False
        restore()


def test_a_warm_read_claim_never_overlaps_a_consume() -> None:
    """A consume that has tested the counts lets another thread run before it
    marks the memory consumed (a tracer stops it there, as a thread switch
    may): a warm call in that thread finds the memory pending and takes the
    locked path, which waits for the consume and refuses the consumed buffer.
    Its hook never runs while the memory is consumed under it."""
    x = f32(range(8))
    nx.add(x, x)
    sp = nx.elementwise._map_spec(Binary.ADD, D.float32)
    plan = next(p for k, p in caller._plans.items()
                if p.hook is not None and k[0] == sp and p.signature[3:6] == (x.dtype, x.layout, x.device))
    entered, leave = threading.Event(), threading.Event()
    overlaps: list[bool] = []

    def holding(sp: Any, dsts: Sequence[Array], ops: Sequence[Array]) -> None:
        entered.set()
        leave.wait(5)
        overlaps.append(ops[0].buffer.dead is not None)

    held = caller.Plan(plan.signature, plan.registry, plan.device, None, plan.dsts,
                       plan.libraries, holding)
    keys = [k for k, p in caller._plans.items() if p is plan]
    outcome: list[str] = []

    def read() -> None:
        try:
            nx.add(x, x)
            outcome.append("done")
        except InvalidArgument as e:
            outcome.append(str(e))

    reader = threading.Thread(target=read)

    def in_consume(frame: Any, event: str, arg: Any) -> Any:
        if event == "line" and "held" in frame.f_locals and not reader.is_alive() and not outcome:
            reader.start()  # the counts are tested; the epoch is not yet moved
            entered.wait(0.3)
        return in_consume

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        return in_consume if frame.f_code is rig.consume.__code__ else None

    for k in keys:
        caller._plans[k] = held
    previous = sys.gettrace()
    try:
        sys.settrace(tracer)
        try:
            rig.consume(x.buffer, "donated")
        finally:
            sys.settrace(previous)
        leave.set()
        reader.join(5)
    finally:
        leave.set()
        for k in keys:
            caller._plans[k] = plan
    assert overlaps == [] and len(outcome) == 1 and "consumed, donated" in outcome[0], (overlaps, outcome)
    assert x.buffer.memory.readers == 0

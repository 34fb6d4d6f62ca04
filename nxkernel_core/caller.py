"""The caller's one checked entry to every kernel: ``call(spec, *operands)``.

``call`` checks that a call fits (an error names the function and lists the
arrays as ``dtype [shape]``), allocates the destinations on the operands'
device, asks the libraries that compute on that device in priority order, and
raises ``refused(...)`` on a refusal, or ``InvalidArgument`` naming each
library and its reason when every one declines. Nothing computes in a
library's place.

**Plans.** Everything ``call`` decides depends on the call's *signature*
alone: the spec, each operand's dtype, layout and device, and the ``dtypes``
and ``device`` arguments. The first call of a signature makes its ``Plan``:
the fit decision (or the refusal), the destinations' dtypes, layouts and
sizes, the libraries to ask, and the first library's prepared hook where it
offers one (the library checks its fit, compiles its program and reads its
claims' needs once, there). A warm call is then: one look-up of the plan
(by the spec's and the layouts' identities, ``_plans``), a test that the
operands' buffers live and the device is neither lost nor closed, fresh
destinations, the operands' read claims, the hook, and the release. Nothing
else is checked again: the plan proves it. Any call whose operands do not
live, or whose memory is held exclusive, takes the path a cold call takes,
where the door answers its refusal. A plan is made under one discovery's
registry and is never used under another.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, final

from .answer import Answer, InvalidArgument, describe, refused
from .array import Array
from .dtype import Dtype
from .kernel import Call, KernelError
from .kernels.record import Error
from .kernels.registry import kernel
from .layout import Layout
from .rig import CLAIMS_LOCK, HAS_GIL, Lost, Memory, OutOfMemory, Rig

__all__ = ["Hook", "Plan", "call", "call1", "call2", "result_dtypes"]

#: A library's prepared hook for one signature: it computes the call into
#: fresh C-contiguous destinations while the caller holds the operands' read
#: claims, and returns nothing (its library checked the fit when it made it).
Hook = Callable[[Any, Sequence[Array], Sequence[Array]], None]


# --------------------------------------------------------------------------
# Decisions: the destinations' shapes and dtypes, or the refusal
# --------------------------------------------------------------------------


def result_dtypes(sp: Any, operands: Sequence[Array]) -> tuple[Dtype, ...]:
    """The destinations' dtypes the spec and operands fix (as ``call`` allocates them)."""
    return _fixed_dtypes(sp, tuple(o.dtype for o in operands))


def _fixed_dtypes(sp: Any, loads: Sequence[Dtype]) -> tuple[Dtype, ...]:
    """The destinations' dtypes the spec and the operands' dtypes ``loads`` fix:
    its kernel's dtype rule."""
    fixed = kernel(sp.kernel).dtypes(sp, loads)
    if fixed is None:
        raise InvalidArgument(f"nx.call: {type(sp).__name__} needs its destinations' dtypes "
                              "(dtypes=...)")
    return fixed


@final
@dataclass(frozen=True, slots=True)
class _Decision:
    """What ``call`` decides from the spec and the operands' shapes and dtypes
    alone: the destinations' shapes and dtypes, or the refusal (answer and
    reason) of a call that does not fit."""

    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[Dtype, ...]
    refusal: tuple[Answer, str] | None


def _decide(sp: Any, shapes: tuple[tuple[int, ...], ...], loads: tuple[Dtype, ...],
            dtypes: tuple[Dtype, ...] | None) -> _Decision:
    """The decision on a call of ``sp`` on operands of ``shapes`` and dtypes
    ``loads``, into destinations of ``dtypes`` where given (else the fixed
    ones): a pure function of its arguments."""
    k = kernel(sp.kernel)
    results = k.shapes(sp, shapes)
    if isinstance(results, Error):
        return _Decision((), (), (Answer.SHAPE_MISMATCH, results.reason))
    dts = dtypes if dtypes is not None else _fixed_dtypes(sp, loads)
    if len(dts) != len(results):
        return _Decision(tuple(results), dts, None)  # call raises InvalidArgument
    return _Decision(tuple(results), dts, k.refusal(sp, shapes, loads, dts))


#: ``_decide``, made once per spec, shapes and dtypes: a plan (below) made for
#: another layout or device of the same shapes then skips the shape rules and
#: the refusal rules. Bounded; safe with threads.
_decided = functools.lru_cache(maxsize=1024)(_decide)


# --------------------------------------------------------------------------
# Plans
# --------------------------------------------------------------------------


@final
class Plan:
    """What a warm call of one signature reuses. Write-once.

    ``signature``: the signature it was made for (held, so that the
    identities in its identity key, below, name no other object while the
    plan lives). ``registry``: the discovery it was made under. ``device``: the
    destinations' device. ``refusal``: the caller's refusal (answer, reason)
    of a call that does not fit, else ``None``. ``dsts``: each destination's
    dtype, C-contiguous layout and bytes. ``libraries``: the libraries that
    compute on ``device``, in the caller's order. ``hook``: the first
    library's prepared hook, or ``None`` (then each library's kernel method is
    asked, as on the full path); a plan has a hook only where every operand is
    on ``device``. ``one``: ``dsts[0]`` where it is the only destination, else
    ``None``.
    """

    __slots__ = ("device", "dsts", "hook", "libraries", "one", "refusal", "registry", "signature")

    def __init__(self, signature: tuple[object, ...], registry: object, device: Rig,
                 refusal: tuple[Answer, str] | None, dsts: tuple[tuple[Dtype, Layout, int], ...],
                 libraries: tuple[Any, ...], hook: Hook | None) -> None:
        self.signature: Final = signature
        self.registry: Final = registry
        self.device: Final = device
        self.refusal: Final = refusal
        self.dsts: Final = dsts
        self.libraries: Final = libraries
        self.hook: Final = hook
        self.one: Final = dsts[0] if len(dsts) == 1 else None


#: Plans by signature. Each plan is kept under two keys: its signature
#: (``spec, dtypes, device`` and each operand's ``dtype, layout, device``) and
#: its identity key, the signature with the spec and each layout replaced by
#: its ``id``: the cheap look-up of a caller reusing its spec and its arrays'
#: layouts (``nx``'s functions cache their specs; a shape's C-contiguous
#: layout is made once), which hashes no spec and no layout. An equal spec or
#: layout made afresh finds the plan by its signature. Bounded: past
#: ``_PLANS_MAX`` keys the oldest goes. Look-ups take no lock (a dict read is
#: atomic); inserts do.
_plans: dict[tuple[object, ...], Plan] = {}
_PLANS_MAX: Final = 4096
_plans_lock: Final = threading.Lock()


def _identity(signature: tuple[object, ...]) -> tuple[object, ...]:
    """``signature``'s identity key (see ``_plans``)."""
    return (id(signature[0]), signature[1], signature[2],
            *[id(v) if type(v) is Layout else v for v in signature[3:]])


def _keep(signature: tuple[object, ...], plan: Plan) -> None:
    """Keep ``plan`` under ``signature`` and under its identity key."""
    with _plans_lock:
        while len(_plans) >= _PLANS_MAX - 1:
            del _plans[next(iter(_plans))]
        _plans[_identity(signature)] = plan
        _plans[signature] = plan


def _registry() -> Any:
    """The plugin registry (``plugins.discover()``); the module imported on
    first use (the plugins module imports the libraries, which import this
    one), and its discovery read straight once made."""
    global _plugins
    if _plugins is None:
        from . import plugins

        _plugins = plugins
    return _plugins._registry or _plugins.discover()


_plugins: Any = None


def _fresh(dt: Dtype, layout: Layout, nbytes: int, dev: Rig) -> Array:
    """A fresh array of zero bits: what ``Array.empty`` makes, from the plan's
    layout and size (saving the layout's look-up and the size's arithmetic)."""
    out = _new_array(Array)
    out.buffer = dev.pooled(nbytes)
    out.dtype = dt
    out.layout = layout
    return out


_new_array: Final = object.__new__


# --------------------------------------------------------------------------
# The call
# --------------------------------------------------------------------------


def call(sp: Any, *operands: Array, dtypes: Sequence[Dtype] | None = None,
         device: Rig | None = None, name: str | None = None) -> tuple[Array, ...]:
    """Run kernel ``sp.kernel`` on ``operands``: check the call fits, allocate the
    destinations (of ``dtypes`` where the spec does not fix them) on the
    operands' device, and ask each library that computes on it, in priority
    order, until one answers DONE. Returns the destinations."""
    if len(operands) == 2:
        return call2(sp, operands[0], operands[1], dtypes, device, name)
    if len(operands) == 1:
        return call1(sp, operands[0], dtypes, device, name)
    return _call(sp, operands, dtypes, device, name)


# The warm call of one or two operands, spelled out (``nx``'s functions call
# these straight): the plan under the identity key, run where every
# operand's buffer lives (``_run`` tests the device) and discovery is the
# plan's (a plan exists only after ``_registry`` imported the plugins
# module). Anything else, a miss included, takes ``_call``.


def call2(sp: Any, a: Array, b: Array, dtypes: Sequence[Dtype] | None, device: Rig | None,
          name: str | None) -> tuple[Array, ...]:
    """``call(sp, a, b, dtypes=dtypes, device=device, name=name)``."""
    try:
        if type(a) is Array and type(b) is Array:
            ab, bb = a.buffer, b.buffer
            am, bm = ab.memory, bb.memory
            plan = _plans.get((id(sp), dtypes, device, a.dtype, id(a.layout), am.device,
                               b.dtype, id(b.layout), bm.device))
            if (plan is not None and ab.epoch == am.epoch and bb.epoch == bm.epoch
                    and plan.registry is _plugins._registry):
                return _run(plan, sp, (a, b), name)
    except TypeError:  # unhashable dtypes (a list): _call makes them a tuple
        pass
    return _call(sp, (a, b), dtypes, device, name)


def call1(sp: Any, a: Array, dtypes: Sequence[Dtype] | None, device: Rig | None,
          name: str | None) -> tuple[Array, ...]:
    """``call(sp, a, dtypes=dtypes, device=device, name=name)``."""
    try:
        if type(a) is Array:
            ab = a.buffer
            am = ab.memory
            plan = _plans.get((id(sp), dtypes, device, a.dtype, id(a.layout), am.device))
            if plan is not None and ab.epoch == am.epoch and plan.registry is _plugins._registry:
                return _run(plan, sp, (a,), name)
    except TypeError:  # unhashable dtypes (a list): _call makes them a tuple
        pass
    return _call(sp, (a,), dtypes, device, name)


def _call(sp: Any, operands: Sequence[Array], dtypes: Sequence[Dtype] | None,
          device: Rig | None, name: str | None) -> tuple[Array, ...]:
    """``call`` of any arity: the plan under the identity key, else under the
    signature, run where every operand lives; else the full path."""
    registry = _registry()
    dts = dtypes if dtypes is None or type(dtypes) is tuple else tuple(dtypes)
    key: list[object] = [sp, dts, device]
    live = True
    for o in operands:
        if type(o) is not Array:  # an untyped caller's operand: the full path refuses it
            return _full(sp, operands, dts, device, name, registry, None, live)  # type: ignore[unreachable]
        buf = o.buffer
        mem = buf.memory
        key += (o.dtype, o.layout, mem.device)
        if buf.epoch != mem.epoch:
            live = False
    signature = tuple(key)
    try:
        plan = _plans.get(_identity(signature)) or _plans.get(signature)
    except TypeError:  # a spec holding something unhashable: no plan
        return _full(sp, operands, dts, device, name, registry, None, live)
    if plan is None or plan.registry is not registry or not live:
        return _full(sp, operands, dts, device, name, registry, signature, live)
    return _run(plan, sp, operands, name)


def _run(plan: Plan, sp: Any, operands: Sequence[Array], name: str | None) -> tuple[Array, ...]:
    """A call of ``plan``'s signature whose operands' buffers lived when the
    plan was found: the plan's refusal, or fresh destinations, the operands'
    read claims, the hook and the release; without a hook, or where an
    operand's memory is held exclusive or was consumed since, the libraries
    are asked (their doors answer what the hook's caller did not test)."""
    dev = plan.device
    hook = plan.hook
    if hook is None:
        if plan.refusal is not None:
            refused(name or f"nx.{sp.kernel}", plan.refusal[0], operands, plan.refusal[1])
        fresh = tuple([_fresh(dt, lay, n, dev) for dt, lay, n in plan.dsts])
        return _ask(plan.libraries, sp, fresh, operands, name, dev)
    if dev._lost is not None or dev._closed:
        # Every operand is on ``dev`` (a hook's plan), and the call fits: a
        # cold call raises here too, allocating its destinations.
        dev.check()
    one = plan.one
    if one is not None:
        out = _new_array(Array)
        out.buffer = dev.pooled(one[2])
        out.dtype = one[0]
        out.layout = one[1]
        dsts: tuple[Array, ...] = (out,)
    else:
        dsts = tuple([_fresh(dt, lay, n, dev) for dt, lay, n in plan.dsts])
    # The destinations are fresh: no other claim can reach them before
    # ``call`` returns, so only the operands are claimed, each for reading,
    # or none where one is held exclusive or was consumed since ``call``
    # found it live (``rig.claim``'s rule, inlined). Under a GIL without the
    # lock: each operand counted a reader first, then its memory tested
    # (``rig``'s doc says why this is sound), spelled out for one and two
    # operands.
    mems: tuple[Memory, ...] | None
    if HAS_GIL and len(operands) == 2:
        ab, bb = operands[0].buffer, operands[1].buffer
        am, bm = ab.memory, bb.memory
        am.readers += 1
        bm.readers += 1
        if (am.pending or bm.pending or am.exclusive or bm.exclusive or ab.epoch != am.epoch
                or bb.epoch != bm.epoch):
            am.readers -= 1
            bm.readers -= 1
            mems = None
        else:
            mems = (am, bm)
    elif HAS_GIL and len(operands) == 1:
        ab = operands[0].buffer
        am = ab.memory
        am.readers += 1
        if am.pending or am.exclusive or ab.epoch != am.epoch:
            am.readers -= 1
            mems = None
        else:
            mems = (am,)
    else:
        with CLAIMS_LOCK:
            mems = tuple([o.buffer.memory for o in operands])
            if any(m.exclusive or o.buffer.epoch != m.epoch
                   for o, m in zip(operands, mems, strict=True)):
                mems = None
            else:
                for m in mems:
                    m.readers += 1
    if mems is None:
        return _ask(plan.libraries, sp, dsts, operands, name, dev)
    try:
        hook(sp, dsts, operands)
    except (Lost, OutOfMemory):
        raise
    except Exception as e:
        raise KernelError(name or f"nx.{sp.kernel}", plan.libraries[0].name, sp.kernel,
                          f"raised {type(e).__name__}: {e}") from e
    finally:
        if HAS_GIL:
            for m in mems:
                m.readers -= 1
        else:
            with CLAIMS_LOCK:
                for m in mems:
                    m.readers -= 1
    return dsts


def _full(sp: Any, ops: Sequence[Array], dtypes: tuple[Dtype, ...] | None, device: Rig | None,
          name: str | None, registry: Any, signature: tuple[object, ...] | None,
          live: bool) -> tuple[Array, ...]:
    """The full path: every check, in the caller's order; makes the signature's
    plan where ``signature`` is given and the call gets that far."""
    fn = name or f"nx.{sp.kernel}"
    for o in ops:
        if not isinstance(o, Array):
            raise InvalidArgument(f"{fn}: operands must be Arrays, got {type(o).__name__}; use nx.asarray")
    if len(ops) != sp.n_operands():
        refused(fn, Answer.BAD_ARITY, ops,
                f"takes {sp.n_operands()} operands, got {len(ops)}")
    dev = ops[0].buffer.memory.device if ops else None
    for o in ops:
        if o.buffer.memory.device is not dev:
            devices = {id(o.device): o.device for o in ops}
            refused(fn, Answer.WRONG_DEVICE, ops,
                    "operands are on " + ", ".join(d.name for d in devices.values()))
    dev = device or dev
    if dev is None:
        raise InvalidArgument(f"{fn}: a call with no operand needs device=")
    key = (sp, tuple([o.layout.shape for o in ops]), tuple([o.dtype for o in ops]), dtypes)
    try:
        decision = _decided(*key)
    except TypeError:
        if signature is not None:
            raise
        decision = _decide(*key)  # a spec holding something unhashable is decided afresh
    libraries = registry.libraries_for(dev)
    if decision.refusal is not None:
        if signature is not None:
            _keep(signature, Plan(signature, registry, dev, decision.refusal, (), libraries, None))
        refused(fn, decision.refusal[0], ops, decision.refusal[1])
    dts, shapes = decision.dtypes, decision.shapes
    if len(dts) != len(shapes):
        raise InvalidArgument(f"{fn}: {len(dts)} destination dtypes for {len(shapes)} results")
    if signature is not None:
        layouts = [Layout.c_contiguous(sh) for sh in shapes]
        made = tuple([(dt, lay, (lay.numel * dt.bits + 7) // 8)  # D.bytes
                      for dt, lay in zip(dts, layouts, strict=True)])
        plan = Plan(signature, registry, dev, None, made, libraries,
                    _hook(sp, made, ops, dev, libraries))
        _keep(signature, plan)
        if live:
            return _run(plan, sp, ops, name)
    dsts = tuple([Array.empty(dt, sh, dev) for dt, sh in zip(dts, shapes, strict=True)])
    return _ask(libraries, sp, dsts, ops, name, dev)


def _hook(sp: Any, dsts: tuple[tuple[Dtype, Layout, int], ...], ops: Sequence[Array], dev: Rig,
          libraries: tuple[Any, ...]) -> Hook | None:
    """The first library's prepared hook for this signature, where it offers one
    (an optional ``prepare`` method) and every operand is on ``dev``."""
    if not libraries or any(o.buffer.memory.device is not dev for o in ops):
        return None
    lib = libraries[0]
    # Looked up on the class: a library answering any attribute (a test
    # double's ``__getattr__``) offers no hook it did not define.
    if getattr(type(lib), "prepare", None) is None:
        return None
    hook: Hook | None = lib.prepare(sp, tuple([(dt, lay) for dt, lay, _ in dsts]),
                                    tuple([(o.dtype, o.layout) for o in ops]), dev)
    return hook


def _ask(libraries: Sequence[Any], sp: Any, dsts: tuple[Array, ...], ops: Sequence[Array],
         name: str | None, dev: Rig) -> tuple[Array, ...]:
    """Ask each library in turn until one answers DONE; raise on a refusal, or
    when every one declines."""
    fn = name or f"nx.{sp.kernel}"
    declines = []
    for lib in libraries:
        try:
            answer = getattr(lib, sp.kernel)(sp, dsts, ops)
        except (Lost, OutOfMemory):
            raise
        except Exception as e:
            raise KernelError(fn, lib.name, sp.kernel, f"raised {type(e).__name__}: {e}") from e
        if answer is Answer.DONE:
            return dsts
        if answer is Answer.DECLINED:
            why = lib.statement.declines(Call(sp.kernel, sp, dsts, tuple(ops))) or "declined"
            declines.append(f"{lib.name} declines it ({why})")
            continue
        if not isinstance(answer, Answer):
            raise KernelError(fn, lib.name, sp.kernel, f"answered {answer!r}, not an Answer")
        refused(fn, answer, ops)
    if not libraries:
        raise InvalidArgument(f"{fn}: no library computes on {dev.name} ({describe(ops)})")
    raise InvalidArgument(f"{fn}: no library computes this case: {'; '.join(declines)} "
                          f"({describe(ops)})")

"""How a law calls a library and judges what it did.

A law calls the library under test directly, ``lib.KERNEL(spec, dsts,
operands)``, on arrays of the device it computes on (a :class:`Subject`):

- every operand sits in its own buffer, reached through a drawn layout
  (:func:`operand`), the rest of the buffer a canary pattern;
- every destination is a C-contiguous array inside a larger buffer pre-filled
  with the canary (:class:`Slot`), so a write outside its region, a write
  after a decline or a refusal, and a write into an operand are seen.

:func:`invoke` makes a call that fits and checks what every such call keeps:
the answer is DONE or DECLINED (never a refusal of a fitting call); DECLINED
exactly where the statement's ``declines`` says so, in both directions; a
decline writes nothing; DONE writes nothing outside the destinations and no
operand changes. :func:`invoke_misfit` makes a call that does not fit and
checks it is never DONE and writes nothing outside its arrays.

Laws are registered with :func:`law`, which also makes the pytest test of
each, and run under Hypothesis by :func:`run_law`.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextvars
import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import numpy.typing as npt
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from .. import dtype as D
from .. import exact as O
from ..answer import Answer
from ..array import Array
from ..dtype import Dtype
from ..kernel import Call, Library
from ..layout import Broadcast, Layout, Permute, Range, Slice, Window, Windows
from ..rig import Buffer, Memory, Rig
from . import generators as G

__all__ = [
    "ANSWERS",
    "CI_PROFILE",
    "LAWS",
    "THOROUGH_PROFILE",
    "Law",
    "LawViolation",
    "Outcome",
    "Slot",
    "Subject",
    "assert_bits",
    "canary_buffer",
    "check_nan_rule",
    "contiguous",
    "fail",
    "invoke",
    "invoke_misfit",
    "law",
    "operand",
    "operand_of",
    "place",
    "register_profiles",
    "run_law",
    "same_on_threads",
    "shares",
    "slot",
]

Arr = npt.NDArray[Any]
Data = st.DataObject

#: The quick profile every run uses unless ``--hypothesis-profile`` names another.
CI_PROFILE: Final = "nxkernel-ci"
#: The long profile: ``--hypothesis-profile thorough``.
THOROUGH_PROFILE: Final = "thorough"

_QUIET: Final = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
                 HealthCheck.large_base_example]


def register_profiles() -> None:
    """Register the kit's Hypothesis profiles (idempotent): ``nxkernel-ci``, a
    few derandomized examples per law, and ``thorough``, many random ones."""
    settings.register_profile(CI_PROFILE, max_examples=20, deadline=None, derandomize=True,
                              database=None, suppress_health_check=_QUIET, print_blob=False,
                              phases=(Phase.explicit, Phase.generate, Phase.shrink))
    settings.register_profile(THOROUGH_PROFILE, max_examples=300, deadline=None,
                              suppress_health_check=_QUIET, print_blob=True)


register_profiles()


# --------------------------------------------------------------------------
# The library under test
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Subject:
    """A library under test and one device it computes on."""

    library: Library
    device: Rig

    def __str__(self) -> str:
        return f"{self.library.name}@{self.device.name}"

    def kernel(self, name: str) -> Callable[[Any, Sequence[Array], Sequence[Array]], Answer]:
        """The library's method for kernel ``name``."""
        fn: Callable[[Any, Sequence[Array], Sequence[Array]], Answer] = getattr(self.library, name)
        return fn


# --------------------------------------------------------------------------
# Memory with canaries
# --------------------------------------------------------------------------


def _canary(nbytes: int) -> npt.NDArray[np.uint8]:
    """The canary pattern: bytes no kernel has reason to write."""
    return ((np.arange(nbytes, dtype=np.int64) * 151 + 0x5B) & 0xFF).astype(np.uint8)


def canary_buffer(subject: Subject, nbytes: int) -> Buffer:
    """A fresh buffer of at least one byte on the subject's device, filled with
    the canary."""
    n = max(1, nbytes)
    buf = Buffer.create(subject.device, n)
    subject.device.write_bytes(buf.memory, buf.offset, _canary(n))
    return buf


def _bytes_of(memory: Memory) -> npt.NDArray[np.uint8]:
    """A host copy of a memory's bytes."""
    return memory.device.read_bytes(memory, 0, memory.nbytes)


@dataclass(eq=False)
class Slot:
    """A destination: a C-contiguous array of ``shape`` inside a larger
    canary-filled buffer, ``before`` elements after its start."""

    array: Array
    before: npt.NDArray[np.uint8] = field(repr=False)
    mask: npt.NDArray[np.uint8] = field(repr=False)

    @property
    def memory(self) -> Memory:
        return self.array.buffer.memory

    def now(self) -> npt.NDArray[np.uint8]:
        return _bytes_of(self.memory)

    def changed(self) -> bool:
        """Whether any byte of the buffer changed."""
        return not np.array_equal(self.now(), self.before)

    def changed_outside(self) -> bool:
        """Whether any bit outside the destination's elements changed."""
        diff = self.now() ^ self.before
        return bool((diff & ~self.mask).any())


def slot(subject: Subject, dt: Dtype, shape: Sequence[int], lead: int = 1, tail: int = 1) -> Slot:
    """A destination of ``dt`` and ``shape`` with ``lead`` elements of canary
    before it and ``tail`` after (a sub-byte one may start and end inside a
    byte, sharing it with the canary)."""
    shp = tuple(int(d) for d in shape)
    n = math.prod(shp)
    total = D.bytes(dt, lead + n + tail)
    buf = canary_buffer(subject, total)
    arr = Array(dt, Layout.c_contiguous(shp, lead), buf)
    mask = np.zeros(buf.memory.nbytes, dtype=np.uint8)
    if n:
        bit_lo, bit_hi = lead * dt.bits, (lead + n) * dt.bits
        first, last = bit_lo // 8, (bit_hi - 1) // 8
        mask[first:last + 1] = 0xFF
        mask[first] &= (0xFF << (bit_lo % 8)) & 0xFF
        if bit_hi % 8:
            mask[last] &= (1 << (bit_hi % 8)) - 1
    return Slot(arr, _bytes_of(buf.memory), mask)


# --------------------------------------------------------------------------
# Operands
# --------------------------------------------------------------------------


def contiguous(subject: Subject, dt: Dtype, vals: Arr, offset: int = 0) -> Array:
    """A C-contiguous array of ``dt`` holding ``vals`` in its own canary buffer."""
    shape = np.shape(vals)
    n = math.prod(shape)
    buf = canary_buffer(subject, D.bytes(dt, offset + n))
    arr = Array(dt, Layout.c_contiguous(shape, offset), buf)
    if n:
        arr.write_numpy(np.asarray(vals, dtype=dt.numpy_dtype))
    return arr


def place(subject: Subject, dt: Dtype, shape: tuple[int, ...], p: G.Placement,
          make: Callable[[tuple[int, ...]], Arr]) -> Array:
    """An array of ``dt`` and ``shape`` placed as ``p`` says, its values
    ``make(base shape)`` (a broadcast or windowed view reads the base)."""
    rank = len(shape)
    if p.plan == "broadcast":
        src = tuple(1 if i in p.ones else shape[i] for i in range(p.drop, rank))
        base = contiguous(subject, dt, make(src), p.offset)
        return base.view(Broadcast(shape))
    if p.plan == "windowed":
        a = p.axis
        w, k = shape[a], shape[-1]
        reach = (w - 1) * p.step + (k - 1) * p.dilation + 1
        under = tuple(reach if i == a else d for i, d in enumerate(shape[:-1]))
        base = contiguous(subject, dt, make(under), p.offset)
        return base.view(Windows((Window(a, k, p.step, p.dilation),)))
    if p.plan == "strided" and rank:
        inverse = [0] * rank
        for i, j in enumerate(p.perm):
            inverse[j] = i
        view_ext = [shape[inverse[j]] for j in range(rank)]
        base_shape: list[int] = []
        ranges: list[Range] = []
        for j in range(rank):
            d, s, x = view_ext[j], p.steps[j], p.extra[j]
            if d == 0:
                base_shape.append(x)
                ranges.append(Range(0, 0, 1))
                continue
            e = (d - 1) * abs(s) + 1 + x
            start = x if s > 0 else (d - 1) * abs(s) + x // 2
            base_shape.append(e)
            ranges.append(Range(start, d, s))
        n = math.prod(base_shape)
        buf = canary_buffer(subject, D.bytes(dt, p.offset + n))
        base_arr = Array(dt, Layout.c_contiguous(base_shape, p.offset), buf)
        view = base_arr.view(Slice(tuple(ranges))).view(Permute(p.perm))
        vals = make(shape)
        if view.numel:
            view.write_numpy(np.asarray(vals, dtype=dt.numpy_dtype))
        return view
    return contiguous(subject, dt, make(shape), p.offset)


def operand(data: Data, subject: Subject, dt: Dtype, shape: Sequence[int],
            profiles: Sequence[str] = G.PROFILES, plans: Sequence[str] = G.PLANS,
            label: str = "operand") -> tuple[Array, Arr]:
    """An operand of ``dt`` and ``shape``: values in a drawn profile, a drawn
    placement among ``plans``. Returns the array and its elements as read back."""
    shp = tuple(int(d) for d in shape)
    profile = data.draw(G.profiles(profiles), label=f"{label} profile")
    seed = data.draw(st.integers(0, 2**32 - 1), label=f"{label} seed")
    p = data.draw(G.placements(shp, plans), label=f"{label} placement")
    arr = place(subject, dt, shp, p, lambda s: G.values(dt, s, profile, seed))
    return arr, arr.to_numpy()


def operand_of(data: Data, subject: Subject, dt: Dtype, vals: Arr, plans: Sequence[str] = ("contiguous",
               "strided"), label: str = "operand") -> Array:
    """An operand holding the given ``vals`` in a drawn placement (contiguous or
    strided: those that can hold any values)."""
    shp = tuple(np.shape(vals))
    p = data.draw(G.placements(shp, plans), label=f"{label} placement")
    return place(subject, dt, shp, p, lambda s: np.asarray(vals))


# --------------------------------------------------------------------------
# Calls
# --------------------------------------------------------------------------


class LawViolation(AssertionError):
    """A library broke a law; the message says which rule and how."""


def fail(msg: str) -> LawViolation:
    return LawViolation(msg)


@dataclass
class Outcome:
    """What a call answered, its destinations and (where DONE) their elements."""

    answer: Answer
    slots: list[Slot]
    results: list[Arr]

    @property
    def declined(self) -> bool:
        return self.answer is Answer.DECLINED

    @property
    def dsts(self) -> list[Array]:
        return [s.array for s in self.slots]


def _describe(kernel: str, spec: object, dsts: Sequence[Array], operands: Sequence[Array]) -> str:
    ops = ", ".join(f"{a.dtype.name}{list(a.shape)}" for a in operands)
    ds = ", ".join(f"{a.dtype.name}{list(a.shape)}" for a in dsts)
    return f"{kernel}({spec!r}; dsts [{ds}]; operands [{ops}])"


def shares(a: Array, b: Array) -> bool:
    """Whether two arrays share a byte of one memory (their byte spans meet):
    the sharing the door decides on, whatever elements either reaches."""
    if a.buffer.memory is not b.buffer.memory or a.numel == 0 or b.numel == 0:
        return False
    alo, ahi = a.byte_span()
    blo, bhi = b.byte_span()
    return alo < bhi and blo < ahi


def _memories(arrays: Sequence[Array]) -> list[Memory]:
    seen: dict[int, Memory] = {}
    for a in arrays:
        seen.setdefault(id(a.buffer.memory), a.buffer.memory)
    return list(seen.values())


def invoke(subject: Subject, spec: Any, dsts: Sequence[tuple[Dtype, Sequence[int]] | Slot],
           operands: Sequence[Array], data: Data | None = None) -> Outcome:
    """Call the subject's kernel ``spec.kernel`` with a call that fits and check
    what every call keeps (see the module's doc). ``dsts`` are slots or
    (dtype, shape) pairs to make slots of (margins drawn from ``data``)."""
    kernel = spec.kernel
    lead = data.draw(st.integers(1, 3), label="dst margin") if data is not None else 1
    slots = [d if isinstance(d, Slot) else slot(subject, d[0], d[1], lead=lead, tail=2) for d in dsts]
    arrays = [s.array for s in slots]
    identical = {id(o.buffer.memory) for o in operands for a in arrays if o.identical(a)}
    kept = [m for m in _memories(operands) if id(m) not in identical
            and all(m is not s.memory for s in slots)]
    before = [_bytes_of(m) for m in kept]
    answer = subject.kernel(kernel)(spec, arrays, list(operands))
    what = _describe(kernel, spec, arrays, operands)
    if currently_in_test_context():
        event(f"{kernel}: {answer.name if isinstance(answer, Answer) else answer!r}")
    ANSWERS[(_current_law.get(), kernel, str(getattr(answer, "name", answer)))] += 1
    if not isinstance(answer, Answer):
        raise fail(f"{subject} answered {answer!r}, not an Answer, to {what}")
    if answer.is_refusal:
        raise fail(f"{subject} refused ({answer.name}) a call that fits: {what}. A kernel answers "
                   "Done or Declined to a call that fits (contract: 'The caller must pass a call "
                   "that fits')")
    why = subject.library.statement.declines(Call(kernel, spec, tuple(arrays), tuple(operands)))
    if answer is Answer.DECLINED and why is None:
        raise fail(f"{subject} declined {what}, a case its statement says it computes (contract: "
                   "'Its .mli states ... which cases it declines')")
    if answer is Answer.DONE and why is not None:
        raise fail(f"{subject} computed {what}, a case its statement declines ({why})")
    for m, b in zip(kept, before, strict=True):
        if not np.array_equal(_bytes_of(m), b):
            raise fail(f"{subject} wrote into an operand's memory in {what} (contract: a kernel "
                       "reads its operands and writes its results into its destinations)")
    if answer is Answer.DECLINED:
        for i, s in enumerate(slots):
            if s.changed():
                raise fail(f"{subject} declined {what} but wrote destination {i}'s buffer "
                           "(contract: 'it does so before any write or queued work')")
        return Outcome(answer, slots, [])
    for i, s in enumerate(slots):
        if s.changed_outside():
            raise fail(f"{subject} wrote outside destination {i}'s elements in {what} "
                       "(contract: 'reads and writes nothing outside its arrays')")
    return Outcome(answer, slots, [s.array.to_numpy() for s in slots])


def invoke_misfit(subject: Subject, spec: Any, dsts: Sequence[Array], operands: Sequence[Array],
                  why: str, door: bool = False) -> Answer:
    """Call the kernel with a call that does not fit (``why``) and check it is
    never DONE and writes no byte outside its arrays; where ``door`` (the
    misfit is a door's: overlapping or repeated destinations), a refusal or a
    decline writes nothing at all."""
    arrays = [*dsts, *operands]
    mems = _memories(arrays)
    before = [_bytes_of(m) for m in mems]
    kernel = spec.kernel
    answer = subject.kernel(kernel)(spec, list(dsts), list(operands))
    what = _describe(kernel, spec, dsts, operands)
    if answer is Answer.DONE:
        raise fail(f"{subject} answered DONE to a call that does not fit ({why}): {what} "
                   "(contract: 'it answers a refusal or Declined, never Done')")
    for m, b in zip(mems, before, strict=True):
        after = _bytes_of(m)
        touched = np.zeros(m.nbytes, dtype=np.bool_)
        for a in arrays:
            if a.buffer.memory is m and a.numel:
                lo, hi = a.byte_span()
                touched[lo:hi] = True
        if door and answer in (Answer.DECLINED, Answer.OVERLAPPING, Answer.REPEATED_ELEMENTS):
            touched[:] = False
        if not np.array_equal(after[~touched], b[~touched]):
            raise fail(f"{subject} answered {answer.name} to a call that does not fit ({why}) and "
                       f"wrote {'into its arrays' if door else 'outside its arrays'}: {what}")
    return answer


# --------------------------------------------------------------------------
# Comparing bits
# --------------------------------------------------------------------------


def _show(dt: Dtype, a: Arr, i: tuple[int, ...]) -> str:
    v = np.asarray(a)[i]
    return f"{v!r} (bits {O.units(np.asarray(v)).tobytes()[::-1].hex()})"


def assert_bits(dt: Dtype, got: Arr, want: Arr, what: str | Callable[[], str],
                any_nan: bool | Arr = False, truth: bool = False) -> None:
    """Raise where ``got`` differs from ``want`` in bits. Where ``any_nan`` (a
    mask, or everywhere), a NaN ``want`` accepts any NaN; where ``truth``, a
    boolean compares as ``byte != 0``. ``what`` names the result (a callable
    is called only to report a failure)."""
    g, w = np.asarray(got), np.asarray(want)
    if g.shape != w.shape:
        raise fail(f"{_text(what)}: shape {g.shape}, the reference's {w.shape}")
    if truth and dt.is_bool:
        ok = (O.units(g)[..., 0] != 0) == (O.units(w)[..., 0] != 0)
    else:
        ok = (O.units(g) == O.units(w)).all(axis=-1)
    if any_nan is not False and (dt.is_float or dt.is_complex):
        mask = np.broadcast_to(np.asarray(any_nan, dtype=np.bool_), w.shape)
        nan_w = O.is_nan(dt, w) & mask
        ok = np.where(nan_w, O.is_nan(dt, g), ok)
    if not ok.all():
        bad = tuple(int(x) for x in np.argwhere(~ok)[0])
        raise fail(f"{_text(what)}: at {list(bad)} got {_show(dt, g, bad)}, the reference gives "
                   f"{_show(dt, w, bad)} ({int((~ok).sum())} of {ok.size} differ)")


def _text(what: str | Callable[[], str]) -> str:
    return what if isinstance(what, str) else what()


def check_nan_rule(dt: Dtype, got: Arr, operand_signalling: bool, what: str | Callable[[], str]
                   ) -> None:
    """The NaN rule (contract "Stores"): a NaN result is signalling only where an
    operand is a signalling NaN."""
    if not operand_signalling and O.is_signalling(dt, got).any():
        bad = tuple(int(x) for x in np.argwhere(O.is_signalling(dt, got))[0])
        raise fail(f"{_text(what)}: a signalling NaN result {_show(dt, got, bad)} at {list(bad)} where no "
                   "operand is one (contract: 'it is signalling only where an operand is a "
                   "signalling NaN')")


def same_on_threads(subject: Subject, spec: Any, dsts: Sequence[tuple[Dtype, Sequence[int]]],
                    operands: Sequence[Array], first: Outcome, threads: int = 4) -> None:
    """Determinism: the call run again, and from ``threads`` threads at once
    (where the statement allows concurrent calls, else one after another on
    those threads), gives the bits of ``first``."""
    again = invoke(subject, spec, dsts, operands)
    _same_outcome(first, again, "run twice", spec)
    barrier = threading.Barrier(threads)
    lock = threading.Lock()
    concurrent_ok = subject.library.statement.concurrent

    def run() -> Outcome:
        barrier.wait()
        if concurrent_ok:
            return invoke(subject, spec, dsts, operands)
        with lock:
            return invoke(subject, spec, dsts, operands)

    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        outs = [f.result() for f in [pool.submit(run) for _ in range(threads)]]
    for out in outs:
        _same_outcome(first, out, f"run on {threads} threads", spec)


def _same_outcome(a: Outcome, b: Outcome, how: str, spec: Any) -> None:
    if a.answer is not b.answer:
        raise fail(f"{spec.kernel} {how} answered {b.answer.name}, once {a.answer.name} "
                   "(contract: 'A kernel is deterministic')")
    for i, (x, y) in enumerate(zip(a.results, b.results, strict=True)):
        if not np.array_equal(O.units(x), O.units(y)):
            bad = tuple(int(t) for t in np.argwhere(~(O.units(x) == O.units(y)).all(axis=-1))[0])
            raise fail(f"{spec.kernel} {how}: result {i} at {list(bad)} has other bits: "
                       f"{np.asarray(y)[bad]!r} vs {np.asarray(x)[bad]!r} (contract: 'it gives the same "
                       "bits on every run, on any number of threads')")


# --------------------------------------------------------------------------
# Laws
# --------------------------------------------------------------------------


LawFn = Callable[[Subject, Data], None]


@dataclass(frozen=True, slots=True)
class Law:
    """One rule of the contract, checked on drawn calls of one kernel."""

    name: str
    kernel: str
    fn: LawFn
    doc: str


#: Every law, by name (``kernel_rule``), in the order they were defined.
LAWS: dict[str, Law] = {}

#: How often each (law, kernel, answer) came up in this process: what the laws
#: exercised (a law whose calls were all declined checked declines alone).
ANSWERS: collections.Counter[tuple[str, str, str]] = collections.Counter()
_current_law: contextvars.ContextVar[str] = contextvars.ContextVar("law", default="")


def law(kernel: str) -> Callable[[LawFn], Callable[..., None]]:
    """Register the decorated function as a law of ``kernel`` and return the
    pytest test that runs it on the ``library`` fixture. The function's name
    must start with ``test_``; its docstring states the rule and quotes the
    contract sentence it checks."""

    def register(fn: LawFn) -> Callable[..., None]:
        name = fn.__name__.removeprefix("test_")
        if name in LAWS:
            raise ValueError(f"law {name!r} is defined twice")
        the_law = Law(name, kernel, fn, fn.__doc__ or "")
        LAWS[name] = the_law

        def test(library: Subject, nxkernel_settings: settings) -> None:
            run_law(the_law, library, nxkernel_settings)

        test.__name__ = fn.__name__
        test.__qualname__ = fn.__qualname__
        test.__module__ = fn.__module__
        test.__doc__ = fn.__doc__
        test.law = the_law  # type: ignore[attr-defined]
        return test

    return register


def run_law(the_law: Law, subject: Subject, how: settings) -> None:
    """Run a law under Hypothesis with settings ``how`` on ``subject``; raises
    the law's failure (with the falsifying draws in the report)."""

    @settings(how)
    @given(st.data())
    def check(data: Data) -> None:
        token = _current_law.set(the_law.name)
        try:
            the_law.fn(subject, data)
        finally:
            _current_law.reset(token)

    check._hypothesis_internal_add_digest = (  # type: ignore[attr-defined]
        f"{the_law.name}@{subject}".encode())
    check()


# --------------------------------------------------------------------------
# Readable falsifying examples
# --------------------------------------------------------------------------


def _pretty_printers() -> None:
    """Print dtypes by name and programs as text in Hypothesis's reports."""
    try:
        from hypothesis.vendor import pretty
    except ImportError:  # pragma: no cover - a Hypothesis without the vendored printer
        return

    def by_repr(obj: object, p: Any, cycle: bool) -> None:
        p.text(repr(obj))

    def by_str(obj: object, p: Any, cycle: bool) -> None:
        p.text("\n" + str(obj))

    def placement(obj: G.Placement, p: Any, cycle: bool) -> None:
        fields = {"contiguous": ("offset",), "strided": ("offset", "perm", "steps", "extra"),
                  "broadcast": ("offset", "ones", "drop"),
                  "windowed": ("offset", "axis", "step", "dilation")}[obj.plan]
        p.text(f"{obj.plan}(" + ", ".join(f"{f}={getattr(obj, f)!r}" for f in fields) + ")")

    pretty.for_type_by_name("nxkernel_core.dtype", "Dtype", by_repr)
    pretty.for_type_by_name("nxkernel_core.prog", "Prog", by_str)
    pretty.for_type_by_name("nxkernel_core.conformance.generators", "Placement", placement)


_pretty_printers()

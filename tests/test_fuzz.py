"""A fuzzing campaign against the host library's kernels, through the door.

Each generated case is a call of one of the 20 kernels that fits (drawn by the
conformance kit's ``draw_case``: random shapes, dtypes, values and operand
layouts, sub-byte dtypes included), made again with its destinations placed
or broken in each of the ways :data:`VARIANTS` lists: contiguous, strided
with negative steps, over an operand's bytes, on read-only memory, consumed,
broadcast (repeated elements), of another dtype or shape, or the same array
twice. Every buffer is filled with a canary. For every call:

* a call that is not DONE changed no bit of any buffer;
* a DONE call changed no bit outside its destinations' elements (operands
  included);
* no call raises: the library answers every one (a ``ValueError`` or
  ``TypeError`` is counted, checked for writes like a refusal, and fails the
  test); and the interpreter never dies (a crash would end the run).

Profiles: the default (CI) one draws :data:`SHORT` cases, about 550 calls
and a few seconds; ``NXKERNEL_FUZZ=full`` draws :data:`FULL` cases and
makes each variant :data:`REPEAT` times, over 10^5 calls (tens of minutes;
seeded, so a run repeats); ``NXKERNEL_FUZZ=N`` draws N cases so.
``pytest -s`` prints the figures: calls, answers, refusals by kind,
exceptions, writes outside destinations and writes by refused calls.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from nxkernel_core import dtype as D
from nxkernel_core import plugins, rig
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array, positions
from nxkernel_core.conformance.cases import KERNELS, draw_case
from nxkernel_core.conformance.harness import Subject, canary_buffer
from nxkernel_core.dtype import Dtype
from nxkernel_core.layout import Broadcast, Layout, Range, Slice

SHORT = 60
FULL = 3000
_PROFILE = os.environ.get("NXKERNEL_FUZZ", "")
CASES = FULL if _PROFILE == "full" else int(_PROFILE) if _PROFILE.isdigit() else SHORT
#: How many times each variant is made per case: drawing a case (and compiling
#: its program) costs far more than a call, so the long profile calls more.
REPEAT = 1 if CASES == SHORT else 4


# --------------------------------------------------------------------------
# Destinations and what they may change
# --------------------------------------------------------------------------


def bit_mask(a: Array) -> npt.NDArray[np.uint8]:
    """The bits of ``a``'s memory that its elements occupy, as a byte mask."""
    mem = a.buffer.memory
    mask = np.zeros(mem.nbytes * 8, dtype=bool)
    if a.numel:
        first = a.buffer.offset * 8 + positions(a.layout).reshape(-1) * a.dtype.bits
        bits = (first[:, None] + np.arange(a.dtype.bits)[None, :]).reshape(-1)
        mask[bits] = True
    return np.packbits(mask, bitorder="little")


def contiguous_in_canary(dt: Dtype, shape: tuple[int, ...], lead: int = 1, tail: int = 1,
                         access: rig.Access = rig.Access.READ_WRITE) -> Array:
    """A C-contiguous destination with ``lead``/``tail`` elements of canary
    around it (a sub-byte one shares its first and last bytes with them)."""
    n = math.prod(shape)
    nbytes = max(1, D.bytes(dt, lead + n + tail))
    if access is rig.Access.READ:
        buf = rig.Buffer.create(rig.host, nbytes, access)
        rig.host.write_bytes(buf.memory, 0, _canary(nbytes))
    else:
        buf = canary_buffer(SUBJECT, nbytes)
    return Array(dt, Layout.c_contiguous(shape, lead), buf)


def _canary(n: int) -> npt.NDArray[np.uint8]:
    return ((np.arange(n, dtype=np.int64) * 151 + 0x5B) & 0xFF).astype(np.uint8)


def strided(dt: Dtype, shape: tuple[int, ...], steps: Sequence[int]) -> Array:
    """A destination of ``shape`` seen through steps (negative ones reverse)
    over a larger canary buffer."""
    base_shape = tuple((d - 1) * abs(s) + 1 if d else 0 for d, s in zip(shape, steps, strict=True))
    base = contiguous_in_canary(dt, base_shape, lead=3, tail=2)
    ranges = tuple(Range(0 if s > 0 else (d - 1) * -s, d, s) if d else Range(0, 0, 1)
                   for d, s in zip(shape, steps, strict=True))
    return base.view(Slice(ranges))


# --------------------------------------------------------------------------
# Variants of a case's destinations
# --------------------------------------------------------------------------

Dsts = list[Array]
Variant = Callable[[st.DataObject, list[tuple[Dtype, tuple[int, ...]]], list[Array]], Dsts | None]


def _fitting(data: st.DataObject, dsts: list[tuple[Dtype, tuple[int, ...]]], ops: list[Array]) -> Dsts:
    return [contiguous_in_canary(dt, shp) for dt, shp in dsts]


def _strided(data: st.DataObject, dsts: list[tuple[Dtype, tuple[int, ...]]], ops: list[Array]) -> Dsts:
    return [strided(dt, shp, data.draw(st.lists(st.sampled_from([1, 2, -1, -2, 3]),
                                                min_size=len(shp), max_size=len(shp)), label="steps"))
            for dt, shp in dsts]


def _over_operand(data: st.DataObject, dsts: list[tuple[Dtype, tuple[int, ...]]],
                  ops: list[Array]) -> Dsts | None:
    """The first destination laid over an operand's bytes, where it fits there."""
    if not ops:
        return None
    op = ops[data.draw(st.integers(0, len(ops) - 1), label="operand")]
    dt, shp = dsts[0]
    buf = op.buffer
    if D.bytes(dt, math.prod(shp)) > buf.length or op.numel == 0:
        return None
    out = _fitting(data, dsts, ops)
    out[0] = Array(dt, Layout.c_contiguous(shp, 0), buf)
    return out


def _read_only(data: st.DataObject, dsts: list[tuple[Dtype, tuple[int, ...]]], ops: list[Array]) -> Dsts:
    out = _fitting(data, dsts, ops)
    dt, shp = dsts[-1]
    out[-1] = contiguous_in_canary(dt, shp, access=rig.Access.READ)
    return out


def _consumed(data: st.DataObject, dsts: list[tuple[Dtype, tuple[int, ...]]], ops: list[Array]) -> Dsts:
    out = _fitting(data, dsts, ops)
    rig.consume(out[0].buffer, "fuzzed")
    return out


def _repeated(data: st.DataObject, dsts: list[tuple[Dtype, tuple[int, ...]]],
              ops: list[Array]) -> Dsts | None:
    dt, shp = dsts[0]
    if math.prod(shp) < 2:
        return None
    out = _fitting(data, dsts, ops)
    one = contiguous_in_canary(dt, (1,) * len(shp))
    out[0] = one.view(Broadcast(shp))
    return out


def _other_dtype(data: st.DataObject, dsts: list[tuple[Dtype, tuple[int, ...]]], ops: list[Array]) -> Dsts:
    out = _fitting(data, dsts, ops)
    dt, shp = dsts[0]
    other = data.draw(st.sampled_from([d for d in D.all if d is not dt]), label="other dtype")
    out[0] = contiguous_in_canary(other, shp)
    return out


def _other_shape(data: st.DataObject, dsts: list[tuple[Dtype, tuple[int, ...]]], ops: list[Array]) -> Dsts:
    out = _fitting(data, dsts, ops)
    dt, shp = dsts[0]
    if shp and data.draw(st.booleans(), label="grow"):
        axis = data.draw(st.integers(0, len(shp) - 1), label="axis")
        wrong = tuple(d + 1 if i == axis else d for i, d in enumerate(shp))
    else:
        wrong = (*shp, 2)
    out[0] = contiguous_in_canary(dt, wrong)
    return out


def _twice(data: st.DataObject, dsts: list[tuple[Dtype, tuple[int, ...]]], ops: list[Array]) -> Dsts | None:
    if len(dsts) < 2 or dsts[0] != dsts[1]:
        return None
    out = _fitting(data, dsts, ops)
    out[1] = out[0]
    return out


def _sub_byte_neighbours(data: st.DataObject, dsts: list[tuple[Dtype, tuple[int, ...]]],
                         ops: list[Array]) -> Dsts | None:
    """A sub-byte destination as every other element of a buffer whose other
    elements are canary: each byte it writes holds a code it must keep."""
    dt, shp = dsts[0]
    if not dt.is_sub_byte or not shp:
        return None
    out = _fitting(data, dsts, ops)
    out[0] = strided(dt, shp, [2] * len(shp))
    return out


#: Each variant, and how many times a case makes it (drawing anew each time).
VARIANTS: dict[str, tuple[Variant, int]] = {
    "fitting": (_fitting, 1), "strided": (_strided, 3), "over-operand": (_over_operand, 2),
    "read-only": (_read_only, 1), "consumed": (_consumed, 1), "repeated": (_repeated, 1),
    "other-dtype": (_other_dtype, 1), "other-shape": (_other_shape, 1), "twice": (_twice, 1),
    "sub-byte-neighbours": (_sub_byte_neighbours, 1),
}


# --------------------------------------------------------------------------
# The campaign
# --------------------------------------------------------------------------


@dataclass
class Figures:
    calls: int = 0
    answers: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    writes_outside: list[str] = field(default_factory=list)
    refused_writes: list[str] = field(default_factory=list)

    def line(self) -> str:
        raised = sum(self.errors.values())
        refused = {a: n for a, n in self.answers.items() if a not in ("DONE", "DECLINED")}
        return (f"fuzz: {CASES} cases, {self.calls} calls, {self.answers['DONE']} done,"
                f" {self.answers['DECLINED']} declined, {sum(refused.values())} refused {refused},"
                f" {raised} raised {dict(self.errors)}, {len(self.writes_outside)} writes outside"
                f" destinations, {len(self.refused_writes)} writes by refused calls, 0 crashes")


SUBJECT = Subject(plugins.discover().library("host"), rig.host)


def _snapshot(arrays: Sequence[Array]) -> dict[int, tuple[rig.Memory, npt.NDArray[np.uint8]]]:
    mems = {id(a.buffer.memory): a.buffer.memory for a in arrays}
    return {k: (m, rig.host.read_bytes(m, 0, m.nbytes)) for k, m in mems.items()}


def _one_call(figures: Figures, kernel: str, variant: str, spec: Any, dsts: Dsts, ops: list[Array]) -> None:
    before = _snapshot([*dsts, *ops])
    figures.calls += 1
    try:
        answer = SUBJECT.kernel(kernel)(spec, dsts, ops)
        figures.answers[answer.name] += 1
    except (ValueError, TypeError) as e:  # a clear refusal by exception still writes nothing
        figures.errors[f"{kernel}/{variant}: {type(e).__name__}"] += 1
        answer = None
    for key, (mem, old) in before.items():
        now = rig.host.read_bytes(mem, 0, mem.nbytes)
        diff = now ^ old
        if not diff.any():
            continue
        if answer is not Answer.DONE:
            figures.refused_writes.append(f"{kernel}/{variant}: {answer} changed memory {key}")
            continue
        allowed = np.zeros(mem.nbytes, dtype=np.uint8)
        for d in dsts:
            if d.buffer.memory is mem:
                allowed |= bit_mask(d)
        if (diff & ~allowed).any():
            figures.writes_outside.append(f"{kernel}/{variant}: bits outside the destinations changed")


FIGURES = Figures()


@settings(max_examples=CASES, deadline=None, database=None, derandomize=True, phases=[Phase.generate],
          suppress_health_check=list(HealthCheck), print_blob=True)
@given(data=st.data(), kernel=st.sampled_from(KERNELS))
def _campaign(data: st.DataObject, kernel: str) -> None:
    case = draw_case(data, SUBJECT, kernel)
    for name, (make, times) in VARIANTS.items():
        for _ in range(times * REPEAT):
            dsts = make(data, case.dsts, case.operands)
            if dsts is not None:
                _one_call(FIGURES, kernel, name, case.spec, dsts, case.operands)


def test_fuzzed_calls_write_only_their_destinations() -> None:
    _campaign()
    print(FIGURES.line())
    assert FIGURES.refused_writes == [] and FIGURES.writes_outside == [] and not FIGURES.errors
    assert FIGURES.answers["DONE"] > 0 and FIGURES.calls >= 5 * CASES * REPEAT
    refusals = {a for a in FIGURES.answers if a not in ("DONE", "DECLINED")}
    assert {"OVERLAPPING", "READ_ONLY", "DEAD_BUFFER", "REPEATED_ELEMENTS"} <= refusals


# --------------------------------------------------------------------------
# What the full campaign found: destinations that do not flatten without a copy
# --------------------------------------------------------------------------


@pytest.mark.parametrize("kernel", ["gather", "range_gather", "scatter-set", "scatter-add", "scatter-max",
                                    "numbering"])
@pytest.mark.parametrize("dt", [D.float32, D.complex64, D.float16, D.int4], ids=lambda d: d.name)
def test_a_strided_destination_gets_the_contiguous_ones_bits(kernel: str, dt: Dtype) -> None:
    """The full campaign's finding (871 of 125,037 calls): gather, range gather,
    scatter and numbering raised ValueError where the destination's axes that
    the kernel merges do not merge without a copy (scatter after writing into's
    bits). Now each is DONE with the bits a contiguous destination gets, and
    nothing outside it written."""
    from nxkernel_core import nx
    from nxkernel_core import spec as S

    rng = np.random.default_rng(5)
    x = nx.asarray(rng.integers(0, 7, (3, 4, 5)), dt)
    sp: Any
    if kernel == "gather":
        sp, ops = S.Gather(0), [nx.asarray(rng.integers(-1, 4, (2, 4, 5))), x]
        ddt, shape, steps = dt, (2, 4, 5), [1, -3, 2]  # axes 1 and 2, merged, do not merge
    elif kernel == "range_gather":
        sp, ops = S.RangeGather(0, 2), [nx.asarray(rng.integers(-1, 3, (2, 4, 5))), x]
        ddt, shape, steps = dt, (2, 2, 4, 5), [1, 1, -3, 2]
    elif kernel == "numbering":
        keys = np.sort(rng.integers(0, 5, (3, 4, 6)), axis=-1)
        sp, ops = S.Numbering(S.Side.RIGHT), [nx.asarray(keys, D.float32), nx.asarray(x, D.float32)]
        ddt, shape, steps = D.int64, (3, 4, 5), [-3, 2, 1]  # axes 0 and 1, merged, do not merge
    else:
        combine = {"set": S.Combine.SET, "add": S.Combine.ADD, "max": S.Combine.MAX}[kernel.split("-")[1]]
        sp = S.Scatter(0, combine, False)
        ops = [x, nx.asarray(rng.integers(-1, 4, (2, 4, 5))), nx.asarray(rng.integers(0, 7, (2, 4, 5)), dt)]
        ddt, shape, steps = dt, (3, 4, 5), [1, -3, 2]
    got, want = strided(ddt, shape, steps), contiguous_in_canary(ddt, shape)
    before = _snapshot([got])
    assert SUBJECT.kernel(sp.kernel)(sp, [want], ops) is Answer.DONE
    assert SUBJECT.kernel(sp.kernel)(sp, [got], ops) is Answer.DONE
    assert nx.to_numpy(got).tobytes() == nx.to_numpy(want).tobytes()
    ((mem, old),) = before.values()
    changed = rig.host.read_bytes(mem, 0, mem.nbytes) ^ old
    assert not (changed & ~bit_mask(got)).any()

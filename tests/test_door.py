"""The door: each decision against a brute-force computation, refusals claim
nothing, identical destinations pass, and the refusal message."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nxkernel_core import dtype as D
from nxkernel_core import rig
from nxkernel_core.answer import Answer, InvalidArgument, refused
from nxkernel_core.array import Array, asarray
from nxkernel_core.door import door
from nxkernel_core.layout import Broadcast, Layout

from .strategies import dtypes, fresh_buffer, views


def brute_byte_span(a: Array) -> tuple[int, int] | None:
    pos = list(a.layout.positions())
    if not pos:
        return None
    lo, hi = min(pos), max(pos) + 1
    return (a.buffer.offset + lo * a.dtype.bits // 8, a.buffer.offset + -(-hi * a.dtype.bits // 8))


def brute_shares(a: Array, b: Array) -> bool:
    if a.buffer.memory is not b.buffer.memory:
        return False
    sa, sb = brute_byte_span(a), brute_byte_span(b)
    return sa is not None and sb is not None and sa[0] < sb[1] and sb[0] < sa[1]


def brute_identical(a: Array, b: Array) -> bool:
    same_elements = list(a.layout.positions()) == list(b.layout.positions())
    return (a.buffer.memory is b.buffer.memory and a.dtype is b.dtype and a.shape == b.shape
            and a.buffer.offset == b.buffer.offset and same_elements)


def brute_decision(written: list[Array], read: list[Array]) -> Answer | None:
    for w in written:
        pos = list(w.layout.positions())
        # The door keeps upstream's sorted-stride rule, which is sufficient but
        # not necessary for distinct positions (tests/test_layout.py holds it to
        # brute force); a layout really repeating an element is always refused.
        if len(set(pos)) != len(pos) or not w.layout.is_distinct():
            return Answer.REPEATED_ELEMENTS
    for i, w in enumerate(written):
        if any(brute_shares(w, o) for j, o in enumerate(written) if j != i):
            return Answer.OVERLAPPING
        if any(brute_shares(w, r) and not brute_identical(w, r) for r in read):
            return Answer.OVERLAPPING
    return None


@settings(max_examples=300, deadline=None)
@given(data=st.data(), n_written=st.integers(1, 2), n_read=st.integers(0, 2))
def test_door_decisions_equal_a_brute_force(data: st.DataObject, n_written: int, n_read: int) -> None:
    buffers = [fresh_buffer(64), fresh_buffer(64)]
    def draw_array() -> Array:
        buf = data.draw(st.sampled_from(buffers))
        return data.draw(views(buf, data.draw(dtypes), max_moves=2))
    written = [draw_array() for _ in range(n_written)]
    read = [draw_array() for _ in range(n_read)]
    if data.draw(st.booleans()):
        read.append(written[0])  # an identical operand
    expected = brute_decision(written, read)
    with door(written, read) as answer:
        assert answer == expected
        claimed = [a.buffer.memory for a in written + read]
        if answer is None:
            assert all(m.readers + m.writers > 0 for m in claimed)
        else:  # a refusal claims nothing
            assert all(m.readers == 0 and m.writers == 0 for m in claimed)
    assert all(m.readers == 0 and m.writers == 0 for m in claimed)


def test_identical_destination_passes_and_a_shifted_one_overlaps() -> None:
    base = asarray(np.zeros(8, np.float32))
    with door([base], [base]) as answer:
        assert answer is None
    shifted = Array(D.float32, Layout((7,), (1,), 1), base.buffer)
    with door([base], [shifted]) as answer:
        assert answer is Answer.OVERLAPPING
    # Same bytes seen as another dtype are not identical.
    with door([base], [base.bitcast(D.int32)]) as answer:
        assert answer is Answer.OVERLAPPING
    # Two written arrays never share, even identical ones.
    with door([base, base], []) as answer:
        assert answer is Answer.OVERLAPPING


def test_sub_byte_spans_share_a_byte() -> None:
    buf = fresh_buffer(4)
    lo = Array(D.int4, Layout((1,), (1,), 0), buf)  # low nibble of byte 0
    hi = Array(D.int4, Layout((1,), (1,), 1), buf)  # high nibble of byte 0
    nxt = Array(D.int4, Layout((1,), (1,), 2), buf)  # byte 1
    with door([lo], [hi]) as answer:
        assert answer is Answer.OVERLAPPING
    with door([lo], [nxt]) as answer:
        assert answer is None


def test_repeated_elements() -> None:
    x = asarray(np.zeros(4, np.int8)).view(Broadcast((3, 4)))
    with door([x], []) as answer:
        assert answer is Answer.REPEATED_ELEMENTS


def test_dead_buffer_wrong_device_read_only_held_exclusive() -> None:
    x = asarray(np.zeros(4, np.int8))
    y = asarray(np.zeros(4, np.int8))
    rig.consume(y.buffer, "donated")
    with door([x], [y]) as answer:
        assert answer is Answer.DEAD_BUFFER
    other = rig.memory_device("door-other")
    try:
        z = asarray(np.zeros(4, np.int8), device=other)
        with door([x], [z]) as answer:
            assert answer is Answer.WRONG_DEVICE
        with door([x], [x], device=other) as answer:
            assert answer is Answer.WRONG_DEVICE
        mem = rig.host.allocate(4, rig.Access.READ)
        ro = Array(D.int8, Layout((4,), (1,)), rig.Buffer(mem, 0, 4, 0))
        with door([ro], []) as answer:
            assert answer is Answer.READ_ONLY
        with door([x], [ro]) as answer:
            assert answer is None
        with rig.with_claims(donate=[x.buffer]), door([asarray(np.zeros(1, np.int8))], [x]) as answer:
            assert answer is Answer.HELD_EXCLUSIVE
        other.lose("launch failure")
        with pytest.raises(rig.Lost, match="door-other lost: launch failure"), door([x], [z]):
            pass
        assert x.buffer.memory.readers == 0 and x.buffer.memory.writers == 0
    finally:
        other.close()


def test_refused_names_the_function_reason_and_arrays() -> None:
    a = asarray(np.zeros((2, 3), np.float32))
    b = asarray(np.zeros(4, np.int8))
    with pytest.raises(InvalidArgument, match=r"^nx.add: a written operand shares bytes with another "
                       r"operand \(float32 \[2, 3\], int8 \[4\]\)$"):
        refused("nx.add", Answer.OVERLAPPING, [a, b])
    rig.consume(b.buffer, "donated (nx.donate)")
    with pytest.raises(ValueError, match=r"^nx.add: operand 2 was consumed, donated \(nx.donate\) "):
        refused("nx.add", Answer.DEAD_BUFFER, [a, b])
    with pytest.raises(ValueError, match="not a refusal"):
        refused("nx.add", Answer.DONE, [a])

"""The kit's map law on programs worked by hand: the NaN rule counts every
source of a signalling NaN a program has (an operand, a constant, a
Bitcast's bits), and still catches a signalling NaN that comes from none; a
computed NaN's bits made another dtype's by a Bitcast are the library's."""

from __future__ import annotations

import numpy as np
import pytest

from nxkernel_core import dtype as D
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_core.conformance.harness import LawViolation, Subject
from nxkernel_core.conformance.judge import payload_exposed, program_signalling
from nxkernel_core.conformance.test_map import _check_map
from nxkernel_core.kernel import Library, check_library
from nxkernel_core.prog import Binary, Prog
from nxkernel_core.rig import host
from nxkernel_host.library import library

LIB: Library = check_library(library)
SUBJECT = Subject(LIB, host)
SNAN = bytes.fromhex("0100807f")  # float32 0x7F800001, little-endian
ONES = np.ones(3, np.float32)


def _judge(prog: Prog, x: np.ndarray, results: list[np.ndarray] | None = None) -> None:
    """Run the host's map of ``prog`` over ``x`` and judge it by the kit's map
    law (``results`` in place of the host's, where given)."""
    a = Array.from_numpy(x)
    dsts = [Array.empty(dt, x.shape) for dt in prog.out_dtypes]
    assert LIB.map(S.Map(prog, (S.PLAIN,)), dsts, [a]) is Answer.DONE
    got = results if results is not None else [d.to_numpy() for d in dsts]
    _check_map(SUBJECT, prog, (S.PLAIN,), [a], [x], got, "map")


def test_a_signalling_constant_is_a_source() -> None:
    # Maximum passes on its first NaN operand, here the constant: the host
    # quiets it, the reference (and nx.cuda) keep it signalling.
    b = Prog.build([D.float32])
    prog = b.finish(b.binary(Binary.MAXIMUM, b.const_bits(D.float32, SNAN), b.ins[0]))
    assert program_signalling(prog, [ONES], (3,))
    _judge(prog, ONES)
    kept = np.frombuffer(SNAN * 3, np.float32).copy()
    _judge(prog, ONES, [kept])


def test_a_bitcast_into_a_signalling_nan_is_a_source() -> None:
    b = Prog.build([D.uint32])
    made = b.bitcast(b.ins[0], D.float32)
    prog = b.finish(b.binary(Binary.MAXIMUM, made, b.const_bits(D.float32, bytes(4))))
    bits = np.array([0x7F800001, 0x3F800000, 0], np.uint32)
    assert program_signalling(prog, [bits], (3,))
    assert not program_signalling(prog, [bits[1:]], (2,))
    _judge(prog, bits)


def test_a_signalling_nan_from_no_source_breaks_the_rule() -> None:
    b = Prog.build([D.float32])
    prog = b.finish(b.binary(Binary.ADD, b.ins[0], b.const_bits(D.float32, bytes.fromhex("0000c07f"))))
    assert not program_signalling(prog, [ONES], (3,))
    made = np.frombuffer(SNAN * 3, np.float32).copy()
    with pytest.raises(LawViolation, match="signalling"):
        _judge(prog, ONES, [made])


def test_a_computed_nans_bits_through_a_bitcast_are_the_librarys() -> None:
    # The thorough profile's find: float16 x + sNaN, bitcast to bfloat16. The
    # reference keeps the constant's bits 0x7C01 (a finite bfloat16), the host
    # quiets them into 0x7E01: either NaN is the Add's, so either bfloat16.
    b = Prog.build([D.float16])
    total = b.binary(Binary.ADD, b.ins[0], b.const_bits(D.float16, bytes.fromhex("017c")))
    prog = b.finish(b.bitcast(total, D.bfloat16), b.bitcast(b.ins[0], D.bfloat16))
    x = np.array([1.0, 2.0], np.float16)
    exposed = payload_exposed(prog, [x], (2,))
    assert exposed[0].all() and not exposed[1].any()
    _judge(prog, x)
    # The operand's bits moved by a Bitcast are still fixed: a change is caught.
    b = Prog.build([D.float16])
    moved = b.finish(b.bitcast(b.ins[0], D.bfloat16))
    wrong = np.frombuffer(bytes.fromhex("7e017e01"), D.bfloat16.numpy_dtype).copy()
    with pytest.raises(LawViolation):
        _judge(moved, x, [wrong])

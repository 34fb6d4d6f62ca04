"""The kit's map law on programs worked by hand: the NaN rule counts every
source of a signalling NaN a program has (an operand, a constant, a
Bitcast's bits), and still catches a signalling NaN that comes from none."""

from __future__ import annotations

import numpy as np
import pytest

from nxkernel_core import dtype as D
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_core.conformance.harness import LawViolation, Subject
from nxkernel_core.conformance.judge import program_signalling
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

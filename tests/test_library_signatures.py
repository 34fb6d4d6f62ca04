"""The ``Library`` base class decides the fit, the declines predicate and the
hook once per signature (spec, dtypes, layouts), and still answers every
call as its steps say: a call that does not fit is refused each time, a
stated declines predicate is asked on every call, and the door runs on every
call."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from nxkernel_core import dtype as D
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_core.kernel import Call
from nxkernel_core.library import Hook, Library


class _Counting(Library):
    """Gathers along axis 0 of host arrays; declines any other axis; counts
    its hook's runs, its predicate's asks and the signatures decided."""

    name: ClassVar[str] = "counting"
    summary: ClassVar[str] = "a test double of the base class"

    def __init__(self) -> None:
        super().__init__()
        self.runs = self.asks = self.decided = 0

    def _gather(self, spec: S.Gather, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
        """x's elements at index's positions along axis 0 (every position inside)."""
        self.runs += 1
        dsts[0].write_numpy(np.take_along_axis(operands[1].to_numpy(), operands[0].to_numpy(), 0))

    def _declines_gather(self, call: Call) -> str | None:
        self.asks += 1
        return None if call.spec.axis == 0 else "gathers along axis 0 alone"  # type: ignore[attr-defined]

    def _hook_for(self, kernel: str, spec: object, dsts: Sequence[Array],
                  operands: Sequence[Array]) -> Hook | None:
        self.decided += 1
        return super()._hook_for(kernel, spec, dsts, operands)


def _arrays(n: int) -> tuple[Array, Array, Array]:
    x = Array.from_numpy(np.arange(2 * n, dtype=np.float32).reshape(n, 2))
    index = Array.from_numpy(np.zeros((n, 2), np.int64))
    return Array.empty(D.float32, (n, 2)), index, x


def test_a_signature_is_decided_once_and_every_call_is_asked_and_passes_the_door() -> None:
    lib = _Counting()
    dst, index, x = _arrays(3)
    for _ in range(3):
        assert lib.gather(S.Gather(0), [dst], [index, x]) is Answer.DONE
    assert (lib.decided, lib.asks, lib.runs) == (1, 3, 3)
    assert np.array_equal(dst.to_numpy(), np.tile(x.to_numpy()[0], (3, 1)))
    other = _arrays(4)
    assert lib.gather(S.Gather(0), [other[0]], list(other[1:])) is Answer.DONE
    assert (lib.decided, lib.asks, lib.runs) == (2, 4, 4)
    # The door runs on a warm signature: a consumed operand is refused.
    x.buffer.memory.epoch += 1
    assert lib.gather(S.Gather(0), [dst], [index, x]) is Answer.DEAD_BUFFER
    assert lib.runs == 4


def test_calls_that_do_not_fit_or_are_declined_are_answered_so_on_every_call() -> None:
    lib = _Counting()
    dst, index, x = _arrays(3)
    narrow = Array.from_numpy(np.zeros((3, 2), np.int32))
    for _ in range(2):
        assert lib.gather(S.Gather(0), [dst], [index, x]) is Answer.DONE
        assert lib.gather(S.Gather(0), [dst], [narrow, x]) is Answer.WRONG_DTYPE
        assert lib.gather(S.Gather(0), [Array.empty(D.float64, (3, 2))],
                          [index, x]) is Answer.WRONG_DTYPE
        assert lib.gather(S.Gather(0), [dst], [index]) is Answer.BAD_ARITY
        assert lib.gather(S.Gather(1), [dst], [index, x]) is Answer.DECLINED
    # Two fitting signatures decided (axis 0 and axis 1), each asked on every call.
    assert (lib.decided, lib.asks, lib.runs) == (2, 4, 2)


def test_a_kernel_without_a_declines_predicate_declines_nothing() -> None:
    class Plain(Library):
        name: ClassVar[str] = "plain"
        runs = 0

        def _gather(self, spec: S.Gather, dsts: Sequence[Array],
                    operands: Sequence[Array]) -> None:
            """Writes its destination's first element (a test double)."""
            self.runs += 1
            dsts[0].write_numpy(np.ones(dsts[0].shape, np.float32))

    lib = Plain()
    dst, index, x = _arrays(3)
    for k in range(1, 3):
        assert lib.gather(S.Gather(1), [dst], [index, x]) is Answer.DONE
        assert lib.runs == k
    assert lib.scatter(S.Scatter(0, S.Combine.SET), [dst], [x, index, x]) is Answer.DECLINED
    assert lib.statement.computes["scatter"].declines(
        Call("scatter", S.Scatter(0, S.Combine.SET), (dst,), (x, index, x))) == (
        "plain computes no scatter")

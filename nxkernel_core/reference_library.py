"""``nx.reference``: a library built on the exact references, slow and exact.

Every kernel it computes gives the bits the conformance kit holds libraries
to, because it *is* the kit's references: ``map`` is ``evaluator.evaluate``
of ``exact.pad``-ded operands, the moves are ``exact``'s bit-copying
references. It is a second reader's example of the :class:`Library` base
class and a test double; no plugin registers it, so the caller never routes
to it by default. Select it by object, as ``nxkernel_core.reference_library:
LIBRARY`` (the kit's ``--nxkernel-library`` takes that form), or wrap it in a
plugin of your own.

Scatter's Add, Max and Min, whose references judge a result rather than make
one, and the kernels no reference computes bit for bit (reductions, scans,
fold, contractions, transforms, routines, attention) decline, as the
statement says.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Final

from . import evaluator
from . import exact as O
from . import spec as S
from .array import Array
from .kernel import Call
from .library import Library

__all__ = ["LIBRARY", "ReferenceLibrary"]


class ReferenceLibrary(Library):
    """The ``nx.reference`` library (see the module's doc)."""

    name = "nx.reference"
    summary = ("the exact references of the conformance kit as a library, on host memory: "
               "slow, exact, not registered by default.")
    association: ClassVar[Mapping[str, str]] = {"all": "none: it computes no float sum, product or scan"}
    algorithms: ClassVar[Mapping[str, str]] = {
        "map": "evaluator.evaluate: every node's exact result rounded once "
               "(transcendentals correctly rounded where mpmath is installed)"}
    open_choices: ClassVar[Mapping[str, str]] = {"all": "none: it computes no routine"}
    concurrent = True

    def _map(self, spec: S.Map, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
        """every program over Plain and Padded loads at every dtype: the reference
        evaluator's bits (each node's exact result rounded once)."""
        loaded = [O.pad(a.to_numpy(), a.dtype, ld.fill, ld.pad) if isinstance(ld, S.Padded)
                  else a.to_numpy() for a, ld in zip(operands, spec.loads, strict=True)]
        outs = evaluator.evaluate(spec.prog, loaded, dsts[0].shape)
        for d, v in zip(dsts, outs, strict=True):
            d.write_numpy(v)

    def _gather(self, spec: S.Gather, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
        """every case at every dtype: bits copied, zero bits outside [0, d)."""
        index, x = (a.to_numpy() for a in operands)
        dsts[0].write_numpy(O.gather(x, index, spec.axis))

    def _range_gather(self, spec: S.RangeGather, dsts: Sequence[Array],
                      operands: Sequence[Array]) -> None:
        """every case at every dtype: bits copied, zero bits outside [0, d)."""
        starts, x = (a.to_numpy() for a in operands)
        dsts[0].write_numpy(O.range_gather(x, starts, spec.axis, spec.run))

    def _declines_scatter(self, call: Call) -> str | None:
        spec = call.spec
        assert isinstance(spec, S.Scatter)
        if spec.combine is S.Combine.SET:
            return None
        return f"nx.reference computes Set scatters alone, not {spec.combine.name.title()}"

    def _scatter(self, spec: S.Scatter, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
        """Set at every dtype, updates applied in C order (the last wins, bits
        copied), an update outside [0, d) dropped; declines Add, Max and Min."""
        into, index, updates = (a.to_numpy() for a in operands)
        dsts[0].write_numpy(O.scatter(into, index, updates, spec.axis, spec.combine)[0])

    def _sort(self, spec: S.Sort, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
        """a stable sort (and top-k) at every dtype in the contract's total order."""
        (x,) = operands
        values, positions = O.sort(x.to_numpy(), x.dtype, spec.axis, spec.descending, spec.k)
        dsts[0].write_numpy(values)
        dsts[1].write_numpy(positions)

    def _numbering(self, spec: S.Numbering, dsts: Sequence[Array],
                   operands: Sequence[Array]) -> None:
        """every case at every dtype, in sort's total order."""
        keys, x = operands
        dsts[0].write_numpy(O.numbering(keys.to_numpy(), x.to_numpy(), keys.dtype,
                                        spec.side is S.Side.RIGHT))

    def _assemble(self, spec: S.Assemble, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
        """every case at every dtype: the fill's bits, then each piece's in order."""
        pieces: list[Any] = [a.to_numpy() for a in operands]
        dsts[0].write_numpy(O.assemble(spec.shape, dsts[0].dtype, spec.fill, spec.regions, pieces))


#: The library object.
LIBRARY: Final = ReferenceLibrary()

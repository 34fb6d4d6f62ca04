"""Loads: how a loop reads each operand, the loop's shape, and the loop rules.

A load is ``PLAIN`` (the operand at the loop's index) or ``Padded`` (the
operand padded and windowed by a ``Pad``). Map, reduce, scan and attention
read their operands by loads; fold is the adjoint of a Padded load. Here:
the load specs, ``padded`` (the shape a Padded load reads), the loop's shape,
and the parts of the loop kernels' refusal rules that read the loads.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, final

from .. import dtype as D
from ..answer import Answer
from ..dtype import Dtype
from ..layout import MAX_RANK, Window
from .attributes import _axes, _fail, _fill, _ints, _of, _set, fill_fits
from .record import Refusal, Shape, _answers, _count, _fits, _Misfit, _operands

if TYPE_CHECKING:
    from ..prog import Prog

__all__ = ["PLAIN", "Load", "Pad", "Padded", "Plain", "loop_rank", "padded"]

@final
@dataclass(frozen=True, slots=True)
class Pad:
    """A padding of an operand of rank ``len(lo)``: along axis ``i``, ``lo[i]``
    elements before the operand's, ``hi[i]`` after and ``interior[i]`` between
    neighbours (a negative ``lo`` or ``hi`` crops instead), then the windows of
    the padded operand that ``Windows(windows)`` takes. ``lo``, ``hi`` and
    ``interior`` have one length, ``interior >= 0``, window axes increase
    strictly below the rank with size, step and dilation at least 1."""

    lo: tuple[int, ...]
    hi: tuple[int, ...]
    interior: tuple[int, ...]
    windows: tuple[Window, ...] = ()

    def __post_init__(self) -> None:
        lo = _ints(self, "lo", self.lo, None)
        hi = _ints(self, "hi", self.hi, None)
        interior = _ints(self, "interior", self.interior)
        if not len(lo) == len(hi) == len(interior):
            raise _fail(self, f"lo {lo}, hi {hi} and interior {interior} differ in length")
        windows = tuple(self.windows)
        for w in windows:
            _of(self, "a window", w, Window)
        axes = _axes(self, "window axes", [w.axis for w in windows])
        if axes and axes[-1] >= len(lo):
            raise _fail(self, f"window axis {axes[-1]} is past the rank {len(lo)}")
        for w in windows:
            if w.size < 1 or w.step < 1 or w.dilation < 1:
                raise _fail(self, f"window {w} needs size, step and dilation >= 1")
        if len(lo) + len(windows) > MAX_RANK:
            raise _fail(self, f"rank {len(lo)} with {len(windows)} windows is above {MAX_RANK}")
        _set(self, "lo", lo)
        _set(self, "hi", hi)
        _set(self, "interior", interior)
        _set(self, "windows", windows)

    @property
    def rank(self) -> int:
        """The rank of the operand this pads."""
        return len(self.lo)

    @property
    def loaded_rank(self) -> int:
        """The rank of what the load reads: the operand's plus one per window."""
        return len(self.lo) + len(self.windows)


@final
@dataclass(frozen=True, slots=True)
class Plain:
    """A load that reads the operand at the loop's index; ``PLAIN`` is the one."""


#: The plain load.
PLAIN: Final = Plain()


@final
@dataclass(frozen=True, slots=True)
class Padded:
    """A load that reads the operand padded and windowed by ``pad``; an index
    outside the operand reads ``fill``, one element's bits (1 to 16 bytes; that
    it is one element of the operand's dtype is the refusal rules' to check)."""

    fill: bytes
    pad: Pad

    def __post_init__(self) -> None:
        _set(self, "fill", _fill(self, self.fill))
        _of(self, "pad", self.pad, Pad)


Load = Plain | Padded


def _loads(owner: object, loads: object, count: int, what: str) -> tuple[Load, ...]:
    """``loads`` as a tuple of ``count`` loads, ``what`` naming whose they are."""
    if not isinstance(loads, Iterable):
        raise _fail(owner, f"loads must be a sequence of loads, got {loads!r}")
    out = tuple(loads)
    for load in out:
        _of(owner, "a load", load, (Plain, Padded))
    if len(out) != count:
        raise _fail(owner, f"{len(out)} loads for {count} {what}")
    return out


# --------------------------------------------------------------------------
# Shapes
# --------------------------------------------------------------------------


def _padded(shape: Shape, pad: Pad) -> Shape:
    if len(shape) != pad.rank:
        raise _Misfit(f"a pad of rank {pad.rank} for an operand of shape {list(shape)}")
    ext = []
    for i, (d, lo, hi, interior) in enumerate(zip(shape, pad.lo, pad.hi, pad.interior,
                                                  strict=True)):
        e = lo + d + hi + interior * max(d - 1, 0)
        if e < 0:
            raise _Misfit(f"axis {i} of extent {d} padded by lo {lo}, hi {hi}, interior "
                          f"{interior} has {e} elements")
        ext.append(e)
    out, taps = list(ext), []
    for w in pad.windows:
        reach = w.dilation * (w.size - 1)
        if reach > ext[w.axis] - 1:
            raise _Misfit(f"window {w} reaches {reach + 1} elements, past padded axis "
                          f"{w.axis}'s {ext[w.axis]}")
        out[w.axis] = (ext[w.axis] - 1 - reach) // w.step + 1
        taps.append(w.size)
    return _fits("the padded operand", (*out, *taps))


@_answers
def padded(shape: Sequence[int], pad: Pad) -> Shape:
    """The shape a load by ``pad`` reads from an operand of ``shape``: along axis
    ``i`` the padded extent ``lo + d + hi + interior·max(d − 1, 0)`` (a
    negative lo or hi crops; below 0 is an Error), then each window's axis
    becomes its count ``(e − 1 − dilation·(size − 1)) // step + 1`` (a window
    reaching past the padded extent is an Error) and one axis of ``size`` per
    window is appended, in order. ``shape`` must have the pad's rank."""
    (s,) = _operands(["the operand"], [shape])
    return _padded(s, pad)


def _loaded(shape: Shape, load: Load) -> Shape:
    return _padded(shape, load.pad) if isinstance(load, Padded) else shape


def _loop(loads: Sequence[Load], shapes: Sequence[Shape]) -> Shape:
    """The loop's shape: every load's loaded shape, all equal; at least one."""
    if not loads:
        raise _Misfit("a loop with no load has no shape")
    loaded = [_loaded(s, load) for s, load in zip(shapes, loads, strict=True)]
    for i, s in enumerate(loaded[1:], start=1):
        if s != loaded[0]:
            raise _Misfit(f"load {i} reads {list(s)}, load 0 reads {list(loaded[0])}")
    return loaded[0]


def _load_names(n: int, first: int = 0) -> list[str]:
    return [f"load {i}" for i in range(first, first + n)]


def loop_rank(loads: Sequence[Load], shapes: Sequence[Sequence[int]]) -> int:
    """The loop's rank as the refusal rules read it, from the load specs and the
    loaded operands' shapes: the first load's (a Padded one's loaded rank)."""
    first = loads[0] if loads else PLAIN
    if isinstance(first, Padded):
        return first.pad.loaded_rank
    return len(shapes[0]) if shapes else 0


# --------------------------------------------------------------------------
# Refusal rules' parts
# --------------------------------------------------------------------------


def _loads_arity(prog: Prog, loads: Sequence[Dtype], load_specs: Sequence[Load],
                 first: int) -> Refusal | None:
    """Loads one per program input from ``first``, and one spec per load."""
    return (_count("loads", len(loads), prog.n_ins - first)
            or (None if len(load_specs) == len(loads) else
                (Answer.BAD_ARITY, f"{len(load_specs)} load specs for {len(loads)} loads")))


def _loop_arity(prog: Prog, loads: Sequence[Dtype], load_specs: Sequence[Load]
                ) -> Refusal | None:
    """A loop's loads: at least one, one per program input."""
    if not loads:
        return Answer.BAD_ARITY, "a loop takes at least one load"
    return _loads_arity(prog, loads, load_specs, 0)


def _load_dtypes(prog: Prog, loads: Sequence[Dtype], load_specs: Sequence[Load],
                 first: int) -> Refusal | None:
    """Load ``i`` of program input ``first + i``'s dtype, a Padded one's fill one
    element of it."""
    for i, (dt, load) in enumerate(zip(loads, load_specs, strict=True)):
        want = prog.ins[first + i]
        if dt != want:
            return Answer.WRONG_DTYPE, f"load {i} is {dt.name}, the program reads {want.name}"
        if isinstance(load, Padded) and not fill_fits(load.fill, dt):
            return (Answer.WRONG_DTYPE,
                    f"load {i}'s fill has {len(load.fill)} bytes, a {dt.name} element "
                    f"{D.bytes(dt, 1)}")
    return None


def _rank(prog: Prog, rank: int, load_specs: Sequence[Load], least: int = 0
          ) -> Refusal | None:
    """A rank from ``least`` to ``MAX_RANK``, each Padded load reading it, and
    every Coord axis below it."""
    if not least <= rank <= MAX_RANK:
        return Answer.SHAPE_MISMATCH, f"a loop of rank {rank}, not in [{least}, {MAX_RANK}]"
    for i, load in enumerate(load_specs):
        if isinstance(load, Padded) and load.pad.loaded_rank != rank:
            return (Answer.SHAPE_MISMATCH,
                    f"load {i} pads rank {load.pad.rank} with {len(load.pad.windows)} windows, "
                    f"reading rank {load.pad.loaded_rank} in a loop of rank {rank}")
    if prog.coord_axes and max(prog.coord_axes) >= rank:
        return (Answer.SHAPE_MISMATCH,
                f"the program reads Coord axis {max(prog.coord_axes)} of a loop of rank {rank}")
    return None

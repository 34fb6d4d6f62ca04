"""Upstream's golden vectors for the scalar kinds, read from ``../shared/upstream-golden``.

Each ``<kind>.golden`` holds float64 arguments (``x``; ``x y`` for pow; ``y x``
for atan2, i.e. atan2(y, x)) and the value correctly rounded to binary64 by
mpmath, C99 Annex F's special values written out; ``f32-sweep-ref.tsv`` holds
the worst float32 arguments of upstream's exhaustive sweep with their values
correctly rounded to binary32 (see the folder's README).

``cases(kind, dt)`` turns them into the points of one float dtype:

* float64: every golden row.
* float32 and the narrow floats: every row, golden or sweep, whose arguments
  the dtype holds exactly, with the value rounded into the dtype. That is the
  correctly rounded value of the dtype wherever the rounding is decided: the
  exact value lies strictly between the golden value's neighbours in its own
  format, so where both neighbours round to the same value of the dtype, so
  does it; and a golden value the dtype holds is the dtype's correctly rounded
  value itself (the exact value lies within a quarter of the dtype's ulp of
  it). A row where the rounding is undecided is left out, and counted.

A point is *exact* where the contract fixes its bits, not only a bound: an
argument is ±0, ±inf or NaN (Annex F's special values), pow's base is 1 or its
exponent ±0 (Annex F: 1 whatever the other operand), exp2 at an integer and
log2 at a power of two (upstream §3).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from nxkernel_core import dtype as D
from nxkernel_core.dtype import Dtype

Arr = npt.NDArray[Any]

#: The folder of upstream's goldens, beside the repository.
FOLDER: Final = Path(__file__).resolve().parents[2].parent / "shared" / "upstream-golden"

#: The kinds with goldens, unary first; pow and atan2 take two operands.
UNARY: Final = ("exp", "exp2", "expm1", "log", "log2", "log1p", "sin", "cos", "tan", "asin",
                "acos", "atan", "sinh", "cosh", "tanh", "erf")
BINARY: Final = ("pow", "atan2")
KINDS: Final = UNARY + BINARY

#: The float dtypes the kinds take.
FLOATS: Final = tuple(dt for dt in D.all if dt.is_float)


def missing() -> str | None:
    """Why the goldens cannot be read (the folder or a file is absent), or None."""
    if not FOLDER.is_dir():
        return f"upstream's goldens are absent: no folder {FOLDER}"
    absent = [f"{k}.golden" for k in KINDS if not (FOLDER / f"{k}.golden").is_file()]
    if not (FOLDER / "f32-sweep-ref.tsv").is_file():
        absent.append("f32-sweep-ref.tsv")
    return f"upstream's goldens are incomplete: {FOLDER} lacks {', '.join(absent)}" if absent else None


@functools.cache
def _golden(kind: str) -> tuple[tuple[Arr, ...], Arr]:
    """A golden file's arguments (in the kind's operand order) and values, float64."""
    rows = []
    with open(FOLDER / f"{kind}.golden") as f:
        lines = [ln for ln in f.read().splitlines() if ln and not ln.startswith("#")]
    for ln in lines[1:]:  # the first is the column names
        rows.append([float.fromhex(c) if "0x" in c else float(c) for c in ln.split("\t")])
    table = np.array(rows, dtype=np.float64)
    return tuple(np.ascontiguousarray(table[:, i]) for i in range(table.shape[1] - 1)), table[:, -1].copy()


@functools.cache
def sweep() -> dict[str, tuple[Arr, Arr]]:
    """The float32 sweep's arguments and correctly rounded values, by kind."""
    out: dict[str, tuple[list[int], list[int]]] = {}
    with open(FOLDER / "f32-sweep-ref.tsv") as f:
        lines = [ln for ln in f.read().splitlines() if ln and not ln.startswith("#")]
    for ln in lines[1:]:
        kind, x, v = ln.split("\t")
        xs, vs = out.setdefault(kind, ([], []))
        xs.append(int(x, 16))
        vs.append(int(v, 16))
    return {k: (np.array(x, np.uint32).view(np.float32), np.array(v, np.uint32).view(np.float32))
            for k, (x, v) in out.items()}


@dataclass(frozen=True)
class Cases:
    """The points of one kind at one float dtype."""

    kind: str
    dtype: Dtype
    #: The operands, elements of ``dtype``, in the kind's order (atan2: y, x).
    args: tuple[Arr, ...]
    #: The correctly rounded values, elements of ``dtype``.
    want: Arr
    #: Where the contract fixes the bits (see the module docstring).
    exact: Arr
    #: Rows the dtype holds whose rounding the goldens leave undecided.
    undecided: int

    def __len__(self) -> int:
        return int(self.want.size)


def _holds(dt: Dtype, x: Arr) -> Arr:
    """Where float64 values ``x`` are values of ``dt`` (NaN where it has NaNs,
    a zero with its sign)."""
    y = D.of_float(dt, x).astype(np.float64)
    same = (y == x) & (np.signbit(y) == np.signbit(x))
    return np.asarray(same | (np.isnan(x) & np.isnan(y)))


def _rounded(dt: Dtype, g: Arr, fmt: type[np.floating[Any]], exact: Arr) -> tuple[Arr, Arr]:
    """Values ``g`` correctly rounded in ``fmt`` (float64 or float32), rounded
    into ``dt``; and where that is ``dt``'s correctly rounded value: where ``g``
    is ``exact``, a NaN, a value of ``dt``, or where both of its neighbours in
    ``fmt`` round to one value of ``dt`` (see the module docstring)."""
    g = g.astype(fmt)
    want = D.of_float(dt, g.astype(np.float64))
    with np.errstate(over="ignore"):  # inf's neighbour above is inf
        lo = D.of_float(dt, np.nextafter(g, fmt(-np.inf)).astype(np.float64)).astype(np.float64)
        hi = D.of_float(dt, np.nextafter(g, fmt(np.inf)).astype(np.float64)).astype(np.float64)
    decided = (lo == hi) & (np.signbit(lo) == np.signbit(hi))
    decided |= exact | _holds(dt, g.astype(np.float64)) | np.isnan(g)
    return want, decided


def _exact(kind: str, args: tuple[Arr, ...], g: Arr) -> Arr:
    """Where the golden value ``g`` is the exact value and the contract fixes
    its bits (see the module docstring)."""
    special = np.zeros(g.shape, dtype=bool)
    for a in args:
        special |= ~np.isfinite(a) | (a == 0)
    # Annex F's results at special arguments that are not rounded values (not
    # atan2's ±π/4, for one, which only the bound holds).
    exact = special & (~np.isfinite(g) | (g == 0) | (np.abs(g) == 1))
    if kind == "pow":
        exact |= (args[0] == 1) | (args[1] == 0)
    elif kind == "exp2":
        x = args[0]
        exact |= (x == np.trunc(x)) & (x >= -1074) & (x <= 1023)
    elif kind == "log2":
        x = args[0]
        with np.errstate(all="ignore"):
            m, _ = np.frexp(x)
        exact |= (x > 0) & (m == 0.5)
    return np.asarray(exact)


def cases(kind: str, dt: Dtype) -> Cases:
    """The points of ``kind`` at float ``dt`` (see the module docstring)."""
    sources: list[tuple[tuple[Arr, ...], Arr, type[np.floating[Any]]]] = [(*_golden(kind), np.float64)]
    if kind in sweep() and dt is not D.float64:
        x, v = sweep()[kind]
        sources.append(((x.astype(np.float64),), v.astype(np.float64), np.float32))
    cols: list[list[Arr]] = [[] for _ in sources[0][0]]
    wants: list[Arr] = []
    exacts: list[Arr] = []
    undecided = 0
    for args, g, fmt in sources:
        exact = _exact(kind, args, g)
        keep = np.ones(g.shape, dtype=bool)
        want: Arr = g
        if dt is not D.float64:
            for col in args:
                keep &= _holds(dt, col)
            want, decided = _rounded(dt, g, fmt, exact)
            undecided += int((keep & ~decided).sum())
            keep &= decided
        for i, col in enumerate(args):
            cols[i].append(col[keep])
        wants.append(np.asarray(want)[keep].astype(np.float64))
        exacts.append(exact[keep])
    return Cases(kind, dt, tuple(D.of_float(dt, np.concatenate(c)) for c in cols),
                 np.asarray(D.of_float(dt, np.concatenate(wants))), np.concatenate(exacts), undecided)


def describe(x: float) -> str:
    """A float as upstream writes it: hexadecimal, or nan/inf."""
    return x.hex() if math.isfinite(x) else repr(x)

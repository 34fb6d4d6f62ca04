"""Hypothesis generators of the conformance kit: dtypes, shapes, values, layouts.

- **Dtypes**: every one of the 21 (``dtypes``), or those of a kind.
- **Shapes**: small shapes of every rank up to 4 with empty axes (``shapes``);
  a reduced or scanned axis may take an edge extent (``EDGE_EXTENTS``: the
  lane and block edges 15, 16, 17, 1023–1025 and the scan chunk edges
  4095–4097) while the whole stays small (``loop_with_axes``).
- **Values** (``values``): built from raw bits with NumPy from a drawn seed, in
  a drawn *profile*: ``bits`` (uniform codes: NaNs with payloads, subnormals,
  a bool's non-canonical bytes), ``specials`` (``specials(dt)``: ±0, ±inf, quiet
  and signalling NaNs with payloads of both signs, subnormal and normal
  edges, ties 0.5, 1.5, 2.5, 127.5, the format limits 448, 464, 57344, 65504,
  65519.99, 65520 where the dtype holds them, integer range edges and the
  values that round twice through float64), ``mixed`` (moderate values and
  specials), ``moderate`` (finite values of magnitude 2⁻⁶ to 2⁶ for floats,
  small integers) and ``ints`` (small integers in every dtype, exact sums).
- **Layouts** (``Placement``, drawn by ``placements``): an operand sits in its own
  buffer at an offset and is reached through the moves a ``Move`` makes:
  permuted, sliced with steps of ±1, ±2, 3 (negative steps reverse),
  broadcast from a smaller array, or windowed (a window's taps overlapping).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt
from hypothesis import strategies as st

from .. import dtype as D
from ..dtype import Dtype

__all__ = [
    "EDGE_EXTENTS",
    "PLANS",
    "PROFILES",
    "Placement",
    "around",
    "dtypes",
    "from_codes",
    "loop_with_axes",
    "placements",
    "profiles",
    "shapes",
    "specials",
    "values",
]

Arr = npt.NDArray[Any]

#: Extents of reduced and scanned axes at the edges of lanes (16), blocks
#: (1024) and scan chunks (4096).
EDGE_EXTENTS: Final[tuple[int, ...]] = (15, 16, 17, 1023, 1024, 1025, 4095, 4096, 4097)

#: The value profiles ``values`` draws from.
PROFILES: Final[tuple[str, ...]] = ("bits", "specials", "mixed", "moderate", "ints")

#: The layouts an operand may be placed in.
PLANS: Final[tuple[str, ...]] = ("contiguous", "strided", "broadcast", "windowed")


# --------------------------------------------------------------------------
# Dtypes and shapes
# --------------------------------------------------------------------------


def around(lo: int, hi: int, start: int) -> st.SearchStrategy[int]:
    """Integers in ``[lo, hi]`` whose simplest draw is ``start`` (then upwards,
    wrapping to ``lo``): extents whose first examples are not degenerate."""
    width = hi - lo + 1
    return st.integers(0, hi - lo).map(lambda k: lo + (start - lo + k) % width)


def dtypes(kinds: Sequence[D.Kind] | None = None, exclude: Sequence[Dtype] = ()) -> st.SearchStrategy[Dtype]:
    """Every dtype (of ``kinds`` where given), but ``exclude``."""
    pool = [dt for dt in D.all if (kinds is None or dt.kind in kinds) and dt not in exclude]
    return st.sampled_from(pool)


@st.composite
def shapes(draw: st.DrawFn, min_rank: int = 0, max_rank: int = 4, max_side: int = 5,
           min_side: int = 0) -> tuple[int, ...]:
    """Small shapes of rank ``min_rank..max_rank``, extents ``1..max_side``; where
    ``min_side`` is 0, now and then one axis is empty. (The simplest draw is a
    non-empty shape: the first examples Hypothesis tries are not degenerate.)"""
    rank = draw(st.integers(min_rank, max_rank))
    shape = [draw(st.integers(max(min_side, 1), max_side)) for _ in range(rank)]
    if min_side == 0 and rank and draw(st.integers(0, 4)) == 4:
        shape[draw(st.integers(0, rank - 1))] = 0
    return tuple(shape)


@st.composite
def loop_with_axes(draw: st.DrawFn, min_rank: int = 1, max_rank: int = 4, n_axes: int | None = None,
                   edges: bool = True, empty: bool = True, min_terms: int = 0,
                   max_elements: int = 9000) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """A loop shape and strictly increasing axes of it (one axis where
    ``n_axes == 1``). A drawn axis may take an edge extent; the other extents
    shrink so the loop has at most ``max_elements`` elements. ``min_terms``
    keeps each chosen axis at least that long."""
    rank = draw(st.integers(min_rank, max_rank))
    count = n_axes if n_axes is not None else draw(st.integers(1 if rank else 0, rank))
    count = min(count, rank)
    axes = tuple(sorted(draw(st.permutations(range(rank)))[:count]))
    shape = [draw(st.integers(1, 4)) for _ in range(rank)]
    if empty and rank and draw(st.integers(0, 4)) == 4:
        shape[draw(st.integers(0, rank - 1))] = 0
    low = 0 if empty else 1
    for a in axes:
        shape[a] = max(shape[a], min_terms)
    if edges and axes and draw(st.integers(0, 2)) > 0:
        a = draw(st.sampled_from(axes))
        shape[a] = draw(st.sampled_from(EDGE_EXTENTS))
        others = [i for i in range(rank) if i != a]
        budget = max(1, max_elements // shape[a])
        for i in others:
            cap = max(low, min(shape[i], budget))
            shape[i] = max(cap, min_terms if i in axes else low)
            budget = max(1, budget // max(1, shape[i]))
    return tuple(shape), axes


# --------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------


def profiles(allowed: Sequence[str] = PROFILES) -> st.SearchStrategy[str]:
    """A value profile (see the module's doc)."""
    return st.sampled_from(tuple(allowed))


_UINT: Final[dict[int, type[np.unsignedinteger[Any]]]] = {
    1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64,
}


def from_codes(dt: Dtype, codes: npt.NDArray[np.uint64]) -> Arr:
    """Host elements of real (non-complex) ``dt`` whose bits are ``codes``."""
    if dt is D.bit:
        return (codes & np.uint64(1)).astype(np.bool_)
    if dt is D.bool_:
        return (codes & np.uint64(0xFF)).astype(np.uint8).view(np.bool_)
    if dt.bits < 8:
        c = (codes & np.uint64((1 << dt.bits) - 1)).astype(np.int16)
        if dt is D.int4:
            return np.where(c >= 8, c - 16, c).astype(np.int8).astype(dt.numpy_dtype)
        if dt is D.uint4:
            return c.astype(np.uint8).astype(dt.numpy_dtype)
        return c.astype(np.uint8).view(dt.numpy_dtype)
    return codes.astype(_UINT[dt.itemsize]).view(dt.numpy_dtype)


def _float_special_codes(dt: Dtype) -> list[int]:
    """Bit patterns of a float dtype's specials (see the module's doc)."""
    fmt = dt.float_format
    assert fmt is not None
    fb, eb, bits = fmt.fraction_bits, fmt.exponent_bits, dt.bits
    sign = 1 << (bits - 1)
    exp_all = ((1 << eb) - 1) << fb
    codes = [0, sign, 1, sign | 1, (1 << fb) - 1, 1 << fb, sign | (1 << fb)]
    if fmt.infinities:
        codes += [exp_all, sign | exp_all]
        quiet = 1 << (fb - 1)
        codes += [exp_all | quiet, sign | exp_all | quiet]
        if fb >= 2:
            codes += [exp_all | quiet | 1, sign | exp_all | quiet | (quiet - 1),
                      exp_all | 1, sign | exp_all | 1, exp_all | (quiet - 1), sign | exp_all | (quiet - 1)]
    elif fmt.nans:
        codes += [exp_all | ((1 << fb) - 1), sign | exp_all | ((1 << fb) - 1)]
    numbers = [1.0, -1.0, 0.5, 1.5, 2.5, -2.5, 3.0, 6.0, 127.5, 448.0, -448.0, 464.0, 57344.0,
               -57344.0, 65504.0, 65519.99, 65520.0, -65520.0, fmt.max_finite, -fmt.max_finite,
               2.0**-126, 2.0**-149, 2.0**-1074]
    for v in numbers:
        stored = D.of_float(dt, [v])
        if float(stored.astype(np.float64)[0]) == v:
            codes.append(int(stored.view(_UINT[dt.itemsize])[0]) & ((1 << bits) - 1)
                         if dt.bits >= 8 else int(stored.view(np.uint8)[0]) & ((1 << bits) - 1))
    return sorted(set(codes))


def _int_specials(dt: Dtype) -> list[int]:
    """An integer dtype's range edges, powers of two at the widths' edges, and
    values that round twice through float64 into float32."""
    lo, hi = dt.int_range
    cands = [0, 1, -1, 2, -2, 3, 7, 8, -8, lo, hi, lo + 1, hi - 1, 127, 128, -128, 255, 256,
             2**15, 2**16, 2**31 - 1, 2**31, -(2**31), 2**32, 2**53 + 1, 2**62 + 2**38 + 1,
             -(2**62 + 2**38 + 1), 2**63 + 2**39 + 1, 2**63 - 1]
    return sorted({c for c in cands if lo <= c <= hi})


def specials(dt: Dtype) -> Arr:
    """The specials of ``dt`` as host elements (see the module's doc); for a
    complex dtype, every pair of a few of its parts' specials."""
    if dt.is_complex:
        part = D.float64 if dt is D.complex128 else D.float32
        ps = specials(part)
        pick = ps[:: max(1, len(ps) // 9)]
        re = np.repeat(pick, len(pick))
        im = np.tile(pick, len(pick))
        out = np.empty(re.shape, dtype=dt.numpy_dtype)
        pair = out.view(part.numpy_dtype).reshape(-1, 2)
        pair[:, 0] = re
        pair[:, 1] = im
        return out
    if dt.is_float:
        return from_codes(dt, np.asarray(_float_special_codes(dt), dtype=np.uint64))
    if dt is D.bool_:
        return from_codes(dt, np.asarray([0, 1, 2, 0x80, 0xFF], dtype=np.uint64))
    if dt is D.bit:
        return np.asarray([False, True])
    ints = _int_specials(dt)
    return np.array(ints, dtype=np.uint64 if dt is D.uint64 else np.int64).astype(dt.numpy_dtype)


def _random_codes(rng: np.random.Generator, bits: int, n: int) -> npt.NDArray[np.uint64]:
    if bits >= 64:
        return rng.integers(0, 2**64 - 1, size=n, dtype=np.uint64, endpoint=True)
    return rng.integers(0, 1 << bits, size=n, dtype=np.uint64)


def _moderate(rng: np.random.Generator, dt: Dtype, n: int) -> Arr:
    """Finite values of magnitude about 2⁻⁶ to 2⁶ (floats) or small integers."""
    if dt.is_float:
        mag = np.ldexp(rng.uniform(1.0, 2.0, n), rng.integers(-6, 6, n))
        v = np.where(rng.random(n) < 0.5, -mag, mag)
        return D.of_float(dt, v)
    return _ints(rng, dt, n)


def _ints(rng: np.random.Generator, dt: Dtype, n: int) -> Arr:
    """Small integers: −8..8 (0..15 unsigned), as the dtype holds them."""
    if dt.is_bool:
        return rng.integers(0, 2, n).astype(np.bool_)
    if dt.is_float:
        top = 4 if dt is D.float4_e2m1fn else 8
        return D.of_float(dt, rng.integers(-top, top + 1, n).astype(np.float64))
    lo, hi = dt.int_range
    v = rng.integers(max(lo, -8), min(hi, 15) + 1, n)
    return v.astype(dt.numpy_dtype)


def _real_values(rng: np.random.Generator, dt: Dtype, n: int, profile: str) -> Arr:
    if profile == "bits":
        return from_codes(dt, _random_codes(rng, 8 if dt is D.bool_ else dt.bits, n))
    sp = specials(dt)
    if profile == "specials":
        return sp[rng.integers(0, len(sp), n)] if n else sp[:0]
    if profile == "moderate":
        return _moderate(rng, dt, n)
    if profile == "ints":
        return _ints(rng, dt, n)
    base = _moderate(rng, dt, n)
    if n:
        pick = rng.random(n) < 0.3
        chosen = sp[rng.integers(0, len(sp), n)]
        base = np.where(pick, chosen, base) if not (dt.is_float or dt.is_bool) else _merge(base, chosen, pick)
    return base


def _merge(a: Arr, b: Arr, take_b: npt.NDArray[np.bool_]) -> Arr:
    """Elements of ``b`` where ``take_b``, else of ``a``, bits unchanged."""
    item = a.dtype.itemsize
    ua = np.asarray(a, order="C").reshape(-1).view(_UINT[item]).reshape(np.shape(a))
    ub = np.asarray(b, order="C").reshape(-1).view(_UINT[item]).reshape(np.shape(b))
    return np.where(take_b, ub, ua).astype(_UINT[item]).view(a.dtype)


def values(dt: Dtype, shape: Sequence[int], profile: str, seed: int) -> Arr:
    """Host elements of ``dt`` of ``shape`` in ``profile``, from ``seed``."""
    rng = np.random.default_rng(seed)
    n = math.prod(shape)
    if dt.is_complex:
        part = D.float64 if dt is D.complex128 else D.float32
        if profile == "specials":
            sp = specials(dt)
            out = sp[rng.integers(0, len(sp), n)] if n else sp[:0]
            return out.reshape(tuple(shape))
        re = _real_values(rng, part, n, profile)
        im = _real_values(rng, part, n, profile)
        out = np.empty(n, dtype=dt.numpy_dtype)
        pair = out.view(part.numpy_dtype).reshape(-1, 2)
        pair[:, 0] = re
        pair[:, 1] = im
        return out.reshape(tuple(shape))
    return np.asarray(_real_values(rng, dt, n, profile)).reshape(tuple(shape))


# --------------------------------------------------------------------------
# Layouts
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Placement:
    """How an operand of some shape sits in its buffer.

    ``plan`` is one of ``PLANS``. ``offset`` elements precede the base array.
    A ``strided`` placement's base axis ``perm[i]`` is the view's axis ``i``,
    sliced by ``steps`` (one per base axis; a negative step reverses) from a
    base ``extra`` elements longer per axis. ``broadcast`` reads a base whose
    ``ones`` axes have extent 1 (and ``drop`` leading axes missing).
    ``windowed`` reads a window of ``step``/``dilation`` along ``axis`` whose
    taps are the view's last axis."""

    plan: str
    offset: int = 0
    perm: tuple[int, ...] = ()
    steps: tuple[int, ...] = ()
    extra: tuple[int, ...] = ()
    ones: tuple[int, ...] = ()
    drop: int = 0
    axis: int = 0
    step: int = 1
    dilation: int = 1


@st.composite
def placements(draw: st.DrawFn, shape: tuple[int, ...], plans: Sequence[str] = PLANS) -> Placement:
    """A placement for an operand of ``shape`` among ``plans`` (those that fit
    the shape: a window needs rank 2 and non-empty axes)."""
    rank = len(shape)
    fit = [p for p in plans if p in ("contiguous", "strided")
           or (p == "broadcast" and rank > 0)
           or (p == "windowed" and rank >= 2 and all(d > 0 for d in shape))]
    if not fit:
        fit = ["contiguous"]
    plan = draw(st.sampled_from(fit))
    offset = draw(st.integers(0, 5))
    if plan == "contiguous":
        return Placement("contiguous", offset)
    if plan == "strided":
        perm = tuple(draw(st.permutations(range(rank))))
        steps = tuple(draw(st.sampled_from((1, -1, 2, -2, 3))) for _ in range(rank))
        extra = tuple(draw(st.integers(0, 2)) for _ in range(rank))
        return Placement("strided", offset, perm=perm, steps=steps, extra=extra)
    if plan == "broadcast":
        ones = tuple(i for i in range(rank) if draw(st.booleans()))
        drop = draw(st.integers(0, min(rank, 2)))
        return Placement("broadcast", offset, ones=ones, drop=drop)
    axis = draw(st.integers(0, rank - 2))
    step = draw(st.integers(1, 3))
    dilation = draw(st.integers(1, 2))
    return Placement("windowed", offset, axis=axis, step=step, dilation=dilation)

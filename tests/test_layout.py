"""Layouts and moves (upstream-facts §8), held to NumPy views of one buffer.

A layout's view is built in NumPy over a buffer whose element ``p`` holds
``p`` (``as_strided`` with the element strides in bytes), so a view's
elements are its positions. Each move is applied both by ``Layout.move`` and
by NumPy (reshape, broadcast_to, transpose, slicing, window views), and the
positions must agree element for element.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.lib.stride_tricks import as_strided, sliding_window_view

from nxkernel_core.layout import (
    MAX_RANK,
    Broadcast,
    Layout,
    Move,
    Permute,
    Range,
    Reshape,
    Slice,
    Window,
    Windows,
    coalesce,
    window_count,
)

SETTINGS = settings(max_examples=200, deadline=None)
LIGHT = settings(max_examples=100, deadline=None)  # secondary laws

# --------------------------------------------------------------------------
# Strategies and the NumPy model
# --------------------------------------------------------------------------

EXTENTS = st.sampled_from((0,) + (1, 2, 3, 4) * 4)  # an empty axis one time in 17


@st.composite
def layouts(draw: st.DrawFn, max_rank: int = 4, max_stride: int = 6,
            shape: tuple[int, ...] | None = None) -> Layout:
    """Any valid layout: strides negative, zero or positive, any offset that
    keeps every position non-negative."""
    if shape is None:
        rank = draw(st.integers(0, max_rank))
        shape = tuple(draw(EXTENTS) for _ in range(rank))
    strides = tuple(draw(st.integers(-max_stride, max_stride)) for _ in shape)
    reach_down = sum(-s * (d - 1) for d, s in zip(shape, strides, strict=True) if s < 0 and d > 0)
    offset = reach_down + draw(st.integers(0, 5))
    return Layout(shape, strides, offset)


def positions(lay: Layout) -> list[int]:
    return list(lay.positions())


def np_view(lay: Layout) -> np.ndarray:
    """A NumPy view with the layout's shape and strides over a buffer whose
    element p is p, so the view's elements are the layout's positions."""
    top = lay.offset + sum(s * (d - 1) for d, s in zip(lay.shape, lay.strides, strict=True)
                           if s > 0 and d > 0)
    buf = np.arange(max(top, lay.offset) + 2, dtype=np.int64)
    return as_strided(buf[lay.offset:], shape=lay.shape,
                      strides=[s * buf.itemsize for s in lay.strides], writeable=False)


def np_positions(a: np.ndarray) -> list[int]:
    return [int(p) for p in np.asarray(a).reshape(-1).tolist()]


def np_slice(r: Range) -> slice:
    if r.count == 0:
        return slice(0, 0)
    stop: int | None = r.start + r.count * r.step
    if stop is not None and stop < 0:
        stop = None
    return slice(r.start, stop, r.step)


@st.composite
def ranges(draw: st.DrawFn, d: int) -> Range:
    step = draw(st.sampled_from((1, 1, 2, 3, -1, -1, -2, -3)))
    if d == 0 or draw(st.integers(0, 9)) == 0:
        return Range(draw(st.integers(-3, d + 3)), 0, step)
    most = (d - 1) // abs(step) + 1
    count = draw(st.integers(1, most))
    span = (count - 1) * abs(step)
    first = draw(st.integers(0, d - 1 - span))
    start = first if step > 0 else first + span
    return Range(start, count, step)


@st.composite
def windows_for(draw: st.DrawFn, shape: tuple[int, ...]) -> Windows:
    axes = [ax for ax, d in enumerate(shape) if d >= 1]
    chosen = sorted(draw(st.lists(st.sampled_from(axes), unique=True, max_size=2))) if axes else []
    out = []
    for ax in chosen:
        d = shape[ax]
        dilation = draw(st.integers(1, 3))
        size = draw(st.integers(1, (d - 1) // dilation + 1))
        step = draw(st.integers(1, 3))
        out.append(Window(ax, size, step, dilation))
    return Windows(tuple(out))


def factor_shape(draw: st.DrawFn, n: int) -> tuple[int, ...]:
    """A random shape of n elements (extents of 1 and 0 included)."""
    if n == 0:
        rest = draw(st.lists(st.integers(0, 3), max_size=3))
        return tuple(draw(st.permutations([0, *rest])))
    primes = []
    m, p = n, 2
    while m > 1:
        while m % p == 0:
            primes.append(p)
            m //= p
        p += 1
    slots = draw(st.integers(max(1, len(primes)) if primes else 0, len(primes) + 2))
    shape = [1] * slots
    for q in primes:
        shape[draw(st.integers(0, slots - 1))] *= q
    return tuple(shape)


@st.composite
def reshapes(draw: st.DrawFn, lay: Layout) -> Reshape:
    return Reshape(factor_shape(draw, lay.numel))


@st.composite
def broadcasts(draw: st.DrawFn, shape: tuple[int, ...]) -> Broadcast:
    lead = draw(st.lists(st.integers(0, 3), max_size=min(2, MAX_RANK - len(shape))))
    new = [draw(st.integers(0, 3)) if d == 1 else d for d in shape]
    return Broadcast(tuple(lead + new))


@st.composite
def moves(draw: st.DrawFn, lay: Layout) -> Move:
    kind = draw(st.sampled_from(("reshape", "broadcast", "permute", "slice", "windows")))
    if kind == "reshape":
        return draw(reshapes(lay))
    if kind == "broadcast":
        return draw(broadcasts(lay.shape))
    if kind == "permute":
        return Permute(tuple(draw(st.permutations(range(lay.rank)))))
    if kind == "slice":
        return Slice(tuple(draw(ranges(d)) for d in lay.shape))
    return draw(windows_for(lay.shape))


def window_reference(view: np.ndarray, ws: Windows) -> np.ndarray:
    """Element (…, w, …, j) is source (…, w·step + j·dilation, …), by index."""
    rank = view.ndim
    shape = list(view.shape)
    for w in ws.windows:
        shape[w.axis] = len(range(0, view.shape[w.axis] - w.dilation * (w.size - 1), w.step))
    shape += [w.size for w in ws.windows]
    out = np.zeros(shape, dtype=view.dtype)
    for idx in np.ndindex(*shape):
        src = list(idx[:rank])
        for t, w in enumerate(ws.windows):
            src[w.axis] = idx[w.axis] * w.step + idx[rank + t] * w.dilation
        out[idx] = view[tuple(src)]
    return out


def window_view(view: np.ndarray, ws: Windows) -> np.ndarray:
    """NumPy's view of the windows by ``as_strided`` over the source view: the
    count axis steps by ``step`` source elements, a tap by ``dilation``; checked
    against ``window_reference`` index by index."""
    shape = list(view.shape)
    strides = list(view.strides)
    for w in ws.windows:
        shape[w.axis] = len(range(0, view.shape[w.axis] - w.dilation * (w.size - 1), w.step))
        strides[w.axis] = view.strides[w.axis] * w.step
    shape += [w.size for w in ws.windows]
    strides += [view.strides[w.axis] * w.dilation for w in ws.windows]
    out = as_strided(view, shape, strides, writeable=False)
    assert np.array_equal(out, window_reference(view, ws))
    return out


def numpy_move(view: np.ndarray, m: Move) -> np.ndarray | None:
    """NumPy's view for the same move (None for a reshape NumPy cannot do
    without a copy)."""
    match m:
        case Reshape(shape):
            try:
                return view.reshape(shape, copy=False)
            except ValueError:
                return None
        case Broadcast(shape):
            return np.broadcast_to(view, shape)
        case Permute(perm):
            return np.transpose(view, perm)
        case Slice(rs):
            return view[tuple(np_slice(r) for r in rs)]
        case Windows(ws):
            return window_view(view, Windows(ws))
    raise AssertionError(m)


# --------------------------------------------------------------------------
# A layout's positions are NumPy's view's elements
# --------------------------------------------------------------------------


@LIGHT
@given(layouts())
def test_positions_are_the_numpy_views(lay: Layout) -> None:
    assert positions(lay) == np_positions(np_view(lay))
    assert len(positions(lay)) == lay.numel == math.prod(lay.shape)
    assert all(p >= 0 for p in positions(lay))


def test_positions_examples() -> None:
    assert positions(Layout((), (), 7)) == [7]
    assert positions(Layout((2, 3), (3, 1))) == [0, 1, 2, 3, 4, 5]
    assert positions(Layout((2, 3), (-1, -2), 5)) == [5, 3, 1, 4, 2, 0]
    assert positions(Layout((3, 0), (1, 1), 9)) == []


@LIGHT
@given(st.lists(st.integers(0, 4), max_size=5), st.integers(0, 9))
def test_c_contiguous(shape: list[int], offset: int) -> None:
    lay = Layout.c_contiguous(shape, offset)
    assert lay.is_contiguous()
    if math.prod(shape) > 0:
        want = [s // 8 for s in np.empty(shape, dtype=np.int64).strides]
        assert list(lay.strides) == want
        assert positions(lay) == list(range(offset, offset + math.prod(shape)))


# --------------------------------------------------------------------------
# Canonical form, equality and hashing
# --------------------------------------------------------------------------


@LIGHT
@given(layouts())
def test_canonical_form(lay: Layout) -> None:
    c = lay.canonical()
    assert c == lay and hash(c) == hash(lay)
    assert c.canonical().strides == c.strides and c.canonical().offset == c.offset
    assert c.shape == lay.shape
    assert positions(c) == positions(lay)
    for d, s in zip(c.shape, c.strides, strict=True):
        if d == 1:
            assert s == 0
    if lay.numel == 0:
        assert c.offset == 0 and all(s == 0 for s in c.strides)


@st.composite
def layout_pairs(draw: st.DrawFn) -> tuple[Layout, Layout]:
    """Two layouts of one shape, often equal: the second either drawn afresh
    or the first with the strides of its extent-1 axes (and, when it has no
    element, its strides and offset) redrawn."""
    a = draw(layouts())
    if draw(st.booleans()):
        return a, draw(layouts(shape=a.shape))
    empty = a.numel == 0
    strides = tuple(draw(st.integers(-5, 5)) if d == 1 or empty else s
                    for d, s in zip(a.shape, a.strides, strict=True))
    reach = sum(-s * (d - 1) for d, s in zip(a.shape, strides, strict=True) if s < 0 and d > 0)
    offset = reach + draw(st.integers(0, 5)) if empty else a.offset
    return a, Layout(a.shape, strides, offset)


@SETTINGS
@given(layout_pairs())
def test_equal_iff_same_positions(pair: tuple[Layout, Layout]) -> None:
    a, b = pair
    same = a.shape == b.shape and positions(a) == positions(b)
    assert (a == b) == same
    if same:
        assert hash(a) == hash(b)
        assert len({a, b}) == 1


def test_canonical_examples() -> None:
    assert Layout((1, 3), (7, 1), 2) == Layout((1, 3), (0, 1), 2)
    assert hash(Layout((1, 3), (7, 1), 2)) == hash(Layout((1, 3), (-4, 1), 2))
    assert Layout((0, 3), (5, 1), 9) == Layout((0, 3), (0, 0), 0)
    assert Layout((2,), (1,), 0) != Layout((2,), (1,), 1)
    assert Layout((2,), (1,)) != Layout((1, 2), (0, 1))
    assert Layout((), ()) != "not a layout"


# --------------------------------------------------------------------------
# span, is_contiguous, is_distinct
# --------------------------------------------------------------------------


@LIGHT
@given(layouts())
def test_span_is_tight(lay: Layout) -> None:
    ps = positions(lay)
    lo, hi = lay.span()
    if not ps:
        assert (lo, hi) == (0, 0)
    else:
        assert lo == min(ps) and hi == max(ps) + 1


@LIGHT
@given(layouts(max_stride=3))
def test_is_contiguous(lay: Layout) -> None:
    assert lay.is_contiguous() == (positions(lay) == list(range(lay.offset, lay.offset + lay.numel)))


def brute_distinct(lay: Layout) -> bool:
    ps = positions(lay)
    return len(set(ps)) == len(ps)


def upstream_rule(lay: Layout) -> bool:
    """upstream-facts §8: sort the axes of extent > 1 by |stride| (ties by
    axis); each stride must exceed the reach of the axes before it."""
    if lay.numel == 0:
        return True
    axes = sorted((abs(s), i) for i, (d, s) in enumerate(zip(lay.shape, lay.strides, strict=True))
                  if d > 1)
    reach = 0
    for s, i in axes:
        if not s > reach:
            return False
        reach += (lay.shape[i] - 1) * s
    return True


@SETTINGS
@given(layouts(max_rank=4, max_stride=8))
def test_is_distinct_is_the_upstream_rule_and_sound(lay: Layout) -> None:
    assert lay.is_distinct() == upstream_rule(lay)
    if lay.is_distinct():
        assert brute_distinct(lay)


@st.composite
def nested_layouts(draw: st.DrawFn) -> Layout:
    """Layouts whose |strides| on axes of extent > 1 divide one another (as
    every C-contiguous, sliced, permuted or broadcast layout's do)."""
    rank = draw(st.integers(0, 4))
    shape = tuple(draw(EXTENTS) for _ in range(rank))
    unit, mags = 1, []
    for _ in range(rank):
        mags.append(unit)
        unit *= draw(st.integers(1, 5))
    mags = [0 if draw(st.integers(0, 7)) == 0 else m for m in mags]
    order = draw(st.permutations(range(rank)))
    strides = tuple(mags[order[i]] * draw(st.sampled_from((1, -1))) for i in range(rank))
    reach = sum(-s * (d - 1) for d, s in zip(shape, strides, strict=True) if s < 0 and d > 0)
    return Layout(shape, strides, reach + draw(st.integers(0, 3)))


@SETTINGS
@given(nested_layouts())
def test_is_distinct_equals_brute_force_on_nested_strides(lay: Layout) -> None:
    assert lay.is_distinct() == brute_distinct(lay)


@LIGHT
@given(st.data())
def test_is_distinct_is_exact_on_moved_contiguous_layouts(data: st.DataObject) -> None:
    """Slices, permutations, reshapes and broadcasts of a C-contiguous layout:
    the rule decides exactly (Windows can make false negatives, see below)."""
    shape = tuple(data.draw(st.lists(st.integers(0, 4), max_size=4)))
    lay = Layout.c_contiguous(shape, data.draw(st.integers(0, 3)))
    for _ in range(data.draw(st.integers(1, 3))):
        m = data.draw(moves(lay))
        if isinstance(m, Windows):
            continue
        nxt = lay.move(m)
        if nxt is None:
            break
        lay = nxt
    assert lay.is_distinct() == brute_distinct(lay)


def test_is_distinct_examples() -> None:
    assert Layout((3, 4), (4, 1)).is_distinct()
    assert Layout((3, 4), (-1, 3), 2).is_distinct()
    assert not Layout((3, 4), (0, 1)).is_distinct()  # broadcast
    assert not Layout((3, 4), (1, 1)).is_distinct()  # overlapping windows
    assert Layout((1, 4), (0, 1)).is_distinct()
    assert Layout((0, 4), (0, 0)).is_distinct()
    # The rule is sufficient, not necessary (upstream-facts §8 defines
    # is_distinct as the rule): positions 0 3 2 5 4 7 are distinct, yet the
    # stride 3 does not exceed the reach 4 of the axis of stride 2.
    lay = Layout((3, 2), (2, 3))
    assert brute_distinct(lay) and not lay.is_distinct()
    # Windows of steps 2 and dilation 3 reach 0 3 2 5 4 7 6 9 likewise.
    win = Layout.c_contiguous((10,)).move(Windows((Window(0, 2, 2, 3),)))
    assert win is not None and brute_distinct(win) and not win.is_distinct()


# --------------------------------------------------------------------------
# coalesce
# --------------------------------------------------------------------------


@st.composite
def coalesce_groups(draw: st.DrawFn) -> list[Layout]:
    rank = draw(st.integers(0, 5))
    shape = tuple(draw(EXTENTS) for _ in range(rank))
    out = []
    for _ in range(draw(st.integers(1, 4))):
        how = draw(st.sampled_from(("c", "c", "sliced", "any")))
        if how == "c":
            out.append(Layout.c_contiguous(shape, draw(st.integers(0, 4))))
        elif how == "sliced":
            big = tuple(d * 2 for d in shape)
            base = Layout.c_contiguous(big, draw(st.integers(0, 4)))
            m = base.move(Slice(tuple(Range(0, d, 1) if draw(st.booleans()) else Range(0, d, 2)
                                      for d in shape)))
            assert m is not None
            out.append(m)
        else:
            out.append(draw(layouts(shape=shape)))
    return out


@SETTINGS
@given(coalesce_groups())
def test_coalesce_keeps_positions_and_merges_every_run(group: list[Layout]) -> None:
    out = coalesce(*group)
    assert len(out) == len(group)
    shape = out[0].shape
    assert all(o.shape == shape for o in out)
    for before, after in zip(group, out, strict=True):
        assert positions(after) == positions(before)
        assert after.rank <= max(before.rank, 1)
    if group[0].numel > 0:
        assert all(o.offset == g.offset for o, g in zip(out, group, strict=True))
        assert 1 not in shape
        # No neighbouring pair is left that every layout runs across.
        for i in range(len(shape) - 1):
            assert not all(o.strides[i] == o.strides[i + 1] * shape[i + 1] for o in out)


def test_coalesce_examples() -> None:
    a = Layout.c_contiguous((2, 3, 4), 5)
    (c,) = coalesce(a)
    assert (c.shape, c.strides, c.offset) == ((24,), (1,), 5)
    b = Layout((2, 3, 4), (1, 8, 2))
    c, d = coalesce(a, b)
    assert c.shape == (2, 12) and d.shape == (2, 12)
    assert (c.strides, d.strides) == ((12, 1), (1, 2))
    (e,) = coalesce(Layout((1, 1), (5, 5), 3))
    assert (e.shape, e.strides, e.offset) == ((), (), 3)


def test_coalesce_errors() -> None:
    lay = Layout.c_contiguous((2, 3))
    with pytest.raises(ValueError, match=r"^coalesce: "):
        coalesce()
    with pytest.raises(ValueError, match=r"^coalesce: "):
        coalesce(lay, lay, lay, lay, lay)
    with pytest.raises(ValueError, match=r"^coalesce: "):
        coalesce(lay, Layout.c_contiguous((3, 2)))


# --------------------------------------------------------------------------
# Moves against NumPy
# --------------------------------------------------------------------------


def check_move(lay: Layout, m: Move) -> Layout | None:
    got = lay.move(m)
    want = numpy_move(np_view(lay), m)
    if got is None:
        assert isinstance(m, Reshape)
        assert want is None, f"NumPy reshapes {lay} to {m.shape} without a copy"
        return None
    if want is not None:
        assert got.shape == want.shape
        assert positions(got) == np_positions(want)
    assert all(p >= 0 for p in positions(got))
    return got


@SETTINGS
@given(st.data())
def test_slice_matches_numpy(data: st.DataObject) -> None:
    lay = data.draw(layouts())
    m = Slice(tuple(data.draw(ranges(d)) for d in lay.shape))
    got = check_move(lay, m)
    assert got is not None and got.shape == tuple(r.count for r in m.ranges)


@LIGHT
@given(st.data())
def test_permute_matches_numpy(data: st.DataObject) -> None:
    lay = data.draw(layouts())
    check_move(lay, Permute(tuple(data.draw(st.permutations(range(lay.rank))))))


@SETTINGS
@given(st.data())
def test_broadcast_matches_numpy(data: st.DataObject) -> None:
    lay = data.draw(layouts())
    check_move(lay, data.draw(broadcasts(lay.shape)))


@SETTINGS
@given(st.data())
def test_windows_match_numpy(data: st.DataObject) -> None:
    lay = data.draw(layouts(max_rank=3))
    m = data.draw(windows_for(lay.shape))
    got = check_move(lay, m)
    assert got is not None
    # With no dilation, the same as sliding_window_view stepped along each axis.
    if m.windows and all(w.dilation == 1 for w in m.windows):
        axes = tuple(w.axis for w in m.windows)
        sw = sliding_window_view(np_view(lay), tuple(w.size for w in m.windows), axis=axes)
        step = [slice(None)] * sw.ndim
        for w in m.windows:
            step[w.axis] = slice(None, None, w.step)
        assert positions(got) == np_positions(sw[tuple(step)])
    # Element (…, w, …, j) is source (…, w·step + j·dilation, …), index by index.
    assert positions(got) == np_positions(window_reference(np_view(lay), m))


def brute_reshape_strides(seq: list[int], new: tuple[int, ...]) -> tuple[int, ...] | None:
    """Strides for ``new`` that reproduce the positions ``seq`` in C order, if any:
    the stride of an axis is forced by its unit index, then every index is checked."""
    if not seq:
        return (0,) * len(new)
    strides = []
    for k, d in enumerate(new):
        if d > 1:
            unit = tuple(1 if j == k else 0 for j in range(len(new)))
            strides.append(seq[int(np.ravel_multi_index(unit, new))] - seq[0])
        else:
            strides.append(0)
    if seq[0] + sum(s * (d - 1) for d, s in zip(new, strides, strict=True) if s < 0) < 0:
        return None  # such strides reach below position 0, where seq never is
    if np_positions(np_view(Layout(new, tuple(strides), seq[0]))) != seq:
        return None
    return tuple(strides)


@SETTINGS
@given(st.data())
def test_reshape_is_none_exactly_when_no_strides_express_it(data: st.DataObject) -> None:
    lay = data.draw(layouts())
    m = data.draw(reshapes(lay))
    got = lay.move(m)
    possible = brute_reshape_strides(positions(lay), m.shape) is not None
    assert (got is not None) == possible
    want = numpy_move(np_view(lay), m)
    if got is None:
        assert want is None
    else:
        assert got.shape == m.shape
        assert positions(got) == positions(lay)
        if want is not None:
            assert positions(got) == np_positions(want)


@SETTINGS
@given(st.data())
def test_reshape_of_moved_contiguous_layouts(data: st.DataObject) -> None:
    """Reshapes of slices and transposes of C-contiguous layouts, where NumPy
    decides whether a copy is needed."""
    shape = tuple(data.draw(st.lists(st.integers(1, 4), max_size=4)))
    lay = Layout.c_contiguous(shape, data.draw(st.integers(0, 3)))
    for _ in range(2):
        m = data.draw(moves(lay))
        if isinstance(m, Reshape):
            continue
        nxt = lay.move(m)
        assert nxt is not None
        lay = nxt
    r = data.draw(reshapes(lay))
    got = lay.move(r)
    want = numpy_move(np_view(lay), r)
    if want is not None:
        assert got is not None and positions(got) == np_positions(want)
    possible = brute_reshape_strides(positions(lay), r.shape) is not None
    assert (got is not None) == possible


def test_reshape_examples() -> None:
    c = Layout.c_contiguous((2, 3, 4))
    assert c.move(Reshape((6, 4))) == Layout.c_contiguous((6, 4))
    t = c.move(Permute((2, 1, 0)))
    assert t is not None
    assert t.move(Reshape((24,))) is None
    assert t.move(Reshape((4, 3, 2, 1))) == Layout((4, 3, 2, 1), (1, 4, 12, 0))
    assert t.move(Reshape((2, 2, 6))) is None
    s = c.move(Slice((Range(1, 2, -1), Range(2, 3, -1), Range(3, 4, -1))))
    assert s is not None and s.move(Reshape((24,))) == Layout((24,), (-1,), 23)
    assert s.move(Reshape((4, 6))) == Layout((4, 6), (-6, -1), 23)
    s = c.move(Slice((Range(0, 2), Range(0, 3), Range(3, 2, -2))))
    assert s is not None and s.move(Reshape((6, 2))) == Layout((6, 2), (4, -2), 3)
    assert s.move(Reshape((12,))) is None
    b = Layout((3, 4), (0, 1))
    assert b.move(Reshape((12,))) is None
    assert Layout((3, 4), (0, 0), 2).move(Reshape((2, 6))) == Layout((2, 6), (0, 0), 2)
    assert Layout((2, 0), (1, 1), 4).move(Reshape((0, 5))) == Layout((0, 5), (0, 0), 0)
    assert Layout((), (), 3).move(Reshape((1, 1))) == Layout((1, 1), (0, 0), 3)


@SETTINGS
@given(st.data())
def test_chains_of_moves_match_numpy(data: st.DataObject) -> None:
    lay = data.draw(layouts(max_rank=3))
    view = np_view(lay)
    for _ in range(data.draw(st.integers(1, 3))):
        m = data.draw(moves(lay))
        want = numpy_move(view, m)
        got = lay.move(m)
        if got is None:
            assert want is None
            break
        if want is None:  # NumPy would copy, though strides exist; follow ours.
            assert isinstance(m, Reshape)
            want = np_view(got)
        assert got.shape == want.shape
        assert positions(got) == np_positions(want)
        lay, view = got, want


# --------------------------------------------------------------------------
# window_count
# --------------------------------------------------------------------------


@SETTINGS
@given(st.integers(0, 40), st.integers(1, 6), st.integers(1, 5), st.integers(1, 4))
def test_window_count_formula(d: int, size: int, step: int, dilation: int) -> None:
    w = Window(0, size, step, dilation)
    starts = [s for s in range(d) if s + dilation * (size - 1) <= d - 1 and s % step == 0]
    if dilation * (size - 1) > d - 1:
        with pytest.raises(ValueError, match=r"^f: "):
            window_count("f", d, w)
    else:
        n = window_count("f", d, w)
        assert n == (d - 1 - dilation * (size - 1)) // step + 1 == len(starts)


def test_window_count_needs_positive_parameters() -> None:
    for w in (Window(0, 0), Window(0, 1, 0), Window(0, 1, 1, 0), Window(0, -1, 1, 1)):
        with pytest.raises(ValueError, match=r"^g: "):
            window_count("g", 5, w)


def test_windows_examples() -> None:
    lay = Layout.c_contiguous((2, 10))
    got = lay.move(Windows((Window(1, 3, 2, 2),)))
    assert got == Layout((2, 3, 3), (10, 2, 2))
    assert lay.move(Windows(())) == lay
    pool = Layout.c_contiguous((4, 6)).move(Windows((Window(0, 2, 2), Window(1, 2, 2))))
    assert pool == Layout((2, 3, 2, 2), (12, 2, 6, 1))


# --------------------------------------------------------------------------
# Errors name the function
# --------------------------------------------------------------------------


def raises(prefix: str) -> pytest.RaisesContext[ValueError]:
    return pytest.raises(ValueError, match="^" + prefix.replace("(", r"\(").replace(")", r"\)")
                         + ": ")


def test_layout_errors() -> None:
    with raises("Layout"):
        Layout((2, -1), (1, 1))
    with raises("Layout"):
        Layout((2, 3), (1,))
    with raises("Layout"):
        Layout((2, 3), (-1, 1), 0)
    with raises("Layout"):
        Layout((1,) * (MAX_RANK + 1), (0,) * (MAX_RANK + 1))
    Layout((1,) * MAX_RANK, (0,) * MAX_RANK)
    Layout((0, 3), (-5, 1), 0)  # no element, no position
    with raises("Layout.c_contiguous"):
        Layout.c_contiguous((2, -3))
    with raises("Layout.c_contiguous"):
        Layout.c_contiguous((1,) * (MAX_RANK + 1))
    with raises("Layout.move"):
        Layout.c_contiguous((2,)).move("reverse")  # type: ignore[arg-type]


def test_reshape_errors() -> None:
    lay = Layout.c_contiguous((2, 3))
    with raises("Layout.move(Reshape)"):
        lay.move(Reshape((4,)))
    with raises("Layout.move(Reshape)"):
        lay.move(Reshape((-2, -3)))
    with raises("Layout.move(Reshape)"):
        lay.move(Reshape((6,) + (1,) * MAX_RANK))


def test_broadcast_errors() -> None:
    lay = Layout.c_contiguous((2, 3))
    with raises("Layout.move(Broadcast)"):
        lay.move(Broadcast((3,)))
    with raises("Layout.move(Broadcast)"):
        lay.move(Broadcast((2, 4)))
    with raises("Layout.move(Broadcast)"):
        lay.move(Broadcast((3, 3)))
    with raises("Layout.move(Broadcast)"):
        lay.move(Broadcast((1,) * (MAX_RANK - 1) + (2, 3)))
    with raises("Layout.move(Broadcast)"):
        lay.move(Broadcast((-1, 2, 3)))


def test_permute_errors() -> None:
    lay = Layout.c_contiguous((2, 3))
    for p in ((0,), (0, 0), (1, 2), (0, 1, 2), (-1, 0)):
        with raises("Layout.move(Permute)"):
            lay.move(Permute(p))


def test_slice_errors() -> None:
    lay = Layout.c_contiguous((4,))
    for r in (Range(0, 1, 0), Range(0, -1, 1), Range(4, 1, 1), Range(-1, 1, 1),
              Range(0, 3, 2), Range(1, 3, -1), Range(3, 5, -1)):
        with raises("Layout.move(Slice)"):
            lay.move(Slice((r,)))
    with raises("Layout.move(Slice)"):
        lay.move(Slice((Range(0, 1), Range(0, 1))))
    # A range of no index may start anywhere.
    assert lay.move(Slice((Range(9, 0, -3),))) == Layout((0,), (0,), 0)


def test_windows_errors() -> None:
    lay = Layout.c_contiguous((4, 5))
    bad = (
        (Window(1, 2), Window(0, 2)),
        (Window(0, 2), Window(0, 2)),
        (Window(2, 1),),
        (Window(-1, 1),),
        (Window(0, 0),),
        (Window(0, 2, 0),),
        (Window(0, 2, 1, 0),),
        (Window(0, 5),),
        (Window(1, 3, 1, 3),),
    )
    for ws in bad:
        with raises("Layout.move(Windows)"):
            lay.move(Windows(ws))
    with raises("Layout.move(Windows)"):
        Layout.c_contiguous((0,)).move(Windows((Window(0, 1),)))
    wide = Layout.c_contiguous((2,) * 17)
    with raises("Layout.move(Windows)"):
        wide.move(Windows(tuple(Window(i, 1) for i in range(16))))


def test_move_records_are_plain_data() -> None:
    assert Range(1, 2, 3) == Range(1, 2, 3) and Range(1, 2) == Range(1, 2, 1)
    assert Window(0, 3) == Window(0, 3, 1, 1)
    assert hash(Slice((Range(0, 1),))) == hash(Slice((Range(0, 1),)))
    assert Windows((Window(0, 2),)) != Windows((Window(0, 2, 2),))


def test_moves_keep_positions_non_negative_seq() -> None:
    """A reversed slice moves the offset to its first element."""
    lay = Layout.c_contiguous((5,), 2)
    r = lay.move(Slice((Range(4, 5, -1),)))
    assert r == Layout((5,), (-1,), 6)
    assert positions(r) == [6, 5, 4, 3, 2]

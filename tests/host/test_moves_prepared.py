"""The moves prepared per signature give the bits of the hooks they stand for.

The library's own entry (``library.gather``, ...) and the caller's warm path
(``nx.gather``, ...) compute a move by the hook its signature prepared
(``moveplans.DIRECT`` and ``moveplans.PREPARED``): views of the arrays' bytes
made once per signature, no pool below ``MIN_PARALLEL``. Each must give the
bits of the move's hook (``gathers.gather``, ...: what both paths ran before,
checked against per-element references in ``test_moves``), call after call,
at every dtype, axis, aliasing and thread count, with duplicates and
positions outside [0, d); and the refusals and door answers stay as they
were, warm or not.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

from nxkernel_core import dtype as D
from nxkernel_core import nx
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer, InvalidArgument
from nxkernel_core.array import Array
from nxkernel_core.dtype import Dtype
from nxkernel_core.layout import Layout, Range
from nxkernel_core.rig import Buffer
from nxkernel_host import gathers, pool, threads
from nxkernel_host.library import library

#: Byte-wide and packed, floats of every width, complex, booleans, integers.
DTYPES = (D.float32, D.float64, D.float16, D.bfloat16, D.float8_e5m2, D.int4, D.bool_,
          D.complex64, D.int8, D.uint64)
#: (shape, axis, extent of the index along the axis): rows of an inner extent
#: 1 and a 3-D split whose inner extent is not.
GEOMETRIES = (((8,), 0, 8), ((8,), 0, 3), ((3, 5), 1, 7), ((4, 3), 0, 4), ((2, 5, 3), 1, 4))

Hook = Callable[[Any, Sequence[Array], Sequence[Array]], None]


def _random(rng: np.random.Generator, dt: Dtype, shape: tuple[int, ...]) -> Array:
    """A C-contiguous array of random bits (NaN payloads, −0, any code)."""
    a = Array.empty(dt, shape)
    a.buffer.host_view()[...] = rng.integers(0, 256, a.buffer.length, dtype=np.uint8)
    return a


def _strided(rng: np.random.Generator, dt: Dtype, n: int) -> Array:
    """Every other element of a random array, from its second: not contiguous."""
    base = _random(rng, dt, (2 * n + 1,))
    return Array(dt, Layout((n,), (2,), 1), base.buffer)


def _copy(a: Array) -> Array:
    """``a``'s dtype and layout over a copy of its buffer's bytes."""
    buf = Buffer.create(a.device, a.buffer.length)
    buf.host_view()[...] = a.buffer.host_view()
    return Array(a.dtype, a.layout, buf)


def _bits(a: Array) -> bytes:
    return bytes(a.buffer.host_view())


def _positions(rng: np.random.Generator, shape: tuple[int, ...], d: int) -> Array:
    """int64 positions in [-2, d + 2): duplicates and both sides outside."""
    return Array.from_numpy(rng.integers(-2, d + 2, shape))


def _same_as_hook(kernel: str, hook: Hook, spec: Any, dst: Array, operands: list[Array],
                  alias: int | None = None) -> None:
    """The entry's call, twice (the second on the signature it decided),
    gives the hook's bits on copies of the arrays; ``alias``: the operand
    that is dst."""
    for _ in range(2):
        ops = [_copy(o) for o in operands]
        ref_ops = [_copy(o) for o in ops]
        out = ops[alias] if alias is not None else _copy(dst)
        ref = ref_ops[alias] if alias is not None else _copy(out)
        hook(spec, [ref], ref_ops)
        assert getattr(library, kernel)(spec, [out], ops) is Answer.DONE
        assert _bits(out) == _bits(ref), (kernel, spec)
        assert [_bits(o) for o in ops] == [_bits(o) for o in ref_ops]


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: d.name)
def test_prepared_moves_give_the_hooks_bits(dt: Dtype) -> None:
    rng = np.random.default_rng(dt.bits * 131 + len(dt.name))
    for (shape, axis, m), n_threads in zip(GEOMETRIES, (1, 2, 3, 1, 2), strict=True):
        d = shape[axis]
        ishape = tuple(m if i == axis else e for i, e in enumerate(shape))
        x, index = _random(rng, dt, shape), _positions(rng, ishape, d)
        with threads(n_threads):
            _same_as_hook("gather", gathers.gather, S.Gather(axis), Array.empty(dt, ishape),
                          [index, x])
            run = S.RangeGather(axis, 2)
            rshape = (*ishape[:axis + 1], 2, *ishape[axis + 1:])
            _same_as_hook("range_gather", gathers.range_gather, run, Array.empty(dt, rshape),
                          [index, x])
            for combine in S.Combine:
                if combine is S.Combine.ADD and dt is D.bool_:
                    continue
                spec = S.Scatter(axis, combine)
                ups = _random(rng, dt, ishape)
                _same_as_hook("scatter", gathers.scatter, spec, Array.empty(dt, shape),
                              [x, index, ups])
                _same_as_hook("scatter", gathers.scatter, spec, x, [x, index, ups], alias=0)
    # A strided operand: the hook itself, through the prepared entry.
    x, index = _strided(rng, dt, 6), _positions(rng, (5,), 6)
    _same_as_hook("gather", gathers.gather, S.Gather(0), Array.empty(dt, (5,)), [index, x])
    _same_as_hook("scatter", gathers.scatter, S.Scatter(0, S.Combine.SET),
                  Array.empty(dt, (6,)), [_random(rng, dt, (6,)), index, _strided(rng, dt, 5)])


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: d.name)
def test_prepared_assemble_gives_the_hooks_bits(dt: Dtype) -> None:
    rng = np.random.default_rng(dt.bits)
    fill = bytes(D.bytes(dt, 1)) if dt.bits >= 8 else b"\x01"
    pieces = [_random(rng, dt, (4,)), _random(rng, dt, (3,)), _strided(rng, dt, 2)]
    spec = S.Assemble((9,), fill, ((Range(0, 4, 1),), (Range(8, 3, -2),), (Range(3, 2, 1),)))
    _same_as_hook("assemble", gathers.assemble, spec, Array.empty(dt, (9,)), pieces)
    # The first piece is dst over the whole result; a later one lands in it.
    whole = S.Assemble((2, 4), fill, ((Range(0, 2, 1), Range(0, 4, 1)),
                                      (Range(1, 1, 1), Range(3, 2, -1))))
    dst = _random(rng, dt, (2, 4))
    _same_as_hook("assemble", gathers.assemble, whole, dst, [dst, _random(rng, dt, (1, 2))],
                  alias=0)


def test_moves_the_pool_would_share_take_the_hook_and_give_its_bits() -> None:
    rng = np.random.default_rng(5)
    n = pool.MIN_PARALLEL + 3
    x, index = _random(rng, D.float32, (n,)), _positions(rng, (n,), n)
    with threads(2):
        _same_as_hook("gather", gathers.gather, S.Gather(0), Array.empty(D.float32, (n,)),
                      [index, x])
        _same_as_hook("scatter", gathers.scatter, S.Scatter(0, S.Combine.ADD),
                      Array.empty(D.float32, (n,)), [x, index, _random(rng, D.float32, (n,))])


@pytest.mark.parametrize("dt", (D.float32, D.int4, D.complex128), ids=lambda d: d.name)
def test_the_callers_warm_moves_give_the_hooks_bits(dt: Dtype) -> None:
    rng = np.random.default_rng(7)
    x, index, ups = _random(rng, dt, (3, 6)), _positions(rng, (3, 6), 6), _random(rng, dt, (3, 6))
    for _ in range(3):  # cold, then warm on the plan's prepared hook
        want = Array.empty(dt, (3, 6))
        gathers.gather(S.Gather(1), [want], [index, x])
        assert _bits(nx.gather(x, index, 1)) == _bits(want)
        for combine in ("set", "add", "max", "min"):
            want = Array.empty(dt, (3, 6))
            gathers.scatter(S.Scatter(1, S.Combine[combine.upper()]), [want], [x, index, ups])
            assert _bits(nx.scatter(x, index, ups, 1, combine)) == _bits(want)
        taken = nx.take(x, [[5, -1], [0, 7]], 1)
        assert taken.shape == (3, 2, 2)
        want = Array.empty(dt, (3, 4))
        flat = Array.from_numpy(np.array([[5, -1, 0, 7]] * 3))
        gathers.gather(S.Gather(1), [want], [flat, x])
        assert np.array_equal(taken.to_numpy().reshape(3, 4), want.to_numpy())


def test_warm_signatures_still_refuse_what_does_not_fit_and_what_the_door_refuses() -> None:
    rng = np.random.default_rng(3)
    base = _random(rng, D.float32, (12,))
    x, index = Array(D.float32, Layout((8,), (1,), 0), base.buffer), _positions(rng, (8,), 8)
    # Elements 4 to 11 of x's buffer: sharing x's bytes, not x.
    shifted = Array(D.float32, Layout((8,), (1,), 4), base.buffer)
    narrow = Array.from_numpy(np.zeros(8, np.int32))
    dst = Array.empty(D.float32, (8,))
    for _ in range(2):
        assert library.gather(S.Gather(0), [dst], [index, x]) is Answer.DONE
        assert library.gather(S.Gather(0), [dst], [narrow, x]) is Answer.WRONG_DTYPE
        assert library.gather(S.Gather(0), [Array.empty(D.float32, (7,))],
                              [index, x]) is Answer.SHAPE_MISMATCH
        assert library.gather(S.Gather(0), [shifted], [index, x]) is Answer.OVERLAPPING
        with pytest.raises(InvalidArgument, match=r"nx\.gather: an operand's dtype is not one"):
            nx.gather(x, narrow, 0)
    dead = _random(rng, D.float32, (8,))
    assert library.gather(S.Gather(0), [dst], [index, dead]) is Answer.DONE
    dead.buffer.memory.epoch += 1  # consumed: the warm signature's door refuses it
    assert library.gather(S.Gather(0), [dst], [index, dead]) is Answer.DEAD_BUFFER

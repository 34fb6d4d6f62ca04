"""The host's prepared small-row kernels (``smallrows``): a warm Max, Min or
Arg reduction and a warm float Sum or Prod scan take one compiled call where
they are small, and give the bits of the kernel's general path and of the
contract's rule (Arg's first position; the odd/even network) on the same
operands; the calls they do not cover keep the general path."""

from __future__ import annotations

import math
import struct
from typing import Any

import numpy as np
import pytest

from nxkernel_core import dtype as D
from nxkernel_core import nx
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer, InvalidArgument
from nxkernel_core.array import Array
from nxkernel_core.caller import Hook, result_dtypes
from nxkernel_core.layout import Layout, Permute
from nxkernel_core.orders import odd_even_scan
from nxkernel_core.prog import Prog
from nxkernel_host import reduce as R
from nxkernel_host import scan as SC
from nxkernel_host.library import library
from tests.host.sweeps import sweep

MAX, MIN, SUM, PROD = S.Monoid.MAX, S.Monoid.MIN, S.Monoid.SUM, S.Monoid.PROD
ARGMAX, ARGMIN = S.Arg(S.Extreme.MAX), S.Arg(S.Extreme.MIN)


def bits(x: np.ndarray) -> bytes:
    return np.ascontiguousarray(x).tobytes()


def prepared(spec: Any, x: Array, shapes: list[tuple[int, ...]]) -> tuple[Hook | None, list[Array]]:
    """The host's prepared hook for ``spec`` on ``x`` and fresh destinations of ``shapes``."""
    dts = result_dtypes(spec, [x])
    hook = library.prepare(spec, tuple((d, Layout.c_contiguous(s)) for d, s in zip(dts, shapes, strict=True)),
                           ((x.dtype, x.layout),), x.device)
    return hook, [Array.empty(d, s) for d, s in zip(dts, shapes, strict=True)]


def both_paths(spec: Any, x: Array, shapes: list[tuple[int, ...]],
               small: str | None) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The destinations of the prepared hook (asserted the small one named
    ``small``, else the general one) and of the library's kernel method."""
    hook, warm = prepared(spec, x, shapes)
    assert hook is not None
    general = ("small", "reduce") if isinstance(spec, S.Reduce) else ("scan",)
    assert hook.__name__ == small if small else hook.__name__ in general, (hook, spec)
    _, cold = prepared(spec, x, shapes)
    with np.errstate(all="ignore"):
        hook(spec, warm, [x])
        assert getattr(library, spec.kernel)(spec, cold, [x]) is Answer.DONE
    return [w.to_numpy() for w in warm], [c.to_numpy() for c in cold]


# ---------------------------------------------------------------------------
# Extremes
# ---------------------------------------------------------------------------


def _key(v: Any) -> tuple[int, int]:
    """A term's place in Maximum's order as (is NaN, total-order integer)."""
    if isinstance(v, (float, np.floating)):
        if math.isnan(v):
            return (1, 0)
        (b,) = struct.unpack("<q", struct.pack("<d", float(v)))
        return (0, b ^ ((b >> 63) & 0x7FFFFFFFFFFFFFFF))
    return (0, int(v))


def first_extreme(row: np.ndarray, is_max: bool) -> int:
    """Arg's rule, term by term: the first NaN, else the first term with the
    greatest (least) key, −0 below +0."""
    best = 0
    for i, v in enumerate(row.tolist()):
        k, b = _key(v), _key(row[best].item())
        if k[0]:
            return i
        if (k > b) if is_max else (k < b):
            best = i
    return best


#: Each float dtype's signalling NaN with a payload, as unsigned bits.
_SNAN: dict[D.Dtype, int] = {D.float32: 0xFF800001, D.float64: 0x7FF0000000000003,
                             D.float16: 0x7C01, D.bfloat16: 0xFF81}


def extreme_data(dt: D.Dtype, shape: tuple[int, ...], case: int, rng: np.random.Generator) -> np.ndarray:
    t = dt.numpy_dtype
    n = math.prod(shape)
    if not dt.is_float:
        lo, hi = -(1 << (dt.bits - 1)), (1 << (dt.bits - 1)) - 1
        if case == 0:
            return rng.integers(lo, hi, shape, endpoint=True, dtype=t)
        x = rng.integers(-2, 3, shape).astype(t)  # ties
        x.reshape(-1)[rng.integers(0, n, 2)] = [lo, hi]
        return x
    w = rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)
    if case == 1:  # zeros of both signs, ties, infinities
        w = np.where(rng.random(n) < 0.5, -0.0, 0.0)
        w[rng.integers(0, n, 3)] = [np.inf, -np.inf, 1.0]
    elif case == 2:  # NaNs of several payloads, a signalling one among them
        w[rng.integers(0, n, 3)] = [np.nan, -np.nan, np.nan]
    elif case == 3:  # zeros, −0 at every third of the terms
        w[:] = 0.0
        w[:: max(1, n // 3)] = -0.0
    elif case == 4:  # each extreme twice, in later blocks of 256 where the row has them
        at = sorted(rng.choice(n, min(n, 4), replace=False) // 2 + n // 2)
        w[at] = [60000.0, -60000.0, 60000.0, -60000.0][:len(at)]
    x = w.astype(t)
    if case == 2:
        x.view(f"u{t.itemsize}")[rng.integers(0, n)] = _SNAN[dt]
    return x.reshape(shape)


@pytest.mark.parametrize("dt", [D.float32, D.float64, D.float16, D.bfloat16, D.int16, D.int32,
                                D.int64])
def test_small_extremes_give_the_general_paths_bits_and_args_rule(dt: D.Dtype) -> None:
    rng = np.random.default_rng(7)
    shapes = [(1,), (2,), (7,), (3, 1), (4, 33), (1000,), (16, 1024)]
    for shape in shapes:
        for case in range(5 if dt.is_float else 2):
            x = extreme_data(dt, shape, case, rng)
            a = Array.from_numpy(x)
            rows = x.reshape(-1, shape[-1])
            for red in (MAX, MIN, ARGMAX, ARGMIN):
                spec = S.Reduce(Prog.identity(dt), (S.PLAIN,), (len(shape) - 1,), ((red, 0, dt),))
                out = [shape[:-1]] * (2 if isinstance(red, S.Arg) else 1)
                warm, cold = both_paths(spec, a, out, "extreme")
                assert [bits(w) for w in warm] == [bits(c) for c in cold], (dt, shape, case, red)
                if shape[-1] * len(rows) > 4096:
                    continue  # the rule term by term in Python: the smaller shapes
                is_max = red is MAX or red == ARGMAX
                with np.errstate(invalid="ignore"):  # a signalling NaN quiets: still a NaN
                    terms = rows.astype(np.float64) if dt.is_float else rows  # exact
                want = np.array([first_extreme(r, is_max) for r in terms])
                assert bits(warm[0].reshape(-1)) == bits(rows[np.arange(len(rows)), want])
                if isinstance(red, S.Arg):
                    assert warm[1].reshape(-1).tolist() == want.tolist()


def test_other_extremes_keep_the_general_path() -> None:
    x = Array.from_numpy(np.arange(12, dtype=np.float32).reshape(3, 4))
    for spec in (S.Reduce(Prog.identity(D.float32), (S.PLAIN,), (0,), ((MAX, 0, D.float32),)),
                 S.Reduce(Prog.identity(D.float32), (S.PLAIN,), (1,), ((SUM, 0, D.float64),))):
        hook, _ = prepared(spec, x, [(4,) if spec.axes == (0,) else (3,)])
        assert hook is not None and hook.__name__ != "extreme"
    big = Array.from_numpy(np.zeros(R.EXTREME_TERMS + 1, np.float64))
    spec = S.Reduce(Prog.identity(D.float64), (S.PLAIN,), (0,), ((ARGMIN, 0, D.float64),))
    warm, cold = both_paths(spec, big, [(), ()], None)
    assert [bits(w) for w in warm] == [bits(c) for c in cold]
    for dt in (D.float8_e5m2, D.int8, D.uint16, D.bool_):
        spec = S.Reduce(Prog.identity(dt), (S.PLAIN,), (0,), ((MAX, 0, dt),))
        hook, _ = prepared(spec, Array.from_numpy(np.zeros(4, dt.numpy_dtype)), [()])
        assert hook is not None and hook.__name__ != "extreme"


# ---------------------------------------------------------------------------
# Scans
# ---------------------------------------------------------------------------


def network(states: np.ndarray, mul: bool) -> np.ndarray:
    """The contract's odd/even network over each row, a Sum from +0 (its
    first state +0 + term 0), every NaN result the positive quiet NaN."""
    op = np.multiply if mul else np.add
    s = states.copy()
    with np.errstate(all="ignore"):
        if not mul:
            s[:, 0] = s[:, 0] + s.dtype.type(0)
        (out,) = odd_even_scan((s,), lambda a, b: (op(a[0], b[0]),))
    out[np.isnan(out)] = np.nan
    return out


def scan_data(t: Any, shape: tuple[int, int], case: int, rng: np.random.Generator) -> np.ndarray:
    r, m = shape
    x = (rng.standard_normal((r, m)) * 10.0 ** rng.integers(-3, 4, (r, m))).astype(t)
    if case == 1:
        x[:, 0] = -0.0
        x[:, -1] = -0.0
    elif case == 2:
        x[:, rng.integers(0, m)] = np.nan
        x[:, rng.integers(0, m)] = np.inf
        x.view(np.uint32 if t == np.float32 else np.uint64)[0, m // 2] = (
            0x7F800001 if t == np.float32 else 0xFFF0000000000001)
    elif case == 3:  # products near 1: no overflow over long rows
        x = (1 + rng.standard_normal((r, m)) * 1e-3).astype(t)
        x[:, 0] = -0.0 if m > 1 else x[:, 0]
    return x


@pytest.mark.parametrize("dt", [D.float32, D.float64])
def test_small_scans_give_the_general_paths_bits_and_the_network(dt: D.Dtype) -> None:
    rng = np.random.default_rng(11)
    t = dt.numpy_dtype
    for shape in [(1, 1), (1, 2), (1, 3), (1, 4), (1, 5), (1, 8), (2, 15), (1, 17), (3, 100),
                  (1, 1025), (2, 4095), (1, SC.SMALL_SCAN)]:
        for case in range(4):
            x = scan_data(t, shape, case, rng)
            for red in (SUM, PROD):
                for reverse in (False, True):
                    if red is PROD and case == 0 and shape[1] > 100:
                        continue  # products of spread terms overflow: case 3's are near 1
                    a = Array.from_numpy(x if shape[0] > 1 else x[0])
                    axis = len(a.shape) - 1
                    spec = S.Scan(Prog.identity(dt), (S.PLAIN,), axis, red, 0, dt, reverse)
                    (warm,), (cold,) = both_paths(spec, a, [a.shape], "rows_scan")
                    assert bits(warm) == bits(cold), (shape, case, red, reverse)
                    if shape[1] > 5000 and case != 2:
                        continue  # the Python network: rows of every size up to 5000
                    rows = x[:, ::-1] if reverse else x
                    want = network(rows, red is PROD)
                    want = want[:, ::-1] if reverse else want
                    assert bits(warm) == bits(want.reshape(a.shape)), (shape, case, red, reverse)


@pytest.mark.parametrize("dt", [D.int8, D.uint8, D.int32, D.int64])
def test_integer_scans_give_the_general_paths_bits_and_wrap(dt: D.Dtype) -> None:
    rng = np.random.default_rng(5)
    lo, hi = (0, (1 << dt.bits) - 1) if dt is D.uint8 else (-(1 << (dt.bits - 1)), (1 << (dt.bits - 1)) - 1)
    x = rng.integers(lo, hi, (3, 40), endpoint=True, dtype=dt.numpy_dtype)
    for a in (Array.from_numpy(x), Array.from_numpy(x).view(Permute((1, 0)))):
        for axis in (0, 1):
            for red in (SUM, PROD):
                for reverse in (False, True):
                    spec = S.Scan(Prog.identity(dt), (S.PLAIN,), axis, red, 0, dt, reverse)
                    (warm,), (cold,) = both_paths(spec, a, [a.shape], "exact_scan")
                    assert bits(warm) == bits(cold), (a.shape, axis, red, reverse)
                    # The running sum or product of Python integers, wrapped.
                    y = np.moveaxis(a.to_numpy(), axis, -1).tolist()
                    want = []
                    for row in y:
                        acc, out = 0 if red is SUM else 1, []
                        for v in (row[::-1] if reverse else row):
                            acc = acc + v if red is SUM else acc * v
                            out.append((acc - lo) % (1 << dt.bits) + lo)
                        want.append(out[::-1] if reverse else out)
                    assert np.moveaxis(warm, axis, -1).tolist() == want


def test_other_scans_keep_the_general_path() -> None:
    x = np.arange(1, 13, dtype=np.float32).reshape(3, 4)
    a = Array.from_numpy(x)
    for spec, op in [
            (S.Scan(Prog.identity(D.float32), (S.PLAIN,), 0, SUM, 0, D.float32), a),
            (S.Scan(Prog.identity(D.float32), (S.PLAIN,), 1, MAX, 0, D.float32), a),
            (S.Scan(Prog.identity(D.float32), (S.PLAIN,), 1, SUM, 0, D.float64), a),
            (S.Scan(Prog.identity(D.float16), (S.PLAIN,), 1, SUM, 0, D.float16),
             Array.from_numpy(x.astype(np.float16))),
            (S.Scan(Prog.identity(D.float32), (S.PLAIN,), 0, SUM, 0, D.float32),
             a.view(Permute((1, 0))))]:
        hook, _ = prepared(spec, op, [op.shape])
        assert hook is SC.scan, spec
    carry = S.Scan(Prog.identity(D.float32), (S.PLAIN,), 1, SUM, 0, D.float32, False, True)
    hook = library.prepare(carry, ((D.float32, Layout.c_contiguous((3, 4))),),
                           ((D.float32, Layout.c_contiguous((3,))), (D.float32, a.layout)), a.device)
    assert hook is SC.scan
    for shape in [(SC.SMALL_SCAN + 1,), (SC.SMALL_SCAN // 64 + 1, 64)]:
        big = Array.from_numpy(np.ones(shape, np.float32))
        spec = S.Scan(Prog.identity(D.float32), (S.PLAIN,), len(shape) - 1, SUM, 0, D.float32)
        hook, _ = prepared(spec, big, [big.shape])
        assert hook is SC.scan


def test_warm_cumsum_takes_the_axes_a_cold_call_takes() -> None:
    x = nx.asarray(np.arange(1, 7, dtype=np.float32).reshape(2, 3))
    for _ in range(2):  # cold, then warm
        assert nx.cumsum(x, axis=-1).to_numpy().tolist() == [[1, 3, 6], [4, 9, 15]]
        assert nx.cumsum(x, axis=0).to_numpy().tolist() == [[1, 2, 3], [5, 7, 9]]
        assert nx.cumsum(x).to_numpy().tolist() == [1, 3, 6, 10, 15, 21]
        assert nx.cumsum(x.reshape([6])).to_numpy().tolist() == [1, 3, 6, 10, 15, 21]
        with pytest.raises(InvalidArgument, match=r"nx\.cumsum: axis 2 is out of range"):
            nx.cumsum(x, axis=2)
        with pytest.raises(InvalidArgument, match=r"nx\.cumsum: axis must be an integer"):
            nx.cumsum(x, axis=True)


@sweep
@pytest.mark.parametrize("dt", [D.float32, D.float64, D.float16, D.bfloat16, D.int16, D.int32,
                                D.int64])
def test_every_small_length_gives_the_general_paths_bits(dt: D.Dtype) -> None:
    """Rows of every length up to 5000 and around the thresholds, one and
    three rows, every data case: the small path against the general one."""
    rng = np.random.default_rng(13)
    lengths = [*range(1, 5001), *range(SC.SMALL_SCAN - 3, SC.SMALL_SCAN + 1),
               *range(R.EXTREME_TERMS - 3, R.EXTREME_TERMS + 1)]
    for n in lengths:
        for rows in (1, 3) if 3 * n <= R.EXTREME_TERMS else (1,):
            case = n % (5 if dt.is_float else 2)
            x = extreme_data(dt, (rows, n), case, rng)
            a = Array.from_numpy(x)
            for red in (MAX, MIN, ARGMAX, ARGMIN):
                spec = S.Reduce(Prog.identity(dt), (S.PLAIN,), (1,), ((red, 0, dt),))
                out: list[tuple[int, ...]] = [(rows,)] * (2 if isinstance(red, S.Arg) else 1)
                warm, cold = both_paths(spec, a, out, "extreme")
                assert [bits(w) for w in warm] == [bits(c) for c in cold], (n, rows, case, red)
            if dt not in (D.float32, D.float64) or rows * n > SC.SMALL_SCAN:
                continue
            for red, reverse in ((SUM, False), (SUM, True), (PROD, False), (PROD, True)):
                scan = S.Scan(Prog.identity(dt), (S.PLAIN,), 1, red, 0, dt, reverse)
                (swarm,), (scold,) = both_paths(scan, a, [a.shape], "rows_scan")
                assert bits(swarm) == bits(scold), (n, rows, case, red, reverse)

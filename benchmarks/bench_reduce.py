"""Host reduce, scan and a padded window sum against NumPy (and SciPy's
logsumexp), side by side in one process. The scans: cumsum against
``np.cumsum`` (float32 at 1e8 too, in full runs), the Logsumexp scan against
``np.logaddexp.accumulate``, the Moments scan (running mean and variance)
against NumPy's float64 cumulative sums of x and x².

Each case times our kernel (called on the host library directly, arrays and
destinations made beforehand) and NumPy's best equivalent, alternating, and
reports the medians and ``ratio = numpy_s / ours_s`` (above 1: ours is
faster). The last rows time the caller ``nx`` (``nx.sum``, ``nx.max``,
``nx.argmax``, ``nx.cumsum`` of 8 and 1000 elements, destinations allocated per
call) against NumPy's: the whole per-call overhead a user sees.
``python -m benchmarks.bench_reduce [--quick] [--json PATH]``.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.special

from benchmarks import timing
from nxkernel_core import dtype as D
from nxkernel_core import nx
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_core.kernel import Library
from nxkernel_core.layout import Window
from nxkernel_core.plugins import discover
from nxkernel_core.prog import Prog

#: The host library, as discovery finds it.
LIB: Library = discover().library("host")


def _reduce_call(a: Array, reductions: tuple[tuple[Any, int, D.Dtype], ...],
                 loads: tuple[S.Load, ...] = (S.PLAIN,), axes: tuple[int, ...] | None = None,
                 kept: tuple[int, ...] = ()) -> tuple[Callable[[], None], list[Array]]:
    """One reduce call on ``a`` into destinations made beforehand, and those
    destinations (read by the row's check)."""
    spec = S.Reduce(Prog.identity(a.dtype), loads, tuple(range(a.rank)) if axes is None else axes,
                    reductions)
    dsts = [Array.empty(dt, kept) for dt in spec.result_dtypes()]

    def call() -> None:
        assert LIB.reduce(spec, dsts, [a]) is Answer.DONE

    return call, dsts


def _scan_call(a: Array, red: Any) -> tuple[Callable[[], None], list[Array]]:
    """One scan call of ``a`` along its last axis into destinations made beforehand."""
    spec = S.Scan(Prog.identity(a.dtype), (S.PLAIN,), a.rank - 1, red, 0, a.dtype)
    dsts = [Array.empty(dt, a.shape) for dt in spec.result_dtypes()]

    def call() -> None:
        assert LIB.scan(spec, dsts, [a]) is Answer.DONE

    return call, dsts


def _moments_numpy(x: np.ndarray[Any, Any]) -> tuple[Any, Any]:
    """The running mean and variance the NumPy way: float64 cumulative sums of
    the terms and their squares, E[x²] − mean², rounded into x's dtype."""
    count = np.arange(1, x.size + 1, dtype=np.float64)
    mean = np.cumsum(x, dtype=np.float64) / count
    var = np.cumsum(np.square(x, dtype=np.float64)) / count - mean * mean
    return mean.astype(x.dtype), var.astype(x.dtype)


def _depths(n: int) -> np.ndarray[Any, Any]:
    """D(i) = max(1, 2⌈log₂(i + 1)⌉ − 1) for i < n: the network's depths (1 at 0)."""
    d: np.ndarray[Any, Any] = np.maximum(
        1, 2 * np.ceil(np.log2(np.arange(1, n + 1, dtype=np.float64))) - 1)
    return d


def _check_cumsum(what: str, x: np.ndarray[Any, Any], got: np.ndarray[Any, Any],
                  want: np.ndarray[Any, Any]) -> None:
    """Ours within γ(D(i))·Σ|x| (the network's depth) plus the rounding into
    the destination, NumPy's within its sequential γ(i)·Σ|x|, both of a
    float64 sum of the terms, in blocks (1e8 terms fit no float64 copies)."""
    u = float(np.finfo(x.dtype).eps) / 2
    step = 1 << 22
    total = absolute = 0.0
    for lo in range(0, x.size, step):
        part = x[lo:lo + step].astype(np.float64)
        ref = total + np.cumsum(part)
        mag = absolute + np.cumsum(np.abs(part))
        total, absolute = float(ref[-1]), float(mag[-1])
        i = np.arange(lo, lo + part.size, dtype=np.float64)
        d = _depths(lo + part.size)[lo:]
        slack = timing.gamma(x.size, np.float64) * mag
        timing.check_within(what + " (ours and a float64 sum)", got[lo:lo + step], ref,
                            d * u / (1 - d * u) * mag + u * np.abs(ref) + slack)
        with np.errstate(divide="ignore", invalid="ignore"):
            # γ(i), infinite from i·u ≥ 1 on: a float32 sum of 1e8 terms has
            # no bound to check NumPy's against.
            seq = np.where(i * u < 1, i * u / (1 - i * u), np.inf) * mag
        timing.check_within(what + " (NumPy and a float64 sum)", want[lo:lo + step], ref,
                            seq + slack)


def _check_lse_scan(what: str, x: np.ndarray[Any, Any], got: np.ndarray[Any, Any],
                    want: np.ndarray[Any, Any]) -> None:
    """Ours within the host's stated D(i)·(2B + 3)·2⁻⁵³ (B the largest |term| so
    far plus log(i + 1)) and the rounding into the destination; NumPy's
    sequential logaddexp within 4 roundings of its dtype per step, an error
    that later steps do not amplify (∂lse/∂s ≤ 1)."""
    u = float(np.finfo(x.dtype).eps) / 2
    i = np.arange(x.size, dtype=np.float64)
    big = np.maximum.accumulate(np.abs(x.astype(np.float64))) + np.log(i + 1)
    ours = _depths(x.size) * (2 * big + 3) * 2.0**-53 + u * np.abs(want.astype(np.float64))
    timing.check_within(what, got, want, ours + 4 * u * (i + 1) * (big + 1))


def _check_moments_scan(what: str, x: np.ndarray[Any, Any], got: list[np.ndarray[Any, Any]],
                        want: tuple[Any, Any]) -> None:
    """Mean and variance: ours within the host's stated bounds in D(i), NumPy's
    float64 sums within γ(i + 1) of Σ|x| and Σx², both rounded once into the
    destination's dtype."""
    u = float(np.finfo(x.dtype).eps) / 2
    u64 = 2.0**-53
    wide = x.astype(np.float64)
    count = np.arange(1, x.size + 1, dtype=np.float64)
    d = _depths(x.size)
    big = np.maximum.accumulate(np.abs(wide))
    g = count * u64 / (1 - count * u64)
    mean_abs, mean_sq = np.cumsum(np.abs(wide)) / count, np.cumsum(wide * wide) / count
    m, v = (np.abs(w.astype(np.float64)) for w in want)
    timing.check_within(what + " (mean)", got[0], want[0],
                        7 * d * u64 * big + g * mean_abs + 2 * u * m)
    timing.check_within(what + " (variance)", got[1], want[1],
                        d * u64 * (6 * v + 10 * np.sqrt(d) * big * np.sqrt(v))
                        + 2 * g * (mean_sq + mean_abs**2) + 2 * u * v)


def _pool_numpy(x: np.ndarray[Any, Any]) -> Callable[[], np.ndarray[Any, Any]]:
    """A 3×3 window sum of ``x`` padded by one zero: the padded copy, then nine
    shifted in-place adds (NumPy's fastest equivalent)."""
    h, w = x.shape

    def call() -> np.ndarray[Any, Any]:
        p = np.pad(x, 1)
        out = p[0:h, 0:w].copy()
        for i in range(3):
            for j in range(3):
                if i or j:
                    out += p[i:i + h, j:j + w]
        return out

    return call


def _argmax_and_max(x: np.ndarray[Any, Any]) -> tuple[Any, Any]:
    """Arg's two results the NumPy way: the value at the position, then the position."""
    i = np.argmax(x)
    return x[i], i


def _mean_var(x: np.ndarray[Any, Any]) -> tuple[Any, Any]:
    return np.mean(x), np.var(x)


def _check(name: str, x: np.ndarray[Any, Any], dsts: list[Array], call: Callable[[], None],
           theirs: Callable[[], Any]) -> timing.Check:
    """The row's check: one call of each, compared as the contract fixes
    them: Max and Arg bit for bit;
    Sum and the pool within γ(n − 1)·Σ|x| for each side (n the terms); the
    scans each side against a float64 reference or within both sides' bounds
    (``_check_cumsum`` and the others); Logsumexp within the host's stated
    bound plus SciPy's few ulps; Moments within their stated bounds plus
    NumPy's pairwise γ(n)."""
    what = f"bench_reduce: {name}: nxkernel and NumPy"

    def check() -> None:
        call()
        got = [d.to_numpy() for d in dsts]
        want = theirs()
        n = x.size
        wide = x.astype(np.float64)
        if name == "max":
            timing.check_bits(what, got[0], np.asarray(want, got[0].dtype))
        elif name == "argmax":
            timing.check_bits(what, got[0], np.asarray(want[0], got[0].dtype))
            timing.check_bits(what, got[1], np.asarray(want[1], np.int64))
        elif name == "sum":
            timing.check_within(what, got[0], want,
                                2 * timing.gamma(n, x.dtype) * float(np.sum(np.abs(wide))))
        elif name == "cumsum":
            _check_cumsum(what, x, got[0], want)
        elif name == "logsumexp scan":
            _check_lse_scan(what, x, got[0], want)
        elif name == "moments scan":
            _check_moments_scan(what, x, got, want)
        elif name == "pool3x3":
            timing.check_within(what, got[0], want, 2 * timing.gamma(9, x.dtype) * 9 * np.max(np.abs(wide)))
        elif name == "logsumexp":
            b, u = float(np.max(np.abs(wide))), float(np.finfo(x.dtype).eps) / 2
            bound = (2 * b + 9) * u + (n + 2 * b + 3 * np.log(n) + 3) * 2.0**-53 + 8 * u * abs(want)
            timing.check_within(what, got[0], want, bound)
        elif name == "mean+var":
            delta = timing.gamma(n, np.float64) * float(np.sum(np.abs(wide))) / n
            ours_mean = delta + float(np.finfo(x.dtype).eps) * abs(float(want[0]))
            peer = timing.gamma(n, x.dtype) * float(np.sum(np.abs(wide))) / n
            timing.check_within(what, got[0], want[0], ours_mean + peer)
            var_bound = (timing.gamma(n + 3, np.float64) * float(want[1]) + 2 * delta**2
                         + float(np.finfo(x.dtype).eps) * float(want[1])
                         + 2 * timing.gamma(n, x.dtype) * float(np.max(wide**2)))
            timing.check_within(what, got[1], want[1], var_bound)
        else:
            raise ValueError(f"bench_reduce: no check for {name!r}")

    return check


def run(quick: bool) -> list[dict[str, Any]]:
    """The benchmark rows: name, size, dtype, ours_s, numpy_s, ratio."""
    rng = np.random.default_rng(0)
    sizes = [10**6] if quick else [10**6, 10**7]
    repeats = 5 if quick else 11
    rows: list[dict[str, Any]] = []
    for n in sizes:
        for dt in (D.float32, D.float64):
            x = rng.standard_normal(n).astype(dt.numpy_dtype)
            a = Array.from_numpy(x)
            cases: list[tuple[str, tuple[Callable[[], None], list[Array]], Callable[[], Any],
                              np.ndarray[Any, Any]]] = [
                ("sum", _reduce_call(a, ((S.Monoid.SUM, 0, dt),)), functools.partial(np.sum, x), x),
                ("max", _reduce_call(a, ((S.Monoid.MAX, 0, dt),)), functools.partial(np.max, x), x),
                ("argmax", _reduce_call(a, ((S.Arg(S.Extreme.MAX), 0, dt),)),
                 functools.partial(_argmax_and_max, x), x),
                ("logsumexp", _reduce_call(a, ((S.LOGSUMEXP, 0, dt),)),
                 functools.partial(scipy.special.logsumexp, x), x),
                ("mean+var", _reduce_call(a, ((S.MOMENTS, 0, dt),)),
                 functools.partial(_mean_var, x), x),
                ("cumsum", _scan_call(a, S.Monoid.SUM), functools.partial(np.cumsum, x), x),
                ("logsumexp scan", _scan_call(a, S.LOGSUMEXP),
                 functools.partial(np.logaddexp.accumulate, x), x),
                ("moments scan", _scan_call(a, S.MOMENTS), functools.partial(_moments_numpy, x), x),
            ]
            side = round(n**0.5)
            img = rng.standard_normal((side, side)).astype(dt.numpy_dtype)
            pad = S.Pad((1, 1), (1, 1), (0, 0), (Window(0, 3), Window(1, 3)))
            load = S.Padded(np.zeros((), dt.numpy_dtype).tobytes(), pad)
            cases.append(("pool3x3", _reduce_call(Array.from_numpy(img),
                                                  ((S.Monoid.SUM, 0, dt),), (load,), (2, 3),
                                                  (side, side)), _pool_numpy(img), img))
            rows += [timing.row(name, n, dt.name, call, theirs, repeats,
                                check=_check(name, data, dsts, call, theirs))
                     for name, (call, dsts), theirs, data in cases]
    if not quick:
        rows.append(_cumsum_row(rng, 10**8, 5))
    return rows + overhead_rows(repeats * 40)


def _cumsum_row(rng: np.random.Generator, n: int, repeats: int) -> dict[str, Any]:
    """The float32 cumsum row at ``n`` terms alone (1e8: 400 MB an array)."""
    x = rng.standard_normal(n).astype(np.float32)
    call, dsts = _scan_call(Array.from_numpy(x), S.Monoid.SUM)
    theirs = functools.partial(np.cumsum, x)
    return timing.row("cumsum", n, "float32", call, theirs, repeats,
                      check=_check("cumsum", x, dsts, call, theirs))


def overhead_rows(repeats: int) -> list[dict[str, Any]]:
    """``nx.sum``, ``nx.max``, ``nx.argmax`` and ``nx.cumsum`` of 8 and 1000
    float32 elements against NumPy's: the caller's whole per-call cost. Max
    and argmax are checked bit for bit, the sums within float32 roundings of
    NumPy's (their orders differ), before timing."""
    rng = np.random.default_rng(1)
    rows = []
    for n in (8, 1000):
        x = rng.standard_normal(n).astype(np.float32)
        a = Array.from_numpy(x)
        eps = float(np.finfo(np.float32).eps)
        cases: list[tuple[str, Callable[[], Any], Callable[[], Any], float | None]] = [
            ("nx.sum (call overhead)", functools.partial(nx.sum, a),
             functools.partial(np.sum, x), n * eps),
            ("nx.max (call overhead)", functools.partial(nx.max, a),
             functools.partial(np.max, x), None),
            ("nx.argmax (call overhead)", functools.partial(nx.argmax, a),
             functools.partial(np.argmax, x), None),
            ("nx.cumsum (call overhead)", functools.partial(nx.cumsum, a),
             functools.partial(np.cumsum, x), n * eps),
        ]
        for name, ours, theirs, rel in cases:
            what = f"bench_reduce: {name.split()[0]}: nxkernel and NumPy"

            def check(ours: Callable[[], Any] = ours, theirs: Callable[[], Any] = theirs,
                      rel: float | None = rel, what: str = what, x: np.ndarray[Any, Any] = x) -> None:
                got, want = np.asarray(ours().to_numpy()), np.asarray(theirs())
                if rel is None:
                    timing.check_bits(what, got, want.astype(got.dtype))
                else:
                    # |x| summed bounds every partial sum, so the error bound is
                    # relative to it, not to the (possibly cancelling) result.
                    timing.check_within(what, got, want, rel * float(np.sum(np.abs(x), dtype=np.float64)))

            rows.append(timing.row(name, n, "float32", ours, theirs, repeats, check=check))
    return rows


if __name__ == "__main__":
    sys.exit(timing.main(run, __doc__, "1e6 elements, fewer repeats"))

"""Host reduce, scan and a padded window sum against NumPy (and SciPy's
logsumexp), side by side in one process.

Each case times our kernel (called on the host library directly, arrays and
destinations made beforehand) and NumPy's best equivalent, alternating, and
reports the medians and ``ratio = numpy_s / ours_s`` (above 1: ours is
faster). ``python benchmarks/bench_reduce.py [--quick] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.special

from nxkernel_core import dtype as D
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_core.kernel import Library, check_library
from nxkernel_core.layout import Window
from nxkernel_core.prog import Prog
from nxkernel_host.library import library

LIB: Library = check_library(library)


def _median(f: Callable[[], Any], g: Callable[[], Any], repeats: int) -> tuple[float, float]:
    """Medians of ``repeats`` alternating timings of ``f`` and ``g`` (one warm-up
    each first)."""
    f()
    g()
    tf, tg = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        tf.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        g()
        tg.append(time.perf_counter() - t0)
    return statistics.median(tf), statistics.median(tg)


def _reduce_call(a: Array, reductions: tuple[tuple[Any, int, D.Dtype], ...],
                 loads: tuple[S.Load, ...] = (S.PLAIN,), axes: tuple[int, ...] | None = None,
                 kept: tuple[int, ...] = ()) -> Callable[[], None]:
    spec = S.Reduce(Prog.identity(a.dtype), loads, tuple(range(a.rank)) if axes is None else axes,
                    reductions)
    dsts = [Array.empty(dt, kept) for dt in spec.result_dtypes()]

    def call() -> None:
        assert LIB.reduce(spec, dsts, [a]) is Answer.DONE

    return call


def _cumsum_call(a: Array) -> Callable[[], None]:
    spec = S.Scan(Prog.identity(a.dtype), (S.PLAIN,), a.rank - 1, S.Monoid.SUM, 0, a.dtype)
    dst = Array.empty(a.dtype, a.shape)

    def call() -> None:
        assert LIB.scan(spec, [dst], [a]) is Answer.DONE

    return call


def _pool_numpy(x: np.ndarray) -> Callable[[], None]:
    """A 3×3 window sum of ``x`` padded by one zero: the padded copy, then nine
    shifted in-place adds (NumPy's fastest equivalent)."""
    h, w = x.shape

    def call() -> None:
        p = np.pad(x, 1)
        out = p[0:h, 0:w].copy()
        for i in range(3):
            for j in range(3):
                if i or j:
                    out += p[i:i + h, j:j + w]

    return call


def _argmax_and_max(x: np.ndarray) -> tuple[Any, Any]:
    """Arg's two results the NumPy way: the position, then the value there."""
    i = np.argmax(x)
    return i, x[i]


def _mean_var(x: np.ndarray) -> tuple[Any, Any]:
    return np.mean(x), np.var(x)


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
            cases: list[tuple[str, Callable[[], None], Callable[[], Any]]] = [
                ("sum", _reduce_call(a, ((S.Monoid.SUM, 0, dt),)), functools.partial(np.sum, x)),
                ("max", _reduce_call(a, ((S.Monoid.MAX, 0, dt),)), functools.partial(np.max, x)),
                ("argmax", _reduce_call(a, ((S.Arg(S.Extreme.MAX), 0, dt),)),
                 functools.partial(_argmax_and_max, x)),
                ("logsumexp", _reduce_call(a, ((S.LOGSUMEXP, 0, dt),)),
                 functools.partial(scipy.special.logsumexp, x)),
                ("mean+var", _reduce_call(a, ((S.MOMENTS, 0, dt),)),
                 functools.partial(_mean_var, x)),
                ("cumsum", _cumsum_call(a), functools.partial(np.cumsum, x)),
            ]
            side = round(n**0.5)
            img = rng.standard_normal((side, side)).astype(dt.numpy_dtype)
            pad = S.Pad((1, 1), (1, 1), (0, 0), (Window(0, 3), Window(1, 3)))
            load = S.Padded(np.zeros((), dt.numpy_dtype).tobytes(), pad)
            cases.append(("pool3x3", _reduce_call(Array.from_numpy(img),
                                                  ((S.Monoid.SUM, 0, dt),), (load,), (2, 3),
                                                  (side, side)), _pool_numpy(img)))
            for name, ours, theirs in cases:
                t_ours, t_np = _median(ours, theirs, repeats)
                rows.append({"name": name, "size": n, "dtype": dt.name, "ours_s": t_ours,
                             "numpy_s": t_np, "ratio": t_np / t_ours})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1e6 elements, fewer repeats")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args(argv)
    rows = run(args.quick)
    print(f"{'case':<10} {'size':>9} {'dtype':<8} {'ours ms':>9} {'numpy ms':>9} {'ratio':>6}")
    for r in rows:
        print(f"{r['name']:<10} {r['size']:>9} {r['dtype']:<8} {r['ours_s'] * 1e3:>9.3f} "
              f"{r['numpy_s'] * 1e3:>9.3f} {r['ratio']:>6.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""nx.cuda on cuda:0 against CuPy's own kernels, side by side in one process.

Cases: a fused map (``a*b + c``), a float32 sum, a logsumexp, a cumsum, a
stable sort (values and positions), a gather with random positions, at 1e6
and 1e7 float32 elements (1e6 alone where ``quick``). Each case calls the library's kernel directly
(arrays, destinations and descriptors made beforehand), then CuPy's best
equivalent, alternating, each followed by a synchronisation of its stream, and
reports the medians and ``ratio = cupy_s / ours_s`` (above 1: ours is faster)
in ``numpy_s``, the runner's reference column. Every case first checks that
both give the same values (bits for the moves, a relative 1e-5 for the float
sums), so a run on a lent GPU is also a smoke test of the kernels there.

Without a usable GPU (no CuPy, no driver, no device) ``run`` prints why and
returns no rows. ``python -m benchmarks.bench_cuda [--quick] [--json PATH]``.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from benchmarks import timing
from nxkernel_core import dtype as D
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_core.prog import In, Prog

#: The library these benchmarks measure (the runner's ``python -m benchmarks.run cuda``).
LIBRARY = "cuda"


def _cases(dev: Any, n: int, repeats: int) -> list[dict[str, Any]]:
    lib = timing.cuda_library()
    import cupy as cp

    rng = np.random.default_rng(n)
    a, b, c = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    ga, gb, gc = (Array.from_numpy(v, dev) for v in (a, b, c))
    ca, cb, cc = (cp.asarray(v) for v in (a, b, c))

    def sync_ours() -> None:
        dev.synchronize()

    def sync_cupy() -> None:
        cp.cuda.get_current_stream().synchronize()

    rows = []

    # map: a*b + c, one fused kernel against CuPy's two.
    bld = Prog.build([D.float32] * 3)
    x, y, z = bld.ins
    fused = bld.finish(x * y + z)
    out = Array.empty(D.float32, (n,), dev)
    spec_map = S.Map(fused, (S.PLAIN,) * 3)

    def ours_map() -> None:
        assert lib.map(spec_map, [out], [ga, gb, gc]) is Answer.DONE
        sync_ours()

    def cupy_map() -> Any:
        r = ca * cb + cc
        sync_cupy()
        return r

    def check_map() -> None:
        ours_map()
        timing.check_bits("bench_cuda: map: nx.cuda and CuPy", out.to_numpy(), cp.asnumpy(cupy_map()))

    rows.append(timing.row("map a*b+c vs cupy", n, "float32", ours_map, cupy_map, repeats, check=check_map))

    # sum, in lane order.
    ident = Prog([D.float32], [In(0)], [0])
    total = Array.empty(D.float32, (), dev)
    spec_sum = S.Reduce(ident, (S.PLAIN,), (0,), ((S.Monoid.SUM, 0, D.float32),))

    def ours_sum() -> None:
        assert lib.reduce(spec_sum, [total], [ga]) is Answer.DONE
        sync_ours()

    def cupy_sum() -> Any:
        r = cp.sum(ca)
        sync_cupy()
        return r

    def check_sum() -> None:
        ours_sum()
        timing.check_close("bench_cuda: sum: nx.cuda and CuPy",
                           total.to_numpy(), cp.asnumpy(cupy_sum()), 1e-5, rtol=1e-5)

    rows.append(timing.row("sum vs cupy", n, "float32", ours_sum, cupy_sum, repeats, check=check_sum))

    # logsumexp: the maximum, then Σ exp(x − m) in float64 lane order (CuPy: the
    # same two passes as its own kernels, max then log(sum(exp(x − m))) + m).
    lse = Array.empty(D.float32, (), dev)
    spec_lse = S.Reduce(ident, (S.PLAIN,), (0,), ((S.Logsumexp(), 0, D.float32),))

    def ours_lse() -> None:
        assert lib.reduce(spec_lse, [lse], [ga]) is Answer.DONE
        sync_ours()

    def cupy_lse() -> Any:
        m = cp.max(ca)
        r = cp.log(cp.sum(cp.exp(ca - m))) + m
        sync_cupy()
        return r

    def check_lse() -> None:
        ours_lse()
        timing.check_close("bench_cuda: logsumexp: nx.cuda and CuPy",
                           lse.to_numpy(), cp.asnumpy(cupy_lse()), 1e-5, rtol=1e-5)

    rows.append(timing.row("logsumexp vs cupy", n, "float32", ours_lse, cupy_lse, repeats, check=check_lse))

    # cumsum, by the odd/even network.
    scanned = Array.empty(D.float32, (n,), dev)
    spec_scan = S.Scan(ident, (S.PLAIN,), 0, S.Monoid.SUM, 0, D.float32)

    def ours_scan() -> None:
        assert lib.scan(spec_scan, [scanned], [ga]) is Answer.DONE
        sync_ours()

    def cupy_scan() -> Any:
        r = cp.cumsum(ca)
        sync_cupy()
        return r

    def check_scan() -> None:
        ours_scan()
        timing.check_close("bench_cuda: cumsum: nx.cuda and CuPy",
                           scanned.to_numpy(), cp.asnumpy(cupy_scan()), 1e-5, rtol=1e-5)

    rows.append(timing.row("cumsum vs cupy", n, "float32", ours_scan, cupy_scan, repeats, check=check_scan))

    # a stable sort: values and positions (CuPy: a stable argsort, then a take).
    values = Array.empty(D.float32, (n,), dev)
    positions = Array.empty(D.int64, (n,), dev)
    spec_sort = S.Sort(0)

    def ours_sort() -> None:
        assert lib.sort(spec_sort, [values, positions], [ga]) is Answer.DONE
        sync_ours()

    def cupy_sort() -> Any:
        order = cp.argsort(ca)
        r = (ca[order], order)
        sync_cupy()
        return r

    def check_sort() -> None:
        ours_sort()
        cv, cpos = cupy_sort()
        timing.check_bits("bench_cuda: sort values: nx.cuda and CuPy", values.to_numpy(), cp.asnumpy(cv))
        timing.check_bits("bench_cuda: sort positions: nx.cuda and CuPy",
                          positions.to_numpy(), cp.asnumpy(cpos).astype(np.int64))

    rows.append(timing.row("sort (values, positions) vs cupy", n, "float32", ours_sort, cupy_sort, repeats,
                           check=check_sort))

    # gather at random positions.
    index = rng.integers(0, n, size=n).astype(np.int64)
    gi, ci = Array.from_numpy(index, dev), cp.asarray(index)
    taken = Array.empty(D.float32, (n,), dev)

    def ours_gather() -> None:
        assert lib.gather(S.Gather(0), [taken], [gi, ga]) is Answer.DONE
        sync_ours()

    def cupy_gather() -> Any:
        r = cp.take(ca, ci)
        sync_cupy()
        return r

    def check_gather() -> None:
        ours_gather()
        timing.check_bits("bench_cuda: gather: nx.cuda and CuPy", taken.to_numpy(), cp.asnumpy(cupy_gather()))

    rows.append(timing.row("gather (random) vs cupy", n, "float32", ours_gather, cupy_gather, repeats,
                           check=check_gather))
    return rows


def run(quick: bool) -> list[dict[str, Any]]:
    """The rows of every case at every size; none (with the reason printed)
    where no CUDA GPU is usable."""
    dev = timing.cuda_device("bench_cuda")
    if dev is None:
        return []
    sizes = (10**6,) if quick else (10**6, 10**7)
    rows: list[dict[str, Any]] = []
    for n in sizes:
        rows += _cases(dev, n, repeats=5 if quick else 20)
    return rows


if __name__ == "__main__":
    sys.exit(timing.main(run, __doc__, "1e6 elements only, fewer repeats"))

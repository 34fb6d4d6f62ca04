"""Host attention against PyTorch's ``scaled_dot_product_attention`` (CPU) and a
textbook NumPy version, side by side in one process.

Cases: B = 1, H = 8, T = 1024 and 4096, d = 64 and 128, float32, causal and
not, grouped (hq = 8, hk = 2) and paged (page 16); decoding (one query row
per head against T = 4096 keys, grouped heads hq = 32, hk = 8, d = 64); on one
and two threads
(``nxkernel_host.threads`` for ours, ``torch.set_num_threads`` for PyTorch; the
textbook version's BLAS pinned to one thread for the one-thread rows). Each
row times ours, NumPy's and PyTorch's alternately, each call once the
process's other threads are quiet, and keeps the best of the repeats:
one-thread rows by the calling thread's CPU time (all three run on it, so
other processes' load does not count), two-thread rows by wall time;
reporting ``ratio = numpy_s / ours_s`` and ``ratio_torch =
torch_s / ours_s`` (above 1: ours is faster). The one-thread rows of
full and causal attention also give the peak bytes ours and the textbook
version allocate (``tracemalloc``, which sees NumPy's buffers). Without
PyTorch installed the PyTorch columns are ``None``, with a printed note.
``python -m benchmarks.bench_attention [--quick] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import math
import sys
import time
import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

import nxkernel_host
from benchmarks.machine import Watch
from benchmarks.timing import check_within, failed_row, gamma, quiet
from nxkernel_core import dtype as D
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_core.kernel import Library, check_library
from nxkernel_core.plugins import discover
from nxkernel_core.prog import Prog

#: The host library, through discovery.
LIB: Library = check_library(discover().library("host"))
Arr = np.ndarray[Any, Any]



def _optional(name: str) -> Any:
    """Module ``name``, or None where it is not installed."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


#: PyTorch, a benchmark-only comparator: None where it is not installed.
torch: Any = _optional("torch")
F: Any = _optional("torch.nn.functional") if torch is not None else None


def _best(fns: list[Callable[[], Any]], repeats: int, clock: Callable[[], float]
          ) -> list[float]:
    """Best of ``repeats`` alternating timings of each function by ``clock``
    (one warm-up each), each timed call started once the process's other
    threads are quiet (``timing.quiet``): the textbook version's OpenBLAS
    workers spin for about 0.1 s after its products, PyTorch's OpenMP
    workers for a while too, and a call timed right after would share the
    cores with them."""
    for f in fns:
        f()
    best = [math.inf] * len(fns)
    for _ in range(repeats):
        for i, f in enumerate(fns):
            quiet()
            t0 = clock()
            f()
            best[i] = min(best[i], clock() - t0)
    return best


def _peak(f: Callable[[], Any]) -> int:
    """The most bytes ``f`` holds allocated at once (tracemalloc)."""
    tracemalloc.start()
    try:
        f()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@contextlib.contextmanager
def _threads(n: int) -> Iterator[None]:
    """Ours on n threads, PyTorch's intra-op pool on n, and NumPy's BLAS (the
    textbook version's) on n."""
    from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

    torch_previous = torch.get_num_threads() if torch is not None else 0
    if torch is not None:
        torch.set_num_threads(n)
    try:
        with threadpool_limits(n, user_api="blas"), nxkernel_host.threads(n):
            yield
    finally:
        if torch is not None:
            torch.set_num_threads(torch_previous)


def _program(causal: bool) -> Prog:
    """Output 0 causal (key ≤ row; Coord 0 the key, Coord 1 the row) or true;
    output 1 the score."""
    b = Prog.build([D.float32])
    vis = b.less_equal(b.coord(0), b.coord(1)) if causal else b.const(D.bool_, True)
    return b.finish(vis, b.copy(b.ins[0]))


def _textbook(q: Arr, k: Arr, v: Arr, scale: float, causal: bool) -> tuple[Arr, Arr]:
    """softmax(scale·q·kᵀ [masked])·v and its log-sum-exp, the whole [T, T] at once."""
    group = q.shape[-3] // k.shape[-3]
    if group > 1:
        k, v = np.repeat(k, group, axis=-3), np.repeat(v, group, axis=-3)
    s = (q @ np.swapaxes(k, -1, -2)) * np.float32(scale)
    if causal:
        tq, tk = s.shape[-2:]
        s = np.where(np.tri(tq, tk, dtype=bool), s, np.float32(-np.inf))
    m = s.max(axis=-1, keepdims=True)
    e = np.exp(s - m)
    total = e.sum(axis=-1, keepdims=True)
    return (e / total) @ v, (m + np.log(total))[..., 0]


def _check(name: str, ours: Callable[[], None], o: Array, lse: Array,
           textbook: Callable[[], tuple[Arr, Arr]], q: Arr, k: Arr, v: Arr, scale: float) -> None:
    """Ours against the textbook version before timing: each o element within
    both sides' weight and sum errors (the host's stated ε and e(tk), to first
    order: (4b + 2 ln tk + 16)·u + 2γ(tk), relative to max|v|), each lse
    within (4b + 2 ln tk + 16)·u·max(1, |lse|); b bounds the scores."""
    ours()
    want_o, want_lse = textbook()
    tk = k.shape[-2]
    b = scale * float(np.max(np.linalg.norm(q, axis=-1))) * float(np.max(np.linalg.norm(k, axis=-1)))
    u = float(np.finfo(np.float32).eps) / 2
    weights = (4 * b + 2 * math.log(tk) + 16) * u
    what = f"bench_attention: {name}: nxkernel and the textbook version"
    check_within(what, o.to_numpy(), want_o, (weights + 2 * gamma(tk, np.float32))
                 * float(np.max(np.abs(v))))
    check_within(what, lse.to_numpy(), want_lse, weights * np.maximum(1.0, np.abs(want_lse)))


def _case(t: int, d: int, causal: bool, hk: int, page: int | None, threads: int,
          repeats: int, peak: bool, hq: int = 8, tq: int | None = None) -> dict[str, Any]:
    """One row: hq query heads of tq rows (t where None) against t keys."""
    rng = np.random.default_rng(0)
    rows = t if tq is None else tq
    q = rng.standard_normal((1, hq, rows, d), dtype=np.float32)
    k = rng.standard_normal((1, hk, t, d), dtype=np.float32)
    v = rng.standard_normal((1, hk, t, d), dtype=np.float32)
    scale = 1 / math.sqrt(d)
    prog = _program(causal)
    if page is None:
        spec = S.Attention(prog, (), scale, D.float32, S.Dense())
        operands = [Array.from_numpy(x) for x in (q, k, v)]
    else:
        # The pools hold the keys page by page in a shuffled order.
        n = t // page
        order = rng.permutation(n)
        k_pool = np.empty((n, hk, page, d), np.float32)
        v_pool = np.empty((n, hk, page, d), np.float32)
        k_pool[order] = k[0].reshape(hk, n, page, d).transpose(1, 0, 2, 3)
        v_pool[order] = v[0].reshape(hk, n, page, d).transpose(1, 0, 2, 3)
        table = order[None, :].astype(np.int64)
        spec = S.Attention(prog, (), scale, D.float32, S.Paged(page))
        operands = [Array.from_numpy(x) for x in (q, k_pool, v_pool, table)]
    o = Array.empty(D.float32, (1, hq, rows, d))
    lse = Array.empty(D.float32, (1, hq, rows))

    def ours() -> None:
        assert LIB.attention(spec, [o, lse], operands) is Answer.DONE

    def gather(pool: Arr, table: Arr) -> Arr:
        keys: Arr = pool[table[0]].transpose(1, 0, 2, 3).reshape(1, hk, t, d)
        return keys

    if page is None:
        def textbook() -> tuple[Arr, Arr]:
            return _textbook(q, k, v, scale, causal)
    else:
        def textbook() -> tuple[Arr, Arr]:
            return _textbook(q, gather(k_pool, table), gather(v_pool, table), scale, causal)

    kind = ("decode" if tq is not None else "causal" if causal else "full") + (
        f" gqa{hq}/{hk}" if hk != hq else "") + (f" paged{page}" if page else "")
    name, size = f"attention {kind} d{d} {threads}t", f"T={t}"
    try:
        _check(name, ours, o, lse, textbook, q, k, v, scale)
    except AssertionError as err:
        return failed_row(name, size, "float32", str(err))

    fns: list[Callable[[], Any]] = [ours, textbook]
    if torch is not None:
        tq_, tk_, tv_ = (torch.from_numpy(x) for x in (q, k, v))
        if page is None:
            def sdpa() -> None:
                F.scaled_dot_product_attention(tq_, tk_, tv_, is_causal=causal,
                                               enable_gqa=hk != hq)
        else:
            kp_, vp_, tb_ = (torch.from_numpy(x) for x in (k_pool, v_pool, table))

            def sdpa() -> None:
                # No paged SDPA in PyTorch: gather the pages, then attend.
                kk = kp_[tb_[0]].permute(1, 0, 2, 3).reshape(1, hk, t, d)
                vv = vp_[tb_[0]].permute(1, 0, 2, 3).reshape(1, hk, t, d)
                F.scaled_dot_product_attention(tq_, kk, vv, is_causal=causal,
                                               enable_gqa=hk != hq)
        fns.append(sdpa)
    # One thread: all three run on the calling thread, so its CPU time is their
    # time, whatever else loads the machine; two threads: wall time.
    clock = time.thread_time if threads == 1 else time.perf_counter
    with _threads(threads), Watch() as watch:
        times = _best(fns, repeats, clock)
        peaks = [_peak(f) for f in fns[:2]] if peak else None
    row: dict[str, Any] = {
        "name": name, "size": size, "dtype": "float32",
        "ours_s": times[0], "numpy_s": times[1], "ratio": times[1] / times[0],
        "torch_s": times[2] if torch is not None else None,
        "ratio_torch": times[2] / times[0] if torch is not None else None,
        "failed": None, "loaded": watch.loaded, "others_cores": watch.others_cores,
    }
    if peaks is not None:
        row["ours_peak_bytes"], row["numpy_peak_bytes"] = peaks
    return row


def run(quick: bool) -> list[dict[str, Any]]:
    """The rows (see the module doc); ``quick``: T = 1024 and d = 64 alone, and
    the decoding rows."""
    if torch is None:
        print("bench_attention: PyTorch is not installed; its columns are None "
              "(pip install torch to compare with scaled_dot_product_attention)")
    rows = []
    sizes = [1024] if quick else [1024, 4096]
    dims = [64] if quick else [64, 128]
    for t in sizes:
        repeats = (3 if quick else 7) if t <= 1024 else 2
        for d in dims:
            for causal in (True, False):
                for threads in (1, 2):
                    rows.append(_case(t, d, causal, 8, None, threads, repeats,
                                      peak=threads == 1))
        for causal in (True, False):
            rows.append(_case(t, 64, causal, 2, None, 1, repeats, peak=False))
            rows.append(_case(t, 64, causal, 8, 16, 1, repeats, peak=False))
    for threads in (1, 2):
        rows.append(_case(4096, 64, False, 8, None, threads, 10 if quick else 30, peak=False,
                          hq=32, tq=1))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args(argv)
    rows = run(args.quick)
    for r in rows:
        if r["failed"]:
            print(f"{r['name']:<36} {r['size']:<7} FAILED: {r['failed']}", flush=True)
            continue
        torch_part = ("" if r["torch_s"] is None else
                      f"  torch {1e3 * r['torch_s']:8.1f} ms  {r['ratio_torch']:5.2f}x")
        mem = ("" if "ours_peak_bytes" not in r else
               f"  peak {r['ours_peak_bytes'] / 2**20:.0f} / {r['numpy_peak_bytes'] / 2**20:.0f} MiB")
        print(f"{r['name']:<36} {r['size']:<7} ours {1e3 * r['ours_s']:8.1f} ms  "
              f"numpy {1e3 * r['numpy_s']:8.1f} ms  {r['ratio']:5.2f}x{torch_part}{mem}"
              f"{'  (loaded)' if r['loaded'] else ''}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    return 1 if any(r["failed"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())

"""What the benchmark suites share: side-by-side timing, the row a case
reports, the checks that ours and the peer agree before they are timed, and
running a suite as a script.

A row is ``{name, size, dtype, ours_s, numpy_s, ratio, failed, loaded,
others_cores}`` (see ``run.py``): ``numpy_s`` holds the peer's time whoever
the peer is (NumPy, CuPy, PyTorch), and ``ratio = numpy_s / ours_s`` (above 1:
ours is faster). Every row checks ours against the peer before it times
them: a row whose check fails has ``failed`` (the disagreement, in words) and
no times. ``loaded`` marks a row timed while the machine was busy with other
work (``machine.Watch``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np

from benchmarks.machine import Watch, record
from nxkernel_core import rig
from nxkernel_core.plugins import discover

__all__ = ["Check", "check_bits", "check_close", "check_within", "cuda_device", "cuda_library",
           "failed_row", "gamma", "main", "medians", "quiet", "row", "row_of", "timed_row"]

#: A row's check: returns where ours and the peer agree, raises
#: AssertionError (saying how they differ) where they do not.
Check = Callable[[], None]


# ---- timing ------------------------------------------------------------------------------------

def medians(ours: Callable[[], object], other: Callable[[], object], repeats: int, *,
            settle: bool = False) -> tuple[float, float]:
    """Median seconds of each, after one warm-up call each, run alternately so
    both see the same machine load. A device suite's callables synchronise
    before they return, so the times cover the work and not just its launch.
    With ``settle``, each timed call starts once no other thread of the
    process is running (``quiet``): a threaded BLAS's workers keep spinning
    on the cores after its call returns, and a call timed right after it
    would share the cores with them."""
    ours()
    other()
    a: list[float] = []
    b: list[float] = []
    for _ in range(repeats):
        for f, times in ((ours, a), (other, b)):
            if settle:
                quiet()
            t = time.perf_counter()
            f()
            times.append(time.perf_counter() - t)
    return float(np.median(a)), float(np.median(b))


def _others_run_ns() -> dict[str, int] | None:
    """Nanoseconds each other thread of this process has run (Linux's
    ``/proc/self/task/*/schedstat``), None where that is not readable."""
    me = str(threading.get_native_id())
    runs = {}
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return None
    for task in tasks:
        if task == me:
            continue
        try:
            with open(f"/proc/self/task/{task}/schedstat") as f:
                runs[task] = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended meanwhile
    return runs


def quiet(window: float = 0.01, most: float = 1.0) -> None:
    """Return once no other thread of this process ran more than 2% of the
    last ``window`` seconds, or after ``most`` seconds. OpenBLAS's workers
    spin for 2^28 clock cycles (~0.1 s) after each call, OpenMP's for a
    while too; where the threads' run times are not readable, sleep 0.3 s."""
    before = _others_run_ns()
    if before is None:
        time.sleep(0.3)
        return
    end = time.perf_counter() + most
    while time.perf_counter() < end:
        time.sleep(window)
        now = _others_run_ns() or {}
        if all(ns - before.get(task, ns) <= 0.02 * window * 1e9 for task, ns in now.items()):
            return
        before = now


# ---- rows --------------------------------------------------------------------------------------

def row_of(name: str, size: int | str, dtype: str, ours_s: float, other_s: float,
           watch: Watch | None = None) -> dict[str, Any]:
    """One benchmark row from measured times; ``ratio`` is ``other_s / ours_s``
    (above 1: we are faster), None where ours took no measurable time;
    ``loaded`` and ``others_cores`` from the ``watch`` the times were taken
    under (not loaded, unknown business, without one)."""
    return {"name": name, "size": size, "dtype": dtype, "ours_s": ours_s, "numpy_s": other_s,
            "ratio": other_s / ours_s if ours_s > 0 else None, "failed": None,
            "loaded": bool(watch and watch.loaded),
            "others_cores": None if watch is None else watch.others_cores}


def failed_row(name: str, size: int | str, dtype: str, why: str) -> dict[str, Any]:
    """The row of a case whose check failed: ``failed`` says why, and it has
    no times and no ratio, so no table or chart shows it as a speed."""
    return {"name": name, "size": size, "dtype": dtype, "ours_s": None, "numpy_s": None,
            "ratio": None, "failed": why, "loaded": False, "others_cores": None}


def timed_row(name: str, size: int | str, dtype: str, check: Check,
              time_both: Callable[[], tuple[float, float]]) -> dict[str, Any]:
    """``check`` first: where it raises AssertionError, the failed row, and
    nothing is timed; else ``time_both()`` (ours, then the peer's seconds)
    under a ``Watch``, as ``row_of``."""
    try:
        check()
    except AssertionError as err:
        return failed_row(name, size, dtype, str(err) or "ours and the peer disagree")
    with Watch() as watch:
        ours_s, other_s = time_both()
    return row_of(name, size, dtype, ours_s, other_s, watch)


def row(name: str, size: int | str, dtype: str, ours: Callable[[], object],
        other: Callable[[], object], repeats: int, *, check: Check, settle: bool = False
        ) -> dict[str, Any]:
    """One benchmark row: ``check``, then both medians (``medians``, with
    ``settle``) if it passed (``timed_row``)."""
    return timed_row(name, size, dtype, check,
                     lambda: medians(ours, other, repeats, settle=settle))


# ---- checks ------------------------------------------------------------------------------------
# A case checks ours against the peer's result before timing them, so a run on
# a lent GPU is also a smoke test of the kernels there. ``what`` names the case
# and the pair, as in "bench_cuda: sum: nx.cuda and CuPy"; the message adds
# "disagree" and by how much.

def check_bits(what: str, ours: np.ndarray, theirs: np.ndarray) -> None:
    """Raise AssertionError unless ``ours`` and ``theirs`` have the same shape
    and the same bytes (for moves and exact arithmetic)."""
    if ours.shape != theirs.shape:
        raise AssertionError(f"{what} disagree (shapes {ours.shape} and {theirs.shape})")
    # reshape first: a 0-d array cannot be viewed with a different item size.
    a, b = (np.ascontiguousarray(x).reshape(-1).view(np.uint8) for x in (ours, theirs))
    if not np.array_equal(a, b):
        raise AssertionError(f"{what} disagree (their bits differ)")


def check_close(what: str, ours: np.ndarray, theirs: np.ndarray, rel: float, *,
                rtol: float = 0.0, by: Literal["entry", "norm"] = "entry") -> None:
    """Raise AssertionError unless ``ours`` is within a relative ``rel`` of ``theirs``.

    Args:
        what: the case and the pair, as in ``"bench_cuda: sum: nx.cuda and CuPy"``.
        ours: our result, as a NumPy array.
        theirs: the peer's result, the reference the tolerance scales with.
        rel: the tolerance, relative to the size of ``theirs``.
        rtol: ``by="entry"`` only: a further tolerance relative to each entry.
        by: ``"entry"``: every entry, ``|ours - theirs| <= rel * max|theirs| +
            rtol * |theirs|`` (``np.allclose``); ``"norm"``: all entries
            together, ``||ours - theirs||_2 <= rel * ||theirs||_2`` (the
            Frobenius norm of a matrix).
    """
    if by == "entry":
        scale = float(np.max(np.abs(theirs), initial=0.0))
        if not np.allclose(ours, theirs, rtol=rtol, atol=rel * scale):
            wide = np.result_type(ours, theirs, np.float64)
            diff = float(np.max(np.abs(ours.astype(wide) - theirs.astype(wide)), initial=0.0))
            each = f" plus {rtol:g} of each entry" if rtol else ""
            raise AssertionError(f"{what} disagree (largest difference {diff!r}, {rel:g} of the "
                                 f"largest |entry| {scale!r}{each} allowed)")
    elif by == "norm":
        if rtol:
            raise ValueError("check_close: rtol applies to by='entry' alone")
        wide = np.result_type(ours, theirs, np.float64)
        d = float(np.linalg.norm(ours.astype(wide).ravel() - theirs.astype(wide).ravel()))
        t = float(np.linalg.norm(theirs.astype(wide).ravel()))
        if not d <= rel * t:
            err = d / t if t > 0 else float("inf")
            raise AssertionError(f"{what} disagree (relative 2-norm error {err:.3g}, {rel:g} allowed)")
    else:
        raise ValueError(f"check_close: by must be 'entry' or 'norm', not {by!r}")


def gamma(n: int, dtype: Any) -> float:
    """The contract's γ(n) = n·u / (1 − n·u), u the unit roundoff of ``dtype``
    (infinite where n·u ≥ 1)."""
    u = float(np.finfo(dtype).eps) / 2
    return n * u / (1 - n * u) if n * u < 1 else float("inf")


def check_within(what: str, ours: Any, theirs: Any, atol: Any) -> None:
    """Raise AssertionError unless ``|ours - theirs| <= atol`` entry by entry
    (``atol`` a number or an array of the shape), NaNs at the same places.
    For results the contract bounds: ``atol`` is the sum of both sides'
    stated bounds."""
    a = np.asarray(ours, dtype=np.float64)
    b = np.asarray(theirs, dtype=np.float64)
    if a.shape != b.shape:
        raise AssertionError(f"{what} disagree (shapes {a.shape} and {b.shape})")
    nan = np.isnan(a)
    if not np.array_equal(nan, np.isnan(b)):
        raise AssertionError(f"{what} disagree (NaN at different places)")
    tol = np.broadcast_to(np.asarray(atol, dtype=np.float64), a.shape)
    with np.errstate(invalid="ignore"):
        bad = ~nan & ~(np.abs(a - b) <= tol) & ~(a == b)
    if bad.any():
        i = int(np.flatnonzero(bad.reshape(-1))[0])
        raise AssertionError(f"{what} disagree (entry {i}: {float(a.reshape(-1)[i])!r} and "
                             f"{float(b.reshape(-1)[i])!r}, {float(tol.reshape(-1)[i]):g} allowed)")


# ---- the CUDA suites' device and library, through discovery -----------------------------------

def cuda_device(suite: str) -> Any:
    """``cuda:0`` as ``rig.device`` opens it (discovery first), or None with
    each plugin's reason for its absence printed, naming ``suite``."""
    try:
        return rig.device("cuda:0")
    except ValueError as e:
        print(f"{suite}: no CUDA GPU is usable here, so nothing is measured: {e}", file=sys.stderr)
        return None


def cuda_library() -> Any:
    """The CUDA library, ``nx.cuda``, as discovery registers it."""
    return discover().library("nx.cuda")


# ---- running a suite as a script ---------------------------------------------------------------

def _print_rows(rows: Sequence[dict[str, Any]]) -> None:
    """The rows as a table under a header; nothing where there are none. A
    loaded row's ratio carries a ``*``; a failed row says FAILED and why."""
    if not rows:
        return
    width = max([10, *(len(str(r["name"])) for r in rows)])
    kind = max([5, *(len(str(r["dtype"])) for r in rows)])
    print(f"{'case':<{width}} {'size':>10} {'dtype':<{kind}} {'ours ms':>10} {'theirs ms':>10} {'ratio':>6}")
    for r in rows:
        head = f"{r['name']:<{width}} {r['size']!s:>10} {r['dtype']!s:<{kind}}"
        if r.get("failed"):
            print(f"{head} FAILED: {r['failed']}")
            continue
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}" + ("*" if r.get("loaded") else "")
        print(f"{head} {r['ours_s'] * 1e3:>10.3f} {r['numpy_s'] * 1e3:>10.3f} {ratio:>6}")
    if any(r.get("loaded") for r in rows):
        print("* timed while the machine was busy with other work")


def main(run: Callable[[bool], list[dict[str, Any]]], description: str | None, quick_help: str,
         argv: list[str] | None = None) -> int:
    """Run a suite as a script: ``[--quick] [--json PATH]``; print its rows as
    a table and write them, with the machine's record, to PATH as JSON. The
    exit status is 1 where a row's check failed, else 0.

    Args:
        run: the suite's ``run(quick)``.
        description: the suite's docstring; its first paragraph is ``--help``'s.
        quick_help: what ``--quick`` leaves out, for ``--help``.
        argv: the arguments (default: the command line's).
    """
    parser = argparse.ArgumentParser(description=(description or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument("--json", metavar="PATH", help="also write the rows to this file")
    args = parser.parse_args(argv)
    before = record()
    rows = run(args.quick)
    _print_rows(rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": before, "load_average_after": record()["load_average"],
                       "rows": rows}, f, indent=1)
    return 1 if any(r.get("failed") for r in rows) else 0

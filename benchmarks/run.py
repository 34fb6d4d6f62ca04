"""Run the benchmarks side by side and print ratios: ``python -m benchmarks.run [LIBRARY…]``.

Each ``benchmarks/bench_*.py`` module (a suite) states the library it
measures (``LIBRARY``, default ``"host"``) and has ``run(quick: bool) ->
list[dict]`` returning rows ``{name, size, dtype, ours_s, numpy_s, ratio}``:
``numpy_s`` is the reference's time (NumPy's, or the one the row's name
names after "vs", such as SciPy's), and ``ratio`` is that time over ours
(above 1: nxkernel is faster). A row may add other peers as ``PEER_s`` and
``ratio_PEER`` (``torch_s``, ``ratio_torch``; ``None`` where the peer is not
installed); their columns appear where a suite has them.

Every row checks ours against its peer before timing them (bits where the
contract fixes them, the stated bound otherwise); a row whose check fails is
printed as FAILED with the disagreement, never timed, and makes the exit
status 1. The run records the machine (``machine.record``: CPU, cores, load
averages before and after, both sides' thread counts, versions), and a row
timed while other processes kept the machine busy, or while another benchmark
ran, is *loaded*: its ratio is marked ``*`` in the table and ``loaded`` in the
JSON.

A progress line per suite goes to stderr; the machine and each suite's rows
are printed as tables; ``--json FILE`` writes ``{"machine", "load_average_after",
"rows"}``, every row with its ``module`` and ``library``, and ``--plot
FILE.png`` draws the ratios as bar charts, one panel per suite (matplotlib,
Agg backend), refusing loaded rows unless ``--allow-load`` is given. A suite
whose optional peer is not installed (a module other than nxkernel's missing)
is skipped with the reason; one that fails is reported with its traceback
and makes the exit status 1, without stopping the others. Exit status 2: an
unknown library, ``--plot`` without matplotlib, or loaded rows to plot
without ``--allow-load``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import pkgutil
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, Final

from benchmarks.machine import record

__all__ = ["describe", "main", "modules", "peers", "plot", "table"]

#: Where a row's times come from: ours, then the reference (``numpy_s``).
_OURS: Final = "ours_s"
_REFERENCE: Final = "numpy"


def modules() -> list[str]:
    """The benchmark modules beside this file, by name."""
    here = Path(__file__).resolve().parent
    return sorted(m.name for m in pkgutil.iter_modules([str(here)]) if m.name.startswith("bench_"))


def _load(name: str) -> ModuleType:
    """The benchmark module ``name`` (imported once)."""
    return importlib.import_module(f"benchmarks.{name}")


def peers(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The peers the rows time, the reference first: ``numpy``, then each
    ``PEER`` of a ``PEER_s`` key that some row fills."""
    found = [_REFERENCE]
    for r in rows:
        for key, value in r.items():
            if key.endswith("_s") and key != _OURS and value is not None:
                peer = key[:-2]
                if peer not in found:
                    found.append(peer)
    return found


def _ratio(row: dict[str, Any], peer: str) -> float | None:
    """The peer's time over ours in ``row``, or None where it has none."""
    value = row.get("ratio" if peer == _REFERENCE else f"ratio_{peer}")
    return None if value is None else float(value)


def table(rows: Sequence[dict[str, Any]], title: str | None = None) -> str:
    """The rows as an aligned text table: nxkernel's time, then each peer's
    time and ratio (``x`` above 1: nxkernel is faster)."""
    names = [_REFERENCE, *(p for p in peers(rows) if p != _REFERENCE)]
    width = max([34, *(len(str(r["name"])) for r in rows)])
    head = f"{'benchmark':<{width}} {'size':>10} {'dtype':<13} {'nxkernel ms':>11}"
    for p in names:
        head += f" {p + ' ms':>10} {'ratio':>7}"
    lines = [] if title is None else [title]
    lines += [head, "-" * len(head)]
    for r in rows:
        line = f"{r['name']:<{width}} {r['size']!s:>10} {r['dtype']!s:<13} "
        if r.get("failed"):
            lines.append(f"{line}FAILED: {r['failed']}")
            continue
        line += f"{1e3 * r[_OURS]:>11.3f}"
        mark = "*" if r.get("loaded") else "x"
        for p in names:
            t = r.get(f"{p}_s")
            ratio = _ratio(r, p)
            line += (f" {'-':>10} {'-':>7}" if t is None or ratio is None
                     else f" {1e3 * t:>10.3f} {ratio:>6.2f}{mark}")
        lines.append(line)
    if any(r.get("loaded") for r in rows):
        lines.append("* timed while the machine was busy with other work (loaded): not a measurement")
    return "\n".join(lines)


def describe(machine: dict[str, Any], load_after: list[float] | None) -> str:
    """The machine a run timed on, in a few lines: CPU, cores, load averages
    before and after, thread counts, other benchmarks seen, versions."""
    threads = machine["threads"]
    blas = ", ".join(f"{b['library']} {b['threads']}" for b in threads["blas"] or []) or "?"
    versions = ", ".join(f"{k} {v}" for k, v in machine["versions"].items() if v)
    lines = [f"machine: {machine['cpu']}, {machine['cores']} cores; load average "
             f"{_loads(machine['load_average'])} before, {_loads(load_after)} after",
             f"threads: nxkernel {threads['NXKERNEL_THREADS'] or threads['numba']}, BLAS {blas}, "
             f"torch {threads['torch'] or '-'}",
             f"versions: Python {machine['python']}, {versions}"]
    if machine["other_benchmarks"]:
        lines.append(f"other benchmark processes running: {machine['other_benchmarks']}")
    return "\n".join(lines)


def _loads(values: list[float] | None) -> str:
    return "?" if values is None else "/".join(f"{v:.2f}" for v in values)


def plot(suites: dict[str, list[dict[str, Any]]], path: str) -> None:
    """Draw each suite's ratios as horizontal bars (one bar per peer) on a log
    axis, 1 (parity) marked, into the PNG at ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator

    shown = {name: kept for name, rows in suites.items()
             if (kept := [r for r in rows if not r.get("failed")])}
    ratios = [v for rows in shown.values() for r in rows for p in peers(rows)
              if (v := _ratio(r, p)) is not None and v > 0]
    if not ratios:
        raise ValueError("no ratios to plot")
    # One x range for every panel, so that bars of different suites compare.
    lo, hi = min([*ratios, 1.0]) / 1.5, max([*ratios, 1.0]) * 1.5
    heights = [len(rows) * len(peers(rows)) ** 0.5 + 1.5 for rows in shown.values()]
    fig, axes = plt.subplots(len(shown), 1, figsize=(10, 0.26 * sum(heights) + 1.2),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    colours = ["tab:blue", "tab:orange", "tab:green", "tab:purple"]
    for ax, (suite, rows) in zip(axes[:, 0], shown.items(), strict=True):
        names = peers(rows)
        bar = 0.8 / len(names)
        labels = [f"{r['name']} ({r['size']}, {r['dtype']})" for r in rows]
        for k, peer in enumerate(names):
            ys, widths = [], []
            for i, r in enumerate(rows):
                v = _ratio(r, peer)
                if v is not None and v > 0:
                    ys.append(i + (k - (len(names) - 1) / 2) * bar)
                    widths.append(v - 1.0)
            # Bars grow from parity (1) to the ratio: right, nxkernel is faster.
            ax.barh(ys, widths, left=1.0, height=bar, color=colours[k % len(colours)],
                    label=f"{peer} time / nxkernel time")
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.set_xscale("log")
        ax.set_xlim(lo, hi)
        ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}×"))
        ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
        ax.set_yticks(range(len(rows)), labels, fontsize=7)
        ax.set_ylim(len(rows) - 0.5, -0.5)
        ax.set_title(f"{suite} ({rows[0].get('library', '?')}): right of 1×, nxkernel is faster",
                     fontsize=9, loc="left")
        ax.tick_params(axis="x", labelsize=7)
        ax.grid(axis="x", which="major", alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _optional_missing(err: ImportError) -> bool:
    """Whether ``err`` is an optional peer missing (SciPy, PyTorch, CuPy), not
    a broken nxkernel module."""
    name = getattr(err, "name", None) or ""
    return isinstance(err, ModuleNotFoundError) and not name.startswith(
        ("nxkernel", "benchmarks"))


def _matches(library: str, wanted: Sequence[str]) -> bool:
    """Whether a suite's ``LIBRARY`` is among ``wanted`` (``host`` and
    ``nx.host`` name the same library)."""
    return not wanted or any(w in (library, f"nx.{library}") or library == f"nx.{w}"
                             for w in wanted)


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    """Run the suites ``argv`` selects; print, write and draw their rows. The
    exit status is 0, 1 where a suite failed, 2 where nothing could run."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("libraries", nargs="*", help="libraries to measure (default: all)")
    parser.add_argument("--quick", action="store_true", help="small sizes, few repeats")
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    parser.add_argument("--plot", metavar="FILE.png", help="also draw the ratios as a PNG")
    parser.add_argument("--allow-load", action="store_true",
                        help="let --plot draw rows timed while the machine was busy")
    args = parser.parse_args(argv)
    if args.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            print("benchmarks.run: --plot needs matplotlib: pip install matplotlib", file=sys.stderr)
            return 2
    loaded: list[tuple[str, ModuleType, str]] = []
    seen: set[str] = set()
    failed = 0
    for name in modules():
        try:
            module = _load(name)
        except ImportError as err:
            if _optional_missing(err):
                _progress(f"{name}: skipped, it needs {err.name} (pip install {err.name})")
            else:
                failed += 1
                _progress(f"{name}: failed to import\n{traceback.format_exc()}")
            continue
        library = str(getattr(module, "LIBRARY", "host"))
        seen.add(library)
        if _matches(library, args.libraries):
            loaded.append((name, module, library))
    if not loaded and args.libraries:
        print(f"benchmarks.run: no benchmarks for {', '.join(args.libraries)}"
              f" (the suites measure: {', '.join(sorted(seen)) or 'nothing'})", file=sys.stderr)
        return 2
    suites: dict[str, list[dict[str, Any]]] = {}
    machine = record()
    start = time.perf_counter()
    for i, (name, module, library) in enumerate(loaded, 1):
        _progress(f"[{i}/{len(loaded)}] {name} ({library}) ...")
        t = time.perf_counter()
        try:
            got = module.run(args.quick)
        except Exception:  # one failing benchmark must not hide the others
            failed += 1
            _progress(f"[{i}/{len(loaded)}] {name}: failed\n{traceback.format_exc()}")
            continue
        suites[name] = [{"module": name, "library": library, **row} for row in got]
        _progress(f"[{i}/{len(loaded)}] {name}: {len(got)} rows in {time.perf_counter() - t:.1f} s")
    _progress(f"{len(suites)} suites in {time.perf_counter() - start:.1f} s")
    load_after = record()["load_average"]
    print("\n\n".join([describe(machine, load_after),
                        *(table(rows, f"== {name} ({rows[0]['library']}) ==")
                          for name, rows in suites.items() if rows)]))
    rows = [r for suite in suites.values() for r in suite]
    failed += sum(1 for r in rows if r.get("failed"))
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"machine": machine, "load_average_after": load_after, "rows": rows},
            indent=2, default=_jsonable))
    if args.plot and rows:
        busy = [str(r["name"]) for r in rows if r.get("loaded")]
        if busy and not args.allow_load:
            print(f"benchmarks.run: not drawing {args.plot}: {len(busy)} rows were timed while the "
                  f"machine was busy ({', '.join(busy[:3])}{', ...' if len(busy) > 3 else ''}); "
                  "run again on an idle machine, or pass --allow-load", file=sys.stderr)
            return 2
        plot(suites, args.plot)
        _progress(f"ratios drawn to {args.plot}")
    return 1 if failed else 0


def _jsonable(value: object) -> object:
    """JSON for what ``json`` does not know: NumPy scalars as numbers."""
    if hasattr(value, "item"):
        item = value.item()
        return None if isinstance(item, float) and math.isnan(item) else item
    raise TypeError(f"not JSON: {type(value).__name__}")


if __name__ == "__main__":
    sys.exit(main())

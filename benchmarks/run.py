"""Run the benchmarks side by side and print ratios: ``nxkernel bench [LIBRARY…]``.

Each ``benchmarks/bench_*.py`` module states the library it measures
(``LIBRARY``, default ``"host"``) and has ``run(quick: bool) -> list[dict]``
returning rows ``{name, size, dtype, ours_s, numpy_s, ratio}`` (``ratio`` is
the other side's time over ours: above 1 means we are faster). The rows of
every module run are printed as one table, and written as JSON with
``--json FILE``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import pkgutil
import sys
import traceback
from pathlib import Path
from typing import Any


def modules() -> list[str]:
    """The benchmark modules beside this file, by name."""
    here = Path(__file__).resolve().parent
    return sorted(m.name for m in pkgutil.iter_modules([str(here)]) if m.name.startswith("bench_"))


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as an aligned text table."""
    head = f"{'benchmark':<34} {'size':>10} {'dtype':<9} {'ours ms':>10} {'other ms':>10} {'ratio':>7}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['name']:<34} {r['size']!s:>10} {r['dtype']!s:<9} {1e3 * r['ours_s']:>10.3f} "
            f"{1e3 * r['numpy_s']:>10.3f} {r['ratio']:>6.2f}x"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nxkernel bench", description=__doc__)
    parser.add_argument("libraries", nargs="*", help="libraries to measure (default: all)")
    parser.add_argument("--quick", action="store_true", help="small sizes, few repeats")
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    args = parser.parse_args(argv)
    rows: list[dict[str, Any]] = []
    failed = 0
    for name in modules():
        module = importlib.import_module(f"benchmarks.{name}")
        library = getattr(module, "LIBRARY", "host")
        if args.libraries and library not in args.libraries:
            continue
        try:
            got = module.run(args.quick)
        except Exception:  # one failing benchmark must not hide the others
            failed += 1
            print(f"{name}: failed\n{traceback.format_exc()}", file=sys.stderr)
            continue
        for row in got:
            rows.append({"module": name, "library": library, **row})
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

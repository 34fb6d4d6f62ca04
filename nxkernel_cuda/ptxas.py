"""Every kernel's registers, spills and shared memory, from ptxas's report.

NVRTC compiles with ``--ptxas-options=-v`` (:data:`~nxkernel_cuda.build.OPTIONS`),
so each cubin's log (kept with it in the cache) holds ptxas's lines for every
entry function::

    ptxas info    : Compiling entry function 'nxk_fill' for 'sm_90'
    ptxas info    : Function properties for nxk_fill
    ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
    ptxas info    : Used 30 registers, used 0 barriers, 1024 bytes smem

Rules:

* :func:`usage` reads them for one compiled source; :func:`sources` is what the
  table covers: every source of the catalog and, of the generated ones, those
  that take the most registers (the tensor-core attention at the largest head
  dimensions, and a small one beside it).
* ``docs/ptxas.md`` is the table, for ``build.CI_ARCHES``, written by
  ``python -m nxkernel_cuda.ptxas --write``. Its last column accepts a
  kernel's spills with a reason (and the bytes, spill stores + loads, it may
  spill at most); the writer keeps what the table accepted. CI
  (``tests/cuda/test_ptxas.py``) fails on a spill the table does not accept.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, final

from nxkernel_core import dtype as D
from nxkernel_core.prog import Prog

from . import attention_mma, build, catalog
from .build import Source

__all__ = ["TABLE", "Usage", "accepted", "main", "render", "sources", "usage"]

#: The table's file.
TABLE: Final = Path(__file__).resolve().parent.parent / "docs" / "ptxas.md"


@final
@dataclass(frozen=True, slots=True)
class Usage:
    """One kernel's resources on one architecture, as ptxas reports them."""

    source: str
    kernel: str
    arch: str
    registers: int
    spill_stores: int
    spill_loads: int
    stack: int
    smem: int

    @property
    def spills(self) -> int:
        """Bytes of spill stores and loads together."""
        return self.spill_stores + self.spill_loads

    @property
    def key(self) -> tuple[str, str, str]:
        return self.source, self.kernel, self.arch


_ENTRY: Final = re.compile(r"Compiling entry function '([^']+)' for '(sm_\w+)'")
_PROPS: Final = re.compile(r"Function properties for (\S+)")
_FRAME: Final = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED: Final = re.compile(r"Used (\d+) registers(?:.*?(\d+) bytes smem)?")


def parse(source: str, log: str, lowered: Mapping[str, str]) -> list[Usage]:
    """The usage of every entry function in ptxas's ``log`` of ``source``,
    by name expression (``lowered`` maps them to the mangled names; one ptxas
    does not know keeps its mangled name). Pure."""
    names = {v: k for k, v in lowered.items()}
    out: list[Usage] = []
    entry: tuple[str, str] | None = None
    props: str | None = None
    frame = (0, 0, 0)
    for line in log.splitlines():
        if m := _ENTRY.search(line):
            entry, props, frame = (m.group(1), m.group(2)), None, (0, 0, 0)
        elif m := _PROPS.search(line):
            props = m.group(1)
        elif (m := _FRAME.search(line)) and entry is not None and props == entry[0]:
            frame = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
        elif (m := _USED.search(line)) and entry is not None:
            stack, stores, loads = frame
            out.append(Usage(source, names.get(entry[0], entry[0]), entry[1], int(m.group(1)), stores, loads,
                             stack, int(m.group(2) or 0)))
            entry = None
    return out


def usage(name: str, source: Source, arch: str) -> list[Usage]:
    """Every kernel of ``source`` compiled for ``arch`` (from the cubin cache
    where it was built before), under the name ``name`` the table gives the
    source."""
    cubin = build.compile(source, arch)
    return parse(name, cubin.log, cubin.lowered)


def _causal() -> Prog:
    b = Prog.build([D.float32])
    return b.finish(b.less_equal(b.coord(0), b.coord(1)), b.copy(b.ins[0]))


def sources() -> tuple[tuple[str, Source], ...]:
    """What the table covers, each with the name it goes by there."""
    out = [(s.name, s) for s in catalog.sources()]
    for dt in (D.float16, D.bfloat16):
        for d in (64, attention_mma.MAX_HEAD_DIM):
            keys = attention_mma.tile_keys(d, d)
            assert keys is not None
            src = attention_mma.attention_mma_source(_causal(), (), dt, d, d, keys, False)
            out.append((f"attention_mma {dt.name} dk=dv={d} (causal)", src))
    return tuple(out)


def collect(arches: Sequence[str] = build.CI_ARCHES) -> list[Usage]:
    """The usage of every kernel :func:`sources` lists, for each of ``arches``."""
    return [u for name, src in sources() for arch in arches for u in usage(name, src, arch)]


_ROW: Final = re.compile(r"^\| `([^`]+)` \| `([^`]+)` \| (sm_\d+) \|(?:[^|]*\|){4}\s*(.*?)\s*\|\s*$")
_ACCEPT: Final = re.compile(r"accepted up to (\d+) B: (.+)")


def accepted(text: str) -> dict[tuple[str, str, str], tuple[int, str]]:
    """The spills a table accepts: by (source, kernel, arch), the bytes (spill
    stores + loads) it may spill at most and the reason. Pure."""
    out: dict[tuple[str, str, str], tuple[int, str]] = {}
    for line in text.splitlines():
        m = _ROW.match(line)
        if m and (a := _ACCEPT.match(m.group(4))):
            out[(m.group(1), m.group(2), m.group(3))] = (int(a.group(1)), a.group(2))
    return out


_HEAD: Final = """\
# ptxas's report: registers, spills and shared memory of every kernel

Written by `python -m nxkernel_cuda.ptxas --write` from NVRTC {version}'s
ptxas report (`--ptxas-options=-v`), for {arches}: every source of the
catalog, and the tensor-core attention (the kernel with the most registers)
at a small and the largest head dimension. *Spills* are the bytes of spill
stores / spill loads, *stack* the stack frame, *smem* the static shared
memory (dynamic shared memory is the launch's). The last column accepts a
kernel's spills: `tests/cuda/test_ptxas.py` (in the default run) fails on a
spill this table does not accept, or on more bytes than it accepts. To accept
one, regenerate the table and write in that column
`accepted up to N B: the reason`; the writer keeps it.

Worst: {worst}.

| source | kernel | arch | registers | spills (B, stores / loads) | stack (B) | smem (B) | accepted |
|---|---|---|---|---|---|---|---|
"""


def render(rows: Iterable[Usage], keep: Mapping[tuple[str, str, str], tuple[int, str]],
           version: str = "?") -> str:
    """The table of ``rows``, accepting what ``keep`` accepted. Pure."""
    rows = sorted(rows, key=lambda u: (u.source, u.kernel, u.arch))
    worst_reg = max(rows, key=lambda u: u.registers, default=None)
    worst_spill = max(rows, key=lambda u: u.spills, default=None)
    worst = "none"
    if worst_reg is not None and worst_spill is not None:
        worst = (f"{worst_reg.registers} registers (`{worst_reg.kernel}` of {worst_reg.source},"
                 f" {worst_reg.arch});"
                 f" {worst_spill.spills} bytes of spills (`{worst_spill.kernel}` of {worst_spill.source},"
                 f" {worst_spill.arch})")
    arches = ", ".join(sorted({u.arch for u in rows}))
    lines = [_HEAD.format(version=version, arches=arches or "no arch", worst=worst)]
    for u in rows:
        note = ""
        if u.key in keep:
            limit, why = keep[u.key]
            note = f"accepted up to {limit} B: {why}"
        lines.append(f"| `{u.source}` | `{u.kernel}` | {u.arch} | {u.registers} |"
                     f" {u.spill_stores} / {u.spill_loads} | {u.stack} | {u.smem} | {note} |\n")
    return "".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m nxkernel_cuda.ptxas [--write]``: print the table, or write it
    to ``docs/ptxas.md`` keeping what it accepted."""
    parser = argparse.ArgumentParser(prog="python -m nxkernel_cuda.ptxas", description=main.__doc__)
    parser.add_argument("--write", action="store_true", help=f"write {TABLE}")
    args = parser.parse_args(argv)
    keep = accepted(TABLE.read_text()) if TABLE.is_file() else {}
    major, minor = build.nvrtc_version()
    text = render(collect(), keep, f"{major}.{minor}")
    if args.write:
        TABLE.parent.mkdir(parents=True, exist_ok=True)
        TABLE.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

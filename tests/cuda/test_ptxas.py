"""ptxas's report in CI: every kernel the table (``docs/ptxas.md``) covers is
compiled for ``build.CI_ARCHES`` with ptxas's report in its log (the cubin
cache keeps it, so a warm run reads it), one test per source and arch; a
kernel that spills more than the table accepts for it fails, and the table
lists every kernel it covers."""

from __future__ import annotations

import pytest

from nxkernel_cuda import build, ptxas
from nxkernel_cuda.build import Source

from .support import needs_nvrtc

_LOG = """\
ptxas info    : 120 bytes gmem
ptxas info    : Compiling entry function '_Z3fooILi4EEvPi' for 'sm_90'
ptxas info    : Function properties for _Z3fooILi4EEvPi
ptxas         .     16 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 2048 bytes smem, 400 bytes cmem[0]
ptxas info    : Compile time = 1.5 ms
ptxas info    : Function properties for _Z7nxk_divxx
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function 'bar' for 'sm_80'
ptxas info    : Function properties for bar
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 30 registers, used 0 barriers
"""


def test_the_report_is_read_per_entry_function() -> None:
    rows = ptxas.parse("x.cu", _LOG, {"foo<4>": "_Z3fooILi4EEvPi", "bar": "bar"})
    assert rows == [ptxas.Usage("x.cu", "foo<4>", "sm_90", 255, 8, 12, 16, 2048),
                    ptxas.Usage("x.cu", "bar", "sm_80", 30, 0, 0, 0, 0)]
    assert rows[0].spills == 20


def test_the_table_accepts_what_its_last_column_says() -> None:
    rows = ptxas.parse("x.cu", _LOG, {"foo<4>": "_Z3fooILi4EEvPi", "bar": "bar"})
    keep = {("x.cu", "foo<4>", "sm_90"): (32, "the tile is the kernel's")}
    text = ptxas.render(rows, keep)
    assert ptxas.accepted(text) == keep
    row = ("| `x.cu` | `foo<4>` | sm_90 | 255 | 8 / 12 | 16 | 2048 |"
           " accepted up to 32 B: the tile is the kernel's |")
    assert row in text
    assert ptxas.accepted(ptxas.render(rows, {})) == {}


_SOURCES = ptxas.sources()


# One test per source and arch, so that the workers of a parallel run share
# the compiles (the tensor-core sources take most of them).
@needs_nvrtc
@pytest.mark.parametrize("arch", build.CI_ARCHES)
@pytest.mark.parametrize(("name", "source"), _SOURCES, ids=[name for name, _ in _SOURCES])
def test_the_table_lists_each_kernel_and_accepts_its_spills(name: str, source: Source, arch: str) -> None:
    report = ptxas.usage(name, source, arch)
    assert report and {u.arch for u in report} == {arch}
    text = ptxas.TABLE.read_text()
    missing = [u.key for u in report if f"| `{u.source}` | `{u.kernel}` | {u.arch} |" not in text]
    assert not missing, f"docs/ptxas.md lacks {missing}: python -m nxkernel_cuda.ptxas --write"
    accepted = ptxas.accepted(text)
    over = [f"{u.kernel} of {u.source} for {u.arch}: {u.spill_stores} / {u.spill_loads} bytes of spills"
            f" (the table accepts {accepted.get(u.key, (0, ''))[0]})"
            for u in report if u.spills > accepted.get(u.key, (0, ""))[0]]
    assert not over, "spills docs/ptxas.md does not accept:\n" + "\n".join(over)

"""The house's shape: no module over ~750 lines, no import cycle in the core.

Both read the sources as text (``ast``), importing nothing: a cycle is found
among the imports each module of ``nxkernel_core`` runs, whether when it is
imported (module level) or when a function of it first runs (a deferred
import), ``if TYPE_CHECKING:`` blocks left out, as are a submodule's imports
of its own packages (Python imports those first in any case).
"""

from __future__ import annotations

import ast
import pathlib
from collections.abc import Iterator
from typing import Final

import pytest

_ROOT: Final = pathlib.Path(__file__).resolve().parent.parent

#: The packages whose Python sources the size rule covers.
_PACKAGES: Final = ("nxkernel_core", "nxkernel_host", "nxkernel_cuda", "benchmarks")

#: The most lines a module may have.
_MOST_LINES: Final = 750

#: Import cycles known to close only through deferred imports, left to be
#: broken: discovery runs when a device is named and discovery opens devices
#: (#15 item 5, s15call); the Array API's reductions and manipulations lean on
#: each other, as do its creation functions and its DLPack interchange.
_DEFERRED_CYCLES: Final = frozenset({
    frozenset({"nxkernel_core.plugins", "nxkernel_core.rig"}),
    frozenset({"nxkernel_core.array_api._manipulation", "nxkernel_core.array_api._reductions"}),
    frozenset({"nxkernel_core.array_api._creation", "nxkernel_core.array_api._dlpack"}),
})


def _sources(package: str) -> Iterator[pathlib.Path]:
    yield from sorted((_ROOT / package).rglob("*.py"))


def _module_name(path: pathlib.Path) -> tuple[str, bool]:
    """The dotted name of the module at ``path``, and whether it is a package."""
    parts = path.relative_to(_ROOT).with_suffix("").parts
    is_package = parts[-1] == "__init__"
    return ".".join(parts[:-1] if is_package else parts), is_package


def _imports(path: pathlib.Path, name: str, is_package: bool, modules: set[str],
             deferred: bool) -> set[str]:
    """The modules of ``modules`` that the module ``name`` at ``path`` imports:
    at module level, and in its functions' bodies where ``deferred``."""
    package = name if is_package else name.rpartition(".")[0]
    out: set[str] = set()

    def visit(nodes: list[ast.stmt]) -> None:
        for n in nodes:
            if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test):
                visit(n.orelse)
                continue
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef):
                if deferred:
                    visit(n.body)
                continue
            if isinstance(n, ast.ImportFrom):
                base = n.module or ""
                if n.level:
                    parts = package.split(".")
                    parts = parts[:len(parts) - (n.level - 1)]
                    base = ".".join(parts + ([n.module] if n.module else []))
                out.update({base} | {f"{base}.{a.name}" for a in n.names})
            elif isinstance(n, ast.Import):
                out.update(a.name for a in n.names)
            for field in ("body", "orelse", "handlers", "finalbody"):
                sub = getattr(n, field, None)
                if isinstance(sub, list):
                    visit(sub)

    visit(ast.parse(path.read_text(encoding="utf-8")).body)
    return {m for m in out & modules if m != name and not name.startswith(m + ".")}


def _cycles(edges: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for v in sorted(edges):
        if v not in index:
            strong(v)
    return found


def _core_graph(deferred: bool) -> dict[str, set[str]]:
    paths = {_module_name(p): p for p in _sources("nxkernel_core")}
    modules = {name for name, _ in paths}
    return {name: _imports(p, name, is_package, modules, deferred)
            for (name, is_package), p in paths.items()}


def test_the_core_imports_no_module_that_imports_it_at_import_time() -> None:
    assert _cycles(_core_graph(deferred=False)) == []


def test_the_core_has_no_cycle_through_deferred_imports_but_the_known_ones() -> None:
    assert set(_cycles(_core_graph(deferred=True))) <= _DEFERRED_CYCLES


def test_the_cycle_finder_finds_a_cycle_and_leaves_a_chain() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [
        frozenset({"a", "b", "c"})]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_the_import_reader_resolves_relative_and_deferred_imports(tmp_path: pathlib.Path) -> None:
    src = tmp_path / "m.py"
    src.write_text("from typing import TYPE_CHECKING\nfrom . import b\nfrom .c import x\n"
                   "if TYPE_CHECKING:\n    from . import d\n"
                   "def f():\n    from .e import y\n")
    modules = {"p", "p.b", "p.c", "p.d", "p.e"}
    assert _imports(src, "p.m", False, modules, deferred=False) == {"p.b", "p.c"}
    assert _imports(src, "p.m", False, modules, deferred=True) == {"p.b", "p.c", "p.e"}


@pytest.mark.parametrize("package", _PACKAGES)
def test_no_module_is_over_750_lines(package: str) -> None:
    over = {}
    for path in _sources(package):
        rel = path.relative_to(_ROOT).as_posix()
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > _MOST_LINES:
            over[rel] = lines
    assert over == {}

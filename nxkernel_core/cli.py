"""The ``nxkernel`` command: ``info``, ``check`` and ``bench``.

``nxkernel info [--statements] [--json]`` shows what discovery found, answer
first: a table of the plugins and their libraries (in the order the caller
asks them), each with the devices it computes on, or why none (a failed
plugin's error, a library's ``unavailable`` reason), in one line; then the
devices; each library's statement with ``--statements``; all of it, statements
too, with ``--json``. ``nxkernel --version`` prints the version. ``nxkernel check LIBRARY``
runs the conformance kit against one library under pytest. ``python -m
nxkernel_core`` is the same command.

The benchmarks and the examples belong to a source checkout, not to the
installed package: run them there as modules (``python -m benchmarks.run``,
``python -m examples.minilm``). ``nxkernel bench [ARG…]``, in a checkout's
root, is ``python -m benchmarks.run [ARG…]`` run there (the package imports
none of it); elsewhere it says where to run it.

Every command returns its exit status: 0 for success, 2 where it could not
run (a plugin that ``NXKERNEL_PLUGINS`` names fails, an unknown library, no
pytest), else pytest's status.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from typing import Any, Final

from ._version import __version__
from .plugins import PluginError, Registry, Status, discover

__all__ = ["main"]

#: The variables ``info`` shows where set.
_VARIABLES = ("NXKERNEL_PLUGINS", "NXKERNEL_DISABLE", "NXKERNEL_CUDA_EMULATE", "NXKERNEL_NVRTC",
              "NXKERNEL_CACHE", "NXKERNEL_THREADS", "NXKERNEL_CXX", "NXKERNEL_LOG")


def _fail(command: str, message: str) -> int:
    """Print ``nxkernel COMMAND: MESSAGE`` to stderr and return 2."""
    print(f"nxkernel {command}: {message}", file=sys.stderr)
    return 2


# --------------------------------------------------------------------------
# info
# --------------------------------------------------------------------------


def _libraries_data(registry: Registry) -> list[dict[str, Any]]:
    """Each library with its plugin, priority, the devices it computes on, why
    its devices are unavailable (``unavailable``, where it says), its notes
    and its statement."""
    computes_on: dict[str, list[str]] = {lib.name: [] for lib in registry.libraries()}
    for device in registry.devices():
        for lib in registry.libraries_for(device):
            computes_on[lib.name].append(device.name)
    out = []
    for lib in registry.libraries():
        unavailable = getattr(lib, "unavailable", None)
        notes = getattr(lib, "notes", ())
        out.append({
            "name": lib.name, "plugin": registry.provider(lib.name),
            "priority": getattr(lib, "priority", 0), "computes_on": computes_on[lib.name],
            "unavailable": unavailable if isinstance(unavailable, str) else None,
            "notes": [str(n) for n in notes] if isinstance(notes, list | tuple) else [],
            "statement": lib.statement.to_json(),
        })
    return out


def _info_data(registry: Registry) -> dict[str, Any]:
    """What ``info`` shows, as JSON-ready data. Asks every library which
    devices it computes on first, so that the failures include those of
    ``computes_on``."""
    libraries = _libraries_data(registry)
    return {
        "version": __version__,
        "environment": {v: os.environ[v] for v in _VARIABLES if v in os.environ},
        "plugins": {name: str(status) for name, status in registry.plugins.items()},
        "failures": [
            {"plugin": f.name, "dist": f.dist, "during": f.during, "error": f.reason,
             "traceback": f.traceback}
            for f in registry.failures
        ],
        "libraries": libraries,
        "devices": [
            {"name": d.name, "model": d.model, "shares_host_memory": d.shares_host_memory,
             "lost": d.lost}
            for d in registry.devices()
        ],
    }


def _table(rows: list[tuple[str, str, str]]) -> list[str]:
    """``rows`` as columns: the first two padded to their widest cell."""
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    return [f"  {a:<{w0}}  {b:<{w1}}  {c}".rstrip() for a, b, c in rows]


def _info_text(registry: Registry, data: dict[str, Any], statements: bool) -> str:
    """``data`` (from :func:`_info_data`) as readable text: one row per plugin
    and library (the devices it computes on, or why none), notes beneath;
    then the devices; then, where ``statements``, each library's statement."""
    lines = [f"nxkernel {data['version']}"]
    lines += [f"{v}={value}" for v, value in data["environment"].items()]
    reasons: dict[str, str] = {}
    for f in data["failures"]:
        reasons.setdefault(f["plugin"], f"{f['during']}: {f['error']}")
    rows: list[tuple[str, str, str]] = [("plugin", "library", "computes on")]
    for name, status in data["plugins"].items():
        libs = [lib for lib in data["libraries"] if lib["plugin"] == name]
        if status == Status.FAILED:
            rows.append((name, "-", f"failed at {reasons[name]}"))
        elif status == Status.DISABLED:
            rows.append((name, "-", "disabled (NXKERNEL_PLUGINS, NXKERNEL_DISABLE)"))
        elif not libs:
            rows.append((name, "-", "brings no library"))
        for lib in libs:
            on = ", ".join(lib["computes_on"])
            why = lib["unavailable"]
            if not on:
                on = f"no device: {why}" if why else "no device here"
            elif why:
                on += f" (and no more: {why})"
            rows.append((name, lib["name"], on))
            rows += [("", "", note) for note in lib["notes"]]
    if len(rows) == 1:
        rows.append(("(none installed)", "", ""))
    lines += ["", *_table(rows)]
    others = [f for f in data["failures"] if data["plugins"].get(f["plugin"]) != Status.FAILED]
    if others:
        lines.append("\nfailures of loaded plugins:")
        lines += [f"  {f['plugin']}: {f['during']}: {f['error']}" for f in others]
    lines.append("\ndevices:")
    for d in data["devices"]:
        memory = "host memory" if d["shares_host_memory"] else "own memory"
        lost = f", LOST: {d['lost']}" if d["lost"] is not None else ""
        lines.append(f"  {d['name']:<12}{d['model']}, {memory}{lost}")
    if statements:
        for lib in registry.libraries():
            lines += ["", lib.statement.describe()]
    else:
        lines.append("\nnxkernel info --statements: what each library computes and declines"
                     " (--json: everything)")
    return "\n".join(lines)


def _info(args: argparse.Namespace) -> int:
    try:
        registry = discover()
    except PluginError as e:
        return _fail("info", str(e))
    data = _info_data(registry)
    print(json.dumps(data, indent=2) if args.json else _info_text(registry, data, args.statements))
    return 0


# --------------------------------------------------------------------------
# check
# --------------------------------------------------------------------------


#: pytest marks nxkernel's installed packages for assertion rewriting, and
#: warns that those this command has imported already (nxkernel_core itself,
#: the plugins' packages) cannot be: they hold no test, and the kit's test
#: modules, imported later, are rewritten all the same.
_QUIET_REWRITE: Final = (
    "-W",
    "ignore:Module already imported so cannot be rewritten; nxkernel_:pytest.PytestAssertRewriteWarning",
)


def _check(args: argparse.Namespace) -> int:
    try:
        discover().library(args.library)
    except (PluginError, LookupError) as e:
        return _fail("check", str(e))
    try:
        import pytest
    except ImportError:
        return _fail("check", "the conformance kit runs under pytest, which is not installed:"
                     " pip install 'nxkernel[conformance]'")
    return int(pytest.main([*_QUIET_REWRITE, "--pyargs", "nxkernel_core.conformance",
                            "--nxkernel-library", args.library, *args.pytest_args]))


def _bench(bench_args: Sequence[str]) -> int:
    if not os.path.isfile(os.path.join("benchmarks", "run.py")):
        return _fail("bench", f"no benchmarks/run.py in {os.getcwd()}: the benchmarks belong to a"
                     " source checkout; run nxkernel bench (or python -m benchmarks.run) in its root")
    return subprocess.call([sys.executable, "-m", "benchmarks.run", *bench_args])


# --------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nxkernel", description="Compute kernels held to the Nx_kernel contract.")
    parser.add_argument("--version", action="version", version=f"nxkernel {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    info = commands.add_parser(
        "info", help="list plugins, libraries and the devices they compute on (or why none)")
    info.add_argument("--statements", action="store_true",
                      help="also print each library's statement")
    info.add_argument("--json", action="store_true", help="print everything, statements too, as JSON")
    info.set_defaults(run=_info)
    check = commands.add_parser(
        "check", help="run the conformance kit against a library",
        description="Run pytest --pyargs nxkernel_core.conformance --nxkernel-library"
        " LIBRARY; arguments after LIBRARY go to pytest.")
    check.add_argument("library", metavar="LIBRARY")
    check.add_argument("pytest_args", nargs=argparse.REMAINDER, metavar="PYTEST_ARG")
    check.set_defaults(run=_check)
    bench = commands.add_parser(
        "bench", help="in a source checkout's root: run its benchmarks (python -m benchmarks.run)",
        description="Run python -m benchmarks.run in the current directory, a source checkout's"
        " root; every argument goes to it (see its --help).")
    bench.add_argument("bench_args", nargs=argparse.REMAINDER, metavar="ARG")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``nxkernel`` command with ``argv`` (default ``sys.argv[1:]``) and
    return its exit status; with no command, print the usage and return 2."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["bench"]:  # every argument, options too, is the benchmarks'
        return _bench(argv[1:])
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_usage(sys.stderr)
        return 2
    status: int = args.run(args)
    return status

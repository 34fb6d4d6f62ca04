"""NVRTC, found and chosen: every ``libnvrtc`` this process can load, and the
one the CUDA driver can run the cubins of.

Rules:

* NVRTC is loaded with ``ctypes`` from its shared library, so that NVRTC 12
  and NVRTC 13 can both be loaded in one process (CI compiles every kernel
  with each). :func:`found` looks, in order, in every ``sys.path`` entry's
  ``nvidia/*/lib`` (the ``nvidia-cuda-nvrtc`` wheel puts NVRTC 13 in
  ``nvidia/cu13/lib``, ``nvidia-cuda-nvrtc-cu12`` NVRTC 12 in
  ``nvidia/cuda_nvrtc/lib``), then for ``libnvrtc.so.13`` and
  ``libnvrtc.so.12`` where the dynamic loader finds them (``LD_LIBRARY_PATH``,
  a system CUDA); one library per version, the first found.
* :func:`select` chooses: ``$NXKERNEL_NVRTC`` where set (a major version,
  ``12`` or ``13``, or the path of a ``libnvrtc.so``); else the newest NVRTC
  whose major version is not newer than the driver's CUDA (a cubin runs on
  any driver of its major version or newer: CUDA's minor version
  compatibility covers cubins, and nothing here is PTX); else, without a
  driver (compiling only, as CI does), the newest. :func:`chosen` is that
  choice for this process's driver, made once.
* A library's builtins (``libnvrtc-builtins.so.M.m``, beside it) are loaded
  first, because the wheels' NVRTC 13 finds them by name only.
"""

from __future__ import annotations

import ctypes
import functools
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, final

__all__ = [
    "MAJORS",
    "Nvrtc",
    "NvrtcUnavailable",
    "Refused",
    "chosen",
    "describe",
    "driver_version",
    "found",
    "select",
]

#: The NVRTC major versions the kernels are compiled with, newest first.
MAJORS: Final[tuple[int, ...]] = (13, 12)

#: The variable that forces a choice: a major version or a library's path.
VARIABLE: Final = "NXKERNEL_NVRTC"

_SUCCESS: Final = 0
_LIBRARY: Final = re.compile(r"libnvrtc\.so\.(\d+)")


class NvrtcUnavailable(RuntimeError):
    """No NVRTC can be loaded, or none the driver can run the cubins of."""


class Refused(Exception):
    """NVRTC refused a program: ``log`` is its log (with the reason)."""

    def __init__(self, log: str) -> None:
        super().__init__(log)
        self.log: Final = log


@final
@dataclass(frozen=True, slots=True)
class Nvrtc:
    """One loaded NVRTC: its library's path, its version, its architectures."""

    path: str
    version: tuple[int, int]
    #: The ``sm_XX`` architectures it compiles for.
    arches: tuple[str, ...]
    _lib: ctypes.CDLL = field(repr=False, compare=False)

    def __str__(self) -> str:
        return f"NVRTC {self.version[0]}.{self.version[1]} ({self.path})"

    def _call(self, what: str, status: int) -> None:
        if status != _SUCCESS:
            self._lib.nvrtcGetErrorString.restype = ctypes.c_char_p
            text = self._lib.nvrtcGetErrorString(status) or b"unknown error"
            raise RuntimeError(f"NVRTC {what}: {text.decode()} ({status})")

    def compile(
        self, name: str, text: str, headers: Sequence[tuple[str, str]], kernels: Sequence[str],
        options: Sequence[str],
    ) -> tuple[bytes, dict[str, str], str]:
        """The cubin of ``text`` (called ``name``) with ``headers`` (include
        name, text) and ``options``, each kernel name expression's lowered
        name, and the log; :class:`Refused` where NVRTC refuses the program or
        it lacks a kernel."""
        lib = self._lib
        prog = ctypes.c_void_p()
        names = (ctypes.c_char_p * max(len(headers), 1))(*(h[0].encode() for h in headers))
        texts = (ctypes.c_char_p * max(len(headers), 1))(*(h[1].encode() for h in headers))
        self._call("create program", lib.nvrtcCreateProgram(
            ctypes.byref(prog), text.encode(), name.encode(), len(headers), texts, names))
        try:
            for expr in kernels:
                self._call(f"name expression {expr!r}", lib.nvrtcAddNameExpression(prog, expr.encode()))
            opts = (ctypes.c_char_p * max(len(options), 1))(*(o.encode() for o in options))
            status = lib.nvrtcCompileProgram(prog, len(options), opts)
            size = ctypes.c_size_t()
            self._call("log size", lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size)))
            buf = ctypes.create_string_buffer(max(size.value, 1))
            self._call("log", lib.nvrtcGetProgramLog(prog, buf))
            log = buf.value.decode(errors="replace")
            if status != _SUCCESS:
                raise Refused(log)
            lowered: dict[str, str] = {}
            for expr in kernels:
                out = ctypes.c_char_p()
                status = lib.nvrtcGetLoweredName(prog, expr.encode(), ctypes.byref(out))
                if status != _SUCCESS or not out.value:
                    raise Refused(f"{log}\nno kernel for the name expression {expr!r}")
                lowered[expr] = out.value.decode()
            self._call("cubin size", lib.nvrtcGetCUBINSize(prog, ctypes.byref(size)))
            data = ctypes.create_string_buffer(size.value)
            self._call("cubin", lib.nvrtcGetCUBIN(prog, data))
            return data.raw, lowered, log
        finally:
            lib.nvrtcDestroyProgram(ctypes.byref(prog))


def _load(path: str) -> Nvrtc:
    """The NVRTC of the library at ``path`` (a path or a soname); ``OSError``
    or ``RuntimeError`` where it cannot be loaded or answers no version."""
    folder = Path(path).parent
    if folder != Path("."):
        match = _LIBRARY.search(Path(path).name)
        major = match.group(1) if match else "*"
        for builtins in sorted(folder.glob(f"libnvrtc-builtins.so.{major}.*")):
            ctypes.CDLL(str(builtins))  # found by name when NVRTC loads it
    lib = ctypes.CDLL(path)
    major_v, minor_v = ctypes.c_int(), ctypes.c_int()
    if lib.nvrtcVersion(ctypes.byref(major_v), ctypes.byref(minor_v)) != _SUCCESS:
        raise RuntimeError(f"{path}: nvrtcVersion failed")
    count = ctypes.c_int()
    if lib.nvrtcGetNumSupportedArchs(ctypes.byref(count)) != _SUCCESS:
        raise RuntimeError(f"{path}: nvrtcGetNumSupportedArchs failed")
    arches = (ctypes.c_int * max(count.value, 1))()
    if lib.nvrtcGetSupportedArchs(arches) != _SUCCESS:
        raise RuntimeError(f"{path}: nvrtcGetSupportedArchs failed")
    return Nvrtc(path, (major_v.value, minor_v.value),
                 tuple(f"sm_{a}" for a in arches[: count.value]), lib)


def _candidates() -> list[str]:
    """The libraries to try, in order (see the module's rules)."""
    paths: list[str] = []
    for entry in sys.path:
        base = Path(entry or ".") / "nvidia"
        if base.is_dir():
            paths.extend(str(p) for p in sorted(base.glob("*/lib/libnvrtc.so.*"))
                         if _LIBRARY.fullmatch(p.name))
    paths.extend(f"libnvrtc.so.{major}" for major in MAJORS)
    return paths


@functools.cache
def found() -> tuple[Nvrtc, ...]:
    """Every NVRTC of :data:`MAJORS` this process can load, newest first; one
    per version."""
    out: dict[tuple[int, int], Nvrtc] = {}
    for path in _candidates():
        try:
            nvrtc = _load(path)
        except (OSError, RuntimeError, AttributeError):
            continue  # absent, or not an NVRTC: the others may serve
        if nvrtc.version[0] in MAJORS:
            out.setdefault(nvrtc.version, nvrtc)
    return tuple(sorted(out.values(), key=lambda n: n.version, reverse=True))


@functools.cache
def driver_version() -> int | None:
    """The CUDA driver's version (``cuDriverGetVersion``: 12040 for 12.4), or
    ``None`` where no driver can be loaded."""
    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
        version = ctypes.c_int()
        if libcuda.cuDriverGetVersion(ctypes.byref(version)) != _SUCCESS or version.value <= 0:
            return None
    except (OSError, AttributeError):
        return None
    return int(version.value)


def _remedy(major: int) -> str:
    """What to install for a driver of CUDA ``major``."""
    if major < min(MAJORS):
        return f"the kernels need a driver for CUDA {min(MAJORS)} or newer"
    return f"pip install 'nxkernel[cuda{min(major, MAJORS[0])}]'"


def select(driver: int | None, candidates: Sequence[Nvrtc] | None = None) -> Nvrtc:
    """The NVRTC to compile with for a driver of version ``driver`` (``None``:
    no driver) among ``candidates`` (default :func:`found`), by the module's
    rules; :class:`NvrtcUnavailable` saying what was found and what to install."""
    pool = tuple(found() if candidates is None else candidates)
    forced = os.environ.get(VARIABLE, "").strip()
    if forced:
        if forced.isdigit():
            match = [n for n in pool if n.version[0] == int(forced)]
            if not match:
                raise NvrtcUnavailable(
                    f"{VARIABLE}={forced}, but no NVRTC {forced} is found ({_listing(pool)});"
                    f" {_remedy(int(forced))}")
            return match[0]
        try:
            return _load(forced)
        except (OSError, RuntimeError, AttributeError) as e:
            raise NvrtcUnavailable(f"{VARIABLE}={forced} cannot be loaded ({e})") from e
    if not pool:
        raise NvrtcUnavailable(
            "no NVRTC can be loaded (looked in site-packages' nvidia/*/lib and for"
            f" {', '.join(f'libnvrtc.so.{m}' for m in MAJORS)}); {_remedy(MAJORS[0])}")
    if driver is None:
        return pool[0]
    runnable = [n for n in pool if n.version[0] <= driver // 1000]
    if not runnable:
        raise NvrtcUnavailable(
            f"no NVRTC whose cubins the driver (CUDA {driver // 1000}.{driver % 1000 // 10}) can run:"
            f" found {_listing(pool)}; {_remedy(driver // 1000)}")
    return runnable[0]


def _listing(pool: Sequence[Nvrtc]) -> str:
    return ", ".join(str(n) for n in pool) or "none"


@functools.cache
def chosen() -> Nvrtc:
    """The NVRTC this process compiles with: :func:`select` for its driver."""
    return select(driver_version())


def describe() -> str:
    """Which NVRTC this process compiles with and why, and the others found,
    in one line (``nxkernel info`` shows it)."""
    try:
        nv = chosen()
    except NvrtcUnavailable as e:
        return f"NVRTC: none: {e}"
    driver = driver_version()
    if os.environ.get(VARIABLE, "").strip():
        why = f"as {VARIABLE} says"
    elif driver is None:
        why = "no CUDA driver: the newest, for compiling only"
    else:
        why = f"the newest whose cubins the driver (CUDA {driver // 1000}.{driver % 1000 // 10}) runs"
    others = [str(n) for n in found() if n.version != nv.version]
    return f"compiles with {nv}, {why}" + (f"; also found {', '.join(others)}" if others else "")

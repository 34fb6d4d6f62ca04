"""CUDA sources, their rendering, and their compilation to cubin by NVRTC.

Rules:

* A kernel source is a :class:`Source`: a name, the CUDA C++ text, and the
  name expressions of the kernels the library launches from it (a template
  kernel is one expression per instantiation, ``"nxk_lane_sum_f32<256>"``).
  Hand-written sources are ``.cu`` files in ``nxkernel_cuda/kernels/``; their
  shared headers are the ``.cuh`` files there, every one of which is given to
  every compilation. Generated sources are rendered by pure functions from a
  ``string.Template`` with named slots (:func:`render`).
* :func:`compile` builds a source for one architecture (``"sm_90"``) to a
  cubin, never to PTX, so nothing is left to the driver's JIT, with
  :data:`OPTIONS`: no fused multiply-add contraction, IEEE division and square
  root, no flush to zero, C++17. A cubin is cached on disk (see
  :mod:`nxkernel_cuda.cache`) keyed by the source, every header, the options,
  the architecture, NVRTC's path and version and the name expressions, and
  loaded only where it and its kernel map match their seals.
* A compilation that fails raises :class:`CompileError`, carrying the source
  (and printing it numbered), its name, the kernels, the options and the log.
* Where ``NXKERNEL_CUDA_DUMP`` names a folder, a device writes every source it
  builds there before building it, with the compiler and options it builds
  with (:func:`dump`): the text the library renders, to read or to compile
  by hand.

NVRTC 12 or 13 comes from the ``nvidia-cuda-nvrtc-cu12`` or
``nvidia-cuda-nvrtc`` wheel (or a system CUDA), loaded and chosen by
:mod:`nxkernel_cuda.nvrtc`: by default the newest whose cubins the driver can
run; ``compile(..., compiler=)`` names another. Compiling needs no GPU and no
driver.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import string
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Final, final

from nxkernel_core import log as nxlog

from . import cache, nvrtc
from .nvrtc import Nvrtc, NvrtcUnavailable

__all__ = [
    "CI_ARCHES",
    "DUMP_VARIABLE",
    "KERNEL_DIR",
    "OPTIONS",
    "CompileError",
    "Cubin",
    "NvrtcUnavailable",
    "Source",
    "compile",
    "compile_options",
    "dump",
    "file_source",
    "headers",
    "numbered",
    "nvrtc_version",
    "render",
    "supported_arches",
]

#: The folder of the hand-written ``.cu`` sources and ``.cuh`` headers.
KERNEL_DIR: Final = Path(__file__).resolve().parent / "kernels"

#: The options of every compilation, beside the architecture.
OPTIONS: Final[tuple[str, ...]] = (
    "--fmad=false",      # no a*b+c contracted into an fma: each product rounds
    "-prec-div=true",    # IEEE round-to-nearest division
    "-prec-sqrt=true",   # IEEE round-to-nearest square root
    "-ftz=false",        # subnormals kept, never flushed to zero
    "-std=c++17",
    "--ptxas-options=-v",  # ptxas's report of registers, spills, smem in the log (nxkernel_cuda.ptxas)
)

#: The architectures CI compiles every source for.
CI_ARCHES: Final[tuple[str, ...]] = ("sm_80", "sm_90")

_ARCH: Final = re.compile(r"sm_(\d+)[af]?")


# --------------------------------------------------------------------------
# Sources
# --------------------------------------------------------------------------


@final
@dataclass(frozen=True, slots=True)
class Source:
    """A CUDA C++ translation unit and the kernels launched from it.

    ``name`` names it in messages and logs (``"fold.cu"``); ``kernels`` are
    the name expressions of its kernels, each launched by that expression: an
    ``extern "C"`` kernel's name, or a template kernel's instantiation.
    """

    name: str
    text: str
    kernels: tuple[str, ...]
    #: A digest of the name, text and kernels, for in-process caches.
    key: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.name.endswith(".cu"):
            raise ValueError(f"Source: the name {self.name!r} does not end in .cu")
        if not isinstance(self.kernels, tuple) or not self.kernels:
            raise ValueError(f"Source {self.name}: kernels must be a non-empty tuple of name expressions")
        if len(set(self.kernels)) != len(self.kernels):
            raise ValueError(f"Source {self.name}: a kernel is named twice in {self.kernels}")
        object.__setattr__(self, "key", cache.digest(self.name, self.text, *self.kernels))

    def numbered(self) -> str:
        """The text with line numbers, as compile errors print it."""
        return numbered(self.text)


def numbered(text: str) -> str:
    """``text`` with each line prefixed by its number (from 1)."""
    lines = text.splitlines()
    width = len(str(len(lines)))
    return "\n".join(f"{i:>{width}} | {line}" for i, line in enumerate(lines, start=1))


def file_source(filename: str, kernels: Sequence[str]) -> Source:
    """The hand-written source ``KERNEL_DIR/filename`` exporting ``kernels``."""
    path = KERNEL_DIR / filename
    return Source(filename, path.read_text(), tuple(kernels))


#: The variable naming the folder :func:`dump` writes sources into.
DUMP_VARIABLE: Final = "NXKERNEL_CUDA_DUMP"


def dump(source: Source, device: str, options: Callable[[], Sequence[str]]) -> Path | None:
    """Where ``NXKERNEL_CUDA_DUMP`` names a folder (made where missing): write
    ``source``'s text there as ``NAME-KEY-DEVICE.cu`` (KEY 16 hex digits of
    :attr:`Source.key`, DEVICE ``device`` with ``:`` as ``_``) and beside it
    ``NAME-KEY-DEVICE.json``: the source's name, its kernels, the device, and
    the compiler and options ``options()`` gives, the compiler first. The
    text's path, or None where the variable is unset or empty."""
    folder = os.environ.get(DUMP_VARIABLE, "")
    if not folder:
        return None
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"{source.name.removesuffix('.cu')}-{source.key[:16]}-{device.replace(':', '_')}"
    text = out / f"{stem}.cu"
    text.write_text(source.text)
    record = {"source": source.name, "kernels": list(source.kernels), "device": device,
              "options": list(options())}
    (out / f"{stem}.json").write_text(json.dumps(record, indent=1) + "\n")
    return text


@functools.cache
def headers() -> tuple[tuple[str, str], ...]:
    """Every ``.cuh`` header of :data:`KERNEL_DIR` as (include name, text),
    sorted by name; each compilation gets all of them."""
    return tuple((p.name, p.read_text()) for p in sorted(KERNEL_DIR.glob("*.cuh")))


def render(template: string.Template, **slots: str) -> str:
    """``template`` with every slot filled: a ``ValueError`` naming the slots
    it lacks or that it does not have, before any substitution."""
    wanted = set(template.get_identifiers())
    missing = sorted(wanted - slots.keys())
    extra = sorted(slots.keys() - wanted)
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"no value for {', '.join(missing)}")
        if extra:
            parts.append(f"no slot named {', '.join(extra)}")
        raise ValueError(f"render: {'; '.join(parts)} (the slots are {', '.join(sorted(wanted))})")
    return template.substitute(slots)


# --------------------------------------------------------------------------
# NVRTC
# --------------------------------------------------------------------------


class CompileError(Exception):
    """A compiler refused a source: the message has the log and the numbered source.

    Attributes: ``source`` (the text), ``name`` (the source's), ``kernels``,
    ``arch``, ``options`` and ``log`` (the compiler's: NVRTC's, or g++'s for
    the emulator).
    """

    def __init__(self, source: Source, arch: str, options: Sequence[str], log: str,
                 compiler: str = "NVRTC") -> None:
        self.source: Final = source.text
        self.name: Final = source.name
        self.kernels: Final = source.kernels
        self.arch: Final = arch
        self.options: Final = tuple(options)
        self.log: Final = log
        super().__init__(
            f"{compiler} could not compile {source.name} for {arch} (kernels {', '.join(source.kernels)})\n"
            f"options: {' '.join(self.options)}\n"
            f"log:\n{log.rstrip()}\n"
            f"source:\n{numbered(source.text)}"
        )

    def numbered_source(self) -> str:
        """The source with line numbers, to read next to the log."""
        return numbered(self.source)


def nvrtc_version() -> tuple[int, int]:
    """The (major, minor) version of the NVRTC this process compiles with
    (:func:`nxkernel_cuda.nvrtc.chosen`); :class:`NvrtcUnavailable` without one."""
    return nvrtc.chosen().version


def supported_arches() -> tuple[str, ...]:
    """The ``sm_XX`` architectures the chosen NVRTC compiles for."""
    return nvrtc.chosen().arches


def compile_options(arch: str) -> tuple[str, ...]:
    """The NVRTC options for ``arch``: the architecture, then :data:`OPTIONS`."""
    if _ARCH.fullmatch(arch) is None:
        raise ValueError(f"compile: arch {arch!r} is not of the form sm_XX (e.g. sm_90)")
    return (f"--gpu-architecture={arch}", *OPTIONS)


@final
@dataclass(frozen=True, slots=True)
class Cubin:
    """A compiled source: the cubin file for one architecture, and each
    kernel's lowered (mangled) name by its name expression."""

    path: Path
    arch: str
    lowered: Mapping[str, str]
    log: str


_built: dict[str, Cubin] = {}
_built_lock = threading.Lock()
_log: Final = nxlog.get("cuda.build")


def compile(source: Source, arch: str, compiler: Nvrtc | None = None) -> Cubin:
    """``source`` compiled by NVRTC to a cubin for ``arch``, from the disk cache
    where it was built before; :class:`CompileError` where NVRTC refuses it.
    ``compiler`` is the NVRTC to use (default: :func:`nxkernel_cuda.nvrtc.chosen`,
    the newest the driver can run the cubins of).

    Raises:
        CompileError: the source does not compile (or lacks a kernel it names).
        NvrtcUnavailable: NVRTC cannot be loaded.
        ValueError: ``arch`` is not one this NVRTC compiles for.
    """
    options = compile_options(arch)
    nv = compiler if compiler is not None else nvrtc.chosen()
    version = nv.version
    base = re.sub(r"[af]$", "", arch)
    if base not in nv.arches:
        raise ValueError(
            f"compile: NVRTC {version[0]}.{version[1]} does not compile for {arch}; it compiles for"
            f" {', '.join(nv.arches)}"
        )
    key = cache.digest(
        "nvrtc", nv.path, f"{version[0]}.{version[1]}", arch, *options, source.name, source.text,
        *source.kernels, *(part for h in headers() for part in h),
    )
    with _built_lock:
        hit = _built.get(key)
    if hit is not None:
        return hit  # the in-process cache: no file reads, no hashing of the cubin
    folder = cache.folder("cuda")
    path, meta = folder / f"{key}.cubin", folder / f"{key}.json"
    cubin = _read_cached(path, meta, arch)
    what = f"{source.name} for {arch} (NVRTC {version[0]}.{version[1]})"
    if cubin is not None:
        _log.debug("cache hit: %s, %s", what, path)
    elif path.exists() or meta.exists():
        _log.info("cache entry damaged or incomplete, rebuilding: %s, %s", what, path)
    if cubin is None:
        with nxlog.compiling(_log, what):
            data, lowered, log = _nvrtc_compile(nv, source, arch, options)
        record = {"source": source.name, "arch": arch, "lowered": lowered, "log": log,
                  "cubin_sha256": hashlib.sha256(data).hexdigest()}
        cache.write(meta, json.dumps(record, indent=1).encode())
        cache.write(path, data)
        cubin = Cubin(path, arch, MappingProxyType(lowered), log)
    with _built_lock:
        _built[key] = cubin
    return cubin


def _read_cached(path: Path, meta: Path, arch: str) -> Cubin | None:
    """The cached cubin at ``path`` with its kernel map ``meta``, where both
    match their seals and the map names this cubin's bytes and ``arch``;
    ``None`` where either is absent, or (with a warning) fails its check."""
    data = cache.read(path)
    raw = cache.read(meta) if data is not None else None
    if data is None or raw is None:
        return None
    try:
        record = json.loads(raw)
        lowered = {str(k): str(v) for k, v in record["lowered"].items()}
        log = str(record.get("log", ""))
        matches = record["cubin_sha256"] == hashlib.sha256(data).hexdigest() and record["arch"] == arch
    except (ValueError, KeyError, AttributeError, TypeError):
        matches = False
    if not matches:
        cache.warn(f"nxkernel cache: the kernel map {meta} does not describe {path}; building it again")
        return None
    return Cubin(path, arch, MappingProxyType(lowered), log)


def _nvrtc_compile(nv: Nvrtc, source: Source, arch: str,
                   options: Sequence[str]) -> tuple[bytes, dict[str, str], str]:
    """Compile with NVRTC ``nv``: the cubin, the lowered names, the log."""
    try:
        return nv.compile(source.name, source.text, headers(), source.kernels, options)
    except nvrtc.Refused as e:
        raise CompileError(source, arch, options, e.log) from None

"""The emulator's driver: the same CUDA sources built by g++ and launched on the CPU.

Rules:

* :func:`build` compiles a :class:`~nxkernel_cuda.build.Source`, unchanged,
  after ``emu_cuda.h`` (the launcher unit's first line includes it, then the
  source), into a shared object, with :data:`FLAGS` (IEEE floating point: no
  fast math, no contraction into fma).
  For each of the source's kernels it generates an ``extern "C"`` launcher,
  ``nxemu_launch_<i>(grid[3], block[3], shared_bytes, args, err, errlen)``,
  ``args`` being an array of pointers to the parameters' bytes as in
  ``cuLaunchKernel``, and ``nxemu_params_<i>`` giving the parameters' sizes,
  so that a launch is checked against the kernel's signature before it runs.
  A second translation unit defines the dynamic shared memory under every
  name an ``extern __shared__`` declaration of the source or the headers uses;
  it needs no header. The emulator's header is precompiled once per compiler,
  flags and header text (``emu_cuda.h.gch``, cached beside the objects), so a
  build reads it rather than parsing it.
* Objects are cached on disk like cubins (:mod:`nxkernel_cuda.cache`, folder
  ``cuda-emu``), keyed by the source, every header, the emulator's headers,
  the generated code, the flags, the defines and the compiler's version.
* A launch runs to its end before it returns. Launches are serialised
  process-wide (one lock), so the emulator's atomics and its deterministic
  order hold between launches from several Python threads too.
* A fault in a kernel (``__trap()``, a deadlock, a warp collective whose mask
  leaves out its caller) loses the device, as a sticky error loses a GPU:
  the launch raises ``Lost`` and so does every later use of the device.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import re
import shutil
import string
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final, final

import numpy as np

from nxkernel_core import log as nxlog
from nxkernel_core.rig import Lost

from .. import cache
from ..build import KERNEL_DIR, CompileError, Source, headers, render
from ..launch import Arg, Dim3Like, LaunchError, Pointer, arg_bytes, check_args, check_launch

if TYPE_CHECKING:
    from nxkernel_core.rig import Rig

__all__ = [
    "DYNAMIC_SHARED_BYTES",
    "FLAGS",
    "HEADER",
    "EmuFunction",
    "EmuModule",
    "EmulatorUnavailable",
    "build",
    "compiler",
    "extern_shared_names",
    "load",
]

#: The emulator's header, included before every source (it includes the
#: others of its folder).
HEADER: Final = Path(__file__).resolve().parent / "emu_cuda.h"


@functools.cache
def _emulator_headers() -> tuple[str, ...]:
    """The text of every header of the emulator's folder, for the cache key."""
    return tuple(p.read_text() for p in sorted(HEADER.parent.glob("*.h")))

#: Dynamic shared memory a block may have: sm_90's opt-in maximum (227 KiB).
DYNAMIC_SHARED_BYTES: Final = 232448

#: g++ flags. -O1: tests build hundreds of generated sources and run each on
#: small shapes, so compile time outweighs run time (-O2 compiles a third
#: longer). -ffp-contract=off and -fno-fast-math keep each float operation
#: IEEE-rounded on its own, as NVRTC's --fmad=false does; -fno-math-errno only
#: lets sqrt inline (the values are libm's either way); -fno-strict-aliasing and
#: -fwrapv give type punning and signed overflow the GPU's behaviour rather
#: than leave them to the optimiser; hidden visibility keeps each object's
#: copy of the runtime its own.
FLAGS: Final[tuple[str, ...]] = (
    "-O1", "-std=c++17", "-fno-fast-math", "-ffp-contract=off", "-fno-math-errno",
    "-fno-strict-aliasing", "-fwrapv", "-fPIC", "-shared", "-fvisibility=hidden",
    "-Wno-unknown-pragmas",
)

_ERRLEN: Final = 2048


class EmulatorUnavailable(RuntimeError):
    """No C++ compiler to build the emulated kernels with."""


@functools.cache
def compiler() -> tuple[str, str]:
    """The C++ compiler (``$NXKERNEL_CXX`` or ``g++``) and its version line;
    :class:`EmulatorUnavailable` where there is none."""
    name = os.environ.get("NXKERNEL_CXX", "g++")
    path = shutil.which(name)
    if path is None:
        raise EmulatorUnavailable(f"the CUDA emulator needs a C++17 compiler: {name!r} is not on PATH"
                                  " (install g++, or set NXKERNEL_CXX)")
    out = subprocess.run([path, "--version"], capture_output=True, text=True, check=False)
    version = (out.stdout.splitlines() or ["unknown"])[0]
    return path, version


# --------------------------------------------------------------------------
# Generated code
# --------------------------------------------------------------------------

# Slots: source_file, the source's file name in the build folder, included
# as it is; launchers, one _LAUNCHER per kernel. Invariant: launcher i is
# kernel i of the source, in its order.
_LAUNCH_TU: Final = string.Template("""\
// Generated by nxkernel_cuda.emulator.driver: the emulator, the source, then a launcher per kernel.
#include "emu_cuda.h"
#include "${source_file}"

${launchers}
""")

# Slots: index, the kernel's position in the source; kernel, its name
# expression without a leading '&'.
_LAUNCHER: Final = string.Template("""\
NXEMU_EXPORT int nxemu_launch_${index}(const unsigned* grid, const unsigned* block, unsigned long shared,
                                       void** args, char* err, unsigned long errlen) {
    try {
        return ::nxemu::launch(&${kernel}, grid, block, shared, args, err, errlen);
    } catch (...) {
        snprintf(err, errlen, "a C++ exception left kernel %s", "${kernel}");
        return 1;
    }
}
NXEMU_EXPORT int nxemu_params_${index}(unsigned* sizes, int room) {
    return ::nxemu::parameters(&${kernel}, sizes, room);
}
""")

# Slots: capacity, the bytes of dynamic shared memory; aliases, one line per
# name an extern __shared__ declaration uses, each naming the one array.
_SHARED_TU: Final = string.Template("""\
// Generated by nxkernel_cuda.emulator.driver: the dynamic shared memory of a block.
extern "C" {
__attribute__((visibility("hidden"), aligned(16)))
thread_local unsigned char nxemu_dynamic_shared_storage[${capacity}];
unsigned char* nxemu_dynamic_shared_base() { return nxemu_dynamic_shared_storage; }
unsigned long nxemu_dynamic_shared_capacity() { return ${capacity}ul; }
}
${aliases}
""")

_ALIAS: Final = string.Template(
    'extern thread_local unsigned char ${name}[${capacity}]'
    ' __attribute__((alias("nxemu_dynamic_shared_storage"), visibility("hidden")));'
)

_COMMENT: Final = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_EXTERN_SHARED: Final = re.compile(r"\bextern\s+__shared__\s+[^;]*?\b([A-Za-z_]\w*)\s*\[\s*\]\s*;")


def extern_shared_names(*texts: str) -> tuple[str, ...]:
    """The names ``extern __shared__ T name[];`` declarations use in ``texts``,
    sorted. They must name variables of the global namespace."""
    names: set[str] = set()
    for text in texts:
        names.update(_EXTERN_SHARED.findall(_COMMENT.sub(" ", text)))
    return tuple(sorted(names))


def launch_code(source: Source, source_file: str) -> str:
    """The launcher translation unit of ``source`` (pure)."""
    launchers = "\n".join(
        render(_LAUNCHER, index=str(i), kernel=k.lstrip("&").strip()) for i, k in enumerate(source.kernels)
    )
    return render(_LAUNCH_TU, source_file=source_file, launchers=launchers)


def shared_code(names: Sequence[str], capacity: int = DYNAMIC_SHARED_BYTES) -> str:
    """The translation unit defining the dynamic shared memory under ``names`` (pure)."""
    aliases = "\n".join(render(_ALIAS, name=n, capacity=str(capacity)) for n in names)
    return render(_SHARED_TU, capacity=str(capacity), aliases=aliases)


# --------------------------------------------------------------------------
# Building
# --------------------------------------------------------------------------

_built: dict[str, Path] = {}
_built_lock = threading.Lock()
_log: Final = nxlog.get("cuda.emulator")


def build(source: Source, defines: Sequence[str] = ()) -> Path:
    """The shared object of ``source`` for the emulator, from the disk cache
    where it was built before. ``defines`` are extra ``-D`` macros
    (``"NXEMU_UCONTEXT"`` selects the portable ucontext fibers).

    Raises:
        CompileError: g++ refuses the source (its log and the numbered source).
        EmulatorUnavailable: no C++ compiler.
    """
    gxx, version = compiler()
    hdrs = headers()
    names = extern_shared_names(source.text, *(text for _, text in hdrs))
    launch_tu = launch_code(source, source.name)
    shared_tu = shared_code(names)
    flags = (*FLAGS, *(f"-D{d}" for d in defines))
    key = cache.digest(
        "emu", version, *flags, *_emulator_headers(), launch_tu, shared_tu, source.name, source.text,
        *source.kernels, *(part for h in hdrs for part in h),
    )
    with _built_lock:
        hit = _built.get(key)
    if hit is not None:
        return hit
    folder = cache.folder("cuda-emu")
    target = folder / f"{key}.so"
    if target.is_file():
        _log.debug("cache hit: %s for the emulator, %s", source.name, target)
    else:
        with nxlog.compiling(_log, f"{source.name} for the emulator (g++)"):
            _compile(gxx, source, flags, launch_tu, shared_tu, folder, target, version)
    with _built_lock:
        _built[key] = target
    return target


def _header_folder(gxx: str, flags: Sequence[str], version: str) -> Path:
    """A folder with the emulator's headers and ``emu_cuda.h.gch``, the header
    precompiled by g++ with ``flags`` (cached like the objects, keyed by the
    compiler, the flags and the headers' text): a build then reads the
    precompiled header instead of parsing it. Where g++ cannot precompile it,
    the emulator's own folder (g++ parses the header each build)."""
    key = cache.digest("emu-pch", version, *flags, *_emulator_headers())
    root = cache.folder("cuda-emu")
    done = root / f"pch-{key}"
    if (done / "emu_cuda.h.gch").is_file():
        return done
    with tempfile.TemporaryDirectory(dir=root, prefix="pch-build-") as tmp:
        work = Path(tmp) / "headers"
        work.mkdir()
        for header in HEADER.parent.glob("*.h"):
            shutil.copyfile(header, work / header.name)
        cmd = [gxx, *(f for f in flags if f != "-shared"), "-x", "c++-header", "emu_cuda.h",
               "-o", "emu_cuda.h.gch"]
        with nxlog.compiling(_log, "the emulator's precompiled header (g++)"):
            built = subprocess.run(cmd, cwd=work, capture_output=True, check=False)
        if built.returncode != 0:
            _log.info("g++ could not precompile the emulator's header; each build parses it")
            return HEADER.parent
        with contextlib.suppress(OSError):  # another process made it first: theirs is the same
            work.rename(done)
    return done if (done / "emu_cuda.h.gch").is_file() else HEADER.parent


def _compile(gxx: str, source: Source, flags: Sequence[str], launch_tu: str, shared_tu: str,
             folder: Path, target: Path, version: str) -> None:
    """Run g++ in a fresh folder and move the object to ``target``."""
    headers = _header_folder(gxx, flags, version)
    with tempfile.TemporaryDirectory(dir=folder, prefix="build-") as tmp:
        work = Path(tmp)
        (work / source.name).write_text(source.text)
        (work / "launch.cpp").write_text(launch_tu)
        (work / "shared.cpp").write_text(shared_tu)
        out = work / "kernel.so"
        cmd = [gxx, *flags, f"-I{headers}", f"-I{KERNEL_DIR}", "-x", "c++", "launch.cpp",
               "shared.cpp", "-o", str(out)]
        proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise CompileError(source, "the emulator", cmd[1:], proc.stderr + proc.stdout, compiler=version)
        out.replace(target)  # same folder tree, so an atomic rename


# --------------------------------------------------------------------------
# Loading and launching
# --------------------------------------------------------------------------

#: One launch at a time in the process (see the module's rules).
_LAUNCH_LOCK: Final = threading.Lock()


@final
class EmuFunction:
    """A kernel of an emulated module; launches as the GPU path's functions do."""

    __slots__ = ("_launch", "_module", "_sizes", "name")

    def __init__(self, module: EmuModule, name: str, index: int) -> None:
        lib = module._library()
        self.name: Final = name
        self._module = module
        self._launch = getattr(lib, f"nxemu_launch_{index}")
        self._launch.restype = ctypes.c_int
        self._launch.argtypes = [ctypes.POINTER(ctypes.c_uint), ctypes.POINTER(ctypes.c_uint), ctypes.c_ulong,
                                 ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p, ctypes.c_ulong]
        params = getattr(lib, f"nxemu_params_{index}")
        params.restype = ctypes.c_int
        room = 64
        sizes = (ctypes.c_uint * room)()
        count = params(sizes, room)
        self._sizes: Final = tuple(int(sizes[i]) for i in range(min(count, room)))

    def __repr__(self) -> str:
        return f"EmuFunction({self.name!r} on {self._module.device.name})"

    @property
    def parameter_sizes(self) -> tuple[int, ...]:
        """The byte size of each of the kernel's parameters."""
        return self._sizes

    def __call__(self, grid: Dim3Like, block: Dim3Like, args: Sequence[Arg], *,
                 shared_bytes: int = 0) -> None:
        """Launch the kernel and run it to its end (see :class:`~nxkernel_cuda.launch.Function`)."""
        device = self._module.device
        device.check()
        g, b = check_launch(self.name, grid, block, shared_bytes, DYNAMIC_SHARED_BYTES)
        values = check_args(self.name, args)
        blob, pointers = self._marshal(values)
        grid3 = (ctypes.c_uint * 3)(*g.as_tuple())
        block3 = (ctypes.c_uint * 3)(*b.as_tuple())
        err = ctypes.create_string_buffer(_ERRLEN)
        with _LAUNCH_LOCK:
            device.check()
            status = self._launch(grid3, block3, shared_bytes, pointers, err, _ERRLEN)
        del blob  # the parameters' bytes lived until the launch returned
        message = err.value.decode(errors="replace")
        if status == 1:
            why = f"kernel {self.name} faulted: {message}"
            device.lose(why)
            raise Lost(device, why)
        if status != 0:
            raise LaunchError(f"launch of {self.name}: {message}")

    def _marshal(
        self, values: tuple[Arg, ...]
    ) -> tuple[ctypes.Array[ctypes.c_ubyte], ctypes.Array[ctypes.c_void_p]]:
        """The parameters' bytes in one buffer, each 16-byte aligned, and the
        array of pointers to them; a LaunchError where they do not match the
        kernel's parameters in number and size."""
        if len(values) != len(self._sizes):
            raise LaunchError(
                f"launch of {self.name}: {len(values)} arguments for {len(self._sizes)} parameters"
            )
        raw = [arg_bytes(v) for v in values]
        for i, (data, size) in enumerate(zip(raw, self._sizes, strict=True)):
            if len(data) != size:
                kind = "a Pointer" if isinstance(values[i], Pointer) else f"a {np.asarray(values[i]).dtype}"
                raise LaunchError(
                    f"launch of {self.name}: argument {i} is {kind} of {len(data)} bytes, but the parameter"
                    f" has {size}"
                )
        offsets, total = [], 0
        for data in raw:
            offsets.append(total)
            total += (len(data) + 15) // 16 * 16
        blob = (ctypes.c_ubyte * max(total, 16))()
        base = ctypes.addressof(blob)
        for off, data in zip(offsets, raw, strict=True):
            ctypes.memmove(base + off, data, len(data))
        pointers = (ctypes.c_void_p * max(len(raw), 1))(*(base + off for off in offsets))
        return blob, pointers


@final
class EmuModule:
    """A source built for the emulator and loaded for one device; the shared
    object is loaded on the first :meth:`function`."""

    __slots__ = ("_functions", "_lib", "_lock", "device", "path", "source")

    def __init__(self, device: Rig, source: Source, path: Path) -> None:
        self.device: Final = device
        self.source: Final = source
        self.path: Final = path
        self._lib: ctypes.CDLL | None = None
        self._functions: dict[str, EmuFunction] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"EmuModule({self.source.name!r} on {self.device.name})"

    def _library(self) -> ctypes.CDLL:
        if self._lib is None:
            self._lib = ctypes.CDLL(str(self.path))
        return self._lib

    def function(self, kernel: str) -> EmuFunction:
        """The kernel of name expression ``kernel``."""
        with self._lock:
            fn = self._functions.get(kernel)
            if fn is None:
                try:
                    index = self.source.kernels.index(kernel)
                except ValueError:
                    kernels = ", ".join(self.source.kernels)
                    raise KeyError(f"{self.source.name} has no kernel {kernel!r}; it has {kernels}") from None
                fn = self._functions[kernel] = EmuFunction(self, kernel, index)
            return fn


def load(device: Rig, source: Source, defines: Sequence[str] = ()) -> EmuModule:
    """``source`` built (or found in the cache) and loaded for ``device``."""
    return EmuModule(device, source, build(source, defines))

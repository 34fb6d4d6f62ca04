"""The emulator's driver: the same CUDA sources built by g++ and launched on the CPU.

Rules:

* :func:`build` compiles a :class:`~nxkernel_cuda.build.Source`, unchanged,
  after ``emu_cuda.h`` (the launcher unit's first line includes it, then the
  source), into a shared object, with :data:`FLAGS` (IEEE floating point: no
  fast math, no contraction into fma).
  For each of the source's kernels it generates an ``extern "C"`` launcher,
  ``nxemu_launch_<i>(grid[3], block[3], shared_bytes, args, allocs, n_allocs,
  err, errlen)``, ``args`` being an array of pointers to the parameters' bytes
  as in ``cuLaunchKernel`` and ``allocs`` the device's live allocations
  (:class:`Allocations`), and ``nxemu_params_<i>`` giving the parameters'
  sizes, so that a launch is checked against the kernel's signature before it
  runs. Where :func:`memcheck` is on (``$NXKERNEL_EMU_MEMCHECK=1``), the
  source is compiled with :data:`CHECK_FLAGS`, the memory checker's
  instrumentation (``emu_memcheck.h``), and linked without it.
  A second translation unit defines the dynamic shared memory under every
  name an ``extern __shared__`` declaration of the source or the headers uses;
  it needs no header. The emulator's runtime (``emu_runtime.cpp``: fibers,
  barrier, rendezvous, launch, memory checker) is compiled once per compiler,
  flags and emulator text, with the header precompiled beside it
  (``emu_cuda.h.gch``), in a runtime folder cached beside the objects; a build
  compiles the source and its launchers alone, reading the precompiled header,
  and links the runtime's object into the module, so each module has its own
  copy of the runtime's state.
* Objects are cached on disk like cubins (:mod:`nxkernel_cuda.cache`, folder
  ``cuda-emu``), keyed by the source, every header, the emulator's headers and
  runtime, the generated code, the flags, the defines and the compiler's path
  and version. The cache loads only what it built: an object is checked
  against its seal before ``dlopen``, the runtime folder (every file in it)
  before g++ reads or links it; one that fails is rebuilt, with a warning.
* A launch runs to its end before it returns. Launches are serialised
  process-wide (one lock), so the emulator's atomics and its deterministic
  order hold between launches from several Python threads too.
* A fault in a kernel (``__trap()``, a deadlock, a warp collective whose mask
  leaves out its caller, an access misaligned for its type or outside the
  device's allocations, the block's shared memory, the thread's stack and the
  module) loses the device, as a sticky error loses a GPU: the launch raises
  ``Lost`` and so does every later use of the device.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import os
import re
import shutil
import string
import subprocess
import tempfile
import threading
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final, final

import numpy as np

from nxkernel_core import log as nxlog
from nxkernel_core.rig import Lost

from .. import cache
from ..build import KERNEL_DIR, CompileError, Source, headers, render
from ..launch import (
    SHARED_WITHOUT_OPT_IN,
    Arg,
    Dim3Like,
    LaunchError,
    Pointer,
    arg_bytes,
    check_args,
    check_launch,
)

if TYPE_CHECKING:
    from nxkernel_core.rig import Rig

__all__ = [
    "CHECK_FLAGS",
    "DYNAMIC_SHARED_BYTES",
    "FLAGS",
    "HEADER",
    "Allocations",
    "EmuFunction",
    "EmuModule",
    "EmulatorUnavailable",
    "allocations_of",
    "build",
    "compiler",
    "extern_shared_names",
    "load",
]

#: The emulator's header, included before every source (it includes the
#: others of its folder).
HEADER: Final = Path(__file__).resolve().parent / "emu_cuda.h"


#: The emulator's runtime (fibers, barrier, rendezvous, launch, memory
#: checker), compiled once per compiler, flags and emulator text, and linked
#: into every module; its object's name in the runtime folder.
RUNTIME: Final = HEADER.parent / "emu_runtime.cpp"
RUNTIME_OBJECT: Final = "emu_runtime.o"


@functools.cache
def _emulator_files() -> tuple[str, ...]:
    """The text of every header of the emulator's folder and of its runtime,
    for the cache keys."""
    return (*(p.read_text() for p in sorted(HEADER.parent.glob("*.h"))), RUNTIME.read_text())

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

#: The instrumentation of the memory checker (``emu_memcheck.h``): every load
#: and store a call to the emulator's check of its alignment and bounds. The
#: checks are the emulator's own functions; no sanitizer library is linked.
#: (-fsanitize=alignment, an inline test of each pointer's type alignment,
#: costs g++ 40% more compile time; the sized hooks see the same misaligned
#: accesses but those of under-aligned aggregates.)
CHECK_FLAGS: Final[tuple[str, ...]] = (
    "-fsanitize=kernel-address",
    "--param=asan-instrumentation-with-call-threshold=0", "--param=asan-stack=0", "--param=asan-globals=0",
    "--param=asan-use-after-return=0", "-fno-sanitize-address-use-after-scope",
)

_ERRLEN: Final = 2048

#: The variable that turns the memory checker on.
MEMCHECK_VARIABLE: Final = "NXKERNEL_EMU_MEMCHECK"


def memcheck() -> bool:
    """Whether kernels are built with the memory checker (``$NXKERNEL_EMU_MEMCHECK``
    set and not ``0``). Off by default; the CUDA tests turn it on
    (``tests/cuda/conftest.py``, ``emulator/README.md``)."""
    return os.environ.get(MEMCHECK_VARIABLE, "") not in ("", "0")


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
                                       void** args, const unsigned long long* allocs, unsigned long n_allocs,
                                       char* err, unsigned long errlen) {
    try {
        return ::nxemu::launch(&${kernel}, grid, block, shared, args, allocs, n_allocs, err, errlen);
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
#: What each object was built from, to build it again where it fails its check at load.
_recipes: dict[Path, tuple[Source, tuple[str, ...]]] = {}
_built_lock = threading.Lock()
_log: Final = nxlog.get("cuda.emulator")


def build(source: Source, defines: Sequence[str] = (), rebuild: bool = False) -> Path:
    """The shared object of ``source`` for the emulator, from the disk cache
    where it was built before and matches its seal (built again, where
    ``rebuild``). ``defines`` are extra ``-D`` macros (``"NXEMU_UCONTEXT"``
    selects the portable ucontext fibers).

    Raises:
        CompileError: g++ refuses the source (its log and the numbered source).
        EmulatorUnavailable: no C++ compiler, or one that cannot compile the
            emulator's runtime.
    """
    gxx, version = compiler()
    hdrs = headers()
    names = extern_shared_names(source.text, *(text for _, text in hdrs))
    launch_tu = launch_code(source, source.name)
    shared_tu = shared_code(names)
    flags = (*FLAGS, *(CHECK_FLAGS if memcheck() else ()), *(f"-D{d}" for d in defines))
    key = cache.digest(
        "emu", gxx, version, *flags, *_emulator_files(), launch_tu, shared_tu, source.name, source.text,
        *source.kernels, *(part for h in hdrs for part in h),
    )
    with _built_lock:
        hit = _built.get(key)
    if hit is not None and not rebuild:
        return hit
    folder = cache.folder("cuda-emu")
    target = folder / f"{key}.so"
    if not rebuild and cache.verified(target):
        _log.debug("cache hit: %s for the emulator, %s", source.name, target)
    else:
        with nxlog.compiling(_log, f"{source.name} for the emulator (g++)"):
            _compile(gxx, source, flags, launch_tu, shared_tu, folder, target, version)
    with _built_lock:
        _built[key] = target
        _recipes[target] = (source, tuple(defines))
    return target


#: The runtime folders this process has checked (or built).
_runtime_checked: set[Path] = set()
_runtime_lock = threading.Lock()


def _runtime_folder(gxx: str, flags: Sequence[str], version: str) -> Path:
    """A folder with the emulator's headers, its runtime compiled by g++ with
    ``flags`` (``emu_runtime.o``, which every module links) and, where g++ can
    precompile it, ``emu_cuda.h.gch``, so a build neither parses the header nor
    compiles the runtime. Cached like the objects, keyed by the compiler's path
    and version, the flags and the emulator's text, and sealed as a whole: a
    folder that fails its check is set aside and built again.

    Raises:
        EmulatorUnavailable: g++ cannot compile the runtime.
    """
    key = cache.digest("emu-runtime", gxx, version, *flags, *_emulator_files())
    root = cache.folder("cuda-emu")
    done = root / f"runtime-{key}"
    with _runtime_lock:
        if done in _runtime_checked or cache.verified_tree(done):
            _runtime_checked.add(done)
            return done
        if done.exists():  # failed its check: set aside, so that the rename below can land
            aside = Path(tempfile.mkdtemp(dir=root, prefix="runtime-damaged-"))
            with contextlib.suppress(OSError):
                done.rename(aside / "old")
            shutil.rmtree(aside, ignore_errors=True)
        with tempfile.TemporaryDirectory(dir=root, prefix="runtime-build-") as tmp:
            work = Path(tmp) / "runtime"
            work.mkdir()
            for file in (*HEADER.parent.glob("*.h"), RUNTIME):
                shutil.copyfile(file, work / file.name)
            compile_flags = [f for f in flags if f != "-shared"]
            runtime = [gxx, *compile_flags, "-c", "-x", "c++", RUNTIME.name, "-o", RUNTIME_OBJECT]
            with nxlog.compiling(_log, "the emulator's runtime (g++)"):
                built = subprocess.run(runtime, cwd=work, capture_output=True, text=True, check=False)
            if built.returncode != 0:
                raise EmulatorUnavailable(f"g++ ({version}) cannot compile the emulator's runtime:\n"
                                          f"{(built.stderr + built.stdout)[-4000:]}")
            pch = [gxx, *compile_flags, "-x", "c++-header", "emu_cuda.h", "-o", "emu_cuda.h.gch"]
            with nxlog.compiling(_log, "the emulator's precompiled header (g++)"):
                if subprocess.run(pch, cwd=work, capture_output=True, check=False).returncode != 0:
                    _log.info("g++ could not precompile the emulator's header; each build parses it")
            cache.seal_tree(work, done)
            with contextlib.suppress(OSError):  # another process made it first: theirs is the same
                work.rename(done)
        if not cache.verified_tree(done):
            raise EmulatorUnavailable(f"the emulator's runtime folder {done} fails its check after"
                                      " building it")
        _runtime_checked.add(done)
        return done


def _compile(gxx: str, source: Source, flags: Sequence[str], launch_tu: str, shared_tu: str,
             folder: Path, target: Path, version: str) -> None:
    """Run g++ in a fresh folder, link the launchers and the shared memory with
    the runtime, and move the object to ``target``."""
    runtime = _runtime_folder(gxx, flags, version)
    with tempfile.TemporaryDirectory(dir=folder, prefix="build-") as tmp:
        work = Path(tmp)
        (work / source.name).write_text(source.text)
        (work / "launch.cpp").write_text(launch_tu)
        (work / "shared.cpp").write_text(shared_tu)
        out = work / "kernel.so"
        # Compiled, then linked without the sanitizer flags, which would link
        # g++'s sanitizer libraries: the checks are emu_memcheck.h's.
        cmd = [gxx, *flags, f"-I{runtime}", f"-I{KERNEL_DIR}", "-c", "-x", "c++", "launch.cpp", "shared.cpp"]
        link = [gxx, "-shared", "-fPIC", "launch.o", "shared.o", str(runtime / RUNTIME_OBJECT), "-o",
                str(out)]
        for step in (cmd, link):
            proc = subprocess.run(step, cwd=work, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                raise CompileError(source, "the emulator", step[1:], proc.stderr + proc.stdout,
                                   compiler=version)
        cache.write(target, out.read_bytes())  # sealed, and atomic


# --------------------------------------------------------------------------
# Loading and launching
# --------------------------------------------------------------------------

#: One launch at a time in the process (see the module's rules).
_LAUNCH_LOCK: Final = threading.Lock()


@final
class EmuFunction:
    """A kernel of an emulated module; launches as the GPU path's functions do."""

    __slots__ = ("_launch", "_module", "_opted_in", "_sizes", "name")

    def __init__(self, module: EmuModule, name: str, index: int) -> None:
        lib = module._library()
        self.name: Final = name
        self._module = module
        self._launch = getattr(lib, f"nxemu_launch_{index}")
        self._launch.restype = ctypes.c_int
        self._launch.argtypes = [ctypes.POINTER(ctypes.c_uint), ctypes.POINTER(ctypes.c_uint), ctypes.c_ulong,
                                 ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_ulong,
                                 ctypes.c_char_p, ctypes.c_ulong]
        params = getattr(lib, f"nxemu_params_{index}")
        params.restype = ctypes.c_int
        room = 64
        sizes = (ctypes.c_uint * room)()
        count = params(sizes, room)
        self._sizes: Final = tuple(int(sizes[i]) for i in range(min(count, room)))
        self._opted_in = SHARED_WITHOUT_OPT_IN

    def __repr__(self) -> str:
        return f"EmuFunction({self.name!r} on {self._module.device.name})"

    @property
    def parameter_sizes(self) -> tuple[int, ...]:
        """The byte size of each of the kernel's parameters."""
        return self._sizes

    @property
    def max_dynamic_shared_size_bytes(self) -> int:
        """The dynamic shared memory a launch may ask for (48 KiB until raised)."""
        return self._opted_in

    @max_dynamic_shared_size_bytes.setter
    def max_dynamic_shared_size_bytes(self, nbytes: int) -> None:
        if not 0 <= nbytes <= DYNAMIC_SHARED_BYTES:
            raise LaunchError(f"{self.name}: max_dynamic_shared_size_bytes {nbytes} is outside"
                              f" [0, {DYNAMIC_SHARED_BYTES}]")
        self._opted_in = nbytes

    def __call__(self, grid: Dim3Like, block: Dim3Like, args: Sequence[Arg], *,
                 shared_bytes: int = 0) -> None:
        """Opt into ``shared_bytes`` where needed, then :meth:`launch`."""
        if self._opted_in < shared_bytes <= DYNAMIC_SHARED_BYTES:
            self.max_dynamic_shared_size_bytes = shared_bytes
        self.launch(grid, block, args, shared_bytes=shared_bytes)

    def launch(self, grid: Dim3Like, block: Dim3Like, args: Sequence[Arg], *, shared_bytes: int = 0) -> None:
        """Launch the kernel and run it to its end (see :class:`~nxkernel_cuda.launch.Function`)."""
        device = self._module.device
        device.check()
        g, b = check_launch(self.name, grid, block, shared_bytes, DYNAMIC_SHARED_BYTES, self._opted_in)
        values = check_args(self.name, args)
        blob, pointers = self._marshal(values)
        grid3 = (ctypes.c_uint * 3)(*g.as_tuple())
        block3 = (ctypes.c_uint * 3)(*b.as_tuple())
        err = ctypes.create_string_buffer(_ERRLEN)
        with _LAUNCH_LOCK:
            device.check()
            table, count = self._module.allocations.table()
            status = self._launch(grid3, block3, shared_bytes, pointers, table, count, err, _ERRLEN)
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
class Allocations:
    """The live allocations of an emulated device, which its kernels may
    address: the memory checker's table, sorted ``[lo, hi)`` address pairs.

    The table is rebuilt, when the allocations changed, only by :meth:`table`,
    which launches call under the launch lock: a running launch's table lives
    until the next launch.

    Rule: :meth:`remove` takes no lock. It runs from a memory's finalizer,
    which the garbage collector may start on any thread at any allocation,
    also on one inside :meth:`table` or :meth:`add` holding the lock (a
    non-reentrant lock then waits on itself forever; seen in CI, the
    Array API suite on ``cuda-emu:0`` hanging in ``table``'s ``sorted``). It
    appends the address to ``_freed`` (atomic), and every locked operation
    takes the freed addresses out of the spans first: before :meth:`add`
    records a new allocation, which may reuse a freed address, and before
    :meth:`table` builds the table a launch checks against.
    """

    __slots__ = ("_dirty", "_freed", "_lock", "_spans", "_table")

    def __init__(self) -> None:
        self._spans: dict[int, int] = {}
        self._freed: deque[int] = deque()
        self._lock = threading.Lock()
        self._table = np.zeros(2, dtype=np.uint64)
        self._dirty = False

    def _forget_freed(self) -> None:
        """Take the freed addresses out of the spans (under the lock)."""
        while self._freed:
            if self._spans.pop(self._freed.popleft(), None) is not None:
                self._dirty = True

    def add(self, address: int, nbytes: int) -> None:
        """Record the allocation of ``nbytes`` at ``address``."""
        with self._lock:
            self._forget_freed()
            self._spans[address] = address + nbytes
            self._dirty = True

    def remove(self, address: int) -> None:
        """Forget the allocation at ``address`` (freed), from the next table on;
        takes no lock (see the class's rule)."""
        self._freed.append(address)

    def __len__(self) -> int:
        with self._lock:
            self._forget_freed()
            return len(self._spans)

    def table(self) -> tuple[int, int]:
        """The address of the sorted pairs and their count."""
        with self._lock:
            self._forget_freed()
            if self._dirty:
                pairs = sorted(self._spans.items())
                self._table = np.array(pairs if pairs else [(0, 0)], dtype=np.uint64).reshape(-1)
                self._dirty = False
            count = len(self._spans)
        return self._table.ctypes.data, count


def allocations_of(device: Rig) -> Allocations:
    """The allocation table an emulated device keeps (its ``allocations``);
    a TypeError for a device that keeps none (its kernels could address nothing)."""
    found = getattr(device, "allocations", None)
    if not isinstance(found, Allocations):
        raise TypeError(f"{device.name} keeps no allocation table for the emulator's memory checker")
    return found


@final
class EmuModule:
    """A source built for the emulator and loaded for one device; the shared
    object is loaded on the first :meth:`function`. Its kernels may address
    the device's ``allocations``."""

    __slots__ = ("_functions", "_lib", "_lock", "allocations", "device", "path", "source")

    def __init__(self, device: Rig, source: Source, path: Path) -> None:
        self.device: Final = device
        self.allocations: Final = allocations_of(device)
        self.source: Final = source
        self.path: Final = path
        self._lib: ctypes.CDLL | None = None
        self._functions: dict[str, EmuFunction] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"EmuModule({self.source.name!r} on {self.device.name})"

    def _library(self) -> ctypes.CDLL:
        if self._lib is None:
            self._lib = _open(self.path)
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


#: The objects this process loaded, by the SHA-256 of their bytes: one copy each.
_libraries: dict[str, ctypes.CDLL] = {}
_libraries_lock = threading.Lock()


def _open(path: Path) -> ctypes.CDLL:
    """The object at ``path`` loaded, from the very bytes that matched its
    seal; built again (with a warning) where they do not.

    The checked bytes are loaded from a private copy, unlinked once loaded, so
    that nothing done to the cache after the check (a swap, a truncation of
    the file while mapped) reaches what runs."""
    data = cache.read(path)
    if data is None:
        with _built_lock:
            recipe = _recipes.get(path)
        if recipe is None:
            raise FileNotFoundError(f"the emulator's object {path} was not built by this process")
        path = build(*recipe, rebuild=True)
        data = cache.read(path)
        if data is None:
            raise OSError(f"the emulator's object {path} fails its check just after it was built")
    sha = hashlib.sha256(data).hexdigest()
    with _libraries_lock:
        lib = _libraries.get(sha)
        if lib is None:
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix="load-", suffix=".so")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                lib = _libraries[sha] = ctypes.CDLL(tmp)
            finally:
                os.unlink(tmp)
        return lib


def load(device: Rig, source: Source, defines: Sequence[str] = ()) -> EmuModule:
    """``source`` built (or found in the cache) and loaded for ``device``."""
    return EmuModule(device, source, build(source, defines))

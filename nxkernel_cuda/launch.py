"""The launch path every kernel of the library takes, on ``cuda:N`` and ``cuda-emu:N`` alike.

A device (:class:`CudaRig`: :class:`~nxkernel_cuda.runtime.CudaDevice` or
:class:`~nxkernel_cuda.device.EmuDevice`) loads a
:class:`~nxkernel_cuda.build.Source` as a :class:`Module`, once per device,
writing the source and its options where ``NXKERNEL_CUDA_DUMP`` names a
folder (:func:`~nxkernel_cuda.build.dump`) before it builds it;
a module's :class:`Function` (one per name expression) launches as
``function(grid, block, args, shared_bytes=0)``, the signature of
``cuLaunchKernel`` and of CuPy's ``RawKernel``: ``grid`` and ``block`` as
:class:`Dim3` (or an int or a 1-3 tuple), ``args`` one per kernel parameter,
each a :class:`Pointer` (a device address) or a NumPy scalar of the
parameter's C type (``np.int64(n)`` for a ``long long``, ``np.float32`` for a
``float``). A launch is queued on the device's stream in order; the emulator
runs it before returning.

The configuration is checked here, once, before either backend sees it, and
against CUDA's limits (a block of at most 1024 threads, x and y at most 1024,
z at most 64; a grid of x < 2^31, y and z at most 65535; no extent 0), so a
launch the emulator accepts is one a GPU accepts. An empty problem launches
nothing: the caller skips it.
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol, TypeAlias, final

import numpy as np

from nxkernel_core.rig import Buffer, Rig

from .build import Source, dump

if TYPE_CHECKING:
    from nxkernel_core.array import Array

__all__ = [
    "MAX_BLOCK",
    "MAX_GRID",
    "MAX_THREADS",
    "SHARED_WITHOUT_OPT_IN",
    "Arg",
    "CudaRig",
    "Dim3",
    "Dim3Like",
    "Function",
    "LaunchError",
    "Module",
    "Pointer",
    "check_args",
    "check_launch",
]

#: Threads in a block, at most.
MAX_THREADS: Final = 1024
#: A block's extents, at most.
MAX_BLOCK: Final = (1024, 1024, 64)
#: A grid's extents, at most.
MAX_GRID: Final = (2**31 - 1, 65535, 65535)
#: Dynamic shared memory a kernel may take before it opts into more
#: (``max_dynamic_shared_size_bytes``, CUDA's
#: ``cudaFuncAttributeMaxDynamicSharedMemorySize``).
SHARED_WITHOUT_OPT_IN: Final = 48 * 1024


class LaunchError(ValueError):
    """A launch its configuration or arguments refuse; nothing ran, and the
    device stays usable (unlike a fault in a kernel, which loses it)."""


@final
@dataclass(frozen=True, slots=True)
class Dim3:
    """A grid's or a block's extents, CUDA's ``dim3``."""

    x: int
    y: int = 1
    z: int = 1

    @staticmethod
    def of(value: Dim3Like) -> Dim3:
        """``value`` as a Dim3: a Dim3, an int, or a tuple of 1 to 3 ints."""
        if isinstance(value, Dim3):
            return value
        if isinstance(value, int | np.integer):
            return Dim3(int(value))
        parts = tuple(int(v) for v in value)
        if not 1 <= len(parts) <= 3:
            raise LaunchError(f"a dim3 has 1 to 3 extents, not {len(parts)}: {value!r}")
        return Dim3(*parts)

    @property
    def count(self) -> int:
        """The number of threads (or blocks) it spans."""
        return self.x * self.y * self.z

    def as_tuple(self) -> tuple[int, int, int]:
        return (self.x, self.y, self.z)


Dim3Like: TypeAlias = "Dim3 | int | Sequence[int]"


@final
@dataclass(frozen=True, slots=True)
class Pointer:
    """A device address, passed to a pointer parameter."""

    address: int

    def __post_init__(self) -> None:
        if not 0 <= self.address < 2**64:
            raise ValueError(f"Pointer: {self.address:#x} is not a 64-bit address")

    def __add__(self, nbytes: int) -> Pointer:
        return Pointer(self.address + nbytes)


#: A kernel argument: a device address or a NumPy scalar of the parameter's type.
Arg: TypeAlias = "Pointer | np.number | np.bool_"


def check_launch(name: str, grid: Dim3Like, block: Dim3Like, shared_bytes: int,
                 max_shared_bytes: int, opted_in: int | None = None) -> tuple[Dim3, Dim3]:
    """The grid and block of a launch of kernel ``name`` as Dim3; a
    :class:`LaunchError` naming the kernel where CUDA would refuse them, the
    dynamic shared memory exceeds ``max_shared_bytes`` (the device's), or it
    exceeds ``opted_in`` (the kernel's ``max_dynamic_shared_size_bytes``)."""
    g, b = Dim3.of(grid), Dim3.of(block)
    problems = []
    if min(g.as_tuple()) < 1 or any(v > m for v, m in zip(g.as_tuple(), MAX_GRID, strict=True)):
        problems.append(f"grid {g.as_tuple()} is outside [1, {MAX_GRID}]")
    if min(b.as_tuple()) < 1 or any(v > m for v, m in zip(b.as_tuple(), MAX_BLOCK, strict=True)):
        problems.append(f"block {b.as_tuple()} is outside [1, {MAX_BLOCK}]")
    elif b.count > MAX_THREADS:
        problems.append(f"block {b.as_tuple()} has {b.count} threads, more than {MAX_THREADS}")
    if not 0 <= shared_bytes <= max_shared_bytes:
        problems.append(f"{shared_bytes} bytes of dynamic shared memory is outside [0, {max_shared_bytes}]")
    elif opted_in is not None and shared_bytes > opted_in:
        problems.append(f"{shared_bytes} bytes of dynamic shared memory is more than the {opted_in} the"
                        " kernel opted into (max_dynamic_shared_size_bytes;"
                        f" {SHARED_WITHOUT_OPT_IN} without opting in)")
    if problems:
        raise LaunchError(f"launch of {name}: " + "; ".join(problems))
    return g, b


def check_args(name: str, args: Sequence[Arg]) -> tuple[Arg, ...]:
    """``args`` as a tuple; a :class:`LaunchError` naming the kernel and the
    argument where one is neither a Pointer nor a NumPy number or bool scalar
    (a Python int or float has no C type: say ``np.int64(n)``)."""
    out = tuple(args)
    for i, a in enumerate(out):
        if not isinstance(a, Pointer | np.number | np.bool_):
            raise LaunchError(
                f"launch of {name}: argument {i} is a {type(a).__name__}, not a Pointer or a NumPy"
                " scalar of the parameter's C type (e.g. np.int64(n))"
            )
    return out


def arg_bytes(a: Arg) -> bytes:
    """The bytes a kernel parameter holds for ``a``: an address as 8 bytes,
    a scalar as its NumPy bytes (native order)."""
    if isinstance(a, Pointer):
        return a.address.to_bytes(8, "little")
    return a.tobytes()


class Function(Protocol):
    """A kernel of a loaded module, launched on its device's stream."""

    @property
    def name(self) -> str:
        """The kernel's name expression."""
        ...

    max_dynamic_shared_size_bytes: int
    """The dynamic shared memory a launch may ask for (CUDA's function
    attribute): :data:`SHARED_WITHOUT_OPT_IN` until raised, at most the device's."""

    def launch(self, grid: Dim3Like, block: Dim3Like, args: Sequence[Arg], *, shared_bytes: int = 0) -> None:
        """Launch as ``cuLaunchKernel`` does: refused (``LaunchError``) where
        ``shared_bytes`` exceeds ``max_dynamic_shared_size_bytes``."""
        ...

    def __call__(self, grid: Dim3Like, block: Dim3Like, args: Sequence[Arg], *,
                 shared_bytes: int = 0) -> None:
        """Launch over ``grid`` blocks of ``block`` threads with ``args`` and
        ``shared_bytes`` of dynamic shared memory per block, first raising
        ``max_dynamic_shared_size_bytes`` to ``shared_bytes`` where it is less
        (the opt-in a launch of more than 48 KiB needs).

        Raises:
            LaunchError: the configuration or the arguments are refused.
            nxkernel_core.rig.Lost: the device is lost, or the kernel faulted
                (which loses it).
        """
        ...


class Module(Protocol):
    """A source loaded on a device."""

    @property
    def source(self) -> Source:
        ...

    def function(self, kernel: str) -> Function:
        """The kernel called by name expression ``kernel``; a ``KeyError``
        naming the module's kernels where it has none of that name."""
        ...


def first_element(array: Array) -> int:
    """The byte offset in its buffer of an array's element at offset 0 of its
    layout: ``layout.offset`` elements in; a ``ValueError`` for a sub-byte
    dtype, whose elements do not start on bytes."""
    if array.dtype.bits % 8 != 0:
        raise ValueError(f"a {array.dtype.name} array's elements do not start on bytes")
    return array.layout.offset * (array.dtype.bits // 8)


class CudaRig(Rig, metaclass=abc.ABCMeta):
    """A device the CUDA library computes on: loads sources as modules.

    ``arch`` is the architecture its kernels are built for (and, emulated, the
    one whose limits it keeps); ``max_shared_bytes`` the dynamic shared memory
    a block may have.
    """

    arch: str
    max_shared_bytes: int

    def __init__(self, name: str, *, model: str, shares_host_memory: bool, budget: int | None = None) -> None:
        super().__init__(name, model=model, shares_host_memory=shares_host_memory, budget=budget)
        self._modules: dict[str, Module] = {}
        self._modules_lock = threading.Lock()

    @property
    def arch_number(self) -> int:
        """The architecture as a number (``sm_90`` -> 90)."""
        return int("".join(ch for ch in self.arch if ch.isdigit()))

    def load(self, source: Source) -> Module:
        """``source`` built for this device and loaded (once per device; dumped
        first where ``NXKERNEL_CUDA_DUMP`` is set)."""
        self.check()
        with self._modules_lock:
            module = self._modules.get(source.key)
        if module is None:
            dump(source, self.name, self.build_options)
            module = self._load(source)
            with self._modules_lock:
                module = self._modules.setdefault(source.key, module)
        return module

    @abc.abstractmethod
    def build_options(self) -> tuple[str, ...]:
        """The compiler and the options this device builds a source with."""

    @abc.abstractmethod
    def _load(self, source: Source) -> Module:
        """``source`` built and loaded on this device (the GPU's cubin or the
        emulator's shared object)."""

    @abc.abstractmethod
    def pointer(self, buffer: Buffer) -> Pointer:
        """The device address of ``buffer``'s first byte."""

    @abc.abstractmethod
    def synchronize(self) -> None:
        """Wait until the work queued on the device is done."""

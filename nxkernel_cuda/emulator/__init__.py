"""The emulated CUDA device's machinery: ``emu_cuda.h`` and its driver.

See ``README.md`` here for what runs under emulation and what does not.
"""

from __future__ import annotations

from .driver import (
    CHECK_FLAGS,
    DYNAMIC_SHARED_BYTES,
    FLAGS,
    HEADER,
    Allocations,
    EmuFunction,
    EmulatorUnavailable,
    EmuModule,
    allocations_of,
    build,
    compiler,
    extern_shared_names,
    load,
)

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

"""The emulated CUDA device's machinery: ``emu_cuda.h`` and its driver.

See ``README.md`` here for what runs under emulation and what does not.
"""

from __future__ import annotations

from .driver import (
    DYNAMIC_SHARED_BYTES,
    FLAGS,
    HEADER,
    EmuFunction,
    EmulatorUnavailable,
    EmuModule,
    build,
    compiler,
    extern_shared_names,
    load,
)

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

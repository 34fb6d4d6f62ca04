"""The ``host`` entry point: registers the host library with nxkernel's discovery."""

from __future__ import annotations

from typing import cast

from nxkernel_core.kernel import Library
from nxkernel_core.plugins import hookimpl

from .library import library


@hookimpl
def nxkernel_libraries() -> list[Library]:
    """The host library (a ``nxkernel_core.library.Library``, which keeps the
    protocol: tests/host/test_library.py)."""
    return [cast(Library, library)]

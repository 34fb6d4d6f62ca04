"""The ``host`` entry point: registers the host library with nxkernel's discovery."""

from __future__ import annotations

from nxkernel_core.kernel import Library
from nxkernel_core.plugins import hookimpl

from .library import library


@hookimpl
def nxkernel_libraries() -> list[Library]:
    """The host library."""
    return [library]

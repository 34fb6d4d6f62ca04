"""The disk cache of built kernels: cubins (NVRTC) and shared objects (the emulator).

Rule: an entry's name is the SHA-256 of everything that decides its bytes
(source text, every header's text, compiler options, architecture, compiler
version, name expressions, and this package's format version), so a stale
entry is never found, only left behind. Entries are written to a temporary
file in the same folder and renamed into place, so a reader sees a whole entry
or none, and two processes building the same entry at once both succeed.

The cache lives under ``$NXKERNEL_CACHE`` where that is set, else under
``$XDG_CACHE_HOME/nxkernel`` or ``~/.cache/nxkernel``; each kind of entry has
its own folder (``cuda`` for cubins, ``cuda-emu`` for the emulator's objects).
Deleting the folder is always safe.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Final

__all__ = ["FORMAT", "digest", "folder", "root", "write_atomic"]

#: Bumped whenever what an entry holds, or how it is built, changes meaning.
FORMAT: Final = "nxkernel-cuda-cache-1"


def root() -> Path:
    """The cache's root folder (not created)."""
    explicit = os.environ.get("NXKERNEL_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "nxkernel"


def folder(kind: str) -> Path:
    """The folder of one kind of entry (``"cuda"``, ``"cuda-emu"``), created."""
    path = root() / kind
    path.mkdir(parents=True, exist_ok=True)
    return path


def digest(*parts: str | bytes) -> str:
    """The hex SHA-256 of ``parts``, each length-prefixed so that no two
    different sequences of parts collide by concatenation."""
    h = hashlib.sha256(FORMAT.encode())
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file renamed into place."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise

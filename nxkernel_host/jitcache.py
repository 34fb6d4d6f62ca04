"""Numba's on-disk cache of the host library's compiled loops, kept true to
the package's sources as a whole.

Rule: no loop is loaded from Numba's cache unless every module of the
package is, byte for byte, what it was when the cache's files were written,
and Numba's settings that shape the code it compiles (``SETTINGS``) are as
they were.

Why: Numba keys a cached function on its own bytecode and its own file's
contents alone, while a loop inlines what it calls from other modules
(``simdbase``'s Exp, ``lanedots``' products, ``attnunits``' tiles). After
one of those changes, a caller in an unchanged file would load the machine
code compiled from the old version: other bits, silently, until its own
file changes. It happened in development (attention's tiles kept an old
``lanedots``); an upgrade that left a caller's file as it was would do the
same. Numba's key holds none of its own settings either: a process run with
``NUMBA_ENABLE_PROFILING=1`` (for ``perf``) left attention's tiles compiled
3× slower for every later process.

How: ``refresh`` stamps the package (a SHA-256 of the settings' values and
of each module's name and bytes, in name order) and compares it with the
stamp kept in the cache's folder (``STAMP``); where they differ, or none is
kept, it removes the cache's files there (``*.nbi``, ``*.nbc``) first and
then writes the new stamp, atomically. The package's import runs it
(``guard``) before any loop is compiled or loaded. Processes importing at
once may remove the same files twice, which is harmless: Numba reads a
missing file as a miss and compiles. The folder is the one Numba's own
locators choose for the package's modules (``__pycache__`` beside them, or
``NUMBA_CACHE_DIR``'s, or the user-wide one).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from pathlib import Path
from typing import Final

__all__ = ["SETTINGS", "STAMP", "guard", "refresh", "settings", "stamp"]

#: The stamp's file name in the cache's folder.
STAMP: Final = "nxkernel-host-sources.sha256"
#: Numba's cache files: an index per function, a data file per signature.
_CACHE_FILES: Final = ("*.nbi", "*.nbc")
#: Numba's settings (``numba.core.config``) that change the code it compiles
#: but not its cache's key (the target's CPU name and features are in it).
SETTINGS: Final = ("ENABLE_PROFILING", "OPT", "BOUNDSCHECK", "DEBUGINFO_DEFAULT",
                   "LOOP_VECTORIZE", "SLP_VECTORIZE")


def settings() -> str:
    """``SETTINGS``' values in this process, as one line."""
    from numba.core import config

    return " ".join(f"{name}={getattr(config, name, None)!r}" for name in SETTINGS)


def stamp(sources: Path, flags: str = "") -> str:
    """The SHA-256 of ``flags`` and of every ``*.py`` module directly in
    ``sources``: each one's name and bytes, in name order."""
    digest = hashlib.sha256(flags.encode() + b"\0")
    for path in sorted(sources.glob("*.py")):
        digest.update(path.name.encode() + b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def refresh(sources: Path, cache: Path, flags: str = "") -> bool:
    """Remove Numba's cache files in ``cache`` unless the stamp kept there is
    ``stamp(sources, flags)``, then keep that stamp; True where files were
    removed or no stamp was kept. Nothing happens where ``cache`` does not
    exist (nothing is cached yet: Numba creates it when it first writes)."""
    if not cache.is_dir():
        return False
    want = stamp(sources, flags)
    kept = cache / STAMP
    try:
        if kept.read_text().strip() == want:
            return False
    except FileNotFoundError:
        pass
    for pattern in _CACHE_FILES:
        for path in cache.glob(pattern):
            path.unlink(missing_ok=True)
    fd, name = tempfile.mkstemp(prefix=STAMP, dir=cache)
    with os.fdopen(fd, "w") as f:
        f.write(want + "\n")
    os.replace(name, kept)
    return True


def _cache_folder() -> Path:
    """The folder where Numba caches this package's loops: its own locators'
    choice for a function of this package."""
    from numba.core.caching import FunctionCache

    return Path(FunctionCache(_cache_folder).cache_path)  # type: ignore[no-untyped-call]


def guard() -> None:
    """``refresh`` this package's cache. Where the folder cannot be written
    (another user's), it is left as it is, as Numba alone would leave it."""
    with contextlib.suppress(OSError):
        refresh(Path(__file__).parent, _cache_folder(), settings())

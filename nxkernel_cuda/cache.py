"""The disk cache of built kernels: cubins (NVRTC) and shared objects (the emulator).

Rules:

* An entry's name is the SHA-256 of everything that decides its bytes (source
  text, every header's text, compiler options, architecture, the compiler's
  path and version, name expressions, and this package's format version), so a
  stale entry is never found, only left behind.
* The cache loads only what it built. Three defences, each against its own
  threat:

  - **Private folders** (against other local users planting or swapping
    entries): every folder is created ``0700``; a folder owned by another user,
    or writable by group or others, is refused with a :class:`CacheWarning`
    saying so, and the cache falls back to the default folder, then to a fresh
    private temporary one.
  - **A seal per entry** (against damage and mismatch: a truncated, corrupted,
    emptied or half-written entry, or one swapped with another key's): each
    artefact ``NAME`` has a record ``NAME.mac`` holding an HMAC-SHA256 of its
    file name (its key) and its bytes, written at build time and checked
    before the artefact is loaded (:func:`read`, :func:`verified`). A
    folder of artefacts (the precompiled header) is sealed as a whole: the
    names and bytes of all its files, and nothing else in it.
  - **A per-user secret** (against entries made by anyone but this user's
    nxkernel: a cache copied in from elsewhere, or files planted while a folder
    was open to others): the HMAC's key is 32 random bytes in ``secret`` in
    the private root, created ``0600``; whoever cannot read it cannot seal.

  What it does not defend against: this user (or root) rewriting the cache
  between the check and the load; they run code as this user anyway.
* An entry that fails its check is never loaded: a :class:`CacheWarning`
  names it, and the caller builds it again and writes it over the old one.
  Nothing about a damaged entry is fatal.
* Every write is atomic (a temporary file in the same folder, then
  ``os.replace``), the seal before the artefact: a reader sees a whole
  artefact with its seal, or no artefact (and builds it itself); two
  processes building one entry at once both succeed.

The cache lives under ``$NXKERNEL_CACHE`` where that is set, else under
``$XDG_CACHE_HOME/nxkernel`` or ``~/.cache/nxkernel``; each kind of entry has
its own folder (``cuda`` for cubins, ``cuda-emu`` for the emulator's objects).
Deleting the folder is always safe.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import hmac
import os
import secrets
import shutil
import stat
import tempfile
import threading
import warnings
from pathlib import Path
from typing import Final

from nxkernel_core import log as nxlog

__all__ = [
    "FORMAT",
    "CacheWarning",
    "digest",
    "folder",
    "read",
    "refusal",
    "root",
    "seal_tree",
    "usable_root",
    "verified",
    "verified_tree",
    "warn",
    "write",
    "write_atomic",
]

#: Bumped whenever what an entry holds, or how it is built, changes meaning.
FORMAT: Final = "nxkernel-cuda-cache-2"

#: The suffix of an artefact's seal file.
SEAL: Final = ".mac"
#: The seal file of a sealed folder, inside it.
TREE_SEAL: Final = "nxkernel.mac"

_SECRET: Final = "secret"
_SECRET_BYTES: Final = 32

_log: Final = nxlog.get("cache")


class CacheWarning(UserWarning):
    """A cache folder was refused, or an entry failed its check and is rebuilt."""


def warn(message: str) -> None:
    """Report a refused folder or a failed entry: a :class:`CacheWarning` and a log record."""
    _log.warning(message)
    warnings.warn(message, CacheWarning, stacklevel=3)


def root() -> Path:
    """The configured cache root (not created, not checked)."""
    explicit = os.environ.get("NXKERNEL_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    return _default_root()


def _default_root() -> Path:
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "nxkernel"


def refusal(path: Path) -> str | None:
    """Why the existing folder ``path`` may not hold cache entries, or ``None``:
    it is not a folder, is owned by another user, or is writable by group or
    others. (Followed through symbolic links: what matters is who can write
    the folder the files land in.)"""
    try:
        st = path.stat()
    except OSError as e:
        return f"it cannot be read ({e.strerror})"
    if not stat.S_ISDIR(st.st_mode):
        return "it is not a folder"
    if st.st_uid != os.geteuid():
        return f"it is owned by uid {st.st_uid}, not by this user (uid {os.geteuid()})"
    if st.st_mode & 0o022:
        who = " and ".join(w for w, bit in (("group", 0o020), ("others", 0o002)) if st.st_mode & bit)
        return f"it is writable by {who} (mode {st.st_mode & 0o777:04o})"
    return None


def _private(path: Path) -> str | None:
    """Create ``path`` 0700 where absent; why it may not be used, or ``None``."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as e:
        return f"it cannot be created ({e.strerror})"
    return refusal(path)


_roots: dict[Path, Path] = {}
_roots_lock: Final = threading.Lock()


def usable_root() -> Path:
    """The root entries go to: the configured one where it is private (created
    0700 where absent), else, with a :class:`CacheWarning` saying why, the
    default one, else a fresh private temporary folder removed at exit."""
    configured = root()
    with _roots_lock:
        found = _roots.get(configured)
        if found is not None and refusal(found) is None:
            return found
        candidates = [configured] + ([_default_root()] if _default_root() != configured else [])
        chosen: Path | None = None
        for path in candidates:
            why = _private(path)
            if why is None:
                chosen = path
                break
            warn(f"nxkernel cache: the folder {path} is refused, since {why}; not using it")
        if chosen is None:
            chosen = Path(tempfile.mkdtemp(prefix="nxkernel-cache-"))
            atexit.register(shutil.rmtree, chosen, True)
            warn(f"nxkernel cache: using the private temporary folder {chosen} for this process")
        _roots[configured] = chosen
        return chosen


def folder(kind: str) -> Path:
    """The private folder of one kind of entry (``"cuda"``, ``"cuda-emu"``),
    created 0700; a refused one is replaced by a private temporary folder."""
    base = usable_root()
    path = base / kind
    why = _private(path)
    if why is None:
        return path
    warn(f"nxkernel cache: the folder {path} is refused, since {why}; not using it")
    with _roots_lock:
        fresh = Path(tempfile.mkdtemp(prefix=f"nxkernel-cache-{kind}-"))
    atexit.register(shutil.rmtree, fresh, True)
    return fresh


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
    """Write ``data`` to ``path`` (mode 0600) through a temporary file renamed into place."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# --------------------------------------------------------------------------
# The secret and the seals
# --------------------------------------------------------------------------


def _secret_of(base: Path) -> bytes:
    """The per-user secret of the root ``base``, created 0600 on first use; a
    secret others could read, or not of its size, is replaced (with a warning:
    every entry sealed with it is then rebuilt)."""
    path = base / _SECRET
    for _ in range(3):
        try:
            st = path.stat()
        except FileNotFoundError:
            data = secrets.token_bytes(_SECRET_BYTES)
            fd, tmp = tempfile.mkstemp(dir=base, prefix="secret.", suffix=".tmp")  # mkstemp: 0600
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                os.link(tmp, path)  # fails where another process made it first: use theirs
                return data
            except FileExistsError:
                continue
            finally:
                Path(tmp).unlink(missing_ok=True)
        data = path.read_bytes()
        if st.st_uid == os.geteuid() and not st.st_mode & 0o077 and len(data) == _SECRET_BYTES:
            return data
        warn(f"nxkernel cache: the secret {path} is readable by others or damaged; making a new one")
        path.unlink(missing_ok=True)
    raise OSError(f"nxkernel cache: could not make the secret {path}")


@functools.cache
def _secret_cached(base: Path) -> bytes:
    return _secret_of(base)


def _hmac(name: str) -> hmac.HMAC:
    """An HMAC under this user's secret, fed with the format and the entry's name."""
    mac = hmac.new(_secret_cached(usable_root()), FORMAT.encode(), hashlib.sha256)
    mac.update(len(name.encode()).to_bytes(8, "little") + name.encode())
    return mac


def _mac(name: str, data: bytes) -> str:
    mac = _hmac(name)
    mac.update(data)
    return mac.hexdigest()


def _seal_path(path: Path) -> Path:
    return path.with_name(path.name + SEAL)


def write(path: Path, data: bytes) -> None:
    """Write the artefact ``data`` to ``path`` with its seal, each atomically,
    the seal first."""
    write_atomic(_seal_path(path), _mac(path.name, data).encode())
    write_atomic(path, data)


def _check(path: Path, mac: str, seal: Path | None = None) -> bool:
    """Whether ``mac`` (of what is at ``path``) is the one in ``path``'s seal
    (``seal``, else ``NAME.mac``); a warning where not."""
    try:
        recorded = (seal or _seal_path(path)).read_bytes().strip()
    except OSError:
        recorded = b""
    if hmac.compare_digest(recorded, mac.encode()):
        return True
    what = "has no seal" if not recorded else "does not match its seal"
    warn(f"nxkernel cache: {path} {what} (damaged, swapped or not built here): not loading it;"
          " building it again")
    return False


def read(path: Path) -> bytes | None:
    """The bytes of the artefact at ``path`` where it exists and matches its
    seal; ``None`` where it is absent, and ``None`` with a warning where it
    fails its check."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        warn(f"nxkernel cache: {path} cannot be read ({e.strerror}); building it again")
        return None
    return data if _check(path, _mac(path.name, data)) else None


def verified(path: Path) -> bool:
    """Whether the artefact at ``path`` exists and matches its seal (a warning
    where it exists and does not)."""
    return read(path) is not None


def _tree_mac(top: Path, name: str) -> str | None:
    """The HMAC, for the entry ``name``, of every file under ``top`` as
    length-prefixed (relative name, bytes) in name order; ``None`` where
    something there is not a plain file or a folder."""
    mac = _hmac(name)
    for p in sorted(top.rglob("*")):
        if p == top / TREE_SEAL:
            continue
        if p.is_symlink() or not (p.is_file() or p.is_dir()):
            return None
        if p.is_file():
            rel = p.relative_to(top).as_posix().encode()
            mac.update(b"F" + len(rel).to_bytes(8, "little") + rel)
            mac.update(p.stat().st_size.to_bytes(8, "little"))
            with p.open("rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    mac.update(chunk)
    return mac.hexdigest()


def seal_tree(top: Path, final: Path) -> None:
    """Seal the folder ``top`` (every file in it, and nothing else) for the
    path ``final`` it is about to be renamed to; the seal is the file
    :data:`TREE_SEAL` inside it, so that the rename installs both at once."""
    mac = _tree_mac(top, final.name)
    if mac is None:
        raise OSError(f"nxkernel cache: {top} holds something other than plain files")
    write_atomic(top / TREE_SEAL, mac.encode())


def verified_tree(top: Path) -> bool:
    """Whether the folder ``top`` exists and holds exactly the files, with the
    bytes, it was sealed with (a warning where it exists and does not)."""
    if not top.is_dir():
        return False
    try:
        mac = _tree_mac(top, top.name)
    except OSError:
        mac = None
    if mac is None:
        warn(f"nxkernel cache: {top} holds something other than plain files: not using it;"
              " building it again")
        return False
    return _check(top, mac, top / TREE_SEAL)

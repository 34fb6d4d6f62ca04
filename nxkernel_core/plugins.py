"""Discovery: the libraries and devices that plugins bring, found with pluggy.

A plugin is what an entry point of the group ``nxkernel.libraries`` loads, a
module or an object, holding implementations of the hooks below, marked with
:data:`hookimpl`::

    # pyproject.toml of a third party:
    [project.entry-points."nxkernel.libraries"]
    mylib = "mylib.nxkernel_plugin"

    # mylib/nxkernel_plugin.py
    from nxkernel_core.plugins import hookimpl

    @hookimpl
    def nxkernel_libraries():
        return [LIBRARY]

Discovery loads each plugin in its own ``try``: a plugin that fails to import,
fails pluggy's validation, names an unknown hook, or raises in (or returns
other than lists from) its hooks is recorded as a :class:`PluginFailure` and
contributes nothing, and the others load as if it were absent. Two variables
choose the plugins: ``NXKERNEL_PLUGINS=a,b`` loads only those, and raises
:class:`PluginError` where one of them fails or does not exist;
``NXKERNEL_DISABLE=a,b`` skips those (and wins over ``NXKERNEL_PLUGINS``).

Discovery runs once per process (:func:`discover` caches its registry). The
caller resolves the libraries of a device once and calls them directly: no
kernel call goes through a pluggy hook (a hook call costs over a microsecond).
"""

from __future__ import annotations

import enum
import importlib.metadata
import os
import threading
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, final

import pluggy

from . import log
from .kernel import Library, check_library, close_match

if TYPE_CHECKING:
    from .rig import Rig

__all__ = [
    "ENTRY_POINT_GROUP",
    "PluginError",
    "PluginFailure",
    "Registry",
    "Status",
    "discover",
    "hookimpl",
    "hookspec",
]

#: The entry-point group plugins are found in.
ENTRY_POINT_GROUP: Final = "nxkernel.libraries"
_PROJECT: Final = "nxkernel"

#: Marks a hook specification (in this module only).
hookspec: Final = pluggy.HookspecMarker(_PROJECT)
#: Marks a plugin's hook implementation.
hookimpl: Final = pluggy.HookimplMarker(_PROJECT)


class _Hooks:
    """The hooks a plugin may implement. Each is called once per discovery;
    return the same objects every time (a refreshed discovery registers
    devices again, and a device's name stays its own)."""

    @hookspec
    def nxkernel_libraries(self) -> list[Library]:
        """The kernel libraries the plugin brings, each keeping the
        :class:`~nxkernel_core.kernel.Library` protocol. Cheap: import what
        the libraries need lazily, and report an unusable device through
        ``computes_on`` rather than by raising."""
        return []

    @hookspec
    def nxkernel_devices(self) -> list[Rig]:
        """The devices the plugin opens (``cuda:0``, …); discovery registers
        each with ``rig.register`` unless it is registered already."""
        return []


#: The hooks, in the order discovery calls them: devices first, so that a
#: plugin's libraries may find its devices.
_HOOKS: Final[tuple[str, ...]] = ("nxkernel_devices", "nxkernel_libraries")


class Status(enum.StrEnum):
    """What became of a plugin."""

    LOADED = "loaded"
    FAILED = "failed"
    DISABLED = "disabled"


@final
@dataclass(frozen=True, slots=True)
class PluginFailure:
    """A plugin, or one of its libraries, that failed, with the exception.

    ``during`` says at what step: ``"load"`` (import), ``"register"`` (hook
    validation), a hook's name, ``"libraries"`` (what the hooks returned) or
    ``"computes_on(DEVICE)"``; only the last leaves the plugin loaded.
    """

    #: The plugin's (entry point's) name.
    name: str
    #: The distribution that declares it, where known.
    dist: str | None
    error: BaseException
    #: The formatted traceback of ``error``.
    traceback: str
    during: str = "load"

    @property
    def reason(self) -> str:
        """The failure in one line: ``"ImportError: no module named x"``."""
        return f"{type(self.error).__name__}: {self.error}"


class PluginError(RuntimeError):
    """A plugin that ``NXKERNEL_PLUGINS`` names failed or does not exist."""


# --------------------------------------------------------------------------
# The registry
# --------------------------------------------------------------------------


@final
class Registry:
    """The outcome of one discovery: the plugins and what became of each, the
    libraries in the order the caller asks them, and the failures.

    Libraries are ordered by ``priority`` (an optional int attribute, default
    0, higher first), then by plugin name, then in the order their plugin
    returned them. Library names are unique.
    """

    __slots__ = ("_by_device", "_failures", "_libraries", "_lock", "_plugins", "_providers")

    def __init__(
        self,
        plugins: Mapping[str, Status],
        failures: Sequence[PluginFailure],
        libraries: Sequence[tuple[str, Library]],
    ) -> None:
        """Args:
            plugins: each plugin's status, by name.
            failures: the failures of discovery.
            libraries: (plugin name, library) pairs, in the caller's order.
        """
        self._plugins: Final = dict(plugins)
        self._failures: list[PluginFailure] = list(failures)
        self._libraries: Final = tuple(lib for _, lib in libraries)
        self._providers: Final = {lib.name: plugin for plugin, lib in libraries}
        # device name -> (device, its libraries); keyed by name, checked by identity.
        self._by_device: dict[str, tuple[Rig, tuple[Library, ...]]] = {}
        self._lock: Final = threading.Lock()

    @property
    def plugins(self) -> Mapping[str, Status]:
        """Every plugin found, by name, with its status."""
        return dict(self._plugins)

    @property
    def failures(self) -> tuple[PluginFailure, ...]:
        """The failures so far: discovery's, then those of ``computes_on``."""
        return tuple(self._failures)

    def libraries(self) -> tuple[Library, ...]:
        """Every library, in the order the caller asks them."""
        return self._libraries

    def library(self, name: str) -> Library:
        """The library called ``name``; a ``LookupError`` naming the libraries
        and the closest name where there is none."""
        for lib in self._libraries:
            if lib.name == name:
                return lib
        names = [lib.name for lib in self._libraries]
        raise LookupError(
            f"no kernel library {name!r}{close_match(name, names)}; the libraries are"
            f" {', '.join(names) or '(none)'}"
        )

    def provider(self, library: str) -> str:
        """The name of the plugin that brought the library called ``library``."""
        return self._providers[library]

    def devices(self) -> tuple[Rig, ...]:
        """Every device: ``rig.devices()``, which holds those the plugins
        brought, as discovery registered them."""
        from . import rig

        return rig.devices()

    def libraries_for(self, device: Rig) -> tuple[Library, ...]:
        """The libraries that compute on ``device``, in the caller's order.

        A library whose ``computes_on`` raises is left out and the error
        recorded in :attr:`failures`. The answer is computed once per device.
        """
        cached = self._by_device.get(device.name)
        # Fast path: a dict look-up, not a computes_on per library per call.
        if cached is not None and cached[0] is device:
            return cached[1]
        with self._lock:
            found: list[Library] = []
            for lib in self._libraries:
                try:
                    if lib.computes_on(device):
                        found.append(lib)
                except Exception as e:
                    plugin = self._providers[lib.name]
                    self._failures.append(
                        _failure(plugin, None, e, f"computes_on({device.name})"))
            libs = tuple(found)
            self._by_device[device.name] = (device, libs)
            return libs


# --------------------------------------------------------------------------
# Discovery
# --------------------------------------------------------------------------

_registry: Registry | None = None
_discover_lock: Final = threading.Lock()
_log: Final = log.get("plugins")


def discover(refresh: bool = False) -> Registry:
    """The registry of the installed plugins, discovered once per process
    (again where ``refresh``).

    Raises:
        PluginError: a plugin ``NXKERNEL_PLUGINS`` names does not exist or
            fails; nothing is cached then.
    """
    global _registry
    with _discover_lock:
        if _registry is None or refresh:
            _registry = _discover()
        return _registry


def _names(variable: str) -> list[str]:
    """The comma-separated names in an environment variable, blanks dropped."""
    return [n.strip() for n in os.environ.get(variable, "").split(",") if n.strip()]


def _failure(name: str, dist: str | None, error: BaseException, during: str) -> PluginFailure:
    """The failure of plugin ``name`` at step ``during``, with ``error``'s
    traceback; logged as a warning (``nxkernel.plugins``)."""
    tb = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    failure = PluginFailure(name, dist, error, tb, during)
    _log.warning("plugin %r (from %s) failed at %s: %s", name, dist, during, failure.reason)
    _log.debug("the failure of plugin %r:\n%s", name, tb)
    return failure


def _discover() -> Registry:
    """Load the plugins the environment selects, each in its own ``try``."""
    points = sorted(
        importlib.metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name
    )
    available = [ep.name for ep in points]
    named = _names("NXKERNEL_PLUGINS")
    disabled = set(_names("NXKERNEL_DISABLE"))
    for name in named:
        if name not in available:
            raise PluginError(
                f"NXKERNEL_PLUGINS names {name!r}, which no installed distribution"
                f" provides{close_match(name, available)}; the plugins are"
                f" {', '.join(available) or '(none)'}"
            )

    manager = pluggy.PluginManager(_PROJECT)
    manager.add_hookspecs(_Hooks)
    plugins: dict[str, Status] = {}
    failures: list[PluginFailure] = []
    taken: dict[str, str] = {}  # library name -> plugin name
    found: list[tuple[int, str, int, Library]] = []  # the caller's sort key, then the library
    for ep in points:
        if ep.name in plugins:
            failures.append(_failure(ep.name, _dist(ep), ValueError(
                f"plugin name {ep.name!r} is declared twice"), "register"))
            continue
        if ep.name in disabled or (named and ep.name not in named):
            plugins[ep.name] = Status.DISABLED
            continue
        failure = _load(manager, ep, taken, found)
        plugins[ep.name] = Status.LOADED if failure is None else Status.FAILED
        if failure is not None:
            failures.append(failure)

    broken = [f for f in failures if f.name in named]
    if broken:
        raise PluginError(
            "; ".join(f"plugin {f.name!r} (from {f.dist}) failed at {f.during}: {f.reason}"
                      for f in broken)
            + ". Install what it needs, or leave it out of NXKERNEL_PLUGINS"
            " (or add it to NXKERNEL_DISABLE)."
        ) from broken[0].error
    found.sort(key=lambda t: t[:3])
    return Registry(plugins, failures, [(plugin, lib) for _, plugin, _, lib in found])


def _dist(ep: importlib.metadata.EntryPoint) -> str | None:
    """The name of the distribution that declares ``ep``, where known."""
    return ep.dist.name if ep.dist is not None else None


def _load(
    manager: pluggy.PluginManager,
    ep: importlib.metadata.EntryPoint,
    taken: dict[str, str],
    found: list[tuple[int, str, int, Library]],
) -> PluginFailure | None:
    """Load the plugin of ``ep`` under the entry point's name, register it and
    gather what its hooks bring into ``taken`` and ``found``; the failure, where
    it fails, having added nothing.

    Args:
        manager: the plugin manager of this discovery.
        ep: the plugin's entry point.
        taken: the plugin that brought each library name so far.
        found: (-priority, plugin, index, library) of every library so far.
    """
    name = ep.name
    during = "load"
    plugin = None
    try:
        plugin = ep.load()
        during = "register"
        manager.register(plugin, name=name)
        for caller in manager.get_hookcallers(plugin) or []:
            if caller.spec is None and not all(
                impl.optionalhook for impl in caller.get_hookimpls()
            ):
                raise pluggy.PluginValidationError(
                    plugin, f"plugin {name!r} implements {caller.name!r}, which is not"
                    f" an nxkernel hook{close_match(caller.name, _HOOKS)}; the hooks are"
                    f" {', '.join(_HOOKS)}")
        others = [p for p in manager.get_plugins() if p is not plugin]
        brought: dict[str, list[object]] = {}
        for hook in _HOOKS:
            during = hook
            results = manager.subset_hook_caller(hook, remove_plugins=others)()
            for r in results:
                if not isinstance(r, list | tuple):
                    raise TypeError(f"{hook} returned a {type(r).__name__}, not a list")
            brought[hook] = [x for r in results for x in r]
        during = "libraries"
        libraries = _checked_libraries(brought["nxkernel_libraries"], taken)
        during = "nxkernel_devices"
        _register_devices(brought["nxkernel_devices"])
    except Exception as e:
        # Nothing of a failed plugin stays (pluggy keeps one that failed validation
        # half registered).
        if plugin is not None and manager.get_plugin(name) is plugin:
            manager.unregister(name=name)
        return _failure(name, _dist(ep), e, during)
    for index, lib in enumerate(libraries):
        taken[lib.name] = name
        found.append((-getattr(lib, "priority", 0), name, index, lib))
    return None


def _checked_libraries(libs: list[object], taken: dict[str, str]) -> list[Library]:
    """``libs`` as libraries; a ``TypeError`` where one does not keep the
    protocol, has a priority that is not an int, or repeats a library name
    (``taken`` maps those of earlier plugins to their plugin)."""
    checked: list[Library] = []
    for obj in libs:
        lib = check_library(obj)
        priority = getattr(lib, "priority", 0)
        if not isinstance(priority, int) or isinstance(priority, bool):
            raise TypeError(f"library {lib.name!r} has priority {priority!r}, not an int")
        if lib.name in taken:
            raise TypeError(f"library {lib.name!r} is also brought by plugin {taken[lib.name]!r}")
        if any(other.name == lib.name for other in checked):
            raise TypeError(f"library {lib.name!r} is brought twice")
        checked.append(lib)
    return checked


def _register_devices(devices: list[object]) -> None:
    """Register each device with ``rig.register``, but those registered already;
    a ``TypeError`` for an object that is not a ``rig.Rig``."""
    if not devices:
        return
    from . import rig

    rigs: list[Rig] = []
    for device in devices:
        if not isinstance(device, rig.Rig):
            raise TypeError(f"nxkernel_devices returned a {type(device).__name__}, not a Rig")
        rigs.append(device)
    registered = rig.devices()
    for device in rigs:
        if not any(d is device for d in registered):
            rig.register(device)

"""nxkernel's pytest plugin: the conformance kit's options, markers and
fixtures, and GPU tests for any project.

Registered through the ``pytest11`` entry point, it loads in every pytest run,
so it imports nothing heavy at import time and changes nothing in a run that
does not collect the kit or use its marker and fixtures: the ``library``
fixture is parametrised only for the kit's own tests (modules of
``nxkernel_core.conformance``), discovery runs only where a test is marked
``cuda`` or asks for ``nxkernel_device``, and the Hypothesis profiles are
registered only when the kit runs or ``--hypothesis-profile`` names one of
them.

For any project (see ``docs/downstream-example``):

- marker ``cuda``: the test needs a CUDA GPU (``cuda:N``); where none is
  present it is skipped with the CUDA plugin's reason (``no CUDA driver is
  installed``, ``no CUDA plugin is installed``, ...).
- ``nxkernel_device``: a test taking it runs once per present device (the
  ``nxkernel.devices`` of discovery, lost ones left out: ``host``, ``cuda:N``,
  ``cuda-emu:N`` where ``NXKERNEL_CUDA_EMULATE`` opens it), or per
  ``--nxkernel-device``; it is the device (a ``rig.Rig``), and ``cuda:N`` runs
  carry the ``cuda`` marker.

For the kit:

- ``--nxkernel-library NAME`` (repeatable): the libraries to hold to the
  contract, by name as discovery knows them, or as ``module:attribute`` (a
  library object, or a callable returning one: test doubles, a library not
  installed as a plugin). Default: every discovered library that computes on
  some present device.
- ``--nxkernel-device NAME`` (repeatable): the devices to run on; default:
  every open device that is not lost. A library or device named but absent
  (not installed, computing on no device asked for, not open) is no usage
  error: its tests are skipped with the reason, as are ``nxkernel_device``
  runs on an absent device.
- ``library``: a :class:`~nxkernel_core.conformance.harness.Subject`, one per
  (library, device it computes on).
- ``nxkernel_settings``: the Hypothesis settings of the run: the profile
  ``--hypothesis-profile`` names, else ``nxkernel-ci`` (quick, derandomized);
  ``--hypothesis-profile thorough`` runs many random examples.
- marker ``nxkernel_law``: set on every law's test (``-m nxkernel_law``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from hypothesis import settings

    from ..kernel import Library
    from ..plugins import Registry
    from ..rig import Rig
    from .harness import Subject

_OPTION = "--nxkernel-library"
_PACKAGE = "nxkernel_core.conformance"
_PROFILES = ("nxkernel-ci", "thorough")
_CUDA_PLUGIN = "cuda"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("nxkernel", "nxkernel conformance kit")
    group.addoption(
        _OPTION, action="append", default=[], metavar="NAME", dest="nxkernel_library",
        help="a kernel library to hold to the Nx_kernel contract (repeatable): a discovered "
        "library's name, or module:attribute naming a library object or a factory of one; "
        "default: every discovered library that computes on a present device")
    group.addoption(
        "--nxkernel-device", action="append", default=[], metavar="NAME", dest="nxkernel_device",
        help="a device to run the laws on (repeatable); default: every open device that is not "
        "lost")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "nxkernel_law(kernel): a law of the Nx_kernel contract from the conformance kit")
    config.addinivalue_line(
        "markers", "cuda: needs a CUDA GPU (skipped, with the CUDA plugin's reason, where none is present)")
    # Hypothesis loads --hypothesis-profile in its own pytest_configure; ours must
    # exist by then. Only imported where asked for, so other runs stay cheap.
    if config.getoption("hypothesis_profile", None) in _PROFILES:
        from .harness import register_profiles

        register_profiles()


def _in_kit(module: Any) -> bool:
    return getattr(module, "__name__", "").startswith(_PACKAGE + ".")


def _resolve(name: str) -> Library:
    """A library by discovered name or ``module:attribute``."""
    from ..plugins import discover

    if ":" in name:
        module, _, attr = name.partition(":")
        obj: Any = getattr(importlib.import_module(module), attr)
        lib = obj() if callable(obj) and not hasattr(obj, "statement") else obj
        from ..kernel import check_library

        return check_library(lib)
    return discover().library(name)


def _registry() -> Registry | str:
    """Discovery's registry, or why discovery failed."""
    from ..plugins import PluginError, discover

    try:
        return discover()
    except PluginError as e:
        return f"nxkernel discovery failed: {e}"


def _no_gpu_reason(registry: Registry | str) -> str | None:
    """Why no CUDA GPU (``cuda:N``) is present, from the CUDA plugin; ``None``
    where one is."""
    from ..plugins import Status

    if isinstance(registry, str):
        return registry
    if any(d.name.startswith("cuda:") and d.lost is None for d in registry.devices()):
        return None
    status = registry.plugins.get(_CUDA_PLUGIN)
    if status is None:
        return "no CUDA plugin is installed (pip install 'nxkernel[cuda]')"
    if status is Status.DISABLED:
        return "the cuda plugin is disabled (NXKERNEL_DISABLE or NXKERNEL_PLUGINS)"
    if status is Status.FAILED:
        failure = next(f for f in registry.failures if f.name == _CUDA_PLUGIN)
        return f"the cuda plugin failed at {failure.during}: {failure.reason}"
    for lib in registry.libraries():
        why = getattr(lib, "unavailable", None)
        if registry.provider(lib.name) == _CUDA_PLUGIN and isinstance(why, str):
            return why
    return "no CUDA device is present"


def _absent_device(name: str, registry: Registry) -> str:
    """Why the device ``name`` is not among those to run on."""
    opened = [d.name for d in registry.devices() if d.lost is None]
    why = f"no device {name} is open (open: {', '.join(opened) or 'none'})"
    lost = [d.lost for d in registry.devices() if d.name == name and d.lost is not None]
    if lost:
        why = f"device {name} is lost: {lost[0]}"
    elif name.startswith("cuda"):
        gpu = _no_gpu_reason(registry)
        if name.startswith("cuda:") and gpu is not None:
            why += f"; {gpu}"
        elif name.startswith("cuda-emu:"):
            why += "; NXKERNEL_CUDA_EMULATE=1 opens cuda-emu:0"
    return why


def _devices(config: pytest.Config, registry: Registry) -> tuple[list[Rig], list[tuple[str, str]]]:
    """The devices to run on (``--nxkernel-device``, else every open one not
    lost), and (name, why) for each named one that is absent."""
    wanted: list[str] = config.getoption("nxkernel_device") or []
    devices = [d for d in registry.devices() if d.lost is None and (not wanted or d.name in wanted)]
    absent = [(n, _absent_device(n, registry)) for n in wanted if all(d.name != n for d in devices)]
    return devices, absent


_Subjects = tuple[list[tuple[str, "Library", Any]], list[tuple[str, str]]]


def _subjects(config: pytest.Config) -> _Subjects:
    """(id, library, device) for every library asked for and device it
    computes on; and (id, reason) for each library or device asked for that is
    absent."""
    cached: _Subjects | None = getattr(config, "_nxkernel_subjects", None)
    if cached is not None:
        return cached
    registry = _registry()
    if isinstance(registry, str):
        out: _Subjects = ([], [("discovery", registry)])
        config._nxkernel_subjects = out  # type: ignore[attr-defined]
        return out
    names: list[str] = config.getoption("nxkernel_library") or []
    libraries: list[Library] = []
    absent: list[tuple[str, str]] = []
    for n in names:
        try:
            libraries.append(_resolve(n))
        except (LookupError, ImportError, AttributeError, TypeError) as e:
            absent.append((f"absent:{n}", f"{_OPTION} {n}: {e}"))
    if not names:
        libraries = list(registry.libraries())
    devices, missing = _devices(config, registry)
    absent += [(f"absent:{n}", f"--nxkernel-device {n}: {why}") for n, why in missing]
    found: list[tuple[str, Library, Any]] = []
    for lib in libraries:
        on = [d for d in devices if lib.computes_on(d)]
        if not on and names:
            why = getattr(lib, "unavailable", None)
            absent.append((f"absent:{lib.name}", f"{_OPTION} {lib.name}: it computes on no device to run"
                           f" on (devices: {', '.join(d.name for d in devices) or 'none'})"
                           + (f"; {why}" if isinstance(why, str) else "")))
        found.extend((f"{lib.name}@{d.name}", lib, d) for d in on)
    out = (found, absent)
    config._nxkernel_subjects = out  # type: ignore[attr-defined]
    return out


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "nxkernel_device" in metafunc.fixturenames:
        _parametrize_devices(metafunc)
    if "library" not in metafunc.fixturenames or not _in_kit(metafunc.module):
        return
    subjects, absent = _subjects(metafunc.config)
    params = [pytest.param((lib, dev), id=i) for i, lib, dev in subjects]
    params += [pytest.param(None, id=i, marks=pytest.mark.skip(reason=why)) for i, why in absent]
    metafunc.parametrize("library", params, indirect=True)


def _parametrize_devices(metafunc: pytest.Metafunc) -> None:
    """``nxkernel_device`` over the devices to run on; a skipped run for each
    named one that is absent."""
    registry = _registry()
    if isinstance(registry, str):
        metafunc.parametrize("nxkernel_device", [pytest.param(
            None, id="no-devices", marks=pytest.mark.skip(reason=registry))], indirect=True)
        return
    devices, absent = _devices(metafunc.config, registry)
    params = [pytest.param(d, id=d.name, marks=[pytest.mark.cuda] if d.name.startswith("cuda:") else [])
              for d in devices]
    params += [pytest.param(None, id=f"absent:{n}",
                            marks=pytest.mark.skip(reason=f"--nxkernel-device {n}: {why}"))
               for n, why in absent]
    metafunc.parametrize("nxkernel_device", params, indirect=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    no_gpu: list[str | None] = []  # the reason, computed on the first marked test
    for item in items:
        fn = getattr(item, "function", None)
        the_law = getattr(fn, "law", None)
        if the_law is not None and _in_kit(getattr(item, "module", None)):
            item.add_marker(pytest.mark.nxkernel_law(kernel=the_law.kernel))
        if item.get_closest_marker("cuda") is not None:
            if not no_gpu:
                no_gpu.append(_no_gpu_reason(_registry()))
            if no_gpu[0] is not None:
                item.add_marker(pytest.mark.skip(reason=f"needs a CUDA GPU: {no_gpu[0]}"))


@pytest.fixture
def nxkernel_device(request: pytest.FixtureRequest) -> Rig:
    """A device to run on: one run per present device (see the module's doc)."""
    device: Rig = request.param
    return device


@pytest.fixture
def library(request: pytest.FixtureRequest) -> Subject:
    """The library under test on one device it computes on (a Subject)."""
    from .harness import Subject

    param = getattr(request, "param", None)
    if param is None:
        raise pytest.UsageError("the library fixture is parametrised for the conformance kit's "
                                "laws only")
    lib, dev = param
    return Subject(lib, dev)


@pytest.fixture
def nxkernel_settings(request: pytest.FixtureRequest) -> settings:
    """The Hypothesis settings laws run with (see the module's doc)."""
    from hypothesis import settings as hsettings

    from .harness import CI_PROFILE, register_profiles

    register_profiles()
    if request.config.getoption("hypothesis_profile", None):
        return hsettings()
    return hsettings.get_profile(CI_PROFILE)

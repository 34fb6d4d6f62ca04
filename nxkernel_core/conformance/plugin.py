"""The conformance kit's pytest plugin: options, markers and fixtures only.

Registered through the ``pytest11`` entry point, it loads in every pytest run,
so it imports nothing heavy at import time and changes nothing in a run that
does not collect the kit: the ``library`` fixture is parametrised only for the
kit's own tests (modules of ``nxkernel_core.conformance``), and the Hypothesis
profiles are registered only when the kit runs or ``--hypothesis-profile``
names one of them.

- ``--nxkernel-library NAME`` (repeatable): the libraries to hold to the
  contract, by name as discovery knows them, or as ``module:attribute`` (a
  library object, or a callable returning one: test doubles, a library not
  installed as a plugin). Default: every discovered library that computes on
  some present device.
- ``--nxkernel-device NAME`` (repeatable): the devices to run on; default:
  every open device that is not lost.
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
    from .harness import Subject

_OPTION = "--nxkernel-library"
_PACKAGE = "nxkernel_core.conformance"
_PROFILES = ("nxkernel-ci", "thorough")


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


def _subjects(config: pytest.Config) -> list[tuple[str, Library, Any]]:
    """(id, library, device) for every library asked for and device it computes on."""
    from .. import rig
    from ..plugins import discover

    cached: list[tuple[str, Library, Any]] | None = getattr(config, "_nxkernel_subjects", None)
    if cached is not None:
        return cached
    registry = discover()
    names: list[str] = config.getoption("nxkernel_library") or []
    libraries = [_resolve(n) for n in names] if names else list(registry.libraries())
    wanted: list[str] = config.getoption("nxkernel_device") or []
    devices = [d for d in (registry.devices() or rig.devices())
               if d.lost is None and (not wanted or d.name in wanted)]
    missing = [n for n in wanted if all(d.name != n for d in devices)]
    if missing:
        raise pytest.UsageError(f"--nxkernel-device {', '.join(missing)}: no such open device "
                                f"(open: {', '.join(d.name for d in rig.devices())})")
    out: list[tuple[str, Library, Any]] = []
    for lib in libraries:
        on = [d for d in devices if lib.computes_on(d)]
        if not on and names:
            raise pytest.UsageError(f"{_OPTION} {lib.name}: it computes on no present device "
                                    f"(devices: {', '.join(d.name for d in devices)})")
        out.extend((f"{lib.name}@{d.name}", lib, d) for d in on)
    config._nxkernel_subjects = out  # type: ignore[attr-defined]
    return out


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "library" not in metafunc.fixturenames or not _in_kit(metafunc.module):
        return
    subjects = _subjects(metafunc.config)
    metafunc.parametrize("library", [(lib, dev) for _, lib, dev in subjects],
                         ids=[i for i, _, _ in subjects], indirect=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        fn = getattr(item, "function", None)
        the_law = getattr(fn, "law", None)
        if the_law is not None and _in_kit(getattr(item, "module", None)):
            item.add_marker(pytest.mark.nxkernel_law(kernel=the_law.kernel))


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

"""The conformance kit run as a user runs it: ``pytest --pyargs
nxkernel_core.conformance --nxkernel-library NAME`` in-process, under the CI
profile, against the host library (every law must pass) and against the
library that declines everything (every law passes, checking declines).

A failure against host is a finding about the host library: the assertion
lists each failing law with the kit's report.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest


@dataclass(eq=False)
class _Reports:
    """What the inner run reported: passes, skips and failures by test id."""

    passed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed:
            self.failed[report.nodeid] = str(report.longrepr)[-3000:]
        elif report.when == "call" and report.passed:
            self.passed.append(report.nodeid)
        elif report.skipped:
            self.skipped.append(report.nodeid)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.failed[report.nodeid or "collection"] = str(report.longrepr)[-3000:]


def _run_kit(library: str, *extra: str) -> tuple[int, _Reports]:
    reports = _Reports()
    # The host device alone: other tests leave memory devices open (some lost,
    # some with tiny budgets) that the host library also computes on.
    status = pytest.main(["--pyargs", "nxkernel_core.conformance", "--nxkernel-library", library,
                          "--nxkernel-device", "host", "-p", "no:cacheprovider", "-q", "--no-header",
                          "-W", "ignore::RuntimeWarning", *extra], plugins=[reports])
    return int(status), reports


def _summary(reports: _Reports) -> str:
    return "\n\n".join(f"{nodeid}:\n{text}" for nodeid, text in reports.failed.items())


@pytest.fixture(scope="module")
def host_run() -> Iterator[tuple[int, _Reports]]:
    yield _run_kit("host")


def test_kit_passes_on_host(host_run: tuple[int, _Reports]) -> None:
    status, reports = host_run
    assert reports.passed, "the kit collected no law"
    assert not reports.failed, f"the host library breaks {len(reports.failed)} laws:\n" + _summary(reports)
    assert status == 0


def test_kit_runs_every_kernel(host_run: tuple[int, _Reports]) -> None:
    from nxkernel_core.kernel import KERNEL_NAMES

    _, reports = host_run
    ran = " ".join(reports.passed + list(reports.failed))
    missing = [k for k in KERNEL_NAMES if f"test_{k}_" not in ran]
    assert not missing, f"no law of {missing} ran"


def test_kit_passes_on_the_declining_library() -> None:
    status, reports = _run_kit("nxkernel_core.kernel:declining_library")
    assert not reports.failed, _summary(reports)
    assert reports.passed and status == 0


def test_kit_passes_on_the_reference_library() -> None:
    """``nx.reference`` (the exact references as a library): every law passes,
    the ones of its computed kernels by computing (map, the moves)."""
    status, reports = _run_kit("nxkernel_core.reference_library:LIBRARY")
    assert not reports.failed, _summary(reports)
    assert reports.passed and status == 0

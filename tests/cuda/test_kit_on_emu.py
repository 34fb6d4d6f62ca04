"""The conformance kit against ``nx.cuda`` on the emulated device, as a user
runs it: ``NXKERNEL_CUDA_EMULATE=1 nxkernel check nx.cuda --nxkernel-device
cuda-emu:0``, in a process of its own (the variable decides discovery, which
this process has done already). Every law of every kernel runs: those of the
kernels nx.cuda computes hold its results to the contract and its statement;
those of the kernels and cases it declines check that each decline is stated
and writes nothing.

The kit runs one of its modules per test (``-k test_map.py``), so that the
test runner's workers share its four minutes. Each module's run passes, and
each kernel with a law in that module passes at least one there; every
kernel has a law in some module. A failure is a finding about nx.cuda (or its
emulator): the assertion carries the tail of the kit's report.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import re
import subprocess
import sys

import pytest

import nxkernel_core.conformance as kit
from nxkernel_core.conformance.harness import LAWS
from nxkernel_core.kernel import KERNEL_NAMES

_COMMAND = [sys.executable, "-c", "import sys; from nxkernel_core.cli import main; sys.exit(main())",
            "check", "nx.cuda", "--nxkernel-device", "cuda-emu:0", "-p", "no:cacheprovider", "-q",
            "-rA", "--no-header", "-W", "ignore::RuntimeWarning"]

#: The kit's test modules: importing them registers their laws in ``LAWS``.
_MODULES = sorted(m.name for m in pkgutil.iter_modules(kit.__path__) if m.name.startswith("test_"))
for _module in _MODULES:
    importlib.import_module(f"{kit.__name__}.{_module}")


def _kernels_in(module: str) -> set[str]:
    """The kernels that have a law in the kit's module ``module``."""
    return {law.kernel for law in LAWS.values() if law.fn.__module__ == f"{kit.__name__}.{module}"}


def test_every_kernel_has_a_law_in_a_kit_module() -> None:
    missing = set(KERNEL_NAMES) - set().union(*(_kernels_in(m) for m in _MODULES))
    assert not missing, f"no module of the kit has a law of {sorted(missing)}"


@pytest.mark.parametrize("module", _MODULES)
def test_the_kit_passes_against_cuda_on_the_emulated_device(module: str) -> None:
    env = {**os.environ, "NXKERNEL_CUDA_EMULATE": "1"}
    done = subprocess.run([*_COMMAND, "-k", f"{module}.py"], env=env, capture_output=True,
                          text=True, timeout=1800)
    report = done.stdout + done.stderr
    assert done.returncode == 0, (f"the kit's {module} fails against nx.cuda on cuda-emu:0:\n"
                                  f"{report[-8000:]}")
    ran = re.findall(rf"^PASSED \S*{module}\.py::(test_\w+)", report, re.MULTILINE)
    assert ran, f"the kit's {module} passed no test against nx.cuda on cuda-emu:0:\n{report[-3000:]}"
    passed = {LAWS[law].kernel for law in (name.removeprefix("test_") for name in ran) if law in LAWS}
    missing = _kernels_in(module) - passed
    assert not missing, f"no law of {sorted(missing)} in {module} passed against nx.cuda on cuda-emu:0"

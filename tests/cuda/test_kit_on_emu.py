"""The conformance kit against ``nx.cuda`` on the emulated device, as a user
runs it: ``NXKERNEL_CUDA_EMULATE=1 nxkernel check nx.cuda --nxkernel-device
cuda-emu:0``, in a process of its own (the variable decides discovery, which
this process has done already). Every law of every kernel runs: those of the
kernels nx.cuda computes hold its results to the contract and its statement;
those of the kernels and cases it declines check that each decline is stated
and writes nothing.

A failure is a finding about nx.cuda (or its emulator): the assertion carries
the tail of the kit's report.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

from nxkernel_core.kernel import KERNEL_NAMES

_COMMAND = [sys.executable, "-c", "import sys; from nxkernel_core.cli import main; sys.exit(main())",
            "check", "nx.cuda", "--nxkernel-device", "cuda-emu:0", "-p", "no:cacheprovider", "-q",
            "-rA", "--no-header", "-W", "ignore::RuntimeWarning"]


def test_the_kit_passes_against_cuda_on_the_emulated_device() -> None:
    env = {**os.environ, "NXKERNEL_CUDA_EMULATE": "1"}
    done = subprocess.run(_COMMAND, env=env, capture_output=True, text=True, timeout=1800)
    report = done.stdout + done.stderr
    assert done.returncode == 0, f"the kit fails against nx.cuda on cuda-emu:0:\n{report[-8000:]}"
    ran = " ".join(re.findall(r"^PASSED (\S+)", report, re.MULTILINE))
    assert ran, f"the kit collected no law:\n{report[-3000:]}"
    missing = [k for k in KERNEL_NAMES if f"test_{k}_" not in ran]
    assert not missing, f"no law of {missing} ran against nx.cuda on cuda-emu:0"

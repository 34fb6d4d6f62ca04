"""nxkernel's pytest plugin as a downstream project meets it: the example in
``docs/downstream-example`` passes, runs on every present device and skips
its GPU test with the CUDA plugin's reason; the kit and ``nxkernel_device``
skip an absent device or library with the reason instead of failing.

Each runs pytest in a subprocess on this checkout (PYTHONPATH, nothing
installed), without a GPU or emulation asked for; where the machine has a
GPU, the GPU's runs are checked instead of the skip."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from nxkernel_cuda.device import availability

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "docs" / "downstream-example"
GPU, WHY_NOT = availability()


def _pytest(*args: str, cwd: Path = EXAMPLE) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NXKERNEL_")}
    env["NXKERNEL_CACHE"] = os.environ.get("NXKERNEL_CACHE", "")  # the shared cache, if one is set
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(EXAMPLE)])
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v", *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False)


def test_the_example_passes_and_skips_its_gpu_test_with_the_reason() -> None:
    done = _pytest()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "test_scores_sum_to_one_on_every_device[host] PASSED" in done.stdout
    assert "test_totals_are_exact_for_small_integers[host] PASSED" in done.stdout
    if GPU:
        assert "test_scores_sum_to_one_on_every_device[cuda:0] PASSED" in done.stdout
        assert "test_scores_on_the_first_gpu PASSED" in done.stdout
    else:
        assert "cuda-emu:0" not in done.stdout  # not asked for
        assert "test_scores_on_the_first_gpu SKIPPED" in done.stdout
        assert f"needs a CUDA GPU: {WHY_NOT}" in done.stdout


def test_an_absent_device_skips_nxkernel_device_runs_with_the_reason() -> None:
    done = _pytest("--nxkernel-device", "cuda-emu:0", "-k", "totals")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "test_totals_are_exact_for_small_integers[absent:cuda-emu:0] SKIPPED" in done.stdout
    assert ("--nxkernel-device cuda-emu:0: no device cuda-emu:0 is open (open: host"
            in done.stdout), done.stdout
    assert "NXKERNEL_CUDA_EMULATE=1 opens cuda-emu:0" in done.stdout


@pytest.mark.skipif(GPU, reason="this machine has a CUDA GPU, so cuda:0 is present")
def test_the_kit_on_an_absent_device_skips_with_the_reason() -> None:
    done = _pytest("--pyargs", "nxkernel_core.conformance", "--nxkernel-library", "host",
                   "--nxkernel-device", "cuda:0", "-k", "fold", "-rs", cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ERROR" not in done.stdout
    assert f"--nxkernel-device cuda:0: no device cuda:0 is open (open: host); {WHY_NOT}" in done.stdout
    assert "PASSED" not in done.stdout and "SKIPPED" in done.stdout


def test_the_kit_with_an_absent_library_skips_with_the_reason() -> None:
    done = _pytest("--pyargs", "nxkernel_core.conformance", "--nxkernel-library", "hots",
                   "-k", "fold", "-rs", cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ERROR" not in done.stdout
    assert "--nxkernel-library hots: no kernel library 'hots' (did you mean 'host'?)" in done.stdout
    assert "PASSED" not in done.stdout and "SKIPPED" in done.stdout

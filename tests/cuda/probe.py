"""The probe kernels (``kernels/probe.cu``) as a source, for the emulator's and the build's tests."""

from __future__ import annotations

from pathlib import Path
from typing import Final

from nxkernel_cuda.build import Source

#: The probe kernels' file.
PROBE_FILE: Final = Path(__file__).parent / "kernels" / "probe.cu"
#: Every kernel of it, as launched.
PROBE_KERNELS: Final = (
    "probe_reverse", "probe_dynamic_floats", "probe_warp", "probe_atomics", "probe_block_votes",
    "probe_divergent", "probe_trap", "probe_deadlock", "probe_template_sum<int, 64>",
    "probe_template_sum<double, 32>",
)


def probe_source() -> Source:
    """``kernels/probe.cu`` with every probe kernel."""
    return Source("probe.cu", PROBE_FILE.read_text(), PROBE_KERNELS)

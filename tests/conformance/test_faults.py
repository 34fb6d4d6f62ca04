"""The kit's laws can fail: each planted fault is caught by its law.

Every fault of ``faulty.FAULTS`` is planted in the host library and its law
run under the kit's CI profile; the law must raise a ``LawViolation`` (not an
error of the kit's own). The same laws pass against the host itself
(``test_kit_on_host``).
"""

from __future__ import annotations

import importlib

import pytest
from hypothesis import HealthCheck, Phase, settings

from nxkernel_core import rig
from nxkernel_core.conformance import harness as H

from .faulty import FAULTS, FaultyLibrary

_MODULES = ("test_calls", "test_map", "test_reduce", "test_scan", "test_fold", "test_moves",
            "test_contract", "test_fft", "test_routines", "test_attention")
for _m in _MODULES:
    importlib.import_module(f"nxkernel_core.conformance.{_m}")

#: The CI profile without shrinking (a caught fault need not be minimal), and
#: with one error reported (not a group).
_SETTINGS = settings(settings.get_profile(H.CI_PROFILE), phases=(Phase.explicit, Phase.generate),
                     report_multiple_bugs=False, max_examples=12,
                     suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_fault_is_caught(fault: str) -> None:
    law_name, _ = FAULTS[fault]
    subject = H.Subject(FaultyLibrary(fault), rig.host)
    with pytest.raises(H.LawViolation):
        H.run_law(H.LAWS[law_name], subject, _SETTINGS)


def test_every_fault_names_a_law() -> None:
    missing = {f: law for f, (law, _) in FAULTS.items() if law not in H.LAWS}
    assert not missing

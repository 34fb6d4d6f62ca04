"""The kit's default profile kills realistic mutants of the real host library.

Each mutant of ``mutants.MUTANTS`` is planted in the host library by patching
one of its functions (or the door it calls) for the length of the test; the
law named for it then runs under the kit's default (CI) profile, without
shrinking, and must raise a ``LawViolation``. The real host
passes every law (``test_kit_on_host``). The kill table:

================================ ==================================== ==============================
mutant                           what it breaks                       law that kills it
================================ ==================================== ==============================
sum_pairwise_long                lane order past 10⁵ terms            reduce_long_rows_in_stated_order
signed_zero_fixup_off            −0 below +0 in Max, Min, Arg         reduce_signed_zeros_and_nans
threaded_arg_later_span          Arg: the first term with its bits    reduce_long_row_extremes
scatter_add_reversed             Add's stated C-order chain           scatter_fixed_chains
sort_descending_reversed         descending stays stable              sort_ties_every_direction
moments_one_pass                 the stated two-pass bound            reduce_moments_edges
door_misses_containing_operand   other sharing refused                map_door_every_sharing
contract_zeroes_before_decline   a decline writes nothing             contract_dtype_pairings
few_terms_without_plus_zero      a sum of −0 terms is +0              reduce_empty_and_single_axes
block_tree_halves                lane order's block tree              reduce_long_rows_in_stated_order
prod_by_numpy                    Prod in lane order                   reduce_long_rows_in_stated_order
max_ignores_nan                  a NaN extreme, the first NaN         reduce_signed_zeros_and_nans
int4_sum_saturates               integers wrap                        reduce_integer_wrapping_edges
empty_prod_zero                  an empty product is 1                reduce_empty_and_single_axes
logsumexp_unshifted              Logsumexp within its bound           reduce_logsumexp_edges
logsumexp_shift_by_infinity      Logsumexp's special values           reduce_logsumexp_edges
scan_by_cumsum                   the odd/even network                 scan_long_rows_in_stated_order
scan_reverse_ignored             reverse scans                        scan_long_rows_in_stated_order
scan_arg_later_equal             the first of equal extremes          scan_signed_zeros_and_nans
scan_carry_dropped               the carry as state 0                 scan_long_rows_in_stated_order
scan_sum_from_first_term         a Sum scan from +0                   scan_sum_from_positive_zero
fold_narrow_in_own_dtype         narrow floats added in float32       fold_taps_in_stated_order
fold_taps_reversed               taps added in C order                fold_taps_in_stated_order
scatter_set_first_wins           Set takes the last update            scatter_set
scatter_min_loses_nan            Min keeps a NaN                      scatter_fixed_chains
gather_clamps                    zero bits outside [0, d)             gather_bits
range_gather_clamps              zero bits outside [0, d)             range_gather_bits
sort_nan_first                   NaNs last                            sort_ties_every_direction
sort_zeros_equal                 −0 below +0 in sort                  sort_ties_every_direction
sort_unstable                    stable sort (short rows)             sort_ties_every_direction
radix_unstable                   stable sort (long rows)              sort_ties_every_direction
top_k_later_equals               stable top-k                         sort_ties_every_direction
numbering_side_swapped           left and right counts                numbering_counts
assemble_first_wins              the last piece wins                  assemble_bits
contract_tiles_floored           every output within e(K)             contract_past_row_chunks
attention_o_not_rescaled         o's weights exp(x − L + δ)           attention_past_tiles
door_misses_containing_dst       other sharing refused                map_door_every_sharing
door_misses_dst_before           other sharing refused                map_door_every_sharing
door_bit_spans                   sharing decided on bytes             map_door_every_sharing
door_same_start_identical        identical means the same layout      map_door_every_sharing
================================ ==================================== ==============================
"""

from __future__ import annotations

import importlib
import re

import pytest
from hypothesis import HealthCheck, Phase, settings

from nxkernel_core import rig
from nxkernel_core.conformance import harness as H
from nxkernel_core.plugins import discover

from .mutants import MUTANTS

#: The host library, as discovery gives it: the object the mutants patch.
HOST = discover().library("host")

for _m in ("test_calls", "test_map", "test_reduce", "test_scan", "test_fold", "test_moves",
           "test_contract", "test_edges", "test_orders"):
    importlib.import_module(f"nxkernel_core.conformance.{_m}")

#: The default profile (its examples, derandomized alike) without shrinking:
#: a killed mutant need not be shown minimal.
_SETTINGS = settings(settings.get_profile(H.CI_PROFILE), phases=(Phase.explicit, Phase.generate),
                     report_multiple_bugs=False, suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_mutant_is_killed(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    mutant = MUTANTS[name]
    mutant.plant(monkeypatch)
    with pytest.raises(H.LawViolation):
        H.run_law(H.LAWS[mutant.law], H.Subject(HOST, rig.host), _SETTINGS)


def test_table_names_every_mutant_and_its_law() -> None:
    """The kill table in this module's docstring is ``MUTANTS``: every mutant
    and the law that kills it, a law of the kit."""
    doc = __doc__ or ""
    rows = dict(re.findall(r"^(\w+)\s{2,}.*?\s{2,}(\w+)$", doc, flags=re.MULTILINE))
    rows.pop("mutant", None)
    assert rows == {n: m.law for n, m in MUTANTS.items()}
    assert all(m.law in H.LAWS for m in MUTANTS.values())
    assert len(MUTANTS) >= 30

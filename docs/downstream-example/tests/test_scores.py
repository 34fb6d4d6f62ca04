"""scores.py on every present device, and a test that needs a GPU."""

from __future__ import annotations

import numpy as np
import pytest
from scores import row_scores, row_totals

from nxkernel_core.rig import Rig

ROWS = [[0.0, 1.0, 2.0, 3.0], [1.0, 1.0, 1.0, 1.0], [-4.0, 0.0, 4.0, 8.0]]


def test_scores_sum_to_one_on_every_device(nxkernel_device: Rig) -> None:
    scores = row_scores(ROWS, nxkernel_device).to_numpy()
    assert scores.dtype == np.float32 and scores.shape == (3, 4)
    np.testing.assert_allclose(scores.sum(axis=1), 1.0, rtol=1e-6)
    assert scores[1].tolist() == [0.25] * 4


def test_totals_are_exact_for_small_integers(nxkernel_device: Rig) -> None:
    assert row_totals(ROWS, nxkernel_device).to_numpy().tolist() == [6.0, 4.0, 8.0]


@pytest.mark.cuda
def test_scores_on_the_first_gpu() -> None:
    scores = row_scores(ROWS, "cuda:0").to_numpy()
    assert scores[1].tolist() == [0.25] * 4

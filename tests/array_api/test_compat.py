"""A library that consumes the standard through array-api-compat runs on these
arrays: array-api-extra (the helpers SciPy and scikit-learn build on) finds
the namespace with ``array_namespace`` and computes with it alone."""

from __future__ import annotations

import numpy as np
import pytest

from nxkernel_core import array_api as xp

compat = pytest.importorskip("array_api_compat", reason="array-api-compat is not installed")
xpx = pytest.importorskip("array_api_extra", reason="array-api-extra is not installed")

M = np.array([[1.0, 2.0, 4.0], [0.5, -1.0, 3.0]])


def test_array_api_compat_finds_the_namespace() -> None:
    x = xp.asarray(M)
    assert compat.array_namespace(x) is xp
    assert compat.is_array_api_obj(x)
    assert compat.device(x) == "cpu"
    assert compat.size(x) == 6


def test_array_api_extra_computes_on_these_arrays_as_on_numpys() -> None:
    x = xp.asarray(M)
    np.testing.assert_allclose(xpx.cov(x).to_numpy(), np.cov(M), rtol=1e-14)
    np.testing.assert_array_equal(xpx.kron(x, x).to_numpy(), np.kron(M, M))
    np.testing.assert_array_equal(xpx.pad(x, 1).to_numpy(), np.pad(M, 1))
    np.testing.assert_allclose(xpx.sinc(xp.asarray([0.0, 0.25, 1.5])).to_numpy(),
                               np.sinc([0.0, 0.25, 1.5]), rtol=1e-15)
    np.testing.assert_array_equal(
        xpx.setdiff1d(xp.asarray([5, 1, 2, 3, 4]), xp.asarray([2, 4])).to_numpy(), [1, 3, 5])
    assert int(xpx.nunique(xp.asarray([1, 2, 2, 3, 1]))) == 3
    assert xpx.atleast_nd(xp.asarray([1.0]), ndim=3).shape == (1, 1, 1)

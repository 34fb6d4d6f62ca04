"""Libraries that consume the standard through array-api-compat run on these
arrays: array-api-extra (the helpers SciPy and scikit-learn build on) finds
the namespace with ``array_namespace`` and computes with it alone, and so do
SciPy's array-API paths."""

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


def test_scipy_runs_its_array_api_paths_on_these_arrays() -> None:
    """SciPy, with ``SCIPY_ARRAY_API=1`` (read at its import, so in a process of
    its own), takes the namespace through array-api-compat and returns our
    arrays, equal to what it computes on NumPy's."""
    import json
    import os
    import subprocess
    import sys

    pytest.importorskip("scipy", reason="SciPy is not installed")
    code = (
        "import json, numpy as np, scipy.fft, scipy.special, scipy.cluster.vq as vq\n"
        "from nxkernel_core import array_api as xp\n"
        f"m = np.array({M.tolist()})\n"
        "x = xp.asarray(m)\n"
        "calls = {'logsumexp': lambda a: scipy.special.logsumexp(a, axis=1),\n"
        "         'softmax': lambda a: scipy.special.softmax(a, axis=0),\n"
        "         'whiten': vq.whiten, 'fft': scipy.fft.fft}\n"
        "def plain(v):\n"
        "    v = np.asarray(v)\n"
        "    return np.stack([v.real, v.imag]).tolist()\n"
        "out = {}\n"
        "for k, f in calls.items():\n"
        "    r = f(x)\n"
        "    assert type(r).__module__ == 'nxkernel_core.array', (k, type(r))\n"
        "    out[k] = [plain(r.to_numpy()), plain(f(m))]\n"
        "print(json.dumps(out))\n"
    )
    env = {**os.environ, "SCIPY_ARRAY_API": "1"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=300, check=False)
    assert r.returncode == 0, r.stderr
    for name, (ours, scipys) in json.loads(r.stdout).items():
        np.testing.assert_allclose(ours, scipys, rtol=1e-13, atol=1e-14, err_msg=name)

"""Upstream's golden vectors of the scalar kinds, through every library that
computes maps, on every device it computes on: the host library on the host,
nx.cuda on cuda-emu:0 and (marked ``cuda``) on cuda:0.

Each test runs one kind at one float dtype as one map over all its points
(``golden.cases``): float64 at upstream's ~1,300 goldens per kind (3,224 of
pow, 2,624 of atan2), float32 at the float32 sweep's worst arguments and the
goldens float32 holds, the narrow floats at the goldens they hold. A result
is within the bound the library's statement gives (``Statement.ulps``), a NaN
for a NaN and a number for a number, a zero of the right sign where both are
zeros; where the contract fixes the bits (Annex F's special values, exp2 at
integers, log2 at powers of two, pow(x, ±0) and pow(1, y)) it is exact.

The whole module skips, with the reason, where ``../shared/upstream-golden``
is absent.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import pytest

from nxkernel_core import dtype as D
from nxkernel_core import evaluator as R
from nxkernel_core import plugins
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_core.dtype import Dtype
from nxkernel_core.kernel import Library
from nxkernel_core.prog import Binary, Prog, Unary
from nxkernel_core.rig import Rig, host

from . import golden

Arr = npt.NDArray[Any]

pytestmark = pytest.mark.skipif(golden.missing() is not None, reason=str(golden.missing()))


@functools.cache
def _cases(kind: str, dt: Dtype) -> golden.Cases:
    return golden.cases(kind, dt)


def _program(kind: str, dt: Dtype) -> Prog:
    if kind in golden.BINARY:
        return Prog.binary(Binary[kind.upper()], dt)
    return Prog.unary(Unary[kind.upper()], dt)


def run(lib: Library, dev: Rig, c: golden.Cases) -> Arr:
    """The library's map of ``c``'s kind over all its points at once, on ``dev``."""
    ops = [Array.from_numpy(a, dev, c.dtype) for a in c.args]
    dst = Array.empty(c.dtype, (len(c),), dev)
    answer = lib.map(S.Map(_program(c.kind, c.dtype), (S.PLAIN,) * len(ops)), [dst], ops)
    assert answer is Answer.DONE, f"{lib.name} answers {answer} to {c.kind} of {c.dtype.name}"
    return dst.to_numpy()


def distances(c: golden.Cases, got: Arr) -> Arr:
    """Each result's distance in ulps from the correctly rounded value: inf for
    a NaN against a number, a zero of the wrong sign against a zero, and where
    the contract fixes the bits any other value."""
    d = R.ulps(got, c.want, c.dtype)
    g, w = got.astype(np.float64), c.want.astype(np.float64)
    wrong_zero = (g == 0) & (w == 0) & (np.signbit(g) != np.signbit(w))
    return np.where(wrong_zero | (c.exact & (d > 0)), np.inf, d)


def bound(lib: Library, kind: str, dt: Dtype) -> int:
    """The library's stated bound of ``kind`` at ``dt`` (a failure where it states none)."""
    stated = lib.statement.ulps.get(dt.name, {})
    assert kind in stated, f"{lib.name}'s statement states no ulps of {kind} at {dt.name}"
    return stated[kind]


def _report(c: golden.Cases, got: Arr, d: Arr, most: int) -> str:
    bad = np.flatnonzero(d > most)
    lines = [f"{c.kind} {c.dtype.name}: {bad.size} of {len(c)} points beyond {most} ulps "
             f"(or not exact where the contract fixes the bits):"]
    for i in bad[:12]:
        args = ", ".join(golden.describe(float(a[i])) for a in c.args)
        lines.append(f"  {c.kind}({args}) = {golden.describe(float(got[i]))}, correctly rounded "
                     f"{golden.describe(float(c.want[i]))}: {d[i]} ulps")
    return "\n".join(lines)


# --------------------------------------------------------------------------
# The subjects: every library that computes maps, on every device it computes on
# --------------------------------------------------------------------------


def _host() -> tuple[Library, Rig]:
    from nxkernel_host.library import library
    return cast(Library, library), host


def _cuda_emu() -> tuple[Library, Rig]:
    from nxkernel_cuda.device import EmuDevice
    from nxkernel_cuda.library import LIBRARY
    return LIBRARY, EmuDevice(0)


def _cuda_gpu() -> tuple[Library, Rig]:
    from nxkernel_cuda import device
    from nxkernel_cuda.library import LIBRARY
    ok, why = device.availability()
    if not ok:
        pytest.skip(f"CUDA is not usable: {why}")
    return LIBRARY, device.CudaDevice(0)


_SUBJECTS = {"host": _host, "nx.cuda on cuda-emu:0": _cuda_emu, "nx.cuda on cuda:0": _cuda_gpu}
_LIBRARIES = {"host", "nx.cuda"}


@pytest.fixture(scope="module", params=[
    pytest.param("host"), pytest.param("nx.cuda on cuda-emu:0"),
    pytest.param("nx.cuda on cuda:0", marks=pytest.mark.cuda)])
def subject(request: pytest.FixtureRequest) -> Iterator[tuple[Library, Rig]]:
    """A library and a device it computes on, one device for the module."""
    yield _SUBJECTS[request.param]()


def test_every_library_that_states_ulps_is_a_subject() -> None:
    stating = {lib.name for lib in plugins.discover().libraries() if lib.statement.ulps}
    assert stating <= _LIBRARIES, f"no golden subject runs {sorted(stating - _LIBRARIES)}"


@pytest.mark.parametrize("dt", golden.FLOATS, ids=lambda d: d.name)
@pytest.mark.parametrize("kind", golden.KINDS)
def test_goldens(subject: tuple[Library, Rig], kind: str, dt: Dtype) -> None:
    lib, dev = subject
    assert lib.computes_on(dev)
    c = _cases(kind, dt)
    assert len(c) > 0, f"no golden point of {kind} at {dt.name}"
    got = run(lib, dev, c)
    d = distances(c, got)
    most = bound(lib, kind, dt)
    assert (d <= most).all(), _report(c, got, d, most)


# --------------------------------------------------------------------------
# The points themselves
# --------------------------------------------------------------------------


def test_the_goldens_are_upstreams() -> None:
    # Counts as upstream's generator draws them (README): 1,545 rows of sin,
    # cos and tan, 3,224 of pow, 2,624 of atan2; the float32 sweep 860.
    assert len(_cases("sin", D.float64)) == len(_cases("tan", D.float64)) == 1545
    assert len(_cases("pow", D.float64)) == 3224 and len(_cases("atan2", D.float64)) == 2624
    assert sum(len(golden.sweep().get(k, ((), ()))[0]) for k in golden.UNARY) == 860
    total = sum(len(_cases(k, D.float64)) for k in golden.KINDS)
    assert total + 860 == 28095
    # The hard argument, 2^-60.9 from a multiple of π/2, and Annex F's pow.
    c = _cases("cos", D.float64)
    hard = c.args[0] == float.fromhex("0x1.6ac5b262ca1ffp+849")
    assert c.want[hard].tolist() == [float.fromhex("-0x1.14ae72e6ba22fp-61")]
    p = _cases("pow", D.float64)
    nan_zero = np.isnan(p.args[0]) & (p.args[1] == 0)
    assert nan_zero.sum() == 2 and (p.want[nan_zero] == 1).all() and p.exact[nan_zero].all()


def test_narrow_points_are_correctly_rounded_or_left_out() -> None:
    # exp2(-2) = 0.25 is a tie in float4_e2m1fn (0 and 0.5 its neighbours):
    # the value is exact, so the tie goes to even, 0.
    c = _cases("exp2", D.float4_e2m1fn)
    at = c.args[0].astype(np.float64) == -2.0
    assert at.sum() == 1 and c.want[at].astype(np.float64).tolist() == [0.0]
    # Every point's arguments are values of the dtype.
    for kind in golden.KINDS:
        for dt in golden.FLOATS:
            for a in _cases(kind, dt).args:
                assert a.dtype == dt.numpy_dtype

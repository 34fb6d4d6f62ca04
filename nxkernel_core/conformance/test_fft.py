"""Laws of ``fft``: the unnormalised DFT, within a first-order bound."""

from __future__ import annotations

import math

import numpy as np

from .. import exact as O
from .. import spec as S
from ..kernel import unit_roundoff
from .cases import draw_case
from .harness import Data, Subject, fail, invoke, law

#: The constant of the kit's bound on a transform: c·(⌈log₂ N⌉ + 1)·u·√N·‖x‖₂.
FFT_CONSTANT = 8.0


@law("fft")
def test_fft_within_bound(subject: Subject, data: Data) -> None:
    """Each transform (C2c, R2c, C2r of n points; forward or inverse; along
    one to three axes) is within c·(⌈log₂ N⌉ + 1)·u·√N·‖x‖₂ of the exact
    unnormalised DFT in the 2-norm of each transformed slice (c = 8, N the
    points transformed, u the dtype's parts' unit roundoff; C2r's x counted
    with its Hermitian extension, √2·‖x‖₂), then rounded into its
    destination: a generous first-order bound any FFT keeps, which catches a
    wrong sign, scale, bin or axis. An axis of extent 0 gives an empty sum.
    Contract: 'Along an axis of n points, Forward is y[k] = Σ_j x[j]
    e^(-2πi jk/n) and Inverse the same sum with e^(+2πi jk/n). Neither divides
    by n'."""
    case = draw_case(data, subject, "fft")
    out = invoke(subject, case.spec, case.dsts, case.operands, data)
    if out.declined:
        return
    spec: S.Fft = case.spec
    (x,) = case.values
    want = O.dft(x, spec.axes, spec.direction, spec.kind)
    got = np.asarray(out.results[0])
    dst = case.dsts[0][0]
    u = unit_roundoff(dst)
    axes = spec.axes
    rest = [i for i in range(x.ndim) if i not in axes]
    xin = np.moveaxis(np.asarray(x, dtype=np.complex128), axes, range(x.ndim - len(axes), x.ndim))
    yw = np.moveaxis(want, axes, range(x.ndim - len(axes), x.ndim))
    yg = np.moveaxis(got.astype(np.complex128), axes, range(x.ndim - len(axes), x.ndim))
    lead = tuple(x.shape[i] for i in rest)
    xin = xin.reshape((*lead, -1)) if xin.size else xin.reshape((*lead, 0))
    yw = yw.reshape((*lead, -1)) if yw.size else yw.reshape((*lead, 0))
    yg = yg.reshape((*lead, -1)) if yg.size else yg.reshape((*lead, 0))
    n_points = math.prod(got.shape[a] if isinstance(spec.kind, S.C2r) else x.shape[a] for a in axes)
    norm = np.sqrt(np.sum(np.abs(xin) ** 2, axis=-1))
    if isinstance(spec.kind, S.C2r):
        norm = norm * math.sqrt(2)
    bound = FFT_CONSTANT * (math.ceil(math.log2(max(n_points, 1))) + 1) * u * math.sqrt(max(n_points, 1)) \
        * norm
    err = np.sqrt(np.sum(np.abs(yg - yw) ** 2, axis=-1))
    # The rounding into the destination adds u·‖y‖₂ at most.
    allowed = bound + u * np.sqrt(np.sum(np.abs(yw) ** 2, axis=-1)) * 1.01 + 1e-300
    bad = ~(err <= allowed)
    if bad.any():
        i = tuple(int(t) for t in np.argwhere(bad)[0])
        raise fail(f"fft {spec}: the transform at {list(i)} errs by {err[i]!r} in the 2-norm, beyond "
                   f"{allowed[i]!r}; got {yg[i][:6]!r}…, the exact DFT is {yw[i][:6]!r}…")

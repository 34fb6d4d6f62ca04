"""What the CUDA kernel tests share: values with the specials of every dtype,
running one kernel of the library, and comparing bits.

Values (``values``) mix drawn numbers with each dtype's specials: ±0, ±inf,
quiet and signalling NaNs with payloads of both signs, ties (0.5, 2.5, ...),
format limits, subnormals; integer range edges; bool bytes other than 0 and 1
(Copy and Where keep them); every code of the 4-bit dtypes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pytest

from nxkernel_core import dtype as D
from nxkernel_core import shape as SH
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_core.dtype import Dtype
from nxkernel_core.rig import Rig
from nxkernel_cuda import build, moves, nvrtc, reductions
from nxkernel_cuda.library import LIBRARY

Arr = npt.NDArray[Any]

#: Real dtypes (the library's map, reductions and sorts take these).
REAL: tuple[Dtype, ...] = tuple(dt for dt in D.all if not dt.is_complex)

_UINT = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


def _float_specials(dt: Dtype) -> list[float]:
    fmt = dt.float_format
    assert fmt is not None
    sub = fmt.min_normal * 2.0 ** -max(1, fmt.fraction_bits // 2)
    return [0.0, -0.0, np.inf, -np.inf, np.nan, 0.5, -0.5, 1.5, 2.5, -2.5, 1.0, -1.0, fmt.max_finite,
            -fmt.max_finite, fmt.min_normal, -fmt.min_normal, sub, -sub, 127.5, 3.0]


def values(dt: Dtype, n: int, seed: int = 0) -> Arr:
    """``n`` host elements of ``dt``: specials first, then drawn values."""
    rng = np.random.default_rng(seed + dt.code)
    if dt.is_sub_byte:
        codes = np.arange(n) % (1 << dt.bits)
        rng.shuffle(codes)
        if dt is D.bit:
            return codes.astype(np.bool_)
        padded = np.zeros(n + n % 2, np.uint8)
        padded[:n] = codes
        storage = (padded[0::2] | (padded[1::2] << 4)).astype(np.uint8)  # two codes a byte, low first
        return D.unpack(dt, storage, np.arange(n))
    if dt.is_float:
        drawn = rng.standard_normal(n) * np.exp2(rng.integers(-6, 7, size=n))
        out = D.of_float(dt, drawn)
        sp = D.of_float(dt, _float_specials(dt))
        k = min(n, sp.size)
        out[:k] = sp[:k]
        if dt.bits >= 16 and n > k + 4:
            u = out.view(_UINT[dt.bits])
            fmt = dt.float_format
            assert fmt is not None
            expall = ((1 << fmt.exponent_bits) - 1) << fmt.fraction_bits
            sign = 1 << (dt.bits - 1)
            # Signalling (quiet bit clear) and quiet NaNs with payloads, both signs.
            u[k] = expall | 1
            u[k + 1] = expall | sign | 3
            u[k + 2] = expall | (1 << (fmt.fraction_bits - 1)) | 5
        rng.shuffle(out)
        return out
    if dt.is_bool:
        return rng.integers(0, 3, size=n).astype(np.uint8).view(np.bool_)
    lo, hi = dt.int_range
    wide = np.int64 if dt.kind is D.Kind.SIGNED else np.uint64
    drawn = rng.integers(max(lo, -40), min(hi, 40), size=n, endpoint=True, dtype=wide)
    edges = [lo, hi, lo + 1, hi - 1, 0, 1, 2] + ([-1, -2] if lo < 0 else [])
    k = min(n, len(edges))
    drawn[:k] = edges[:k]
    rng.shuffle(drawn)
    return drawn.astype(dt.numpy_dtype)


def bits(a: Arr, dt: Dtype) -> Arr:
    """The bits of host elements: unsigned integers (a sub-byte dtype's codes,
    a bool's byte)."""
    a = np.ascontiguousarray(a)
    if dt.is_sub_byte:
        if dt is D.bit:
            return a.astype(np.uint8)
        return a.view(np.uint8) & np.uint8(15)
    if dt.is_complex:
        return a.view(_UINT[dt.bits // 2])
    return a.view(_UINT[dt.bits])


def same_bits(got: Arr, want: Arr, dt: Dtype, nan_equal: bool = False) -> bool:
    """Whether two arrays of ``dt`` have the same bits (every NaN alike where
    ``nan_equal``: a result whose NaN bits the contract leaves open)."""
    g, w = bits(got, dt), bits(want, dt)
    if g.shape != w.shape:
        return False
    if nan_equal and dt.is_float:
        ng = np.isnan(np.asarray(got, dtype=np.float64))
        nw = np.isnan(np.asarray(want, dtype=np.float64))
        return bool(np.array_equal(ng, nw) and np.array_equal(g[~ng], w[~nw]))
    return bool(np.array_equal(g, w))


def on(dev: Rig, a: Arr, dt: Dtype | None = None) -> Array:
    """A copy of host elements ``a`` on ``dev``."""
    return Array.from_numpy(np.ascontiguousarray(a), dev, dt)


#: The family kernels that take a plan's knobs.
_KNOBBED: Final[dict[str, Callable[..., None]]] = {
    "reduce": reductions.reduce, "scan": reductions.scan, "sort": moves.sort}


def run(spec: Any, operands: Sequence[Array], dtypes: Sequence[Dtype], **kw: Any) -> tuple[Answer, list[Arr]]:
    """Call the library's kernel of ``spec`` with fresh destinations of
    ``dtypes`` (shaped by ``shape``), then read them back."""
    shapes = getattr(SH, spec.kernel)(spec, [o.shape for o in operands])
    assert not isinstance(shapes, SH.Error), shapes
    dev = operands[0].device
    dsts = [Array.empty(dt, sh, dev) for dt, sh in zip(dtypes, shapes, strict=True)]
    if kw:
        # A plan's knobs (``threads``, ``chunk``, …; tests only) are the family
        # kernel's: the library's hook calls it without them, after the checks.
        _KNOBBED[spec.kernel](spec, dsts, list(operands), **kw)
        return Answer.DONE, [d.to_numpy() for d in dsts]
    answer = getattr(LIBRARY, spec.kernel)(spec, dsts, list(operands))
    return answer, [d.to_numpy() for d in dsts]


def canary(dev: Rig, dt: Dtype, shape: Sequence[int]) -> Array:
    """A destination filled with 0xA5 bytes, to show that nothing wrote it."""
    a = Array.empty(dt, shape, dev)
    a.buffer.memory.device.write_bytes(a.buffer.memory, a.buffer.offset,
                                       np.full(a.buffer.length, 0xA5, np.uint8))
    return a


def untouched(a: Array) -> bool:
    """Whether a canary still holds its 0xA5 bytes."""
    raw = a.device.read_bytes(a.buffer.memory, a.buffer.offset, a.buffer.length)
    return bool(np.all(raw == 0xA5))


def _nvrtc_missing() -> str | None:
    """Why NVRTC cannot be loaded (only where its wheel cannot be installed), or None."""
    try:
        build.nvrtc_version()
    except build.NvrtcUnavailable as e:
        return str(e)
    return None


_NO_NVRTC = _nvrtc_missing()

#: Marks a test that compiles with NVRTC: skipped, with the reason, where it cannot be loaded.
needs_nvrtc = pytest.mark.skipif(_NO_NVRTC is not None, reason=f"NVRTC cannot be loaded: {_NO_NVRTC}")


#: The variable CI sets (``.ci/run``): an NVRTC of :data:`CI_NVRTC` that is
#: not installed fails the compile tests there instead of skipping them.
CI_VARIABLE = "NXKERNEL_CI"

#: The NVRTC major versions every kernel is compiled with (the dev extra
#: installs both), for each of ``build.CI_ARCHES``.
CI_NVRTC: tuple[int, ...] = nvrtc.MAJORS


def nvrtc_of(major: int) -> nvrtc.Nvrtc:
    """The NVRTC of major version ``major`` this process finds; where there is
    none, skip with the reason (fail under ``$NXKERNEL_CI``)."""
    for compiler in nvrtc.found():
        if compiler.version[0] == major:
            return compiler
    wheel = "nvidia-cuda-nvrtc-cu12" if major == 12 else f"nvidia-cuda-nvrtc=={major}.0.*"
    why = f"NVRTC {major} is not installed ({wheel}, in the dev extra)"
    if os.environ.get(CI_VARIABLE):
        pytest.fail(why)
    pytest.skip(why)

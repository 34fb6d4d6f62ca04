"""The Fourier transforms: ``fft`` (C2c, R2c, C2r of n points) on CUDA devices
(``kernels/fft.cu``).

Rules:

* What it computes: every fitting case, C2c of complex64/complex128, R2c of
  float32/float64 into complex64/complex128, C2r(n) back, forward or inverse,
  unnormalised, along any axes of operands of any layout (strided, broadcast,
  reversed, offset; read through walks, :mod:`nxkernel_cuda.loops`), in the
  dtype's own precision (float for complex64, double for complex128). An axis
  of extent 0 makes every sum empty: the result is zeros.
* Axes one at a time: C2c in the listed order; R2c transforms the last listed
  axis real-to-complex first (keeping bins 0..n//2), then the others; C2r
  transforms the others into a complex scratch array first, then the last
  one from its n//2 + 1 bins (bin 0's and, n even, bin n/2's imaginary parts
  dropped). Along an axis, the lines are gathered into contiguous scratch
  (skipped where they are contiguous already), transformed, and scattered to
  their destination.
* The real axis of R2c and C2r, n even (n = 2h): packed. R2c reads the real
  line as h complex points z_j = x_2j + i x_2j+1 (in place where the lines
  are contiguous), transforms them (h points, as any line), and turns
  Z = DFT_h(z) into bins k = 0..h: s = Z_k + conj Z_(h−k),
  d = Z_k − conj Z_(h−k) (indices mod h), X_k = (s − i·w^k·d)/2,
  w = e^(∓2πi/n) the direction's root (so X_k = E_k + w^k O_k, E and O the
  transforms of the even and the odd points). C2r the reverse: from bins
  Y_0..Y_h, C_k = s + i·w^k·d (s, d as above of Y, k < h), whose transform
  of h points in the same direction is x_2j + i x_2j+1, the real line itself
  (written in place where the destination's lines are contiguous). n odd:
  R2c transforms the real line as a complex one of n points (imaginary parts
  0), C2r the Hermitian extension of the bins, keeping the real parts.
* A line of n points: where n = 2^a 3^b 5^c 7^d, the Stockham autosort
  algorithm in passes of radix P (the prime factors shared out so that a pass
  holds at most 256 points in float, 128 in double, or one pass where n is at
  most 4096 / 2048), each pass a block's sub-transform in shared memory by
  Stockham stages of radix 8, 4, 2 (from the factors of two: 8s, then a 4 or
  two), 3, 5 and 7. Any other n: Bluestein's algorithm, the chirp-z
  convolution over m = the least power of two >= 2n - 1 points by two
  Stockham transforms of m, its kernel's transform computed once per (n,
  direction) in double on the device and kept.
* Twiddles, chirps and radix constants: computed in double from the exact
  integer reduction of the angle's fraction of a turn to [0, 1/8] (quadrant
  and octant symmetry), each part rounded once into the working precision:
  within μ ≤ 8u of the root of unity (u the parts' unit roundoff). Each
  complex product rounds its four products and its sum and difference (no
  fma): the same bits on every run (no atomics, a fixed order).
* The stated bound (``ALGORITHM``): (Σ_a ε_a)·√N·‖x‖₂, ε_a = ε(n_a) of
  ``axis_error`` for a complex axis, ``real_axis_error`` for the real axis of
  R2c and C2r: for even n = 2h, ε(h) + 24u. That is ε(n) itself where
  n = 2^a 3^b 5^c 7^d and n >= 4 (⌈log₂ 2h⌉ = ⌈log₂ h⌉ + 1), and less at
  n = 2 (24u for 48u), so the packed path keeps the stated bound there;
  where h needs Bluestein, ε(h) + 24u replaces Bluestein's ε(n), which the
  packed path need not keep (ρ(h) may exceed ρ(n)). Why it holds, to first
  order, u the parts' unit roundoff, μ ≤ 8u the twiddle's error:
  R2c: z is read exactly (‖z‖₂ = ‖x‖₂, ‖Z‖₂ = √h·‖x‖₂) and the transform
  errs by ‖Ẑ − Z‖₂ ≤ ε(h)·√h·‖x‖₂, which the exact post-processing maps
  with norm at most √2 (|X_k|² ≤ 2(|E_k|² + |O_k|²), the pair k = 0, h with
  equality): ε(h)·√n·‖x‖₂. The post-processing rounds s and d (u|s|, u|d|),
  the product w^k·d (√2γ(2)|d| + μ|d|) and the sum s − i w^k d (u·2|X_k| ≤
  u(|s| + |d|)); the halving is exact. A bin errs by at most
  u|s| + (u + √2γ(2)/2 + μ/2)|d| ≤ 2u|E_k| + 12.9u|O_k|
  ≤ 13u·(|E_k|² + |O_k|²)^½ (|s| = 2|E_k|, |d| = 2|O_k|), so bins 0..h
  (Σ_(k<h) |E_k|² + |O_k|² = ‖Z‖₂², bin h repeating bin 0) err by at most
  13u·√2·‖Z‖₂ = 13u·√n·‖x‖₂. C2r: with Y the Hermitian extension of the
  bins (n points), C_k = F_k + iG_k, F_k = Y_k + Y_(k+h) = s,
  G_k = w^k(Y_k − Y_(k+h)) = w^k d, and ‖C‖₂ = √2·‖Y‖₂ (Parseval twice).
  Each C_k rounds s, d, the product and the sum s + i w^k d:
  2u|F_k| + 12.9u|G_k| ≤ 13u(|F_k|² + |G_k|²)^½, over the h points
  13u·√2·‖Y‖₂ (Σ_k |F_k|² + |G_k|² = 2‖Y‖₂²), which the exact transform of h
  points (norm √h) carries to 13u·√n·‖Y‖₂; the transform errs by
  ε(h)·√h·‖C‖₂ = ε(h)·√n·‖Y‖₂, and its parts are the result, not rounded
  again. Both: (ε(h) + 13u)·√n·‖x‖₂, within ε(h) + 24u.
* Declined (before any array is touched, the same rule as :func:`declines`):
  a transformed axis of more than 2^27 points.
"""

from __future__ import annotations

import functools
import math
import threading
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

from nxkernel_core import dtype as D
from nxkernel_core import spec as S
from nxkernel_core.array import Array
from nxkernel_core.dtype import Dtype
from nxkernel_core.kernel import Call, unit_roundoff
from nxkernel_core.rig import Buffer, Rig

from . import loops
from .build import Source, file_source
from .launch import CudaRig, Pointer

__all__ = ["ALGORITHM", "ASSOCIATION", "BOUND_C", "KERNELS", "MAX_POINTS", "PROSE",
           "axis_error", "bluestein_points", "chirp_ratio", "declines", "fft", "plan", "real_axis_error",
           "source", "stockham_error"]

#: The working precisions' C types.
_TYPES: Final = ("float", "double")

#: The kernels of ``kernels/fft.cu``.
_TEMPLATES: Final = ("nxk_fft_pass", "nxk_fft_gather", "nxk_fft_scatter", "nxk_fft_chirp_in",
                     "nxk_fft_pointwise", "nxk_fft_chirp_out", "nxk_fft_r2c_post", "nxk_fft_c2r_pre")
KERNELS: Final = (*(f"{k}<{t}>" for k in _TEMPLATES for t in _TYPES), "nxk_fft_zero", "nxk_fft_chirp_b")

#: The most points along a transformed axis (beyond, the call is declined).
MAX_POINTS: Final = 1 << 27

#: The constant c of the stated bound of a Stockham transform (see ``axis_error``).
BOUND_C: Final = 24.0

#: Points a pass's block holds, and the most points of a pass's sub-transform
#: where a line takes several passes (so a block reads runs of >= 16 points).
_BLOCK_POINTS: Final = {"float": 4096, "double": 2048}
_PASS_POINTS: Final = {"float": 256, "double": 128}
_COMPLEX_BYTES: Final = {"float": 8, "double": 16}
_PASS_THREADS: Final = 256
#: The most points j a pass's block takes (it keeps 20 bytes of positions for each).
_MAX_GROUP: Final = 1024

#: The working precision (C type) of each dtype.
_CTYPE: Final = {D.complex64: "float", D.float32: "float", D.complex128: "double", D.float64: "double"}


@functools.cache
def source() -> Source:
    """``kernels/fft.cu`` with every instantiation."""
    return file_source("fft.cu", KERNELS)


# --------------------------------------------------------------------------
# Plans and the stated bound
# --------------------------------------------------------------------------


def _primes(n: int) -> list[int] | None:
    """The prime factors of n >= 1 (descending), or None where one exceeds 7."""
    out: list[int] = []
    for p in (7, 5, 3, 2):
        while n % p == 0:
            out.append(p)
            n //= p
    return sorted(out, reverse=True) if n == 1 else None


def _radices(primes: Sequence[int]) -> list[int]:
    """The stage radices of a sub-transform of these primes: the twos as 8s,
    then a 4 or two 4s (or a 2 alone), then the 3s, 5s and 7s."""
    twos = sum(p == 2 for p in primes)
    out: list[int] = []
    if twos % 3 == 1 and twos >= 4:
        out += [8] * ((twos - 4) // 3) + [4, 4]
    elif twos % 3 == 1:
        out.append(2)
    else:
        out += [8] * (twos // 3) + ([4] if twos % 3 == 2 else [])
    return out + sorted(p for p in primes if p != 2)


def plan(n: int, ctype: str) -> list[list[int]] | None:
    """The passes of a Stockham transform of n points in ``ctype``, each the
    list of its stages' radices; None where n needs Bluestein's algorithm.
    One pass where n fits a block; else the fewest passes of at most
    ``_PASS_POINTS`` points, the primes shared out largest first, each to the
    pass of the least product so far."""
    primes = _primes(n)
    if primes is None:
        return None
    if n <= _BLOCK_POINTS[ctype]:
        return [_radices(primes)]
    limit = _PASS_POINTS[ctype]
    g = 2
    while True:
        groups: list[list[int]] = [[] for _ in range(g)]
        for p in primes:
            min(groups, key=math.prod).append(p)
        if max(math.prod(x) for x in groups) <= limit:
            return [_radices(x) for x in groups]
        g += 1


def bluestein_points(n: int) -> int:
    """m, the least power of two >= 2n - 1: Bluestein's convolution length."""
    return 1 << max(0, (2 * n - 2).bit_length())


def stockham_error(n: int, u: float) -> float:
    """ε(n) = 24·(⌈log₂ n⌉ + 1)·u: the relative normwise bound of a Stockham
    transform of n points (0 for n = 1, a copy), to first order."""
    return 0.0 if n <= 1 else BOUND_C * (math.ceil(math.log2(n)) + 1) * u


def chirp_ratio(n: int) -> float:
    """ρ(n) = ‖b̂‖∞ / √n, b̂ the transform of Bluestein's kernel of n points
    (computed here in float64; at most 2.45 for every n below 3000 and the
    primes 10007, 65537, 100003 and 1000003)."""
    m = bluestein_points(n)
    j = np.arange(n, dtype=np.int64)
    c = np.exp(-1j * np.pi * ((j * j) % (2 * n)) / n)
    b = np.zeros(m, np.complex128)
    b[:n] = np.conj(c)
    b[m - n + 1:] = np.conj(c[1:][::-1])
    return float(np.abs(np.fft.fft(b)).max() / math.sqrt(n))


def real_axis_error(n: int, dt: Dtype) -> float:
    """The stated relative normwise bound of R2c's or C2r's real axis of n
    points (the last listed) in ``dt``'s precision, to first order: for even
    n (packed), ε(n/2) + 24u, ε of ``axis_error`` (= ε(n) where
    n = 2^a 3^b 5^c 7^d and n >= 4; see the module's doc); for odd n,
    ``axis_error(n)``."""
    if n % 2:
        return axis_error(n, dt)
    return axis_error(n // 2, dt) + BOUND_C * unit_roundoff(dt)


def axis_error(n: int, dt: Dtype) -> float:
    """The stated relative normwise bound of the transform of one axis of n
    points in ``dt``'s precision (u its parts' unit roundoff), to first order:
    ε(n) (``stockham_error``) where n = 2^a 3^b 5^c 7^d; else Bluestein's
    ρ(n)·(2ε(m) + 25u + δ), m = ``bluestein_points(n)``, δ the elementwise
    relative error of the tabled b̂: 2u in float, ε_f64(m)·√(2m) in double."""
    u = unit_roundoff(dt)
    if _primes(n) is not None:
        return stockham_error(n, u)
    m = bluestein_points(n)
    delta = 2 * u if _CTYPE[dt] == "float" else stockham_error(m, u) * math.sqrt(2 * m)
    return chirp_ratio(n) * (2 * stockham_error(m, u) + 25 * u + delta)


# --------------------------------------------------------------------------
# Fit and declines
# --------------------------------------------------------------------------


def _reason(spec: S.Fft, x_shape: Sequence[int]) -> str | None:
    """Why ``spec`` on an x of ``x_shape`` is declined, or None: an axis of
    more than MAX_POINTS points (C2r's last axis has kind.n)."""
    for i, a in enumerate(spec.axes):
        last = i == len(spec.axes) - 1
        n = spec.kind.n if last and isinstance(spec.kind, S.C2r) else x_shape[a]
        if n > MAX_POINTS:
            return f"nx.cuda transforms at most 2^27 points along an axis, not {n}"
    return None


def declines(call: Call) -> str | None:
    """Why ``fft`` declines ``call`` (one that fits), or None where it
    computes it."""
    spec = call.spec
    assert isinstance(spec, S.Fft)
    return _reason(spec, call.operands[0].shape)


# --------------------------------------------------------------------------
# Launches
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _View:
    """An array as the kernels reach it: its buffer's address, and its layout
    in elements (complex elements for a complex array)."""

    ptr: Pointer
    offset: int
    strides: tuple[int, ...]
    shape: tuple[int, ...]

    @staticmethod
    def of(dev: CudaRig, a: Array) -> _View:
        return _View(loops.base(dev, a), a.layout.offset, tuple(a.layout.strides), tuple(a.shape))


def _c_strides(shape: Sequence[int]) -> tuple[int, ...]:
    out = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        out[i] = out[i + 1] * shape[i + 1]
    return tuple(out)


def _grid(n: int) -> tuple[int]:
    return (loops.blocks_for(n),)


def _pass(dev: CudaRig, ct: str, src: Pointer, dst: Pointer, lines: int, n: int, ns: int,
          radices: Sequence[int], sign: int) -> None:
    """One Stockham pass of radix P = prod(radices) over ``lines`` lines of n points."""
    p = math.prod(radices)
    total = lines * (n // p)
    b = max(1, min(_BLOCK_POINTS[ct] // p, total, _MAX_GROUP))
    threads = min(_PASS_THREADS, max(32, -(-(b * p // 2) // 32) * 32))
    groups = -(-total // b)
    packed = sum(r << (4 * i) for i, r in enumerate(radices))
    dev.load(source()).function(f"nxk_fft_pass<{ct}>")(
        (min(groups, loops.MAX_BLOCKS),), (threads,),
        [src, dst, np.int64(lines), np.int64(n), np.int64(ns), np.int32(p), np.int32(b),
         np.int32(len(radices)), np.int64(packed), np.int32(sign)],
        shared_bytes=(p + 2 * b * (p + 1)) * _COMPLEX_BYTES[ct] + 20 * b)


def _stockham(dev: CudaRig, ct: str, src: Pointer, dst: Pointer, lines: int, n: int,
              passes: Sequence[Sequence[int]], sign: int, keep: list[Buffer]) -> None:
    """The passes from src to dst (distinct), through scratch between them."""
    nbytes = lines * n * _COMPLEX_BYTES[ct]
    tmp: list[Pointer] = []
    for _ in range(min(2, len(passes) - 1)):
        buf, ptr = loops.scratch(dev, nbytes)
        keep.append(buf)
        tmp.append(ptr)
    ns = 1
    for i, radices in enumerate(passes):
        a = src if i == 0 else tmp[(i - 1) % 2]
        z = dst if i == len(passes) - 1 else tmp[i % 2]
        _pass(dev, ct, a, z, lines, n, ns, radices, sign)
        ns *= math.prod(radices)


#: Bluestein kernels' transforms kept per device: (n, sign) -> (buffer, address).
_HATS_KEPT: Final = 16
_hats: weakref.WeakKeyDictionary[Rig, OrderedDict[tuple[int, int], tuple[Buffer, Pointer]]] = (
    weakref.WeakKeyDictionary())
_hats_lock: Final = threading.Lock()


def _hat(dev: CudaRig, n: int, m: int, sign: int) -> Pointer:
    """The forward transform, in double, of Bluestein's kernel of n points over
    m (computed once per device and kept, least recently used dropped)."""
    with _hats_lock:
        kept = _hats.setdefault(dev, OrderedDict())
        hit = kept.get((n, sign))
        if hit is not None:
            kept.move_to_end((n, sign))
            return hit[1]
    keep: list[Buffer] = []
    b_buf, b = loops.scratch(dev, m * 16)
    keep.append(b_buf)
    dev.load(source()).function("nxk_fft_chirp_b")(_grid(m), (loops.THREADS,), [
        b, np.int64(n), np.int64(m), np.int32(sign)])
    h_buf, h = loops.scratch(dev, m * 16)
    passes = plan(m, "double")
    assert passes is not None  # m is a power of two
    _stockham(dev, "double", b, h, 1, m, passes, -1, keep)
    with _hats_lock:
        kept = _hats.setdefault(dev, OrderedDict())
        kept[(n, sign)] = (h_buf, h)
        while len(kept) > _HATS_KEPT:
            kept.popitem(last=False)
    return h


def _lines(dev: CudaRig, ct: str, src: Pointer, dst: Pointer, lines: int, n: int, sign: int,
           keep: list[Buffer]) -> None:
    """The transforms of ``lines`` contiguous lines of n points, src to dst (distinct)."""
    passes = plan(n, ct)
    if passes is not None:
        _stockham(dev, ct, src, dst, lines, n, passes, sign, keep)
        return
    m = bluestein_points(n)
    hat = _hat(dev, n, m, sign)
    module = dev.load(source())
    nbytes = lines * m * _COMPLEX_BYTES[ct]
    pad_buf, pad = loops.scratch(dev, nbytes)
    conv_buf, conv = loops.scratch(dev, nbytes)
    keep += [pad_buf, conv_buf]
    module.function(f"nxk_fft_chirp_in<{ct}>")(_grid(lines * m), (loops.THREADS,), [
        src, pad, np.int64(lines), np.int64(n), np.int64(m), np.int32(sign)])
    power = plan(m, ct)
    assert power is not None  # m is a power of two
    _stockham(dev, ct, pad, conv, lines, m, power, -1, keep)
    module.function(f"nxk_fft_pointwise<{ct}>")(_grid(lines * m), (loops.THREADS,), [
        conv, hat, np.int64(lines), np.int64(m)])
    _stockham(dev, ct, conv, pad, lines, m, power, 1, keep)
    module.function(f"nxk_fft_chirp_out<{ct}>")(_grid(lines * n), (loops.THREADS,), [
        pad, dst, np.int64(lines), np.int64(n), np.int64(m), np.int32(sign)])


#: Gather modes: a complex line, a real one, a Hermitian extension, a real
#: line of 2n points read as n complex points (x_2j + i x_2j+1).
_COMPLEX_LINE: Final = 0
_REAL_LINE: Final = 1
_HERMITIAN: Final = 2
_REAL_PAIRS: Final = 3

#: Scatter modes: complex points, their real parts, both parts as two reals.
_TO_COMPLEX: Final = 0
_TO_REAL: Final = 1
_TO_PAIRS: Final = 2


def _contiguous_lines(walk: loops.Walk, n: int, step: int) -> bool:
    """Whether the lines of a one-array walk lie at offset + l·n, points ``step`` apart, step 1."""
    shape, ((_, strides),) = walk
    return (step == 1 or n == 1) and (len(shape) == 0 or (len(shape) == 1 and strides[0] == n))


def _along(dev: CudaRig, ct: str, sign: int, axis: int, src: _View, mode: int, n: int, dst: _View,
           real: bool, keep: list[Buffer]) -> None:
    """Transform n points along ``axis`` from src (read as ``mode`` says) into
    dst (the first dst.shape[axis] bins; real parts where ``real``)."""
    cs = _COMPLEX_BYTES[ct]
    other = [i for i in range(len(src.shape)) if i != axis]
    lines_shape = [src.shape[i] for i in other]
    lines = math.prod(lines_shape)
    h = dst.shape[axis]
    module = dev.load(source())
    in_walk = loops.coalesce(lines_shape, [(src.offset, [src.strides[i] for i in other])])
    out_walk = loops.coalesce(lines_shape, [(dst.offset, [dst.strides[i] for i in other])])
    in_ptr: Pointer | None = None
    if mode == _COMPLEX_LINE and _contiguous_lines(in_walk, n, src.strides[axis]):
        in_ptr = src.ptr + src.offset * cs
    out_ptr: Pointer | None = None
    if not real and h == n and _contiguous_lines(out_walk, n, dst.strides[axis]):
        out_ptr = dst.ptr + dst.offset * cs
    if in_ptr is None:
        buf, in_ptr = loops.scratch(dev, lines * n * cs)
        keep.append(buf)
        module.function(f"nxk_fft_gather<{ct}>")(_grid(lines * n), (loops.THREADS,), [
            loops.upload(dev, loops.walk_words(in_walk)), src.ptr, np.int64(src.strides[axis]),
            np.int32(mode), np.int64(lines), np.int64(n), in_ptr])
    if out_ptr is None or out_ptr == in_ptr:
        buf, lines_out = loops.scratch(dev, lines * n * cs)
        keep.append(buf)
        _lines(dev, ct, in_ptr, lines_out, lines, n, sign, keep)
        module.function(f"nxk_fft_scatter<{ct}>")(_grid(lines * h), (loops.THREADS,), [
            loops.upload(dev, loops.walk_words(out_walk)), dst.ptr, np.int64(dst.strides[axis]),
            np.int32(_TO_REAL if real else _TO_COMPLEX), np.int64(lines), np.int64(n), np.int64(h),
            lines_out])
        return
    _lines(dev, ct, in_ptr, out_ptr, lines, n, sign, keep)


def _packed(dev: CudaRig, ct: str, sign: int, axis: int, src: _View, n: int, dst: _View, r2c: bool,
            keep: list[Buffer]) -> None:
    """R2c (``r2c``) or C2r of an even n = 2h points along ``axis`` by a
    complex transform of h points: R2c reads the real line as h complex
    points z_j = x_2j + i x_2j+1 (in place where the lines are contiguous),
    transforms them and turns them into bins 0..h (``nxk_fft_r2c_post``,
    straight into dst); C2r turns bins 0..h into h complex points
    (``nxk_fft_c2r_pre``) whose transform is the real line, its parts in
    order (written in place where dst's lines are contiguous)."""
    cs = _COMPLEX_BYTES[ct]
    h = n // 2
    other = [i for i in range(len(src.shape)) if i != axis]
    lines_shape = [src.shape[i] for i in other]
    lines = math.prod(lines_shape)
    module = dev.load(source())
    in_walk = loops.coalesce(lines_shape, [(src.offset, [src.strides[i] for i in other])])
    out_walk = loops.coalesce(lines_shape, [(dst.offset, [dst.strides[i] for i in other])])
    if r2c:
        # The real lines as complex ones: offsets and strides in reals.
        if _contiguous_lines(in_walk, n, src.strides[axis]):
            z_in = src.ptr + src.offset * (cs // 2)  # no copy: the real line is the complex one
        else:
            buf, z_in = loops.scratch(dev, lines * h * cs)
            keep.append(buf)
            module.function(f"nxk_fft_gather<{ct}>")(_grid(lines * h), (loops.THREADS,), [
                loops.upload(dev, loops.walk_words(in_walk)), src.ptr, np.int64(src.strides[axis]),
                np.int32(_REAL_PAIRS), np.int64(lines), np.int64(h), z_in])
        buf, z_out = loops.scratch(dev, lines * h * cs)
        keep.append(buf)
        _lines(dev, ct, z_in, z_out, lines, h, sign, keep)
        module.function(f"nxk_fft_r2c_post<{ct}>")(_grid(lines * (h + 1)), (loops.THREADS,), [
            loops.upload(dev, loops.walk_words(out_walk)), dst.ptr, np.int64(dst.strides[axis]),
            np.int64(lines), np.int64(h), z_out, np.int32(sign)])
        return
    buf, c_in = loops.scratch(dev, lines * h * cs)
    keep.append(buf)
    module.function(f"nxk_fft_c2r_pre<{ct}>")(_grid(lines * h), (loops.THREADS,), [
        loops.upload(dev, loops.walk_words(in_walk)), src.ptr, np.int64(src.strides[axis]),
        np.int64(lines), np.int64(h), c_in, np.int32(sign)])
    if _contiguous_lines(out_walk, n, dst.strides[axis]):
        _lines(dev, ct, c_in, dst.ptr + dst.offset * (cs // 2), lines, h, sign, keep)
        return
    buf, z_out = loops.scratch(dev, lines * h * cs)
    keep.append(buf)
    _lines(dev, ct, c_in, z_out, lines, h, sign, keep)
    module.function(f"nxk_fft_scatter<{ct}>")(_grid(lines * h), (loops.THREADS,), [
        loops.upload(dev, loops.walk_words(out_walk)), dst.ptr, np.int64(dst.strides[axis]),
        np.int32(_TO_PAIRS), np.int64(lines), np.int64(h), np.int64(h), z_out])


def _launch(dev: CudaRig, spec: S.Fft, dst: Array, x: Array) -> None:
    """Queue the transform of x into dst (see the module's doc)."""
    if dst.numel == 0:
        return
    ct = _CTYPE[dst.dtype]
    axes = spec.axes
    if any(x.shape[a] == 0 for a in axes):  # every sum is empty
        nbytes = dst.numel * dst.dtype.bits // 8
        dev.load(source()).function("nxk_fft_zero")(_grid(nbytes), (loops.THREADS,), [
            loops.base(dev, dst) + dst.layout.offset * (dst.dtype.bits // 8), np.int64(nbytes)])
        return
    sign = -1 if spec.direction is S.Direction.FORWARD else 1
    kind = spec.kind
    keep: list[Buffer] = []
    xv, dv = _View.of(dev, x), _View.of(dev, dst)
    if isinstance(kind, S.C2c):
        cur = xv
        for a in axes:
            _along(dev, ct, sign, a, cur, _COMPLEX_LINE, x.shape[a], dv, False, keep)
            cur = dv
    elif isinstance(kind, S.R2c):
        last = axes[-1]
        if x.shape[last] % 2 == 0:
            _packed(dev, ct, sign, last, xv, x.shape[last], dv, True, keep)
        else:
            _along(dev, ct, sign, last, xv, _REAL_LINE, x.shape[last], dv, False, keep)
        for a in axes[:-1]:
            _along(dev, ct, sign, a, dv, _COMPLEX_LINE, dst.shape[a], dv, False, keep)
    else:
        cur = xv
        if len(axes) > 1:
            buf, ptr = loops.scratch(dev, x.numel * _COMPLEX_BYTES[ct])
            keep.append(buf)
            work = _View(ptr, 0, _c_strides(x.shape), tuple(x.shape))
            for a in axes[:-1]:
                _along(dev, ct, sign, a, cur, _COMPLEX_LINE, x.shape[a], work, False, keep)
                cur = work
        if kind.n % 2 == 0:
            _packed(dev, ct, sign, axes[-1], cur, kind.n, dv, False, keep)
        else:
            _along(dev, ct, sign, axes[-1], cur, _HERMITIAN, kind.n, dv, True, keep)


def fft(spec: S.Fft, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
    """The unnormalised DFT of x along ``spec.axes``, of a call that fits and
    is not declined, its arrays claimed: Forward sums ``x[j]·e^(−2πi jk/n)``,
    Inverse ``x[j]·e^(+2πi jk/n)`` (see the module's doc). Operand: x."""
    _launch(loops.device_of(dsts), spec, dsts[0], operands[0])


#: What fft computes and declines, in words.
PROSE: Final = (
    "every fitting case of at most 2^27 points along each transformed axis: C2c of complex64/"
    "complex128, R2c of float32/float64, C2r(n) into float32/float64, along any axes of operands of any "
    "layout, forward or inverse, unnormalised, in the dtype's precision (float for complex64, double "
    "for complex128); an axis of extent 0 gives zeros; x identical to dst (C2c) gives the same result "
    "as a fresh dst. Declines a transformed axis of more than 2^27 points (C2r's last: n)."
)

#: The order of each transform's operations.
ASSOCIATION: Final = (
    "axes one at a time (C2c in the listed order; R2c the last listed first, real-to-complex, then the "
    "others; C2r the others first, then the last from its n/2 + 1 bins, bin 0's and, n even, bin n/2's "
    "imaginary parts dropped). R2c's and C2r's real axis of even n = 2h: packed, R2c transforms the h "
    "points z_j = x_2j + i·x_2j+1 (the real line read as complex), then bin k = (s − i·w^k·d)/2 with "
    "s = Z_k + conj Z_(h−k), d = Z_k − conj Z_(h−k) (indices mod h), w = e^(∓2πi/n), the product "
    "rounded as every complex product, the sum rounded, then halved; C2r forms C_k = s + i·w^k·d, s "
    "and d as R2c's of the bins Y_k and Y_(h−k) (k < h; the product and the sum rounded), and "
    "transforms its h points, whose parts are the real line in order. Odd n: R2c transforms the real "
    "line as a complex one (imaginary parts 0), C2r the Hermitian extension of its bins, keeping the "
    "real parts. Along an axis of n = 2^a 3^b 5^c 7^d points: Stockham autosort "
    "passes (one where n <= 4096 in float / 2048 in double, else passes of at most 256 / 128 points, "
    "the primes shared out largest first to the pass of least product), each a sub-transform by "
    "Stockham stages of radix 8, 4 or 2 (the twos), 3, 5, 7, in that order; radix 2/4/8 butterflies by "
    "sums and differences (radix 8: two radix 4 and a turn of the odd half by √½(±1 ± i)), 3/5/7 by "
    "direct sums in order from v0. Any other n: Bluestein's chirp-z convolution over m = the least "
    "power of two >= 2n - 1 (chirp, forward Stockham of m, product by the kernel's transform computed "
    "in double and rounded once, inverse Stockham of m, division by m, chirp). Twiddles computed in "
    "double after an exact integer reduction of the angle to [0, π/4] and rounded once; every complex "
    "product rounds its four real products, then their difference and sum (no fma). No atomics: the "
    "same bits on every run."
)

#: The stated bound.
ALGORITHM: Final = (
    "Stockham autosort (radix 2, 3, 4, 5, 7, 8) and Bluestein in the dtype's precision, R2c and C2r of "
    "even n packed into a complex transform of n/2 points (see the association). Barring overflow and "
    "underflow, to first order in u (the parts' unit roundoff), each transform is within "
    "‖ŷ − y‖₂ ≤ (Σ_axes ε_a)·√N·‖x‖₂ of the exact one in the 2-norm of each transformed slice, N the "
    "points transformed in all (C2r: x counted with its Hermitian extension, at most √2·‖x‖₂), ε_a = "
    "ε(n_a) but for the real axis of R2c and C2r of even n: ε(n/2) + 24u (packed: the transform of "
    "n/2 points, carried through the post-processing's exact map of norm ≤ √2, errs by "
    "ε(n/2)·√n·‖x‖₂; the post-processing's roundings, each bin's sum and difference, one twiddle "
    "product and one sum, add ≤ 13u·√n·‖x‖₂; see the module's doc), which is ε(n) for n = 2^a 3^b 5^c "
    "7^d ≥ 4, 24u for n = 2, and where n/2 needs Bluestein takes the place of Bluestein's ε(n). For "
    "n = 2^a 3^b 5^c 7^d, ε(n) = c·(⌈log₂ n⌉ + 1)·u with c = 24, so one such axis is the host "
    "library's form ‖ŷ − y‖₂ ≤ c·(⌈log₂ N⌉ + 1)·u·√N·‖x‖₂ (= c·(⌈log₂ N⌉ + 1)·u·‖y‖₂ for C2c): each "
    "radix-p stage errs by at most (twiddle product √2γ(2) + μ, μ ≤ 8u the twiddle's error) plus its "
    "butterfly (log₂ p additions for p = 2, 4, 8, one √½ product for 8; √p·(√2γ(p + 1) + μ) for the "
    "direct sums of p = 3, 5, 7) ≤ 24·log₂ p·u relative (Higham, Accuracy and Stability, §24.1). Any "
    "other n (Bluestein over m = 2^⌈log₂(2n − 1)⌉): ε(n) = ρ(n)·(2ε(m) + 25u + δ), ρ(n) = ‖b̂‖∞/√n "
    "the kernel's transform's peak (≤ 2.45 for every n < 3000 and the primes 10007 to 1000003 "
    "measured), δ the tabled b̂'s elementwise relative error: 2u for complex64 (computed in float64, "
    "rounded once), ε_f64(m)·√(2m) for complex128. Results are stored in the working precision "
    "itself: no further rounding."
)

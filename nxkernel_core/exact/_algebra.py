"""Contractions, Fourier transforms, attention and the matrix routines' residuals."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from .. import spec as S
from ..dtype import Dtype
from ._bits import Arr, units

# --------------------------------------------------------------------------
# Contractions
# --------------------------------------------------------------------------


def contract_terms(spec: S.Contract, a: Arr, b: Arr, a_dt: Dtype, b_dt: Dtype,
                   ids: npt.NDArray[np.int64] | None = None,
                   a_scale: Arr | None = None, b_scale: Arr | None = None
                   ) -> tuple[tuple[int, ...], list[list[tuple[Any, Any]]]]:
    """Each output's products of a contraction, as (a element, b element)
    pairs in their numbering (C order of the contracting pairs' indices; a
    segmented pair's group by the order of its indices), with the elements'
    block scales applied (``a_scale``/``b_scale``: the scale of each element,
    already expanded to the operand's shape, as float64 or complex128).

    Returns the result's shape and, for each output in C order, its products.
    The operands are host elements; values are float64 (complex128) or Python
    ints for integer accumulators."""
    seg = spec.segments
    batch_a = [i for i, _ in spec.batch]
    batch_b = [j for _, j in spec.batch]
    con_a = [i for i, _ in spec.contracting]
    con_b = [j for _, j in spec.contracting]
    a_free = [i for i in range(a.ndim) if i not in batch_a + con_a]
    b_free = [j for j in range(b.ndim) if j not in batch_b + con_b]
    out_b_free = [j for j in b_free if not (isinstance(seg, S.Rows) and j == seg.b_axis)]
    batch_ext = [a.shape[i] for i in batch_a]
    con_ext = [a.shape[i] for i in con_a]
    shape = (*batch_ext, *(a.shape[i] for i in a_free), *(b.shape[j] for j in out_b_free))
    groups = 1
    if isinstance(seg, S.ContractingSegments):
        groups = seg.groups
        shape = (groups, *shape)

    def value(arr: Arr, dt: Dtype, scale: Arr | None, index: tuple[int, ...]) -> Any:
        v = arr[index]
        if dt.is_int or dt.is_bool:
            x: Any = int(v) if dt.is_int else int(units(np.asarray(v))[..., 0] != 0)
        else:
            x = complex(v) if dt.is_complex else float(v)
        if scale is not None:
            x = x * scale[index]
        return x

    outputs: list[list[tuple[Any, Any]]] = []
    for out_index in itertools.product(*(range(n) for n in shape)):
        rest = out_index[1:] if isinstance(seg, S.ContractingSegments) else out_index
        group = out_index[0] if isinstance(seg, S.ContractingSegments) else None
        bi = rest[: len(batch_a)]
        ai_free = rest[len(batch_a): len(batch_a) + len(a_free)]
        bj_free = rest[len(batch_a) + len(a_free):]
        b_free_index = dict(zip(out_b_free, bj_free, strict=True))
        if isinstance(seg, S.Rows):
            r = dict(zip(a_free, ai_free, strict=True))[seg.a_axis]
            assert ids is not None
            target = int(ids[(*bi, r)])
            if not 0 <= target < b.shape[seg.b_axis]:
                outputs.append([])
                continue
            b_free_index[seg.b_axis] = target
        products = []
        for ci in itertools.product(*(range(n) for n in con_ext)):
            if isinstance(seg, S.ContractingSegments):
                assert ids is not None
                if int(ids[(*bi, ci[seg.pair])]) != group:
                    continue
            a_idx = [0] * a.ndim
            b_idx = [0] * b.ndim
            for k, (i, j) in enumerate(spec.batch):
                a_idx[i], b_idx[j] = bi[k], bi[k]
            for k, (i, j) in enumerate(spec.contracting):
                a_idx[i], b_idx[j] = ci[k], ci[k]
            for i, v in zip(a_free, ai_free, strict=True):
                a_idx[i] = v
            for j, v in b_free_index.items():
                b_idx[j] = v
            products.append((value(a, a_dt, a_scale, tuple(a_idx)),
                             value(b, b_dt, b_scale, tuple(b_idx))))
        outputs.append(products)
    return shape, outputs


# --------------------------------------------------------------------------
# Fourier transforms
# --------------------------------------------------------------------------


def dft(x: Arr, axes: Sequence[int], direction: S.Direction, kind: S.C2c | S.R2c | S.C2r
        ) -> Arr:
    """The unnormalised DFT of ``x`` along ``axes`` in complex128 (float64 for
    C2r): Forward ``Σ x[j] e^(−2πi jk/n)``, Inverse with ``+``. R2c keeps bins
    0..n//2 of the last axis; C2r(n) reads n//2 + 1 bins of the last axis,
    extends them by Hermitian symmetry (ignoring the imaginary parts of bin 0
    and, for even n, bin n/2), after transforming the other axes."""
    v = np.asarray(x).astype(np.complex128)
    sign = -1 if direction is S.Direction.FORWARD else 1

    def c2c(arr: Arr, axis: int) -> Arr:
        n = arr.shape[axis]
        if n == 0:
            return arr.copy()
        out: Arr = np.fft.fft(arr, axis=axis) if sign < 0 else np.fft.ifft(arr, axis=axis) * n
        return out

    if isinstance(kind, S.C2r):
        for a in axes[:-1]:
            v = c2c(v, a)
        last = axes[-1]
        n = kind.n
        v = np.moveaxis(v, last, -1)
        full = np.zeros((*v.shape[:-1], n), dtype=np.complex128)
        half = n // 2 + 1
        if n:
            full[..., :half] = v[..., :half]
            full[..., 0] = full[..., 0].real
            if n % 2 == 0:
                full[..., n // 2] = full[..., n // 2].real
            for k in range(1, (n + 1) // 2):
                full[..., n - k] = np.conj(full[..., k])
        out = c2c(full, full.ndim - 1).real
        return np.moveaxis(out, -1, last)
    for a in axes:
        v = c2c(v, a)
    if isinstance(kind, S.R2c):
        last = axes[-1]
        n = v.shape[last]
        if n == 0:  # one bin, an empty sum
            shape = list(v.shape)
            shape[last] = 1
            return np.zeros(shape, dtype=np.complex128)
        v = np.take(v, np.arange(n // 2 + 1), axis=last)
    return v


# --------------------------------------------------------------------------
# Attention
# --------------------------------------------------------------------------


def attention(visible: npt.NDArray[np.bool_], logits: Arr, v: Arr) -> tuple[Arr, Arr, Arr]:
    """Attention in float64 from the program's outputs per pair, ``visible``
    and ``logits`` ``[R; tq; tk]`` (the scores already in the logits), and the
    values each row reads, ``v [R; tk; dv]``.

    Returns (o ``[R; tq; dv]``, lse ``[R; tq]``, weights ``[R; tq; tk]``) with
    lse the log-sum-exp of the visible logits (−inf for none or all −inf), o
    the visible values weighted by exp(x − lse) summed from +0 (+0 for a row
    of no visible pair or only −inf logits)."""
    x = np.where(visible, logits, -np.inf)
    with np.errstate(all="ignore"):
        m = np.max(x, axis=-1, initial=-np.inf)
        finite_m = np.where(np.isfinite(m), m, 0.0)
        s = np.sum(np.where(visible, np.exp(x - finite_m[..., None]), 0.0), axis=-1)
        lse = np.where(np.isneginf(m), -np.inf,
                       np.where(np.isposinf(m), np.inf, finite_m + np.log(s)))
        lse = np.where(np.isnan(m), np.nan, lse)
        w = np.where(visible & np.isfinite(lse)[..., None], np.exp(x - lse[..., None]), 0.0)
        o = np.einsum("rqt,rtd->rqd", w, v.astype(np.float64))
    return o, lse, w


# --------------------------------------------------------------------------
# Matrix routines
# --------------------------------------------------------------------------


def residual(lhs: Arr, rhs: Arr) -> Arr:
    """The largest |lhs − rhs| of each matrix (the last two axes), in float64."""
    diff = np.abs(np.asarray(lhs, dtype=np.complex128) - np.asarray(rhs, dtype=np.complex128))
    if diff.size == 0:
        return np.zeros(diff.shape[:-2])
    return np.asarray(diff.max(axis=(-2, -1)), dtype=np.float64)

"""The host library's contraction: ``contract``, with init, block scales and segments.

A contraction moves each operand into a canonical C-contiguous copy,
``a [batch, rows, K]`` and ``b [batch, K, cols]`` (transposed, converted into
the accumulator and multiplied by its block scales on the way), so nothing
downstream sees the caller's layout. Then:

* float32 and float64 accumulators multiply over fixed tiles (``tiling``):
  small tiles by the library's own kernel (``lanedots.product_at``, each
  element a chain of fused multiply-adds over K in order), the others by
  sgemm/dgemm of the library's own OpenBLAS instance; complex ones by four
  real products of the parts,
  ``re = ar·br − ai·bi`` and ``im = ar·bi + ai·br``; init is added last, one
  rounding per part.
* integer accumulators are exact and wrap: where every product and partial sum
  is an integer below 2^52 the product runs in float64 (exact in any order),
  else in uint64 (wrapping, exact modulo 2^64); the sum then wraps to the
  accumulator's width, init added modulo it.

Determinism. OpenBLAS's bits depend on its thread count, so the library
multiplies on its own OpenBLAS instance, which stays on one thread whatever
the program does to its BLAS (``blas``). The parallelism is its own
(``tiling``): each product's output is cut into fixed tiles (whole panels of
rows, then of columns; never K), a function of the extents alone, that the
library's threads (``pool``) compute, each tile of each batch element by one
single-threaded product (OpenBLAS's strided batch, or the library's own
kernel for a small tile), so each element's order of summation is a
function of the extents and, on OpenBLAS's tiles, the CPU's OpenBLAS core
type (``blas``: the environment's ``OPENBLAS_CORETYPE`` does not reach it).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from nxkernel_core import dtype as D
from nxkernel_core import shape as Shape
from nxkernel_core import spec as S
from nxkernel_core.array import Array
from nxkernel_core.declines import contract_call_declines, contract_declines
from nxkernel_core.dtype import Dtype
from nxkernel_core.kernel import Call, gamma, unit_roundoff
from nxkernel_core.layout import Layout

from . import blas, lanedots, pool, tiling, views
from .family import Family, Hook
from .views import read, store, target

__all__ = ["FAMILY", "contract", "declines", "declines_call", "error_factor"]

NDArray = npt.NDArray[Any]

def _aligned(shape: Sequence[int], dtype: npt.DTypeLike) -> NDArray:
    """An uninitialised C-contiguous array whose data starts on a 64-byte line."""
    dt = np.dtype(dtype)
    nbytes = math.prod(shape) * dt.itemsize
    raw = np.empty(nbytes + 64, dtype=np.uint8)
    start = -raw.ctypes.data % 64
    return raw[start:start + nbytes].view(dt).reshape(shape)


# --------------------------------------------------------------------------
# What it computes: dtypes
# --------------------------------------------------------------------------


def _part(acc: Dtype) -> Dtype:
    """A complex accumulator's part dtype; a real one itself."""
    if acc is D.complex64:
        return D.float32
    if acc is D.complex128:
        return D.float64
    return acc


def _exact_into(dt: Dtype, acc: Dtype) -> bool:
    """Whether every element of ``dt`` converts exactly into float or complex ``acc``."""
    part = _part(acc)
    assert part.float_format is not None
    if dt.is_bool:
        return True
    if dt.is_int:
        magnitude_bits = dt.bits - (1 if dt.kind is D.Kind.SIGNED else 0)
        return magnitude_bits <= part.float_format.fraction_bits + 1
    if dt.is_float:
        return dt.bits <= part.bits
    return acc.is_complex and _part(dt).bits <= part.bits


def _operand_reason(what: str, dt: Dtype, acc: Dtype) -> str | None:
    """Why an operand (a, b or a Value scale) of ``dt`` is declined into ``acc``."""
    if acc.is_int:
        if dt.is_int or dt.is_bool:
            return None
        return f"{what} {dt.name} is not an integer, as the {acc.name} accumulator needs"
    if _exact_into(dt, acc):
        return None
    return f"{what} {dt.name} does not convert exactly into the {acc.name} accumulator"


def _init_reason(what: str, dt: Dtype, acc: Dtype) -> str | None:
    """Why init of ``dt`` is declined: it must convert exactly into ``acc``, or be
    a float (complex, into a complex accumulator) that rounds once into it."""
    if acc.is_int:
        return _operand_reason(what, dt, acc)
    if _exact_into(dt, acc) or dt.is_float or (dt.is_complex and acc.is_complex):
        return None
    return f"{what} {dt.name} does not convert into the {acc.name} accumulator"


def _result_reason(acc: Dtype, dst: Dtype) -> str | None:
    """Why a result in ``acc`` is declined into a destination of ``dst``: it
    rounds into one of its kind (integer, float or complex)."""
    if acc.is_int and not dst.is_int:
        return f"a {acc.name} result rounds into an integer destination, not {dst.name}"
    if acc.is_float and not dst.is_float:
        return f"a {acc.name} result rounds into a float destination, not {dst.name}"
    if acc.is_complex and not dst.is_complex:
        return f"a {acc.name} result rounds into a complex destination, not {dst.name}"
    return None


def declines(spec: S.Contract, dst: Dtype, operands: Sequence[Dtype]) -> str | None:
    """Why the host declines a contraction of these dtypes, or None (a fitting call).

    It computes every accumulator. Into a float or complex one, a and b (and a
    Value scale) must convert exactly, init exactly or by one rounding of a
    float (complex only into complex); the result rounds into a float
    destination (complex into complex). Into an integer one, every operand and
    scale is an integer or a boolean and the destination an integer. It
    declines Value scales into complex accumulators and Exponent scales into
    integer ones (``declines.contract_declines``' walk)."""
    return contract_declines(spec, dst, operands, operand=_operand_reason, init=_init_reason,
                             result=_result_reason)


def declines_call(call: Call) -> str | None:
    """``declines`` of a contract call: the library's stated declines."""
    return contract_call_declines(call, declines)


def error_factor(k: int, acc: Dtype) -> float:
    """e(K): an output of K products errs by at most e(K) (|init| + Σ|a||b|).

    Real: γ(K + 3), u the accumulator's: BLAS's K products and additions (any
    order, γ(K)), a Value scale's rounding of each factor (two), init added last
    (one). Complex: four real products of K terms each (γ(K)), their difference
    or sum and init (two more per part), so each part errs by γ(K + 2) times
    its Σ(|ar·br| + |ai·bi|) or Σ(|ar·bi| + |ai·br|), the modulus by √2·γ(K + 2);
    at K = 1 the product is the textbook complex product, within √5·u of ab
    [Brent, Percival, Zimmermann 2007], and with init within γ(4). Zero
    products: init is exact. Integers: exact (wrapping), 0."""
    if k == 0 or not (acc.is_float or acc.is_complex):
        return 0.0
    u = unit_roundoff(acc)
    if acc.is_complex:
        return gamma(4, u) if k == 1 else math.sqrt(2.0) * gamma(k + 2, u)
    return gamma(k + 3, u)


# --------------------------------------------------------------------------
# Operands
# --------------------------------------------------------------------------


def _acc_values(x: NDArray, dt: Dtype, acc: Dtype) -> NDArray:
    """``x`` (host elements of ``dt``) as the accumulator holds them: a float or
    complex array of acc's type (a bool as its byte != 0), or, for an integer
    accumulator, int64 values congruent to them modulo 2^64."""
    if dt.is_bool:
        x = x.view(np.uint8) != 0
    if acc.is_int:
        return x.astype(np.int64)
    return x.astype(acc.numpy_dtype)


def _scale_values(kind: S.ScaleKind, s: Array, acc: Dtype) -> NDArray:
    """A scale array's scales in the accumulator (a complex one's part): Exponent
    code e is 2^(e − 127) (exact: 2^−127 is a float32 subnormal), 255 NaN."""
    raw = read(s)
    if kind is S.ScaleKind.VALUE:
        return _acc_values(raw, s.dtype, acc)
    part = _part(acc).numpy_dtype
    codes = raw.astype(np.int32)
    out = np.ldexp(np.ones(codes.shape, dtype=part), codes - 127)
    out[codes == 255] = np.nan  # its 2^128 overflowed to inf: the code means NaN
    return out


def _scale_in_place(out: NDArray, scale: NDArray) -> None:
    """Multiply C-contiguous ``out`` by its block scales: element i by
    ``scale[i // (extent / scale extent)]``, axis by axis. Each axis of ``out``
    splits into (blocks, block) and the scale broadcasts over the second, so the
    scale is never expanded to the operand's size."""
    if out.size == 0:
        return
    split: list[int] = []
    spread: list[int] = []
    for d, n in zip(out.shape, scale.shape, strict=True):
        split += [n, d // n]
        spread += [n, 1]
    view = out.reshape(split)
    view *= scale.reshape(spread)


#: The narrow floats whose codes convert through a table: ml_dtypes converts
#: element by element, a table of every code is ~2x faster.
_TABLED: Final = (D.bfloat16, D.float8_e4m3fn, D.float8_e5m2, D.float4_e2m1fn)


@functools.cache
def _table(dt: Dtype, into: np.dtype[Any]) -> NDArray:
    """Every code of a narrow float ``dt`` (8 or 16 bits a code) converted into ``into``."""
    width = np.uint8 if dt.itemsize == 1 else np.uint16
    return np.arange(1 << (8 * dt.itemsize)).astype(width).view(dt.numpy_dtype).astype(into)


def _convert(out: NDArray, view: NDArray, dt: Dtype) -> None:
    """``out[...] = view`` converted exactly into out's type."""
    if dt in _TABLED:
        codes: npt.NDArray[np.unsignedinteger[Any]] = view.view(
            np.uint8 if dt.itemsize == 1 else np.uint16)
        np.take(_table(dt, out.dtype), codes, axis=None, out=out, mode="clip")
        return
    np.copyto(out, view, casting="unsafe")


def _canonical(x: Array, perm: Sequence[int], acc: Dtype, scale: NDArray | None
               ) -> list[NDArray]:
    """Operand ``x`` transposed by ``perm`` into a fresh C-contiguous copy on a
    64-byte line, in the accumulator, times its scales: one array for a real or
    integer accumulator, the real and imaginary parts for a complex one."""
    view = read(x).transpose(perm)
    if scale is not None:
        scale = scale.transpose(perm)
    if x.dtype.is_bool:
        view = view.view(np.uint8) != 0
    if acc.is_complex:
        part = _part(acc).numpy_dtype
        re = _aligned(view.shape, part)
        im = _aligned(view.shape, part)
        if x.dtype.is_complex:
            np.copyto(re, view.real, casting="unsafe")
            np.copyto(im, view.imag, casting="unsafe")
        else:
            _convert(re, view, x.dtype)
            im[...] = 0
        if scale is not None:
            _scale_in_place(re, scale)
            _scale_in_place(im, scale)
        return [re, im]
    if (acc.is_float and scale is None and view.dtype == acc.numpy_dtype
            and view.flags.c_contiguous and view.ctypes.data % 64 == 0):
        # Already canonical: hand it to BLAS as it is (saves a copy, ~5% at 1024³).
        return [view]
    out = _aligned(view.shape, np.int64 if acc.is_int else acc.numpy_dtype)
    _convert(out, view, x.dtype)
    if scale is not None:
        _scale_in_place(out, scale)
    return [out]


# --------------------------------------------------------------------------
# Products
# --------------------------------------------------------------------------

#: Integer products below this magnitude are exact in float64, in any order.
_EXACT_F64: Final = float(2**52)


def _integer_jobs(pairs: Sequence[tuple[NDArray, NDArray]]) -> list[NDArray]:
    """Each pair's products (``a [B, R, K] @ b [B, K, C]``) modulo 2^64, as
    uint64: in float64 where every product and partial sum is an integer
    below 2^52, else in wrapping uint64."""
    outs = []
    jobs = []
    for a, b in pairs:
        batch, rows, k = a.shape
        cols = b.shape[2]
        ma = float(np.abs(a.astype(np.float64)).max()) if a.size else 0.0
        mb = float(np.abs(b.astype(np.float64)).max()) if b.size else 0.0
        if ma < _EXACT_F64 and mb < _EXACT_F64 and ma * mb * k < _EXACT_F64:
            out = np.zeros((batch, rows, cols), dtype=np.float64)
            jobs.append((a.astype(np.float64), b.astype(np.float64), out))
        else:
            out = np.zeros((batch, rows, cols), dtype=np.uint64)
            jobs.append((a.view(np.uint64), b.view(np.uint64), out))
        outs.append(out)
    tiling.products(jobs)
    return [o if o.dtype == np.uint64 else o.astype(np.int64).view(np.uint64) for o in outs]


def _many(pairs: Sequence[tuple[list[NDArray], list[NDArray]]], acc: Dtype,
          outs: list[NDArray] | None = None) -> list[NDArray]:
    """The products ``a @ b`` of each pair of canonical operands ``[B, R, K]``
    and ``[B, K, C]`` (a list of parts each) in the accumulator, ``[B, R, C]``
    each: float by BLAS over fixed tiles (``tiling``; into ``outs`` where
    given, C-contiguous); complex by four real products, ``re = ar·br −
    ai·bi``, ``im = ar·bi + ai·br``; integers modulo 2^64."""
    if acc.is_int:
        return _integer_jobs([(a[0], b[0]) for a, b in pairs])
    if acc.is_float:
        if outs is None:
            outs = [np.zeros((*a[0].shape[:2], b[0].shape[2]), dtype=acc.numpy_dtype)
                    for a, b in pairs]
        tiling.products([(a[0], b[0], o) for (a, b), o in zip(pairs, outs, strict=True)])
        return outs
    part = _part(acc).numpy_dtype
    parts = []
    jobs = []
    for (ar, ai), (br, bi) in pairs:
        shape = (*ar.shape[:2], br.shape[2])
        p = [np.zeros(shape, dtype=part) for _ in range(4)]
        jobs += [(ar, br, p[0]), (ai, bi, p[1]), (ar, bi, p[2]), (ai, br, p[3])]
        parts.append(p)
    tiling.products(jobs)
    outs = []
    for p in parts:
        out = np.empty(p[0].shape, dtype=acc.numpy_dtype)
        np.subtract(p[0], p[1], out=out.real)
        np.add(p[2], p[3], out=out.imag)
        outs.append(out)
    return outs


# --------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------


def _wrap(v: NDArray, dt: Dtype) -> NDArray:
    """uint64 residues ``v`` as integers of ``dt`` (the residue modulo 2^bits)."""
    bits = dt.bits
    signed = dt.kind is D.Kind.SIGNED
    if bits == 64:
        return v.view(np.int64 if signed else np.uint64)
    low = (v & np.uint64((1 << bits) - 1)).astype(np.int64)
    if signed:
        low = np.where(low >= 1 << (bits - 1), low - (1 << bits), low)
    return low.astype(dt.numpy_dtype)


def _round_into(values: NDArray, acc: Dtype, dst: Dtype) -> NDArray:
    """Accumulator values rounded once into ``dst``: integers modulo its width,
    floats by the store rule, complex numbers part by part."""
    if acc.is_int:
        held = _wrap(values, acc)
        if dst is acc:
            return held
        return _wrap(held.astype(np.int64).view(np.uint64), dst)
    if dst.numpy_dtype == values.dtype:
        return values
    if dst.is_complex or dst in (D.float32, D.float64, D.float16):
        # NumPy's conversions here round to nearest, ties to even, overflowing
        # to ±inf: the store rule for these formats.
        return values.astype(dst.numpy_dtype)
    return D.of_float(dst, values.astype(np.float64))


def _finish(products: NDArray, init: NDArray | None, empty: NDArray | None, acc: Dtype
            ) -> NDArray:
    """``init + products`` in the accumulator (init added last, one rounding),
    except where ``empty`` marks outputs without products: init's element as
    the accumulator holds it, bits unchanged, or +0."""
    if acc.is_int:  # an output without products is 0 (+ init) already
        return products if init is None else products + init.view(np.uint64)
    out = products if init is None else products + init
    if empty is not None and empty.any():
        fill = init if init is not None else np.zeros((), dtype=out.dtype)
        out = np.where(empty, fill, out)
    return out


# --------------------------------------------------------------------------
# The kernel
# --------------------------------------------------------------------------


def contract(spec: S.Contract, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
    """``dst = init + Σ a·b`` over the contracting pairs, in ``spec.acc``, rounded
    once into dst, for a call that fits and is not declined, the door passed;
    see the module docstring and ``declines`` for what it computes.
    Operands: a, b, [init], [a's scale], [b's scale], [ids]."""
    with np.errstate(all="ignore"):  # NaN and infinity are values, not errors
        _compute(spec, dsts[0], operands)


def prepare(spec: S.Contract, dsts: tuple[tuple[Dtype, Layout], ...],
            operands: tuple[tuple[Dtype, Layout], ...]) -> Hook | None:
    """``contract`` prepared for one signature (the caller's warm path): a
    float32 or float64 matrix product ``a [m, k] @ b [k, n]`` (no batch, init,
    scale or segment; operands and destination C-contiguous in the
    accumulator; extents a 32-bit BLAS integer holds) as ``_compute`` runs
    it: the same calls over the same tiles into the destination, the
    operands read where they lie. None for any other contraction."""
    acc = spec.acc
    if (acc not in (D.float32, D.float64) or spec.batch or spec.init or spec.segments is not None
            or any(s is not None for s in spec.scales) or spec.contracting != ((1, 0),)
            or len(operands) != 2 or len(dsts) != 1):
        return None
    (ad, al), (bd, bl) = operands
    (dd, dl), = dsts
    if (ad is not acc or bd is not acc or dd is not acc or len(al.shape) != 2 or len(bl.shape) != 2
            or not al.is_contiguous() or not bl.is_contiguous() or not dl.is_contiguous()):
        return None
    (m, k), (k2, n) = al.shape, bl.shape
    if (k != k2 or dl.shape != (m, n) or min(m, n, k) < 1 or max(m, n, k) > blas.INT_MAX
            or Shape.contract_refusal(spec, [dl.shape], [al.shape, bl.shape], [ad, bd]) is not None
            or declines(spec, dd, [ad, bd]) is not None):
        return None
    dtype = acc.numpy_dtype
    item = dtype.itemsize
    fa, fb, fd = al.offset * item, bl.offset * item, dl.offset * item
    address = views.address

    def places(ds: Sequence[Array], ops: Sequence[Array]) -> tuple[int, int, int]:
        a, b, d = ops[0].buffer, ops[1].buffer, ds[0].buffer
        am, bm, dm = a.memory, b.memory, d.memory
        # Each memory's address, kept once found (``0`` is no address).
        return ((am.address or address(am)) + a.offset + fa,
                (bm.address or address(bm)) + b.offset + fb,
                (dm.address or address(dm)) + d.offset + fd)

    single = len(tiling.tiles(m, n, k)) == 1
    if single and tiling.by_lanes(m, n, k):
        like = dtype.type(0)
        own = lanedots.product_at

        def lanes(sp: S.Contract, ds: Sequence[Array], ops: Sequence[Array]) -> None:
            a, b, d = places(ds, ops)
            own(1, m, n, k, a, 0, k, 1, b, 0, n, d, 0, n, like)

        return lanes
    if single:
        product = blas.gemm_one(dtype, m, n, k)

        def gemm(sp: S.Contract, ds: Sequence[Array], ops: Sequence[Array]) -> None:
            product(*places(ds, ops))

        return gemm

    def tiled(sp: S.Contract, ds: Sequence[Array], ops: Sequence[Array]) -> None:
        tiling.run(tiling.float_tasks(dtype, 1, m, n, k, *places(ds, ops), pool.count()),
                   m * n * k)

    return tiled


def _compute(spec: S.Contract, dst: Array, operands: Sequence[Array]) -> None:
    """Compute the result into dst, reading every operand before dst is written
    (init may be dst)."""
    acc = spec.acc
    a, b = operands[0], operands[1]
    rest = iter(operands[2:])
    init_arr = next(rest) if spec.init else None
    scales: list[NDArray | None] = []
    for kind in spec.scales:
        scales.append(None if kind is None else _scale_values(kind, next(rest), acc))
    ids = read(next(rest)) if spec.segments is not None else None

    batch_a = [i for i, _ in spec.batch]
    batch_b = [j for _, j in spec.batch]
    con_a = [i for i, _ in spec.contracting]
    con_b = [j for _, j in spec.contracting]
    free_a = [i for i in range(a.rank) if i not in batch_a + con_a]
    free_b = [j for j in range(b.rank) if j not in batch_b + con_b]
    batch = [a.shape[i] for i in batch_a]
    nbatch = math.prod(batch)
    k_ext = math.prod(a.shape[i] for i in con_a)
    out_shape = dst.shape

    seg = spec.segments
    empty: NDArray | None = None
    if seg is None:
        ca = _canonical(a, batch_a + free_a + con_a, acc, scales[0])
        cb = _canonical(b, batch_b + con_b + free_b, acc, scales[1])
        rows = math.prod(a.shape[i] for i in free_a)
        cols = math.prod(b.shape[j] for j in free_b)
        pairs = [([p.reshape(nbatch, rows, k_ext) for p in ca],
                  [p.reshape(nbatch, k_ext, cols) for p in cb])]
        if (init_arr is None and dst.dtype is acc and acc.is_float and k_ext > 0
                and dst.layout.is_contiguous()):
            # BLAS writes a C-contiguous dst itself: saves the result's copy
            # and store.
            whole = target(dst)
            assert whole is not None  # a byte-wide dst
            _many(pairs, acc, [whole.reshape(nbatch, rows, cols)])
            return
        products = _many(pairs, acc)[0].reshape(out_shape)
        if k_ext == 0:
            empty = np.ones((), dtype=np.bool_)
    elif isinstance(seg, S.Rows):
        products, empty = _rows_segments(seg, a, b, acc, scales, ids, batch_a, batch_b, con_a,
                                         con_b, free_a, free_b, out_shape)
    else:
        products, empty = _contracting_segments(seg, spec, a, b, acc, scales, ids, batch_a,
                                                batch_b, free_a, free_b, out_shape)

    init = None
    if init_arr is not None:
        init = _acc_values(read(init_arr), init_arr.dtype, acc)
    store(dst, _round_into(_finish(products, init, empty, acc), acc, dst.dtype))


def _rows_segments(seg: S.Rows, a: Array, b: Array, acc: Dtype, scales: list[NDArray | None],
                   ids: NDArray | None, batch_a: list[int], batch_b: list[int], con_a: list[int],
                   con_b: list[int], free_a: list[int], free_b: list[int],
                   out_shape: tuple[int, ...]) -> tuple[NDArray, NDArray | None]:
    """Grouped products: index r along a's ``a_axis`` multiplies b's slice
    ``ids[r]`` along ``b_axis``; rows whose id is outside [0, g) get none."""
    assert ids is not None
    other_a = [i for i in free_a if i != seg.a_axis]
    other_b = [j for j in free_b if j != seg.b_axis]
    nbatch = math.prod(a.shape[i] for i in batch_a)
    ra = a.shape[seg.a_axis]
    ro = math.prod(a.shape[i] for i in other_a)
    k_ext = math.prod(a.shape[i] for i in con_a)
    g = b.shape[seg.b_axis]
    cols = math.prod(b.shape[j] for j in other_b)
    ca = [p.reshape(nbatch, ra, ro, k_ext)
          for p in _canonical(a, [*batch_a, seg.a_axis, *other_a, *con_a], acc, scales[0])]
    cb = [p.reshape(nbatch, g, k_ext, cols)
          for p in _canonical(b, [*batch_b, seg.b_axis, *con_b, *other_b], acc, scales[1])]
    ids2 = ids.reshape(nbatch, ra)
    dtype = np.uint64 if acc.is_int else acc.numpy_dtype
    res = np.zeros((nbatch, ra, ro, cols), dtype=dtype)
    pairs = []
    places = []
    for t in range(nbatch):
        for e in range(g):
            sel = np.flatnonzero(ids2[t] == e)
            if sel.size == 0:
                continue
            lhs = []
            for p in ca:
                picked = _aligned((sel.size, ro, k_ext), p.dtype)
                np.take(p[t], sel, axis=0, out=picked)
                lhs.append(picked.reshape(1, sel.size * ro, k_ext))
            pairs.append((lhs, [p[t, e][None] for p in cb]))
            places.append((t, sel))
    for (t, sel), out in zip(places, _many(pairs, acc), strict=True):
        res[t, sel] = out[0].reshape(sel.size, ro, cols)
    # Canonical axes: batch, a_axis, a's other free axes, b's other free axes;
    # dst's: batch, a's free axes in order (a_axis among them), b's others.
    nb = len(batch_a)
    expanded = res.reshape(*(a.shape[i] for i in batch_a), ra, *(a.shape[i] for i in other_a),
                           *(b.shape[j] for j in other_b))
    order = list(range(nb))
    order += [nb if i == seg.a_axis else nb + 1 + other_a.index(i) for i in free_a]
    order += [nb + 1 + len(other_a) + t for t in range(len(other_b))]
    products = np.ascontiguousarray(expanded.transpose(order)).reshape(out_shape)
    invalid = ~((ids2 >= 0) & (ids2 < g)) if k_ext else np.ones(ids2.shape, dtype=np.bool_)
    mask_shape = [a.shape[i] for i in batch_a]
    mask_shape += [ra if i == seg.a_axis else 1 for i in free_a] + [1] * len(other_b)
    return products, invalid.reshape(mask_shape)


def _contracting_segments(seg: S.ContractingSegments, spec: S.Contract, a: Array, b: Array,
                          acc: Dtype, scales: list[NDArray | None], ids: NDArray | None,
                          batch_a: list[int], batch_b: list[int], free_a: list[int],
                          free_b: list[int], out_shape: tuple[int, ...]
                          ) -> tuple[NDArray, NDArray | None]:
    """Products of contracting pair ``pair`` cut into ``groups``: slice e sums
    group e's indices alone (with every index of the other pairs)."""
    assert ids is not None
    pa, pb = spec.contracting[seg.pair]
    rest_a = [i for i, _ in spec.contracting if i != pa]
    rest_b = [j for _, j in spec.contracting if j != pb]
    nbatch = math.prod(a.shape[i] for i in batch_a)
    rows = math.prod(a.shape[i] for i in free_a)
    cols = math.prod(b.shape[j] for j in free_b)
    kp = a.shape[pa]
    kr = math.prod(a.shape[i] for i in rest_a)
    g = seg.groups
    ca = [p.reshape(nbatch, rows, kp, kr)
          for p in _canonical(a, batch_a + free_a + [pa] + rest_a, acc, scales[0])]
    cb = [p.reshape(nbatch, kp, kr, cols)
          for p in _canonical(b, [*batch_b, pb, *rest_b, *free_b], acc, scales[1])]
    ids2 = ids.reshape(nbatch, kp)
    dtype = np.uint64 if acc.is_int else acc.numpy_dtype
    res = np.zeros((g, nbatch, rows, cols), dtype=dtype)
    empty = np.ones((g, nbatch), dtype=np.bool_)
    pairs = []
    places = []
    for t in range(nbatch):
        for e in range(g):
            sel = np.flatnonzero(ids2[t] == e)
            if sel.size == 0 or kr == 0:
                continue
            lhs, rhs = [], []
            for p in ca:
                picked = _aligned((rows, sel.size, kr), p.dtype)
                np.take(p[t], sel, axis=1, out=picked)
                lhs.append(picked.reshape(1, rows, sel.size * kr))
            for p in cb:
                picked = _aligned((sel.size, kr, cols), p.dtype)
                np.take(p[t], sel, axis=0, out=picked)
                rhs.append(picked.reshape(1, sel.size * kr, cols))
            pairs.append((lhs, rhs))
            places.append((e, t))
            empty[e, t] = False
    for (e, t), out in zip(places, _many(pairs, acc), strict=True):
        res[e, t] = out[0]
    mask_shape = [g, *(a.shape[i] for i in batch_a)] + [1] * (len(out_shape) - 1 - len(batch_a))
    return res.reshape(out_shape), empty.reshape(mask_shape)


# --------------------------------------------------------------------------
# The family
# --------------------------------------------------------------------------

_PROSE: Final = (
    "every accumulator, batch and contracting pairs of any layout, init (which may be dst), "
    "Exponent and Value block scales, Rows and Contracting segments. Into float32/float64 "
    "(complex64/complex128) accumulators a, b and Value scales must convert exactly (bool, "
    "integers of at most 24 (53) magnitude bits, floats no wider than the accumulator's part), "
    "init exactly or by one rounding of a float, and dst is a float (complex) dtype; into "
    "integer accumulators every operand is an integer or bool and dst an integer. Declines "
    "other dtypes, Value scales into complex accumulators and Exponent scales into integer ones."
)

FAMILY: Final = Family(
    prose={"contract": _PROSE},
    prepared={"contract": prepare},
    association={
        "contract": "operands copied into canonical C-contiguous [batch, rows, K] and "
                    "[batch, K, cols] arrays; float products over fixed tiles of the output "
                    "(nxkernel_host.tiling: 1 below 2^22 multiply-adds, else 2 up to 2^31, "
                    "twice as many per fourfold work, at most 32, divided by the batch's count; "
                    "rows, then columns, halved "
                    "in whole panels of 64; K never cut). A tile of fewer than "
                    f"2^{tiling.LANE_WORK.bit_length() - 1} multiply-adds and at least "
                    f"{tiling.LANE_MIN_OUTPUTS} "
                    "outputs: each element a chain of fused multiply-adds over K in order from "
                    "−0 (the library's own kernel). Any other tile: the library's own OpenBLAS "
                    "gemm (one thread, whatever the program sets), in the order of K that "
                    "OpenBLAS's routine for the tile's extents takes, a function of the extents "
                    "and the CPU's own OpenBLAS core type alone (the environment's "
                    "OPENBLAS_CORETYPE ignored; K = 1: one rounded product); complex "
                    "as re = (Σar·br − Σai·bi) and im = (Σar·bi + Σai·br), four real products; "
                    "init added last; a Value scale multiplies each element in the accumulator "
                    "first (one rounding), an Exponent scale exactly. Integers: exact, wrapping "
                    "at the accumulator's width.",
    },
    algorithms={
        "contract": "result = round_dst(init + products); outputs without products (K = 0, "
                    "a Rows id outside [0, g), an empty Contracting group) are init as the "
                    "accumulator holds it, bits unchanged, or +0. e(K) = γ(K + 3) (real), "
                    "√2·γ(K + 2) (complex, K ≥ 2), γ(4) (complex, K = 1), 0 at K = 0. "
                    "Deterministic on any thread count: the library's own kernel and its own "
                    "OpenBLAS instance run each tile on one thread (see nxkernel_host.blas); "
                    "tiles run on a thread pool.",
    },
)

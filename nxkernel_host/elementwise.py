"""The elementwise family of the host library: ``map``.

``map`` runs a program (``nxkernel_core.prog``) at every index of its loop:
it loads each operand (``loads``: Plain or Padded), evaluates the program
(``program``: every kind at every dtype, exact kinds bit for bit, the
transcendentals within ``program.ULPS``) box by box over the threads, and
stores each output into its destination, packing sub-byte ones. It declines
nothing; ``map_`` is the library's hook (the fit and the door before it).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from nxkernel_core import dtype as D
from nxkernel_core import shape as SH
from nxkernel_core.array import Array
from nxkernel_core.dtype import Dtype
from nxkernel_core.layout import Layout
from nxkernel_core.prog import Binary, Op2
from nxkernel_core.shape import Shape
from nxkernel_core.spec import Map, Plain

from . import bytekernels as B
from . import program, views
from .family import Family, Hook
from .kinds import Impl
from .loads import load

#: How a prepared kernel views an operand or a fresh destination (``views``).
Reader = Callable[[Array], npt.NDArray[Any]]

__all__ = ["FAMILY", "map_"]


@functools.lru_cache(maxsize=1024)
def _loop(spec: Map, shapes: tuple[tuple[int, ...], ...]) -> Shape:
    """The loop's shape of a call that fits (``shape.map``), once per spec and
    operands' shapes."""
    loaded = SH.map(spec, shapes)
    assert not isinstance(loaded, SH.Error)  # the call fits
    return loaded[0]


def map_(spec: Map, dsts: Sequence[Array], operands: Sequence[Array]) -> None:
    """``spec.prog`` at every index of the loop, operand ``i`` read by
    ``spec.loads[i]``, output ``k`` into ``dsts[k]``, for a call that fits.

    A destination identical to a Plain operand reads as a fresh one would:
    each box reads every operand before it writes there.
    """
    alias = any(isinstance(ld, Plain) and d.identical(a)
                for d in dsts for a, ld in zip(operands, spec.loads, strict=True))
    _compute(spec, dsts, operands, program.compile(spec.prog),
             _loop(spec, tuple([a.layout.shape for a in operands])), alias)


def _compute(spec: Map, dsts: Sequence[Array], operands: Sequence[Array], ev: program.Evaluator,
             loop: Shape, alias: bool) -> None:
    """``map_``'s body, the door passed: ``ev`` (``spec.prog`` compiled) over
    ``loop``; ``alias`` says a destination is identical to a Plain operand."""
    if dsts[0].numel == 0:
        return
    # A Plain operand has the loop's shape (the call fits): its view.
    inputs = [views.read(a) if isinstance(ld, Plain) else load(a, ld, loop)
              for a, ld in zip(operands, spec.loads, strict=True)]
    targets: list[npt.NDArray[Any]] = []
    packed: list[tuple[Array, npt.NDArray[Any]]] = []
    for d in dsts:
        view = views.target(d)
        if view is None:
            # A sub-byte destination is packed once, after every box.
            view = np.empty(loop, dtype=d.dtype.numpy_dtype)
            packed.append((d, view))
        targets.append(view)
    program.map_into(ev, inputs, loop, targets, alias)
    for d, values in packed:
        views.store(d, values)


def prepare(spec: Map, dsts: tuple[tuple[Dtype, Layout], ...],
            operands: tuple[tuple[Dtype, Layout], ...]) -> Hook | None:
    """``map_`` prepared for one signature of a call that fits (the caller's
    warm path): its loop and program made once; fresh destinations alias
    nothing."""
    loop = _loop(spec, tuple([lay.shape for _, lay in operands]))
    ev = program.compile(spec.prog)
    n = math.prod(loop)
    if (0 < n <= ev.box and all(isinstance(ld, Plain) for ld in spec.loads)
            and not any(dt.is_sub_byte for dt, _ in (*dsts, *operands))):
        # One box of byte-wide Plain operands (the small call): the operands'
        # and the fresh destinations' bytes viewed straight, then one box on
        # this thread; saves ``_compute``'s and ``map_into``'s steps.
        reads = [views.reader(dt, lay) for dt, lay in operands]
        writes = [views.fresh(dt, lay) for dt, lay in dsts]
        if ev.single is not None:
            spans = [views.flat(dt, lay) for dt, lay in operands]
            if len(spans) == 2 and ev.single[1] == (0, 1) and len(loop) == 1:
                s0, s1 = spans
                if s0 is not None and s1 is not None:
                    op = _byte_op(spec, dsts[0][0], operands)
                    if op is not None:
                        return _binary_bytes(op, s0[2], s1[2])
                    if program.ERRSTATE is not None:
                        return _binary(ev.single[0], s0, s1, dsts[0][0].numpy_dtype,
                                       program.ERRSTATE)
            return _single(ev.single, reads, writes[0])

        def small(sp: Map, ds: Sequence[Array], ops: Sequence[Array]) -> None:
            program.box_into(ev, [r(a) for r, a in zip(reads, ops, strict=True)], loop,
                             [w(d) for w, d in zip(writes, ds, strict=True)])

        return small

    def hook(sp: Map, ds: Sequence[Array], ops: Sequence[Array]) -> None:
        _compute(sp, ds, ops, ev, loop, False)

    return hook


def prepare_direct(spec: Map, dsts: tuple[tuple[Dtype, Layout], ...],
                   operands: tuple[tuple[Dtype, Layout], ...]) -> Hook:
    """``map_`` prepared for one signature of the library's own entry, whose
    destinations are the caller's (views, or operands themselves): its loop
    and program made once, and a destination tested for being a Plain
    operand (``identical``) only where their dtypes and layouts agree, by its
    memory and byte offset. A call where none is, of byte-wide Plain operands
    into contiguous destinations in one box, is ``prepare``'s small call,
    each destination viewed where it lies (the door let no other array share
    its bytes); any other call is ``map_``'s."""
    loop = _loop(spec, tuple([lay.shape for _, lay in operands]))
    ev = program.compile(spec.prog)
    pairs = [(k, i) for k, (dt, lay) in enumerate(dsts)
             for i, ((o_dt, o_lay), ld) in enumerate(zip(operands, spec.loads, strict=True))
             if isinstance(ld, Plain) and o_dt is dt and o_lay == lay]

    def hook(sp: Map, ds: Sequence[Array], ops: Sequence[Array]) -> None:
        _compute(sp, ds, ops, ev, loop, any(ds[k].identical(ops[i]) for k, i in pairs))

    n = math.prod(loop)
    if not (0 < n <= ev.box and all(isinstance(ld, Plain) for ld in spec.loads)
            and not any(dt.is_sub_byte for dt, _ in (*dsts, *operands))
            and all(lay.is_contiguous() for _, lay in dsts)):
        return hook
    reads = [views.reader(dt, lay) for dt, lay in operands]
    # A contiguous destination's reader views its bytes where they lie, writable.
    writes = [views.reader(dt, lay) for dt, lay in dsts]
    small = (_single(ev.single, reads, writes[0]) if ev.single is not None else
             lambda sp, ds, ops: program.box_into(
                 ev, [r(a) for r, a in zip(reads, ops, strict=True)], loop,
                 [w(d) for w, d in zip(writes, ds, strict=True)]))

    def either(sp: Map, ds: Sequence[Array], ops: Sequence[Array]) -> None:
        for k, i in pairs:
            d, o = ds[k].buffer, ops[i].buffer
            if d.memory is o.memory and d.offset == o.offset:
                hook(sp, ds, ops)
                return
        small(sp, ds, ops)

    return either


#: The kinds ``bytekernels.binary`` computes, by its operation.
_BYTE_OPS: Final[dict[object, int]] = {Binary.ADD: B.ADD, Binary.SUB: B.SUB, Binary.MUL: B.MUL}


def _byte_op(spec: Map, dt: Dtype, operands: tuple[tuple[Dtype, Layout], ...]) -> int | None:
    """``bytekernels.binary``'s operation for a program of one ``ADD``,
    ``SUB`` or ``MUL`` step of its two operands in order (the caller found
    so), all of float32 or float64 ``dt``; else None."""
    node = spec.prog.nodes[spec.prog.outs[0]]
    if (not isinstance(node, Op2) or dt not in (D.float32, D.float64)
            or any(o is not dt for o, _ in operands)):
        return None
    op = _BYTE_OPS.get(node.kind)
    if op is None or dt is D.float32:
        return op
    return op + B.WIDE


def _binary_bytes(op: int, f0: int, f1: int) -> Hook:
    """The small call of ``bytekernels.binary``'s operation ``op`` on two 1-D
    contiguous operands into a fresh 1-D destination: the memories' bytes
    handed over straight, the elements starting ``f0`` and ``f1`` bytes into
    the operands' buffers."""
    kernel = B.binary

    def binary(sp: Map, ds: Sequence[Array], ops: Sequence[Array]) -> None:
        ab, bb = ops[0].buffer, ops[1].buffer
        kernel(op, ab.memory.host_bytes, ab.offset + f0,  # type: ignore[arg-type]
               bb.memory.host_bytes, bb.offset + f1,  # type: ignore[arg-type]
               ds[0].buffer.memory.host_bytes)  # type: ignore[arg-type]

    return binary


def _binary(impl: Impl, s0: tuple[np.dtype[Any], int, int], s1: tuple[np.dtype[Any], int, int],
            t: np.dtype[Any], errstate: tuple[Any, object]) -> Hook:
    """The small call of one binary step (``a + b``) on two 1-D contiguous
    operands into one 1-D destination: every view made by one C call, and
    NumPy's errors ignored by setting its error state straight (``_single``,
    with its Python calls inlined)."""
    (t0, c0, f0), (t1, c1, f1) = s0, s1
    variable, ignore = errstate
    enter, leave = variable.set, variable.reset
    frombuffer = np.frombuffer

    def binary(sp: Map, ds: Sequence[Array], ops: Sequence[Array]) -> None:
        a, b = ops
        ab, bb = a.buffer, b.buffer
        out = ds[0].buffer.memory.host_bytes.view(t)  # type: ignore[union-attr]
        token = enter(ignore)
        try:
            v = impl(out, frombuffer(ab.memory.host_bytes, t0, c0, ab.offset + f0),  # type: ignore[arg-type]
                     frombuffer(bb.memory.host_bytes, t1, c1, bb.offset + f1))  # type: ignore[arg-type]
        finally:
            leave(token)
        if v is not out:
            np.copyto(out, v)

    return binary


def _single(single: tuple[Impl, tuple[int, ...]], reads: Sequence[Reader],
            write: Reader) -> Hook:
    """The small call of a program of one step (``a + b``, ``exp(x)``, a
    cast): that step's implementation straight into the destination, as
    ``program.box_into`` runs it."""
    impl, args = single

    def step(sp: Map, ds: Sequence[Array], ops: Sequence[Array]) -> None:
        out = write(ds[0])
        inputs = [r(a) for r, a in zip(reads, ops, strict=True)]
        with program.quiet():
            v = impl(out, *[inputs[k] for k in args])
        if v is not out:
            np.copyto(out, v)

    return step


PROSE: Final = (
    "every program of upstream-facts §3 at every index of its loop, each operand read by a "
    "Plain or Padded load (lo, hi, negative crops, interior, windows), at every dtype: "
    "sub-byte operands and destinations packed, float16, bfloat16 and the float8/float4 "
    "formats computing in float32 with one rounding on the store, complex; several "
    "outputs, Coord nodes, strided, broadcast, offset and reversed operands, a Plain "
    "operand identical to its destination. The exact kinds (arithmetic, Sqrt, Fma, Mod, "
    "rounding kinds, Sign, Maximum, Minimum, comparisons, casts, integer kinds, Threefry) "
    "give the reference's bits but for a NaN result's sign and payload; Copy, Bitcast and "
    "Where keep bits. Transcendentals, Pow and Atan2 are within the statement's ulps, C99 "
    "Annex F's special values exact (pow(x, ±0) = pow(1, y) = 1, a NaN operand included). "
    "Declines nothing."
)


def _ulps_prose(dtype: str) -> str:
    bounds = program.ULPS[dtype]
    kinds = ", ".join(f"{k} {v}" for k, v in bounds.items())
    how = "NumPy's SIMD float64 ufuncs (Exp, Tanh and Erf, within 1 ulp of the correctly rounded " \
          "value, and the float32 path of the three, to about 2^-35, by vectorised Numba loops " \
          "of the library's own; Sin, Cos and Tan of " \
          "2^20 <= |x| by a " \
          "Payne–Hanek reduction, within 1 ulp)"
    if dtype != "float64":
        how = f"float64 by {how}, rounded once"
    if dtype == "float32":
        how += (" but Exp, Tanh and Erf, computed in float32 arithmetic by vectorised Numba loops of "
                "the library's own, within 1 ulp of the correctly rounded value")
    return f"computed in {how}; ulps from the exactly rounded result: {kinds}."


ALGORITHMS: Final = {
    "map float64 ulps": _ulps_prose("float64"),
    "map float32 ulps": _ulps_prose("float32") + " float16, bfloat16 and float8/float4 "
    "compute the float64 value (Exp, Tanh and Erf too) and round it once into their format, "
    "within 1 ulp.",
    "complex kinds": "the reference's bits but for NaN parts' bits: Mul the textbook product, "
    "unfused (each part within 2u normwise); Fdiv and Recip Smith's division with NumPy's "
    "branches in float64, each part of the numerator divided by the scaled denominator, never "
    "multiplied by its reciprocal (so (0 + 2⁻⁵⁰i) / (0 − 2⁻¹⁰⁷⁴i) is (−inf, +0), upstream's, not "
    "NumPy's (−inf, NaN)): barring overflow and underflow each float64 part within γ(7)·|x/y| of "
    "the exact quotient's, then rounded once into the part dtype (complex64 divides in float64).",
}

FAMILY: Final = Family(
    prose={"map": PROSE},
    algorithms=ALGORITHMS,
    prepared={"map": prepare},
    direct={"map": prepare_direct},
    ulps=program.ULPS,
)

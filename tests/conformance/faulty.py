"""Test libraries for the conformance kit: one that declines everything and one
that plants a fault, so that the kit's laws are seen to fail.

``FaultyLibrary(fault)`` wraps the host library and breaks one rule of the
contract, named by ``fault`` (``FAULTS`` maps each fault to the law that must
catch it). Every kernel but the faulty one is the host's, unchanged.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Final

import numpy as np

from nxkernel_core import dtype as D
from nxkernel_core import evaluator
from nxkernel_core import exact as O
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_core.kernel import KERNEL_NAMES, KernelStatement, Library, Statement, declining_library
from nxkernel_core.layout import Layout
from nxkernel_core.plugins import discover
from nxkernel_core.prog import Convert
from nxkernel_core.rig import Rig

__all__ = ["FAULTS", "FaultyLibrary", "declining"]

Kernel = Callable[[Any, Sequence[Array], Sequence[Array]], Answer]


def declining() -> Library:
    """The library that declines every case (``kernel.declining_library``)."""
    return declining_library("nx.declining")


#: Each fault, the law that must catch it, and what it does.
FAULTS: Final[dict[str, tuple[str, str]]] = {
    "sum_negative_zero": ("reduce_sum_of_negative_zeros", "a float Sum giving −0 where it gives +0"),
    "arg_last": ("reduce_arg_first_position", "Arg taking the last position of the extreme"),
    "gather_outside": ("gather_bits", "a gather writing one element past its destination"),
    "operand_write": ("gather_bits", "a gather writing into its operand x"),
    "scan_prefix": ("scan_prefix", "a scan whose first result depends on the axis's parity"),
    "threads": ("map_deterministic", "map results that differ off the main thread"),
    "undeclared_decline": ("sort_declines_as_stated", "declining descending sorts it states it computes"),
    "decline_writes": ("fold_declines_as_stated", "a declared decline that writes its destination first"),
    "refusal_done": ("map_refuses_misfits", "map answering DONE to a call that does not fit"),
    "refusal_writes": ("gather_refuses_misfits", "a refusal that writes past its destination first"),
    "map_in_place": ("map_in_place", "map clearing an identical destination before reading it"),
    "map_box": ("map_box", "map results depending on the loop's element count"),
    "map_round_twice": ("map_casts", "integer casts into narrow floats rounding twice through float64"),
    "copy_quiets": ("map_moves_keep_bits", "Copy quieting signalling NaNs"),
    "negative_variance": ("reduce_moments", "Moments giving the variance's negation"),
    "logsumexp_empty": ("reduce_logsumexp", "Logsumexp of no finite term giving NaN, not −∞"),
    "empty_prod": ("reduce_empty_product", "an empty Prod giving 0"),
    "sum_bound": ("reduce_sum_within_bound", "a float Sum rounded through bfloat16"),
    "lane_order": ("reduce_stated_order", "a float Sum added in chain order while lane order is stated"),
    "scan_carry_ignored": ("scan_exact", "an exact scan ignoring its carry"),
    "sort_unstable": ("sort_stable_total_order", "a sort reversing the positions of equal elements"),
    "numbering_side": ("numbering_counts", "numbering counting right as left"),
    "scatter_first_wins": ("scatter_set", "a Set scatter keeping the first update"),
    "assemble_first_wins": ("assemble_bits", "an assembly whose first piece wins"),
    "range_gather_clamps": ("range_gather_bits", "a range gather reading clamped positions, not zeros"),
    "fold_extra": ("fold_adjoint", "a fold adding one to its first element"),
    "contract_init_plus_zero": ("contract_without_products", "an output without products as +0 + init"),
    "contract_bound": ("contract_within_bound", "a contraction rounded through bfloat16"),
    "fft_sign": ("fft_within_bound", "an inverse transform computed forward"),
    "cholesky_transposed": ("cholesky_residual", "a Cholesky factor in the other triangle"),
    "attention_empty_row": ("attention_empty_rows", "a row of no visible pair giving o = NaN"),
}


def _perturb_first(a: Array) -> None:
    """Flip the lowest bit of ``a``'s first element (any dtype)."""
    if a.numel == 0:
        return
    first = Array(a.dtype, Layout.c_contiguous((1,), a.layout.offset), a.buffer)
    v = first.to_numpy()
    u = O.units(v).copy()
    u[..., 0] ^= 1
    first.write_numpy(u.reshape(-1).view(np.uint8).view(a.dtype.numpy_dtype)
                      if a.dtype.bits >= 8 else _flip_sub_byte(a.dtype, v))


def _flip_sub_byte(dt: D.Dtype, v: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    if dt is D.bit:
        return ~v
    codes = (O.units(v)[..., 0] & ((1 << dt.bits) - 1)) ^ 1
    from nxkernel_core.conformance.generators import from_codes

    return from_codes(dt, codes.astype(np.uint64))


def _terms(spec: S.Reduce, x: Array) -> np.ndarray[Any, Any]:
    """The terms of reduction 0 of a one-operand Plain reduce, ``[kept…, n]``."""
    out = evaluator.evaluate(spec.prog, [x.to_numpy()], x.shape)[spec.reductions[0][1]]
    return O.terms(out, spec.axes)


class FaultyLibrary:
    """The host library with one planted fault (see ``FAULTS``)."""

    priority: Final = -100

    def __init__(self, fault: str) -> None:
        if fault not in FAULTS:
            raise ValueError(f"FaultyLibrary: unknown fault {fault!r}; the faults are {', '.join(FAULTS)}")
        self.fault: Final = fault
        self.name: Final = f"nx.faulty-{fault}"
        self.host: Final = discover().library("host")
        base = self.host.statement
        computes = dict(base.computes)
        if fault == "decline_writes":
            computes["fold"] = KernelStatement("declines every fold", lambda call: "no fold")
        self.statement: Final = Statement(
            library=self.name, summary=f"the host library with a planted fault: {FAULTS[fault][1]}",
            computes=computes, association=base.association, error_factor=base.error_factor,
            algorithms=base.algorithms, open_choices=base.open_choices, concurrent=base.concurrent)
        for k in KERNEL_NAMES:
            setattr(self, k, self._wrap(k))

    def __repr__(self) -> str:
        return f"FaultyLibrary({self.fault!r})"

    def computes_on(self, device: Rig) -> bool:
        return bool(self.host.computes_on(device))

    def _wrap(self, kernel: str) -> Kernel:
        inner: Kernel = getattr(self.host, kernel)
        plant = getattr(self, f"_{self.fault}", None)

        def call(spec: Any, dsts: Sequence[Array], operands: Sequence[Array]) -> Answer:
            if plant is not None:
                answer: Answer | None = plant(kernel, inner, spec, list(dsts), list(operands))
                if answer is not None:
                    return answer
            return inner(spec, dsts, operands)

        return call

    # -- the faults: each returns an answer where it takes the call, else None --

    def _sum_negative_zero(self, kernel: str, inner: Kernel, spec: Any, dsts: list[Array],
                           ops: list[Array]) -> Answer | None:
        if kernel != "reduce":
            return None
        answer = inner(spec, dsts, ops)
        if answer is Answer.DONE:
            i = 0
            for r, _, _ in spec.reductions:
                d = dsts[i]
                if r is S.Monoid.SUM and (d.dtype.is_float or d.dtype.is_complex) and d.dtype.bits >= 8:
                    v = d.to_numpy()
                    zero = O.units(v) == 0
                    u = O.units(v).copy()
                    u[..., -1] = np.where(zero.all(axis=-1), 0x80, u[..., -1])
                    d.write_numpy(u.reshape(-1).view(d.dtype.numpy_dtype).reshape(v.shape))
                i += S.results(r)
        return answer

    def _arg_last(self, kernel: str, inner: Kernel, spec: Any, dsts: list[Array],
                  ops: list[Array]) -> Answer | None:
        if kernel != "reduce" or not isinstance(spec.reductions[0][0], S.Arg):
            return None
        answer = inner(spec, dsts, ops)
        if answer is Answer.DONE and len(ops) == 1:
            rows = _terms(spec, ops[0])
            dt = spec.prog.out_dtypes[0]
            _, first, _ = O.reduce_fixed(dt, rows[..., ::-1], spec.reductions[0][0])
            assert first is not None
            n = rows.shape[-1]
            dsts[1].write_numpy(np.where(n > 0, n - 1 - first, 0).astype(np.int64))
        return answer

    def _gather_outside(self, kernel: str, inner: Kernel, spec: Any, dsts: list[Array],
                        ops: list[Array]) -> Answer | None:
        if kernel != "gather":
            return None
        answer = inner(spec, dsts, ops)
        d = dsts[0]
        end = d.layout.offset + d.numel
        if answer is Answer.DONE and D.bytes(d.dtype, end + 1) <= d.buffer.length:
            Array(d.dtype, Layout.c_contiguous((1,), end), d.buffer).write_numpy(
                np.zeros(1, dtype=d.dtype.numpy_dtype))
        return answer

    def _operand_write(self, kernel: str, inner: Kernel, spec: Any, dsts: list[Array],
                       ops: list[Array]) -> Answer | None:
        if kernel != "gather":
            return None
        answer = inner(spec, dsts, ops)
        if answer is Answer.DONE and ops[1].numel:
            _perturb_first(ops[1])
        return answer

    def _scan_prefix(self, kernel: str, inner: Kernel, spec: Any, dsts: list[Array],
                     ops: list[Array]) -> Answer | None:
        if kernel != "scan":
            return None
        answer = inner(spec, dsts, ops)
        if answer is Answer.DONE and dsts[0].shape[spec.axis] % 2 == 1:
            _perturb_first(dsts[0])
        return answer

    def _threads(self, kernel: str, inner: Kernel, spec: Any, dsts: list[Array],
                 ops: list[Array]) -> Answer | None:
        if kernel != "map":
            return None
        answer = inner(spec, dsts, ops)
        if answer is Answer.DONE and threading.current_thread() is not threading.main_thread():
            _perturb_first(dsts[0])
        return answer

    def _undeclared_decline(self, kernel: str, inner: Kernel, spec: Any, dsts: list[Array],
                            ops: list[Array]) -> Answer | None:
        if kernel == "sort" and spec.descending:
            return Answer.DECLINED
        return None

    def _decline_writes(self, kernel: str, inner: Kernel, spec: Any, dsts: list[Array],
                        ops: list[Array]) -> Answer | None:
        if kernel != "fold":
            return None
        if dsts and dsts[0].numel:
            _perturb_first(dsts[0])
        return Answer.DECLINED

    def _refusal_done(self, kernel: str, inner: Kernel, spec: Any, dsts: list[Array],
                      ops: list[Array]) -> Answer | None:
        if kernel != "map":
            return None
        answer = inner(spec, dsts, ops)
        return Answer.DONE if answer.is_refusal else answer

    def _refusal_writes(self, kernel: str, inner: Kernel, spec: Any, dsts: list[Array],
                        ops: list[Array]) -> Answer | None:
        if kernel != "gather":
            return None
        answer = inner(spec, dsts, ops)
        if answer is not Answer.DONE and dsts:
            d = dsts[0]
            end = d.byte_span()[1] if d.numel else d.buffer.offset
            mem = d.buffer.memory
            if end < mem.nbytes:
                mem.device.write_bytes(mem, end, np.asarray([0xEE], dtype=np.uint8))
        return answer

    def _map_in_place(self, kernel: str, inner: Kernel, spec: Any, dsts: list[Array],
                      ops: list[Array]) -> Answer | None:
        if kernel != "map" or not any(d.identical(o) for d in dsts for o in ops):
            return None
        for d in dsts:
            if d.numel:
                d.write_numpy(np.zeros(d.shape, dtype=d.dtype.numpy_dtype))
        return inner(spec, dsts, ops)

    def _map_box(self, kernel: str, inner: Kernel, spec: Any, dsts: list[Array],
                 ops: list[Array]) -> Answer | None:
        if kernel != "map":
            return None
        answer = inner(spec, dsts, ops)
        if answer is Answer.DONE and dsts[0].numel % 2 == 1:
            _perturb_first(dsts[0])
        return answer

    def _map_round_twice(self, kernel: str, inner: Kernel, spec: Any, dsts: list[Array],
                         ops: list[Array]) -> Answer | None:
        if kernel != "map" or len(ops) != 1 or ops[0].dtype not in (D.int64, D.uint64):
            return None
        answer = inner(spec, dsts, ops)
        if answer is not Answer.DONE:
            return answer
        x = ops[0].to_numpy()
        for k, d in enumerate(dsts):
            node = spec.prog.nodes[spec.prog.outs[k]]
            if d.dtype in (D.float32, D.float16, D.bfloat16) and getattr(node, "kind", None) is Convert.CAST:
                d.write_numpy(D.of_float(d.dtype, x.astype(np.float64)))
        return answer

    def _copy_quiets(self, kernel: str, inner: Kernel, spec: Any, dsts: list[Array],
                     ops: list[Array]) -> Answer | None:
        if kernel != "map":
            return None
        answer = inner(spec, dsts, ops)
        d = dsts[0]
        if answer is Answer.DONE and d.dtype.is_float and d.dtype.bits >= 8:
            fmt = d.dtype.float_format
            assert fmt is not None
            v = d.to_numpy()
            if fmt.infinities and d.numel:
                u = v.reshape(-1).view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[
                    d.dtype.itemsize]).copy()
                quiet = u.dtype.type(1 << (fmt.fraction_bits - 1))
                u = np.where(O.is_nan(d.dtype, v).reshape(-1), u | quiet, u)
                d.write_numpy(u.view(d.dtype.numpy_dtype).reshape(v.shape))
        return answer

    def _negative_variance(self, kernel: str, inner: Kernel, spec: Any, dsts: list[Array],
                           ops: list[Array]) -> Answer | None:
        if kernel != "reduce" or not isinstance(spec.reductions[0][0], S.Moments):
            return None
        answer = inner(spec, dsts, ops)
        if answer is Answer.DONE:
            v = dsts[1].to_numpy().astype(np.float64)
            dsts[1].write_numpy(D.of_float(dsts[1].dtype, -np.abs(v) - 1.0))
        return answer

    def _logsumexp_empty(self, kernel: str, inner: Kernel, spec: Any, dsts: list[Array],
                         ops: list[Array]) -> Answer | None:
        if kernel != "reduce" or not isinstance(spec.reductions[0][0], S.Logsumexp) or len(ops) != 1:
            return None
        answer = inner(spec, dsts, ops)
        if answer is Answer.DONE:
            rows = O.to_float64(spec.prog.out_dtypes[0], _terms(spec, ops[0]))
            empty = np.isneginf(rows).all(axis=-1) if rows.shape[-1] else np.ones(rows.shape[:-1], bool)
            r = dsts[0].to_numpy().astype(np.float64)
            dsts[0].write_numpy(D.of_float(dsts[0].dtype, np.where(empty, np.nan, r)))
        return answer

    def _empty_prod(self, kernel: str, inner: Kernel, spec: Any, dsts: list[Array],
                    ops: list[Array]) -> Answer | None:
        if kernel != "reduce" or spec.reductions[0][0] is not S.Monoid.PROD:
            return None
        answer = inner(spec, dsts, ops)
        if answer is Answer.DONE and len(ops) == 1 and any(ops[0].shape[a] == 0 for a in spec.axes):
            dsts[0].write_numpy(np.zeros(dsts[0].shape, dtype=dsts[0].dtype.numpy_dtype))
        return answer

    def _sum_bound(self, kernel: str, inner: Kernel, spec: Any, dsts: list[Array],
                   ops: list[Array]) -> Answer | None:
        if kernel != "reduce" or spec.reductions[0][0] is not S.Monoid.SUM:
            return None
        answer = inner(spec, dsts, ops)
        d = dsts[0]
        if answer is Answer.DONE and d.dtype in (D.float32, D.float64):
            v = d.to_numpy().astype(np.float64)
            d.write_numpy(D.of_float(d.dtype, D.of_float(D.bfloat16, v).astype(np.float64)))
        return answer

    def _lane_order(self, kernel: str, inner: Kernel, spec: Any, dsts: list[Array],
                    ops: list[Array]) -> Answer | None:
        if kernel != "reduce" or spec.reductions[0][0] is not S.Monoid.SUM or len(ops) != 1:
            return None
        term = spec.prog.out_dtypes[0]
        if not term.is_float:
            return None
        answer = inner(spec, dsts, ops)
        if answer is Answer.DONE:
            rows = _terms(spec, ops[0]).astype(D.carrier(term).numpy_dtype)
            acc = np.zeros(rows.shape[:-1], dtype=rows.dtype)
            with np.errstate(all="ignore"):
                for j in range(rows.shape[-1]):
                    acc = acc + rows[..., j]
            dsts[0].write_numpy(D.of_float(dsts[0].dtype, acc.astype(np.float64)))
        return answer

    def _scan_carry_ignored(self, kernel: str, inner: Kernel, spec: Any, dsts: list[Array],
                            ops: list[Array]) -> Answer | None:
        if kernel != "scan" or not spec.carry:
            return None
        return inner(replace(spec, carry=False), dsts, ops[1:])

    def _sort_unstable(self, kernel: str, inner: Kernel, spec: Any, dsts: list[Array],
                       ops: list[Array]) -> Answer | None:
        if kernel != "sort":
            return None
        answer = inner(spec, dsts, ops)
        if answer is Answer.DONE and dsts[1].numel:
            vals = np.moveaxis(O.units(dsts[0].to_numpy()), spec.axis, -2)
            pos = np.moveaxis(dsts[1].to_numpy(), spec.axis, -1).copy()
            for row in np.ndindex(*pos.shape[:-1]):
                j = 0
                n = pos.shape[-1]
                while j < n:
                    e = j
                    while e + 1 < n and (vals[row][e + 1] == vals[row][j]).all():
                        e += 1
                    pos[row][j:e + 1] = pos[row][j:e + 1][::-1]
                    j = e + 1
            dsts[1].write_numpy(np.moveaxis(pos, -1, spec.axis))
        return answer

    def _numbering_side(self, kernel: str, inner: Kernel, spec: Any, dsts: list[Array],
                        ops: list[Array]) -> Answer | None:
        if kernel != "numbering" or spec.side is not S.Side.RIGHT:
            return None
        return inner(S.Numbering(S.Side.LEFT), dsts, ops)

    def _scatter_first_wins(self, kernel: str, inner: Kernel, spec: Any, dsts: list[Array],
                            ops: list[Array]) -> Answer | None:
        if kernel != "scatter" or spec.combine is not S.Combine.SET:
            return None
        answer = inner(spec, dsts, ops)
        if answer is Answer.DONE:
            into, index, updates = (o.to_numpy() for o in ops)
            rev = tuple(slice(None, None, -1) if i == spec.axis else slice(None) for i in range(index.ndim))
            want, _ = O.scatter(into, index[rev], updates[rev], spec.axis, S.Combine.SET)
            dsts[0].write_numpy(want)
        return answer

    def _assemble_first_wins(self, kernel: str, inner: Kernel, spec: Any, dsts: list[Array],
                             ops: list[Array]) -> Answer | None:
        if kernel != "assemble" or not ops:
            return None
        answer = inner(spec, dsts, ops)
        if answer is Answer.DONE:
            want = O.assemble(spec.shape, dsts[0].dtype, spec.fill, spec.regions[::-1],
                              [o.to_numpy() for o in ops[::-1]])
            dsts[0].write_numpy(want)
        return answer

    def _range_gather_clamps(self, kernel: str, inner: Kernel, spec: Any, dsts: list[Array],
                             ops: list[Array]) -> Answer | None:
        if kernel != "range_gather":
            return None
        answer = inner(spec, dsts, ops)
        if answer is Answer.DONE and ops[1].shape[spec.axis] > 0:
            starts, x = ops[0].to_numpy(), ops[1].to_numpy()
            d = x.shape[spec.axis]
            clamped = np.clip(starts, 0, max(d - spec.run, 0))
            dsts[0].write_numpy(O.range_gather(x, clamped, spec.axis, spec.run))
        return answer

    def _fold_extra(self, kernel: str, inner: Kernel, spec: Any, dsts: list[Array],
                    ops: list[Array]) -> Answer | None:
        if kernel != "fold":
            return None
        answer = inner(spec, dsts, ops)
        d = dsts[0]
        if answer is Answer.DONE and d.numel and not d.dtype.is_complex:
            v = d.to_numpy().reshape(-1)
            first = Array(d.dtype, Layout.c_contiguous((1,), d.layout.offset), d.buffer)
            if d.dtype.is_float:
                first.write_numpy(D.of_float(d.dtype, v[:1].astype(np.float64) + 1.0))
            else:
                first.write_numpy((v[:1].astype(np.int64) + 1).astype(d.dtype.numpy_dtype))
        return answer

    def _contract_init_plus_zero(self, kernel: str, inner: Kernel, spec: Any, dsts: list[Array],
                                 ops: list[Array]) -> Answer | None:
        if kernel != "contract" or not spec.init:
            return None
        answer = inner(spec, dsts, ops)
        k = int(np.prod([ops[0].shape[i] for i, _ in spec.contracting]))
        if answer is Answer.DONE and k == 0 and dsts[0].dtype.is_float | dsts[0].dtype.is_complex:
            init = ops[2].to_numpy()
            with np.errstate(all="ignore"):
                dsts[0].write_numpy((init + np.zeros_like(init)).astype(dsts[0].dtype.numpy_dtype))
        return answer

    def _contract_bound(self, kernel: str, inner: Kernel, spec: Any, dsts: list[Array],
                        ops: list[Array]) -> Answer | None:
        if kernel != "contract":
            return None
        answer = inner(spec, dsts, ops)
        d = dsts[0]
        if answer is Answer.DONE and d.dtype in (D.float32, D.float64):
            v = d.to_numpy().astype(np.float64)
            d.write_numpy(D.of_float(d.dtype, D.of_float(D.bfloat16, v * 1.01).astype(np.float64)))
        return answer

    def _fft_sign(self, kernel: str, inner: Kernel, spec: Any, dsts: list[Array],
                  ops: list[Array]) -> Answer | None:
        if kernel != "fft" or spec.direction is not S.Direction.INVERSE:
            return None
        return inner(replace(spec, direction=S.Direction.FORWARD), dsts, ops)

    def _cholesky_transposed(self, kernel: str, inner: Kernel, spec: Any, dsts: list[Array],
                             ops: list[Array]) -> Answer | None:
        if kernel != "cholesky":
            return None
        answer = inner(spec, dsts, ops)
        if answer is Answer.DONE and dsts[0].numel:
            f = dsts[0].to_numpy()
            dsts[0].write_numpy(np.ascontiguousarray(np.swapaxes(f, -1, -2)))
        return answer

    def _attention_empty_row(self, kernel: str, inner: Kernel, spec: Any, dsts: list[Array],
                             ops: list[Array]) -> Answer | None:
        if kernel != "attention":
            return None
        answer = inner(spec, dsts, ops)
        if answer is Answer.DONE and dsts[0].numel:
            lse = dsts[1].to_numpy().astype(np.float64)
            o = dsts[0].to_numpy().astype(np.float64)
            o = np.where(np.isneginf(lse)[..., None], np.nan, o)
            dsts[0].write_numpy(D.of_float(dsts[0].dtype, o))
        return answer


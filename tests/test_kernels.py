"""The kernel records: each kernel defined once, and the core reading them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from nxkernel_core import caller, fits, kernel, library
from nxkernel_core import dtype as D
from nxkernel_core import shape as SH
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer, InvalidArgument
from nxkernel_core.array import Array, asarray
from nxkernel_core.kernels import KERNEL_NAMES, KERNELS, Kernel
from nxkernel_core.kernels import kernel as record
from nxkernel_core.kernels.record import no_refusal
from nxkernel_core.layout import Range
from nxkernel_core.prog import Prog

f32, f64, c64, c128, i64 = D.float32, D.float64, D.complex64, D.complex128, D.int64

#: The kernels of S in the contract's order (``Nx_kernel``'s module type S).
_CONTRACT_ORDER = ("map", "reduce", "scan", "fold", "gather", "range_gather", "scatter", "sort",
                   "numbering", "assemble", "contract", "fft", "cholesky", "lu", "qr", "svd",
                   "eigh", "eig", "solve_triangular", "attention")


def _attention_prog() -> Prog:
    b = Prog.build([f32])
    return b.finish(b.const(D.bool_, True), b.ins[0])


#: One spec of each kernel.
_SPECS: dict[str, Any] = {
    "map": S.Map(Prog.identity(f32), (S.PLAIN,)),
    "reduce": S.Reduce(Prog.identity(f32), (S.PLAIN,), (0,), ((S.Monoid.SUM, 0, f32),)),
    "scan": S.Scan(Prog.identity(f32), (S.PLAIN,), 0, S.Monoid.SUM, 0, f32),
    "fold": S.Fold((3,), S.Pad((1,), (1,), (0,))),
    "gather": S.Gather(0),
    "range_gather": S.RangeGather(0, 2),
    "scatter": S.Scatter(0, S.Combine.SET),
    "sort": S.Sort(0),
    "numbering": S.Numbering(),
    "assemble": S.Assemble((2,), b"\x00\x00\x00\x00", ((Range(0, 1, 2),),)),
    "contract": S.Contract((), ((1, 0),), f32),
    "fft": S.Fft((0,), S.Direction.FORWARD, S.C2c()),
    "cholesky": S.Cholesky(),
    "lu": S.Lu(),
    "qr": S.Qr(),
    "svd": S.Svd(),
    "eigh": S.Eigh(),
    "eig": S.Eig(),
    "solve_triangular": S.SolveTriangular(),
    "attention": S.Attention(_attention_prog(), (), 1.0, f32, S.Dense()),
}


def _arrays(*specs: tuple[D.Dtype, Sequence[int]]) -> list[Array]:
    return [asarray(np.zeros(shape, dtype=dt.numpy_dtype), dt) for dt, shape in specs]


def test_one_record_per_kernel_in_the_contracts_order() -> None:
    assert tuple(k.name for k in KERNELS) == KERNEL_NAMES == _CONTRACT_ORDER
    assert kernel.KERNEL_NAMES is KERNEL_NAMES
    for k in KERNELS:
        assert record(k.name) is k
        assert k.spec.kernel == k.name
        assert S.KERNELS[k.name] is k.spec
        assert type(_SPECS[k.name]) is k.spec
        assert callable(getattr(kernel.Library, k.name)), k.name


def test_an_unknown_kernel_is_named_with_the_kernels() -> None:
    with pytest.raises(KeyError, match=r"no kernel 'sorted'; the kernels are map, reduce"):
        record("sorted")


def test_a_record_refuses_a_spec_class_of_another_kernel() -> None:
    with pytest.raises(ValueError, match=r"Kernel 'sort': its spec class Gather names kernel "
                                         r"'gather'"):
        Kernel("sort", S.Gather, SH.gather, lambda spec, loads: None, no_refusal,
               lambda spec, dsts, ops: None)


@pytest.mark.parametrize(("name", "operands", "want"), [
    ("map", (f32,), (f32,)),
    ("reduce", (f32,), (f32,)),
    ("scan", (f32,), (f32,)),
    ("fold", (f64,), (f64,)),
    ("gather", (i64, c64), (c64,)),
    ("range_gather", (i64, f64), (f64,)),
    ("scatter", (f32, i64, f32), (f32,)),
    ("sort", (f64,), (f64, i64)),
    ("numbering", (f32, f32), (i64,)),
    ("assemble", (f32,), None),
    ("contract", (f32, f32), None),
    ("fft", (c128,), (c128,)),
    ("cholesky", (c64,), (c64,)),
    ("lu", (f64,), (f64, i64, i64)),
    ("qr", (c64,), (c64, c64)),
    ("svd", (c64,), (c64, f32, c64)),
    ("eigh", (c128,), (f64, c128)),
    ("eig", (f32,), (c64, c64)),
    ("solve_triangular", (f64, f64), (f64,)),
    ("attention", (f32, f32, D.bfloat16), (D.bfloat16, f32)),
])
def test_each_dtype_rule_states_the_contracts_destinations(
        name: str, operands: tuple[D.Dtype, ...], want: tuple[D.Dtype, ...] | None) -> None:
    assert record(name).dtypes(_SPECS[name], operands) == want


def test_the_caller_takes_the_records_dtypes_and_asks_for_the_others() -> None:
    a, b = _arrays((f64, (2, 3)), (f64, (3, 4)))
    assert caller.result_dtypes(S.Svd(), [a]) == (f64, f64, f64)
    with pytest.raises(InvalidArgument, match=r"Contract needs its destinations' dtypes"):
        caller.result_dtypes(_SPECS["contract"], [a, b])


@pytest.mark.parametrize("name", _CONTRACT_ORDER)
def test_every_fit_check_refuses_a_call_short_of_destinations(name: str) -> None:
    sp = _SPECS[name]
    ops = _arrays(*((f32, (3,)),) * sp.n_operands())
    assert record(name).fit(sp, [], ops) is Answer.BAD_ARITY
    assert fits.misfit(sp, [], ops) is Answer.BAD_ARITY
    assert library.misfit(name, sp, [], ops) is Answer.BAD_ARITY


def test_the_fit_checks_keep_the_contracts_order() -> None:
    x = _arrays((f32, (4, 4)))
    # A routine's destination of the wrong dtype and shape: the dtype is refused.
    assert fits.misfit(S.Cholesky(), _arrays((f64, (3, 3))), x) is Answer.WRONG_DTYPE
    assert fits.misfit(S.Cholesky(), _arrays((f32, (3, 3))), x) is Answer.SHAPE_MISMATCH
    assert fits.misfit(S.Cholesky(), _arrays((f32, (4, 4))), x) is None
    # Fold adds by Prog's Add, which takes no bool.
    fold = _SPECS["fold"]
    assert fits.misfit(fold, _arrays((D.bool_, (3,))), _arrays((D.bool_, (5,)))) is \
        Answer.WRONG_DTYPE
    assert fits.misfit(fold, _arrays((f32, (3,))), _arrays((f32, (4,)))) is Answer.SHAPE_MISMATCH
    assert fits.misfit(fold, _arrays((f32, (3,))), _arrays((f32, (5,)))) is None
    # A scan's fit: its results' dtypes before its shapes.
    scan = _SPECS["scan"]
    assert fits.misfit(scan, _arrays((f64, (2,))), _arrays((f32, (3,)))) is Answer.WRONG_DTYPE
    assert fits.misfit(scan, _arrays((f32, (2,))), _arrays((f32, (3,)))) is Answer.SHAPE_MISMATCH


def test_the_caller_refuses_by_the_records_refusal_rule() -> None:
    refusal = record("fold").refusal(_SPECS["fold"], [(5,)], [D.bool_], [D.bool_])
    assert refusal is not None and refusal[0] is Answer.WRONG_DTYPE
    assert "Add" in refusal[1]
    map_refusal = record("map").refusal(_SPECS["map"], [(3,)], [f64], [f32])
    assert map_refusal == (Answer.WRONG_DTYPE, "load 0 is float64, the program reads float32")

"""Where upstream's kernel tests disagreed with us (issue 25), on the host
library (host) and on nx.cuda's emulated device (cuda-emu:0), each kernel
called as the caller calls it:

* solve_triangular of a triangle with a zero on its read diagonal: that
  matrix's x is all NaN, the others' unaffected (contract: 'A failure that
  depends on a float's or a complex number's value is a NaN result');
* complex Fdiv and Recip whose divisor's reciprocal overflows: no spurious
  NaN, (0 + 2⁻⁵⁰i) / (0 − 2⁻¹⁰⁷⁴i) = (−inf, +0) (upstream §3);
* Sign of ±0 is +0 at every float dtype (upstream §3);
* a computed bool is stored as the byte 0 or 1 (the builder refuses any other
  bool constant: ``tests/test_prog.py``);
* fold of bool or bit does not fit: the caller refuses it (WRONG_DTYPE) before
  any library (upstream §2; each library's own refusal: ``tests/host/test_fold.py``,
  ``tests/cuda/test_fold.py``);

and the two conventions we keep, which the libraries state among their open
choices: which triangle cholesky reads in each mode, and eigh's real
eigenvalues of complex matrices.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from nxkernel_core import dtype as D
from nxkernel_core import nx
from nxkernel_core import shape as SH
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer, InvalidArgument
from nxkernel_core.array import Array
from nxkernel_core.dtype import Dtype, Kind
from nxkernel_core.kernels import kernel as record
from nxkernel_core.prog import Prog, Unary
from nxkernel_core.rig import Rig, host
from nxkernel_cuda.device import EmuDevice
from nxkernel_cuda.library import LIBRARY as CUDA
from nxkernel_host.library import library as HOST

NDArray = np.ndarray[Any, Any]
ROUTINE_DTYPES = (D.float32, D.float64, D.complex64, D.complex128)
FLOATS = tuple(dt for dt in D.all if dt.kind is Kind.FLOAT)


@pytest.fixture(params=["host", "cuda-emu"])
def where(request: pytest.FixtureRequest) -> tuple[Any, Rig]:
    """A library and the device it computes on: host on the host, nx.cuda on
    a fresh emulated device."""
    if request.param == "host":
        return HOST, host
    return CUDA, EmuDevice(0)


def call(where: tuple[Any, Rig], spec: Any, ops: Sequence[NDArray], dtypes: Sequence[Dtype],
         op_dtypes: Sequence[Dtype] | None = None) -> tuple[Answer, list[NDArray]]:
    """Run the library's kernel of ``spec`` on copies of ``ops`` on its device,
    into fresh destinations of ``dtypes`` shaped by ``shape``."""
    lib, dev = where
    kinds: Sequence[Dtype | None] = op_dtypes or [None] * len(ops)
    arrays = [Array.from_numpy(np.ascontiguousarray(a), dev, dt) for a, dt in zip(ops, kinds, strict=True)]
    shapes = record(spec.kernel).shapes(spec, [a.shape for a in arrays])
    assert not isinstance(shapes, SH.Error), shapes
    dsts = [Array.empty(dt, sh, dev) for dt, sh in zip(dtypes, shapes, strict=True)]
    answer = getattr(lib, spec.kernel)(spec, dsts, arrays)
    return answer, [d.to_numpy() for d in dsts]


def units(a: NDArray) -> list[int]:
    """Each element's bits as an unsigned integer."""
    a = np.ascontiguousarray(a)
    return a.view(np.dtype(f"u{a.dtype.itemsize}")).ravel().tolist()


# --------------------------------------------------------------------------
# solve_triangular of a singular triangle
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dt", ROUTINE_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("transpose", [False, True])
def test_a_zero_on_the_diagonal_makes_that_matrix_x_nan(where: tuple[Any, Rig], dt: Dtype,
                                                         lower: bool, transpose: bool) -> None:
    # Either triangle of matrix 0 has diagonal (2, 0): [[2, 0], [1, 0]] read
    # lower is upstream's case. Matrix 1 has diagonal (2, 1).
    a = np.array([[[2, 1], [1, 0]], [[2, 1], [1, 1]]], dt.numpy_dtype)
    b = np.ones((2, 2, 3), dt.numpy_dtype)
    answer, (x,) = call(where, S.SolveTriangular(lower, transpose, False), [a, b], [dt])
    assert answer is Answer.DONE
    assert np.isnan(x[0]).all(), x[0]  # every element (a NaN part, for complex)
    t = np.tril(a[1]) if lower else np.triu(a[1])
    op = t.T if transpose else t
    # Exact in binary: op(T) is [[2, 0], [1, 1]] or [[2, 1], [0, 1]].
    assert np.array_equal(x[1], np.linalg.solve(op.astype(complex), b[1].astype(complex)))


def test_a_unit_diagonal_reads_no_zero(where: tuple[Any, Rig]) -> None:
    a = np.array([[2.0, 0.0], [1.0, 0.0]])
    answer, (x,) = call(where, S.SolveTriangular(True, False, True), [a, np.ones((2, 1))],
                        [D.float64])
    assert answer is Answer.DONE
    assert x.ravel().tolist() == [1.0, 0.0]


# --------------------------------------------------------------------------
# Complex division at the edge, Sign of ±0
# --------------------------------------------------------------------------


def test_complex_division_makes_no_spurious_nan(where: tuple[Any, Rig]) -> None:
    c = D.complex128
    b = Prog.build([c, c])
    x, y = b.ins
    prog = b.finish(x / y, b.recip(y))
    num = np.array([complex(0.0, 2.0**-50)])
    den = np.array([complex(0.0, -(2.0**-1074))])
    answer, (q, r) = call(where, S.Map(prog, (S.PLAIN, S.PLAIN)), [num, den], [c, c])
    assert answer is Answer.DONE
    # mpmath: (2⁻⁵⁰i) / (−2⁻¹⁰⁷⁴i) = −2¹⁰²⁴, which overflows, and imaginary part 0.
    assert units(q.real) == units(np.array([-math.inf])) and units(q.imag) == [0]
    # 1 / (−2⁻¹⁰⁷⁴i) = 2¹⁰⁷⁴i: +inf, with a zero (not NaN) real part.
    assert r.real.tolist() == [0.0] and r.imag.tolist() == [math.inf]


@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: d.name)
def test_sign_of_either_zero_is_plus_zero(where: tuple[Any, Rig], dt: Dtype) -> None:
    x = D.of_float(dt, [0.0, -0.0, -2.5, 3.0])
    answer, (s,) = call(where, S.Map(Prog.unary(Unary.SIGN, dt), (S.PLAIN,)), [x], [dt], [dt])
    assert answer is Answer.DONE
    assert units(s) == units(D.of_float(dt, [0.0, 0.0, -1.0, 1.0]))


# --------------------------------------------------------------------------
# Booleans: canonical stores, fold refused
# --------------------------------------------------------------------------


def test_computed_booleans_are_stored_as_0_or_1(where: tuple[Any, Rig]) -> None:
    bl = D.bool_
    b = Prog.build([bl, bl])
    x, y = b.ins
    prog = b.finish(b.maximum(x, y), b.minimum(x, x), b.xor(x, y), b.equal(x, y),
                    b.or_(x, b.const(bl, True)))
    xs = np.array([2, 0x80, 0xFF, 0, 1], np.uint8).view(np.bool_)
    ys = np.array([0, 3, 0, 0, 1], np.uint8).view(np.bool_)
    answer, outs = call(where, S.Map(prog, (S.PLAIN, S.PLAIN)), [xs, ys], [bl] * 5)
    assert answer is Answer.DONE
    assert [units(o) for o in outs] == [[1, 1, 1, 0, 1], [1, 1, 1, 0, 1], [1, 0, 1, 0, 0],
                                        [0, 1, 0, 1, 1], [1, 1, 1, 1, 1]]


def test_the_caller_refuses_a_fold_of_booleans_before_any_library() -> None:
    x = Array.from_numpy(np.ones((3,), np.bool_))
    with pytest.raises(InvalidArgument, match=r"^nx\.fold: fold adds by Prog's Add, which does "
                                              r"not take bool \(bool \[3\]\)$"):
        nx.fold(x, (3,), S.Pad((0,), (0,), (0,)))


# --------------------------------------------------------------------------
# The conventions we keep, as stated
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dt", ROUTINE_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_reads_the_triangle_its_mode_names(where: tuple[Any, Rig], dt: Dtype,
                                                    upper: bool) -> None:
    assert "upper=True its upper triangle" in where[0].statement.open_choices["cholesky triangle"]
    h = np.array([[4, 2, 2], [2, 5, 3], [2, 3, 6]], dt.numpy_dtype)
    if dt.is_complex:
        h = h + np.array([[0, 1j, -1j], [-1j, 0, 2j], [1j, -2j, 0]], dt.numpy_dtype)
    seen = h.copy()
    off = np.tril_indices(3, -1) if upper else np.triu_indices(3, 1)
    seen[off] = np.nan  # the triangle the mode does not read
    answer, (f,) = call(where, S.Cholesky(upper), [seen], [dt])
    assert answer is Answer.DONE
    assert np.isfinite(f).all() and np.array_equal(f, np.triu(f) if upper else np.tril(f))
    prod = np.conj(f.T) @ f if upper else f @ np.conj(f.T)
    assert np.abs(prod - h).max() <= 64 * np.finfo(f.dtype).eps * np.abs(h).max()


@pytest.mark.parametrize("dt", [D.complex64, D.complex128], ids=lambda d: d.name)
def test_eigh_of_complex_gives_real_eigenvalues(where: tuple[Any, Rig], dt: Dtype) -> None:
    real = D.float32 if dt is D.complex64 else D.float64
    assert f"{real.name} for {dt.name}" in where[0].statement.open_choices["eigh eigenvalues"]
    h = np.array([[2, 1j], [-1j, 2]], dt.numpy_dtype)  # eigenvalues 1 and 3
    answer, (w,) = call(where, S.Eigh(False), [h], [real])
    assert answer is Answer.DONE and w.dtype == real.numpy_dtype
    assert np.abs(w - [1.0, 3.0]).max() <= 64 * np.finfo(w.dtype).eps
    # A complex destination for the eigenvalues does not fit.
    lib, dev = where
    a = Array.from_numpy(h, dev)
    assert lib.eigh(S.Eigh(False), [Array.empty(dt, (2,), dev)], [a]) is Answer.WRONG_DTYPE

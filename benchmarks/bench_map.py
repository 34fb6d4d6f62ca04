"""The host library's ``map`` side by side with NumPy: ``a*b+c``,
``x*sigmoid(x)``, exact GELU ``x*0.5*(1+erf(x/√2))`` (SciPy's
``scipy.special.erf`` on NumPy's side), ``tanh`` and a 6-node program, at
float32 and float64.

Each row times our kernel, called directly with preallocated destinations,
and the NumPy ufuncs a careful user would call for the same result (each
writing into a preallocated array with ``out=``), alternately in one
process; times are medians. ``ratio`` is NumPy's time over ours. A row
times a map of 8 elements: the kernel's per-call overhead. The last rows time
the caller ``nx`` (``nx.add``, ``nx.mul``, ``nx.exp`` of 8 and 1000 elements,
destinations allocated per call) against the same NumPy ufuncs allocating
theirs: the whole per-call overhead a user sees, checked bit for bit first.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.special

from benchmarks import timing
from benchmarks.timing import Check, check_bits, check_within
from benchmarks.timing import row as _row
from nxkernel_core import dtype as D
from nxkernel_core import nx
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_core.plugins import discover
from nxkernel_core.prog import Binary, Prog
from nxkernel_core.spec import PLAIN, Map

LIBRARY = "host"

#: The host library's map, as discovery finds the library.
_MAP = discover().library("host").map

#: The host's stated ulps for a map's transcendental kinds at float32 and
#: float64 (its statement), and NumPy's own for its exp: a row's two sides
#: may differ by both.
_ULPS = 4

#: 1/√2, the float64 nearest: GELU's scale of its argument.
_RSQRT2 = 0.7071067811865476

#: The rows whose programs have only exact kinds, checked bit for bit.
_EXACT = ("map a*b+c", "map 6 nodes sqrt|x*y-.5|*x+y")


def _agree(what: str, call: Callable[[], object], dst: Array, numpy_fn: Callable[..., None],
           args: list[Any], out: Any, exact: bool,
           slack: Callable[[list[Any]], Any] | None = None) -> Check:
    """The row's check: one call of each; the same bits where the program's
    kinds are exact (no transcendental), else within ``_ULPS`` ulps of NumPy's
    result per element, relative to the larger of the two sides' magnitudes,
    plus ``slack(args)`` where given (what the transcendental's stated ulps on
    both sides become through the program's later nodes)."""
    def check() -> None:
        assert call() is Answer.DONE, f"{what}: nxkernel did not compute"
        numpy_fn(*args, out)
        got = dst.to_numpy()
        if exact:
            check_bits(what, got, out)
        else:
            scale = np.maximum(np.abs(got), np.abs(out)).astype(np.float64)
            tol = _ULPS * np.spacing(scale.astype(out.dtype)).astype(np.float64)
            check_within(what, got, out, tol if slack is None else tol + slack(args))

    return check


def _gelu_slack(args: list[Any]) -> Any:
    """GELU's x·0.5·(1 + erf(x/√2)): the two sides' erf, each within 2 ulps of
    a value of magnitude at most 1 (4 ulps apart, at most 4·eps/2 apart),
    differ in the result by up to |x|·0.5·2·eps, which 1 + erf's cancellation
    does not shrink where the result is small."""
    x = args[0]
    return np.abs(x).astype(np.float64) * float(np.finfo(x.dtype).eps)


def _programs(dt: D.Dtype) -> list[tuple[str, Prog, int, Callable[..., None]]]:
    """(name, program, operands, NumPy with ``out=``) for each measured program."""
    b = Prog.build([dt] * 3)
    x, y, z = b.ins
    fma_like = b.finish(x * y + z)

    def np_fma_like(a: Any, c: Any, e: Any, out: Any) -> None:
        np.multiply(a, c, out=out)
        np.add(out, e, out=out)

    b = Prog.build([dt])
    (x,) = b.ins
    silu = b.finish(x / (b.exp(-x) + 1.0))

    def np_silu(a: Any, out: Any) -> None:
        np.negative(a, out=out)
        np.exp(out, out=out)
        np.add(out, 1.0, out=out)
        np.divide(a, out, out=out)

    b = Prog.build([dt])
    (x,) = b.ins
    gelu = b.finish(x * 0.5 * (b.erf(x * _RSQRT2) + 1.0))

    def np_gelu(a: Any, out: Any) -> None:
        np.multiply(a, a.dtype.type(_RSQRT2), out=out)
        scipy.special.erf(out, out=out)
        np.add(out, 1.0, out=out)
        np.multiply(out, 0.5, out=out)
        np.multiply(a, out, out=out)

    b = Prog.build([dt])
    (x,) = b.ins
    tanh = b.finish(b.tanh(x))

    def np_tanh(a: Any, out: Any) -> None:
        np.tanh(a, out=out)

    b = Prog.build([dt] * 2)
    x, y = b.ins
    six = b.finish(b.sqrt(b.abs(x * y - 0.5)) * x + y)

    def np_six(a: Any, c: Any, out: Any) -> None:
        np.multiply(a, c, out=out)
        np.subtract(out, 0.5, out=out)
        np.abs(out, out=out)
        np.sqrt(out, out=out)
        np.multiply(out, a, out=out)
        np.add(out, c, out=out)

    return [("map a*b+c", fma_like, 3, np_fma_like),
            ("map x*sigmoid(x)", silu, 1, np_silu),
            ("map gelu x*.5*(1+erf(x/sqrt2))", gelu, 1, np_gelu),
            ("map tanh", tanh, 1, np_tanh),
            ("map 6 nodes sqrt|x*y-.5|*x+y", six, 2, np_six)]


def run(quick: bool) -> list[dict[str, Any]]:
    """The rows at 1e6 and 1e7 elements (a hundredth of them with ``quick``)."""
    scale = 100 if quick else 1
    repeats = 3 if quick else 9
    rng = np.random.default_rng(0)
    rows = []
    for n in (10**6 // scale, 10**7 // scale):
        for dt in (D.float32, D.float64):
            host = [rng.standard_normal(n).astype(dt.numpy_dtype) for _ in range(3)]
            arrays = [Array.from_numpy(h) for h in host]
            dst = Array.empty(dt, (n,))
            out = np.empty(n, dtype=dt.numpy_dtype)
            for name, prog, k, numpy_fn in _programs(dt):
                spec = Map(prog, (PLAIN,) * k)
                ops = arrays[:k]
                args = host[:k]
                ours = functools.partial(_MAP, spec, [dst], ops)
                check = _agree(f"bench_map: {name}: nxkernel and NumPy", ours, dst, numpy_fn, args,
                               out, exact=name in _EXACT,
                               slack=_gelu_slack if name.startswith("map gelu") else None)
                rows.append(_row(name, n, dt.name, ours, functools.partial(numpy_fn, *args, out),
                                 repeats, check=check))
    tiny = [Array.from_numpy(np.ones(8, np.float32)) for _ in range(2)]
    tiny_dst = Array.empty(D.float32, (8,))
    tiny_np = [np.ones(8, np.float32) for _ in range(3)]
    spec = Map(Prog.binary(Binary.ADD, D.float32), (PLAIN, PLAIN))
    tiny_call = functools.partial(_MAP, spec, [tiny_dst], tiny)
    rows.append(_row("map add, 8 elements (overhead)", 8, "float32", tiny_call,
                     lambda: np.add(tiny_np[0], tiny_np[1], out=tiny_np[2]), repeats * 20,
                     check=_agree("bench_map: map add: nxkernel and NumPy", tiny_call, tiny_dst,
                                  lambda a, b, out: np.add(a, b, out=out), tiny_np[:2], tiny_np[2],
                                  exact=True)))
    rows += overhead_rows(repeats * 20)
    return rows


def overhead_rows(repeats: int) -> list[dict[str, Any]]:
    """``nx.add``, ``nx.mul`` and ``nx.exp`` of 8 and 1000 float32 elements
    against NumPy's ufuncs: the caller's whole per-call cost (checks, a fresh
    destination, the library's door and kernel). Each pair is checked before
    timing: add and mul bit for bit (exact kinds), exp to 2 float32 ulps of
    NumPy's (the host's float32 exp is within an ulp of the correctly rounded
    value)."""
    rng = np.random.default_rng(1)
    rows = []
    for n in (8, 1000):
        xs = [rng.standard_normal(n).astype(np.float32) for _ in range(2)]
        a, b = (nx.asarray(v) for v in xs)
        cases: list[tuple[str, Callable[[], Any], Callable[[], Any]]] = [
            ("nx.add (call overhead)", functools.partial(nx.add, a, b),
             functools.partial(np.add, xs[0], xs[1])),
            ("nx.mul (call overhead)", functools.partial(nx.mul, a, b),
             functools.partial(np.multiply, xs[0], xs[1])),
            ("nx.exp (call overhead)", functools.partial(nx.exp, a),
             functools.partial(np.exp, xs[0])),
        ]
        for name, ours, theirs in cases:
            what = f"bench_map: {name.split()[0]}: nxkernel and NumPy"

            def check(ours: Callable[[], Any] = ours, theirs: Callable[[], Any] = theirs,
                      what: str = what, exact: bool = not name.startswith("nx.exp")) -> None:
                got, want = np.asarray(ours().to_numpy()), np.asarray(theirs())
                if exact:
                    check_bits(what, got, want)
                else:
                    check_within(what, got, want, 2 * np.spacing(np.abs(want)).astype(np.float64))

            rows.append(_row(name, n, "float32", ours, theirs, repeats, check=check))
    return rows


if __name__ == "__main__":
    sys.exit(timing.main(run, __doc__, "a hundredth of the sizes"))

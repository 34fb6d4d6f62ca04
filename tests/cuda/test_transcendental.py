"""The transcendental kinds of float64 keep the statement's bound against the
exact value (mpmath, 60 digits): within 2 ulps, CUDA's documented bound for
libdevice's double functions (what a GPU computes) and more than the C
library's error (what cuda-emu computes), so the same test holds on both
devices although their bits may differ. float32 and narrower compute in
float64 and round once: within 1 ulp (tests/cuda/test_elementwise.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mpmath
import numpy as np

from nxkernel_core import dtype as D
from nxkernel_core import evaluator
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.prog import Prog
from nxkernel_cuda.device import CudaRig
from nxkernel_cuda.library import LIBRARY

from .support import on, run

#: The statement's bound for float64 ("at most 2 ulps"), CUDA's for libdevice.
ULPS = 2

#: Each unary kind: its builder method, mpmath's function, a domain.
UNARY: dict[str, tuple[Callable[[Any], Any], tuple[float, float]]] = {
    "exp": (mpmath.exp, (-700.0, 700.0)), "exp2": (lambda x: mpmath.power(2, x), (-1000.0, 1000.0)),
    "log": (mpmath.log, (1e-300, 1e300)), "log2": (lambda x: mpmath.log(x, 2), (1e-300, 1e300)),
    "log1p": (mpmath.log1p, (-0.999, 1e10)), "expm1": (mpmath.expm1, (-40.0, 700.0)),
    "sin": (mpmath.sin, (-1e4, 1e4)), "cos": (mpmath.cos, (-1e4, 1e4)), "tan": (mpmath.tan, (-1e4, 1e4)),
    "asin": (mpmath.asin, (-1.0, 1.0)), "acos": (mpmath.acos, (-1.0, 1.0)),
    "atan": (mpmath.atan, (-1e6, 1e6)),
    "sinh": (mpmath.sinh, (-700.0, 700.0)), "cosh": (mpmath.cosh, (-700.0, 700.0)),
    "tanh": (mpmath.tanh, (-30.0, 30.0)), "erf": (mpmath.erf, (-6.0, 6.0)),
}

N = 64


def _exact(fn: Callable[..., Any], *args: np.ndarray) -> np.ndarray:
    with mpmath.workdps(60):
        return np.array([float(fn(*(mpmath.mpf(float(a)) for a in xs))) for xs in zip(*args, strict=True)])


def _inputs(lo: float, hi: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if lo > 0 and hi / lo > 1e6:  # log-uniform over a wide positive domain
        return np.exp(rng.uniform(np.log(lo), np.log(hi), N))
    return rng.uniform(lo, hi, N)


def test_float64_unary_kinds_are_within_2_ulps(dev: CudaRig) -> None:
    """The unary kinds, eight to a program (loads and results are at most 16),
    each over its domain."""
    kinds = sorted(UNARY)
    for part in (kinds[:8], kinds[8:]):
        b = Prog.build([D.float64] * len(part))
        prog = b.finish(*(getattr(b, k)(x) for k, x in zip(part, b.ins, strict=True)))
        xs = [_inputs(*UNARY[k][1], seed=i) for i, k in enumerate(part)]
        answer, got = run(S.Map(prog, (S.PLAIN,) * len(part)), [on(dev, x, D.float64) for x in xs],
                          [D.float64] * len(part))
        assert answer is Answer.DONE
        for k, x, g in zip(part, xs, got, strict=True):
            err = evaluator.ulps(g, _exact(UNARY[k][0], x), D.float64)
            assert np.all(err <= ULPS), (k, x[err > ULPS], err[err > ULPS])


def test_float64_pow_and_atan2_are_within_2_ulps(dev: CudaRig) -> None:
    rng = np.random.default_rng(5)
    x, y = rng.uniform(0.01, 100.0, N), rng.uniform(-50.0, 50.0, N)
    b = Prog.build([D.float64, D.float64])
    prog = b.finish(b.pow(b.ins[0], b.ins[1]), b.atan2(b.ins[1], b.ins[0]))
    answer, (p, a) = run(S.Map(prog, (S.PLAIN, S.PLAIN)), [on(dev, x, D.float64), on(dev, y, D.float64)],
                         [D.float64, D.float64])
    assert answer is Answer.DONE
    assert np.all(evaluator.ulps(p, _exact(mpmath.power, x, y), D.float64) <= ULPS)
    assert np.all(evaluator.ulps(a, _exact(mpmath.atan2, y, x), D.float64) <= ULPS)


def test_the_statement_states_the_float64_bound() -> None:
    prose = LIBRARY.statement.algorithms["transcendental kinds"]
    assert "at most 2 ulps" in prose and "libdevice" in prose

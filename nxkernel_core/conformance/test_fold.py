"""Laws of ``fold``: the adjoint of a Padded load."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from .. import dtype as D
from .. import exact as O
from .. import spec as S
from . import generators as G
from .cases import draw_case
from .harness import (
    Data,
    Subject,
    assert_bits,
    check_nan_rule,
    invoke,
    invoke_misfit,
    law,
    operand_of,
    slot,
)
from .judge import check_sums, signalling_in


@law("fold")
def test_fold_adjoint(subject: Subject, data: Data) -> None:
    """Each element of a fold's destination is +0 plus every element of x that
    a Padded load by the pad reads from that index: integers exactly
    (wrapping), floats within γ(n − 1)·Σ|x| of the exact sum (narrow floats in
    float32, then rounded once), +0 where no element of x reads it. Contract:
    'a float sum of n terms, a reduction's, a scan's or a fold's, is within
    γ(n - 1) Σ|x| of the exact sum'; upstream §8 'Fold: the adjoint of a
    Padded load. Each output is +0 plus every x element that the load reads
    from that index'."""
    case = draw_case(data, subject, "fold")
    out = invoke(subject, case.spec, case.dsts, case.operands, data)
    if out.declined:
        return
    (x,) = case.values
    dt, shape = case.dsts[0]
    src = O.fold_sources(shape, case.spec.pad).reshape(-1)
    flat = np.asarray(x).reshape(-1)
    got = out.results[0].reshape(-1)
    what = f"fold to {list(shape)} by {case.spec.pad}"
    for i in range(got.size):
        chain = [flat[j] for j in np.flatnonzero(src == i)]
        if dt.is_float or dt.is_complex:
            terms = np.asarray(chain, dtype=dt.numpy_dtype)[None, :]
            check_sums(dt, dt, got[i:i + 1], O.to_float64(dt, terms), f"{what}: element {i}")
            if not chain:
                assert_bits(dt, got[i:i + 1], np.zeros(1, dt.numpy_dtype),
                            f"{what}: element {i}, read by no element of x, is +0")
        else:
            terms = np.asarray(chain, dtype=dt.numpy_dtype)[None, :] if chain else \
                np.zeros((1, 0), dtype=dt.numpy_dtype)
            want = O.reduce_fixed(dt, terms, S.Monoid.SUM)[0]
            assert_bits(dt, got[i:i + 1], want, f"{what}: element {i}")
    check_nan_rule(dt, out.results[0], signalling_in(case.operands, case.values), what)



@law("fold")
def test_fold_of_booleans_does_not_fit(subject: Subject, data: Data) -> None:
    """A fold of bool or bit does not fit, since fold adds by Prog's Add, which
    takes no boolean: never Done, nothing written outside its arrays (the
    caller refuses it before any library; which refusal, or Declined, is the
    library's to choose). Upstream §2: fold: 'A dtype Prog.Add does not take
    answers Wrong_dtype'; contract: 'For one that does not [fit], it answers a
    refusal or Declined, never Done, and reads and writes nothing outside its
    arrays; the library chooses which refusal'."""
    dt = data.draw(st.sampled_from((D.bool_, D.bit)), label="dtype")
    shape = data.draw(G.shapes(min_rank=1, max_rank=2, max_side=3), label="shape")
    pad = S.Pad((0,) * len(shape), (0,) * len(shape), (0,) * len(shape))
    x = operand_of(data, subject, dt, np.ones(shape, np.bool_), label="x")
    dst = slot(subject, dt, shape).array
    invoke_misfit(subject, S.Fold(shape, pad), [dst], [x], f"a fold of {dt.name}")

"""``nx.reference``: not registered by default, selectable by object, and it
computes what it states with the references' bits."""

from __future__ import annotations

import numpy as np

from nxkernel_core import dtype as D
from nxkernel_core import nx, plugins, rig
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_core.kernel import check_library
from nxkernel_core.prog import Binary, Prog
from nxkernel_core.reference_library import LIBRARY


def test_it_is_a_library_that_discovery_does_not_register() -> None:
    check_library(LIBRARY)
    assert LIBRARY.name == "nx.reference"
    assert "nx.reference" not in [lib.name for lib in plugins.discover().libraries()]


def test_it_computes_a_map_and_a_sort_with_the_references_bits() -> None:
    x = nx.asarray(np.array([3.0, -0.0, np.nan, 0.0, -1.5], np.float32))
    y = nx.asarray(np.ones(5, np.float32))
    dst = Array.empty(D.float32, (5,), rig.host)
    spec = S.Map(Prog.binary(Binary.ADD, D.float32), (S.PLAIN, S.PLAIN))
    assert LIBRARY.map(spec, [dst], [x, y]) is Answer.DONE
    assert dst.to_numpy().tobytes() == (x.to_numpy() + y.to_numpy()).tobytes()
    values = Array.empty(D.float32, (5,), rig.host)
    positions = Array.empty(D.int64, (5,), rig.host)
    assert LIBRARY.sort(S.Sort(0), [values, positions], [x]) is Answer.DONE
    assert positions.to_numpy().tolist() == [4, 1, 3, 0, 2]  # -0 before +0, NaN last


def test_it_states_and_answers_its_declines() -> None:
    x = nx.asarray(np.ones(4, np.float32))
    out = Array.empty(D.float32, (), rig.host)
    spec = S.Reduce(Prog.identity(D.float32), (S.PLAIN,), (0,), ((S.Monoid.SUM, 0, D.float32),))
    assert LIBRARY.reduce(spec, [out], [x]) is Answer.DECLINED
    assert LIBRARY.statement.computes["reduce"].prose == \
        "declines every case: nx.reference computes no reduce"

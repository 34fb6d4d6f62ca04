"""The rendered CUDA sources, snapshot-tested: each ``*_code`` function (pure)
renders a fixed set of parameters, and the text must equal the checked-in
snapshot ``tests/cuda/snapshots/NAME.snap`` (CUDA C++, named apart from the
sources the library compiles) to the byte. A change to a template or a
renderer shows here as a diff to review; where it is meant, refresh the
snapshots from the repository root with::

    python -m tests.cuda.test_render

and commit them with the change. (The sources' behaviour is the other tests'
business: these catch an unintended change of text, e.g. a slot rendered
differently or a renderer that stopped being a function of its arguments.)
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Final

import pytest

from nxkernel_core import dtype as D
from nxkernel_core.dtype import Dtype
from nxkernel_cuda import attention_mma, codegen, elementwise, statistics, terms
from nxkernel_cuda.attention import tiles_for
from nxkernel_cuda.attention_code import Tiles, attention_code

from . import programs

#: The folder of the snapshots.
SNAPSHOTS: Final = Path(__file__).parent / "snapshots"


def _tiles(dk: int, dv: int, acc: Dtype) -> Tiles:
    tiles = tiles_for(dk, dv, acc)
    assert tiles is not None
    return tiles


#: Each snapshot's name and the rendering it holds.
CASES: Final[dict[str, Callable[[], str]]] = {
    "eval_fused": lambda: codegen.eval_code(programs.fused()),
    "map_casts": lambda: elementwise.map_code(programs.MAP_PROGRAMS["casts"]),
    "map_coords_and_codes": lambda: elementwise.map_code(programs.MAP_PROGRAMS["coords_and_codes"]),
    "map_padded": lambda: elementwise.map_code(programs.fused(), (None, 2)),
    "reductions_fused_0": lambda: terms.reductions_code(programs.fused(), 0),
    "reductions_fused_1_padded": lambda: terms.reductions_code(programs.fused(), 1, (2, None)),
    "terms_float64": lambda: statistics.terms_code(programs.identity(D.float64), 0),
    "attention_causal_float32": lambda: attention_code(
        programs.causal(D.float32), (), D.float32, D.float32, D.float32, D.float32, 64, 64,
        _tiles(64, 64, D.float32), False),
    "attention_masked_paged_float64": lambda: attention_code(
        programs.masked(D.float64), (D.bool_, D.float64), D.float16, D.float16, D.float16, D.float64, 32, 48,
        _tiles(32, 48, D.float64), True),
    "attention_mma_causal_bfloat16": lambda: attention_mma.attention_mma_code(
        programs.causal(D.float32), (), D.bfloat16, 64, 64, 64, False),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_rendered_source_is_the_snapshot(name: str) -> None:
    path = SNAPSHOTS / f"{name}.snap"
    assert path.exists(), f"no snapshot {path}: python -m tests.cuda.test_render"
    text = CASES[name]()
    assert text == path.read_text(), (
        f"{name} renders other text than {path}; if that is meant: python -m tests.cuda.test_render")


def test_every_snapshot_has_a_case() -> None:
    assert {p.stem for p in SNAPSHOTS.glob("*.snap")} == set(CASES)


if __name__ == "__main__":
    SNAPSHOTS.mkdir(exist_ok=True)
    for old in SNAPSHOTS.glob("*.snap"):
        old.unlink()
    for case, render in CASES.items():
        (SNAPSHOTS / f"{case}.snap").write_text(render())
        print(f"wrote {SNAPSHOTS / case}.snap")

"""nx.cuda's fused attention on cuda:0 against PyTorch's
``torch.nn.functional.scaled_dot_product_attention``, side by side in one
process.

Cases (bfloat16 q, k, v and o, float32 accumulator, scale 1/√d: nx.cuda's
tensor-core kernel, ``nxkernel_cuda.attention_mma``, on sm_80 and later):

* prefill: B = 4, H = 32, T = 4096, d = 128, causal (key ≤ row);
* decode: B = 4, H = 32, one query row against 4096 keys (split over key
  tiles, combined in split order).

``quick`` runs B = 1, H = 8, T = 1024. Each case first checks that both give
the same o within bfloat16's rounding (a relative 2⁻⁶ of the largest |o|),
then reports the medians of alternating timings, each followed by a
synchronisation, and ``ratio = torch_s / ours_s`` (above 1: ours is faster)
with torch's time in ``numpy_s``, the runner's reference column.

Without a usable GPU (no CuPy, no driver, no device) or without PyTorch with
CUDA, ``run`` prints why and returns no rows.
``python -m benchmarks.bench_cuda_attention [--quick] [--json PATH]``.
"""

from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np

from benchmarks import timing
from nxkernel_core import dtype as D
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_core.prog import Prog

#: The library these benchmarks measure (the runner's ``python -m benchmarks.run cuda``).
LIBRARY = "cuda"


def _program(causal: bool) -> Prog:
    """Output 0: key ≤ row (causal) or every pair; output 1: the score."""
    b = Prog.build([D.float32])
    seen = b.less_equal(b.coord(0), b.coord(1)) if causal else b.equal(b.coord(0), b.coord(0))
    return b.finish(seen, b.copy(b.ins[0]))


def _case(dev: Any, name: str, b: int, h: int, tq: int, tk: int, d: int, causal: bool,
          repeats: int) -> dict[str, Any]:
    lib = timing.cuda_library()
    import torch
    import torch.nn.functional as F

    rng = np.random.default_rng(tq * 7 + tk)
    shapes = ((b, h, tq, d), (b, h, tk, d), (b, h, tk, d))
    host = [D.of_float(D.bfloat16, rng.standard_normal(s)) for s in shapes]
    q, k, v = (Array.from_numpy(x, dev, D.bfloat16) for x in host)
    tq_, tk_, tv_ = (torch.from_numpy(np.asarray(x, dtype=np.float32)).cuda().to(torch.bfloat16)
                     for x in host)
    o = Array.empty(D.bfloat16, (b, h, tq, d), dev)
    lse = Array.empty(D.float32, (b, h, tq), dev)
    spec = S.Attention(_program(causal), (), 1.0 / math.sqrt(d), D.float32, S.Dense())

    def ours() -> None:
        assert lib.attention(spec, [o, lse], [q, k, v]) is Answer.DONE
        dev.synchronize()

    def theirs() -> Any:
        r = F.scaled_dot_product_attention(tq_, tk_, tv_, is_causal=causal)
        torch.cuda.synchronize()
        return r

    def check() -> None:
        ours()
        mine = np.asarray(o.to_numpy(), dtype=np.float32)
        ref = theirs().float().cpu().numpy()
        timing.check_close(f"bench_cuda_attention: {name}: nx.cuda and torch", mine, ref, 2.0**-6)

    return timing.row(name, b * h * tq * tk, "bfloat16", ours, theirs, repeats, check=check)


def run(quick: bool) -> list[dict[str, Any]]:
    """The rows of every case; none (with the reason printed) where no CUDA
    GPU or no PyTorch with CUDA is usable."""
    dev = timing.cuda_device("bench_cuda_attention")
    if dev is None:
        return []
    try:
        import torch
    except ImportError as e:
        print(f"bench_cuda_attention: PyTorch is not importable, so nothing is measured: {e}",
              file=sys.stderr)
        return []
    if not torch.cuda.is_available():
        print("bench_cuda_attention: PyTorch sees no CUDA device, so nothing is measured", file=sys.stderr)
        return []
    b, h, t, d = (1, 8, 1024, 128) if quick else (4, 32, 4096, 128)
    repeats = 3 if quick else 10
    return [
        _case(dev, f"attention causal B{b} H{h} T{t} d{d} vs sdpa", b, h, t, t, d, True, repeats),
        _case(dev, f"attention decode B{b} H{h} tk{t} d{d} vs sdpa", b, h, 1, t, d, False, repeats),
    ]


if __name__ == "__main__":
    sys.exit(timing.main(run, __doc__, "B = 1, H = 8, T = 1024, fewer repeats"))

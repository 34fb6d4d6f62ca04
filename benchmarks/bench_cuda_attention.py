"""nx.cuda's fused attention on cuda:0 against PyTorch's
``torch.nn.functional.scaled_dot_product_attention``, side by side in one
process.

Cases (bfloat16 q, k, v and o, float32 accumulator, scale 1/√d):

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
``python benchmarks/bench_cuda_attention.py [--quick] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from nxkernel_core import dtype as D
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_core.prog import Prog
from nxkernel_cuda import device
from nxkernel_cuda.library import LIBRARY as LIB

#: The library these benchmarks measure (the runner's ``nxkernel bench cuda``).
LIBRARY = "cuda"


def _median(f: Callable[[], Any], g: Callable[[], Any], repeats: int) -> tuple[float, float]:
    """Medians of ``repeats`` alternating timings of ``f`` and ``g`` (each
    including its synchronisation), after one warm-up each."""
    f()
    g()
    tf, tg = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        tf.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        g()
        tg.append(time.perf_counter() - t0)
    return statistics.median(tf), statistics.median(tg)


def _program(causal: bool) -> Prog:
    """Output 0: key ≤ row (causal) or every pair; output 1: the score."""
    b = Prog.build([D.float32])
    seen = b.less_equal(b.coord(0), b.coord(1)) if causal else b.equal(b.coord(0), b.coord(0))
    return b.finish(seen, b.copy(b.ins[0]))


def _case(dev: device.CudaDevice, name: str, b: int, h: int, tq: int, tk: int, d: int, causal: bool,
          repeats: int) -> dict[str, Any]:
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
        assert LIB.attention(spec, [o, lse], [q, k, v]) is Answer.DONE
        dev.synchronize()

    def theirs() -> Any:
        r = F.scaled_dot_product_attention(tq_, tk_, tv_, is_causal=causal)
        torch.cuda.synchronize()
        return r

    ours()
    mine = np.asarray(o.to_numpy(), dtype=np.float32)
    ref = theirs().float().cpu().numpy()
    if not np.allclose(mine, ref, rtol=0, atol=2.0**-6 * float(np.abs(ref).max())):
        raise AssertionError(f"bench_cuda_attention: {name}: nx.cuda and torch disagree "
                             f"(largest difference {float(np.abs(mine - ref).max())!r})")
    ours_s, torch_s = _median(ours, theirs, repeats)
    return {"name": name, "size": b * h * tq * tk, "dtype": "bfloat16", "ours_s": ours_s, "numpy_s": torch_s,
            "ratio": torch_s / ours_s if ours_s > 0 else None}


def run(quick: bool) -> list[dict[str, Any]]:
    """The rows of every case; none (with the reason printed) where no CUDA
    GPU or no PyTorch with CUDA is usable."""
    ok, why = device.availability()
    if not ok:
        print(f"bench_cuda_attention: no CUDA GPU is usable here, so nothing is measured: {why}",
              file=sys.stderr)
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
    dev = device.CudaDevice(0)
    b, h, t, d = (1, 8, 1024, 128) if quick else (4, 32, 4096, 128)
    repeats = 3 if quick else 10
    return [
        _case(dev, f"attention causal B{b} H{h} T{t} d{d} vs sdpa", b, h, t, t, d, True, repeats),
        _case(dev, f"attention decode B{b} H{h} tk{t} d{d} vs sdpa", b, h, 1, t, d, False, repeats),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="B = 1, H = 8, T = 1024, fewer repeats")
    parser.add_argument("--json", help="write the rows to this file")
    args = parser.parse_args()
    rows = run(args.quick)
    for r in rows:
        print(f"{r['name']:<48} {r['ours_s'] * 1e3:9.3f} ms {r['numpy_s'] * 1e3:9.3f} ms x{r['ratio']:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()

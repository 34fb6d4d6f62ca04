"""The host attention's compiled path over many row tiles (``attnunits``)
against its per-tile path: the same bits, o and lse, for the calls it takes
(sentence-encoder heads as views of one projection with lengths, causal and
windowed masks, decoding's grouped heads, float32 and float64, one to three
threads), for the row tiles it hands back (a NaN or an infinity in a value,
a row tile of several key tiles) and for calls it never takes (paged keys,
narrow operands)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pytest

from nxkernel_core import dtype as D
from nxkernel_core import spec as S
from nxkernel_core.array import Array
from nxkernel_core.dtype import Dtype
from nxkernel_core.layout import Permute
from nxkernel_host import attnunits, threads

from .test_attention import causal, check, data, mask_of, paged, program, reference, run, window, with_lengths

NDArray = np.ndarray[Any, Any]
Case = tuple[S.Attention, list[Any], Dtype]


@pytest.fixture
def taken(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Counts the row tiles the compiled path computes and hands back:
    ``[computed, handed back]``, summed over the calls."""
    counts = [0, 0]
    run_chunks = attnunits.Chunked.run

    def counted(self: attnunits.Chunked, table: NDArray) -> NDArray:
        redo = run_chunks(self, table)
        counts[0] += table.shape[0]
        counts[1] += int(redo.sum())
        return redo

    monkeypatch.setattr(attnunits.Chunked, "run", counted)
    yield counts


def per_tile(monkeypatch: pytest.MonkeyPatch, case: Case) -> tuple[NDArray, NDArray]:
    """The call's o and lse with every row tile on the per-tile path."""
    spec, operands, odt = case
    with monkeypatch.context() as m:
        m.setattr(attnunits, "chunked", lambda plan: None)
        return run(spec, operands, odt)


def same_bits(got: tuple[NDArray, NDArray], want: tuple[NDArray, NDArray]) -> None:
    assert got[0].dtype == want[0].dtype and got[1].dtype == want[1].dtype
    assert got[0].tobytes() == want[0].tobytes()
    assert got[1].tobytes() == want[1].tobytes()


def encoder(n: int, t: int, heads: int, d: int, acc: Dtype, seed: int) -> tuple[Case, NDArray]:
    """q, k and v as views ``[n, heads, t, d]`` of one projection ``[n, t, 3,
    heads, d]`` (as examples/minilm.py reads them), lengths from 1 to t;
    returns the case and the lengths."""
    dt = np.float64 if acc is D.float64 else np.float32
    qkv = Array.from_numpy(data((n, t, 3, heads, d), dt, seed=seed))
    q, k, v = (qkv[:, :, i].view(Permute((0, 2, 1, 3))) for i in range(3))
    lengths = np.random.default_rng(seed).integers(1, t + 1, n).astype(np.int64)
    lengths[0], lengths[-1] = t, 1
    spec = S.Attention(program(acc), (), 1 / np.sqrt(d), acc, S.Dense(), True)
    return (spec, [q, k, v, lengths], acc), lengths


@pytest.mark.parametrize(("n", "t", "heads", "d", "acc"), [
    (4, 45, 6, 32, D.float32), (3, 130, 2, 16, D.float32), (4, 9, 3, 8, D.float64)])
def test_encoder_heads_give_the_per_tile_bits(monkeypatch: pytest.MonkeyPatch, taken: list[int],
                                              n: int, t: int, heads: int, d: int,
                                              acc: Dtype) -> None:
    case, lengths = encoder(n, t, heads, d, acc, seed=n + t)
    want = per_tile(monkeypatch, case)
    assert taken == [0, 0]
    for count in (1, 2, 3):
        with threads(count):
            same_bits(run(*case), want)
    assert taken[0] >= 3 * n * heads and taken[1] == 0
    spec, (q, k, v, _), _ = case
    qn, kn, vn = (np.asarray(x.to_numpy()) for x in (q, k, v))
    vis = with_lengths(mask_of(None, (n,), heads, t, t), lengths)
    check(*want, reference(qn, kn, vn, spec.scale, vis), acc, acc, spec.scale, d)


def masked(mask: str, acc: Dtype) -> Case:
    dt = np.float64 if acc is D.float64 else np.float32
    q, k, v = data((2, 3, 40, 8), dt, seed=1), data((2, 3, 40, 8), dt, seed=2), \
        data((2, 3, 40, 6), dt, seed=3)
    fn = causal(0) if mask == "causal" else window(0, 7)
    return S.Attention(program(acc, fn), (), 0.3, acc, S.Dense()), [q, k, v], acc


@pytest.mark.parametrize("mask", ["causal", "window"])
@pytest.mark.parametrize("acc", [D.float32, D.float64])
def test_masks_of_one_interval_per_row(monkeypatch: pytest.MonkeyPatch, taken: list[int],
                                       mask: str, acc: Dtype) -> None:
    case = masked(mask, acc)
    same_bits(run(*case), per_tile(monkeypatch, case))
    assert taken[0] == 6 and taken[1] == 0


def decoding(tq: int) -> Case:
    lead, hq, hk, tk = (2,), 8, 2, 700
    q, k, v = data((*lead, hq, tq, 16), seed=1), data((*lead, hk, tk, 16), seed=2), \
        data((*lead, hk, tk, 8), seed=3)
    lengths = np.array([tk, tk - 300], np.int64)
    return S.Attention(program(D.float32), (), 0.25, D.float32, S.Dense(), True), \
        [q, k, v, lengths], D.float32


@pytest.mark.parametrize("tq", [1, 3])
def test_decoding_grouped_heads(monkeypatch: pytest.MonkeyPatch, taken: list[int],
                                tq: int) -> None:
    case = decoding(tq)
    want = per_tile(monkeypatch, case)
    for count in (1, 2):
        with threads(count):
            same_bits(run(*case), want)
    assert taken == [2 * 2 * 2, 0]  # (lead index, key head) per call


def test_non_finite_values_are_handed_back(monkeypatch: pytest.MonkeyPatch,
                                           taken: list[int]) -> None:
    """A row tile whose product is not finite is recomputed by the per-tile
    path: a NaN value past a length never read, a NaN and infinities seen."""
    (spec, _, odt), _ = encoder(3, 30, 4, 8, D.float32, seed=5)
    proj = data((3, 30, 3, 4, 8), seed=5)
    proj[0, 5, 2, 1, 2] = np.nan  # value of head 1, key 5, sentence 0
    proj[1, 2, 2, 3, :] = np.inf  # value of head 3, key 2, sentence 1
    proj[2, 29, 2, 0, 0] = np.nan  # past sentence 2's length 1: never read
    qkv = Array.from_numpy(proj)
    q, k, v = (qkv[:, :, i].view(Permute((0, 2, 1, 3))) for i in range(3))
    case: Case = (spec, [q, k, v, np.array([30, 20, 1], np.int64)], odt)
    got = run(*case)
    same_bits(got, per_tile(monkeypatch, case))
    assert taken == [12, 2]
    assert np.isnan(got[0][0, 1]).any() and not np.isfinite(got[0][1, 3]).all()
    assert np.isfinite(got[0][2]).all()


def test_several_key_tiles_and_untaken_calls(monkeypatch: pytest.MonkeyPatch,
                                             taken: list[int]) -> None:
    """Rows that see more than one key tile, paged keys and float16
    operands take the per-tile path alone."""
    q, k, v = data((1, 1, 200, 8), seed=1), data((1, 1, 2 * 1024 + 9, 8), seed=2), \
        data((1, 1, 2 * 1024 + 9, 8), seed=3)
    long: Case = (S.Attention(program(D.float32), (), 0.25, D.float32, S.Dense()), [q, k, v],
                  D.float32)
    kp, vp, table = paged(data((2, 2, 32, 8), seed=2), data((2, 2, 32, 8), seed=3), 16)
    pages: Case = (S.Attention(program(D.float32), (), 0.25, D.float32, S.Paged(16)),
                   [data((2, 2, 5, 8), seed=4), kp, vp, table], D.float32)
    narrow: Sequence[Any] = [x.astype(np.float16) for x in masked("causal", D.float32)[1]]
    half: Case = (masked("causal", D.float32)[0], list(narrow), D.float16)
    for case in (long, pages, half):
        same_bits(run(*case), per_tile(monkeypatch, case))
    assert taken == [0, 0]


def strided(tile: NDArray) -> NDArray:
    """The tile's values in a view whose rows lie two rows apart (not
    C-contiguous): the tile kernels then take every key row by row."""
    wide = np.zeros((tile.shape[0], 2 * tile.shape[1]), tile.dtype)
    wide[:, :tile.shape[1]] = tile
    view = wide[:, :tile.shape[1]]
    assert not view.flags.c_contiguous
    return view


@pytest.mark.parametrize("r", [1, 3, 4, 15])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("special", ["plain", "nan", "inf", "zeros", "hidden page"])
def test_tiles_of_few_rows_take_flat_passes_with_the_row_loops_values(
        r: int, dt: Any, special: str) -> None:
    """``tile_maxima`` and ``tile_exponentials`` over a tile of fewer than 16 rows take the
    keys every row sees in flat passes: the same maxima as the row loops (a
    NaN the same NaN, the last in key order; of +0 and −0 either) and the
    same bits of every shifted Exp, keys outside the band and hidden pages
    included."""
    n, k0, lo_max, hi_min = 211, 40, 57, 230
    rng = np.random.default_rng(r)
    tile = rng.standard_normal((n, r)).astype(dt)
    lo = rng.integers(k0, lo_max + 1, r).astype(np.int64)
    hi = rng.integers(hi_min, k0 + n + 1, r).astype(np.int64)
    keyok = np.ones(n, np.uint8)
    if special == "nan":
        nans = np.array([0x7FC00001, 0xFFC00123, 0x7FA00002], np.uint32).view(np.float32)
        tile[[30, 90, 150], 0] = nans.astype(dt) if dt is np.float32 else np.nan
        tile[100, r - 1] = np.nan
    elif special == "inf":
        tile[60, 0], tile[120, r - 1] = np.inf, -np.inf
    elif special == "zeros":
        tile[...] = np.where(rng.random((n, r)) < 0.5, -0.0, 0.0).astype(dt)
    elif special == "hidden page":
        keyok[77] = 0
    s, ninf = dt(0.37), dt(-np.inf)
    if special != "hidden page":
        assert attnunits._flat_span(tile, lo_max, hi_min, k0, keyok) == (lo_max - k0, hi_min - k0)
    got, want = np.empty(r, dt), np.empty(r, dt)
    attnunits.tile_maxima(tile, s, ninf, lo, hi, lo_max, hi_min, k0, keyok, got)
    attnunits.tile_maxima(strided(tile), s, ninf, lo, hi, lo_max, hi_min, k0, keyok, want)
    assert ((got.view(f"u{got.itemsize}") == want.view(f"u{got.itemsize}"))
            | ((got == 0) & (want == 0))).all()
    flat, rows = tile.copy(), strided(tile)
    attnunits.tile_exponentials(flat, s, ninf, lo, hi, lo_max, hi_min, k0, keyok, want)
    attnunits.tile_exponentials(rows, s, ninf, lo, hi, lo_max, hi_min, k0, keyok, want)
    assert flat.tobytes() == np.ascontiguousarray(rows).tobytes()

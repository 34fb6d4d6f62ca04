"""``lanedots``: the orders it states, bit for bit against an exact emulation
(exact rational arithmetic, one correct rounding per operation), within
γ(n)·Σ|xᵢyᵢ| of the exact sums, on views of any row stride; attention's row
tiles of at most ``LANE_ROWS`` rows take their products from it, with the
same bits on the compiled and the per-tile paths; and the contraction's
small tiles (``tiling.by_lanes``) are its products."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from nxkernel_core import dtype as D
from nxkernel_core import spec as S
from nxkernel_core.array import Array
from nxkernel_core.layout import Permute
from nxkernel_host import attnunits, blas, lanedots, threads, tiling
from nxkernel_host.attnplan import LANE_ROWS

from .test_attention import program, run

NDArray = np.ndarray[Any, Any]
FLOATS = [np.float32, np.float64]


def rounded(x: Fraction, dt: type[np.floating[Any]]) -> np.floating[Any]:
    """x rounded once to dt, to nearest, ties to even (finite x in range)."""
    near = dt(float(x))  # within one step of the answer (float() rounds once to float64)
    best = near
    for c in (np.nextafter(near, dt(np.inf)), np.nextafter(near, dt(-np.inf))):
        gap, best_gap = abs(Fraction(float(c)) - x), abs(Fraction(float(best)) - x)
        even = int(np.array(c).view(np.uint32 if dt == np.float32 else np.uint64)) % 2 == 0
        if gap < best_gap or (gap == best_gap and even):
            best = c
    return best


def fma(a: Any, b: Any, c: Any, dt: type[np.floating[Any]]) -> np.floating[Any]:
    """a·b + c rounded once; an exact zero signed as IEEE 754 signs it (the
    sign of two zeros of one sign, else +0)."""
    exact = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
    if exact != 0:
        return rounded(exact, dt)
    zero_product = a == 0 or b == 0
    negative = zero_product and c == 0 and bool(np.signbit(a) ^ np.signbit(b)) and bool(
        np.signbit(c))
    return dt(-0.0) if negative else dt(0.0)


def lane_dot(x: NDArray, y: NDArray) -> np.floating[Any]:
    """The stated order: W lanes of FMA chains from −0, then the halving tree."""
    dt = x.dtype.type
    if x.size == 0:
        return dt(0.0)
    w = 64 // x.itemsize
    lanes = [dt(-0.0)] * w
    for m in range(x.size):
        lanes[m % w] = fma(x[m], y[m], lanes[m % w], dt)
    h = w // 2
    while h:
        lanes = [dt(lanes[i] + lanes[i + h]) for i in range(h)]
        h //= 2
    return lanes[0]


def chain(e: NDArray, v: NDArray) -> NDArray:
    """``Σ_j e[j, i]·v[j, c]`` as FMA chains over j from +0."""
    dt = e.dtype.type
    out = np.zeros((e.shape[1], v.shape[1]), e.dtype)
    for i in range(e.shape[1]):
        for c in range(v.shape[1]):
            acc = dt(0.0)
            for j in range(e.shape[0]):
                acc = fma(e[j, i], v[j, c], acc, dt)
            out[i, c] = acc
    return out


def gamma(n: int, dt: type[np.floating[Any]]) -> float:
    u = float(np.finfo(dt).eps) / 2
    return n * u / (1 - n * u)


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize(("r", "d"), [(1, 1), (1, 17), (2, 16), (3, 15), (4, 64), (5, 8),
                                      (7, 33), (9, 3), (17, 80), (4, 0)])
def test_scores_follow_the_lanes_and_the_tree(dt: type[np.floating[Any]], r: int, d: int) -> None:
    """Every result its pair's lanes and tree, within γ(d) of the exact sum:
    37 keys make several whole groups of keys (taken in one call) and a
    partial one for every row count."""
    rng = np.random.default_rng(r * 100 + d)
    n = 37
    k = rng.standard_normal((n, d)).astype(dt)
    q = rng.standard_normal((r, d)).astype(dt)
    st = np.full((n, r), np.nan, dt)
    lanedots.scores(k, q, st)
    want = np.array([[lane_dot(k[j], q[i]) for i in range(r)] for j in range(n)], dt)
    assert st.tobytes() == want.tobytes()
    exact = [[sum((Fraction(float(a)) * Fraction(float(b)) for a, b in zip(k[j], q[i], strict=True)),
                  Fraction(0)) for i in range(r)] for j in range(n)]
    scale = np.abs(k.astype(np.float64)) @ np.abs(q.astype(np.float64)).T
    err = np.array([[abs(Fraction(float(st[j, i])) - exact[j][i]) for i in range(r)]
                    for j in range(n)], np.float64)
    assert (err <= gamma(max(d, 1), dt) * scale).all()


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize(("r", "dv"), [(1, 1), (2, 16), (3, 20), (4, 64), (5, 70), (8, 9)])
def test_weighted_sums_are_fma_chains_in_key_order(dt: type[np.floating[Any]], r: int,
                                                     dv: int) -> None:
    rng = np.random.default_rng(r * 100 + dv)
    n = 9
    e = rng.random((n, r)).astype(dt)
    v = rng.standard_normal((n, dv)).astype(dt)
    out = np.full((r, dv), np.nan, dt)
    lanedots.weighted(e, v, out)
    assert out.tobytes() == chain(e, v).tobytes()
    exact = np.array([[float(sum((Fraction(float(e[j, i])) * Fraction(float(v[j, c]))
                                  for j in range(n)), Fraction(0))) for c in range(dv)]
                      for i in range(r)])
    scale = np.abs(e.astype(np.float64)).T @ np.abs(v.astype(np.float64))
    assert (np.abs(out - exact) <= gamma(n, dt) * scale + 1e-300).all()


@pytest.mark.parametrize("dt", FLOATS)
def test_weighted_sums_continue_their_chains_over_chunks_of_keys(
        dt: type[np.floating[Any]]) -> None:
    """Keys past one chunk (about 16 KiB of v) continue each chain from the
    element the last chunk stored: the bits of one chain over every key, with
    a partial last chunk and a partial last block of columns; no keys give +0."""
    rng = np.random.default_rng(11)
    n, r, dv = 70, 3, 130  # 31 keys a chunk in float32, 16 in float64
    e = rng.random((n, r)).astype(dt)
    v = rng.standard_normal((n, dv)).astype(dt)
    out = np.full((r, dv), np.nan, dt)
    lanedots.weighted(e, v, out)
    assert out.tobytes() == chain(e, v).tobytes()
    lanedots.weighted(e[:0], v[:0], out)
    assert out.tobytes() == np.zeros((r, dv), dt).tobytes()


#: The block sizes of each register file ``lanedots`` sizes its blocks for.
REGISTER_FILES = {
    "avx512": {"_VECTOR_BYTES": 64, "_WEIGHTED_VECTORS": 4, "_PASS_PAIRS": 16,
               "_WIDE_BLOCK": (6, 4), "_MID_BLOCK": (12, 2), "_NARROW_BLOCK": (24, 1)},
    "avx2": {"_VECTOR_BYTES": 32, "_WEIGHTED_VECTORS": 2, "_PASS_PAIRS": 4,
             "_WIDE_BLOCK": (6, 2), "_MID_BLOCK": (6, 2), "_NARROW_BLOCK": (12, 1)},
}


@pytest.mark.parametrize("name", sorted(REGISTER_FILES))
def test_either_register_files_blocks_give_the_same_bits(monkeypatch: pytest.MonkeyPatch,
                                                         name: str) -> None:
    """The kernels compiled (here, afresh) with the blocks of AVX-512's or of
    AVX2's register file give this machine's kernels' bits: the blocks change
    no element's order."""
    from numba import njit

    for attr, value in REGISTER_FILES[name].items():
        monkeypatch.setattr(lanedots, attr, value)
    monkeypatch.setattr(lanedots, "_dots_of", njit(lanedots._dots_of.py_func))
    fresh = {f: njit(getattr(lanedots, f).py_func) for f in ("scores_at", "weighted_at",
                                                            "product_at")}
    rng = np.random.default_rng(5)
    # float32 alone: float64 runs the same generated code at half the lanes
    # (each fresh compile takes seconds).
    dt = np.float32
    a, b = rng.standard_normal((29, 37)).astype(dt), rng.standard_normal((37, 53)).astype(dt)
    for m, n in ((29, 53), (29, 9), (29, 5), (1, 53)):
        want, got = np.empty((m, n), dt), np.empty((m, n), dt)
        for kernel, out in ((lanedots.product_at, want), (fresh["product_at"], got)):
            kernel(1, m, n, 37, a.ctypes.data, 0, 37, 1, b.ctypes.data, 0, 53,
                   out.ctypes.data, 0, n, dt(0))
        assert got.tobytes() == want.tobytes(), (dt, m, n)
    k, q = rng.standard_normal((45, 70)).astype(dt), rng.standard_normal((4, 70)).astype(dt)
    for r in (1, 2, 4):
        want, got = np.empty((45, r), dt), np.empty((45, r), dt)
        for kernel, st in ((lanedots.scores_at, want), (fresh["scores_at"], got)):
            kernel(k, 0, 70, 45, q, 0, 70, r, 70, st)
        assert got.tobytes() == want.tobytes(), (dt, r)
    ev = rng.random((45, 4)).astype(dt)
    want, got = np.empty((4, 70), dt), np.empty((4, 70), dt)
    for kernel, out in ((lanedots.weighted_at, want), (fresh["weighted_at"], got)):
        kernel(ev, 0, 4, 4, k, 0, 70, 45, 70, out, 0, 70)
    assert got.tobytes() == want.tobytes(), dt


@pytest.mark.parametrize("dt", FLOATS)
def test_products_read_in_place_or_packed_give_the_same_bits(monkeypatch: pytest.MonkeyPatch,
                                                             dt: type[np.floating[Any]]) -> None:
    """A product's rows of a read in place (this machine's kernel, at these
    few blocks of columns) and packed side by side first (compiled afresh
    with packing from one block) give the same bits, for a of unit and of
    transposed strides, and both are the FMA chains over k in order."""
    from numba import njit

    monkeypatch.setattr(lanedots, "_PACK_MIN_BLOCKS", 1)
    packing = njit(lanedots.product_at.py_func)
    rng = np.random.default_rng(8)
    m, k, n = 7, 260, 40  # a partial last block of rows, two chunks of k, 3 registers or more
    b = rng.standard_normal((k, n)).astype(dt)
    for a in (rng.standard_normal((m, k)).astype(dt), rng.standard_normal((k, m)).astype(dt).T):
        size = a.itemsize
        outs = []
        for kernel in (lanedots.product_at, packing):
            out = np.empty((m, n), dt)
            kernel(1, m, n, k, a.ctypes.data, 0, a.strides[0] // size, a.strides[1] // size,
                   b.ctypes.data, 0, n, out.ctypes.data, 0, n, dt(0))
            outs.append(out)
        assert outs[0].tobytes() == outs[1].tobytes()
        assert outs[0].tobytes() == product(a, b).tobytes()


def test_the_pack_buffer_lives_through_the_loops_that_write_it() -> None:
    """Numba frees an array after its last use: ``product_at``'s pack buffer
    must not be freed in the block that makes it (where an address of it,
    kept in a variable, would outlive it), but after the loops that pack into
    it and read it."""
    from numba.core import ir
    from numba.core.compiler import run_frontend

    blocks = run_frontend(lanedots.product_at.py_func, emit_dels=True).blocks
    made = [label for label, block in blocks.items()
            if any(isinstance(st, ir.Assign) and st.target.name == "packed" for st in block.body)]
    freed = [label for label, block in blocks.items()
             if any(isinstance(st, ir.Del) and st.value == "packed" for st in block.body)]
    assert len(made) == 1 and freed and made[0] not in freed


@pytest.mark.parametrize("dt", FLOATS)
def test_views_of_any_row_stride_give_the_contiguous_bits(dt: type[np.floating[Any]]) -> None:
    rng = np.random.default_rng(7)
    big = rng.standard_normal((40, 100)).astype(dt)
    k, q = big[3:33:2, 5:29], big[1:4, 40:64]  # row strides 200 and 100 elements
    e, v = big[::-3, 70:73], big[::-3, 0:20]  # negative row strides
    st = np.empty((k.shape[0], 3), dt)
    lanedots.scores(k, q, st)
    want = np.empty_like(st)
    lanedots.scores(np.ascontiguousarray(k), np.ascontiguousarray(q), want)
    assert st.tobytes() == want.tobytes()
    out, ref = np.empty((3, 20), dt), np.empty((3, 20), dt)
    lanedots.weighted(e, v, out)
    lanedots.weighted(np.ascontiguousarray(e), np.ascontiguousarray(v), ref)
    assert out.tobytes() == ref.tobytes()
    # Column-major operands (no unit stride within a row) are copied first.
    lanedots.scores(np.asfortranarray(k), np.asfortranarray(q), st)
    assert st.tobytes() == want.tobytes()


def test_zeros_infinities_and_nans() -> None:
    k = np.array([[-1.0, 0.0], [np.inf, 1.0], [np.nan, 0.0], [3e38, 3e38]], np.float32)
    q = np.array([[0.0, -0.0], [1.0, 1.0]], np.float32)
    st = np.empty((4, 2), np.float32)
    lanedots.scores(k, q, st)
    # −1·0 and 0·−0 are lanes of −0; −0 + −0 is −0, the exact sum's sign.
    assert st[0, 0] == 0 and np.signbit(st[0, 0])
    assert st[0, 1] == -1
    assert np.isnan(st[1, 0]) and st[1, 1] == np.inf  # ∞·0 is a NaN
    assert np.isnan(st[2]).all()
    # 3e38·0 + 3e38·−0: lanes +0 and −0, whose sum is +0.
    assert st[3, 0] == 0 and not np.signbit(st[3, 0])
    assert st[3, 1] == np.inf  # each lane holds 3e38; the tree's addition overflows


def test_attention_takes_its_products_from_lanedots(monkeypatch: pytest.MonkeyPatch) -> None:
    """On the per-tile path, a tile of at most LANE_ROWS rows (decoding's
    grouped heads) takes the lane kernels, a wider one ``product``; no BLAS."""
    calls: list[str] = []
    monkeypatch.setattr(attnunits, "chunked", lambda plan: None)
    for name in ("scores", "weighted", "product"):
        original = getattr(lanedots, name)
        monkeypatch.setattr(lanedots, name,
                            lambda *a, _f=original, _n=name: (calls.append(_n), _f(*a))[1])
    original_gemm = blas.gemm
    monkeypatch.setattr(blas, "gemm", lambda *a: (calls.append("gemm"), original_gemm(*a))[1])
    rng = np.random.default_rng(3)
    for rows, want in ((LANE_ROWS, {"scores", "weighted"}), (LANE_ROWS + 1, {"product"})):
        calls.clear()
        q = rng.standard_normal((1, 1, rows, 16)).astype(np.float32)
        k = rng.standard_normal((1, 1, 50, 16)).astype(np.float32)
        v = rng.standard_normal((1, 1, 50, 16)).astype(np.float32)
        spec = S.Attention(program(D.float32), (), 0.25, D.float32, S.Dense())
        run(spec, [q, k, v], D.float32)
        assert set(calls) == want


@pytest.mark.parametrize("permuted", [False, True])
def test_decoding_on_both_paths_gives_the_same_bits(monkeypatch: pytest.MonkeyPatch,
                                                     permuted: bool) -> None:
    """Grouped heads 8/2 of one query row (tiles of 4 rows): the compiled path
    and the per-tile path agree bit for bit, keys and values in place or as
    views without unit stride (which the compiled path hands back)."""
    rng = np.random.default_rng(5)
    q = rng.standard_normal((2, 8, 1, 24)).astype(np.float32)
    k = rng.standard_normal((2, 2, 300, 24)).astype(np.float32)
    v = rng.standard_normal((2, 2, 300, 24)).astype(np.float32)
    spec = S.Attention(program(D.float32), (), 0.2, D.float32, S.Dense())
    operands: list[Any] = [q, k, v]
    if permuted:
        operands = [q, *(Array.from_numpy(np.ascontiguousarray(x.transpose(0, 1, 3, 2)))
                         .view(Permute((0, 1, 3, 2))) for x in (k, v))]
    handed_back: list[int] = []
    run_chunks = attnunits.Chunked.run

    def counted(self: attnunits.Chunked, table: NDArray) -> NDArray:
        redo = run_chunks(self, table)
        handed_back.append(int(redo.sum()))
        assert table.shape[0] == 4 and int(table[0, 2] * table[0, 4]) == 4  # 4 tiles of 4 rows
        return redo

    monkeypatch.setattr(attnunits.Chunked, "run", counted)
    got = run(spec, operands, D.float32)
    assert sum(handed_back) == (4 if permuted else 0)
    monkeypatch.setattr(attnunits, "chunked", lambda plan: None)
    want = run(spec, operands, D.float32)
    assert got[0].tobytes() == want[0].tobytes() and got[1].tobytes() == want[1].tobytes()


def product(a: NDArray, b: NDArray) -> NDArray:
    """``a @ b`` with each element an FMA chain over k in order from −0."""
    dt = a.dtype.type
    out = np.empty((a.shape[0], b.shape[1]), a.dtype)
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            acc = dt(-0.0)
            for t in range(a.shape[1]):
                acc = fma(a[i, t], b[t, j], acc, dt)
            out[i, j] = acc
    return out


def own_product(a: NDArray, b: NDArray, out: NDArray) -> None:
    """``out = a @ b`` by ``product_at`` on views with unit stride within rows."""
    size = a.itemsize
    lanedots.product_at(1, a.shape[0], b.shape[1], a.shape[1], a.ctypes.data, 0,
                        a.strides[0] // size, a.strides[1] // size, b.ctypes.data, 0,
                        b.strides[0] // size,
                        out.ctypes.data, 0, out.strides[0] // size, a.dtype.type(0))


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize(("m", "n", "k"), [(1, 1, 1), (1, 70, 9), (5, 3, 4), (6, 64, 2),
                                           (7, 65, 3), (13, 17, 8), (12, 129, 1), (30, 5, 7),
                                           (25, 20, 3), (13, 40, 2), (7, 19, 270),
                                           (7, 53, 5), (9, 87, 4), (8, 61, 3), (45, 45, 32)])
@pytest.mark.parametrize("transposed", [False, True])
def test_the_product_is_fma_chains_over_k(dt: type[np.floating[Any]], m: int, n: int, k: int,
                                          transposed: bool) -> None:
    """Every register block (on AVX-512 24 × 1, 12 × 2, 6 × 4 and 1 × 4 registers;
    on AVX2 12 × 1, 6 × 2 and 1 × 4), with tails of rows and columns (a wide
    block's last columns in 3, 2 or 1 whole registers, then a masked one), a
    read in rows or through its transpose, k past one chunk (``_K_CHUNK``)."""
    rng = np.random.default_rng(m * 1000 + n * 10 + k)
    # Operands inside wider arrays: row strides past the extents.
    a = rng.standard_normal((m, k + 3)).astype(dt)[:, 1:k + 1]
    if transposed:
        a = np.ascontiguousarray(a.T).T  # a[i, t] at t·m + i
    b = rng.standard_normal((k, n + 5)).astype(dt)[:, 2:n + 2]
    canvas = np.full((m, n + 4), 7.0, dt)
    out = canvas[:, 2:n + 2]
    own_product(a, b, out)
    assert out.tobytes() == product(a, b).tobytes()
    assert (canvas[:, :2] == 7).all() and (canvas[:, n + 2:] == 7).all()  # nothing else written
    exact = np.array([[float(sum((Fraction(float(a[i, t])) * Fraction(float(b[t, j]))
                                  for t in range(k)), Fraction(0))) for j in range(n)]
                      for i in range(m)])
    scale = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    assert (np.abs(out - exact) <= gamma(k, dt) * scale).all()


def test_a_batch_of_products_each_alone() -> None:
    rng = np.random.default_rng(11)
    a = rng.standard_normal((3, 7, 5)).astype(np.float32)
    b = rng.standard_normal((3, 5, 66)).astype(np.float32)
    out = np.empty((3, 7, 66), np.float32)
    lanedots.product_at(3, 7, 66, 5, a.ctypes.data, 35, 5, 1, b.ctypes.data, 330, 66,
                        out.ctypes.data, 462, 66, np.float32(0))
    for e in range(3):
        assert out[e].tobytes() == product(a[e], b[e]).tobytes()


def test_the_tiles_the_own_kernel_takes() -> None:
    """``tiling.by_lanes``: fewer than 2^24 multiply-adds and at least 64
    outputs; and such a contraction has the chains' bits, whatever the
    threads, while a larger one keeps OpenBLAS's."""
    assert tiling.LANE_WORK == 1 << 24 and tiling.LANE_MIN_OUTPUTS == 64
    assert tiling.by_lanes(128, 128, 128) and tiling.by_lanes(8, 8, (1 << 18) - 1)
    assert not tiling.by_lanes(256, 256, 256) and not tiling.by_lanes(7, 9, 100)
    rng = np.random.default_rng(13)
    a = rng.standard_normal((2, 9, 6)).astype(np.float64)
    b = rng.standard_normal((2, 6, 10)).astype(np.float64)
    for count in (1, 2, 3):
        with threads(count):
            out = np.empty((2, 9, 10))
            tiling.products([(a, b, out)])
            assert all(out[e].tobytes() == product(a[e], b[e]).tobytes() for e in range(2))
    big_a = rng.standard_normal((1, 64, 8)).astype(np.float32)
    big_b = rng.standard_normal((1, 8, 8)).astype(np.float32)
    # 64 × 8 outputs, 4096 multiply-adds: lanes; 7 × 8: BLAS, as blas.gemm computes it.
    for rows in (64, 7):
        out32 = np.empty((1, rows, 8), np.float32)
        tiling.products([(big_a[:, :rows].copy(), big_b, out32)])
        want = np.empty((rows, 8), np.float32)
        if tiling.by_lanes(rows, 8, 8):
            want = product(big_a[0, :rows], big_b[0])
        else:
            blas.gemm(big_a[0, :rows], big_b[0], want)
        assert out32[0].tobytes() == want.tobytes()

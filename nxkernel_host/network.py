"""Numba kernels of the odd/even network (contract "The odd/even network"), the
host's float scans.

A scan's states are cut into chunks (real Sum and Prod, Logsumexp: cache-sized,
``chunk_scan``) or blocks (``SCAN_BLOCK``, complex products) whose results
the network fixes. Every kernel computes a function of its input alone,
whatever the split of the work: the pool (``pool``), and for chunks the
threads' timing (``chunk_scan``), only decide which thread computes which
chunk or block, so results are the same bits on any number of threads.

Kernels take C-contiguous arrays; none uses fastmath (it would reassociate)
or calls a recursive helper (``cache=True`` breaks on recursion, numba #6061).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any, Final, cast

import numpy as np
import numpy.typing as npt
from numba import njit, types
from numba.extending import intrinsic

from . import atomics, pool
from .lanes import cmul
from .logaddexp import lse2
from .simdbase import prefer_wide_vectors

__all__ = ["ADD", "CMUL", "LSE", "MUL", "SCAN_BLOCK", "SCAN_CHUNK_BYTES", "SCAN_PARALLEL_BYTES",
           "chunk_scan", "network_scan", "real_scan"]

Arr = npt.NDArray[Any]

#: States per block of a network scan: a power of two, so blocks are subtrees.
SCAN_BLOCK: Final = 4096

#: Bytes of states per chunk of a real Sum or Prod scan: with its results and
#: levels, a chunk stays in a core's L2 (1 MiB) between its two visits.
SCAN_CHUNK_BYTES: Final = 1 << 17

#: Bytes of states from which a real Sum or Prod scan shares its chunks out
#: over threads. Below, one thread scans them: waking a pool thread costs
#: the caller 30 to 50 µs (after 1 to 5 ms idle, on this 2-core guest) and
#: the woken thread starts 0.1 to 0.3 ms later, more than a second thread
#: saves there. Measured, float32 cumsum against np.cumsum, one thread /
#: two, the threads pinned to the two cores (the machine loaded): 1.5e5
#: terms 3.9 / 2.8, 2.5e5 4.4 / 3.6, 4e5 4.0 / 4.3, 6e5 4.1 / 4.7, 1e6
#: 4.2 / 4.7. Logsumexp scans, bound by arithmetic, share from
#: ``pool.MIN_PARALLEL``.
SCAN_PARALLEL_BYTES: Final = 1 << 21

# Result i of the network is the chain, left to right, of the pairwise-tree
# values of the aligned power-of-two blocks that the binary digits of i + 1
# cut [0, i + 1) into, largest first. So a scan cut into blocks of
# SCAN_BLOCK states (a power of two) is: each full block's tree value
# (phase 1); the network over those values, whose result q is the scan's
# result at the end of block q (phase 2); and in each block the network
# chained after the result before the block, every in-block result but a
# full block's last (whose digits reach above the block: phase 2 gave it)
# having a chain that starts with that result's (phase 3). Each phase's
# values are fixed by the states alone, so the split gives the whole
# network's bits.
#
# States have components (axis 0): a kind's combination reads and writes
# all of them. Complex products scan by these phases (``network_scan``);
# one-component states by the chunked kernels below, Moments by ``moments``.

#: The generic phases' combination: Prog's complex Mul on (re, im).
CMUL: Final = 0
#: The chunked kernels' combinations of one component: log-sum-exp of two,
#: a + b, a·b.
LSE: Final = 1
ADD: Final = 3
MUL: Final = 4


@intrinsic(prefer_literal=True)
def _wide_for_intrinsic(typingctx: Any, op: Any) -> Any:
    """Nothing, but where ``op`` is the constant LSE (the Logsumexp kernels
    below pass it so, and Numba compiles them apart), the function it is
    called in prefers 512-bit vectors, as the transcendentals' loops do
    (``simdbase.wide_vectors``): the log-sum-exp combination is
    arithmetic-bound and runs 1.4 to 5 times as
    fast at 8 float64 lanes as at 4 (measured), while the Sum and Prod
    loops, bound by moving states, ran slower at 512 bits (float64 in cache:
    0.77 times), so they keep LLVM's choice."""
    wide = isinstance(op, types.IntegerLiteral) and op.literal_value == LSE

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        if wide:
            prefer_wide_vectors(builder)
        return context.get_dummy_value()

    return types.none(op), codegen


#: ``_wide_for_intrinsic`` as compiled code calls it, typed for the checker.
_wide_for: Final = cast("Callable[[int], None]", _wide_for_intrinsic)


@intrinsic
def _like_intrinsic(typingctx: Any, like: Any, x: Any) -> Any:
    """``x`` converted to the type of ``like``."""

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return context.cast(builder, args[1], signature.args[1], signature.args[0])

    return like(like, x), codegen


#: ``_like_intrinsic`` as compiled code calls it, typed for the checker.
_like: Final = cast("Callable[[float, float], float]", _like_intrinsic)


@njit(inline="always")
def _combine(kind: int, x: Arr, i: int, y: Arr, j: int, z: Arr, k: int) -> None:  # pragma: no cover
    """``z[:, k] = x[:, i] ⊕ y[:, j]``, the earlier state ``x``'s; ``z`` may be
    ``x`` or ``y`` at the same index. The one ``kind`` of two components is
    CMUL, Prog's complex Mul on (re, im)."""
    z[0, k], z[1, k] = cmul(x[0, i], x[1, i], y[0, j], y[1, j])


@njit(inline="always")
def _copy(x: Arr, i: int, z: Arr, k: int) -> None:  # pragma: no cover - compiled
    for c in range(z.shape[0]):
        z[c, k] = x[c, i]


@njit(nogil=True, cache=True)
def _up(kind: int, lev: Arr, m: int, offs: Arr, sizes: Arr) -> int:  # pragma: no cover
    """Pair ``lev[:, 0:m]`` level by level (level k+1's j is level k's 2j ⊕
    2j+1), the levels one after another in ``lev``; returns the top level."""
    top = 0
    off = 0
    size = m
    offs[0] = 0
    sizes[0] = m
    while size > 1:
        half = size // 2
        nxt = off + size
        for j in range(half):
            _combine(kind, lev, off + 2 * j, lev, off + 2 * j + 1, lev, nxt + j)
        top += 1
        offs[top] = nxt
        sizes[top] = half
        off = nxt
        size = half
    return top


@njit(nogil=True, cache=True)
def _down(kind: int, lev: Arr, res: Arr, top: int, offs: Arr, sizes: Arr,
          p: Arr, has_p: bool) -> None:  # pragma: no cover - compiled
    """The network's results of every level, top down, into ``res`` (laid out
    as ``lev``), each chained after ``p[:, 0]`` where ``has_p``."""
    for k in range(top, -1, -1):
        o = offs[k]
        size = sizes[k]
        if has_p:
            _combine(kind, p, 0, lev, o, res, o)
        else:
            _copy(lev, o, res, o)
        if k < top:
            oc = offs[k + 1]
            for j in range(size // 2):
                _copy(res, oc + j, res, o + 2 * j + 1)
            for j in range(1, (size + 1) // 2):
                _combine(kind, res, oc + j - 1, lev, o + 2 * j, res, o + 2 * j)


@njit(nogil=True, cache=True)
def _roots(kind: int, s: Arr, t: Arr, j0: int, j1: int, block: int) -> None:  # pragma: no cover
    """Phase 1: ``t[:, r, q]`` = the tree value of full block ``q`` of row ``r``
    of states ``s``, for flat indices ``r·nq + q`` in [j0, j1)."""
    nc = s.shape[0]
    nq = t.shape[2]
    lev = np.empty((nc, 2 * block), s.dtype)
    offs = np.zeros(64, np.int64)
    sizes = np.zeros(64, np.int64)
    for j in range(j0, j1):
        r = j // nq
        q = j - r * nq
        lev[:, :block] = s[:, r, q * block:(q + 1) * block]
        top = _up(kind, lev, block, offs, sizes)
        for c in range(nc):
            t[c, r, q] = lev[c, offs[top]]


@njit(nogil=True, cache=True)
def _prefixes(kind: int, t: Arr, p: Arr) -> None:  # pragma: no cover - compiled
    """Phase 2: ``p[:, r, q + 1]`` = the network's result q over ``t[:, r, :]``:
    the scan's result at the end of full block q."""
    nc, rows, nq = t.shape
    lev = np.empty((nc, 2 * nq), t.dtype)
    res = np.empty((nc, 2 * nq), t.dtype)
    offs = np.zeros(64, np.int64)
    sizes = np.zeros(64, np.int64)
    none = np.empty((nc, 1), t.dtype)
    for r in range(rows):
        lev[:, :nq] = t[:, r, :]
        top = _up(kind, lev, nq, offs, sizes)
        _down(kind, lev, res, top, offs, sizes, none, False)
        p[:, r, 1:] = res[:, :nq]


@njit(nogil=True, cache=True)
def _blocks(kind: int, s: Arr, p: Arr, out: Arr, j0: int, j1: int,
            block: int) -> None:  # pragma: no cover - compiled
    """Phase 3: the results of block ``q`` of row ``r`` (flat ``r·nb + q`` in
    [j0, j1)), chained after ``p[:, r, q]`` for q > 0, into ``out``; a full
    block's last result is ``p[:, r, q + 1]``."""
    nc, _, m = s.shape
    nb = -(-m // block)
    lev = np.empty((nc, 2 * block), s.dtype)
    res = np.empty((nc, 2 * block), s.dtype)
    offs = np.zeros(64, np.int64)
    sizes = np.zeros(64, np.int64)
    pq = np.empty((nc, 1), s.dtype)
    for j in range(j0, j1):
        r = j // nb
        q = j - r * nb
        lo = q * block
        mm = min(block, m - lo)
        lev[:, :mm] = s[:, r, lo:lo + mm]
        top = _up(kind, lev, mm, offs, sizes)
        pq[:, 0] = p[:, r, q]
        _down(kind, lev, res, top, offs, sizes, pq, q > 0)
        if q > 0 and mm == block:
            res[:, mm - 1] = p[:, r, q + 1]
        out[:, r, lo:lo + mm] = res[:, :mm]


# Real Sum and Prod scans cut a row into chunks of ``chunk`` states (a power
# of two, so chunks are subtrees) small enough to stay in cache with their
# results: each chunk is read from memory once, and its results written once.
# In a chunk, the network's levels are halved one by one (level j + 1's value i
# is level j's 2i ⊕ 2i + 1: the tree values of the chunk's aligned blocks of
# 2^j states), and the results come down the levels as the network defines
# them (result 2i + 1 is the level above's result i; result 2i, the level
# above's result i - 1 ⊕ state 2i), every result chained after the result
# before the chunk, P_c. That is the network's result at the chunk's start
# minus one: the chain of the tree values of the aligned groups of chunks that
# the binary digits of c cut [0, c) into, largest first, kept as a binary
# counter of those groups' values. A full chunk's last result, whose digits
# reach above the chunk, is P_{c+1}. Loops run over contiguous slices, so the
# compiler vectorises them; ``op`` is loop-invariant, so its test is hoisted.
# Logsumexp scans, one float64 component, take the same kernels, through
# ``_lse_chunk_scans``, which compiles them apart with LSE a constant
# (``_wide_for``), the combination ``logaddexp.lse2``.


@njit(inline="always")
def _op(op: int, a: Any, b: Any) -> Any:  # pragma: no cover - compiled
    """``a ⊕ b`` of one-component states: a + b, a·b or log(exp a + exp b)."""
    if op == MUL:
        return a * b
    if op == LSE:
        # Logsumexp states are float64: the cast only keeps every branch
        # of a float32 Sum or Prod in float32 (a float64 branch would widen
        # them all, and change their roundings).
        return _like(a, lse2(a, b))
    return a + b


@njit(nogil=True, error_model="numpy")
def _halve(op: int, src: Arr, dst: Arr) -> None:  # pragma: no cover - compiled
    """``dst[i] = src[2i] ⊕ src[2i + 1]``: the level above ``src``. Each loop
    of the chunks is a function of its own, so the compiler vectorises it."""
    _wide_for(op)
    for i in range(dst.size):
        dst[i] = _op(op, src[2 * i], src[2 * i + 1])


@njit(nogil=True, error_model="numpy")
def _descend(op: int, up: Arr, v: Arr, dst: Arr) -> None:  # pragma: no cover - compiled
    """Level results ``dst`` of level values ``v`` from the level above's
    results ``up``, but for ``dst[0]``: result 2i + 1 is ``up[i]``, result 2i
    (i > 0) is ``up[i - 1] ⊕ v[2i]``."""
    _wide_for(op)
    h = up.size
    for i in range(1, h):
        x = up[i - 1]
        dst[2 * i - 1] = x
        dst[2 * i] = _op(op, x, v[2 * i])
    dst[2 * h - 1] = up[h - 1]
    if dst.size > 2 * h:
        dst[2 * h] = _op(op, up[h - 1], v[2 * h])


@njit(inline="always")
def _canon(v: Any) -> Any:  # pragma: no cover - compiled
    """``v``, but the positive quiet NaN where ``v`` is NaN (a select: it
    vectorises)."""
    return v if v == v else _like(v, np.nan)


@njit(nogil=True, error_model="numpy")
def _quarter(op: int, s: Arr, dst: Arr) -> None:  # pragma: no cover - compiled
    """Level 2 of states ``s``: ``dst[i]`` = (s[4i] ⊕ s[4i+1]) ⊕ (s[4i+2] ⊕ s[4i+3])."""
    _wide_for(op)
    for i in range(dst.size):
        b = 4 * i
        dst[i] = _op(op, _op(op, s[b], s[b + 1]), _op(op, s[b + 2], s[b + 3]))


@njit(nogil=True, error_model="numpy")
def _descend4(op: int, up: Arr, s: Arr, o: Arr, p: Any, has_p: bool) -> None:  # pragma: no cover
    """Results ``o`` of states ``s`` (four or more) from level 2's results
    ``up``, through level 1's without storing them, NaN results the positive
    quiet NaN: with x level 2's result before a block of four and l level 1's
    value s[4i] ⊕ s[4i+1], the block's results are x ⊕ s[4i], x ⊕ l,
    (x ⊕ l) ⊕ s[4i+2] and ``up[i]``; before block 0, x is ``p`` where
    ``has_p`` and nothing otherwise. ``o`` may be ``s``: each block's states
    are read before its results are stored."""
    _wide_for(op)
    h = up.size
    s0, s1, s2 = s[0], s[1], s[2]
    first = _op(op, s0, s1)
    r1 = _op(op, p, first) if has_p else first
    o[0] = _canon(_op(op, p, s0) if has_p else s0)
    o[1] = _canon(r1)
    o[2] = _canon(_op(op, r1, s2))
    o[3] = _canon(up[0])
    for i in range(1, h):
        x = up[i - 1]
        b = 4 * i
        s0, s1, s2 = s[b], s[b + 1], s[b + 2]
        r1 = _op(op, x, _op(op, s0, s1))
        o[b] = _canon(_op(op, x, s0))
        o[b + 1] = _canon(r1)
        o[b + 2] = _canon(_op(op, r1, s2))
        o[b + 3] = _canon(up[i])
    b = 4 * h
    rest = s.size - b
    if rest > 0:
        x = up[h - 1]
        s0 = s[b]
        s1 = s[b + 1] if rest > 1 else s0
        s2 = s[b + 2] if rest > 2 else s0
        o[b] = _canon(_op(op, x, s0))
        if rest > 1:
            r1 = _op(op, x, _op(op, s0, s1))
            o[b + 1] = _canon(r1)
            if rest > 2:
                o[b + 2] = _canon(_op(op, r1, s2))


@njit(inline="always")
def _tree(op: int, s: Arr, lev: Arr) -> int:  # pragma: no cover - compiled
    """The levels of states ``s`` above level 0, one after another in ``lev``
    (sizes len(s) // 2, // 4, ... down to 1); returns the top level's offset
    (-1 where ``s`` holds one state, which is its own top)."""
    n = s.size // 2
    if n == 0:
        return -1
    _halve(op, s, lev[:n])
    off = 0
    while n >= 2:
        h = n // 2
        _halve(op, lev[off:off + n], lev[off + n:off + n + h])
        off += n
        n = h
    return off


@njit(inline="always")
def _push(op: int, vals: Arr, sizes: Arr, depth: int, v: Any) -> int:  # pragma: no cover
    """Push a chunk's tree value ``v`` on the counter ``vals``/``sizes`` (groups
    of chunks, largest first), merging equal neighbours; returns the depth."""
    vals[depth] = v
    sizes[depth] = 1
    depth += 1
    while depth >= 2 and sizes[depth - 1] == sizes[depth - 2]:
        vals[depth - 2] = _op(op, vals[depth - 2], vals[depth - 1])
        sizes[depth - 2] *= 2
        depth -= 1
    return depth


@njit(inline="always")
def _chain(op: int, vals: Arr, depth: int) -> Any:  # pragma: no cover - compiled
    """The counter's groups chained left to right: the result before the next chunk."""
    acc = vals[0]
    for k in range(1, depth):
        acc = _op(op, acc, vals[k])
    return acc


@njit(inline="always")
def _top(op: int, s: Arr, q: Arr, lev: Arr) -> Any:  # pragma: no cover - compiled
    """The tree value of the first 2^k states of ``s`` (2^k ≤ len(s) < 2^(k+1)):
    level 2 into ``q`` from four states on, the levels above it into ``lev``."""
    if s.size < 4:
        top = _tree(op, s, lev)
        return lev[top] if top >= 0 else s[0]
    b = q[:s.size // 4]
    _quarter(op, s, b)
    top = _tree(op, b, lev)
    return lev[top] if top >= 0 else b[0]


@njit(inline="always")
def _results(op: int, s: Arr, o: Arr, lev: Arr, res: Arr, sizes: Arr, offs: Arr, p: Any,
          has_p: bool, above: Any) -> None:  # pragma: no cover - compiled
    """Results ``o`` of states ``s``, whose levels above ``_tree`` left in
    ``lev``, down the levels from the top's result ``above``, each level's
    first chained after ``p`` where ``has_p``: level j's results into ``res``
    at level j's offset in ``lev``, level 0's into ``o``."""
    nl = 0
    size = s.size
    off = 0
    while size >= 2:
        nl += 1
        size //= 2
        sizes[nl] = size
        offs[nl] = off
        off += size
    sizes[0] = s.size
    if nl == 0:
        o[0] = above
        return
    res[offs[nl]] = above
    for lv in range(nl - 1, -1, -1):
        up = res[offs[lv + 1]:offs[lv + 1] + sizes[lv + 1]]
        cnt = sizes[lv]
        v = s if lv == 0 else lev[offs[lv]:offs[lv] + cnt]
        dst = o if lv == 0 else res[offs[lv]:offs[lv] + cnt]
        dst[0] = _op(op, p, v[0]) if has_p else v[0]
        _descend(op, up, v, dst)


#: A thread's claim of chunks in ``slots``: ``limit << 32 | front``. It has
#: claimed the chunks (flat ``r·nc + c``) from its first to ``front`` and may
#: go on to ``limit``; another thread takes the end of a claim by lowering
#: its limit.
_FRONT: Final = (1 << 32) - 1


@njit(inline="always")
def _steal(op: int, a: Arr, m: int, t: Arr, done: Arr, slots: Arr, me: int, chunk: int,
           share: float, q: Arr, lev: Arr, vals: Arr, sizes: Arr) -> int:  # pragma: no cover
    """Take the last part of the claim with the most chunks left (two or
    more) into slot ``me``: its first ``share`` stays with the claim's owner,
    at least one chunk. The counter of the tree values before the first
    chunk taken (``_prefix``) is made before the claim is cut, so a thread
    held up meanwhile holds no chunk up: the cut is made only where the
    claim still reaches past that chunk, which is then the new claim's
    first. Returns the counter's depth, -1 where no claim has two left."""
    while True:
        best = -1
        seen = 0
        most = 1
        for s in range(slots.size):
            w = atomics.load(slots, s)
            left = (w >> 32) - (w & _FRONT)
            if left > most:
                best, seen, most = s, w, left
        if best < 0:
            return -1
        front = seen & _FRONT
        k = min(max(front + math.ceil(most * share), front + 1), (seen >> 32) - 1)
        depth = _prefix(op, a, m, t, done, k, chunk, q, lev, vals, sizes)
        while True:
            w = atomics.load(slots, best)
            if not (w & _FRONT) <= k < (w >> 32):
                break  # its owner has passed k, or a thread took k: choose again
            if atomics.cas(slots, best, w, (k << 32) | (w & _FRONT)):
                atomics.store(slots, me, ((w >> 32) << 32) | k)
                return depth


@njit(inline="always")
def _take(slots: Arr, me: int, seen: int, j: int) -> bool:  # pragma: no cover - compiled
    """Claim chunk ``j``, slot ``me``'s front when it read ``seen``, unless a
    thread took it meanwhile (its limit now at or below ``j``)."""
    while True:
        if atomics.cas(slots, me, seen, ((seen >> 32) << 32) | (j + 1)):
            return True
        seen = atomics.load(slots, me)
        if j >= seen >> 32:
            return False


@njit(inline="always")
def _prefix(op: int, a: Arr, m: int, t: Arr, done: Arr, j: int, chunk: int, q: Arr, lev: Arr,
            vals: Arr, sizes: Arr) -> int:  # pragma: no cover - compiled
    """The counter (``vals``, ``sizes``: ``_push``) of the tree values of the
    chunks before flat chunk ``j`` in its row, read from ``t`` where ``done``
    and computed where not; returns its depth."""
    nc = t.shape[1]
    r = j // nc
    depth = 0
    for c in range(j - r * nc):
        if atomics.load(done, r * nc + c) != 0:
            v = t[r, c]
        else:
            v = _top(op, a[r * m + c * chunk:r * m + (c + 1) * chunk], q, lev)
        depth = _push(op, vals, sizes, depth, v)
    return depth


@njit(nogil=True, cache=True, error_model="numpy")
def _chunk_scans(op: int, a: Arr, out: Arr, m: int, t: Arr, done: Arr, slots: Arr, me: int,
                 chunk: int, share: float) -> None:  # pragma: no cover - compiled
    """One thread's part of the network's results over the chunks of the rows
    of ``m`` states ``a`` into ``out`` (both flat), chunk by chunk as slot
    ``me`` of ``slots`` claims them; where its claim is done (or none), it
    takes the end of the largest claim left (``_steal``), until none has two
    chunks left: a thread that another holds up takes its work. NaN results
    are the positive quiet NaN. Before claiming a chunk, its tree value goes
    into ``t[r, c]`` and ``done[r·nc + c]`` is set: a thread that takes chunks
    from the middle of a row chains the tree values of the row's chunks
    before them (``_prefix``). ``out`` may be narrower than ``a`` (float32 results of float64
    states): each result rounds once as it is stored. ``out`` must not share
    memory with ``a`` where more than one thread runs: a thread may read the
    states of a chunk another is writing."""
    _wide_for(op)
    nc = t.shape[1]
    lev = np.empty(chunk, a.dtype)
    res = np.empty(chunk, a.dtype)
    q = np.empty(chunk // 4 + 1, a.dtype)
    res2 = np.empty(chunk // 4 + 1, a.dtype)
    vals = np.empty(64, a.dtype)
    sizes = np.zeros(64, np.int64)
    sizes_l = np.empty(64, np.int64)
    offs = np.empty(64, np.int64)
    depth = -1
    while True:
        seen = atomics.load(slots, me)
        j = seen & _FRONT
        if j >= seen >> 32:
            # The claim is done (or was taken): take the end of another.
            depth = _steal(op, a, m, t, done, slots, me, chunk, share, q, lev, vals, sizes)
            if depth < 0:
                return
            continue
        if depth < 0:
            # The claim this slot started with: the counter before its front.
            depth = _prefix(op, a, m, t, done, j, chunk, q, lev, vals, sizes)
        r = j // nc
        c = j - r * nc
        if c == 0:
            depth = 0
        lo = r * m + c * chunk
        mm = min(chunk, m - c * chunk)
        s = a[lo:lo + mm]
        o = out[lo:lo + mm]
        # From four states on, level 2 (``b``, in ``q``) is made from the
        # states directly and level 1 never stored: the levels from b up.
        b = q[:mm // 4] if mm >= 4 else s
        tv = _top(op, s, q, lev)
        t[r, c] = tv
        atomics.store(done, j, 1)
        if not _take(slots, me, seen, j):
            continue
        has_p = depth > 0
        p = _chain(op, vals, depth) if has_p else s[0]
        # The top level's one result: P_{c+1} for a full chunk, else the
        # chain of P_c and the top's value (no digit reaches above).
        if mm == chunk:
            depth = _push(op, vals, sizes, depth, tv)
            above = _chain(op, vals, depth)
        else:
            above = _op(op, p, tv) if has_p else tv
        if mm >= 4:
            r2 = res2[:b.size]
            _results(op, b, r2, lev, res, sizes_l, offs, p, has_p, above)
            _descend4(op, r2, s, o, p, has_p)
        else:
            # Into the states' type first: ``o`` may be a float32 destination.
            r3 = res2[:mm]
            _results(op, s, r3, lev, res, sizes_l, offs, p, has_p, above)
            for i in range(mm):
                o[i] = _canon(r3[i])


@njit(nogil=True, cache=True, error_model="numpy")
def _lse_chunk_scans(a: Arr, out: Arr, m: int, t: Arr, done: Arr, slots: Arr, me: int,
                     chunk: int, share: float) -> None:  # pragma: no cover - compiled
    """``_chunk_scans`` of Logsumexp states, LSE a constant: its loops
    compiled apart, at 512 bits (``_wide_for``)."""
    _chunk_scans(LSE, a, out, m, t, done, slots, me, chunk, share)


#: The share of a taken claim's chunks its owner keeps. The taker also
#: computes the tree values of the chunks it leaves, each about a third of a
#: chunk's scan (measured 0.3 to 0.5, the states read from memory), so both
#: finish together at 1 / (2 - 1/3). Only the split of the work depends on it.
_SHARE: Final = 0.6


def real_scan(mul: bool, states: Arr, out: Arr, chunk: int = 0) -> None:
    """The odd/even network's scan by a + b (``mul`` false) or a·b: ``states``
    and ``out`` are ``(rows, m)``, C-contiguous, of one real dtype; NaN results
    are the positive quiet NaN. ``chunk`` (a power of two; 0: the cache's
    choice) only cuts the work."""
    chunk_scan(MUL if mul else ADD, states, out, chunk)


def chunk_scan(op: int, states: Arr, out: Arr, chunk: int = 0) -> None:
    """``out`` = the network's scan of ``(rows, m)`` one-component states by
    ``op`` (ADD, MUL or LSE), in chunks of ``chunk`` states (0: the cache's);
    float32 ``out`` of float64 states holds each result rounded once.

    The calling thread claims every chunk, in order; each pool thread that
    starts while chunks are left takes the end of the largest claim left
    (``_steal``), and every thread whose claim is done takes again; a taker
    chains the tree values before its first chunk before it cuts the claim.
    So a pool thread that wakes late takes less, and none that has not
    woken, or that another process holds off its core, holds up more than
    the chunk it is scanning: the pool's
    wake-up, 0.1 to 0.3 ms on this 2-core machine after a few ms idle, is as
    long as a thread's half of a 10^6-term float32 scan."""
    rows, m = states.shape
    if rows == 0 or m == 0:
        return
    chunk = chunk or SCAN_CHUNK_BYTES // states.itemsize
    nc = -(-m // chunk)
    # Rows in groups of fewer than 2^31 chunks: a claim's limit, shifted
    # 32 bits up, stays below 2^63.
    step = max(1, (_FRONT >> 1) // nc)
    for r0 in range(0, rows, step):
        _scan_group(op, states[r0:r0 + step], out[r0:r0 + step], chunk, nc)


def _scan_group(op: int, states: Arr, out: Arr, chunk: int, nc: int) -> None:
    """``chunk_scan`` of rows whose ``rows·nc`` chunks a claim's 32 bits hold."""
    rows, m = states.shape
    units = rows * nc
    light = op != LSE and states.nbytes < SCAN_PARALLEL_BYTES
    parts = 1 if light or np.may_share_memory(states, out) else pool.parts_for(units, rows * m)
    a, o = states.reshape(-1), out.reshape(-1)
    t = np.empty((rows, nc), states.dtype)
    done = np.zeros(units, np.int64)
    slots = np.zeros(parts, np.int64)
    slots[0] = units << 32
    kernel = _lse_chunk_scans if op == LSE else functools.partial(_chunk_scans, op)
    pool.parallel([functools.partial(kernel, a, o, m, t, done, slots, me, chunk, _SHARE)
                   for me in range(parts)])


def network_scan(kind: int, states: Arr, out: Arr, block: int = SCAN_BLOCK) -> None:
    """``out`` = the odd/even network's inclusive scan of ``states`` along the
    last axis, combined by ``kind``: arrays ``(components, rows, m)``,
    C-contiguous, of one dtype. ``block`` (a power of two) only cuts the work.
    """
    nc, rows, m = states.shape
    if rows == 0 or m == 0:
        return
    nb = -(-m // block)
    full = m // block
    p = np.zeros((nc, rows, full + 1), states.dtype)
    if nb > 1:
        t = np.empty((nc, rows, full), states.dtype)
        _run_flat(functools.partial(_roots_at, kind, states, t, block), rows * full,
                  rows * full * block)
        _prefixes(kind, t, p)
    _run_flat(functools.partial(_blocks_at, kind, states, p, out, block), rows * nb, rows * m)


def _roots_at(kind: int, s: Arr, t: Arr, block: int, j0: int, j1: int) -> None:
    _roots(kind, s, t, j0, j1, block)


def _blocks_at(kind: int, s: Arr, p: Arr, out: Arr, block: int, j0: int, j1: int) -> None:
    _blocks(kind, s, p, out, j0, j1, block)


def _run_flat(body: Callable[[int, int], None], units: int, elements: int) -> None:
    """``body(a, b)`` over ranges covering ``[0, units)``, spread over threads."""
    if pool.parts_for(units, elements) == 1:
        if units > 0:
            body(0, units)  # one range, on this thread: no spans or jobs to make
        return
    pool.parallel([functools.partial(body, a, b)
                   for a, b in pool.spans(units, pool.parts_for(units, elements))])

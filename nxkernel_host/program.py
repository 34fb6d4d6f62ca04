"""Programs on the host: ``compile(prog)`` gives an ``Evaluator``, cached per program.

An evaluator computes every output of a program at every index of a shape,
from operand values of that shape (host elements, sub-byte dtypes unpacked).
Each node's value is its exact result rounded once to the node's dtype, by
the rules of ``nxkernel_core.evaluator``: :mod:`nxkernel_host.kinds` gives each
node kind's implementation and states which are exact and the ulps of the
rest (``ULPS``). A program's constant is no operand: its signalling NaN
reaches a float result quiet, and its exact bits only through a Bitcast.

Speed: an evaluator runs node by node with NumPy ufuncs writing into
preallocated scratch buffers (``Scratch``), one per live node, reused once a
node's last reader has run. ``map_into`` cuts a loop into boxes of about
``CHUNK_BYTES`` per temporary, so the temporaries stay in the core's L2 cache, and
spreads the boxes over the library's threads (``pool``; NumPy releases the
GIL in its loops);
every result depends only on its own index, so the bits do not depend on the
boxes or the number of threads.
"""

from __future__ import annotations

import contextlib
import functools
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, final

import numpy as np
import numpy.typing as npt

from nxkernel_core import dtype as D
from nxkernel_core.prog import (
    Const,
    Convert,
    Coord,
    In,
    Op1,
    Op2,
    Prog,
    Ternary,
)

from . import fused as F
from . import kinds as K
from . import pool
from .kinds import ULPS, Impl

__all__ = [
    "CHUNK_BYTES",
    "ERRSTATE",
    "FUSE_MIN",
    "FUSE_WORK",
    "PARALLEL_MIN",
    "ULPS",
    "Evaluator",
    "Scratch",
    "box_into",
    "boxes",
    "compile",
    "fused_box",
    "map_into",
    "quiet",
]

Arr = npt.NDArray[Any]

#: Bytes of one scratch buffer of a box: a box has ``CHUNK_BYTES`` divided by
#: its program's widest element, so a few live temporaries stay in a 1 MiB L2
#: cache while each box is large enough that Python's work per box is small
#: beside NumPy's.
CHUNK_BYTES: Final = 1 << 18

#: The fewest elements a loop spreads over threads, node by node or
#: compiled: below it, handing work to a pool thread costs more than it
#: saves. Measured on the 2-core guest the benchmarks run on, where a
#: hand-over costs 30 to 70 µs (two 49 µs jobs took 116 µs on two threads):
#: at 2^17 to 2^19 float32 elements two threads took 1.4 to 3 times one
#: thread's time for an Add and up to 1.6 times for Tanh and x·sigmoid(x);
#: from 2^20 the compiled Tanh and x·sigmoid(x) gain 1.1 to 1.3 times, the Add
#: breaks even by 2^21.
PARALLEL_MIN: Final = 1 << 20

#: The fewest elements a loop runs as its program's one compiled loop
#: (``fused``), once the program has run ``FUSE_WORK`` elements in such
#: loops: compiling one takes most of a second, once per program and process,
#: so a program is compiled only where it is worked hard (a program run once
#: over a few million elements is not). From a box's size up the loop beats
#: the node-by-node passes (a layer norm of 16 × 19 × 384 float32 with
#: broadcast statistics: 0.26 ms against 0.59).
FUSE_MIN: Final = 1 << 16
FUSE_WORK: Final = 1 << 24

#: The most operand spreads (``fused.PER_ROW`` …) a program's compiled loops
#: are made for; a call with another runs node by node.
_SPREADS_MAX: Final = 8

#: Elements per box of a compiled loop, at least and at most (``fused_box``).
_FUSED_BOX: Final = 1 << 16
_FUSED_BOX_MAX: Final = 1 << 20

#: ``Evaluator.fused`` not computed yet.
_UNKNOWN: Final = object()


try:
    from numpy._core._multiarray_umath import _make_extobj  # type: ignore[import-not-found]
    from numpy._core._ufunc_config import _extobj_contextvar  # type: ignore[attr-defined]
except ImportError:  # another NumPy: np.errstate, the public way
    _IGNORE: object = None
else:
    _IGNORE = _make_extobj(all="ignore")

#: NumPy's error-state variable and the state ignoring every error, for a
#: prepared kernel that sets it around one ufunc (``quiet`` without its
#: context object); None on another NumPy (then use ``quiet``).
ERRSTATE: Final[tuple[Any, object] | None] = (
    None if _IGNORE is None else (_extobj_contextvar, _IGNORE))


@final
class _Quiet:
    """NumPy's floating-point errors ignored for the body of a ``with``, as
    ``np.errstate(all="ignore")``: NumPy's own error-state variable set to a
    state made once. ``np.errstate`` makes its state anew on each entry, several
    microseconds, more than a small box computes."""

    __slots__ = ("_token",)

    def __enter__(self) -> None:
        self._token = _extobj_contextvar.set(_IGNORE)

    def __exit__(self, *exc: object) -> None:
        _extobj_contextvar.reset(self._token)


def quiet() -> contextlib.AbstractContextManager[None]:
    """A context ignoring NumPy's floating-point errors (see ``_Quiet``)."""
    if _IGNORE is None:
        return np.errstate(all="ignore")
    return _Quiet()



# --------------------------------------------------------------------------
# Compiling a program
# --------------------------------------------------------------------------


@final
@dataclass(frozen=True, slots=True)
class _Step:
    """One node to compute per box.

    ``impl(out, *args)`` computes it from the values of nodes ``args``;
    ``truth`` lists the positions of arguments read as ``byte != 0``. A
    node that depends on an operand has the box's shape; others (of Coord
    nodes alone) broadcast. A view node's value shares its argument's memory
    (Copy, Bitcast, the identity kinds), so it takes no buffer.
    ``pooled`` says it is a full node with a buffer of its own. ``frees`` are
    the buffer-owning nodes whose last reader this step is.
    """

    node: int
    impl: Impl
    args: tuple[int, ...]
    truth: tuple[int, ...]
    pooled: bool
    dtype: np.dtype[Any]
    frees: tuple[int, ...]


@final
class Evaluator:
    """A compiled program (see the module's doc); ``compile`` makes them.

    Call it as ``ev(inputs, shape, coord_offset)`` for fresh outputs, or
    ``ev.run(...)`` to evaluate into scratch buffers and destinations.
    """

    __slots__ = ("_consts", "_coords", "_fused", "_in_rooted", "_ins", "_reads", "_spread", "_steps",
                 "box", "first", "prog", "single", "work")

    def __init__(self, prog: Prog) -> None:
        self.prog: Final = prog
        n = len(prog.nodes)
        deps_in = [False] * n   # depends on an operand
        deps_any = [False] * n  # depends on an operand or a Coord
        canon = [True] * n      # a bool value whose bytes are 0 or 1
        root = list(range(n))   # the node whose memory a view node shares
        # The values of nodes of constants alone: ``exact`` with their bits,
        # ``consts`` with signalling NaNs quieted (a constant is no operand,
        # and the NaN rule lets a result be signalling only from an operand).
        exact: list[Arr | None] = [None] * n
        consts: list[Arr | None] = [None] * n
        specs: list[tuple[int, Impl, tuple[int, ...], tuple[int, ...], bool]] = []
        # Nodes no output reads are never computed.
        live = F.live_nodes(prog)
        with np.errstate(all="ignore"):
            for i, node in enumerate(prog.nodes):
                if not live[i]:
                    continue
                dt = prog.dtype(i)
                if isinstance(node, In):
                    deps_in[i] = deps_any[i] = True
                    canon[i] = dt is not D.bool_
                    continue
                if isinstance(node, Coord):
                    deps_any[i] = True
                    continue
                if isinstance(node, Const):
                    value = K.const_value(dt, node.bits)
                    exact[i], consts[i] = value, K.quiet(dt, value)
                    canon[i] = not dt.is_bool or node.bits[0] in (0, 1)
                    continue
                impl, args, truth, view = self._node(prog, i, node, canon)
                deps_in[i] = any(deps_in[a] for a in args)
                deps_any[i] = any(deps_any[a] for a in args)
                if view:
                    root[i] = root[args[0]]
                if not deps_any[i]:
                    # A node of constants alone is computed once, here. A
                    # Bitcast reads its constant's exact bits; every other
                    # node a quieted signalling NaN, which it may.
                    bitcast = isinstance(node, Op1) and node.kind is Convert.BITCAST
                    vals: list[Any] = [(exact if bitcast else consts)[a] for a in args]
                    value = np.asarray(impl(None, *[
                        K.truth(v) if k in truth else v for k, v in enumerate(vals)]))
                    exact[i], consts[i] = value, K.quiet(dt, value)
                    continue
                specs.append((i, impl, args, truth, view))
        last: dict[int, int] = {}
        for k, (_, _, args, _, _) in enumerate(specs):
            for a in args:
                last[root[a]] = k
        for o in prog.outs:
            last[root[o]] = len(specs)
        frees: dict[int, list[int]] = {}
        for r, k in last.items():
            frees.setdefault(k, []).append(r)
        self._steps: Final = tuple(
            _Step(i, impl, args, truth, deps_in[i] and not view, prog.dtype(i).numpy_dtype,
                  tuple(frees.get(k, ())))
            for k, (i, impl, args, truth, view) in enumerate(specs))
        self._consts: Final = tuple(consts)
        self._ins: Final = tuple((i, n.index) for i, n in enumerate(prog.nodes)
                                 if isinstance(n, In))
        self._coords: Final = tuple((i, n.axis) for i, n in enumerate(prog.nodes)
                                    if isinstance(n, Coord))
        widest = max(prog.dtype(i).numpy_dtype.itemsize for i in range(n))
        #: The elements of one box: ``CHUNK_BYTES`` of the widest value.
        self.box: Final = max(1, CHUNK_BYTES // widest)
        self._in_rooted: Final = tuple(isinstance(prog.nodes[root[i]], In) for i in range(n))
        #: Each output node's first output position: where its value is computed.
        self.first: Final = tuple((o, k) for k, o in reversed(list(enumerate(prog.outs))))
        #: A program of one output computed by one step from operands alone
        #: (``a + b``, ``exp(x)``, a cast): that step's implementation and the
        #: operands it reads, else None. ``box_into`` then calls it straight.
        self.single: Final = self._single(prog)
        self._fused: F.Fused | object | None = _UNKNOWN
        #: The compiled loops over rows, by their reads' spreads (at most
        #: ``_SPREADS_MAX``).
        self._spread: dict[tuple[int, ...], F.Fused | None] = {}
        self._reads: tuple[np.dtype[Any] | None, ...] | object | None = _UNKNOWN
        #: Elements run in loops of ``FUSE_MIN`` or more (counted without a
        #: lock: a lost count only delays the compiled loop).
        self.work = 0

    def fused(self) -> F.Fused | None:
        """The program as one compiled loop (``fused``), made on first use, or
        None where a node has no compiled twin."""
        if self._fused is _UNKNOWN:
            self._fused = F.plan(self.prog, self._consts)
        return self._fused  # type: ignore[return-value]

    def reads(self) -> tuple[np.dtype[Any] | None, ...] | None:
        """Each operand's host type where an output reads it, else None (a
        compiled loop's ``in_dtypes``); None where the program has no
        compiled loop (``fused.loop_reads``). Found once, without compiling."""
        if self._reads is _UNKNOWN:
            read = F.loop_reads(self.prog, self._consts)
            self._reads = None if read is None else tuple(
                self.prog.ins[k].numpy_dtype if k in read else None
                for k in range(self.prog.n_ins))
        return self._reads  # type: ignore[return-value]

    def fused_rows(self, spreads: tuple[int, ...]) -> F.Fused | None:
        """The program as one compiled loop over rows whose reads have
        ``spreads`` (``fused``), made on first use, or None where a node has
        no compiled twin or ``_SPREADS_MAX`` other spreads have loops."""
        if spreads not in self._spread:
            if len(self._spread) >= _SPREADS_MAX:
                return None
            self._spread[spreads] = F.plan(self.prog, self._consts, spreads)
        return self._spread[spreads]

    def _single(self, prog: Prog) -> tuple[Impl, tuple[int, ...]] | None:
        steps = self._steps
        if len(steps) != 1 or len(prog.outs) != 1 or self._coords:
            return None
        st = steps[0]
        ins = dict(self._ins)
        if (st.node != prog.outs[0] or not st.pooled or st.truth
                or any(a not in ins for a in st.args)):
            return None
        return st.impl, tuple(ins[a] for a in st.args)

    @staticmethod
    def _node(prog: Prog, i: int, node: Op1 | Op2 | Any, canon: list[bool]
              ) -> tuple[Impl, tuple[int, ...], tuple[int, ...], bool]:
        """Node ``i``'s implementation, arguments, truth positions and view flag;
        sets ``canon[i]`` for a bool result."""
        if isinstance(node, Op1):
            src, dst = prog.dtype(node.x), prog.dtype(i)
            impl, view = K.op1(node, src)
            if dst.is_bool:
                # A moved bool keeps its bytes; a bitcast one may have any.
                canon[i] = canon[node.x] if src is dst else node.kind is not Convert.BITCAST
            return impl, (node.x,), (), view
        if isinstance(node, Op2):
            src = prog.dtype(node.x)
            impl, reads_truth = K.op2(node, src)
            truth = tuple(k for k, a in enumerate((node.x, node.y))
                          if reads_truth and not canon[a])
            return impl, (node.x, node.y), truth, False
        dt = prog.dtype(node.x)
        if node.kind is Ternary.WHERE:
            canon[i] = canon[node.x] and canon[node.y]
            return K.where, (node.c, node.x, node.y), (() if canon[node.c] else (0,)), False
        if dt.is_float:
            return K.fma_float(dt), (node.c, node.x, node.y), (), False
        return K.fma_int(dt), (node.c, node.x, node.y), (), False

    # -- evaluating --------------------------------------------------------

    def __call__(self, inputs: Sequence[Arr], shape: Sequence[int],
                 coord_offset: Sequence[int] | None = None) -> list[Arr]:
        """Every output at every index of ``shape``: fresh C-contiguous arrays of
        the outputs' host types. ``inputs[i]`` has ``shape`` (a view of any
        strides) and operand ``i``'s host type; ``Coord(a)`` reads the index
        along array axis ``rank - 1 - a`` plus ``coord_offset`` there (zeros by
        default), so boxes of a loop evaluated apart give the whole's values."""
        shp = tuple(int(d) for d in shape)
        self.check_inputs(inputs)
        with np.errstate(all="ignore"):
            vals = self.run(inputs, shp, coord_offset, Scratch(math.prod(shp)))
        out = []
        for o in self.prog.outs:
            res = np.empty(shp, dtype=self.prog.dtype(o).numpy_dtype)
            np.copyto(res, vals[o])
            out.append(res)
        return out

    def run(self, inputs: Sequence[Arr], shape: tuple[int, ...],
            coord_offset: Sequence[int] | None, scratch: Scratch,
            direct: Mapping[int, Arr] | None = None) -> list[Arr]:
        """Every node's value over ``shape`` (see ``__call__``), temporaries in
        ``scratch``; node ``i`` in ``direct`` is written into ``direct[i]`` (an
        array of ``shape`` that no input shares memory with) where its
        implementation takes an output. Values of nodes of constants or
        Coords alone broadcast to ``shape`` instead of having it. The caller
        sets NumPy's error state and passes one input per operand."""
        vals: list[Any] = list(self._consts)
        for i, k in self._ins:
            vals[i] = inputs[k]
        for i, axis in self._coords:
            vals[i] = _coord(shape, axis, coord_offset)
        scratch.reset()
        size = math.prod(shape)
        for st in self._steps:
            args = [vals[a] for a in st.args]
            for k in st.truth:
                args[k] = K.truth(args[k])
            out = None
            if st.pooled:
                out = direct.get(st.node) if direct else None
                if out is None:
                    out = scratch.take(st.node, st.dtype, shape, size)
            vals[st.node] = st.impl(out, *args)
            for r in st.frees:
                scratch.give(r)
        return vals

    def check_inputs(self, inputs: Sequence[Arr]) -> None:
        """Raise ``ValueError`` unless there is one input per operand."""
        if len(inputs) != self.prog.n_ins:
            raise ValueError(f"Evaluator: the program takes {self.prog.n_ins} operands, "
                             f"got {len(inputs)}")

    def aliases_input(self, output: int) -> bool:
        """Whether output ``output``'s value is (a view of) an operand."""
        return self._in_rooted[self.prog.outs[output]]


def _coord(shape: tuple[int, ...], axis: int, offset: Sequence[int] | None) -> Arr:
    """The index along axis ``axis`` counted from the last, plus the offset
    there, as int64, shaped to broadcast to ``shape``."""
    rank = len(shape)
    if axis >= rank:
        raise ValueError(f"Evaluator: Coord axis {axis} is outside a loop of rank {rank}")
    along = rank - 1 - axis
    start = int(offset[along]) if offset is not None else 0
    idx = np.arange(start, start + shape[along], dtype=np.int64)
    return idx.reshape(tuple(-1 if i == along else 1 for i in range(rank)))


@functools.lru_cache(maxsize=512)
def compile(prog: Prog) -> Evaluator:  # the contract's verb, shadowing the builtin
    """The evaluator of ``prog``, made once per program (programs are equal
    and hash alike iff their bytes are)."""
    return Evaluator(prog)


# --------------------------------------------------------------------------
# Scratch buffers
# --------------------------------------------------------------------------


@final
class Scratch:
    """Flat buffers of ``capacity`` elements per host type, lent to the nodes of
    one box and given back after their last reader; ``reset`` gives all back."""

    __slots__ = ("_free", "_held", "capacity")

    def __init__(self, capacity: int) -> None:
        self.capacity: Final = max(1, capacity)
        self._free: dict[np.dtype[Any], list[Arr]] = {}
        self._held: dict[int, tuple[np.dtype[Any], Arr]] = {}

    def reset(self) -> None:
        for dt, flat in self._held.values():
            self._free[dt].append(flat)
        self._held.clear()

    def take(self, node: int, dtype: np.dtype[Any], shape: tuple[int, ...], size: int) -> Arr:
        """A buffer of ``shape`` (``size`` elements, at most ``capacity``) lent to
        ``node``."""
        free = self._free.get(dtype)
        if free:
            flat = free.pop()
        else:
            self._free.setdefault(dtype, [])
            flat = np.empty(self.capacity, dtype=dtype)
        self._held[node] = (dtype, flat)
        # A box of one axis needs no reshape (a view creation saved per node).
        return flat[:size] if len(shape) == 1 else flat[:size].reshape(shape)

    def give(self, node: int) -> None:
        """Give back ``node``'s buffer, if it holds one."""
        held = self._held.pop(node, None)
        if held is not None:
            self._free[held[0]].append(held[1])


# --------------------------------------------------------------------------
# Chunked, threaded loops
# --------------------------------------------------------------------------

_LOCAL: Final = threading.local()


def _scratch(capacity: int) -> Scratch:
    """This thread's scratch buffers for boxes of ``capacity`` elements."""
    pools: dict[int, Scratch] | None = getattr(_LOCAL, "scratch", None)
    if pools is None:
        pools = _LOCAL.scratch = {}
    s = pools.get(capacity)
    if s is None:
        s = pools[capacity] = Scratch(capacity)
    return s


def boxes(shape: Sequence[int], size: int) -> list[tuple[slice, ...]]:
    """Boxes of at most ``size`` elements that tile ``shape`` in C order, each a
    slice per axis: whole trailing axes, a range along the axis before them,
    one index along the axes before that (the last axis in ranges where it
    alone exceeds ``size``). None for an empty shape; one, ``(...)``-like
    empty tuple of slices, for rank 0."""
    shp = tuple(int(d) for d in shape)
    if math.prod(shp) == 0:
        return []
    rank = len(shp)
    k = rank
    inner = 1
    while k > 0 and inner * shp[k - 1] <= size:
        inner *= shp[k - 1]
        k -= 1
    if k == 0:
        return [tuple(slice(0, d) for d in shp)]
    ax = k - 1
    rows = max(1, size // inner)
    out = []
    for lead in np.ndindex(*shp[:ax]):
        for a in range(0, shp[ax], rows):
            out.append((*(slice(i, i + 1) for i in lead), slice(a, min(a + rows, shp[ax])),
                        *(slice(0, d) for d in shp[ax + 1:])))
    return out


@final
class _Boxes:
    """The boxes of one loop, handed out one at a time to whichever thread asks
    first. The caller waits for the boxes to be done, not for the helper
    threads to finish: a helper that starts late finds none left and leaves,
    so a busy machine never makes the caller wait on a thread that has not run."""

    __slots__ = ("_done", "_error", "_lock", "_next", "boxes")

    def __init__(self, bs: Sequence[tuple[slice, ...]]) -> None:
        self.boxes: Final = bs
        self._lock = threading.Condition()
        self._next = 0
        self._done = 0
        self._error: BaseException | None = None

    def take(self) -> int | None:
        """The next box's index, or None when every box is taken."""
        with self._lock:
            if self._next >= len(self.boxes) or self._error is not None:
                return None
            self._next += 1
            return self._next - 1

    def drain(self, run: Callable[[tuple[slice, ...]], None]) -> None:
        """``run`` each box this thread takes, until none is left; a box's
        error ends the loop for every thread and is raised here and by
        ``wait``."""
        while (i := self.take()) is not None:
            try:
                run(self.boxes[i])
            except BaseException as e:
                self.finish(e)
                raise
            self.finish()

    def finish(self, error: BaseException | None = None) -> None:
        """Count one taken box as done (or failed with ``error``)."""
        with self._lock:
            self._done += 1
            if error is not None and self._error is None:
                self._error = error
            if self._done >= self._next and (self._next >= len(self.boxes) or self._error):
                self._lock.notify_all()

    def wait(self) -> None:
        """Wait until every taken box is done; raise a box's error."""
        with self._lock:
            self._lock.wait_for(lambda: self._done >= self._next and (
                self._next >= len(self.boxes) or self._error is not None))
            if self._error is not None:
                raise self._error


def _box(ev: Evaluator, ins: Sequence[Arr], tv: Sequence[Arr], shape: tuple[int, ...],
         offset: tuple[int, ...] | None, scratch: Scratch, alias: bool) -> None:
    """Evaluate one box: operand values ``ins`` and destinations ``tv`` of
    ``shape``, its first index ``offset`` (None: the origin). The caller sets
    NumPy's error state."""
    # Outputs computed straight into their destination save a copy; not where
    # a destination is an operand, which must be read first.
    direct = None if alias else {o: tv[k] for o, k in ev.first}
    vals = ev.run(ins, shape, offset, scratch, direct)
    res = [vals[o] for o in ev.prog.outs]
    if alias:
        res = [np.copy(v) if ev.aliases_input(k) else v for k, v in enumerate(res)]
    for t, v in zip(tv, res, strict=True):
        if v is not t:
            np.copyto(t, v)


def _run_boxes(ev: Evaluator, inputs: Sequence[Arr], targets: Sequence[Arr], work: _Boxes,
               alias: bool) -> None:
    """Evaluate the boxes ``work`` hands out into ``targets``, box by box."""
    scratch = _scratch(ev.box)

    def run(box: tuple[slice, ...]) -> None:
        key = box if box else (Ellipsis,)
        _box(ev, [a[key] for a in inputs], [t[key] for t in targets],
             tuple(s.stop - s.start for s in box), tuple(s.start for s in box), scratch, alias)

    with quiet():
        work.drain(run)


def _share(work: _Boxes, run: Callable[[_Boxes], None], threads: bool) -> None:
    """``run(work)`` on the calling thread and, where ``threads``, on up to
    ``pool.count() − 1`` pool threads beside it; returns once every box is
    done (``_Boxes.wait``)."""
    n = min(pool.count(), len(work.boxes))
    if not threads or n <= 1:
        run(work)
        work.wait()
        return
    with pool.lend(n) as executor:
        for _ in range(n - 1):
            executor.submit(run, work)
        run(work)
        work.wait()


def box_into(ev: Evaluator, inputs: Sequence[Arr], shape: tuple[int, ...],
             targets: Sequence[Arr]) -> None:
    """``map_into`` of a loop of one box (``0 < prod(shape) <= ev.box``) whose
    targets share no memory with an input: on the calling thread, without
    ``map_into``'s checks, which the caller's plan made once."""
    single = ev.single
    with quiet():
        if single is not None:
            # One step writing into the destination: what ``run`` would do,
            # without its value list, scratch and direct-output bookkeeping.
            impl, args = single
            t = targets[0]
            v = impl(t, *[inputs[k] for k in args])
            if v is not t:
                np.copyto(t, v)
            return
        _box(ev, inputs, targets, shape, None, _scratch(ev.box), False)


def map_into(ev: Evaluator, inputs: Sequence[Arr], shape: Sequence[int],
             targets: Sequence[Arr], alias: bool) -> None:
    """Write every output of ``ev`` over ``shape`` into ``targets`` (writable
    arrays of ``shape``, one per output), box by box over the threads.

    ``alias`` says a target may be an input: each box then reads every input
    before writing there. Otherwise no target shares memory with an input.
    Every box's values depend on its own indices alone, so which thread
    computes a box changes no bit.
    """
    ev.check_inputs(inputs)
    shp = tuple(map(int, shape))
    size = math.prod(shp)
    if size == 0:
        return
    if size >= FUSE_MIN:
        ev.work += size
        if ev.work >= FUSE_WORK and _fused_into(ev, inputs, shp, targets, alias):
            return
    if size <= ev.box:
        # One box, the whole loop, on the calling thread: no boxes to hand out.
        with quiet():
            _box(ev, inputs, targets, shp, None, _scratch(ev.box), alias)
        return
    # Below PARALLEL_MIN the calling thread alone takes every box: handing
    # work to another thread would cost more than it saves.
    _share(_Boxes(boxes(shp, ev.box)),
           functools.partial(_run_boxes, ev, inputs, targets, alias=alias), size >= PARALLEL_MIN)


# --------------------------------------------------------------------------
# Compiled loops
# --------------------------------------------------------------------------


def _fused_into(ev: Evaluator, inputs: Sequence[Arr], shape: tuple[int, ...],
                targets: Sequence[Arr], alias: bool) -> bool:
    """``map_into`` by the program's compiled loop, where it has one, every
    target is C-contiguous of ``shape`` and of its host type, every input it
    reads is of its host type and C-contiguous of ``shape`` or spread over
    rows (``fused.rows``), and a target that shares memory with an input it reads
    is that input (each element is read before it is written); False, having
    written nothing, otherwise. Only the loop a call runs is compiled."""
    dts = ev.reads()
    if dts is None:
        return False
    reads = [a for a, dt in zip(inputs, dts, strict=True) if dt is not None]
    if any(a.dtype != dt for a, dt in zip(inputs, dts, strict=True) if dt is not None):
        return False
    for t, o in zip(targets, ev.prog.outs, strict=True):
        if (t.shape != shape or not t.flags.c_contiguous
                or t.dtype != ev.prog.dtype(o).numpy_dtype):
            return False
        if alias and any(np.may_share_memory(t, a) and not _same(t, a) for a in reads):
            return False
    outs = [t.reshape(-1) for t in targets]
    size = outs[0].size
    # Boxes for the threads that will run them: one below PARALLEL_MIN.
    threads = pool.count() if size >= PARALLEL_MIN else 1
    if all(a.shape == shape and a.flags.c_contiguous for a in reads):
        fz = ev.fused()
        if fz is None:
            return False
        ins = [a.reshape(-1) for a in reads]
        box = fused_box(size, threads)
        work = _Boxes([(slice(a, min(a + box, size)),) for a in range(0, size, box)])
        _share(work, functools.partial(_run_fused, fz, ins, outs), threads > 1)
        return True
    grid = F.rows(reads, shape)
    if grid is None:
        return False
    cols, spreads, ins = grid
    fr = ev.fused_rows(spreads)
    if fr is None:
        return False
    rows = size // cols
    step = max(1, fused_box(size, threads) // cols)
    work = _Boxes([(slice(r, min(r + step, rows)),) for r in range(0, rows, step)])
    _share(work, functools.partial(_run_rows, fr, ins, outs, cols), threads > 1)
    return True


def fused_box(size: int, threads: int) -> int:
    """Elements per box of a compiled loop of ``size`` elements on ``threads``
    threads: about four boxes per thread, a multiple of 4096 from
    ``_FUSED_BOX`` to ``_FUSED_BOX_MAX``. A compiled loop needs no
    temporaries, so a box need not fit a cache; each box costs a few
    microseconds of Python holding the GIL (hand-out, views, the call), which
    the other thread then waits on (measured at 10^7 float32 Tanh, two
    threads: 7.1 ms in boxes of 2^16, 5.4 ms in boxes of 2^20, against 5.7 ms
    for two threads each running one half). Four boxes per thread still let
    one thread take over another's where the machine is busy. Which thread
    computes which box changes no bit."""
    return max(_FUSED_BOX, min(_FUSED_BOX_MAX, size // (4 * max(1, threads))) & -4096)


def _same(a: Arr, b: Arr) -> bool:
    """Whether two arrays are the same elements of the same memory."""
    return (a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
            and a.strides == b.strides and a.itemsize == b.itemsize)


def _run_fused(fz: F.Fused, ins: Sequence[Arr], outs: Sequence[Arr], work: _Boxes) -> None:
    """Run the compiled loop over the ranges ``work`` hands out."""
    work.drain(lambda box: fz.run([a[box] for a in ins], [t[box] for t in outs]))


def _run_rows(fz: F.Fused, ins: Sequence[Arr], outs: Sequence[Arr], cols: int,
              work: _Boxes) -> None:
    """Run the compiled loop over rows of ``cols`` elements, the ranges of
    rows ``work`` hands out; a per-column read is read whole."""
    spreads = fz.spreads or ()

    def run(box: tuple[slice, ...]) -> None:
        (rows,) = box
        cells = slice(rows.start * cols, rows.stop * cols)
        fz.run([a if s == F.PER_COLUMN else a[rows if s == F.PER_ROW else cells]
                for a, s in zip(ins, spreads, strict=True)],
               [t[cells] for t in outs], rows.stop - rows.start)

    work.drain(run)

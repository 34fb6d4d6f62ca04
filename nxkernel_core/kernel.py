"""The library protocol ``S`` and a library's statement.

A kernel library is an object with a ``name``, a ``statement`` (what it
computes, declines, and the orders, error factor and algorithms the contract
leaves to it), ``computes_on(device)`` and one method per kernel. Every method
takes its attributes (the kernel's spec), then its destinations, then its
operands, and returns an :class:`~nxkernel_core.answer.Answer`. The caller
(``nx``) has checked that the call fits before it calls a kernel; the kernel
claims its arrays through the door and answers ``DONE``, ``DECLINED`` or a
refusal, a decline or a refusal coming before any write.

``declining_library()`` is the smallest complete library: it declines every
case and says so. Read it next to :class:`Library` to learn the protocol.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import math
import textwrap
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol, cast, final, runtime_checkable

from . import dtype as _dtype
from .answer import Answer
from .kernels.registry import KERNEL_NAMES

if TYPE_CHECKING:
    from .array import Array
    from .dtype import Dtype
    from .rig import Rig
    from .spec import (
        Assemble,
        Attention,
        Cholesky,
        Contract,
        Eig,
        Eigh,
        Fft,
        Fold,
        Gather,
        Lu,
        Map,
        Numbering,
        Qr,
        RangeGather,
        Reduce,
        Scan,
        Scatter,
        SolveTriangular,
        Sort,
        Svd,
    )

__all__ = [
    "KERNEL_NAMES",
    "KIND_ULPS",
    "Call",
    "KernelError",
    "KernelStatement",
    "Library",
    "Statement",
    "check_error_factor",
    "check_library",
    "close_match",
    "declining_library",
    "gamma",
    "unit_roundoff",
]



class KernelError(RuntimeError):
    """A library's kernel broke the protocol: it raised (other than the
    contract's ``Lost`` and ``OutOfMemory``), or answered something other
    than an :class:`~nxkernel_core.answer.Answer`. The message names the nx
    function, the library and the kernel; a raised error is the ``__cause__``."""

    def __init__(self, fn: str, library: str, kernel: str, what: str) -> None:
        super().__init__(f"{fn}: kernel {kernel!r} of library {library!r} {what}")
        self.fn: Final = fn
        self.library: Final = library
        self.kernel: Final = kernel


def close_match(name: str, choices: Iterable[str]) -> str:
    """A hint naming the choice closest to ``name``: ``" (did you mean 'x'?)"``,
    or ``""`` where none is close."""
    match = difflib.get_close_matches(name, list(choices), n=1)
    return f" (did you mean {match[0]!r}?)" if match else ""


# --------------------------------------------------------------------------
# A call, as a statement's predicate reads it
# --------------------------------------------------------------------------


@final
@dataclass(frozen=True, slots=True)
class Call:
    """One call of a kernel: its name, its spec (the attributes), its
    destinations and its operands, in the order the kernel takes them.

    ``spec`` is an instance of the spec class whose ``kernel`` is ``kernel``
    (``spec.KERNELS[kernel]``); a spec whose class names another kernel is a
    ``ValueError``.
    """

    kernel: str
    spec: object
    dsts: tuple[Array, ...]
    operands: tuple[Array, ...]

    def __post_init__(self) -> None:
        if self.kernel not in KERNEL_NAMES:
            raise ValueError(
                f"Call: unknown kernel {self.kernel!r}{close_match(self.kernel, KERNEL_NAMES)};"
                f" the kernels are {', '.join(KERNEL_NAMES)}"
            )
        named = getattr(self.spec, "kernel", self.kernel)
        if named != self.kernel:
            raise ValueError(f"Call: a {self.kernel} call got a spec of kernel {named!r}")


# --------------------------------------------------------------------------
# The protocol S
# --------------------------------------------------------------------------


@runtime_checkable
class Library(Protocol):
    """A kernel library: the contract's ``S``.

    Each kernel method takes the spec (the attributes), then the destinations,
    then the operands, and answers ``DONE`` (done, or queued in order on the
    device), ``DECLINED`` (a case it does not compute) or a refusal. A decline
    or refusal comes before any write or queued work. Which cases it declines
    depends only on the dtypes, the attributes, the device model and the
    extents the contract names, and the library states them in
    ``statement.computes``.

    A library may also carry ``priority: int`` (default 0): discovery asks
    libraries of higher priority first; and ``unavailable: str | None``: why
    the devices it is for cannot be used in this process, in one line (``None``
    where they can), which ``nxkernel info`` and the pytest plugin's ``cuda``
    marker show; and ``notes: Sequence[str]``: lines ``nxkernel info`` shows
    beneath the library (which compiler it uses, ...).
    """

    @property
    def name(self) -> str:
        """The library's name in messages, e.g. ``"nx.host"``."""
        ...

    @property
    def statement(self) -> Statement:
        """What the library computes, declines and leaves open (design §5)."""
        ...

    def computes_on(self, device: Rig) -> bool:
        """True iff the library computes on ``device``'s memory."""
        ...

    def map(self, spec: Map, dsts: Sequence[Array], operands: Sequence[Array]) -> Answer:
        """Run the program at every index of the loop: destination k gets output
        k; one operand per load."""
        ...

    def reduce(self, spec: Reduce, dsts: Sequence[Array], operands: Sequence[Array]) -> Answer:
        """Reduce program outputs' terms along the axes: destinations in the
        order of the reductions, two for Moments (mean, variance) and Arg
        (extreme, int64 position); one operand per load."""
        ...

    def scan(self, spec: Scan, dsts: Sequence[Array], operands: Sequence[Array]) -> Answer:
        """Inclusive scan of one program output along the axis (from its end if
        reverse): the result (Arg: extreme and position); operands are the
        optional carry first, then one per load."""
        ...

    def fold(self, spec: Fold, dsts: Sequence[Array], operands: Sequence[Array]) -> Answer:
        """The adjoint of a padded load: dst's element at an index is +0 plus
        every element of x that the load reads from that index. Operand: x, of
        a dtype Prog's Add takes (no bool or bit), dst of x's dtype."""
        ...

    def gather(self, spec: Gather, dsts: Sequence[Array], operands: Sequence[Array]) -> Answer:
        """dst holds x's elements at the positions index holds along the axis; a
        position outside [0, d) reads zero bits. Operands: index, x."""
        ...

    def range_gather(
        self, spec: RangeGather, dsts: Sequence[Array], operands: Sequence[Array]
    ) -> Answer:
        """dst[…, i, j, …] = x[…, starts[…, i, …] + j, …]: a run of ``run``
        elements from each start along the axis, the run's axis inserted after
        it; a position outside [0, d) reads zero bits. Operands: starts, x."""
        ...

    def scatter(self, spec: Scatter, dsts: Sequence[Array], operands: Sequence[Array]) -> Answer:
        """dst is into with the updates combined (Set, Add, Max, Min) at the
        positions index holds along the axis. Operands: into, index, updates."""
        ...

    def sort(self, spec: Sort, dsts: Sequence[Array], operands: Sequence[Array]) -> Answer:
        """Stable sort along the axis in the total order (-0 below +0, NaNs
        last), descending if asked, the first k kept: destinations values and
        int64 positions. Operand: x."""
        ...

    def numbering(
        self, spec: Numbering, dsts: Sequence[Array], operands: Sequence[Array]
    ) -> Answer:
        """For each element of x [b…; n], the number of keys [b…; m] of its row
        below it (left) or not above it (right) in sort's total order, into an
        int64 dst: a search-sorted per row. Operands: keys, x."""
        ...

    def assemble(
        self, spec: Assemble, dsts: Sequence[Array], operands: Sequence[Array]
    ) -> Answer:
        """Paste each piece's bits into its region of dst, the last piece that
        holds an index winning, and the fill elsewhere. Operands: the pieces."""
        ...

    def contract(
        self, spec: Contract, dsts: Sequence[Array], operands: Sequence[Array]
    ) -> Answer:
        """dst = init + Σ a·b over the contracting pairs at each batch, row and
        column, in the accumulator, with block scales and segments. Operands:
        a, b, optional init (segmented: the ids with the segments)."""
        ...

    def fft(self, spec: Fft, dsts: Sequence[Array], operands: Sequence[Array]) -> Answer:
        """The unnormalised discrete Fourier transform of x along the axes (C2c,
        R2c, or C2r of n points). Operand: x."""
        ...

    def cholesky(
        self, spec: Cholesky, dsts: Sequence[Array], operands: Sequence[Array]
    ) -> Answer:
        """The Cholesky factor (lower or upper) of each matrix of a."""
        ...

    def lu(self, spec: Lu, dsts: Sequence[Array], operands: Sequence[Array]) -> Answer:
        """LU with partial pivoting of each matrix of a: lu, pivots and perm."""
        ...

    def qr(self, spec: Qr, dsts: Sequence[Array], operands: Sequence[Array]) -> Answer:
        """The QR factors (reduced or complete) of each matrix of a."""
        ...

    def svd(self, spec: Svd, dsts: Sequence[Array], operands: Sequence[Array]) -> Answer:
        """The singular values, and the vectors if asked, of each matrix of a."""
        ...

    def eigh(self, spec: Eigh, dsts: Sequence[Array], operands: Sequence[Array]) -> Answer:
        """The eigenvalues, and the vectors if asked, of each Hermitian matrix
        of a."""
        ...

    def eig(self, spec: Eig, dsts: Sequence[Array], operands: Sequence[Array]) -> Answer:
        """The eigenvalues, and the vectors if asked, of each square matrix of a."""
        ...

    def solve_triangular(
        self, spec: SolveTriangular, dsts: Sequence[Array], operands: Sequence[Array]
    ) -> Answer:
        """x with op(a) x = b for each triangular matrix of a (its triangle,
        transposed if asked, unit diagonal if asked). Operands: a, b."""
        ...

    def attention(
        self, spec: Attention, dsts: Sequence[Array], operands: Sequence[Array]
    ) -> Answer:
        """Attention of the query rows over the visible keys: destinations o and
        lse; operands q, k, v (or pools and table), lengths, loads."""
        ...


#: The members every library has, beside its kernels.
_MEMBERS: Final[tuple[str, ...]] = ("name", "statement", "computes_on")


def check_library(obj: object) -> Library:
    """``obj`` as a library; a ``TypeError`` unless it keeps the :class:`Library`
    protocol: a str ``name``, a :class:`Statement` of that library whose e(K)
    is within γ(2K + 2) where ``describe`` shows it, a ``computes_on(device)``
    and a method per kernel taking (spec, dsts, operands).

    The message lists every problem, naming the member and, for a method, its
    signature.
    """
    problems = [f"lacks {m}" for m in (*_MEMBERS, *KERNEL_NAMES) if not hasattr(obj, m)]
    name = getattr(obj, "name", None)
    if hasattr(obj, "name") and not isinstance(name, str):
        problems.append(f"its name is a {type(name).__name__}, not a str")
    statement = getattr(obj, "statement", None)
    if hasattr(obj, "statement"):
        if not isinstance(statement, Statement):
            problems.append(f"its statement is a {type(statement).__name__}, not a Statement")
        elif statement.library != name:
            problems.append(f"its statement is of library {statement.library!r}")
        else:
            try:
                check_error_factor(statement, _E_DTYPES, _E_KS)
            except Exception as e:
                problems.append(f"its error factor fails: {type(e).__name__}: {e}")
    for member, args in (("computes_on", 1), *((k, 3) for k in KERNEL_NAMES)):
        if not hasattr(obj, member):
            continue
        method = getattr(obj, member)
        if not callable(method):
            problems.append(f"its {member} is not callable")
            continue
        try:
            signature = inspect.signature(method)
        except ValueError:
            continue  # a builtin that states no signature: called as it is
        try:
            signature.bind(*([None] * args))
        except TypeError:
            problems.append(f"its {member}{signature} does not take {args} positional arguments")
    if problems:
        raise TypeError(f"{name or type(obj).__name__!r} is not a kernel library: "
                        + "; ".join(problems))
    return cast(Library, obj)


# --------------------------------------------------------------------------
# Error bounds
# --------------------------------------------------------------------------


def unit_roundoff(dt: Dtype) -> float:
    """The unit roundoff u = 2**-(fraction_bits + 1) of a float dtype, and of a
    complex dtype's parts; a ``ValueError`` for other dtypes."""
    if dt.is_complex:
        dt = _dtype.float64 if dt.bits == 128 else _dtype.float32
    if dt.float_format is None:
        raise ValueError(f"unit_roundoff: {dt.name} is not a float or complex dtype")
    return 2.0 ** -(dt.float_format.fraction_bits + 1)


def gamma(k: int, u: float) -> float:
    """γ(k) = k u / (1 - k u), the bound of k roundings of unit roundoff u;
    ``inf`` where k u >= 1, where no bound holds."""
    if k < 0:
        raise ValueError(f"gamma: k = {k} is negative")
    ku = k * u
    return math.inf if ku >= 1.0 else ku / (1.0 - ku)


def check_error_factor(
    statement: Statement, dtypes: Iterable[Dtype], ks: Iterable[int]
) -> None:
    """Raise ``AssertionError`` unless 0 <= e(K) <= γ(2K + 2) at every accumulator
    dtype of ``dtypes`` and every K of ``ks``, u the accumulator's unit roundoff
    (its parts' for a complex one), e the statement's error factor.

    Args:
        statement: the library's statement.
        dtypes: float or complex accumulator dtypes.
        ks: numbers of products K (each >= 0).
    """
    ks = tuple(ks)
    for dt in dtypes:
        u = unit_roundoff(dt)
        for k in ks:
            e = statement.error_factor(k, dt)
            ceiling = gamma(2 * k + 2, u)
            if not 0.0 <= e <= ceiling:
                raise AssertionError(
                    f"{statement.library}: e({k}) at {dt.name} is {e!r}, not within"
                    f" [0, γ(2K + 2) = {ceiling!r}]"
                )


# --------------------------------------------------------------------------
# Statements
# --------------------------------------------------------------------------


@final
@dataclass(frozen=True, slots=True)
class KernelStatement:
    """What a library computes of one kernel: in words, and as a predicate
    that returns why it declines a call (a ``str``), or ``None`` where it
    computes it. The predicate reads only what the contract lets a decline
    depend on: dtypes, attributes, the device model and the named extents."""

    prose: str
    declines: Callable[[Call], str | None]


#: Upstream §3's bounds in ulps (float32, float64) of the kinds Prog leaves
#: inexact, by kind name: the transcendentals, Pow and Atan2. A statement's
#: ``ulps`` lie within them; the narrow floats, which compute in float32 and
#: round once, within 1 ulp of their format.
KIND_ULPS: Final[Mapping[str, tuple[int, int]]] = types.MappingProxyType({
    **{k: (2, 2) for k in ("exp", "exp2", "sin", "cos", "asin", "acos", "atan", "cosh", "tanh", "erf")},
    **{k: (1, 2) for k in ("expm1", "log", "log2", "log1p")},
    "atan2": (3, 2), "sinh": (3, 2), "tan": (4, 2), "pow": (4, 2),
})


#: The float dtypes' names, the keys a statement's ``ulps`` may have.
_FLOATS: Final = tuple(d.name for d in _dtype.all if d.is_float)


#: Dtypes and numbers of products at which a statement shows its e(K).
_E_DTYPES: Final = (_dtype.float32, _dtype.float64, _dtype.complex64, _dtype.complex128)
_E_KS: Final[tuple[int, ...]] = (16, 1024, 65536)


@final
@dataclass(frozen=True, slots=True, eq=False)
class Statement:
    """A library's statement (design §5): everything the contract leaves to
    the library, readable by code (the conformance kit holds the library to
    it) and by people (``nxkernel info``).

    ``computes`` has every kernel of :data:`KERNEL_NAMES` and no other key;
    construction raises ``ValueError`` naming the missing and unknown ones.
    The mappings are copied and read-only.
    """

    #: The library's name, as ``Library.name``.
    library: str
    #: One or two sentences: what the library is for and what it computes on.
    summary: str
    #: For every kernel, the cases it computes (prose and a declines predicate).
    computes: Mapping[str, KernelStatement]
    #: The order and grouping of each float Sum, Prod and scan, and of each
    #: contraction's and attention's sums, keyed by what they order.
    association: Mapping[str, str]
    #: e(K, accumulator dtype): a contraction of K products errs by at most
    #: e(K) (|init| + Σ|a||b|); at most γ(2K + 2).
    error_factor: Callable[[int, Dtype], float]
    #: Algorithms and their bounds: Logsumexp, Moments, attention's ε, the
    #: matrix routines.
    algorithms: Mapping[str, str]
    #: The choices the routines leave open: eig's order, the unit factors of
    #: qr, svd and eig vectors, the columns complete factors add.
    open_choices: Mapping[str, str]
    #: Whether several threads may call the library's kernels at once.
    concurrent: bool
    #: The bounds of the inexact kinds (``KIND_ULPS``' kinds) in ulps from the
    #: correctly rounded value, ``ulps[dtype name][kind name]``, at each float
    #: dtype whose programs the library computes: every such kind, each within
    #: ``KIND_ULPS`` (1 for the narrow floats). Empty for a library that
    #: computes no program of floats.
    ulps: Mapping[str, Mapping[str, int]] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        missing = [k for k in KERNEL_NAMES if k not in self.computes]
        unknown = [k for k in self.computes if k not in KERNEL_NAMES]
        if missing or unknown:
            parts = []
            if missing:
                parts.append(f"it states no {', '.join(missing)}")
            parts.extend(
                f"{k!r} is not a kernel{close_match(k, KERNEL_NAMES)}" for k in unknown
            )
            raise ValueError(f"Statement of {self.library}: " + "; ".join(parts))
        for k, s in self.computes.items():
            if not isinstance(s, KernelStatement):
                raise ValueError(
                    f"Statement of {self.library}: computes[{k!r}] is a"
                    f" {type(s).__name__}, not a KernelStatement"
                )
        for field in ("computes", "association", "algorithms", "open_choices"):
            frozen = types.MappingProxyType(dict(getattr(self, field)))
            object.__setattr__(self, field, frozen)
        self._check_ulps()
        object.__setattr__(self, "ulps", types.MappingProxyType(
            {dt: types.MappingProxyType(dict(b)) for dt, b in self.ulps.items()}))

    def _check_ulps(self) -> None:
        """Raise ValueError naming each misstated bound of ``ulps``."""
        wrong = []
        for dt, bounds in self.ulps.items():
            if dt not in _FLOATS:
                wrong.append(f"ulps[{dt!r}]: not a float dtype{close_match(dt, _FLOATS)}")
                continue
            missing = [k for k in KIND_ULPS if k not in bounds]
            if missing:
                wrong.append(f"ulps[{dt!r}] states no {', '.join(missing)}")
            for k, b in bounds.items():
                if k not in KIND_ULPS:
                    wrong.append(f"ulps[{dt!r}][{k!r}]: not an inexact kind{close_match(k, KIND_ULPS)}")
                    continue
                most = 1 if dt not in ("float32", "float64") else KIND_ULPS[k][dt == "float64"]
                if not isinstance(b, int) or isinstance(b, bool) or not 0 <= b <= most:
                    wrong.append(f"ulps[{dt!r}][{k!r}] = {b!r}: not an int in [0, {most}]")
        if wrong:
            raise ValueError(f"Statement of {self.library}: " + "; ".join(wrong))

    def declines(self, call: Call) -> str | None:
        """Why the library declines ``call``, or ``None`` where it computes it."""
        return self.computes[call.kernel].declines(call)

    def _error_factors(self) -> list[dict[str, Any]]:
        """e(K) at the sample dtypes and K, each with the contract's ceiling."""
        return [
            {"dtype": dt.name, "K": k, "e": self.error_factor(k, dt),
             "ceiling": gamma(2 * k + 2, unit_roundoff(dt))}
            for dt in _E_DTYPES
            for k in _E_KS
        ]

    def describe(self) -> str:
        """The statement as readable text, one section per part, prose wrapped
        at 100 columns."""
        lines = [f"{self.library}: {self.summary}",
                 "  concurrent: " + ("yes, several threads may call its kernels at once"
                                     if self.concurrent else
                                     "no, one thread at a time may call its kernels")]
        lines += _section("computes", {k: s.prose for k, s in self.computes.items()})
        lines += _section("association", self.association)
        lines.append(f"  error factor e(K) ≤ γ(2K + 2), at K = {', '.join(map(str, _E_KS))}:")
        rows: dict[str, str] = {}
        for r in self._error_factors():
            cell = f"{r['e']:.3g} ≤ {r['ceiling']:.3g}"
            rows[r["dtype"]] = rows.get(r["dtype"], "") + f"{cell:<22}"
        lines += [f"    {dt:<18}{row}".rstrip() for dt, row in rows.items()]
        lines += _section("algorithms", self.algorithms)
        lines += _section("open choices", self.open_choices)
        lines += _section("ulps", {dt: ", ".join(f"{k} {b}" for k, b in bounds.items())
                                   for dt, bounds in self.ulps.items()})
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """The statement as JSON-ready data: the prose of every part, e(K)
        sampled at float32, float64, complex64 and complex128 for K = 16, 1024,
        65536 with the ceiling γ(2K + 2), and the ulps of the inexact kinds."""
        return {
            "library": self.library,
            "summary": self.summary,
            "concurrent": self.concurrent,
            "computes": {k: s.prose for k, s in self.computes.items()},
            "association": dict(self.association),
            "error_factor": self._error_factors(),
            "algorithms": dict(self.algorithms),
            "open_choices": dict(self.open_choices),
            "ulps": {dt: dict(b) for dt, b in self.ulps.items()},
        }


def _section(title: str, items: Mapping[str, str]) -> list[str]:
    """``title:`` then each key with its prose wrapped under it (or "none stated")."""
    lines = [f"  {title}:"]
    if not items:
        lines.append("    (none stated)")
    for key, prose in items.items():
        lines += textwrap.wrap(prose, width=100, initial_indent=f"    {key:<18}",
                               subsequent_indent=" " * 22) or [f"    {key}"]
    return lines


# --------------------------------------------------------------------------
# The declining library
# --------------------------------------------------------------------------


@final
class _DecliningLibrary:
    """A complete library that computes on every device and declines every
    case, before touching any array."""

    __slots__ = ("name", "statement")

    def __init__(self, name: str) -> None:
        self.name: Final = name
        self.statement: Final = _declining_statement(name)

    def __repr__(self) -> str:
        return f"declining_library({self.name!r})"

    def computes_on(self, device: Rig) -> bool:
        """True: it declines on every device alike."""
        return True

    def _decline(self, spec: object, dsts: Sequence[Array], operands: Sequence[Array]) -> Answer:
        """Answer DECLINED, reading and writing nothing."""
        return Answer.DECLINED

    map = reduce = scan = fold = gather = range_gather = scatter = sort = _decline
    numbering = assemble = contract = fft = cholesky = lu = qr = svd = _decline
    eigh = eig = solve_triangular = attention = _decline


def _declining_statement(name: str) -> Statement:
    """The statement of a library that declines every case."""
    reason = f"{name} declines every case"

    def declines(call: Call) -> str:
        return reason

    def error_factor(k: int, dt: Dtype) -> float:
        # It computes no contraction, so any factor holds: state the ceiling.
        return gamma(2 * k + 2, unit_roundoff(dt))

    none = "none: it computes no sum, product, scan, contraction or attention"
    return Statement(
        library=name,
        summary="declines every case on every device; a test double and the smallest"
        " complete library.",
        computes={k: KernelStatement("declines every case", declines) for k in KERNEL_NAMES},
        association={"all": none},
        error_factor=error_factor,
        algorithms={"all": "none: it computes nothing"},
        open_choices={"all": "none: it computes no routine"},
        concurrent=True,
    )


def declining_library(name: str = "nx.declining") -> Library:
    """A library called ``name`` that computes on every device, answers
    ``DECLINED`` to every call without touching its arrays, and states so."""
    return _DecliningLibrary(name)

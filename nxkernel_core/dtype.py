"""The 21 dtypes, their storage, and the store rule ``of_float``.

Dtypes are listed in code order (upstream-facts §5). Storage is
little-endian; a sub-byte element ``p`` of a ``b``-bit dtype occupies bits
``p*b .. p*b+b-1`` of its buffer, least significant bit first, so int4
element ``2k`` is the low nibble of byte ``k``.

Host views: every dtype has a NumPy dtype for one unpacked element
(``numpy_dtype``): ``ml_dtypes`` for the narrow floats and int4/uint4,
``numpy.bool_`` for ``bool`` and ``bit``. Sub-byte dtypes cannot be NumPy
views of their storage; ``pack`` and ``unpack`` convert.
"""

from __future__ import annotations

import builtins
import enum
import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Final, TypeAlias, final

import ml_dtypes
import numpy as np
import numpy.typing as npt

__all__ = [
    "Dtype",
    "DtypeLike",
    "FloatFormat",
    "Kind",
    "accepts_reduction_kind",
    "accumulates",
    "all",
    "bfloat16",
    "bit",
    "bool_",
    "by_name",
    "bytes",
    "carrier",
    "complex64",
    "complex128",
    "float4_e2m1fn",
    "float8_e4m3fn",
    "float8_e5m2",
    "float16",
    "float32",
    "float64",
    "float_carrier",
    "full_precision",
    "int4",
    "int8",
    "int16",
    "int32",
    "int64",
    "of_code",
    "of_float",
    "of_fraction",
    "of_numpy",
    "pack",
    "resolve",
    "same_precision",
    "store_codes",
    "uint4",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "unpack",
]


class Kind(enum.Enum):
    """What a dtype's elements are."""

    FLOAT = "float"
    SIGNED = "signed"
    UNSIGNED = "unsigned"
    COMPLEX = "complex"
    BOOLEAN = "boolean"


@final
@dataclass(frozen=True, slots=True)
class FloatFormat:
    """A binary float format (upstream-facts §5's ``float_format``):
    ``exponent_bits`` and ``fraction_bits`` stored bits, normal exponents from
    ``min_exponent``, the largest finite value ``max_finite``, whether the
    format encodes infinities and NaNs, and whether a store's overflow
    saturates to ``±max_finite`` (the formats of a byte or less, e5m2 included
    though it encodes infinities) instead of going to ±inf."""

    fraction_bits: int
    min_exponent: int
    max_finite: float
    infinities: bool
    nans: bool
    exponent_bits: int
    saturates: bool

    @property
    def epsilon(self) -> float:
        """The gap between 1 and the next larger value, ``2**-fraction_bits``."""
        return 2.0**-self.fraction_bits

    @property
    def min_normal(self) -> float:
        """The least positive normal value, ``2**min_exponent``."""
        return 2.0**self.min_exponent


@final
@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Dtype:
    """One of the 21 dtypes. Dtypes are singletons: compare with ``is`` or ``==``."""

    name: str
    bits: int
    kind: Kind
    code: int
    numpy_dtype: np.dtype[np.generic] = field(repr=False)
    float_format: FloatFormat | None = field(repr=False, default=None)

    def __repr__(self) -> str:
        return self.name

    def __reduce__(self) -> str:
        # Pickle as the module-level constant, so unpickling keeps identity.
        return self.name if self.name != "bool" else "bool_"

    @property
    def is_float(self) -> bool:
        return self.kind is Kind.FLOAT

    @property
    def is_int(self) -> bool:
        return self.kind in (Kind.SIGNED, Kind.UNSIGNED)

    @property
    def is_complex(self) -> bool:
        return self.kind is Kind.COMPLEX

    @property
    def is_bool(self) -> bool:
        return self.kind is Kind.BOOLEAN

    @property
    def is_sub_byte(self) -> bool:
        return self.bits < 8

    @property
    def itemsize(self) -> int:
        """Bytes of one unpacked host element (``numpy_dtype.itemsize``)."""
        return self.numpy_dtype.itemsize

    @property
    def alignment(self) -> int:
        """Alignment of the first element in bytes: the width for byte-wide
        dtypes, one component for complex, 1 for sub-byte dtypes."""
        if self.bits < 8:
            return 1
        if self.kind is Kind.COMPLEX:
            return self.bits // 16
        return self.bits // 8

    @property
    def int_range(self) -> tuple[int, int]:
        """The least and greatest value of an integer dtype."""
        if self.kind is Kind.SIGNED:
            return -(1 << (self.bits - 1)), (1 << (self.bits - 1)) - 1
        if self.kind is Kind.UNSIGNED:
            return 0, (1 << self.bits) - 1
        raise ValueError(f"Dtype.int_range: {self.name} is not an integer dtype")


def _ff(exponent_bits: int, fraction_bits: int, max_finite: float, *, inf: bool = True,
        nan: bool = True, saturates: bool = False) -> FloatFormat:
    """A format of ``exponent_bits`` and ``fraction_bits`` with the exponent bias
    ``2**(exponent_bits - 1) - 1`` (every format here has it)."""
    bias = (1 << (exponent_bits - 1)) - 1
    return FloatFormat(fraction_bits, 1 - bias, max_finite, inf, nan, exponent_bits, saturates)


def _dt(name: str, bits: int, kind: Kind, code: int, np_dtype: object,
        fmt: FloatFormat | None = None) -> Dtype:
    return Dtype(name, bits, kind, code, np.dtype(np_dtype), fmt)  # type: ignore[call-overload]


float64: Final = _dt("float64", 64, Kind.FLOAT, 0, np.float64,
                     _ff(11, 52, (2 - 2.0**-52) * 2.0**1023))
float32: Final = _dt("float32", 32, Kind.FLOAT, 1, np.float32, _ff(8, 23, (2 - 2.0**-23) * 2.0**127))
float16: Final = _dt("float16", 16, Kind.FLOAT, 2, np.float16, _ff(5, 10, 65504.0))
bfloat16: Final = _dt("bfloat16", 16, Kind.FLOAT, 3, ml_dtypes.bfloat16,
                      _ff(8, 7, (2 - 2.0**-7) * 2.0**127))
float8_e4m3fn: Final = _dt("float8_e4m3fn", 8, Kind.FLOAT, 4, ml_dtypes.float8_e4m3fn,
                           _ff(4, 3, 448.0, inf=False, saturates=True))
float8_e5m2: Final = _dt("float8_e5m2", 8, Kind.FLOAT, 5, ml_dtypes.float8_e5m2,
                         _ff(5, 2, 57344.0, saturates=True))
float4_e2m1fn: Final = _dt("float4_e2m1fn", 4, Kind.FLOAT, 6, ml_dtypes.float4_e2m1fn,
                           _ff(2, 1, 6.0, inf=False, nan=False, saturates=True))
int64: Final = _dt("int64", 64, Kind.SIGNED, 7, np.int64)
uint64: Final = _dt("uint64", 64, Kind.UNSIGNED, 8, np.uint64)
int32: Final = _dt("int32", 32, Kind.SIGNED, 9, np.int32)
uint32: Final = _dt("uint32", 32, Kind.UNSIGNED, 10, np.uint32)
int16: Final = _dt("int16", 16, Kind.SIGNED, 11, np.int16)
uint16: Final = _dt("uint16", 16, Kind.UNSIGNED, 12, np.uint16)
int8: Final = _dt("int8", 8, Kind.SIGNED, 13, np.int8)
uint8: Final = _dt("uint8", 8, Kind.UNSIGNED, 14, np.uint8)
int4: Final = _dt("int4", 4, Kind.SIGNED, 15, ml_dtypes.int4)
uint4: Final = _dt("uint4", 4, Kind.UNSIGNED, 16, ml_dtypes.uint4)
complex128: Final = _dt("complex128", 128, Kind.COMPLEX, 17, np.complex128)
complex64: Final = _dt("complex64", 64, Kind.COMPLEX, 18, np.complex64)
bool_: Final = _dt("bool", 8, Kind.BOOLEAN, 19, np.bool_)
bit: Final = _dt("bit", 1, Kind.BOOLEAN, 20, np.bool_)

#: Every dtype, in code order: ``all[dt.code] is dt``.
all: Final[tuple[Dtype, ...]] = (  # the contract's name, shadowing the builtin
    float64, float32, float16, bfloat16, float8_e4m3fn, float8_e5m2, float4_e2m1fn,
    int64, uint64, int32, uint32, int16, uint16, int8, uint8, int4, uint4,
    complex128, complex64, bool_, bit,
)
# Also reachable as ``dtype.bool`` for symmetry with the dtype's own name.
globals()["bool"] = bool_

_BY_NAME: Final[dict[str, Dtype]] = {dt.name: dt for dt in all}


def by_name(name: str) -> Dtype:
    """The dtype called ``name`` (as ``Dtype.name`` spells it)."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ValueError(
            f"dtype.by_name: unknown dtype {name!r}; the dtypes are {', '.join(_BY_NAME)}"
        ) from None


#: What every function taking a dtype accepts (see :func:`resolve`).
DtypeLike: TypeAlias = Dtype | str | np.dtype[Any] | type


def resolve(obj: object, fn: str = "dtype") -> Dtype:
    """The dtype ``obj`` names: a :class:`Dtype`, one's name (``"bfloat16"``), or
    anything NumPy reads as a dtype (``"f4"``, ``np.float32``, ``np.dtype("<i8")``);
    a ``ValueError`` naming ``fn`` for anything else."""
    if isinstance(obj, Dtype):
        return obj
    if isinstance(obj, str) and obj in _BY_NAME:
        return _BY_NAME[obj]
    try:
        if isinstance(obj, (str, np.dtype, type)):
            return of_numpy(np.dtype(obj))
    except (TypeError, ValueError):
        pass
    raise ValueError(f"{fn}: {obj!r} is not a dtype; give a Dtype, its name ({', '.join(_BY_NAME)})"
                     " or a NumPy dtype")


def of_code(code: int) -> Dtype:
    """The dtype whose code is ``code``."""
    if not 0 <= code < len(all):
        raise ValueError(f"dtype.of_code: code {code} is not in [0, {len(all)})")
    return all[code]


def of_numpy(npdt: npt.DTypeLike) -> Dtype:
    """The dtype whose host element is NumPy's ``npdt`` (``bool`` for numpy.bool_,
    never ``bit``), in either byte order."""
    d = np.dtype(npdt)
    if not d.isnative:
        d = d.newbyteorder("=")
    for dt in all:
        if dt.numpy_dtype == d and dt is not bit:
            return dt
    raise ValueError(f"dtype.of_numpy: NumPy dtype {d} has no nxkernel dtype")


def bytes(dt: Dtype, n: int) -> int:  # the contract's name, shadowing the builtin
    """Bytes that ``n`` elements of ``dt`` occupy: ``ceil(n * bits / 8)``."""
    if n < 0:
        raise ValueError(f"dtype.bytes: n = {n} is negative")
    return (n * dt.bits + 7) // 8


# --------------------------------------------------------------------------
# Predicates of the contract
# --------------------------------------------------------------------------


def carrier(dt: Dtype) -> Dtype:
    """The dtype kernels reduce and scan terms of ``dt`` in, and a scan's carry's:
    float32 for a float narrower than it, int8/uint8 for int4/uint4, bool for
    bit, else ``dt``."""
    if dt.kind is Kind.FLOAT and dt.bits < 32:
        return float32
    if dt is int4:
        return int8
    if dt is uint4:
        return uint8
    if dt is bit:
        return bool_
    return dt


def float_carrier(dt: Dtype) -> Dtype:
    """The carrier of a float dtype (float32 for the narrow ones)."""
    if dt.kind is not Kind.FLOAT:
        raise ValueError(f"dtype.float_carrier: {dt.name} is not a float dtype")
    return carrier(dt)


def accepts_reduction_kind(reduction: str, dt: Dtype) -> bool:
    """Whether a reduction named ``reduction`` (sum, prod, max, min, arg,
    logsumexp, moments) reduces terms of ``dt``: Sum and Prod every dtype but
    booleans, Max, Min and Arg every dtype, Logsumexp and Moments floats."""
    if reduction in ("sum", "prod"):
        return dt.kind is not Kind.BOOLEAN
    if reduction in ("max", "min", "arg"):
        return True
    if reduction in ("logsumexp", "moments"):
        return dt.kind is Kind.FLOAT
    raise ValueError(f"dtype.accepts_reduction_kind: unknown reduction {reduction!r}")


def accumulates(dt: Dtype) -> bool:
    """Whether a contraction computes in ``dt``: every dtype but booleans and
    floats narrower than float32."""
    if dt.kind is Kind.BOOLEAN:
        return False
    return not (dt.kind is Kind.FLOAT and dt.bits < 32)


def same_precision(a: Dtype, b: Dtype) -> bool:
    """Whether ``a`` and ``b`` are a real dtype and its complex counterpart, in
    either order, or the same one of float32/float64/complex64/complex128: the
    pairs a Fourier transform maps between."""
    pairs = {float32: complex64, float64: complex128}
    inverse = {v: k for k, v in pairs.items()}
    for x in (a, b):
        if x not in pairs and x not in inverse:
            return False
    return (a is b) or pairs.get(a) is b or inverse.get(a) is b


def full_precision(dt: Dtype) -> bool:
    """Whether ``dt`` is float32, float64, complex64 or complex128: the dtypes the
    matrix routines take."""
    return dt in (float32, float64, complex64, complex128)


# --------------------------------------------------------------------------
# The store rule
# --------------------------------------------------------------------------


def _round_to_format(x: npt.NDArray[np.float64], fmt: FloatFormat) -> npt.NDArray[np.float64]:
    """Round float64 values once, to nearest, ties to even, into ``fmt``'s
    precision with the exponent unbounded above; overflow is applied after."""
    with np.errstate(all="ignore"):
        finite = np.isfinite(x) & (x != 0)
        ax = np.where(finite, np.abs(x), 1.0)
        _, e = np.frexp(ax)  # ax = m * 2**e, m in [0.5, 1)
        lead = np.maximum(e.astype(np.int64) - 1, fmt.min_exponent)
        quantum = lead - fmt.fraction_bits
        # ldexp by a power of two is exact in float64 for these formats' ranges,
        # and rint rounds ties to even.
        rounded = np.ldexp(np.rint(np.ldexp(ax, -quantum)), quantum)
        return np.where(finite, np.copysign(rounded, x), x)


def of_float(dt: Dtype, x: npt.ArrayLike) -> npt.NDArray[np.generic]:
    """Store float64 values ``x`` into ``dt`` by the store rule (upstream §5).

    A finite value rounds once, to nearest, ties to even, with the exponent
    unbounded above; below the normal range it becomes a subnormal or a signed
    zero. Overflow goes to ±inf for float64/32/16 and bfloat16 and saturates to
    ±57344, ±448, ±6 for e5m2, e4m3fn, e2m1fn; NaN stays NaN but becomes +0 in
    e2m1fn. Integers truncate toward zero and saturate, NaN to 0. Complex
    stores the value as the real part. Bool stores ``x != 0`` (NaN is true).
    Returns an array of ``dt.numpy_dtype`` (unpacked for sub-byte dtypes).
    """
    v = np.asarray(x, dtype=np.float64)
    kind = dt.kind
    if kind is Kind.FLOAT:
        fmt = dt.float_format
        assert fmt is not None
        if dt is float64:
            return v.copy()
        r = _round_to_format(v, fmt)
        with np.errstate(all="ignore"):
            big = np.abs(r) > fmt.max_finite
            if fmt.saturates:
                r = np.where(big, np.copysign(fmt.max_finite, r), r)
            else:
                r = np.where(big, np.copysign(np.inf, r), r)
            if not fmt.nans:
                r = np.where(np.isnan(r), 0.0, r)
            # r is exactly representable now, so the cast is exact (a signalling
            # NaN quiets, as the NaN rule allows, without a warning).
            return r.astype(dt.numpy_dtype)
    if kind is Kind.COMPLEX:
        part = float32 if dt is complex64 else float64
        re = of_float(part, v)
        out = np.zeros(v.shape, dtype=dt.numpy_dtype)
        out.real = re
        return out
    if kind is Kind.BOOLEAN:
        return np.asarray(v != 0, dtype=np.bool_)
    lo, hi = dt.int_range
    with np.errstate(all="ignore"):
        t = np.trunc(v)
        t = np.where(np.isnan(t), 0.0, t)
        # float64 holds lo exactly (a power of two or 0) and hi + 1 exactly.
        over = t >= float(hi + 1)
        under = t < float(lo)
        safe = np.where(over | under, 0.0, t)
    if dt.bits == 64:
        out64 = safe.astype(np.int64 if kind is Kind.SIGNED else np.uint64)
        out64[over] = hi
        out64[under] = lo
        return out64
    ints = safe.astype(np.int64)
    ints = np.where(over, hi, np.where(under, lo, ints))
    stored: npt.NDArray[np.generic] = ints.astype(dt.numpy_dtype)
    return stored


def of_fraction(dt: Dtype, q: Fraction | int | float | str) -> float:
    """The value the store rule gives an exact rational ``q`` in float dtype ``dt``,
    as a float64 (the slow reference the tests hold ``of_float`` to). A float
    ``q`` may also be ±inf (±inf, or ±max_finite where the format saturates) or
    NaN (NaN, or +0 in a format without NaNs)."""
    fmt = dt.float_format
    if fmt is None:
        raise ValueError(f"dtype.of_fraction: {dt.name} is not a float dtype")
    if isinstance(q, float) and not math.isfinite(q):
        if math.isnan(q):
            return q if fmt.nans else 0.0
        return math.copysign(fmt.max_finite, q) if fmt.saturates else q
    value = Fraction(q)
    if value == 0:
        return math.copysign(0.0, q) if isinstance(q, float) else 0.0
    sign = -1 if value < 0 else 1
    a = abs(value)
    e = math.floor(math.log2(a.numerator) - math.log2(a.denominator))
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    quantum = Fraction(2) ** (builtins.max(e, fmt.min_exponent) - fmt.fraction_bits)
    n = a / quantum
    fl = math.floor(n)
    rem = n - fl
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and fl % 2 == 1):
        fl += 1
    r = fl * quantum
    if r > Fraction(fmt.max_finite):
        return sign * (fmt.max_finite if fmt.saturates else math.inf)
    return sign * float(r)


# --------------------------------------------------------------------------
# Packed storage of sub-byte dtypes
# --------------------------------------------------------------------------


def _codes(dt: Dtype, values: npt.NDArray[np.generic]) -> npt.NDArray[np.uint8]:
    """The ``dt.bits``-bit codes of unpacked host elements, one per byte."""
    if dt is bit:
        return np.asarray(values, dtype=np.bool_).astype(np.uint8)
    raw = np.ascontiguousarray(values, dtype=dt.numpy_dtype).view(np.uint8)
    return raw & np.uint8((1 << dt.bits) - 1)


def pack(dt: Dtype, values: npt.ArrayLike) -> npt.NDArray[np.uint8]:
    """The storage bytes of the elements ``values`` (in C order) of a sub-byte
    dtype: element ``p`` at bits ``p*bits..`` least significant bit first, zero
    bits after the last element."""
    if not dt.is_sub_byte:
        raise ValueError(f"dtype.pack: {dt.name} is not a sub-byte dtype")
    v = np.asarray(values, dtype=dt.numpy_dtype).reshape(-1)
    codes = _codes(dt, v)
    per = 8 // dt.bits
    padded = np.zeros(bytes(dt, codes.size) * per, dtype=np.uint8)
    padded[: codes.size] = codes
    lanes = padded.reshape(-1, per).astype(np.uint16)
    shifts = np.arange(per, dtype=np.uint16) * dt.bits
    packed: npt.NDArray[np.uint8] = (lanes << shifts).sum(axis=1).astype(np.uint8)
    return packed


def unpack(
    dt: Dtype, storage: npt.NDArray[np.uint8], positions: npt.ArrayLike
) -> npt.NDArray[np.generic]:
    """The elements of a sub-byte dtype at element ``positions`` of ``storage``
    (a uint8 array of the buffer's bytes), as host elements of ``dt.numpy_dtype``."""
    if not dt.is_sub_byte:
        raise ValueError(f"dtype.unpack: {dt.name} is not a sub-byte dtype")
    pos = np.asarray(positions, dtype=np.int64)
    bitpos = pos * dt.bits
    codes = (storage[bitpos >> 3] >> (bitpos & 7).astype(np.uint8)) & np.uint8((1 << dt.bits) - 1)
    out: npt.NDArray[np.generic]
    if dt is bit:
        out = codes.astype(np.bool_)
    elif dt is int4:
        signed = codes.astype(np.int8)
        signed = np.where(signed >= 8, signed - 16, signed).astype(np.int8)
        out = signed.astype(dt.numpy_dtype)
    elif dt is uint4:
        out = codes.astype(dt.numpy_dtype)
    else:  # float4_e2m1fn: the code is the host element's byte
        out = codes.view(dt.numpy_dtype)
    return out


def store_codes(dt: Dtype, storage: npt.NDArray[np.uint8], positions: npt.ArrayLike,
                values: npt.ArrayLike) -> None:
    """Write elements ``values`` of a sub-byte dtype at element ``positions`` of
    ``storage`` in place, leaving every other bit unchanged. Positions must be
    distinct."""
    if not dt.is_sub_byte:
        raise ValueError(f"dtype.store_codes: {dt.name} is not a sub-byte dtype")
    pos = np.asarray(positions, dtype=np.int64).reshape(-1)
    v = np.broadcast_to(np.asarray(values, dtype=dt.numpy_dtype), np.shape(positions)).reshape(-1)
    codes = _codes(dt, v)
    bitpos = pos * dt.bits
    byte = bitpos >> 3
    shift = (bitpos & 7).astype(np.uint8)
    mask = (np.uint8((1 << dt.bits) - 1) << shift).astype(np.uint8)
    # Several elements may share a byte: clear then set bit by bit, unbuffered.
    np.bitwise_and.at(storage, byte, ~mask)
    np.bitwise_or.at(storage, byte, (codes << shift).astype(np.uint8))

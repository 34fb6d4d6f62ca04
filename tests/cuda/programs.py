"""The programs the CUDA kernel tests draw, named, so that the emulator's tests
run them and the build's test compiles their generated sources for sm_80 and
sm_90 (``test_generated_sources_compile``). Few and wide: each generated
source costs a compile on a cold cache.
"""

from __future__ import annotations

from typing import Final

from nxkernel_core import dtype as D
from nxkernel_core.prog import In, Prog

__all__ = ["MAP_PROGRAMS", "REDUCTION_TERMS", "TRANSCENDENTAL_OUTPUTS", "attend_all", "causal", "fused",
           "identity", "masked"]


def identity(dt: D.Dtype) -> Prog:
    """The one-node program of ``dt``: a reduction of a plain operand."""
    return Prog([dt], [In(0)], [0])


def _float32_kinds() -> Prog:
    b = Prog.build([D.float32, D.float32, D.float32, D.bool_])
    x, y, z, c = b.ins
    return b.finish(
        b.fma(x, y, z), x / y, x % y, b.sqrt(x), b.round(x), b.sign(x), b.maximum(x, y), b.minimum(x, y),
        b.less_equal(x, y), b.where(c, x, y), b.exp(x), x ** y,
    )


def _integer_kinds() -> Prog:
    b = Prog.build([D.int8, D.uint32, D.int64])
    i, u, w = b.ins
    return b.finish(
        i // b.neg(i), i % (i + 3), i * i, b.abs(i), u // (u - 1), u % (u + 7), u ** (u & 7),
        b.maximum(u, u * 3), w // (w - 2), w ^ (w * 5), b.sign(w), b.not_equal(w, b.neg(w)),
    )


def _narrow_kinds() -> Prog:
    b = Prog.build([D.float16, D.bfloat16, D.float8_e4m3fn, D.float8_e5m2])
    h, bf, e4, e5 = b.ins
    return b.finish(
        h + h, b.fma(h, h, h), b.maximum(h, b.neg(h)), bf * bf, b.sqrt(bf), e4 + e4, e5 * e5,
        b.less(e4, e4 * 2.0), b.exp(h), b.cast(bf, D.float8_e5m2), b.recip(e4), b.floor(e5),
    )


def _casts() -> Prog:
    b = Prog.build([D.float32, D.int64])
    x, w = b.ins
    return b.finish(
        *(b.cast(x, dt) for dt in (D.float64, D.float16, D.bfloat16, D.float8_e4m3fn, D.float8_e5m2,
                                   D.float4_e2m1fn, D.int32, D.uint64, D.int4, D.bit)),
        *(b.cast(w, dt) for dt in (D.float32, D.float16, D.bool_)), b.bitcast(w, D.float64),
    )


def _coords_and_codes() -> Prog:
    b = Prog.build([D.float32, D.uint4, D.bit])
    x, u, t = b.ins
    k0 = b.cast(b.coord(0), D.float32)
    k1 = b.coord(1)
    odd = b.not_equal(u & 1, 0)
    odd_bit = b.cast(odd, D.bit)
    return b.finish(
        x * 2.0 + k0, k1 * 10, b.where(odd, x, b.neg(x)), u + u, b.cast(u, D.int4), b.equal(t, odd_bit),
        b.maximum(t, odd_bit),
    )


#: The map tests' programs, by name.
MAP_PROGRAMS: Final[dict[str, Prog]] = {
    "float32_kinds": _float32_kinds(),
    "integer_kinds": _integer_kinds(),
    "narrow_kinds": _narrow_kinds(),
    "casts": _casts(),
    "coords_and_codes": _coords_and_codes(),
}

#: Per map program, its outputs bounded in ulps rather than fixed (the
#: transcendental kinds and Pow of float32 and narrower: within 1 ulp).
TRANSCENDENTAL_OUTPUTS: Final[dict[str, tuple[int, ...]]] = {
    "float32_kinds": (10, 11),
    "narrow_kinds": (8,),
}


def fused() -> Prog:
    """A program reduced fused: ``x·y + Coord(0)`` in float32, and ``x < y``."""
    b = Prog.build([D.float32, D.float32])
    x, y = b.ins
    return b.finish(x * y + b.cast(b.coord(0), D.float32), b.less(x, y))


#: The (program, output) pairs whose reductions sources the tests draw.
REDUCTION_TERMS: Final[tuple[tuple[Prog, int], ...]] = (
    (identity(D.float32), 0), (identity(D.float64), 0), (identity(D.int32), 0), (identity(D.float16), 0),
    (fused(), 0), (fused(), 1),
)


def causal(acc: D.Dtype) -> Prog:
    """An attention program: the pair visible where key ≤ row, its logit the score."""
    b = Prog.build([acc])
    return b.finish(b.less_equal(b.coord(0), b.coord(1)), b.copy(b.ins[0]))


def attend_all(acc: D.Dtype) -> Prog:
    """An attention program: every pair visible, its logit the score."""
    b = Prog.build([acc])
    return b.finish(b.equal(b.coord(0), b.coord(0)), b.copy(b.ins[0]))


def masked(acc: D.Dtype) -> Prog:
    """An attention program: output 0 a bool load, output 1 the score plus a bias load."""
    b = Prog.build([acc, D.bool_, acc])
    return b.finish(b.copy(b.ins[1]), b.ins[0] + b.ins[2])

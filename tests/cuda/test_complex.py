"""Complex dtypes on nx.cuda: map computes every complex kind as the reference
evaluator does, bit for bit (NaN parts included); reduce and scan compute
complex Sum, Prod, Max, Min and Arg in lane order and by the odd/even network,
the host library's bits, within the contract's bounds against exact sums and
products; and what the statement declines is declined, writing nothing."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from nxkernel_core import dtype as D
from nxkernel_core import evaluator
from nxkernel_core import shape as SH
from nxkernel_core import spec as S
from nxkernel_core.answer import Answer
from nxkernel_core.array import Array
from nxkernel_core.dtype import Dtype
from nxkernel_core.kernel import Call, gamma, unit_roundoff
from nxkernel_core.kernels import kernel as record
from nxkernel_core.prog import Compare, Prog
from nxkernel_core.rig import host
from nxkernel_cuda import build, elementwise, reductions, terms
from nxkernel_cuda.device import CudaRig
from nxkernel_cuda.library import LIBRARY
from nxkernel_host.library import library as HOST

from .support import CI_NVRTC, Arr, canary, nvrtc_of, on, run, same_bits, untouched, values

COMPLEX = (D.complex64, D.complex128)
N = 300  # more than a block of 256 threads


def _part(dt: Dtype) -> Dtype:
    return D.float32 if dt is D.complex64 else D.float64


def cvalues(dt: Dtype, n: int, seed: int = 0) -> Arr:
    """``n`` complex elements: the part dtype's specials (±0, ±inf, NaNs with
    payloads of both signs, limits, subnormals) paired every way with drawn
    values and each other, both parts' bits kept."""
    part = _part(dt)
    re = values(part, n, seed=seed)
    im = np.roll(values(part, n, seed=seed + 7), seed + 3)
    pair = np.stack([re, im], axis=-1)
    return np.ascontiguousarray(pair).view(dt.numpy_dtype).reshape(n)


def _ops(dt: Dtype, n: int, count: int) -> list[Arr]:
    return [cvalues(dt, n, seed=5 * i) for i in range(count)]


def _on_host(spec: S.Map | S.Reduce | S.Scan, arrays: list[Arr], dtypes: list[Dtype]) -> list[Arr]:
    """The host library's results of ``spec`` over host elements ``arrays``."""
    shapes = record(spec.kernel).shapes(spec, [a.shape for a in arrays])
    assert not isinstance(shapes, SH.Error), shapes
    dsts = [Array.empty(dt, sh, host) for dt, sh in zip(dtypes, shapes, strict=True)]
    ops = [Array.from_numpy(np.ascontiguousarray(a), host) for a in arrays]
    assert getattr(HOST, spec.kernel)(spec, dsts, ops) is Answer.DONE
    return [d.to_numpy() for d in dsts]


def same_but_nans(got: Arr, want: Arr, dt: Dtype) -> bool:
    """Whether complex arrays have the same bits, part by part, but for NaN
    parts, which need only both be NaNs (bits the contract leaves open: the
    host library's Mul keeps the hardware's NaN, the reference a canonical
    one)."""
    part = _part(dt).numpy_dtype
    g, w = np.ascontiguousarray(got).view(part), np.ascontiguousarray(want).view(part)
    ng, nw = np.isnan(g), np.isnan(w)
    return bool(np.array_equal(ng, nw) and same_bits(g[~ng], w[~nw], _part(dt)))


def _map_declines(spec: S.Map, dsts: list[Array], ops: list[Array]) -> str | None:
    return LIBRARY.statement.declines(Call("map", spec, tuple(dsts), tuple(ops)))


def _check_map(dev: CudaRig, prog: Prog, ins: list[Arr]) -> None:
    n = ins[0].shape[0]
    spec = S.Map(prog, (S.PLAIN,) * prog.n_ins)
    answer, got = run(spec, [on(dev, a, dt) for a, dt in zip(ins, prog.ins, strict=True)], prog.out_dtypes)
    assert answer is Answer.DONE
    want = evaluator.evaluate(prog, ins, (n,))
    for k, dt in enumerate(prog.out_dtypes):
        assert same_bits(got[k], want[k], dt), (k, prog.nodes[prog.outs[k]])


# --------------------------------------------------------------------------
# map
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dt", COMPLEX, ids=lambda d: d.name)
def test_complex_arithmetic_equals_the_reference(dev: CudaRig, dt: Dtype) -> None:
    b = Prog.build([dt, dt])
    x, y = b.ins
    prog = b.finish(x + y, x - y, x * y, x / y, b.recip(x), -x, b.maximum(x, y), b.minimum(x, y),
                    b.maximum(x, x), b.minimum(y, y))
    _check_map(dev, prog, _ops(dt, N, 2))


@pytest.mark.parametrize("dt", COMPLEX, ids=lambda d: d.name)
def test_complex_comparisons_and_where_equal_the_reference(dev: CudaRig, dt: Dtype) -> None:
    b = Prog.build([dt, dt, D.bool_])
    x, y, c = b.ins
    outs = [b.binary(k, x, y) for k in Compare] + [b.binary(Compare.LESS_EQUAL, x, x)]
    prog = b.finish(*outs, b.where(c, x, y))
    x_h, y_h = _ops(dt, N, 2)
    y_h[::3] = x_h[::3]  # equal numbers, and equal real parts
    y_h.imag[1::3] = x_h.imag[1::3]
    _check_map(dev, prog, [x_h, y_h, values(D.bool_, N, seed=4)])


def test_complex_casts_equal_the_reference(dev: CudaRig) -> None:
    reals = (D.float64, D.float32, D.float16, D.bfloat16, D.float8_e4m3fn, D.float4_e2m1fn, D.int64,
             D.uint8, D.int4, D.bool_, D.bit)
    for dt in COMPLEX:
        other = D.complex128 if dt is D.complex64 else D.complex64
        b = Prog.build([dt])
        (x,) = b.ins
        prog = b.finish(b.cast(x, other), b.cast(x, dt), *(b.cast(x, r) for r in reals))
        _check_map(dev, prog, _ops(dt, N, 1))
        for half in (reals[:6], reals[6:]):
            b = Prog.build(list(half))
            prog = b.finish(*(b.cast(v, dt) for v in b.ins))
            _check_map(dev, prog, [values(r, N, seed=i) for i, r in enumerate(half)])


def test_complex_bitcasts_and_constants_equal_the_reference(dev: CudaRig) -> None:
    b = Prog.build([D.complex64, D.uint64, D.complex128])
    z, u, w = b.ins
    prog = b.finish(b.bitcast(z, D.float64), b.bitcast(z, D.int64), b.bitcast(u, D.complex64),
                    b.bitcast(w, D.complex128), z * b.const(D.complex64, complex(1.5, -np.inf)),
                    w + b.const(D.complex128, complex(-0.0, 2.0 ** -1074)), b.copy(w))
    ins = [cvalues(D.complex64, N), values(D.uint64, N), cvalues(D.complex128, N, seed=2)]
    _check_map(dev, prog, ins)


def test_complex_mul_and_div_are_the_hosts_bits(dev: CudaRig) -> None:
    # Drawn over a wide range of exponents, where an unfused product, a fused
    # one and another division formula round differently.
    rng = np.random.default_rng(11)
    for dt in COMPLEX:
        big = 100 if dt is D.complex64 else 900
        parts = rng.standard_normal((4, 2000)) * np.exp2(rng.integers(-big, big, (4, 2000)))
        x = (parts[0] + 1j * parts[1]).astype(dt.numpy_dtype)
        y = (parts[2] + 1j * parts[3]).astype(dt.numpy_dtype)
        b = Prog.build([dt, dt])
        p, q = b.ins
        prog = b.finish(p * q, p / q)
        spec = S.Map(prog, (S.PLAIN, S.PLAIN))
        ans, got = run(spec, [on(dev, x), on(dev, y)], prog.out_dtypes)
        assert ans is Answer.DONE
        want = _on_host(spec, [x, y], list(prog.out_dtypes))
        ref = evaluator.evaluate(prog, [x, y], (x.size,))
        for k in range(2):
            assert same_bits(got[k], ref[k], dt), (dt.name, k)
            assert same_but_nans(got[k], want[k], dt), (dt.name, k)


def test_complex_mul_errs_by_at_most_2u(dev: CudaRig) -> None:
    rng = np.random.default_rng(3)
    for dt in COMPLEX:
        parts = rng.standard_normal((4, 500))
        x = (parts[0] + 1j * parts[1]).astype(dt.numpy_dtype)
        y = (parts[2] + 1j * parts[3]).astype(dt.numpy_dtype)
        b = Prog.build([dt, dt])
        p, q = b.ins
        ans, got = run(S.Map(b.finish(p * q), (S.PLAIN, S.PLAIN)), [on(dev, x), on(dev, y)], [dt])
        assert ans is Answer.DONE
        u = Fraction(unit_roundoff(_part(dt)))
        for g, a, c in zip(got[0], x, y, strict=True):
            ar, ai, br, bi = (Fraction(float(v)) for v in (a.real, a.imag, c.real, c.imag))
            er, ei = ar * br - ai * bi, ar * bi + ai * br
            dr, di = Fraction(float(g.real)) - er, Fraction(float(g.imag)) - ei
            # Normwise, squared: |got - exact|² <= (2u)² |exact|².
            assert dr * dr + di * di <= 4 * u * u * (er * er + ei * ei)


@pytest.mark.parametrize("dt", COMPLEX, ids=lambda d: d.name)
def test_a_padded_complex_load_reads_its_fill(dev: CudaRig, dt: Dtype) -> None:
    b = Prog.build([dt])
    prog = b.finish(b.ins[0] * b.ins[0])
    fill = np.array([complex(1.5, -np.inf)], dt.numpy_dtype).tobytes()
    spec = S.Map(prog, (S.Padded(fill, S.Pad((2,), (1,), (1,))),))
    x = cvalues(dt, 6)
    assert _map_declines(spec, [canary(dev, dt, (14,))], [on(dev, x)]) is None
    answer, got = run(spec, [on(dev, x)], [dt])
    assert answer is Answer.DONE
    assert same_but_nans(got[0], _on_host(spec, [x], [dt])[0], dt)


@pytest.mark.parametrize("major", CI_NVRTC)
def test_complex_sources_compile_for_every_ci_arch(major: int) -> None:
    sources = [reductions.arrays_source()]
    for dt in COMPLEX:
        other = D.complex128 if dt is D.complex64 else D.complex64
        b = Prog.build([dt, dt, D.bool_])
        x, y, c = b.ins
        prog = b.finish(x * y / x + y - (-x), b.recip(x), b.maximum(x, y), b.minimum(x, y),
                        b.binary(Compare.LESS, x, y), b.where(c, x, y), b.cast(x, other),
                        b.cast(x, D.float16), b.cast(b.cast(x, D.int8), dt), b.const(dt, 1.5j))
        sources += [elementwise.map_source(prog), terms.reductions_source(prog, 0)]
    for source in sources:
        for arch in build.CI_ARCHES:
            assert build.compile(source, arch, nvrtc_of(major)).arch == arch


# --------------------------------------------------------------------------
# Declines
# --------------------------------------------------------------------------


def test_a_misfit_complex_map_is_refused_before_any_write(dev: CudaRig) -> None:
    b = Prog.build([D.complex64])
    prog = b.finish(b.ins[0] * b.ins[0])
    spec = S.Map(prog, (S.PLAIN,))
    wrong = [on(dev, cvalues(D.complex128, 4))]
    dst = canary(dev, D.complex64, (4,))
    assert LIBRARY.map(spec, [dst], wrong) is Answer.WRONG_DTYPE
    assert untouched(dst)
    short = canary(dev, D.complex64, (3,))
    assert LIBRARY.map(spec, [short], [on(dev, cvalues(D.complex64, 4))]) is Answer.SHAPE_MISMATCH
    assert untouched(short)



# --------------------------------------------------------------------------
# reduce and scan
# --------------------------------------------------------------------------


def _ident(dt: Dtype) -> Prog:
    b = Prog.build([dt])
    return b.finish(b.ins[0])


def _cterms(dt: Dtype, shape: tuple[int, ...], seed: int, near_one: bool = False) -> Arr:
    """Complex terms whose sum (product) depends on the order: magnitudes over
    2^±20, both signs, exact cancellations and signed zeros; or factors near 1,
    so a product of thousands stays finite and rounds often."""
    rng = np.random.default_rng(seed)
    re, im = rng.standard_normal((2, *shape))
    if near_one:
        re, im = 1.0 + re / 64, im / 64
    else:
        re *= np.exp2(rng.integers(-20, 21, size=shape))
        im *= np.exp2(rng.integers(-20, 21, size=shape))
    x: Arr = (re + 1j * im).astype(dt.numpy_dtype)
    if not near_one and shape[-1] >= 4:
        x[..., 1] = -x[..., 0]
        x[..., 3] = complex(-0.0, -0.0)
    return x


def _reduce_both(dev: CudaRig, spec: S.Reduce, x: Arr, **kw: object) -> tuple[list[Arr], list[Arr]]:
    """Ours on ``dev`` (under lane plan ``kw``), then the host library's."""
    answer, ours = run(spec, [on(dev, x)], list(spec.result_dtypes()), **kw)
    assert answer is Answer.DONE
    return ours, _on_host(spec, [x], list(spec.result_dtypes()))


def _same_results(ours: list[Arr], theirs: list[Arr], dtypes: tuple[Dtype, ...]) -> None:
    for o, t, d in zip(ours, theirs, dtypes, strict=True):
        if d.is_complex:
            assert same_but_nans(o, t, d), d
        else:
            assert same_bits(o, t, d), d


@pytest.mark.parametrize("dt", COMPLEX, ids=lambda d: d.name)
@pytest.mark.parametrize("n", [0, 1, 10, 37, 2500])
def test_complex_reductions_have_the_host_librarys_bits(dev: CudaRig, dt: Dtype, n: int) -> None:
    other = D.complex128 if dt is D.complex64 else D.complex64
    reds: list[tuple[S.Reduction, int, Dtype]] = [(S.Monoid.SUM, 0, dt), (S.Monoid.SUM, 0, other)]
    if dt is D.complex64 and n > 0:
        reds += [(S.Monoid.MAX, 0, dt), (S.Monoid.MIN, 0, dt), (S.Arg(S.Extreme.MAX), 0, dt),
                 (S.Arg(S.Extreme.MIN), 0, dt)]
    x = _cterms(dt, (3, n), 11)
    if n >= 37:  # NaN parts, ties of the real part, both zeros
        x[0, 5] = complex(np.nan, 1.0)
        x[0, 30] = complex(2.0, np.nan)
        x[1, 7] = x[1, 8] = complex(1e9, -1.0)
        x[1, 9] = complex(1e9, 2.0)
        x[2, 3], x[2, 4] = complex(0.0, 0.0), complex(-0.0, 0.0)
    spec = S.Reduce(_ident(dt), (S.PLAIN,), (1,), tuple(reds))
    plans: list[dict[str, object]] = [{}, {"threads": 32, "group_chunks": 1}]
    for kw in plans if n > 1024 else plans[:1]:
        ours, theirs = _reduce_both(dev, spec, x, **kw)
        _same_results(ours, theirs, spec.result_dtypes())
    prod = S.Reduce(_ident(dt), (S.PLAIN,), (1,), ((S.Monoid.PROD, 0, dt), (S.Monoid.PROD, 0, other)))
    for kw in plans if n > 1024 else plans[:1]:
        ours, theirs = _reduce_both(dev, prod, _cterms(dt, (3, n), 12, near_one=True), **kw)
        _same_results(ours, theirs, prod.result_dtypes())


@pytest.mark.parametrize("dt", COMPLEX, ids=lambda d: d.name)
def test_a_complex_prod_multiplies_from_its_first_term(dev: CudaRig, dt: Dtype) -> None:
    # 1·x would make -0 parts +0 and an infinite part's partner NaN.
    x = np.array([[complex(-0.0, -0.0)], [complex(np.inf, 1.0)], [complex(-0.0, np.inf)]], dt.numpy_dtype)
    spec = S.Reduce(_ident(dt), (S.PLAIN,), (1,), ((S.Monoid.PROD, 0, dt),))
    answer, got = run(spec, [on(dev, x)], [dt])
    assert answer is Answer.DONE
    assert same_bits(got[0], x[:, 0], dt)
    empty = np.zeros((2, 0), dt.numpy_dtype)
    answer, got = run(spec, [on(dev, empty)], [dt])
    assert answer is Answer.DONE and same_bits(got[0], np.ones(2, dt.numpy_dtype), dt)


@pytest.mark.parametrize("dt", COMPLEX, ids=lambda d: d.name)
def test_a_fused_complex_program_reduces_as_its_map(dev: CudaRig, dt: Dtype) -> None:
    b = Prog.build([dt, dt])
    x, y = b.ins
    prog = b.finish(x * y - x / y)
    xs, ys = _cterms(dt, (4, 50), 1), _cterms(dt, (4, 50), 2, near_one=True)
    spec = S.Reduce(prog, (S.PLAIN, S.PLAIN), (1,), ((S.Monoid.SUM, 0, dt),))
    answer, got = run(spec, [on(dev, xs), on(dev, ys)], [dt])
    assert answer is Answer.DONE
    terms = evaluator.evaluate(prog, [xs, ys], (4, 50))[0]
    want = _on_host(S.Reduce(_ident(dt), (S.PLAIN,), (1,), ((S.Monoid.SUM, 0, dt),)), [terms], [dt])
    assert same_bits(got[0], want[0], dt)


@pytest.mark.parametrize("dt", COMPLEX, ids=lambda d: d.name)
@pytest.mark.parametrize("red", [S.Monoid.SUM, S.Monoid.PROD, S.Monoid.MAX, S.Monoid.MIN], ids=str)
def test_complex_scans_have_the_host_librarys_bits(dev: CudaRig, dt: Dtype, red: S.Monoid) -> None:
    mul = red is S.Monoid.PROD
    x = _cterms(dt, (3, 300), 5, near_one=mul)
    if not mul:
        x[0, 10] = complex(np.nan, 0.0)
        x[1, 20:23] = complex(3e6, 1.0)
    carry = _cterms(dt, (3,), 6, near_one=mul)
    for reverse, with_carry, chunk in ((False, False, None), (True, True, 8), (False, True, 4)):
        spec = S.Scan(_ident(dt), (S.PLAIN,), 1, red, 0, dt, reverse=reverse, carry=with_carry)
        arrays = [carry, x] if with_carry else [x]
        answer, ours = run(spec, [on(dev, a) for a in arrays], [dt], chunk=chunk)
        assert answer is Answer.DONE
        theirs = _on_host(spec, arrays, [dt])
        assert same_but_nans(ours[0], theirs[0], dt), (reverse, with_carry, chunk)


def _exact(v: complex) -> tuple[Fraction, Fraction]:
    return Fraction(v.real), Fraction(v.imag)


@pytest.mark.parametrize("dt", COMPLEX, ids=lambda d: d.name)
def test_complex_sums_and_products_keep_the_contracts_bounds(dev: CudaRig, dt: Dtype) -> None:
    n = 300
    u = unit_roundoff(_part(dt))
    x = _cterms(dt, (2, n), 8)
    f = _cterms(dt, (2, n), 9, near_one=True)
    spec = S.Reduce(_ident(dt), (S.PLAIN,), (1,), ((S.Monoid.SUM, 0, D.complex128),))
    prod = S.Reduce(_ident(dt), (S.PLAIN,), (1,), ((S.Monoid.PROD, 0, D.complex128),))
    sums = run(spec, [on(dev, x)], [D.complex128])[1][0]
    prods = run(prod, [on(dev, f)], [D.complex128])[1][0]
    for r in range(2):
        terms = [_exact(complex(v)) for v in x[r]]
        for k in range(2):  # each part a float sum: γ(n − 1) Σ|x|
            exact = sum(t[k] for t in terms)
            err = abs(_exact(complex(sums[r]))[k] - exact)
            assert err <= Fraction(gamma(n - 1, u)) * sum(abs(t[k]) for t in terms)
        pr, pi = Fraction(1), Fraction(0)
        for v in f[r]:
            br, bi = _exact(complex(v))
            pr, pi = pr * br - pi * bi, pr * bi + pi * br
        gr, gi = _exact(complex(prods[r]))
        g = Fraction(gamma(2 * n - 2, u))
        assert (gr - pr) ** 2 + (gi - pi) ** 2 <= g * g * (pr * pr + pi * pi)


def test_complex128_extremes_are_declined_writing_nothing(dev: CudaRig) -> None:
    x = on(dev, _cterms(D.complex128, (2, 8), 1))
    for red in (S.Monoid.MAX, S.Monoid.MIN, S.Arg(S.Extreme.MAX)):
        spec = S.Reduce(_ident(D.complex128), (S.PLAIN,), (1,), ((red, 0, D.complex128),))
        dsts = [canary(dev, d, (2,)) for d in spec.result_dtypes()]
        assert LIBRARY.statement.declines(Call("reduce", spec, tuple(dsts), (x,))) is not None
        assert LIBRARY.reduce(spec, dsts, [x]) is Answer.DECLINED
        assert all(untouched(d) for d in dsts)
    spec = S.Reduce(_ident(D.complex128), (S.PLAIN,), (1,), ((S.Monoid.SUM, 0, D.complex128),))
    assert LIBRARY.statement.declines(Call("reduce", spec, (canary(dev, D.complex128, (2,)),), (x,))) is None
    scan = S.Scan(_ident(D.complex128), (S.PLAIN,), 1, S.Monoid.MAX, 0, D.complex128)
    dst = canary(dev, D.complex128, (2, 8))
    assert LIBRARY.statement.declines(Call("scan", scan, (dst,), (x,))) is None


def test_a_misfit_complex_reduction_is_refused_before_any_write(dev: CudaRig) -> None:
    x = on(dev, _cterms(D.complex64, (2, 8), 1))
    spec = S.Reduce(_ident(D.complex64), (S.PLAIN,), (1,), ((S.Monoid.MAX, 0, D.complex128),))
    dst = canary(dev, D.complex128, (2,))
    assert LIBRARY.reduce(spec, [dst], [x]) is Answer.WRONG_DTYPE
    assert untouched(dst)

"""The library protocol S, statements, error factors and the declining library."""

from __future__ import annotations

import json
import math

import pytest

from nxkernel_core import dtype as D
from nxkernel_core import rig
from nxkernel_core.answer import Answer
from nxkernel_core.kernel import (
    KERNEL_NAMES,
    KIND_ULPS,
    Call,
    KernelStatement,
    Library,
    Statement,
    check_error_factor,
    check_library,
    declining_library,
    gamma,
    unit_roundoff,
)


def statement(**changes: object) -> Statement:
    """A valid statement of library "t", with ``changes`` applied."""
    fields: dict[str, object] = {
        "library": "t",
        "summary": "a test statement",
        "computes": {k: KernelStatement("every case", lambda call: None) for k in KERNEL_NAMES},
        "association": {"sum": "left to right"},
        "error_factor": lambda k, dt: gamma(k, unit_roundoff(dt)),
        "algorithms": {},
        "open_choices": {},
        "concurrent": False,
    }
    fields.update(changes)
    return Statement(**fields)  # type: ignore[arg-type]


class Untouchable:
    """An array stand-in that fails the test on any use."""

    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"the library read .{name} of an array")


# ---- S ---------------------------------------------------------------------------


def test_kernel_names_are_the_specs_kernels_and_the_protocols_methods() -> None:
    assert len(KERNEL_NAMES) == len(set(KERNEL_NAMES)) == 20
    for k in KERNEL_NAMES:
        assert callable(getattr(Library, k)), k
        assert getattr(Library, k).__doc__, k
    spec = pytest.importorskip("nxkernel_core.spec")
    assert set(spec.KERNELS) == set(KERNEL_NAMES)


def test_a_call_names_a_kernel_and_its_spec_agrees() -> None:
    with pytest.raises(ValueError, match=r"unknown kernel 'sorted' \(did you mean 'sort'\?\)"):
        Call("sorted", object(), (), ())

    class FftSpec:
        kernel = "fft"

    with pytest.raises(ValueError, match="a sort call got a spec of kernel 'fft'"):
        Call("sort", FftSpec(), (), ())
    assert Call("fft", FftSpec(), (), ()).kernel == "fft"


def test_check_library_lists_every_problem() -> None:
    class Half:
        name = "half"
        statement = statement(library="other")

        def computes_on(self, device: object) -> bool:
            return True

        def map(self, spec: object) -> Answer:
            return Answer.DECLINED

    with pytest.raises(TypeError) as raised:
        check_library(Half())
    message = str(raised.value)
    assert message.startswith("'half' is not a kernel library: lacks reduce;")
    assert "lacks attention" in message and "lacks map" not in message
    assert "its statement is of library 'other'" in message
    assert "its map(spec: 'object') -> 'Answer' does not take 3 positional arguments" in message


def test_check_library_holds_the_error_factor_to_its_ceiling() -> None:
    class Loose:
        name = "loose"
        statement = statement(library="loose", error_factor=lambda k, dt: 1.0)

    with pytest.raises(TypeError, match=r"its error factor fails: AssertionError: loose: e\(16\)"
                       r" at float32 is 1.0, not within"):
        check_library(Loose())


# ---- statements ------------------------------------------------------------------


def test_a_statement_names_missing_and_unknown_kernels() -> None:
    computes = {k: KernelStatement("x", lambda call: None) for k in KERNEL_NAMES}
    del computes["scan"], computes["eig"]
    computes["sortt"] = KernelStatement("x", lambda call: None)
    with pytest.raises(ValueError, match=r"Statement of t: it states no scan, eig; 'sortt' is"
                       r" not a kernel \(did you mean 'sort'\?\)"):
        statement(computes=computes)


def test_a_statement_takes_only_kernel_statements() -> None:
    computes: dict[str, object] = {k: KernelStatement("x", lambda call: None)
                                   for k in KERNEL_NAMES}
    computes["fft"] = "every case"
    with pytest.raises(ValueError, match=r"computes\['fft'\] is a str, not a KernelStatement"):
        statement(computes=computes)


def test_a_statements_mappings_are_read_only_copies() -> None:
    association = {"sum": "left to right"}
    s = statement(association=association)
    association["sum"] = "changed"
    assert s.association["sum"] == "left to right"
    with pytest.raises(TypeError):
        s.association["prod"] = "x"  # type: ignore[index]


def test_a_statement_states_ulps_per_float_dtype_and_inexact_kind() -> None:
    f64 = {k: b64 for k, (_, b64) in KIND_ULPS.items()}
    bounds = {"float64": f64, "float16": dict.fromkeys(KIND_ULPS, 1)}
    s = statement(ulps=bounds)
    f64["exp"] = 0
    assert s.ulps["float64"]["exp"] == 2 and s.ulps["float16"]["tan"] == 1
    with pytest.raises(TypeError):
        s.ulps["float64"]["exp"] = 1  # type: ignore[index]
    assert statement().ulps == {}
    assert json.loads(json.dumps(s.to_json()))["ulps"]["float16"]["pow"] == 1
    assert "float16           exp 1, exp2 1" in s.describe()


def test_a_statement_refuses_misstated_ulps() -> None:
    f32 = {k: b32 for k, (b32, _) in KIND_ULPS.items()}
    wrong = {
        "float64": {**{k: 2 for k in KIND_ULPS if k != "erf"}, "tan": 3},
        "float32": {**f32, "atan3": 1},
        "float16": dict.fromkeys(KIND_ULPS, 2),
        "int32": {},
    }
    with pytest.raises(ValueError) as e:
        statement(ulps=wrong)
    msg = str(e.value)
    assert msg.startswith("Statement of t: ")
    assert "ulps['float64'] states no erf" in msg
    assert "ulps['float64']['tan'] = 3: not an int in [0, 2]" in msg
    assert "ulps['float32']['atan3']: not an inexact kind (did you mean 'atan" in msg
    assert "ulps['float16']['exp'] = 2: not an int in [0, 1]" in msg
    assert "ulps['int32']: not a float dtype" in msg
    assert "ulps['float32']['tan']" not in msg  # 4 is upstream's float32 bound of tan


def test_a_statement_declines_through_its_kernels_predicate() -> None:
    computes = {k: KernelStatement("every case", lambda call: None) for k in KERNEL_NAMES}
    computes["fft"] = KernelStatement(
        "no 3-d transforms",
        lambda call: "3-d" if len(getattr(call.spec, "axes", ())) == 3 else None)

    class FftSpec:
        kernel = "fft"

        def __init__(self, axes: tuple[int, ...]) -> None:
            self.axes = axes

    s = statement(computes=computes)
    assert s.declines(Call("fft", FftSpec((0, 1, 2)), (), ())) == "3-d"
    assert s.declines(Call("fft", FftSpec((0,)), (), ())) is None
    assert s.declines(Call("sort", object(), (), ())) is None


def test_describe_and_to_json_show_every_part() -> None:
    s = statement(algorithms={"logsumexp": "two passes " * 20}, concurrent=True)
    text = s.describe()
    assert text.startswith("t: a test statement\n  concurrent: yes")
    for k in KERNEL_NAMES:
        assert f"    {k:<18}every case" in text
    assert "e(K) ≤ γ(2K + 2), at K = 16, 1024, 65536" in text
    assert f"    complex128        {gamma(16, 2.0**-53):.3g} ≤ {gamma(34, 2.0**-53):.3g}" in text
    assert "  open choices:\n    (none stated)" in text
    assert max(len(line) for line in text.splitlines()) <= 100
    data = json.loads(json.dumps(s.to_json()))
    assert data["library"] == "t" and data["concurrent"] is True
    assert data["computes"] == {k: "every case" for k in KERNEL_NAMES}
    assert data["association"] == {"sum": "left to right"}
    [row] = [r for r in data["error_factor"] if r["dtype"] == "float32" and r["K"] == 16]
    u = 2.0**-24
    assert row == {"dtype": "float32", "K": 16, "e": gamma(16, u), "ceiling": gamma(34, u)}


# ---- error bounds ----------------------------------------------------------------


@pytest.mark.parametrize(("dt", "exponent"), [
    (D.float64, 53), (D.float32, 24), (D.float16, 11), (D.bfloat16, 8),
    (D.float8_e4m3fn, 4), (D.float8_e5m2, 3), (D.float4_e2m1fn, 2),
    (D.complex128, 53), (D.complex64, 24),
])
def test_unit_roundoff(dt: D.Dtype, exponent: int) -> None:
    assert unit_roundoff(dt) == 2.0**-exponent


@pytest.mark.parametrize("dt", [D.int32, D.uint4, D.bool_, D.bit])
def test_unit_roundoff_of_a_dtype_that_does_not_round(dt: D.Dtype) -> None:
    with pytest.raises(ValueError, match=f"{dt.name} is not a float or complex dtype"):
        unit_roundoff(dt)


def test_gamma() -> None:
    u = 2.0**-24
    assert gamma(0, u) == 0.0
    assert gamma(1, u) == u / (1 - u)
    assert gamma(3, 0.25) == 3.0
    assert gamma(4, 0.25) == math.inf
    assert gamma(5, 0.25) == math.inf
    with pytest.raises(ValueError, match="negative"):
        gamma(-1, u)


def test_check_error_factor_holds_e_to_the_contracts_ceiling() -> None:
    dtypes, ks = (D.float32, D.float64, D.complex64, D.complex128), (0, 1, 7, 1 << 20)
    check_error_factor(statement(), dtypes, ks)
    ceiling = statement(error_factor=lambda k, dt: gamma(2 * k + 2, unit_roundoff(dt)))
    check_error_factor(ceiling, dtypes, ks)
    over = statement(error_factor=lambda k, dt: gamma(2 * k + 3, unit_roundoff(dt)))
    with pytest.raises(AssertionError, match=r"t: e\(0\) at float32 is .* not within"):
        check_error_factor(over, dtypes, ks)
    narrow = statement(error_factor=lambda k, dt: gamma(2 * k + 2, 2.0**-24))
    with pytest.raises(AssertionError, match=r"e\(0\) at float64"):
        check_error_factor(narrow, dtypes, ks)
    with pytest.raises(AssertionError, match="nan"):
        check_error_factor(statement(error_factor=lambda k, dt: math.nan), dtypes, ks)
    with pytest.raises(AssertionError, match="-1"):
        check_error_factor(statement(error_factor=lambda k, dt: -1.0), dtypes, ks)


# ---- the declining library -------------------------------------------------------


def test_the_declining_library_keeps_the_protocol_and_declines_everything() -> None:
    lib: Library = declining_library()
    assert lib.name == "nx.declining" and isinstance(lib, Library)
    assert check_library(lib) is lib
    assert lib.computes_on(rig.host)
    arrays = [Untouchable(), Untouchable()]
    for k in KERNEL_NAMES:
        assert getattr(lib, k)(Untouchable(), arrays, arrays) is Answer.DECLINED, k
        reason = lib.statement.declines(Call(k, object(), (), ()))
        assert reason == "nx.declining declines every case", k


def test_the_declining_librarys_statement_is_complete_and_within_bounds() -> None:
    s = declining_library("other.name").statement
    assert s.library == "other.name" and s.concurrent
    assert set(s.computes) == set(KERNEL_NAMES)
    check_error_factor(s, (D.float32, D.float64, D.complex64, D.complex128), (0, 1, 1 << 30))
    assert "other.name: declines every case" in s.describe()
    json.dumps(s.to_json())

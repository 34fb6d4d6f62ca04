"""nxkernel_cuda.build: every source compiles for sm_80 and sm_90 by NVRTC 12
and NVRTC 13, without a GPU; the cache, the errors and rendering."""

from __future__ import annotations

import json
import logging
import os
import re
import string
from pathlib import Path

import pytest

from nxkernel_cuda import build, cache, catalog, nvrtc
from nxkernel_cuda.build import CompileError, Source
from nxkernel_cuda.device import EmuDevice
from nxkernel_cuda.emulator import driver

from . import copy_kernel as copy
from . import lane_sum, probe
from .support import CI_NVRTC, needs_nvrtc, nvrtc_of


def _every_source() -> list[Source]:
    return [*catalog.sources(), probe.probe_source(), lane_sum.source(), copy.source()]


@pytest.mark.parametrize("major", CI_NVRTC)
def test_nvrtc_comes_from_the_wheel(major: int) -> None:
    compiler = nvrtc_of(major)
    assert compiler.version[0] == major and "/nvidia/" in compiler.path
    assert {"sm_80", "sm_90"} <= set(compiler.arches)


@needs_nvrtc
def test_without_a_driver_the_newest_nvrtc_compiles(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(nvrtc.VARIABLE, raising=False)
    if nvrtc.driver_version() is not None:
        pytest.skip("this machine has a CUDA driver")
    assert nvrtc.chosen() == nvrtc.found()[0]
    assert build.nvrtc_version() == max(n.version for n in nvrtc.found())


@pytest.mark.parametrize("major", CI_NVRTC)
@pytest.mark.parametrize("arch", build.CI_ARCHES)
@pytest.mark.parametrize("source", _every_source(), ids=lambda s: s.name)
def test_every_source_and_instantiation_compiles(source: Source, arch: str, major: int) -> None:
    cubin = build.compile(source, arch, nvrtc_of(major))
    assert cubin.path.read_bytes()[:4] == b"\x7fELF"  # a cubin, not PTX
    assert set(cubin.lowered) == set(source.kernels)
    assert cubin.arch == arch


def test_the_catalog_lists_every_cu_file() -> None:
    listed = {s.name for s in catalog.sources()}
    files = {p.name for p in build.KERNEL_DIR.glob("*.cu")}
    assert files <= listed, f"kernels/ has sources no family lists: {sorted(files - listed)}"


def test_lane_sum_lists_every_block_size() -> None:
    assert lane_sum.source().kernels == tuple(lane_sum.kernel_name(t) for t in lane_sum.THREADS)


@needs_nvrtc
def test_compile_caches_on_disk_by_source_and_arch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NXKERNEL_CACHE", str(tmp_path))
    src = Source("tiny.cu", 'extern "C" __global__ void tiny(int* x) { x[threadIdx.x] = 1; }', ("tiny",))
    first = build.compile(src, "sm_90")
    assert first.path.parent == tmp_path / "cuda"
    build._built.clear()  # forget the in-process cache: the next compile reads the disk
    monkeypatch.setattr(build, "_nvrtc_compile", lambda *a: pytest.fail("compiled again"))
    again = build.compile(src, "sm_90")
    assert again.path == first.path and dict(again.lowered) == dict(first.lowered)
    monkeypatch.undo()
    monkeypatch.setenv("NXKERNEL_CACHE", str(tmp_path))
    other = build.compile(src, "sm_80")
    changed = build.compile(Source("tiny.cu", src.text + "\n", ("tiny",)), "sm_90")
    assert len({first.path, other.path, changed.path}) == 3


@needs_nvrtc
def test_compile_error_carries_source_options_and_log() -> None:
    bad = Source("bad.cu", "// line one\n__global__ void k(int* x) { x[0] = undefined_y; }\n", ("k",))
    with pytest.raises(CompileError) as info:
        build.compile(bad, "sm_90")
    e = info.value
    assert e.name == "bad.cu" and e.kernels == ("k",) and e.arch == "sm_90"
    assert e.source == bad.text
    assert "--fmad=false" in e.options and "--gpu-architecture=sm_90" in e.options
    assert "undefined_y" in e.log
    assert "2 | __global__ void k" in e.numbered_source()
    assert "2 | __global__ void k" in str(e) and "undefined_y" in str(e)


@needs_nvrtc
def test_a_missing_kernel_is_a_compile_error() -> None:
    src = Source("nokernel.cu", 'extern "C" __global__ void here(int* x) {}', ("here", "absent"))
    with pytest.raises(CompileError, match="absent"):
        build.compile(src, "sm_90")


@needs_nvrtc
def test_compile_refuses_unknown_arches() -> None:
    with pytest.raises(ValueError, match="sm_XX"):
        build.compile(lane_sum.source(), "hopper")
    with pytest.raises(ValueError, match="compiles for"):
        build.compile(lane_sum.source(), "sm_20")


def test_options_keep_ieee_arithmetic() -> None:
    opts = build.compile_options("sm_90")
    assert opts[0] == "--gpu-architecture=sm_90"
    for o in ("--fmad=false", "-prec-div=true", "-prec-sqrt=true", "-ftz=false", "-std=c++17"):
        assert o in opts


def test_render_fills_named_slots_and_names_mistakes() -> None:
    t = string.Template("${a} + ${b}")
    assert build.render(t, a="1", b="2") == "1 + 2"
    with pytest.raises(ValueError, match="no value for b"):
        build.render(t, a="1")
    with pytest.raises(ValueError, match="no slot named c"):
        build.render(t, a="1", b="2", c="3")


def test_copy_code_is_a_pure_rendering() -> None:
    code = copy.copy_code(4)
    assert code == copy.copy_code(4)
    assert 'extern "C" __global__ void nxk_copy_u32(nxk_u32* __restrict__ dst' in code


def test_sources_validate_their_fields() -> None:
    with pytest.raises(ValueError, match=r"\.cu"):
        Source("x.cpp", "", ("k",))
    with pytest.raises(ValueError, match="non-empty"):
        Source("x.cu", "", ())
    with pytest.raises(ValueError, match="twice"):
        Source("x.cu", "", ("k", "k"))


def test_cache_root_follows_the_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NXKERNEL_CACHE", str(tmp_path / "c"))
    assert cache.folder("cuda") == tmp_path / "c" / "cuda"
    monkeypatch.delenv("NXKERNEL_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert cache.root() == tmp_path / "x" / "nxkernel"
    assert cache.digest("ab", "c") != cache.digest("a", "bc")


@needs_nvrtc
def test_compiles_cache_hits_and_rebuilds_are_logged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("NXKERNEL_CACHE", str(tmp_path))
    monkeypatch.setattr(build, "_built", {})
    src = Source("logged.cu", 'extern "C" __global__ void logged(int* x) { x[0] = 2; }', ("logged",))
    v = "{}.{}".format(*build.nvrtc_version())
    with caplog.at_level(logging.DEBUG, logger="nxkernel.cuda.build"):
        cubin = build.compile(src, "sm_90")
        build._built.clear()
        build.compile(src, "sm_90")
        build._built.clear()
        cubin.path.with_suffix(".json").write_text("{damaged")
        build.compile(src, "sm_90")
    messages = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "nxkernel.cuda.build"]
    assert [level for level, _ in messages] == ["INFO", "DEBUG", "INFO", "INFO"], messages
    assert re.fullmatch(rf"compiled logged\.cu for sm_90 \(NVRTC {v}\) in \d+\.\d\d s", messages[0][1])
    assert messages[1][1] == f"cache hit: logged.cu for sm_90 (NVRTC {v}), {cubin.path}"
    assert messages[2][1] == (f"cache entry damaged or incomplete, rebuilding: logged.cu for sm_90"
                              f" (NVRTC {v}), {cubin.path}")
    assert messages[3][1].startswith("compiled logged.cu for sm_90")


def test_emulator_builds_and_cache_hits_are_logged(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(driver, "_built", {})
    with caplog.at_level(logging.DEBUG, logger="nxkernel.cuda.emulator"):
        first = driver.build(lane_sum.source())
        driver._built.clear()
        assert driver.build(lane_sum.source()) == first
    messages = [r.getMessage() for r in caplog.records if r.name == "nxkernel.cuda.emulator"]
    # On an empty cache the emulator's precompiled header is built first.
    assert all(re.fullmatch(r"compiled the emulator's precompiled header \(g\+\+\) in \d+\.\d\d s", m)
               for m in messages if "lane_sum" not in m), messages
    messages = [m for m in messages if "lane_sum" in m]
    # The first build compiles, or finds the object the shared cache holds.
    assert re.fullmatch(r"compiled lane_sum\.cu for the emulator \(g\+\+\) in \d+\.\d\d s", messages[0]) \
        or messages[0] == f"cache hit: lane_sum.cu for the emulator, {first}", messages
    assert messages[-1] == f"cache hit: lane_sum.cu for the emulator, {first}"


def test_a_device_dumps_each_source_and_its_options_before_it_builds_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """NXKERNEL_CUDA_DUMP: the text and the options reach the folder even for
    a source the compiler then refuses (so they are written first), once per
    device; unset, nothing is written."""
    bad = Source("refused.cu", 'extern "C" __global__ void k() { no_such_name(); }\n', ("k",))
    monkeypatch.delenv(build.DUMP_VARIABLE, raising=False)
    assert build.dump(bad, "cuda-emu:7", lambda: ("g++",)) is None
    monkeypatch.setenv(build.DUMP_VARIABLE, str(tmp_path / "dump"))
    dev = EmuDevice(7)
    with pytest.raises(CompileError):
        dev.load(bad)
    (text,) = (tmp_path / "dump").glob("refused-*-cuda-emu_7.cu")
    assert text.read_text() == bad.text
    record = json.loads(text.with_suffix(".json").read_text())
    assert record == {"source": "refused.cu", "kernels": ["k"], "device": "cuda-emu:7",
                      "options": [os.environ.get("NXKERNEL_CXX", "g++"), *driver.FLAGS,
                                  *(driver.CHECK_FLAGS if driver.memcheck() else ())]}
    good = lane_sum.source()
    module = dev.load(good)
    assert dev.load(good) is module
    assert sorted(p.name.split("-")[0] for p in (tmp_path / "dump").glob("*.cu")) == ["lane_sum", "refused"]
    assert (tmp_path / "dump" / f"lane_sum-{good.key[:16]}-cuda-emu_7.json").exists()
    nvrtc_options = ("nvrtc", *build.compile_options("sm_90"))
    gpu = build.dump(good, "cuda:0", lambda: nvrtc_options)
    assert gpu is not None and gpu.read_text() == good.text
    assert json.loads(gpu.with_suffix(".json").read_text())["options"] == list(nvrtc_options)

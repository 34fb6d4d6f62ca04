"""The kernel cache loads only what it built (nxkernel_cuda.cache, the emulator's
driver): private folders, sealed entries, and a rebuild with a warning, never
a load, for an entry that is planted, swapped, truncated, corrupted or emptied.

Each test forgets the driver's in-process caches, as a new process would, and
builds one-line sources of its own (a tag in a comment makes each test's keys
its own) in a cache folder shared by the module, so that the precompiled
header is built once; a test that spoils that header has a folder of its own.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from nxkernel_core.array import Array
from nxkernel_cuda import build, cache
from nxkernel_cuda.build import Source
from nxkernel_cuda.device import EmuDevice
from nxkernel_cuda.emulator import driver

from .support import needs_nvrtc

X = np.arange(-3, 13, dtype=np.int32)


def _kernel(op: str, tag: str) -> Source:
    """``y[i] = x[i] op x[i]``, its key made its own by ``tag``."""
    return Source(f"cache_{'add' if op == '+' else 'mul'}.cu", f"// {tag}\n"
                  'extern "C" __global__ void k(int* y, const int* x)'
                  f" {{ int i = threadIdx.x; y[i] = x[i] {op} x[i]; }}", ("k",))


@pytest.fixture(scope="module")
def shared_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("shared") / "cache"


@pytest.fixture
def fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private cache root of this test's own, and no in-process memory of builds."""
    yield _isolate(tmp_path / "cache", tmp_path, monkeypatch)


@pytest.fixture
def shared(shared_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The module's cache root, and no in-process memory of builds."""
    yield _isolate(shared_root, tmp_path, monkeypatch)


def _isolate(root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("NXKERNEL_CACHE", str(root))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(driver, "_built", {})
    monkeypatch.setattr(driver, "_recipes", {})
    monkeypatch.setattr(driver, "_runtime_checked", set())
    monkeypatch.setattr(driver, "_libraries", {})
    monkeypatch.setattr(cache, "_roots", {})
    return root


def _forget() -> None:
    """Forget what this process built, as a new process would."""
    driver._built.clear()
    driver._runtime_checked.clear()


def _run(source: Source) -> list[int]:
    """``source``'s kernel over X on a fresh emulated device."""
    dev = EmuDevice(0)
    x = Array.from_numpy(X, dev)
    y = Array.from_numpy(np.zeros_like(X), dev)
    dev.load(source).function("k")(1, X.size, [dev.pointer(y.buffer), dev.pointer(x.buffer)])
    out: list[int] = y.to_numpy().tolist()
    return out


def _foreign_library(tmp: Path, marker: Path) -> bytes:
    """A shared object whose constructor writes ``marker``: if it runs, it was loaded."""
    c = tmp / "foreign.c"
    c.write_text('#include <stdio.h>\n__attribute__((constructor)) static void planted(void)'
                 f' {{ FILE* f = fopen("{marker}", "w"); if (f) fclose(f); }}\n'
                 "int nxemu_launch_0(void) { return 0; }\nint nxemu_params_0(void) { return 0; }\n")
    so = tmp / "foreign.so"
    subprocess.run(["gcc", "-shared", "-fPIC", str(c), "-o", str(so)], check=True)
    return so.read_bytes()


def test_folders_are_created_private(fresh: Path) -> None:
    path = cache.folder("cuda-emu")
    assert path == fresh / "cuda-emu"
    for p in (fresh, path):
        assert p.stat().st_mode & 0o777 == 0o700
    cache.write(path / "entry", b"abc")
    for p in (fresh / "secret", path / "entry", path / "entry.mac"):
        assert p.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize(("mode", "owner", "why"), [
    (0o777, None, "writable by group and others"),
    (0o703, None, "writable by others"),
    (0o770, None, "writable by group"),
    (0o700, 65534, "owned by uid 65534"),
])
def test_a_folder_open_to_others_is_refused(fresh: Path, mode: int, owner: int | None, why: str) -> None:
    fresh.mkdir()
    os.chmod(fresh, mode)
    if owner is not None:
        if os.geteuid() != 0:
            pytest.skip("only root can give a folder to another user")
        os.chown(fresh, owner, owner)
    with pytest.warns(cache.CacheWarning, match=f"{fresh} is refused, since it is {why}"):
        path = cache.folder("cuda-emu")
    assert fresh not in path.parents  # fell back to the default, private folder
    assert cache.refusal(path) is None and path.stat().st_mode & 0o777 == 0o700
    assert not list(fresh.iterdir())  # nothing written into the refused one


def test_with_every_folder_refused_a_private_temporary_one(fresh: Path, tmp_path: Path) -> None:
    for p in (fresh, tmp_path / "xdg" / "nxkernel"):
        p.mkdir(parents=True)
        os.chmod(p, 0o777)
    with pytest.warns(cache.CacheWarning) as record:
        path = cache.folder("cuda-emu")
    assert [str(w.message).split(", since")[0].split(" folder ")[-1] for w in record][:2] == [
        f"{fresh} is refused", f"{tmp_path / 'xdg' / 'nxkernel'} is refused"]
    assert "private temporary folder" in str(record[2].message)
    assert cache.refusal(path.parent) is None and path.parent.stat().st_mode & 0o777 == 0o700


def test_a_secret_others_can_read_is_replaced(fresh: Path) -> None:
    cache.write(cache.folder("cuda") / "entry", b"abc")
    secret = fresh / "secret"
    before = secret.read_bytes()
    os.chmod(secret, 0o644)
    with pytest.warns(cache.CacheWarning, match="readable by others"):
        assert cache._secret_of(fresh) != before
    assert secret.stat().st_mode & 0o777 == 0o600


def test_a_built_entry_is_sealed_and_found_again(shared: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src_add = _kernel("+", "found")
    assert _run(src_add) == (X + X).tolist()
    target = driver.build(src_add)
    assert target.parent == shared / "cuda-emu" and cache.verified(target)
    _forget()
    monkeypatch.setattr(driver, "_compile", lambda *a: pytest.fail("built again"))
    assert _run(src_add) == (X + X).tolist()


def test_a_planted_library_never_runs(shared: Path, tmp_path: Path) -> None:
    """Another user's library at the key's path, with no seal, or with a seal
    made under their own secret: refused with a warning, its constructor never
    runs, and the kernel is built again and right."""
    src_add = _kernel("+", "planted")
    target = driver.build(src_add)
    marker = tmp_path / "planted-ran"
    foreign = _foreign_library(tmp_path, marker)
    for seal in (None, "attacker"):
        _forget()
        target.write_bytes(foreign)
        mac = target.with_name(target.name + cache.SEAL)
        mac.unlink()
        if seal is not None:  # a seal of the right form under another secret
            import hashlib
            import hmac
            mac.write_text(hmac.new(b"x" * 32, cache.FORMAT.encode(), hashlib.sha256).hexdigest())
        with pytest.warns(cache.CacheWarning, match=f"{target.name} (has no seal|does not match its seal)"):
            assert _run(src_add) == (X + X).tolist()
        assert not marker.exists()
        assert cache.verified(target) and target.read_bytes() != foreign


def test_entries_swapped_between_keys_are_refused(shared: Path) -> None:
    src_add, src_mul = _kernel("+", "swapped"), _kernel("*", "swapped")
    add, mul = driver.build(src_add), driver.build(src_mul)
    for suffix in ("", cache.SEAL):
        shutil.copyfile(mul.with_name(mul.name + suffix), add.with_name(add.name + suffix))
    _forget()
    with pytest.warns(cache.CacheWarning, match="does not match its seal"):
        assert _run(src_add) == (X + X).tolist()
    assert _run(src_mul) == (X * X).tolist()


@pytest.mark.parametrize("damage", ["truncated", "corrupted", "emptied"])
def test_a_damaged_entry_is_rebuilt_not_loaded(shared: Path, damage: str) -> None:
    """Damage on disk between two processes, and between the build and the
    load of one: never a SIGBUS or a crash, the right result, and the entry
    whole again."""
    src_add = _kernel("+", damage)
    target = driver.build(src_add)

    def spoil() -> None:
        data = bytearray(target.read_bytes())
        if damage == "truncated":
            data = data[: len(data) // 2]
        elif damage == "corrupted":
            data[len(data) // 2] ^= 0x5A  # one byte flipped
        else:
            data = bytearray()
        target.write_bytes(bytes(data))

    spoil()
    _forget()
    with pytest.warns(cache.CacheWarning, match="does not match its seal"):
        assert _run(src_add) == (X + X).tolist()
    spoil()  # after this process built it, before it loads it
    with pytest.warns(cache.CacheWarning, match="does not match its seal"):
        assert _run(src_add) == (X + X).tolist()
    assert cache.verified(target)


def test_an_edited_runtime_folder_is_rebuilt(fresh: Path) -> None:
    """Code injected into the runtime's folder (an edited header, an extra
    file, a changed runtime object) is never compiled or linked in: the folder
    fails its check and is built again, and the next new kernel is right."""
    driver.build(_kernel("+", "runtime"))
    (runtime,) = (fresh / "cuda-emu").glob("runtime-*")
    assert {"emu_cuda.h", "emu_runtime.cpp", driver.RUNTIME_OBJECT} <= {p.name for p in runtime.iterdir()}
    header = runtime / "emu_cuda.h"
    shadowed = build.headers()[0][0]  # a kernel header, searched for after this folder
    for edit in ("header", "extra", "object"):
        _forget()
        src_mul = _kernel("*", edit)
        if edit == "header":
            header.write_text(header.read_text() + "\n#define x (x + 1000)\n")
            (runtime / "emu_cuda.h.gch").unlink()
        elif edit == "extra":
            (runtime / shadowed).write_text("#error planted\n")
            src_mul = Source(src_mul.name, f'#include "{shadowed}"\n{src_mul.text}', src_mul.kernels)
        else:
            (runtime / driver.RUNTIME_OBJECT).write_bytes(b"not an object")
        with pytest.warns(cache.CacheWarning, match=f"{runtime.name} does not match its seal"):
            assert _run(src_mul) == (X * X).tolist()
        assert cache.verified_tree(runtime) and not (runtime / shadowed).exists()


def test_the_key_covers_the_compilers_path(
    shared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src_add = _kernel("+", "path")
    gxx, version = driver.compiler()
    first = driver.build(src_add)
    other = tmp_path / "bin" / "g++"
    other.parent.mkdir()
    other.symlink_to(gxx)
    monkeypatch.setattr(driver, "compiler", lambda: (str(other), version))
    assert driver.build(src_add) != first


@needs_nvrtc
def test_a_cubin_or_kernel_map_that_fails_its_check_is_rebuilt(
    shared: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NVRTC's entries: a corrupted cubin, a kernel map edited to name another
    kernel, a pair swapped in from another key: each compiled again with a
    warning, and the cubin found is NVRTC's."""
    monkeypatch.setattr(build, "_built", {})
    one = Source("cache_one.cu", 'extern "C" __global__ void one(int* x) { x[0] = 1; }', ("one",))
    two = Source("cache_two.cu", 'extern "C" __global__ void two(int* x) { x[0] = 2; }', ("two",))
    first, other = build.compile(one, "sm_90"), build.compile(two, "sm_90")
    good = first.path.read_bytes()
    meta = first.path.with_suffix(".json")

    def corrupt() -> None:
        data = bytearray(good)
        data[len(data) // 2] ^= 0x5A
        first.path.write_bytes(bytes(data))

    def remap() -> None:
        meta.write_text(meta.read_text().replace('"one"', '"evil"'))

    def swap() -> None:
        for suffix in (".cubin", ".cubin.mac", ".json", ".json.mac"):
            shutil.copyfile(other.path.with_suffix(suffix), first.path.with_suffix(suffix))

    for spoil in (corrupt, remap, swap):
        spoil()
        build._built.clear()
        with pytest.warns(cache.CacheWarning, match="does not match its seal"):
            again = build.compile(one, "sm_90")
        assert again.path.read_bytes() == good and dict(again.lowered) == {"one": "one"}

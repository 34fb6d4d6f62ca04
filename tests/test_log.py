"""nxkernel_core.log: the ``nxkernel`` loggers, a failed plugin as a warning,
compiles at INFO with their times, and the one-line progress note on a
terminal."""

from __future__ import annotations

import io
import logging
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from nxkernel_core import log, plugins
from tests.fake_dist import BROKEN, LIBRARY, Install, stand_in_plugins

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Install]:
    with stand_in_plugins(tmp_path, monkeypatch) as install:
        yield install


class _Stderr(io.StringIO):
    """A stand-in stderr that says when it was written to."""

    def __init__(self) -> None:
        super().__init__()
        self.written = threading.Event()

    def write(self, s: str) -> int:
        n = super().write(s)
        self.written.set()
        return n


def test_loggers_are_children_of_nxkernel() -> None:
    assert log.get().name == "nxkernel"
    assert log.get("cuda.build").name == "nxkernel.cuda.build"
    ancestors, logger = [], log.get("cuda.build").parent
    while logger is not None:
        ancestors.append(logger)
        logger = logger.parent
    assert logging.getLogger("nxkernel") in ancestors


def test_a_failed_plugin_is_a_warning(install: Install, caplog: pytest.LogCaptureFixture) -> None:
    install({"good": LIBRARY.format(name="good"), "broken": BROKEN})
    with caplog.at_level(logging.WARNING, logger="nxkernel"):
        plugins.discover(refresh=True)
    [record] = [r for r in caplog.records if r.name == "nxkernel.plugins"]
    assert record.levelno == logging.WARNING
    assert record.getMessage() == ("plugin 'broken' (from fake-dist) failed at load: ImportError: fake"
                                   " plugin needs a missing component")


def test_a_compile_is_logged_with_its_time(caplog: pytest.LogCaptureFixture) -> None:
    logger = log.get("test")
    with caplog.at_level(logging.INFO, logger="nxkernel"):
        with log.compiling(logger, "x.cu for sm_90"):
            pass
        with pytest.raises(RuntimeError), log.compiling(logger, "y.cu for sm_90"):
            raise RuntimeError("refused")
    messages = [r.getMessage() for r in caplog.records if r.name == "nxkernel.test"]
    assert re.fullmatch(r"compiled x\.cu for sm_90 in \d+\.\d\d s", messages[0]), messages
    assert re.fullmatch(r"compiling y\.cu for sm_90 failed after \d+\.\d\d s", messages[1]), messages


def test_a_long_compile_prints_one_line_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    err = _Stderr()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(log, "_terminal", lambda: True)
    with log.compiling(log.get("test"), "x.cu for sm_90", note_after=0.0):
        assert err.written.wait(60)  # the body outlasts note_after: the note is printed
    assert re.fullmatch(r"nxkernel: compiling x\.cu for sm_90… \d+\.\d s\n", err.getvalue()), err.getvalue()


def test_no_progress_line_off_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    err = _Stderr()
    asked = threading.Event()

    def terminal() -> bool:
        asked.set()
        return False

    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(log, "_terminal", terminal)
    with log.compiling(log.get("test"), "x.cu for sm_90", note_after=0.0):
        assert asked.wait(60)  # the note was due, and stderr is no terminal
    assert err.getvalue() == ""


def test_nxkernel_log_prints_records_on_stderr() -> None:
    code = ("from nxkernel_core import log; log.get('test').info('hello %d', 1);"
            " log.get('test').debug('not shown')")
    env = {"PYTHONPATH": str(ROOT), "NXKERNEL_LOG": "info", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "nxkernel.test INFO: hello 1\n"

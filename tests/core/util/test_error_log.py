"""The one error log (issue 36, item 5): escaped single lines (a name holding a newline forges no
entry, ESC/BEL never reach it), a regular file only (a FIFO, a device or a symlink in its place is
refused at once, never waited on nor written through), bounded (entries and the file)."""

from __future__ import annotations

import os
import stat
import threading
import traceback

import pytest

from onnxport.core.util.error_log import (
    MAX_ENTRY_LINES,
    MAX_LINE_CHARS,
    MAX_LOG_BYTES,
    error_log_path,
    log_error,
)

FORGED = "model\n=== 2020-01-01 00:00:00 Open failed: forged\x1b]0;title\x07\x1b[2J.onnx"


@pytest.fixture
def log(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = error_log_path()
    assert path == tmp_path / "cache" / "onnxport" / "errors.log"
    return path


def raised(exc: BaseException) -> tuple[BaseException, str]:
    try:
        raise exc
    except BaseException as caught:  # noqa: BLE001
        return caught, traceback.format_exc()


def test_a_name_holding_a_newline_forges_no_entry_and_controls_are_escaped(log):
    exc, tb = raised(FileNotFoundError(2, "No such file", FORGED))
    assert log_error("Open failed", exc, tb) == log
    text = log.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert [line for line in lines if line.startswith("===")] == [lines[0]]  # one entry
    assert all(line.startswith("    ") for line in lines[1:] if line)
    assert not any(c in text for c in "\x1b\x07\r") and "\\x1b]0;title\\x07" in lines[0]
    assert stat.S_IMODE(log.stat().st_mode) == 0o600  # the user's own


def test_a_fifo_in_the_logs_place_is_refused_without_waiting(log):
    log.parent.mkdir(parents=True)
    os.mkfifo(log)
    exc, tb = raised(ValueError("x"))
    done = threading.Event()
    result = []

    def write() -> None:  # no reader: opening it for writing would wait for one, for good
        result.append(log_error("Export failed", exc, tb))
        done.set()

    threading.Thread(target=write, daemon=True).start()
    assert done.wait(timeout=300), "log_error waited on a FIFO"
    assert result == [None]
    reader = os.open(log, os.O_RDONLY | os.O_NONBLOCK)  # with a reader, it would open at once...
    try:
        assert log_error("Export failed", exc, tb) is None
        assert os.read(reader, 1) == b""  # ...and nothing was written into it
    finally:
        os.close(reader)
    assert stat.S_ISFIFO(os.lstat(log).st_mode)  # left as it is


def test_a_symlink_in_the_logs_place_is_not_written_through(log, tmp_path):
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep\n")
    log.parent.mkdir(parents=True)
    log.symlink_to(target)
    exc, tb = raised(ValueError("x"))
    assert log_error("Export failed", exc, tb) is None
    assert target.read_text() == "keep\n"


def test_an_entry_and_the_log_stay_bounded(log):
    exc, tb = raised(RecursionError("deep " * 100_000))
    huge = tb + "\n".join(f"  frame {i} " + "y" * 50_000 for i in range(5_000))
    for _ in range(3):
        assert log_error("Open failed", exc, huge) == log
    text = log.read_text()
    entries = text.split("\n=== ")
    assert len(entries) == 3 and len(text) < 3 * (MAX_ENTRY_LINES + 2) * (MAX_LINE_CHARS + 5)
    assert max(len(line) for line in text.splitlines()) <= MAX_LINE_CHARS + len("=== 2020-01-01 00:00:00 ")
    lines = entries[-1].rstrip().splitlines()
    assert len(lines) <= MAX_ENTRY_LINES + 2 and "lines left out" in entries[-1]
    assert "  frame 4999 " in lines[-1]  # the end (where the error is) is kept
    log.write_text("x" * (MAX_LOG_BYTES + 1))
    assert log_error("Open failed", exc, tb) == log
    assert log.stat().st_size < MAX_LOG_BYTES and log.with_name("errors.log.1").read_text() == "x" * MAX_LOG_BYTES

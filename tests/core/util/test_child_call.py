"""call_in_child: a core function run in a fresh process answers as it would in process -
result, progress, its one-line error with its hint, cancel, commit - and a dead child is an error."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from onnxport.core.util import child_call
from onnxport.core.util.child_call import Child, call_in_child
from onnxport.core.util.errors import Cancelled, OnnxportError
from onnxport.core.util.progress import CancelToken

from . import child_functions as f


def test_the_result_and_progress_come_back_from_another_process():
    seen = []
    result = call_in_child(f.add, 2, 3, scale=10, progress=lambda fr, msg: seen.append((fr, msg)))
    assert result["sum"] == 50 and result["pid"] != os.getpid()
    assert seen[-1] == (1.0, "done")


def test_a_user_error_keeps_its_line_and_hint():
    with pytest.raises(OnnxportError) as caught:
        call_in_child(f.refuse)
    assert caught.value.one_line() == "no such output: x (pick one from the tree)"
    assert "refuse" in caught.value.child_traceback


def test_a_cancel_reaches_the_child(tmp_path, monkeypatch):
    monkeypatch.setattr(child_call, "GRACE_S", 600.0)  # the child stops itself: no kill after a grace ends it
    token, marker = CancelToken(), tmp_path / "running"
    threading.Thread(target=lambda: (_wait_for(marker), token.cancel()), daemon=True).start()
    with pytest.raises(Cancelled):
        call_in_child(f.wait_for_cancel, str(marker), cancel=token)


def test_the_caller_starts_no_thread_and_forgets_its_cancel_hook_after_the_call(tmp_path):
    """A cancel reaches the child from the cancelling thread (CancelToken.on_cancel), not from a
    thread polling the token: in the app such a thread takes the GIL the GUI thread needs."""
    token, counts, before = CancelToken(), [], threading.active_count()
    call_in_child(f.add, 1, 2, progress=lambda *_: counts.append(threading.active_count()), cancel=token)
    assert counts and set(counts) == {before}
    assert token._hooks == []
    token.cancel()  # after the call: nothing left to tell, nothing raised


def test_a_commit_in_the_child_commits_the_callers_token():
    token = CancelToken()
    assert call_in_child(f.commit_then_return, cancel=token) == "kept"
    assert token.committed


def test_a_child_that_dies_is_a_clear_error():
    with pytest.raises(OnnxportError, match=r"die ended unexpectedly \(exit status 3\)"):
        call_in_child(f.die)


def _wait_for(path, timeout: float = 300.0) -> None:
    import time

    end = time.monotonic() + timeout
    while not path.exists() and time.monotonic() < end:
        time.sleep(0.01)


def test_a_child_that_answered_exits_cleanly_while_its_cancel_reader_waits():
    """The input reader is still blocked on stdin when the child's input ends: the interpreter's
    shutdown must not abort on it ("could not acquire lock for <stdin>")."""
    with Child() as child:
        assert child.call(f"{f.__name__}:echo", None, b"ab") == b"ba"
        child._proc.stdin.close()  # the caller is done with it
        assert child._proc.wait(timeout=300) == 0
        child._stderr.seek(0)
        assert b"Fatal Python error" not in child._stderr.read()


def test_a_relative_path_reaches_the_child_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert call_in_child(f.absolute, Path("model.onnx")) == str(tmp_path / "model.onnx")


def test_a_bug_in_the_child_is_one_onnxport_error_line():
    with pytest.raises(OnnxportError) as caught:
        call_in_child(f.divide, 1, 0)
    assert caught.value.one_line() == "divide failed: ZeroDivisionError: division by zero"

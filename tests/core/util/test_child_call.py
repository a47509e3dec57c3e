"""call_in_child: a core function run in a fresh process answers as it would in process -
result, progress, its one-line error with its hint, cancel, commit - and a dead child is an error."""

from __future__ import annotations

import os
import threading

import pytest

from onnxport.core.util.child_call import call_in_child
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


def test_a_cancel_reaches_the_child(tmp_path):
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
    with pytest.raises(OnnxportError, match="status 3"):
        call_in_child(f.die)


def _wait_for(path, timeout: float = 30.0) -> None:
    import time

    end = time.monotonic() + timeout
    while not path.exists() and time.monotonic() < end:
        time.sleep(0.01)


def test_a_child_whose_caller_is_gone_cancels_itself(tmp_path):
    """The caller's end of the pipe closing (the app killed mid-job) is a cancel, not an order to
    finish and write files nobody waits for."""
    import pickle
    import subprocess
    import sys

    from onnxport.core.util import child_call

    marker = tmp_path / "running"
    read_fd, write_fd = os.pipe()
    child = subprocess.Popen([sys.executable, "-m", "onnxport.core.util.child_call", str(write_fd)],
                             stdin=subprocess.PIPE, pass_fds=(write_fd,))
    os.close(write_fd)
    request = pickle.dumps((f.wait_for_cancel.__module__, "wait_for_cancel", (str(marker),), {},
                            child_call.module_file(f.__name__)))
    child.stdin.write(child_call._HEADER.pack(len(request)) + request)
    child.stdin.flush()
    _wait_for(marker)
    child.stdin.close()  # as when the caller dies
    with os.fdopen(read_fd, "rb") as answers:
        kind, exc = child_call._read_frame(answers)
    assert kind == "errored" and isinstance(exc, Cancelled)
    assert child.wait(timeout=30) == 1


def test_a_child_that_answered_exits_cleanly_while_its_cancel_reader_waits():
    """The cancel reader is still blocked on stdin when the child's main thread ends: the
    interpreter's shutdown must not abort on it ("could not acquire lock for <stdin>")."""
    import pickle
    import subprocess
    import sys

    from onnxport.core.util import child_call

    read_fd, write_fd = os.pipe()
    child = subprocess.Popen([sys.executable, "-m", "onnxport.core.util.child_call", str(write_fd)],
                             stdin=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(write_fd,))
    os.close(write_fd)
    request = pickle.dumps((f.add.__module__, "add", (2, 3), {}, child_call.module_file(f.__name__)))
    child.stdin.write(child_call._HEADER.pack(len(request)) + request)
    child.stdin.flush()  # stdin stays open: the cancel reader is blocked in its read at exit
    with os.fdopen(read_fd, "rb") as answers:
        frames = iter(lambda: child_call._read_frame(answers), None)
        assert [frame for frame in frames if frame[0] == "returned"][0][1]["sum"] == 5
    assert child.wait(timeout=30) == 0
    assert b"Fatal Python error" not in child.stderr.read()
    child.stdin.close()

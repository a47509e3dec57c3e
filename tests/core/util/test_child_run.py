"""start_child / run_in_child: a named function run in a fresh process with nothing pickled -
JSON and bytes both ways, progress, an error as one OnnxportError line with its hint, a cancel that
kills the child and leaves nothing, a dead child a clear error."""

from __future__ import annotations

import os
import threading
import time

import pytest

from onnxport.core.util.child_call import run_in_child, start_child
from onnxport.core.util.errors import Cancelled, OnnxportError
from onnxport.core.util.progress import CancelToken

from . import child_functions as f

HERE = f.__name__


def test_json_and_bytes_and_progress_come_back():
    seen = []
    run = start_child(f"{HERE}:echo", {"n": [1, 2]}, b"abc", progress=lambda *p: seen.append(p))
    try:
        first = run.receive()
        assert first["request"] == {"n": [1, 2]} and first["pid"] != os.getpid()
        assert run.receive() == b"cba"
        assert run.receive() is None and run.returncode == 0
    finally:
        run.close()
    assert seen == [(1.0, "done")]
    assert run_in_child(f"{HERE}:echo", None, b"xy") == b"yx"


@pytest.mark.parametrize("kind, line, hint", [
    ("user", "no such output: x", "pick one from the tree"),
    ("bug", "ValueError: bad value", None),
])
def test_an_error_comes_back_as_one_onnxport_error_line(kind, line, hint):
    with pytest.raises(OnnxportError) as caught:
        run_in_child(f"{HERE}:refuse_in_lines", kind)
    assert str(caught.value) == line and caught.value.hint == hint
    assert "refuse_in_lines" in caught.value.child_traceback


def test_an_unknown_function_is_an_error_line():
    with pytest.raises(OnnxportError, match="^AttributeError: "):
        run_in_child(f"{HERE}:no_such_function")


def test_a_child_that_dies_is_a_clear_error():
    with pytest.raises(OnnxportError, match="status 3"):
        run_in_child(f"{HERE}:exit_3")


def test_a_cancel_kills_the_child_and_leaves_nothing(tmp_path):
    marker, token = tmp_path / "pid", CancelToken()
    threading.Thread(target=lambda: (_wait_for(marker), token.cancel()), daemon=True).start()
    with pytest.raises(Cancelled):
        run_in_child(f"{HERE}:wait_forever", str(marker), cancel=token)
    assert not _alive(int(marker.read_text()))  # killed and reaped, not left to sleep its minute
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pid"]
    assert token._hooks == []


def test_a_timeout_leaves_the_child_running_until_closed(tmp_path):
    marker = tmp_path / "pid"
    run = start_child(f"{HERE}:wait_forever", str(marker))
    try:
        with pytest.raises(TimeoutError):
            run.receive(timeout=0.2)
        _wait_for(marker)
        assert _alive(int(marker.read_text()))
    finally:
        run.close()
    assert not _alive(int(marker.read_text())) and run.returncode is not None


def _wait_for(path, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while not path.exists() and time.monotonic() < end:
        time.sleep(0.01)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True

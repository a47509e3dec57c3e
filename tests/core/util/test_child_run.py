"""The one child protocol with nothing pickled (start_child / run_in_child / Child): JSON and bytes
both ways, progress, an error as one OnnxportError line with its hint, a cancel that the child
honours or that kills it after the grace period, a dead or crashed child a clear line, one process
serving many calls, isolation, another Python environment, no grandchildren."""

from __future__ import annotations

import os
import threading
import time

import pytest

from onnxport.core.util import child_call
from onnxport.core.util.child_call import Child, ChildDied, child_folder, run_in_child, start_child
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
        assert run.receive() is None
    finally:
        run.close()
    assert seen == [(1.0, "done")]
    assert run_in_child(f"{HERE}:echo", None, b"xy") == b"yx"


@pytest.mark.parametrize("kind, line, hint", [
    ("user", "no such output: x", "pick one from the tree"),
    ("bug", "refuse_in_lines failed: ValueError: bad value", None),
])
def test_an_error_comes_back_as_one_onnxport_error_line(kind, line, hint):
    with pytest.raises(OnnxportError) as caught:
        run_in_child(f"{HERE}:refuse_in_lines", kind)
    assert str(caught.value) == line and caught.value.hint == hint
    assert "refuse_in_lines" in caught.value.child_traceback


def test_an_unknown_function_is_an_error_line():
    with pytest.raises(OnnxportError, match="failed: AttributeError: "):
        run_in_child(f"{HERE}:no_such_function")


def test_a_child_that_dies_is_a_clear_error():
    with pytest.raises(ChildDied, match=r"exit_3 ended unexpectedly \(exit status 3\)") as caught:
        run_in_child(f"{HERE}:exit_3")
    assert caught.value.returncode == 3


def test_a_crashed_child_is_one_line_naming_the_signal():
    with pytest.raises(ChildDied) as caught:
        run_in_child(f"{HERE}:segfault")
    assert caught.value.one_line().startswith("segfault crashed (killed by SIGSEGV)")
    assert "\n" not in caught.value.one_line() and caught.value.returncode == -11


def test_a_cancel_reaches_the_child_which_stops_cleanly(tmp_path, monkeypatch):
    monkeypatch.setattr(child_call, "GRACE_S", 600.0)  # only the child's own stop ends it, however loaded the machine
    marker, token = tmp_path / "running", CancelToken()
    threading.Thread(target=lambda: (_wait_for(marker), token.cancel()), daemon=True).start()
    with pytest.raises(Cancelled):
        run_in_child(f"{HERE}:wait_for_cancel_then_clean", str(marker), cancel=token)
    assert (tmp_path / "running.cleaned").exists()  # it stopped itself, before any kill


def test_a_cancel_the_child_ignores_kills_it_after_the_grace_period(tmp_path):
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


def test_one_child_serves_calls_one_after_another_and_restarts_after_a_cancel(tmp_path):
    marker, token = tmp_path / "pid", CancelToken()
    with Child() as child:
        first = child.call(f"{HERE}:where_and_how")
        assert child.call(f"{HERE}:where_and_how")["pid"] == first["pid"] != os.getpid()
        threading.Thread(target=lambda: (_wait_for(marker), token.cancel()), daemon=True).start()
        with pytest.raises(Cancelled):
            child.call(f"{HERE}:wait_forever", str(marker), cancel=token)
        assert child.call(f"{HERE}:where_and_how")["pid"] not in (first["pid"], int(marker.read_text()))


def test_a_child_starts_isolated_in_a_fixed_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    answer = run_in_child(f"{HERE}:where_and_how")
    assert answer["isolated"] == 1 and answer["cwd"] == os.path.realpath(child_folder())


def test_a_child_whose_caller_is_gone_cancels_itself(tmp_path):
    """The caller's end of the pipe closing (the app killed mid-job) is a cancel."""
    marker = tmp_path / "running"
    child = Child()
    child.start_call(f"{HERE}:wait_for_cancel_then_clean", str(marker))
    try:
        _wait_for(marker)
        child._proc.stdin.close()  # as when the caller dies
        assert child._proc.wait(timeout=300) == 0
        assert (tmp_path / "running.cleaned").exists()
    finally:
        child.close()


def test_a_pickle_in_answer_to_a_json_call_is_never_unpickled(tmp_path):
    """Answers about a stranger's file come as JSON or bytes: a child's pickle stays bytes here."""
    written = tmp_path / "unpickled"
    answer = run_in_child(f"{HERE}:pickled_answer", str(written))
    assert isinstance(answer, bytes) and not written.exists()


def test_a_child_starts_no_child_of_its_own():
    answer = run_in_child(f"{HERE}:nested_call")
    assert answer["inner"] == answer["outer"] != os.getpid()


def test_a_child_in_another_python_environment_runs_a_module_by_its_file():
    """Another environment has no onnxport (the training one, other ONNX Runtime builds): the
    protocol's child and the target module load from their files; JSON in and out, progress."""
    import sys

    other = getattr(sys, "_base_executable", None)
    if not other or sys.prefix == sys.base_prefix:
        pytest.skip("not in a virtual environment: no Python outside it to run")
    seen = []
    from . import foreign_functions

    with Child(other) as child:
        answer = child.call(f"{foreign_functions.__name__}:describe", {"a": 1}, b"xyz",
                            progress=lambda *p: seen.append(p))
    assert answer == {"prefix": answer["prefix"], "onnxport": False, "got": {"a": 1}, "data": "xyz"}
    assert answer["prefix"] != sys.prefix and seen == [(1.0, "described")]


def _wait_for(path, timeout: float = 300.0) -> None:
    end = time.monotonic() + timeout
    while not path.exists() and time.monotonic() < end:
        time.sleep(0.01)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True

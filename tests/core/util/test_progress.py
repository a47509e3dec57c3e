"""Progress and cancel kept apart, and the commit point: after it a cancel never turns a written
result into "cancelled" (in sub-reporters, parents, and real writers)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from onnxport.core.evaluate.report import write_report
from onnxport.core.export.export import export_model
from onnxport.core.util.errors import Cancelled
from onnxport.core.util.progress import CancelToken, Reporter
from tests.support.checkpoint_writer import write_checkpoint

from ..model_builders import forward_mlp


def test_progress_never_raises_only_check_does():
    token, seen = CancelToken(), []
    report = Reporter(lambda f, m: seen.append((f, m)), token)
    token.cancel()
    report(0.5, "halfway")
    report.sub(0.5, 1.0)(0.5, "three quarters")
    assert seen == [(0.5, "halfway"), (0.75, "three quarters")]
    with pytest.raises(Cancelled):
        report.check()
    with pytest.raises(Cancelled):
        report.sub(0.0, 0.5).check()


def test_commit_point_holds_in_subs_parents_and_nested_reporters():
    token = CancelToken()
    job = Reporter(lambda f, m: None, token)  # what the app's job builds
    inner = Reporter(job.sub(0.0, 0.5))  # what a core call builds from the progress it is given
    leaf = inner.sub(0.1, 1.0)
    assert inner.token is token and leaf.token is token
    leaf.commit()
    token.cancel()
    for r in (job, inner, leaf, job.sub(0.5, 1.0), Reporter(inner)):
        r.check()  # no-op after the commit point
        r.finished()
        assert r.committed
    assert token.committed and token.cancelled


def test_a_cancel_hook_runs_once_per_cancel_at_once_when_late_and_never_once_removed():
    token, calls = CancelToken(), []
    remove = token.on_cancel(lambda: calls.append("first"))
    token.cancel()
    assert calls == ["first"]
    token.on_cancel(lambda: calls.append("late"))  # registered after the cancel: called at once
    assert calls == ["first", "late"]
    remove()
    other = CancelToken()
    other.on_cancel(lambda: calls.append("removed"))()
    other.cancel()
    assert calls == ["first", "late"] and other.cancelled


def test_a_cancel_before_the_commit_point_still_cancels():
    token = CancelToken()
    report = Reporter(None, token)
    token.cancel()
    with pytest.raises(Cancelled):
        report.check()
    report.commit()
    report.check()


def test_a_failing_progress_callback_cannot_fail_a_committed_result():
    def broken(fraction, message):
        raise RuntimeError("the progress bar is gone")

    report = Reporter(broken)
    with pytest.raises(RuntimeError):
        report(0.5, "before the commit point a broken callback is a bug that shows")
    report.commit()
    report(0.9, "after it, progress is best effort")
    report.finished()


def nested(progress, token):
    """The way the app runs an export: a job reporter whose sub-reporter goes to the core."""
    return Reporter(progress, token).sub(0.0, 1.0)


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "forward.onnx"
    onnx.save(forward_mlp(), path)
    return path


def test_export_cancelled_at_the_last_check_keeps_the_old_file(source, tmp_path):
    out = tmp_path / "out.onnx"
    out.write_bytes(b"old")
    token = CancelToken()

    def progress(fraction, message):
        if message == "syncing to disk":  # written and synced, not yet renamed
            token.cancel()

    with pytest.raises(Cancelled):
        export_model(source, out, ["logits"], progress=nested(progress, token), cancel=token)
    assert out.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["forward.onnx", "out.onnx"]


def test_export_cancelled_right_after_the_commit_point_is_written(source, tmp_path):
    """The race behind finding 5: the user's cancel lands once the rename is under way; a parent
    reporter used to re-check the token in `finished()` and raise `Cancelled` over a replaced file."""
    out = tmp_path / "out.onnx"
    out.write_bytes(b"old")
    token, clicks = CancelToken(), []

    def progress(fraction, message):
        if token.committed and not token.cancelled:
            clicks.append(message)
            token.cancel()

    result = export_model(source, out, ["logits"], progress=nested(progress, token), cancel=token)
    assert clicks and token.cancelled
    assert result.path == out and out.read_bytes() != b"old"
    onnx.checker.check_model(onnx.load(out))


def test_checkpoint_writer_checks_for_cancel_last_before_its_commit_point(tmp_path):
    path = tmp_path / "checkpoint"
    write_checkpoint(path, {"w": np.zeros((64, 64), np.float32)}, external_data=True)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    token = CancelToken()

    def progress(fraction, message):
        if message == "saving checkpoint":  # the last progress before the renames
            token.cancel()

    with pytest.raises(Cancelled):
        write_checkpoint(path, {"w": np.ones((64, 64), np.float32)}, external_data=True, progress=progress,
                         cancel=token)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    assert not token.committed
    write_checkpoint(path, {"w": np.ones((64, 64), np.float32)}, external_data=True, cancel=CancelToken())
    write_report(tmp_path / "r.json", {"ok": True})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint", "checkpoint.data", "r.json"]

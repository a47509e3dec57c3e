"""The real window, offscreen: open by drop, pick outputs, export, cancel, errors."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QApplication, QMessageBox

from onnxport.gui.dialogs.error_log import error_log_path
from onnxport.gui.dialogs.export_dialog import ExportChoices, ExportDialog
from onnxport.gui.jobs import core_calls
from onnxport.gui.widgets.app_state import LAYOUT_VERSION
from tests.support.checkpoint_writer import write_checkpoint

from .conftest import big_eval_model

pytestmark = pytest.mark.gui


def drop(window, paths) -> None:
    """A real drag-enter + drop of file URLs, as the window system delivers them."""
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    enter = QDragEnterEvent(window.rect().center(), Qt.CopyAction, mime, Qt.LeftButton, Qt.NoModifier)
    QApplication.sendEvent(window, enter)
    assert enter.isAccepted()
    event = QDropEvent(QPointF(window.rect().center()), Qt.CopyAction, mime, Qt.LeftButton, Qt.NoModifier)
    QApplication.sendEvent(window, event)


def open_example(qtbot, window, paths) -> None:
    with qtbot.waitSignal(window.loaded, timeout=300_000):
        drop(window, paths)
    qtbot.waitUntil(lambda: not window.busy, timeout=300_000)  # the open job's `finished` comes after `loaded`


def error_boxes() -> list[QMessageBox]:
    return [w for w in QApplication.topLevelWidgets()
            if isinstance(w, QMessageBox) and w.objectName() == "errorDialog" and w.isVisible()]


def test_drop_opens_model_and_checkpoint_and_fills_the_tree(qtbot, window, example):
    assert window.left.currentWidget() is window.left.empty
    open_example(qtbot, window, reversed(example))  # order does not matter: the app works it out
    assert window.left.currentIndex() == 1
    assert window.model.checked_outputs() == ["logits", "probabilities"]
    assert "4 parameters match" in window.sources_panel.text()
    qtbot.waitUntil(lambda: "4 nodes written" in window.plan_panel.text(), timeout=300_000)
    assert "drops inputs: labels" in window.plan_panel.text()
    assert window.export_action.isEnabled()
    # recent files remember the pair
    assert window.recent_menu.actions()[0].text() == "checkpoint + eval_model.onnx"


def test_checking_outputs_updates_the_plan_and_training_tensors_are_protected(qtbot, window, example):
    open_example(qtbot, window, example)
    model = window.model
    loss = model.index_of("onnx::loss::2")
    assert loss.isValid() and not (model.flags(loss) & Qt.ItemIsUserCheckable)
    assert not model.setData(loss, Qt.Checked, Qt.CheckStateRole)
    relu = model.index_of("/Relu_output_0")
    assert model.setData(relu, Qt.Checked.value, Qt.CheckStateRole)
    assert model.checked_outputs() == ["logits", "probabilities", "/Relu_output_0"]
    qtbot.waitUntil(lambda: "/Relu_output_0" in window.plan_panel.text(), timeout=300_000)
    window.tree.setCurrentIndex(relu)
    assert "produced by Relu" in window.details_panel.text()
    window.left.allow_training.setChecked(True)
    assert model.flags(model.index_of("onnx::loss::2")) & Qt.ItemIsUserCheckable
    for name in ("logits", "probabilities", "/Relu_output_0"):
        model.set_checked(name, False)
    assert not window.export_action.isEnabled()
    qtbot.waitUntil(lambda: "Check at least one output" in window.plan_panel.text(), timeout=300_000)


def test_filter_and_outputs_only(qtbot, window, example):
    open_example(qtbot, window, example)
    total = window.model.visible_tensor_count()
    window.left.filter_edit.setText("relu")
    qtbot.waitUntil(lambda: window.model.visible_tensor_count() == 1, timeout=300_000)
    window.left.filter_edit.setText("")
    qtbot.waitUntil(lambda: window.model.visible_tensor_count() == total, timeout=300_000)
    window.left.outputs_only.setChecked(True)
    qtbot.waitUntil(lambda: window.model.visible_tensor_count() == 3, timeout=300_000)  # loss + 2 forward outputs
    assert window.model.checked_outputs() == ["logits", "probabilities"]  # filtering keeps the checks


def test_export_in_the_worker_writes_a_model_that_runs_and_validates(qtbot, window, example, tmp_path):
    open_example(qtbot, window, example)
    out = tmp_path / "out" / "model.onnx"
    out.parent.mkdir()
    with qtbot.waitSignal(window.exportFinished, timeout=300_000) as blocker:
        window.start_export(ExportChoices(out, validate=True))
    export, post = blocker.args[0]
    assert export.path == out and out.exists()
    assert post.passed is True
    sess = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    assert [o.name for o in sess.get_outputs()] == ["logits", "probabilities"]
    probs = sess.run(["probabilities"], {"input": np.zeros((2, 256), np.float32)})[0]
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)
    assert window.tabs.currentWidget() is window.report_tab
    assert "validation passed" in window.result_panel.text() and "model.onnx" in window.result_panel.text()
    assert window.last_export == out
    qtbot.waitUntil(lambda: not window.busy, timeout=300_000)  # the export job's `finished` comes after its result
    with qtbot.waitSignal(window.jobEnded, timeout=300_000) as ended:
        window.validate_last()
    assert ended.args == ["validate", "returned"]


def test_export_dialog_remembers_the_folder(qtbot, window, example, tmp_path, settings):
    open_example(qtbot, window, example)
    dest = tmp_path / "dest"
    dest.mkdir()
    window.export_dialog()
    dialog = window.findChild(ExportDialog)
    assert dialog is not None and dialog.validate.isChecked()
    dialog.path_edit.setText(str(dest / "m.onnx"))
    with qtbot.waitSignal(window.exportFinished, timeout=300_000):
        dialog._accept()
    assert (dest / "m.onnx").exists()
    assert settings.value("export/folder") == str(dest)


def clicking_cancel_when(monkeypatch, when):
    """The export job the window runs, with the user's Cancel click landing exactly when
    `when(message, token)` says, from inside the job's progress callback (in the worker thread,
    so the moment is deterministic, unlike a click queued through the event loop)."""
    real = core_calls.export_job

    def export_job(*args, **kwargs):
        run = real(*args, **kwargs)

        def wrapped(progress, cancel):
            def progress_then_click(fraction, message):
                progress(fraction, message)
                if when(message, cancel):
                    cancel.cancel()  # what Job.cancel() does

            return run(progress_then_click, cancel)

        return wrapped

    monkeypatch.setattr(core_calls, "export_job", export_job)


def test_cancel_midway_leaves_nothing_and_keeps_the_old_file(qtbot, window, tmp_path, monkeypatch):
    paths = big_eval_model(tmp_path / "big")
    open_example(qtbot, window, paths)
    assert window.model.checked_outputs() == ["h39"]
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "model.onnx"
    out.write_bytes(b"the user's previous export")
    seen = []
    clicking_cancel_when(monkeypatch, lambda message, token: seen.append(message) or "writing" in message)

    window.job_status.text.setText("")
    with qtbot.waitSignal(window.jobEnded, timeout=300_000) as ended:
        window.start_export(ExportChoices(out, validate=False))
    assert ended.args == ["export", "cancelled"], seen
    assert out.read_bytes() == b"the user's previous export"
    assert sorted(p.name for p in out_dir.iterdir()) == ["model.onnx"]  # no temp file left
    assert "cancelled" in window.log.toPlainText()


def test_a_cancel_after_the_commit_point_reports_the_file_written(qtbot, window, tmp_path, monkeypatch):
    """The click lands right after the commit point (the rename is under way): the job ignores
    it and the window reports the new file as written, never "cancelled; nothing was written"."""
    paths = big_eval_model(tmp_path / "big", tensors=4)
    open_example(qtbot, window, paths)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "model.onnx"
    out.write_bytes(b"the user's previous export")
    clicks = []
    clicking_cancel_when(monkeypatch, lambda message, token: token.committed and not clicks.append(message))

    with qtbot.waitSignal(window.jobEnded, timeout=300_000) as ended:
        window.start_export(ExportChoices(out, validate=False))
    assert clicks, "the cancel was never clicked"
    assert ended.args == ["export", "returned"]
    assert window.last_export == out and out.read_bytes() != b"the user's previous export"
    ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])  # the complete new model
    assert sorted(p.name for p in out_dir.iterdir()) == ["model.onnx"]
    log = window.log.toPlainText()
    assert f"wrote {out}" in log and "the cancel came after the result was written" in log
    assert "nothing was written" not in log


def test_bad_file_is_an_error_dialog_not_a_crash(qtbot, window, tmp_path):
    bad = tmp_path / "broken.onnx"
    bad.write_bytes(b"\x08\x07" + bytes(range(256)) * 4)
    with qtbot.waitSignal(window.errorShown, timeout=300_000) as shown:
        drop(window, [bad])
    assert "broken.onnx" in shown.args[0] and "Traceback" not in shown.args[0]
    boxes = error_boxes()
    assert boxes and boxes[0].text() == shown.args[0]
    details = boxes[0].detailedText()  # details on demand, in words; the traceback in a log file it names
    assert "Traceback" not in details and "broken.onnx" in details and str(error_log_path()) in details
    assert "Traceback" in error_log_path().read_text()
    boxes[0].close()
    assert window.session is None and window.left.currentWidget() is window.left.empty


def test_nominal_checkpoint_is_refused_at_export_with_a_dialog(qtbot, window, example, tmp_path):
    nominal = tmp_path / "nominal" / "checkpoint"
    nominal.parent.mkdir()
    weights = {"fc1.weight": np.zeros((32, 8), np.float32), "fc1.bias": np.zeros(32, np.float32),
               "fc2.weight": np.zeros((3, 32), np.float32), "fc2.bias": np.zeros(3, np.float32)}
    write_checkpoint(nominal, weights, nominal=True)
    open_example(qtbot, window, [example[0], nominal])
    assert "Nominal checkpoint" in window.sources_panel.text()
    out = tmp_path / "never.onnx"
    with qtbot.waitSignal(window.errorShown, timeout=300_000) as shown:
        window.start_export(ExportChoices(out, validate=False))
    assert "nominal" in shown.args[0]
    assert not out.exists()
    for box in error_boxes():
        box.close()


def test_window_state_and_recent_files_survive_a_restart(qtbot, window, example, settings):
    from onnxport.gui.main_window import MainWindow

    open_example(qtbot, window, example)
    window.close()
    assert settings.value("window/geometry") and settings.value("window/state")
    again = MainWindow(settings=settings)
    qtbot.addWidget(again)
    assert again.restoreGeometry(settings.value("window/geometry"))
    assert again.restoreState(settings.value("window/state"), LAYOUT_VERSION)
    assert again.recent_menu.isEnabled() and len(again.recent_menu.actions()) == 1


def test_a_cancel_during_the_quantization_keeps_the_float_model_and_says_so(qtbot, window, example, tmp_path,
                                                                             monkeypatch):
    """Issue 35 / README "Cancel": the float model, complete and validated, is kept (removing it would
    lose a correct file the user may have replaced an older one with); the log names it, nothing
    quantized or partial is left, and it is the export Validate and Deploy use."""
    open_example(qtbot, window, example)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "model.onnx"
    clicking_cancel_when(monkeypatch, lambda message, token: "quantizing" in message)
    with qtbot.waitSignal(window.jobEnded, timeout=300_000) as ended:
        window.start_export(ExportChoices(out, quantize="dynamic", validate=True))
    assert ended.args == ["export", "cancelled"]
    assert sorted(p.name for p in out_dir.iterdir()) == ["model.onnx"]  # no int8 model, no report, no temp
    ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])  # complete
    log = window.log.toPlainText()
    assert f"export cancelled; already written: {out} (complete)" in log
    assert "model.onnx (float32) is kept, complete: Validate and Deploy use it" in log
    assert window.last_export == out and window.last_quantized is None

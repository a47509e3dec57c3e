"""The app's Export reaches every quantize choice of the CLI and says what happened (issue 35):
static int8 calibrates on the data chosen; a failed quantization names the float model it kept,
never "export failed", and what to try in the app's words (its fields, not the CLI's options); the
choices come back; Quantize offers the int8 mode that can help."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from PySide6.QtWidgets import QApplication, QMessageBox

from onnxport.gui.dialogs.export_dialog import ExportDialog

from ..core.quantize.test_mode_choice import conv_model
from .test_main_window import open_example

pytestmark = pytest.mark.gui


def export_dialog(qtbot, window, quantize=None) -> ExportDialog:
    window.export_dialog(quantize)
    dialog = window.findChild(ExportDialog)
    qtbot.waitUntil(dialog.isVisible, timeout=300_000)
    return dialog


def close_dialog(dialog: ExportDialog) -> None:
    dialog.reject()
    dialog.setParent(None)
    dialog.deleteLater()


def test_static_int8_calibrates_on_the_data_chosen_in_the_dialog(qtbot, window, example, tmp_path):
    open_example(qtbot, window, example)
    data = tmp_path / "calibration.npz"
    np.savez(data, input=np.random.default_rng(2).standard_normal((64, 256)).astype(np.float32))
    dialog = export_dialog(qtbot, window)
    dialog.path_edit.setText(str(tmp_path / "m.onnx"))
    dialog.quantize.setCurrentIndex(dialog.quantize.findData("static"))
    box = dialog.options_box
    box.calibration.setText(str(data))
    box.int8_path.setCurrentIndex(box.int8_path.findData("avx2"))
    box.no_target.setChecked(True)
    with qtbot.waitSignal(window.exportFinished, timeout=300_000) as finished:
        dialog._accept()
    _export, post = finished.args[0]
    q = post.report["quantize"]
    assert q["mode"] == "static" and (tmp_path / "m.qdq.onnx").exists()
    assert q["validation"]["inputs"].startswith("calibration.npz")  # its held-out part: the data chosen
    assert q["target"] is None and q["options"]["int8_path"] == "avx2"
    assert "generated" not in " ".join(q["notes"])


def test_a_failed_quantization_says_what_stays_written_and_the_choices_come_back(qtbot, window, example, tmp_path):
    open_example(qtbot, window, example)
    dialog = export_dialog(qtbot, window)
    out = tmp_path / "chosen" / "m.onnx"
    out.parent.mkdir()
    dialog.path_edit.setText(str(out))
    dialog.quantize.setCurrentIndex(dialog.quantize.findData("static"))  # no calibration data, not "random"
    dialog.options_box.int8_path.setCurrentIndex(dialog.options_box.int8_path.findData("avx2"))
    with qtbot.waitSignal(window.errorShown, timeout=300_000) as shown:
        dialog._accept()
    assert "static quantization needs calibration data" in shown.args[0]
    assert "choose Calibration data" in shown.args[0] and '"random inputs"' in shown.args[0]  # the app's fields
    assert "--calibration" not in shown.args[0]  # not the CLI's option
    log = window.log.toPlainText()
    assert "export failed" not in log
    assert f"static int8 quantization failed: {shown.args[0]}; the float32 model {out} is written and validated" in log
    boxes = [w for w in QApplication.topLevelWidgets() if isinstance(w, QMessageBox) and w.isVisible()]
    assert [b.windowTitle() for b in boxes] == ["Static int8 quantization failed"]
    assert f"The float32 model {out} is written and validated." in boxes[0].text()
    assert "What to try: choose Calibration data" in boxes[0].detailedText()
    boxes[0].close()
    assert out.exists() and window.last_export == out and not (out.parent / "m.qdq.onnx").exists()
    qtbot.waitUntil(lambda: not window.busy, timeout=300_000)
    close_dialog(dialog)
    again = export_dialog(qtbot, window)  # the destination and options chosen, not the defaults
    assert again.path_edit.text() == str(out) and again.quantize.currentData() == "static"
    assert again.options_box.int8_path.currentData() == "avx2" and again.validate.isChecked()


def test_quantize_offers_the_int8_mode_that_can_help_the_model(qtbot, window, example, tmp_path):
    open_example(qtbot, window, example)  # Gemm layers: dynamic int8 quantizes them
    dialog = export_dialog(qtbot, window, "int8")
    assert dialog.quantize.currentData() == "dynamic" and not dialog.mode_note.isVisible()
    assert dialog.validate.text() == "Validate against the eval graph + checkpoint"
    close_dialog(dialog)
    path = tmp_path / "det.onnx"
    onnx.save(conv_model(), path)
    open_example(qtbot, window, [path])
    dialog = export_dialog(qtbot, window, "int8")
    assert dialog.quantize.currentData() == "static"  # the CLI's dynamic run would quantize nothing
    dialog.quantize.setCurrentIndex(dialog.quantize.findData("dynamic"))
    assert dialog.mode_note.isVisible() and "would quantize nothing" in dialog.mode_note.text()
    assert dialog.validate.text() == "Validate against the source model (det.onnx)"
    assert "or the source model" in window.validate_action.statusTip()  # not "the eval graph" alone
    close_dialog(dialog)

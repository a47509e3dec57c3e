"""The export dialog names every file the export will write, before it runs (issue 15, cut 6)."""

from __future__ import annotations

import re

from onnxport.core.workflow.post_export import quantized_path, report_path_for
from onnxport.gui.dialogs.export_dialog import ExportDialog


def written_names(dialog: ExportDialog) -> list[str]:
    return re.findall(r"<b>(.*?)</b>", dialog.written.text())


def test_dialog_shows_float_and_quantized_names_and_follows_changes(qtbot, tmp_path, settings):
    dialog = ExportDialog(None, ["probabilities"], "x_int8.onnx", quantize="dynamic", settings=settings)
    qtbot.addWidget(dialog)
    dialog.path_edit.setText(str(tmp_path / "x_int8.onnx"))
    dialog.show()
    assert written_names(dialog) == ["x_int8.onnx", "x_int8.int8.onnx", "x_int8.report.json"]
    assert "float32" in dialog.written.text() and "dynamic int8" in dialog.written.text()
    # the names are the ones post_export writes
    assert quantized_path(tmp_path / "x_int8.onnx", "dynamic").name == "x_int8.int8.onnx"
    assert report_path_for(tmp_path / "x_int8.onnx").name == "x_int8.report.json"

    dialog.quantize.setCurrentIndex(dialog.quantize.findData("fp16"))
    assert written_names(dialog) == ["x_int8.onnx", "x_int8.fp16.onnx", "x_int8.report.json"]
    dialog.quantize.setCurrentIndex(dialog.quantize.findData("static"))
    assert written_names(dialog)[1] == "x_int8.qdq.onnx"

    dialog.path_edit.setText(str(tmp_path / "sub" / "other.onnx"))
    assert written_names(dialog) == ["other.onnx", "other.qdq.onnx", "other.report.json"]

    dialog.quantize.setCurrentIndex(0)  # float32 only
    dialog.validate.setChecked(False)
    assert written_names(dialog) == ["other.onnx"]
    dialog.validate.setChecked(True)
    assert written_names(dialog) == ["other.onnx", "other.report.json"]

    dialog.path_edit.setText("")
    assert written_names(dialog) == [] and "destination" in dialog.written.text()


def test_int4_is_one_of_the_choices(qtbot, tmp_path, settings):
    """The CLI's `--mode int4` in the app: weight-only int4, written beside the float32 model."""
    dialog = ExportDialog(None, ["logits"], "m.onnx", quantize="int4", settings=settings)
    qtbot.addWidget(dialog)
    dialog.path_edit.setText(str(tmp_path / "m.onnx"))
    assert dialog.choices().quantize == "int4"
    assert written_names(dialog) == ["m.onnx", "m.int4.onnx", "m.report.json"] and "(int4)" in dialog.written.text()

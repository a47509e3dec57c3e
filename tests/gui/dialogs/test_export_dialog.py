"""The export dialog names every file the export will write, before it runs (issue 15, cut 6)."""

from __future__ import annotations

import re

from onnxport.core.workflow.post_export import quantized_path, report_path_for
from onnxport.gui.dialogs.export_dialog import ExportDialog


def written_names(dialog: ExportDialog) -> list[str]:
    """The file names "Writes: a.onnx (float32), a.int8.onnx (dynamic int8) and a.report.json (report)" lists."""
    return re.findall(r"(?:Writes: |, | and )(\S+) \(", dialog.written.text())


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


def test_the_written_names_are_plain_text_never_markup_shown_raw(qtbot, tmp_path, settings):
    """Issue 35: the label is plain text (names are the user's), so it must hold no <b> tags."""
    from PySide6.QtCore import Qt

    dialog = ExportDialog(None, ["logits"], "m.onnx", quantize="dynamic", settings=settings)
    qtbot.addWidget(dialog)
    dialog.path_edit.setText(str(tmp_path / "<b>m.onnx"))
    assert dialog.written.textFormat() == Qt.TextFormat.PlainText
    assert dialog.written.text() == ("Writes: <b>m.onnx (float32), <b>m.int8.onnx (dynamic int8) and "
                                     "<b>m.report.json (report)")
    dialog.path_edit.setText(str(tmp_path / "m.onnx"))
    assert "<" not in dialog.written.text()


def rows_shown(dialog: ExportDialog) -> set[str]:
    box = dialog.options_box
    labels = [(box.form.labelForField(field), field) for field, _modes, _more in box._rows]
    return {label.text() if label is not None and label.text() else type(field).__name__
            for label, field in labels if box.form.isRowVisible(field)}


def test_every_quantize_option_follows_the_mode_and_builds_the_clis_options(qtbot, tmp_path, settings):
    from onnxport.core.quantize.options import QuantizeOptions

    dialog = ExportDialog(None, ["logits"], "m.onnx", settings=settings)
    qtbot.addWidget(dialog)
    dialog.show()
    assert not dialog.options_box.isVisible() and dialog.choices().quantize_options is None  # float32 only
    dialog.quantize.setCurrentIndex(dialog.quantize.findData("static"))
    assert dialog.options_box.isVisible()
    assert rows_shown(dialog) == {"Accuracy target", "Calibration data", "Validation inputs", "int8 path"}
    box = dialog.options_box
    data = tmp_path / "calibration.npz"
    data.write_bytes(b"")
    box.calibration.setText(str(data))
    box.validation.setText(str(tmp_path))
    box.target.setValue(0.95)
    box.int8_path.setCurrentIndex(box.int8_path.findData("avx2"))
    box.more.setChecked(True)
    assert {"Tokenizer", "Weight scales", "Weight bits", "Op types", "Keep in float"} <= rows_shown(dialog)
    assert "Float32 op types" not in rows_shown(dialog) and "Block size" not in rows_shown(dialog)
    box.exclude.setText("/fc1/MatMul, /fc2/MatMul")
    box.weight_bits.setCurrentIndex(2)  # 8-bit
    dialog.dims.setText("batch=4")
    choices = dialog.choices()
    assert choices.quantize_options == QuantizeOptions(
        calibration=data, calibration_required=True, int8_path="avx2", accuracy_target=0.95,
        validation_inputs=tmp_path, exclude_nodes=("/fc1/MatMul", "/fc2/MatMul"), reduce_range=False)
    assert choices.dim_sizes == {"batch": 4} and choices.shapes == {}
    box.generated.setChecked(True)  # the CLI's --calibration generated
    box.no_target.setChecked(True)  # --no-target
    options = dialog.choices().quantize_options
    assert options.calibration is None and not options.calibration_required and options.accuracy_target is None

    dialog.quantize.setCurrentIndex(dialog.quantize.findData("fp16"))
    assert "Calibration data" not in rows_shown(dialog) and "Float32 op types" in rows_shown(dialog)
    dialog.quantize.setCurrentIndex(dialog.quantize.findData("int4"))
    assert "Block size" in rows_shown(dialog) and "int8 path" not in rows_shown(dialog)


def test_an_entry_that_cannot_be_read_is_said_in_the_dialog(qtbot, tmp_path, settings):
    dialog = ExportDialog(None, ["logits"], "m.onnx", quantize="static", settings=settings)
    qtbot.addWidget(dialog)
    dialog.path_edit.setText(str(tmp_path / "m.onnx"))
    dialog.options_box.calibration.setText(str(tmp_path / "missing.npz"))
    dialog._accept()
    assert "calibration data" in dialog.problem.text() and "missing.npz" in dialog.problem.text()
    assert dialog.result() != dialog.DialogCode.Accepted
    dialog.options_box.calibration.setText("")
    dialog.dims.setText("batch=dynamic")
    dialog._accept()
    assert "give a size" in dialog.problem.text()


def test_remembered_choices_come_back_whole(qtbot, tmp_path, settings):
    from onnxport.core.quantize.options import QuantizeOptions
    from onnxport.gui.dialogs.export_dialog import ExportChoices

    options = QuantizeOptions(calibration=None, calibration_required=False, accuracy_target=None, int8_path="amx",
                              per_channel=False, op_types=("MatMul",), validation_inputs=tmp_path, preprocess=False)
    remembered = ExportChoices(tmp_path / "chosen.onnx", "always", "static", False, options, {"batch": 2},
                               {"x": (1, 3, 8, 8)})
    dialog = ExportDialog(None, ["logits"], "m.onnx", settings=settings, remembered=remembered,
                          reference="the source model (m.onnx)")
    qtbot.addWidget(dialog)
    assert dialog.choices() == remembered
    assert dialog.options_box.more.isChecked()  # the choices under "More options" are in sight
    assert dialog.validate.text() == "Validate against the source model (m.onnx)"

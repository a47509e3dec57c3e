"""The Deploy step: the dialog says what each target needs, and the window runs the core's deploy."""

from __future__ import annotations

from PySide6.QtCore import Qt

from onnxport.core.deploy.targets import parse_target
from onnxport.gui.dialogs.deploy_dialog import DeployDialog
from tests.core.deploy.deploy_models import conv_model, save


def test_dialog_says_what_each_target_needs_and_names_the_files(qtbot, tmp_path, settings):
    model = tmp_path / "m.onnx"
    dialog = DeployDialog(None, model, settings=settings)
    qtbot.addWidget(dialog)
    dialog.show()
    assert dialog.target.currentData() == "ort-mobile"
    assert dialog.needs.text() == parse_target("ort-mobile").needs()
    assert dialog.written.text().startswith("Writes: m.ort and m.required_operators_and_types.config")
    dialog.target.setCurrentIndex(dialog.target.findData("ort-1.14"))
    assert "opset <= 18" in dialog.needs.text() and "IR version <= 8" in dialog.needs.text()
    assert dialog.choices().out.name == "m.ort-1.14.onnx"  # the name follows the target, never the model's
    assert dialog.written.text().startswith("Writes: m.ort-1.14.onnx,")
    dialog.out_edit.setText(str(tmp_path / "mine.onnx"))
    dialog.out_edit.textEdited.emit("mine.onnx")  # as typed by the user: the target keeps the name
    dialog.target.setCurrentIndex(dialog.target.findData("ort-mobile"))
    assert dialog.choices().out.name == "mine.ort"
    assert all(label.textFormat() == Qt.PlainText for label in (dialog.needs, dialog.written, dialog.problem))


def test_bad_dims_are_said_in_the_dialog(qtbot, tmp_path, settings):
    save(conv_model(opset=18, ir_version=8), tmp_path / "m.onnx")
    dialog = DeployDialog(None, tmp_path / "m.onnx", settings=settings)
    qtbot.addWidget(dialog)
    dialog.show()
    dialog.dims.setText("batch=zero")
    dialog._accept()
    assert dialog.isVisible() and "NAME=SIZE or NAME=dynamic" in dialog.problem.text()


def test_window_deploys_through_its_worker(qtbot, window, tmp_path):
    source = tmp_path / "m.onnx"
    save(conv_model(opset=21, ir_version=10), source)
    window.last_export = source
    assert window.deploy_action.isEnabled() and window.deploy_action in window.model_menu.actions()
    window.deploy_flow.choose()
    dialog = window.deploy_flow.dialog
    qtbot.waitUntil(dialog.isVisible, timeout=300_000)
    dialog.target.setCurrentIndex(dialog.target.findData("ort-1.17"))
    dialog.dims.setText("batch=1")
    with qtbot.waitSignal(window.deploy_flow.deployed, timeout=300_000) as blocker:
        dialog._accept()
    result = blocker.args[0]
    assert result.check.passed and result.written == [str(tmp_path / "m.ort-1.17.onnx")]
    assert any("opset 21 -> 20" in line for line in window.log.toPlainText().splitlines())
    assert window.tabs.currentWidget() is window.report_tab


def test_the_destination_follows_a_typed_model_until_the_user_names_it(qtbot, tmp_path, settings):
    """Issue 35: typing the int8 model's path left the destination on the float model's name."""
    dialog = DeployDialog(None, tmp_path / "model.onnx", settings=settings)
    qtbot.addWidget(dialog)
    assert dialog.choices().out == tmp_path / "model.ort"
    dialog.model_edit.setText(str(tmp_path / "model.int8.onnx"))
    assert dialog.choices().out == tmp_path / "model.int8.ort"
    assert dialog.written.text().startswith("Writes: model.int8.ort and model.int8.required_operators_and_types")
    dialog.target.setCurrentIndex(dialog.target.findData("ort-1.17"))
    assert dialog.choices().out == tmp_path / "model.int8.ort-1.17.onnx"
    dialog.out_edit.setText(str(tmp_path / "mine.onnx"))
    dialog.out_edit.textEdited.emit("mine.onnx")  # named by the user: the model no longer renames it
    dialog.model_edit.setText(str(tmp_path / "other.onnx"))
    assert dialog.choices().out == tmp_path / "mine.onnx"

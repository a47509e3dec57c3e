"""The Export dialog renames the ends and shapes the result (issue 39): "Rename" is `--rename`,
"Deploy to" a runtime fixes the input shapes and a fixed or dynamic batch in the deployed model,
checked by running it as the Deploy step does (`export --target T --shape --dim`); a dim the model
lacks is refused naming it, and nothing is deployed."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from onnxport.gui.dialogs.export_dialog import ExportChoices

from ..core.deploy.deploy_models import conv_model, save
from .test_export_choices_flow import close_dialog, export_dialog
from .test_main_window import open_example

pytestmark = pytest.mark.gui


def _inputs(path) -> list[tuple[str, list]]:
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return [(i.name, i.shape) for i in sess.get_inputs()]


def test_renamed_ends_deployed_at_a_fixed_batch_from_the_dialog(qtbot, window, example, tmp_path):
    open_example(qtbot, window, example)
    dialog = export_dialog(qtbot, window)
    out = tmp_path / "m.onnx"
    dialog.path_edit.setText(str(out))
    dialog.renames.setText("input=pixels probabilities=probs")
    dialog.target.setCurrentIndex(dialog.target.findData("ort-1.17"))
    dialog.dims.setText("batch=4")
    assert "m.ort-1.17.onnx (deployed)" in dialog.written.text()
    choices = dialog.choices()
    assert choices.renames == {"input": "pixels", "probabilities": "probs"} and choices.deploy_dims == ["batch=4"]
    assert choices.dim_sizes == {"batch": 4}  # validation's generated inputs too (it is skipped: renamed ends)
    with qtbot.waitSignal(window.deploy_flow.deployed, timeout=300_000) as deployed:
        dialog._accept()
    result = deployed.args[0]
    written = tmp_path / "m.ort-1.17.onnx"
    assert result.check.passed and result.written == [str(written)]
    assert [i.name for i in onnx.load(out).graph.input] == ["pixels"]  # the export itself, renamed
    assert _inputs(written) == [("pixels", [4, 256])]
    sess = ort.InferenceSession(str(written), providers=["CPUExecutionProvider"])
    probs = dict(zip([o.name for o in sess.get_outputs()],
                     sess.run(None, {"pixels": np.ones((4, 256), np.float32)}), strict=True))["probs"]
    assert probs.shape == (4, 3) and np.allclose(probs.sum(axis=1), 1, atol=1e-5)
    close_dialog(dialog)


def test_a_cut_renamed_and_deployed_with_a_dynamic_batch(qtbot, window, tmp_path):
    source = tmp_path / "conv.onnx"
    save(conv_model(opset=18, ir_version=8, batch=1), source)  # a fixed batch of 1
    with qtbot.waitSignal(window.loaded, timeout=300_000):
        window.open_paths([source])
    qtbot.waitUntil(lambda: not window.busy, timeout=300_000)
    window.cut.set_starts(("r",))  # "Start here" at the Relu's output
    dialog = export_dialog(qtbot, window)
    dialog.path_edit.setText(str(tmp_path / "head.onnx"))
    dialog.renames.setText("r=features")
    dialog.target.setCurrentIndex(dialog.target.findData("ort-1.17"))
    dialog.dims.setText("batch=dynamic features:2=8 features:3=8")  # h, w: unnamed after the Conv
    with qtbot.waitSignal(window.deploy_flow.deployed, timeout=300_000) as deployed:
        dialog._accept()
    assert deployed.args[0].check.passed
    (name, shape), = _inputs(tmp_path / "head.ort-1.17.onnx")
    assert name == "features" and isinstance(shape[0], str) and shape[1:] == [4, 8, 8]
    sess = ort.InferenceSession(str(tmp_path / "head.ort-1.17.onnx"), providers=["CPUExecutionProvider"])
    (probs,) = sess.run(None, {"features": np.ones((3, 4, 8, 8), np.float32)})  # a batch of 3
    assert probs.shape == (3, 4)
    close_dialog(dialog)


def test_a_dim_the_model_lacks_is_refused_naming_it(qtbot, window, example, tmp_path):
    open_example(qtbot, window, example)
    dialog = export_dialog(qtbot, window)
    dialog.dims.setText("batch=dynamic")  # frees a dim of a deployed model: no runtime chosen
    dialog._accept()
    assert dialog.isVisible() and "Deploy to" in dialog.problem.text()
    dialog.path_edit.setText(str(tmp_path / "m.onnx"))
    dialog.target.setCurrentIndex(dialog.target.findData("ort-1.17"))
    dialog.dims.setText("sequence=3")
    with qtbot.waitSignal(window.errorShown, timeout=300_000) as shown:
        dialog._accept()
    assert "'sequence'" in shown.args[0] and "\n" not in shown.args[0]  # checked on the export's own inputs
    assert not (tmp_path / "m.onnx").exists() and not (tmp_path / "m.ort-1.17.onnx").exists()
    close_dialog(dialog)


def test_the_choices_come_back_with_the_target(qtbot, settings, tmp_path):
    from onnxport.gui.dialogs.export_dialog import ExportDialog

    choices = ExportChoices(tmp_path / "m.onnx", renames={"x": "pixels"}, target="ort-mobile",
                            deploy_shapes=["pixels=1x3x8x8"], deploy_dims=["batch=dynamic"])
    dialog = ExportDialog(None, ["y"], "m.onnx", settings=settings, remembered=choices)
    qtbot.addWidget(dialog)
    again = dialog.choices()
    assert (again.renames, again.target, again.deploy_shapes, again.deploy_dims) == (
        {"x": "pixels"}, "ort-mobile", ["pixels=1x3x8x8"], ["batch=dynamic"])
    assert again.shapes == {"pixels": (1, 3, 8, 8)} and again.dim_sizes == {}


def test_renamed_ends_turn_validation_off_in_the_dialog(qtbot, settings, tmp_path):
    """The reference has the old names: Validate is off while Rename has any, and on again after."""
    from onnxport.gui.dialogs.export_dialog import ExportDialog

    dialog = ExportDialog(None, ["y"], "m.onnx", settings=settings, folder=tmp_path)
    qtbot.addWidget(dialog)
    assert dialog.choices().validate
    dialog.renames.setText("y=scores")
    assert not dialog.validate.isEnabled() and not dialog.choices().validate and "old names" in dialog.validate.toolTip()
    dialog.renames.setText("")
    assert dialog.validate.isEnabled() and dialog.choices().validate


def test_the_deploy_dialog_refuses_a_dim_the_model_lacks_naming_it(qtbot, window, tmp_path):
    """The Deploy dialog's dims are checked on the model by the deploy: a dim it lacks is one line
    naming it, in an error dialog, and nothing is written; a dynamic batch deploys and runs."""
    source = tmp_path / "m.onnx"
    save(conv_model(opset=18, ir_version=8, batch=1), source)
    window.last_export = source
    window.deploy_flow.choose()
    dialog = window.deploy_flow.dialog
    qtbot.waitUntil(dialog.isVisible)
    dialog.target.setCurrentIndex(dialog.target.findData("ort-1.17"))
    dialog.dims.setText("sequence=3")
    with qtbot.waitSignal(window.errorShown, timeout=60_000) as shown:
        dialog._accept()
    assert "no input dimension is named 'sequence'" in shown.args[0] and "\n" not in shown.args[0]
    assert not (tmp_path / "m.ort-1.17.onnx").exists()
    window.deploy_flow.choose()
    dialog = window.deploy_flow.dialog
    qtbot.waitUntil(dialog.isVisible)
    dialog.target.setCurrentIndex(dialog.target.findData("ort-1.17"))
    dialog.dims.setText("batch=dynamic h=8 w=8")
    with qtbot.waitSignal(window.deploy_flow.deployed, timeout=60_000) as deployed:
        dialog._accept()
    assert deployed.args[0].check.passed
    (name, shape), = _inputs(tmp_path / "m.ort-1.17.onnx")
    assert name == "x" and isinstance(shape[0], str) and shape[1:] == [3, 8, 8]
    sess = ort.InferenceSession(str(tmp_path / "m.ort-1.17.onnx"), providers=["CPUExecutionProvider"])
    assert sess.run(None, {"x": np.ones((2, 3, 8, 8), np.float32)})[0].shape == (2, 4)

"""Smaller app routes of issue 26 item 10: opening another model clears the Report tab (it showed the
previous model's report); the Overview lists a checkpoint's shape mismatches one per line (they ran
together: "...[16, 8])Shape/type mismatch: ;"); Export and Quantize are off on a mismatch, the reason
in their tooltip, as the CLI refuses the export."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper
from PySide6.QtGui import QTextDocument

from onnxport.gui.dialogs.export_dialog import ExportChoices
from onnxport.gui.widgets.tabs import NOTHING_EXPORTED
from tests.support.checkpoint_writer import write_checkpoint

from .test_main_window import open_example

pytestmark = pytest.mark.gui


def _shown(markup: str) -> list[str]:
    doc = QTextDocument()
    doc.setHtml(markup)
    return [line.replace("\xa0", " ") for line in doc.toPlainText().splitlines()]


def test_opening_another_model_clears_the_report(qtbot, window, example, tmp_path):
    open_example(qtbot, window, example)
    out = tmp_path / "model.onnx"
    with qtbot.waitSignal(window.exportFinished, timeout=300_000):
        window.start_export(ExportChoices(out, validate=False))
    qtbot.waitUntil(lambda: not window.busy, timeout=300_000)
    assert window.report_view.report is not None and "Wrote" in window.result_panel.text()
    assert window.last_export == out

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", T.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", T.FLOAT, [1, 4])])
    other = tmp_path / "other.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), other)
    open_example(qtbot, window, [other])
    assert window.report_view.report is None
    assert window.result_panel.text() == NOTHING_EXPORTED
    assert window.last_export is None  # Validate/Deploy no longer act on the other model's export


def test_a_mismatch_is_listed_line_by_line_and_export_is_off(qtbot, window, example, tmp_path):
    wrong = tmp_path / "wrong" / "checkpoint"
    wrong.parent.mkdir()
    weights = {"fc1.weight": np.zeros((16, 8), np.float32), "fc1.bias": np.zeros(16, np.float32),
               "fc2.weight": np.zeros((3, 32), np.float32), "fc2.bias": np.zeros(3, np.float32)}
    write_checkpoint(wrong, weights)
    open_example(qtbot, window, [example[0], wrong])
    lines = _shown(window.sources_panel.text())
    at = lines.index("Shape/type mismatch (export is off):")
    assert lines[at + 1:at + 3] == ["  fc1.weight: model float32[768, 256], checkpoint float32[16, 8]",
                                    "  fc1.bias: model float32[768], checkpoint float32[16]"]
    assert window.model.checked_outputs()  # outputs are checked: only the mismatch keeps Export off
    for action in (window.export_action, window.quantize_action):
        assert not action.isEnabled()
        tip = "\n".join(_shown(action.toolTip()))
        assert tip.startswith("Export is off: checkpoint does not fit the model: 'fc1.weight'"), tip

    open_example(qtbot, window, example)  # the trained checkpoint fits: on again, the usual tooltip
    assert window.export_action.isEnabled() and window.export_action.toolTip() == "Export"  # its text


def test_a_quantization_that_fails_after_the_export_still_shows_the_export(qtbot, window, tmp_path):
    """A model too small for int8 to gain: the float model is written and validated, then the
    quantization refuses. The report shows that export and its passed validation, the error
    dialog says why the quantized model is not there."""
    from tests.core.model_builders import eval_like_mlp, mlp_weights

    folder = tmp_path / "tiny"
    folder.mkdir()
    onnx.save(eval_like_mlp(), folder / "eval_model.onnx")
    write_checkpoint(folder / "checkpoint", mlp_weights())
    open_example(qtbot, window, [folder / "eval_model.onnx", folder / "checkpoint"])
    out = tmp_path / "out.onnx"
    errors = []
    window.errorShown.connect(errors.append)
    with qtbot.waitSignal(window.exportFinished, timeout=300_000):
        window.start_export(ExportChoices(out, quantize="dynamic", validate=True))
    qtbot.waitUntil(lambda: bool(errors), timeout=300_000)
    assert "dynamic" in errors[0] and out.exists() and window.last_export == out
    assert "Wrote" in window.result_panel.text() and "validation passed" in window.result_panel.text()
    assert window.report_view.report["validation"]["passed"] is True


def test_a_file_of_no_kind_onnxport_reads_is_named_as_such(qtbot, window, example, tmp_path):
    """Issue 35: a dropped `.whl` said "add the eval model next to the checkpoint"; the app now says
    what the CLI says, and that hint only when a checkpoint came without its model."""
    import zipfile

    wheel = tmp_path / "tool-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("tool/__init__.py", "")
    with qtbot.waitSignal(window.errorShown, timeout=300_000) as shown:
        window.open_paths([wheel])
    assert shown.args[0].startswith(f"{wheel}: not an ONNX model or parameter file onnxport can read")
    assert "eval model" not in shown.args[0] and "give an .onnx model" in shown.args[0]
    qtbot.waitUntil(lambda: not window.busy, timeout=300_000)
    checkpoint = [p for p in example if p.name == "checkpoint"]
    with qtbot.waitSignal(window.errorShown, timeout=300_000) as shown:
        window.open_paths(checkpoint)
    assert "no ONNX model among the files opened" in shown.args[0] and "add the eval model" in shown.args[0]

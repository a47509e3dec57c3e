"""The app holds the core's checkpoint policy (issue 35 items 1-2): an eval graph opened without its
checkpoint is no longer exported to a model whose weights are inputs under a green "validation
passed" - the Overview says its parameters have no values, and Export asks before keeping them as
inputs; a partial checkpoint is embedded only when the user says so, and the report lists what
stayed; a checkpoint that fits nothing turns Export off, its tooltip naming the counts."""

from __future__ import annotations

import shutil

import onnx
import pytest
from PySide6.QtWidgets import QApplication, QMessageBox

from onnxport.gui.dialogs.export_dialog import ExportChoices
from onnxport.resources import example_files
from tests.core.params.test_checkpoint_fit import constant_weights_model, partial_checkpoint, weights_model

from .test_main_window import error_boxes, open_example
from .test_open_resets_and_refusals import _shown

pytestmark = pytest.mark.gui


def _question() -> QMessageBox | None:
    found = [w for w in QApplication.topLevelWidgets()
             if isinstance(w, QMessageBox) and w.objectName() == "allowQuestion" and w.isVisible()]
    return found[0] if found else None


def _answer(box: QMessageBox, label: str) -> None:
    [button] = [b for b in box.buttons() if b.text() == label]
    button.click()


def test_an_eval_graph_alone_is_not_exported_with_its_weights_as_inputs_unless_asked(qtbot, window, tmp_path):
    model = shutil.copy([p for p in example_files() if p.suffix == ".onnx"][0], tmp_path / "eval_model.onnx")
    open_example(qtbot, window, [model])
    overview = " ".join(_shown(window.sources_panel.text()))
    assert "model's own weights are kept" not in overview
    assert "No checkpoint: fc1.weight, fc1.bias, fc2.weight, fc2.bias are inputs without values" in overview
    out = tmp_path / "model.onnx"
    window.start_export(ExportChoices(out, validate=True))
    qtbot.waitUntil(lambda: _question() is not None, timeout=300_000)
    box = _question()
    assert "4 parameter inputs (fc1.weight, fc1.bias, fc2.weight and 1 more) would stay inputs" in box.text()
    assert not out.exists() and not error_boxes() and window.last_export is None

    with qtbot.waitSignal(window.exportFinished, timeout=300_000):
        _answer(box, "Keep them as inputs")
    assert {i.name for i in onnx.load(str(out)).graph.input} >= {"fc1.weight", "fc2.bias"}


def test_a_partial_checkpoint_is_embedded_only_when_asked_and_the_report_lists_what_stayed(qtbot, window, tmp_path):
    model, ckpt = weights_model(tmp_path / "m.onnx"), partial_checkpoint(tmp_path / "c.npz")
    open_example(qtbot, window, [model, ckpt])
    assert window.export_action.isEnabled()  # a partial fit is asked about, not switched off
    out = tmp_path / "model.onnx"
    window.start_export(ExportChoices(out, validate=False))
    qtbot.waitUntil(lambda: _question() is not None, timeout=300_000)
    assert "only partly: 2 of 9 parameters matched, 7 unexpected" in _question().text()
    assert not out.exists()

    with qtbot.waitSignal(window.exportFinished, timeout=300_000):
        _answer(_question(), "Embed what matches")
    assert window.report_view.report["export"]["partial"]["stayed"] == ["fc2.weight", "fc2.bias"]


def test_a_checkpoint_that_fits_nothing_turns_export_off(qtbot, window, tmp_path):
    det = constant_weights_model(tmp_path / "det.onnx")
    open_example(qtbot, window, [det, [p for p in example_files() if p.name == "checkpoint"][0]])
    assert window.model.checked_outputs()
    assert not window.export_action.isEnabled()
    tip = " ".join(_shown(window.export_action.toolTip()))
    assert "fits nothing in the model: 0 of 4 parameters matched, 4 unexpected" in tip, tip

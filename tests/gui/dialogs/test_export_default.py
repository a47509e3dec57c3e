"""The export dialog starts beside the source model, not in the home folder."""

from __future__ import annotations

import pytest

from onnxport.gui.dialogs.export_dialog import ExportDialog

from ..test_main_window import open_example

pytestmark = pytest.mark.gui


def test_export_starts_beside_the_model(qtbot, window, example, settings, tmp_path):
    settings.setValue("export/folder", str(tmp_path))  # an earlier export elsewhere
    open_example(qtbot, window, example)
    window.export_dialog()
    dialog = window.findChild(ExportDialog)
    qtbot.waitUntil(dialog.isVisible, timeout=300_000)
    assert dialog.choices().path == example[0].parent / "model_inference.onnx"
    dialog.reject()

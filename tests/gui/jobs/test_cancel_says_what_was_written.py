"""Cancel during an export's quantization (issue 26 item 2): the float model was already written and
stays; the log said "export cancelled; nothing was written". It now names what stayed, as the CLI's
interrupted line does (core/util/written_files.py)."""

from __future__ import annotations

import onnxruntime as ort
import pytest

from onnxport.gui.dialogs.export_dialog import ExportChoices

from ..test_main_window import clicking_cancel_when, open_example

pytestmark = pytest.mark.gui


def test_cancel_while_quantizing_names_the_float_model_written(qtbot, window, example, tmp_path, monkeypatch):
    open_example(qtbot, window, example)
    out = tmp_path / "out" / "model.onnx"
    out.parent.mkdir()
    clicks = []
    clicking_cancel_when(monkeypatch, lambda message, token: "quantiz" in message.lower() and not clicks.append(message))
    with qtbot.waitSignal(window.jobEnded, timeout=300_000) as ended:
        window.start_export(ExportChoices(out, quantize="dynamic", validate=False))
    assert clicks, "the cancel was never clicked"
    assert ended.args == ["export", "cancelled"]
    ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])  # the float model stays, complete
    assert sorted(p.name for p in out.parent.iterdir()) == ["model.onnx"]  # no int8 model, no temp
    log = window.log.toPlainText()
    assert f"export cancelled; already written: {out} (complete)" in log
    assert "nothing was written" not in log


def test_cancel_before_anything_is_written_says_nothing_was(qtbot, window, example, tmp_path, monkeypatch):
    open_example(qtbot, window, example)
    out = tmp_path / "model.onnx"
    clicking_cancel_when(monkeypatch, lambda message, token: "export" in message.lower())
    with qtbot.waitSignal(window.jobEnded, timeout=300_000) as ended:
        window.start_export(ExportChoices(out, quantize="dynamic", validate=False))
    assert ended.args == ["export", "cancelled"]
    assert not out.exists()
    assert "export cancelled; nothing was written" in window.log.toPlainText()

"""The Overview's "Export keeps" predicts the written model (issue 15, cut 7)."""

from __future__ import annotations

import re

import onnx

from onnxport.core.util.text import human_size
from onnxport.gui.dialogs.export_dialog import ExportChoices

from ..test_main_window import open_example


def test_plan_panel_shows_what_the_export_writes(qtbot, window, example, tmp_path):
    open_example(qtbot, window, example)
    qtbot.waitUntil(lambda: "nodes written" in window.plan_panel.text(), timeout=300_000)
    text = window.plan_panel.text()
    nodes = int(re.search(r"(\d+) nodes written", text).group(1))
    size = re.search(r"written size <b>(.*?)</b>", text).group(1)
    assert "Dropout/BatchNorm in inference form" in text

    out = tmp_path / "m.onnx"
    with qtbot.waitSignal(window.exportFinished, timeout=300_000):
        window.start_export(ExportChoices(out, validate=False))
    written = onnx.load(out)
    assert nodes == len(written.graph.node) == 4
    assert size == human_size(out.stat().st_size)

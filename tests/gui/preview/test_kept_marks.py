"""The original view marks what the export keeps: the dropped nodes dimmed, counted in the status."""

from __future__ import annotations

import json

import onnx
import pytest

from ...core.model_builders import eval_like_mlp, mlp_weights, session_for

pytestmark = pytest.mark.gui

CLASSES_JS = """JSON.stringify(Array.from(document.querySelectorAll('#canvas g.graph-node'))
  .filter((g) => g.id.startsWith('node-name-'))
  .map((g) => [g.id.substring(10), g.classList.contains('onnxport-dropped'), getComputedStyle(g).opacity]))"""


def test_the_original_view_dims_what_the_export_drops(qtbot, tmp_path):
    from onnxport.gui.preview.preview_panel import PreviewPanel

    path = tmp_path / "eval_model.onnx"
    onnx.save(eval_like_mlp(), path)
    session = session_for(path, mlp_weights())
    kept = {n.name for n in session.selection(["logits"]).preview.graph.node}  # the export's graph, folded
    panel = PreviewPanel()
    qtbot.addWidget(panel)
    panel.resize(900, 700)
    panel.show()
    try:
        panel.set_mode("original")
        with qtbot.waitSignal(panel.rendered, timeout=300_000):
            panel.set_model(session, ["logits"])
        qtbot.waitUntil(lambda: "drops" in panel.status.text(), timeout=300_000)
        with qtbot.waitCallback(timeout=300_000) as got:
            panel.view.run(CLASSES_JS, got)
        marks = json.loads(got.args[0])
        dropped = {name for name, is_dropped, _ in marks if is_dropped}
        assert dropped and not dropped & kept
        assert {name for name, is_dropped, _ in marks if not is_dropped} <= kept
        assert all(float(opacity) < 0.5 for _, is_dropped, opacity in marks if is_dropped)
        assert f"drops {len(dropped)}" in panel.status.text()
        with qtbot.waitSignal(panel.rendered, timeout=300_000):
            panel.set_mode("pruned")
        with qtbot.waitCallback(timeout=300_000) as got:
            panel.view.run(CLASSES_JS, got)
        assert not any(is_dropped for _, is_dropped, _ in json.loads(got.args[0]))  # the export's own graph: no marks
    finally:
        panel.shutdown()

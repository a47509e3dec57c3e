"""The original view marks what the export keeps: the dropped nodes dimmed, counted in the status."""

from __future__ import annotations

import json

import onnx
import pytest

from onnxport.core.graph.preview import preview_model

from ...core.model_builders import eval_like_mlp, mlp_weights, param_set
from .test_netron_preview import PARAMS

pytestmark = pytest.mark.gui

CLASSES_JS = """JSON.stringify(Array.from(document.querySelectorAll('#canvas g.graph-node'))
  .filter((g) => g.id.startsWith('node-name-'))
  .map((g) => [g.id.substring(10), g.classList.contains('onnxport-dropped'), getComputedStyle(g).opacity]))"""


def test_the_original_view_dims_what_the_export_drops(qtbot, tmp_path):
    from onnxport.gui.preview.preview_panel import PreviewPanel

    path = tmp_path / "eval_model.onnx"
    onnx.save(eval_like_mlp(), path)
    kept = {n.name for n in preview_model(onnx.load(path), ["logits"], PARAMS).graph.node}
    panel = PreviewPanel()
    qtbot.addWidget(panel)
    panel.resize(900, 700)
    panel.show()
    try:
        panel.set_mode("original")
        with qtbot.waitSignal(panel.rendered, timeout=60_000):
            panel.set_model(str(path), ["logits"], PARAMS)
        qtbot.waitUntil(lambda: "drops" in panel.status.text(), timeout=10_000)
        with qtbot.waitCallback(timeout=10_000) as got:
            panel.view.run(CLASSES_JS, got)
        marks = json.loads(got.args[0])
        dropped = {name for name, is_dropped, _ in marks if is_dropped}
        assert dropped and not dropped & kept
        assert {name for name, is_dropped, _ in marks if not is_dropped} <= kept
        assert all(float(opacity) < 0.5 for _, is_dropped, opacity in marks if is_dropped)
        assert f"drops {len(dropped)}" in panel.status.text()
        with qtbot.waitSignal(panel.rendered, timeout=60_000):
            panel.set_mode("pruned")
        with qtbot.waitCallback(timeout=10_000) as got:
            panel.view.run(CLASSES_JS, got)
        assert not any(is_dropped for _, is_dropped, _ in json.loads(got.args[0]))  # the export's own graph: no marks
    finally:
        panel.shutdown()


def test_what_the_export_folds_counts_as_dropped(tmp_path):
    """A Transpose of a weight is folded by the export: the original view dims it, as the pruned
    view (the export's own graph) does not draw it."""
    from onnxport.core.export.selection_graph import SelectionGraphs
    from onnxport.gui.preview.kept_marks import kept_node_names

    path = tmp_path / "eval_model.onnx"
    onnx.save(eval_like_mlp(), path)
    model = onnx.load(path)
    graphs = SelectionGraphs(model, path, param_set(mlp_weights()))
    kept = kept_node_names(path, ["logits"], PARAMS, (model, None, graphs))
    assert kept == {n.name for n in graphs.get(["logits"]).preview.graph.node}
    assert "/fc1/MatMul" in kept and "/fc1/Transpose" not in kept

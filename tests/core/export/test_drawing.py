"""What the Preview draws: a selection is the export's own graph without weights; the Original
view is the model as it is, with the export's nodes named for the marks (core/export/drawing.py)."""

from __future__ import annotations

import onnx
import pytest

from onnxport.core.export.drawing import draw_selection, draw_whole, kept_node_names
from onnxport.core.export.selection_graph import SelectionGraphs
from onnxport.core.util.errors import UnknownOutputError

from ..model_builders import eval_like_mlp, forward_mlp, mlp_weights, param_set, session_for


def test_a_selection_of_an_eval_graph_is_drawn_as_the_export_writes_it(tmp_path):
    path = tmp_path / "eval_model.onnx"
    onnx.save(eval_like_mlp(), path)
    session = session_for(path, mlp_weights())
    drawn = onnx.load_from_string(draw_selection(session.selections, ["logits"]).data)
    ops = [n.op_type for n in drawn.graph.node]
    assert "SoftmaxCrossEntropyLoss" not in ops and "Softmax" not in ops
    assert "Dropout" not in ops and "Transpose" not in ops  # inference form and folded, as written
    assert [o.name for o in drawn.graph.output] == ["logits"]
    assert [i.name for i in drawn.graph.input] == ["input"]  # labels and parameters gone
    assert all(not t.raw_data and list(t.dims) for t in drawn.graph.initializer)  # weights as headers


def test_a_focused_selection_is_the_focus_of_its_preview_drawn_without_copying_it(tmp_path):
    """A selection drawn focused shows exactly what focusing its preview (the export's graph,
    weights as headers) shows; it is focused on the export's graph itself, never copied whole."""
    from onnxport.core.graph.focus import FocusGraph

    path = tmp_path / "eval_model.onnx"
    onnx.save(eval_like_mlp(), path)
    session = session_for(path, mlp_weights())
    drawing = draw_selection(session.selections, ["logits"], budget=3, whole_up_to=2)
    selected = session.selection(["logits"])
    assert drawing.focused is not None and selected._preview is None  # no whole copy made
    expected = FocusGraph(selected.preview).focus(["logits"], (), None, 3)
    assert drawing.data == expected.model.SerializeToString()
    drawn = onnx.load_from_string(drawing.data)
    assert drawn.graph.initializer and all(not t.raw_data and list(t.dims) for t in drawn.graph.initializer)
    more = draw_selection(session.selections, ["logits"], budget=6, whole_up_to=2)
    assert more.graph is drawing.graph
    assert more.data == FocusGraph(selected.preview).focus(["logits"], (), None, 6).model.SerializeToString()


def test_the_original_view_draws_the_model_as_it_is_and_names_what_the_export_keeps(tmp_path):
    model = eval_like_mlp()
    graphs = SelectionGraphs(model, None, param_set(mlp_weights()))
    drawing = draw_whole(model)
    drawn = onnx.load_from_string(drawing.data)
    assert [n.name for n in drawn.graph.node] == [n.name for n in model.graph.node]
    kept = kept_node_names(graphs, ["logits"])
    assert kept == {n.name for n in graphs.get(["logits"]).preview.graph.node}
    assert "/fc1/MatMul" in kept and "/fc1/Transpose" not in kept  # folded by the export: marked dropped
    assert kept_node_names(graphs, ["logits"], whole_up_to=2) is None  # drawn focused: no marks
    assert kept_node_names(graphs, []) is None


def test_a_big_original_is_drawn_focused_and_its_graph_handed_back(tmp_path):
    model = forward_mlp()
    first = draw_whole(model, budget=3, whole_up_to=2)
    assert first.focused is not None and first.graph is not None and first.focused.shown_nodes <= 3
    again = draw_whole(model, budget=6, graph=first.graph, whole_up_to=2)
    assert again.graph is first.graph and again.focused.shown_nodes > first.focused.shown_nodes


def test_an_unknown_output_is_the_one_line_error():
    graphs = SelectionGraphs(forward_mlp(), None, None)
    with pytest.raises(UnknownOutputError, match="probabilites"):
        draw_selection(graphs, ["probabilites"])


def test_the_bundled_example_previews_the_four_nodes_the_export_writes():
    """ORT's eval graph keeps a Dropout ratio Constant: once Dropout is gone it must go too."""
    from onnxport.core.workflow.sources import open_session
    from onnxport.resources import example_files

    model, checkpoint = example_files()[:2]
    session = open_session(model, [checkpoint])
    drawn = onnx.load_from_string(draw_selection(session.selections, ["logits", "probabilities"]).data)
    assert [n.op_type for n in drawn.graph.node] == ["Gemm", "Relu", "Gemm", "Softmax"]

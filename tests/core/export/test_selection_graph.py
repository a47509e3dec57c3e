"""One inference graph per selection (issue 28): the Preview draws exactly the nodes Export writes
(folding included), the plan counts that same graph, and the focused preview starts from it."""

from __future__ import annotations

import numpy as np
import onnx

from onnxport.core.export.drawing import draw_selection
from onnxport.core.export.export import export_model, export_selection, plan_export
from onnxport.core.export.output_types import complete_type
from onnxport.core.workflow.session import ModelSession

from ..model_builders import eval_like_mlp, mlp_weights, param_set


def _opened(tmp_path):
    path = tmp_path / "eval_model.onnx"
    onnx.save(eval_like_mlp(), path)
    model = onnx.load(path, load_external_data=False)
    return ModelSession(model_path=path, model=model, params=param_set(mlp_weights()))


def _nodes(model: onnx.ModelProto) -> list[tuple[str, str]]:
    return [(n.op_type, n.name) for n in model.graph.node]


def _app_preview(sources: ModelSession, outputs: list[str], **kw) -> onnx.ModelProto:
    """What the app's preview job draws for a selection (gui/preview/preview_panel.py)."""
    return onnx.load_from_string(draw_selection(sources.selections, outputs, **kw).data)


def test_the_preview_draws_the_nodes_the_export_writes_folding_included(tmp_path):
    sources = _opened(tmp_path)
    outputs = ["probabilities"]
    preview = _app_preview(sources, outputs)
    export_model(sources.model_path, tmp_path / "out.onnx", outputs, sources.params)
    written = onnx.load(tmp_path / "out.onnx")
    assert "Transpose" not in {n.op_type for n in written.graph.node}  # folding changed the graph
    assert _nodes(preview) == _nodes(written)
    assert [o.name for o in preview.graph.output] == [o.name for o in written.graph.output]
    assert {t.name for t in preview.graph.initializer} == {t.name for t in written.graph.initializer}
    for t in preview.graph.initializer:  # weight-free: headers only
        assert not (t.raw_data or t.float_data or t.external_data) and list(t.dims)


def test_a_mid_tensor_preview_declares_its_output_type(tmp_path):
    sources = _opened(tmp_path)
    preview = _app_preview(sources, ["fc1.mm"])
    (output,) = preview.graph.output
    assert output.name == "fc1.mm" and complete_type(output.type)
    for t in preview.graph.initializer:  # the checker wants values: zeros in the headers' shapes
        t.raw_data = np.zeros(tuple(t.dims), onnx.helper.tensor_dtype_to_np_dtype(t.data_type)).tobytes()
    onnx.checker.check_model(preview, full_check=True)


def test_the_focused_preview_starts_from_the_same_graph(tmp_path):
    sources = _opened(tmp_path)
    outputs = ["probabilities"]
    whole = _app_preview(sources, outputs)
    answer = draw_selection(sources.selections, outputs, budget=2, whole_up_to=2)
    assert answer.focused is not None and not answer.focused.complete
    drawn = {(n.op_type, n.name) for n in onnx.load_from_string(answer.data).graph.node if n.domain != "onnxport"}
    assert drawn and drawn < set(_nodes(whole))  # a part of the export's graph: no Transpose comes back
    assert answer.focused.total_nodes == len(whole.graph.node)


def test_one_build_per_selection_read_by_the_plan(tmp_path):
    sources = _opened(tmp_path)
    graphs = sources.selections
    assert sources.selections is graphs
    first = graphs.get(["probabilities"])
    assert graphs.get(["probabilities"]) is first and graphs.get(["logits"]) is not first
    skeleton = first.built.skeleton.SerializeToString()
    planned = plan_export(graphs, None, ["probabilities"])
    assert planned == _opened(tmp_path).summary(["probabilities"])  # the same counted afresh
    assert planned.kept_nodes == len(first.preview.graph.node) and planned.folded_nodes == 2
    assert first.built.skeleton.SerializeToString() == skeleton  # the plan only read it


def test_the_export_writes_the_cached_graph_without_changing_it(tmp_path):
    sources = _opened(tmp_path)
    selected = sources.selection(["fc1.mm"])
    skeleton = selected.built.skeleton.SerializeToString()
    result = export_selection(sources.selections, ["fc1.mm"], tmp_path / "out.onnx")
    written = onnx.load(tmp_path / "out.onnx")
    onnx.checker.check_model(written, full_check=True)
    assert _nodes(written) == _nodes(selected.preview) and result.nodes == len(written.graph.node)
    assert selected.built.skeleton.SerializeToString() == skeleton

"""plan_export plans on the graph the index read (graph_table) - the same plan as on a table read
afresh - and a cancelled plan stops with `Cancelled` (the app cancels a plan a newer
checked-output change supersedes)."""

from __future__ import annotations

import pytest

from onnxport.core.export.export import plan_export
from onnxport.core.export.selection_graph import SelectionGraphs
from onnxport.core.graph.graph_table import CHECK_EVERY
from onnxport.core.graph.index import build_index
from onnxport.core.util.errors import Cancelled, UnknownOutputError
from onnxport.core.util.progress import CancelToken

from ..model_builders import eval_like_mlp, mlp_weights, param_set


@pytest.mark.parametrize("outputs", [["hidden"], ["logits"], ["logits", "hidden"]])
def test_the_plan_is_the_same_with_the_index(outputs):
    model = eval_like_mlp()
    params = param_set(mlp_weights())
    index = build_index(model, parameter_names=set(params))
    assert index.table is not None
    with_index = SelectionGraphs(model, None, params, index.table, index.tensor_type)
    afresh = SelectionGraphs(eval_like_mlp(), None, params)
    assert plan_export(with_index, index, outputs) == plan_export(afresh, None, outputs)
    with pytest.raises(UnknownOutputError, match="unknown output 'hiden'"):
        plan_export(with_index, index, ["hiden"])


def test_a_cancelled_plan_stops():
    from onnx import TensorProto as T
    from onnx import helper

    n = CHECK_EVERY + 1
    nodes = [helper.make_node("Relu", [f"t{i}"], [f"t{i + 1}"], name=f"/l{i}/Relu") for i in range(n)]
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("t0", T.FLOAT, [1])],
                              [helper.make_tensor_value_info(f"t{n}", T.FLOAT, [1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    index = build_index(model)
    cancel = CancelToken()
    assert plan_export(SelectionGraphs(model, None, None, index.table), index, [f"t{n}"], cancel).kept_nodes == n
    cancel.cancel()
    with pytest.raises(Cancelled):  # stops while planning
        plan_export(SelectionGraphs(model, None, None, index.table), index, [f"t{n}"], cancel)

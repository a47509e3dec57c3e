"""The graph read once (GraphTable) plans exactly what plan_prune plans, names unnamed nodes as
the index does, counts body captures as uses, and stops on cancel."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnxport.core.graph.graph_table import CHECK_EVERY, GraphTable, plan_prune_table
from onnxport.core.graph.prune import plan_prune
from onnxport.core.util.errors import Cancelled, UnknownOutputError
from onnxport.core.util.progress import CancelToken


def branchy_model() -> onnx.ModelProto:
    """Two branches over a weight and a parameter input, an unnamed node, an If whose branch
    reads an outer tensor (a capture), an optional empty input and a label input."""
    then_body = helper.make_graph([helper.make_node("Identity", ["captured"], ["t_out"])], "then", [],
                                  [helper.make_tensor_value_info("t_out", T.FLOAT, None)])
    else_body = helper.make_graph([helper.make_node("Identity", ["x"], ["e_out"])], "else", [],
                                  [helper.make_tensor_value_info("e_out", T.FLOAT, None)])
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["a"], name="/a/MatMul"),
        helper.make_node("Add", ["a", "bias"], ["b"]),  # unnamed
        helper.make_node("Relu", ["x"], ["captured"], name="/cap/Relu"),
        helper.make_node("Relu", ["b"], ["unused"], name="/unused/Relu"),
        helper.make_node("ReduceSum", ["b"], ["cond_f"], name="/cond/ReduceSum", keepdims=0),
        helper.make_node("Cast", ["cond_f"], ["cond"], name="/cond/Cast", to=T.BOOL),
        helper.make_node("If", ["cond"], ["branch"], name="/if/If", then_branch=then_body, else_branch=else_body),
        helper.make_node("Clip", ["b", "", "labels"], ["clipped"], name="/clip/Clip"),
    ]
    graph = helper.make_graph(
        nodes, "branchy",
        [helper.make_tensor_value_info("x", T.FLOAT, [1, 4]), helper.make_tensor_value_info("bias", T.FLOAT, [4]),
         helper.make_tensor_value_info("labels", T.FLOAT, []), helper.make_tensor_value_info("w", T.FLOAT, [4, 4])],
        [helper.make_tensor_value_info("branch", T.FLOAT, None)],
        initializer=[numpy_helper.from_array(np.eye(4, dtype=np.float32), "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("outputs", [["branch"], ["clipped"], ["b", "captured"], ["a"], ["x"], [" unused ", "a"]])
def test_the_table_plans_what_plan_prune_plans(outputs):
    model = branchy_model()
    table = GraphTable.read(model.graph)
    assert model.graph.node[1].name == "Add_1" and table.names[1] == "Add_1"  # named as the index names
    assert len(table) == len(model.graph.node) and table.with_bodies
    assert table.uses[6] == ["cond", "captured", "x"]  # the If reads what its branches capture
    assert table.uses[7] == ["b", "labels"]  # the empty optional input is no use
    for params in ((), {"bias"}):
        assert plan_prune_table(model, table, outputs, params) == plan_prune(model, outputs, params)


@pytest.mark.parametrize("outputs", [["nope"], ["a", "a"], [], [" "]])
def test_bad_outputs_raise_what_plan_prune_raises(outputs):
    model = branchy_model()
    table = GraphTable.read(model.graph)
    with pytest.raises(UnknownOutputError) as expected:
        plan_prune(model, outputs)
    with pytest.raises(UnknownOutputError) as got:
        plan_prune_table(model, table, outputs)
    assert str(got.value) == str(expected.value)


def chain(n: int) -> onnx.ModelProto:
    nodes = [helper.make_node("Relu", [f"t{i}"], [f"t{i + 1}"], name=f"/l{i}/Relu") for i in range(n)]
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("t0", T.FLOAT, [1])],
                              [helper.make_tensor_value_info(f"t{n}", T.FLOAT, [1])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_reading_and_planning_stop_on_cancel():
    model = chain(CHECK_EVERY + 1)
    cancel = CancelToken()
    cancel.cancel()
    with pytest.raises(Cancelled):
        GraphTable.read(model.graph, cancel)
    table = GraphTable.read(model.graph)
    with pytest.raises(Cancelled):
        plan_prune_table(model, table, [f"t{CHECK_EVERY + 1}"], cancel=cancel)
    assert len(plan_prune_table(model, table, [f"t{CHECK_EVERY + 1}"]).node_indices) == CHECK_EVERY + 1



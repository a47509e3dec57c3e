"""Pruning (graph.prune): the plan keeps exactly what the outputs need; the pass applies it in place."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from onnxport.core.graph.passes import REMOVED
from onnxport.core.graph.prune import plan_prune, prune
from onnxport.core.util.errors import UnknownOutputError

from ..model_builders import make_model


def two_branch_model() -> onnx.ModelProto:
    """x -> a -> b -> y1 ; z -> c -> y2 ; w (initializer) feeds a ; v (initializer) feeds c only.

    `labels` is an input nothing reads; `b`'s value_info is declared, `a`'s is not.
    """
    nodes = [
        helper.make_node("Add", ["x", "w"], ["a"], name="add_w"),
        helper.make_node("Relu", ["a"], ["b"], name="relu"),
        helper.make_node("Neg", ["b"], ["y1"], name="neg"),
        helper.make_node("Mul", ["z", "v"], ["c"], name="mul_v"),
        helper.make_node("Abs", ["c"], ["y2"], name="abs"),
    ]
    inputs = [helper.make_tensor_value_info(n, T.FLOAT, [3]) for n in ("x", "z")]
    inputs.append(helper.make_tensor_value_info("labels", T.INT64, [3]))
    outputs = [helper.make_tensor_value_info(n, T.FLOAT, [3]) for n in ("y1", "y2")]
    inits = [numpy_helper.from_array(np.array([1.0, -2.0, 3.0], np.float32), "w"),
             numpy_helper.from_array(np.array([2.0, 2.0, 2.0], np.float32), "v")]
    model = make_model(nodes, inputs, outputs, inits)
    model.graph.value_info.append(helper.make_tensor_value_info("b", T.FLOAT, [3]))
    return model


def test_the_plan_keeps_exactly_what_the_outputs_need():
    model = two_branch_model()
    plan = plan_prune(model, ["y1"])
    assert [model.graph.node[i].name for i in plan.node_indices] == ["add_w", "relu", "neg"]
    assert plan.inputs == ["x"] and plan.initializers == ["w"]
    assert sorted(plan.dropped_inputs) == ["labels", "z"] and plan.dropped_nodes == 2
    both = plan_prune(model, ["y2", "y1"])
    assert both.outputs == ["y2", "y1"] and len(both.node_indices) == 5 and both.inputs == ["x", "z"]


def test_prune_edits_the_model_in_place_and_reports_what_went():
    model = two_branch_model()
    result = prune(model, plan_prune(model, ["y1"]))
    assert result.model is model and result.changed
    graph = model.graph
    assert [n.name for n in graph.node] == ["add_w", "relu", "neg"]
    assert [i.name for i in graph.input] == ["x"]  # unused inputs dropped (labels, z)
    assert [o.name for o in graph.output] == ["y1"]
    assert [t.name for t in graph.initializer] == ["w"]
    assert result.names(REMOVED) == ["mul_v", "abs"]
    assert any("'labels' dropped" in n for n in result.notes) and any("'v' removed" in n for n in result.notes)
    (got,) = ReferenceEvaluator(model).run(None, {"x": np.array([0.5, 0.5, -9], np.float32)})
    np.testing.assert_array_equal(got, -np.maximum(np.array([1.5, -1.5, -6], np.float32), 0))


def test_an_intermediate_tensor_becomes_a_typed_output():
    model = two_branch_model()
    prune(model, plan_prune(model, ["b"]))
    assert [n.name for n in model.graph.node] == ["add_w", "relu"]
    (out,) = model.graph.output
    assert out.name == "b" and out.type.tensor_type.elem_type == T.FLOAT  # typed from value_info
    assert [vi.name for vi in model.graph.value_info] == []  # an output's type is in the output


def test_an_untyped_intermediate_output_takes_the_inferred_type():
    model = two_branch_model()
    inferred = {"a": helper.make_tensor_value_info("a", T.FLOAT, [3])}
    prune(model, plan_prune(model, ["a"]), inferred)
    (out,) = model.graph.output
    assert out.name == "a" and [d.dim_value for d in out.type.tensor_type.shape.dim] == [3]
    untyped = two_branch_model()
    prune(untyped, plan_prune(untyped, ["a"]))
    assert not untyped.graph.output[0].HasField("type")  # no type known: the name only


def test_parameter_inputs_leave_the_inputs_and_nothing_to_prune_is_no_change():
    model = two_branch_model()
    model.graph.input.append(helper.make_tensor_value_info("p", T.FLOAT, [3]))
    model.graph.node.append(helper.make_node("Sub", ["y1", "p"], ["y3"], name="sub_p"))
    model.graph.output.append(helper.make_tensor_value_info("y3", T.FLOAT, [3]))
    plan = plan_prune(model, ["y3"], parameter_names={"p"})
    assert plan.parameter_inputs == ["p"] and plan.inputs == ["x"]
    prune(model, plan)
    assert [i.name for i in model.graph.input] == ["x"]
    again = prune(model, plan_prune(model, ["y3"], parameter_names={"p"}))
    assert not again.changed and again.changes == [] and [n.name for n in model.graph.node][-1] == "sub_p"


def test_unknown_outputs_raise_before_anything_is_edited():
    model = two_branch_model()
    before = model.SerializeToString()
    with pytest.raises(UnknownOutputError, match="unknown output 'y11'") as info:
        plan_prune(model, ["y11"])
    assert "did you mean 'y1'" in info.value.one_line()
    with pytest.raises(ValueError, match="plan is for a graph of 5 nodes"):
        prune(make_model([], [], []), plan_prune(model, ["y1"]))
    assert model.SerializeToString() == before

"""Cutting a graph at new inputs (issue 39): the plan stops at the tensors to start from, keeps the
source's inputs still needed, and refuses a start no output needs in one line."""

from __future__ import annotations

import pytest

from onnxport.core.graph.graph_table import GraphTable, plan_prune_table
from onnxport.core.graph.prune import plan_prune, prune
from onnxport.core.util.errors import OnnxportError, UnknownOutputError

from ..model_builders import forward_mlp, mlp_weights

PARAMS = set(mlp_weights())


def test_the_plan_starts_at_the_cut():
    model = forward_mlp()
    plan = plan_prune(model, ["probabilities"], starts=["hidden"])
    kept = [model.graph.node[i].name for i in plan.node_indices]
    assert "/fc1/MatMul" not in kept and "/dropout/Dropout" in kept and "/softmax/Softmax" in kept
    assert plan.cut_inputs == ["hidden"] and plan.inputs == [] and "input" in plan.dropped_inputs
    assert plan == plan_prune_table(model, GraphTable.read(model.graph), ["probabilities"], starts=["hidden"])


def test_the_pass_declares_the_cut_first_then_the_inputs_still_needed():
    from onnx import TensorProto as T
    from onnx import helper

    from ..model_builders import make_model

    nodes = [helper.make_node("Relu", ["x"], ["a"], name="relu"),
             helper.make_node("Add", ["a", "y"], ["b"], name="add"),
             helper.make_node("Neg", ["b"], ["c"], name="neg")]
    model = make_model(nodes, [helper.make_tensor_value_info("x", T.FLOAT, [2]),
                               helper.make_tensor_value_info("y", T.FLOAT, [2])],
                       [helper.make_tensor_value_info("c", T.FLOAT, [2])])
    model.graph.value_info.append(helper.make_tensor_value_info("a", T.FLOAT, [2]))
    plan = plan_prune(model, ["c"], starts=["a"])
    result = prune(model, plan)
    assert [i.name for i in model.graph.input] == ["a", "y"]  # typed from the graph's value_info
    assert model.graph.input[0].type.tensor_type.elem_type == T.FLOAT
    assert [n.name for n in model.graph.node] == ["add", "neg"] and "a" not in {v.name for v in model.graph.value_info}
    assert result.names() == ["relu"] and any("'a' added" in n for n in result.notes)


def test_a_start_no_output_needs_is_refused_in_one_line():
    model = forward_mlp()
    with pytest.raises(OnnxportError, match="cannot start from 'fc2.mm': no chosen output depends on it"):
        plan_prune(model, ["hidden"], starts=["fc2.mm"])
    with pytest.raises(UnknownOutputError, match="unknown tensor 'hiden' to start from.*did you mean 'hidden'"):
        plan_prune_table(model, GraphTable.read(model.graph), ["logits"], starts=["hiden"])


def test_a_start_whose_node_is_still_needed_is_refused():
    model = forward_mlp()
    with pytest.raises(OnnxportError, match="its node '/dropout/Dropout' is still needed"):
        plan_prune(model, ["logits", "mask"], starts=["dropped"])


def test_a_graph_input_as_start_changes_nothing():
    model = forward_mlp()
    assert plan_prune(model, ["logits"], starts=["input"]) == plan_prune(model, ["logits"])


def test_a_start_another_start_cuts_off_is_said_so():
    """`--from hidden,dropped`: 'dropped' is below 'hidden', so nothing kept reads 'hidden'; the
    refusal says the other cut leaves it out, not that the outputs never depended on it."""
    model = forward_mlp()
    with pytest.raises(OnnxportError, match="cannot start from 'hidden': the cut at dropped already leaves it out"):
        plan_prune(model, ["probabilities"], starts=["hidden", "dropped"])
    with pytest.raises(OnnxportError, match="cannot start from 'mask': no chosen output depends on it$"):
        plan_prune(model, ["probabilities"], starts=["dropped", "mask"])  # the Dropout's mask: never upstream

"""The pass contract (graph.passes): every pass edits the model it is given, returns that same
object, says whether it changed it and which nodes it touched; run again, it changes nothing."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnxport.core.graph.const_tensors import from_array
from onnxport.core.graph.eval_mode import to_inference_form
from onnxport.core.graph.fold import fold_constants
from onnxport.core.graph.passes import ADDED, FOLDED, REMOVED, REWRITTEN, NodeChange
from onnxport.core.graph.prune import plan_prune, prune
from onnxport.core.graph.weightless import to_weightless, weightless_copy

from ..model_builders import forward_mlp, make_model, mlp_weights

PARAMS = tuple(mlp_weights())


def run_prune(model):
    return prune(model, plan_prune(model, ["logits"]))


def run_fold(model):
    consts = {t.name: from_array(t.name, numpy_helper.to_array(t)) for t in model.graph.initializer}
    del model.graph.initializer[:]
    return fold_constants(model, consts)


PASSES = {
    "prune": run_prune,
    "inference_form": to_inference_form,
    "fold": run_fold,
}


@pytest.mark.parametrize("name", list(PASSES))
def test_a_pass_edits_in_place_returns_the_same_model_and_is_idempotent(name):
    model = forward_mlp()
    before = model.SerializeToString()
    result = PASSES[name](model)
    assert result.model is model
    assert result.changed and model.SerializeToString() != before
    assert result.changes and all(isinstance(c, NodeChange) for c in result.changes)
    if name == "fold":
        model.graph.initializer.extend(numpy_helper.from_array(c.values(), n) for n, c in result.constants.items())
    after = model.SerializeToString()
    again = PASSES[name](model)
    assert again.model is model and not again.changed and again.changes == []
    if name != "fold":  # fold takes the initializers out as constants: the graph is the same
        assert model.SerializeToString() == after


def test_inference_form_reports_each_node_and_what_happened():
    nodes = [
        helper.make_node("Dropout", ["x", "r", "t"], ["d1"], name="bypassed"),
        helper.make_node("BatchNormalization", ["d1", "s", "b", "m", "v"], ["bn", "rm", "rv"], name="bn",
                         training_mode=1),
        helper.make_node("Dropout", ["bn", "r", "t"], ["y", "mask"], name="kept_mask"),
        helper.make_node("Dropout", ["bn"], ["z"], name="to_identity"),
    ]
    c = np.ones(2, np.float32)
    inits = [numpy_helper.from_array(a, n) for n, a in
             {"r": np.array(0.5, np.float32), "t": np.array(True), "s": c, "b": c, "m": c, "v": c}.items()]
    model = make_model(nodes, [helper.make_tensor_value_info("x", T.FLOAT, [1, 2])],
                       [helper.make_tensor_value_info(n, T.UNDEFINED, None) for n in ("y", "mask", "z")], inits)
    result = to_inference_form(model)
    assert [(c.node, c.action) for c in result.changes] == [
        ("bypassed", REMOVED), ("bn", REWRITTEN), ("kept_mask", REWRITTEN), ("to_identity", REWRITTEN),
        ("kept_mask__onnxport_training_mode_false", ADDED)]
    assert result.names(REMOVED, REWRITTEN) == ["bypassed", "bn", "kept_mask", "to_identity"]
    ops = [(n.name, n.op_type) for n in model.graph.node]
    assert ("bypassed", "Dropout") not in ops and ("to_identity", "Identity") in ops
    assert [n.op_type for n in model.graph.node] == ["BatchNormalization", "Constant", "Dropout", "Identity"]
    bn = model.graph.node[0]
    assert bn.input[0] == "x" and list(bn.output) == ["bn"]  # reads past the bypassed Dropout; stats gone
    assert model.graph.node[2].input[2] == "kept_mask__onnxport_training_mode_false"


def test_fold_names_the_folded_nodes():
    model = forward_mlp()
    result = run_fold(model)
    assert result.names(FOLDED) == ["/fc1/Transpose", "/fc2/Transpose"]
    assert {"fc1.wT", "fc2.wT"} <= set(result.constants) and "fc1.weight" not in result.constants


def test_to_weightless_is_in_place_and_weightless_copy_is_not():
    whole = forward_mlp()
    before = whole.SerializeToString()
    copy = weightless_copy(whole)
    assert whole.SerializeToString() == before
    stripped = to_weightless(whole)
    assert stripped.model is whole and whole.SerializeToString() == copy.SerializeToString()
    assert stripped.changed and stripped.changes == [] and len(stripped.notes) == len(whole.graph.initializer)
    assert [n.op_type for n in whole.graph.node] == [n.op_type for n in forward_mlp().graph.node]  # nothing pruned
    assert all(not t.raw_data for t in whole.graph.initializer)
    assert not to_weightless(whole).changed


def test_a_model_the_pass_has_nothing_to_do_for_is_unchanged():
    model = make_model([helper.make_node("Relu", ["x"], ["y"], name="relu")],
                       [helper.make_tensor_value_info("x", T.FLOAT, [2])],
                       [helper.make_tensor_value_info("y", T.FLOAT, [2])])
    before = model.SerializeToString()
    for result in (to_inference_form(model), prune(model, plan_prune(model, ["y"])), fold_constants(model, {})):
        assert not result.changed and result.changes == [] and result.notes == []
    assert model.SerializeToString() == before

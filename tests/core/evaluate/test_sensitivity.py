"""Sensitivity (evaluate.sensitivity): the node that adds the error is ranked first.

The reference is a float MLP (three MatMul layers); the candidate is the same graph, tensor names
kept, with the first weight slightly perturbed, the second very noisy and the third somewhat. The
last layer's output then has the largest error of all, but most of it comes from the noisy
layer: `layer_errors` must rank the noisy layer's node first, by the error it *adds*.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnxport.core.evaluate.sensitivity import changed_nodes, compared_tensors, layer_errors

from ..model_builders import make_model

D = 64
RNG = np.random.default_rng(11)
WEIGHTS = {f"w{i}": (RNG.standard_normal((D, D)) / np.sqrt(D)).astype(np.float32) for i in (1, 2, 3)}
FEED = {"x": RNG.standard_normal((8, D)).astype(np.float32)}


def mlp(weights: dict[str, np.ndarray], noisy_input: bool = False) -> onnx.ModelProto:
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h1"], name="mm1"),
             helper.make_node("Relu", ["h1"], ["a1"], name="relu1"),
             helper.make_node("MatMul", ["a1", "w2"], ["h2"], name="mm2"),
             helper.make_node("Relu", ["h2"], ["a2"], name="relu2"),
             helper.make_node("MatMul", ["a2", "w3"], ["y"], name="mm3")]
    if noisy_input:  # as a QDQ model does: the node reads a new tensor instead of its input
        nodes.insert(2, helper.make_node("Add", ["a1", "jitter"], ["a1_noisy"], name="jitter_add"))
        nodes[3].input[0] = "a1_noisy"
        weights = {**weights, "jitter": (0.3 * RNG.standard_normal(D)).astype(np.float32)}
    inits = [numpy_helper.from_array(v, k) for k, v in weights.items()]
    return make_model(nodes, [helper.make_tensor_value_info("x", T.FLOAT, [8, D])],
                      [helper.make_tensor_value_info("y", T.FLOAT, [8, D])], inits)


def perturbed(scale: dict[str, float]) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(5)
    return {k: (w * (1 + scale[k] * rng.standard_normal(w.shape))).astype(np.float32) for k, w in WEIGHTS.items()}


def test_the_noisy_node_is_ranked_first_by_the_error_it_adds():
    reference = mlp(WEIGHTS)
    candidate = mlp(perturbed({"w1": 1e-3, "w2": 0.2, "w3": 0.2}))
    assert compared_tensors(candidate, reference) == ["h1", "a1", "h2", "a2", "y"]
    errors = layer_errors(candidate, reference, FEED, only_changed=False)
    assert [e.node for e in errors][0] == "mm2"
    first, rest = errors[0], errors[1:]
    assert first.tensor == "h2" and first.added > 0.05
    assert all(first.added > 2 * e.added for e in rest)
    by_node = {e.node: e for e in errors}
    assert by_node["mm3"].rel_error > first.rel_error  # ranked by its error, mm3 would come first
    assert by_node["mm1"].rel_error < 0.01


def test_only_nodes_the_quantizer_changed_are_candidates():
    reference = mlp(WEIGHTS)
    candidate = mlp(WEIGHTS, noisy_input=True)
    assert changed_nodes(candidate, reference) == {"mm2"}
    errors = layer_errors(candidate, reference, FEED)
    assert [e.node for e in errors] == ["mm2"] and errors[0].added > 0.05
    assert layer_errors(reference, reference, FEED, only_changed=False)[0].rel_error == 0.0

"""A model run a piece at a time gives the outputs of one session over the whole model (segments.py)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnxport.core.evaluate.runtime import session
from onnxport.core.evaluate.segments import pieces, run_in_pieces
from onnxport.core.io.model_io import load_graph

K = 64
WEIGHT_BYTES = K * K * 4


def save_residual(path, layers: int = 4) -> None:
    """MatMul + Tanh layers with a residual Add that reads the input of the first (it crosses every
    cut), two outputs, weights in external data, nodes listed out of order."""
    rng = np.random.default_rng(1)
    inits, nodes, x = [], [], "x"
    for i in range(layers):
        inits.append(numpy_helper.from_array((rng.standard_normal((K, K)) / 8).astype(np.float32), f"w{i}"))
        nodes += [helper.make_node("MatMul", [x, f"w{i}"], [f"h{i}"], name=f"/l{i}/MatMul"),
                  helper.make_node("Tanh", [f"h{i}"], [f"t{i}"], name=f"/l{i}/Tanh")]
        x = f"t{i}"
    nodes.append(helper.make_node("Add", [x, "x"], ["y"], name="/residual"))
    nodes.append(helper.make_node("ReduceSum", ["t1"], ["s"], name="/sum", keepdims=0))
    nodes.reverse()
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, ["b", K])],
                              [helper.make_tensor_value_info("y", T.FLOAT, ["b", K]),
                               helper.make_tensor_value_info("s", T.FLOAT, [])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save_model(model, str(path), save_as_external_data=True, location="m.onnx.data", size_threshold=0)


def test_pieces_hold_at_most_the_budget_of_weights(tmp_path):
    save_residual(tmp_path / "m.onnx")
    cut = pieces(load_graph(tmp_path / "m.onnx"), WEIGHT_BYTES, ["y", "s"])
    assert len(cut) == 4
    assert all(p.weight_bytes <= WEIGHT_BYTES for p in cut)
    assert all("x" in p.kept_after for p in cut[:-1])  # the residual's input crosses every cut


def test_run_in_pieces_equals_one_session(tmp_path):
    save_residual(tmp_path / "m.onnx")
    feeds = [{"x": np.random.default_rng(i).standard_normal((3, K)).astype(np.float32)} for i in range(2)]
    got = run_in_pieces(load_graph(tmp_path / "m.onnx"), tmp_path, feeds, ["y", "s"], budget=WEIGHT_BYTES)
    whole = session(tmp_path / "m.onnx")
    for feed, outputs in zip(feeds, got):
        for g, w in zip(outputs, whole.run(["y", "s"], feed)):
            np.testing.assert_array_equal(g, w)

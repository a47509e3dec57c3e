"""The static search by units: each set of float nodes runs once, and it stops at the cheapest unit
that meets the target alone (a tiny CNN with an outlier channel, real ORT, int8 path pinned)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnxport.core.quantize import qdq_switch
from onnxport.core.quantize.options import QuantizeOptions
from onnxport.core.quantize.quantize import quantize


def outlier_cnn() -> onnx.ModelProto:
    """conv1 makes one channel ~100x the others (one uint8 scale cannot hold both), conv2 scales it
    back down, conv3 (the heavy one) mixes: quantized whole, the small channels are lost."""
    rng = np.random.default_rng(0)
    w1 = rng.normal(0, 0.3, (8, 3, 3, 3)).astype(np.float32)
    w1[0] *= 100.0
    w2 = rng.normal(0, 0.3, (8, 8, 1, 1)).astype(np.float32)
    w2[:, 0] *= 0.01
    w3 = rng.normal(0, 0.1, (64, 8, 3, 3)).astype(np.float32)
    inits = [numpy_helper.from_array(w, n) for w, n in ((w1, "w1"), (w2, "w2"), (w3, "w3"))]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["a", "w2"], ["b"], name="conv2"),
             helper.make_node("Conv", ["b", "w3"], ["y"], name="conv3", pads=[1, 1, 1, 1])]
    graph = helper.make_graph(nodes, "outlier", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 16, 16])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_each_float_set_runs_once_and_the_cheapest_passing_unit_ends_the_search(tmp_path, monkeypatch):
    src = tmp_path / "cnn.onnx"
    onnx.save_model(outlier_cnn(), str(src))
    rng = np.random.default_rng(1)
    data = [{"x": rng.normal(0, 1, (1, 3, 16, 16)).astype(np.float32)} for _ in range(48)]
    ran: list[frozenset] = []
    original = qdq_switch.QdqRunner.run

    def spy(self, keep_float):
        ran.append(frozenset(keep_float))
        return original(self, keep_float)

    monkeypatch.setattr(qdq_switch.QdqRunner, "run", spy)
    result = quantize(src, tmp_path / "out.onnx", "static",
                      QuantizeOptions(calibration=data, int8_path="avx2", op_types=["Conv"], per_channel=True))
    search = result.search
    assert search["base_min_cosine"] < 0.99 and result.validation.passed
    assert len(ran) == len(set(ran)) == search["evaluations"]  # no set of float nodes measured twice
    assert search["reused"] >= 1  # the search's first trial is the unit it measured
    # units by share: {conv1}, {conv1, conv2} (conv2 and the producer of its input) meets the target,
    # so {conv2, conv3} (the heavy one) is never measured
    assert ran == [frozenset(), frozenset({"conv1"}), frozenset({"conv1", "conv2"})]
    assert set(result.kept_float_nodes) == {"conv1", "conv2"}

"""The float16 range check reads the largest *finite* magnitude of each tensor (one pass when all
values are finite, the masked path only when some are not)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from onnxport.core.quantize.fp16_mode import tensor_peaks


def test_peaks_are_the_largest_finite_magnitudes():
    nodes = [helper.make_node("Mul", ["x", "x"], ["sq"], name="sq"),
             helper.make_node("Log", ["x"], ["log"], name="log")]  # log(0) = -inf, log(-1) = NaN
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("sq", TensorProto.FLOAT, [4]),
                               helper.make_tensor_value_info("log", TensorProto.FLOAT, [4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = np.array([0.0, -1.0, -300.0, np.e ** 3], np.float32)
    peaks = tensor_peaks(onnx.ModelProto.FromString(model.SerializeToString()), [{"x": x}])
    assert peaks["x"] == 300.0
    assert peaks["sq"] == 90000.0
    assert abs(peaks["log"] - 3.0) < 1e-5  # the -inf and NaN left out

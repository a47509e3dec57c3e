"""Small models for the deploy tests: a CNN-like graph with a dynamic batch, at a chosen opset."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def conv_model(opset: int = 21, ir_version: int = 10, batch: str | int = "batch", extra: str | None = None) -> onnx.ModelProto:
    """x [batch, 3, H, W] -> Conv -> Relu -> ReduceMean over H, W -> Reshape [batch, 4] -> Softmax.
    `extra`: one more unary op after Relu (e.g. "Gelu", which opset 18 does not have)."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b")
    axes = numpy_helper.from_array(np.array([2, 3], np.int64), "axes")
    shape = numpy_helper.from_array(np.array([0, -1], np.int64), "shape")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"])]
    last = "r"
    if extra:
        nodes.append(helper.make_node(extra, ["r"], ["e"]))
        last = "e"
    nodes += [helper.make_node("ReduceMean", [last, "axes"], ["m"], keepdims=1),
              helper.make_node("Reshape", ["m", "shape"], ["flat"]),
              helper.make_node("Softmax", ["flat"], ["probs"], axis=-1)]
    graph = helper.make_graph(nodes, "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, "h", "w"])],
                              [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [batch, 4])], [w, b, axes, shape])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = ir_version
    onnx.checker.check_model(model)
    return model


def save(model: onnx.ModelProto, path) -> str:
    onnx.save(model, str(path))
    return str(path)

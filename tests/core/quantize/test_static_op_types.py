"""Static QDQ's default op types: the weight ops with int8 kernels (Conv, MatMul, Gemm) are quantized,
element-wise ops stay float (Q/DQ around them is extra work on ONNX Runtime's CPU provider); op types
the user gives win. Real ORT quantizer and calibration on a tiny Conv -> Add -> Relu model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnxport.core.quantize import modes
from onnxport.core.quantize.options import QuantizeOptions
from onnxport.core.quantize.quantize import quantize


def conv_add_relu() -> onnx.ModelProto:
    """y = Relu(Conv(x) + skip): the Add reads two activations (nothing folds it into the Conv)."""
    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.normal(0, 0.1, (64, 32, 3, 3)).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c", "skip"], ["s"], name="add"),
             helper.make_node("Relu", ["s"], ["y"], name="relu")]
    graph = helper.make_graph(
        nodes, "conv_add_relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 8, 8]),
         helper.make_tensor_value_info("skip", TensorProto.FLOAT, [1, 64, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 8, 8])], [weight])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _quantized(tmp_path: Path, name: str, op_types=None) -> onnx.ModelProto:
    src = tmp_path / "model.onnx"
    onnx.save(conv_add_relu(), src)
    rng = np.random.default_rng(1)
    pages = [{"x": rng.normal(0, 1, (1, 32, 8, 8)).astype(np.float32),
              "skip": rng.normal(0, 1, (1, 64, 8, 8)).astype(np.float32)} for _ in range(8)]
    result = quantize(src, tmp_path / name, "static",
                      QuantizeOptions(calibration=pages, accuracy_target=None, int8_path="avx2", op_types=op_types))
    return onnx.load(result.path)


def _quantized_inputs(model: onnx.ModelProto, node_name: str) -> list[str]:
    """The inputs of `node_name` that arrive through a DequantizeLinear."""
    dequantized = {o for n in model.graph.node if n.op_type == "DequantizeLinear" for o in n.output}
    node = next(n for n in model.graph.node if n.name == node_name)
    return [i for i in node.input if i in dequantized]


def test_static_default_quantizes_the_conv_and_keeps_the_add_float(tmp_path):
    assert modes.static_op_types(None) == ["Conv", "MatMul", "Gemm"]
    model = _quantized(tmp_path, "default.onnx")
    conv = next(n for n in model.graph.node if n.name == "conv")
    assert _quantized_inputs(model, "conv") == list(conv.input)  # input, weight (and bias) through Q/DQ
    quantized_values = {n.input[0] for n in model.graph.node if n.op_type == "QuantizeLinear"}
    assert not quantized_values & {"skip", "s", "y"}  # the Add and the Relu read and write float


def test_static_op_types_given_are_honoured(tmp_path):
    model = _quantized(tmp_path, "with_add.onnx", op_types=["Conv", "Add"])
    assert "skip" in {n.input[0] for n in model.graph.node if n.op_type == "QuantizeLinear"}
    assert len(_quantized_inputs(model, "add")) == 2


def test_a_convtranspose_left_float_keeps_its_bias(tmp_path):
    """Bias correction absorbs the mean shift of int8 weights: a ConvTranspose the default leaves
    float has no such shift, its bias must come out as it went in (it was corrected all the same)."""
    rng = np.random.default_rng(2)
    inits = [numpy_helper.from_array(rng.normal(0, 0.1, (32, 16, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.normal(0, 0.2, (32, 32, 3, 3)).astype(np.float32), "wt"),
             numpy_helper.from_array(rng.normal(0, 0.5, 32).astype(np.float32), "bt")]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("ConvTranspose", ["c", "wt", "bt"], ["y"], name="up", strides=[2, 2])]
    graph = helper.make_graph(nodes, "conv_up", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    src = tmp_path / "up.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), src)
    pages = [{"x": (rng.normal(0, 1, (1, 16, 8, 8)) + 2.0).astype(np.float32)} for _ in range(8)]  # E[x] != 0
    result = quantize(src, tmp_path / "up.qdq.onnx", "static",
                      QuantizeOptions(calibration=pages, accuracy_target=None, int8_path="avx2"))
    model = onnx.load(result.path)
    up = next(n for n in model.graph.node if n.name == "up")
    weights = {t.name: t for t in model.graph.initializer}
    assert weights[up.input[1]].data_type == TensorProto.FLOAT  # float: its weight as it was
    bias = next(t for t in model.graph.initializer if t.name == up.input[2])
    assert np.array_equal(numpy_helper.to_array(bias), numpy_helper.to_array(inits[2]))

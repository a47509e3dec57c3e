"""Quantizing an IR 3 model (before IR 4 every initializer is a graph input too) ends in a model
or a one-line refusal, never a traceback: ONNX Runtime's optimizer writes the initializers it
makes (folded ConstantOfShape weights, fused Conv+BN) without inputs and keeps the inputs of
those it folded away, and onnx's version converter (run by ORT's quantizer below opset 11) then
failed with "Input ... is undefined" (the light models of ONNX's backend tests; issue 26, item 11)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnxport.core.cli import main
from onnxport.core.quantize.prep import preprocess


def ir3_constant_of_shape(size: int = 128) -> onnx.ModelProto:
    """IR 3, opset 9: y = x @ W + b with W made by ConstantOfShape (as the light models hold their
    weights), its shape an initializer listed as an input, like b."""
    shape = numpy_helper.from_array(np.array([size, size], np.int64), "W__SHAPE")
    bias = numpy_helper.from_array(np.linspace(-1, 1, size, dtype=np.float32), "b")
    nodes = [helper.make_node("ConstantOfShape", ["W__SHAPE"], ["W"], name="weights",
                              value=numpy_helper.from_array(np.array([0.01], np.float32))),
             helper.make_node("MatMul", ["x", "W"], ["mm"], name="mm"),
             helper.make_node("Add", ["mm", "b"], ["y"], name="add")]
    inputs = [helper.make_tensor_value_info("x", T.FLOAT, [1, size]),
              helper.make_tensor_value_info("W__SHAPE", T.INT64, [2]),
              helper.make_tensor_value_info("b", T.FLOAT, [size])]
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", T.FLOAT, [1, size])],
                              [shape, bias])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)])
    model.ir_version = 3
    return model


def test_preprocess_writes_an_ir3_model_as_ir4_without_stale_inputs(tmp_path):
    src, dst = tmp_path / "m.onnx", tmp_path / "prep.onnx"
    onnx.save(ir3_constant_of_shape(), str(src))
    preprocess(src, dst)
    model = onnx.load(str(dst))
    onnx.checker.check_model(model, full_check=True)
    assert [i.name for i in model.graph.input] == ["x"]


def test_quantize_dynamic_of_an_ir3_model_never_ends_in_a_traceback(tmp_path, capsys):
    src = tmp_path / "m.onnx"
    onnx.save(ir3_constant_of_shape(), str(src))
    code = main(["quantize", str(src), "-o", str(tmp_path / "q.onnx"), "--mode", "dynamic", "-q"])
    err = capsys.readouterr().err
    assert code in (0, 2) and "Traceback" not in err and "undefined" not in err, err
    if code == 0:
        onnx.checker.check_model(str(tmp_path / "q.onnx"), full_check=True)

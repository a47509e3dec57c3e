"""A tensor whose rank shape inference cannot find, kept as an output, gets its type from one
ONNX Runtime run, so the written model passes `onnx.checker` (full check); an output whose type
stays unknown is refused in one line, and nothing is written (issue 26, item 9)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnxport.core.api import export_for_inference
from onnxport.core.cli import main
from onnxport.core.export.export import export_model
from onnxport.core.export.output_types import rankless_outputs
from onnxport.core.util.errors import OnnxportError


def _const(name: str, value) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(value, np.int64), name))


def computed_reshape(shape_from_input: bool = False) -> onnx.ModelProto:
    """Opset 12: x [n, 6] -> Reshape to [2n, 3] (a target shape computed from x's, or fed as `s`),
    whose output `r` shape inference leaves rank-less (the PP-OCR recogniser's `p2o.MatMul.1`)."""
    nodes = [] if shape_from_input else [
        helper.make_node("Shape", ["x"], ["sh"]), _const("st", [0]), _const("en", [1]),
        helper.make_node("Slice", ["sh", "st", "en"], ["n1"]), _const("two", [2]),
        helper.make_node("Mul", ["n1", "two"], ["n2"]), _const("three", [3]),
        helper.make_node("Concat", ["n2", "three"], ["s"], axis=0)]
    nodes += [helper.make_node("Reshape", ["x", "s"], ["r"], name="reshape"),
              helper.make_node("Relu", ["r"], ["y"], name="relu")]
    inputs = [helper.make_tensor_value_info("x", T.FLOAT, ["n", 6])]
    if shape_from_input:
        inputs.append(helper.make_tensor_value_info("s", T.INT64, [2]))
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", T.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)])
    model.ir_version = 7
    return model


def test_a_rankless_mid_tensor_is_typed_by_one_run(tmp_path):
    src = tmp_path / "m.onnx"
    onnx.save(computed_reshape(), str(src))
    out = tmp_path / "out.onnx"
    export_for_inference(src, None, ["r"], out)
    written = onnx.load(str(out))
    onnx.checker.check_model(written, full_check=True)
    vtype = written.graph.output[0].type.tensor_type
    assert vtype.elem_type == T.FLOAT and len(vtype.shape.dim) == 2
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    got = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, x.reshape(8, 3))


def test_the_cli_export_of_a_rankless_mid_tensor_passes_the_checker(tmp_path, capsys):
    src = tmp_path / "m.onnx"
    onnx.save(computed_reshape(), str(src))
    assert main(["export", str(src), "--outputs", "r,y", "-o", str(tmp_path / "out.onnx")]) == 0
    written = onnx.load(str(tmp_path / "out.onnx"))
    onnx.checker.check_model(written, full_check=True)
    assert rankless_outputs(written.graph) == []


def test_an_output_without_a_type_is_refused_not_written(tmp_path):
    src = tmp_path / "m.onnx"
    onnx.save(computed_reshape(shape_from_input=True), str(src))  # random shapes cannot run it
    out = tmp_path / "out.onnx"
    with pytest.raises(OnnxportError, match="no type or rank for output 'r'"):
        export_for_inference(src, None, ["r"], out)
    with pytest.raises(OnnxportError, match="no type or rank for output 'r'"):
        export_model(src, out, ["r"])  # no run offered: refused all the same
    assert not out.exists() and list(tmp_path.iterdir()) == [src]


def test_an_output_the_source_declares_rankless_is_written_as_declared_without_a_run(tmp_path):
    src = tmp_path / "m.onnx"
    onnx.save(computed_reshape(), str(src))  # its graph output y is declared without a shape
    result = export_model(src, tmp_path / "out.onnx", ["y"])  # no run offered: no worse than the source
    assert rankless_outputs(onnx.load(str(result.path)).graph) == ["y"]
    export_for_inference(src, None, ["y"], tmp_path / "typed.onnx")  # with the run: typed, valid
    onnx.checker.check_model(str(tmp_path / "typed.onnx"), full_check=True)

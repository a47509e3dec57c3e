"""`deploy`: each artifact written, loaded in ONNX Runtime and compared, or nothing written."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from onnxport.core.deploy.deploy import deploy
from onnxport.core.deploy.shapes import parse_shape_options
from onnxport.core.util.errors import Cancelled, OnnxportError
from onnxport.core.util.progress import CancelToken

from .deploy_models import conv_model, save


def listing(folder):
    return sorted(p.name for p in folder.iterdir())


def test_ort_mobile_writes_ort_and_operator_config(tmp_path):
    source = save(conv_model(opset=18, ir_version=8), tmp_path / "m.onnx")
    result = deploy(source, "ort-mobile", tmp_path / "m.ort")
    assert listing(tmp_path) == ["m.onnx", "m.ort", "m.required_operators_and_types.config"]
    config = (tmp_path / "m.required_operators_and_types.config").read_text()
    assert "ai.onnx;" in config and "Conv" in config and "float" in config  # ops with their types
    assert result.check.passed and result.check.exact
    assert all(o["max_abs_diff"] == 0.0 for o in result.check.outputs.values())
    assert set(result.usability) == {"NNAPI", "CoreML NeuralNetwork", "CoreML MLProgram"}
    assert result.usability["NNAPI"]["suitability"] in {"YES", "MAYBE", "NO"}
    sess = ort.InferenceSession(str(tmp_path / "m.ort"), providers=["CPUExecutionProvider"])
    assert sess.run(None, {"x": np.ones((1, 3, 8, 8), np.float32)})[0].shape == (1, 4)


@pytest.mark.parametrize(("target", "opset", "ir"), [("ort-1.17", 20, 9), ("ort-1.14", 18, 8)])
def test_runtime_target_converts_down_and_matches(tmp_path, target, opset, ir):
    source = save(conv_model(opset=21, ir_version=10), tmp_path / "m.onnx")
    result = deploy(source, target, tmp_path / "out.onnx")
    written = onnx.load(tmp_path / "out.onnx")
    assert (written.opset_import[0].version, written.ir_version) == (opset, ir)
    assert result.check.passed and result.check.plain
    assert f"opset 21 -> {opset} (onnx.version_converter)" in result.converted
    assert result.to_dict()["check"]["outputs"]["probs"]["unoptimized_max_abs_diff"] == 0.0


def test_fixed_shapes_match_at_the_fixed_size(tmp_path):
    source = save(conv_model(opset=18, ir_version=8), tmp_path / "m.onnx")
    result = deploy(source, "ort-mobile", tmp_path / "m.ort", request=parse_shape_options(["x=1x3x16x24"]))
    assert result.check.passed and "x[1, 3, 16, 24]" in result.check.inputs
    assert result.check.outputs["probs"]["shape"] == [1, 4]


def test_dynamic_batch_checked_at_twice_the_batch(tmp_path):
    source = save(conv_model(opset=18, ir_version=8, batch=1), tmp_path / "m.onnx")
    result = deploy(source, "ort-1.17", tmp_path / "out.onnx", request=parse_shape_options([], ["batch=dynamic"]))
    assert result.check.passed and "twice that batch" in result.check.inputs
    assert result.check.outputs["probs"]["doubled_batch_max_abs_diff"] == 0.0


def test_batch_baked_into_the_graph_fails_the_check_and_writes_nothing(tmp_path):
    model = conv_model(opset=18, ir_version=8, batch=1)
    shape = next(t for t in model.graph.initializer if t.name == "shape")
    shape.CopyFrom(onnx.numpy_helper.from_array(np.array([1, -1], np.int64), "shape"))  # batch 1, fixed
    source = save(model, tmp_path / "m.onnx")
    (tmp_path / "out.onnx").write_bytes(b"previous")
    with pytest.raises(OnnxportError, match="twice the batch"):
        deploy(source, "ort-1.17", tmp_path / "out.onnx", request=parse_shape_options([], ["batch=dynamic"]))
    assert listing(tmp_path) == ["m.onnx", "out.onnx"] and (tmp_path / "out.onnx").read_bytes() == b"previous"


def test_refusal_writes_nothing(tmp_path):
    source = save(conv_model(opset=20, extra="Gelu"), tmp_path / "m.onnx")
    with pytest.raises(OnnxportError, match="op Gelu"):
        deploy(source, "ort-1.14", tmp_path / "out.onnx")
    assert listing(tmp_path) == ["m.onnx"]


def test_wrong_suffix_is_refused_before_reading(tmp_path):
    with pytest.raises(OnnxportError, match="give -o NAME.ort"):
        deploy(tmp_path / "absent.onnx", "ort-mobile", tmp_path / "m.onnx")


def test_cancel_leaves_nothing(tmp_path):
    source = save(conv_model(opset=18, ir_version=8), tmp_path / "m.onnx")
    token = CancelToken()
    token.cancel()
    with pytest.raises(Cancelled):
        deploy(source, "ort-mobile", tmp_path / "m.ort", cancel=token)
    assert listing(tmp_path) == ["m.onnx"]


def qdq_model() -> onnx.ModelProto:
    """conv_model with its input through QuantizeLinear/DequantizeLinear (a QDQ model)."""
    model = conv_model(opset=21, ir_version=10)
    scale = onnx.numpy_helper.from_array(np.array(0.02, np.float32), "x_scale")
    zero = onnx.numpy_helper.from_array(np.array(0, np.int8), "x_zero")
    for node in model.graph.node:
        if node.op_type == "Conv":
            node.input[0] = "x_dq"
    model.graph.initializer.extend([scale, zero])
    model.graph.node.insert(0, onnx.helper.make_node("DequantizeLinear", ["x_q", "x_scale", "x_zero"], ["x_dq"]))
    model.graph.node.insert(0, onnx.helper.make_node("QuantizeLinear", ["x", "x_scale", "x_zero"], ["x_q"]))
    onnx.checker.check_model(model)
    return model


@pytest.mark.parametrize(("target", "out"), [("ort-mobile", "q.ort"), ("ort-1.17", "q.onnx")])
def test_quantized_model_checked_with_quantization_tolerances(tmp_path, target, out):
    source = save(qdq_model(), tmp_path / "m.onnx")
    result = deploy(source, target, tmp_path / out)
    assert result.check.passed and not result.check.exact and "min_cosine 0.99" in result.check.tolerance
    assert (tmp_path / out).is_file()

"""Down-conversion to what an ONNX Runtime release reads, or a one-line refusal naming the op."""

from __future__ import annotations

import onnx
import pytest

from onnxport.core.deploy.targets import parse_target
from onnxport.core.deploy.versions import fit_versions, opset_of
from onnxport.core.util.errors import OnnxportError

from .deploy_models import conv_model


@pytest.mark.parametrize(("target", "opset", "ir"), [("ort-1.17", 20, 9), ("ort-1.14", 18, 8)])
def test_converted_down(target, opset, ir):
    model, notes = fit_versions(conv_model(opset=21, ir_version=10), parse_target(target))
    assert (opset_of(model), model.ir_version) == (opset, ir)
    assert f"opset 21 -> {opset} (onnx.version_converter)" in notes and f"IR version 10 -> {ir}" in notes
    onnx.checker.check_model(model)


def test_older_model_kept_as_it_is():
    model, notes = fit_versions(conv_model(opset=18, ir_version=8), parse_target("ort-1.17"))
    assert (opset_of(model), model.ir_version) == (18, 8)
    assert notes == ["opset 18 kept (ONNX Runtime 1.17 reads up to 20)", "IR version 8 kept"]


def test_op_that_does_not_exist_there_is_refused_by_name():
    with pytest.raises(OnnxportError) as err:
        fit_versions(conv_model(opset=20, extra="Gelu"), parse_target("ort-1.14"))
    text = str(err.value)
    assert "op Gelu" in text and "opset 18" in text and "before opset 20" in text and "\n" not in text


def test_type_newer_than_the_ir_is_refused():
    model = conv_model(opset=20, ir_version=10)
    model.graph.value_info.append(onnx.helper.make_tensor_value_info("r", onnx.TensorProto.INT4, None))
    with pytest.raises(OnnxportError, match="type INT4 needs IR version 10"):
        fit_versions(model, parse_target("ort-1.17"))


def test_type_the_older_op_lacks_is_refused_by_op():
    model = conv_model(opset=21, ir_version=10)
    model.graph.value_info.append(onnx.helper.make_tensor_value_info("r", onnx.TensorProto.INT4, None))
    with pytest.raises(OnnxportError) as err:
        fit_versions(model, parse_target("ort-1.17"))
    assert "op Reshape cannot be converted to opset 20" in str(err.value) and "INT4" in str(err.value)


def constant_of_shape_model(value: onnx.TensorProto, opset: int = 21) -> onnx.ModelProto:
    """shape [2] int64 -> ConstantOfShape(value) -> y: an op onnx.version_converter has no adapter
    for below opset 20 (only its types grew since opset 9)."""
    node = onnx.helper.make_node("ConstantOfShape", ["shape"], ["y"], value=value)
    graph = onnx.helper.make_graph([node], "g", [onnx.helper.make_tensor_value_info("shape", onnx.TensorProto.INT64, [2])],
                                   [onnx.helper.make_tensor_value_info("y", value.data_type, ["a", "b"])])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", opset)])
    model.ir_version = 10
    return model


def test_op_without_adapter_is_relabelled_when_its_older_version_takes_the_same():
    value = onnx.helper.make_tensor("value", onnx.TensorProto.FLOAT, [1], [0.5])
    model, notes = fit_versions(constant_of_shape_model(value), parse_target("ort-1.14"))
    assert opset_of(model) == 18 and [n.domain for n in model.graph.node] == [""]
    assert [o.domain for o in model.opset_import] == [""]
    assert any(n.startswith("ConstantOfShape relabelled to opset 18") for n in notes)
    onnx.checker.check_model(model, full_check=True)


def test_op_without_adapter_refused_when_its_older_version_lacks_the_type():
    value = onnx.helper.make_tensor("value", onnx.TensorProto.BFLOAT16, [1], [0])
    with pytest.raises(OnnxportError) as err:
        fit_versions(constant_of_shape_model(value), parse_target("ort-1.14"))
    text = str(err.value)
    assert "op ConstantOfShape cannot be converted to opset 18" in text and "tensor(bfloat16)" in text

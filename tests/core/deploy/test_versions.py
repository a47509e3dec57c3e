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

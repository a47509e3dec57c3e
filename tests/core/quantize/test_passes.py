"""The quantize rewrites are passes checked on every call (passes.checked), as onnx-ir's
PassBase.__call__ checks its passes: a PassResult on the model given, `changed` exactly when the
bytes differ, still valid. Not only in tests: a rewrite that breaks it raises in the product."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnxport.core.graph.passes import REWRITTEN, NodeChange, PassResult
from onnxport.core.quantize import (
    calibration_bias,
    domains,
    fp16_convert,
    gemm_bias,
    outlier_split,
    smooth,
    weight_only,
)
from onnxport.core.quantize.passes import PassContractError, checked, fingerprint

from ..model_builders import make_model


def _model() -> onnx.ModelProto:
    w = np.arange(16, dtype=np.float32).reshape(4, 4)
    return make_model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
                      [helper.make_tensor_value_info("x", T.FLOAT, [1, 4])],
                      [helper.make_tensor_value_info("y", T.FLOAT, [1, 4])], [numpy_helper.from_array(w, "w")])


def _scale_weight(model: onnx.ModelProto, factor: float = 2.0) -> None:
    t = model.graph.initializer[0]
    t.CopyFrom(numpy_helper.from_array(factor * numpy_helper.to_array(t), t.name))


def test_an_honest_pass_goes_through():
    @checked
    def double(model):
        _scale_weight(model)
        return PassResult(model, changed=True, changes=[NodeChange("mm", REWRITTEN, "weight doubled")])

    model = _model()
    assert double(model).model is model and numpy_helper.to_array(model.graph.initializer[0])[0, 1] == 2.0


@pytest.mark.parametrize("lie, says", [
    ("changed_but_says_not", "reported changed=False, but the model differs"),
    ("unchanged_but_says_so", "reported changed=True, but the model is the same"),
    ("a_copy", "did not edit the model it was given in place"),
    ("not_a_result", "returned int, not a PassResult"),
    ("invalid", "left an invalid model"),
])
def test_a_pass_breaking_its_contract_raises_on_the_call(lie, says):
    @checked
    def rewrite(model):
        if lie == "changed_but_says_not":
            _scale_weight(model)
            return PassResult(model, changed=False)
        if lie == "unchanged_but_says_so":
            return PassResult(model, changed=True)
        if lie == "a_copy":
            copy = onnx.ModelProto()
            copy.CopyFrom(model)
            return PassResult(copy)
        if lie == "not_a_result":
            return 1
        model.graph.node[0].input[0] = "nowhere"  # reads a tensor nothing makes
        return PassResult(model, changed=True)

    with pytest.raises(PassContractError, match=says):
        rewrite(_model())


def test_the_fingerprint_sees_a_weight_value_and_nothing_else_changes_it():
    model = _model()
    before = fingerprint(model)
    assert fingerprint(model) == before
    _scale_weight(model, 1.0)  # the same values written again: the same bytes
    assert fingerprint(model) == before
    _scale_weight(model, -1.0)
    assert fingerprint(model) != before


def test_the_float_rewrites_are_checked_passes():
    for rewrite in (smooth.smooth, outlier_split.split_outliers, gemm_bias.flatten_gemm_biases,
                    fp16_convert.to_float16, domains.drop_unused_domains, domains.declare_used_domains,
                    weight_only.int8_weights, calibration_bias.correct_biases):
        assert getattr(rewrite, "__wrapped__", None) is not None, rewrite  # wrapped by passes.checked
    model = _model()
    result = gemm_bias.flatten_gemm_biases(model)  # no Gemm: unchanged, said so
    assert isinstance(result, PassResult) and result.model is model and not result.changed


def test_the_weight_passes_say_whether_they_changed_the_model():
    model = _model()
    assert not weight_only.int8_weights(model, ["mm"]).changed  # 16 values: below MIN_VALUES, left as it is
    kept = fp16_convert.to_float16(model, keep={"mm": "kept float32 on request"})
    assert not kept.changed and kept.kept == {"mm": "kept float32 on request"}
    converted = fp16_convert.to_float16(model)
    assert converted.changed and converted.model is model and "mm" in converted.names(REWRITTEN)
    assert model.graph.initializer[0].data_type == T.FLOAT16

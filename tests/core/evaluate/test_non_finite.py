"""NaN and Inf are never a pass: every verdict (validate, quantize's, deploy's check) uses one rule."""

from __future__ import annotations

import math

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper

from onnxport.core.evaluate.compare import EXACT, LOSSY, OutputStats, non_finite_reason
from onnxport.core.evaluate.validate import validate

from ..model_builders import make_model
from ..quant_models import cnn, outlier_mlp, save


def judged(got, want, thresholds=LOSSY):
    stats = OutputStats("y")
    stats.update(np.asarray(got, np.float32), np.asarray(want, np.float32))
    return stats.result(thresholds)


def test_all_nan_on_both_sides_fails_with_a_nan_cosine():
    nan = np.full((2, 3), np.nan)
    r = judged(nan, nan)
    assert not r.passed and math.isnan(r.cosine)  # was: passed, cosine 1.000000
    assert "every value of the reference's output is NaN/Inf" in r.reason
    assert r.reference_non_finite == 6 and r.nan_mismatches == 0
    assert r.samples is None  # no row has a finite value: no per-sample cosine of 1.0 either
    assert r.to_dict()["cosine"] is None  # JSON stays valid


def test_nan_the_reference_computes_too_is_named_not_passed():
    want = np.array([[1.0, 2.0, np.nan], [3.0, 4.0, 5.0]])
    r = judged(want, want, EXACT)
    assert not r.passed and r.cosine == pytest.approx(1.0)  # the finite values do agree...
    assert "1 of 6 values of the reference's output are NaN/Inf" in r.reason  # ...the rest is unchecked
    assert r.argmax_agreement == 1.0  # over the one row without NaN


@pytest.mark.parametrize(("got", "want"), [([1.0, np.inf], [1.0, 2.0]), ([1.0, np.inf], [1.0, -np.inf]),
                                           ([1.0, 2.0], [1.0, np.nan])])
def test_non_finite_on_one_side_differs(got, want):
    r = judged(got, want)
    assert not r.passed and "1 NaN/Inf value(s) differ" in r.reason


def test_finite_outputs_keep_their_verdict():
    assert non_finite_reason(0, 0, 10) == ""
    assert judged([[1.0, 2.0]], [[1.0, 2.0]], EXACT).passed


def test_validate_on_all_nan_inputs_fails(tmp_path):
    model = save(cnn(), tmp_path / "cnn.onnx")
    np.savez(tmp_path / "nan.npz", image=np.full((4, 3, 8, 8), np.nan, np.float32))
    report = validate(model, model, inputs=tmp_path / "nan.npz")
    assert not report.passed
    assert "validation FAILED" in report.summary_lines()[0]
    assert "every value of the reference's output is NaN/Inf" in report.failures()[0]


def test_deploy_check_does_not_call_matching_nans_a_match(tmp_path):
    from onnxport.core.deploy.deploy import deploy
    from onnxport.core.util.errors import OnnxportError

    x = helper.make_tensor_value_info("x", T.FLOAT, [1, 4])
    nan = helper.make_tensor("nan", T.FLOAT, [1], [math.nan])
    source = save(make_model([helper.make_node("Add", ["x", "nan"], ["y"], name="add")], [x],
                             [helper.make_tensor_value_info("y", T.FLOAT, [1, 4])], [nan]), tmp_path / "m.onnx")
    with pytest.raises(OnnxportError, match="NaN/Inf"):
        deploy(source, "ort-1.17", tmp_path / "out.onnx")
    assert not (tmp_path / "out.onnx").exists()


@pytest.mark.parametrize("mode", ["dynamic", "fp16"])
def test_quantize_on_all_nan_validation_inputs_says_nothing_could_be_checked(tmp_path, mode):
    """Not "misses the accuracy target ... lower the target": no target would pass, nothing was checked."""
    from onnxport.core.quantize.quantize import QuantizeOptions, quantize
    from onnxport.core.util.errors import OnnxportError

    model = save(outlier_mlp(), tmp_path / "mlp.onnx")
    np.savez(tmp_path / "nan.npz", x=np.full((8, 32), np.nan, np.float32))
    with pytest.raises(OnnxportError) as refused:
        quantize(model, tmp_path / "q.onnx", mode, QuantizeOptions(int8_path="avx2", validation_inputs=tmp_path / "nan.npz"))
    message = refused.value.one_line()
    assert "cannot be checked: the float model's outputs (y) are all NaN/Inf on the validation inputs" in message
    assert "lower the target" not in message and refused.value.option == "--validation-inputs"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mlp.onnx", "nan.npz"]

"""Validation computed for real: exports against eval graph + parameters, quantized against float32.

No training package needed: the reference is ORT's inference session fed with the parameters.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

from onnxport.core.evaluate.compare import EXACT, LOSSY, OutputStats, Thresholds
from onnxport.core.evaluate.validate import validate
from onnxport.core.export.export import export_model
from onnxport.core.util.errors import OnnxportError, UnknownOutputError

from ..model_builders import eval_like_mlp, forward_mlp, mlp_weights, param_set
from ..quant_models import cnn_weights, eval_like_cnn, reference_cnn, save


@pytest.fixture
def mlp_export(tmp_path):
    eval_path = save(eval_like_mlp(), tmp_path / "eval_model.onnx")
    params = param_set(mlp_weights(seed=5))
    out = tmp_path / "model.onnx"
    export_model(eval_path, out, ["logits", "probabilities"], params)
    return eval_path, params, out


def test_export_matches_eval_graph_fed_with_the_checkpoint(mlp_export):
    eval_path, params, out = mlp_export
    report = validate(out, eval_path, params=params)
    assert report.passed, report.failures()
    assert report.reference_kind == "eval graph + parameters" and report.precision == "float32"
    assert report.thresholds == EXACT and report.batches == 2
    assert [o.name for o in report.outputs] == ["logits", "probabilities"]
    for o in report.outputs:
        assert o.max_abs_diff <= 1e-6 and o.cosine > 0.999999 and o.argmax_agreement == 1.0
        assert o.shape == [2, 4]
    d = report.to_dict()
    assert d["passed"] is True and d["outputs"][0]["name"] == "logits"


def _scale_initializer(path, name, factor, out):
    model = onnx.load(path)
    for t in model.graph.initializer:
        if t.name == name:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t) * np.float32(factor), name))
    onnx.save(model, out)
    return out


def test_slightly_broken_export_fails_on_max_abs_diff(mlp_export, tmp_path):
    eval_path, params, out = mlp_export
    broken = _scale_initializer(out, "fc2.bias", 1.001, tmp_path / "broken.onnx")
    report = validate(broken, eval_path, params=params)
    assert not report.passed
    logits = report.outputs[0]
    assert logits.cosine > 0.9999  # nearly right...
    assert 1e-4 < logits.max_abs_diff < 1e-2 and "max abs diff" in logits.reason  # ...but not the same model


def test_export_with_other_weights_fails_on_cosine(mlp_export):
    eval_path, _, out = mlp_export
    report = validate(out, eval_path, params=param_set(mlp_weights(seed=6)))
    assert not report.passed
    assert report.outputs[0].cosine < 0.9 and "cosine" in report.outputs[0].reason
    assert report.outputs[0].argmax_agreement < 1.0
    assert any("logits" in f for f in report.failures())


def test_batchnorm_eval_graph_in_training_mode_is_a_valid_reference(tmp_path):
    eval_path = save(eval_like_cnn(), tmp_path / "eval_model.onnx")
    w = cnn_weights(seed=1)
    out = tmp_path / "cnn.onnx"
    export_model(eval_path, out, ["logits"], param_set(w))
    x = np.random.default_rng(0).standard_normal((3, 3, 8, 8)).astype(np.float32)
    np.savez(tmp_path / "x.npz", image=x)
    report = validate(out, eval_path, params=param_set(w), inputs=tmp_path / "x.npz")
    assert report.passed, report.failures()
    assert report.outputs[0].max_abs_diff < 1e-5 and report.batches == 1
    # and the reference really used the running statistics (inference BatchNorm), like numpy does
    got = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(None, {"image": x})[0]
    np.testing.assert_allclose(got, reference_cnn(x, w), atol=1e-4)
    assert not validate(out, eval_path, params=param_set(cnn_weights(seed=2))).passed


def test_quantized_model_against_float32_ranks_nodes(tmp_path):
    from onnxport.core.quantize.quantize import QuantizeOptions, quantize

    forward = save(forward_mlp(mlp_weights(d_hidden=256)), tmp_path / "forward.onnx")  # int8 must be smaller
    fp32 = tmp_path / "fp32.onnx"
    export_model(forward, fp32, ["logits"])  # the forward graph's Dropout is in training mode: random
    q = tmp_path / "int8.onnx"
    # The int8 path is pinned (AVX2 without VNNI -> 7-bit weights): ORT's u8s8 kernels compute exactly
    # with them on every x86 CPU (vpmaddubsw sums pairs of u8 x s7 products, 2 x 255 x 64 < 32767, so
    # it cannot saturate as it does with 8-bit weights); the verdict never depends on the CPU.
    result = quantize(fp32, q, "dynamic", QuantizeOptions(accuracy_target=None, int8_path="avx2"))
    assert result.options["reduce_range"] is True and "7-bit weights" in result.int8_path
    report = validate(q, fp32)
    assert report.precision == "quantized" and report.thresholds == LOSSY
    assert report.reference_kind == "model"
    assert 0.0 < report.outputs[0].max_abs_diff and report.outputs[0].cosine > 0.99
    graph_nodes = {n.name for n in onnx.load(fp32).graph.node}
    assert report.layers and all(e.node in graph_nodes for e in report.layers)
    assert {e.op_type for e in report.layers} <= {"MatMul", "Add", "Gemm"}  # only what the quantizer touched
    assert report.passed
    strict = validate(q, fp32, thresholds=Thresholds(min_cosine=0.999999999))
    assert not strict.passed


def test_reference_without_its_parameters_is_refused(mlp_export):
    eval_path, _, out = mlp_export
    with pytest.raises(OnnxportError, match="fc1.weight") as info:
        validate(out, eval_path)
    assert "--checkpoint" in info.value.one_line()


def test_reference_without_the_output(mlp_export, tmp_path):
    _, _, out = mlp_export
    other = save(onnx.helper.make_model(onnx.helper.make_graph(
        [onnx.helper.make_node("Relu", ["input"], ["y"])], "g",
        [onnx.helper.make_tensor_value_info("input", onnx.TensorProto.FLOAT, ["b", 8])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)]),
        opset_imports=[onnx.helper.make_opsetid("", 17)], ir_version=8), tmp_path / "other.onnx")
    with pytest.raises(UnknownOutputError, match="no tensor 'logits'"):
        validate(out, other)


def test_model_onnxruntime_cannot_load_is_one_line(tmp_path, mlp_export):
    eval_path, params, _ = mlp_export
    bad = tmp_path / "bad.onnx"
    model = forward_mlp()
    model.graph.node[1].op_type = "NoSuchOp"
    onnx.save(model, bad)
    with pytest.raises(OnnxportError, match="bad.onnx") as info:
        validate(bad, eval_path, params=params)
    assert "\n" not in info.value.one_line()


def test_stats_nan_shape_and_zero_cases():
    s = OutputStats("y")
    s.update(np.array([1.0, np.nan, 3.0]), np.array([1.0, 2.0, 3.0]))
    r = s.result(LOSSY)
    assert r.nan_mismatches == 1 and not r.passed and "NaN" in r.reason
    s = OutputStats("y")
    s.update(np.zeros((2, 3)), np.zeros((2, 3)))
    assert s.result(EXACT).passed and s.cosine == 1.0
    s = OutputStats("y")
    s.update(np.zeros((2, 3)), np.zeros((3, 2)))
    r = s.result(LOSSY)
    assert not r.passed and "shape" in r.reason
    s = OutputStats("y")
    s.update(np.array([[1.0, 2.0], [3.0, 1.0]]), np.array([[1.0, 2.0], [1.0, 3.0]]))
    assert s.result(LOSSY).argmax_agreement == 0.5

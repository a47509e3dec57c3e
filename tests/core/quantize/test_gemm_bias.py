"""Static QDQ of Gemms whose bias is not 1-D (issue 26 item 7): ONNX Runtime 1.32's quantizer crashed
("The truth value of an array ... is ambiguous") on a per-channel weight with a [1, N] bias, the shape
ORT's own pre-processing writes when it fuses MatMul + Add (seen on the real magika model)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnxport.core.evaluate.feeds import input_specs, open_feeds
from onnxport.core.quantize import modes
from onnxport.core.quantize.calibration import calibrate
from onnxport.core.quantize.gemm_bias import flatten_gemm_biases
from onnxport.core.util.progress import Reporter

from ..model_builders import make_model

BATCH = 4


def _gemm_model(bias_shape: tuple[int, ...], shared: bool = False) -> onnx.ModelProto:
    """x [4, 8] -> Gemm(W [16, 8], transB, C bias_shape) -> Relu -> Gemm(W2 [8, 4], C [1, 4]) -> y."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.normal(0, 0.5, (16, 8)).astype(np.float32), "w1"),
             numpy_helper.from_array(rng.normal(0, 0.5, bias_shape).astype(np.float32), "b1"),
             numpy_helper.from_array(rng.normal(0, 0.5, (16, 4)).astype(np.float32), "w2"),
             numpy_helper.from_array(rng.normal(0, 0.5, (1, 4)).astype(np.float32), "b2")]
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], name="gemm1", transB=1),
             helper.make_node("Relu", ["h"], ["r"], name="relu"),
             helper.make_node("Gemm", ["r", "w2", "b2"], ["y"], name="gemm2")]
    outputs = [helper.make_tensor_value_info("y", T.FLOAT, [BATCH, 4])]
    if shared:  # the bias is read elsewhere too: that reader keeps its shape
        nodes.append(helper.make_node("Add", ["h", "b1"], ["h2"], name="other"))
        outputs.append(helper.make_tensor_value_info("h2", T.FLOAT, [BATCH, 16]))
    return make_model(nodes, [helper.make_tensor_value_info("x", T.FLOAT, [BATCH, 8])], outputs,
                      inits, opset=13)


def _run(path, feed: dict) -> list[np.ndarray]:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feed)


@pytest.mark.parametrize("bias_shape", [(1, 16), (BATCH, 16), (1,)])
def test_static_per_channel_quantizes_gemms_with_a_bias_that_is_not_1d(tmp_path, bias_shape):
    model = _gemm_model(bias_shape)
    src, dst = tmp_path / "gemm.onnx", tmp_path / "gemm.qdq.onnx"
    onnx.save(model, src)
    feeds = open_feeds(None, input_specs(model), generate=2)
    ranges = calibrate(src, feeds, ["Gemm"], tmp_path, Reporter(None, None))
    modes.static(src, dst, tensors_range=ranges, op_types=["Gemm"], per_channel=True, reduce_range=True,
                 exclude=[], big=False)
    written = onnx.load(dst)
    onnx.checker.check_model(written, full_check=True)
    assert sum(n.op_type == "DequantizeLinear" for n in written.graph.node) >= 4  # both Gemms quantized
    feed = feeds.first()
    want, got = _run(src, feed)[0].ravel(), _run(dst, feed)[0].ravel()
    assert float(want @ got / (np.linalg.norm(want) * np.linalg.norm(got))) > 0.99


def test_row_biases_become_1d_with_the_same_values_and_shared_ones_are_copied():
    model = _gemm_model((1, 16), shared=True)
    assert _counts(flatten_gemm_biases(model)) == (2, False)
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    gemm1 = next(n for n in model.graph.node if n.name == "gemm1")
    assert gemm1.input[2] != "b1" and inits[gemm1.input[2]].shape == (16,)  # a copy for the Gemm
    assert inits["b1"].shape == (1, 16)  # what the Add reads is untouched
    np.testing.assert_array_equal(inits[gemm1.input[2]], inits["b1"][0])
    assert inits["b2"].shape == (4,)  # read by its Gemm only: rewritten in place
    assert _counts(flatten_gemm_biases(model)) == (0, False)  # nothing left to do

    scalar = _gemm_model((1,))
    assert _counts(flatten_gemm_biases(scalar)) == (2, False)
    assert numpy_helper.to_array(scalar.graph.initializer[1]).shape == (16,)
    assert _counts(flatten_gemm_biases(_gemm_model((BATCH, 16)))) == (1, True)  # [M, N]: no row; b2 still is one


def _counts(result) -> tuple[int, bool]:
    """(Gemms rewritten, whether a bias that is no row remains), from the checked pass's result."""
    return len(result.changes), bool(result.notes)

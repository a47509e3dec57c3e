"""ort_static: per-channel weight scales computed in one pass write the very bytes ONNX Runtime's own
QDQQuantizer writes (its per-channel Python loop): Conv, Gemm and MatMul weights, int8 and uint8,
reduce range or not, zero and subnormal channels, overrides left to ORT."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper
from onnxruntime.quantization import QuantType
from onnxruntime.quantization.qdq_quantizer import QDQQuantizer
from onnxruntime.quantization.quant_utils import load_model_with_shape_infer

from onnxport.core.evaluate.feeds import input_specs, open_feeds
from onnxport.core.quantize.calibration import calibrate
from onnxport.core.quantize.ort_static import ChannelQDQQuantizer
from onnxport.core.util.progress import Reporter

from ..model_builders import make_model


def _model() -> onnx.ModelProto:
    """x [2, 3, 8, 8] -> Conv(k [6, 3, 3, 3], b) -> Relu -> Flatten -> Gemm(w [216, 10]) -> MatMul(m [10, 4])."""
    rng = np.random.default_rng(0)
    kernel = rng.normal(0, 0.4, (6, 3, 3, 3)).astype(np.float32)
    kernel[2] = 0.0  # a zero channel: scale 1
    kernel[4] = 1e-40  # a subnormal one
    gemm = rng.normal(0, 0.1, (216, 10)).astype(np.float32)
    gemm[:, 3] = np.abs(gemm[:, 3])
    inits = [numpy_helper.from_array(kernel, "k"), numpy_helper.from_array(rng.normal(0, 0.1, 6).astype(np.float32), "b"),
             numpy_helper.from_array(gemm, "w"), numpy_helper.from_array(rng.normal(0, 0.1, 10).astype(np.float32), "c"),
             numpy_helper.from_array(rng.normal(0, 0.5, (10, 4)).astype(np.float32), "m")]
    nodes = [helper.make_node("Conv", ["x", "k", "b"], ["h"], name="conv", pads=[0, 0, 0, 0]),
             helper.make_node("Relu", ["h"], ["r"], name="relu"),
             helper.make_node("Flatten", ["r"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "w", "c"], ["g"], name="gemm"),
             helper.make_node("MatMul", ["g", "m"], ["y"], name="matmul")]
    return make_model(nodes, [helper.make_tensor_value_info("x", T.FLOAT, [2, 3, 8, 8])],
                      [helper.make_tensor_value_info("y", T.FLOAT, [2, 4])], inits, opset=17)


def _write(cls, src, dst, ranges, weight_type, reduce_range: bool, extra: dict) -> bytes:
    model = load_model_with_shape_infer(src)
    quantizer = cls(model, True, reduce_range, weight_type, QuantType.QUInt8, ranges, [], [],
                    ["Conv", "Gemm", "MatMul"], {"ActivationSymmetric": False, **extra})
    quantizer.quantize_model()
    quantizer.model.save_model_to_file(str(dst), False)
    return dst.read_bytes()


@pytest.mark.parametrize(("weight_type", "reduce_range", "extra"), [
    (QuantType.QInt8, True, {"WeightSymmetric": True}), (QuantType.QInt8, False, {}),
    (QuantType.QUInt8, False, {}),
    (QuantType.QInt8, False, {"TensorQuantOverrides": {"w": [{"axis": 1, "symmetric": False}]}}),
])
def test_writes_the_bytes_onnx_runtimes_qdq_quantizer_writes(tmp_path, weight_type, reduce_range, extra):
    src = tmp_path / "model.onnx"
    onnx.save(_model(), src)
    feeds = open_feeds(None, input_specs(_model()), generate=2)
    ranges = calibrate(src, feeds, ["Conv", "Gemm", "MatMul"], tmp_path, Reporter(None, None))
    ours = _write(ChannelQDQQuantizer, src, tmp_path / "ours.onnx", ranges, weight_type, reduce_range, extra)
    theirs = _write(QDQQuantizer, src, tmp_path / "ort.onnx", ranges, weight_type, reduce_range, extra)
    written = onnx.load(tmp_path / "ours.onnx")
    assert sum(n.op_type == "DequantizeLinear" for n in written.graph.node) >= 3
    assert ours == theirs


def test_plain_per_channel_weights_skip_onnx_runtimes_channel_loop(tmp_path, monkeypatch):
    from onnxruntime.quantization import qdq_quantizer

    src = tmp_path / "model.onnx"
    onnx.save(_model(), src)
    ranges = calibrate(src, open_feeds(None, input_specs(_model()), generate=2), ["Conv", "Gemm", "MatMul"],
                       tmp_path, Reporter(None, None))
    real, calls = qdq_quantizer.compute_data_quant_params, []
    monkeypatch.setattr(qdq_quantizer, "compute_data_quant_params", lambda *a, **k: calls.append(1) or real(*a, **k))
    rounding, rounded = qdq_quantizer.quantize_onnx_initializer, []
    monkeypatch.setattr(qdq_quantizer, "quantize_onnx_initializer",
                        lambda *a, **k: rounded.append(1) or rounding(*a, **k))
    _write(QDQQuantizer, src, tmp_path / "ort.onnx", ranges, QuantType.QInt8, True, {})
    assert len(calls) == 6 + 10 + 4  # a call per channel of the three weights
    assert len(rounded) == 3
    calls.clear()
    rounded.clear()
    _write(ChannelQDQQuantizer, src, tmp_path / "ours.onnx", ranges, QuantType.QInt8, True, {})
    assert calls == [] and rounded == []

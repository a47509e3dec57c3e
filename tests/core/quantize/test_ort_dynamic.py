"""ort_dynamic: the per-channel weights quantized in one pass write the very bytes ONNX Runtime's own
`quantize_dynamic` writes (its per-channel Python loop), for every weight shape and option used."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper
from onnxruntime.quantization import QuantType
from onnxruntime.quantization import quantize_dynamic as ort_quantize_dynamic

from onnxport.core.quantize.ort_dynamic import quantize_dynamic

from ..model_builders import make_model


def _weights(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Weights with the cases the arithmetic has: all-zero and tiny channels, one-signed ones, an outlier."""
    w1 = rng.normal(0, 0.3, (16, 24)).astype(np.float32)
    w1[:, 3] = 0.0  # a zero channel: scale 1, zero point 0
    w1[:, 5] = 1e-40  # a subnormal one
    w1[:, 7] = np.abs(w1[:, 7])  # only positive: the range still takes in 0
    w1[2, 9] = 40.0
    w2 = rng.normal(0, 1.0, (24, 8)).astype(np.float32)
    w2[:, 1] = -np.abs(w2[:, 1])
    table = rng.normal(0, 0.1, (50, 16)).astype(np.float32)
    return {"w1": w1, "w2": w2, "table": table}


def _model(rng: np.random.Generator) -> onnx.ModelProto:
    """ids -> Gather(table) -> MatMul(w1) -> Relu -> MatMul(w2) -> y; plus a MatMul of two activations."""
    inits = [numpy_helper.from_array(v, k) for k, v in _weights(rng).items()]
    nodes = [helper.make_node("Gather", ["table", "ids"], ["e"], name="embed"),
             helper.make_node("MatMul", ["e", "w1"], ["h"], name="mm1"),
             helper.make_node("Relu", ["h"], ["r"], name="relu"),
             helper.make_node("MatMul", ["r", "w2"], ["y"], name="mm2"),
             helper.make_node("Transpose", ["e"], ["et"], name="t", perm=[0, 2, 1]),
             helper.make_node("MatMul", ["e", "et"], ["z"], name="mm_act")]
    return make_model(nodes, [helper.make_tensor_value_info("ids", T.INT64, [2, 5])],
                      [helper.make_tensor_value_info("y", T.FLOAT, [2, 5, 8]),
                       helper.make_tensor_value_info("z", T.FLOAT, [2, 5, 5])], inits, opset=17)


@pytest.mark.parametrize("weight_type", [QuantType.QInt8, QuantType.QUInt8])
@pytest.mark.parametrize("reduce_range", [False, True])
@pytest.mark.parametrize("per_channel", [True, False])
def test_writes_the_bytes_onnx_runtime_writes(tmp_path, weight_type, reduce_range, per_channel):
    src = tmp_path / "model.onnx"
    onnx.save(_model(np.random.default_rng(0)), src)
    options = {"op_types_to_quantize": ["MatMul", "Gather"], "per_channel": per_channel,
               "reduce_range": reduce_range, "weight_type": weight_type, "nodes_to_exclude": ["mm2"] if
               reduce_range else [], "use_external_data_format": False, "extra_options": {"MatMulConstBOnly": True}}
    ort_quantize_dynamic(str(src), str(tmp_path / "ort.onnx"), **options)
    quantize_dynamic(src, tmp_path / "ours.onnx", **options)
    ours, theirs = (tmp_path / "ours.onnx").read_bytes(), (tmp_path / "ort.onnx").read_bytes()
    assert any(i.name.endswith("_quantized") for i in onnx.load(tmp_path / "ours.onnx").graph.initializer)
    assert ours == theirs


def test_symmetric_override_and_minimum_range_take_onnx_runtimes_own_loop(tmp_path):
    src = tmp_path / "model.onnx"
    onnx.save(_model(np.random.default_rng(1)), src)
    options = {"op_types_to_quantize": ["MatMul"], "per_channel": True, "reduce_range": False,
               "weight_type": QuantType.QUInt8, "nodes_to_exclude": [], "use_external_data_format": False,
               "extra_options": {"WeightSymmetric": True, "MinimumRealRange": 0.5}}
    ort_quantize_dynamic(str(src), str(tmp_path / "ort.onnx"), **options)
    quantize_dynamic(src, tmp_path / "ours.onnx", **options)
    assert (tmp_path / "ours.onnx").read_bytes() == (tmp_path / "ort.onnx").read_bytes()


def test_plain_weights_never_reach_onnx_runtimes_loop(tmp_path, monkeypatch):
    from onnxruntime.quantization.base_quantizer import BaseQuantizer

    def loop(*args, **kwargs):
        raise AssertionError("ORT's per-channel loop ran")

    src = tmp_path / "model.onnx"
    onnx.save(_model(np.random.default_rng(2)), src)
    monkeypatch.setattr(BaseQuantizer, "quantize_weight_per_channel_impl", loop)
    quantize_dynamic(src, tmp_path / "ours.onnx", op_types_to_quantize=["MatMul"], per_channel=True,
                     reduce_range=True, weight_type=QuantType.QInt8, nodes_to_exclude=[],
                     use_external_data_format=False, extra_options={})
    names = {i.name for i in onnx.load(tmp_path / "ours.onnx").graph.initializer}
    assert {"w1_quantized", "w1_scale", "w2_quantized"} <= names

"""The int8 mode offered first (quantize/mode_choice.py) is the one the quantizer can use: a Conv-only
model gets static int8, because dynamic int8 would refuse it after trying (issue 35)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnxport.core.quantize.mode_choice import int8_choice
from onnxport.core.quantize.quantize import QuantizeOptions, quantize
from onnxport.core.util.errors import OnnxportError

from ..model_builders import forward_mlp, make_model
from ..quant_models import save


def conv_model():
    """Two Conv layers (3 -> 32 -> 64 channels) with ReLUs: its weights are all Conv weights."""
    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array((rng.standard_normal(shape) / np.sqrt(np.prod(shape[1:]))).astype(np.float32),
                                       f"w{i}") for i, shape in enumerate(((32, 3, 3, 3), (64, 32, 3, 3)))]
    nodes = [helper.make_node("Conv", ["image", "w0"], ["c0"], name="conv0", pads=[1] * 4),
             helper.make_node("Relu", ["c0"], ["r0"], name="relu0"),
             helper.make_node("Conv", ["r0", "w1"], ["c1"], name="conv1", pads=[1] * 4),
             helper.make_node("Relu", ["c1"], ["y"], name="relu1")]
    return make_model(nodes, [helper.make_tensor_value_info("image", T.FLOAT, ["batch", 3, 16, 16])],
                      [helper.make_tensor_value_info("y", T.FLOAT, ["batch", 64, 16, 16])], weights)


def test_a_conv_only_model_is_offered_static_and_dynamic_really_cannot_help(tmp_path):
    model = conv_model()
    mode, reason = int8_choice(n.op_type for n in model.graph.node)
    assert mode == "static" and "Conv" in reason and "quantize nothing" in reason
    path = save(model, tmp_path / "det.onnx")
    with pytest.raises(OnnxportError, match="dynamic quantization found nothing to quantize"):
        quantize(path, tmp_path / "q.onnx", "dynamic", QuantizeOptions(int8_path="avx2"))
    static = quantize(path, tmp_path / "s.onnx", "static", QuantizeOptions(int8_path="avx2", accuracy_target=None))
    assert static.path.exists()  # the mode offered does quantize it


def test_models_with_matmuls_or_nothing_to_weigh_keep_dynamic():
    assert int8_choice(n.op_type for n in forward_mlp().graph.node) == ("dynamic", None)
    assert int8_choice(["Conv", "MatMul", "Shape", "Gather"]) == ("dynamic", None)  # dynamic reaches the MatMul
    assert int8_choice(["Conv", "Shape", "Gather", "Relu"])[0] == "static"  # shape Gathers hold no weights
    assert int8_choice(["Add", "Relu"]) == ("dynamic", None)  # nothing either way: the quantizer says so

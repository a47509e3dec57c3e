"""The int8 mode offered first (quantize/mode_choice.py) is the one the quantizer can use: a Conv-only
model gets static int8, and `quantize --mode dynamic` refuses it up front with the same reason (one
policy for the app and the CLI), unless an embedding table gives dynamic something to do (issue 35)."""

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
    with pytest.raises(OnnxportError, match="dynamic quantization found nothing to quantize") as refused:
        quantize(path, tmp_path / "q.onnx", "dynamic", QuantizeOptions(int8_path="avx2"))
    assert reason in str(refused.value)  # one policy: the CLI and the API say the app's reason
    assert refused.value.option == "--mode"  # ...and the app its own words for the hint (app_hints.py)
    static = quantize(path, tmp_path / "s.onnx", "static", QuantizeOptions(int8_path="avx2", accuracy_target=None))
    assert static.path.exists()  # the mode offered does quantize it


def test_models_with_matmuls_or_nothing_to_weigh_keep_dynamic():
    assert int8_choice(n.op_type for n in forward_mlp().graph.node) == ("dynamic", None)
    assert int8_choice(["Conv", "MatMul", "Shape", "Gather"]) == ("dynamic", None)  # dynamic reaches the MatMul
    assert int8_choice(["Conv", "Shape", "Gather", "Relu"])[0] == "static"  # shape Gathers hold no weights
    assert int8_choice(["Add", "Relu"]) == ("dynamic", None)  # nothing either way: the quantizer says so


def test_a_conv_model_with_an_embedding_table_is_still_quantized_dynamically(tmp_path):
    """A Gather reading a weight is an embedding dynamic int8 quantizes: no refusal up front."""
    rng = np.random.default_rng(1)
    table = numpy_helper.from_array(rng.standard_normal((256, 64)).astype(np.float32), "table")
    w = numpy_helper.from_array((rng.standard_normal((8, 1, 3, 3)) / 3).astype(np.float32), "w")
    nodes = [helper.make_node("Gather", ["table", "ids"], ["e"], name="embed"),
             helper.make_node("Unsqueeze", ["e", "one"], ["e4"], name="as_image"),
             helper.make_node("Conv", ["e4", "w"], ["y"], name="conv", pads=[1] * 4)]
    one = numpy_helper.from_array(np.array([1], np.int64), "one")
    model = make_model(nodes, [helper.make_tensor_value_info("ids", T.INT64, ["batch", 16])],
                       [helper.make_tensor_value_info("y", T.FLOAT, ["batch", 8, 16, 64])], [table, w, one])
    assert int8_choice(n.op_type for n in model.graph.node)[0] == "static"  # what the app offers first
    path = save(model, tmp_path / "embed_conv.onnx")
    result = quantize(path, tmp_path / "q.onnx", "dynamic", QuantizeOptions(int8_path="avx2", accuracy_target=None))
    assert result.path.exists()

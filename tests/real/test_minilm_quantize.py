"""Dynamic int8 of the real all-MiniLM-L6-v2 sentence transformer, on real sentences.

Its first layer's FFN output projection reads GELU activations with one huge channel whose weight
row is huge too: quantized whole, it alone costs the model most of its accuracy (on all six
layers, 7-bit weights: cosine 0.84). Splitting that channel off into a rank-1 float MatMul
(outlier_split.py) lets every MatMul be int8 and still meet the target. To stay fast, the model here is
the real checkpoint's first two layers (its config says 2 layers; the weights are the real ones),
exported the way the issue did (`torch-export --mode training`, then onnxport's export); the
target is raised to 0.994 (whole: 0.99 or less). The int8 path is pinned to 7-bit weights:
exact on every CPU's kernels, so the verdict does not depend on the CPU running the test.
"""

from __future__ import annotations

import onnx
import pytest

from onnxport.core.quantize.outlier_split import SUFFIX
from onnxport.core.quantize.quantize import QuantizeOptions, quantize

from .minilm_layers import minilm_with_sentences

SENTENCES = [
    "A man is playing a guitar on the street corner while people walk by.",
    "Quantization stores the weights of a neural network in eight bits.",
    "How do I export a PyTorch model to ONNX and run it?",
    "The weather in Paris is lovely in the spring, although it rains often.",
    "Stock markets fell sharply after the central bank raised interest rates.",
    "She sold seashells by the seashore.",
    "Please restart the server and check the logs for error messages.",
    "What is the capital city of Australia?",
]
OUTLIER_NODE = "/encoder/layer.0/output/dense/MatMul"


@pytest.fixture(scope="module")
def minilm(tmp_path_factory):
    """(float32 inference model of the first two layers, real sentences as an .npz)."""
    pytest.importorskip("torch")
    return minilm_with_sentences(tmp_path_factory.mktemp("minilm"), SENTENCES)


def test_the_outlier_channels_of_the_ffn_projection_go_float_not_the_whole_matmul(minilm, tmp_path):
    model, sentences = minilm
    result = quantize(model, tmp_path / "q.onnx", "dynamic",
                      QuantizeOptions(int8_path="avx2", accuracy_target=0.994, validation_inputs=sentences))
    assert result.int8_path == "int8 path: avx2 (no VNNI) -> 7-bit weights, pinned"
    assert result.options["per_channel"] is True and result.options["reduce_range"] is True
    assert any(n.startswith("outlier channels:") for n in result.notes)
    whole = result.attempts[0]  # every MatMul int8, its outlier input channels split off in float
    assert whole["kept_float_nodes"] == [] and whole["min_cosine"] >= 0.994 and len(result.attempts) == 1
    assert result.kept_float_nodes == []
    assert result.validation.passed and result.validation.min_cosine >= 0.994
    assert result.size_ratio <= 0.4
    written = onnx.load(str(result.path))
    onnx.checker.check_model(written)
    assert {o.domain for o in written.opset_import} <= {"", "com.microsoft"}
    by_name = {n.name: n.op_type for n in written.graph.node}
    assert by_name[OUTLIER_NODE + SUFFIX] == "MatMul"  # its outlier channels, in float
    assert OUTLIER_NODE not in by_name  # the MatMul itself is int8
    assert sum(op == "MatMulInteger" for op in by_name.values()) == 2 * 6  # all 12

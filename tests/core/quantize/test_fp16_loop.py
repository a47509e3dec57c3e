"""float16 with a target: the first conversion is judged on the held-out inputs at once, and only a
miss there starts the search (real ORT, tiny models built here)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnxport.core.quantize import search
from onnxport.core.quantize.options import QuantizeOptions
from onnxport.core.quantize.quantize import quantize


def _model(scale: float) -> onnx.ModelProto:
    """y = (x @ W1) @ W2, W2's values of `scale`: at 1e-8 they are below float16's smallest (6e-8)
    and become zeros, the output with them; kept float32, that MatMul is right again."""
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.normal(0, 0.1, (128, 128)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array((scale * rng.normal(0, 1, (128, 32))).astype(np.float32), "w2")
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm1"),
             helper.make_node("MatMul", ["h", "w2"], ["y"], name="mm2")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 128])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 32])], [w1, w2])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _fp16(tmp_path, scale: float, monkeypatch):
    src = tmp_path / "m.onnx"
    onnx.save_model(_model(scale), str(src))
    rng = np.random.default_rng(1)
    inputs = [{"x": rng.normal(0, 1, (4, 128)).astype(np.float32)} for _ in range(24)]
    search_checks = []
    original = search.check_file

    def spy(*args, **kwargs):
        search_checks.append(args[0])
        return original(*args, **kwargs)

    monkeypatch.setattr(search, "check_file", spy)
    result = quantize(src, tmp_path / "out.onnx", "fp16", QuantizeOptions(validation_inputs=inputs))
    return result, search_checks


def test_a_conversion_that_passes_held_out_is_checked_once(tmp_path, monkeypatch):
    result, search_checks = _fp16(tmp_path, 0.1, monkeypatch)
    assert result.validation.passed and result.kept_float_nodes == []
    assert search_checks == []  # no second check on the search part
    assert [a["inputs"] for a in result.attempts] == ["held out"]


def test_a_miss_on_held_out_starts_the_search(tmp_path, monkeypatch):
    result, search_checks = _fp16(tmp_path, 1e-8, monkeypatch)
    assert result.attempts[0]["inputs"] == "held out" and not result.attempts[0]["passed"]
    assert search_checks and result.validation.passed and result.kept_float_nodes == ["mm2"]

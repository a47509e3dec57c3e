"""ONNX Runtime's errors keep their reason in onnxport's one line (issue 27, item 11): ORT quotes
the model's whole path and C++ signatures first, and a line cut at its head lost "Unsupported
model IR version: 99" or "indices element out of data bounds"."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxport.core.cli import main
from onnxport.core.evaluate import runtime
from onnxport.core.util.errors import OnnxportError


@pytest.fixture
def deep(tmp_path):
    folder = tmp_path.joinpath(*[f"a_rather_long_folder_name_{i:02d}" for i in range(14)])
    folder.mkdir(parents=True)
    return folder


def test_an_unsupported_ir_version_says_so(deep, capsys):
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 99
    path = deep / "ir99.onnx"
    onnx.save(model, path)
    with pytest.raises(OnnxportError) as info:
        runtime.session(path)
    reason = str(info.value).split("ONNX Runtime cannot run this model: ", 1)[1]
    assert reason.startswith("Unsupported model IR version: 99") and "Load model from" not in reason
    assert "onnxruntime::" not in reason
    assert main(["bench", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Unsupported model IR version: 99" in err


def test_a_run_failure_behind_a_long_node_name_keeps_its_reason():
    data = numpy_helper.from_array(np.arange(3, dtype=np.float32), "data")
    graph = helper.make_graph([helper.make_node("Gather", ["data", "i"], ["y"], name="/node/" + "n" * 800)], "g",
                              [helper.make_tensor_value_info("i", TensorProto.INT64, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])], initializer=[data])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    sess = runtime.session(model)
    with pytest.raises(OnnxportError) as info:
        runtime.run(sess, None, {"i": np.array([5], np.int64)}, label="m.onnx")
    text = str(info.value)
    assert len(text) < 700 and "indices element out of data bounds, idx=5" in text

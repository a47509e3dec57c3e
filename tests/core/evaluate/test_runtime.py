"""runtime.session on an in-memory model: serialized once, and spilled to the work folder when
protobuf cannot hold it in one message."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxport.core.evaluate import runtime
from onnxport.core.util.errors import OnnxportError


def _scale_model() -> onnx.ModelProto:
    w = numpy_helper.from_array(np.full((4,), 3.0, np.float32), "w")
    graph = helper.make_graph([helper.make_node("Mul", ["x", "w"], ["y"])], "scale",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], initializer=[w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_model_within_the_limit_runs_from_its_bytes(tmp_path):
    model = _scale_model()
    assert runtime.serialized_within_limit(model) == model.SerializeToString()
    sess = runtime.session(model, workdir=tmp_path)
    assert sess.run(None, {"x": np.ones(4, np.float32)})[0].tolist() == [3.0] * 4
    assert list(tmp_path.iterdir()) == []


def test_a_model_past_the_limit_is_spilled_to_the_work_folder_or_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(runtime, "SESSION_BYTES_LIMIT", 16)
    model = _scale_model()
    assert runtime.serialized_within_limit(model) is None
    sess = runtime.session(model, label="big", workdir=tmp_path)
    assert sess.run(None, {"x": np.ones(4, np.float32)})[0].tolist() == [3.0] * 4
    assert any(p.name.endswith(".session.onnx") for p in tmp_path.iterdir())
    with pytest.raises(OnnxportError, match="big: over 2 GB in memory and no work folder"):
        runtime.session(model, label="big")

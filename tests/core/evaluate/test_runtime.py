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


def test_checking_sessions_sleep_between_runs_and_latency_sessions_keep_ort_default(tmp_path, monkeypatch):
    """Idle pool threads spinning cost a busy machine CPU and wall time; a latency measurement keeps
    ORT's default (spinning), as a deployed model runs."""
    assert runtime.session_options().get_session_config_entry(runtime.ALLOW_SPINNING_KEY) == "0"
    with pytest.raises(RuntimeError, match="does not have"):  # not set: ORT's default
        runtime.session_options(spinning=True).get_session_config_entry(runtime.ALLOW_SPINNING_KEY)
    from onnxport.core.evaluate import benchmark

    seen = []
    real = runtime.session

    def spy(*args, **kwargs):
        seen.append(kwargs.get("spinning", False))
        return real(*args, **kwargs)

    monkeypatch.setattr(benchmark, "session", spy)
    path = tmp_path / "m.onnx"
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    onnx.save(helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]),
                                opset_imports=[helper.make_opsetid("", 17)]), path)
    benchmark.benchmark([path], seconds=0.05, threads=1)
    assert seen == [True]

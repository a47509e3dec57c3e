"""Small models for the runtimes tests, and where the OpenVINO runtime is.

`openvino_python()`: the Python of .venv-openvino (`make runtime-openvino`; `make test` builds it),
found as onnxport finds it (core/runtimes/discovery.py); a test needing it skips where it is
absent, unless ONNXPORT_REQUIRE_OPENVINO=1 (set by `make test`) makes that a failure.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from onnxport.core.runtimes.discovery import candidates, describe

OPENVINO = "OpenVINOExecutionProvider"


def openvino_python() -> str:
    for python, source in candidates():
        if source != "this environment" and OPENVINO in describe(python, source).providers:
            return python
    message = "no ONNX Runtime with OpenVINO found (make runtime-openvino)"
    if os.environ.get("ONNXPORT_REQUIRE_OPENVINO") == "1":
        raise RuntimeError(message)
    pytest.skip(message)


def mixed_model(path: Path) -> Path:
    """MatMul, Relu, Hardmax (which OpenVINO's provider does not take), Add, Sigmoid: [2, 4] -> [2, 4]."""
    weight = onnx.numpy_helper.from_array(np.random.default_rng(0).random((4, 4), np.float32), "W")
    nodes = [helper.make_node("MatMul", ["x", "W"], ["a"], name="mm"),
             helper.make_node("Relu", ["a"], ["b"], name="relu"),
             helper.make_node("Hardmax", ["b"], ["c"], name="hm", axis=-1),
             helper.make_node("Add", ["c", "b"], ["d"], name="add"),
             helper.make_node("Sigmoid", ["d"], ["y"], name="sig")]
    graph = helper.make_graph(nodes, "mixed", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def newer_model(path: Path, opset: int, ir_version: int) -> Path:
    """One Relu stamped with `opset` and `ir_version` (a runtime older than them refuses it)."""
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")], "newer",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = ir_version
    onnx.save(model, path)
    return path

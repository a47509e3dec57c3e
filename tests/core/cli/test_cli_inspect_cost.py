"""`onnxport inspect` of a model whose file is big for its weights, its graph small (a 90 MB
sentence transformer has 650 nodes): it starts no process (shape inference runs in this one) and
prints what it printed."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnxport.core.cli import main
from onnxport.core.workflow import sources


def big_weights_small_graph() -> onnx.ModelProto:
    """Two MatMuls with 4 MB of float weights: over the size an open starts a types child for."""
    w1, w2 = (numpy_helper.from_array(np.full((512, 1024), 0.5, np.float32), "w1"),
              numpy_helper.from_array(np.full((1024, 512), 0.25, np.float32), "w2"))
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="/fc1/MatMul"),
             helper.make_node("Relu", ["h"], ["r"], name="/act/Relu"),
             helper.make_node("MatMul", ["r", "w2"], ["y"], name="/fc2/MatMul")]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", T.FLOAT, ["batch", 512])],
                              [helper.make_tensor_value_info("y", T.FLOAT, None)], initializer=[w1, w2])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_inspect_of_big_weights_starts_no_process(tmp_path, capsys, monkeypatch):
    path = tmp_path / "model.onnx"
    onnx.save(big_weights_small_graph(), path)
    assert path.stat().st_size > sources.EARLY_TYPES_BYTES
    started = []
    real_popen = subprocess.Popen

    def recording(*args, **kwargs):
        started.append(args[0] if args else kwargs.get("args"))
        return real_popen(*args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", recording)
    assert main(["inspect", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)["model"]
    assert started == []
    by_name = {t["name"]: t for t in data["tensors"]}
    assert by_name["y"]["shape"] == ["batch", 512] and by_name["h"]["shape"] == ["batch", 1024]  # inferred here
    assert data["parameter_count"] == 2 and by_name["w1"]["bytes"] == 512 * 1024 * 4

"""Counting a model file's nodes from its fields' headers: the count `onnx.load` gives, capped at
`enough`; None where the walk cannot tell."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnxport.core.io import graph_peek
from onnxport.core.io.graph_peek import count_nodes


def chain(nodes: int, weight_values: int = 300_000) -> onnx.ModelProto:
    """`nodes` Relus and an Add of a big inline weight (the weight comes after the nodes)."""
    relus = [helper.make_node("Relu", [f"t{i}"], [f"t{i + 1}"], name=f"/l{i}/Relu") for i in range(nodes)]
    relus.append(helper.make_node("Add", [f"t{nodes}", "w"], ["y"], name="/out/Add"))
    graph = helper.make_graph(relus, "chain", [helper.make_tensor_value_info("t0", T.FLOAT, [weight_values])],
                              [helper.make_tensor_value_info("y", T.FLOAT, [weight_values])],
                              initializer=[numpy_helper.from_array(np.ones(weight_values, np.float32), "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_the_count_is_the_graphs_node_count(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(chain(300), path)
    assert path.stat().st_size > 1_000_000
    assert count_nodes(path, 5000) == len(onnx.load(path).graph.node) == 301
    assert count_nodes(path, 100) == 100  # enough counted: the walk stops


def test_nodes_after_the_weights_are_counted(tmp_path):
    """Protobuf lets a repeated field come in pieces anywhere: a second graph field merges."""
    model = chain(10)
    more = onnx.ModelProto()
    more.graph.node.extend(helper.make_node("Relu", ["y"], [f"z{i}"]) for i in range(5))
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString() + more.SerializeToString())
    assert count_nodes(path, 5000) == len(onnx.load(path).graph.node) == 16


def test_what_the_walk_cannot_tell_is_none(tmp_path, monkeypatch):
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(bytes(range(256)) * 100)
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    truncated = tmp_path / "truncated.onnx"
    truncated.write_bytes(chain(10).SerializeToString()[:-100_000])
    assert [count_nodes(p, 5000) for p in (garbage, empty, truncated, tmp_path, tmp_path / "missing")] == [None] * 5
    path = tmp_path / "m.onnx"
    onnx.save(chain(30), path)
    monkeypatch.setattr(graph_peek, "MAX_FIELDS", 10)
    assert count_nodes(path, 5000) is None  # too many fields to walk

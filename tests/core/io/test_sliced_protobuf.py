"""The sliced protobuf helpers (io/model_io.py) give what the one-call forms give: a worker reads,
copies, measures and frees a big graph a slice at a time so the app's GUI thread gets the GIL."""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper

from onnxport.core.io import model_io
from onnxport.core.io.model_io import byte_size, copy_model, items_of, release


def _chain(n: int) -> onnx.ModelProto:
    nodes = [helper.make_node("Relu", [f"t{i}"], [f"t{i + 1}"], name=f"r{i}") for i in range(n)]
    infos = [helper.make_tensor_value_info(f"t{i}", TensorProto.FLOAT, [2, 3]) for i in range(1, n)]
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("t0", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info(f"t{n}", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor("w", TensorProto.FLOAT, [1], [1.0])], value_info=infos)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], doc_string="d")
    model.metadata_props.add(key="k", value="v")
    return model


def test_sliced_forms_equal_the_one_call_forms(monkeypatch):
    monkeypatch.setattr(model_io, "COPY_SLICE", 64)  # several slices on a small graph
    model = _chain(1000)
    assert [n.name for n in items_of(model.graph.node)] == [n.name for n in model.graph.node]
    assert copy_model(model).SerializeToString() == model.SerializeToString()
    head = copy_model(model, graph=False)
    assert not head.HasField("graph") and head.doc_string == "d" and head.metadata_props[0].value == "v"
    assert len(copy_model(model, initializers=False).graph.initializer) == 0
    assert byte_size(model.graph) == model.graph.ByteSize()
    assert byte_size(model) == model.ByteSize()


def test_release_empties_lists_and_dicts(monkeypatch):
    monkeypatch.setattr(model_io, "COPY_SLICE", 64)
    nodes = items_of(_chain(300).graph.node)
    table = {n.name: {1, 2} for n in nodes}
    release(nodes)
    release(table)
    assert nodes == [] and table == {}


def test_release_empties_sets_and_several_at_once(monkeypatch):
    monkeypatch.setattr(model_io, "COPY_SLICE", 64)
    nodes = items_of(_chain(300).graph.node)
    names = {o for n in nodes for o in n.output}
    table = {n.name: i for i, n in enumerate(nodes)}
    release(nodes, names, table)
    assert nodes == [] and names == set() and table == {}

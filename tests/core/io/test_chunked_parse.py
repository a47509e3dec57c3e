"""A big model parsed a slice at a time is the model parsed in one call; what cannot be walked
(garbage, truncation, groups) is parsed in one call and fails as it always did."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from google.protobuf.message import DecodeError
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnxport.core.io import chunked_parse
from onnxport.core.io.chunked_parse import parse_model


def model_bytes(nodes: int = 3000) -> bytes:
    """Nodes, initializers (one big), value_info, metadata and a function: every kind of field."""
    chain = [helper.make_node("Relu", [f"t{i}"], [f"t{i + 1}"], name=f"/l{i}/Relu") for i in range(nodes)]
    chain.append(helper.make_node("Add", [f"t{nodes}", "w"], ["y"], name="/out/Add"))
    graph = helper.make_graph(
        chain, "chain", [helper.make_tensor_value_info("t0", T.FLOAT, [1, 256])],
        [helper.make_tensor_value_info("y", T.FLOAT, [1, 256])],
        initializer=[numpy_helper.from_array(np.arange(256, dtype=np.float32), "w"),
                     numpy_helper.from_array(np.ones(300_000, dtype=np.float32), "big")],
        value_info=[helper.make_tensor_value_info("t1", T.FLOAT, [1, 256])], doc_string="graph doc")
    function = helper.make_function("local", "Twice", ["a"], ["b"],
                                    [helper.make_node("Add", ["a", "a"], ["b"])], [helper.make_opsetid("", 17)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)],
                              functions=[function], producer_name="test")
    helper.set_model_props(model, {"k": "v"})
    return model.SerializeToString()


@pytest.fixture
def small_slices(monkeypatch):
    monkeypatch.setattr(chunked_parse, "CHUNK_BYTES", 4096)


def test_sliced_parse_equals_one_call(small_slices):
    data = model_bytes()
    assert len(data) > 2 * chunked_parse.CHUNK_BYTES
    sliced = parse_model(data)
    assert sliced == onnx.ModelProto.FromString(data)
    assert sliced.SerializeToString() == data
    assert [n.name for n in sliced.graph.node][:2] == ["/l0/Relu", "/l1/Relu"]  # order kept


def test_a_graph_in_many_slices(small_slices):
    data = model_bytes()
    (_, _, _, start, end), = [f for f in chunked_parse.fields(data, 0, len(data)) if f[0] == 7]
    slices = chunked_parse.graph_slices(data, start, end)
    assert len(slices) > 20  # ~4 KB each (the 1.2 MB initializer is one slice of its own)
    assert slices[0][0] == start and slices[-1][1] == end
    assert all(a[1] == b[0] for a, b in zip(slices, slices[1:]))  # contiguous, whole fields
    assert max(b - a for a, b in slices) >= 1_200_000


@pytest.mark.parametrize("damage", ["truncated", "garbage", "group"])
def test_what_cannot_be_walked_fails_as_before(small_slices, damage):
    data = model_bytes()
    if damage == "truncated":
        bad = data[: len(data) - 1000]
    elif damage == "garbage":
        bad = data[:100] + bytes(range(256)) * 200 + data[100:]
    else:
        bad = bytes([0x0B]) + data  # a start-group tag (wire type 3)
    try:
        expected = onnx.ModelProto.FromString(bad)
    except DecodeError:
        with pytest.raises(DecodeError):
            parse_model(bad)
    else:
        assert parse_model(bad) == expected


def test_small_models_are_parsed_in_one_call():
    data = model_bytes(10)
    assert parse_model(data) == onnx.ModelProto.FromString(data)

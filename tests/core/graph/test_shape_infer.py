"""Shape inference keeps data propagation where it pays and drops it where it would take minutes."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnxport.core.graph import shape_infer
from onnxport.core.graph.shape_infer import DATA_PROP_BUDGET, inferred_value_infos, propagate_data
from onnxport.core.graph.tensor_info import shape_of


def _shape_chain() -> onnx.ModelProto:
    """y = Reshape(x, Concat(Shape(x)[0], [-1])): only data propagation knows y is [2, 12]."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"], name="shape"),
        helper.make_node("Gather", ["s", "first"], ["batch"], name="gather", axis=0),
        helper.make_node("Unsqueeze", ["batch", "zero"], ["batch1"], name="unsqueeze"),
        helper.make_node("Concat", ["batch1", "minus_one"], ["target"], name="concat", axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y"], name="reshape"),
    ]
    inits = [numpy_helper.from_array(np.array(0, np.int64), "first"),
             numpy_helper.from_array(np.array([0], np.int64), "zero"),
             numpy_helper.from_array(np.array([-1], np.int64), "minus_one")]
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", T.FLOAT, [2, 3, 4])],
                              [helper.make_tensor_value_info("y", T.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _long_vectors(count: int, width: int) -> onnx.ModelProto:
    """A chain of Adds of `count` 1-D parameter inputs of `width` elements (an ORT eval model's shape)."""
    nodes, current = [], "x"
    for i in range(count):
        nodes.append(helper.make_node("Add", [current, f"b{i}"], [f"h{i}"], name=f"add{i}"))
        current = f"h{i}"
    inputs = [helper.make_tensor_value_info("x", T.FLOAT, [width])]
    inputs += [helper.make_tensor_value_info(f"b{i}", T.FLOAT, [width]) for i in range(count)]
    graph = helper.make_graph(nodes, "long", inputs, [helper.make_tensor_value_info(current, T.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _types(model: onnx.ModelProto) -> dict:
    return {vi.name: shape_of(vi.type) for vi in inferred_value_infos(model)}


def test_a_shape_computed_from_shapes_is_propagated():
    model = _shape_chain()
    assert propagate_data(model)
    assert _types(model)["y"] == ("float32", (2, 12))


def test_long_1d_parameters_turn_data_propagation_off_and_keep_their_shapes():
    width = 1 << 18
    model = _long_vectors(count=32, width=width)  # 32 x 262,144 elements read: over the budget
    assert 32 * width > DATA_PROP_BUDGET and not propagate_data(model)
    found = _types(model)
    assert found["h31"] == ("float32", (width,))
    assert propagate_data(_long_vectors(count=2, width=width))  # within the budget: kept


def test_the_budget_counts_reads_not_just_sizes(monkeypatch):
    """One long vector read by many nodes costs as much as many long vectors."""
    model = _long_vectors(count=1, width=1 << 16)
    assert propagate_data(model)
    monkeypatch.setattr(shape_infer, "DATA_PROP_BUDGET", (1 << 16) - 1)
    assert not propagate_data(model)

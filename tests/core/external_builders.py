"""Crafted models whose tensors live in external data, in every place a model can hold a tensor.

`model_with_external(where, location, ...)` builds `y = x + w` (x, w: float32[4]) where `w` is
- "initializer": a main-graph initializer;
- "subgraph": an initializer of both branches of an If node (If/Loop/Scan bodies are read alike);
- "constant": the `value` attribute of a Constant node;
- "sparse": a sparse initializer (its values tensor is external; its indices are inline);
and its bytes are at `location` (offset/length as given, raw strings allowed: "abc", "-4").
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper, numpy_helper

WHERE = ("initializer", "subgraph", "constant", "sparse")
W = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
SECRET = np.array([7.0, 7.0, 7.0, 7.0], np.float32)  # the bytes of a file outside the model's folder


def ext_tensor(name: str, location: str, dims=(4,), offset=None, length=None, data_type=T.FLOAT) -> onnx.TensorProto:
    t = onnx.TensorProto(name=name, data_type=data_type)
    t.dims.extend(dims)
    t.data_location = T.EXTERNAL
    t.external_data.add(key="location", value=location)
    if offset is not None:
        t.external_data.add(key="offset", value=str(offset))
    if length is not None:
        t.external_data.add(key="length", value=str(length))
    return t


def _io():
    return ([helper.make_tensor_value_info("x", T.FLOAT, [4])],
            [helper.make_tensor_value_info("y", T.FLOAT, [4])])


def finish(nodes, initializers=(), sparse=(), inputs=None, outputs=None) -> onnx.ModelProto:
    ins, outs = _io()
    graph = helper.make_graph(nodes, "g", inputs or ins, outputs or outs, list(initializers))
    graph.sparse_initializer.extend(sparse)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def model_with_external(where: str, location: str, offset=None, length=None, dims=(4,)) -> onnx.ModelProto:
    w = ext_tensor("w", location, dims, offset, length)
    add = helper.make_node("Add", ["x", "w"], ["y"], name="add")
    if where == "initializer":
        return finish([add], [w])
    if where == "constant":
        return finish([helper.make_node("Constant", [], ["w"], name="const_w", value=w), add])
    if where == "sparse":
        values = ext_tensor("w", location, (4,), offset, length)
        indices = numpy_helper.from_array(np.arange(4, dtype=np.int64), "w_indices")
        return finish([add], sparse=[helper.make_sparse_tensor(values, indices, list(dims))])
    if where == "subgraph":
        def branch(name, tensor):
            out = helper.make_tensor_value_info(f"{name}_y", T.FLOAT, [4])
            body_add = helper.make_node("Add", ["x", tensor.name], [f"{name}_y"], name=f"{name}_add")
            return helper.make_graph([body_add], name, [], [out], [tensor])
        w_then = ext_tensor("w_then", location, dims, offset, length)
        w_else = numpy_helper.from_array(W, "w_else")
        cond = numpy_helper.from_array(np.array(True), "cond")
        node = helper.make_node("If", ["cond"], ["y"], name="if", then_branch=branch("then", w_then),
                                else_branch=branch("else", w_else))
        return finish([node], [cond])
    raise ValueError(where)


def save(model: onnx.ModelProto, path) -> None:
    path.write_bytes(model.SerializeToString())

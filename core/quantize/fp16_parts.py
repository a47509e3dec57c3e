"""Small pieces of the float16 converter (fp16.py): node labels, the node order, weight values.

Contract: `node_label(node, index)` is how a node is named in `keep` and in reports (its name, or
`OpType#index`); `topological_order(graph)` the node indices in an order where each node follows
the producers of what it reads, captures of its bodies included (the given order when it already
is one; a cycle's nodes last, for the checks to refuse); `constant_array(node)` the float32 value
of a Constant node (None when it holds something else); `finite_max(array)` its largest finite
magnitude; `detached(node)` a copy that outlives `del graph.node[:]`.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

from onnxport.core.graph.runnable import topological_order as graph_topological_order

FLOAT = onnx.TensorProto.FLOAT
FP16_MAX = float(np.finfo(np.float16).max)


def node_label(node: onnx.NodeProto, index: int) -> str:
    return node.name or f"{node.op_type}#{index}"


def topological_order(graph: onnx.GraphProto) -> list[int]:
    """Node indices in an order where each node comes after the producers of what it reads
    (sub-graph captures included); the given order when it already is one."""
    nodes = list(graph.node)
    order = graph_topological_order(nodes)
    placed = set(order)
    return order + [i for i in range(len(nodes)) if i not in placed]  # a cycle: left for the checks to refuse


def constant_array(node: onnx.NodeProto) -> np.ndarray | None:
    for attr in node.attribute:
        if attr.name == "value" and attr.type == onnx.AttributeProto.TENSOR and attr.t.data_type == FLOAT:
            return numpy_helper.to_array(attr.t)
        if attr.name == "value_float":
            return np.array(attr.f, np.float32)
        if attr.name == "value_floats":
            return np.array(list(attr.floats), np.float32)
    return None


def finite_max(array: np.ndarray) -> float:
    finite = np.abs(array[np.isfinite(array)])
    return float(finite.max()) if finite.size else 0.0


def detached(node: onnx.NodeProto) -> onnx.NodeProto:
    """A copy of a node that outlives `del graph.node[:]` (protobuf clears the originals' fields)."""
    copy = onnx.NodeProto()
    copy.CopyFrom(node)
    return copy

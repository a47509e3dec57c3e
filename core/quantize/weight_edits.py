"""Small edits of a graph's weights that the float rewrites before quantizing share
(outlier_split.py, smooth.py).

`weights` is the graph's initializers by name (`graph_lookups`), kept in step with every edit:
`add_weight` appends and registers one; `replace_weight` gives a node's weight new values, in
place unless other nodes read it too (then the node gets a copy of its own). `rescaled` renames a
tensor whose values a rewrite changed (`RESCALED` suffix): by name, it no longer stands for the
float model's tensor, so the verdict's per-tensor comparison never matches it (issue 35).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

from onnxport.core.graph.uses import walk_bodies

RESCALED = "/rescaled"


def graph_lookups(graph: onnx.GraphProto) -> tuple[dict, dict, dict[str, int], set[str]]:
    """(initializers by name, producing node by tensor, readers per tensor, graph output names)."""
    weights = {t.name: t for t in graph.initializer}
    producer = {o: n for n in graph.node for o in n.output}
    readers: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            readers[name] = readers.get(name, 0) + 1
    outputs = {o.name for o in graph.output}
    return weights, producer, readers, outputs


def unique_name(taken, name: str) -> str:
    found, n = name, 1
    while found in taken:
        n += 1
        found = f"{name}_{n}"
    return found


def add_weight(graph: onnx.GraphProto, weights: dict, name: str, value: np.ndarray) -> str:
    """Append `value` as initializer `name` and register it in `weights`; returns `name`."""
    graph.initializer.append(numpy_helper.from_array(value, name))
    weights[name] = graph.initializer[-1]
    return name


def replace_weight(graph: onnx.GraphProto, weights: dict, node: onnx.NodeProto, value: np.ndarray,
                   suffix: str) -> None:
    """`node`'s weight (input 1) := `value`; one other nodes read too gets a copy of its own,
    `<weight name><suffix>` (only `node` changes)."""
    name = node.input[1]
    if sum(name in n.input for n in graph.node) > 1:
        node.input[1] = add_weight(graph, weights, unique_name(weights, f"{name}{suffix}"), value)
    else:
        weights[name].CopyFrom(numpy_helper.from_array(value, name))


def rescaled(graph: onnx.GraphProto, tensor: str) -> str:
    """Rename `tensor` to `<tensor>/rescaled` where it is made and read (bodies reading it from
    outside too); returns the new name. For a graph output: nothing, the name stays (outputs keep
    their values: every rewrite here is exact in float)."""
    if any(o.name == tensor for o in graph.output):
        return tensor
    new = tensor + RESCALED
    graphs = [graph] + [body for _, _, _, body in walk_bodies(graph)]
    for g in graphs:
        for node in g.node:
            for i, name in enumerate(node.input):
                if name == tensor:
                    node.input[i] = new
    for node in graph.node:
        for i, name in enumerate(node.output):
            if name == tensor:
                node.output[i] = new
    return new

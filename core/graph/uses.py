"""Which tensors a node or a graph uses, counting what If/Loop/Scan bodies capture from outside.

Why: a body may read any tensor of the graphs around it by name without listing it as an input of
its node; a pass looking only at `node.input` would drop such a tensor and write a file ONNX
Runtime refuses. Every pass asks here instead.

Contract (queries; nothing is modified):
- `bodies(node)`: the node's sub-graphs as `(attribute name, graph)` pairs, in attribute order;
- `subgraph_captures(node)`: the names its bodies (at any depth) read from outside the node;
- `node_uses(node)`: its non-empty inputs, then its captures (sorted): everything it reads;
- `graph_captures(graph)`: what a graph reads without defining it (its outer names);
- `used_names(graph)`: every name the graph's nodes read (captures included) and its outputs.
A name defined inside a body shadows nothing outside it: it is not a capture.
"""

from __future__ import annotations

from collections.abc import Iterator

import onnx

GRAPH_ATTRS = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
BODY_OPS = frozenset({"If", "Loop", "Scan", "SequenceMap"})  # the standard ops holding graphs
_STANDARD = ("", "ai.onnx")


def has_bodies(node: onnx.NodeProto) -> bool:
    """Cheap: whether any attribute of `node` holds a graph (standard ops other than `BODY_OPS`
    have no graph attribute: their attributes are not even looked at)."""
    if node.op_type not in BODY_OPS and node.domain in _STANDARD:
        return False
    return any(a.type in GRAPH_ATTRS for a in node.attribute)


def bodies(node: onnx.NodeProto) -> list[tuple[str, onnx.GraphProto]]:
    """The sub-graphs of `node` with the name of the attribute holding each."""
    found: list[tuple[str, onnx.GraphProto]] = []
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            found.append((attr.name, attr.g))
        elif attr.type == onnx.AttributeProto.GRAPHS:
            found.extend((attr.name, g) for g in attr.graphs)
    return found


def graph_captures(graph: onnx.GraphProto) -> set[str]:
    """Names `graph` reads (node inputs, its bodies' captures, its outputs) that it does not define."""
    defined = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    defined.update(o for node in graph.node for o in node.output if o)
    read: set[str] = {o.name for o in graph.output}
    for node in graph.node:
        read.update(node.input)
        if has_bodies(node):
            read.update(subgraph_captures(node))
    read.discard("")
    return read - defined


def subgraph_captures(node: onnx.NodeProto) -> set[str]:
    """Outer-scope names used inside `node`'s sub-graphs, at any depth."""
    captured: set[str] = set()
    for _, body in bodies(node):
        captured |= graph_captures(body)
    return captured


def node_uses(node: onnx.NodeProto) -> list[str]:
    """Everything `node` reads: its non-empty inputs, then (sorted) what its bodies capture."""
    names = [n for n in node.input if n]
    if has_bodies(node):
        names += sorted(subgraph_captures(node))
    return names


def used_names(graph: onnx.GraphProto) -> set[str]:
    """Every name the nodes of `graph` read, captures by their bodies included, and its outputs."""
    used = {o.name for o in graph.output}
    for node in graph.node:
        used.update(node_uses(node))
    return used


def walk_bodies(graph: onnx.GraphProto, path: str = "") -> Iterator[tuple[str, onnx.NodeProto, str, onnx.GraphProto]]:
    """Every body below `graph`, depth first in graph order: (path, node, attribute, body).

    `path` names the body from the top: `outer_if/then_branch/inner_if/else_branch` (a node
    without a name is `<op>#<position>`)."""
    for i, node in enumerate(graph.node):
        if not has_bodies(node):
            continue
        label = node.name or f"{node.op_type}#{i}"
        for attr, body in bodies(node):
            here = f"{path}/{label}/{attr}" if path else f"{label}/{attr}"
            yield here, node, attr, body
            yield from walk_bodies(body, here)

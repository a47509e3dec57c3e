"""The tensors inside If/Loop/Scan bodies, listed under the node that holds them.

Why: a model with control flow (a recurrent model's `If` on the sample rate) keeps most of its
work in bodies; an index of the main graph alone shows a handful of nodes and hides every weight
and intermediate tensor. Body tensors cannot be exported as outputs (they exist only while the
body runs), so they are listed apart from the main graph's tensors, never offered as outputs.

Contract: `index_bodies(graph, infos)` returns one `SubgraphInfo` per body at any depth, depth
first in graph order: its path (`outer_if/then_branch/inner_if/else_branch`), the node holding it,
the outer names it reads (`captures`) and its tensors (`TensorInfo` with `subgraph` set): body
inputs (INPUT), body initializers (PARAMETER), node outputs (OUTPUT when the body returns them,
else INTERMEDIATE), with type and shape from `infos` (shape inference), else from the body's own
declarations. Consumers count a nested body's captures as reads by the node holding it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import onnx

from onnxport.core.graph.tensor_info import TensorInfo, TensorKind, scope_of, shape_of
from onnxport.core.graph.uses import graph_captures, node_uses, walk_bodies
from onnxport.core.io.model_io import tensor_nbytes
from onnxport.core.io.parameter_set import dtype_name


@dataclass
class SubgraphInfo:
    """One body of an If/Loop/Scan node and the tensors defined in it."""

    path: str  # "outer_if/then_branch", nested: "outer_if/then_branch/inner_if/else_branch"
    node: str  # the node holding the body (its name, or `<op>#<position>`)
    op: str  # If, Loop, Scan...
    attribute: str  # then_branch, else_branch, body
    depth: int  # 1 for a body of a main-graph node
    nodes: int  # nodes directly in this body
    captures: list[str] = field(default_factory=list)  # outer names it reads, sorted
    tensors: list[TensorInfo] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"path": self.path, "node": self.node, "op": self.op, "attribute": self.attribute,
                "depth": self.depth, "nodes": self.nodes, "captures": list(self.captures),
                "tensors": [t.name for t in self.tensors]}


def index_bodies(graph: onnx.GraphProto, infos: dict[str, onnx.ValueInfoProto]) -> list[SubgraphInfo]:
    """See the module docstring."""
    found = []
    for path, node, attr, body in walk_bodies(graph):
        owner = path.rsplit("/", 2)[-2]
        found.append(SubgraphInfo(path=path, node=owner, op=node.op_type, attribute=attr,
                                  depth=path.count("/") // 2 + 1, nodes=len(body.node),
                                  captures=sorted(graph_captures(body)), tensors=_body_tensors(body, path, infos)))
    return found


def _body_tensors(body: onnx.GraphProto, path: str, infos: dict[str, onnx.ValueInfoProto]) -> list[TensorInfo]:
    declared = {vi.name: vi for vi in [*body.input, *body.value_info, *body.output]}
    outputs = {o.name for o in body.output}
    labels = [node.name or f"{node.op_type}#{i}" for i, node in enumerate(body.node)]
    consumers: dict[str, list[str]] = {}
    for label, node in zip(labels, body.node):
        for name in node_uses(node):
            consumers.setdefault(name, []).append(label)

    def typed(name: str) -> tuple[str | None, tuple | None]:
        vi = infos.get(name) or declared.get(name)
        return shape_of(vi.type) if vi is not None else (None, None)

    tensors: dict[str, TensorInfo] = {}

    def add(name: str, kind: TensorKind, dtype, shape, producer: str | None = None, op: str | None = None,
            nbytes: int | None = None) -> None:
        if name and name not in tensors:
            scope = scope_of(producer) if producer else scope_of(next(iter(consumers.get(name, [])), ""))
            tensors[name] = TensorInfo(name=name, kind=kind, dtype=dtype, shape=shape, producer=producer,
                                       producer_op=op, consumers=consumers.get(name, []), scope=scope,
                                       is_graph_output=name in outputs, nbytes=nbytes, subgraph=path)

    for vi in body.input:
        add(vi.name, TensorKind.INPUT, *typed(vi.name))
    for t in body.initializer:
        add(t.name, TensorKind.PARAMETER, dtype_name(t.data_type), tuple(int(d) for d in t.dims),
            nbytes=tensor_nbytes(t))
    for label, node in zip(labels, body.node):
        for out in node.output:
            kind = TensorKind.OUTPUT if out in outputs else TensorKind.INTERMEDIATE
            add(out, kind, *typed(out), producer=label, op=node.op_type, nbytes=_constant_bytes(node))
    return list(tensors.values())


def _constant_bytes(node: onnx.NodeProto) -> int | None:
    """A Constant node's value size (weights held in Constants), else None."""
    if node.op_type != "Constant":
        return None
    value = next((a.t for a in node.attribute if a.name == "value" and a.type == onnx.AttributeProto.TENSOR), None)
    return tensor_nbytes(value) if value is not None else None

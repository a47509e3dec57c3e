"""One graph as plain Python tables, read once: what node matching walks instead of protobuf.

Why: reading a field of a protobuf node costs far more than reading a tuple, and matching two
100,000-node graphs reads every node's inputs several times. Contract: `GraphView(graph)` holds
per node its name, op key (`domain::op`, the plain op for the default domain), inputs and
outputs as tuples; `producer` (tensor -> (node, output slot)), `order` (topological, sub-graph
captures counted), `root(t)` (the tensor `t` is a pass-through copy of: through Identity, Cast
and quantize/dequantize pairs, which quantizers and converters insert), and `reach` (root ->
nodes reading a tensor of that root). Nothing here looks at weights' values.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import onnx

from onnxport.core.graph.runnable import topological_order
from onnxport.core.graph.uses import BODY_OPS

PASS_THROUGH = frozenset({"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "Cast", "CastLike",
                          "Identity", "com.microsoft::QuantizeLinear", "com.microsoft::DequantizeLinear"})
ROOT_STEPS = 16  # pass-through hops followed at most (a crafted chain stays cheap)


def op_key(node: onnx.NodeProto) -> str:
    return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}::{node.op_type}"


def node_label(name: str, op: str, index: int) -> str:
    """What a node is called in a report: its name, or `<op>#<index>` when it has none."""
    return name or f"{op}#{index}"


@dataclass
class GraphView:
    names: list[str]
    ops: list[str]
    inputs: list[tuple[str, ...]]
    outputs: list[tuple[str, ...]]
    graph_inputs: list[str]
    graph_outputs: list[str]
    producer: dict[str, tuple[int, int]] = field(default_factory=dict)
    _order: list[int] | None = None
    _reach: dict[str, list[int]] | None = None
    nodes: list = field(default_factory=list)  # the protobuf nodes, read once into this list
    _roots: dict[str, str] = field(default_factory=dict)
    _copies: set[str] = field(default_factory=set)  # outputs of pass-through nodes

    @classmethod
    def of(cls, graph: onnx.GraphProto) -> GraphView:
        nodes = list(graph.node)
        names, ops, inputs, outputs = [], [], [], []
        for n in nodes:  # one pass, each field read once: protobuf reads dominate this
            names.append(n.name)
            domain = n.domain
            ops.append(n.op_type if not domain or domain == "ai.onnx" else f"{domain}::{n.op_type}")
            inputs.append(tuple(n.input))
            outputs.append(tuple(n.output))
        view = cls(names, ops, inputs, outputs, [i.name for i in graph.input], [o.name for o in graph.output])
        producer = view.producer
        for i, outs in enumerate(outputs):
            for slot, name in enumerate(outs):
                if name and name not in producer:
                    producer[name] = (i, slot)
        view.nodes = nodes
        view._copies = {outputs[i][0] for i, op in enumerate(ops) if op in PASS_THROUGH and outputs[i]}
        return view

    @property
    def order(self) -> list[int]:
        """Node indices in topological order (computed on first use)."""
        if self._order is None:
            self._order = _order(self.nodes, self)
        return self._order

    @property
    def reach(self) -> dict[str, list[int]]:
        """root -> nodes reading a tensor of that root (computed on first use: only B's is read)."""
        if self._reach is None:
            reach = defaultdict(list)
            root, copies = self.root, self._copies
            for i, ins in enumerate(self.inputs):
                for t in ins:  # a node reading one tensor twice is listed twice: candidates drop repeats
                    if t:
                        reach[root(t) if t in copies else t].append(i)
            self._reach = dict(reach)
        return self._reach

    def __len__(self) -> int:
        return len(self.ops)

    def may_hold_bodies(self, index: int) -> bool:
        """Cheap: only these ops can hold a graph attribute (If/Loop/Scan, or another domain's)."""
        op = self.ops[index]
        return op in BODY_OPS or "::" in op

    def label(self, index: int) -> str:
        return node_label(self.names[index], self.ops[index], index)

    def root(self, tensor: str) -> str:
        """The tensor `tensor` copies through pass-through nodes (itself when it copies none)."""
        if tensor not in self._copies:
            return tensor
        known = self._roots.get(tensor)
        if known is not None:
            return known
        current = tensor
        for _ in range(ROOT_STEPS):
            made = self.producer.get(current)
            if made is None or made[1] != 0 or self.ops[made[0]] not in PASS_THROUGH or not self.inputs[made[0]]:
                break
            current = self.inputs[made[0]][0]
        self._roots[tensor] = current
        return current

def _order(nodes: list[onnx.NodeProto], view: GraphView) -> list[int]:
    """Graph order when it is topological already (the usual case, checked on the plain tables),
    else `topological_order` (which also counts what bodies capture)."""
    producer = view.producer
    if any(view.may_hold_bodies(i) for i in range(len(view.ops))):
        return topological_order(nodes)
    none = (-1, 0)
    for i, ins in enumerate(view.inputs):
        for t in ins:
            if producer.get(t, none)[0] >= i:
                return topological_order(nodes)
    return list(range(len(nodes)))

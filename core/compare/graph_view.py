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
    order: list[int]
    graph_inputs: list[str]
    graph_outputs: list[str]
    initializers: list[str]
    producer: dict[str, tuple[int, int]] = field(default_factory=dict)
    reach: dict[str, list[int]] = field(default_factory=dict)
    _roots: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, graph: onnx.GraphProto) -> GraphView:
        nodes = list(graph.node)
        view = cls(
            names=[n.name for n in nodes], ops=[op_key(n) for n in nodes],
            inputs=[tuple(n.input) for n in nodes], outputs=[tuple(n.output) for n in nodes],
            order=topological_order(nodes), graph_inputs=[i.name for i in graph.input],
            graph_outputs=[o.name for o in graph.output], initializers=[t.name for t in graph.initializer],
        )
        for i, outs in enumerate(view.outputs):
            for slot, name in enumerate(outs):
                if name:
                    view.producer.setdefault(name, (i, slot))
        reach = defaultdict(list)
        for i, ins in enumerate(view.inputs):
            for root in {view.root(t) for t in ins if t}:
                reach[root].append(i)
        view.reach = dict(reach)
        return view

    def __len__(self) -> int:
        return len(self.ops)

    def label(self, index: int) -> str:
        return node_label(self.names[index], self.ops[index], index)

    def root(self, tensor: str) -> str:
        """The tensor `tensor` copies through pass-through nodes (itself when it copies none)."""
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

    def consumers_of(self, tensor: str) -> list[int]:
        """Nodes reading `tensor` or a pass-through copy of its root."""
        return self.reach.get(self.root(tensor), [])

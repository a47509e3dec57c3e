"""One graph as flat Python columns, read once: what node matching walks instead of protobuf.

Why: reading a field of a protobuf node costs far more than reading a list, and matching two
100,000-node graphs reads every node's inputs several times; and a list or tuple kept per node
(hundreds of thousands of them) makes the garbage collector walk them all again and again, so
every node's inputs sit in one flat list of names (outputs in another), cut by offsets.
Contract: `GraphView(graph)` holds per node its name, op key (`domain::op`, the plain op for the
default domain), `inputs[i]` and `outputs[i]` (lists, as declared); `made(t)` ((node, output
slot) making tensor `t`, None for an input or weight), `node(i)` (the protobuf node, for its
attributes and bodies), `order` (topological, sub-graph captures counted), `root(t)` (the
tensor `t` is a pass-through copy of: through Identity, Cast and quantize/dequantize pairs,
which quantizers and converters insert), and `reach` (root -> nodes reading a tensor of that
root). Nothing here looks at weights' values.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict

import onnx

from onnxport.core.graph.runnable import topological_order
from onnxport.core.graph.uses import BODY_OPS

PASS_THROUGH = frozenset({"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "Cast", "CastLike",
                          "Identity", "com.microsoft::QuantizeLinear", "com.microsoft::DequantizeLinear"})
ROOT_STEPS = 16  # pass-through hops followed at most (a crafted chain stays cheap)


def node_label(name: str, op: str, index: int) -> str:
    """What a node is called in a report: its name, or `<op>#<index>` when it has none."""
    return name or f"{op}#{index}"


class Rows:
    """Per node, a list of names held flat: `rows[i]` is node i's (a new list each time)."""

    __slots__ = ("flat", "starts")

    def __init__(self) -> None:
        self.flat: list[str] = []
        self.starts: list[int] = [0]  # node i's names are flat[starts[i]:starts[i + 1]]

    def __getitem__(self, index: int) -> list[str]:
        return self.flat[self.starts[index]:self.starts[index + 1]]

    def __len__(self) -> int:
        return len(self.starts) - 1


class GraphView:
    """See the module docstring."""

    def __init__(self, graph: onnx.GraphProto) -> None:
        self._nodes = graph.node
        self.names: list[str] = []
        self.ops: list[str] = []
        self.attributes: list[int] = []  # how many each node has (most have none: nothing to compare)
        self.inputs, self.outputs = Rows(), Rows()
        names, ops, attributes = self.names, self.ops, self.attributes
        ins, in_starts = self.inputs.flat, self.inputs.starts
        outs, out_starts = self.outputs.flat, self.outputs.starts
        for n in graph.node:  # one pass, each field read once: protobuf reads dominate this
            names.append(n.name)
            domain = n.domain
            ops.append(n.op_type if not domain or domain == "ai.onnx" else f"{domain}::{n.op_type}")
            attributes.append(len(n.attribute))
            ins += n.input
            in_starts.append(len(ins))
            outs += n.output
            out_starts.append(len(outs))
        self.graph_inputs = [i.name for i in graph.input]
        self.graph_outputs = [o.name for o in graph.output]
        # tensor -> its place in the flat outputs; the first node making a name keeps it
        self.producer: dict[str, int] = {outs[k]: k for k in range(len(outs) - 1, -1, -1) if outs[k]}
        self.bodied = [i for i, op in enumerate(ops) if op in BODY_OPS or "::" in op]  # may hold graphs
        self._copies = {outs[out_starts[i]] for i, op in enumerate(ops)  # outputs of pass-through nodes
                        if op in PASS_THROUGH and out_starts[i + 1] > out_starts[i]}
        self._roots: dict[str, str] = {}
        self._order: list[int] | None = None
        self._rank: list[int] | None = None
        self._reach: dict[str, list[int]] | None = None

    @classmethod
    def of(cls, graph: onnx.GraphProto) -> GraphView:
        return cls(graph)

    def __len__(self) -> int:
        return len(self.ops)

    def node(self, index: int) -> onnx.NodeProto:
        return self._nodes[index]

    def made(self, tensor: str) -> tuple[int, int] | None:
        """(node, output slot) making `tensor`; None for a graph input, a weight or an unknown name."""
        k = self.producer.get(tensor)
        if k is None:
            return None
        node = bisect_right(self.outputs.starts, k) - 1
        return node, k - self.outputs.starts[node]

    def label(self, index: int) -> str:
        return node_label(self.names[index], self.ops[index], index)

    @property
    def order(self) -> list[int]:
        """Node indices in topological order (computed on first use)."""
        if self._order is None:
            self._order = _order(self)
        return self._order

    @property
    def rank(self) -> list[int]:
        """Each node's position in `order`."""
        if self._rank is None:
            rank = [0] * len(self.ops)
            for position, i in enumerate(self.order):
                rank[i] = position
            self._rank = rank
        return self._rank

    @property
    def reach(self) -> dict[str, list[int]]:
        """root -> nodes reading a tensor of that root (computed on first use: only B's is read)."""
        if self._reach is None:
            reach = defaultdict(list)
            root, copies, inputs = self.root, self._copies, self.inputs
            for i in range(len(self)):
                for t in inputs[i]:  # a node reading one tensor twice is listed twice: candidates drop repeats
                    if t:
                        reach[root(t) if t in copies else t].append(i)
            self._reach = dict(reach)
        return self._reach

    def root(self, tensor: str) -> str:
        """The tensor `tensor` copies through pass-through nodes (itself when it copies none)."""
        if tensor not in self._copies:
            return tensor
        known = self._roots.get(tensor)
        if known is not None:
            return known
        current = tensor
        for _ in range(ROOT_STEPS):
            made = self.made(current)
            if made is None or made[1] != 0 or self.ops[made[0]] not in PASS_THROUGH or not self.inputs[made[0]]:
                break
            current = self.inputs[made[0]][0]
        self._roots[tensor] = current
        return current


def _order(view: GraphView) -> list[int]:
    """Graph order when it is topological already (the usual case, checked on the flat columns),
    else `topological_order` (which also counts what bodies capture)."""
    if not view.bodied:
        producer, ins, in_starts, out_starts = view.producer, view.inputs.flat, view.inputs.starts, view.outputs.starts
        node = 0
        for k, t in enumerate(ins):
            while k >= in_starts[node + 1]:
                node += 1
            if producer.get(t, -1) >= out_starts[node]:  # made by this node or a later one
                break
        else:
            return list(range(len(view)))
    return topological_order(list(view._nodes))

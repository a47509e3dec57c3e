"""Is the graph a graph ONNX can run? Refuse cycles and doubly-produced tensors before writing.

Why: ONNX graphs are acyclic and each tensor has one producer. A crafted file with a node that
consumes its own output, or nodes A -> B -> A, prunes and writes "fine" (pruning walks names, not
order) and leaves a model nothing can run - over whatever output the user named. This check runs
in O(nodes + edges) before anything is written.

Contract: `check_graph(graph, label)` raises `CorruptFileError` naming `label` and the nodes of one
cycle (or the tensor produced twice); it also checks the bodies of If/Loop/Scan nodes, where names
from the enclosing graphs count as available. Dependencies are node inputs plus the outer names a
node's sub-graphs use. Order is not required: an acyclic graph listed out of order passes.
"""

from __future__ import annotations

from collections import deque

import onnx

from onnxport.core.graph.uses import GRAPH_ATTRS, bodies, subgraph_captures
from onnxport.core.io.model_io import items_of
from onnxport.core.util.errors import CorruptFileError

_SHOWN_NODES = 6  # nodes of a cycle named in the message


def _name(node: onnx.NodeProto, index: int) -> str:
    return node.name or f"{node.op_type}#{index}"


def check_graph(graph: onnx.GraphProto, label: str) -> None:
    """See the module docstring."""
    nodes = items_of(graph.node)
    producer: dict[str, int] = {}
    inputs: list[list[str]] = []
    with_bodies: list[int] = []
    for i, node in enumerate(nodes):  # each protobuf field read once: access is slow
        for out in node.output:
            if out:
                if out in producer:
                    raise CorruptFileError(f"{label}: tensor '{out}' is produced by two nodes "
                                           f"('{_name(nodes[producer[out]], producer[out])}' and '{_name(node, i)}')")
                producer[out] = i
        inputs.append(list(node.input))
        attrs = node.attribute
        if attrs and any(a.type in GRAPH_ATTRS for a in attrs):
            with_bodies.append(i)
    for i in with_bodies:
        inputs[i] += sorted(subgraph_captures(nodes[i]))
    get = producer.get
    preds = [[p for p in map(get, names) if p is not None] for names in inputs]
    _refuse_cycle(nodes, preds, label)
    for i in with_bodies:
        node = nodes[i]
        for attr, body in bodies(node):
            check_graph(body, f"{label}: sub-graph '{attr}' of node '{node.name or node.op_type}'")


def _refuse_cycle(nodes: list[onnx.NodeProto], preds: list[list[int]], label: str) -> None:
    """Kahn's algorithm; what it cannot order holds a cycle, found by walking predecessors back."""
    succs: list[list[int]] = [[] for _ in nodes]
    pending = [len(p) for p in preds]
    for i, ps in enumerate(preds):
        for p in ps:
            succs[p].append(i)
    ready = deque(i for i, n in enumerate(pending) if n == 0)
    ordered = 0
    while ready:
        i = ready.popleft()
        ordered += 1
        for s in succs[i]:
            pending[s] -= 1
            if pending[s] == 0:
                ready.append(s)
    if ordered == len(nodes):
        return
    # Every unordered node has an unordered predecessor: walking back must revisit one.
    seen: dict[int, int] = {}
    path: list[int] = []
    i = next(k for k, n in enumerate(pending) if n > 0)
    while i not in seen:
        seen[i] = len(path)
        path.append(i)
        i = next(p for p in sorted(preds[i]) if pending[p] > 0)
    cycle = list(reversed(path[seen[i]:]))  # in data-flow order
    first = cycle.index(min(cycle))  # start at the node listed first in the file: stable messages
    cycle = cycle[first:] + cycle[:first]
    names = [_name(nodes[k], k) for k in cycle]
    shown = " -> ".join(f"'{n}'" for n in names[:_SHOWN_NODES])
    more = f" -> ... ({len(names)} nodes)" if len(names) > _SHOWN_NODES else ""
    raise CorruptFileError(f"{label}: the graph has a cycle ({shown}{more} -> '{names[0]}'); "
                           f"an ONNX graph must be acyclic")

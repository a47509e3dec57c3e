"""Will ONNX Runtime load this graph? The cheap structural checks, and the order they need.

Why: ORT refuses a model whose node reads a tensor nothing defines, and the ONNX spec wants nodes
in topological order; a writer that skips this prints "wrote ..." for a file nobody can run. The
checks are O(nodes + edges), on the graph about to be written, before anything is put in place.

Contract:
- `check_runnable(graph, label, defined=())` raises `CorruptFileError` (one line naming `label`,
  the node and the tensor) when a node reads a tensor that no graph input, initializer, name in
  `defined`, earlier node or enclosing graph defines, or one a later node makes, or when a graph
  output is defined by nothing. If/Loop/Scan bodies are checked the same way.
- `topological_sort(graph)` reorders nodes in place, at every depth, so each comes after what it
  reads (body captures included), keeping the given order wherever it works; returns whether
  anything moved. A cyclic graph is left as it is (`graph_check` refuses those).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

import onnx

from onnxport.core.graph.uses import bodies, has_bodies, node_uses, subgraph_captures
from onnxport.core.io.model_io import extend_in_slices, items_of, release
from onnxport.core.util.errors import CorruptFileError


def _label(node: onnx.NodeProto, index: int) -> str:
    return node.name or next((o for o in node.output if o), "") or f"{node.op_type}#{index}"


def check_runnable(graph: onnx.GraphProto, label: str, defined: Iterable[str] = ()) -> None:
    """See the module docstring."""
    _check(graph, label, [set(defined)], top=True)


def _check(graph: onnx.GraphProto, label: str, outer: list[set[str]], top: bool) -> None:
    local = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    local.update(t.values.name for t in graph.sparse_initializer)
    nodes = items_of(graph.node)  # protobuf access is slow: each field is read once
    scopes = [local, *outer]
    for i, node in enumerate(nodes):
        for name in node.input:
            if name and name not in local and not any(name in s for s in outer):
                _refuse(nodes, label, i, name)
        if has_bodies(node):
            for attr, body in bodies(node):
                _check(body, f"{label}: sub-graph '{attr}' of node '{_label(node, i)}'", scopes, top=False)
        local.update(node.output)
    local.discard("")
    for out in graph.output:
        if not any(out.name in s for s in scopes):
            where = "graph output" if top else "sub-graph output"
            raise CorruptFileError(f"{label}: {where} '{out.name}' is not made by any node, input or initializer")


def _refuse(nodes: list[onnx.NodeProto], label: str, index: int, name: str) -> None:
    reader = _label(nodes[index], index)
    later = next((k for k in range(index, len(nodes)) if name in nodes[k].output), None)
    if later is not None:
        maker = _label(nodes[later], later)
        raise CorruptFileError(f"{label}: node '{reader}' reads '{name}' before node '{maker}' makes it "
                               f"(nodes out of topological order)")
    raise CorruptFileError(f"{label}: node '{reader}' reads '{name}', which no graph input, initializer "
                           f"or earlier node defines")


def _in_order(nodes: list[onnx.NodeProto]) -> bool:
    """Whether every node comes after the nodes of this graph it reads from (one linear pass)."""
    produced: set[str] = set()
    for node in nodes:
        produced.update(node.output)
    seen: set[str] = set()
    try:
        for node in nodes:
            for name in node.input:
                if name in produced and name not in seen:
                    return False
            if has_bodies(node) and any(n in produced and n not in seen for n in subgraph_captures(node)):
                return False
            seen.update(node.output)
        return True
    finally:
        release(produced, seen)


def topological_order(nodes: list[onnx.NodeProto]) -> list[int]:
    """Indices of `nodes`, each after the producers of what it reads (sub-graph captures included),
    lowest index first among those ready (stable); shorter than `nodes` when they hold a cycle."""
    producer = {o: i for i, node in enumerate(nodes) for o in node.output if o}
    preds = [{producer[n] for n in node_uses(node) if n in producer} - {i} for i, node in enumerate(nodes)]
    if all(p < i for i, ps in enumerate(preds) for p in ps):
        return list(range(len(nodes)))
    succs: list[list[int]] = [[] for _ in nodes]
    pending = [len(ps) for ps in preds]
    for i, ps in enumerate(preds):
        for p in ps:
            succs[p].append(i)
    ready = [i for i, n in enumerate(pending) if n == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for s in succs[i]:
            pending[s] -= 1
            if pending[s] == 0:
                heapq.heappush(ready, s)
    return order


def topological_sort(graph: onnx.GraphProto) -> bool:
    """See the module docstring."""
    moved = False
    nodes = items_of(graph.node)
    for node in nodes:
        if has_bodies(node):
            for _, body in bodies(node):
                moved |= topological_sort(body)
    if _in_order(nodes):
        release(nodes)
        return moved
    order = topological_order(nodes)
    if len(order) != len(nodes):  # a cycle: not ours to fix here
        release(nodes)
        return moved
    del graph.node[:]
    extend_in_slices(graph.node, [nodes[i] for i in order])
    release(nodes)
    return True

"""Which weights a weight-only model can store in 4 or 8 bits: the MatMuls and embedding Gathers.

Contract: `weight_uses(model, block_size, min_elements)` lists, in every graph (If/Loop/Scan
bodies too, a body's weight found in it or any graph around it), each
- MatMul (ONNX domain) whose second input is a 2-D float32 initializer [K, N] with K >= block_size:
  a `MatMulNBits` candidate, blocks along K;
- Gather (axis 0) whose data is a 2-D float32 initializer [V, D] with D >= block_size and D even:
  a `GatherBlockQuantized` candidate (ONNX Runtime's CPU kernel: blocks along D);
with at least `min_elements` values. Unnamed candidates are named here (`MatMul#<index>`, in a
body `MatMul#<body path>#<index>`) so that choices can name them. `WeightUse.owner` is the index,
in `all_graphs` order, of the graph holding the initializer (0: the main graph).
"""

from __future__ import annotations

from dataclasses import dataclass

import onnx

from onnxport.core.graph.uses import bodies

MATMUL, GATHER = "MatMul", "Gather"
GATHER_BLOCKS = (16, 32, 64, 128, 256)  # ORT's GatherBlockQuantized: a power of two >= 16


@dataclass(frozen=True)
class WeightUse:
    node: str
    op: str  # MATMUL or GATHER
    weight: str  # the float32 initializer's name
    graph: int  # the graph holding the node (all_graphs order)
    owner: int  # the graph holding the initializer
    k: int  # the length blocks run along: MatMul's K, an embedding's D
    n: int  # MatMul's N, an embedding's V

    @property
    def values(self) -> int:
        return self.k * self.n


def weight_uses(model: onnx.ModelProto, block_size: int, min_elements: int) -> list[WeightUse]:
    found: list[WeightUse] = []
    counter = [0]
    _walk(model.graph, {}, "", block_size, min_elements, found, counter, 0)
    return found


def _walk(graph: onnx.GraphProto, outer: dict, path: str, block_size: int, min_elements: int,
          found: list[WeightUse], counter: list[int], index: int) -> None:
    inits = {**outer, **{t.name: (t, index) for t in graph.initializer}}
    for i, node in enumerate(graph.node):
        for attr, body in bodies(node):
            counter[0] += 1
            _walk(body, inits, f"{path}{node.name or node.op_type + str(i)}/{attr}#", block_size, min_elements,
                  found, counter, counter[0])
        use = _use(node, inits, block_size, min_elements, index)
        if node.op_type == MATMUL and node.domain in ("", "ai.onnx") and not node.name:
            node.name = f"MatMul#{path}{i}"  # every MatMul named: choices name them
            use = _use(node, inits, block_size, min_elements, index)
        if use is not None:
            found.append(use)


def _use(node: onnx.NodeProto, inits: dict, block_size: int, min_elements: int, index: int) -> WeightUse | None:
    if node.domain not in ("", "ai.onnx") or not node.name or len(node.input) < 2:
        return None
    if node.op_type == MATMUL:
        weight = node.input[1]
    elif node.op_type == GATHER and _axis(node) == 0 and block_size in GATHER_BLOCKS:
        weight = node.input[0]
    else:
        return None
    found = inits.get(weight)
    if found is None or found[0].data_type != onnx.TensorProto.FLOAT or len(found[0].dims) != 2:
        return None
    rows, cols = (int(d) for d in found[0].dims)
    k, n = (rows, cols) if node.op_type == MATMUL else (cols, rows)
    if k * n < min_elements or k < block_size or (node.op_type == GATHER and k % 2):
        return None
    return WeightUse(node.name, node.op_type, weight, index, found[1], k, n)


def _axis(node: onnx.NodeProto) -> int:
    return next((a.i for a in node.attribute if a.name == "axis"), 0)

"""Outputs whose value no input can change, so that a user who picked one hears about it.

Why: a Dropout's mask in an inference model is all True by definition, and a Constant (or
anything computed from constants only) gives the same value on every run. Offered as outputs
they export to a valid model that answers the same thing whatever it is fed, which is rarely what
was meant; the export says so instead of writing it without a word.

Contract: `fixed_outputs(graph)` (a query on the graph about to be written, after eval-mode)
returns `{output name: why}` (`fixed_output_line` words it) for
- the mask output of a `Dropout` (all True at inference), and
- every output that reads no graph input, directly or through the nodes (and the If/Loop/Scan
  bodies' captures) it depends on, unless a random op (RandomNormal...) feeds it.
Other outputs are not listed.
"""

from __future__ import annotations

import onnx

from onnxport.core.graph.uses import has_bodies, node_uses, walk_bodies

RANDOM_OPS = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
                        "Multinomial", "Bernoulli"})
DROPOUT_MASK = "is a Dropout's mask: all True in an inference model, whatever it is fed"
NO_INPUT = "reads no input: the model gives the same value on every run"


def fixed_output_line(name: str, why: str) -> str:
    """The warning for one fixed output: `output 'mask' is a Dropout's mask: ...`."""
    return f"output '{name}' {why}"


def _random(node: onnx.NodeProto) -> bool:
    if node.op_type in RANDOM_OPS:
        return True
    return has_bodies(node) and any(n.op_type in RANDOM_OPS for _p, _n, _a, body in walk_bodies(_one(node))
                                    for n in body.node)


def _one(node: onnx.NodeProto) -> onnx.GraphProto:
    """A graph holding only `node` (walk_bodies walks a graph's nodes)."""
    graph = onnx.GraphProto()
    graph.node.append(node)
    return graph


def fixed_outputs(graph: onnx.GraphProto) -> dict[str, str]:
    """See the module docstring."""
    producer = {o: node for node in graph.node for o in node.output if o}
    inputs = {vi.name for vi in graph.input}
    varies: dict[str, bool] = {}  # tensor name -> some input (or randomness) reaches it

    def reaches(name: str) -> bool:
        stack, order = [name], []
        while stack:  # iterative: graphs thousands of nodes deep
            current = stack.pop()
            if current in varies:
                continue
            node = producer.get(current)
            if current in inputs or node is None:
                varies[current] = current in inputs
                continue
            pending = [n for n in node_uses(node) if n not in varies]
            if pending:
                stack.append(current)
                stack.extend(pending)
                if current in order:  # a cycle: not ours to judge (graph_check refuses those)
                    varies[current] = True
                order.append(current)
                continue
            value = _random(node) or any(varies.get(n, False) for n in node_uses(node))
            for out in node.output:
                if out:
                    varies[out] = value
        return varies[name]

    found: dict[str, str] = {}
    for vi in graph.output:
        node = producer.get(vi.name)
        if node is not None and node.op_type == "Dropout" and node.domain in ("", "ai.onnx") \
                and len(node.output) > 1 and node.output[1] == vi.name:
            found[vi.name] = DROPOUT_MASK
        elif not reaches(vi.name):
            found[vi.name] = NO_INPUT
    return found

"""Node names across pre-processing, and the producers a QDQ node kept in float brings along.

`map_node_names` turns names of the user's model into names in ORT's pre-processed one (its
fusions rename a node `n` to `n/<Fusion>/`); `input_producers` is the static search's expansion
of a float set by the quantized producers of its inputs.
"""

from __future__ import annotations

from pathlib import Path

from onnxport.core.io.model_io import load_graph
from onnxport.core.quantize import gain
from onnxport.core.util.errors import OnnxportError


def input_producers(model_path: Path, op_types: set[str] | None):
    """For QDQ: a node kept in float still reads its inputs through the Q/DQ pair its producer's
    quantized output got (e.g. a Softmax after an Add of a -1e4 attention mask: the error is in
    that edge). So keeping a node in float also keeps the quantizable producers of its inputs."""
    graph = load_graph(model_path).graph
    producer = {o: n for n in graph.node for o in n.output if o}
    by_name = {n.name: n for n in graph.node}

    def expand(group: list[str]) -> list[str]:
        found = []
        for name in group:
            node = by_name.get(name)
            for inp in node.input if node is not None else ():
                p = producer.get(inp)
                if p is not None and p.name and (op_types is None or p.op_type in op_types):
                    found.append(p.name)
        return [n for n in dict.fromkeys(found) if n not in group]

    return expand


def map_node_names(names: list[str], original: Path, prepared: Path, notes: list[str]) -> list[str]:
    """Node names of the original model -> names in the pre-processed one (ORT's fusions rename
    a node `n` to `n/<Fusion>/`). Unknown names are an error; fused-away ones are noted."""
    if not names:
        return names
    import difflib

    before = node_names(original)
    after = node_names(prepared) if prepared != original else before
    after_set = set(after)
    mapped: list[str] = []
    for name in names:
        if name in after_set:
            mapped.append(name)
            continue
        if name not in before:
            close = difflib.get_close_matches(name, before, n=3)
            raise OnnxportError(f"{original.name}: no node named '{name}' to keep in float"
                                + (f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""))
        renamed = [a for a in after if a.startswith(name + "/")]
        if renamed:
            mapped += renamed
        else:
            notes.append(f"node '{name}' was folded away by pre-processing; nothing to keep in float")
    return list(dict.fromkeys(mapped))


def node_names(path: Path) -> list[str]:
    """Names of the nodes of every graph, If/Loop/Scan bodies included (the quantizers read bodies)."""
    return [n.name for g in gain.all_graphs(load_graph(path)) for n in g.node]

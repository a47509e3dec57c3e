"""Put training-mode ops in their inference form.

Contract: in, a (pruned) graph; out, the same graph where
- `Dropout` disappears: its consumers read its data input directly (an `Identity` stays where its
  output is a graph output). A Dropout whose mask is used is kept with `training_mode` pinned to
  False;
- `BatchNormalization` with `training_mode=1` gets `training_mode=0` and only its first output
  (running-statistics outputs must be unused by the kept graph);
- (opset < 7) `Dropout`'s `is_test` attribute, and old BN's `is_test`, are treated the same way.
The function edits `graph` in place and returns the names of the nodes it changed. Results equal
an inference run of the same model: that is what ORT's eval session does with these ops.
"""

from __future__ import annotations

import onnx
from onnx import helper


def _used_names(graph: onnx.GraphProto) -> set[str]:
    used = {n for node in graph.node for n in node.input if n}
    used.update(o.name for o in graph.output)
    return used


def to_inference_form(graph: onnx.GraphProto) -> list[str]:
    used = _used_names(graph)
    graph_outputs = {o.name for o in graph.output}
    changed: list[str] = []
    new_nodes: list[onnx.NodeProto] = []
    renames: dict[str, str] = {}
    false_const: str | None = None
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name in renames:
                node.input[i] = renames[name]
        if node.domain in ("", "ai.onnx") and node.op_type == "Dropout":
            secondary_used = any(o and o in used for o in node.output[1:])
            if not secondary_used:
                changed.append(node.name)
                if node.output[0] in graph_outputs or _has_subgraphs(graph):
                    new_nodes.append(helper.make_node("Identity", [node.input[0]], [node.output[0]], name=node.name))
                else:
                    renames[node.output[0]] = node.input[0]
                continue
            if len(node.input) >= 3 and node.input[2]:
                if false_const is None:
                    false_const = f"{node.name}__onnxport_training_mode_false"
                    new_nodes.append(helper.make_node(
                        "Constant", [], [false_const], name=false_const,
                        value=helper.make_tensor(false_const, onnx.TensorProto.BOOL, [], [False])))
                node.input[2] = false_const
                changed.append(node.name)
        elif node.domain in ("", "ai.onnx") and node.op_type == "BatchNormalization":
            if _set_bn_inference(node, used):
                changed.append(node.name)
        new_nodes.append(node)
    del graph.node[:]
    graph.node.extend(new_nodes)
    return changed


def _has_subgraphs(graph: onnx.GraphProto) -> bool:
    """Sub-graphs may capture names by reference; renaming is only safe without them."""
    return any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for n in graph.node
               for a in n.attribute)


def _set_bn_inference(node: onnx.NodeProto, used: set[str]) -> bool:
    training = False
    for attr in node.attribute:
        if attr.name == "training_mode" and attr.i:
            attr.i = 0
            training = True
        elif attr.name == "is_test" and not attr.i:
            attr.i = 1
            training = True
    extra = [o for o in node.output[1:] if o]
    if extra and not any(o in used for o in extra):
        del node.output[1:]
        training = True
    return training

"""Put training-mode ops in their inference form (a pass: see `passes`).

Contract: in, a (pruned) model, edited in place; out, a `PassResult` on that model where
- `Dropout` disappears: its consumers read its data input directly (REMOVED), or an `Identity`
  of the same name takes its place where its output is a graph output or sub-graphs could
  capture it (REWRITTEN). A Dropout whose mask is used is kept with its `training_mode` input
  pointed at a `False` constant (REWRITTEN, unless it reads one; the Constant node is ADDED once);
- `BatchNormalization` with `training_mode=1` gets `training_mode=0` and only its first output
  (running-statistics outputs must be unused by the kept graph) (REWRITTEN);
- (opset < 7) `Dropout`'s `is_test` attribute, and old BN's `is_test`, are treated the same way;
- the bodies of If/Loop/Scan nodes get the same treatment (their changes follow their graph's),
  and a tensor a body reads from outside counts as used (see `uses`).
Results equal an inference run of the same model: that is what ORT's eval session does with
these ops. Other nodes, inputs, outputs and initializers are left as they are.
"""

from __future__ import annotations

import onnx
from onnx import helper, numpy_helper

from onnxport.core.graph.passes import ADDED, REMOVED, REWRITTEN, NodeChange, PassResult, node_label
from onnxport.core.graph.uses import bodies, has_bodies, used_names
from onnxport.core.io.model_io import extend_in_slices, release


def to_inference_form(model: onnx.ModelProto) -> PassResult:
    """Dropout and BatchNormalization of `model` in inference form, in place. See the module docstring."""
    changes: list[NodeChange] = []
    _graph_inference_form(model.graph, changes)
    return PassResult(model, changed=bool(changes), changes=changes)


TRAINING_OPS = frozenset({"Dropout", "BatchNormalization"})  # what this pass changes


def _graph_inference_form(graph: onnx.GraphProto, changes: list[NodeChange]) -> None:
    """One graph's nodes (their changes first), then the bodies of its nodes, depth first."""
    # what bodies capture counts: a Dropout mask read in a branch is used (walked only if asked)
    used = used_names(graph) if any(n.op_type in TRAINING_OPS for n in graph.node) else set()
    graph_outputs = {o.name for o in graph.output}
    added: list[NodeChange] = []
    own: list[NodeChange] = []
    new_nodes: list[onnx.NodeProto] = []
    renames: dict[str, str] = {}
    false_const: str | None = None
    false_names = _false_tensors(graph) if any(n.op_type == "Dropout" for n in graph.node) else set()
    for node in graph.node:
        for i, name in enumerate(node.input) if renames else ():
            if name in renames:
                node.input[i] = renames[name]
        if node.domain in ("", "ai.onnx") and node.op_type == "Dropout":
            secondary_used = any(o and o in used for o in node.output[1:])
            if not secondary_used:
                if node.output[0] in graph_outputs or _has_subgraphs(graph):
                    new_nodes.append(helper.make_node("Identity", [node.input[0]], [node.output[0]], name=node.name))
                    own.append(NodeChange(node_label(node), REWRITTEN, "Dropout became Identity"))
                else:
                    renames[node.output[0]] = node.input[0]
                    own.append(NodeChange(node_label(node), REMOVED, "Dropout bypassed"))
                continue
            if len(node.input) >= 3 and node.input[2] and node.input[2] not in false_names:
                if false_const is None:
                    false_const = f"{node_label(node)}__onnxport_training_mode_false"
                    new_nodes.append(helper.make_node(
                        "Constant", [], [false_const], name=false_const,
                        value=helper.make_tensor(false_const, onnx.TensorProto.BOOL, [], [False])))
                    added.append(NodeChange(false_const, ADDED, "training_mode False for Dropout"))
                node.input[2] = false_const
                own.append(NodeChange(node_label(node), REWRITTEN, "Dropout training_mode pinned to False"))
        elif node.domain in ("", "ai.onnx") and node.op_type == "BatchNormalization":
            if _set_bn_inference(node, used):
                own.append(NodeChange(node_label(node), REWRITTEN, "BatchNormalization in inference mode"))
        new_nodes.append(node)
    if own or added:
        del graph.node[:]
        extend_in_slices(graph.node, new_nodes)
    release(new_nodes, used)  # a slice at a time (see model_io.release)
    changes += own + added
    for node in graph.node:
        for _, body in bodies(node):
            _graph_inference_form(body, changes)


def _false_tensors(graph: onnx.GraphProto) -> set[str]:
    """Names of `graph`'s scalar False booleans (Constant nodes, initializers): a Dropout whose
    `training_mode` reads one is in inference form already (run again, the pass adds nothing)."""
    tensors = [(n.output[0], a.t) for n in graph.node if n.op_type == "Constant" and len(n.output) == 1
               for a in n.attribute if a.name == "value" and a.type == onnx.AttributeProto.TENSOR]
    tensors += [(t.name, t) for t in graph.initializer if t.data_type == onnx.TensorProto.BOOL and not len(t.dims)]
    return {name for name, t in tensors if t.data_type == onnx.TensorProto.BOOL and not len(t.dims)
            and t.data_location != onnx.TensorProto.EXTERNAL and _is_false(t)}


def _is_false(t: onnx.TensorProto) -> bool:
    try:
        return not numpy_helper.to_array(t).any()
    except ValueError:  # a weight-free header (a preview's): no value
        return False


def _has_subgraphs(graph: onnx.GraphProto) -> bool:
    """Sub-graphs may capture names by reference; renaming is only safe without them."""
    return any(has_bodies(n) for n in graph.node)


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

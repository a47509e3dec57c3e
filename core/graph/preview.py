"""What the graph preview shows: the graph an export would write, without its weights.

Contract: `preview_model(model, outputs, parameter_names)` returns a new ModelProto holding the
nodes an export to `outputs` keeps, in inference form (Dropout gone, BatchNorm in inference
mode), with every kept parameter present as a weight-free initializer (name, type, dims: Netron
draws it as a weight of its node, not as a graph input). `outputs=None` gives the original
graph, weights stripped the same way. `preview_bytes` serializes either. The input model is not
modified. Size: a few bytes per node, whatever the weights weigh, so a preview is instant even
for a multi-GB model; parameter-only folding is not applied (it needs the weights' values).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import onnx

from onnxport.core.graph.eval_mode import to_inference_form
from onnxport.core.graph.prune import plan_prune, pruned_skeleton
from onnxport.core.io.model_io import load_graph, strip_weights

PREVIEW_DATA_BYTES = 0  # no tensor keeps its values in a preview


def _header(name: str, data_type: int, dims: Iterable[int]) -> onnx.TensorProto:
    header = onnx.TensorProto(name=name, data_type=data_type)
    header.dims.extend(int(d) for d in dims)
    return header


def preview_model(model: onnx.ModelProto, outputs: list[str] | None = None,
                  parameter_names: Iterable[str] = ()) -> onnx.ModelProto:
    if outputs is None:
        return strip_weights(model, keep_bytes=PREVIEW_DATA_BYTES)
    params = set(parameter_names)
    plan = plan_prune(model, outputs, params)
    skeleton = pruned_skeleton(model, plan)
    kept = set(plan.initializers)
    for t in model.graph.initializer:
        if t.name in kept:
            skeleton.graph.initializer.append(_header(t.name, t.data_type, t.dims))
    inputs = {vi.name: vi for vi in model.graph.input}
    for name in plan.parameter_inputs:
        tensor_type = inputs[name].type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else 0 for d in tensor_type.shape.dim]
        skeleton.graph.initializer.append(_header(name, tensor_type.elem_type, dims))
    to_inference_form(skeleton.graph)
    _drop_dead_nodes(skeleton.graph)
    used = {name for node in skeleton.graph.node for name in node.input}
    unused = [t for t in skeleton.graph.initializer if t.name not in used]  # e.g. a removed Dropout's ratio
    for t in unused:
        skeleton.graph.initializer.remove(t)
    return skeleton


def _drop_dead_nodes(graph: onnx.GraphProto) -> None:
    """Nodes nothing reads any more (a removed Dropout's ratio Constant), as the export drops them."""
    while True:
        used = {name for node in graph.node for name in node.input} | {o.name for o in graph.output}
        dead = [n for n in graph.node if not any(o in used for o in n.output if o)]
        if not dead:
            return
        for node in dead:
            graph.node.remove(node)


def preview_bytes(model_path: str | Path, outputs: list[str] | None = None,
                  parameter_names: Iterable[str] = (), model: onnx.ModelProto | None = None) -> bytes:
    """The serialized preview of the model at `model_path` (or of `model`, already loaded)."""
    model = model if model is not None else load_graph(model_path)
    return preview_model(model, outputs, parameter_names).SerializeToString()

"""What the graph preview shows: the graph an export would write, without its weights.

Contract: `to_preview(model, outputs, parameter_names)` is a pass (see `passes`): it edits
`model` in place into the nodes an export to `outputs` keeps (pruned), in inference form
(Dropout gone, BatchNorm in inference mode), with every kept initializer and parameter present as
a weight-free initializer (name, type, dims: Netron draws it as a weight of its node, not as a
graph input). `outputs=None` keeps the whole graph, weights stripped the same way. If/Loop/Scan
bodies are kept with what they read from outside (see `uses`); their initializers, and the
values of Constant nodes over `PREVIEW_CONSTANT_BYTES` (weights a model holds in Constants), lose
their data the same way, at every depth.
`preview_model` gives the same as a new model and leaves its input alone (the pass runs on a
weight-free copy); `preview_bytes` serializes it. Size: a few bytes per node, whatever the weights
weigh, so a preview is instant even for a multi-GB model. Not folded: the app draws a selection
from `export.selection_graph` (the export's own passes, folding included); this draws the rest.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import onnx

from onnxport.core.graph.eval_mode import to_inference_form
from onnxport.core.graph.passes import REMOVED, REWRITTEN, NodeChange, PassResult, node_label
from onnxport.core.graph.prune import plan_prune, prune
from onnxport.core.graph.uses import bodies, used_names
from onnxport.core.io.model_io import is_repeated, load_graph, strip_weights, tensor_nbytes
from onnxport.core.util.shapes import value_info_shape

PREVIEW_DATA_BYTES = 0  # no initializer keeps its values in a preview
PREVIEW_CONSTANT_BYTES = 1024  # Constant nodes this small keep theirs (shapes, axes: Netron shows them)


def _header(name: str, data_type: int, dims: Iterable[int]) -> onnx.TensorProto:
    header = onnx.TensorProto(name=name, data_type=data_type)
    header.dims.extend(int(d) for d in dims)
    return header


HEADER_FIELDS = frozenset({"name", "data_type", "dims"})


def beyond_header(t: onnx.TensorProto, header_fields: frozenset[str] = HEADER_FIELDS) -> bool:
    """Whether `t` holds more than `header_fields` (values, external data, a doc string...).

    Asked field by field, which reads no values: comparing `ByteSize()`s serialized the tensor
    (upb measures by writing: ~0.1 s per 100 MB, holding the GIL the GUI thread needs)."""
    for fd in t.DESCRIPTOR.fields:
        if fd.name in header_fields:
            continue
        if is_repeated(fd):
            if len(getattr(t, fd.name)):
                return True
        elif t.HasField(fd.name):
            return True
    return False


def to_preview(model: onnx.ModelProto, outputs: list[str] | None = None,
               parameter_names: Iterable[str] = ()) -> PassResult:
    """`model` made its preview, in place. See the module docstring."""
    graph = model.graph
    if outputs is None:
        changes: list[NodeChange] = []
        notes = _strip_in_place(graph)
        notes += _strip_nested(graph, changes)
        return PassResult(model, changed=bool(notes or changes), changes=changes, notes=notes)
    plan = plan_prune(model, outputs, set(parameter_names))
    wanted = set(plan.parameter_inputs)
    param_types = {vi.name: (vi.type.tensor_type.elem_type, value_info_shape(vi)) for vi in graph.input
                   if vi.name in wanted}  # read before prune removes these inputs
    pruned = prune(model, plan)
    changes, notes = list(pruned.changes), list(pruned.notes)
    headers = [_header(t.name, t.data_type, t.dims) for t in graph.initializer]
    stripped = [t.name for t in graph.initializer if beyond_header(t)]
    notes += [f"initializer '{name}' stripped of its data" for name in stripped]
    for name in plan.parameter_inputs:
        elem_type, shape = param_types[name]
        headers.append(_header(name, elem_type, [d if isinstance(d, int) else 0 for d in shape or ()]))
        notes.append(f"parameter '{name}' drawn as a weight-free initializer")
    del graph.initializer[:]
    graph.initializer.extend(headers)
    changes += to_inference_form(model).changes
    changes += [NodeChange(node_label(n), REMOVED, "nothing reads it") for n in _drop_dead_nodes(graph)]
    used = used_names(graph)
    unused = [t for t in graph.initializer if t.name not in used]  # e.g. a removed Dropout's ratio
    for t in unused:
        notes.append(f"initializer '{t.name}' removed: nothing reads it")
        graph.initializer.remove(t)
    nested = _strip_nested(graph, changes)
    notes += nested
    changed = pruned.changed or bool(changes or stripped or plan.parameter_inputs or unused or nested)
    return PassResult(model, changed=changed, changes=changes, notes=notes)


def _strip_in_place(graph: onnx.GraphProto) -> list[str]:
    """Every initializer holding data becomes a header (name, type, dims, doc string)."""
    notes = []
    for t in graph.initializer:
        if tensor_nbytes(t) > PREVIEW_DATA_BYTES or t.data_location == onnx.TensorProto.EXTERNAL:
            if beyond_header(t, HEADER_FIELDS | {"doc_string"}):
                header = _header(t.name, t.data_type, t.dims)
                header.doc_string = t.doc_string
                t.CopyFrom(header)
                notes.append(f"initializer '{t.name}' stripped of its data")
    return notes


def _strip_nested(graph: onnx.GraphProto, changes: list[NodeChange] | None = None) -> list[str]:
    """Constant nodes' big values (in `graph` and its bodies) and body initializers lose their data:
    the Constants are REWRITTEN (in `changes`, if given), the initializers notes (returned)."""
    notes = []
    for node in graph.node:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            for attr in node.attribute:
                t = attr.t
                if attr.name == "value" and attr.type == onnx.AttributeProto.TENSOR and (
                        tensor_nbytes(t) > PREVIEW_CONSTANT_BYTES or t.data_location == onnx.TensorProto.EXTERNAL):
                    if beyond_header(t):
                        t.CopyFrom(_header(t.name, t.data_type, t.dims))
                        if changes is not None:
                            changes.append(NodeChange(node_label(node), REWRITTEN, "Constant stripped of its data"))
        for _, body in bodies(node):
            notes += _strip_in_place(body)
            notes += _strip_nested(body, changes)
    return notes


strip_nested = _strip_nested  # the selection's preview (export.selection_graph) strips the same way


def _drop_dead_nodes(graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    """Nodes nothing reads any more (a removed Dropout's ratio Constant), as the export drops them;
    what sub-graphs read from outside counts as read."""
    dropped = []
    while True:
        used = used_names(graph)
        dead = [n for n in graph.node if not any(o in used for o in n.output if o)]
        if not dead:
            return dropped
        for node in dead:
            dropped.append(node)
            graph.node.remove(node)


def preview_model(model: onnx.ModelProto, outputs: list[str] | None = None,
                  parameter_names: Iterable[str] = ()) -> onnx.ModelProto:
    """The preview of `model` as a new model (`to_preview` on a weight-free copy); `model` is not modified."""
    return to_preview(strip_weights(model, keep_bytes=PREVIEW_DATA_BYTES), outputs, parameter_names).model


def preview_bytes(model_path: str | Path, outputs: list[str] | None = None,
                  parameter_names: Iterable[str] = (), model: onnx.ModelProto | None = None) -> bytes:
    """The serialized preview of the model at `model_path` (or of `model`, already loaded)."""
    model = model if model is not None else load_graph(model_path)
    return preview_model(model, outputs, parameter_names).SerializeToString()

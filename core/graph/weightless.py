"""A graph without its weights: what the Preview draws and Netron is sent (no weight bytes).

Contract: `to_weightless(model)` is a pass (see `passes`): in place, every initializer that holds
data (values, external data) becomes a header (name, type, dims, doc string: Netron draws it as a
weight of its node), and so do the values of Constant nodes over `KEPT_CONSTANT_BYTES` (weights a
model holds in Constants; small ones, shapes and axes, stay for Netron to show) and the
initializers of If/Loop/Scan bodies, at every depth. Nothing else changes: no node is pruned or
rewritten into inference form here (a selection's preview is the export's own graph, made by
`export.selection_graph`, then made weightless). `weightless_copy(model)` gives the same as a new
model and leaves its input alone; `weightless_bytes(path)` serializes the file's. Size: a few
bytes per node, whatever the weights weigh.
"""

from __future__ import annotations

from pathlib import Path

import onnx

from onnxport.core.graph.passes import REWRITTEN, NodeChange, PassResult, node_label
from onnxport.core.graph.uses import bodies
from onnxport.core.io.model_io import is_repeated, load_graph, strip_weights, tensor_nbytes

KEPT_CONSTANT_BYTES = 1024  # Constant nodes this small keep their values (shapes, axes: Netron shows them)
HEADER_FIELDS = frozenset({"name", "data_type", "dims"})


def beyond_header(t: onnx.TensorProto, header_fields: frozenset[str] = HEADER_FIELDS) -> bool:
    """Whether `t` holds more than `header_fields` (values, external data, a doc string...).

    Asked field by field, which reads no values: comparing `ByteSize()`s serialized the tensor
    (upb measures by writing, holding the GIL the GUI thread needs)."""
    for fd in t.DESCRIPTOR.fields:
        if fd.name in header_fields:
            continue
        if is_repeated(fd):
            if len(getattr(t, fd.name)):
                return True
        elif t.HasField(fd.name):
            return True
    return False


def header_of(t: onnx.TensorProto, doc: bool = False) -> onnx.TensorProto:
    """`t`'s name, type and dims (and doc string, with `doc`), without its values."""
    header = onnx.TensorProto(name=t.name, data_type=t.data_type, dims=t.dims)
    if doc:
        header.doc_string = t.doc_string
    return header


def to_weightless(model: onnx.ModelProto) -> PassResult:
    """`model` without its weights, in place. See the module docstring."""
    changes: list[NodeChange] = []
    notes = _strip_initializers(model.graph)
    notes += strip_nested(model.graph, changes)
    return PassResult(model, changed=bool(notes or changes), changes=changes, notes=notes)


def _strip_initializers(graph: onnx.GraphProto) -> list[str]:
    """Every initializer holding data becomes a header (name, type, dims, doc string)."""
    notes = []
    for t in graph.initializer:
        if beyond_header(t, HEADER_FIELDS | {"doc_string"}):
            t.CopyFrom(header_of(t, doc=True))
            notes.append(f"initializer '{t.name}' stripped of its data")
    return notes


def strip_nested(graph: onnx.GraphProto, changes: list[NodeChange] | None = None) -> list[str]:
    """Constant nodes' big values (in `graph` and its bodies) and body initializers lose their data:
    the Constants are REWRITTEN (in `changes`, if given), the initializers notes (returned)."""
    notes = []
    for node in graph.node:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            for attr in node.attribute:
                t = attr.t
                if attr.name == "value" and attr.type == onnx.AttributeProto.TENSOR and (
                        tensor_nbytes(t) > KEPT_CONSTANT_BYTES or t.data_location == onnx.TensorProto.EXTERNAL):
                    if beyond_header(t):
                        t.CopyFrom(header_of(t))
                        if changes is not None:
                            changes.append(NodeChange(node_label(node), REWRITTEN, "Constant stripped of its data"))
        for _, body in bodies(node):
            notes += _strip_initializers(body)
            notes += strip_nested(body, changes)
    return notes


def weightless_copy(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` without its weights as a new model (`to_weightless` on a weight-free copy)."""
    return to_weightless(strip_weights(model, keep_bytes=0)).model


def weightless_bytes(model_path: str | Path) -> bytes:
    """The serialized weightless model of the file at `model_path` (weights never read)."""
    return weightless_copy(load_graph(model_path)).SerializeToString()

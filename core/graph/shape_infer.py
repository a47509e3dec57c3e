"""ONNX shape inference, in a child process for big graphs.

Why: `onnx.shape_inference.infer_shapes` holds Python's GIL for its whole run, so even in a worker
thread it freezes the app's GUI thread, and a crash inside it would take the app down. Above
`OUT_OF_PROCESS_NODES` nodes (local function calls counted inlined, as inference runs them) the
weight-free graph goes to a child that sends back only the graph's value_info.

Contract: `inferred_value_infos(light_model, path=None)` returns the ValueInfoProtos inference
finds (value_info and outputs) for a weight-free model; given `path`, the child loads the file
itself. With `bodies=True` those of If/Loop/Scan bodies follow. Best effort: never raises for a
model inference cannot handle (the index lacks those shapes).
Data propagation (`data_prop=True`) costs time in proportion to the elements of every 1-D tensor
an op with a propagator reads, shape or not; `propagate_data(model)` turns it off past
`DATA_PROP_BUDGET` such elements (figures: docs/performance.md).
"""

from __future__ import annotations

import os

import onnx

from onnxport.core.graph.uses import walk_bodies
from onnxport.core.io.model_functions import expanded_nodes
from onnxport.core.util.child_call import run_in_child
from onnxport.core.util.errors import Cancelled, CorruptFileError, OnnxportError
from onnxport.core.util.progress import CancelToken

OUT_OF_PROCESS_NODES = 5_000
TIMEOUT_S = 600
DATA_PROP_BUDGET = 2_000_000  # 1-D elements read by ops (their cost: docs/performance.md)
SHAPE_LIKE = 64  # 1-D tensors shorter than this are shapes or axes to data propagation's cost

TARGET = "onnxport.core.graph.shape_infer:infer_in_child"  # the child's function (util.child_call)


def propagate_data(model: onnx.ModelProto) -> bool:
    """Whether data propagation stays within `DATA_PROP_BUDGET` (see the module docstring).

    Counts the elements of the 1-D graph inputs and initializers once per node that reads one:
    that is where long 1-D values start (a chain of ops on them costs a small multiple more).
    Vectors under `SHAPE_LIKE` elements (shapes, axes) are left out: they cost nothing."""
    graph = model.graph
    long: dict[str, int] = {}
    for vi in graph.input:
        dims = vi.type.tensor_type.shape.dim
        if len(dims) == 1 and dims[0].dim_value >= SHAPE_LIKE:
            long[vi.name] = dims[0].dim_value
    for t in graph.initializer:
        if len(t.dims) == 1 and t.dims[0] >= SHAPE_LIKE:
            long[t.name] = t.dims[0]
    if sum(long.values()) * len(graph.node) <= DATA_PROP_BUDGET:  # no need to count the reads
        return True
    return sum(long.get(name, 0) for node in graph.node for name in node.input) <= DATA_PROP_BUDGET


def body_value_infos(graph: onnx.GraphProto) -> list[onnx.ValueInfoProto]:
    """The value_info, inputs and outputs of every body below `graph`, depth first."""
    found: list[onnx.ValueInfoProto] = []
    for _path, _node, _attr, body in walk_bodies(graph):
        found += [*body.input, *body.value_info, *body.output]
    return found


def inferred_value_infos(light: onnx.ModelProto | None, path=None, nodes: int | None = None,
                         bodies: bool = False, cancel: CancelToken | None = None) -> list[onnx.ValueInfoProto]:
    """See the module docstring. `light` may be None when `path` is given (and `nodes` says
    how big the graph is)."""
    count = len(light.graph.node) if light is not None else (nodes or 0)
    if light is not None and light.functions:  # inference inlines every call: its work is the expansion
        try:
            count = expanded_nodes(light)  # loads check this too; inference must never be where it is missed
        except CorruptFileError:
            return []
    if count >= OUT_OF_PROCESS_NODES or light is None:
        graph = _in_child(light, path, bodies, cancel)
        if graph is not None:
            return list(graph.value_info) + list(graph.output)
        if light is None or count > len(light.graph.node):  # no expanded graph is inferred here
            return []
    try:
        model = onnx.shape_inference.infer_shapes(light, check_type=False, strict_mode=False,
                                                  data_prop=propagate_data(light))
    except Exception:  # noqa: BLE001 - best effort: the graph still indexes without shapes
        return []
    found = list(model.graph.value_info) + list(model.graph.output)
    return found + body_value_infos(model.graph) if bodies else found


def _in_child(light: onnx.ModelProto | None, path, bodies: bool = False,
              cancel: CancelToken | None = None) -> onnx.GraphProto | None:
    """The child's inferred graph, or None; a cancel kills the child and raises `Cancelled`."""
    request = {"bodies": bodies, "path": None if path is None else os.path.abspath(path)}  # the child's folder is another
    try:
        answer = run_in_child(TARGET, request, b"" if path is not None else light.SerializeToString(),
                              timeout=TIMEOUT_S, cancel=cancel)
    except Cancelled:
        raise
    except OnnxportError:  # it failed, died or took too long: no answer
        return None
    try:
        return onnx.GraphProto.FromString(answer)
    except Exception:  # noqa: BLE001 - a garbled answer is no answer
        return None


def infer_in_child(request: dict, data: bytes, channel) -> bytes:
    """The child's side of `_in_child` (run by util.child_call): the model at `request["path"]`
    (loaded weight-free) or the weight-free model in `data`, inferred; what it found as a GraphProto."""
    if request.get("path") is not None:
        from onnxport.core.io.model_io import load_graph, strip_weights

        model = strip_weights(load_graph(request["path"]))
    else:
        model = onnx.ModelProto.FromString(data)
    model = onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=False,
                                              data_prop=propagate_data(model))
    graph = onnx.GraphProto()
    graph.value_info.extend(model.graph.value_info)
    graph.output.extend(model.graph.output)
    if request.get("bodies"):
        graph.value_info.extend(body_value_infos(model.graph))
    return graph.SerializeToString()

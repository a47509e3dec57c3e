"""The tensor index: every tensor of a graph, with what a user needs to pick outputs.

Built from the graph alone (weights stay on disk): graph inputs and outputs, every node output,
parameters (initializers, and graph inputs that a checkpoint fills), each with shape (after shape
inference), dtype, producer op, consumers, module scope (from node names such as
`/encoder/layer.0/attention/MatMul`) and whether it only matters for training (loss, labels).
A tensor an If/Loop/Scan body reads from outside is consumed by the node holding the body; the
bodies' own tensors are listed apart, under their node (`subgraphs`, see `index_bodies`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import onnx

from onnxport.core.graph.graph_table import GraphTable
from onnxport.core.graph.index_bodies import SubgraphInfo, index_bodies
from onnxport.core.graph.shape_infer import OUT_OF_PROCESS_NODES, inferred_value_infos
from onnxport.core.graph.shape_types import PendingTypes, TypeInference
from onnxport.core.graph.tensor_info import TensorInfo, TensorKind, scope_of, shape_of, tensor_type
from onnxport.core.io.external_data import element_bits
from onnxport.core.io.model_io import strip_weights, tensor_nbytes
from onnxport.core.io.parameter_set import dtype_name
from onnxport.core.util.progress import CancelToken
from onnxport.core.util.shapes import numel

LOSS_OPS = {"SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss", "SoftmaxCrossEntropy"}
LABEL_WORDS = ("label", "target")

@dataclass
class TensorIndex:
    """All tensors of one model, graph outputs first, then by graph order."""

    path: Path | None
    tensors: dict[str, TensorInfo]
    graph_inputs: list[str]
    graph_outputs: list[str]
    parameters: list[str]
    node_count: int
    ir_version: int
    opsets: dict[str, int]
    producer: str = ""
    suggested: list[str] = field(default_factory=list)  # likely forward outputs inside an eval graph
    subgraphs: list[SubgraphInfo] = field(default_factory=list)  # If/Loop/Scan bodies, depth first
    table: GraphTable | None = field(default=None, repr=False)  # the graph as read (graph_table)
    pending_types: PendingTypes | None = field(default=None, repr=False, compare=False)  # see build_index

    def __contains__(self, name: str) -> bool:
        return name in self.tensors

    def __getitem__(self, name: str) -> TensorInfo:
        return self.tensors[name]

    def __len__(self) -> int:
        return len(self.tensors)

    def tensor_type(self, name: str) -> onnx.TypeProto | None:
        """`name`'s type as the index knows it (None: not known, or types still pending)."""
        info = self.tensors.get(name)
        return tensor_type(info) if info is not None and self.pending_types is None else None

    def selectable(self) -> list[TensorInfo]:
        """Tensors that can be exported as outputs: node outputs (graph outputs first)."""
        return [t for t in self.tensors.values() if t.kind in (TensorKind.OUTPUT, TensorKind.INTERMEDIATE)]

    def default_outputs(self) -> list[str]:
        """What an inference model usually keeps: the graph outputs that are not training-only,
        else (an ORT eval graph, whose only graph output is the loss) the suggested outputs."""
        kept = [n for n in self.graph_outputs if not self.tensors[n].training_only]
        return kept or list(self.suggested)


def infer_value_info(model: onnx.ModelProto, path: str | Path | None = None, bodies: bool = False,
                     cancel: CancelToken | None = None) -> dict[str, onnx.ValueInfoProto]:
    """Shape-infer a weight-free copy; return name -> ValueInfo for every known tensor (with
    `bodies`, those inside If/Loop/Scan bodies too).

    Big graphs given with their `path` are inferred in a child process that reads the file
    itself (see shape_infer: inference holds the GIL and would freeze the app's GUI thread)."""
    big = len(model.graph.node) >= OUT_OF_PROCESS_NODES
    if big and path is not None and Path(path).is_file():
        found = inferred_value_infos(None, path, nodes=len(model.graph.node), bodies=bodies, cancel=cancel)
    else:
        found = inferred_value_infos(strip_weights(model), bodies=bodies, cancel=cancel)
    infos: dict[str, onnx.ValueInfoProto] = {vi.name: vi for vi in found}
    for vi in list(model.graph.input) + list(model.graph.output):
        infos.setdefault(vi.name, vi)
    return infos


def build_index(
    model: onnx.ModelProto,
    path: str | Path | None = None,
    parameter_names: Iterable[str] = (),
    types: TypeInference | None = None,
    cancel: CancelToken | None = None,
    wait_types: bool = True,
    typed: bool = True,
) -> TensorIndex:
    """Index every tensor of `model`.

    `parameter_names`: graph inputs that a checkpoint fills (an ORT eval graph takes its parameters
    as inputs); they are listed as parameters, not as inputs to feed. Unnamed nodes are given a
    name (`<op>_<position>`) in `model` so that every part of the app can refer to them.
    `types`: shape inference of the model's file already started (`shape_types`, so it runs while
    the caller loads the graph); a big graph given with its `path` starts one here. The graph is
    read once into a `GraphTable` (kept as `index.table`); `cancel` is checked as it goes.
    `wait_types=False`: when that child is still needed, the index is returned without waiting
    for it (node outputs untyped, graph outputs as declared) with the child in
    `index.pending_types`; `index_types.fill_types(index)` types them later (the app shows the
    tree first). Graphs with If/Loop/Scan bodies always wait. `typed=False`: no shape inference at
    all (a query that needs no types, e.g. the CLI's export review): node outputs stay untyped,
    except in graphs with bodies, whose index needs the inferred value infos.
    """
    graph = model.graph
    big = len(graph.node) >= OUT_OF_PROCESS_NODES and path is not None and Path(path).is_file() and typed
    if types is not None and not big:  # small graphs are inferred in process: no child needed
        types.close()
        types = None
    if types is None and big:
        types = TypeInference.start(path)
    if types is not None:  # big by this count: a child `start` held back runs now
        types.ensure_started()
    deferred = False
    try:
        table = GraphTable.read(graph, cancel)
        if ((types is not None and not wait_types) or not typed) and not table.with_bodies:
            typer = ({vi.name: shape_of(vi.type) for vi in graph.output}.get, None)
            index = _index_from_table(model, path, table, typer, set(parameter_names), cancel)
            deferred = types is not None
        else:
            typer = _typer(model, path, table.with_bodies, types, cancel)
            index = _index_from_table(model, path, table, typer, set(parameter_names), cancel)
    finally:
        if types is not None and not deferred:
            types.close()
    if deferred:
        index.pending_types = PendingTypes(types, model, path)
    return index


def _typer(model: onnx.ModelProto, path, with_bodies: bool, types: TypeInference | None,
           cancel: CancelToken | None):
    """(name -> (dtype, shape)) lookup, from the child's answer when it has one, else from
    `infer_value_info`; also the ValueInfos the bodies' index needs (None without bodies)."""
    found = types.result(cancel) if types is not None and not with_bodies else None
    if found is not None:
        return found.get, None
    infos = infer_value_info(model, path, bodies=with_bodies, cancel=cancel)

    def typed(name: str):
        vi = infos.get(name)
        return shape_of(vi.type) if vi is not None else None

    return typed, infos


def _index_from_table(model: onnx.ModelProto, path, table: GraphTable, typer, param_inputs: set[str],
                      cancel: CancelToken | None) -> TensorIndex:
    graph = model.graph
    with_bodies = table.with_bodies
    typed, infos = typer
    init_by_name = {t.name: t for t in graph.initializer}
    output_names = [o.name for o in graph.output]
    output_set = set(output_names)
    names, ops, uses, outputs, producers = table.names, table.ops, table.uses, table.outputs, table.producer
    scopes = [scope_of(n) for n in names]
    consumers, consumer_nodes, first_consumer_scope = _consumers(names, uses, scopes)
    if cancel is not None:
        cancel.check()
    training = _training_only(table, table.input_names, param_inputs | set(init_by_name), consumer_nodes)

    tensors: dict[str, TensorInfo] = {}
    no_consumers: list[str] = []
    unknown = (None, None)

    def add(name: str, kind: TensorKind, dtype: str | None, shape, node: int | None = None,
            nbytes: int | None = None) -> None:
        tensors[name] = TensorInfo(
            name, kind, dtype, shape,
            names[node] if node is not None else None,
            ops[node] if node is not None else None,
            consumers.get(name, no_consumers),
            scopes[node] if node is not None else first_consumer_scope.get(name, ""),
            name in training,
            name in output_set,
            nbytes,
        )

    for name in output_names:  # graph outputs first, in graph order
        node = producers.get(name)
        kind = TensorKind.OUTPUT if node is not None else TensorKind.INPUT
        add(name, kind, *(typed(name) or unknown), node)
    intermediate = TensorKind.INTERMEDIATE
    for i, outs in enumerate(outputs):  # `add` inlined: this loop runs once per tensor
        node_name, op, scope = names[i], ops[i], scopes[i]
        for out in outs:
            if out and out not in tensors:
                dtype, shape = typed(out) or unknown
                tensors[out] = TensorInfo(out, intermediate, dtype, shape, node_name, op,
                                          consumers.get(out, no_consumers), scope, out in training,
                                          out in output_set, None)
    if cancel is not None:
        cancel.check()
    parameters, user_inputs = _add_inputs(graph, tensors, add, param_inputs, init_by_name)
    return TensorIndex(
        path=Path(path) if path else None,
        tensors=tensors,
        graph_inputs=user_inputs,
        graph_outputs=output_names,
        parameters=parameters,
        node_count=len(names),
        ir_version=model.ir_version,
        opsets={o.domain or "ai.onnx": o.version for o in model.opset_import},
        producer=f"{model.producer_name} {model.producer_version}".strip(),
        suggested=_suggested_outputs(table, training, output_set, consumers),
        subgraphs=index_bodies(graph, infos) if with_bodies else [],
        table=table,
    )


def _consumers(names: list[str], uses, scopes: list[str]
               ) -> tuple[dict[str, list[str]], dict[str, list[int]], dict[str, str]]:
    """Per tensor: its consumer node names (for display), the same as node positions (names need
    not be unique), and the scope of its first consumer. One pass over the nodes' inputs."""
    consumers: dict[str, list[str]] = {}
    consumer_nodes: dict[str, list[int]] = {}
    first_consumer_scope: dict[str, str] = {}
    for i, ins in enumerate(uses):
        name, scope = names[i], scopes[i]
        for inp in ins:
            found = consumers.get(inp)
            if found is None:
                consumers[inp] = [name]
                consumer_nodes[inp] = [i]
                first_consumer_scope[inp] = scope
            else:
                found.append(name)
                consumer_nodes[inp].append(i)
    return consumers, consumer_nodes, first_consumer_scope


def _add_inputs(graph: onnx.GraphProto, tensors: dict[str, TensorInfo], add, param_inputs: set[str],
                init_by_name: dict[str, onnx.TensorProto]) -> tuple[list[str], list[str]]:
    """Index the graph inputs and initializers no node made: (parameters, user inputs)."""
    parameters: list[str] = []
    user_inputs: list[str] = []
    for vi in graph.input:
        if vi.name in tensors:
            continue
        dtype, shape = shape_of(vi.type)
        if vi.name in param_inputs or vi.name in init_by_name:
            parameters.append(vi.name)
            nbytes = None
            bits = element_bits(vi.type.tensor_type.elem_type) if dtype is not None else None
            if bits and shape is not None and all(isinstance(d, int) and d >= 0 for d in shape):
                nbytes = (numel(shape) * bits + 7) // 8
            add(vi.name, TensorKind.PARAMETER, dtype, shape, nbytes=nbytes)
        else:
            user_inputs.append(vi.name)
            add(vi.name, TensorKind.INPUT, dtype, shape)
    for t in graph.initializer:
        if t.name in tensors:
            continue
        parameters.append(t.name)
        add(t.name, TensorKind.PARAMETER, dtype_name(t.data_type), tuple(int(d) for d in t.dims),
            nbytes=tensor_nbytes(t))
    return parameters, user_inputs


def _suggested_outputs(table: GraphTable, training: set[str], graph_outputs: set[str],
                       consumers: dict[str, list[str]]) -> list[str]:
    """Forward outputs an eval graph hides: what feeds a loss op, and first outputs nothing consumes.

    Secondary outputs (a Dropout mask, BatchNorm running statistics) and input-less nodes
    (Constants) are not suggested.
    """
    suggested: dict[str, None] = {}
    producers = table.producer
    for op, ins, outs in zip(table.ops, table.uses, table.outputs):
        if op in LOSS_OPS or (training and any(o in training for o in outs if o)):
            for name in ins:
                if name not in training and name in producers:
                    suggested[name] = None
            continue
        first = outs[0] if outs else ""
        if not ins:  # a Constant left dangling (e.g. a Dropout's removed training_mode)
            continue
        if first and first not in consumers and first not in graph_outputs and first not in training:
            suggested[first] = None
    return sorted(suggested, key=lambda n: producers.get(n, 0))


def training_only(model: onnx.ModelProto, table: GraphTable, parameter_names: Iterable[str] = ()) -> set[str]:
    """The tensors `build_index(model, parameter_names=...)` marks training-only, from the graph's
    table alone (no index to build: several times faster)."""
    consumers: dict[str, list[int]] = {}
    for i, ins in enumerate(table.uses):
        for name in ins:
            consumers.setdefault(name, []).append(i)
    parameter_like = set(parameter_names) | {t.name for t in model.graph.initializer}
    return _training_only(table, table.input_names, parameter_like, consumers)


def _training_only(table: GraphTable, graph_inputs: list[str], parameter_like: set[str],
                   consumers: dict[str, list[int]]) -> set[str]:
    """Tensors that only matter for training: label inputs, loss ops and all they feed.

    A label input is a graph input named like a label/target, or one whose every consumer is a
    loss op. Everything downstream of a label input or a loss op is training-only.
    """
    ops, outputs = table.ops, table.outputs
    seeds: set[str] = set()
    for op, outs in zip(ops, outputs):
        if op in LOSS_OPS or any("loss" in o.lower() for o in outs if o):
            seeds.update(o for o in outs if o)
    for name in graph_inputs:
        if name in parameter_like:
            continue
        users = consumers.get(name, [])
        if any(w in name.lower() for w in LABEL_WORDS) or (users and all(ops[u] in LOSS_OPS for u in users)):
            seeds.add(name)
    marked = set(seeds)
    queue = deque(seeds)
    while queue:
        for user in consumers.get(queue.popleft(), []):
            for out in outputs[user]:
                if out and out not in marked:
                    marked.add(out)
                    queue.append(out)
    return marked

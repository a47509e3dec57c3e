"""Export: eval/any model (+ parameters) -> a self-contained inference model.

What ONNX Runtime's `Module.export_model_for_inferencing` does, without the training package:
keep exactly the chosen outputs, prune what they do not need, drop inputs no longer used (labels),
turn parameter inputs into initializers from the checkpoint, put Dropout/BatchNorm in inference
form, keep IR version/opsets/functions/metadata, and record provenance. Then, unlike ORT, fold the
parameter-only sub-graphs (`fold=False` writes the graph as ORT would) and stream the weights to
disk without loading them. Tensors that If/Loop/Scan bodies read from outside count as used by
every pass (see `graph.uses`); nodes are written in topological order (a source listing them out
of order is reordered), and the writer refuses a model ORT would not load. `verify(path)` (e.g.
`export --validate`) sees the written model before it replaces anything; if it raises, nothing is.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import onnx

from onnxport.core import __version__
from onnxport.core.export.writer import PROTOBUF_LIMIT, check_destination, write_model
from onnxport.core.graph.const_tensors import ConstTensor, from_initializer, from_param
from onnxport.core.graph.eval_mode import to_inference_form
from onnxport.core.graph.fold import fold_constants
from onnxport.core.graph.graph_check import check_graph
from onnxport.core.graph.graph_table import plan_prune_table
from onnxport.core.graph.index import TensorIndex, infer_value_info
from onnxport.core.graph.passes import FOLDED, REMOVED, REWRITTEN
from onnxport.core.graph.prune import PrunePlan, plan_prune, prune
from onnxport.core.graph.runnable import topological_sort
from onnxport.core.io.external_data import inline_nested_external
from onnxport.core.io.model_io import add_light_initializers, copy_without_initializers, load_graph
from onnxport.core.io.parameter_set import ParameterSet
from onnxport.core.params.match import match_parameters
from onnxport.core.util.errors import OnnxportError
from onnxport.core.util.progress import CancelToken, ProgressFn, Reporter

EXTERNAL_DATA_CHOICES = ("auto", "always", "never")
AUTO_EXTERNAL_MARGIN = 64 << 20  # leave room for the graph itself under protobuf's 2 GiB


@dataclass
class ExportPlan:
    """What an export with these outputs keeps and drops (for the app's summary)."""

    outputs: list[str]
    inputs: list[str]
    dropped_inputs: list[str]
    kept_nodes: int
    dropped_nodes: int
    kept_parameters: list[str]
    dropped_parameters: list[str]
    estimated_bytes: int


@dataclass
class ExportResult:
    path: Path
    data_path: Path | None
    size_bytes: int
    outputs: list[str]
    inputs: list[str]
    nodes: int
    folded: int
    parameters: int
    seconds: float
    eval_mode_changes: list[str] = field(default_factory=list)
    skipped: str | None = None  # set when a distributed rank did not write

    def to_dict(self) -> dict:
        return {
            "path": str(self.path), "data_path": str(self.data_path) if self.data_path else None,
            "size_bytes": self.size_bytes, "outputs": self.outputs, "inputs": self.inputs,
            "nodes": self.nodes, "folded": self.folded, "parameters": self.parameters,
            "seconds": round(self.seconds, 3), "eval_mode_changes": self.eval_mode_changes,
        }


def plan_export(model: onnx.ModelProto, index: TensorIndex | None, params: ParameterSet | None,
                outputs: list[str], cancel: CancelToken | None = None) -> ExportPlan:
    """Cheap summary of an export (no weights touched). Given the model's `index`, planned on the
    graph as the index read it (`graph_table`: no protobuf walk, cancel checked as it goes)."""
    param_names = set(params) if params else set()
    table = index.table if index is not None else None
    if table is not None and table.matches(model.graph):
        plan = plan_prune_table(model, table, outputs, param_names, cancel)
    else:
        plan = plan_prune(model, outputs, param_names)
    if cancel is not None:
        cancel.check()
    kept = set(plan.initializers) | set(plan.parameter_inputs)
    all_params = [t.name for t in model.graph.initializer] + [
        vi.name for vi in model.graph.input if vi.name in param_names
    ]
    sizes = {}
    if index is not None:
        sizes = {n: index.tensors[n].nbytes or 0 for n in index.parameters if n in index.tensors}
    for name in kept:
        if params and name in params:
            sizes[name] = params[name].nbytes
    return ExportPlan(
        outputs=plan.outputs,
        inputs=plan.inputs,
        dropped_inputs=plan.dropped_inputs,
        kept_nodes=len(plan.node_indices),
        dropped_nodes=plan.dropped_nodes,
        kept_parameters=[n for n in all_params if n in kept],
        dropped_parameters=[n for n in all_params if n not in kept],
        estimated_bytes=sum(sizes.get(n, 0) for n in kept),
    )


def _provenance(model_path: Path | None, params: ParameterSet | None, outputs: list[str]) -> dict[str, str]:
    sources = []
    for path in ([model_path] if model_path else []) + (list(params.sources) if params else []):
        path = Path(path)
        size = path.stat().st_size if path.is_file() else sum(
            p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else None
        sources.append({"name": path.name, "bytes": size})
    return {
        "onnxport.version": __version__,
        "onnxport.sources": json.dumps(sources),
        "onnxport.outputs": json.dumps(outputs),
    }


def export_model(
    model_path: str | Path,
    out_path: str | Path,
    outputs: list[str],
    params: ParameterSet | None = None,
    *,
    external_data: str = "auto",
    fold: bool = True,
    model: onnx.ModelProto | None = None,
    progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
    verify: Callable[[Path], None] | None = None,
) -> ExportResult:
    """Write the inference model for `outputs` to `out_path`. See the module docstring."""
    started = time.perf_counter()
    if external_data not in EXTERNAL_DATA_CHOICES:
        raise OnnxportError(f"--external-data must be one of {', '.join(EXTERNAL_DATA_CHOICES)}")
    report = Reporter(progress, cancel)
    model_path = Path(model_path)
    out_path = Path(out_path)
    if out_path.resolve() == model_path.resolve():
        raise OnnxportError(f"{out_path}: the output would overwrite the source model; choose another name")
    check_destination(out_path)
    report.check()
    report(0.0, f"loading {model_path.name}")
    if model is None:
        model = load_graph(model_path)
    param_names: set[str] = set()
    if params is not None:
        match_parameters(model, params).raise_if_unusable()
        param_names = set(params)
    report.check()
    report(0.02, "pruning")
    check_graph(model.graph, str(model_path))  # a cycle or a tensor made twice: refuse before writing
    plan = plan_prune(model, outputs, param_names)
    skeleton = copy_without_initializers(model)  # the passes edit this copy; `model` stays as given
    prune(skeleton, plan)
    _type_outputs(skeleton, model, plan)  # outputs that were intermediate tensors
    inline_nested_external(skeleton, model_path.parent)  # sub-graph/attribute tensors: confined reads
    inference = to_inference_form(skeleton)
    topological_sort(skeleton.graph)  # a no-op unless the source lists nodes out of order
    report.check()

    consts: dict[str, ConstTensor] = {}
    initializers = {t.name: t for t in model.graph.initializer}
    for name in plan.initializers:
        if params is not None and name in params:
            consts[name] = from_param(name, params[name])  # trained value replaces the initial one
        else:
            consts[name] = from_initializer(initializers[name], model_path.parent)
    for name in plan.parameter_inputs:
        consts[name] = from_param(name, params[name])
    folded: list[str] = []
    if fold:
        folding = fold_constants(skeleton, consts)
        consts, folded = folding.constants, folding.names(FOLDED)
    _set_metadata(skeleton, _provenance(model_path, params, plan.outputs))

    estimated = sum(c.nbytes for c in consts.values()) + skeleton.ByteSize()
    use_external = external_data == "always" or (
        external_data == "auto" and estimated > PROTOBUF_LIMIT - AUTO_EXTERNAL_MARGIN
    )
    written = write_model(skeleton, list(consts.values()), out_path, external_data=use_external,
                          report=report.sub(0.05, 1.0), verify=verify)
    report.finished()
    return ExportResult(
        path=written.path,
        data_path=written.data_path,
        size_bytes=written.size_bytes + written.data_bytes,
        outputs=plan.outputs,
        inputs=plan.inputs,
        nodes=len(skeleton.graph.node),
        folded=len(folded),
        parameters=len(consts),
        seconds=time.perf_counter() - started,
        eval_mode_changes=inference.names(REMOVED, REWRITTEN),
    )


def _type_outputs(skeleton: onnx.ModelProto, model: onnx.ModelProto, plan: PrunePlan) -> None:
    """Give the pruned graph's untyped outputs their types, by shape inference of the pruned graph
    (an early exit of a 23k-node decoder infers ~3k nodes, not all of them) with its weights'
    headers (and the small ones whole: shape arguments) and the declarations of the parameter
    inputs a checkpoint fills."""
    untyped = [i for i, vi in enumerate(skeleton.graph.output) if not vi.HasField("type")]
    if not untyped:
        return
    light = onnx.ModelProto()
    light.CopyFrom(skeleton)  # weight-free: the pruned graph only
    needed = set(plan.initializers)
    add_light_initializers(light, (t for t in model.graph.initializer if t.name in needed))
    filled = set(plan.parameter_inputs)
    light.graph.input.extend(vi for vi in model.graph.input if vi.name in filled)
    infos = infer_value_info(light)
    for i in untyped:
        found = infos.get(skeleton.graph.output[i].name)
        if found is not None and found.HasField("type"):
            skeleton.graph.output[i].CopyFrom(found)


def _set_metadata(model: onnx.ModelProto, entries: dict[str, str]) -> None:
    kept = [p for p in model.metadata_props if p.key not in entries]
    del model.metadata_props[:]
    model.metadata_props.extend(kept)
    for key, value in entries.items():
        model.metadata_props.add(key=key, value=value)

"""Export: eval/any model (+ parameters) -> a self-contained inference model.

What ONNX Runtime's `Module.export_model_for_inferencing` does, without the training package:
keep exactly the chosen outputs, prune what they do not need, drop inputs no longer used (labels),
turn parameter inputs into initializers from the checkpoint, put Dropout/BatchNorm in inference
form, keep IR version/opsets/functions/metadata, and record provenance. Then, unlike ORT, fold the
parameter-only sub-graphs (without `ExportOptions.fold` the graph is written as ORT would) and
stream the weights to disk without loading them. Tensors that If/Loop/Scan bodies read from
outside count as used by every pass (see `graph.uses`); nodes are written in topological order (a
source listing them out of order is reordered), and the writer refuses a model ORT would not load.
`ExportOptions.verify(path)` (e.g. `export --validate`) sees the written model before it replaces
anything; if it raises, nothing is.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import onnx

from onnxport.core import __version__
from onnxport.core.export.early_copy import EarlyCopy, surely_kept
from onnxport.core.export.inference_graph import InferenceGraph, written_bytes
from onnxport.core.export.options import EXTERNAL_DATA_CHOICES, ExportOptions
from onnxport.core.export.output_types import complete_output_types
from onnxport.core.export.selection_graph import SelectionGraphs
from onnxport.core.export.writer import PROTOBUF_LIMIT, check_destination, write_model
from onnxport.core.graph.fixed_outputs import fixed_outputs
from onnxport.core.graph.graph_check import check_graph
from onnxport.core.graph.index import TensorIndex
from onnxport.core.graph.passes import REMOVED, REWRITTEN
from onnxport.core.graph.prune import PrunePlan
from onnxport.core.graph.rename_ends import rename_ends
from onnxport.core.io.model_io import load_graph, tensor_nbytes
from onnxport.core.io.parameter_set import ParameterSet
from onnxport.core.io.run_reads import model_reads, param_reads
from onnxport.core.params.match import match_parameters
from onnxport.core.util.atomic import AtomicWrite
from onnxport.core.util.errors import OnnxportError
from onnxport.core.util.out_paths import check_output
from onnxport.core.util.progress import CancelToken, ProgressFn, Reporter

AUTO_EXTERNAL_MARGIN = 64 << 20  # leave room for the graph itself under protobuf's 2 GiB


@dataclass
class ExportPlan:
    """What an export with these outputs keeps and drops (for the app's summary): `kept_nodes` is
    the written model's node count (after eval-mode and folding)."""

    outputs: list[str]
    inputs: list[str]
    dropped_inputs: list[str]
    kept_nodes: int
    dropped_nodes: int
    kept_parameters: list[str]
    dropped_parameters: list[str]
    estimated_bytes: int  # the written model's size (with `exact`), else its parameters' bytes
    folded_nodes: int = 0  # nodes folding computes (not counted in kept_nodes)
    eval_mode_changes: int = 0  # Dropout/BatchNorm nodes put in inference form
    exact: bool = True  # False: the passes were skipped on a huge graph; the numbers are an estimate
    new_inputs: list[str] = field(default_factory=list)  # tensors the graph is cut at (graph inputs now)


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
    fixed_outputs: dict[str, str] = field(default_factory=dict)  # outputs no input changes: why (graph.fixed_outputs)
    partial: dict | None = None  # a partial embed: the weights that stayed as they were, the entries unused
    new_inputs: list[str] = field(default_factory=list)  # tensors the graph was cut at (`inputs` lists them first)
    kept_inputs: list[str] = field(default_factory=list)  # with new inputs: the source's inputs still needed

    def partial_line(self) -> str | None:
        """The line a front end says after a partial embed, or None."""
        if not self.partial:
            return None
        stayed, unused = self.partial["stayed"], self.partial["unused"]
        return (f"partial embed: {len(stayed)} model weights kept their own values ({', '.join(stayed)}); "
                f"{len(unused)} checkpoint entries not used ({', '.join(unused)})")

    def to_dict(self) -> dict:
        return {
            "path": str(self.path), "data_path": str(self.data_path) if self.data_path else None,
            "size_bytes": self.size_bytes, "outputs": self.outputs, "inputs": self.inputs,
            "nodes": self.nodes, "folded": self.folded, "parameters": self.parameters,
            "seconds": round(self.seconds, 3), "eval_mode_changes": self.eval_mode_changes,
            "fixed_outputs": self.fixed_outputs,
        } | ({"partial": self.partial} if self.partial else {}) | (
            {"new_inputs": self.new_inputs, "kept_inputs": self.kept_inputs} if self.new_inputs else {})

    def cut_line(self) -> str | None:
        """What a front end says of an export cut at new inputs, or None."""
        if not self.new_inputs:
            return None
        kept = f"; the source's inputs {', '.join(self.kept_inputs)} are still needed and stay" if self.kept_inputs else ""
        return f"new inputs {', '.join(self.new_inputs)}{kept}"


PLAN_EXACT_MAX_NODES = 20_000  # above this the plan skips the passes and says "estimate"


def plan_export(graphs: SelectionGraphs, index: TensorIndex | None, outputs: list[str],
                cancel: CancelToken | None = None, starts: list[str] | tuple[str, ...] = ()) -> ExportPlan:
    """What the export of `outputs` writes: the nodes and size of the model after pruning,
    eval-mode and folding, counted on the selection's inference graph (`graphs.get`: the graph the
    preview draws and the export writes), so the plan matches the written model. Planned by
    `graphs.plan` (the one planner, on the graph's table: cancel checked as it goes). Above
    PLAN_EXACT_MAX_NODES kept nodes the passes are not run for a summary: the counts are the
    pruned graph's and the size its parameters' bytes (`exact` False). `index`: the model's
    index, for the parameters' sizes in that estimate. `starts`: the tensors the graph is cut at."""
    model, params = graphs.model, graphs.params
    param_names = set(params) if params else set()
    plan = graphs.plan(outputs, cancel, starts)
    report = Reporter(None, cancel)
    report.check()
    kept = set(plan.initializers) | set(plan.parameter_inputs)
    all_params = [t.name for t in model.graph.initializer] + [
        vi.name for vi in model.graph.input if vi.name in param_names
    ]
    result = ExportPlan(
        outputs=plan.outputs, inputs=plan.inputs, dropped_inputs=plan.dropped_inputs,
        kept_nodes=len(plan.node_indices), dropped_nodes=plan.dropped_nodes,
        kept_parameters=[n for n in all_params if n in kept],
        dropped_parameters=[n for n in all_params if n not in kept],
        estimated_bytes=_parameter_bytes(index, params, kept), exact=False, new_inputs=plan.cut_inputs,
    )
    if len(plan.node_indices) > PLAN_EXACT_MAX_NODES:
        return result
    built = graphs.get(outputs, cancel, starts).built
    result.kept_nodes = len(built.skeleton.graph.node)
    result.folded_nodes = len(built.folded)
    result.eval_mode_changes = len(built.inference.changes)
    provenance = _provenance(graphs.model_path, params, plan.outputs)
    result.estimated_bytes = written_bytes(built.skeleton, list(built.consts.values()),
                                           lambda head: _set_metadata(head, provenance))
    result.exact = True
    return result


def _parameter_bytes(index: TensorIndex | None, params: ParameterSet | None, kept: set[str]) -> int:
    sizes = {}
    if index is not None:
        sizes = {n: index.tensors[n].nbytes or 0 for n in index.parameters if n in index.tensors}
    for name in kept:
        if params and name in params:
            sizes[name] = params[name].nbytes
    return sum(sizes.get(n, 0) for n in kept)


def _provenance(model_path: Path | None, params: ParameterSet | None, outputs: list[str],
                partial: dict | None = None, starts: list[str] | None = None) -> dict[str, str]:
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
    } | ({"onnxport.partial": json.dumps(partial)} if partial else {}) | (
        {"onnxport.starts": json.dumps(starts)} if starts else {})


def export_model(
    model_path: str | Path,
    out_path: str | Path,
    outputs: list[str],
    params: ParameterSet | None = None,
    options: ExportOptions | None = None,
    *,
    progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
) -> ExportResult:
    """Write the inference model for `outputs` of the file at `model_path` (+ `params`, which must
    fit it) to `out_path`: the file as it is on disk, for a caller that holds no session
    (`workflow.session` opens one per model and calls `export_selection`)."""
    check_destination(Path(out_path))
    check_output(Path(out_path), {**model_reads(Path(model_path), None), **param_reads(params)})
    model = load_graph(model_path)
    if params is not None:
        match_parameters(model, params).raise_if_unusable()
    return export_selection(SelectionGraphs(model, model_path, params), outputs, out_path, options,
                            progress=progress, cancel=cancel)


def export_selection(
    graphs: SelectionGraphs,
    outputs: list[str],
    out_path: str | Path,
    options: ExportOptions | None = None,
    *,
    starts: list[str] | tuple[str, ...] = (),
    partial: dict | None = None,
    progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
) -> ExportResult:
    """Write the inference model for `outputs` of the model `graphs` holds (its graph, path and
    parameters, whose fit the caller checked) to `out_path`, cut at `starts` (tensors made its
    first inputs). See the module docstring and `ExportOptions`; `partial`: what a partial embed the user allowed left as it was (recorded in
    the metadata). An output whose type stays unknown (inferred, known or run) is refused
    (`export.output_types`): ONNX requires one."""
    started = time.perf_counter()
    options = options if options is not None else ExportOptions()
    if options.external_data not in EXTERNAL_DATA_CHOICES:
        raise OnnxportError(f"--external-data must be one of {', '.join(EXTERNAL_DATA_CHOICES)}")
    model, model_path, params = graphs.model, graphs.model_path, graphs.params
    report = Reporter(progress, cancel)
    out_path = Path(out_path)
    check_destination(out_path)
    check_output(out_path, {**model_reads(model_path, model), **param_reads(params)})
    report.check()
    report(0.02, "pruning")
    plan = graphs.plan(outputs, report.token, starts)
    _check_renamed_ends(plan, dict(options.renames))
    with AtomicWrite(out_path) as tx:
        # the weights surely kept are copied into the data file while the passes below run
        early = _start_early_copy(tx, model, model_path, plan, params, options.external_data, options.fold)
        try:
            # a cycle or a tensor made twice: refused before anything is put in place (the copy
            # started above only fills a temp file, removed with the rest)
            check_graph(model.graph, str(model_path))
            built = graphs.for_export(outputs, options.fold, report.check, starts)
            written = _write(built, graphs, out_path, options, partial, report, tx, early)
        finally:
            if early is not None:
                early.close()
    report.finished()
    skeleton, named = built.skeleton, dict(options.renames)
    new_inputs = [named.get(n, n) for n in plan.cut_inputs]
    kept_inputs = [named.get(n, n) for n in plan.inputs]
    return ExportResult(
        path=written.path, data_path=written.data_path, size_bytes=written.size_bytes + written.data_bytes,
        outputs=[named.get(n, n) for n in plan.outputs], inputs=new_inputs + kept_inputs,
        nodes=len(skeleton.graph.node), folded=len(built.folded), parameters=len(built.consts),
        seconds=time.perf_counter() - started, eval_mode_changes=built.inference.names(REMOVED, REWRITTEN),
        fixed_outputs=fixed_outputs(skeleton.graph), partial=partial, new_inputs=new_inputs,
        kept_inputs=kept_inputs if new_inputs else [],
    )


def _write(built: InferenceGraph, graphs: SelectionGraphs, out_path: Path, options: ExportOptions,
           partial: dict | None, report: Reporter, tx: AtomicWrite, early: EarlyCopy | None):
    """Type the outputs, record provenance and write `built` (inside the export's transaction)."""
    model, model_path, params, run_types = graphs.model, graphs.model_path, graphs.params, options.run_types
    skeleton, consts = built.skeleton, built.consts
    complete_output_types(skeleton.graph, str(out_path), None if run_types is None else (
        lambda names: run_types(model_path, model, names, params, report.token)), model.graph.output,
        built.plan.cut_inputs)
    rename_ends(skeleton, dict(options.renames))
    _set_metadata(skeleton, _provenance(model_path, params, built.plan.outputs, partial, built.plan.cut_inputs))
    estimated = sum(c.nbytes for c in consts.values()) + skeleton.ByteSize()
    return write_model(skeleton, list(consts.values()), out_path,
                       external_data=_external(options.external_data, estimated),
                       report=report.sub(0.05, 1.0), verify=options.verify, tx=tx, early=early)


def _check_renamed_ends(plan: PrunePlan, renames: dict[str, str]) -> None:
    """Before any work: every name renamed is an input or output of the export (`rename_ends`
    checks the rest on the written graph)."""
    ends = [*plan.cut_inputs, *plan.inputs, *plan.outputs]
    for old, new in renames.items():
        if old not in ends:
            raise OnnxportError(f"--rename {old}={new}: '{old}' is not an input or output of the export",
                                hint=f"its inputs and outputs: {', '.join(ends)[:200]}")


def _external(choice: str, estimated_bytes: int) -> bool:
    """Whether the weights go to a data file: `always`, or `auto` near protobuf's 2 GiB limit."""
    return choice == "always" or (choice == "auto" and estimated_bytes > PROTOBUF_LIMIT - AUTO_EXTERNAL_MARGIN)


def _start_early_copy(tx: AtomicWrite, model: onnx.ModelProto, model_path: Path, plan: PrunePlan,
                      params: ParameterSet | None, external_data: str, fold: bool) -> EarlyCopy | None:
    """An `EarlyCopy` of the weights the export surely keeps, when they go to a data file."""
    if external_data == "never":
        return None
    kept = {t.name: t for t in model.graph.initializer}
    declared = sum(tensor_nbytes(kept[n]) for n in plan.initializers if n in kept)
    declared += sum(params[n].nbytes for n in plan.parameter_inputs) if params is not None else 0
    if not _external(external_data, declared):
        return None
    spans = surely_kept(model, plan, params, model_path.parent, fold)
    if not spans:
        return None
    fd, path = tx.new_file()
    return EarlyCopy(fd, path, spans)


def _set_metadata(model: onnx.ModelProto, entries: dict[str, str]) -> None:
    kept = [p for p in model.metadata_props if p.key not in entries]
    del model.metadata_props[:]
    model.metadata_props.extend(kept)
    for key, value in entries.items():
        model.metadata_props.add(key=key, value=value)

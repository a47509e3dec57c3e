"""One export job, for the CLI's `export` and the app's Export: export -> validate -> quantize.

Contract: `run_export(sources, request, executor, progress, cancel)` exports `request.outputs` of
`sources` (what an open computed once: model, index or table, aligned parameters, their match;
`sources_for` makes them from paths), validates the written model before it is put in place,
then quantizes, benchmarks and writes the report (`post_export`), deploys if asked, on one
monotonic bar (`export_steps`). Nothing is read, aligned or matched again in this process. The
front ends pick only the `Executor` (`IN_PROCESS`, or `IN_CHILD`: validation and quantization in
a child process, handed the parameter files' paths) and how progress shows. A failed step after
the export raises `PostExportFailed` naming what stays written; a non-zero rank of a distributed
job writes nothing (`ExportOutcome.export.skipped` says why).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from onnxport.core.evaluate.report import build_report
from onnxport.core.evaluate.run_types import types_by_run
from onnxport.core.export.export import ExportResult, export_model
from onnxport.core.export.export_options import ExportOptions
from onnxport.core.graph.graph_table import GraphTable, plan_prune_on
from onnxport.core.graph.prune import PrunePlan
from onnxport.core.io.model_io import load_graph
from onnxport.core.params.checkpoint_fit import require_filled, require_fit, unfilled_inputs
from onnxport.core.params.match import match_parameters
from onnxport.core.params.name_alignment import align_if_better
from onnxport.core.quantize.options import QuantizeOptions
from onnxport.core.util.child_call import call_in_child
from onnxport.core.util.distributed import skip_reason
from onnxport.core.util.errors import Cancelled, OnnxportError
from onnxport.core.util.progress import CancelToken, ProgressFn, Steps
from onnxport.core.workflow.child_steps import gate_validation
from onnxport.core.workflow.export_steps import export_steps, post_steps
from onnxport.core.workflow.post_export import PostExportResult, post_export, read_checkpoints
from onnxport.core.workflow.sources import LoadedSources


@dataclass
class ExportRequest:
    """What to write: the outputs, where, and the steps after the export."""

    outputs: list[str]
    out_path: Path
    external_data: str = "auto"
    fold: bool = True
    validate: bool = False
    quantize: str | None = None  # dynamic, static, fp16, int4
    calibration: str | Path | None = None  # for static quantization
    quantize_options: QuantizeOptions | None = None  # the quantization's other choices (the app's dialog)
    all_ranks: bool = False  # write on every rank of a distributed job
    dim_sizes: dict[str, int] | None = None  # sizes of generated inputs (validation, quantization)
    shapes: dict[str, tuple[int, ...]] | None = None
    deploy: Callable[[Path], Any] | None = None  # deploys the final model (the quantized one, if any)
    exported: Callable[[ExportResult], None] | None = None  # told of the export before the steps after it
    verify: Callable[[Path], None] | None = None  # checks the written model before it is put in place
    allow_partial: bool = False  # embed a checkpoint that fits only partly (`params.checkpoint_fit`)
    keep_parameter_inputs: bool = False  # export parameter-like inputs without values as inputs


@dataclass
class ExportOutcome:
    export: ExportResult
    post: PostExportResult | None = None  # when validating or quantizing
    deployed: Any = None  # what `request.deploy` returned


@dataclass(frozen=True)
class Executor:
    """Where validation and quantization run: here, or in a child process (util/child_call.py:
    they hold the GIL for seconds on a big model, which would freeze the app's window)."""

    in_process: bool

    def __call__(self, fn: Callable, *args, progress: ProgressFn | None = None, cancel: CancelToken | None = None,
                 **kwargs) -> Any:
        if self.in_process:
            return fn(*args, progress=progress, cancel=cancel, **kwargs)
        return call_in_child(fn, *args, progress=progress, cancel=cancel, **kwargs)


IN_PROCESS = Executor(in_process=True)
IN_CHILD = Executor(in_process=False)


class PostExportFailed(OnnxportError):
    """A step after the export (quantization, say) failed; the float model is written: `written`
    is the (ExportResult, PostExportResult) to show as the export, its validation included."""

    def __init__(self, exc: OnnxportError, written: tuple) -> None:
        super().__init__(str(exc), hint=getattr(exc, "hint", None))
        self.written = written


def sources_for(model_path: str | Path, checkpoints: Sequence[str | Path] | None = None, *, model=None
                ) -> LoadedSources:
    """`model_path` + `checkpoints` (merged) as an open makes them, without an index: the
    parameters read and fitted to the graph's names once, and their match. `model`: the graph
    when the caller loaded it already (the CLI's review)."""
    model = model if model is not None else load_graph(model_path)
    params = read_checkpoints(list(checkpoints or []))
    sources = LoadedSources(model_path=Path(model_path), model=model, params=params,
                            param_paths=[Path(p) for p in checkpoints or []])
    if params is not None:
        sources.params, sources.alignment = align_if_better(model, params)
        sources.match = (sources.alignment.match if sources.alignment is not None
                         else match_parameters(model, sources.params))
    return sources


class _Gate:
    """The export's `verify`: `post_export.ValidationGate` run by the executor (see child_steps)."""

    def __init__(self, sources: LoadedSources, request: ExportRequest, executor: Executor, progress, cancel) -> None:
        self.sources, self.request, self.executor = sources, request, executor
        self.progress, self.cancel = progress, cancel
        self.report = None

    def __call__(self, staged: Path) -> None:
        sources = self.sources  # a child cannot take the open parameters: it reads their files
        reference = sources.params if self.executor.in_process else sources.param_paths
        self.report = self.executor(gate_validation, staged, self.request.out_path, sources.model_path, reference,
                                    progress=self.progress, cancel=self.cancel, dim_sizes=self.request.dim_sizes,
                                    shapes=self.request.shapes)


def _checks(*checks: Callable[[Path], None] | None) -> Callable[[Path], None] | None:
    """One `verify` running each of `checks` given, in order."""
    given = [c for c in checks if c is not None]
    if len(given) <= 1:
        return given[0] if given else None

    def verify(staged: Path) -> None:
        for check in given:
            check(staged)

    return verify


def run_export(sources: LoadedSources | None, request: ExportRequest, executor: Executor = IN_PROCESS,
               progress: ProgressFn | None = None, cancel: CancelToken | None = None, *,
               table: GraphTable | None = None, plan: PrunePlan | None = None) -> ExportOutcome:
    """See the module docstring. `table`: the model's GraphTable when `sources` has no index;
    `plan`: the prune plan of `request.outputs` on `sources` when the front end made it (the CLI's
    review); `sources` may be None on a rank that writes nothing (see `skip_reason`)."""
    reason = skip_reason(request.all_ranks)
    if reason is not None:
        return ExportOutcome(ExportResult(Path(request.out_path), None, 0, list(request.outputs), [], 0, 0, 0, 0.0,
                                          skipped=reason))
    if sources is None:
        raise OnnxportError("no model is open")
    steps = Steps(progress, export_steps(request.validate, request.quantize), cancel)
    partial = _checked_fit(sources, request)
    index = sources.index
    gate = _Gate(sources, request, executor, steps.step("validating"), cancel) if request.validate else None
    # an opened (indexed) model: the selection's inference graph, as planned and previewed
    built = sources.selection_graphs().get(request.outputs, cancel).built if index is not None and request.fold \
        else None
    options = ExportOptions(external_data=request.external_data, fold=request.fold,
                            verify=_checks(gate, request.verify), run_types=types_by_run, model=sources.model,
                            table=index.table if index is not None else table,
                            known_types=index.tensor_type if index is not None else None, built=built, plan=plan,
                            match=sources.match, partial=partial)
    if built is None and plan is None:
        plan = plan_prune_on(sources.model, options.table, request.outputs, set(sources.params or ()), cancel)
        options = replace(options, plan=plan)
    kept = (built.plan if built is not None else plan).inputs
    require_filled(unfilled_inputs(kept, sources.params, {t.name for t in sources.model.graph.initializer}),
                   request.keep_parameter_inputs, str(sources.model_path), _beside(sources.model_path))
    result = export_model(sources.model_path, request.out_path, request.outputs, sources.params, options,
                          progress=steps.begin("exporting"), cancel=cancel)
    outcome = ExportOutcome(result)
    if request.exported is not None:
        request.exported(result)
    if request.validate or request.quantize:
        validated = gate.report if gate is not None else None
        try:  # validated by the gate: the post steps read no parameters
            outcome.post = executor(post_export, result, sources.model_path, sources.param_paths,
                                    quantize=request.quantize, calibration=request.calibration,
                                    quantize_options=request.quantize_options,
                                    validate=request.validate, validated=validated, dim_sizes=request.dim_sizes,
                                    shapes=request.shapes, progress=steps.span(post_steps(False, request.quantize)),
                                    cancel=cancel)
        except Cancelled:
            raise
        except OnnxportError as exc:  # the float model stays written (and validated): said with the failure
            raise PostExportFailed(exc, (result, written_only(result, validated))) from exc
    if request.deploy is not None:
        quantized = outcome.post.report.get("quantize", {}).get("path") if outcome.post and request.quantize else None
        outcome.deployed = request.deploy(Path(quantized or result.path))
    steps.finished()
    return outcome


def _checked_fit(sources: LoadedSources, request: ExportRequest) -> dict | None:
    """The checkpoint policy (`params.checkpoint_fit`) on `sources`: raises its refusal, or returns
    what a partial embed the user allowed leaves as it was (None: the checkpoint fits whole)."""
    fit = sources.fit()
    if fit is None:
        return None
    names = ", ".join(str(p) for p in sources.param_paths) or "the checkpoint"
    require_fit(fit, sources.match, request.allow_partial, names)
    return fit.to_dict() if fit.partial else None


def _beside(model_path: Path) -> str | None:
    beside = Path(model_path).parent / "checkpoint"
    return str(beside) if beside.exists() else None


def written_only(result: ExportResult, validation) -> PostExportResult:
    """The export alone (with the validation its gate ran), as `post_export` would report it."""
    report = build_report(export=result.to_dict(), validation=validation)
    return PostExportResult(validation, None, None, report, None, [])

"""One export job, for the CLI's `export`, the API and the app's Export: export -> validate -> quantize.

Contract: `run_export(session, request, executor, progress, cancel)` holds the checkpoint policy
(`params.checkpoint_fit`), exports `request.outputs` of the opened model (`session.ModelSession`:
its plan and inference graph per selection, kept there), validates the written model before it is
put in place, then quantizes, benchmarks and writes the report (`post_export`), deploys if asked,
on one monotonic bar (`export_steps`). Nothing is read, aligned or matched again in this process.
`export_files` is the CLI's and the API's way in (paths, a distributed job's ranks). The
front ends pick only the `Executor` (`IN_PROCESS`, or `IN_CHILD`: validation and quantization in
a child process, handed the parameter files' paths) and how progress shows. A failed step after
the export raises `PostExportFailed` naming what stays written; a non-zero rank of a distributed
job writes nothing (`ExportOutcome.export.skipped` says why).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import onnx

from onnxport.core.evaluate.report import build_report
from onnxport.core.evaluate.run_types import types_by_run
from onnxport.core.export.export import ExportResult, export_selection
from onnxport.core.export.options import ExportOptions
from onnxport.core.params.checkpoint_fit import require_filled, require_fit
from onnxport.core.quantize.options import QuantizeOptions
from onnxport.core.util.child_call import call_in_child
from onnxport.core.util.distributed import skip_reason
from onnxport.core.util.errors import Cancelled, OnnxportError
from onnxport.core.util.progress import CancelToken, ProgressFn, Steps
from onnxport.core.workflow.child_steps import gate_validation
from onnxport.core.workflow.export_steps import export_steps, post_steps
from onnxport.core.workflow.post_export import PostExportResult, post_export
from onnxport.core.workflow.review import ExportReview, review_export
from onnxport.core.workflow.session import ModelSession
from onnxport.core.workflow.sources import open_session


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
    starts: list[str] = field(default_factory=list)  # intermediate tensors made the inputs (cut there)
    renames: dict[str, str] = field(default_factory=dict)  # new names of inputs and outputs


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
        super().__init__(str(exc), hint=getattr(exc, "hint", None), option=getattr(exc, "option", None))
        self.written = written


class _Gate:
    """The export's `verify`: `post_export.ValidationGate` run by the executor (see child_steps)."""

    def __init__(self, session: ModelSession, request: ExportRequest, executor: Executor, progress, cancel) -> None:
        self.session, self.request, self.executor = session, request, executor
        self.progress, self.cancel = progress, cancel
        self.report = None

    def __call__(self, staged: Path) -> None:
        session = self.session  # a child cannot take the open parameters: it reads their files
        reference = session.params if self.executor.in_process else list(session.param_paths)
        self.report = self.executor(gate_validation, staged, self.request.out_path, session.model_path, reference,
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


def export_files(model_path: str | Path, checkpoints: Sequence[str | Path], request: ExportRequest,
                 progress: ProgressFn | None = None, cancel: CancelToken | None = None, *,
                 model: onnx.ModelProto | None = None,
                 reviewed: Callable[[ExportReview], None] | None = None) -> ExportOutcome:
    """The CLI's and the API's export: in a distributed job a rank that writes nothing reads
    nothing (`skip_reason`, checked here only); else the session of `model_path` + `checkpoints`
    (`model`: its graph, when the caller loaded it), the review of `request.outputs` (none: the
    suggested ones; `reviewed` is told), then `run_export` in this process."""
    reason = skip_reason(request.all_ranks)
    if reason is not None:
        return ExportOutcome(ExportResult(Path(request.out_path), None, 0, list(request.outputs), [], 0, 0, 0, 0.0,
                                          skipped=reason))
    session = open_session(model_path, checkpoints, model=model)
    review = review_export(session, request.outputs)
    if reviewed is not None:
        reviewed(review)
    return run_export(session, replace(request, outputs=review.outputs), IN_PROCESS, progress, cancel)


def run_export(session: ModelSession, request: ExportRequest, executor: Executor = IN_PROCESS,
               progress: ProgressFn | None = None, cancel: CancelToken | None = None) -> ExportOutcome:
    """See the module docstring."""
    steps = Steps(progress, export_steps(request.validate, request.quantize), cancel)
    if request.validate and (request.starts or request.renames):
        raise OnnxportError("--validate cannot check a model cut at new inputs or with renamed ends yet "
                            "(its reference has neither)", hint="export without --validate, then run it")
    partial = _checked_fit(session, request)
    plan = session.plan(request.outputs, cancel, request.starts)
    require_filled(session.unfilled(plan.inputs), request.keep_parameter_inputs, str(session.model_path),
                   _beside(session.model_path))
    gate = _Gate(session, request, executor, steps.step("validating"), cancel) if request.validate else None
    options = ExportOptions(external_data=request.external_data, fold=request.fold,
                            verify=_checks(gate, request.verify), run_types=types_by_run,
                            renames=tuple(request.renames.items()))
    result = export_selection(session.selections, request.outputs, request.out_path, options, partial=partial,
                              starts=request.starts, progress=steps.begin("exporting"), cancel=cancel)
    outcome = ExportOutcome(result)
    if request.exported is not None:
        request.exported(result)
    if request.validate or request.quantize:
        outcome.post = _post_export(session, request, executor, result, gate, steps, cancel)
    if request.deploy is not None:
        quantized = outcome.post.report.get("quantize", {}).get("path") if outcome.post and request.quantize else None
        outcome.deployed = request.deploy(Path(quantized or result.path))
    steps.finished()
    return outcome


def _post_export(session: ModelSession, request: ExportRequest, executor: Executor, result: ExportResult,
                 gate: _Gate | None, steps: Steps, cancel: CancelToken | None) -> PostExportResult:
    """Quantize, benchmark and report (`post_export`) by `executor`; the gate validated already,
    so the post steps read no parameters. A failure keeps the float model: `PostExportFailed`."""
    validated = gate.report if gate is not None else None
    try:
        return executor(post_export, result, session.model_path, list(session.param_paths),
                        quantize=request.quantize, calibration=request.calibration,
                        quantize_options=request.quantize_options,
                        validate=request.validate, validated=validated, dim_sizes=request.dim_sizes,
                        shapes=request.shapes, progress=steps.span(post_steps(False, request.quantize)),
                        cancel=cancel)
    except Cancelled:
        raise
    except OnnxportError as exc:  # the float model stays written (and validated): said with the failure
        raise PostExportFailed(exc, (result, written_only(result, validated))) from exc


def _checked_fit(session: ModelSession, request: ExportRequest) -> dict | None:
    """The checkpoint policy (`params.checkpoint_fit`) on `session`: raises its refusal, or returns
    what a partial embed the user allowed leaves as it was (None: the checkpoint fits whole)."""
    fit = session.fit
    if fit is None:
        return None
    names = ", ".join(str(p) for p in session.param_paths) or "the checkpoint"
    require_fit(fit, session.match, request.allow_partial, names)
    return fit.to_dict() if fit.partial else None


def _beside(model_path: Path) -> str | None:
    beside = Path(model_path).parent / "checkpoint"
    return str(beside) if beside.exists() else None


def written_only(result: ExportResult, validation) -> PostExportResult:
    """The export alone (with the validation its gate ran), as `post_export` would report it."""
    report = build_report(export=result.to_dict(), validation=validation)
    return PostExportResult(validation, None, None, report, None, [])

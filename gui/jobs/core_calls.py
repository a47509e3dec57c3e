"""The core calls the window runs as jobs, as plain `fn(progress, cancel)` closures (Qt-free).

Keeping them apart from the window keeps main_window.py about widgets, and lets tests and the
GUI benchmark run exactly what the window runs (tests replace one through this module).
"""

from __future__ import annotations

from pathlib import Path

from onnxport.core.evaluate.report import build_report
from onnxport.core.evaluate.run_types import types_by_run
from onnxport.core.export.export import ExportResult, export_model, plan_export
from onnxport.core.graph.index_types import fill_types, wait_types
from onnxport.core.util.child_call import call_in_child
from onnxport.core.util.errors import Cancelled, OnnxportError
from onnxport.core.util.progress import Steps
from onnxport.core.util.written_files import WrittenFiles, stopped_line
from onnxport.core.workflow.export_steps import export_steps, post_steps
from onnxport.core.workflow.sources import LoadedSources, open_sources

from ..widgets.outputs_tree import build_tree
from .quiet_gc import quiet_gc


def open_job(paths: list[Path]):
    """Open sources and build the outputs tree, both off the GUI thread: returns (LoadedSources, Tree).
    A big graph's shapes may still be inferred when it returns (`index.pending_types`: `types_job`)."""

    def run(progress, cancel):
        with quiet_gc():
            loaded = open_sources(paths, progress, cancel, wait_types=False)
            tree = build_tree(loaded.index) if loaded.index is not None else None
        return loaded, tree

    return run


def types_wait_job(index):
    """Wait for the child inferring the shapes the open did not wait for (graph.index_types)."""

    def run(progress, cancel):
        wait_types(index, cancel)

    return run


def types_job(index):
    """Fill the shapes the open did not wait for (graph.index_types); returns how many changed."""

    def run(progress, cancel):
        return fill_types(index, cancel)

    return run


def filter_job(index, text: str, outputs_only: bool):
    def run(progress, cancel):  # a side job: the runner runs it under quiet_gc
        return build_tree(index, text, outputs_only)

    return run


def plan_job(sources: LoadedSources, outputs: list[str]):
    def run(progress, cancel):
        built = sources.selection_graphs().get(outputs, cancel).built  # the graph the preview draws
        return plan_export(sources.model, sources.index, sources.params, outputs, cancel=cancel,
                           model_path=sources.model_path, built=built)

    return run


def export_job(sources: LoadedSources, outputs: list[str], choices):
    """Export, then (if asked) validate/quantize/benchmark: returns (ExportResult, PostExportResult or None).
    The export streams in this worker; validation and quantization run in a child process
    (core/util/child_call.py: they hold the GIL for seconds on a big model). A cancel names what
    stayed written (the float model, once the quantization is under way), as the CLI does."""
    post_needed = choices.validate or choices.quantize
    post_names = post_steps(False, choices.quantize)  # validation runs in the export (its gate)

    def run(progress, cancel):
        watcher = WrittenFiles(choices.path)
        try:
            return export_and_post(progress, cancel)
        except Cancelled:
            raise Cancelled(stopped_line("cancelled", watcher)) from None

    def export_and_post(progress, cancel):
        steps = Steps(progress, export_steps(choices.validate, choices.quantize), cancel)
        if sources.match is not None:
            sources.match.raise_if_unusable()
        gate = ChildGate(choices.path, sources, steps.step("validating"), cancel) if choices.validate else None
        # the graph as opened (the export reads it, never changes it): no second load and plan
        result = export_model(sources.model_path, choices.path, outputs, sources.params,
                              external_data=choices.external_data, model=sources.model,
                              table=sources.index.table if sources.index is not None else None,
                              known_types=sources.index.tensor_type if sources.index is not None else None,
                              run_types=types_by_run, progress=steps.begin("exporting"), cancel=cancel, verify=gate,
                              built=sources.selection_graphs().get(outputs, cancel).built)  # as planned and previewed
        post = None
        if post_needed:
            from onnxport.core.workflow.child_steps import post_export_step

            validated = gate.report if gate is not None else None
            try:
                post = call_in_child(post_export_step, result, sources.model_path, sources.param_paths,
                                     quantize=choices.quantize, validate=choices.validate,
                                     progress=steps.span(post_names), cancel=cancel, validated=validated)
            except Cancelled:
                raise
            except OnnxportError as exc:  # the float model stays written (and validated): said with the failure
                raise PostExportFailed(exc, (result, written_only(result, validated))) from exc
        steps.finished()
        return result, post

    return run


class ChildGate:
    """`post_export.ValidationGate`, run in a child process (the export's `verify`)."""

    def __init__(self, out_path: Path, sources: LoadedSources, progress, cancel) -> None:
        self.out_path, self.sources, self.progress, self.cancel = out_path, sources, progress, cancel
        self.report = None

    def __call__(self, staged: Path) -> None:
        from onnxport.core.workflow.child_steps import gate_validation

        self.report = call_in_child(gate_validation, staged, self.out_path, self.sources.model_path,
                                    self.sources.param_paths, progress=self.progress, cancel=self.cancel)


def validate_job(sources: LoadedSources, exported: Path):
    def run(progress, cancel):
        from onnxport.core.workflow.child_steps import validate_export

        return call_in_child(validate_export, exported, sources.model_path, sources.param_paths,
                             progress=progress, cancel=cancel)

    return run


class PostExportFailed(OnnxportError):
    """A step after the export (quantization, say) failed; the float model is written: `written`
    is the (ExportResult, PostExportResult) to show as the export, its validation included."""

    def __init__(self, exc: OnnxportError, written: tuple) -> None:
        super().__init__(str(exc), hint=getattr(exc, "hint", None))
        self.written = written


def written_only(result: ExportResult, validation):
    """The export alone (with the validation its gate ran), as `post_export` would report it."""
    from onnxport.core.workflow.post_export import PostExportResult

    report = build_report(export=result.to_dict(), validation=validation)
    return PostExportResult(validation, None, None, report, None, [])


def export_only_report(result: ExportResult) -> dict:
    return build_report(export=result.to_dict())


def requantize_job(quantized: Path, reference: Path, exclude_more: list[str]):
    """Quantize `reference` again as `quantized` was, also keeping `exclude_more` in float; the
    new model replaces `quantized` (atomically). Returns the report dict."""

    def run(progress, cancel):
        from onnxport.core.quantize.quantize import requantize

        result = call_in_child(requantize, quantized, reference, quantized, exclude_more, progress=progress,
                               cancel=cancel)
        return build_report(export={"path": str(reference)}, quantize=result)

    return run


def describe_job(source: Path, trust_code: bool = False):
    def run(progress, cancel):
        from onnxport.core.pytorch.sources import describe_source

        progress(None, reading_message(Path(source)))  # torch's load takes seconds: say what runs
        return describe_source(source, trust_code=trust_code)

    return run


def reading_message(source: Path) -> str:
    """The status line while a PyTorch source is read for the import dialog."""
    if source.is_dir():
        return f"reading {source.name}: its config and weights"
    if source.suffix == ".pt2":
        return f"reading {source.name}: loading its torch.export program (half a minute for a large one)"
    return f"reading {source.name}: loading its TorchScript program"


def torch_import_job(options):
    def run(progress, cancel):
        from onnxport.core.workflow.torch_import import run_import

        return run_import(options, progress=progress, cancel=cancel)

    return run

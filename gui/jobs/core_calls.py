"""The core calls the window runs as jobs, as plain `fn(progress, cancel)` closures (Qt-free).

Keeping them apart from the window keeps main_window.py about widgets, and lets tests and the
GUI benchmark run exactly what the window runs (tests replace one through this module).
"""

from __future__ import annotations

from pathlib import Path

from onnxport.core.evaluate.report import build_report
from onnxport.core.export.export import ExportResult
from onnxport.core.graph.index_types import fill_types, wait_types
from onnxport.core.params.checkpoint_fit import ALLOW_PARTIAL, KEEP_PARAMETER_INPUTS
from onnxport.core.util.child_call import call_in_child
from onnxport.core.util.errors import Cancelled
from onnxport.core.util.written_files import WrittenFiles, stopped_line
from onnxport.core.workflow.export_job import IN_CHILD, ExportRequest, run_export
from onnxport.core.workflow.session import ModelSession
from onnxport.core.workflow.sources import open_sources

from ..widgets.outputs_tree import build_tree
from .quiet_gc import quiet_gc


def open_job(paths: list[Path]):
    """Open sources and build the outputs tree, both off the GUI thread: returns (ModelSession, Tree).
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


def plan_job(session: ModelSession, outputs: list[str], starts: tuple[str, ...] = ()):
    def run(progress, cancel):  # counted on the graph the preview draws and the export writes
        return session.summary(outputs, cancel, starts)

    return run


def export_job(sources: ModelSession, outputs: list[str], choices, allowed: frozenset[str] = frozenset(),
               starts: tuple[str, ...] = ()):
    """Export, then (if asked) validate/quantize/benchmark: returns (ExportResult, PostExportResult or None).
    The one pipeline the CLI runs too (core/workflow/export_job.py), on the open's sources; the
    export streams in this worker, validation and quantization run in a child process (they hold
    the GIL for seconds on a big model). A cancel names what stayed written (the float model,
    once the quantization is under way), as the CLI does. `allowed`: the checkpoint policy's
    choices the user made (`params.checkpoint_fit`: allow_partial, keep_parameter_inputs); `starts`:
    the tensors the graph is cut at (a cut model, or one with renamed ends, is not validated: its
    reference has no such inputs). The deploy the choices ask for follows (`MainWindow._deploy_export`)."""
    renames = dict(getattr(choices, "renames", {}) or {})
    request = ExportRequest(list(outputs), choices.path, external_data=choices.external_data,
                            validate=choices.validate and not starts and not renames, quantize=choices.quantize,
                            starts=list(starts), renames=renames,
                            quantize_options=choices.quantize_options, dim_sizes=choices.dim_sizes or None,
                            shapes=choices.shapes or None,
                            allow_partial=ALLOW_PARTIAL in allowed, keep_parameter_inputs=KEEP_PARAMETER_INPUTS in allowed)

    def run(progress, cancel):
        watcher = WrittenFiles(choices.path)
        try:
            outcome = run_export(sources, request, IN_CHILD, progress, cancel)
        except Cancelled:
            raise Cancelled(stopped_line("cancelled", watcher)) from None
        return outcome.export, outcome.post

    return run


def validate_job(sources: ModelSession, exported: Path):
    def run(progress, cancel):
        from onnxport.core.workflow.child_steps import validate_export

        return call_in_child(validate_export, exported, sources.model_path, list(sources.param_paths),
                             progress=progress, cancel=cancel)

    return run


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

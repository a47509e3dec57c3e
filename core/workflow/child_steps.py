"""The app's post-export steps as functions of paths, for `util.child_call.call_in_child`.

Why: validation and quantization parse, shape-infer and save whole models in C++ calls that hold
Python's GIL for seconds (see util/child_call.py); the app runs them in a child process. A child
cannot be handed the open `ParameterSet` (memory maps, loaders), so each function here reads the
reference's parameters from their files and fits their names to the eval graph the way the open
did (`align_if_better`), then runs the same core step the CLI runs in process.

Contract: `validate_export(exported, model_path, param_paths)` -> the report dict of validating
`exported` against the reference; `gate_validation(staged, out_path, model_path, param_paths)` ->
the `ValidationReport` of `post_export.ValidationGate` (raises as it does: nothing is written);
`post_export_step(result, model_path, param_paths, **options)` -> `post_export`'s
`PostExportResult`. Each takes `progress` and `cancel` like the step it runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from onnxport.core.evaluate.report import build_report
from onnxport.core.evaluate.validate import ValidationReport, validate
from onnxport.core.io.model_io import load_graph
from onnxport.core.io.parameter_set import ParameterSet
from onnxport.core.params.name_alignment import align_if_better
from onnxport.core.util.progress import CancelToken, ProgressFn
from onnxport.core.workflow.post_export import PostExportResult, ValidationGate, post_export, read_checkpoints


def reference_params(model_path: str | Path, param_paths: Sequence[str | Path] | None) -> ParameterSet | None:
    """The parameters the eval graph at `model_path` runs with, named as the open named them."""
    params = read_checkpoints(param_paths)
    if params is not None:
        params, _alignment = align_if_better(load_graph(model_path), params)
    return params


def validate_export(exported: Path, model_path: Path, param_paths: Sequence[Path] | None, *,
                    progress: ProgressFn | None = None, cancel: CancelToken | None = None) -> dict:
    validation = validate(exported, model_path, params=reference_params(model_path, param_paths),
                          progress=progress, cancel=cancel)
    return build_report(export={"path": str(exported)}, validation=validation)


def gate_validation(staged: Path, out_path: Path, model_path: Path, param_paths: Sequence[Path] | None, *,
                    progress: ProgressFn | None = None, cancel: CancelToken | None = None) -> ValidationReport:
    gate = ValidationGate(out_path, model_path, reference_params(model_path, param_paths),
                          progress=progress, cancel=cancel)
    gate(staged)
    return gate.report


def post_export_step(result, model_path: Path, param_paths: Sequence[Path] | None, *,
                     progress: ProgressFn | None = None, cancel: CancelToken | None = None,
                     **options) -> PostExportResult:
    return post_export(result, model_path, reference_params(model_path, param_paths), progress=progress,
                       cancel=cancel, **options)

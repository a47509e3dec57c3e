"""The app's post-export steps as functions of paths, for `util.child_call.call_in_child`.

Why: validation and quantization parse, shape-infer and save whole models in C++ calls that hold
Python's GIL for seconds (see util/child_call.py); the app runs them in a child process. A child
cannot be handed the open `ParameterSet` (memory maps, loaders), so each function here reads the
reference's parameters from their files (or takes them, when run in process), then runs the same
core step the CLI runs; the reference fits their names to the eval graph (`reference_model`).

Contract: `validate_export(exported, model_path, param_paths)` -> the report dict of validating
`exported` against the reference; `gate_validation(staged, out_path, model_path, param_paths)` ->
the `ValidationReport` of `post_export.ValidationGate` (raises as it does: nothing is written).
Each takes `progress` and `cancel` like the step it runs. `post_export` itself runs in a child
as it is (export_job.py): once the gate validated, it reads no parameters.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from onnxport.core.evaluate.report import build_report
from onnxport.core.evaluate.validate import ValidationReport, validate
from onnxport.core.io.parameter_set import ParameterSet
from onnxport.core.util.progress import CancelToken, ProgressFn
from onnxport.core.workflow.post_export import ValidationGate, reference_params


def validate_export(exported: Path, model_path: Path, param_paths: Sequence[Path] | None, *,
                    progress: ProgressFn | None = None, cancel: CancelToken | None = None) -> dict:
    validation = validate(exported, model_path, params=reference_params(param_paths),
                          progress=progress, cancel=cancel)
    return build_report(export={"path": str(exported)}, validation=validation)


def gate_validation(staged: Path, out_path: Path, model_path: Path,
                    param_paths: Sequence[Path] | ParameterSet | None, *, progress: ProgressFn | None = None,
                    cancel: CancelToken | None = None, **sizes) -> ValidationReport:
    gate = ValidationGate(out_path, model_path, reference_params(param_paths),
                          progress=progress, cancel=cancel, **sizes)
    gate(staged)
    return gate.report

"""After `onnxport export`: validate the export, quantize it, measure both, write the report.

Contract: `post_export(export_result, model_path, checkpoints, quantize=..., calibration=...,
validate=...)`:
- `validate`: the export against the reference (the eval graph fed with the checkpoints'
  parameters, or the source model itself);
- `quantize`: writes `<stem>.int8.onnx` / `.qdq.onnx` / `.fp16.onnx` beside the export (which stays
  the float32 model), to the accuracy target, then benchmarks both;
- writes `<stem>.report.json` atomically beside the export.
Progress is one monotonic bar over its steps (`export_steps`). `ValidationGate`, passed as the
export's `verify`, validates the written model *before* it is put in place and raises when ORT
refuses it or validation fails, so a failed validation leaves the previous output untouched; its
report then goes to `post_export(..., validated=gate.report)`. Returns a `PostExportResult` (typed
results, the report as written, its path); `to_dict()` is the CLI's JSON.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from onnxport.core.evaluate.benchmark import BenchReport, benchmark
from onnxport.core.evaluate.report import build_report, summary_lines, write_report
from onnxport.core.evaluate.validate import ValidationReport
from onnxport.core.evaluate.validate import validate as run_validate
from onnxport.core.io.parameter_set import ParameterSet
from onnxport.core.quantize.options import QuantizeOptions
from onnxport.core.quantize.quantize import quantize as run_quantize
from onnxport.core.quantize.result import QuantizeResult
from onnxport.core.util.errors import Cancelled, OnnxportError
from onnxport.core.util.progress import CancelToken, ProgressFn, Steps, step_token
from onnxport.core.workflow.companion_names import (  # noqa: F401 (re-exported)
    SUFFIXES,
    check_companions,
    quantized_path,
    report_path_for,
)
from onnxport.core.workflow.export_steps import post_steps, weighted
from onnxport.core.workflow.sources import read_checkpoints

POST_BENCH_SECONDS = 1.0


@dataclass
class PostExportResult:
    """What `post_export` did. Each step's result is None when it did not run."""

    validation: ValidationReport | None  # the export against the reference
    quantize: QuantizeResult | None  # the quantized model, with its validation against the export
    bench: BenchReport | None  # export vs quantized
    report: dict  # the report as written to `report_path` (evaluate/report.py's shape)
    report_path: Path
    summary_lines: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool | None:
        """False when a validation failed, None when nothing was validated; a quantized model
        measured with no accuracy target has no verdict."""
        judged = self.quantize.validation if self.quantize is not None and self.quantize.target is not None else None
        verdicts = [v.passed for v in (self.validation, judged) if v]
        return all(verdicts) if verdicts else None

    def to_dict(self) -> dict:
        """The CLI's JSON: `validation`, `quantize`, `bench` (as in the report, when they ran),
        `report_path`, `passed` and `summary_lines`."""
        steps = {key: self.report[key] for key in ("validation", "quantize", "bench") if key in self.report}
        return steps | {"report_path": str(self.report_path), "passed": self.passed,
                        "summary_lines": list(self.summary_lines)}


def reference_params(checkpoints) -> ParameterSet | None:
    """The reference's parameters: given as one set (in process), or read from their paths (a
    child: `sources.read_checkpoints`, the one reader)."""
    if isinstance(checkpoints, ParameterSet):
        return checkpoints
    return read_checkpoints([checkpoints] if isinstance(checkpoints, (str, Path)) else list(checkpoints or []))


def post_export(
    export_result,
    model_path: str | Path,
    checkpoints: Sequence[str | Path] | ParameterSet | None = None,
    *,
    quantize: str | None = None,
    calibration=None,
    validate: bool = False,
    inputs=None,
    progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
    validated: ValidationReport | None = None,
    dim_sizes: dict[str, int] | None = None,
    shapes: dict[str, tuple[int, ...]] | None = None,
    quantize_options: QuantizeOptions | None = None,
) -> PostExportResult:
    """See the module docstring. `export_result`: an ExportResult (or the exported model's path).
    `validated`: the export's validation, already run (by a `ValidationGate`): not run again.
    `dim_sizes`/`shapes`: sizes for generated inputs (`--dim`/`--shape`, see evaluate.first_run).
    `quantize_options`: the quantization's choices (target, data, int8 path...; `quantize`'s
    defaults when None); `calibration`, `inputs` and the sizes, when given, take their place."""
    paths = list(checkpoints) if isinstance(checkpoints, (list, tuple)) else []
    options = quantize_options_for(quantize_options, calibration=calibration, validation_inputs=inputs,
                                   dim_sizes=dim_sizes, shapes=shapes)
    data = [p for p in (options.calibration, options.validation_inputs, options.tokenizer) if isinstance(p, (str, Path))]
    check_companions(getattr(export_result, "path", export_result), quantize, True, [model_path, *paths, *data])
    validate_now = validate and validated is None
    steps = Steps(progress, weighted(post_steps(validate_now, quantize)), cancel)
    report = steps.report
    sizes = {"dim_sizes": dim_sizes, "shapes": shapes}
    out = Path(getattr(export_result, "path", export_result))
    export = export_result.to_dict() if hasattr(export_result, "to_dict") else {"path": str(out)}
    validation, quantized, bench = validated, None, None
    # each step on a token of its own: the quantization's commit leaves the benchmark cancellable
    if validate_now:
        report.check()
        with step_token(report.token) as token:
            validation = run_validate(out, model_path, params=reference_params(checkpoints), inputs=inputs,
                                      progress=steps.begin("validating"), cancel=token, **sizes)
    if quantize:
        report.check()
        with step_token(report.token) as token:
            quantized = run_quantize(out, quantized_path(out, quantize), quantize, options,
                                     progress=steps.begin("quantizing"), cancel=token)
        report.check()
        with step_token(report.token) as token:
            bench = benchmark([out, quantized.path], inputs=inputs, seconds=POST_BENCH_SECONDS,
                              progress=steps.begin("benchmarking"), cancel=token, **sizes)
    steps.begin("writing the report")
    full = build_report(export=export, validation=validation, quantize=quantized, bench=bench)
    path = write_report(report_path_for(out), full)
    steps.finished()
    return PostExportResult(validation=validation, quantize=quantized, bench=bench, report=full, report_path=path,
                            summary_lines=summary_lines(full) + [f"report: {path}"])


def quantize_options_for(options: QuantizeOptions | None, **given) -> QuantizeOptions:
    """`options` (or the defaults) with each of `given` that is not None in its place."""
    return replace(options or QuantizeOptions(), **{k: v for k, v in given.items() if v is not None})


class ValidationGate:
    """The export's `verify`: validate the written model before it replaces anything.

    Called with the written model at a private path (see `export.writer`); runs `validate` against
    the reference (`model_path` + `checkpoints`) and raises `OnnxportError` naming `out_path`
    when ORT refuses the model or an output misses its threshold: the export then puts nothing in
    place. `report` is the validation, its `model` the final path.
    """

    def __init__(self, out_path: str | Path, model_path: str | Path,
                 checkpoints: Sequence[str | Path] | ParameterSet | None = None, *, inputs=None,
                 progress: ProgressFn | None = None, cancel: CancelToken | None = None,
                 dim_sizes: dict[str, int] | None = None, shapes: dict[str, tuple[int, ...]] | None = None) -> None:
        self.out_path = Path(out_path)
        self.sizes = {"dim_sizes": dim_sizes, "shapes": shapes}
        self.model_path = model_path
        self.params = reference_params(checkpoints)
        self.inputs = inputs
        self.progress, self.cancel = progress, cancel
        self.report: ValidationReport | None = None

    def __call__(self, staged: Path) -> None:
        try:
            result = run_validate(staged, self.model_path, params=self.params, inputs=self.inputs,
                                  progress=self.progress, cancel=self.cancel, **self.sizes)
        except Cancelled:
            raise
        except OnnxportError as exc:
            text = exc.one_line().replace(str(staged), str(self.out_path))
            raise OnnxportError(f"{text}; nothing written") from None
        self.report = replace(result, model=str(self.out_path))
        if not result.passed:
            failed = "; ".join(result.failures()[:3])
            raise OnnxportError(f"{self.out_path}: validation failed against {Path(self.model_path).name} "
                                f"({failed}); nothing written")

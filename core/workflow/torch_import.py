"""PyTorch import as one job (the app's import dialog and `torch-export`): export, then the int8
model or the training artifacts; say what to open next.

Contract: `run_import(TorchImportOptions, progress, cancel) -> TorchImportResult`; the app then opens
`result.open_paths` in the normal tree / preview / export screen:
- inference: the exported model; training without artifacts: the forward graph;
- training with an artifacts folder: the eval graph and the checkpoint (the pair the export
  screen turns into an inference model after on-device training).
With `quantize` (inference), the int8 model is written beside the export by the accuracy-target
quantizer `onnxport quantize` uses (torch_int8.py; `quantize_target` None: no target), and its
result (validation against the float model) is in `result.quantized`. Each write has its own
commit point: a cancel after the export says the export stayed written.
Trainable/frozen names are the module's parameter names (as `SourceInfo.parameters` lists them);
those the exporter dropped (unused by the traced forward) are skipped and listed in `notes`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import onnx

from onnxport.core.pytorch.export import TorchExportResult, export_torch
from onnxport.core.pytorch.sources import InputSpec
from onnxport.core.quantize.result import QuantizeResult
from onnxport.core.training.artifacts import (
    ArtifactsResult,
    generate_training_artifacts,
    parameter_candidates,
)
from onnxport.core.util.errors import Cancelled, OnnxportError
from onnxport.core.util.out_paths import check_output
from onnxport.core.util.progress import CancelToken, ProgressFn, Reporter, step_token
from onnxport.core.workflow.companion_names import quantized_path
from onnxport.core.workflow.torch_int8 import DEFAULT_TARGET, int8_beside


@dataclass
class TorchImportOptions:
    source: Path
    out_path: Path  # the .onnx to write (the forward graph in training mode)
    mode: str = "inference"
    task: str | None = None
    opset: int | None = None
    inputs: list[InputSpec] | None = None
    output_names: list[str] | None = None
    pooling: str | None = None  # None: the folder's sentence-transformers Pooling mode, else mean
    quantize: bool = False  # also write a dynamic int8 model (inference)
    quantize_target: float | None = DEFAULT_TARGET  # its accuracy target (cosine); None: no target
    validation_inputs: Path | None = None  # its accuracy check's inputs (.npz, folder, .txt of sentences)
    verify: bool = True  # run the export in ONNX Runtime against PyTorch
    artifacts_dir: Path | None = None  # training: generate ORT training artifacts here
    trainable: list[str] | None = None
    frozen: list[str] | None = None
    loss: str = "crossentropy"
    optimizer: str = "adamw"
    trust_code: bool = False  # the user trusts a TorchScript/.pt2 program to run (pytorch/trust.py)


@dataclass
class TorchImportResult:
    export: TorchExportResult
    artifacts: ArtifactsResult | None = None
    quantized: QuantizeResult | None = None
    open_paths: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def run_import(options: TorchImportOptions, progress: ProgressFn | None = None,
               cancel: CancelToken | None = None) -> TorchImportResult:
    report = Reporter(progress, cancel)
    with_artifacts = options.mode == "training" and options.artifacts_dir is not None
    if options.quantize:
        if options.mode == "training":
            raise OnnxportError("quantization applies to inference exports; a training-mode graph is for training")
        check_output(quantized_path(options.out_path, "dynamic"), {Path(options.source): "the source this run reads"})
    export_part = report.sub(0.0, 0.5 if with_artifacts or options.quantize else 1.0)
    exported = export_torch(options.source, options.out_path, mode=options.mode, task=options.task,
                            opset=options.opset, inputs=options.inputs, output_names=options.output_names,
                            pooling=options.pooling, verify=options.verify, progress=export_part,
                            cancel=cancel, trust_code=options.trust_code)
    result = TorchImportResult(exported, notes=list(exported.notes))
    if options.quantize:
        with step_token(cancel) as token:  # the export passed its commit point; this write has its own
            # a Hugging Face folder's own tokenizer turns text into inputs; without one, generated inputs
            tokenizer = options.source if (Path(options.source) / "tokenizer.json").is_file() else None
            result.quantized = int8_beside(exported.path, options.quantize_target, report.sub(0.5, 1.0), token,
                                           validation_inputs=options.validation_inputs, tokenizer=tokenizer)
        result.notes += result.quantized.summary_lines()
        result.open_paths = [exported.path]
        return result
    if not with_artifacts:
        result.open_paths = [exported.path]
        return result
    graph = onnx.load(str(exported.path), load_external_data=False)
    available = set(parameter_candidates(graph))
    del graph
    trainable = _present(options.trainable, available, "trainable", result.notes)
    frozen = _present(options.frozen, available, "frozen", result.notes)
    try:
        with step_token(cancel) as token:
            arts = generate_training_artifacts(exported.path, options.artifacts_dir, trainable=trainable,
                                               frozen=frozen, loss=options.loss, optimizer=options.optimizer,
                                               progress=report.sub(0.5, 1.0), cancel=token)
    except Cancelled:
        raise Cancelled(f"cancelled while generating the artifacts; {exported.path} (the forward graph) was "
                        "written, no artifacts") from None
    result.artifacts = arts
    result.notes += arts.notes
    result.open_paths = [arts.eval_model, arts.checkpoint]
    return result


def _present(names: list[str] | None, available: set[str], what: str, notes: list[str]) -> list[str] | None:
    if names is None:
        return None
    kept = [n for n in names if n in available]
    skipped = [n for n in names if n not in available]
    if skipped:
        notes.append(f"{len(skipped)} {what} parameter(s) are not in the exported graph (unused by its forward), "
                     f"e.g. {skipped[0]}")
    return kept

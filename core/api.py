"""The Python API a training script calls after training.

    from onnxport.core.api import export_for_inference
    export_for_inference("eval_model.onnx", "checkpoint", ["probabilities"], "model.onnx")

It opens the checkpoint(s) (several are merged, e.g. pipeline stages), exports, and in a
torchrun/MPI job writes only on rank 0 (the other ranks return a result whose `skipped` says so).
A PyTorch state_dict/safetensors/npz works too: its names are fitted to the graph's when they
differ by a wrapper prefix (ORTModule's `_original_module.`, DDP's `module.`), as the app does.
It runs the one export pipeline the CLI and the app run (`workflow.export_job`), on the model's
session (`workflow.session.ModelSession`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import onnx

from onnxport.core.export.export import ExportResult
from onnxport.core.util.progress import CancelToken, ProgressFn
from onnxport.core.workflow.export_job import ExportRequest, export_files


def export_for_inference(
    eval_model: str | Path,
    checkpoints: str | Path | Sequence[str | Path] | None,
    outputs: Sequence[str],
    out_path: str | Path,
    *,
    external_data: str = "auto",
    fold: bool = True,
    all_ranks: bool = False,
    progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
    verify: Callable[[Path], None] | None = None,
    model: onnx.ModelProto | None = None,
    allow_partial: bool = False,
    keep_parameter_inputs: bool = False,
    starts: Sequence[str] = (),
    renames: dict[str, str] | None = None,
) -> ExportResult:
    """Export `eval_model` + `checkpoints` to a self-contained inference model at `out_path`.
    `verify(path)` checks the written model before it is put in place (see `export_model`);
    `model`: `eval_model`'s graph when the caller has loaded it already (`io.model_io.load_graph`).
    The checkpoint policy of the CLI
    and the app holds (`params.checkpoint_fit`): a checkpoint that fits nothing is refused, one
    that fits partly unless `allow_partial` (the result's `partial` lists what stayed), parameter
    inputs left without values unless `keep_parameter_inputs`. `starts`: intermediate tensors
    made the graph's inputs (it is cut there); `renames`: new names of inputs and outputs."""
    if checkpoints is None:
        paths: list[str | Path] = []
    elif isinstance(checkpoints, (str, Path)):
        paths = [checkpoints]
    else:
        paths = list(checkpoints)
    request = ExportRequest(list(outputs), Path(out_path), external_data=external_data, fold=fold,
                            all_ranks=all_ranks, verify=verify, allow_partial=allow_partial,
                            keep_parameter_inputs=keep_parameter_inputs, starts=list(starts),
                            renames=dict(renames or {}))
    return export_files(eval_model, paths, request, progress, cancel, model=model).export

"""The Python API a training script calls after training.

    from onnxport.core.api import export_for_inference
    export_for_inference("eval_model.onnx", "checkpoint", ["probabilities"], "model.onnx")

It opens the checkpoint(s) (several are merged, e.g. pipeline stages), exports, and in a
torchrun/MPI job writes only on rank 0 (the other ranks return a result whose `skipped` says so).
A PyTorch state_dict/safetensors/npz works too: its names are fitted to the graph's when they
differ by a wrapper prefix (ORTModule's `_original_module.`, DDP's `module.`), as the app does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import onnx

from onnxport.core.evaluate.run_types import types_by_run
from onnxport.core.export.export import ExportResult, export_model
from onnxport.core.graph.graph_table import GraphTable
from onnxport.core.io.model_io import load_graph
from onnxport.core.io.parameter_set import merge_parameter_sets
from onnxport.core.io.readers import read_parameters
from onnxport.core.params.name_alignment import align_if_better
from onnxport.core.util.distributed import skip_reason
from onnxport.core.util.progress import CancelToken, ProgressFn


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
    table: GraphTable | None = None,
) -> ExportResult:
    """Export `eval_model` + `checkpoints` to a self-contained inference model at `out_path`.
    `verify(path)` checks the written model before it is put in place (see `export_model`);
    `model`: `eval_model`'s graph when the caller has loaded it already (`io.model_io.load_graph`),
    with its `GraphTable` if it has one (the export plans on it: ~0.1 s less at 23,000 nodes)."""
    reason = skip_reason(all_ranks)
    if reason is not None:
        return ExportResult(Path(out_path), None, 0, list(outputs), [], 0, 0, 0, 0.0, skipped=reason)
    if checkpoints is None:
        paths: list[str | Path] = []
    elif isinstance(checkpoints, (str, Path)):
        paths = [checkpoints]
    else:
        paths = list(checkpoints)
    params = merge_parameter_sets([read_parameters(p) for p in paths]) if paths else None
    if params is not None:
        model = model if model is not None else load_graph(eval_model)
        params, _ = align_if_better(model, params)
    return export_model(eval_model, out_path, list(outputs), params, external_data=external_data,
                        fold=fold, model=model, table=table, run_types=types_by_run, progress=progress,
                        cancel=cancel, verify=verify)

"""ORTModule-trained models (seed 004): the ONNX graphs ORTModule saved + a PyTorch state_dict.

`ORTModule(model, DebugOptions(save_onnx=True, onnx_prefix=P))` saves `P_<stage>_<mode>.onnx`
files; the `torch_exported` ones are plain `torch.onnx.export` output whose parameters are graph
inputs named `_original_module.<name>`; later stages hold ORT-internal rewrites (fallbacks only).
Contract (pieces in small modules, so `sources` uses them without an import cycle):
- `find_ortmodule_sets(paths)` groups such files by prefix; `OrtModuleFiles.inference_graph()`
  picks the graph to export (inference-mode torch_exported first). See `ortmodule_files`.
- `align_parameter_names(model, params)` renames a state_dict's entries to the graph's names when
  they differ by a wrapper prefix (`_original_module.`, DDP's `module.`, torch.compile's
  `_orig_mod.`) and reports what matched. See `name_alignment`.
- `embed_state_dict(graph, state_dict, out)` does both, then `export.export_model`; a file that does
  not fit is refused unless `allow_partial` (then `EmbedResult.stayed` lists what stayed).
ORTModule itself is not run (1.19.2 cannot import with torch >= 2.9); the tests build graphs the
way its exporter does."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from onnxport.core.evaluate.run_types import types_by_run
from onnxport.core.export.export import ExportResult, export_selection
from onnxport.core.export.options import ExportOptions
from onnxport.core.export.selection_graph import SelectionGraphs
from onnxport.core.io.model_io import load_graph
from onnxport.core.io.ortmodule_files import (
    FILE_NAME,
    PREFERENCE,
    STAGES,
    OrtModuleFiles,
    find_ortmodule_sets,
    parse_file_name,
    pick_graph,
)
from onnxport.core.io.parameter_set import ParameterSet
from onnxport.core.io.readers import read_parameters
from onnxport.core.params.checkpoint_fit import fit_checkpoint, require_fit
from onnxport.core.params.name_alignment import WRAPPER_PREFIXES, NameAlignment, align_parameter_names
from onnxport.core.util.progress import CancelToken, ProgressFn

__all__ = [
    "FILE_NAME", "PREFERENCE", "STAGES", "WRAPPER_PREFIXES", "EmbedResult", "NameAlignment", "OrtModuleFiles",
    "align_parameter_names", "embed_state_dict", "find_ortmodule_sets", "parse_file_name", "pick_graph",
]


@dataclass
class EmbedResult:
    graph: Path
    export: ExportResult
    alignment: NameAlignment
    stayed: list[str] = field(default_factory=list)  # graph weights the file did not replace (allow_partial)


def embed_state_dict(
    graph: str | Path,
    state: str | Path | ParameterSet,
    out_path: str | Path,
    outputs: list[str] | None = None,
    *,
    prefix: str | None = None,
    external_data: str = "auto",
    fold: bool = True,
    allow_partial: bool = False,
    progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
) -> EmbedResult:
    """Embed a state_dict (or any parameter file) into a graph whose parameters it names, and export.

    `graph` is an .onnx file or a folder of ORTModule-saved graphs (`prefix` picks one model);
    `outputs` defaults to the graph's outputs. Missing or mismatched parameters stop the export
    with a clear error; entries the graph does not use (e.g. `num_batches_tracked`) are reported
    in `alignment.unused`. Weights the graph does not take while it keeps float initializers of
    its own (a file for another model) stop it too, unless `allow_partial`: then the graph's own
    values stay for those, listed in `stayed`.
    """
    path = pick_graph(graph, prefix)
    params = state if isinstance(state, ParameterSet) else read_parameters(state)
    model = load_graph(path)
    params, alignment = align_parameter_names(model, params)
    fit = fit_checkpoint(model, params, alignment.match, alignment.unused)
    require_fit(fit, alignment.match, allow_partial, f"{path.name}: the parameter file")
    outputs = list(outputs) if outputs else [o.name for o in model.graph.output]
    partial = fit.to_dict() if fit.partial else None
    options = ExportOptions(external_data=external_data, fold=fold, run_types=types_by_run)
    result = export_selection(SelectionGraphs(model, path, params), outputs, out_path, options, partial=partial,
                              progress=progress, cancel=cancel)
    return EmbedResult(path, result, alignment, list(fit.stayed) if fit.partial else [])

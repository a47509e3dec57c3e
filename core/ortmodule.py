"""ORTModule-trained models (seed 004): the ONNX graphs ORTModule saved + a PyTorch state_dict.

`ORTModule(model, DebugOptions(save_onnx=True, onnx_prefix=P))` saves, per export mode, files
named `P_<stage>_<mode>.onnx` (onnxruntime/training/ortmodule/_onnx_models.py):
stage in torch_exported, post_processed, optimized_pre_grad, optimized, execution_model;
mode in training, inference. The `torch_exported` graphs are plain `torch.onnx.export` output with
`export_params=False, keep_initializers_as_inputs=True`: every parameter is a graph input named
after the module's parameter, prefixed `_original_module.` (ORTModule's `_FlattenedModule` wraps
the user's module under that attribute). The later stages hold ORT-internal rewrites (and, for
training, the gradient graph), so they are only fallbacks.

Contract:
- `find_ortmodule_sets(paths)` groups such files by prefix; `OrtModuleFiles.inference_graph()`
  picks the graph to export (inference-mode torch_exported first; a training-mode one is fine
  too: export puts Dropout/BatchNorm in inference form).
- `align_parameter_names(model, params)` renames a state_dict's entries to the graph's names when
  they differ by a wrapper prefix (`_original_module.`, DDP's `module.`, torch.compile's
  `_orig_mod.`...), and reports what matched and what did not.
- `embed_state_dict(graph, state_dict, out)` does both, then `export.export_model`.

ORTModule itself is not run here: onnxruntime-training 1.19.2's ORTModule cannot be imported with
torch >= 2.9 (`torch.onnx._internal.jit_utils` moved), and this package does not need it; the
tests build graphs the way ORTModule's exporter does.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import onnx

from .errors import OnnxportError
from .export import ExportResult, export_model
from .match import ParamMatch, match_parameters
from .model_io import load_graph
from .params import ParameterSet
from .progress import CancelToken, ProgressFn
from .sources import read_parameters

STAGES = ("torch_exported", "post_processed", "optimized_pre_grad", "optimized", "execution_model")
FILE_NAME = re.compile(r"^(?P<prefix>.+?)_(?P<stage>torch_exported|post_processed|optimized_pre_grad|optimized|"
                       r"execution_model)_(?P<mode>training|inference)\.onnx$")
# Graphs worth exporting, best first. The training-mode optimized/execution_model graphs carry
# the gradient graph and ORT-internal ops (YieldOp...) and are never picked.
PREFERENCE = (("torch_exported", "inference"), ("torch_exported", "training"), ("post_processed", "inference"),
              ("post_processed", "training"), ("optimized_pre_grad", "inference"), ("optimized", "inference"),
              ("execution_model", "inference"))
WRAPPER_PREFIXES = ("_original_module.", "module.", "_orig_mod.")


@dataclass
class OrtModuleFiles:
    folder: Path
    prefix: str
    files: dict[tuple[str, str], Path] = field(default_factory=dict)  # (stage, mode) -> path

    def inference_graph(self) -> Path:
        for key in PREFERENCE:
            if key in self.files:
                return self.files[key]
        raise OnnxportError(f"{self.folder}: ORTModule files with prefix '{self.prefix}' hold only graphs with a "
                            "gradient graph in them; save with DebugOptions(save_onnx=True) and run the model once")

    def describe(self) -> str:
        return f"{self.prefix}: " + ", ".join(f"{s}_{m}" for s, m in sorted(self.files))


def parse_file_name(path: str | Path) -> tuple[str, str, str] | None:
    """(prefix, stage, mode) for a file named as ORTModule saves its graphs, else None."""
    m = FILE_NAME.match(Path(path).name)
    return (m["prefix"], m["stage"], m["mode"]) if m else None


def find_ortmodule_sets(paths: Iterable[str | Path]) -> list[OrtModuleFiles]:
    """ORTModule-saved graphs among `paths` (files, or folders searched one level), grouped by prefix."""
    sets: dict[tuple[Path, str], OrtModuleFiles] = {}
    for raw in paths:
        path = Path(raw)
        for f in sorted(path.iterdir()) if path.is_dir() else [path]:
            parsed = parse_file_name(f)
            if parsed and f.is_file():
                prefix, stage, mode = parsed
                entry = sets.setdefault((f.parent, prefix), OrtModuleFiles(f.parent, prefix))
                entry.files[(stage, mode)] = f
    return list(sets.values())


def pick_graph(path: str | Path, prefix: str | None = None) -> Path:
    """The graph to export from an ORTModule folder (or a file: itself)."""
    path = Path(path)
    if path.is_file():
        return path
    sets = find_ortmodule_sets([path])
    if prefix is not None:
        sets = [s for s in sets if s.prefix == prefix]
    if not sets:
        raise OnnxportError(f"{path}: no ORTModule graphs (<prefix>_torch_exported_inference.onnx ...) "
                            f"{'with prefix ' + repr(prefix) + ' ' if prefix else ''}in this folder")
    if len(sets) > 1:
        raise OnnxportError(f"{path}: ORTModule graphs of several models; choose a prefix: "
                            f"{', '.join(s.prefix for s in sets)}")
    return sets[0].inference_graph()


@dataclass
class NameAlignment:
    """How a parameter set's names were mapped onto a graph's, and what then matched."""

    added_prefix: str = ""  # prepended to every name ("_original_module.")
    removed_prefix: str = ""  # stripped from names that had it ("module.")
    renamed: int = 0
    match: ParamMatch | None = None
    unused: list[str] = field(default_factory=list)  # parameter-file names the graph does not use, as in the file

    def summary(self) -> str:
        how = []
        if self.added_prefix:
            how.append(f"names prefixed with '{self.added_prefix}'")
        if self.removed_prefix:
            how.append(f"'{self.removed_prefix}' removed from names")
        text = self.match.summary() if self.match else ""
        return "; ".join(how + [text]) if how else text


def _graph_names(model: onnx.ModelProto) -> set[str]:
    return {i.name for i in model.graph.input} | {t.name for t in model.graph.initializer}


def _candidates(graph_names: set[str], names: list[str]) -> Counter:
    """Prefixes to add/remove that would turn some of `names` into graph names."""
    found: Counter = Counter()
    known = set(names)
    for g in graph_names:
        for i, ch in enumerate(g):
            if ch == "." and g[i + 1:] in known:
                found[("add", g[: i + 1])] += 1
    for n in names:
        for i, ch in enumerate(n):
            if ch == "." and n[i + 1:] in graph_names:
                found[("remove", n[: i + 1])] += 1
    for p in WRAPPER_PREFIXES:
        found.setdefault(("add", p), 0)
        found.setdefault(("remove", p), 0)
    return found


def _rename(name: str, how: str, prefix: str) -> str:
    if how == "add":
        return prefix + name
    return name[len(prefix):] if name.startswith(prefix) else name


def align_parameter_names(model: onnx.ModelProto, params: ParameterSet) -> tuple[ParameterSet, NameAlignment]:
    """`params` renamed to fit `model` (one prefix added or removed) if that matches more names."""
    graph_names = _graph_names(model)
    names = list(params)
    best = (sum(n in graph_names for n in names), "", "")
    for (how, prefix), _ in _candidates(graph_names, names).most_common():
        hits = sum(_rename(n, how, prefix) in graph_names for n in names)
        if hits > best[0]:
            best = (hits, how, prefix)
    _, how, prefix = best
    alignment = NameAlignment()
    original = {n: n for n in names}
    if how:
        renamed = {}
        for name, tensor in params.items():
            new = _rename(name, how, prefix)
            if new in renamed:
                raise OnnxportError(f"state_dict names '{renamed[new].name}' and '{name}' both map to '{new}'")
            renamed[new] = dataclasses.replace(tensor, name=new)
            original[new] = name
        params = dataclasses.replace(params, params=renamed)
        alignment.renamed = sum(1 for n in names if _rename(n, how, prefix) != n)
        if how == "add":
            alignment.added_prefix = prefix
        else:
            alignment.removed_prefix = prefix
    alignment.match = match_parameters(model, params)
    alignment.unused = [original.get(n, n) for n in alignment.match.unexpected]
    return params, alignment


@dataclass
class EmbedResult:
    graph: Path
    export: ExportResult
    alignment: NameAlignment


def embed_state_dict(
    graph: str | Path,
    state: str | Path | ParameterSet,
    out_path: str | Path,
    outputs: list[str] | None = None,
    *,
    prefix: str | None = None,
    external_data: str = "auto",
    fold: bool = True,
    progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
) -> EmbedResult:
    """Embed a state_dict (or any parameter file) into a graph whose parameters it names, and export.

    `graph` is an .onnx file or a folder of ORTModule-saved graphs (`prefix` picks one model);
    `outputs` defaults to the graph's outputs. Missing or mismatched parameters stop the export
    with a clear error; entries the graph does not use (e.g. `num_batches_tracked`) are reported
    in `alignment.match.unexpected`.
    """
    path = pick_graph(graph, prefix)
    params = state if isinstance(state, ParameterSet) else read_parameters(state)
    model = load_graph(path)
    params, alignment = align_parameter_names(model, params)
    if not alignment.match.matched:
        sample = ", ".join(list(params)[:3])
        raise OnnxportError(f"{path}: none of the parameter file's names ({sample} ...) is a parameter of this graph")
    outputs = list(outputs) if outputs else [o.name for o in model.graph.output]
    result = export_model(path, out_path, outputs, params, external_data=external_data, fold=fold, model=model,
                          progress=progress, cancel=cancel)
    return EmbedResult(path, result, alignment)

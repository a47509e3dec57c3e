"""Recognise the ONNX files ORTModule saved and pick the one worth exporting.

`ORTModule(model, DebugOptions(save_onnx=True, onnx_prefix=P))` writes, per export mode, files
named `P_<stage>_<mode>.onnx` (onnxruntime/training/ortmodule/_onnx_models.py names them
prefix_name_mode): stage is torch_exported (plain `torch.onnx.export` output), post_processed,
optimized_pre_grad, optimized (for training: with the gradient graph) or execution_model (what
the InferenceSession ran, after ORT-internal rewrites); mode is training or inference. Sorted by
name, the execution model comes first: the wrong graph. Only the `torch_exported` graphs are the
user's model as PyTorch exported it, so they are picked first.

This module only looks at names (no onnx, no files read), so `sources` can use it when it sorts
dropped files, without importing the export machinery.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from onnxport.core.util.errors import OnnxportError, no_such_file

STAGES = ("torch_exported", "post_processed", "optimized_pre_grad", "optimized", "execution_model")
MODES = ("training", "inference")
FILE_NAME = re.compile(rf"^(?P<prefix>.*?)_(?P<stage>{'|'.join(STAGES)})_(?P<mode>{'|'.join(MODES)})\.onnx$")
# Graphs worth exporting, best first. The training-mode optimized/execution_model graphs carry
# the gradient graph and ORT-internal ops (YieldOp...) and are never picked.
PREFERENCE = (("torch_exported", "inference"), ("torch_exported", "training"), ("post_processed", "inference"),
              ("post_processed", "training"), ("optimized_pre_grad", "inference"), ("optimized", "inference"),
              ("execution_model", "inference"))


@dataclass
class OrtModuleFiles:
    """The graphs one ORTModule model (one onnx_prefix) saved in one folder."""

    folder: Path
    prefix: str
    files: dict[tuple[str, str], Path] = field(default_factory=dict)  # (stage, mode) -> path

    def inference_graph(self) -> Path:
        """The graph to export: inference-mode torch_exported first (see PREFERENCE)."""
        for key in PREFERENCE:
            if key in self.files:
                return self.files[key]
        raise OnnxportError(f"{self.folder}: ORTModule files with prefix '{self.prefix}' hold only graphs with a "
                            "gradient graph in them; save with DebugOptions(save_onnx=True) and run the model once")

    def paths(self) -> list[Path]:
        return sorted(self.files.values())

    def describe(self) -> str:
        return f"{self.prefix}: " + ", ".join(f"{s}_{m}" for s, m in sorted(self.files))


def parse_file_name(path: str | Path) -> tuple[str, str, str] | None:
    """(prefix, stage, mode) for a file named as ORTModule saves its graphs, else None."""
    m = FILE_NAME.match(Path(path).name)
    return (m["prefix"], m["stage"], m["mode"]) if m else None


def group_files(files: Iterable[str | Path]) -> list[OrtModuleFiles]:
    """ORTModule-named files among `files` (not folders), grouped by (folder, prefix), in order met."""
    sets: dict[tuple[Path, str], OrtModuleFiles] = {}
    for raw in files:
        path = Path(raw)
        parsed = parse_file_name(path)
        if parsed is None:
            continue
        prefix, stage, mode = parsed
        entry = sets.setdefault((path.parent, prefix), OrtModuleFiles(path.parent, prefix))
        entry.files[(stage, mode)] = path
    return list(sets.values())


def find_ortmodule_sets(paths: Iterable[str | Path]) -> list[OrtModuleFiles]:
    """ORTModule-saved graphs among `paths` (files, or folders searched one level), grouped by prefix."""
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files += [f for f in sorted(path.iterdir()) if f.is_file()]
        elif path.is_file():
            files.append(path)
    return group_files(files)


def several_models_error(where: str | Path, sets: list[OrtModuleFiles], hint: str | None = None) -> OnnxportError:
    """One model at a time: graphs of several onnx_prefixes cannot be told apart by content."""
    return OnnxportError(f"{where}: ORTModule graphs of several models; choose a prefix: "
                         f"{', '.join(repr(s.prefix) for s in sets)}", hint=hint)


def pick_graph(path: str | Path, prefix: str | None = None) -> Path:
    """The graph to export from an ORTModule folder (or a file: itself)."""
    path = Path(path)
    if path.is_file():
        return path
    if not path.exists():
        raise no_such_file(path)
    sets = find_ortmodule_sets([path])
    if prefix is not None:
        sets = [s for s in sets if s.prefix == prefix]
    if not sets:
        wanted = f"with prefix '{prefix}' " if prefix else ""
        raise OnnxportError(f"{path}: no ORTModule graphs (<prefix>_torch_exported_inference.onnx ...) "
                            f"{wanted}in this folder")
    if len(sets) > 1:
        raise several_models_error(path, sets)
    return sets[0].inference_graph()

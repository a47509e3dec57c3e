"""One side of a comparison: an ONNX model (with the checkpoints that feed it), or a parameter file.

Contract: `open_side(path, checkpoints)` sniffs `path` (content first) and returns a `ModelSide`
(the graph read with its external data left on disk and checked, the merged parameters, the
weights by tensor name) or a `ParamSide` (a checkpoint, state_dict, safetensors or npz file);
anything else is an `OnnxportError` in one line. It is the one place a comparison opens files.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import onnx

from onnxport.core.compare.weights import WeightRef, model_weights
from onnxport.core.io.kinds import PARAMETER_KINDS, TORCH_PROGRAM_KINDS, SourceKind, sniff
from onnxport.core.io.model_io import load_graph
from onnxport.core.io.parameter_set import ParameterSet, merge_parameter_sets
from onnxport.core.io.readers import read_parameters
from onnxport.core.util.errors import OnnxportError, no_such_file


@dataclass
class ModelSide:
    path: Path
    model: onnx.ModelProto
    params: ParameterSet | None = None
    checkpoints: list[Path] = field(default_factory=list)
    weights: dict[str, WeightRef] = field(default_factory=dict)

    @property
    def folder(self) -> Path:
        return self.path.parent

    @property
    def label(self) -> str:
        extra = f" + {', '.join(p.name for p in self.checkpoints)}" if self.checkpoints else ""
        return f"{self.path.name}{extra}"


@dataclass
class ParamSide:
    path: Path
    params: ParameterSet

    @property
    def label(self) -> str:
        return self.path.name


def open_side(path: str | Path, checkpoints: Sequence[str | Path] = ()) -> ModelSide | ParamSide:
    """See the module docstring."""
    path = Path(path)
    if not path.exists():
        raise no_such_file(path)
    kind = sniff(path)
    if kind in PARAMETER_KINDS:
        if checkpoints:
            raise OnnxportError(f"{path} is a parameter file, not a model: its checkpoint option has nothing to feed")
        return ParamSide(path, read_parameters(path, kind))
    if kind in TORCH_PROGRAM_KINDS:
        raise OnnxportError(f"{path} is a PyTorch program, not an ONNX model: turn it into one with "
                            "'onnxport torch-export' first")
    if kind != SourceKind.ONNX:
        raise OnnxportError(f"{path}: neither an ONNX model nor a parameter file (checkpoint, state_dict, "
                            "safetensors, npz)")
    model = load_graph(path)
    params = None
    ckpts = [Path(c) for c in checkpoints]
    if ckpts:
        params = merge_parameter_sets([read_parameters(c) for c in ckpts])
    return ModelSide(path, model, params, ckpts, model_weights(model, path.parent, params))

"""One side of a comparison: an ONNX model (with the checkpoints that feed it), or a parameter file.

Contract: `open_side(path, checkpoints)` sniffs `path` (content first) and returns a `ModelSide`
(the model's session, core/workflow/session.py: the graph read with its external data left on
disk and checked, the parameters fitted to its names; and the weights by tensor name) or a
`ParamSide` (a checkpoint, state_dict, safetensors or npz file); anything else is an
`OnnxportError` in one line. A comparison is two sides; this is where it opens files.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import onnx

from onnxport.core.compare.weights import WeightRef, model_weights
from onnxport.core.io.kinds import PARAMETER_KINDS, TORCH_PROGRAM_KINDS, SourceKind, sniff
from onnxport.core.io.parameter_set import ParameterSet
from onnxport.core.util.errors import OnnxportError, no_such_file
from onnxport.core.workflow.session import ModelSession
from onnxport.core.workflow.sources import open_session, read_checkpoints


@dataclass
class ModelSide:
    session: ModelSession
    weights: dict[str, WeightRef] = field(default_factory=dict)

    @property
    def path(self) -> Path:
        return self.session.model_path

    @property
    def model(self) -> onnx.ModelProto:
        return self.session.graph

    @property
    def params(self) -> ParameterSet | None:
        return self.session.params

    @property
    def folder(self) -> Path:
        return self.path.parent

    @property
    def label(self) -> str:
        paths = self.session.param_paths
        extra = f" + {', '.join(p.name for p in paths)}" if paths else ""
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
        return ParamSide(path, read_checkpoints([path]))
    if kind in TORCH_PROGRAM_KINDS:
        raise OnnxportError(f"{path} is a PyTorch program, not an ONNX model: turn it into one with "
                            "'onnxport torch-export' first")
    if kind != SourceKind.ONNX:
        raise OnnxportError(f"{path}: neither an ONNX model nor a parameter file (checkpoint, state_dict, "
                            "safetensors, npz)")
    session = open_session(path, [Path(c) for c in checkpoints])
    return ModelSide(session, model_weights(session.graph, path.parent, session.params))

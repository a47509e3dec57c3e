"""Read any supported parameter file: one table from file kind to reader.

The readers (ORT checkpoint and its legacy folder, safetensors, npz, PyTorch state_dict) are
plain functions of their modules; this table is the only place that knows all of them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from onnxport.core.io.checkpoint import read_checkpoint
from onnxport.core.io.kinds import SourceKind, sniff
from onnxport.core.io.param_files import read_npz, read_safetensors, read_state_dict
from onnxport.core.io.parameter_set import ParameterSet
from onnxport.core.util.errors import OnnxportError

ParamReader = Callable[[Path], ParameterSet]
PARAM_READERS: dict[SourceKind, ParamReader] = {
    SourceKind.ORT_CHECKPOINT: read_checkpoint,
    SourceKind.ORT_CHECKPOINT_LEGACY: read_checkpoint,
    SourceKind.SAFETENSORS: read_safetensors,
    SourceKind.NPZ: read_npz,
    SourceKind.TORCH_STATE_DICT: read_state_dict,
}


def read_parameters(path: str | Path, kind: SourceKind | None = None) -> ParameterSet:
    """Read any supported parameter file (checkpoint, state_dict, safetensors, npz)."""
    path = Path(path)
    kind = kind or sniff(path)
    reader = PARAM_READERS.get(kind)
    if reader is None:
        raise OnnxportError(f"{path}: not a parameter file onnxport can read (looks like: {kind.value})")
    return reader(path)

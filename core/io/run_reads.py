"""The files a run reads, named for `out_paths.check_output`: no writing command overwrites one.

Contract: `model_reads(path, model)` is the model file and every external-data file its tensors
name (resolved in its folder, as `external_data` confines them); `param_reads(params)` is every
file a `ParameterSet` came from or holds bytes of (a checkpoint and its `.data`, a legacy folder,
a state_dict...). Both map path -> what it is, for the one-line refusal.
"""

from __future__ import annotations

import os
from pathlib import Path

import onnx

from onnxport.core.io.external_data import external_locations
from onnxport.core.io.parameter_set import ParameterSet

SOURCE_MODEL = "the source model"


def model_reads(path: str | os.PathLike, model: onnx.ModelProto | None) -> dict[Path, str]:
    path = Path(path)
    reads = {path: SOURCE_MODEL}
    if model is None:
        return reads
    for location in sorted(external_locations(model)):
        if location:
            reads.setdefault(path.parent / location, f"the external data of {path.name}")
    return reads


def param_reads(params: ParameterSet | None) -> dict[Path, str]:
    if params is None:
        return {}
    reads = {Path(s): "a parameter file this run reads" for s in params.sources}
    tensors = list(params.params.values())
    tensors += [t for g in params.optimizer_groups for moments in g.states.values() for t in moments.values()]
    for t in tensors:
        if t.span is not None:
            reads.setdefault(Path(t.span.path), "a parameter file this run reads")
    return reads

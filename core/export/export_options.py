"""`ExportOptions`: how `export.export_model` writes, and what its caller computed already.

The choices (external data, folding, a check of the written model) and the work a caller did
before (the loaded graph, its table, the index's types, the selection's inference graph or prune
plan, the parameters' match), each taken instead of being computed again. Every field is optional:
`ExportOptions()` is an export of the file as it is on disk.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import onnx

    from onnxport.core.export.inference_graph import InferenceGraph, KnownTypes
    from onnxport.core.graph.graph_table import GraphTable
    from onnxport.core.graph.prune import PrunePlan
    from onnxport.core.params.match import ParamMatch


@dataclass(frozen=True)
class ExportOptions:
    """`export_model`'s options; a computed input must be of the export's own model, outputs and
    parameters (`built` and `plan` for other outputs or parameters are not used)."""

    external_data: str = "auto"  # weights in a data file: auto (near protobuf's 2 GiB), always, never
    fold: bool = True  # fold parameter-only sub-graphs (False: the graph as ONNX Runtime writes it)
    verify: Callable[[Path], None] | None = None  # checks the written model before it is put in place
    # the types of outputs inference leaves without a rank, from one ONNX Runtime run
    # (`evaluate.run_types`): run_types(model_path, model, names, params, cancel)
    run_types: Callable[..., dict[str, onnx.TypeProto]] | None = None
    model: onnx.ModelProto | None = None  # the source graph, when the caller loaded it
    table: GraphTable | None = None  # `model`'s table (the prune is planned on it)
    known_types: KnownTypes | None = None  # the index's types (`TensorIndex.tensor_type`), not inferred again
    built: InferenceGraph | None = None  # the selection's inference graph (`selection_graph`), with `fold`
    plan: PrunePlan | None = None  # the selection's prune plan (the CLI's review)
    match: ParamMatch | None = None  # the parameters' match on `model` (the open's)
    partial: dict | None = None  # a partial embed the user allowed: what stayed as it was (metadata, result)

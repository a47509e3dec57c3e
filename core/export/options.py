"""The export's choices: what a front end offers, importable before anything heavy (the CLI's parser).

`ExportOptions` holds choices only (external data, folding, a check of the written model, how
rank-less outputs get their types, new names for the inputs and outputs); what the export reads - the graph, its table, the
selection's plan and inference graph - comes from the model's session
(`export.selection_graph.SelectionGraphs`), never passed along beside it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import onnx

EXTERNAL_DATA_CHOICES = ("auto", "always", "never")


@dataclass(frozen=True)
class ExportOptions:
    """How `export.export_selection` writes; `ExportOptions()` writes the model as ONNX Runtime's
    export would, folded, with its weights in the file below 2 GB."""

    external_data: str = "auto"  # weights in a data file: auto (near protobuf's 2 GiB), always, never
    fold: bool = True  # fold parameter-only sub-graphs (False: the graph as ONNX Runtime writes it)
    verify: Callable[[Path], None] | None = None  # checks the written model before it is put in place
    # the types of outputs inference leaves without a rank, from one ONNX Runtime run
    # (`evaluate.run_types`): run_types(model_path, model, names, params, cancel)
    run_types: Callable[..., dict[str, onnx.TypeProto]] | None = None
    renames: tuple[tuple[str, str], ...] = ()  # (old, new) names of inputs and outputs (`graph.rename_ends`)

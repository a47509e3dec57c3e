"""One opened model: `ModelSession`, what the CLI, the API and the app hold while they work on it.

A session is the model file and its graph, the parameter files read and fitted to the graph's
names, their match and fit (`params.checkpoint_fit`), the graph's table and (in the app) its
index, and per selection: the prune plan, the inference graph the export writes, the preview
drawn from it (`export.selection_graph`) and the plan summary. Its inputs never change after
`sources.open_session`/`open_sources` built it: what it computes is kept inside it, and a
changed input (another file, another checkpoint) is another session, so nothing is checked for
staleness. Per-selection results are built once, on the first request, thread-safely (the app
asks from side jobs).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import onnx

from onnxport.core.export.export import ExportPlan, plan_export
from onnxport.core.export.selection_graph import SelectionGraph, SelectionGraphs
from onnxport.core.graph.graph_table import GraphTable
from onnxport.core.graph.index import TensorIndex
from onnxport.core.graph.prune import PrunePlan
from onnxport.core.io.kinds import SourceKind
from onnxport.core.io.ortmodule_files import OrtModuleFiles
from onnxport.core.io.parameter_set import ParameterSet
from onnxport.core.params.checkpoint_fit import CheckpointFit, fit_checkpoint, unfilled_inputs
from onnxport.core.params.match import ParamMatch
from onnxport.core.params.name_alignment import NameAlignment
from onnxport.core.util.errors import OnnxportError
from onnxport.core.util.progress import CancelToken


@dataclass(frozen=True, eq=False)
class ModelSession:
    """See the module docstring. Made by `sources.open_session` (a model and its checkpoints, the
    CLI and the API) or `sources.open_sources` (dropped files, the app: indexed)."""

    model_path: Path | None = None
    model: onnx.ModelProto | None = None
    index: TensorIndex | None = None
    params: ParameterSet | None = None  # merged, and renamed onto the graph's names (`alignment`)
    param_paths: tuple[Path, ...] = ()
    match: ParamMatch | None = None
    alignment: NameAlignment | None = None  # set when the parameters' names were renamed onto the graph's
    others: tuple[tuple[Path, SourceKind], ...] = ()  # files opened with it that are not its sources
    ortmodule: OrtModuleFiles | None = None  # set when the model was picked among ORTModule-saved graphs

    @property
    def graph(self) -> onnx.ModelProto:
        """The model's graph (weights left on disk); a session without one has nothing to export."""
        if self.model is None:
            raise OnnxportError("no model is open")
        return self.model

    @cached_property
    def table(self) -> GraphTable:
        """The graph's nodes read once: the index's, or read here (`graph_table`)."""
        return self.index.table if self.index is not None else GraphTable.read(self.graph.graph)

    @cached_property
    def fit(self) -> CheckpointFit | None:
        """How the parameters fit the model (`params.checkpoint_fit`), None without both."""
        if self.model is None or self.params is None or self.match is None:
            return None
        unused = self.alignment.unused if self.alignment is not None else None
        return fit_checkpoint(self.model, self.params, self.match, unused)

    def unfilled(self, kept_inputs: list[str] | None = None) -> list[str]:
        """The parameter-like inputs among `kept_inputs` (default: all the graph's) nothing gives a value."""
        if self.model is None:
            return []
        graph = self.model.graph
        names = kept_inputs if kept_inputs is not None else [vi.name for vi in graph.input]
        return unfilled_inputs(names, self.params, {t.name for t in graph.initializer})

    @cached_property
    def selections(self) -> SelectionGraphs:
        """The per-selection plans and inference graphs (`export.selection_graph`), made once."""
        return SelectionGraphs(self.graph, self.model_path, self.params, self.table,
                               self.index.tensor_type if self.index is not None else None)

    def plan(self, outputs: list[str], cancel: CancelToken | None = None) -> PrunePlan:
        """The prune plan of `outputs` (what is kept and dropped)."""
        return self.selections.plan(outputs, cancel)

    def selection(self, outputs: list[str], cancel: CancelToken | None = None) -> SelectionGraph:
        """The inference graph the export of `outputs` writes, and its preview (weights left out)."""
        return self.selections.get(outputs, cancel)

    def summary(self, outputs: list[str], cancel: CancelToken | None = None) -> ExportPlan:
        """What the export of `outputs` keeps and drops, and its size (the app's "Export keeps"):
        counted on the selection's inference graph, or estimated from its plan on a huge one
        (`export.plan_export`)."""
        return plan_export(self.selections, self.index, outputs, cancel)

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

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import onnx
from onnx import numpy_helper

from onnxport.core.export.export import ExportPlan, plan_export
from onnxport.core.export.selection_graph import SelectionGraph, SelectionGraphs
from onnxport.core.graph.graph_table import GraphTable
from onnxport.core.graph.index import TensorIndex
from onnxport.core.graph.prune import PrunePlan
from onnxport.core.io.external_data import external_reference
from onnxport.core.io.kinds import SourceKind
from onnxport.core.io.ortmodule_files import OrtModuleFiles
from onnxport.core.io.parameter_set import FileSpan, ParameterSet
from onnxport.core.params.checkpoint_fit import CheckpointFit, fit_checkpoint, unfilled_inputs
from onnxport.core.params.match import ParamMatch
from onnxport.core.params.name_alignment import NameAlignment
from onnxport.core.params.tensor_stats import TensorValues
from onnxport.core.util.errors import OnnxportError, UnknownOutputError
from onnxport.core.util.progress import CancelToken
from onnxport.core.util.suggest import did_you_mean


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

    def plan(self, outputs: list[str], cancel: CancelToken | None = None, starts: Sequence[str] = ()) -> PrunePlan:
        """The prune plan of `outputs` cut at `starts` (what is kept and dropped): a selection is
        its outputs and the tensors it starts from (new inputs)."""
        return self.selections.plan(outputs, cancel, starts)

    def selection(self, outputs: list[str], cancel: CancelToken | None = None,
                  starts: Sequence[str] = ()) -> SelectionGraph:
        """The inference graph the export of `outputs` (cut at `starts`) writes, and its preview."""
        return self.selections.get(outputs, cancel, starts)

    def summary(self, outputs: list[str], cancel: CancelToken | None = None, starts: Sequence[str] = ()) -> ExportPlan:
        """What the export of `outputs` keeps and drops, and its size (the app's "Export keeps"):
        counted on the selection's inference graph, or estimated from its plan on a huge one
        (`export.plan_export`)."""
        return plan_export(self.selections, self.index, outputs, cancel, tuple(starts))

    def tensor_values(self, name: str) -> TensorValues:
        """Where the weight `name` has its values (`params.tensor_stats`): the checkpoint's entry
        (the trained value the export embeds), else the model's initializer; read from its file
        span where it has one. An unknown name is refused in one line with the closest names."""
        if self.params is not None and name in self.params:
            p = self.params[name]
            return TensorValues(name, p.elem_type, tuple(p.shape), span=p.span,
                                array=None if p.span is not None else p.array, source=f"checkpoint ({p.source})")
        for t in self.model.graph.initializer if self.model is not None else ():
            if t.name == name:
                return initializer_values(t, self.model_path.parent if self.model_path is not None else None)
        known = list(self.params or ()) + ([t.name for t in self.model.graph.initializer] if self.model else [])
        guess = did_you_mean(name, known)
        raise UnknownOutputError(f"no weight named '{name}'" + (f"; {guess}" if guess else ""),
                                 hint=None if guess else "run 'onnxport inspect MODEL' to list the parameters")


def initializer_values(t: onnx.TensorProto, folder: Path | None) -> TensorValues:
    """An initializer's values: its external data span (confined to `folder`), or the proto's own."""
    shape = tuple(int(d) for d in t.dims)
    if t.data_location == onnx.TensorProto.EXTERNAL:
        if folder is None:
            raise OnnxportError(f"tensor '{t.name}': its values are in external data and the model has no folder")
        ref = external_reference(t, folder)
        return TensorValues(t.name, t.data_type, shape, span=FileSpan(ref.path, ref.offset, ref.length),
                            source="initializer (external data)")
    return TensorValues(t.name, t.data_type, shape, array=lambda: numpy_helper.to_array(t), source="initializer")

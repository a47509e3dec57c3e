"""One inference graph per selection: what the plan summary, the preview and the export all read.

`SelectionGraphs(model, model_path, params, table, known_types)` is held once per opened model
(`workflow.session.ModelSession`); its inputs never change, so nothing it keeps goes stale.
A selection is its outputs and, optionally, `starts`: the tensors it is cut at (new inputs).
`plan(outputs, starts=)` is the selection's prune plan, planned on the graph's table (the one planner).
`get(outputs)` runs the export's own passes (`inference_graph.build_inference_graph`: prune, eval
mode, fold, output types) on a weight-free copy, once per selection (a small LRU; thread-safe: the
plan and the preview ask from side jobs), and returns a `SelectionGraph` that callers only read;
`for_export` gives the export its own copy (or builds one it may edit, when none is kept). Its `preview` is that graph with every
constant as a header (name, type, dims) and big Constant values stripped: the Preview draws
exactly the nodes Export writes, and carries no weights. Folding decodes only the small values
its budgets allow; bigger folded constants stay lazy (never computed for a preview).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import onnx

from onnxport.core.export.inference_graph import (
    InferenceGraph,
    KnownTypes,
    build_inference_graph,
    for_writing,
)
from onnxport.core.graph.const_tensors import ConstTensor
from onnxport.core.graph.graph_table import GraphTable, plan_prune_table
from onnxport.core.graph.prune import PrunePlan
from onnxport.core.graph.weightless import strip_nested
from onnxport.core.io.model_io import copy_model
from onnxport.core.io.parameter_set import ParameterSet
from onnxport.core.util.progress import CancelToken

TYPED_MAX_NODES = 2_000  # above this, outputs the index has no type for are not inferred (holds the GIL)
CACHED_SELECTIONS = 8  # selections kept per model (a user toggles between a few)


@dataclass
class SelectionGraph:
    """The inference graph of one selection (read-only for every caller) and its preview."""

    outputs: tuple[str, ...]
    built: InferenceGraph
    starts: tuple[str, ...] = ()  # the tensors it is cut at (graph inputs now)
    _preview: onnx.ModelProto | None = None
    focus: object | None = None  # the focused preview's `FocusGraph` of `preview`, made when first needed

    @property
    def preview(self) -> onnx.ModelProto:
        """The weight-free model the Preview draws (made once; callers do not modify it)."""
        if self._preview is None:
            self._preview = preview_of(self.built)
        return self._preview


def preview_of(built: InferenceGraph) -> onnx.ModelProto:
    """`built`'s skeleton with its constants as weight-free initializers (Netron draws them as
    weights of their nodes), Constant nodes over the preview's size and body weights stripped."""
    model = copy_model(built.skeleton)  # in slices: the GUI thread gets the GIL between them
    model.graph.initializer.extend(preview_weights(built))
    strip_nested(model.graph)
    return model


def preview_weights(built: InferenceGraph) -> list[onnx.TensorProto]:
    """The preview's initializers: a header (name, type, dims) of each constant `built` writes."""
    return [_header(c) for c in built.consts.values()]


def _header(const: ConstTensor) -> onnx.TensorProto:
    header = onnx.TensorProto(name=const.name, data_type=const.elem_type)
    if const.shape is not None:
        header.dims.extend(int(d) for d in const.shape)
    return header


class SelectionGraphs:
    """The inference graphs of one opened model's selections, built once each (see the module)."""

    def __init__(self, model: onnx.ModelProto, model_path: str | Path | None, params: ParameterSet | None,
                 table: GraphTable | None = None, known_types: KnownTypes | None = None,
                 size: int = CACHED_SELECTIONS) -> None:
        """`table`: `model`'s table when the caller read it (else read here on the first plan);
        `known_types`: the index's types (`TensorIndex.tensor_type`), taken instead of inferred."""
        self.model, self.params, self.known_types, self.size = model, params, known_types, size
        self.model_path = Path(model_path) if model_path is not None else None
        self._table = table
        self._names = frozenset(params) if params is not None else frozenset()
        self._cache: OrderedDict[tuple, SelectionGraph] = OrderedDict()  # by (outputs, starts)
        self._plans: OrderedDict[tuple, PrunePlan] = OrderedDict()
        self._lock = threading.RLock()  # `get` plans under it

    @property
    def table(self) -> GraphTable:
        """`model`'s nodes, read once (`graph_table`)."""
        if self._table is None:
            self._table = GraphTable.read(self.model.graph)
        return self._table

    def plan(self, outputs: list[str], cancel: CancelToken | None = None, starts: Sequence[str] = ()) -> PrunePlan:
        """The prune plan of `outputs` cut at `starts` (planned once per selection; bad names raise
        the one-line error)."""
        key = (tuple(outputs), tuple(starts))
        with self._lock:
            found = self._plans.get(key)
            if found is None:
                found = self._plans[key] = plan_prune_table(self.model, self.table, outputs, self._names, cancel,
                                                            starts)
                while len(self._plans) > self.size:
                    self._plans.popitem(last=False)
            return found

    def kept(self, outputs: list[str], starts: Sequence[str] = ()) -> SelectionGraph | None:
        """The selection's graph if it is built already (nothing built here)."""
        with self._lock:
            return self._cache.get((tuple(outputs), tuple(starts)))

    def for_export(self, outputs: list[str], fold: bool, check: Callable[[], None],
                   starts: Sequence[str] = ()) -> InferenceGraph:
        """The inference graph the export of `outputs` writes, its own to edit: a copy of the kept
        one (`get`), or built here and not kept (an export that does not fold, or nothing asked
        for this selection before: the CLI's export builds it once, while its weights copy)."""
        kept = self.kept(outputs, starts) if fold else None
        if kept is not None:
            return for_writing(kept.built, self.model, self.known_types)
        return build_inference_graph(self.model, self.model_path, outputs, self.params, fold=fold,
                                     plan=self.plan(outputs, None, starts), check=check, known_types=self.known_types)

    def get(self, outputs: list[str], cancel: CancelToken | None = None, starts: Sequence[str] = ()) -> SelectionGraph:
        """The inference graph an export of `outputs` cut at `starts` writes (built on the first request)."""
        key = (tuple(outputs), tuple(starts))
        with self._lock:  # a second asker waits for the first one's build, then reads it
            found = self._cache.get(key)
            if found is not None:
                self._cache.move_to_end(key)
                return found
            found = SelectionGraph(key[0], self._build(list(outputs), cancel, key[1]), key[1])
            self._cache[key] = found
            while len(self._cache) > self.size:
                self._cache.popitem(last=False)
            return found

    def _build(self, outputs: list[str], cancel: CancelToken | None, starts: Sequence[str]) -> InferenceGraph:
        plan = self.plan(outputs, cancel, starts)
        check: Callable[[], None] = cancel.check if cancel is not None else (lambda: None)
        return build_inference_graph(self.model, self.model_path, outputs, self.params, plan=plan, check=check,
                                     type_outputs=len(plan.node_indices) <= TYPED_MAX_NODES,
                                     known_types=self.known_types)

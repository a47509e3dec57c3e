"""One inference graph per selection: what the plan summary, the preview and the export all read.

`SelectionGraphs(model, model_path, params, index)` is held once per opened model (the app's
`LoadedSources.selection_graphs()`). `get(outputs)` runs the export's own passes
(`inference_graph.build_inference_graph`: prune, eval mode, fold, output types) on a weight-free
copy, once per selection (a small LRU; thread-safe: the plan and the preview ask from side jobs),
and returns a `SelectionGraph` that callers only read. Its `preview` is that graph with every
constant as a header (name, type, dims) and big Constant values stripped: the Preview draws
exactly the nodes Export writes, and carries no weights. Folding decodes only the small values
its budgets allow; bigger folded constants stay lazy (never computed for a preview).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import onnx

from onnxport.core.export.inference_graph import InferenceGraph, KnownTypes, build_inference_graph
from onnxport.core.graph.const_tensors import ConstTensor
from onnxport.core.graph.graph_table import plan_prune_on
from onnxport.core.graph.index import TensorIndex
from onnxport.core.graph.preview import strip_nested
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
    model.graph.initializer.extend(_header(c) for c in built.consts.values())
    strip_nested(model.graph)
    return model


def _header(const: ConstTensor) -> onnx.TensorProto:
    header = onnx.TensorProto(name=const.name, data_type=const.elem_type)
    if const.shape is not None:
        header.dims.extend(int(d) for d in const.shape)
    return header


class SelectionGraphs:
    """The inference graphs of one opened model's selections, built once each (see the module)."""

    def __init__(self, model: onnx.ModelProto, model_path: str | Path | None, params: ParameterSet | None,
                 index: TensorIndex | None = None, size: int = CACHED_SELECTIONS) -> None:
        self.model, self.params, self.index, self.size = model, params, index, size
        self.model_path = Path(model_path) if model_path is not None else None
        self._cache: OrderedDict[tuple[str, ...], SelectionGraph] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, outputs: list[str], cancel: CancelToken | None = None) -> SelectionGraph:
        """The inference graph an export of `outputs` writes (built on the first request)."""
        key = tuple(outputs)
        with self._lock:  # a second asker waits for the first one's build, then reads it
            found = self._cache.get(key)
            if found is not None:
                self._cache.move_to_end(key)
                return found
            found = SelectionGraph(key, self._build(list(outputs), cancel))
            self._cache[key] = found
            while len(self._cache) > self.size:
                self._cache.popitem(last=False)
            return found

    def _build(self, outputs: list[str], cancel: CancelToken | None) -> InferenceGraph:
        index = self.index
        names = set(self.params) if self.params else set()
        plan = plan_prune_on(self.model, index.table if index is not None else None, outputs, names, cancel)
        known: KnownTypes | None = index.tensor_type if index is not None else None
        check: Callable[[], None] = cancel.check if cancel is not None else (lambda: None)
        return build_inference_graph(self.model, self.model_path, outputs, self.params, plan=plan, check=check,
                                     type_outputs=len(plan.node_indices) <= TYPED_MAX_NODES, known_types=known)

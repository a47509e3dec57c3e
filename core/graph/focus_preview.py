"""What the preview job calls: the preview of a model, whole when Netron draws it quickly, else focused.

`preview_answer(path, outputs, ...)` gives a `PreviewAnswer`: the bytes to publish, what they show
(`focus.FocusedPreview`, None for a whole preview made exactly as `preview.preview_bytes` makes
it) and the `focus.FocusGraph` read, which the caller hands back with its next request on the
same model so the graph is not read again.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import onnx

from onnxport.core.graph.focus import FOCUS_BUDGET, FocusedPreview, FocusGraph, file_key
from onnxport.core.graph.graph_table import GraphTable
from onnxport.core.graph.preview import preview_bytes
from onnxport.core.io.model_io import load_graph
from onnxport.core.util.progress import CancelToken

WHOLE_UP_TO = 300  # a graph Netron draws at most this many nodes of is drawn whole, as it always was

@dataclass
class PreviewAnswer:
    """What the preview job hands back: the bytes to draw, what they show, the graph read."""

    data: bytes
    focused: FocusedPreview | None  # None: the whole preview, as `preview_bytes` makes it
    graph: FocusGraph | None  # kept by the caller for the next request on the same file


def preview_answer(path: str | Path, outputs: list[str] | None, parameter_names: Iterable[str] = (),
                   budget: int = FOCUS_BUDGET, seeds: list[str] | None = None, graph: FocusGraph | None = None,
                   cancel: CancelToken | None = None, whole_up_to: int = WHOLE_UP_TO,
                   source: tuple[onnx.ModelProto, GraphTable | None] | None = None) -> PreviewAnswer:
    """The preview of the model at `path` for `outputs` (None: the whole graph): whole, exactly as
    `preview.preview_bytes`, when Netron draws at most `whole_up_to` of its nodes; else focused
    (`FocusGraph.focus` with `budget` and `seeds`), reusing `graph` if it was read from this file.
    `source`: the model already read from `path` and its `GraphTable` (the app's open made them;
    only read here, never modified), so nothing is read again."""
    if graph is None or not (graph.model is source[0] if source is not None else graph.matches(path)):
        if source is not None:
            model, table = source
        else:
            key, table = file_key(path), None
            model = load_graph(path)
        if len(model.graph.node) <= whole_up_to or sum(n.op_type != "Constant" for n in model.graph.node) <= whole_up_to:
            return PreviewAnswer(preview_bytes(path, outputs, parameter_names, model=model), None, None)
        if cancel is not None:
            cancel.check()
        if source is not None:
            graph = FocusGraph(model, table, cancel)
        else:
            graph = FocusGraph.load(path, cancel, model=model)
            graph.source_key = key  # the file as it was before it was read
    focused = graph.focus(outputs, parameter_names, seeds, budget, cancel)
    return PreviewAnswer(focused.model.SerializeToString(), focused, graph)

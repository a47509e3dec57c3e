"""The Preview of a selection: the selection's inference graph, drawn whole or focused.

`selection_preview(graphs, outputs, ...)` reads the same `SelectionGraph` the plan and the
export read (`selection_graph`): whole when Netron draws at most `whole_up_to` of its nodes, else
focused (`focus.FocusGraph` on that graph: repeated blocks collapsed, cut at `budget` around
`seeds`). The `FocusGraph` is kept with the selection, so "Show more" and refocusing read nothing
again. Gives a `focus_preview.PreviewAnswer` as the whole-model preview does. `preview_answer`:
what the app's preview job calls, the selection's graph for a selection, the model's for the
"Original" view.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from onnxport.core.export.selection_graph import SelectionGraphs
from onnxport.core.graph.focus import FOCUS_BUDGET, FocusGraph
from onnxport.core.graph.focus_preview import WHOLE_UP_TO, PreviewAnswer
from onnxport.core.graph.focus_preview import preview_answer as whole_model_answer
from onnxport.core.util.progress import CancelToken


def selection_preview(graphs: SelectionGraphs, outputs: list[str], budget: int = FOCUS_BUDGET,
                      seeds: list[str] | None = None, cancel: CancelToken | None = None,
                      whole_up_to: int = WHOLE_UP_TO) -> PreviewAnswer:
    """The preview of the export of `outputs` (see the module docstring)."""
    selected = graphs.get(outputs, cancel)
    model = selected.preview
    nodes = model.graph.node
    if len(nodes) <= whole_up_to or sum(n.op_type != "Constant" for n in nodes) <= whole_up_to:
        return PreviewAnswer(model.SerializeToString(), None, None)
    if cancel is not None:
        cancel.check()
    graph = selected.focus
    if not isinstance(graph, FocusGraph):
        graph = selected.focus = FocusGraph(model, None, cancel)
    focused = graph.focus(list(selected.outputs), (), seeds, budget, cancel)
    return PreviewAnswer(focused.model.SerializeToString(), focused, graph)


def preview_answer(path: str | Path, outputs: list[str] | None, parameter_names: Iterable[str] = (),
                   budget: int = FOCUS_BUDGET, seeds: list[str] | None = None, graph: FocusGraph | None = None,
                   cancel: CancelToken | None = None, whole_up_to: int = WHOLE_UP_TO,
                   source: tuple | None = None) -> PreviewAnswer:
    """`focus_preview.preview_answer`, but a selection (`outputs` not None) with the opened
    model's `SelectionGraphs` as `source[2]` is drawn from the selection's inference graph."""
    if outputs is not None and source is not None and len(source) > 2 and source[2] is not None:
        return selection_preview(source[2], outputs, budget, seeds, cancel, whole_up_to)
    return whole_model_answer(path, outputs, parameter_names, budget, seeds, graph, cancel, whole_up_to,
                              None if source is None else (source[0], source[1]))

"""What the Preview draws of an opened model: a selection's export graph, or the whole graph.

- `draw_selection(graphs, outputs, ...)`: the selection's inference graph (`selection_graph`: the
  graph the export writes, folded, in inference form) without its weights;
- `draw_whole(model, table, ...)`: the model as it is (the "Original" view), without its weights;
- `kept_node_names(graphs, outputs)`: the nodes of the first that the second also draws (the
  Original view dims the rest).
Each is drawn whole when Netron draws at most `WHOLE_UP_TO` of its nodes, else focused
(`graph.focus`: repeated blocks collapsed, cut at `budget` around `seeds`; a selection on its
export graph itself, weights as headers, never copied whole). A `Drawing` is the
bytes to publish, what they show (None: whole) and the `FocusGraph` read, kept with the selection
(or handed back by the caller for the whole graph), so "Show more" and refocusing read nothing
again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import onnx

from onnxport.core.export.selection_graph import SelectionGraphs, preview_weights
from onnxport.core.graph.focus import FOCUS_BUDGET, FocusedPreview, FocusGraph
from onnxport.core.graph.graph_table import GraphTable
from onnxport.core.graph.weightless import weightless_copy
from onnxport.core.util.progress import CancelToken

WHOLE_UP_TO = 300  # a graph Netron draws at most this many nodes of is drawn whole


@dataclass
class Drawing:
    """What the preview job hands back: the bytes to draw, what they show, the graph read."""

    data: bytes
    focused: FocusedPreview | None  # None: the whole graph
    graph: FocusGraph | None  # the focused drawing's graph (None when drawn whole)
    kept: frozenset[str] | None = None  # the Original view: the nodes the export keeps (`kept_node_names`)


def drawn_whole(model: onnx.ModelProto, whole_up_to: int = WHOLE_UP_TO) -> bool:
    """Whether Netron draws `model` quickly enough to be drawn whole (a Constant is drawn inside its reader)."""
    nodes = model.graph.node
    return len(nodes) <= whole_up_to or sum(n.op_type != "Constant" for n in nodes) <= whole_up_to


def draw_selection(graphs: SelectionGraphs, outputs: list[str], budget: int = FOCUS_BUDGET,
                   seeds: list[str] | None = None, cancel: CancelToken | None = None,
                   whole_up_to: int = WHOLE_UP_TO, starts: Sequence[str] = ()) -> Drawing:
    """The export of `outputs` (cut at `starts`) without its weights (see the module docstring)."""
    selected = graphs.get(outputs, cancel, starts)
    if drawn_whole(selected.built.skeleton, whole_up_to):  # the preview's nodes
        return Drawing(selected.preview.SerializeToString(), None, None)
    if cancel is not None:
        cancel.check()
    graph = selected.focus
    if not isinstance(graph, FocusGraph):  # focused on the export's graph itself, its weights as headers
        graph = selected.focus = FocusGraph(selected.built.skeleton, None, cancel, preview_weights(selected.built))
    focused = graph.focus(list(selected.outputs), (), seeds, budget, cancel)
    return Drawing(focused.model.SerializeToString(), focused, graph)


def draw_whole(model: onnx.ModelProto, table: GraphTable | None = None, parameter_names: Iterable[str] = (),
               budget: int = FOCUS_BUDGET, seeds: list[str] | None = None, graph: FocusGraph | None = None,
               cancel: CancelToken | None = None, whole_up_to: int = WHOLE_UP_TO) -> Drawing:
    """`model` as it is, without its weights (see the module docstring); `table`: its `GraphTable`
    if read (never modified); `graph`: the `FocusGraph` an earlier drawing of `model` returned."""
    if graph is None or graph.model is not model:
        if drawn_whole(model, whole_up_to):
            return Drawing(weightless_copy(model).SerializeToString(), None, None)
        if cancel is not None:
            cancel.check()
        graph = FocusGraph(model, table, cancel)
    focused = graph.focus(None, parameter_names, seeds, budget, cancel)
    return Drawing(focused.model.SerializeToString(), focused, graph)


def kept_node_names(graphs: SelectionGraphs, outputs: list[str], whole_up_to: int = WHOLE_UP_TO,
                    cancel: CancelToken | None = None, starts: Sequence[str] = ()) -> frozenset[str] | None:
    """The names of the nodes the export of `outputs` keeps, for a model drawn whole (None for
    one drawn focused, or without outputs): the Original view marks the others as dropped."""
    if not outputs or not drawn_whole(graphs.model, whole_up_to):
        return None
    return frozenset(n.name for n in graphs.get(list(outputs), cancel, starts).preview.graph.node if n.name)

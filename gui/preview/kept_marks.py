"""The original view marks what the export keeps: dropped nodes dimmed, with a dashed border.

- `kept_node_names(path, outputs, parameter_names, source)`: the names of the nodes the export's
  preview draws for `outputs` (the selection's inference graph when `source[2]` holds the model's
  `SelectionGraphs`, else core/graph/preview.py), for a graph drawn whole (at most `WHOLE_UP_TO`
  nodes; None above it, or without outputs). Runs in the preview's side job.
- `MARK_JS % json.dumps(names)`: in the page, every named node of the drawing not in `names` gets
  the class `onnxport-dropped` (dimmed, dashed border), the others `onnxport-kept`; returns
  [kept, dropped] counts as JSON text. Unnamed nodes are left as drawn.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from onnxport.core.graph.focus_preview import WHOLE_UP_TO
from onnxport.core.graph.preview import preview_model
from onnxport.core.io.model_io import load_graph

MARK_JS = """(function (kept) {
  if (!document.getElementById('onnxport-kept-style')) {
    const style = document.createElement('style');
    style.id = 'onnxport-kept-style';
    style.textContent = 'g.graph-node.onnxport-dropped { opacity: 0.35; } ' +
      'g.graph-node.onnxport-dropped .node-border { stroke-dasharray: 4 3; }';
    document.head.appendChild(style);
  }
  const keep = new Set(kept);
  let k = 0; let d = 0;
  for (const g of document.querySelectorAll('#canvas g.graph-node')) {
    if (!g.id || !g.id.startsWith('node-name-')) { continue; }
    const dropped = !keep.has(g.id.substring('node-name-'.length));
    g.classList.toggle('onnxport-dropped', dropped);
    g.classList.toggle('onnxport-kept', !dropped);
    if (dropped) { d += 1; } else { k += 1; }
  }
  return JSON.stringify([k, d]);
})(%s)"""


def kept_node_names(path: str | Path, outputs: list[str] | None, parameter_names: Iterable[str] = (),
                    source=None) -> frozenset[str] | None:
    """See the module docstring."""
    if not outputs:
        return None
    model = source[0] if source is not None else load_graph(path)
    if sum(n.op_type != "Constant" for n in model.graph.node) > WHOLE_UP_TO:
        return None
    if source is not None and len(source) > 2 and source[2] is not None:  # the export's own graph, folded
        return frozenset(n.name for n in source[2].get(list(outputs)).preview.graph.node if n.name)
    return frozenset(n.name for n in preview_model(model, outputs, parameter_names).graph.node if n.name)

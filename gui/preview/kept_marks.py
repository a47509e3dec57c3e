"""The Original view marks what the export keeps: dropped nodes dimmed, with a dashed border.

`MARK_JS % json.dumps(names)`: in the page, every named node of the drawing not in `names` (the
nodes of the selection's export graph, `core.export.drawing.kept_node_names`) gets the class
`onnxport-dropped` (dimmed, dashed border), the others `onnxport-kept`; returns [kept, dropped]
counts as JSON text. Unnamed nodes are left as drawn.
"""

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

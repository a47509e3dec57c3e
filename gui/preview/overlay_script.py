"""The JavaScript that paints the error map on Netron's graph (run by gui/preview/error_overlay.py).

The page side of the overlay, shipped as Python (no package data). `INSTALL_JS` defines, once per page,
`window.__onnxport_overlay` with:
- `apply(payload)`: restore what the last call painted, then for each `payload.nodes[name]`
  (`fill`, `text`, `title`, `jump`) colour the header of Netron's node `g#node-name-<name>` (its
  `.node-item-type path`, inline style so it beats Netron's CSS, hover included), set its hover
  title, draw the border of the first jump thick, and show the legend (`div#onnxport-legend`, from
  `payload.legend`) in a strip below the graph area; while nodes are painted, Netron's category
  colours are neutral (`OVERLAY_CSS`); returns how many nodes it painted (0: the legend is hidden);
- `clear()`: the page as Netron drew it, but for categories it colours like an error (`PALETTE_CSS`);
- `take()`: the nodes clicked since the last call, as JSON text (TAKE_CLICKS_JS: a capture-phase
  listener, since Netron's handlers stop bubbling), for the Python side to poll.
Everything stays in the page: no request is made.
"""

from __future__ import annotations

import json

INSTALL_JS = r"""
(function () {
  if (window.__onnxport_overlay) { return; }
  const state = { painted: [], clicked: [] };
  const style = document.createElement('style');
  style.id = 'onnxport-overlay-style';
  style.textContent = OVERLAY_CSS;
  document.head.appendChild(style);
  const header = (g) => g.querySelector('.node-item-type') || g.querySelector('.node-item');
  const restore = () => {
    for (const entry of state.painted) {
      if (entry.path) { entry.path.style.removeProperty('fill'); }
      if (entry.text) { entry.text.style.removeProperty('fill'); }
      if (entry.border) { entry.border.style.removeProperty('stroke'); entry.border.style.removeProperty('stroke-width'); }
      if (entry.title) {
        if (entry.oldTitle === null) { entry.title.remove(); } else { entry.title.textContent = entry.oldTitle; }
      }
      entry.g.classList.remove('onnxport-painted');
      entry.g.removeAttribute('data-onnxport-fill');
    }
    state.painted = [];
  };
  const legend = (spec, count) => {
    let box = document.getElementById('onnxport-legend');
    document.body.classList.toggle('onnxport-overlay', Boolean(spec) && count > 0);
    if (!spec || count === 0) { if (box) { box.remove(); } return; }
    if (!box) {
      box = document.createElement('div');
      box.id = 'onnxport-legend';
      document.body.appendChild(box);
    }
    box.textContent = '';
    const scale = document.createElement('div');
    scale.style.cssText = 'flex:0 0 240px';
    box.appendChild(scale);
    const title = document.createElement('div');
    title.style.cssText = 'font-weight:bold;margin-bottom:2px';
    title.textContent = spec.title;
    scale.appendChild(title);
    const bar = document.createElement('div');
    bar.className = 'onnxport-legend-bar';
    bar.style.cssText = 'height:10px;border-radius:2px;background:linear-gradient(to right,' + spec.gradient.join(',') + ')';
    scale.appendChild(bar);
    const ticks = document.createElement('div');
    ticks.style.cssText = 'display:flex;justify-content:space-between;margin-top:1px';
    for (const label of spec.ticks) { const t = document.createElement('span'); t.textContent = label; ticks.appendChild(t); }
    scale.appendChild(ticks);
    const notes = document.createElement('div');
    notes.style.cssText = 'flex:1 1 auto;min-width:0;overflow:hidden';
    box.appendChild(notes);
    for (const line of spec.lines) {
      const l = document.createElement('div');
      l.style.cssText = 'white-space:nowrap;overflow:hidden;text-overflow:ellipsis';
      if (line.swatch) {
        const s = document.createElement('span');
        s.style.cssText = 'display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:-1px;background:' + line.swatch;
        l.appendChild(s);
      }
      const counted = line.text.replace('{count} nodes', count === 1 ? '1 node' : count + ' nodes');
      l.appendChild(document.createTextNode(counted.replace('{count}', String(count))));
      l.title = l.textContent;
      notes.appendChild(l);
    }
  };
  window.__onnxport_overlay = {
    apply(payload) {
      restore();
      let count = 0;
      for (const [name, spec] of Object.entries(payload.nodes || {})) {
        const g = document.getElementById('node-name-' + name);
        const item = g && header(g);
        if (!item) { continue; }
        const path = item.querySelector('path');
        const text = item.querySelector('text');
        let title = item.querySelector(':scope > title');
        const oldTitle = title ? title.textContent : null;
        if (!title) { title = document.createElementNS('http://www.w3.org/2000/svg', 'title'); item.appendChild(title); }
        title.textContent = spec.title;
        if (path) { path.style.setProperty('fill', spec.fill, 'important'); }
        if (text) { text.style.setProperty('fill', spec.text, 'important'); }
        const border = spec.jump ? g.querySelector(':scope > path.node-border') : null;
        if (border) { border.style.setProperty('stroke', spec.fill); border.style.setProperty('stroke-width', '3px'); }
        g.classList.add('onnxport-painted');
        g.setAttribute('data-onnxport-fill', spec.fill);
        state.painted.push({ g, path, text, title, oldTitle, border });
        count += 1;
      }
      legend(payload.legend, count);
      return count;
    },
    clear() { restore(); legend(null, 0); return 0; },
    take() { return state.clicked.splice(0); },
  };
  document.addEventListener('click', (event) => {
    const g = event.target && event.target.closest ? event.target.closest('g.graph-node') : null;
    if (g && g.id && g.id.startsWith('node-name-')) { state.clicked.push(g.id.substring('node-name-'.length)); }
  }, true);
})();
"""

LEGEND_PX = 52  # the strip below the graph the legend lives in
# Always: Netron's category colours that read as an error before anything was measured (Relu,
# Softmax dark red; QuantizeLinear and Attention dark orange) are calm ones, so warm colours on the
# graph are the error map's alone (hovered, Netron's own white).
CALM_CATEGORIES = {"activation": "rgb(52, 104, 112)", "quantization": "rgb(96, 96, 112)",
                   "attention": "rgb(104, 84, 140)"}
PALETTE_CSS = "".join(f"g.graph-node .node-item-type-{kind}:not(:hover) path {{ fill: {fill}; }}\n"
                      for kind, fill in CALM_CATEGORIES.items())
# While the map is on: every category colour goes neutral and Netron's red selection blue; the
# graph area ends above the legend's strip (no node under it).
OVERLAY_CSS = PALETTE_CSS + f"""
body.onnxport-overlay .target {{ height: calc(100% - {LEGEND_PX}px) !important; }}
body.onnxport-overlay .toolbar {{ bottom: {LEGEND_PX + 10}px !important; }}
body.onnxport-overlay g.graph-node [class*="node-item-type"] path {{ fill: #e4e4e4 !important; }}
body.onnxport-overlay g.graph-node [class*="node-item-type"] text {{ fill: #222 !important; }}
body.onnxport-overlay .select > .node.node-border {{ stroke: #1f6fd0 !important; }}
body.onnxport-overlay .select.edge-path {{ stroke: #1f6fd0 !important; }}
body.onnxport-overlay .select.node-argument > rect {{ stroke: #1f6fd0 !important; }}
#onnxport-legend {{ position: fixed; left: 0; right: 0; bottom: 0; height: {LEGEND_PX}px; box-sizing: border-box;
  z-index: 10; display: flex; gap: 16px; align-items: center; padding: 4px 10px; background: #fafafa;
  border-top: 1px solid #bbb; font: 11px sans-serif; color: #222; pointer-events: none; overflow: hidden; }}
"""

APPLY_JS = INSTALL_JS.replace("OVERLAY_CSS", json.dumps(OVERLAY_CSS).replace("%", "%%")) + "\nwindow.__onnxport_overlay.apply(%s);"
CLEAR_JS = INSTALL_JS.replace("OVERLAY_CSS", json.dumps(OVERLAY_CSS)) + "\nwindow.__onnxport_overlay.clear();"
# as JSON text: runJavaScript hands arrays and objects back as '' in some Qt versions
TAKE_CLICKS_JS = "JSON.stringify(window.__onnxport_overlay ? window.__onnxport_overlay.take() : [])"

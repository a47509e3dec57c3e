"""The JavaScript that paints the error map on Netron's graph (run by gui/preview/error_overlay.py).

Why a module of its own: the page side of the overlay, kept apart from the Python that drives it
(and shipped as Python, so no package-data rule is needed). `INSTALL_JS` defines, once per page,
`window.__onnxport_overlay` with:
- `apply(payload)`: restore what the last call painted, then for each `payload.nodes[name]`
  (`fill`, `text`, `title`, `jump`) colour the header of Netron's node `g#node-name-<name>` (its
  `.node-item-type path`, inline style so it beats Netron's CSS, hover included), set its hover
  title, draw the border of the first jump thick, and show the legend (`div#onnxport-legend`, from `payload.legend`); returns how many
  nodes of the drawn graph it painted (0: the legend is hidden);
- `clear()`: the page as Netron drew it;
- `take()`: the names of the nodes clicked since the last call (TAKE_CLICKS_JS: as JSON text) (one capture-phase listener on the
  document: Netron's own handlers stop the event from bubbling), for the Python side to poll.
Everything stays in the page: no request is made.
"""

from __future__ import annotations

INSTALL_JS = r"""
(function () {
  if (window.__onnxport_overlay) { return; }
  const state = { painted: [], clicked: [] };
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
    if (!spec || count === 0) { if (box) { box.remove(); } return; }
    if (!box) {
      box = document.createElement('div');
      box.id = 'onnxport-legend';
      box.style.cssText = 'position:fixed;right:12px;top:12px;z-index:10;background:rgba(255,255,255,0.94);' +
        'border:1px solid #bbb;border-radius:6px;padding:6px 8px;font:11px sans-serif;color:#222;' +
        'pointer-events:none;max-width:360px';
      document.body.appendChild(box);
    }
    box.textContent = '';
    const title = document.createElement('div');
    title.style.cssText = 'font-weight:bold;margin-bottom:4px';
    title.textContent = spec.title;
    box.appendChild(title);
    const bar = document.createElement('div');
    bar.className = 'onnxport-legend-bar';
    bar.style.cssText = 'height:10px;border-radius:2px;background:linear-gradient(to right,' + spec.gradient.join(',') + ')';
    box.appendChild(bar);
    const ticks = document.createElement('div');
    ticks.style.cssText = 'display:flex;justify-content:space-between;margin-top:2px';
    for (const label of spec.ticks) { const t = document.createElement('span'); t.textContent = label; ticks.appendChild(t); }
    box.appendChild(ticks);
    for (const line of spec.lines) {
      const l = document.createElement('div');
      l.style.cssText = 'margin-top:3px';
      if (line.swatch) {
        const s = document.createElement('span');
        s.style.cssText = 'display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:-1px;background:' + line.swatch;
        l.appendChild(s);
      }
      l.appendChild(document.createTextNode(line.text.replace('{count}', String(count))));
      box.appendChild(l);
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

APPLY_JS = INSTALL_JS + "\nwindow.__onnxport_overlay.apply(%s);"
CLEAR_JS = "window.__onnxport_overlay ? window.__onnxport_overlay.clear() : 0;"
# as JSON text: runJavaScript hands arrays and objects back as '' in some Qt versions
TAKE_CLICKS_JS = "JSON.stringify(window.__onnxport_overlay ? window.__onnxport_overlay.take() : [])"

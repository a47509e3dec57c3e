"""Find a node or tensor in the drawn graph, and open a drawing on the outputs the user chose.

- `GraphSearch(panel)`: a "Find node or tensor" box (`.box`) and its answer (`.found`, plain
  text) for the preview's bar. Enter selects every drawn node whose name, and every drawn tensor
  (edge) whose name, contains the text (case-insensitive; at most `MAX_HITS`) and scrolls to
  them; `searched(count)` says how many. A tensor of the model the drawing does not show is
  handed to `panel.focus_node` (a focused preview refocuses on it).
- `CENTRE_OUTPUTS_JS`: run after a drawing, scrolls Netron to the graph's outputs (a partial
  graph opened at its inputs, far from what was chosen); nothing moves when they are in view.
Everything runs in the page; no request is made.
"""

from __future__ import annotations

import json

from PySide6.QtCore import QObject, Signal

from ..widgets.plain_text import plain_label
from ..widgets.window_keys_edit import WindowKeysEdit

MAX_HITS = 50
CENTRE_OUTPUTS_JS = """(function () {
  const view = window.__view__; const target = view && view._target;
  if (!target || typeof target.scrollTo !== 'function') { return 0; }
  const outputs = Array.from(document.querySelectorAll('#canvas .graph-item-output'))
    .map((item) => item.closest('g.node') || item);
  if (outputs.length) { target.scrollTo(outputs); }
  return outputs.length;
})()"""
FIND_JS = """(function (query, limit) {
  const view = window.__view__; const target = view && view._target;
  if (!target || !target._table) { return JSON.stringify({count: 0, names: []}); }
  const values = []; const names = [];
  for (const [value, element] of target._table) {
    if (!element || typeof element.select !== 'function') { continue; }
    let name = null;  // a node: its element's id; a tensor (Netron's value: its edges): its name
    if (element.id && element.id.startsWith('node-name-')) { name = element.id.substring(10); }
    else if (!element.id && value && typeof value.name === 'string' && !value.initializer) { name = value.name; }
    if (name && name.toLowerCase().includes(query)) { values.push(value); names.push(name); }
    if (values.length >= limit) { break; }
  }
  if (values.length) { target.scrollTo(target.select(values)); }
  return JSON.stringify({count: values.length, names: names});
})(%s, %d)"""


class GraphSearch(QObject):
    searched = Signal(int)  # drawn nodes and tensors the last search selected

    def __init__(self, panel) -> None:
        super().__init__(panel)
        self.panel = panel
        self.box = WindowKeysEdit(placeholderText="Find node or tensor", clearButtonEnabled=True)  # Ctrl+E exports
        self.box.setMaximumWidth(220)
        self.box.setMinimumWidth(24)  # the bar's minimum stays the buttons': the docks keep their room
        self.box.setToolTip("Select every drawn node and tensor whose name contains this text (Enter)")
        self.found = plain_label()
        self.found.hide()  # until a search has an answer
        self.box.returnPressed.connect(self.find)

    def find(self) -> None:
        query = self.box.text().strip()
        view = self.panel.view
        if not query or view is None or self.panel.last_node_count <= 0:
            self._say("")
            return
        view.run(FIND_JS % (json.dumps(query.lower()), MAX_HITS), lambda answer: self._answered(query, answer))

    def _say(self, text: str) -> None:
        self.found.setText(text)
        self.found.setVisible(bool(text))

    def _answered(self, query: str, answer) -> None:
        try:
            count = int(json.loads(answer)["count"]) if isinstance(answer, str) and answer else 0
        except (ValueError, KeyError, TypeError):
            count = 0
        if count:
            self._say(f"{count}{'+' if count >= MAX_HITS else ''} found")
        elif self.panel._producer_of(query):  # a tensor of the model this drawing does not show
            self._say("not drawn: refocusing")
            self.panel.focus_node(query)
        else:
            self._say("not found")
        self.searched.emit(count)

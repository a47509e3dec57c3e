"""Screenshots of "Start here" and of a weight's numbers (issue 39).

Called by scripts/screenshots.py with its window (the bundled example open) and helpers: the Relu
node right-clicked in the graph (the "Start here" menu over it), the cut drawn at once (the export
starts at the Relu's output, the plan says so) and the next Gemm right-clicked there (its weights,
"Start from the model's inputs again"): the README's start-here.png. Then a weight selected in the
tree with its statistics and histogram in the Overview tab (weight.png).
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from PySide6.QtCore import QPoint
from PySide6.QtWidgets import QApplication, QMenu

ROOT = Path(__file__).resolve().parent.parent
CENTRE_JS = """(function (id) {
  const g = document.getElementById(id); if (!g) { return ''; }
  const r = g.getBoundingClientRect(); return JSON.stringify([r.x + r.width / 2, r.y + r.height / 2]);
})(%s)"""


def _drawn(preview) -> bool:
    """Netron shows the graph (not its splash): the page's own count of drawn nodes, asked again."""
    seen: list = []
    preview.view.node_count(seen.append)
    end = time.perf_counter() + 5
    while not seen and time.perf_counter() < end:
        QApplication.processEvents()
        time.sleep(0.02)
    return bool(seen) and seen[0] > 0


def _node_menu(preview, centre: str, until) -> QMenu:
    """The node at `centre` (JSON [x, y] in the page) right-clicked: its menu, once shown."""
    x, y = json.loads(centre)
    at = QPoint(int(x), int(y))
    preview.view.node_menu_at(at, preview.view.mapToGlobal(at))
    until(lambda: any(isinstance(w, QMenu) and w.isVisible() for w in QApplication.topLevelWidgets()))
    return next(w for w in QApplication.topLevelWidgets() if isinstance(w, QMenu) and w.isVisible())


def cut_shots(window, shot, until, out: Path) -> None:
    preview = window.preview
    if not hasattr(preview, "wait_rendered") or preview.view is None:
        return
    window.tabs.setCurrentWidget(window.overview)  # the plan says what the cut keeps
    until(lambda: preview.settled() and preview.last_node_count > 0)
    relu = next(name for name, op in zip(window.session.table.names, window.session.table.ops, strict=True)
                if op == "Relu")
    found: list = []
    preview.view.run(CENTRE_JS % json.dumps(f"node-name-{relu}"), found.append)
    until(lambda: found)
    menu = _node_menu(preview, found[0], until)
    shot("15-start-here-menu")
    start = next(a for a in menu.actions() if a.text().startswith("Start here at "))
    start.trigger()
    menu.close()
    until(lambda: "starts at (new inputs)" in window.plan_panel.text())
    preview.wait_rendered(30)
    until(lambda: preview.settled() and _drawn(preview))
    gemm = [name for name, op in zip(window.session.table.names, window.session.table.ops, strict=True) if op == "Gemm"]
    found.clear()
    preview.view.run(CENTRE_JS % json.dumps(f"node-name-{gemm[-1]}"), found.append)
    until(lambda: found)
    menu = _node_menu(preview, found[0], until)
    shot("16-start-here-cut")
    shutil.copyfile(out / "16-start-here-cut.png", ROOT / "docs" / "start-here.png")
    menu.close()
    window.cut.set_starts(())
    until(lambda: preview.settled() and preview.last_node_count > 2)  # the whole selection drawn again
    window.tree.setCurrentIndex(window.model.index_of("fc1.weight"))
    until(lambda: window.weight_panel.stats is not None)
    until(lambda: preview.settled() and preview.last_node_count > 2)
    until(lambda: preview.view is None or _drawn(preview))
    shot("17-weight-histogram")
    shutil.copyfile(out / "17-weight-histogram.png", ROOT / "docs" / "weight.png")

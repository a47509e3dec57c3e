"""The error map of the report painted on the Netron preview, and the report and the preview linked.

Why: the report says how much accuracy a quantization lost; the graph shows where. When the report
carries per-node errors (core/evaluate/tensor_errors.py), each drawn node adding a measurable error
gets its header coloured on a fixed log scale (green 0.0001 -> red 0.1 relative error added), a
hover title and a legend (overlay_script.py does the page side); nodes are matched by name.
`ErrorOverlay(preview, report_view)`:
- repaints after every drawing (`rendered`) and for every report shown (`reportChanged`), in
  event-loop turns of their own; `painted(n)` answers only for the newest report and drawing;
- a node picked in the report is focused in the preview; a double-click asks for the Preview tab
  (`previewWanted`);
- a node clicked in the page (polled every `POLL_MS` while a map is shown) is selected in the
  report's list and announced by `nodeClicked(name)`.
`payload(error_map)` is the pure part (colours, titles, legend); `colour_for(added)` is the scale.
"""

from __future__ import annotations

import json
import math

from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtGui import QColor

from onnxport.core.evaluate.report import accuracy_map

from .overlay_script import APPLY_JS, CLEAR_JS, TAKE_CLICKS_JS
from .provider_overlay import provider_payload

POLL_MS = 250
LOW, HIGH = -4.0, -1.0  # log10 of the added relative error at the two ends of the scale
STOPS = [(0.0, (46, 157, 79)), (0.33, (166, 194, 50)), (0.6, (240, 180, 41)), (0.8, (232, 112, 42)),
         (1.0, (200, 66, 59))]
NONFINITE = "#7b1fa2"


def colour_for(added: float | None, nonfinite: bool = False) -> str:
    """'#rrggbb' of the error a node adds: green at 0.0001 or less, red at 0.1 or more (log scale)."""
    if nonfinite or added is None or not math.isfinite(added):
        return NONFINITE
    t = (math.log10(max(added, 1e-12)) - LOW) / (HIGH - LOW)
    t = min(max(t, 0.0), 1.0)
    for (t0, c0), (t1, c1) in zip(STOPS, STOPS[1:]):
        if t <= t1:
            k = (t - t0) / (t1 - t0) if t1 > t0 else 0.0
            return "#" + "".join(f"{round(a + (b - a) * k):02x}" for a, b in zip(c0, c1))
    return "#" + "".join(f"{c:02x}" for c in STOPS[-1][1])


def text_colour(fill: str) -> str:
    c = QColor(fill)
    return "#000000" if 0.299 * c.red() + 0.587 * c.green() + 0.114 * c.blue() > 150 else "#ffffff"


def payload(error_map: dict | None) -> dict:
    """{"nodes": {name: {fill, text, title}}, "legend": {...}} for overlay_script's `apply`."""
    if not error_map or not error_map.get("nodes"):
        return {"nodes": {}, "legend": None}
    jump = (error_map.get("first_jump") or {}).get("node")
    nodes: dict[str, dict] = {}
    for e in error_map["nodes"]:
        fill = colour_for(e.get("added"), bool(e.get("nonfinite")))
        lines = [f"{e['node']} ({e['op_type']})",
                 "makes non-finite values the float model does not" if e.get("nonfinite")
                 else f"adds {e['added']:+.4f} relative error over its inputs",
                 f"output {e['tensor']}: relative error {_fmt(e.get('rel_error'), '.4f')}, "
                 f"cosine {_fmt(e.get('cosine'), '.6f')}"]
        fused = [g for g in e.get("group", []) if g != e["node"]]
        if fused:
            lines.append("fused by the quantizer with: " + ", ".join(fused))
        if e["node"] == jump:
            lines.append("the first node where the error jumps")
        nodes[e["node"]] = {"fill": fill, "text": text_colour(fill), "title": "\n".join(lines), "jump": e["node"] == jump}
        for g in fused:
            nodes.setdefault(g, {"fill": fill, "text": text_colour(fill),
                                 "title": f"{g}: fused into {e['node']} by the quantizer\n" + "\n".join(lines[1:3])})
    first = error_map.get("first_jump")
    legend_lines = [{"text": "{count} nodes coloured; uncoloured: no measurable error"}]
    legend_lines.append({"text": f"error jumps first at {first['tensor']} ({first['node']})"} if first
                        else {"text": f"no node adds {error_map.get('threshold', 0.01):g} or more"})
    if any(e.get("nonfinite") for e in error_map["nodes"]):
        legend_lines.append({"text": "non-finite values", "swatch": NONFINITE})
    legend = {"title": "Error each node adds (relative L2)",
              "gradient": [colour_for(10 ** (LOW + (HIGH - LOW) * k / 6)) for k in range(7)],
              "ticks": ["≤0.0001", "0.001", "0.01", "≥0.1"], "lines": legend_lines}
    return {"nodes": nodes, "legend": legend}


def _fmt(value, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


class ErrorOverlay(QObject):
    nodeClicked = Signal(str)  # noqa: N815 - a node clicked in the preview
    painted = Signal(int)  # nodes of the drawn graph painted by the last apply (0: none / cleared)
    previewWanted = Signal()  # noqa: N815 - a node double-clicked in the report's list

    def __init__(self, preview, report_view, parent: QObject | None = None) -> None:
        super().__init__(parent or report_view)
        self.preview, self.report_view = preview, report_view
        self.payload: dict = payload(None)
        self.last_painted = -1
        self._poll = QTimer(self, interval=POLL_MS, timeout=self._take_clicks)
        self._report: dict = {}
        self._build_timer = QTimer(self, singleShot=True, interval=0, timeout=self._build)
        self._apply_timer = QTimer(self, singleShot=True, interval=0, timeout=self.apply)
        self._applies = 0  # the newest apply's number: only its answer is reported
        if hasattr(preview, "rendered"):
            preview.rendered.connect(lambda _count: self.apply())
        report_view.reportChanged.connect(self.set_report)
        report_view.nodes.currentItemChanged.connect(lambda item, _old: self._list_picked(item))
        report_view.nodes.itemDoubleClicked.connect(lambda item: (self._list_picked(item), self.previewWanted.emit()))

    @property
    def view(self):
        return getattr(self.preview, "view", None)

    def set_report(self, report: dict | None) -> None:
        """Take the report shown; the map is built and painted in event-loop turns of their own
        (`_build`, then `apply`): for the 1B decoder's quantized early exit (480 nodes, a 146 KB
        payload) each is a few ms, and together with the report's widgets they froze the window for
        a frame or more at the export's end. The newest report of a quick succession wins."""
        self._report = report or {}
        self._build_timer.start()

    def _build(self) -> None:
        error_map = accuracy_map(self._report)  # else a run on providers: painted by provider
        self.payload = payload(error_map) if error_map else provider_payload(self._report)
        self._mark_list()
        self._apply_timer.start()

    def apply(self) -> None:
        """Paint the current map on the drawn graph (or clear it); `painted` says how many nodes."""
        view = self.view
        if view is None or getattr(self.preview, "last_node_count", 0) <= 0:
            return
        self._applies += 1
        number = self._applies
        if self.payload["nodes"]:
            view.run(APPLY_JS % json.dumps(self.payload), lambda count: self._applied(number, count))
            self._poll.start()
        else:
            self._poll.stop()
            view.run(CLEAR_JS, lambda count: self._applied(number, count))

    def focus(self, node: str) -> None:
        if self.view is not None and getattr(self.preview, "last_node_count", 0) > 0:
            self.view.focus(node)

    def stop(self) -> None:
        self._poll.stop()

    def _applied(self, number: int, count) -> None:
        """The page's answer to an apply; an older apply's, or one that came while a newer report
        was still on its way to the page, is not what the page will show: not reported."""
        if number != self._applies or self._build_timer.isActive() or self._apply_timer.isActive():
            return
        self.last_painted = int(count or 0)
        self.painted.emit(self.last_painted)

    def _mark_list(self) -> None:
        """The report's list items get the colour their node has on the graph."""
        nodes = self.report_view.nodes
        for i in range(nodes.count()):
            item = nodes.item(i)
            spec = self.payload["nodes"].get(item.data(Qt.ItemDataRole.UserRole))
            item.setData(Qt.ItemDataRole.DecorationRole, QColor(spec["fill"]) if spec else None)

    def _list_picked(self, item) -> None:
        if item is not None:
            self.focus(item.data(Qt.ItemDataRole.UserRole))

    def _take_clicks(self) -> None:
        view = self.view
        if view is None or not self.payload["nodes"]:
            self._poll.stop()
            return
        view.run(TAKE_CLICKS_JS, self._clicked)

    def _clicked(self, names) -> None:
        try:
            names = json.loads(names) if isinstance(names, str) and names else []
        except ValueError:
            names = []
        for name in names:
            self._select_in_list(str(name))
            self.nodeClicked.emit(str(name))

    def _select_in_list(self, name: str) -> None:
        nodes = self.report_view.nodes
        for i in range(nodes.count()):
            if nodes.item(i).data(Qt.ItemDataRole.UserRole) == name:
                nodes.blockSignals(True)  # selected from the graph: no focus back to it
                nodes.setCurrentRow(i)
                nodes.blockSignals(False)
                return

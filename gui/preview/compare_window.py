"""The compare view: two models (or two checkpoints) side by side, in a window of its own.

`CompareWindow(a, b, checkpoints_a, checkpoints_b)` runs the comparison in the background
(gui/jobs/compare_call.py: a child process, cancellable from the window's Cancel) and shows:
- for two models, the graph of B or A (buttons) drawn by Netron on its own loopback server,
  painted by overlay_script with compare_paint's payload: numeric divergence on the error
  overlay's scale, added/removed/changed nodes in colours of their own, the first divergence
  with a thick border and centred; below, a sortable table of every difference, where a click
  shows its node (switching graphs when the node lives in the other one);
- for two parameter files, a sortable table of parameters by change.
`open_compare(parent, session, paths)` is the File menu's and the Shift-drop's way in.
Signals: `shown(dict)` once a report is on screen, `painted(int)` after each paint (nodes
painted), `failed(str)`. Nothing here blocks the GUI thread: the page is polled with timers.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from PySide6.QtCore import Qt, QTimer, QUrl, Signal
from PySide6.QtWidgets import (
    QButtonGroup,
    QHBoxLayout,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from onnxport.core.util.errors import OnnxportError

from ..dialogs.error_dialog import error_text, show_error
from ..jobs.compare_call import compare_job
from ..jobs.runner import JobRunner
from ..widgets.elided_label import ElidedLabel
from .compare_paint import difference_rows, graph_payload, parameter_rows
from .netron_server import PreviewServer
from .overlay_script import APPLY_JS

POLL_MS = 50
DRAW_TIMEOUT_S = 60
DIFF_COLUMNS = ["kind", "name", "op", "detail", "rel L2"]
PARAM_COLUMNS = ["status", "name", "shape", "dtype", "max abs", "rel L2", "cosine"]


class NumberItem(QTableWidgetItem):
    """A cell holding a figure (or nothing): sorts as a number, blanks last."""

    def __init__(self, value: float | None) -> None:
        super().__init__("" if value is None else f"{value:.4g}")
        self.value = value
        self.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)

    def __lt__(self, other) -> bool:
        mine = self.value if self.value is not None else float("-inf")
        theirs = getattr(other, "value", None)
        return mine < (theirs if theirs is not None else float("-inf"))


class CompareWindow(QWidget):
    shown = Signal(dict)
    painted = Signal(int)
    failed = Signal(str)

    def __init__(self, a: Path, b: Path, checkpoints_a=(), checkpoints_b=(), parent=None) -> None:
        super().__init__(parent, Qt.WindowType.Window)
        self.a, self.b = Path(a), Path(b)
        self.checkpoints_a, self.checkpoints_b = list(checkpoints_a), list(checkpoints_b)
        self.setWindowTitle(f"Compare {self.a.name} with {self.b.name}")
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.report: dict | None = None
        self.graphs: dict[str, bytes] = {}
        self.side = "b"
        self.last_painted = -1
        self._pending_focus: str | None = None
        self._poll_started = 0.0
        self.runner = JobRunner(self)
        self.server = PreviewServer()
        self._poll = QTimer(self, interval=POLL_MS, timeout=self._check_drawn)
        self._build()
        self.runner.progress.connect(lambda _f, message: self.status.setText(message))
        self.runner.failed.connect(lambda _name, exc, _details: self._failed(error_text(exc)))
        self.runner.ended.connect(self._ended)

    def _build(self) -> None:
        self.status = ElidedLabel(f"comparing {self.a.name} with {self.b.name}…")
        self.cancel_button = QPushButton("Cancel", clicked=self.cancel)
        self.show_b = QPushButton("Graph B", checkable=True, checked=True, visible=False)
        self.show_a = QPushButton("Graph A", checkable=True, visible=False)
        group = QButtonGroup(self)
        for button, side in ((self.show_b, "b"), (self.show_a, "a")):
            group.addButton(button)
            button.toggled.connect(lambda on, s=side: on and self.show_side(s))
        bar = QHBoxLayout()
        bar.addWidget(self.status, 1)
        for w in (self.show_b, self.show_a, self.cancel_button):
            bar.addWidget(w)
        self.table = QTableWidget(0, len(DIFF_COLUMNS))
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
        self.table.verticalHeader().setVisible(False)
        self.table.cellClicked.connect(lambda row, _col: self.show_row(row))
        self.splitter = QSplitter(Qt.Orientation.Vertical)
        self.view = None
        try:
            from .netron_view import NetronView

            self.view = NetronView(self.server.origin, self)
            self.view.loadFinished.connect(self._loaded)
            self.view.hide()
            self.splitter.addWidget(self.view)
        except Exception:  # noqa: BLE001 - no WebEngine: the table still lists every difference
            self.view = None
        self.splitter.addWidget(self.table)
        layout = QVBoxLayout(self)
        layout.addLayout(bar)
        layout.addWidget(self.splitter, 1)
        self.resize(1200, 850)

    # --- the job -------------------------------------------------------------------------------
    def start(self) -> None:
        job = compare_job(self.a, self.b, self.checkpoints_a, self.checkpoints_b)
        self.runner.run("compare", job, self._show)

    def cancel(self) -> None:
        self.runner.cancel()

    @property
    def busy(self) -> bool:
        return self.runner.busy

    def _ended(self, _name: str, how: str) -> None:
        self.cancel_button.setEnabled(False)
        if how == "cancelled":
            self.status.setText("comparison cancelled")

    def _failed(self, text: str) -> None:
        self.status.setText(f"cannot compare: {text}")
        self.failed.emit(text)

    def _show(self, answer: dict) -> None:
        self.report, self.graphs = answer["report"], answer.get("graphs") or {}
        if "parameters" in self.report:
            self._fill(PARAM_COLUMNS, parameter_rows(self.report), numbers=(4, 5, 6))
            counts = {}
            for p in self.report["parameters"]:
                counts[p["status"]] = counts.get(p["status"], 0) + 1
            self.status.setText("parameters: " + ", ".join(f"{n} {k}" for k, n in counts.items()))
        else:
            rows = difference_rows(self.report)
            self._fill(DIFF_COLUMNS, [r[:5] for r in rows], numbers=(4,), targets=[r[5:] for r in rows])
            self.status.setText(_summary(self.report))
            if self.view is not None and self.graphs:
                self.show_a.setVisible(True)
                self.show_b.setVisible(True)
                self.view.show()
                self.splitter.setSizes([600, 250])
                first = (self.report.get("numeric") or {}).get("first_divergence") or {}
                self._pending_focus = first.get("node_b") or first.get("node")
                self.show_side("b")
        self.shown.emit(self.report)

    def _fill(self, columns: list[str], rows: list[tuple], numbers: tuple[int, ...], targets=None) -> None:
        table = self.table
        table.setSortingEnabled(False)
        table.clear()
        table.setColumnCount(len(columns))
        table.setHorizontalHeaderLabels(columns)
        table.setRowCount(len(rows))
        for r, row in enumerate(rows):
            for c, value in enumerate(row):
                item = NumberItem(value) if c in numbers else QTableWidgetItem("" if value is None else str(value))
                if c == 0 and targets is not None:
                    item.setData(Qt.ItemDataRole.UserRole, targets[r])
                table.setItem(r, c, item)
        table.horizontalHeader().setSortIndicator(-1, Qt.SortOrder.AscendingOrder)  # the core's order first
        table.setSortingEnabled(True)
        table.resizeColumnsToContents()
        table.horizontalHeader().setStretchLastSection(True)

    # --- the graph -----------------------------------------------------------------------------
    def show_side(self, side: str) -> None:
        """Draw graph `side` ("a" or "b") and paint it once Netron has drawn it."""
        if self.view is None or side not in self.graphs:
            return
        self.side = side
        (self.show_b if side == "b" else self.show_a).setChecked(True)
        self.last_painted = -1
        name = f"{'B' if side == 'b' else 'A'} {(self.b if side == 'b' else self.a).name}"
        url = self.server.publish(self.graphs[side], name)
        self._poll.stop()  # the page being replaced is not counted: polling starts once this one loaded
        self._poll_started = time.perf_counter()
        self.view.load(QUrl(url))

    def _loaded(self, _ok: bool) -> None:
        self._poll_started = time.perf_counter()
        self._poll.start()

    def _check_drawn(self) -> None:
        if time.perf_counter() - self._poll_started > DRAW_TIMEOUT_S:
            self._poll.stop()
            self._failed("Netron did not draw the graph")
            return
        self.view.node_count(self._counted)

    def _counted(self, count: int) -> None:
        if count <= 0 or not self._poll.isActive():
            return
        self._poll.stop()
        payload = graph_payload(self.report, self.side)
        self.view.run(APPLY_JS % json.dumps(payload), self._applied)

    def _applied(self, count) -> None:
        self.last_painted = int(count or 0)
        if self._pending_focus:
            self.view.focus(self._pending_focus)
            self._pending_focus = None
        self.painted.emit(self.last_painted)

    def show_row(self, row: int) -> None:
        """Show the node of the table's row `row` (in the graph that has it)."""
        item = self.table.item(row, 0)
        target = item.data(Qt.ItemDataRole.UserRole) if item is not None else None
        if not target or not target[0] or self.view is None:
            return
        node, side = target
        if side == "a" and self.side == "b" and node in _b_names(self.report, node):
            side = "b"
            node = _b_names(self.report, node)[node]
        if side != self.side:
            self._pending_focus = node
            self.show_side(side)
        else:
            self.view.focus(node)

    def closeEvent(self, event) -> None:  # noqa: N802 - Qt override
        self._poll.stop()
        self.runner.cancel()
        self.server.stop()
        super().closeEvent(event)


def open_compare(parent: QWidget, session, paths) -> CompareWindow | None:
    """A compare window, started: the open session's model (with its checkpoints) or checkpoint
    against `paths[0]`, or two files when nothing is open (else an error dialog, None)."""
    paths = [Path(p) for p in paths]
    s = session
    if s is not None and (s.model_path or s.param_paths) and len(paths) == 1:
        a, ckpts = (s.model_path, list(s.param_paths)) if s.model_path else (s.param_paths[0], [])
        b = paths[0]
    elif len(paths) == 2:
        (a, b), ckpts = paths, []
    else:
        show_error(parent, "Compare", OnnxportError("open a model first, or pick two files to compare"))
        return None
    win = CompareWindow(a, b, ckpts, parent=parent)  # a window of its own, closed with its parent
    win.show()
    win.start()
    return win


def _b_names(report: dict, node: str) -> dict[str, str]:
    """A's node name -> B's, for the matched nodes the report names (numbers and changes)."""
    found = {n["node"]: n.get("node_b") or n["node"] for n in (report.get("numeric") or {}).get("nodes", [])}
    found.update({c["name"]: c.get("name_b", c["name"]) for c in (report.get("structure") or {}).get("nodes_changed", [])})
    return found


def _summary(report: dict) -> str:
    s = report["structure"]
    numeric = report.get("numeric") or {}
    first = numeric.get("first_divergence")
    parts = [f"{s['nodes']['matched']} of {s['nodes']['a']}/{s['nodes']['b']} nodes matched",
             f"{len(s['nodes_added'])} added", f"{len(s['nodes_removed'])} removed",
             f"{len(s['nodes_changed'])} changed", f"{len(s['initializers_changed'])} weights changed"]
    if numeric:
        parts.append(f"first divergence: {first['node']} ({first['op']})" if first else "no divergence")
    return "; ".join(parts)

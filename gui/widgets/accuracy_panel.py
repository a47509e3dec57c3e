"""The report's "where and what changed" part: the first tensor where the error jumps, the figures of
a node picked on the graph, and the before/after table of the two models.

Why a widget of its own: report_view.py shows the verdict and the numbers; this adds the error
map's summary (evaluate/tensor_errors.py, `report.accuracy_map`) and the diff (the report's `diff`).

- `AccuracyPanel.set_report(report)`: shows what the report has (each part hides when absent);
  `show_node(name)`: the figures of one node (a click on the preview, gui/preview/error_overlay.py).
- `DiffTable` (a QTableWidget): one row per diff row, columns section, name, before, after, change;
  `rows()` gives the texts shown (tests, screenshots). A name shows whole up to `NAME_CHARS`
  characters (the table asks for that much room: the window widens the panel to fit it, else the
  tab scrolls sideways); a longer tensor name elides in the middle. An accuracy change is red
  only for an output that failed its check (a cosine of 0.999999 is not a loss to flag); latency
  is coloured by the benchmark's paired verdict, not by two p50s.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QColor, QFont
from PySide6.QtWidgets import (
    QAbstractItemView,
    QAbstractScrollArea,
    QHeaderView,
    QSizePolicy,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from onnxport.core.evaluate.model_diff import DiffRow, accuracy_delta
from onnxport.core.evaluate.report import accuracy_map

from .layout_pass import one_layout_pass
from .plain_text import make_plain, plain_tip
from .wrapped_label import WrappedLabel

GOOD = QColor("#3a9a4a")
BAD = QColor("#c8423b")
SMALLER_IS_BETTER = {"size", "latency"}  # per-dtype bytes move between dtypes: no colour
NAME_CHARS = 24  # shown whole before a name elides ("DynamicQuantizeLinear", "file (with external data)")
CELL_PAD = 12  # a cell's margins around its text
PER_P50 = "p50"  # no paired benchmark verdict: the latency row is coloured by its two p50s


class DiffTable(QTableWidget):
    """The before/after table of a report's `diff`. It is as tall as its rows (the Report tab
    scrolls as one page, gui/widgets/tabs.py); it scrolls sideways on its own when narrow."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(0, 5, parent)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.verticalHeader().setVisible(False)
        self.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 6)
        self.setAlternatingRowColors(True)
        self.setTextElideMode(Qt.TextElideMode.ElideMiddle)  # a long tensor name (its tooltip has it whole)
        self._size_columns()
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setSizeAdjustPolicy(QAbstractScrollArea.SizeAdjustPolicy.AdjustToContents)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def set_diff(self, diff: dict | None, failed: frozenset[str] | set[str] = frozenset(),
                 speed: str | None = PER_P50) -> None:
        """Fill the table; `failed`: the accuracy rows (`<output> (cosine)`) of outputs that failed
        their check; `speed`: the benchmark's paired verdict ("faster", "slower", None: no
        measurable difference), which colours the latency row (PER_P50: the two p50s). The columns are sized to their contents once, after the fill: with the
        header sizing them as it goes, cells set in a shown table measured their whole column
        again and again (a quantize report shown over one: most of its GUI CPU measuring text)."""
        self.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        try:
            self._fill(diff, failed, speed)
        finally:
            self._size_columns()
        metrics = self.fontMetrics()
        longest = max((metrics.horizontalAdvance(r[1]) for r in self.rows()), default=0)
        self._name_width = min(longest, metrics.horizontalAdvance("x" * NAME_CHARS)) + CELL_PAD
        self.updateGeometry()

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt override
        """Room for the figures and each name up to NAME_CHARS characters (see the module docstring)."""
        hint = super().minimumSizeHint()
        figures = sum(self.columnWidth(c) for c in (0, 2, 3, 4)) if self.rowCount() else 0
        return QSize(max(hint.width(), figures + getattr(self, "_name_width", 0) + 2 * self.frameWidth()),
                     hint.height())

    def _size_columns(self) -> None:
        """The figures fit their text; the name column takes the room left (elided in the middle
        when narrow), so the figures stay in sight without scrolling sideways."""
        header = self.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)

    def _fill(self, diff: dict | None, failed, speed) -> None:
        rows = [DiffRow(**r) for r in (diff or {}).get("rows", [])]
        self.setHorizontalHeaderLabels(["", "", "before", "after", "change"])
        for column, key in ((2, "before"), (3, "after")):
            self.horizontalHeaderItem(column).setToolTip(plain_tip((diff or {}).get(key, "")))
        self.setRowCount(len(rows))
        bold = QFont(self.font())
        bold.setBold(True)
        previous = None
        for i, row in enumerate(rows):
            cells = (row.section if row.section != previous else "", row.name, *row.cells())
            previous = row.section
            for j, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if j == 0:
                    item.setFont(bold)
                if j == 1:
                    item.setToolTip(plain_tip(text))
                if j >= 2:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if j == 4:
                    colour = _change_colour(row, row.name in failed, speed)
                    if colour is not None:
                        item.setForeground(colour)
                self.setItem(i, j, item)

    def rows(self) -> list[list[str]]:
        return [[self.item(i, j).text() if self.item(i, j) else "" for j in range(self.columnCount())]
                for i in range(self.rowCount())]


def _change_colour(row: DiffRow, failed: bool, speed: str | None) -> QColor | None:
    if row.before is None or row.after is None or row.after == row.before:
        return None
    if row.section == "latency" and speed != PER_P50:  # p50s differ by noise; the paired verdict decides
        return GOOD if speed == "faster" else BAD if speed == "slower" else None
    if row.section in SMALLER_IS_BETTER:
        return GOOD if row.after < row.before else BAD
    if row.section == "accuracy":  # a loss within the output's check is expected: red only past it
        return BAD if failed and accuracy_delta(row) < 0 else None
    return None


def failed_rows(report: dict) -> frozenset[str]:
    """The diff's accuracy rows (`<output> (cosine)`) of the outputs whose check failed (none when
    the quantized model was only measured: no accuracy target, no check)."""
    q = report.get("quantize") or {}
    if q.get("validation") and q.get("target") is None:
        return frozenset()
    validation = q.get("validation") or report.get("validation") or {}
    return frozenset(f"{o['name']} (cosine)" for o in validation.get("outputs", []) if o.get("passed") is False)


class AccuracyPanel(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.jump = WrappedLabel()
        self.jump.setTextFormat(Qt.TextFormat.RichText)  # its names escaped (_jump_text)
        self.jump.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.node_info = make_plain(WrappedLabel())  # a node's and a tensor's names
        self.node_info.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.diff_label = make_plain(WrappedLabel("Before / after:"))  # two file names: long; wraps
        self.diff = DiffTable()
        self._map: dict = {}
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        for w in (self.jump, self.node_info, self.diff_label):
            layout.addWidget(w)
        layout.addWidget(self.diff)
        self.set_report(None)

    def set_report(self, report: dict | None) -> None:
        with one_layout_pass(self):  # laid out once, later (layout_pass.py)
            self._show(report or {})

    def _show(self, report: dict) -> None:
        self._map = accuracy_map(report) or {}
        self.jump.setText(_jump_text(self._map))
        self.jump.setVisible(bool(self._map))
        self.node_info.clear()
        self.node_info.hide()
        paired = (report.get("bench") or {}).get("paired")
        self.diff.set_diff(report.get("diff"), failed_rows(report), paired["difference"] if paired else PER_P50)
        diff = report.get("diff") or {}
        has_diff = bool(diff.get("rows"))
        if has_diff:
            self.diff_label.setText(f"Before / after: {Path(diff['before']).name} → {Path(diff['after']).name}")
        self.diff_label.setVisible(has_diff)
        self.diff.setVisible(has_diff)

    def show_node(self, name: str) -> None:
        """The figures of node `name` from the report's error map (picked on the graph)."""
        e = next((n for n in self._map.get("nodes", []) if n["node"] == name), None)
        if e is None:
            text = f"{name}: no measurable error of its own"
        elif e.get("nonfinite"):
            text = f"{name} ({e['op_type']}): makes non-finite values the float model does not"
        else:
            cos = "n/a" if e.get("cosine") is None else f"{e['cosine']:.6f}"
            rel = "n/a" if e.get("rel_error") is None else f"{e['rel_error']:.4f}"
            text = (f"{name} ({e['op_type']}): adds {e['added']:+.4f} relative error; its output "
                    f"{e['tensor']}: relative error {rel}, cosine {cos}")
        self.node_info.setText("Picked on the graph: " + text)
        self.node_info.show()


def _jump_text(error_map: dict) -> str:
    if not error_map:
        return ""
    first = error_map.get("first_jump")
    counted = f"{error_map.get('tensors_compared', 0)} tensors compared with the float model"
    if first is None:
        return f"{counted}; no node adds {error_map.get('threshold', 0.01):g} relative error or more."
    how = "turns non-finite" if first.get("nonfinite") else f"adds {first['added']:+.4f} relative error"
    return (f"{counted}; the error jumps first at <b>{_esc(first['tensor'])}</b>, made by "
            f"<b>{_esc(first['node'])}</b> ({_esc(first['op_type'])}), which {how}.")


def _esc(text: str) -> str:
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
